"""Money: a batch's budget counts every paid call of a row, and a limit stops the spending without losing replies.

Real HTTP against the loopback server on 127.0.0.1 with a priced model, and
the package's ScriptedAdapter with a cost; no mocks of our own code.
"""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from llm_connect import BudgetTracker, ExactMatchJudge, LLMJudge, LLMResponse, PairedGrader, RunConfig
from llm_connect.adapters import OpenAICompatibleAdapter, Price
from llm_connect.grading import EscalationJudge, GradingResult, PanelJudge, ajudge_many, grade_many, judge_many
from llm_connect.pipelines import BooleanScale, JudgeUnit, Layer, MeanPool, Pipeline
from llm_connect.testing import ScriptedAdapter
from llm_connect.testing.loopback import LoopbackServer

VERDICT = '{"quality_score": 0.75, "notes": "fine"}'
MODEL = "priced-judge"
# $1 per million input tokens and $2 per million output tokens: a judge call of ~200 words costs ~$0.0002
PRICES = {MODEL: Price(1.0, 2.0)}


def items(n: int) -> list[dict]:
    return [
        {"id": i, "prompt": f"question {i}", "baseline": f"answer {i}", "candidate": f"reply {i}"} for i in range(n)
    ]


def priced(server: LoopbackServer, **kwargs) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter(MODEL, base_url=server.base_url, prices=PRICES, **kwargs)


class SyncOnlyJudge:
    """A user's judge with only a sync ``judge()`` (the batch runs it in a worker thread)."""

    grader_id = "sync-llm-judge"

    def __init__(self, adapter) -> None:
        self.inner = LLMJudge(adapter)

    def judge(self, baseline, candidate, *, prompt, run_config) -> GradingResult:
        return self.inner.judge(baseline, candidate, prompt=prompt, run_config=run_config)


# -- defect 1: the judge's spend is counted by the batch ---------------------------------------------


def test_judge_many_charges_the_judges_calls_to_the_callers_tracker_over_http():
    tracker = BudgetTracker()
    with LoopbackServer(reply=VERDICT) as server:
        df = judge_many(
            LLMJudge(priced(server)),
            items(100),
            run_config=RunConfig(budget_tracker=tracker),
            concurrency=16,
            progress=False,
        )
        paid = server.stats()["total"]
    assert paid == 100 and df.attrs["counts"]["scored"] == 100
    assert tracker.calls == 100
    assert tracker.spent_usd > 0 and tracker.spent_usd == pytest.approx(df["judge_cost_usd"].sum())
    assert df.attrs["budget"]["spent_usd"] == pytest.approx(tracker.spent_usd)


@pytest.mark.parametrize("make_judge", [LLMJudge, SyncOnlyJudge], ids=["async-judge", "sync-judge-in-a-thread"])
def test_budget_keyword_counts_every_judge_call(make_judge):
    adapter = ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.01)
    tracker = BudgetTracker(limit_usd=100.0)
    df = judge_many(make_judge(adapter), items(40), budget=tracker, concurrency=8, progress=False)
    assert df.attrs["counts"]["scored"] == 40
    assert tracker.calls == 40 and tracker.spent_usd == pytest.approx(0.40)
    assert all(c.run_config.budget_tracker is None for c in adapter.calls)  # the contract still holds


def test_a_float_budget_is_a_limit_in_usd_and_reported_in_attrs():
    adapter = ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.01)
    df = judge_many(LLMJudge(adapter), items(30), budget=0.10, concurrency=1, progress=False)
    assert df.attrs["counts"] == {"scored": 10, "unscored": 0, "error": 20}
    assert df.attrs["budget"]["limit_usd"] == 0.10 and df.attrs["budget"]["spent_usd"] == pytest.approx(0.10)
    assert df.loc[10:, "error"].str.contains("budget exhausted").all()


def test_ajudge_many_charges_its_budget():
    adapter = ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.02)
    tracker = BudgetTracker()

    async def main():
        return await ajudge_many(LLMJudge(adapter), items(10), budget=tracker, progress=False)

    df = asyncio.run(main())
    assert df.attrs["counts"]["scored"] == 10 and tracker.spent_usd == pytest.approx(0.20)


def test_compound_judges_charge_every_member_call():
    members = [
        LLMJudge(ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.01), grader_id=f"m{k}") for k in range(3)
    ]
    panel = PanelJudge(members)
    tracker = BudgetTracker()
    df = judge_many(panel, items(10), budget=tracker, progress=False)
    assert df.attrs["counts"]["scored"] == 10 and tracker.calls == 30 and tracker.spent_usd == pytest.approx(0.30)

    cheap = LLMJudge(ScriptedAdapter(['{"quality_score": 0.5}'], cycle=True, cost_per_call=0.001), grader_id="c")
    dear = LLMJudge(ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.1), grader_id="d")
    tracker = BudgetTracker()
    # the compound judge's own judge_many: its run config's tracker is the batch budget
    df = EscalationJudge(cheap, dear).judge_many(items(5), run_config=RunConfig(budget_tracker=tracker), progress=False)
    assert df["escalated"].all() and tracker.spent_usd == pytest.approx(5 * 0.101)


def test_pipeline_run_many_charges_every_unit_call():
    adapter = ScriptedAdapter(["Verdict: yes"], cycle=True, cost_per_call=0.01)
    pipeline = Pipeline(Layer(JudgeUnit("{candidate}", BooleanScale()), repeat=3) >> MeanPool(), adapter=adapter)
    tracker = BudgetTracker()
    df = pipeline.run_many([{"candidate": f"c{i}"} for i in range(10)], budget=tracker, progress=False)
    assert df.attrs["counts"]["scored"] == 10
    assert tracker.calls == 30 and tracker.spent_usd == pytest.approx(df["judge_cost_usd"].sum()) == pytest.approx(0.30)
    # as a judge, the pipeline drops the caller's tracker, but judge_many's budget still counts it
    tracker = BudgetTracker()
    df = judge_many(pipeline.as_judge("panel3"), items(4), run_config=RunConfig(budget_tracker=tracker), progress=False)
    assert df.attrs["counts"]["scored"] == 4 and tracker.spent_usd == pytest.approx(0.12)


def test_grade_many_charges_answers_and_judge_once_each():
    base = ScriptedAdapter(["answer"], cycle=True, cost_per_call=0.1)
    cand = ScriptedAdapter(["answer"], cycle=True, cost_per_call=0.2)
    judge = LLMJudge(ScriptedAdapter([VERDICT], cycle=True, cost_per_call=0.01))
    tracker = BudgetTracker()
    df = grade_many(
        PairedGrader(judge),
        base,
        cand,
        [f"q{i}" for i in range(5)],
        run_config=RunConfig(budget_tracker=tracker),
        progress=False,
    )
    assert df.attrs["counts"]["scored"] == 5
    assert tracker.calls == 15 and tracker.spent_usd == pytest.approx(5 * 0.31)  # never twice

    own, batch = BudgetTracker(), BudgetTracker()
    grade_many(
        ExactMatchJudge(), base, cand, ["q"], run_config=RunConfig(budget_tracker=own), budget=batch, progress=False
    )
    assert own.spent_usd == pytest.approx(0.3) and batch.spent_usd == pytest.approx(0.3)


# -- defect 2: a limit is not overshot by more than the calls in flight; paid replies are kept ---------


def _check_limited_run(df, tracker: BudgetTracker, limit: float, max_in_flight: int) -> int:
    n_scored = int((df["status"] == "scored").sum())
    exhausted = df["status"].eq("error") & df["error"].str.contains("budget exhausted", na=False)
    assert n_scored + int(exhausted.sum()) == len(df)  # every row: a result or "budget exhausted"
    assert 0 < n_scored < len(df)
    assert tracker.spent_usd == pytest.approx(df["judge_cost_usd"].sum())  # every paid call is in a row
    max_call = df.loc[df["status"] == "scored", "judge_cost_usd"].max()
    assert tracker.spent_usd <= limit + max_in_flight * max_call
    assert tracker.reserved_usd == 0.0 and tracker.in_flight == 0
    return n_scored


def test_judge_many_at_concurrency_64_stops_at_a_tiny_limit_and_keeps_every_paid_reply():
    limit = 0.005
    tracker = BudgetTracker(limit_usd=limit)
    with LoopbackServer(reply=VERDICT, latency_s=0.01) as server:
        judge = LLMJudge(priced(server))
        df = judge_many(
            judge, items(400), budget=tracker, concurrency=64, progress=False, run_config=RunConfig(max_tokens=64)
        )
        stats = server.stats()
    assert len(df) == 400 and list(df["id"]) == list(range(400))
    n_scored = _check_limited_run(df, tracker, limit, stats["max_in_flight"])
    assert stats["total"] == n_scored == tracker.calls  # each request that reached the server is a scored row
    # the estimate (prompt + max_tokens at the model's price) bounds each call: at most one call's overshoot
    assert tracker.spent_usd <= limit + df["judge_cost_usd"].max()


def test_pipeline_run_many_at_concurrency_64_with_a_tiny_limit_returns_every_paid_result():
    limit = 0.002
    with LoopbackServer(reply="Verdict: yes", latency_s=0.01) as server:
        pipeline = Pipeline(JudgeUnit("Is this right? {candidate}", BooleanScale()), adapter=priced(server))
        data = [{"id": i, "candidate": f"[item {i}] " + "word " * 50} for i in range(300)]
        df = pipeline.run_many(data, budget=limit, concurrency=64, progress=False)
        stats = server.stats()
    assert len(df) == 300
    budget = df.attrs["budget"]
    spent = budget["spent_usd"]
    n_scored = int((df["status"] == "scored").sum())
    assert stats["total"] == n_scored == budget["calls"] and n_scored > 0
    assert spent == pytest.approx(df["judge_cost_usd"].sum())
    assert spent <= limit + stats["max_in_flight"] * df["judge_cost_usd"].max()
    assert df.loc[df["status"] != "scored", "error"].str.contains("budget exhausted").all()
    assert df.loc[df["status"] == "scored", "verdict"].eq("yes").all()


def test_a_pipeline_refused_mid_item_keeps_its_paid_calls_in_the_row():
    adapter = ScriptedAdapter(["Verdict: yes"], cycle=True, cost_per_call=0.01)
    judge = JudgeUnit("{candidate}", BooleanScale())
    again = JudgeUnit("again {candidate}", BooleanScale())
    pipeline = Pipeline(judge >> again >> JudgeUnit("once more {candidate}", BooleanScale()), adapter=adapter)
    df = pipeline.run_many([{"candidate": "x"}], budget=0.015, progress=False)
    (row,) = df.to_dict("records")
    # two calls start while money is left ($0 and $0.01 < $0.015), the third is refused: an error row
    # that still reports the two paid calls
    assert row["status"] == "error" and "budget exhausted" in row["error"]
    assert row["calls"] == 2 and row["judge_cost_usd"] == pytest.approx(0.02)
    assert df.attrs["budget"]["spent_usd"] == pytest.approx(0.02) and len(adapter.calls) == 2


def test_unknown_price_estimates_nothing_but_still_stops_once_spent():
    # the reply costs money the adapter could not estimate (0.0): calls stop once spent >= limit
    adapter = ScriptedAdapter(lambda p, rc: LLMResponse(VERDICT, "x", "y"), cost_per_call=0.0)
    tracker = BudgetTracker(limit_usd=0.0)
    df = judge_many(LLMJudge(adapter), items(5), budget=tracker, progress=False)
    assert df.attrs["counts"]["error"] == 5 and adapter.calls == []


def test_the_last_call_past_the_limit_is_returned_not_raised():
    tracker = BudgetTracker(limit_usd=0.25)
    adapter = ScriptedAdapter(["a", "b", "c", "d"], cost_per_call=0.1)
    rc = RunConfig(budget_tracker=tracker)
    assert [adapter.complete(p, rc).content for p in ("1", "2", "3")] == ["a", "b", "c"]  # the 3rd passes $0.25
    assert tracker.spent_usd == pytest.approx(0.30)


def test_calls_wait_for_reservations_in_flight_rather_than_fail():
    # 8 threads share a $0.05 budget of $0.01 calls: exactly 5 calls are made, none refused while money is left
    tracker = BudgetTracker(limit_usd=0.05)
    adapter = ScriptedAdapter(["ok"], cycle=True, cost_per_call=0.01, latency_s=0.02)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker():
        for _ in range(3):
            try:
                adapter.complete("p", RunConfig(budget_tracker=tracker))
                result = "ok"
            except Exception as exc:
                result = type(exc).__name__
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 5 == len(adapter.calls)
    assert outcomes.count("BudgetExceededError") == 19
    assert tracker.spent_usd == pytest.approx(0.05) and not math.isnan(tracker.spent_usd)
