"""Core value types and the adapter protocols. No I/O happens here."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .errors import BudgetExceededError, ValidationError

__all__ = [
    "AsyncEmbeddingAdapter",
    "AsyncLLMAdapter",
    "BudgetReservation",
    "BudgetTracker",
    "EmbeddingAdapter",
    "LLMAdapter",
    "LLMResponse",
    "RunConfig",
    "TokenLogprob",
    "active_budgets",
    "as_budget",
    "budget_scope",
    "check_non_negative",
]


def check_non_negative(name: str, value: Any) -> None:
    """Check that ``value`` is a number ``>= 0`` (an amount of money or of tokens), as every tracker checks it.

    The one check of the amounts a :class:`BudgetTracker` (and a tracker kept elsewhere, such as
    :class:`~llm_connect.distributed.SharedBudget`) is given: a limit, a charge, an estimate.

    Parameters
    ----------
    name : str
        What the value is, for the message (``"cost_usd"``, ``"LLMResponse.tokens_in"``).
    value : Any
        The value to check.

    Raises
    ------
    ValidationError
        ``value`` is not an int or a float (a bool is not a number here), is NaN, or is negative.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number, got {type(value).__name__}")
    if math.isnan(value) or value < 0:
        raise ValidationError(f"{name} must be >= 0, got {value!r}")


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class LLMResponse:
    """What one adapter call returned, with its usage.

    The first seven fields are pinned by the design; the rest are optional extras.
    ``messages`` holds a trajectory when the reply is one (an agent's assistant messages
    with tool calls, the tool results and the final answer, as OpenAI chat messages;
    see :mod:`llm_connect.conversations`): ``content`` is then the final answer's text.
    ``None`` for a plain text reply.

    ``tokens_cached`` counts the prompt tokens the provider read from its prompt cache (OpenAI's
    ``usage.prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``) and
    ``tokens_cache_written`` those it wrote to it (Anthropic's ``cache_creation_input_tokens``);
    both are part of ``tokens_in`` and ``cost_usd`` prices them at the cached and cache-write
    rates (:class:`~llm_connect.adapters.pricing.Price`). ``cached`` is something else: the whole
    reply came from the on-disk response cache and nothing was paid.
    """

    content: str
    adapter_id: str
    model_id: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    # extras
    logprobs: tuple[TokenLogprob, ...] | None = None
    cached: bool = False
    finish_reason: str | None = None
    raw: Any = field(default=None, compare=False, repr=False)
    messages: tuple[Mapping[str, Any], ...] | None = field(default=None, hash=False)
    tokens_cached: int = 0
    tokens_cache_written: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise ValidationError(f"LLMResponse.content must be a str, got {type(self.content).__name__}")
        if self.messages is not None:
            if isinstance(self.messages, (str, bytes, Mapping)) or not isinstance(self.messages, Sequence):
                raise ValidationError("LLMResponse.messages must be a sequence of chat messages (mappings) or None, "
                                      f"got {type(self.messages).__name__}")
            for k, message in enumerate(self.messages):
                if not isinstance(message, Mapping):
                    raise ValidationError(f"LLMResponse.messages[{k}] must be a chat message (a mapping), "
                                          f"got {type(message).__name__}")
            object.__setattr__(self, "messages", tuple(self.messages))
        for name in ("tokens_in", "tokens_out", "cost_usd", "latency_ms", "tokens_cached", "tokens_cache_written"):
            check_non_negative(f"LLMResponse.{name}", getattr(self, name))
        if self.tokens_cached + self.tokens_cache_written > self.tokens_in:
            raise ValidationError(
                f"LLMResponse: tokens_cached ({self.tokens_cached}) + tokens_cache_written "
                f"({self.tokens_cache_written}) must be <= tokens_in ({self.tokens_in}): both are prompt tokens"
            )

    @property
    def total_tokens(self) -> int:
        return self.tokens_in + self.tokens_out


# Two sums that differ by less than this are equal: ten calls of $0.01 fill a $0.10 limit.
_EPSILON_USD = 1e-12


class BudgetReservation:
    """Money set aside on a :class:`BudgetTracker` for one call in flight.

    Made by :meth:`BudgetTracker.reserve`. When the call comes back,
    :meth:`settle` it with the call's actual cost (the difference to the
    estimate is released; it never raises: a reply that was paid for is kept);
    when the call failed or never started, :meth:`release` it. Either may be
    called more than once (only the first counts). As a context manager it is
    released on exit unless it was settled.
    """

    __slots__ = ("_done", "amount_usd", "tracker")

    def __init__(self, tracker: BudgetTracker, amount_usd: float) -> None:
        self.tracker = tracker
        self.amount_usd = amount_usd
        self._done = False

    @property
    def done(self) -> bool:
        """Whether it was settled or released."""
        return self._done

    def settle(self, cost_usd: float) -> None:
        """Record the call's actual cost on the tracker and release the reservation. Never raises."""
        self.tracker._finish(self, cost_usd, paid=True)

    def release(self) -> None:
        """Give the reservation back (the call failed or never started): nothing is charged."""
        self.tracker._finish(self, 0.0, paid=False)

    def __enter__(self) -> BudgetReservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"BudgetReservation(amount_usd={self.amount_usd:.6f}, {state})"


class BudgetTracker:
    """A thread-safe running total of spend against an optional limit.

    Pinned: ``charge()`` adds the cost, then raises :class:`BudgetExceededError`
    if ``spent_usd > limit_usd``. ``check()`` refuses a new call once the budget
    is spent (``spent_usd >= limit_usd``). ``limit_usd=None`` never refuses.

    Adapters use the reservation protocol instead, so a limit is overshot by no
    more than the calls in flight and a reply that was paid for is never thrown
    away: :meth:`reserve` an estimate before the call (refused once
    ``spent_usd + reserved_usd >= limit_usd``, so no call starts once the limit
    is reached), then :meth:`BudgetReservation.settle` it with the actual cost
    (never raises) or :meth:`BudgetReservation.release` it when the call failed.
    """

    def __init__(self, limit_usd: float | None = None) -> None:
        if limit_usd is not None:
            check_non_negative("limit_usd", limit_usd)
        self.limit_usd = None if limit_usd is None else float(limit_usd)
        self._spent = 0.0
        self._calls = 0
        self._reserved = 0.0
        self._open = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent

    @property
    def calls(self) -> int:
        """How many charges (and settled calls) were recorded."""
        with self._lock:
            return self._calls

    @property
    def reserved_usd(self) -> float:
        """Money set aside for calls in flight (their estimated cost)."""
        with self._lock:
            return self._reserved

    @property
    def in_flight(self) -> int:
        """How many reservations are open (calls started and not yet settled or released)."""
        with self._lock:
            return self._open

    @property
    def remaining_usd(self) -> float | None:
        if self.limit_usd is None:
            return None
        with self._lock:
            return max(0.0, self.limit_usd - self._spent)

    @property
    def exhausted(self) -> bool:
        """Whether the money is spent (``spent_usd >= limit_usd``): no further call may start."""
        if self.limit_usd is None:
            return False
        with self._lock:
            return self._spent + _EPSILON_USD >= self.limit_usd

    def charge(self, cost_usd: float) -> None:
        check_non_negative("cost_usd", cost_usd)
        with self._changed:
            self._spent += float(cost_usd)
            self._calls += 1
            spent = self._spent
            self._changed.notify_all()
        if self.limit_usd is not None and spent > self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` if no further call may be made."""
        if self.limit_usd is None:
            return
        spent = self.spent_usd
        if spent >= self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    # -- reservations ------------------------------------------------------------------

    def _refusal(self) -> BudgetExceededError:
        assert self.limit_usd is not None
        exc = BudgetExceededError(self._spent, self.limit_usd)
        exc.reserved_usd = self._reserved  # type: ignore[attr-defined]
        return exc

    def _try_reserve_locked(self, estimated_usd: float) -> BudgetReservation | None:
        if self.limit_usd is not None:
            if self._spent + _EPSILON_USD >= self.limit_usd:
                raise self._refusal()
            if self._spent + self._reserved + _EPSILON_USD >= self.limit_usd:
                if self._open == 0:  # pragma: no cover - reserved money always belongs to an open call
                    raise self._refusal()
                return None
        self._reserved += estimated_usd
        self._open += 1
        return BudgetReservation(self, estimated_usd)

    def try_reserve(self, estimated_usd: float = 0.0) -> BudgetReservation | None:
        """Reserve ``estimated_usd`` for one call, without waiting.

        Returns the reservation; ``None`` when only the reservations of calls in
        flight stand in the way (``spent + reserved >= limit`` but
        ``spent < limit``: wait for them to settle and try again); raises
        :class:`BudgetExceededError` when the money is spent.
        """
        check_non_negative("estimated_usd", estimated_usd)
        with self._lock:
            return self._try_reserve_locked(float(estimated_usd))

    def reserve(
        self, estimated_usd: float = 0.0, *, wait: bool = False, timeout_s: float | None = None
    ) -> BudgetReservation:
        """Reserve ``estimated_usd`` for one call before making it.

        Refuses with :class:`BudgetExceededError` when ``spent_usd +
        reserved_usd >= limit_usd``, so no call starts once the limit is
        reached. With ``wait=True`` a refusal that is only due to calls in
        flight waits (up to ``timeout_s``) for them to settle, and refuses only
        once the money is spent. An estimate of 0.0 (price unknown) still stops
        new calls once ``spent_usd >= limit_usd``.
        """
        check_non_negative("estimated_usd", estimated_usd)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while True:
                reservation = self._try_reserve_locked(float(estimated_usd))
                if reservation is not None:
                    return reservation
                remaining = None if deadline is None else deadline - time.monotonic()
                if not wait or (remaining is not None and remaining <= 0):
                    raise self._refusal()
                self._changed.wait(remaining)

    def _finish(self, reservation: BudgetReservation, cost_usd: float, *, paid: bool) -> None:
        cost = float(cost_usd) if paid and isinstance(cost_usd, (int, float)) and cost_usd > 0 else 0.0
        with self._changed:
            if reservation._done:
                return
            reservation._done = True
            self._open -= 1
            self._reserved = 0.0 if self._open == 0 else max(0.0, self._reserved - reservation.amount_usd)
            if paid:
                self._spent += cost
                self._calls += 1
            self._changed.notify_all()

    def snapshot(self) -> dict[str, Any]:
        """``limit_usd``, ``spent_usd``, ``reserved_usd``, ``calls`` and ``exhausted``, read at once."""
        with self._lock:
            spent, reserved, calls = self._spent, self._reserved, self._calls
        exhausted = self.limit_usd is not None and spent + _EPSILON_USD >= self.limit_usd
        return {
            "limit_usd": self.limit_usd,
            "spent_usd": spent,
            "reserved_usd": reserved,
            "calls": calls,
            "exhausted": exhausted,
        }

    def __repr__(self) -> str:
        return f"BudgetTracker(limit_usd={self.limit_usd!r}, spent_usd={self.spent_usd:.6f})"


def as_budget(budget: BudgetTracker | float | None, *, what: str = "budget") -> BudgetTracker | None:
    """``budget`` as a tracker: a :class:`BudgetTracker` as is, a number as a new tracker with that limit (USD)."""
    if budget is None or isinstance(budget, BudgetTracker):
        return budget
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise ValidationError(
            f"{what} must be a BudgetTracker or a limit in USD (a number), got {type(budget).__name__}"
        )
    if math.isnan(budget) or budget < 0:
        raise ValidationError(f"{what} must be >= 0 USD, got {budget!r}")
    return BudgetTracker(limit_usd=float(budget))


# The run budgets of the code running now (innermost last): set by the runner
# (llm_connect.runner) for each row, read by the adapters' one call wrapper. It travels into
# tasks and worker threads with the context (``_runtime`` copies it).
_ACTIVE_BUDGETS: ContextVar[tuple[BudgetTracker, ...]] = ContextVar("llm_connect_active_budgets", default=())


def active_budgets() -> tuple[BudgetTracker, ...]:
    """The trackers every adapter call made now is also charged to (see :func:`budget_scope`)."""
    return _ACTIVE_BUDGETS.get()


@contextmanager
def budget_scope(budget: BudgetTracker | float | None) -> Iterator[BudgetTracker | None]:
    """Charge every adapter call made inside the block to ``budget`` too, whatever its run config says.

    This is how the runner makes a judge's spend count although the
    judge's call config has no budget tracker: each row runs inside the run
    budget's scope. It reaches the tasks and worker threads the block starts.
    Scopes nest (a call is charged to every enclosing budget, once each).
    Yields the tracker (a number becomes a new tracker with that limit).
    """
    tracker = as_budget(budget)
    if tracker is None:
        yield None
        return
    current = _ACTIVE_BUDGETS.get()
    token = _ACTIVE_BUDGETS.set(current if any(t is tracker for t in current) else (*current, tracker))
    try:
        yield tracker
    finally:
        _ACTIVE_BUDGETS.reset(token)


def _check_prefix(value: Any) -> int | tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValidationError(f"RunConfig.stable_prefix_chars must be >= 0, got {value!r}")
        return value
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValidationError("RunConfig.stable_prefix_chars must be an int (the length of the stable prefix) or "
                              f"a sequence of increasing ints (its block boundaries), got {type(value).__name__}")
    out = tuple(value)
    previous = 0
    for k in out:
        if isinstance(k, bool) or not isinstance(k, int) or k <= previous:
            raise ValidationError("RunConfig.stable_prefix_chars must be increasing positive ints (character "
                                  f"offsets into the prompt), got {value!r}")
        previous = k
    return out


@dataclass(frozen=True)
class RunConfig:
    """How one call is made. The first four fields are pinned; the rest are extras.

    ``stable_prefix_chars`` marks the part of the prompt that repeats across calls (a judge's
    instructions and a conversation's transcript so far) so that a provider's prompt cache can
    reuse it: an int ``N`` says the first ``N`` characters of the prompt are stable; a sequence of
    increasing offsets ``(a, b, ..., N)`` also gives the boundaries of its parts (e.g. the end of
    the instructions, then the end of each earlier turn), and the last one ends the stable part.
    The Anthropic adapter sends the prompt as text blocks split at these offsets with
    ``cache_control`` on the block that ends at ``N`` (Anthropic finds an earlier call's cached
    prefix at any of those block boundaries); OpenAI caches shared prefixes by itself and other
    adapters ignore it. It never changes the reply, and a prompt shorter than an offset is sent
    whole.
    """

    temperature: float = 0.0
    max_tokens: int | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)  # seed, top_p, ...
    budget_tracker: BudgetTracker | None = None
    # extras
    timeout_s: float | None = None
    system_prompt: str | None = None
    json_output: bool = False
    top_logprobs: int | None = None
    stable_prefix_chars: int | tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValidationError("RunConfig.temperature must be a number")
        if math.isnan(self.temperature) or self.temperature < 0:
            raise ValidationError(f"RunConfig.temperature must be >= 0, got {self.temperature!r}")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens <= 0
        ):
            raise ValidationError(f"RunConfig.max_tokens must be a positive int or None, got {self.max_tokens!r}")
        if not isinstance(self.model_params, Mapping):
            raise ValidationError("RunConfig.model_params must be a mapping (e.g. {'seed': 0})")
        if self.timeout_s is not None and not (self.timeout_s > 0):
            raise ValidationError(f"RunConfig.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.top_logprobs is not None and not (0 <= self.top_logprobs <= 20):
            raise ValidationError("RunConfig.top_logprobs must be between 0 and 20")
        if self.stable_prefix_chars is not None:
            object.__setattr__(self, "stable_prefix_chars", _check_prefix(self.stable_prefix_chars))

    @property
    def stable_breaks(self) -> tuple[int, ...]:
        """The offsets of :attr:`stable_prefix_chars` as a tuple (empty when unset); the last ends the stable part."""
        value = self.stable_prefix_chars
        if value is None or value == 0:
            return ()
        return (value,) if isinstance(value, int) else value

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)


@runtime_checkable
class LLMAdapter(Protocol):
    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...


@runtime_checkable
class AsyncLLMAdapter(Protocol):
    """An adapter that can also be awaited (the runner prefers it)."""

    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...


@runtime_checkable
class EmbeddingAdapter(Protocol):
    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


@runtime_checkable
class AsyncEmbeddingAdapter(Protocol):
    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...

    async def aembed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...
