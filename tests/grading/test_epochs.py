"""Repeated judging: judge_many(..., epochs=k, reducer=...), the seeds that keep the cache from serving
repeats, reducers, run-to-run reliability (checked against the krippendorff package), the ledger record,
the judge card and position consistency per epoch. Scripted adapters and a loopback server only."""

from __future__ import annotations

import asyncio
import math
import re
import statistics

import krippendorff
import numpy as np
import pandas as pd
import pytest

from llm_connect import (
    ExactMatchJudge,
    JudgeCard,
    LLMJudge,
    OpenAICompatibleAdapter,
    PairwiseJudge,
    PanelJudge,
    QualityLedger,
    RunConfig,
    ValidationError,
    judge_many,
    paired_frame,
    record_labels,
)
from llm_connect.calibration import card_from_scores
from llm_connect.grading import (
    EPOCH_COLUMNS,
    RESULT_COLUMNS,
    EpochReliability,
    ajudge_many,
    epoch_reliability,
    reseed,
)
from llm_connect.testing import LoopbackServer, ScriptedAdapter

# item i's score in epoch e (seed e; epoch 0 runs without a seed)
SCORES = [
    [0.9, 0.9, 0.9, 0.9],
    [0.2, 0.8, 0.2, 0.3],
    [0.6, 0.4, 0.6, 1.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.5, 0.7, 0.7, 0.1],
]


def items(n: int = len(SCORES)) -> list[dict]:
    return [{"id": f"i{i}", "prompt": f"question {i}?", "baseline": f"reference {i}", "candidate": f"[c{i}]"}
            for i in range(n)]


def item_of(prompt: str) -> int:
    return int(re.search(r"\[c(\d+)\]", prompt).group(1))


def epoch_of(rc: RunConfig) -> int:
    seed = rc.model_params.get("seed")
    return 0 if seed is None else int(seed)


def seeded_judge_reply(prompt: str, rc: RunConfig) -> str:
    return f'{{"quality_score": {SCORES[item_of(prompt)][epoch_of(rc)]}, "notes": "e{epoch_of(rc)}"}}'


def test_epochs_1_is_the_single_run_unchanged():
    adapter = ScriptedAdapter(seeded_judge_reply)
    plain = judge_many(LLMJudge(adapter), items(), progress=False)
    once = judge_many(LLMJudge(adapter), items(), progress=False, epochs=1, reducer="median")
    cols = ["id", "prompt", "baseline", "candidate", *RESULT_COLUMNS]
    assert list(plain.columns) == cols == list(once.columns)
    pd.testing.assert_frame_equal(plain.drop(columns="latency_ms"), once.drop(columns="latency_ms"))
    assert "reliability" not in plain.attrs and "epochs" not in plain.attrs
    assert [c.run_config.model_params.get("seed") for c in adapter.calls] == [None] * 10


@pytest.mark.parametrize(
    ("reducer", "expected"),
    [
        ("mean", lambda s: float(np.mean(s))),
        ("median", lambda s: float(np.median(s))),
        ("max", max),
        ("min", min),
        (lambda s: sorted(s)[-2], lambda s: sorted(s)[-2]),  # a callable: the second highest
    ],
)
def test_each_item_is_judged_k_times_and_reduced(reducer, expected):
    adapter = ScriptedAdapter(seeded_judge_reply)
    df = judge_many(LLMJudge(adapter), items(), progress=False, epochs=4, reducer=reducer, concurrency=3)
    assert len(df) == 5 and list(df["id"]) == [f"i{i}" for i in range(5)]
    assert list(df.columns) == ["id", "prompt", "baseline", "candidate", *RESULT_COLUMNS, *EPOCH_COLUMNS]
    assert len(adapter.calls) == 20
    for i, row in df.iterrows():
        assert row["epoch_scores"] == SCORES[i]
        assert row["quality_score"] == pytest.approx(expected(SCORES[i]))
        assert row["epochs_scored"] == 4
        assert row["score_spread"] == pytest.approx(max(SCORES[i]) - min(SCORES[i]))
        assert row["score_std"] == pytest.approx(statistics.stdev(SCORES[i]))
    assert df["status"].tolist() == ["scored"] * 5
    # each item saw the four seeds: the plain call, then seed 1, 2, 3
    seen = sorted((item_of(c.prompt), c.run_config.model_params.get("seed", -1)) for c in adapter.calls)
    assert seen == sorted((i, s) for i in range(5) for s in (-1, 1, 2, 3))


def test_mode_reducer_takes_the_most_frequent_score_and_a_tie_between_modes_is_their_median():
    table = {0: [1.0, 1.0, 0.0, 0.0], 1: [0.0, 1.0, 1.0, 1.0], 2: [0.2, 0.4, 0.6, 0.8]}

    def reply(prompt, rc):
        return f'{{"quality_score": {table[item_of(prompt)][epoch_of(rc)]}, "notes": ""}}'

    df = judge_many(LLMJudge(ScriptedAdapter(reply)), items(3), progress=False, epochs=4, reducer="mode")
    assert df["quality_score"].tolist() == [0.5, 1.0, 0.5]


def test_a_judges_own_seed_moves_by_the_epoch_and_the_callers_seed_too():
    adapter = ScriptedAdapter(lambda p, rc: '{"quality_score": 1, "notes": ""}')
    judge_many(LLMJudge(adapter, seed=7), items(1), progress=False, epochs=3)
    assert sorted(c.run_config.model_params["seed"] for c in adapter.calls) == [7, 8, 9]
    adapter.calls.clear()
    judge_many(LLMJudge(adapter), items(1), progress=False, epochs=3, run_config=RunConfig(model_params={"seed": 40}))
    assert sorted(c.run_config.model_params["seed"] for c in adapter.calls) == [40, 41, 42]
    pairwise = PairwiseJudge(ScriptedAdapter(lambda p, rc: '{"winner": "A"}'), seed=3)
    assert reseed(pairwise, 2).seed == 5 and reseed(pairwise, 0) is pairwise and pairwise.seed == 3
    panel = PanelJudge([LLMJudge(adapter, grader_id="a", seed=1), LLMJudge(adapter, grader_id="b")])
    moved = reseed(panel, 4)
    assert [j.seed for j in moved.judges] == [5, None] and [j.seed for j in panel.judges] == [1, None]
    exact = ExactMatchJudge()
    assert reseed(exact, 3) is exact  # nothing to reseed: the epoch's run config carries the seed


def test_the_response_cache_never_serves_a_repeat_but_serves_a_rerun(tmp_path):
    def reply(prompt):
        return '{"quality_score": 0.75, "notes": "fine"}'

    with LoopbackServer(reply=reply) as server:
        def adapter():
            return OpenAICompatibleAdapter("loopback-model", base_url=server.base_url, api_key="sk-loopback",
                                           cache=tmp_path / "cache", backoff_initial_s=0.01, backoff_max_s=0.05)

        first = adapter()
        try:
            df = judge_many(LLMJudge(first), items(4), progress=False, epochs=3)
        finally:
            first.close()
        assert server.stats()["total"] == 12  # 4 items x 3 epochs, none served by the cache
        seeds = sorted(str(r.body.get("seed")) for r in server.requests)
        assert seeds == sorted(["None"] * 4 + ["1"] * 4 + ["2"] * 4)
        assert df["epochs_scored"].tolist() == [3] * 4
        second = adapter()
        try:
            again = judge_many(LLMJudge(second), items(4), progress=False, epochs=3)
        finally:
            second.close()
        assert server.stats()["total"] == 12  # the rerun: every epoch from the cache
        assert again["epoch_scores"].tolist() == df["epoch_scores"].tolist()
        assert again["judge_cost_usd"].sum() == 0.0


def test_unscored_epochs_are_nan_never_zero_and_the_reducer_ignores_them():
    # item 0: epochs 1 and 3 unusable; item 1: every epoch unusable; item 2: all fine
    def reply(prompt, rc):
        i, e = item_of(prompt), epoch_of(rc)
        if (i == 0 and e in (1, 3)) or i == 1:
            return "I cannot decide, sorry"
        return f'{{"quality_score": {0.2 * (e + 1)}, "notes": "ok"}}'

    df = judge_many(LLMJudge(ScriptedAdapter(reply)), items(3), progress=False, epochs=4, reducer="min")
    row0, row1, row2 = (df.iloc[i] for i in range(3))
    assert row0["status"] == "scored" and row0["epochs_scored"] == 2
    assert row0["epoch_scores"][0] == pytest.approx(0.2) and math.isnan(row0["epoch_scores"][1])
    assert row0["quality_score"] == pytest.approx(0.2)  # min over 0.2 and 0.6, not 0
    assert row0["score_spread"] == pytest.approx(0.4)
    assert "2/4 epochs (2 unscored or failed)" in row0["notes"] and pd.isna(row0["error"])
    assert row1["status"] == "unscored" and math.isnan(row1["quality_score"])
    assert all(math.isnan(s) for s in row1["epoch_scores"]) and row1["epochs_scored"] == 0
    assert row1["error"].startswith("no epoch of 4 scored; epoch 0:") and "no JSON object" in row1["error"]
    assert math.isnan(row1["score_spread"]) and math.isnan(row1["score_std"])
    assert row2["quality_score"] == pytest.approx(0.2) and row2["epochs_scored"] == 4
    # usage is summed over every epoch, the unusable ones included (they were paid for)
    single = judge_many(LLMJudge(ScriptedAdapter(reply)), items(3), progress=False)
    assert row1["judge_tokens_out"] == 4 * single.iloc[1]["judge_tokens_out"] > 0
    assert df.attrs["counts"] == {"scored": 2, "unscored": 1, "error": 0}


def test_usage_and_cost_are_summed_over_epochs():
    adapter = ScriptedAdapter(seeded_judge_reply, cost_per_call=0.01)
    once = judge_many(LLMJudge(adapter), items(), progress=False)
    thrice = judge_many(LLMJudge(adapter), items(), progress=False, epochs=3, budget=1.0)
    assert thrice["judge_cost_usd"].tolist() == pytest.approx([0.03] * 5)
    assert (thrice["judge_tokens_in"] == 3 * once["judge_tokens_in"]).all()
    assert thrice.attrs["budget"]["spent_usd"] == pytest.approx(0.15)


def test_reliability_is_percent_agreement_and_krippendorffs_alpha_across_epochs():
    df = judge_many(LLMJudge(ScriptedAdapter(seeded_judge_reply)), items(), progress=False, epochs=4)
    rel = epoch_reliability(df)
    assert df.attrs["reliability"] == rel.to_dict() | {"reducer": "mean"}
    assert isinstance(rel, EpochReliability) and rel.epochs == 4 and rel.n_items == 5
    assert rel.labels == "threshold" and rel.level == "interval"  # continuous scores
    data = np.array(SCORES, dtype=float).T  # coders (epochs) x units (items)
    assert rel.alpha_interval == pytest.approx(krippendorff.alpha(reliability_data=data,
                                                                  level_of_measurement="interval"))
    verdicts = (data >= 0.5).astype(float)
    assert rel.alpha_nominal == pytest.approx(krippendorff.alpha(reliability_data=verdicts,
                                                                 level_of_measurement="nominal"))
    assert rel.alpha == rel.alpha_interval
    # percent agreement by hand: share of agreeing epoch pairs per item, averaged over items
    shares = []
    for row in verdicts.T:
        pairs = [(a, b) for k, a in enumerate(row) for b in row[k + 1:]]
        shares.append(sum(a == b for a, b in pairs) / len(pairs))
    assert rel.agreement == pytest.approx(np.mean(shares))
    assert rel.unanimous == pytest.approx(np.mean([len(set(r)) == 1 for r in verdicts.T]))
    assert "Krippendorff" in rel._repr_html_() and "interval" in str(rel)


def test_reliability_of_verdicts_is_exact_and_nominal_with_missing_epochs():
    scores = [[1.0, 1.0, float("nan")], [0.0, 0.5, 0.5], [1.0, 0.0, 1.0], [0.5, None, None]]
    rel = epoch_reliability(scores)
    assert rel.labels == "exact" and rel.level == "nominal" and rel.n_items == 3  # the last has one epoch
    data = np.array([[np.nan if s is None else s for s in row] for row in scores], dtype=float).T
    assert rel.alpha == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    assert rel.agreement == pytest.approx(np.mean([1.0, 1 / 3, 1 / 3]))
    never_varies = epoch_reliability([[1.0, 1.0], [1.0, 1.0]])
    assert never_varies.agreement == 1.0 and math.isnan(never_varies.alpha)  # alpha undefined: one value
    with pytest.raises(ValidationError, match="epoch_scores"):
        epoch_reliability(pd.DataFrame({"quality_score": [1.0]}))
    with pytest.raises(ValidationError, match="one per epoch"):
        epoch_reliability([[1.0, 0.0], [1.0]])
    with pytest.raises(ValidationError, match="labels"):
        epoch_reliability(scores, labels="loose")


def fair_pairwise(prompt: str, rc: RunConfig) -> str:
    """Prefers the answer holding "good"; from seed 2 on it always says A (pure position bias)."""
    if epoch_of(rc) >= 2:
        return '{"winner": "A"}'
    first = prompt.split("Answer A:\n", 1)[1].split("Answer B:", 1)[0]
    return f'{{"notes": "n", "winner": "{"A" if "good" in first else "B"}"}}'


def test_pairwise_in_both_orders_reports_position_consistency_per_epoch():
    pairs = [{"prompt": f"q{i}", "baseline": "a bad answer", "candidate": f"a good answer {i}"} for i in range(4)]
    df = judge_many(PairwiseJudge(ScriptedAdapter(fair_pairwise)), pairs, progress=False, epochs=3)
    per_epoch = df.attrs["position_consistency"]
    assert [(p["epoch"], p["n"], p["consistent"], p["rate"]) for p in per_epoch] == [
        (0, 4, 4, 1.0), (1, 4, 4, 1.0), (2, 4, 0, 0.0)]
    assert df["epoch_scores"].tolist() == [[1.0, 1.0, 0.5]] * 4  # the biased epoch is a tie
    assert df["quality_score"].tolist() == pytest.approx([2.5 / 3] * 4)
    assert df["verdict"].tolist() == ["candidate"] * 4  # read from the reduced score
    assert df["consistent"].tolist() == [False] * 4  # not every epoch was consistent
    rel = df.attrs["reliability"]
    assert rel["labels"] == "exact" and rel["level"] == "nominal"
    assert rel["agreement"] == pytest.approx(1 / 3)


def test_the_ledger_gets_one_reduced_observation_per_item_and_paired_frame_reads_it(tmp_path):
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    data = items()
    for d in data:
        d["candidate_model"] = "cand-model"
    df = judge_many(LLMJudge(ScriptedAdapter(seeded_judge_reply, cost_per_call=0.01)), data, progress=False,
                    epochs=4, reducer="median", ledger=ledger, task_type="qa")
    assert df["ledger_error"].isna().all()
    observations = ledger.read_all()
    assert len(observations) == 5
    by_item = {o.tags["item_id"]: o for o in observations}
    for i in range(5):
        o = by_item[f"i{i}"]
        assert o.quality_score == pytest.approx(float(np.median(SCORES[i])))
        assert o.tags["epochs"] == 4 and o.tags["reducer"] == "median"
        assert o.tags["epoch_scores"] == SCORES[i]
        assert o.tags["judge_cost_usd"] == pytest.approx(0.04)
    labels = pd.DataFrame({"id": [f"i{i}" for i in range(5)], "candidate_model": "cand-model",
                           "human": [i % 2 for i in range(5)]})
    assert record_labels(ledger, labels, task_type="qa") == 5
    paired = paired_frame(ledger, "qa", grader_id="llm-judge")
    assert paired.set_index("item_id").loc[[f"i{i}" for i in range(5)], "judge"].tolist() == pytest.approx(
        df["quality_score"].tolist())
    assert paired["n_judge"].tolist() == [1] * 5


def test_the_reliability_goes_into_the_judge_card():
    df = judge_many(LLMJudge(ScriptedAdapter(seeded_judge_reply)), items(), progress=False, epochs=4)
    human = [1, 0, 1, 0, 0]
    card = card_from_scores(df["quality_score"], human, grader_id="llm-judge", reliability=df, n_boot=50)
    rel = epoch_reliability(df)
    assert card.reliability == rel.card_entry() and card.reliability["reducer"] == "mean"
    assert card.reliability["alpha"] == pytest.approx(rel.alpha)
    again = JudgeCard.from_dict(card.to_dict())
    assert again.reliability == card.reliability
    bare = card_from_scores(df["quality_score"], human, grader_id="llm-judge", n_boot=50)
    assert bare.reliability is None and "run-to-run" not in bare._repr_html_()
    moved = bare.with_reliability(df.attrs["reliability"])
    assert moved.reliability == card.reliability and "run-to-run reliability" in moved._repr_html_()
    with pytest.raises(ValidationError, match="reliability must be"):
        bare.with_reliability(0.8)


def test_ajudge_many_repeats_as_judge_many():
    async def go():
        return await ajudge_many(LLMJudge(ScriptedAdapter(seeded_judge_reply)), items(), progress=False,
                                 epochs=4, reducer="max")

    df = asyncio.run(go())
    assert df["quality_score"].tolist() == [max(s) for s in SCORES]
    assert df["epoch_scores"].tolist() == SCORES and df.attrs["epochs"] == {"epochs": 4, "reducer": "max"}


@pytest.mark.parametrize("epochs", [0, -1, 1.5, "2", True])
def test_bad_epochs_are_refused(epochs):
    with pytest.raises(ValidationError, match="epochs must be a positive integer"):
        judge_many(ExactMatchJudge(), items(1), progress=False, epochs=epochs)


def test_bad_reducers_are_refused_or_make_error_rows():
    with pytest.raises(ValidationError, match="reducer must be one of"):
        judge_many(ExactMatchJudge(), items(1), progress=False, epochs=2, reducer="average")
    with pytest.raises(ValidationError, match="reducer must be one of"):
        judge_many(ExactMatchJudge(), items(1), progress=False, epochs=2, reducer=3)
    df = judge_many(ExactMatchJudge(), items(2), progress=False, epochs=2, reducer=lambda s: 2.0)
    assert df["status"].tolist() == ["error"] * 2
    assert "must return a number in 0.0..1.0" in df.loc[0, "error"]
