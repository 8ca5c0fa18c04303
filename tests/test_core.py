"""Core types: LLMResponse, RunConfig, BudgetTracker, the protocols and the error tree."""

from __future__ import annotations

import threading

import pytest

import llm_connect.errors as errors
from llm_connect import BudgetExceededError, BudgetTracker, LLMResponse, RunConfig
from llm_connect.core import EmbeddingAdapter, LLMAdapter, active_budgets, as_budget, budget_scope
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


def test_a_call_is_refused_once_the_budget_is_spent_and_a_paid_reply_is_kept():
    tracker = BudgetTracker(limit_usd=0.25)
    adapter = ScriptedAdapter(["a", "b", "c", "d"], cost_per_call=0.1)
    rc = RunConfig(budget_tracker=tracker)
    adapter.complete("1", rc)
    adapter.complete("2", rc)
    # $0.20 < $0.25: the call starts; it ends at $0.30, and the reply that was paid for is returned
    assert adapter.complete("3", rc).content == "c"
    assert tracker.spent_usd == pytest.approx(0.30) and tracker.calls == 3
    with pytest.raises(BudgetExceededError):
        adapter.complete("4", rc)  # refused before the call
    assert len(adapter.calls) == 3


def test_reserve_refuses_once_spent_plus_reserved_reaches_the_limit():
    t = BudgetTracker(limit_usd=1.0)
    first = t.reserve(0.6)
    second = t.reserve(0.3)
    assert t.reserved_usd == pytest.approx(0.9) and t.in_flight == 2 and t.spent_usd == 0.0
    third = t.reserve(0.5)  # 0.9 < 1.0: may start (the overshoot is bounded by the calls in flight)
    with pytest.raises(BudgetExceededError):
        t.reserve(0.01)  # 1.4 >= 1.0
    assert t.try_reserve(0.01) is None  # only reservations stand in the way: wait and retry
    first.settle(0.1)  # cheaper than estimated: the difference is released
    second.release()  # the call failed: nothing charged
    assert t.spent_usd == pytest.approx(0.1) and t.reserved_usd == pytest.approx(0.5) and t.calls == 1
    fourth = t.reserve(0.2)
    third.settle(0.95)  # dearer than estimated and past the limit: recorded, never raised
    fourth.settle(0.0)
    assert t.spent_usd == pytest.approx(1.05) and t.calls == 3 and t.reserved_usd == 0.0 and t.in_flight == 0
    with pytest.raises(BudgetExceededError) as info:
        t.reserve(0.0)  # spent: even a call of unknown price (estimate 0) may not start
    assert info.value.spent_usd == pytest.approx(1.05) and info.value.limit_usd == 1.0
    assert t.exhausted


def test_settle_and_release_count_once_and_a_reservation_releases_on_exit():
    t = BudgetTracker(limit_usd=1.0)
    r = t.reserve(0.5)
    r.settle(0.2)
    r.settle(0.2)
    r.release()
    assert t.spent_usd == pytest.approx(0.2) and t.calls == 1 and t.in_flight == 0
    with t.reserve(0.3) as r2:
        assert t.reserved_usd == pytest.approx(0.3)
    assert r2.done and t.reserved_usd == 0.0 and t.spent_usd == pytest.approx(0.2)
    unlimited = BudgetTracker()
    for _ in range(3):
        unlimited.reserve(5.0).settle(5.0)
    assert unlimited.spent_usd == 15.0 and unlimited.snapshot()["exhausted"] is False


def test_reserve_with_wait_waits_for_calls_in_flight_to_settle():
    t = BudgetTracker(limit_usd=1.0)
    held = t.reserve(1.0)
    threading.Timer(0.05, held.settle, args=(0.4,)).start()
    r = t.reserve(0.5, wait=True, timeout_s=5.0)  # blocks until the first call settles at $0.40
    assert t.spent_usd == pytest.approx(0.4) and r.amount_usd == 0.5
    r.settle(0.6)
    with pytest.raises(BudgetExceededError):
        t.reserve(0.1, wait=True, timeout_s=5.0)  # spent: refused at once, no wait
    t2 = BudgetTracker(limit_usd=1.0)
    t2.reserve(1.0)
    with pytest.raises(BudgetExceededError):
        t2.reserve(0.1, wait=True, timeout_s=0.05)  # the call in flight never settles: refused after the timeout


def test_charge_keeps_its_pinned_semantics_beside_reservations():
    t = BudgetTracker(limit_usd=1.0)
    r = t.reserve(0.5)
    t.charge(0.9)  # reservations do not count for charge(): 0.9 <= 1.0
    with pytest.raises(BudgetExceededError):
        t.charge(0.2)  # adds, then raises
    assert t.spent_usd == pytest.approx(1.1)
    r.release()


def test_ten_cent_calls_fill_a_dollar_exactly():
    t = BudgetTracker(limit_usd=0.10)
    for _ in range(10):
        t.reserve(0.01).settle(0.01)
    with pytest.raises(BudgetExceededError):
        t.reserve(0.01)
    assert t.calls == 10


def test_as_budget_and_budget_scope():
    assert as_budget(None) is None
    tracker = BudgetTracker()
    assert as_budget(tracker) is tracker
    assert as_budget(2).limit_usd == 2.0
    for bad in (-1.0, float("nan"), True, "5"):
        with pytest.raises(ValueError):
            as_budget(bad)
    outer, inner = BudgetTracker(), BudgetTracker()
    adapter = ScriptedAdapter(["x"], cycle=True, cost_per_call=0.5)
    with budget_scope(outer):
        with budget_scope(inner), budget_scope(outer):  # nested, and the same tracker twice: charged once each
            assert active_budgets() == (outer, inner)
            adapter.complete("p", RunConfig(budget_tracker=inner))
        adapter.complete("p", RunConfig())
    adapter.complete("p", RunConfig())  # outside every scope: nobody pays
    assert active_budgets() == ()
    assert outer.spent_usd == 1.0 and inner.spent_usd == 0.5


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
    assert issubclass(errors.QualityNotMet, AssertionError)  # a failed quality gate fails a test as an assert does
    assert issubclass(errors.QualityInconclusive, AssertionError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.LLMConnectError)
    hint = str(errors.MissingDependencyError("llama_cpp", "local"))  # this project's install, never PyPI's llm-connect
    assert "pip install -e '.[local]'" in hint and "llm-connect-judges[local]" in hint
    assert "'llm-connect[" not in hint
