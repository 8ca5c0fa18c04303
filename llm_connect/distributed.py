"""Grading a Ray Dataset past one machine: :func:`grade_dataset`, one rate limit for the whole cluster.

Optional extra: ``pip install 'llm-connect[ray]'``. ``import llm_connect`` never
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
bucket): each request is a slot of ``max(1/r, tokens/t)`` seconds (``r``, ``t``
the per-second rates), and slots never overlap whichever actor holds them. An
actor asks for a *block* of slots at once (``block`` requests, 8 by default) and
spends them locally, so the limiter costs one round trip per ``block``
requests, not per call. A request waits for its slot's start; a slot left
unused for longer than its block's span is dropped, never saved up, so a late
actor cannot burst. In any window of ``W`` seconds the endpoint sees at most
``W*r + block + 1`` requests (measured on the loopback server in
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
``run_id``; a batch's observations are written together when the batch ends),
and a job run again with the same ledger skips the items that the same grader
and rubric already scored (keyed by item id, grader id, rubric hash): their rows
come back from the ledger with ``status="scored"`` and ``resumed=True`` (the
judge's notes, latency and token counts are not in the ledger: ``None``, NaN
and 0), so a crashed job restarts where it stopped, losing at most the batches
that were in flight. The items need an ``id`` column, unique per item. Each
actor reads the ledger once, when it starts: keep one job per ledger and
task type at a time.
"""

from __future__ import annotations

import asyncio
import json
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
    describe_error,
    plain_item_id,
    run_batch,
)
from .errors import MissingDependencyError, ValidationError
from .grading._base import judge_abilities
from .grading._batch import judge_plan

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RESUMED", "RateLimit", "grade_dataset"]

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
    """One actor's side of the shared limit: a span of the schedule, spent one item's slot at a time."""

    def __init__(self, limiter: Any, limit: RateLimit) -> None:
        self.limiter = limiter
        self.limit = limit
        self.block_s = limit.block_requests() * limit.slot_seconds(0.0) or 1.0  # tokens only: a second's worth
        self.cur = 0.0
        self.end = 0.0
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

    async def acquire(self, tokens: float) -> None:
        """Wait for this item's slot on the shared schedule; return when it may be sent.

        A slot is used within ``block_s`` of its start or not at all: one found late (the process
        was starved, the loop held up) is dropped and another taken, so requests held up together
        are never sent together.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        need = self.limit.slot_seconds(tokens) + self.debt
        self.debt = 0.0
        while True:
            async with self._lock:
                now = time.monotonic()
                self.cur = max(self.cur, now - self.block_s)  # time left unused is dropped, never saved up
                if self.cur + need > self.end:
                    span = max(self.block_s, need)
                    offset = await self.limiter.grant.remote(span)
                    self.cur = time.monotonic() + offset  # the round trip only makes it later
                    self.end = self.cur + span
                start = self.cur
                self.cur += need
            delay = start - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if time.monotonic() - start <= self.block_s:
                return
            self.dropped += 1

    def settle(self, estimated: float, used: float) -> None:
        """A call used ``used`` tokens where ``estimated`` were reserved: owe the difference, if more."""
        if self.limit.tokens_per_minute is not None and used > estimated:
            self.debt += (used - estimated) * 60.0 / self.limit.tokens_per_minute


def _estimated_tokens(frame: Any, limit: RateLimit) -> list[float]:
    """Each item's tokens before the call: its texts at 4 characters a token, plus the reply's allowance."""
    chars = None
    for column in ITEM_COLUMNS:
        lengths = frame[column].map(lambda v: len(v) if isinstance(v, str) else 0)
        chars = lengths if chars is None else chars + lengths
    assert chars is not None
    return [n / _CHARS_PER_TOKEN + limit.output_tokens for n in chars.tolist()]


# -- the ledger: what is done, and recording a batch at once ---------------------------------


def _id_key(value: Any) -> str:
    return json.dumps(plain_item_id(value), sort_keys=True, default=str)


def _done_items(ledger: Any, task_type: str, grader_id: str, rubric_hash: str | None) -> dict[str, Any]:
    """The observations of ``ledger`` this grader and rubric already recorded for ``task_type``, by item id."""
    done: dict[str, Any] = {}
    for obs in ledger.by_task_type(task_type):
        tags = obs.tags
        if tags.get("grader_id") != grader_id or tags.get("rubric_hash") != rubric_hash:
            continue
        if "item_id" in tags and tags["item_id"] is not None:
            done.setdefault(_id_key(tags["item_id"]), obs)
    return done


class _BatchRecorder:
    """A ledger stand-in for one batch: ``append`` keeps the observation (tagged with the job's ``run_id``),
    :meth:`flush` writes them all with one ``extend``."""

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
            ledger.extend(pending)
        except Exception as exc:
            return f"ledger append failed: {describe_error(exc)}"
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
    ) -> None:
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
        self.done: dict[str, Any] = {}
        if ledger is not None:
            rubric = judge_abilities(self.judge).rubric_hash
            self.done = _done_items(ledger, str(task_type), self.judge.grader_id, rubric)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        batch = batch.reset_index(drop=True)
        if self.ledger is not None:
            resumed_mask = batch["id"].map(lambda v: _id_key(v) in self.done).astype(bool)
        else:
            resumed_mask = pd.Series(False, index=batch.index)
        todo = batch[~resumed_mask]
        recorder = _BatchRecorder(self.run_id) if self.ledger is not None else None
        plan = judge_plan(self.judge, todo, run_config=self.run_config, ledger=recorder, task_type=self.task_type,
                          desc=f"ray: {self.judge.grader_id}")
        if self.permits is not None and self.rate_limit is not None:
            plan.work = _gated(plan.work, self.permits, _estimated_tokens(todo, self.rate_limit))
        out = run_batch(plan, concurrency=self.concurrency, progress=False)
        out.attrs = {}
        if recorder is not None:
            failed = recorder.flush(self.ledger)
            if failed is not None:
                recorded = out[LEDGER_ERROR].isna() & (out["status"] == "scored")
                out.loc[recorded, LEDGER_ERROR] = failed
            out[RESUMED] = False
            if resumed_mask.any():
                out = pd.concat([out, self._resumed_rows(batch[resumed_mask])])
        return out.sort_index().reset_index(drop=True)

    def _resumed_rows(self, items: pd.DataFrame) -> pd.DataFrame:
        """The rows of items this grader and rubric already scored, read back from the ledger."""
        columns = (*RESULT_COLUMNS, *judge_abilities(self.judge).extra_columns, LEDGER_ERROR)
        rows = []
        for value in items["id"]:
            obs = self.done[_id_key(value)]
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


def grade_dataset(
    ds: Any,
    judge_factory: Callable[[], Any],
    *,
    concurrency: int = 16,
    num_actors: int = 2,
    batch_size: int = 512,
    ledger: Any = None,
    task_type: str | None = None,
    rate_limit: RateLimit | Mapping[str, Any] | None = None,
    run_config: Any = None,
    num_cpus: float = 0.25,
    ray_remote_args: Mapping[str, Any] | None = None,
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
    judge needs little; a local model wants 1 or more); ``ray_remote_args``: more of Ray's actor
    options (``num_gpus``, ``resources``, ``runtime_env``...).
    ``rate_limit``: a :class:`RateLimit` (or a dict of its fields) enforced across all actors by one
    shared limiter (see the module docs). ``ledger`` and ``task_type``: record each scored row and skip,
    on a rerun, the items the same grader and rubric already scored (needs an ``id`` column; adds the
    ``ledger_error`` and ``resumed`` columns). ``run_config``: passed to the judge as in ``judge_many``.

    Returns the lazy Ray Dataset (``.to_pandas()``, ``.write_parquet(...)``, ...): the input columns
    plus ``quality_score``, ``notes``, ``grader_id``, ``status``, ``error``, ``latency_ms``,
    ``tokens_in``, ``tokens_out``, ``judge_cost_usd`` and the judge's own columns; one row per input
    row (not in input order unless the dataset's ``preserve_order`` execution option is set).

    Errors: :class:`~llm_connect.errors.MissingDependencyError` without Ray
    (``pip install 'llm-connect[ray]'``); :class:`~llm_connect.errors.ValidationError` for a bad
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
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or not num_cpus >= 0:
        raise ValidationError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
    check_ledger(ledger, task_type)
    limit = RateLimit.of(rate_limit)
    schema = ds.schema(fetch_if_missing=False)
    names = list(schema.names) if schema is not None else None
    if names is not None:
        missing = [c for c in ITEM_COLUMNS if c not in names]
        if missing:
            raise ValidationError(f"the dataset lacks the column(s) {missing}; it has {names}. Rename them "
                                  "(ds.rename_columns({'question': 'prompt'}))")
        if ledger is not None and "id" not in names:
            raise ValidationError("a ledger needs an 'id' column (unique per item): resuming skips items by id")
    limiter = None
    if limit is not None:
        limiter = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(_Schedule).remote()
    # Ray Data starts a pool's actors with max_restarts=-1 and max_task_retries=-1 (restart a dead actor,
    # run its batch again); ray_remote_args may not turn that off
    options: dict[str, Any] = {"num_cpus": num_cpus, **(ray_remote_args or {})}
    for key in ("max_restarts", "max_task_retries"):
        if key in options:
            raise ValidationError(f"ray_remote_args: {key} is set by Ray Data to -1 (a dead actor's batch is run "
                                  "again, so no row is lost); leave it out")
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
        },
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        batch_size=batch_size,
        batch_format="pandas",
        **options,
    )
