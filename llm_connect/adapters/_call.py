"""The one path every adapter call takes: cache -> budget (reserve) -> call -> charge (settle).

Written once and used by :class:`~llm_connect.adapters.ChatHTTPAdapter`
(async), :class:`~llm_connect.adapters.LlamaCppAdapter` (sync) and the
package's :class:`~llm_connect.testing.ScriptedAdapter`:

1. **cache**: with a response cache, a hit is returned at once (free: no
   budget is touched). While a :class:`~llm_connect.adapters._cache.ReplySession`
   is active (pytest's ``--llm-cache``), its cache stands in for the adapter's
   own, and in its ``"replay"`` mode a miss raises
   :class:`~llm_connect.errors.ReplayMissError` before anything is reserved or sent;
2. **reserve**: the call's estimated cost is reserved on every tracker that
   pays for it: the run config's ``budget_tracker`` and the run budgets in
   scope (:func:`llm_connect.core.budget_scope`), each once. A tracker whose
   money is spent refuses (:class:`~llm_connect.errors.BudgetExceededError`)
   and the call never starts; one that is only full of other calls'
   reservations makes this call wait for them to settle;
3. **call** the provider;
4. **settle** each reservation with the reply's actual cost: it never raises,
   so a reply that was paid for is always returned (a failed call releases its
   reservations instead). The reply is then stored in the cache.

So a budget's limit is overshot by no more than the calls in flight when it
was reached (by at most one call when the estimates are upper bounds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..core import BudgetReservation, BudgetTracker, LLMResponse, RunConfig, active_budgets
from ._cache import active_session

__all__ = ["DEFAULT_OUTPUT_TOKENS", "acall_paid", "call_paid", "paying_trackers"]

logger = logging.getLogger("llm_connect.adapters")

T = TypeVar("T")

#: Output tokens assumed for a cost estimate when neither the run config nor the adapter caps them.
DEFAULT_OUTPUT_TOKENS = 256

# How long a call waits between looks at a budget that other calls' reservations fill (grows to the max).
_POLL_FIRST_S = 0.001
_POLL_MAX_S = 0.02


def paying_trackers(run_config: RunConfig) -> tuple[BudgetTracker, ...]:
    """The trackers a call with ``run_config`` is charged to: its own and the run budgets in scope, once each."""
    out: list[BudgetTracker] = []
    for tracker in (run_config.budget_tracker, *active_budgets()):
        if tracker is not None and not any(tracker is t for t in out):
            out.append(tracker)
    return tuple(out)


def _try_reserve(trackers: Sequence[BudgetTracker], estimate: float) -> list[BudgetReservation] | None:
    """Reserve on every tracker or on none: the reservations, ``None`` to wait, or BudgetExceededError."""
    held: list[BudgetReservation] = []
    try:
        for tracker in trackers:
            reservation = tracker.try_reserve(estimate)
            if reservation is None:
                _release(held)
                return None
            held.append(reservation)
    except BaseException:
        _release(held)
        raise
    return held


def _release(held: Sequence[BudgetReservation]) -> None:
    for reservation in held:
        reservation.release()


def _settle(held: Sequence[BudgetReservation], cost_usd: float) -> None:
    for reservation in held:
        reservation.settle(cost_usd)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _reserve_sync(trackers: Sequence[BudgetTracker], estimate: float) -> list[BudgetReservation]:
    if not trackers:
        return []
    pause = _POLL_FIRST_S
    while True:
        held = _try_reserve(trackers, estimate)
        if held is not None:
            return held
        if _on_event_loop():  # never block a loop that may be the one settling the other calls
            for tracker in trackers:
                tracker.reserve(estimate).release()  # raises the refusal of the full tracker
            continue
        time.sleep(pause)
        pause = min(_POLL_MAX_S, pause * 2)


async def _reserve_async(trackers: Sequence[BudgetTracker], estimate: float) -> list[BudgetReservation]:
    if not trackers:
        return []
    pause = _POLL_FIRST_S
    while True:
        held = _try_reserve(trackers, estimate)
        if held is not None:
            return held
        await asyncio.sleep(pause)
        pause = min(_POLL_MAX_S, pause * 2)


def _cache_get(cache: Any, key: str | None, adapter_id: str, model_id: str) -> LLMResponse | None:
    if cache is None or key is None:
        return None
    t0 = time.perf_counter()
    hit = cache.get(key, adapter_id=adapter_id, model_id=model_id)
    if hit is None:
        return None
    return replace(hit, latency_ms=(time.perf_counter() - t0) * 1000.0)


def _cache_put(cache: Any, key: str | None, response: LLMResponse) -> None:
    if cache is None or key is None:
        return
    try:
        cache.put(key, response)
    except Exception as exc:  # the reply was paid for: keep it, say the cache failed
        logger.warning("llm_connect: could not store a reply in the response cache: %s: %s", type(exc).__name__, exc)


def _response_cost(result: Any) -> float:
    return getattr(result, "cost_usd", 0.0)


def _safe_cost(cost_of: Callable[[Any], float], result: Any) -> float:
    """The call's cost as a non-negative float; a cost that cannot be read counts as 0.0 (never raises)."""
    try:
        cost = cost_of(result)
    except Exception:  # the reply was paid for: keep it
        logger.warning("llm_connect: could not read the cost of a call; it is counted as 0.0", exc_info=True)
        return 0.0
    ok = isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost > 0
    return float(cost) if ok else 0.0


class _PaidCall:
    """The steps :func:`call_paid` and :func:`acall_paid` share around the call itself: the cache
    lookup (``hit``), releasing the reservation when the call fails, and settling the cost and
    caching the reply when it succeeds. Only the reservation wait and the call differ (blocking
    or awaited)."""

    def __init__(self, cache: Any, cache_key: Callable[[], str] | None, adapter_id: str, model_id: str,
                 cost_of: Callable[[Any], float], request: str | None = None) -> None:
        self.cost_of = cost_of
        self.session = active_session() if cache_key is not None else None
        if self.session is None:
            self.cache = cache
            self.key = cache_key() if cache is not None and cache_key is not None else None
            self.hit = _cache_get(cache, self.key, adapter_id, model_id)
            return
        assert cache_key is not None
        self.cache = self.session.cache
        self.key = self.session.key(cache_key())
        t0 = time.perf_counter()
        hit = self.session.replay(self.key, adapter_id=adapter_id, model_id=model_id)
        self.hit = None if hit is None else replace(hit, latency_ms=(time.perf_counter() - t0) * 1000.0)
        if self.hit is None and self.session.mode == "replay":
            raise self.session.miss(adapter_id=adapter_id, model_id=model_id, request=request, key=self.key)

    @contextlib.contextmanager
    def releasing(self, held: Sequence[BudgetReservation]) -> Iterator[None]:
        try:
            yield
        except BaseException:
            _release(held)
            raise

    def settle(self, held: Sequence[BudgetReservation], result: T) -> T:
        _settle(held, _safe_cost(self.cost_of, result))
        if self.session is not None:
            self.session.count_sent()
        if isinstance(result, LLMResponse):
            _cache_put(self.cache, self.key, result)
        return result


def call_paid(
    invoke: Callable[[], T],
    run_config: RunConfig,
    *,
    estimate_usd: float = 0.0,
    cache: Any = None,
    cache_key: Callable[[], str] | None = None,
    adapter_id: str = "",
    model_id: str = "",
    cost_of: Callable[[T], float] = _response_cost,
    request: str | None = None,
) -> T:
    """Make one blocking adapter call through cache, budget reservation and settlement.

    ``invoke()`` makes the call and returns its result, usually an
    :class:`LLMResponse` whose ``cost_usd`` is settled (``cost_of(result)``
    reads the cost of anything else, e.g. an embedding batch);
    ``estimate_usd`` is reserved before it (0.0 when the price is unknown);
    ``cache_key()`` computes the key when a ``cache`` is given or a reply session is active
    (responses only); ``request`` (the prompt) names the request in a replay miss.
    ``invoke`` must not itself make budgeted calls (it would wait on its own
    reservation).
    """
    call = _PaidCall(cache, cache_key, adapter_id, model_id, cost_of, request)
    if call.hit is not None:
        return call.hit  # type: ignore[return-value]
    held = _reserve_sync(paying_trackers(run_config), estimate_usd)
    with call.releasing(held):
        result = invoke()
    return call.settle(held, result)


async def acall_paid(
    invoke: Callable[[], Awaitable[T]],
    run_config: RunConfig,
    *,
    estimate_usd: float = 0.0,
    cache: Any = None,
    cache_key: Callable[[], str] | None = None,
    adapter_id: str = "",
    model_id: str = "",
    cost_of: Callable[[T], float] = _response_cost,
    request: str | None = None,
) -> T:
    """The awaitable twin of :func:`call_paid` (waits for reservations without blocking the loop)."""
    call = _PaidCall(cache, cache_key, adapter_id, model_id, cost_of, request)
    if call.hit is not None:
        return call.hit  # type: ignore[return-value]
    held = await _reserve_async(paying_trackers(run_config), estimate_usd)
    with call.releasing(held):
        result = await invoke()
    return call.settle(held, result)
