"""Calibration's entry points take ``(judges, items)`` in that order only (the old order is refused, saying the
order), items as a path, ``grader_id=`` and ``budget=`` (one limit for every judge; nothing paid past it).

Real HTTP against the loopback server on 127.0.0.1 with a priced OpenAI-compatible adapter. Since issue 35 the old
spellings are gone, not warned about.
"""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from llm_connect import BudgetTracker, ExactMatchJudge, LLMJudge, QualityLedger
from llm_connect.adapters import OpenAICompatibleAdapter, Price
from llm_connect.calibration import ScoredItems, calibrate, calibrate_pairwise, probe_judge, run_probes, score_items
from llm_connect.errors import ValidationError
from llm_connect.grading import FunctionJudge, PairwiseJudge, judge_many, tournament
from llm_connect.labelling import Labeller
from llm_connect.testing import LoopbackServer

MODEL = "priced-judge"
PRICES = {MODEL: Price(1.0, 2.0)}  # $ per million tokens in / out
VERDICT = '{"quality_score": 0.75, "notes": "fine"}'


def priced(server: LoopbackServer) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter(MODEL, base_url=server.base_url, prices=PRICES)


def items(n: int) -> list[dict]:
    return [{"id": i, "prompt": f"question {i}", "baseline": f"answer {i}",
             "candidate": f"answer {i}" if i % 3 else f"reply {i}", "human": bool(i % 3)} for i in range(n)]


def half(baseline: str, candidate: str) -> float:
    return 0.5


# -- (judge, items) everywhere, and no second spelling (issue 35: an unreleased package keeps none) ------------


def test_the_old_order_is_refused_saying_the_order():
    """Before issue 35, ``calibrate(items, judges)`` and its kin guessed the order, swapped and warned."""
    judges = {"exact": ExactMatchJudge(), "half": FunctionJudge(half, grader_id="half")}
    order = r"got items \((list|DataFrame)\) where the judges go: pass the judges first"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not warned about
        with pytest.raises(ValidationError, match=order):
            calibrate(items(12), judges, human="human", probes="length", n_boot=50, progress=False)
        with pytest.raises(ValidationError, match=order):
            score_items(pd.DataFrame(items(6)), [ExactMatchJudge()], human="human", progress=False)
        rows = [{"id": i, "prompt": f"q{i}", "candidate_a": "right", "candidate_b": "wrong", "human": "a"}
                for i in range(6)]
        judge = PairwiseJudge(OpenAICompatibleAdapter("judge-1", base_url="http://127.0.0.1:9/v1"), grader_id="pw")
        with pytest.raises(ValidationError, match=order):
            calibrate_pairwise(rows, [judge], n_boot=0, progress=False)
        answers = pd.DataFrame([{"prompt": f"q{p}", "model": m, "answer": f"{m} says {p}"}
                                for p in range(3) for m in ("m1", "m2", "m3")])
        with pytest.raises(ValidationError, match="a tournament needs a pairwise judge"):
            tournament(answers, judge, seed=1, progress=False)
    one = score_items(ExactMatchJudge(), pd.DataFrame(items(6)), progress=False)  # one judge is judges too
    assert one.attrs["judges"] == ["exact-match"]


def test_nothing_warns_in_the_one_order_and_items_may_be_a_path(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in items(5)), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_path = score_items([ExactMatchJudge()], path, progress=False)
        report = calibrate(ExactMatchJudge(), str(path), human="human", probes=None, n_boot=0, progress=False)
    assert from_path["score_exact-match"].tolist() == [0.0, 1.0, 1.0, 0.0, 1.0]
    assert report.scores["score_exact-match"].tolist() == from_path["score_exact-match"].tolist()


def test_score_items_is_the_one_way_to_score_several_judges():
    """``score_judges`` (a ScoredItems) and ``judge_items`` (calibration's wrapper of judge_many) are gone:
    score_items gives the frame, ScoredItems.from_frame its fields, judge_many runs one judge."""
    import llm_connect.calibration as calibration

    assert not hasattr(calibration, "score_judges") and not hasattr(calibration, "judge_items")
    frame = pd.DataFrame(items(6))
    scored = ScoredItems.from_frame(score_items({"exact": ExactMatchJudge()}, frame, human="human", progress=False))
    assert scored.judges == ["exact"] and scored.labels == ["human"]
    assert scored.frame["score_exact"].tolist() == judge_many(ExactMatchJudge(), frame, progress=False)[
        "quality_score"].tolist()



# -- grader_id= ----------------------------------------------------------------------------------------------


def test_labeller_takes_grader_id_only(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    judge_many(ExactMatchJudge(), items(4), ledger=ledger, task_type="qa", progress=False)
    new = Labeller(items(4), ledger=ledger, task_type="qa", annotator="ann", grader_id="exact-match")
    assert new.judge == "exact-match"
    with pytest.raises(TypeError, match="judge"):
        Labeller(items(4), ledger=ledger, task_type="qa", annotator="ann", judge="exact-match")



# -- budget= on every entry point that makes paid calls -------------------------------------------------


def _exhausted(status: pd.Series, notes: pd.Series) -> pd.Series:
    return status.eq("error") & notes.astype(str).str.contains("budget exhausted")


def test_calibrate_budget_stops_every_further_paid_call_over_http():
    with LoopbackServer(reply=VERDICT) as server:
        judges = {"first": LLMJudge(priced(server), grader_id="first"),
                  "second": LLMJudge(priced(server), grader_id="second")}
        tracker = BudgetTracker(limit_usd=0.0006)  # a few calls of ~$0.0001 each
        report = calibrate(judges, items(20), human="human", probes="length", n_boot=0, concurrency=1,
                           progress=False, budget=tracker)
        paid = server.stats()["total"]
    s = report.scores
    scored = int((s["status_first"] == "scored").sum() + (s["status_second"] == "scored").sum())
    assert 0 < scored < 40 and paid == tracker.calls  # every request that reached the server was paid
    probe = report.bias.frame
    assert paid == scored + int(probe["n"].sum())  # a probe judges nothing once the money is spent
    for name in judges:
        lost = s[f"status_{name}"] != "scored"
        assert _exhausted(s.loc[lost, f"status_{name}"], s.loc[lost, f"notes_{name}"]).all()
        assert s.loc[lost, f"score_{name}"].isna().all()  # never 0
    assert (s["status_second"] != "scored").all()  # one budget for both judges: the first spent it
    assert tracker.spent_usd <= 0.0006 + 0.0002  # at most one call in flight at concurrency 1


def test_a_float_budget_is_one_limit_for_all_judges_of_score_items():
    with LoopbackServer(reply=VERDICT) as server:
        judges = [LLMJudge(priced(server), grader_id=f"j{k}") for k in range(3)]
        frame = score_items(judges, items(10), concurrency=1, progress=False, budget=0.0004)
        paid = server.stats()["total"]
    scored = sum(int((frame[f"status_j{k}"] == "scored").sum()) for k in range(3))
    assert scored == paid and 0 < scored < 10  # one $0.0004 limit, not one per judge
    spent = sum(u["judge_cost_usd"] for u in frame.attrs["usage"].values())
    assert frame.attrs["budget"]["spent_usd"] == pytest.approx(spent) and frame.attrs["budget"]["calls"] == paid
    assert 0.0004 <= spent <= 0.0004 + 0.0002


def test_run_probes_probe_judge_and_judge_many_take_a_budget_over_http():
    with LoopbackServer(reply=VERDICT) as server:
        judge = LLMJudge(priced(server))
        tracker = BudgetTracker(limit_usd=0.0)
        bias = run_probes({"llm": judge}, items(5), probes="length,format", n_boot=0, progress=False,
                          budget=tracker)
        assert server.stats()["total"] == 0 and bias.frame["n"].tolist() == [0, 0]
        one = probe_judge(judge, items(5), "length", n_boot=0, progress=False, budget=0.0)
        assert server.stats()["total"] == 0 and one.stats.n == 0
        df = judge_many(judge, pd.DataFrame(items(5)), concurrency=1, progress=False, budget=0.0003)
        paid = server.stats()["total"]
    assert 0 < paid == int((df["status"] == "scored").sum()) < 5
    assert _exhausted(df.loc[df["status"] != "scored", "status"], df.loc[df["status"] != "scored", "error"]).all()
    assert df.attrs["budget"]["calls"] == paid


def test_calibrate_pairwise_takes_a_budget_over_http():
    rows = [{"id": i, "prompt": f"q{i}", "candidate_a": "right", "candidate_b": "wrong", "human": "a"}
            for i in range(8)]
    with LoopbackServer(reply=json.dumps({"winner": "A"})) as server:
        adapter = OpenAICompatibleAdapter(MODEL, base_url=server.base_url, prices=PRICES)
        judge = PairwiseJudge(adapter, grader_id="pw")
        report = calibrate_pairwise([judge], rows, n_boot=0, concurrency=1, progress=False, budget=0.0004)
        paid = server.stats()["total"]
    status = report.scores["status_pw"]
    assert 0 < int((status == "scored").sum()) < 8 and paid >= int((status == "scored").sum())
    assert _exhausted(status[status != "scored"], report.scores.loc[status != "scored", "notes_pw"]).all()
    assert report.scores.loc[status != "scored", "winner_pw"].isna().all()

