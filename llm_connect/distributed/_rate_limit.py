"""One rate limit for a whole cluster: :class:`RateLimit`, the limiter's schedule and each actor's permits.

The limiter is one small Ray actor holding a :class:`Schedule` (GCRA, a virtual-time token bucket); each
grading actor holds :class:`Permits`, a span of that schedule spent one item's slot at a time, and
:func:`gated` makes a row's work wait for its slot. Why the burst bound holds is told in
:mod:`llm_connect.distributed` ("One rate limit for the cluster").
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..items import ITEM_COLUMNS

__all__ = ["CHARS_PER_TOKEN", "Permits", "RateLimit", "Schedule", "estimated_tokens", "gated"]

#: Characters per token when a request's tokens are estimated before it is sent.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class RateLimit:
    """A limit for the whole cluster: requests and tokens per minute, shared by every actor of a job.

    Enforced by one small Ray actor (the limiter) on one schedule, whatever the number of actors: in any
    window of ``W`` seconds the items released make at most ``W*r + B + 1`` requests (``r`` a second,
    ``B`` = :meth:`burst_requests`); see :mod:`llm_connect.distributed`. A dict with the same keys is
    accepted wherever a ``RateLimit`` is (:meth:`of`).

    Parameters
    ----------
    requests_per_minute : float, optional
        Requests a minute across the cluster; ``None`` leaves requests unlimited.
    tokens_per_minute : float, optional
        Tokens (in and out) a minute across the cluster; ``None`` leaves tokens unlimited. At least one of
        the two must be set.
    block : int, default 8
        Requests an actor takes from the limiter per round trip (lowered for small limits so the endpoint
        sees at most the limit +5% in any minute).
    requests_per_item : int, default 1
        The calls the judge makes per item (a compound judge's count).
    output_tokens : int, default 256
        Tokens assumed for a reply when a request's tokens are estimated (the estimate is settled with the
        reply's real count after the call).

    Raises
    ------
    ValidationError
        Neither limit is set, a limit is not a finite number > 0, or ``block``, ``requests_per_item`` or
        ``output_tokens`` is not an int in range.

    See Also
    --------
    llm_connect.distributed.grade_dataset : takes it as ``rate_limit=``.
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    block: int = 8
    requests_per_item: int = 1
    output_tokens: int = 256

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise ValidationError(f"RateLimit: {name} must be None or a number > 0, got {value!r}")
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValidationError("RateLimit: set requests_per_minute=, tokens_per_minute= or both "
                                  "(pass rate_limit=None for no limit)")
        for name, low in (("block", 1), ("requests_per_item", 1), ("output_tokens", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(f"RateLimit: {name} must be an int >= {low}, got {value!r}")

    @classmethod
    def of(cls, value: RateLimit | Mapping[str, Any] | None) -> RateLimit | None:
        """``value`` as a :class:`RateLimit` (a dict of its fields is accepted; ``None`` stays ``None``).

        Parameters
        ----------
        value : RateLimit or mapping or None
            The limit, or its fields.

        Returns
        -------
        RateLimit or None
            The limit.

        Raises
        ------
        ValidationError
            Fields that do not make a limit.
        """
        if value is None or isinstance(value, RateLimit):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValidationError(f"rate_limit: unknown key(s) {unknown}; use {sorted(cls.__dataclass_fields__)}")
            return cls(**value)
        raise ValidationError(f"rate_limit must be a RateLimit, a dict or None, got {type(value).__name__}")

    def slot_seconds(self, tokens: float) -> float:
        """The time one item's calls take on the shared schedule: the larger of its request and token shares.

        Parameters
        ----------
        tokens : float
            The item's estimated tokens.

        Returns
        -------
        float
            Seconds.
        """
        seconds = 0.0
        if self.requests_per_minute is not None:
            seconds = self.requests_per_item * 60.0 / self.requests_per_minute
        if self.tokens_per_minute is not None:
            seconds = max(seconds, tokens * 60.0 / self.tokens_per_minute)
        return seconds

    def block_requests(self) -> int:
        """Requests per round trip to the limiter: ``block``, at most 1/20 of a minute's requests (at least 1).

        Returns
        -------
        int
            The requests.
        """
        if self.requests_per_minute is None:
            return self.block
        return max(1, min(self.block, int(self.requests_per_minute / 20.0) - 1))

    def burst_requests(self) -> int:
        """``B`` in the burst bound: in any ``W`` seconds the permits let at most ``W*r + B + 1`` requests go
        (``r`` requests a second). :meth:`block_requests`, or ``requests_per_item`` when an item makes more
        calls than a block holds (its calls go together).

        Returns
        -------
        int
            ``B``.
        """
        return max(self.block_requests(), self.requests_per_item)

    def block_seconds(self) -> float:
        """The span of the schedule an actor takes per round trip: ``block_requests()`` requests' worth (at
        least one item's); with a token limit only, a second's worth.

        Returns
        -------
        float
            Seconds.
        """
        if self.requests_per_minute is None:
            return 1.0
        return self.burst_requests() * 60.0 / self.requests_per_minute

    def late_seconds(self) -> float:
        """How late an item's slot may still be used (else it is dropped): the time of
        ``B + 1 - requests_per_item`` requests, so that a slot used late and the next ones used on time
        stay within the burst bound (see :mod:`llm_connect.distributed`); with a token limit only, a second.

        Returns
        -------
        float
            Seconds.
        """
        if self.requests_per_minute is None:
            return 1.0
        return (self.burst_requests() + 1 - self.requests_per_item) * 60.0 / self.requests_per_minute


class Schedule:
    """The shared limiter's state (a Ray actor holds one): the time at which the schedule is next free.

    ``grant(seconds)`` reserves the next ``seconds`` of the schedule and returns how long from now
    they start. Calls are served one at a time (a sync Ray actor), so grants never overlap.
    Offsets, not clock readings, cross the wire: clocks of different machines need not agree.
    """

    def __init__(self) -> None:
        self.next_free = 0.0
        self.grants = 0

    def grant(self, seconds: float) -> float:
        now = time.monotonic()
        start = max(now, self.next_free)
        self.next_free = start + float(seconds)
        self.grants += 1
        return start - now

    def count(self) -> int:
        """Round trips served so far (what the benchmark reports)."""
        return self.grants


class Permits:
    """One actor's side of the shared limit: a span of the schedule, spent one item's slot at a time.

    Every slot lies inside a span the limiter granted: the limiter's answer is an offset from the moment it
    read its clock, somewhere within the round trip, so the actor takes the part of the span that is granted
    whenever that moment was (its start at the end of the round trip, its end as if the round trip took no
    time) and asks for the round trip's length more next time. Slots of all actors therefore never overlap
    in time (the machines' monotonic clocks need not agree). An item's slot is used from its start until
    ``late_seconds()`` after it, or dropped.
    """

    def __init__(self, limiter: Any, limit: RateLimit) -> None:
        self.limiter = limiter
        self.limit = limit
        self.block_s = limit.block_seconds()  # the schedule taken per round trip
        self.late_s = limit.late_seconds()  # how late a slot may still be used
        self.cur = 0.0
        self.end = 0.0
        self.rtt = 0.0  # the last round trip to the limiter: asked for on top of a span, as it is lost
        self.debt = 0.0  # seconds this actor owes: calls that used more tokens than estimated
        self._lock: asyncio.Lock | None = None
        self.dropped = 0  # slots found late and not used
        self.warm = False  # set once the actor's first judgment is done (see gated)
        self._warm_lock: asyncio.Lock | None = None

    @property
    def warm_lock(self) -> asyncio.Lock:
        if self._warm_lock is None:
            self._warm_lock = asyncio.Lock()
        return self._warm_lock

    async def acquire(self, tokens: float) -> float:
        """Wait for this item's slot on the shared schedule; return when it may be sent (the monotonic time
        at which it was released).

        A slot is used within ``late_s`` of its start or not at all: one found late (the process was
        starved, the loop held up) is dropped and another taken, so requests held up together are never
        sent together.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        need = self.limit.slot_seconds(tokens) + self.debt
        self.debt = 0.0
        while True:
            async with self._lock:
                now = time.monotonic()
                self.cur = max(self.cur, now - self.late_s)  # time left unused is dropped, never saved up
                while self.cur + need > self.end:
                    span = max(self.block_s, need) + self.rtt
                    sent = time.monotonic()
                    offset = await self.limiter.grant.remote(span)
                    back = time.monotonic()
                    self.rtt = back - sent
                    self.cur = back + offset  # never before the granted span's start...
                    self.end = sent + offset + span  # ...nor past its end, whenever the limiter read its clock
                start = self.cur
                self.cur += need
            while (now := time.monotonic()) < start:
                await asyncio.sleep(start - now)
            if now - start <= self.late_s:
                return now
            self.dropped += 1

    def settle(self, estimated: float, used: float) -> None:
        """A call used ``used`` tokens where ``estimated`` were reserved: owe the difference, if more."""
        if self.limit.tokens_per_minute is not None and used > estimated:
            self.debt += (used - estimated) * 60.0 / self.limit.tokens_per_minute


def estimated_tokens(frame: Any, limit: RateLimit) -> list[float]:
    """Each item's tokens before the call: its texts at 4 characters a token, plus the reply's allowance."""
    chars = None
    for column in ITEM_COLUMNS:
        lengths = frame[column].map(lambda v: len(v) if isinstance(v, str) else 0)
        chars = lengths if chars is None else chars + lengths
    assert chars is not None
    return [n / CHARS_PER_TOKEN + limit.output_tokens for n in chars.tolist()]


def gated(work: Callable[[int], Any], permits: Permits, tokens: list[float]) -> Callable[[int], Any]:
    """``work`` with each item waiting for its slot on the shared schedule, and its tokens settled after."""

    async def one(i: int) -> Any:
        estimate = tokens[i % len(tokens)]  # judge_plan with epochs: k * n judgments, epoch-major
        await permits.acquire(estimate)
        row = await work(i)
        used = float(row.get("tokens_in") or 0) + float(row.get("tokens_out") or 0)
        permits.settle(estimate, used)
        return row

    async def waiting(i: int) -> Any:
        if not permits.warm:
            # an actor's first judgment runs alone: it builds what is made on first use (imports, the HTTP
            # session, a model); requests given slots meanwhile would be held up behind it, then sent at once
            async with permits.warm_lock:
                if not permits.warm:
                    try:
                        return await one(i)
                    finally:
                        permits.warm = True
        return await one(i)

    return waiting
