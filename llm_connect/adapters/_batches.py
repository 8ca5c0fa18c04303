"""Provider Batch APIs: every adapter call of a run sent as one batch (per round), at half the price.

OpenAI's Batch API (``POST /v1/files`` uploads a JSONL of requests, ``POST /v1/batches`` starts it,
``GET /v1/batches/{id}`` polls it, ``GET /v1/files/{id}/content`` downloads the output and error files)
and Anthropic's Message Batches (``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` and
its ``results``) both bill a batched request at 50% of the list price
(:data:`~llm_connect.adapters.pricing.BATCH_DISCOUNT`) and are not bound by per-minute rate limits.

How a run goes through them (``judge_many(judge, items, batch=True)``):

1. every row runs as it would without ``batch``, but inside a :class:`BatchCollector`'s scope. When a
   row's judge calls an :class:`~llm_connect.adapters.OpenAICompatibleAdapter` or
   :class:`~llm_connect.adapters.AnthropicAdapter` (whose ``_acomplete`` asks :func:`active_collector`),
   the request body is built by the adapter's own ``_payload`` and the call *waits* instead of being sent;
2. once every row is either finished or waiting, the waiting requests are one *round*: they are
   written to the state file (batch entries, ``custom_id`` -> cache key and rows) **before** they are
   submitted, split by the provider's limits (requests and bytes per batch), their estimated cost
   reserved on the run's budgets, and submitted;
3. the batches are polled (the interval backs off), with a progress bar showing the provider's counts;
4. each reply is parsed by the adapter's own ``_read_reply`` and priced at the batch discount, so a
   row gets the same :class:`~llm_connect.core.LLMResponse` a direct call would give (content, tokens,
   logprobs); the call then goes through the adapter's one paid path (budget charge, response cache),
   so the row, its status and its ledger record are exactly those of a run without ``batch``. Calls
   that ask the same (rows with the same texts) are one request at the provider, billed once: the
   calls split its cost evenly (each row's ``judge_cost_usd`` is its share; their sum, and what the
   budget is charged, is the provider's bill);
5. a compound judge whose later calls depend on earlier replies makes those calls now: they wait,
   and form the next round (one batch per round).

A process killed while it polls is resumed by the same call: the state file (beside the ledger, or
in the folder given) names the submitted batches and the requests in them, so the rerun polls and
collects them instead of submitting again. Collected replies are kept in the state folder (and go
into the adapter's response cache, when it has one) until the run finishes. Per-request errors,
expired and cancelled batches come back as :class:`BatchRequestError` (an ``error`` row) with the
provider's reason; :func:`resubmit_expired` (or ``BatchOptions(resubmit_expired=True)``) sends an
expired or cancelled batch's unfinished requests again on the next run.

What can go wrong, and what happens:

- a batch the provider answers 404 for (removed, or created with another project's key) fails its own
  requests only, with a reason naming the state folder; the other batches are collected, and the
  entry stays in the state (the right key collects it later; :func:`resubmit_expired` sends it again);
- a run killed between creating an OpenAI batch and saving its id finds it again by its uploaded
  file, reading every page of ``GET /batches``; a listing that fails is an error, never "not found"
  (which would pay for the batch twice);
- several runs may share a state folder (two batched runs on one ledger): writes are merged under a
  lock, and each run removes only its own batches; the folder goes when none is left;
- a resumed multi-round run re-runs the rows that ended in an earlier round from the kept replies:
  a row an earlier run recorded with the same replies is not recorded again;
- a state folder per part of a run (one per judge of ``calibrate``) is named by a hash of the part's
  name (:func:`state_subfolder`), always inside its root; removing a state removes only its own files.

This module holds the options and the collector; beside it, one idea each: the state store
(``_batch_state.py``), what every provider implements (``_batch_driver.py``), and one module per provider's
Batch API (``_batch_openai.py``, ``_batch_anthropic.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import BudgetReservation, RunConfig
from ..errors import AdapterError, BudgetExceededError, ValidationError
from ._batch_anthropic import _AnthropicDriver
from ._batch_driver import _Driver
from ._batch_openai import _OpenAIDriver
from ._batch_state import _UNFINISHED, BatchState, _inside, resubmit_expired, state_subfolder
from .pricing import BATCH_DISCOUNT

__all__ = [
    "BatchCollector",
    "BatchOptions",
    "BatchRequestError",
    "active_collector",
    "batch_options",
    "resubmit_expired",
    "state_subfolder",
]

logger = logging.getLogger("llm_connect.adapters")

#: the collector of the run in progress (``None``: calls go out one by one, as usual)
_ACTIVE: contextvars.ContextVar[BatchCollector | None] = contextvars.ContextVar("llm_connect_batch", default=None)
#: the row (work position) the current call is made for
_ROW: contextvars.ContextVar[int | None] = contextvars.ContextVar("llm_connect_batch_row", default=None)



def active_collector() -> BatchCollector | None:
    """The batch collector whose scope this call runs in, or ``None``."""
    return _ACTIVE.get()


class BatchRequestError(AdapterError):
    """A request of a provider batch did not produce a reply: the provider's reason is in the message.

    ``kind`` is ``"error"`` (the request failed: the provider's error), ``"expired"`` (the batch
    expired before it ran), ``"cancelled"`` (the batch was cancelled) or ``"failed"`` (the whole batch
    was rejected, e.g. at validation). ``batch_id`` and ``custom_id`` name it at the provider.

    Parameters
    ----------
    message : str
        The message.
    kind : {"error", "expired", "cancelled", "failed"}
        What happened (above).
    batch_id : str, optional
        The provider's batch.
    custom_id : str, optional
        The request within it.
    status : int, optional
        The HTTP status of the request's error.
    provider_message : str, optional
        The provider's own words.
    adapter_id : str, optional
        The adapter.
    """

    def __init__(self, message: str, *, kind: str, batch_id: str | None = None, custom_id: str | None = None,
                 status: int | None = None, provider_message: str | None = None,
                 adapter_id: str | None = None) -> None:
        super().__init__(message, status=status, provider_message=provider_message, adapter_id=adapter_id)
        self.kind = kind
        self.batch_id = batch_id
        self.custom_id = custom_id


@dataclass
class BatchOptions:
    """How a run uses the Batch APIs (``batch=BatchOptions(...)``; ``batch=True`` takes the defaults).

    Several runs may share one state folder at the same time (two batched runs on one ledger): its
    writes are merged under a lock (``<state root>.lock``, beside it), and each run removes only its
    own batches when it finishes.

    Parameters
    ----------
    state_dir : str or os.PathLike, optional
        Where the state file and collected replies live (default: beside the ledger,
        ``<ledger>.batches/``; without a ledger, a temporary folder: no resume).
    poll_interval_s : float, optional
        The first wait between polls (``$LLM_CONNECT_BATCH_POLL_S`` sets the first wait and the cap when
        both are left as they are, e.g. for tests; else 1 s).
    poll_max_interval_s : float, optional
        The longest wait between polls (else 60 s).
    poll_backoff : float, default 1.5
        Each wait is this times the last.
    max_wait_s : float, optional
        Give up polling after this long (the batches stay submitted; the same call later collects them).
    max_requests : int, optional
        Requests per batch; default the provider's limit (OpenAI 50,000; Anthropic 100,000).
    max_bytes : int, optional
        Bytes per batch; default the provider's limit (OpenAI 200 MB; Anthropic 256 MB).
    completion_window : str, default "24h"
        The provider's completion window.
    progress : bool, default True
        Show the polling bar (a run with ``progress=False`` turns it off whatever this says).
    resubmit_expired : bool, default False
        Requests of an expired or cancelled batch recorded in the state are sent again instead of coming
        back as errors.
    keep_state : bool, default False
        Keep the state folder after a run that finished (by default it is removed, unless some requests
        expired or were cancelled, so they can be resubmitted).
    state_root : str or os.PathLike, optional
        The folder ``state_dir`` must be inside (set by runs that keep one state folder per part, e.g. per
        judge of ``calibrate``, under one root; default: ``state_dir`` itself); nothing outside it is ever
        removed, and it is removed too when the run leaves it empty.
    settle_s : float, default 0.005
        How long the rows must stay still (all finished or waiting) before a round is sent.

    See Also
    --------
    llm_connect.grading.judge_many : ``batch=`` of every judging entry point.
    """

    state_dir: str | os.PathLike[str] | None = None
    poll_interval_s: float | None = None
    poll_max_interval_s: float | None = None
    poll_backoff: float = 1.5
    max_wait_s: float | None = None
    max_requests: int | None = None
    max_bytes: int | None = None
    completion_window: str = "24h"
    progress: bool = True
    resubmit_expired: bool = False
    keep_state: bool = False
    state_root: str | os.PathLike[str] | None = None
    #: how long the rows must stay still (all finished or waiting) before a round is sent
    settle_s: float = 0.005

    def intervals(self) -> tuple[float, float]:
        """The first wait between polls and the cap (``$LLM_CONNECT_BATCH_POLL_S`` when both are unset).

        Returns
        -------
        tuple of (float, float)
            ``(first, cap)`` in seconds.
        """
        env = os.environ.get("LLM_CONNECT_BATCH_POLL_S")
        first = self.poll_interval_s if self.poll_interval_s is not None else float(env) if env else 1.0
        cap = self.poll_max_interval_s if self.poll_max_interval_s is not None else float(env) if env else 60.0
        return max(0.0, first), max(first, cap)


def batch_options(batch: Any, ledger: Any = None) -> BatchOptions | None:
    """``judge_many``'s ``batch=`` as options: ``False``/``None`` is off; ``True`` the defaults, with the
    state beside ``ledger`` (``<ledger path>.batches``); a path is the state folder; a
    :class:`BatchOptions` is taken as is (its ``state_dir`` defaulting to the ledger's). Anything else is a
    :class:`ValidationError`: the rule of every ``batch=``, which :func:`llm_connect._options.check_run_options`
    applies too."""
    if batch is None or batch is False:
        return None
    if batch is True:
        options = BatchOptions()
    elif isinstance(batch, BatchOptions):
        options = batch
    elif isinstance(batch, (str, os.PathLike)):
        options = BatchOptions(state_dir=batch)
    else:
        raise ValidationError(f"batch must be True, False, a folder or BatchOptions, got {batch!r}")
    if options.state_dir is None:
        path = getattr(ledger, "path", None)
        if isinstance(path, (str, os.PathLike)) and "://" not in str(path):
            options = BatchOptions(**{**options.__dict__, "state_dir": Path(f"{os.fspath(path)}.batches")})
    return options


def driver_for(adapter: Any) -> _Driver | None:
    """The Batch API of ``adapter`` (OpenAI-compatible or Anthropic), or ``None`` when it has none."""
    provider = getattr(adapter, "provider", None)
    if not hasattr(adapter, "_payload") or not hasattr(adapter, "_send"):
        return None
    if provider == "openai":
        return _OpenAIDriver(adapter)
    if provider == "anthropic":
        return _AnthropicDriver(adapter)
    return None


# -- the collector ---------------------------------------------------------------------


@dataclass
class _Request:
    """A call waiting for its round: one per distinct cache key (the calls asking the same share it)."""

    adapter: Any
    driver: _Driver
    key: str
    payload: dict[str, Any]
    run_config: RunConfig
    estimate_usd: float
    rows: set[int] = field(default_factory=set)
    calls: int = 0  # the calls waiting for it (a row may make the same call twice): they split its cost
    paid: int = 0  # the calls that have taken their share of its cost
    future: asyncio.Future[dict[str, Any]] | None = None
    where: tuple[str | None, str | None] = (None, None)  # (batch id, custom id)
    local_id: str | None = None  # its batch entry in the state


def _durable(ledger: Any) -> bool:
    """Whether an observation appended to ``ledger`` is on disk when the append returns (a ledger, not a
    stand-in that keeps observations to write later, as a Ray batch's recorder does)."""
    from ..quality._base import BaseLedger

    return isinstance(ledger, BaseLedger)


class BatchCollector:
    """One run's batches: gathers the calls its rows make into rounds, submits, polls, hands the replies back.

    Wrap a run's row work with :meth:`wrap` (``judge_many(..., batch=True)`` does) and run every row
    at once; see the module docs.
    """

    def __init__(self, total: int, options: BatchOptions, *, desc: str = "batch") -> None:
        self.options = options
        self.total = total
        self.desc = desc
        self._temporary = options.state_dir is None
        if options.state_dir is not None:
            directory = Path(options.state_dir)
            root = Path(options.state_root) if options.state_root is not None else directory
            if not _inside(directory, root):
                raise ValidationError(f"the batch state folder {os.fspath(directory)!r} is not inside "
                                      f"{os.fspath(root)!r}")
            self.state = BatchState(directory, root=root)
        else:
            self.state = BatchState(Path(tempfile.mkdtemp(prefix="llm_connect-batch-")), shared=False)
        self.entered = 0
        self.finished = 0
        self.waiting: dict[int, int] = {}
        self.pending: dict[str, _Request] = {}
        self.flusher: asyncio.Task[None] | None = None
        self.rounds = 0
        self.submitted: list[str] = []  # provider batch ids this run submitted
        self.collected: list[str] = []  # provider batch ids this run collected
        self.used: set[str] = set()  # local ids of the state's entries this run submitted, polled or read
        self.charged: set[str] = set()  # cache keys whose cost this run has charged (once per key)
        self.served: dict[int, set[str]] = {}  # row -> "<local id>/<custom id>" of the replies it was given

    # -- rows ---------------------------------------------------------------------------

    def wrap(self, work: Callable[[int], Awaitable[Any]]) -> Callable[[int], Awaitable[Any]]:
        """``work`` run in this collector's scope, with the row counted (entered / finished)."""

        async def batched(pos: int) -> Any:
            active, row = _ACTIVE.set(self), _ROW.set(pos)
            self.entered += 1
            try:
                return await work(pos)
            finally:
                self.finished += 1
                _ROW.reset(row)
                _ACTIVE.reset(active)

        return batched

    # -- the ledger ---------------------------------------------------------------------

    def _mark(self) -> str | None:
        row = _ROW.get()
        served = self.served.get(row) if row is not None else None
        if self._temporary or not served:
            return None
        return json.dumps([row, sorted(served)])

    def recorded_before(self, ledger: Any) -> bool:
        """Whether the current row's judgment is already in ``ledger``: an earlier run of this state recorded
        the row after being given the very same replies (same batch entries, same requests). A resumed
        multi-round run (a cascade, a compound judge) re-runs the rows that ended in an earlier round from
        the replies kept in the state; they were recorded then, and are not recorded again."""
        mark = self._mark()
        return mark is not None and _durable(ledger) and mark in self.state.marks

    def note_recorded(self, ledger: Any) -> None:
        """The current row's judgment was appended to ``ledger``: remember it in the state (written with the
        state's next write, which comes before the next round is submitted and when the run ends)."""
        mark = self._mark()
        if mark is not None and _durable(ledger) and mark not in self.state.marks:
            self.state.marks.add(mark)
            self.state.pending_marks.append(mark)

    def _served(self, row: int, local_id: str | None, custom_id: str | None) -> None:
        if local_id is not None and custom_id is not None:
            self.served.setdefault(row, set()).add(f"{local_id}/{custom_id}")

    # -- calls --------------------------------------------------------------------------

    async def route(self, adapter: Any, prompt: str, run_config: RunConfig, invoke: Callable[[], Awaitable[Any]],
                    estimate_usd: float) -> tuple[Callable[[], Awaitable[Any]], float]:
        """``(the call to make, its cost estimate)`` for an adapter call made in this run: a call with a
        cached reply, from outside a row or to an adapter without a Batch API goes as it is; any other
        waits for its round and returns the batch's reply (priced at the batch discount).

        The calls of one round that ask the same (the same cache key) are one request at the provider,
        billed once: they split its cost evenly (each row's ``judge_cost_usd`` carries its share, and the
        budget is charged the bill once); the same request asked again later in the run costs nothing."""
        from ._cache import active_session, cache_key

        row = _ROW.get()
        driver = driver_for(adapter)
        if row is None or driver is None:
            return invoke, estimate_usd
        key = cache_key(type(adapter).__qualname__, adapter.base_url, adapter.model_id, prompt, run_config)
        session = active_session()
        if session is not None:  # the session's cache stands in for the adapter's (see _cache.ReplySession)
            if session.mode == "replay" or (session.mode == "auto" and session.recorded(session.key(key))):
                return invoke, estimate_usd  # replayed, or refused as a miss, by the shared call path
        else:
            cache = getattr(adapter, "cache", None)
            if cache is not None and key in cache._cache:
                found = self.state.where().get(key)
                if found is not None:  # a reply a batch of this state gave, kept in the cache
                    self.used.add(found[0]["local_id"])
                    self._served(row, found[0]["local_id"], found[1])
                return invoke, estimate_usd
        request, outcome = await self._wait(adapter, driver, key, prompt, run_config,
                                            estimate_usd * BATCH_DISCOUNT, row)
        where = request.where
        if not outcome.get("ok"):
            kind = str(outcome.get("kind", "error"))
            reason = str(outcome.get("error"))
            error = BatchRequestError(
                f"{adapter.adapter_id}: the provider's Batch API returned no reply for this request ({kind}): "
                f"{adapter._scrub(reason)} (batch {where[0]}, custom_id {where[1]})"
                + ("; resubmit with llm_connect.adapters.resubmit_expired(state_dir) and run again"
                   if kind in _UNFINISHED else ""),
                kind=kind, batch_id=where[0], custom_id=where[1], status=outcome.get("status"),
                provider_message=adapter._scrub(reason), adapter_id=adapter.adapter_id)

            async def failed() -> Any:
                raise error

            return failed, 0.0
        self._served(row, request.local_id, where[1])
        # the usage of a batched reply is read as a direct one's, cached prompt tokens included
        response = adapter._response(outcome["body"], 0.0, batch=True, share=lambda bill: self._share(request, bill))

        async def replied() -> Any:
            return response

        return replied, response.cost_usd

    def _share(self, request: _Request, bill: float) -> float:
        """This call's part of its request's bill: an even split over the calls that waited for it; 0.0 once
        the run has charged that request (asked again in a later round, or served from the state twice)."""
        if request.key in self.charged:
            return 0.0
        request.paid += 1
        if request.paid >= request.calls:
            self.charged.add(request.key)
        return bill / max(1, request.calls)

    async def _wait(self, adapter: Any, driver: _Driver, key: str, prompt: str, run_config: RunConfig,
                    estimate_usd: float, row: int) -> tuple[_Request, dict[str, Any]]:
        request = self.pending.get(key)
        if request is None:
            request = self.pending[key] = _Request(adapter, driver, key, adapter._payload(prompt, run_config),
                                                   run_config, estimate_usd)
            request.future = asyncio.get_running_loop().create_future()
        request.rows.add(row)
        request.calls += 1
        assert request.future is not None
        self.waiting[row] = self.waiting.get(row, 0) + 1
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.ensure_future(self._flush())
        try:
            outcome = await asyncio.shield(request.future)
        finally:
            self.waiting[row] -= 1
        return request, outcome

    # -- rounds -------------------------------------------------------------------------

    async def _flush(self) -> None:
        """Wait until every row is finished or waiting (and stays so), then send the waiting calls."""
        last = None
        while True:
            await asyncio.sleep(self.options.settle_s)
            blocked = sum(1 for n in self.waiting.values() if n > 0)
            now = (self.entered, self.finished, blocked, len(self.pending))
            if blocked + self.finished >= self.entered and now == last:
                break
            last = now
        requests, self.pending = self.pending, {}
        if not requests:
            return
        self.rounds += 1
        try:
            outcomes = await self._round(list(requests.values()))
        except BaseException as exc:
            for request in requests.values():
                if request.future is not None and not request.future.done():
                    request.future.set_exception(exc if isinstance(exc, Exception) else AdapterError(
                        f"the batch round was stopped ({type(exc).__name__})"))
            if not isinstance(exc, Exception):
                raise
            return
        for request in requests.values():
            if request.future is not None and not request.future.done():
                outcome = outcomes.get(request.key)
                if isinstance(outcome, BaseException):
                    request.future.set_exception(outcome)
                else:
                    request.future.set_result(outcome or {"ok": False, "kind": "failed", "error": "no outcome"})

    async def _round(self, requests: list[_Request]) -> dict[str, Any]:
        """Submit (or find in the state) every request's batch, poll them all, return key -> outcome.

        A batch that cannot be submitted, looked up or polled (the provider answers 404 for it: removed, or
        created with another key) fails its own requests, with a reason naming the state folder; the other
        batches of the round are submitted, polled and collected as usual."""
        where = self.state.where()
        outcomes: dict[str, Any] = {}
        polls: dict[str, tuple[dict[str, Any], _Driver]] = {}
        failed: dict[str, dict[str, Any]] = {}  # local id -> the outcome of every request of that batch
        new: list[_Request] = []
        for request in requests:
            found = where.get(request.key)
            if found is not None:
                entry, cid = found
                request.where, request.local_id = (entry.get("batch_id"), cid), entry["local_id"]
                self.used.add(entry["local_id"])
                if entry.get("status") == "collected":
                    outcome = self.state.results(entry).get(cid)
                    if outcome is not None and not (self.options.resubmit_expired
                                                    and outcome.get("kind") in _UNFINISHED):
                        outcomes[request.key] = outcome
                        continue
                    entry["requests"].pop(cid, None)  # sent again below
                elif entry.get("batch_id") or entry.get("file_id"):
                    polls[entry["local_id"]] = (entry, request.driver)
                    continue
                else:  # written, never submitted: plan it again
                    entry["requests"].pop(cid, None)
            new.append(request)
        self.state.batches = [e for e in self.state.batches if e.get("requests")]
        self.state.changed()
        held = self._reserve(new, outcomes)
        try:
            for entry, driver, lines in self._plan([r for r in new if r.key not in outcomes]):
                self.used.add(entry["local_id"])
                try:
                    await driver.submit(entry, lines, self.state.save, self.options.completion_window)
                except AdapterError as exc:
                    failed[entry["local_id"]] = self._unreachable(entry, exc, "submit")
                    continue
                polls[entry["local_id"]] = (entry, driver)
                self.submitted.append(str(entry["batch_id"]))
            for local_id, (entry, driver) in list(polls.items()):
                if not entry.get("batch_id"):  # an upload whose batch was not created before a kill
                    try:
                        await driver.submit(entry, [], self.state.save, self.options.completion_window)
                    except AdapterError as exc:
                        failed[local_id] = self._unreachable(entry, exc, "submit")
                        del polls[local_id]
            collected, lost = await self._poll(polls)
            failed.update(lost)
        finally:
            for reservation in held:
                reservation.release()
        by_key = {r.key: r for r in requests}
        entries = {**{k: e for k, (e, _) in polls.items()},
                   **{e["local_id"]: e for e in self.state.batches if e["local_id"] in failed}}
        answered: list[tuple[str, dict[str, dict[str, Any]] | None]] = [*collected.items()]
        answered += [(local_id, None) for local_id in failed]
        for local_id, results in answered:
            ended = entries.get(local_id)
            for cid, asked in (ended or {}).get("requests", {}).items():
                waiting = by_key.get(asked["key"])
                if waiting is not None and ended is not None:
                    waiting.where, waiting.local_id = (ended.get("batch_id"), cid), local_id
                    outcomes.setdefault(waiting.key, failed[local_id] if results is None else results.get(cid))
        return outcomes

    def _unreachable(self, entry: dict[str, Any], exc: AdapterError, step: str) -> dict[str, Any]:
        """The outcome of every request of a batch that could not be submitted, looked up or polled (``step``):
        the batch stays in the state, so a later run can collect it; a batch the provider does not know (404)
        is marked so that :func:`resubmit_expired` can send its requests again."""
        folder = self.state.directory
        batch = entry.get("batch_id") or entry.get("file_id") or entry["local_id"]
        if exc.status == 404 and step == "poll":
            said = f" ({exc.provider_message})" if exc.provider_message else ""
            reason = (f"the provider does not know batch {batch} (HTTP 404{said}: it was removed, or it was created "
                      f"with another API key or project). Its {len(entry.get('requests', {}))} request(s) stay in "
                      f"the batch state {folder}: run again with the key that created it to collect them, or call "
                      f"llm_connect.adapters.resubmit_expired({os.fspath(folder)!r}) and run again to send them in a "
                      "new batch (paid again)")
            entry["unknown"] = f"HTTP 404{said}"
            with contextlib.suppress(AdapterError, OSError):
                self.state.save()
            return {"ok": False, "kind": "unknown", "error": reason, "status": 404}
        action = {"submit": "could not submit", "poll": "could not poll or collect"}[step]
        reason = (f"{action} batch {batch}: {exc}. It stays in the batch state {folder}: "
                  "run the same call again to carry on from there")
        return {"ok": False, "kind": "error", "error": reason, "status": exc.status}

    def _reserve(self, new: list[_Request], outcomes: dict[str, Any]) -> list[BudgetReservation]:
        """Reserve each new request's estimated (batch) cost on the budgets it is charged to, before
        submission; a request the budget cannot cover is not submitted (its row says "budget exhausted")."""
        from ._call import _try_reserve, paying_trackers

        held: list[BudgetReservation] = []
        for request in new:
            trackers = paying_trackers(request.run_config)
            try:
                got = _try_reserve(trackers, request.estimate_usd)
            except BudgetExceededError as exc:
                outcomes[request.key] = exc
                continue
            if got is None:
                full = next(t for t in trackers if t.limit_usd is not None)
                outcomes[request.key] = BudgetExceededError(full.spent_usd, float(full.limit_usd or 0.0))
                continue
            held += got
        return held

    def _plan(self, requests: list[_Request]) -> Iterator[tuple[dict[str, Any], _Driver, list[dict[str, Any]]]]:
        """New batch entries (written to the state before they are yielded for submission), split by
        endpoint and by the limits on requests and bytes per batch."""
        groups: dict[tuple[int, str, str], list[_Request]] = {}
        for request in requests:
            adapter = request.adapter
            groups.setdefault((id(adapter), adapter.base_url, adapter.model_id), []).append(request)
        for members in groups.values():
            driver = members[0].driver
            max_requests = self.options.max_requests or driver.max_requests
            max_bytes = self.options.max_bytes or driver.max_bytes
            chunk: list[tuple[_Request, dict[str, Any]]] = []
            size = 0
            for request in members:
                line = driver.line(f"r{len(chunk)}", request.payload)
                n = len(json.dumps(line, ensure_ascii=False).encode("utf-8")) + 1
                if chunk and (len(chunk) >= max_requests or size + n > max_bytes):
                    yield self._entry(driver, chunk)
                    chunk, size = [], 0
                    line = driver.line("r0", request.payload)
                chunk.append((request, line))
                size += n
            if chunk:
                yield self._entry(driver, chunk)

    def _entry(self, driver: _Driver, chunk: list[tuple[_Request, dict[str, Any]]]
               ) -> tuple[dict[str, Any], _Driver, list[dict[str, Any]]]:
        adapter = driver.adapter
        entry: dict[str, Any] = {
            "local_id": f"b{int(time.time())}-{uuid.uuid4().hex[:8]}", "provider": adapter.provider,
            "endpoint": adapter._shown(adapter.base_url), "model": adapter.model_id, "adapter_id": adapter.adapter_id,
            "status": "prepared", "file_id": None, "batch_id": None, "round": self.rounds,
            "requests": {}}
        lines = []
        for i, (request, line) in enumerate(chunk):
            cid = f"r{i}"
            line["custom_id"] = cid
            entry["requests"][cid] = {"key": request.key, "rows": sorted(request.rows)}
            lines.append(line)
        self.state.batches.append(entry)
        self.state.save()  # before submission: a kill from here on resumes this entry
        return entry, driver, lines

    async def _poll(self, polls: Mapping[str, tuple[dict[str, Any], _Driver]]
                    ) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]:
        """Poll every batch until it ends (backing off), collect and store its outcomes: ``(local id -> outcomes,
        local id -> the one outcome of a batch that could not be polled or collected)``."""
        if not polls:
            return {}, {}
        first, cap = self.options.intervals()
        total = sum(len(entry["requests"]) for entry, _ in polls.values())
        bar = None
        if self.options.progress:
            from ..stats._progress import progress_bar

            bar = progress_bar(total, desc=f"{self.desc}: batch round {self.rounds}", unit="request")
        counts: dict[str, dict[str, int]] = {}
        out: dict[str, dict[str, dict[str, Any]]] = {}
        lost: dict[str, dict[str, Any]] = {}
        todo = dict(polls)
        wait = first
        started = time.monotonic()
        try:
            while todo:
                for local_id, (entry, driver) in list(todo.items()):
                    try:
                        finished, shown, info = await driver.poll(entry)
                        results = await driver.collect(entry, info) if finished else None
                    except AdapterError as exc:
                        lost[local_id] = self._unreachable(entry, exc, "poll")
                        counts.pop(local_id, None)
                        del todo[local_id]
                        continue
                    counts[local_id] = shown
                    if results is not None:
                        self.state.store_results(entry, results)
                        self.collected.append(str(entry["batch_id"]))
                        out[local_id] = results
                        del todo[local_id]
                if bar is not None:
                    sums = {k: sum(c.get(k, 0) for c in counts.values())
                            for k in ("validating", "in_progress", "completed", "failed")}
                    bar.set_postfix(sums, refresh=False)
                    bar.update(max(0, min(total, sums["completed"] + sums["failed"]) - bar.n))  # redrawn as it allows
                if not todo:
                    break
                if self.options.max_wait_s is not None and time.monotonic() - started > self.options.max_wait_s:
                    ids = ", ".join(str(e.get("batch_id")) for e, _ in todo.values())
                    after = ("this run's state was temporary (no ledger and no state folder), so a rerun "
                             "submits them again: pass batch=FOLDER (or a ledger) to be able to collect them"
                             if self._temporary else
                             f"run the same call again later to collect them (state in {self.state.directory})")
                    reason = (f"the batches ({ids}) did not end within max_wait_s={self.options.max_wait_s:g}s; "
                              f"they stay submitted: {after}")
                    for local_id in todo:  # the batches that did end are collected: their rows are judged
                        lost[local_id] = {"ok": False, "kind": "error", "error": reason}
                    break
                await asyncio.sleep(wait)
                wait = min(cap, wait * self.options.poll_backoff if wait else cap)
        finally:
            if bar is not None:
                bar.close()
        return out, lost

    # -- end ----------------------------------------------------------------------------

    def close(self) -> None:
        """The run is over: drop its batches from the state (and remove the state folder once no batch is
        left in it: another run's are kept), unless asked to keep them, some of their requests can be
        resubmitted, or some were not collected (``max_wait_s`` ran out, or the provider did not know a
        batch: the next run collects them)."""
        if self._temporary:
            self.state.finish()
        elif self.options.keep_state or self.state.unfinished(self.used) or self.state.uncollected(self.used):
            if self.state.pending_marks:
                self.state.save()
        else:
            self.state.finish(self.used)

    @property
    def summary(self) -> dict[str, Any]:
        """``{"rounds", "submitted", "collected", "state_dir"}``: what this run did at the provider."""
        return {"rounds": self.rounds, "submitted": list(self.submitted), "collected": list(self.collected),
                "state_dir": None if self._temporary else str(self.state.directory)}

