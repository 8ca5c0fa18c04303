"""Core types: LLMResponse, RunConfig, BudgetTracker, the protocols and the error tree."""

from __future__ import annotations

import threading

import pytest

import llm_connect.errors as errors
from llm_connect import BudgetExceededError, BudgetTracker, LLMResponse, RunConfig
from llm_connect.core import EmbeddingAdapter, LLMAdapter
from llm_connect.testing import DeterministicEmbedder, ScriptedAdapter


def test_llm_response_pinned_fields_and_defaults():
    r = LLMResponse("hi", "a", "m")
    assert (r.content, r.adapter_id, r.model_id) == ("hi", "a", "m")
    assert (r.tokens_in, r.tokens_out, r.cost_usd, r.latency_ms) == (0, 0, 0.0, 0.0)
    assert r.logprobs is None and r.cached is False
    with pytest.raises(AttributeError):
        r.content = "x"  # type: ignore[misc]


def test_llm_response_rejects_negative_usage():
    with pytest.raises(ValueError, match="tokens_in"):
        LLMResponse("x", "a", "m", tokens_in=-1)
    with pytest.raises(ValueError, match="content"):
        LLMResponse(None, "a", "m")  # type: ignore[arg-type]


def test_run_config_pinned_defaults():
    rc = RunConfig()
    assert rc.temperature == 0.0 and rc.max_tokens is None and dict(rc.model_params) == {} and rc.budget_tracker is None
    assert rc.replace(temperature=0.5).temperature == 0.5 and rc.temperature == 0.0


@pytest.mark.parametrize("kwargs", [{"temperature": -1}, {"max_tokens": 0}, {"model_params": [1]}, {"timeout_s": 0}])
def test_run_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        RunConfig(**kwargs)


def test_budget_tracker_charge_adds_then_raises_with_spent_and_limit():
    t = BudgetTracker(limit_usd=1.0)
    t.charge(0.6)
    t.charge(0.4)  # exactly at the limit: not exceeded
    assert t.spent_usd == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError) as info:
        t.charge(0.25)
    assert t.spent_usd == pytest.approx(1.25)  # the cost was added before raising
    assert "1.250000" in str(info.value) and "1.000000" in str(info.value)
    assert info.value.spent_usd == pytest.approx(1.25) and info.value.limit_usd == 1.0


def test_budget_tracker_without_limit_never_raises():
    t = BudgetTracker()
    for _ in range(100):
        t.charge(10.0)
    t.check()
    assert t.spent_usd == 1000.0 and t.remaining_usd is None


def test_budget_tracker_is_thread_safe():
    t = BudgetTracker()

    def spend():
        for _ in range(5000):
            t.charge(0.001)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert t.calls == 40_000
    assert t.spent_usd == pytest.approx(40.0)


def test_a_call_is_refused_once_the_budget_is_spent():
    tracker = BudgetTracker(limit_usd=0.25)
    adapter = ScriptedAdapter(["a", "b", "c", "d"], cost_per_call=0.1)
    rc = RunConfig(budget_tracker=tracker)
    adapter.complete("1", rc)
    adapter.complete("2", rc)
    with pytest.raises(BudgetExceededError):
        adapter.complete("3", rc)  # charged 0.30 > 0.25 after the call
    with pytest.raises(BudgetExceededError):
        adapter.complete("4", rc)  # refused before the call
    assert len(adapter.calls) == 3


def test_budget_tracker_rejects_negative():
    with pytest.raises(ValueError):
        BudgetTracker(-1)
    with pytest.raises(ValueError):
        BudgetTracker().charge(-0.5)


def test_fakes_satisfy_the_protocols():
    assert isinstance(ScriptedAdapter(["x"]), LLMAdapter)
    assert isinstance(DeterministicEmbedder(), EmbeddingAdapter)


def test_scripted_adapter_records_calls_and_plays_faults():
    boom = errors.ServerError("boom", status=500)
    adapter = ScriptedAdapter(["one", boom, "three"])
    rc = RunConfig()
    assert adapter.complete("p1", rc).content == "one"
    with pytest.raises(errors.ServerError):
        adapter.complete("p2", rc)
    assert adapter.complete("p3", rc).content == "three"
    assert adapter.prompts == ["p1", "p2", "p3"]
    with pytest.raises(errors.LLMConnectError, match="ran out of replies"):
        adapter.complete("p4", rc)


def test_deterministic_embedder_is_deterministic_and_meaningful():
    e = DeterministicEmbedder(dim=64)
    a, b, c = e.embed(["the cat sat on the mat", "the cat sat on the mat", "quantum chromodynamics"])
    assert a == b and len(a) == 64
    dot = sum(x * y for x, y in zip(a, c, strict=True))
    assert dot < 0.5


def test_error_tree_subclasses_the_builtins_the_contracts_name():
    assert issubclass(errors.ValidationError, ValueError)
    assert issubclass(errors.JudgeReplyError, ValueError)
    assert issubclass(errors.EmbeddingShapeError, ValueError)
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.MissingDependencyError, ImportError)
    assert issubclass(errors.AdapterTimeoutError, TimeoutError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.LLMConnectError)
    assert "pip install 'llm-connect[local]'" in str(errors.MissingDependencyError("llama_cpp", "local"))
