"""End to end with the embedded local LLM (SmolLM2-135M, offline): the run completes, every item accounted for."""

from __future__ import annotations

import pytest

from llm_connect import BudgetTracker, RunConfig
from llm_connect.pipelines import from_config

pytestmark = pytest.mark.local_models

# The pipeline (3 judges with explanations, each verified, majority vote), with short replies and one
# retry so the tiny model's rambling stays cheap.
CONFIG = {
    "pipeline": [
        {"layer": {"unit": {"type": "categorical-judge",
                            "prompt": "Does this response contain factual errors? Response: {candidate}",
                            "categories": ["yes", "no"], "explanation": True, "retries": 1, "max_tokens": 60},
                   "repeat": 3}},
        {"layer": {"unit": {"type": "verify",
                            "prompt": "Check that the explanation correctly identifies factual errors. "
                                      "Explanation: {previous.explanation} Response: {candidate}",
                            "retries": 1, "max_tokens": 40}}},
        {"type": "max-pool"},
    ],
    "threshold": 0.7,
}


def test_local_model_runs_the_pipeline_to_the_end(smol):
    adapter = smol  # the session's loaded SmolLM2 (tests/conftest.py)
    pipeline = from_config(CONFIG, adapter=adapter)
    items = [{"id": 0, "candidate": "Paris is the capital of France."},
             {"id": 1, "candidate": "The sun orbits the Earth once a day."}]
    tracker = BudgetTracker()  # the adapter charges it once per call: an independent call count
    frame = pipeline.run_many(items, concurrency=2, progress=False, run_config=RunConfig(budget_tracker=tracker))

    assert frame["id"].tolist() == [0, 1]
    assert set(frame["status"]) <= {"scored", "unscored"}
    for _, row in frame.iterrows():
        if row["status"] == "scored":
            assert 0.0 <= row["quality_score"] <= 1.0 and row["verdict"] in ("yes", "no")
        else:
            assert "no verdict" in row["error"]  # unscored, with the reason
        trace = row["trace"]
        expected = 0
        for k in range(3):
            judge = [r for r in trace if r.node == f"judge[{k}]"]
            verify = [r for r in trace if r.node == f"verify[{k}]"]
            judge_ok = judge[-1].status == "ok"
            # a judge: attempts until one parses, at most 1 + retries
            assert [r.status for r in judge] == ["unparsed"] * (len(judge) - 1) + [judge[-1].status]
            assert len(judge) == (judge[-1].attempt + 1) if judge_ok else len(judge) == 2
            expected += len(judge)
            if judge_ok:
                assert 1 <= len(verify) <= 2
                expected += len(verify)
            else:  # the verifier of a judge without a verdict makes no call
                assert [r.status for r in verify] == ["skipped"]
        assert row["calls"] == trace.calls == expected
        assert 3 <= expected <= 12
    assert tracker.calls == frame["calls"].sum()
    assert frame["judge_tokens_in"].gt(0).all()
