"""One name per concept (issue 24): ``(judge, items)`` everywhere, ``grader_id=``, the judge's tokens beside its
cost, one ``score_items``, ``budget=`` on every entry point that makes paid calls, one check of ``confidence`` and
of ``by`` (issue 25: group columns are the user's, many of them never crash), and ``ValidationError`` from stats.

Real HTTP against the loopback server on 127.0.0.1 with a priced OpenAI-compatible adapter. Since issue 35 the old
spellings are gone, not warned about: the old order is refused with a message saying the order.
"""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import llm_connect
from llm_connect import BudgetTracker, ExactMatchJudge, LLMJudge, QualityLedger
from llm_connect.adapters import OpenAICompatibleAdapter, Price
from llm_connect.calibration import ScoredItems, calibrate, calibrate_pairwise, probe_judge, run_probes, score_items
from llm_connect.errors import ValidationError
from llm_connect.frames import paired_frame, results_frame
from llm_connect.grading import FunctionJudge, PairwiseJudge, judge_many, tournament
from llm_connect.labelling import Labeller
from llm_connect.routing import RoutingPolicy
from llm_connect.stats import estimate_quality, labels_needed, leaderboard
from llm_connect.stats.agreement import bootstrap_ci, grouped_correlation
from llm_connect.stats.gate import score_interval
from llm_connect.stats.regression import ols
from llm_connect.stats.shift import paired_shift
from llm_connect.testing import LoopbackServer, assert_quality

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


# -- grader_id= --------------------------------------------------------------------------------------


def test_paired_frame_takes_grader_id_only(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    judge_many(ExactMatchJudge(), items(4), ledger=ledger, task_type="qa", progress=False)
    new = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(new) == 4
    with pytest.raises(TypeError, match="judge"):  # the old keyword is no second name
        paired_frame(ledger, "qa", judge="exact-match")
    with pytest.raises(ValidationError, match="needs grader_id="):
        paired_frame(ledger, "qa")


def test_labeller_takes_grader_id_only(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    judge_many(ExactMatchJudge(), items(4), ledger=ledger, task_type="qa", progress=False)
    new = Labeller(items(4), ledger=ledger, task_type="qa", annotator="ann", grader_id="exact-match")
    assert new.judge == "exact-match"
    with pytest.raises(TypeError, match="judge"):
        Labeller(items(4), ledger=ledger, task_type="qa", annotator="ann", judge="exact-match")


# -- judge_tokens_in / judge_tokens_out beside judge_cost_usd ---------------------------------------------


def test_result_frames_carry_the_judges_tokens_beside_its_cost_over_http():
    sent: list[str] = []

    def reply(prompt: str) -> str:
        sent.append(prompt)
        return VERDICT

    with LoopbackServer(reply=reply) as server:
        judge = LLMJudge(priced(server))
        df = judge_many(judge, items(4), concurrency=1, progress=False)
        results = [judge.judge(llm_connect.LLMResponse(r["baseline"], "b", "ref"),
                               llm_connect.LLMResponse(r["candidate"], "c", "cand"),
                               prompt=r["prompt"], run_config=llm_connect.RunConfig()) for r in items(2)]
        scored = score_items({"llm": judge}, items(3), progress=False)
    columns = list(df.columns)
    assert columns.index("judge_tokens_in") + 2 == columns.index("judge_tokens_out") + 1 \
        == columns.index("judge_cost_usd")  # beside the cost
    assert "tokens_in" not in columns and "tokens_out" not in columns  # once, under the judge's names
    # the loopback server counts the words it was sent and sent back: the tokens the judge call used
    assert df["judge_tokens_in"].tolist() == [len(p.split()) for p in sent[:4]]
    assert (df["judge_tokens_out"] == len(VERDICT.split())).all()
    assert df["judge_cost_usd"].tolist() == pytest.approx(
        [(i * 1.0 + o * 2.0) / 1e6 for i, o in zip(df["judge_tokens_in"], df["judge_tokens_out"], strict=True)])
    rf = results_frame(results)
    assert rf["judge_tokens_in"].tolist() == [len(p.split()) for p in sent[4:6]]
    assert rf["judge_tokens_out"].tolist() == [len(VERDICT.split())] * 2 and "tokens_out" not in rf.columns
    usage = ScoredItems.from_frame(scored).usage["llm"]
    assert usage["judge_tokens_in"] == sum(len(p.split()) for p in sent[6:9])
    assert usage["judge_tokens_out"] == 3 * len(VERDICT.split())


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


# -- one check of confidence, one reading of by ------------------------------------------------------------


def test_every_confidence_is_checked_the_same_way():
    frame = pd.DataFrame({"judge": [0.1, 0.9, 0.5, 0.7], "human": [0.0, 1.0, None, 1.0]})
    calls = [
        lambda c: estimate_quality(frame, judge="judge", human="human", confidence=c),
        lambda c: labels_needed(frame, judge="judge", human="human", width=0.1, confidence=c),
        lambda c: leaderboard([{"model_a": "x", "model_b": "y", "winner": "a"}], confidence=c, n_boot=0),
        lambda c: ols([1.0, 2.0, 3.0], np.ones((3, 1)), ["intercept"], confidence=c),
        lambda c: paired_shift([0.1, 0.2], [0.2, 0.3], confidence=c),
        lambda c: bootstrap_ci(lambda x: x.mean(axis=1), np.arange(3.0), confidence=c),
        lambda c: calibrate([ExactMatchJudge()], items(3), confidence=c, probes=None, progress=False),
        lambda c: RoutingPolicy(confidence=c),
        lambda c: score_interval([0.5, 1.0], confidence=c),
        lambda c: assert_quality([True] * 3, at_least=0.5, confidence=c),
    ]
    for call in calls:
        with pytest.raises(ValidationError, match=r"confidence must be between 0 and 1 .*did you mean 0.95"):
            call(95)
        with pytest.raises(ValidationError, match="confidence must be a number between 0 and 1"):
            call("0.95")


@pytest.mark.parametrize("column", ["method", "estimate", "se", "reason", "ci_low", "n_total"])
def test_estimate_quality_refuses_a_group_column_it_would_overwrite(column):
    """Before: by="method" came back holding "ppi++" / "human" / "judge", the user's groups gone."""
    data = pd.DataFrame({"judge": [0.2, 0.8, 0.6, 0.9] * 5, "human": [0, 1, None, 1] * 5,
                         column: ["g1", "g2"] * 10})
    with pytest.raises(ValidationError, match=rf"by names the column '{column}', which estimate_quality adds "
                                              r"itself .*Rename that column first"):
        estimate_quality(data, judge="judge", human="human", by=column)
    renamed = data.rename(columns={column: f"{column}_group"})
    out = estimate_quality(renamed, judge="judge", human="human", by=f"{column}_group")
    assert sorted(set(out[f"{column}_group"])) == ["g1", "g2"]  # the groups survive under the new name


def test_labels_needed_and_leaderboard_refuse_a_group_column_they_would_overwrite():
    data = pd.DataFrame({"judge": [0.2, 0.8] * 10, "human": [0, 1] * 10, "width": ["a", "b"] * 10})
    with pytest.raises(ValidationError, match="by names the column 'width', which labels_needed adds itself"):
        labels_needed(data, judge="judge", human="human", width=0.2, by="width")
    battles = pd.DataFrame({"model_a": ["x", "y"] * 5, "model_b": ["y", "x"] * 5, "winner": ["a", "b"] * 5,
                            "rating": ["easy", "hard"] * 5})
    with pytest.raises(ValidationError, match="by names the column 'rating', which leaderboard adds itself"):
        leaderboard(battles, by="rating", n_boot=0)


def test_many_high_cardinality_group_columns_are_numbered_by_the_groups_present():
    """Before: eight columns of 2,000 distinct values each crashed in numpy ("invalid dims")."""
    n = 2000  # groups, of two rows each
    rng = np.random.default_rng(0)
    key = np.arange(2 * n) // 2
    data = pd.DataFrame({f"g{k}": key * (k + 1) for k in range(8)})
    data["judge"] = rng.random(2 * n)
    data["human"] = (rng.random(2 * n) < 0.6).astype(float)
    by = [f"g{k}" for k in range(8)]
    out = estimate_quality(data, judge="judge", human="human", by=by, methods="judge")
    assert len(out) == n and out["g0"].tolist() == list(range(n)) and out["g7"].tolist() == list(range(0, 8 * n, 8))
    assert np.allclose(out["estimate"], data.groupby(key)["judge"].mean())  # each group's own mean
    planned = labels_needed(data, judge="judge", human="human", width=0.5, by=by)
    assert len(planned) == 2 * n  # ppi++ and human per group


# -- errors from stats ------------------------------------------------------------------------------------


def test_stats_raise_validation_errors_only():
    stats = Path(llm_connect.__file__).parent / "stats"
    for path in stats.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        raised = {node.exc.func.id for node in ast.walk(tree) if isinstance(node, ast.Raise)
                  and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)}
        assert raised <= {"ValidationError"}, (path.name, raised)
    with pytest.raises(ValidationError, match="no group column 'topic'"):
        grouped_correlation(pd.DataFrame({"score_a": [0.1], "score_b": [0.2]}), "a", "b", group="topic")
