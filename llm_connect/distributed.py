"""Grading a Ray Dataset past one machine: :func:`grade_dataset`, one rate limit for the whole cluster.

Optional extra: ``pip install -e '.[ray]'`` in a clone. ``import llm_connect`` never
imports Ray; this module imports it when :func:`grade_dataset` is called, and a
missing Ray is a :class:`~llm_connect.errors.MissingDependencyError` naming the
extra.

How a job runs
--------------
:func:`grade_dataset` is ``judge_many`` spread over a pool of Ray actors
(``ds.map_batches(..., compute=ActorPoolStrategy(size=num_actors), batch_format="pandas")``, the
way Ray Data runs LLM batch inference). Each actor calls ``judge_factory()``
once, so adapters, HTTP sessions and local models are built once per actor, and
runs the package's async batch engine (:func:`llm_connect.grading.judge_plan`
on :func:`llm_connect.batch.run_batch`) on each batch with ``concurrency``
items in flight. So the job has ``num_actors * concurrency`` judgments in
flight, and each output row has the columns ``judge_many`` gives it: a failed
item is an ``error`` row, an unusable reply an ``unscored`` one, never dropped.

Failures: Ray Data starts the actors with ``max_restarts=-1`` and
``max_task_retries=-1``: an actor that dies (``ray.kill``, a crashed worker,
a lost node) is restarted and the batch it held is run again; Ray Data emits a
batch's rows only when it completes, so each input row comes out exactly once.

One rate limit for the cluster
------------------------------
``rate_limit=RateLimit(requests_per_minute=R, tokens_per_minute=T)`` (or the
same as a dict) is enforced across all actors by one small Ray actor, the
*limiter*. It hands out time on a single schedule (GCRA, a virtual-time token
bucket): each item is a slot of ``max(k/r, tokens/t)`` seconds (``r``, ``t``
the per-second rates, ``k`` the item's ``requests_per_item``), and slots never
overlap whichever actor holds them (an actor uses only the part of a granted
span that is granted however long the round trip took). An actor asks for a
*block* of the schedule at once (``block`` requests' worth, 8 by default) and
spends it locally, so the limiter costs one round trip per ``block`` requests,
not per call. An item waits for its slot's start; a slot not used within
``(block + 1 - k)/r`` seconds of its start is dropped, never saved up, so a
late actor cannot burst. So in any window of ``W`` seconds the items released
make at most ``W*r + block + 1`` requests (``W*r + k + 1`` when one item makes
more calls than a block holds), whatever the number of actors and however
late their loops run (checked against the limiter's grants in
``tests/test_reliability_round2.py``, and on the loopback server in
``tests/test_distributed.py``), which is within 5% of ``R`` in any minute once
``R >= 20 * (block + 1)``; for smaller limits the block shrinks so that it holds.
Tokens are estimated before a call (the item's text at 4 characters a token,
plus ``output_tokens``) and the estimate is settled after it: a call that used
more delays that actor's next requests by the difference.

What the limiter does not see: retries of the HTTP adapters (a 429 or 5xx
retried inside the adapter) and calls a judge makes beyond
``requests_per_item`` per item (set it for a compound judge making several
calls per item). Keep the adapters' own ``requests_per_minute`` off
(``None``) under a shared limit, or set it to the per-actor share.

Resumable
---------
With ``ledger=`` (a :class:`~llm_connect.quality.QualityLedger`, or a
``ParquetLedger`` shared by many machines) and ``task_type=``, each scored row is
recorded (tags ``grader_id``, ``rubric_hash``, ``item_id`` and the job's
``run_id``; a batch's observations are written together when the batch ends, once: a judgment
the ledger already holds -- recorded by another actor, a retried batch or an earlier job -- is not
recorded again, as :meth:`~llm_connect.quality.BaseLedger.extend_once` says),
and a job run again with the same ledger skips the items that the same grader
and rubric already scored (keyed by grader id, rubric hash and the item's key,
:func:`~llm_connect.batch.item_key`: its id and its candidate's adapter and model,
so one question answered by two models is two items; an id is matched on its text,
``1.0`` is ``1``, and a row whose id is missing is keyed by its texts, never by its
position): their rows
come back from the ledger with ``status="scored"`` and ``resumed=True`` (the
judge's notes, latency and token counts are not in the ledger: ``None``, NaN
and 0), so a crashed job restarts where it stopped, losing at most the batches
that were in flight. The items need an ``id`` column, unique per item (one id
may repeat across candidate models: ``candidate_model`` / ``candidate_adapter``). Each
actor reads the ledger once, when it starts: keep one job per ledger and
task type at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .batch import (
    ITEM_COLUMNS,
    LEDGER_ERROR,
    RESULT_COLUMNS,
    attach_rows,
    check_ledger,
    column_values,
    describe_error,
    extend_once,
    item_id_text,
    item_ids,
    item_key,
    run_batch,
)
from .core import BudgetReservation, BudgetTracker, _check_non_negative, as_budget
from .errors import BudgetExceededError, MissingDependencyError, ValidationError
from .grading._base import Judge, judge_abilities
from .grading._batch import judge_plan
from .quality import BaseLedger

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ACTOR_CPUS", "RESUMED", "UPSTREAM_CPUS", "RateLimit", "SharedBudget", "actor_cpus", "grade_dataset"]

logger = logging.getLogger("llm_connect.distributed")

#: The column :func:`grade_dataset` adds when it records to a ledger: True for a row read back from it.
RESUMED = "resumed"

#: Characters per token when a request's tokens are estimated before it is sent.
_CHARS_PER_TOKEN = 4


def _ray() -> Any:
    """Ray, or the error naming the extra to install."""
    try:
        import ray
        import ray.data  # Ray Data is part of the extra: ray[data]
    except ImportError as exc:
        raise MissingDependencyError("ray[data]", "ray", "grading a Ray Dataset") from exc
    return ray


# -- the rate limit --------------------------------------------------------------------


@dataclass(frozen=True)
class RateLimit:
    """A limit for the whole cluster: requests and tokens per minute, shared by every actor of a job.

    ``requests_per_minute``, ``tokens_per_minute``: ``None`` leaves that side unlimited (at least
    one must be set). ``block``: requests an actor takes from the shared limiter per round trip
    (lowered for small limits so the endpoint sees at most the limit +5% in any minute).
    ``requests_per_item``: the calls the judge makes per item (a compound judge's count).
    ``output_tokens``: tokens assumed for a reply when estimating a request's tokens (the estimate
    is settled with the reply's real count after the call).
    A dict with the same keys is accepted wherever a ``RateLimit`` is.
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
        """``value`` as a :class:`RateLimit` (a dict of its fields is accepted; ``None`` stays ``None``)."""
        if value is None or isinstance(value, RateLimit):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValidationError(f"rate_limit: unknown key(s) {unknown}; use {sorted(cls.__dataclass_fields__)}")
            return cls(**value)
        raise ValidationError(f"rate_limit must be a RateLimit, a dict or None, got {type(value).__name__}")

    def slot_seconds(self, tokens: float) -> float:
        """The time one item's calls take on the shared schedule: the larger of its request and token shares."""
        seconds = 0.0
        if self.requests_per_minute is not None:
            seconds = self.requests_per_item * 60.0 / self.requests_per_minute
        if self.tokens_per_minute is not None:
            seconds = max(seconds, tokens * 60.0 / self.tokens_per_minute)
        return seconds

    def block_requests(self) -> int:
        """Requests per round trip to the limiter: ``block``, at most 1/20 of a minute's requests (at least 1)."""
        if self.requests_per_minute is None:
            return self.block
        return max(1, min(self.block, int(self.requests_per_minute / 20.0) - 1))

    def burst_requests(self) -> int:
        """``B`` in the burst bound: in any ``W`` seconds the permits let at most ``W*r + B + 1`` requests go
        (``r`` requests a second). :meth:`block_requests`, or ``requests_per_item`` when an item makes more
        calls than a block holds (its calls go together)."""
        return max(self.block_requests(), self.requests_per_item)

    def block_seconds(self) -> float:
        """The span of the schedule an actor takes per round trip: ``block_requests()`` requests' worth (at
        least one item's); with a token limit only, a second's worth."""
        if self.requests_per_minute is None:
            return 1.0
        return self.burst_requests() * 60.0 / self.requests_per_minute

    def late_seconds(self) -> float:
        """How late an item's slot may still be used (else it is dropped): the time of
        ``B + 1 - requests_per_item`` requests, so that a slot used late and the next ones used on time
        stay within the burst bound (see the module docs); with a token limit only, a second."""
        if self.requests_per_minute is None:
            return 1.0
        return (self.burst_requests() + 1 - self.requests_per_item) * 60.0 / self.requests_per_minute


class _Schedule:
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


class _Permits:
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
        self.warm = False  # set once the actor's first judgment is done (see _gated)
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


# -- the shared budget -----------------------------------------------------------------


class _BudgetBook:
    """The shared budget's state (a Ray actor holds one): a :class:`BudgetTracker` and its open reservations
    by number. Calls are served one at a time (a sync Ray actor)."""

    def __init__(self, limit_usd: float | None, spent_usd: float = 0.0) -> None:
        self.tracker = BudgetTracker(limit_usd)
        if spent_usd:
            with contextlib.suppress(BudgetExceededError):
                self.tracker.charge(spent_usd)
        self.open: dict[int, BudgetReservation] = {}
        self.numbers = itertools.count()

    def try_reserve(self, estimated_usd: float) -> tuple[str, Any]:
        """``("ok", number)``, ``("wait", None)`` (only calls in flight stand in the way) or
        ``("refused", (spent, limit, reserved))``."""
        try:
            reservation = self.tracker.try_reserve(estimated_usd)
        except BudgetExceededError as exc:
            return "refused", (exc.spent_usd, exc.limit_usd, getattr(exc, "reserved_usd", 0.0))
        if reservation is None:
            return "wait", None
        number = next(self.numbers)
        self.open[number] = reservation
        return "ok", number

    def finish(self, number: int, cost_usd: float, paid: bool) -> None:
        reservation = self.open.pop(number, None)
        if reservation is not None:
            if paid:
                reservation.settle(cost_usd)
            else:
                reservation.release()

    def charge(self, cost_usd: float) -> tuple[float, float | None]:
        with contextlib.suppress(BudgetExceededError):
            self.tracker.charge(cost_usd)
        return self.tracker.spent_usd, self.tracker.limit_usd

    def snapshot(self) -> dict[str, Any]:
        out = self.tracker.snapshot()
        out["in_flight"] = self.tracker.in_flight
        return out


class _SharedReservation(BudgetReservation):
    """A reservation held on a :class:`SharedBudget` (its number in the shared book)."""

    __slots__ = ("number",)

    def __init__(self, tracker: BudgetTracker, amount_usd: float, number: int) -> None:
        super().__init__(tracker, amount_usd)
        self.number = number


class SharedBudget(BudgetTracker):
    """One budget for every actor of a :func:`grade_dataset` job: a :class:`~llm_connect.core.BudgetTracker`
    whose money is kept by one small Ray actor, as the rate limit is.

    It is a ``BudgetTracker`` in every way that counts (reservations before each call, settled after it;
    ``spent_usd``, ``exhausted``, ``snapshot()``...), read from and charged to that actor, so each actor's
    calls are refused once the whole job's spend reaches ``limit_usd``: the job overshoots it by no more
    than the calls in flight, and rows not attempted are ``error`` rows saying "budget exhausted", as in
    ``judge_many``. Read ``spent_usd`` here after the dataset is consumed to see what the job spent.
    ``spent_usd=``: money already spent (e.g. by an earlier job) counted against the limit.

    The actor is started on first use (Ray must be running) and lives as long as this object's handle;
    each call is a round trip to it (a millisecond or so on one host, next to a model call's seconds).
    Pass it as ``grade_dataset(..., budget=...)`` or in ``run_config.budget_tracker``; a plain
    ``BudgetTracker`` or a number given there becomes one (with that limit and spend).
    """

    def __init__(self, limit_usd: float | None = None, *, spent_usd: float = 0.0) -> None:
        super().__init__(limit_usd)
        if isinstance(spent_usd, bool) or not isinstance(spent_usd, (int, float)) or not spent_usd >= 0:
            raise ValidationError(f"SharedBudget: spent_usd must be a number >= 0, got {spent_usd!r}")
        self._initial_spent = float(spent_usd)
        self._book: Any = None

    def _actor(self) -> Any:
        if self._book is None:
            ray = _ray()
            # never restarted: a new book would have forgotten the money spent
            self._book = ray.remote(num_cpus=0, max_restarts=0)(_BudgetBook).remote(
                self.limit_usd, self._initial_spent)
        return self._book

    def _call(self, method: str, *args: Any) -> Any:
        ray = _ray()
        return ray.get(getattr(self._actor(), method).remote(*args))

    def __getstate__(self) -> dict[str, Any]:
        return {"limit_usd": self.limit_usd, "spent_usd": self._initial_spent, "book": self._actor()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        BudgetTracker.__init__(self, state["limit_usd"])
        self._initial_spent = state["spent_usd"]
        self._book = state["book"]

    # -- what BudgetTracker offers, kept by the shared book --

    def snapshot(self) -> dict[str, Any]:
        out = dict(self._call("snapshot"))
        out.pop("in_flight", None)
        return out

    @property
    def spent_usd(self) -> float:
        return float(self._call("snapshot")["spent_usd"])

    @property
    def calls(self) -> int:
        return int(self._call("snapshot")["calls"])

    @property
    def reserved_usd(self) -> float:
        return float(self._call("snapshot")["reserved_usd"])

    @property
    def in_flight(self) -> int:
        return int(self._call("snapshot")["in_flight"])

    @property
    def remaining_usd(self) -> float | None:
        if self.limit_usd is None:
            return None
        return max(0.0, self.limit_usd - self.spent_usd)

    @property
    def exhausted(self) -> bool:
        if self.limit_usd is None:
            return False
        return bool(self._call("snapshot")["exhausted"])

    def charge(self, cost_usd: float) -> None:
        _check_non_negative("cost_usd", cost_usd)
        spent, limit = self._call("charge", float(cost_usd))
        if limit is not None and spent > limit:
            raise BudgetExceededError(spent, limit)

    def check(self) -> None:
        if self.limit_usd is None:
            return
        spent = self.spent_usd
        if spent >= self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def try_reserve(self, estimated_usd: float = 0.0) -> BudgetReservation | None:
        _check_non_negative("estimated_usd", estimated_usd)
        state, value = self._call("try_reserve", float(estimated_usd))
        if state == "ok":
            return _SharedReservation(self, float(estimated_usd), value)
        if state == "wait":
            return None
        spent, limit, reserved = value
        exc = BudgetExceededError(spent, limit)
        exc.reserved_usd = reserved  # type: ignore[attr-defined]
        raise exc

    def reserve(
        self, estimated_usd: float = 0.0, *, wait: bool = False, timeout_s: float | None = None
    ) -> BudgetReservation:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pause = 0.001
        while True:
            reservation = self.try_reserve(estimated_usd)
            if reservation is not None:
                return reservation
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                snap = self.snapshot()
                exc = BudgetExceededError(snap["spent_usd"], snap["limit_usd"])
                exc.reserved_usd = snap["reserved_usd"]  # type: ignore[attr-defined]
                raise exc
            time.sleep(pause)
            pause = min(0.02, pause * 2)

    def _finish(self, reservation: BudgetReservation, cost_usd: float, *, paid: bool) -> None:
        if reservation._done:
            return
        reservation._done = True
        number = getattr(reservation, "number", None)
        if number is None:
            return
        cost = float(cost_usd) if paid and isinstance(cost_usd, (int, float)) and cost_usd > 0 else 0.0
        try:  # settle() never raises: a reply that was paid for is kept
            self._call("finish", number, cost, paid)
        except Exception as exc:  # the shared book is gone (Ray shut down)
            logger.warning("llm_connect: could not settle a call on the shared budget: %s", type(exc).__name__)

    def __repr__(self) -> str:
        try:
            spent = f"{self.spent_usd:.6f}"
        except Exception:  # a repr never raises (Ray may be down)
            spent = "?"
        return f"SharedBudget(limit_usd={self.limit_usd!r}, spent_usd={spent})"


def _shared_budget(value: Any, where: str) -> SharedBudget | None:
    """``value`` (a tracker, a limit in USD or ``None``) as the job's :class:`SharedBudget`."""
    if value is None or isinstance(value, SharedBudget):
        return value
    if isinstance(value, BudgetTracker):
        # A BudgetTracker lives in one process (a lock): the cluster gets one budget with its limit and spend
        return SharedBudget(value.limit_usd, spent_usd=value.spent_usd)
    tracker = as_budget(value, what=where)
    assert tracker is not None
    return SharedBudget(tracker.limit_usd)


def _estimated_tokens(frame: Any, limit: RateLimit) -> list[float]:
    """Each item's tokens before the call: its texts at 4 characters a token, plus the reply's allowance."""
    chars = None
    for column in ITEM_COLUMNS:
        lengths = frame[column].map(lambda v: len(v) if isinstance(v, str) else 0)
        chars = lengths if chars is None else chars + lengths
    assert chars is not None
    return [n / _CHARS_PER_TOKEN + limit.output_tokens for n in chars.tolist()]


# -- the ledger: what is done, and recording a batch at once ---------------------------------


ItemKey = tuple[str, str, str]  # (id text, adapter_id, model_id): batch.item_key


def _row_keys(batch: pd.DataFrame) -> list[ItemKey]:
    """The key of each row of ``batch``, as ``judge_many`` records it: its id (or, without one, the key of its
    texts; :func:`~llm_connect.batch.item_ids`) and its candidate (``candidate_model``, ``candidate_adapter``)."""
    ids = item_ids(batch)
    models, adapters = column_values(batch, "candidate_model"), column_values(batch, "candidate_adapter")
    return [item_key(i, m, a) for i, m, a in zip(ids, models, adapters, strict=True)]


def _done_items(ledger: Any, task_type: str, grader_id: str, rubric_hash: str | None) -> dict[ItemKey, Any]:
    """The observations of ``ledger`` this grader and rubric already recorded for ``task_type``, by item key
    (:func:`~llm_connect.batch.item_key`: the item id and the candidate's adapter and model, so one question
    answered by two models is two items)."""
    done: dict[ItemKey, Any] = {}
    for obs in ledger.by_task_type(task_type):
        tags = obs.tags
        if tags.get("grader_id") != grader_id or tags.get("rubric_hash") != rubric_hash:
            continue
        if item_id_text(tags.get("item_id")) is not None:
            done.setdefault(item_key(tags["item_id"], obs.model_id, obs.adapter_id), obs)
    return done


class _BatchRecorder:
    """A ledger stand-in for one batch: ``append`` keeps the observation (tagged with the job's ``run_id``),
    :meth:`flush` records them all at once, as every entry point records: once
    (:func:`~llm_connect.batch.extend_once`; a judgment another actor, a retried batch or an earlier job
    recorded meanwhile is not recorded again)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.pending: list[Any] = []

    def append(self, observation: Any) -> None:
        self.pending.append(replace(observation, tags={**observation.tags, "run_id": self.run_id}))

    def flush(self, ledger: Any) -> str | None:
        """Write what was kept; the error text when the write failed (the judgments stand)."""
        pending, self.pending = self.pending, []
        if not pending:
            return None
        try:
            written = extend_once(ledger, pending)
        except Exception as exc:
            return f"ledger append failed: {describe_error(exc)}"
        held = len(written) - sum(written)
        if held:
            logger.warning("llm_connect: %d judgment(s) already in the ledger, not recorded again", held)
        return None


# -- the actor -------------------------------------------------------------------------


class _GradingActor:
    """What each actor of the pool is: its own judge, built once, and the batch engine run on each batch."""

    def __init__(
        self,
        judge_factory: Callable[[], Any],
        concurrency: int,
        ledger: Any,
        task_type: str | None,
        rate_limit: RateLimit | None,
        limiter: Any,
        run_config: Any,
        run_id: str,
        budget: Any = None,
        batch: Any = None,
    ) -> None:
        self.budget = budget  # a SharedBudget (charged besides run_config's), or None
        self.batch = batch  # BatchOptions (the providers' Batch APIs), or None
        self.judge = judge_factory()
        if not (isinstance(getattr(self.judge, "grader_id", None), str) and self.judge.grader_id.strip()):
            raise ValidationError(f"judge_factory() returned {type(self.judge).__name__}, which has no grader_id; "
                                  "it must return a judge (e.g. LLMJudge(...))")
        self.concurrency = concurrency
        self.ledger = ledger
        self.task_type = task_type
        self.rate_limit = rate_limit
        self.permits = _Permits(limiter, rate_limit) if rate_limit is not None and limiter is not None else None
        self.run_config = run_config
        self.run_id = run_id
        self.done: dict[ItemKey, Any] = {}
        if ledger is not None:
            rubric = judge_abilities(self.judge).rubric_hash
            self.done = _done_items(ledger, str(task_type), self.judge.grader_id, rubric)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        batch = batch.reset_index(drop=True)
        if self.ledger is not None:
            keys = _row_keys(batch)
            resumed_mask = pd.Series([k in self.done for k in keys], index=batch.index, dtype=bool)
        else:
            keys = []
            resumed_mask = pd.Series(False, index=batch.index)
        todo = batch[~resumed_mask]
        recorder = _BatchRecorder(self.run_id) if self.ledger is not None else None
        plan = judge_plan(self.judge, todo, run_config=self.run_config, ledger=recorder, task_type=self.task_type,
                          budget=self.budget, desc=f"ray: {self.judge.grader_id}")
        concurrency = self.concurrency
        if self.batch is not None and len(todo):
            from .grading._batch_api import provider_batch_plan

            # the Batch APIs have no per-minute limit: the rows are not gated, they all wait for one round
            plan, concurrency = provider_batch_plan(plan, self._batch_options(batch), concurrency=concurrency,
                                                    progress=False)  # no bars inside the actors
        elif self.permits is not None and self.rate_limit is not None:
            plan.work = _gated(plan.work, self.permits, _estimated_tokens(todo, self.rate_limit))
        out = run_batch(plan, concurrency=concurrency, progress=False)
        out.attrs = {}
        if recorder is not None:
            failed = recorder.flush(self.ledger)
            if failed is not None:
                recorded = out[LEDGER_ERROR].isna() & (out["status"] == "scored")
                out.loc[recorded, LEDGER_ERROR] = failed
            out[RESUMED] = False
            if resumed_mask.any():
                resumed = [k for k, done in zip(keys, resumed_mask, strict=True) if done]
                out = pd.concat([out, self._resumed_rows(batch[resumed_mask], resumed)])
        return out.sort_index().reset_index(drop=True)

    def _batch_options(self, batch: pd.DataFrame) -> Any:
        """This Ray batch's Batch API options: its own state folder inside the job's, named by the grader and
        the keys of its rows, so the same job run again (same data, same ``batch_size``) finds the provider
        batches this Ray batch submitted and collects them instead of submitting again. Without a state
        folder (no ledger, none given) the state is temporary: no resume."""
        import hashlib
        import json

        options = self.batch
        if options.state_dir is None:
            return replace(options, progress=False)
        keys = sorted(json.dumps([str(part) for part in key]) for key in _row_keys(batch))
        digest = hashlib.sha256("\n".join([self.judge.grader_id, *keys]).encode("utf-8")).hexdigest()[:16]
        from pathlib import Path

        root = options.state_root if options.state_root is not None else options.state_dir
        return replace(options, progress=False, state_dir=Path(options.state_dir) / f"ray-{digest}",
                       state_root=Path(root))

    def _resumed_rows(self, items: pd.DataFrame, keys: list[ItemKey]) -> pd.DataFrame:
        """The rows of items this grader and rubric already scored (``keys``: each item's key), read back from
        the ledger."""
        columns = (*RESULT_COLUMNS, *judge_abilities(self.judge).extra_columns, LEDGER_ERROR)
        rows = []
        for key in keys:
            obs = self.done[key]
            rows.append({
                "quality_score": float(obs.quality_score),
                "grader_id": self.judge.grader_id,
                "status": "scored",
                "judge_cost_usd": float(obs.tags.get("judge_cost_usd", 0.0) or 0.0),
            })
        out = attach_rows(items, rows, columns, False)
        out.attrs = {}
        out[RESUMED] = True
        return out


def _gated(work: Callable[[int], Any], permits: _Permits, tokens: list[float]) -> Callable[[int], Any]:
    """``work`` with each item waiting for its slot on the shared schedule, and its tokens settled after."""

    async def one(i: int) -> Any:
        estimate = tokens[i % len(tokens)]  # judge_plan with epochs: k * n judgments, epoch-major
        await permits.acquire(estimate)
        row = await work(i)
        used = float(row.get("tokens_in") or 0) + float(row.get("tokens_out") or 0)
        permits.settle(estimate, used)
        return row

    async def gated(i: int) -> Any:
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

    return gated


# -- the entry point -------------------------------------------------------------------


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    return value


#: The CPUs each grading actor reserves unless told otherwise (an HTTP judge mostly waits).
ACTOR_CPUS = 0.25
#: The CPUs the tasks in front of the actors (reading the dataset, splitting it into batches) need free: Ray
#: Data runs each with one CPU, and an actor pool holds its CPUs for the whole job.
UPSTREAM_CPUS = 1.0


def _cluster_cpus(ray: Any) -> float | None:
    """The CPUs of the running cluster (``None`` when Ray cannot say)."""
    try:
        cpus = ray.cluster_resources().get("CPU")
    except Exception:  # a cluster that does not answer: leave the sizing to Ray
        return None
    return float(cpus) if isinstance(cpus, (int, float)) else None


def actor_cpus(num_cpus: float | None, num_actors: int, cluster_cpus: float | None) -> float:
    """The CPUs each of ``num_actors`` grading actors reserves on a cluster of ``cluster_cpus`` CPUs.

    Parameters
    ----------
    num_cpus : float or None
        What the caller asked for per actor; ``None``: :data:`ACTOR_CPUS`, or less so the actors leave
        :data:`UPSTREAM_CPUS` free (down to 0).
    num_actors : int
        The actors in the pool.
    cluster_cpus : float or None
        The cluster's CPUs (``None``: unknown, nothing is checked).

    Returns
    -------
    float
        The CPUs per actor.

    Raises
    ------
    ValidationError
        When ``num_cpus`` was given and ``num_actors`` actors of that size leave less than
        :data:`UPSTREAM_CPUS` of the cluster for the tasks that feed them: the job would wait forever.
    """
    if cluster_cpus is None:
        return ACTOR_CPUS if num_cpus is None else float(num_cpus)
    spare = max(0.0, cluster_cpus - UPSTREAM_CPUS)
    if num_cpus is None:
        return min(ACTOR_CPUS, math.floor(100 * spare / num_actors) / 100)
    if num_actors * num_cpus > spare + 1e-9:
        fits = math.floor(100 * spare / num_actors) / 100
        raise ValidationError(
            f"grade_dataset: {num_actors} actor(s) x num_cpus={num_cpus:g} hold {num_actors * num_cpus:g} of the "
            f"cluster's {cluster_cpus:g} CPU(s) for the whole job, leaving less than the {UPSTREAM_CPUS:g} the "
            "tasks that read and split the dataset need, so the job would wait forever; pass num_cpus="
            f"{fits:g} or less (0 suits a judge that calls an HTTP endpoint), fewer actors, or start Ray with "
            "more CPUs (ray.init(num_cpus=N))")
    return float(num_cpus)


def grade_dataset(
    ds: Any,
    judge_factory: Callable[[], Judge],
    *,
    concurrency: int = 16,
    num_actors: int = 2,
    batch_size: int = 512,
    ledger: BaseLedger | None = None,
    task_type: str | None = None,
    rate_limit: RateLimit | Mapping[str, Any] | None = None,
    run_config: Any = None,
    budget: BudgetTracker | float | None = None,
    num_cpus: float | None = None,
    ray_remote_args: Mapping[str, Any] | None = None,
    batch: Any = False,
) -> Any:
    """Judge every row of a Ray Dataset on a pool of Ray actors; a Ray Dataset of ``judge_many``'s rows.

    ``ds``: a ``ray.data.Dataset`` of items with ``prompt``, ``baseline`` and ``candidate`` texts (other
    columns are carried through, ``id`` names the item). ``judge_factory``: a zero-argument callable
    returning the judge (e.g. ``functools.partial(make_judge, url)``); each actor calls it once, so every
    actor builds its own adapters and models. It is pickled to the workers (cloudpickle): define it in
    an importable module or build it from library callables.

    ``num_actors``: actors in the pool (Ray Data's ``ActorPoolStrategy(size=...)``); ``concurrency``: judgments each
    actor keeps in flight (``judge_many``'s ``concurrency``), so ``num_actors * concurrency`` at once;
    ``batch_size``: rows handed to an actor at a time. ``num_cpus``: CPUs reserved per actor (an HTTP
    judge needs little; a local model wants 1 or more; default :data:`ACTOR_CPUS`, or less when the
    cluster cannot spare it, see below); ``ray_remote_args``: more of Ray's actor options (``num_gpus``,
    ``resources``, ``runtime_env``...).

    Sizing: the pool's actors hold their CPUs for the whole job, and the tasks that read and split the
    dataset in front of them need :data:`UPSTREAM_CPUS` more; were none left, they would wait for a CPU
    forever and the job with them. So the actors are sized to leave it: by default each reserves
    :data:`ACTOR_CPUS`, less when ``num_actors`` of them would not leave :data:`UPSTREAM_CPUS` of the
    cluster's CPUs (down to 0: an actor that waits on HTTP needs no CPU of its own), and a ``num_cpus``
    given that does not leave it is a :class:`~llm_connect.errors.ValidationError` saying what would
    fit (checked against ``ray.cluster_resources()`` when the job is defined; an autoscaling cluster
    that will grow can pass ``num_cpus=0``).
    ``rate_limit``: a :class:`RateLimit` (or a dict of its fields) enforced across all actors by one
    shared limiter (see the module docs). ``ledger`` and ``task_type``: record each scored row and skip,
    on a rerun, the items the same grader and rubric already scored (needs an ``id`` column; adds the
    ``ledger_error`` and ``resumed`` columns). ``run_config``: passed to the judge as in ``judge_many``.
    ``budget`` (a limit in USD, a ``BudgetTracker`` or a :class:`SharedBudget`; and a tracker in
    ``run_config.budget_tracker``): one budget for the whole job, kept by a Ray actor as the rate limit
    is, so every actor's paid calls count against it and, once it is spent, the rows not attempted are
    ``error`` rows saying "budget exhausted" (as ``judge_many``'s budget). A ``BudgetTracker`` lives in
    one process, so its limit and spend so far become a ``SharedBudget`` and the tracker itself is not
    charged: pass a ``SharedBudget`` to read the job's spend (``.spent_usd``) afterwards.

    ``batch``: ``True`` (or a state folder, or :class:`~llm_connect.adapters.BatchOptions`) sends the
    judges' calls to an OpenAI-compatible or Anthropic adapter through the provider's Batch API, at half
    the price, as :func:`~llm_connect.grading.judge_many` does: each Ray batch of ``batch_size`` rows is
    one provider batch per round, with the same rows, statuses and ledger records as without it. The
    state lives beside the ledger (``<ledger>.batches/ray-<key>/``, one folder per Ray batch, named by
    its rows) or in the folder given, so the same job run again after a crash collects the submitted
    batches instead of submitting them again; without a ledger or a folder nothing is resumed.
    ``rate_limit`` does not apply to batched calls (the Batch APIs have no per-minute limit).

    Returns the lazy Ray Dataset (``.to_pandas()``, ``.write_parquet(...)``, ...): the input columns
    plus ``quality_score``, ``notes``, ``grader_id``, ``status``, ``error``, ``latency_ms``,
    ``judge_tokens_in``, ``judge_tokens_out``, ``judge_cost_usd`` and the judge's own columns; one row per input
    row (not in input order unless the dataset's ``preserve_order`` execution option is set).

    Errors: :class:`~llm_connect.errors.MissingDependencyError` without Ray
    (``pip install -e '.[ray]'``); :class:`~llm_connect.errors.ValidationError` for a bad
    argument, a ledger without ``task_type`` or ``id`` column, or items lacking a text column.
    """
    ray = _ray()
    if not isinstance(ds, ray.data.Dataset):
        raise ValidationError(f"ds must be a ray.data.Dataset (e.g. ray.data.from_pandas(df)), got "
                              f"{type(ds).__name__}; for a DataFrame in one process use judge_many")
    if hasattr(judge_factory, "judge") and hasattr(judge_factory, "grader_id"):
        raise ValidationError("judge_factory must build the judge (each actor calls it once), not be one: "
                              "pass e.g. lambda: LLMJudge(OpenAICompatibleAdapter(...))")
    if not callable(judge_factory):
        raise ValidationError("judge_factory must be a zero-argument callable returning a judge, "
                              f"got {type(judge_factory).__name__}")
    _positive_int("concurrency", concurrency)
    _positive_int("num_actors", num_actors)
    _positive_int("batch_size", batch_size)
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float))
                                 or not num_cpus >= 0):
        raise ValidationError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
    check_ledger(ledger, task_type)
    limit = RateLimit.of(rate_limit)
    from .adapters._batches import batch_options

    batching = batch_options(batch, ledger)
    if batching is not None and batching.state_dir is not None:
        from pathlib import Path

        batching = replace(batching, state_dir=Path(batching.state_dir).resolve())
    elif batching is not None:
        import warnings

        warnings.warn("grade_dataset(batch=...): the batches' state has no folder (no ledger, or a ledger at a URI), "
                      "so a job stopped while it polls submits its batches again; pass "
                      "batch=BatchOptions(state_dir=FOLDER), a folder every node sees, to resume them",
                      UserWarning, stacklevel=2)
    # Money: a tracker cannot travel to the actors (it holds a lock) and would be one copy per actor: the job
    # gets one shared budget instead, kept by an actor
    shared = _shared_budget(budget, "budget")
    config_tracker = getattr(run_config, "budget_tracker", None)
    if config_tracker is not None:
        if config_tracker is budget:
            run_config, shared = replace(run_config, budget_tracker=shared), None
        else:
            run_config = replace(run_config, budget_tracker=_shared_budget(config_tracker, "budget_tracker"))
    for tracker in (shared, getattr(run_config, "budget_tracker", None)):
        if isinstance(tracker, SharedBudget):
            tracker._actor()  # started here, before the actors that share it
    schema = ds.schema(fetch_if_missing=False)
    names = list(schema.names) if schema is not None else None
    if names is not None:
        missing = [c for c in ITEM_COLUMNS if c not in names]
        if missing:
            raise ValidationError(f"the dataset lacks the column(s) {missing}; it has {names}. Rename them "
                                  "(ds.rename_columns({'question': 'prompt'}))")
        if ledger is not None and "id" not in names and not {"conversation_id", "turn"} <= set(names):
            raise ValidationError("a ledger needs an 'id' column (unique per item), or the 'conversation_id' and "
                                  "'turn' of conversation items: resuming skips items by their key")
    limiter = None
    if limit is not None:
        limiter = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(_Schedule).remote()
    # Ray Data starts a pool's actors with max_restarts=-1 and max_task_retries=-1 (restart a dead actor,
    # run its batch again); ray_remote_args may not turn that off
    options: dict[str, Any] = {**(ray_remote_args or {})}
    for key in ("max_restarts", "max_task_retries"):
        if key in options:
            raise ValidationError(f"ray_remote_args: {key} is set by Ray Data to -1 (a dead actor's batch is run "
                                  "again, so no row is lost); leave it out")
    given = options.pop("num_cpus", num_cpus)  # ray_remote_args' own num_cpus, else the argument
    options["num_cpus"] = actor_cpus(given, num_actors, _cluster_cpus(ray))
    # blocks of batch_size rows (a streaming split, no shuffle): a block is one task, so a dataset read
    # as one big block would otherwise go to one actor while the others idle
    ds = ds.repartition(target_num_rows_per_block=batch_size)
    return ds.map_batches(
        _GradingActor,
        fn_constructor_kwargs={
            "judge_factory": judge_factory,
            "concurrency": concurrency,
            "ledger": ledger,
            "task_type": task_type,
            "rate_limit": limit,
            "limiter": limiter,
            "run_config": run_config,
            "run_id": uuid.uuid4().hex,
            "budget": shared,
            "batch": batching,
        },
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        batch_size=batch_size,
        batch_format="pandas",
        **options,
    )
