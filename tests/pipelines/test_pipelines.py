"""Compound-judge pipelines, driven by scripted adapters (replies are functions of the prompt)."""

from __future__ import annotations

import math
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_connect import BudgetTracker, ConfigError, JudgeReplyError, LLMResponse, RunConfig, TokenLogprob
from llm_connect.grading import GradingResult, PairedGrader, judge_many
from llm_connect.pipelines import (
    BooleanScale,
    CategoricalScale,
    ContinuousScale,
    JudgeUnit,
    Layer,
    LikertScale,
    MajorityPool,
    MaxPool,
    MeanPool,
    MedianPool,
    PairwiseUnit,
    Pipeline,
    PipelineResult,
    Trace,
    VerifyUnit,
    WeightedMeanPool,
    from_config,
)
from llm_connect.quality import QualityLedger
from llm_connect.testing import ScriptedAdapter

# The config of the issue, verbatim: 3 judges with explanations, each checked by a verifier, then a majority vote.
VERBATIM_YAML = """\
pipeline:
  - layer:
      unit:
        type: categorical-judge
        prompt: "Does this response contain factual errors? Response: {candidate}"
        categories: ["yes", "no"]
        explanation: true
      repeat: 3
  - layer:
      unit:
        type: verify
        prompt: "Check that the explanation correctly identifies factual errors. Explanation: {previous.explanation} Response: {candidate}"
  - type: max-pool
threshold: 0.7
"""  # noqa: E501 - the issue's config, verbatim (one long prompt line)

JUDGE_Q = "Does this response contain factual errors?"


def is_verify(prompt: str) -> bool:
    return "The verdict under review is:" in prompt


def fact_checker(verifier_agrees: bool = True, judge_says: str | None = None):
    """Judges answer from the response (Spain is wrong); verifiers agree or not."""

    def reply(prompt: str, rc: RunConfig) -> str:
        if is_verify(prompt):
            return "Explanation: checked.\nVerdict: " + ("yes" if verifier_agrees else "no")
        says = judge_says or ("yes" if "Spain" in prompt else "no")
        return f"Explanation: I compared the claims with what I know.\nVerdict: {says}"

    return reply


@pytest.fixture
def verbatim_path(tmp_path):
    path = tmp_path / "factual.yaml"
    path.write_text(VERBATIM_YAML, encoding="utf-8")
    return path


# -- the config, as written ----------------------------------------------------------------


def test_verbatim_config_runs_with_six_calls_and_a_sensible_score(verbatim_path):
    adapter = ScriptedAdapter(fact_checker())
    pipeline = from_config(verbatim_path, adapter=adapter)
    assert pipeline.nodes == ["judge[0]", "judge[1]", "judge[2]", "verify[0]", "verify[1]", "verify[2]", "majority[0]"]
    assert pipeline.llm_units == 6
    # each judge has its own verifier (broadcast), the pool reads the three verifiers
    assert ("judge[1]", "verify[1]") in pipeline.edges
    assert ("judge[0]", "verify[1]") not in pipeline.edges
    assert [s for s, t in pipeline.edges if t == "majority[0]"] == ["verify[0]", "verify[1]", "verify[2]"]

    good = pipeline.run({"candidate": "Paris is the capital of France."})
    assert len(adapter.calls) == 6
    assert good.calls == 6
    assert (good.verdict, good.quality_score, good.passed) == ("no", 1.0, True)  # "no factual errors" is quality 1.0

    bad = pipeline.run({"candidate": "Paris is the capital of Spain."})
    assert len(adapter.calls) == 12
    assert (bad.verdict, bad.quality_score, bad.passed) == ("yes", 0.0, False)
    # the verifier saw the judge's explanation and the verdict it checks
    verify_prompts = [c.prompt for c in adapter.calls if is_verify(c.prompt)]
    assert len(verify_prompts) == 6
    assert all("Explanation: I compared the claims" in p for p in verify_prompts)


def test_verifier_disagreeing_flips_a_binary_verdict(verbatim_path):
    # the judges wrongly see errors; every verifier says the verdict is wrong -> flipped to "no"
    adapter = ScriptedAdapter(fact_checker(verifier_agrees=False, judge_says="yes"))
    result = from_config(verbatim_path, adapter=adapter).run({"candidate": "Water boils at 100 C at sea level."})
    assert (result.verdict, result.quality_score, result.passed) == ("no", 1.0, True)
    verify_outputs = [o for n, o in result.outputs.items() if n.startswith("verify")]
    assert [o.agrees for o in verify_outputs] == [False, False, False]
    assert all(o.details["verdict_checked"] == "yes" for o in verify_outputs)


def test_python_api_builds_the_same_graph(verbatim_path):
    adapter = ScriptedAdapter(fact_checker())
    judge = JudgeUnit(JUDGE_Q + " Response: {candidate}", CategoricalScale(["yes", "no"]), explanation=True)
    verify = VerifyUnit("Check. Explanation: {previous.explanation} Response: {candidate}")
    paired = Pipeline(Layer(judge >> verify, repeat=3) >> MaxPool(), adapter=adapter, threshold=0.7)
    from_yaml = from_config(verbatim_path, adapter=adapter)
    assert sorted(paired.edges) == sorted(from_yaml.edges)
    # the shorthand: a bare verify after a 3-unit layer verifies each of them
    shorthand = Pipeline(Layer(judge, repeat=3) >> verify >> MajorityPool(), adapter=adapter)
    assert sorted(shorthand.edges) == sorted(from_yaml.edges)
    result = paired.run({"candidate": "Paris is the capital of France."})
    assert result.calls == 6 and result.passed


# -- scales ----------------------------------------------------------------------------------------


def test_categorical_default_values_are_ascending_and_explicit_values_win():
    scale = CategoricalScale(["bad", "ok", "good"])
    assert scale.values == {"bad": 0.0, "ok": 0.5, "good": 1.0}
    assert CategoricalScale(["yes", "no"]).values == {"yes": 0.0, "no": 1.0}
    explicit = CategoricalScale(["yes", "no"], values={"yes": 1.0, "no": 0.0})
    assert explicit.normalize("yes") == 1.0
    with pytest.raises(ConfigError, match="no value for the categories"):
        CategoricalScale(["a", "b"], values={"a": 1.0})
    with pytest.raises(ConfigError, match="not one of the categories"):
        CategoricalScale(["a", "b"], values={"a": 1.0, "b": 0.0, "c": 0.5})
    with pytest.raises(ConfigError, match="quote yes/no"):
        CategoricalScale([True, False])  # what unquoted yes/no become in YAML
    with pytest.raises(ConfigError, match=r"0\.0\.\.1\.0"):
        CategoricalScale(["a", "b"], values={"a": 2.0, "b": 0.0})


def test_scales_parse_strictly():
    cat = CategoricalScale(["yes", "no"])
    assert cat.parse("**Yes**.") == "yes"
    assert cat.parse(' "no" ') == "no"
    for bad in ("maybe", "yes, mostly", "y", ""):
        with pytest.raises(JudgeReplyError, match="not one of the labels offered"):
            cat.parse(bad)
    boolean = BooleanScale()
    assert boolean.parse("YES") is True and boolean.normalize(True) == 1.0 and boolean.label(False) == "no"
    likert = LikertScale(1, 5)
    assert likert.parse("4") == 4 and likert.normalize(4) == 0.75
    for bad in ("4.5", "4/5", "four", "6", "0"):
        with pytest.raises(JudgeReplyError):
            likert.parse(bad)
    cont = ContinuousScale()
    assert cont.parse("0.25") == 0.25
    for bad in ("1.2", "-0.1", "nan", "high"):
        with pytest.raises(JudgeReplyError):
            cont.parse(bad)
    assert likert.label_values() == {"1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0}
    assert cont.label_values() is None


@given(labels=st.lists(st.text(alphabet="abcdefgh xyz", min_size=1, max_size=8).filter(str.strip), min_size=2,
                       max_size=6, unique_by=lambda s: s.strip().casefold()))
def test_categorical_round_trips_every_label_and_values_stay_in_range(labels):
    scale = CategoricalScale(labels)
    for lab in scale.labels:
        assert scale.parse(f"**{lab.upper()}**") == lab
        assert 0.0 <= scale.normalize(lab) <= 1.0
    assert scale.normalize(scale.labels[0]) == 0.0 and scale.normalize(scale.labels[-1]) == 1.0


@given(x=st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_continuous_never_clamps(x):
    scale = ContinuousScale()
    text = repr(float(x))
    if 0.0 <= float(x) <= 1.0:
        assert scale.parse(text) == float(x)
    else:
        with pytest.raises(JudgeReplyError):
            scale.parse(text)


@given(reply=st.text(max_size=80) | st.sampled_from(["Verdict: 3", "**verdict**: 5\nCorrection: 2", "Verdict: no\n"
                                                     "Correction: 1", '{"verdict": 2}', "Explanation: x\nVerdict: 9"]))
@settings(max_examples=150, deadline=None)
def test_any_reply_gives_an_offered_value_or_a_judge_reply_error(reply):
    scale = LikertScale(1, 5)
    for pipeline in (
        Pipeline(JudgeUnit("{candidate}", scale, retries=0), adapter=ScriptedAdapter([reply])),
        Pipeline(JudgeUnit("{candidate}", scale, explanation=True) >> VerifyUnit(retries=0),
                 adapter=ScriptedAdapter(lambda p, rc: reply if is_verify(p) else "Explanation: e\nVerdict: 4")),
    ):
        try:
            result = pipeline.run({"candidate": "x"})
        except JudgeReplyError:
            continue
        assert result.value in range(1, 6) and result.quality_score == scale.normalize(result.value)


# -- reply formats, retries, failures --------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Verdict: 4",
        "**Verdict:** 4",
        "Some thoughts first.\nverdict = 4",
        '{"explanation": "fine", "verdict": 4}',
        "4",
    ],
)
def test_reply_formats_that_parse(reply):
    unit = JudgeUnit("Rate: {candidate}", LikertScale(1, 5), retries=0)
    result = Pipeline(unit, adapter=ScriptedAdapter([reply])).run({"candidate": "x"})
    assert result.value == 4 and result.quality_score == 0.75


def test_explanation_is_asked_before_the_verdict_and_kept():
    adapter = ScriptedAdapter(["Explanation: it cites the wrong year.\nVerdict: 2"])
    unit = JudgeUnit("Rate: {candidate}", LikertScale(1, 5), explanation=True)
    result = Pipeline(unit, adapter=adapter).run({"candidate": "x"})
    prompt = adapter.calls[0].prompt
    assert prompt.index("Explanation: <") < prompt.index("Verdict: <")
    assert result.outputs["judge[0]"].explanation == "it cites the wrong year."


def test_unparseable_reply_is_retried_with_a_note_then_succeeds():
    adapter = ScriptedAdapter(["Verdict: maybe", "Verdict: yes"])
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), retries=2)
    result = Pipeline(unit, adapter=adapter).run({"candidate": "x"})
    assert result.verdict == "yes" and result.calls == 2
    assert "could not be used" in adapter.calls[1].prompt and adapter.calls[1].prompt != adapter.calls[0].prompt
    statuses = [(r.status, r.attempt) for r in result.trace]
    assert statuses == [("unparsed", 0), ("ok", 1)]


def test_no_usable_reply_after_retries_is_unscored_with_the_reason():
    adapter = ScriptedAdapter(lambda p, rc: "I think it is fine.")
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), retries=1)
    pipeline = Pipeline(unit, adapter=adapter)
    with pytest.raises(JudgeReplyError, match="no usable reply after 2 attempt") as info:
        pipeline.run({"candidate": "x"})
    assert len(adapter.calls) == 2
    assert isinstance(info.value.trace, Trace) and info.value.trace.calls == 2
    frame = pipeline.run_many([{"candidate": "x"}], progress=False)
    assert frame.loc[0, "status"] == "unscored" and math.isnan(frame.loc[0, "quality_score"])
    assert "no 'Verdict:' line" in frame.loc[0, "error"]
    assert frame.loc[0, "calls"] == 2


def test_a_failed_judge_skips_its_verifier_and_the_vote_uses_the_rest():
    def reply(prompt, rc):
        if is_verify(prompt):
            return "Verdict: yes"
        return "Verdict: no" if rc.model_params["seed"] != 2 else "no idea"

    adapter = ScriptedAdapter(reply)
    judge = JudgeUnit("Errors? {candidate}", CategoricalScale(["yes", "no"]), seed=0, retries=1)
    verify = VerifyUnit("Check the verdict for: {candidate}")
    result = Pipeline(Layer(judge >> verify, repeat=3) >> MajorityPool(), adapter=adapter).run({"candidate": "x"})
    # judges 0 and 1: one call each; judge 2: 2 attempts; verify 2: skipped (no call)
    assert len(adapter.calls) == 3 + 1 + 2
    assert result.outputs["verify[2]"].ok is False and "no verdict" in result.outputs["verify[2]"].error
    assert result.outputs["majority[0]"].details["n_valid"] == 2
    assert result.verdict == "no"
    assert [r.status for r in result.trace if r.node == "verify[2]"] == ["skipped"]


def test_min_valid_makes_a_pool_fail():
    adapter = ScriptedAdapter(lambda p, rc: "Verdict: yes" if rc.model_params["seed"] == 0 else "??")
    judge = JudgeUnit("Ok? {candidate}", BooleanScale(), seed=0, retries=0)
    pipeline = Pipeline(Layer(judge, repeat=3) >> MajorityPool(min_valid=2), adapter=adapter)
    with pytest.raises(JudgeReplyError, match="only 1 of 3 inputs"):
        pipeline.run({"candidate": "x"})


def test_adapter_errors_fail_the_item_not_the_run():
    def reply(prompt, rc):
        if "BROKEN" in prompt:
            raise ConnectionError("endpoint down")
        return "Verdict: yes"

    pipeline = Pipeline(JudgeUnit("Ok? {candidate}", BooleanScale()), adapter=ScriptedAdapter(reply))
    frame = pipeline.run_many([{"candidate": "a"}, {"candidate": "BROKEN"}, {"candidate": "c"}], progress=False)
    assert list(frame["status"]) == ["scored", "error", "scored"]
    assert "endpoint down" in frame.loc[1, "error"]
    assert frame.loc[1, "trace"].records[0].status == "error"


# -- pools and ties --------------------------------------------------------------------------------


def seeded(replies):
    """A reply per replica seed (judge seed=0 -> replica r gets seed r)."""
    return ScriptedAdapter(lambda p, rc: replies[rc.model_params["seed"]])


@pytest.mark.parametrize(
    ("tie_break", "expected"), [("lowest", "yes"), ("highest", "no"), ("first", "no")]
)
def test_majority_tie_rules(tie_break, expected):
    # ["yes", "no"] on "errors?": yes = 0.0, no = 1.0; votes: no, yes -> a tie
    adapter = seeded(["Verdict: no", "Verdict: yes"])
    judge = JudgeUnit("Errors? {candidate}", CategoricalScale(["yes", "no"]), seed=0)
    result = Pipeline(Layer(judge, repeat=2) >> MajorityPool(tie_break=tie_break), adapter=adapter).run(
        {"candidate": "x"}
    )
    assert result.verdict == expected
    assert result.outputs["majority[0]"].details["tie"] is True


def test_majority_picks_the_most_votes():
    adapter = seeded(["Verdict: 5", "Verdict: 2", "Verdict: 5", "Verdict: 3", "Verdict: 2"])
    judge = JudgeUnit("Rate {candidate}", LikertScale(1, 5), seed=0)
    result = Pipeline(Layer(judge, repeat=5) >> MajorityPool(), adapter=adapter).run({"candidate": "x"})
    assert result.value == 2  # 2 and 5 tie at two votes; the lowest wins
    assert result.outputs["majority[0]"].details["votes"] == {"5": 2, "2": 2, "3": 1}


def test_mean_median_and_weighted_pools():
    replies = ["Verdict: 5", "Verdict: 1", "Verdict: 4"]
    judge = JudgeUnit("Rate {candidate}", LikertScale(1, 5), seed=0)
    item = {"candidate": "x"}
    mean = Pipeline(Layer(judge, repeat=3) >> MeanPool(), adapter=seeded(replies)).run(item)
    assert mean.quality_score == pytest.approx((1.0 + 0.0 + 0.75) / 3)
    median = Pipeline(Layer(judge, repeat=3) >> MedianPool(), adapter=seeded(replies)).run(item)
    assert median.quality_score == 0.75
    strict = JudgeUnit("Strictly rate {candidate}", LikertScale(1, 5), name="strict")
    lenient = JudgeUnit("Leniently rate {candidate}", LikertScale(1, 5), name="lenient")
    adapter = ScriptedAdapter(lambda p, rc: "Verdict: 1" if "Strictly" in p else "Verdict: 5")
    weighted = Pipeline(Layer([strict, lenient]) >> WeightedMeanPool({"strict": 3, "lenient": 1}), adapter=adapter)
    assert weighted.run(item).quality_score == pytest.approx(0.25)
    with pytest.raises(ConfigError, match="no weight for the input unit"):
        Pipeline(Layer([strict, lenient]) >> WeightedMeanPool({"strict": 1}), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="not inputs of this pool"):
        Pipeline(Layer([strict, lenient]) >> WeightedMeanPool({"strict": 1, "lenient": 1, "other": 1}),
                 adapter=adapter).validate()


def test_majority_refuses_mixed_or_continuous_scales():
    a = JudgeUnit("A {candidate}", BooleanScale(), name="a")
    b = JudgeUnit("B {candidate}", LikertScale(1, 5), name="b")
    c = JudgeUnit("C {candidate}", ContinuousScale(), name="c")
    adapter = ScriptedAdapter(["x"])
    with pytest.raises(ConfigError, match="all inputs on one scale"):
        Pipeline(Layer([a, b]) >> MajorityPool(), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="discrete verdicts"):
        Pipeline(Layer(c, repeat=3) >> MajorityPool(), adapter=adapter).validate()


# -- verify on a scale with more than two values ---------------------------------------------------


def test_verify_on_likert_needs_a_correction():
    def reply(prompt, rc):
        if not is_verify(prompt):
            return "Explanation: solid.\nVerdict: 5"
        if "could not be used" not in prompt:
            return "Verdict: no"  # no correction: a failed attempt
        return "Verdict: no\nCorrection: 3"

    adapter = ScriptedAdapter(reply)
    judge = JudgeUnit("Rate {candidate}", LikertScale(1, 5), explanation=True)
    verify = VerifyUnit()
    result = Pipeline(judge >> verify, adapter=adapter).run({"candidate": "x"})
    assert "Correction: <only when your verdict is no" in adapter.calls[1].prompt
    assert result.value == 3 and result.quality_score == 0.5
    assert result.outputs["verify[0]"].agrees is False
    assert result.calls == 3


# -- pairwise units --------------------------------------------------------------------------------


def test_pairwise_units_in_both_orders_vote_on_candidate_or_baseline():
    def reply(prompt, rc):
        a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:", 1)[0]
        return "Verdict: A" if "good" in a else "Verdict: B"

    adapter = ScriptedAdapter(reply)
    ab = PairwiseUnit(name="ab")
    ba = PairwiseUnit(name="ba", order="candidate-first")
    pipeline = Pipeline(Layer([ab, ba]) >> MeanPool(), adapter=adapter)
    assert pipeline.item_fields == {"prompt", "baseline", "candidate"}
    result = pipeline.run({"prompt": "q?", "baseline": "bad answer", "candidate": "good answer"})
    assert result.quality_score == 1.0
    assert [o.value for n, o in result.outputs.items() if n != "mean[0]"] == ["candidate", "candidate"]
    vote = Pipeline(Layer([ab, ba]) >> MajorityPool(), adapter=adapter).run(
        {"prompt": "q?", "baseline": "good answer", "candidate": "poor answer"}
    )
    assert vote.verdict == "baseline" and vote.quality_score == 0.0


# -- logprob scoring -------------------------------------------------------------------------------


def test_logprob_scoring_weights_the_labels_at_the_verdict_position():
    tokens = (
        TokenLogprob("Verdict", -0.1, (("Verdict", -0.1), ("yes", -5.0))),  # a label offered before the marker
        TokenLogprob(":", -0.01),
        TokenLogprob(" yes", math.log(0.8), ((" yes", math.log(0.8)), (" no", math.log(0.2)))),
    )
    adapter = ScriptedAdapter([LLMResponse("Verdict: yes", "s", "m", logprobs=tokens)])
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), scoring="logprob", top_logprobs=5)
    result = Pipeline(unit, adapter=adapter).run({"candidate": "x"})
    assert result.quality_score == pytest.approx(0.8)
    assert result.verdict == "yes"
    assert adapter.calls[0].run_config.top_logprobs == 5


def test_pairwise_logprob_scoring_maps_a_and_b_through_the_order():
    tokens = (TokenLogprob("Verdict:", -0.1), TokenLogprob(" A", math.log(0.7), ((" A", math.log(0.7)),
                                                                               (" B", math.log(0.3)))))
    item = {"prompt": "q", "baseline": "b", "candidate": "c"}
    for order, expected in (("baseline-first", 0.3), ("candidate-first", 0.7)):
        adapter = ScriptedAdapter([LLMResponse("Verdict: A", "s", "m", logprobs=tokens)])
        pairwise = PairwiseUnit(order=order, scoring="logprob")
        assert Pipeline(pairwise, adapter=adapter).run(item).quality_score == pytest.approx(expected)


def test_absurd_logprobs_are_an_unusable_reply():
    top = ((" yes", 1000.0), (" no", 999.0))  # a log-probability is never positive
    reply = LLMResponse("Verdict: yes", "s", "m", logprobs=(TokenLogprob(" yes", 1000.0, top),))
    adapter = ScriptedAdapter([reply])
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), scoring="logprob", retries=0)
    with pytest.raises(JudgeReplyError):
        Pipeline(unit, adapter=adapter).run({"candidate": "x"})


def test_tiny_but_equal_logprobs_do_not_underflow():
    top = ((" yes", -1e6), (" no", -1e6))  # both vanishingly unlikely, but equally so: 50/50
    reply = LLMResponse("Verdict: yes", "s", "m", logprobs=(TokenLogprob(" yes", -1e6, top),))
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), scoring="logprob", retries=0)
    assert Pipeline(unit, adapter=ScriptedAdapter([reply])).run({"candidate": "x"}).quality_score == pytest.approx(0.5)


def test_logprob_scoring_without_logprobs_is_unscored_not_a_fallback():
    adapter = ScriptedAdapter(["Verdict: yes"])
    unit = JudgeUnit("Correct? {candidate}", BooleanScale(), scoring="logprob", retries=3)
    with pytest.raises(JudgeReplyError, match="token probabilities"):
        Pipeline(unit, adapter=adapter).run({"candidate": "x"})
    assert len(adapter.calls) == 1  # asking again cannot help
    with pytest.raises(ConfigError, match="discrete scale"):
        JudgeUnit("x {candidate}", ContinuousScale(), scoring="logprob")


# -- connections -----------------------------------------------------------------------------------


def unit(name):
    return JudgeUnit("{candidate} " + name, BooleanScale(), name=name)


def test_connection_patterns():
    adapter = ScriptedAdapter(["Verdict: yes"], cycle=True)
    first = [unit("a"), unit("b"), unit("c")]
    second = [unit("x"), unit("y"), unit("z")]

    def edges(connect):
        p = Pipeline(Layer(first, connect=connect) >> Layer(second) >> MeanPool(), adapter=adapter)
        return sorted((s, t) for s, t in p.edges if t[0] in "xyz")

    assert len(edges("dense")) == 9
    assert edges("broadcast") == [("a[0]", "x[0]"), ("b[0]", "y[0]"), ("c[0]", "z[0]")]
    # cumulative: output i feeds units 0..i
    assert edges("cumulative") == sorted(
        [("a[0]", "x[0]"), ("b[0]", "x[0]"), ("c[0]", "x[0]"), ("b[0]", "y[0]"), ("c[0]", "y[0]"), ("c[0]", "z[0]")]
    )
    assert edges("last") == [("c[0]", "x[0]"), ("c[0]", "y[0]"), ("c[0]", "z[0]")]
    with pytest.raises(ConfigError, match="broadcast joins equal sizes"):
        Pipeline(Layer(first, connect="broadcast") >> Layer(second[:2]) >> MeanPool(), adapter=adapter).validate()


def test_chain_inside_a_layer_and_named_previous_units():
    adapter = ScriptedAdapter(lambda p, rc: "Explanation: turn.\nVerdict: yes")
    opening = JudgeUnit("Argue: {candidate}", BooleanScale(), name="turn", explanation=True)
    debate = Pipeline(
        Layer([opening, JudgeUnit("Reply to: {previous.explanation}", BooleanScale(), name="rebuttal")],
              inner="chain", connect="last")
        >> JudgeUnit("Final call on {candidate}. Opening: {previous.all}", BooleanScale(), name="final"),
        adapter=adapter,
    )
    assert debate.edges == [("item", "turn[0]"), ("turn[0]", "rebuttal[0]"), ("rebuttal[0]", "final[0]")]
    ensemble = Pipeline(
        Layer(opening, repeat=3)
        >> JudgeUnit("Third view: {previous.turn[2].explanation}", BooleanScale(), name="meta"),
        adapter=adapter,
    )
    result = ensemble.run({"candidate": "x"})
    assert "Third view: turn." in adapter.calls[-1].prompt
    assert result.calls == 4


def test_pipeline_must_end_in_one_output_and_verify_needs_one_input():
    adapter = ScriptedAdapter(["x"])
    with pytest.raises(ConfigError, match="ends in 3 outputs"):
        Pipeline(Layer(unit("a"), repeat=3), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="checks exactly one previous verdict"):
        Pipeline(Layer(unit("a"), repeat=3, connect="dense") >> Layer(VerifyUnit(), repeat=2) >> MeanPool(),
                 adapter=adapter).validate()
    with pytest.raises(ConfigError, match="no adapter"):
        (unit("a") >> MeanPool()).validate()
    with pytest.raises(ConfigError, match="empty"):
        Pipeline().validate()


# -- templates -------------------------------------------------------------------------------------


def test_missing_template_field_is_a_config_error_naming_it():
    pipeline = Pipeline(JudgeUnit("Q: {prompt} A: {candidate}", BooleanScale()), adapter=ScriptedAdapter(["x"]))
    with pytest.raises(ConfigError, match=r"\{prompt\} is missing"):
        pipeline.run({"candidate": "x"})
    with pytest.raises(ConfigError, match=r"the templates read the field\(s\) \['prompt'\]"):
        pipeline.run_many([{"candidate": "x"}], progress=False)


@pytest.mark.parametrize(
    "template",
    [
        "{candidate.__class__}",
        "{candidate[0]}",
        "{0}",
        "{}",
        "{candidate!a}",
        "{previous.judge['x']}",
        "{candidate",
    ],
)
def test_templates_refuse_anything_but_plain_fields(template):
    def build_and_run():
        p = Pipeline(JudgeUnit("{candidate} " + template, BooleanScale()), adapter=ScriptedAdapter(["Verdict: yes"]))
        p.run({"candidate": "x"})

    with pytest.raises(ConfigError):
        build_and_run()


def test_templates_are_never_evaluated():
    adapter = ScriptedAdapter(["Verdict: yes"])
    Pipeline(JudgeUnit("{candidate} {{literal}} {candidate!r}", BooleanScale()), adapter=adapter).run(
        {"candidate": "__import__('os').getcwd()"}
    )
    prompt = adapter.calls[0].prompt
    fence = re.search(r"<<<CANDIDATE ([0-9a-f]{12})>>>", prompt).group(1)
    block = f"<<<CANDIDATE {fence}>>>\n{{}}\n<<<END CANDIDATE {fence}>>>"  # item text stays fenced, as it is
    assert prompt.startswith(
        block.format("__import__('os').getcwd()") + " {literal} " + block.format("\"__import__('os').getcwd()\"")
    )


def test_template_references_are_checked_when_the_graph_is_built():
    adapter = ScriptedAdapter(["x"])
    silent = JudgeUnit("{candidate}", BooleanScale())  # no explanation
    with pytest.raises(ConfigError, match="asks for none; give it explanation=True"):
        Pipeline(silent >> VerifyUnit("{previous.explanation}"), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="no previous unit"):
        Pipeline(JudgeUnit("{previous.verdict}", BooleanScale()), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="ambiguous"):
        Pipeline(Layer(silent, repeat=2) >> JudgeUnit("{previous.verdict}", BooleanScale(), name="m"),
                 adapter=adapter).validate()
    with pytest.raises(ConfigError, match="no previous unit is named 'nope'"):
        Pipeline(silent >> JudgeUnit("{previous.nope}", BooleanScale(), name="m"), adapter=adapter).validate()
    with pytest.raises(ConfigError, match="index 3 is out of range"):
        Pipeline(Layer(silent, repeat=3) >> JudgeUnit("{previous.judge[3]}", BooleanScale(), name="m"),
                 adapter=adapter).validate()


# -- trace, usage, run config ----------------------------------------------------------------------


def test_trace_records_every_call_with_usage_and_shows_as_a_table():
    adapter = ScriptedAdapter(fact_checker(), cost_per_call=0.001)
    pipeline = from_config(VERBATIM_YAML_DICT(), adapter=adapter)
    result = pipeline.run({"candidate": "Paris is in France."})
    assert isinstance(result, PipelineResult)
    frame = result.trace.to_frame()
    assert len(frame) == 7  # six calls and the pool
    assert {"node", "status", "prompt", "reply", "verdict", "score", "tokens_in", "tokens_out", "cost_usd",
            "latency_ms"} <= set(frame.columns)
    calls = frame[frame["prompt"].notna()]
    assert len(calls) == 6 and (calls["reply"].str.contains("Verdict")).all()
    assert result.cost_usd == pytest.approx(0.006)
    assert result.tokens_in == sum(len(c.prompt.split()) for c in adapter.calls)
    html = result._repr_html_()
    assert "<table>" in html and "verify[2]" in html and "6 calls" in html
    assert "judge[0]" in pipeline._repr_html_()


def VERBATIM_YAML_DICT():
    import yaml

    return yaml.safe_load(VERBATIM_YAML)


def test_run_config_budget_is_charged_and_temperature_is_the_units():
    tracker = BudgetTracker(limit_usd=1.0)
    adapter = ScriptedAdapter(["Verdict: yes"], cycle=True, cost_per_call=0.01)
    judge = JudgeUnit("{candidate}", BooleanScale(), temperature=0.7, seed=10, max_tokens=50)
    Pipeline(Layer(judge, repeat=2) >> MeanPool(), adapter=adapter).run(
        {"candidate": "x"}, run_config=RunConfig(budget_tracker=tracker, temperature=0.0)
    )
    assert tracker.spent_usd == pytest.approx(0.02)
    assert {c.run_config.temperature for c in adapter.calls} == {0.7}
    assert sorted(c.run_config.model_params["seed"] for c in adapter.calls) == [10, 11]
    assert {c.run_config.max_tokens for c in adapter.calls} == {50}


def test_independent_units_run_concurrently():
    barrier = threading.Barrier(3, timeout=5)

    def reply(prompt, rc):
        barrier.wait()  # all three judges must be in flight at once
        return "Verdict: yes"

    judge = JudgeUnit("{candidate}", BooleanScale())
    result = Pipeline(Layer(judge, repeat=3) >> MajorityPool(), adapter=ScriptedAdapter(reply)).run({"candidate": "x"})
    assert result.verdict == "yes"


# -- run_many --------------------------------------------------------------------------------------


def test_run_many_keeps_order_and_one_row_per_item():
    adapter = ScriptedAdapter(lambda p, rc: "Verdict: " + re.search(r"#<<<CANDIDATE \w+>>>\n(\d+)\n", p).group(1))
    pipeline = Pipeline(JudgeUnit("#{candidate}", LikertScale(0, 9), retries=0), adapter=adapter, threshold=0.5)
    items = [{"id": i, "candidate": str(i % 10), "verdict": "human label"} for i in range(30)]
    frame = pipeline.run_many(items, concurrency=7, progress=False)
    assert list(frame["id"]) == list(range(30))
    assert list(frame["verdict"]) == [str(i % 10) for i in range(30)]
    assert list(frame["verdict_input"]) == ["human label"] * 30  # an input column of the same name is kept
    assert list(frame["passed"]) == [(i % 10) / 9 >= 0.5 for i in range(30)]
    assert frame["calls"].tolist() == [1] * 30
    assert frame.attrs["totals"]["calls"] == 30 and frame.attrs["counts"]["scored"] == 30
    assert all(isinstance(t, Trace) for t in frame["trace"])


def test_arun_many_and_arun():
    import asyncio

    pipeline = Pipeline(JudgeUnit("{candidate}", BooleanScale()), adapter=ScriptedAdapter(["Verdict: no"], cycle=True))

    async def main():
        one = await pipeline.arun({"candidate": "x"})
        many = await pipeline.arun_many([{"candidate": "a"}, {"candidate": "b"}], progress=False)
        return one, many

    one, many = asyncio.run(main())
    assert one.verdict == "no" and list(many["verdict"]) == ["no", "no"]


# -- as a judge ------------------------------------------------------------------------------------


def test_as_judge_plugs_into_grading_and_the_ledger(tmp_path):
    adapter = ScriptedAdapter(fact_checker(), cost_per_call=0.002)
    judge = from_config(VERBATIM_YAML_DICT(), adapter=adapter).as_judge("factual")
    base = LLMResponse("Paris.", "b", "m")
    cand = LLMResponse("Paris is the capital of France.", "c", "m")
    tracker = BudgetTracker(limit_usd=1.0)
    result = judge.judge(base, cand, prompt="Capital of France?", run_config=RunConfig(budget_tracker=tracker))
    assert isinstance(result, GradingResult)
    assert result.quality_score == 1.0 and result.grader_id == "factual"
    assert result.cost_usd == pytest.approx(0.012) and result.tokens_in > 0 and result.latency_ms >= 0
    assert result.details["calls"] == 6 and result.details["passed"] is True
    assert isinstance(result.details["trace"], Trace)
    assert tracker.spent_usd == 0.0  # the judge's spend is not the candidate's (as LLMJudge)

    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    frame = judge_many(
        judge,
        [{"prompt": "q", "baseline": "b", "candidate": "Paris is in Spain."}, {"prompt": "q", "baseline": "b",
                                                                                "candidate": "Rome is in Italy."}],
        progress=False, ledger=ledger, task_type="facts",
    )
    assert list(frame["quality_score"]) == [0.0, 1.0]
    assert list(frame["judge_cost_usd"]) == pytest.approx([0.012, 0.012])
    observations = ledger.recent(10)
    assert len(observations) == 2 and {o.tags["rubric_hash"] for o in observations} == {judge.rubric_hash}

    grader = PairedGrader(judge)
    graded = grader.grade(ScriptedAdapter(["Paris."]), ScriptedAdapter(["Lyon is the capital."]), "Capital?",
                          RunConfig())
    assert graded.quality_score == 1.0 and graded.details["calls"] == 6


def test_run_many_and_judge_many_of_as_judge_return_the_same_columns():
    from llm_connect.columns import PIPELINE_COLUMNS, PIPELINE_EXTRA_COLUMNS, RESULT_COLUMNS

    pipeline = Pipeline(JudgeUnit("{prompt} {baseline} {candidate}", BooleanScale()), threshold=0.5,
                        adapter=ScriptedAdapter(["Verdict: no"], cycle=True, cost_per_call=0.01), name="checker")
    items = [{"prompt": "q", "baseline": "b", "candidate": "c"}, {"prompt": "q", "baseline": "b", "candidate": "d"}]
    ran = pipeline.run_many(items, progress=False)
    judged = judge_many(pipeline.as_judge(), items, progress=False)
    assert (*RESULT_COLUMNS, *PIPELINE_EXTRA_COLUMNS) == PIPELINE_COLUMNS
    assert list(ran.columns) == list(judged.columns) == ["prompt", "baseline", "candidate", *PIPELINE_COLUMNS]
    for column in ("quality_score", "grader_id", "status", "verdict", "passed", "calls", "judge_cost_usd"):
        assert ran[column].tolist() == judged[column].tolist(), column
    assert ran["grader_id"].tolist() == ["checker", "checker"]


def test_as_judge_refuses_templates_reading_other_fields():
    pipeline = Pipeline(JudgeUnit("{candidate} vs {reference}", BooleanScale()), adapter=ScriptedAdapter(["x"]))
    with pytest.raises(ConfigError, match=r"read \['reference'\]"):
        pipeline.as_judge("needs-reference")


def test_as_judge_unscored_rows_keep_their_usage():
    adapter = ScriptedAdapter(lambda p, rc: "no verdict here", cost_per_call=0.5)
    judge = Pipeline(JudgeUnit("{candidate}", BooleanScale(), retries=1), adapter=adapter).as_judge("strict")
    frame = judge_many(judge, [{"prompt": "q", "baseline": "b", "candidate": "c"}], progress=False)
    assert frame.loc[0, "status"] == "unscored"
    assert frame.loc[0, "judge_cost_usd"] == pytest.approx(1.0)


# -- graph drawing ---------------------------------------------------------------------------------


def test_graph_dot_and_matplotlib_drawing():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pipeline = from_config(VERBATIM_YAML_DICT(), adapter=ScriptedAdapter(["x"]))
    dot = pipeline.graph()
    assert dot.startswith('digraph "pipeline" {') and dot.rstrip().endswith("}")
    assert '"judge[2]" -> "verify[2]";' in dot and '"verify[0]" -> "majority[0]";' in dot
    assert "pass if score >= 0.7" in dot
    fig, ax = plt.subplots()
    try:
        out = pipeline.plot(ax=ax)
        assert out is ax
        texts = {t.get_text() for t in ax.texts}
        assert {"item", "judge[0]", "verify[2]", "majority[0]"} <= texts
        arrows = [c for c in ax.get_children() if type(c).__name__ == "Annotation" and c.get_text() == ""]
        assert len(arrows) == len(pipeline.edges) == 9
    finally:
        plt.close(fig)


# -- from_config errors ----------------------------------------------------------------------------


def config_with(unit_overrides=None, **top):
    unit = {"type": "categorical-judge", "prompt": "{candidate}", "categories": ["yes", "no"]}
    unit.update(unit_overrides or {})
    return {"pipeline": [{"layer": {"unit": unit, "repeat": 3}}, {"type": "max-pool"}], **top}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (config_with({"type": "foo"}),
         "pipeline[0].layer.unit.type: unknown unit type 'foo'; expected one of ['categorical-judge'"),
        (config_with({"categores": ["a"]}), "pipeline[0].layer.unit.categores: unknown key 'categores'"),
        (config_with({"retries": -1}), "pipeline[0].layer.unit.retries: must be an integer from 0 to 10"),
        (config_with({"categories": [True, False]}), "pipeline[0].layer.unit: category True is a boolean"),
        (config_with({"values": {"yes": 1.0}}), "pipeline[0].layer.unit: values gives no value for the categories"),
        (config_with({"adapter": "dear"}), "pipeline[0].layer.unit.adapter: unknown adapter 'dear'"),
        (config_with(threshold=1.5), "threshold: must be a number in 0.0..1.0"),
        (config_with(thresold=0.5), "config.thresold: unknown key"),
        ({"pipeline": []}, "pipeline: must be a non-empty list"),
        ({"pipeline": [{"layer": {"unit": {"type": "mean-pool"}, "connect": "sideways"}}]},
         "pipeline[0].layer.connect: expected one of ['dense'"),
        ({"pipeline": [{"layer": {"unit": {"type": "verify"}}}]},
         "pipeline[0].layer.unit (verify[0]): a verify unit needs a previous unit"),
        ({"pipeline": [{"type": "boolean-judge", "prompt": "{candidate}"}, {"type": "verify"}]},
         "pipeline[1] (verify[0]): {previous.explanation} reads the explanation of judge[0], which asks for none"),
        ({"pipeline": [{"type": "categorical-judge", "prompt": "x"}]},
         "pipeline[0].categories: missing; a categorical-judge unit needs 'categories'"),
        ({"pipeline": [{"layer": {"unit": {"type": "mean-pool"}, "repeat": 0}}]},
         "pipeline[0].layer.repeat: must be an integer from 1 to 100"),
        ({"stages": []}, "config.stages: unknown key"),
    ],
)
def test_bad_configs_name_the_offending_key(config, message):
    with pytest.raises(ConfigError) as info:
        from_config(config, adapter=ScriptedAdapter(["x"]))
    assert message in str(info.value)


def _judge_config(**unit):
    return {"pipeline": [{"layer": {"unit": {"type": "boolean-judge", "prompt": "{candidate}", **unit}}}]}


DEEP: list = []
_node = DEEP
for _ in range(20_000):  # deeper than Python's recursion limit
    _node.append([])
    _node = _node[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param({"pipeline": [{"layer": {"unit": {"type": "mean-pool"}, "repeat": 10**7}}]},
                     "pipeline[0].layer.repeat: must be an integer from 1 to 100 (MAX_REPEAT)", id="repeat-1e7"),
        pytest.param({"pipeline": [{"layer": {"unit": {"type": "mean-pool"}, "repeat": 10**30}}]},
                     "pipeline[0].layer.repeat: must be an integer from 1 to 100", id="repeat-1e30"),
        pytest.param(_judge_config(retries=10**9), "pipeline[0].layer.unit.retries: must be an integer from 0 to 10",
                     id="retries-1e9"),
        pytest.param(_judge_config(retries=11), "must be an integer from 0 to 10", id="retries-11"),
        pytest.param({"pipeline": [{"layer": {"units": [{"type": "boolean-judge", "name": f"j{i}", "prompt": "{x}"}
                                                        for i in range(20)], "repeat": 100}}, {"type": "mean-pool"}]},
                     "more than MAX_UNITS = 1000 units", id="units-2000"),
        pytest.param({"pipeline": [{"layer": {"unit": {"type": "boolean-judge", "prompt": "{x}", "explanation": True},
                                              "repeat": 100}},
                                   *[{"type": "verify", "explanation": True}] * 10, {"type": "mean-pool"}]},
                     "pipeline[10]: the pipeline would hold more than MAX_UNITS", id="replicated-verifiers"),
        pytest.param(_judge_config(prompt="{candidate:>100000000}"), "the width is over the limit of 10000",
                     id="format-width"),
        pytest.param(_judge_config(prompt="{candidate:.100000000}"), "the precision is over the limit of 10000",
                     id="format-precision"),
        pytest.param(_judge_config(prompt="{candidate:" + "9" * 5000 + "}"), "the width is over the limit",
                     id="format-width-5000-digits"),
        pytest.param(_judge_config(prompt="{candidate:{baseline}}"), "holds a field; a format spec must be literal",
                     id="format-nested-field"),
        pytest.param(_judge_config(prompt="{candidate:%Y-%m}"), "is not a standard format spec", id="format-strftime"),
        pytest.param(_judge_config(prompt="{candidate.__class__}"), "{candidate.__class__} is not allowed",
                     id="attribute"),
        pytest.param(_judge_config(prompt="{candidate.upper}"), "an item field is a plain value", id="method"),
        pytest.param(_judge_config(prompt="{candidate[0]}"), "{candidate[0]} is not allowed", id="index"),
        pytest.param(_judge_config(prompt="{candidate!a}"), "conversion !a is not allowed", id="conversion"),
        pytest.param(_judge_config(temperature=10**400), "temperature: must be a number >= 0", id="huge-int"),
        pytest.param(_judge_config(retries=DEEP), "got [[[[...]]]]",
                     id="deep-list"),
        pytest.param(_judge_config(prompt=DEEP), "prompt: must be a non-empty string", id="deep-prompt"),
        pytest.param({"pipeline": [{"type": ["a", "list"]}]}, "pipeline[0].type: unknown unit type ['a', 'list']",
                     id="unhashable-type"),
        pytest.param({"pipeline": [DEEP]}, "pipeline[0]: a stage must be a mapping", id="deep-stage"),
    ],
)
def test_config_limits_and_hostile_values_are_config_errors_at_load_time(config, message):
    with pytest.raises(ConfigError) as info:
        from_config(config, adapter=ScriptedAdapter(["x"]))
    assert message in str(info.value)
    assert len(str(info.value)) < 1000  # whatever the input, the message stays short


def test_layer_repeat_is_capped_at_max_repeat_in_python_as_in_configs():
    from llm_connect.pipelines import _config, _pipeline

    assert _config.MAX_REPEAT is _pipeline.MAX_REPEAT == 100  # one definition, beside Layer
    judge = JudgeUnit("{candidate}", BooleanScale())
    assert len(Layer(judge, repeat=_pipeline.MAX_REPEAT).elements) == 100
    for repeat in (101, 10**30):
        with pytest.raises(ConfigError, match=r"repeat must be an integer from 1 to MAX_REPEAT = 100") as info:
            Layer(judge, repeat=repeat)
        assert len(str(info.value)) < 200
    for repeat in (0, -1, True, 2.0, "3"):
        with pytest.raises(ConfigError, match="MAX_REPEAT"):
            Layer(judge, repeat=repeat)
    with pytest.raises(ConfigError, match=r"pipeline\[0\]\.layer\.repeat: must be an integer from 1 to 100"):
        from_config({"pipeline": [{"layer": {"unit": {"type": "mean-pool"}, "repeat": 101}}]})


def test_max_pool_is_an_alias_of_majority_pool_not_a_second_class():
    assert MaxPool is MajorityPool
    pools = [
        from_config({"pipeline": [{"layer": {"unit": {"type": "boolean-judge", "prompt": "{candidate}"},
                                             "repeat": 3}}, {"type": kind}]},
                    adapter=ScriptedAdapter(["Verdict: yes", "Verdict: no", "Verdict: yes"]))
        for kind in ("majority-pool", "max-pool")
    ]
    results = [p.run({"candidate": "x"}) for p in pools]
    assert [type(p.stages[-1].base[0]) for p in pools] == [MajorityPool, MajorityPool]
    assert results[0].quality_score == results[1].quality_score == 1.0
    assert {r.kind for res in results for r in res.trace.records if r.unit == "majority"} == {"majority-pool"}


def test_format_specs_within_the_limits_still_work_and_stay_fenced():
    adapter = ScriptedAdapter(["Explanation: ok\nVerdict: 0.5", "Verdict: yes"])
    judge = JudgeUnit("{candidate:.5} {candidate:>8}", ContinuousScale(), explanation=True)
    verify = VerifyUnit("Score {previous.score:.2f}, said {previous.explanation!r}")
    Pipeline(judge >> verify, adapter=adapter).run({"candidate": "abcdefgh"})
    first, second = adapter.prompts
    fence = re.search(r"<<<CANDIDATE (\w+)>>>", first).group(1)
    assert first.startswith(f"<<<CANDIDATE {fence}>>>\nabcde\n<<<END CANDIDATE {fence}>>> "
                            f"<<<CANDIDATE {fence}>>>\nabcdefgh\n<<<END CANDIDATE {fence}>>>")
    assert second.startswith("Score 0.50, said 'ok'")
    with pytest.raises(ConfigError, match="does not apply to a str"):  # a spec the value cannot take
        Pipeline(JudgeUnit("{candidate:d}", BooleanScale()), adapter=adapter).run({"candidate": "x"})


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"pipeline: \xff\xfe\n", "not UTF-8 text", id="latin-1"),
        pytest.param(b"\xef\xbb\xbfpipeline: [\x80]", "not UTF-8 text", id="bad-byte-after-bom"),
        pytest.param(("pipeline: " + "[" * 3000 + "]" * 3000).encode(), "nested too deeply", id="deep-flow"),
        pytest.param(("pipeline:\n  " + "- " * 3000 + "x\n").encode(), "nested too deeply", id="deep-block"),
        pytest.param(b"pipeline: 2001-13-45", "not valid YAML: ValueError", id="bad-date"),
        pytest.param(b"pipeline: " + b"1" * 5000, "not valid YAML: ValueError", id="int-too-long"),
        pytest.param(b"pipeline: []\n#" + b"x" * 1_000_000, "over MAX_CONFIG_BYTES", id="too-big"),
        pytest.param(  # a billion laughs: aliases of aliases, nine levels deep
            ("threshold: [&a [x,x,x,x,x,x,x,x,x], " + ", ".join(
                f"&{b} [" + ",".join([f"*{a}"] * 9) + "]" for a, b in zip("abcdefgh", "bcdefghi", strict=True))
             + "]\npipeline: [{type: mean-pool}]\n").encode(),
            "threshold: must be a number in 0.0..1.0", id="billion-laughs"),
    ],
)
def test_yaml_files_that_cannot_be_loaded_are_config_errors(tmp_path, content, message):
    path = tmp_path / "pipeline.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        from_config(path)
    assert message in str(info.value)
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("path", ["x" * 5000, "a\x00b", "/", "."], ids=["too-long", "nul", "root", "cwd"])
def test_config_paths_that_cannot_be_read_are_config_errors(path):
    with pytest.raises(ConfigError, match=r"does not exist|cannot be read"):
        from_config(path)


def test_config_files_and_named_adapters(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        from_config(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("pipeline: [", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        from_config(tmp_path / "bad.yaml")
    cheap = ScriptedAdapter(["Verdict: 0.2"], cycle=True, adapter_id="cheap")
    dear = ScriptedAdapter(["Verdict: 0.8"], cycle=True, adapter_id="dear")
    config = {
        "name": "two-models",
        "pipeline": [
            {"layer": {"units": [
                {"type": "continuous-judge", "name": "small", "prompt": "{candidate}"},
                {"type": "continuous-judge", "name": "big", "prompt": "{candidate}", "adapter": "dear"},
            ]}},
            {"type": "weighted-mean-pool", "weights": {"small": 1, "big": 3}},
        ],
    }
    pipeline = from_config(config, adapter=cheap, adapters={"dear": dear})
    assert pipeline.name == "two-models"
    assert pipeline.run({"candidate": "x"}).quality_score == pytest.approx(0.65)
    assert len(cheap.calls) == 1 and len(dear.calls) == 1


def test_config_values_map_and_other_unit_types():
    config = {
        "pipeline": [
            {"layer": {"unit": {"type": "categorical-judge", "prompt": "Correct? {candidate}",
                                "categories": ["correct", "partly", "wrong"],
                                "values": {"correct": 1.0, "partly": 0.4, "wrong": 0.0}}, "repeat": 2}},
            {"type": "median-pool"},
        ],
        "threshold": 0.3,
    }
    adapter = ScriptedAdapter(["Verdict: partly"], cycle=True)
    result = from_config(config, adapter=adapter).run({"candidate": "x"})
    assert result.quality_score == pytest.approx(0.4) and result.passed is True
    likert = {"pipeline": [{"type": "likert-judge", "prompt": "{candidate}", "min": 0, "max": 10}]}
    assert from_config(likert, adapter=ScriptedAdapter(["Verdict: 7"])).run({"candidate": "x"}).quality_score == 0.7
    pairwise = {"pipeline": [{"layer": {"units": [{"type": "pairwise-judge"},
                                                  {"type": "pairwise-judge", "order": "candidate-first"}]}},
                             {"type": "mean-pool"}]}
    p = from_config(pairwise, adapter=ScriptedAdapter(["Verdict: A"], cycle=True))
    assert p.run({"prompt": "q", "baseline": "b", "candidate": "c"}).quality_score == 0.5  # position bias: a draw
