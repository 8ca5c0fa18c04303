"""Selective judging and cascades with a guaranteed agreement with people (issue 27).

Jung, Brahman & Choi (ICLR 2025, arXiv:2407.18370): the cut-off is chosen by fixed-sequence testing
with exact binomial (Clopper-Pearson) bounds so that P(agreement on judged items >= 1 - alpha) >= 1 - delta.
The statistics are checked against statsmodels and by simulation over many seeds (vectorised, no LLM
call); the judges against scripted LLM judges whose token probabilities are known.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom
from statsmodels.stats.proportion import proportion_confint
from strategies import SCRIPTED_ITEM, calibrated_p_yes, selective_items, yes_no_adapter, yes_no_judge

from llm_connect import LLMResponse, RunConfig
from llm_connect.errors import JudgeAbstained, JudgeReplyError, UncalibratedJudgeError, ValidationError
from llm_connect.grading import (
    ConfidenceJudge,
    EscalationJudge,
    ExactMatchJudge,
    FunctionJudge,
    LLMJudge,
    PanelJudge,
    SelectiveCascade,
    SelectiveJudge,
    TokenF1Judge,
    cascade,
    judge_many,
)
from llm_connect.quality import QualityLedger
from llm_connect.stats.selective import (
    CURVE_COLUMNS,
    cascade_cutoffs,
    clopper_pearson_upper,
    critical_disagreements,
    evaluate_cutoff,
    fixed_sequence_cutoff,
    fixed_sequence_cutoffs,
    min_items,
    risk_coverage,
)
from llm_connect.testing import ScriptedAdapter

ALPHA, DELTA = 0.1, 0.1


# -- the exact bound and the test ------------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.05, 0.1, 0.2])
def test_clopper_pearson_upper_matches_statsmodels(delta):
    for n in (1, 5, 22, 50, 137, 1000):
        for k in sorted({0, 1, n // 10, n // 2, n - 1, n}):
            ours = clopper_pearson_upper(k, n, delta)
            theirs = proportion_confint(k, n, alpha=2 * delta, method="beta")[1]
            assert ours == pytest.approx(theirs, abs=1e-12), (k, n, delta)
    ks = np.array([0, 3, 10])
    assert np.allclose(clopper_pearson_upper(ks, 50, 0.1),
                       [proportion_confint(int(k), 50, alpha=0.2, method="beta")[1] for k in ks])


def test_min_items_is_the_fewest_that_can_pass():
    assert (min_items(0.1, 0.1), min_items(0.05, 0.1), min_items(0.05, 0.05)) == (22, 45, 59)
    for a, d in ((0.1, 0.1), (0.2, 0.05), (0.01, 0.2), (0.3, 0.3)):
        n = min_items(a, d)
        assert clopper_pearson_upper(0, n, d) <= a < clopper_pearson_upper(0, n - 1, d)


def test_critical_disagreements_is_the_exact_binomial_test():
    ns = np.arange(1, 400)
    for a, d in ((0.1, 0.1), (0.05, 0.05), (0.2, 0.1)):
        limit = critical_disagreements(ns, a, d)
        for n in (1, 21, 22, 40, 100, 399):
            ks = np.arange(n + 1)
            rejects = binom.cdf(ks, n, a) <= d  # H0: risk > alpha rejected at level delta
            assert limit[n - 1] == (ks[rejects].max() if rejects.any() else -1)
            assert ((clopper_pearson_upper(ks, n, d) <= a + 1e-12) == rejects).all()


def test_risk_coverage_curve_keeps_ties_together_most_confident_first():
    conf = [0.9, 0.9, 0.8, 0.5, np.nan, 0.5]
    agree = [True, False, True, True, True, None]
    curve = risk_coverage(conf, agree)
    assert tuple(curve.columns) == CURVE_COLUMNS
    assert curve["cutoff"].tolist() == [0.9, 0.8, 0.5]  # the NaN confidence and the unlabelled row are left out
    assert curve["n_judged"].tolist() == [2, 3, 4] and curve["disagreements"].tolist() == [1, 1, 1]
    assert curve["coverage"].tolist() == [0.5, 0.75, 1.0]
    assert not curve["tested"].any()  # fewer than 22 items: no threshold can pass


def test_fixed_sequence_stops_at_the_first_failure():
    # 60 sure and right, then 40 where the judge is wrong half the time, then 400 right again at low confidence:
    # the bound fails in the middle block, and the sequence must not resume below it
    conf = np.r_[np.linspace(1.0, 0.9, 60), np.linspace(0.89, 0.6, 40), np.linspace(0.59, 0.1, 400)]
    agree = np.r_[np.ones(60, bool), np.arange(40) % 2 == 0, np.ones(400, bool)]
    cut = fixed_sequence_cutoff(conf, agree, alpha=ALPHA, delta=DELTA)
    assert 0.6 < cut.cutoff <= 1.0 and cut.n_judged < 100
    assert risk_coverage(conf, agree)["risk_upper"].iloc[-1] <= ALPHA  # all items together would pass...
    assert cut.coverage < 0.2  # ...but fixed-sequence testing stopped at the first failure
    assert cut.guaranteed_agreement == pytest.approx(0.9) and cut.confidence_level == pytest.approx(0.9)
    assert "judges" in cut.describe() and "guaranteed at 90% confidence" in cut.describe()


def test_too_few_labelled_items_names_how_many_are_needed():
    with pytest.raises(ValidationError, match=r"needs at least 22"):
        fixed_sequence_cutoff(np.linspace(0, 1, 21), np.ones(21, bool), alpha=0.1, delta=0.1)
    cut = fixed_sequence_cutoff(np.linspace(0, 1, 21), np.ones(21, bool), strict=False)
    assert cut.abstains_on_all and "at least 22" in cut.note
    ok = fixed_sequence_cutoff(np.linspace(0, 1, 22), np.ones(22, bool))  # 22 with no disagreement pass
    assert ok.cutoff == 0.0 and ok.coverage == 1.0


def test_bad_levels_are_refused():
    for bad in (0, 1, 1.5, -0.1, "0.1", True, math.nan):
        with pytest.raises(ValidationError):
            fixed_sequence_cutoff([0.5] * 30, [True] * 30, alpha=bad)
    with pytest.raises(ValidationError, match=r"did you mean 0\.1"):
        min_items(10, 0.1)
    with pytest.raises(ValidationError, match="booleans"):
        risk_coverage([0.5, 0.6], ["yes", "no"])


# -- the guarantee, by simulation ------------------------------------------------------------------


def _judge(rng, shape, kind):
    """Confidences and agreements of a simulated judge; ``risk(c)``: its disagreement rate at confidence c."""
    c = rng.uniform(size=shape)
    risk = {"calibrated": lambda c: 0.3 * (1 - c),           # right more often when surer
            "flat": lambda c: np.full_like(c, 0.12),           # no signal, risk just above alpha everywhere
            "bumpy": lambda c: np.where(c > 0.8, 0.01, np.where(c > 0.6, 0.3, 0.05))}[kind]
    return c, rng.uniform(size=shape) >= risk(c)


@pytest.mark.parametrize("kind", ["calibrated", "flat", "bumpy"])
def test_guarantee_holds_over_many_seeds_on_fresh_data(kind):
    runs, n, fresh = 1000, 300, 4000
    rng = np.random.default_rng({"calibrated": 1, "flat": 2, "bumpy": 3}[kind])
    conf, agree = _judge(rng, (runs, n), kind)
    cuts = fixed_sequence_cutoffs(conf, agree, alpha=ALPHA, delta=DELTA)
    for i in range(0, runs, 97):  # the vectorised cut-off is the one fixed_sequence_cutoff chooses
        assert cuts[i] == fixed_sequence_cutoff(conf[i], agree[i], alpha=ALPHA, delta=DELTA).cutoff
    new_conf, new_agree = _judge(rng, (runs, fresh), kind)  # fresh items: never seen by the cut-off
    judged = new_conf >= cuts[:, None]
    n_judged = judged.sum(axis=1)
    agreement = np.where(n_judged > 0, (new_agree & judged).sum(axis=1) / np.maximum(n_judged, 1), 1.0)
    failures = float(np.mean(agreement < 1 - ALPHA))
    bound = DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / runs)  # delta within binomial error
    assert failures <= bound, (kind, failures)
    if kind != "flat":  # and it does judge: the guarantee is not met by abstaining
        assert np.isfinite(cuts).mean() > 0.5
    else:  # a judge whose every item is a coin flip above alpha seldom judges at all
        assert np.isfinite(cuts).mean() < 0.1


@pytest.mark.parametrize("grid", ["distinct", 10, 200])
def test_every_grid_keeps_the_guarantee_and_the_vectorised_cutoff(grid):
    runs, n = 600, 250
    rng = np.random.default_rng(21)
    conf, agree = _judge(rng, (runs, n), "calibrated")
    conf = np.round(conf, 2)  # ties: a threshold keeps every item of its confidence
    cuts = fixed_sequence_cutoffs(conf, agree, alpha=ALPHA, delta=DELTA, grid=grid)
    for i in range(0, runs, 61):
        assert cuts[i] == fixed_sequence_cutoff(conf[i], agree[i], alpha=ALPHA, delta=DELTA, grid=grid).cutoff
    risk_above = np.where(np.isfinite(cuts), 0.3 * (1 - np.where(np.isfinite(cuts), cuts, 0)) / 2, 0)
    assert np.mean(risk_above > ALPHA) <= DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / runs)  # the population risk
    curve = risk_coverage(conf[0], agree[0], grid=grid)
    assert curve["tested"].sum() <= (len(curve) if grid == "distinct" else grid)
    with pytest.raises(ValidationError, match="grid"):
        risk_coverage(conf[0], agree[0], grid=0)


def test_guarantee_is_about_judged_items_and_coverage_tracks_the_signal():
    rng = np.random.default_rng(7)
    conf, agree = _judge(rng, (400, 300), "calibrated")
    cuts = fixed_sequence_cutoffs(conf, agree, alpha=ALPHA, delta=DELTA)
    # the risk of the items above c is 0.3 (1 - c) / 2: at most 0.1 from c = 1/3 up, so coverage is at most 2/3
    coverage = 1 - np.where(np.isfinite(cuts), cuts, 1.0)
    assert np.mean(coverage) < 2 / 3 and np.mean(coverage) > 0.2
    noisy = np.ones_like(agree)
    noisy[:, ::5] = False  # 20% disagreement whatever the confidence: no cut-off can pass alpha=0.1
    assert np.isinf(fixed_sequence_cutoffs(conf, noisy, alpha=ALPHA, delta=DELTA)).mean() > 0.99


def test_cascade_guarantee_over_many_seeds():
    runs, n, fresh = 500, 400, 3000
    rng = np.random.default_rng(11)
    failures = decided = 0
    checked = 0
    for _ in range(runs):
        c1, a1 = _judge(rng, n, "calibrated")
        c2 = rng.uniform(size=n)
        a2 = rng.uniform(size=n) >= 0.2 * (1 - c2)  # the stronger judge
        cut1 = fixed_sequence_cutoffs(c1[None], a1[None], alpha=ALPHA, delta=DELTA)[0]
        left = c1 < cut1
        try:
            cut2 = fixed_sequence_cutoffs(c2[left][None], a2[left][None], alpha=ALPHA, delta=DELTA)[0]
        except ValidationError:  # too few items reached the second judge: it abstains on everything
            cut2 = math.inf
        if checked < 5:  # the loop above is cascade_cutoffs
            ref = cascade_cutoffs([c1, np.where(left, c2, np.nan)], [a1, a2], alpha=ALPHA, delta=DELTA)
            assert [r.cutoff for r in ref] == [cut1, cut2]
            checked += 1
        f1, g1 = _judge(rng, fresh, "calibrated")
        f2 = rng.uniform(size=fresh)
        g2 = rng.uniform(size=fresh) >= 0.2 * (1 - f2)
        by1 = f1 >= cut1
        by2 = ~by1 & (f2 >= cut2)
        judged = by1.sum() + by2.sum()
        decided += judged / fresh
        agreement = (g1[by1].sum() + g2[by2].sum()) / judged if judged else 1.0
        failures += agreement < 1 - ALPHA
    assert failures / runs <= DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / runs)
    assert decided / runs > 0.5  # the stronger judge decides much of what the first left


def test_evaluate_cutoff_on_held_out_items():
    out = evaluate_cutoff([0.9, 0.8, 0.2, np.nan], [True, False, True, True], 0.5)
    assert out == {"n": 3, "n_judged": 2, "coverage": pytest.approx(2 / 3), "agreement": 0.5}


# -- a scripted LLM judge whose token probabilities are known ---------------------------------------

ITEM = SCRIPTED_ITEM
_items, _calibrated, _yes_no_adapter, _llm = selective_items, calibrated_p_yes, yes_no_adapter, yes_no_judge


def test_selective_llm_judge_logprob_confidence_calibrate_and_abstain(tmp_path):
    items = _items(600)
    cal, fresh = items.iloc[:300], items.iloc[300:].reset_index(drop=True)
    judge = SelectiveJudge(_llm(items["p_yes"].to_numpy()))
    assert judge.source == "logprob" and not judge.calibrated
    with pytest.raises(UncalibratedJudgeError, match="calibrate"):
        judge.judge(LLMResponse("the reference", "b", "r"), LLMResponse("answer item-0", "c", "m"), prompt="q",
                    run_config=RunConfig())
    calibrated = judge.calibrate(cal, human="human", progress=False)
    assert calibrated.calibrated and 0.5 < calibrated.cutoff < 1.0
    assert 0 < calibrated.coverage < 1 and calibrated.agreement >= 0.9
    assert calibrated.guaranteed_agreement == pytest.approx(0.9) and calibrated.delta == 0.1
    table = calibrated.calibration_frame
    expected = np.maximum(cal["p_yes"], 1 - cal["p_yes"]).to_numpy()
    assert np.allclose(table["confidence"], expected, atol=1e-6)  # the judge's own probability of its verdict
    assert "judges" in calibrated.describe() and "guaranteed at 90% confidence" in calibrated.describe()
    assert "selective judge" in calibrated._repr_html_()

    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    df = judge_many(calibrated, fresh, progress=False, ledger=ledger, task_type="qa")
    counts = df.attrs["counts"]
    assert counts["abstained"] > 0 and counts["scored"] > 0 and counts["scored"] + counts["abstained"] == len(fresh)
    abstained = df[df["status"] == "abstained"]
    assert abstained["quality_score"].isna().all()  # no score, never 0
    assert (abstained["confidence"] < calibrated.cutoff).all() and (abstained["judge_cost_usd"] > 0).all()
    assert abstained["notes"].str.contains("below the cut-off").all() and abstained["error"].isna().all()
    scored = df[df["status"] == "scored"]
    assert (scored["confidence"] >= calibrated.cutoff).all()
    assert len(ledger.read_all()) == len(scored)  # abstentions are never recorded as quality observations
    agree = (scored["quality_score"] >= 0.5) == (scored["human"] == "yes")
    assert agree.mean() >= 0.85


def test_no_usable_signal_abstains_on_everything_and_says_so():
    items = _items(60)
    exact = SelectiveJudge(ExactMatchJudge())
    assert exact.source is None and "no usable confidence signal" in exact.note
    calibrated = exact.calibrate(items, human="human", progress=False)
    assert math.isinf(calibrated.cutoff) and calibrated.coverage == 0
    assert "abstains on every item" in calibrated.describe()
    df = judge_many(calibrated, items, progress=False)
    assert df.attrs["counts"]["abstained"] == len(items) and df["quality_score"].isna().all()
    with pytest.raises(ValidationError, match="token probabilities"):
        SelectiveJudge(ExactMatchJudge(), confidence="logprob")
    with pytest.raises(ValidationError, match="0/1 verdicts"):
        SelectiveJudge(ExactMatchJudge(), confidence="margin")


def test_too_few_labels_to_calibrate_is_an_error_naming_the_number():
    items = _items(40)
    items.loc[20:, "human"] = ""  # 20 labelled
    judge = SelectiveJudge(_llm(items["p_yes"].to_numpy()))
    with pytest.raises(ValidationError, match=r"20; .* needs at least 22"):
        judge.calibrate(items, human="human", progress=False)
    with pytest.raises(ValidationError, match="at least 45"):
        SelectiveJudge(_llm(items["p_yes"].to_numpy()), alpha=0.05).calibrate(items, human="human", progress=False)


def test_callable_confidence_takes_the_grading_result():
    items = _items(200, seed=3)
    seen = []

    def sure(result):
        seen.append(result)
        return abs(result.quality_score - 0.5) * 2

    f1 = FunctionJudge(lambda b, c: 1.0 if c.endswith(("1", "3", "5")) else 0.0, grader_id="fn")
    judge = SelectiveJudge(f1, confidence=sure)
    assert judge.source == "callable"
    calibrated = judge.calibrate(items, human="human", progress=False)
    assert seen and all(hasattr(r, "quality_score") and hasattr(r, "details") for r in seen)
    assert calibrated.calibration is not None


def test_margin_epochs_and_panel_confidences():
    items = _items(50, seed=5)
    f1 = SelectiveJudge(TokenF1Judge())
    assert f1.source == "margin"
    res = f1.scorer.judge(LLMResponse("x y z w", "b", "r"), LLMResponse("x y", "c", "m"), prompt="q",
                          run_config=RunConfig())
    assert res.quality_score == pytest.approx(2 / 3)  # token F1 of 2 tokens against 4
    assert res.details["confidence"] == pytest.approx(0.5 + (2 / 3 - 0.5) / 1.0)
    del items
    # epochs: a judge whose verdict depends on the seed (an LLM at temperature 0 that still varies)
    seeds = []

    def varying(prompt, run_config):
        seed = run_config.model_params.get("seed", 0)
        seeds.append(seed)
        return '{"notes": "x", "quality_score": %s}' % ("0.9" if seed % 3 else "0.2")

    llm = LLMJudge(ScriptedAdapter(varying), seed=0)
    epochs = SelectiveJudge(llm, confidence="epochs", epochs=3)
    assert epochs.source == "epochs"
    scorer = epochs.scorer
    assert isinstance(scorer, ConfidenceJudge)
    res = scorer.judge(LLMResponse("ref", "b", "r"), LLMResponse("c", "c", "m"), prompt="q", run_config=RunConfig())
    assert sorted(seeds) == [0, 1, 2]  # three reseeded judgments
    assert res.quality_score == pytest.approx((0.2 + 0.9 + 0.9) / 3)
    assert res.details["confidence"] == pytest.approx(2 / 3)  # two of the three agree with the verdict
    assert SelectiveJudge(llm).source == "margin"  # "auto" asks K times only when epochs= says so
    assert SelectiveJudge(llm, epochs=4).source == "epochs"
    # panel: the members' votes (no probabilities) averaged
    members = [FunctionJudge(lambda b, c, v=v: v, grader_id=f"m{i}") for i, v in enumerate((1.0, 1.0, 0.0, 1.0))]
    panel = SelectiveJudge(PanelJudge(members))
    assert panel.source == "panel"
    res = panel.scorer.judge(LLMResponse("ref", "b", "r"), LLMResponse("c", "c", "m"), prompt="q",
                             run_config=RunConfig())
    assert res.quality_score == pytest.approx(0.75) and res.details["confidence"] == pytest.approx(0.75)
    with_list = SelectiveJudge(members[0], panel=members[1:], confidence="panel")
    assert with_list.members() == members


def test_panel_of_yes_no_judges_averages_probabilities():
    p = np.array([0.9, 0.2])
    a = _llm(p, grader_id="a")
    b = LLMJudge(_yes_no_adapter(np.array([0.7, 0.4])), grader_id="b", scoring="yes-no")
    judge = SelectiveJudge(a, panel=[b])
    assert judge.source == "logprob"  # auto: its own probability first
    panel = SelectiveJudge(a, panel=[b], confidence="panel")
    res = panel.scorer.judge(LLMResponse("ref", "b", "r"), LLMResponse("answer item-0", "c", "m"), prompt="q",
                             run_config=RunConfig())
    assert res.details["confidence"] == pytest.approx((0.9 + 0.7) / 2)  # P(yes) averaged: simulated annotators


def test_rubric_examples_make_the_simulated_annotators():
    from llm_connect.grading import Example, Rubric

    items = _items(120, seed=9)
    examples = tuple(Example(f"q{i}", "ref", f"example answer {i}", float(i % 2)) for i in range(6))
    rubric = Rubric("Is the answer correct?", examples=examples)
    judge = LLMJudge(_yes_no_adapter(items["p_yes"].to_numpy()), scoring="yes-no", rubric=rubric)
    panel = SelectiveJudge(judge, confidence="panel", panel_size=4)
    calibrated = panel.calibrate(items, human="human", progress=False, seed=1)
    versions = calibrated.members()
    assert len(versions) == 4 and len({v.rubric_hash for v in versions}) == 4
    assert all(len(v.rubric.examples) == 3 for v in versions[1:])
    again = panel.calibrate(items, human="human", progress=False, seed=1)
    assert [v.rubric_hash for v in again.members()] == [v.rubric_hash for v in versions]  # seeded


def test_calibrate_builds_the_simulated_annotators_as_a_selective_judge_does():
    """calibrate(selective=...) on a JSON-scoring LLMJudge whose rubric has worked examples picks the "panel"
    confidence; it builds the panel's rubric versions (seeded) as SelectiveJudge.calibrate does, never a panel
    of one judge whose confidence is 0 or 1."""
    from llm_connect.calibration import calibrate
    from llm_connect.grading import Example, Rubric

    items = _items(120, seed=9)
    p_yes = items["p_yes"].to_numpy()

    def reply(prompt, run_config):  # a score that depends on the examples shown: the versions disagree
        p = float(p_yes[int(ITEM.findall(prompt)[-1])]) + 0.05 * prompt.count("example answer")
        return json.dumps({"quality_score": min(max(p - 0.1, 0.0), 1.0)})

    examples = tuple(Example(f"q{i}", "ref", f"example answer {i}", float(i % 2)) for i in range(6))
    judge = LLMJudge(ScriptedAdapter(reply), rubric=Rubric("Is the answer correct?", examples=examples),
                     grader_id="j")
    report = calibrate({"j": judge}, items, human="human", selective={"alpha": 0.2, "delta": 0.2}, probes=None,
                       n_boot=0, progress=False, seed=1)
    chosen = report.selective["j"]
    direct = SelectiveJudge(judge, alpha=0.2, delta=0.2).calibrate(items, human="human", progress=False, seed=1)
    assert chosen.source == direct.source == "panel"
    assert len(chosen.members()) == len(direct.members()) > 1
    assert [v.rubric_hash for v in chosen.members()] == [v.rubric_hash for v in direct.members()]
    assert report.scores["confidence_j"].nunique() > 2  # agreement across versions, not 0 or 1


def test_selective_judge_inside_the_escalation_judge():
    items = _items(200, seed=2)
    sel = SelectiveJudge(_llm(items["p_yes"].to_numpy())).calibrate(items, human="human", progress=False)
    dear = FunctionJudge(lambda b, c: 1.0, grader_id="dear")
    fixed = EscalationJudge(sel, dear)  # an abstention is an unsure judge: the fixed band escalates
    df = judge_many(fixed, items, progress=False)
    low = items["p_yes"].map(lambda p: max(p, 1 - p)) < sel.cutoff
    assert df.loc[low.to_numpy(), "escalated"].all()
    assert "grading.cascade" in EscalationJudge.__doc__ and "SelectiveCascade" in EscalationJudge.__doc__
    assert issubclass(JudgeAbstained, JudgeReplyError)


# -- cascades ----------------------------------------------------------------------------------------


def test_cascade_stage_by_stage_decided_by_cost_and_guarantee(tmp_path):
    items = _items(800, seed=4)
    cal, fresh = items.iloc[:400].reset_index(drop=True), items.iloc[400:].reset_index(drop=True)
    # two calibrated judges of the people's labels: a free screen, often unsure, and a strong judge at 0.01 a call
    screen_p = _calibrated(items["human"] == "yes", low=0.5, seed=1, sure=0.4)
    p = _calibrated(items["human"] == "yes", low=0.6, seed=2, sure=0.3)
    screen = LLMJudge(_yes_no_adapter(screen_p, cost=0.0), grader_id="screen", scoring="yes-no")
    strong_adapter = _yes_no_adapter(p, cost=0.01)
    strong = LLMJudge(strong_adapter, grader_id="strong", scoring="yes-no")
    chain = cascade([screen, strong], alpha=ALPHA, delta=DELTA)
    assert isinstance(chain, SelectiveCascade) and not chain.calibrated
    calibrated = chain.calibrate(cal, human="human", progress=False)
    stages = calibrated.calibration
    assert [s["grader_id"] for s in stages] == ["screen", "strong"]
    # the strong judge was asked only about the calibration items the screen abstained on
    assert len(strong_adapter.calls) == stages[1]["reached"] == len(cal) - stages[0]["judged"]
    assert stages[0]["judged"] > 0 and stages[1]["judged"] > 0
    assert "guaranteed at 90% confidence" in calibrated.describe()

    calls_before = len(strong_adapter.calls)
    df = calibrated.judge_many(fresh, progress=False)
    assert set(df["decided_by"]) <= {"screen", "strong", "human"} and (df["decided_by"] == "human").any()
    human = df[df["decided_by"] == "human"]
    assert (human["status"] == "abstained").all() and human["quality_score"].isna().all()
    assert (df.loc[df["decided_by"] == "screen", "stage"] == 0).all()
    strong_calls = len(strong_adapter.calls) - calls_before
    assert strong_calls == int((df["decided_by"] != "screen").sum())  # asked only when the screen abstained
    summary = calibrated.summary(df)
    assert summary.n == len(fresh) and summary.human == len(human)
    assert sum(s["decided"] for s in summary.stages) == summary.judged == len(fresh) - len(human)
    assert summary.cost_usd == pytest.approx(0.01 * strong_calls)
    assert summary.last_judge_cost_per_item_usd == pytest.approx(0.01)
    assert summary.always_last_cost_usd == pytest.approx(0.01 * len(fresh))
    assert 0 < summary.saved_share < 1 and summary.guaranteed_agreement == pytest.approx(0.9)
    assert df.attrs["cascade"]["judged"] == summary.judged and "left for people" in summary.describe()
    judged = df[df["status"] == "scored"]
    assert ((judged["quality_score"] >= 0.5) == (judged["human"] == "yes")).mean() >= 0.85


def test_cascade_calibration_needs_enough_labels_and_distinct_judges():
    items = _items(21)
    chain = cascade([_llm(items["p_yes"].to_numpy(), "a"), _llm(items["p_yes"].to_numpy(), "b")])
    with pytest.raises(ValidationError, match="at least 22"):
        chain.calibrate(items, human="human", progress=False)
    with pytest.raises(ValidationError, match="distinct grader_ids"):
        cascade([_llm(items["p_yes"].to_numpy()), _llm(items["p_yes"].to_numpy())])


def test_labeller_offers_exactly_the_abstained_items_most_uncertain_first(tmp_path):
    from llm_connect.labelling import Labeller

    items = _items(260, seed=6)
    cal, fresh = items.iloc[:200].reset_index(drop=True), items.iloc[200:].reset_index(drop=True)
    p = _calibrated(items["human"] == "yes", low=0.6, seed=7, sure=0.3)
    chain = cascade([_llm(p, "judge")]).calibrate(cal, human="human", progress=False)
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    df = chain.judge_many(fresh, ledger=ledger, task_type="qa", progress=False)
    abstained = df[df["status"] == "abstained"]
    assert len(abstained) and df.attrs["cascade"]["labelled_by_people"] == 0
    assert df.attrs["cascade"]["combined_agreement"] == pytest.approx(0.9)  # the judged items alone, so far
    labeller = Labeller(df, ledger=ledger, task_type="qa", annotator="ann", strategy="abstained")
    assert labeller.n_total == len(abstained)
    shown, confidences = [], dict(zip(df["id"], df["confidence"], strict=True))
    while labeller.current is not None:
        item = labeller.current
        shown.append(item["item_id"])
        labeller.label(1.0 if fresh.set_index("id").at[item["item_id"], "human"] == "yes" else 0.0)
    assert sorted(shown) == sorted(abstained["id"])  # people get exactly the abstained items
    order = [confidences[i] for i in shown]
    assert order == sorted(order)  # the most uncertain first
    again = chain.judge_many(fresh, ledger=ledger, task_type="qa", progress=False)
    info = again.attrs["cascade"]
    assert info["labelled_by_people"] == len(abstained)
    judged = info["judged"]
    assert info["combined_agreement"] == pytest.approx((judged * 0.9 + len(abstained)) / (judged + len(abstained)))
    assert again.loc[again["status"] == "abstained", "human_label"].notna().all()
    with pytest.raises(ValidationError, match="status"):
        Labeller(fresh, ledger=ledger, task_type="qa", annotator="ann", strategy="abstained")


# -- everywhere a user looks -------------------------------------------------------------------------


def test_calibrate_selective_rows_cards_and_report():
    from llm_connect.calibration import calibrate

    items = _items(300, seed=8)
    report = calibrate([_llm(items["p_yes"].to_numpy()), ExactMatchJudge()], items, human="human",
                       selective=(0.1, 0.1), probes=None, n_boot=20, progress=False)
    assert set(report.selective) == {"llm-judge", "exact-match"}
    chosen = report.selective["llm-judge"]
    assert isinstance(chosen, SelectiveJudge) and chosen.calibrated and 0 < chosen.coverage < 1
    assert "confidence_llm-judge" in report.scores.columns and "confidence_llm-judge" in report.scores_table()
    frame = report.agreement_frame()
    rows = frame[frame["selective"] == "alpha=0.1,delta=0.1"]
    assert sorted(rows["judge_a"]) == ["exact-match", "llm-judge"]
    row = rows.set_index("judge_a").loc["llm-judge"]
    assert row["coverage"] == pytest.approx(chosen.coverage) and row["guaranteed_agreement"] == pytest.approx(0.9)
    verdicts = report.verdicts()
    line = next(v for v in verdicts if v.startswith("llm-judge"))
    assert re.search(r"judges \d+% of items with at least 90% agreement with people, guaranteed at 90% confidence; "
                     r"abstains on \d+%", line)
    assert "abstains on every item" in next(v for v in verdicts if v.startswith("exact-match"))
    card = next(c for c in report.judge_cards() if c.grader_id == "llm-judge")
    assert card.row()["selective_coverage"] == pytest.approx(chosen.coverage)
    assert card.selective["source"] == "logprob"
    figures = report.figures()
    assert "risk-coverage of llm-judge (selective)" in figures
    ax = figures["risk-coverage of llm-judge (selective)"].axes[0]
    assert any(line.get_label().startswith("cut-off") for line in ax.lines)
    assert "Selective judges" in report.html(plots=False)
    fresh = _items(300, seed=18)
    df = judge_many(chosen, fresh, progress=False)  # the calibrated judge, ready for fresh items
    assert df.attrs["counts"]["abstained"] > 0
    with pytest.raises(ValidationError, match="at least 22"):
        calibrate([ExactMatchJudge()], items.iloc[:15], human="human", selective=True, probes=None, progress=False)


def test_abstained_rows_in_a_calibration_run_and_the_viewer():
    from llm_connect.calibration import calibrate
    from llm_connect.views import viewer_html
    from llm_connect.views.judgments import judgment_records

    items = _items(200, seed=12)
    chosen = SelectiveJudge(_llm(items["p_yes"].to_numpy())).calibrate(items, human="human", progress=False)
    report = calibrate([chosen], items, human="human", probes=None, n_boot=20, progress=False)
    status = report.scores["status_llm-judge"]
    assert (status == "abstained").any() and report.meta.usage["llm-judge"]["abstained"] == int(
        (status == "abstained").sum())
    assert report.summary().set_index("judge").at["llm-judge", "abstained"] == int((status == "abstained").sum())
    records = judgment_records(report)
    states = {r["judges"]["llm-judge"]["status"] for r in records if r["kind"] == "item"}
    assert "abstained" in states
    assert '"abstained"' in viewer_html(records)


def test_cli_calibrate_selective(tmp_path, capsys):
    from llm_connect.cli import main

    data = tmp_path / "items.jsonl"
    items = _items(200, seed=13)
    items["candidate"] = np.where(items["p_yes"] > 0.5, "the reference", items["candidate"])
    items.drop(columns=["p_yes"]).to_json(data, orient="records", lines=True)
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact,token-f1", "--probes", "none",
                 "--n-boot", "20", "--no-progress", "--selective", "alpha=0.2,delta=0.1"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "selective judges (alpha=0.2,delta=0.1)" in printed
    agreement = pd.read_csv(out / "agreement.csv")
    rows = agreement[agreement["selective"] == "alpha=0.2,delta=0.1"]
    assert sorted(rows["judge_a"]) == ["exact-match", "token-f1"]
    cards = pd.read_csv(out / "cards.csv")
    assert "selective_coverage" in cards.columns and cards["verdict"].str.contains("selective: ").all()
    assert "risk-coverage of token-f1" in (out / "report.html").read_text()
    assert "confidence_token-f1" in pd.read_csv(out / "scores.csv").columns
    few = tmp_path / "few.jsonl"
    items.iloc[:10].drop(columns=["p_yes"]).to_json(few, orient="records", lines=True)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(few), "--out", str(tmp_path / "o2"), "--judges", "exact", "--selective",
              "alpha=0.1,delta=0.1", "--no-progress"])
    assert exc.value.code == 2
    assert "needs at least 22 labelled items" in capsys.readouterr().err


def test_tutorial_yes_no_stand_in_reads_no_labels():
    """Notebook 11's scripted LLM judge decides from the texts it is shown, never from people's labels."""
    import importlib.util
    from pathlib import Path

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    spec = importlib.util.spec_from_file_location("_tutorial_helpers_selective", notebooks / "tutorial_helpers.py")
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    qa = pd.read_json(notebooks / "../data/qa_calibration.jsonl", lines=True, dtype=False)
    flipped = qa.assign(human=qa["human"].map({"yes": "no", "no": "yes"}))
    reply, blind = helpers.yes_no_judge(qa), helpers.yes_no_judge(flipped)
    judge = LLMJudge(ScriptedAdapter(["unused"]), scoring="yes-no")
    for row in qa.head(80).to_dict("records"):
        prompt = judge.build_prompt(LLMResponse(row["baseline"], "b", "r"), LLMResponse(row["candidate"], "c", "m"),
                                    row["prompt"])
        ours, theirs = reply(prompt, None), blind(prompt, None)
        assert ours.content == theirs.content and ours.logprobs == theirs.logprobs
        assert ours.content in ("yes", "no")
