"""Core value types and the adapter protocols. No I/O happens here.

- :class:`LLMResponse` (one call's reply and usage, with :class:`TokenLogprob` per token) and
  :class:`RunConfig` (how one call is made);
- :class:`BudgetTracker` (spend against a limit, with :class:`BudgetReservation` per call in flight),
  :func:`as_budget`, and the run budgets every adapter call is also charged to (:func:`budget_scope`,
  :func:`active_budgets`);
- the protocols an adapter satisfies: :class:`LLMAdapter` (and :class:`AsyncLLMAdapter`),
  :class:`EmbeddingAdapter` (and :class:`AsyncEmbeddingAdapter`).
"""

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
    """One generated token, its log-probability and the top alternatives at that position.

    Parameters
    ----------
    token : str
        The token's text.
    logprob : float
        Its natural-log probability (0.0 is certain).
    top : tuple of (str, float), default ()
        The most likely tokens at that position, each with its log-probability, as the model gave them (as
        many as :attr:`RunConfig.top_logprobs` asked for); empty when none were asked for.

    See Also
    --------
    LLMResponse : A reply's tokens are its ``logprobs``.
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class LLMResponse:
    """What one adapter call returned, with its usage.

    The first seven fields are pinned by the design; the rest are optional extras. The object is frozen
    (a value), and checked when made.

    Parameters
    ----------
    content : str
        The reply's text; for a trajectory, the final answer's text.
    adapter_id : str
        The adapter that made the call (e.g. ``"openai"``).
    model_id : str
        The model that replied.
    tokens_in : int, default 0
        Prompt tokens, the cached and cache-written ones included.
    tokens_out : int, default 0
        Generated tokens.
    cost_usd : float, default 0.0
        What the call cost, in USD (0.0 when the price is unknown or nothing was paid).
    latency_ms : float, default 0.0
        How long the call took, in milliseconds.
    logprobs : tuple of TokenLogprob, optional
        The generated tokens with their log-probabilities, when they were asked for
        (:attr:`RunConfig.top_logprobs`) and the model gives them; ``None`` otherwise.
    cached : bool, default False
        The whole reply came from the on-disk response cache and nothing was paid (not to be confused
        with ``tokens_cached``).
    finish_reason : str, optional
        Why generation stopped, as the provider says it (``"stop"``, ``"length"``, ...).
    raw : object, optional
        The provider's reply as it came (for audit); not compared and not shown in the repr.
    messages : sequence of mapping, optional
        A trajectory, when the reply is one: an agent's assistant messages with tool calls, the tool
        results and the final answer, as OpenAI chat messages (see :mod:`llm_connect.conversations`);
        kept as a tuple. ``None`` for a plain text reply.
    tokens_cached : int, default 0
        Prompt tokens the provider read from its prompt cache (OpenAI's
        ``usage.prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``).
    tokens_cache_written : int, default 0
        Prompt tokens the provider wrote to its prompt cache (Anthropic's ``cache_creation_input_tokens``).
        Both cache counts are part of ``tokens_in``, and ``cost_usd`` prices them at the cached and
        cache-write rates (:class:`~llm_connect.adapters.pricing.Price`).

    Attributes
    ----------
    total_tokens : int
        ``tokens_in + tokens_out``.

    Raises
    ------
    ValidationError
        When ``content`` is not a string, ``messages`` is not a sequence of mappings, a count, cost or
        latency is negative or not a number, or ``tokens_cached + tokens_cache_written > tokens_in``.

    See Also
    --------
    LLMAdapter : What returns it.
    RunConfig : How the call was made.

    Examples
    --------
    >>> reply = LLMResponse("Paris", "scripted", "demo", tokens_in=12, tokens_out=1)
    >>> reply.total_tokens
    13
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
        """``tokens_in + tokens_out``."""
        return self.tokens_in + self.tokens_out


# Two sums that differ by less than this are equal: ten calls of $0.01 fill a $0.10 limit.
_EPSILON_USD = 1e-12


class BudgetReservation:
    """Money set aside on a :class:`BudgetTracker` for one call in flight.

    Made by :meth:`BudgetTracker.reserve` (not by hand). When the call comes back, :meth:`settle` it
    with the call's actual cost (the difference to the estimate is released; it never raises: a reply
    that was paid for is kept); when the call failed or never started, :meth:`release` it. Either may be
    called more than once (only the first counts). As a context manager it is released on exit unless
    it was settled.

    Parameters
    ----------
    tracker : BudgetTracker
        The tracker the money is set aside on.
    amount_usd : float
        The estimated cost set aside, in USD.

    Attributes
    ----------
    done : bool
        Whether it was settled or released.

    See Also
    --------
    BudgetTracker.reserve : Makes one.

    Examples
    --------
    >>> tracker = BudgetTracker(limit_usd=1.0)
    >>> with tracker.reserve(0.10) as reservation:
    ...     reservation.settle(0.08)  # the call came back and cost $0.08
    >>> round(tracker.spent_usd, 2), tracker.reserved_usd
    (0.08, 0.0)
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
        """Record the call's actual cost on the tracker and release the reservation. Never raises.

        Parameters
        ----------
        cost_usd : float
            What the call cost, in USD (a negative or non-number cost counts as 0.0).
        """
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

    Pinned: :meth:`charge` adds the cost, then raises :class:`~llm_connect.errors.BudgetExceededError`
    if ``spent_usd > limit_usd``. :meth:`check` refuses a new call once the budget is spent
    (``spent_usd >= limit_usd``). ``limit_usd=None`` never refuses.

    Adapters use the reservation protocol instead, so a limit is overshot by no more than the calls in
    flight and a reply that was paid for is never thrown away: :meth:`reserve` an estimate before the call
    (refused once ``spent_usd + reserved_usd >= limit_usd``, so no call starts once the limit is reached),
    then :meth:`BudgetReservation.settle` it with the actual cost (never raises) or
    :meth:`BudgetReservation.release` it when the call failed.

    Parameters
    ----------
    limit_usd : float, optional
        The most that may be spent, in USD (a number >= 0). ``None``: no limit, only a running total.

    Attributes
    ----------
    limit_usd : float or None
        The limit, as a float.
    spent_usd : float
        What was charged and settled so far.
    reserved_usd : float
        Money set aside for calls in flight (their estimated cost).
    remaining_usd : float or None
        ``limit_usd - spent_usd`` (never below 0); ``None`` without a limit.
    calls : int
        How many charges (and settled calls) were recorded.
    in_flight : int
        How many reservations are open.
    exhausted : bool
        Whether the money is spent: no further call may start.

    Raises
    ------
    ValidationError
        When ``limit_usd`` is negative, NaN or not a number.

    See Also
    --------
    as_budget : A tracker from a limit in USD.
    budget_scope : Charge every adapter call made inside a block to a tracker.
    llm_connect.distributed.SharedBudget : One budget for many Ray workers.

    Examples
    --------
    >>> tracker = BudgetTracker(limit_usd=1.0)
    >>> tracker.charge(0.25)
    >>> tracker.remaining_usd
    0.75
    >>> tracker.charge(0.80)
    Traceback (most recent call last):
    ...
    llm_connect.errors.BudgetExceededError: budget exceeded: spent $1.050000 of a $1.000000 limit; ...
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
        """What was charged and settled so far, in USD."""
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
        """``limit_usd - spent_usd``, never below 0; ``None`` without a limit."""
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
        """Add a cost to the spend, then refuse if the limit is now exceeded.

        Parameters
        ----------
        cost_usd : float
            What a call cost, in USD (>= 0).

        Raises
        ------
        BudgetExceededError
            When ``spent_usd > limit_usd`` after adding it (the cost is recorded all the same).
        ValidationError
            When ``cost_usd`` is negative, NaN or not a number.
        """
        check_non_negative("cost_usd", cost_usd)
        with self._changed:
            self._spent += float(cost_usd)
            self._calls += 1
            spent = self._spent
            self._changed.notify_all()
        if self.limit_usd is not None and spent > self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def check(self) -> None:
        """Refuse if no further call may be made.

        Raises
        ------
        BudgetExceededError
            When ``spent_usd >= limit_usd``.
        """
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

        Parameters
        ----------
        estimated_usd : float, default 0.0
            The call's estimated cost, in USD (>= 0; 0.0 when the price is unknown).

        Returns
        -------
        BudgetReservation or None
            The reservation; ``None`` when only the reservations of calls in flight stand in the way
            (``spent + reserved >= limit`` but ``spent < limit``: wait for them to settle and try again).

        Raises
        ------
        BudgetExceededError
            When the money is spent.
        ValidationError
            When ``estimated_usd`` is negative, NaN or not a number.
        """
        check_non_negative("estimated_usd", estimated_usd)
        with self._lock:
            return self._try_reserve_locked(float(estimated_usd))

    def reserve(
        self, estimated_usd: float = 0.0, *, wait: bool = False, timeout_s: float | None = None
    ) -> BudgetReservation:
        """Reserve ``estimated_usd`` for one call before making it.

        Refuses when ``spent_usd + reserved_usd >= limit_usd``, so no call starts once the limit is
        reached. An estimate of 0.0 (price unknown) still stops new calls once ``spent_usd >= limit_usd``.

        Parameters
        ----------
        estimated_usd : float, default 0.0
            The call's estimated cost, in USD (>= 0).
        wait : bool, default False
            Wait for calls in flight to settle when only their reservations stand in the way, and refuse
            only once the money is spent (or ``timeout_s`` has passed).
        timeout_s : float, optional
            How long to wait at most, in seconds; ``None``: as long as it takes.

        Returns
        -------
        BudgetReservation
            The money set aside: settle or release it when the call is done.

        Raises
        ------
        BudgetExceededError
            When the call may not start (see above).
        ValidationError
            When ``estimated_usd`` is negative, NaN or not a number.
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
        """The tracker's state, read at once.

        Returns
        -------
        dict
            ``limit_usd``, ``spent_usd``, ``reserved_usd``, ``calls`` and ``exhausted``.
        """
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


def as_budget(budget: BudgetTracker | float | None) -> BudgetTracker | None:
    """A budget as a tracker: a :class:`BudgetTracker` as is, a number as a new tracker with that limit.

    Parameters
    ----------
    budget : BudgetTracker or float, optional
        A tracker, or a limit in USD (>= 0).

    Returns
    -------
    BudgetTracker or None
        The tracker; ``None`` for ``None``.

    Raises
    ------
    ValidationError
        When ``budget`` is neither a tracker nor a number, or is negative or NaN: the rule of every
        ``budget=``, which :func:`llm_connect._options.check_run_options` applies too.

    Examples
    --------
    >>> as_budget(2).limit_usd
    2.0
    >>> as_budget(None) is None
    True
    """
    if budget is None or isinstance(budget, BudgetTracker):
        return budget
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise ValidationError(
            f"budget must be a BudgetTracker or a limit in USD (a number), got {type(budget).__name__}")
    if math.isnan(budget) or budget < 0:
        raise ValidationError(f"budget must be >= 0 USD, got {budget!r}")
    return BudgetTracker(limit_usd=float(budget))


# The run budgets of the code running now (innermost last): set by the runner
# (llm_connect.runner) for each row, read by the adapters' one call wrapper. It travels into
# tasks and worker threads with the context (``_runtime`` copies it).
_ACTIVE_BUDGETS: ContextVar[tuple[BudgetTracker, ...]] = ContextVar("llm_connect_active_budgets", default=())


def active_budgets() -> tuple[BudgetTracker, ...]:
    """The trackers every adapter call made now is also charged to.

    Returns
    -------
    tuple of BudgetTracker
        The budgets of the enclosing :func:`budget_scope` blocks, innermost last; empty outside any.
    """
    return _ACTIVE_BUDGETS.get()


@contextmanager
def budget_scope(budget: BudgetTracker | float | None) -> Iterator[BudgetTracker | None]:
    """Charge every adapter call made inside the block to ``budget`` too, whatever its run config says.

    This is how a run makes a judge's spend count although the judge's call config has no budget
    tracker: each row runs inside the run budget's scope. It reaches the tasks and worker threads the
    block starts. Scopes nest (a call is charged to every enclosing budget, once each).

    Parameters
    ----------
    budget : BudgetTracker or float, optional
        A tracker, or a limit in USD (a new tracker). ``None``: the block charges nothing more.

    Yields
    ------
    BudgetTracker or None
        The tracker charged inside the block.

    Raises
    ------
    ValidationError
        When ``budget`` is neither a tracker nor a number, or is negative or NaN.

    See Also
    --------
    active_budgets : The trackers charged now.

    Examples
    --------
    >>> with budget_scope(0.50) as tracker:
    ...     active_budgets() == (tracker,)
    True
    >>> active_budgets()
    ()
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

    A frozen value, checked when made; :meth:`replace` makes a changed copy.

    Parameters
    ----------
    temperature : float, default 0.0
        The sampling temperature (>= 0).
    max_tokens : int, optional
        The most tokens to generate (> 0); ``None``: the adapter's default.
    model_params : mapping, default {}
        More of the provider's generation parameters (``seed``, ``top_p``, ...), sent as they are.
    budget_tracker : BudgetTracker, optional
        A budget every call made with this config is charged to (and refused by, once spent).
    timeout_s : float, optional
        How long one call may take, in seconds (> 0); ``None``: the adapter's default.
    system_prompt : str, optional
        A system message sent before the prompt.
    json_output : bool, default False
        Ask the provider for a JSON reply (its JSON mode), where it has one.
    top_logprobs : int, optional
        Ask for the log-probabilities of this many most likely tokens at each position (0 to 20), into
        :attr:`LLMResponse.logprobs`; ``None``: none.
    stable_prefix_chars : int or sequence of int, optional
        The part of the prompt that repeats across calls (a judge's instructions and a conversation's
        transcript so far), so that a provider's prompt cache can reuse it: an int ``N`` says the first
        ``N`` characters of the prompt are stable; a sequence of increasing offsets ``(a, b, ..., N)``
        also gives the boundaries of its parts (e.g. the end of the instructions, then the end of each
        earlier turn), and the last one ends the stable part. The Anthropic adapter sends the prompt as
        text blocks split at these offsets with ``cache_control`` on the block that ends at ``N``
        (Anthropic finds an earlier call's cached prefix at any of those block boundaries); OpenAI caches
        shared prefixes by itself and other adapters ignore it. It never changes the reply, and a prompt
        shorter than an offset is sent whole.

    Attributes
    ----------
    stable_breaks : tuple of int
        The offsets of ``stable_prefix_chars`` as a tuple (empty when unset).

    Raises
    ------
    ValidationError
        When a field is out of its range or of the wrong type (the message names the field).

    See Also
    --------
    LLMAdapter.complete : Takes it with every call.

    Examples
    --------
    >>> config = RunConfig(max_tokens=64, model_params={"seed": 7})
    >>> config.replace(temperature=0.7).temperature
    0.7
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
        """A copy with ``changes`` applied (``dataclasses.replace``), checked as a new one is.

        Parameters
        ----------
        **changes
            New values of fields, by name.

        Returns
        -------
        RunConfig
            The copy.
        """
        return replace(self, **changes)


@runtime_checkable
class LLMAdapter(Protocol):
    """What a judge calls a language model through: one prompt in, one :class:`LLMResponse` out.

    Any object with these attributes and this method is an adapter (a structural protocol; ``isinstance``
    checks that they are there). The package's own are in :mod:`llm_connect.adapters`; the scripted one
    for tests is :class:`~llm_connect.testing.ScriptedAdapter`.

    Attributes
    ----------
    adapter_id : str
        Names the kind of adapter (``"openai"``, ``"anthropic"``, ...): recorded with every observation.
    model_id : str
        Names the model: recorded with every observation, and what the ledger routes on.

    See Also
    --------
    AsyncLLMAdapter : An adapter that can also be awaited.
    llm_connect.adapters.OpenAICompatibleAdapter : An adapter for any OpenAI-compatible server.
    """

    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Send one prompt and wait for the reply.

        Parameters
        ----------
        prompt : str
            The prompt, sent as one user message.
        run_config : RunConfig
            How the call is made (temperature, token limit, budget, ...).

        Returns
        -------
        LLMResponse
            The reply with its usage and cost.
        """
        ...


@runtime_checkable
class AsyncLLMAdapter(Protocol):
    """An :class:`LLMAdapter` that can also be awaited (a run over many items prefers it).

    Attributes
    ----------
    adapter_id : str
        Names the kind of adapter.
    model_id : str
        Names the model.

    See Also
    --------
    LLMAdapter : The synchronous protocol.
    """

    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """Send one prompt and wait for the reply (see :meth:`LLMAdapter.complete`).

        Parameters
        ----------
        prompt : str
            The prompt.
        run_config : RunConfig
            How the call is made.

        Returns
        -------
        LLMResponse
            The reply with its usage and cost.
        """
        ...

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """The awaitable twin of :meth:`complete`: the same reply.

        Parameters
        ----------
        prompt : str
            The prompt.
        run_config : RunConfig
            How the call is made.

        Returns
        -------
        LLMResponse
            The reply with its usage and cost.
        """
        ...


@runtime_checkable
class EmbeddingAdapter(Protocol):
    """What an embedding judge calls an embedding model through: texts in, one vector per text out.

    Any object with this method is one (a structural protocol).

    See Also
    --------
    AsyncEmbeddingAdapter : An embedding adapter that can also be awaited.
    llm_connect.EmbeddingSimilarityJudge : The judge that uses one.
    llm_connect.testing.DeterministicEmbedder : A deterministic one for tests.
    """

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """Embed texts.

        Parameters
        ----------
        texts : sequence of str
            The texts.

        Returns
        -------
        sequence of sequence of float
            One vector per text, in order.
        """
        ...


@runtime_checkable
class AsyncEmbeddingAdapter(Protocol):
    """An :class:`EmbeddingAdapter` that can also be awaited.

    See Also
    --------
    EmbeddingAdapter : The synchronous protocol.
    """

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """Embed texts (see :meth:`EmbeddingAdapter.embed`).

        Parameters
        ----------
        texts : sequence of str
            The texts.

        Returns
        -------
        sequence of sequence of float
            One vector per text, in order.
        """
        ...

    async def aembed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """The awaitable twin of :meth:`embed`: the same vectors.

        Parameters
        ----------
        texts : sequence of str
            The texts.

        Returns
        -------
        sequence of sequence of float
            One vector per text, in order.
        """
        ...
