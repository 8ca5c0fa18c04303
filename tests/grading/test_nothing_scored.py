"""A judge that scores nothing: said with its first error, never a silent column of NaN.

``judge_many`` with a judge that fails on every row warns (logger ``llm_connect``) with the first error;
``align``, ``calibrate`` and the command line refuse such a run (``JudgeFailedError``, exit status 1) instead
of reporting "kept: no held-out improvement", a card that "leaves 100% of items unscored", or an exit 0.
The budget running out, or a stop, is not the judge failing: no warning, no refusal.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

from llm_connect import ExactMatchJudge, LLMJudge, ajudge_many, judge_many
from llm_connect.alignment import align
from llm_connect.calibration import calibrate, calibrate_pairwise
from llm_connect.errors import AdapterError, JudgeFailedError
from llm_connect.grading import PairwiseJudge, Rubric
from llm_connect.grading._judge_many import total_failure
from llm_connect.testing import LoopbackServer, ScriptedAdapter

ITEMS = [{"id": i, "prompt": f"Capital of country {i}?", "baseline": "Paris", "candidate": "Paris"} for i in range(4)]


def failing() -> LLMJudge:
    """A judge whose model cannot be reached: every call raises, as a missing model or a refused key does."""
    return LLMJudge(ScriptedAdapter([AdapterError("the model file is not installed")], cycle=True))


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "llm_connect" and r.levelno == logging.WARNING]


def test_judge_many_warns_with_the_first_error_when_every_row_fails(caplog):
    caplog.set_level(logging.WARNING, logger="llm_connect")
    df = judge_many(failing(), ITEMS, progress=False)
    assert (df["status"] == "error").all()  # the rows are still there, one per item, never dropped
    (message,) = warnings_of(caplog)
    assert "llm-judge scored none of the 4 items" in message and "the model file is not installed" in message


def test_the_async_twin_warns_too_and_unscored_rows_count_as_failures(caplog):
    import asyncio

    caplog.set_level(logging.WARNING, logger="llm_connect")
    mute = LLMJudge(ScriptedAdapter(["I cannot grade that."], cycle=True))  # a reply with no verdict, every row
    df = asyncio.run(ajudge_many(mute, ITEMS, progress=False))
    assert (df["status"] == "unscored").all()
    (message,) = warnings_of(caplog)
    assert "scored none of the 4 items" in message and "quality_score" in message


def test_no_warning_when_a_row_was_scored_or_the_budget_ran_out(caplog):
    caplog.set_level(logging.WARNING, logger="llm_connect")
    replies = [AdapterError("flaky"), '{"quality_score": 1}', AdapterError("flaky"), AdapterError("flaky")]
    df = judge_many(LLMJudge(ScriptedAdapter(replies)), ITEMS, progress=False, concurrency=1)
    assert (df["status"] == "scored").sum() == 1
    priced = LLMJudge(ScriptedAdapter(['{"quality_score": 1}'], cycle=True, cost_per_call=0.01))
    broke = judge_many(priced, ITEMS, progress=False, budget=0.0)
    assert (broke["status"] == "error").all() and broke["error"].str.contains("budget exhausted").all()
    assert judge_many(failing(), [], progress=False).empty
    assert warnings_of(caplog) == []


def test_total_failure_reads_the_statuses():
    assert total_failure([], []) is None
    assert total_failure(["error", "unscored"], ["boom", "no verdict"]) == "boom"
    assert total_failure(["error", "scored"], ["boom", None]) is None
    assert total_failure(["error", "abstained"], ["boom", None]) is None  # an abstention is a decision
    assert total_failure(["error", "error"], ["budget exhausted: not attempted", "boom"]) == "boom"
    assert total_failure(["error"], ["budget exhausted before this row finished"]) is None
    assert total_failure(["unscored"], [None]) == "no reason given"


def labelled(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    polite = (rng.random(n) < 0.5).astype(int)
    polite[:3], polite[3:6] = 1, 0
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "prompt": [f"message {i}" for i in range(n)],
                         "candidate": [("thanks, happy to help " if p else "go away ") + str(i)
                                       for i, p in enumerate(polite)], "human": polite})


def test_align_refuses_a_judge_that_scores_nothing_before_trying_any_candidate():
    adapter = ScriptedAdapter([AdapterError("the model file is not installed")], cycle=True)
    judge = LLMJudge(adapter, rubric=Rubric("Is the reply polite?", reference=False))
    data = labelled()
    with pytest.raises(JudgeFailedError, match=r"scored none of the 40 items.*the model file is not installed") as info:
        align(judge, data, human="human", progress=False, concurrency=1)
    assert info.value.judge == "llm-judge" and info.value.n == 40
    assert len(adapter.calls) == len(data)  # the original's one pass, then nothing: no candidate was judged


def test_calibrate_refuses_before_the_next_judge_runs_and_pairwise_too():
    after = ScriptedAdapter(['{"quality_score": 1}'], cycle=True)
    with pytest.raises(JudgeFailedError, match="judge llm-judge scored none of the 4 items"):
        calibrate([failing(), LLMJudge(after, grader_id="after")], ITEMS, progress=False, probes="length",
                  n_boot=0)
    assert after.calls == []  # refused at once: no judge after it, no probe, pays anything
    pairs = [{"prompt": f"q{i}", "candidate_a": "x", "candidate_b": "y", "human": "a"} for i in range(4)]
    broken = PairwiseJudge(ScriptedAdapter([AdapterError("endpoint down")], cycle=True), grader_id="pw")
    with pytest.raises(JudgeFailedError, match=r"judge pw scored none of the 4 items.*endpoint down"):
        calibrate_pairwise([broken], pairs, n_boot=0, progress=False)


def test_the_command_line_align_exits_1_with_the_first_error(tmp_path, capsys):
    from llm_connect.cli import main

    path = tmp_path / "labels.jsonl"
    labelled().to_json(path, orient="records", lines=True)
    rubric = tmp_path / "polite.yaml"
    Rubric("Is the reply polite?", reference=False).to_yaml(rubric)
    with LoopbackServer(reply=json.dumps({"no": "verdict"})) as server:
        code = main(["align", str(path), "--judge", "openai:loopback-model", "--base-url", server.base_url,
                     "--human", "human", "--rubric", str(rubric), "--out", str(tmp_path / "out"), "--no-progress",
                     "--no-cache"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("llm-connect align: error: judge llm-judge scored none of the 40 "
                                               "items"), err  # one line: the refusal, no warning before it
    assert "quality_score" in err[0]
    assert not (tmp_path / "out" / "alignment.csv").exists()


def test_a_judge_that_scores_some_items_is_measured_as_before():
    exact = calibrate([ExactMatchJudge()], [*ITEMS, {"id": 9, "prompt": "q", "baseline": None, "candidate": "x"}],
                      progress=False, probes=None, n_boot=0)
    assert exact.meta.usage["exact-match"]["scored"] == 4 and exact.meta.usage["exact-match"]["error"] == 1
