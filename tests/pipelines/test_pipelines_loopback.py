"""Pipelines and compound judges over real HTTP: the loopback OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from test_pipelines import VERBATIM_YAML  # the config, verbatim (tests/ is on sys.path)

from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.grading import EscalationJudge, LLMJudge, PairwiseJudge
from llm_connect.pipelines import from_config
from llm_connect.testing.loopback import LoopbackServer

ITEM = re.compile(r"\[item (\d+)\]")


def fact_checker(prompt: str) -> str:
    if "The verdict under review is:" in prompt:
        return "Explanation: the explanation holds.\nVerdict: yes"
    says = "yes" if "Spain" in prompt else "no"
    return f"Explanation: checked the claims.\nVerdict: {says}"


def adapter_for(server: LoopbackServer, **kwargs) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter("loopback-model", base_url=server.base_url, **kwargs)


def prompt_of(request) -> str:
    return request.body["messages"][-1]["content"]


def test_verbatim_config_makes_six_http_calls_per_item():
    with LoopbackServer(reply=fact_checker) as server:
        pipeline = from_config(yaml.safe_load(VERBATIM_YAML), adapter=adapter_for(server))
        items = [{"id": i, "candidate": f"[item {i}] Paris is in {'Spain' if i % 2 else 'France'}."}
                 for i in range(20)]
        frame = pipeline.run_many(items, concurrency=8, progress=False)
        stats = server.stats()
    assert stats["total"] == 6 * 20 and stats["by_outcome"] == {"ok": 120}
    assert frame["calls"].tolist() == [6] * 20
    assert frame["passed"].tolist() == [i % 2 == 0 for i in range(20)]
    assert frame["judge_tokens_in"].gt(0).all() and frame["judge_tokens_out"].gt(0).all()
    assert frame.attrs["totals"]["calls"] == 120


@pytest.mark.slow  # 23 s measured on 2 busy cores: out of the fast loop
def test_thousand_items_with_five_percent_failing_calls_lose_no_row():
    # 5% of calls answer 500 and the adapter does not retry, so the failures persist and must show as rows
    with LoopbackServer(reply=fact_checker, faults={"500": 0.05}, seed=11, latency_s=0.002) as server:
        adapter = adapter_for(server, max_retries=0)
        pipeline = from_config(yaml.safe_load(VERBATIM_YAML), adapter=adapter)
        items = [{"id": i, "candidate": f"[item {i}] The Seine flows through Paris."} for i in range(1000)]
        frame = pipeline.run_many(items, concurrency=64, progress=False)
        stats = server.stats()
        requests = server.requests
    assert len(frame) == 1000
    assert frame["id"].tolist() == list(range(1000))
    assert set(frame["status"]) <= {"scored", "error"}
    assert frame.attrs["counts"]["scored"] + frame.attrs["counts"]["error"] == 1000
    # exactly the items that met a 500 are error rows, each saying so
    failed_items = {int(ITEM.search(prompt_of(r)).group(1)) for r in requests if r.outcome == "500"}
    error_rows = set(frame.index[frame["status"] == "error"])
    assert failed_items and error_rows == failed_items
    assert frame.loc[sorted(error_rows), "error"].str.contains("ServerError").all()
    scored = frame[frame["status"] == "scored"]
    assert (scored["calls"] == 6).all() and (scored["verdict"] == "no").all()
    assert 0.1 < len(error_rows) / 1000 < 0.5  # ~1 - 0.95**6 of the items
    assert stats["max_in_flight"] > 1


def test_pairwise_and_cascade_call_counts_over_http():
    def reply(prompt: str) -> str:
        if "Answer A:" in prompt:
            a = prompt.split("Answer A:", 1)[1].split("Answer B:", 1)[0]
            return json.dumps({"winner": "A" if "Seine" in a else "B"})
        return json.dumps({"quality_score": 0.5 if "unsure" in prompt else 0.9, "notes": "ok"})

    with LoopbackServer(reply=reply) as server:
        adapter = adapter_for(server)
        pairwise = PairwiseJudge(adapter)
        items = [{"prompt": f"q{i}", "baseline": "Paris.", "candidate": "Paris, on the Seine."} for i in range(10)]
        frame = pairwise.judge_many(items, concurrency=4, progress=False)
        assert server.stats()["total"] == 20
        assert frame["quality_score"].tolist() == [1.0] * 10 and frame["consistent"].all()

        server.reset()
        cascade = EscalationJudge(LLMJudge(adapter, grader_id="cheap"), LLMJudge(adapter, grader_id="dear"))
        items = [{"prompt": "q", "baseline": "b", "candidate": "unsure" if i < 3 else "sure"} for i in range(10)]
        frame = cascade.judge_many(items, progress=False)
        assert server.stats()["total"] == 10 + 3
        assert frame["escalated"].tolist() == [True] * 3 + [False] * 7
        assert cascade.summary(frame).share_escalated == pytest.approx(0.3)
