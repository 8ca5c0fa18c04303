"""The runner: items in, one row per item out, in order, never fewer.

``grading`` (``judge_many``, ``grade_many``), ``pipelines`` (``Pipeline.run_many``)
and ``calibration`` (through ``judge_many``) all run here; this module imports
none of them. A run is ``n`` rows of a per-row coroutine ``work(i) -> row`` and a
``finish(rows, interrupted) -> frame`` step (usually :func:`attach_rows`, onto an
items frame, :func:`llm_connect.items.items_frame`), gathered in a :class:`RunPlan`
and run by :func:`run_plan` (sync) or :func:`arun_plan` (awaitable): both take the
same path, so the sync and async twins of an entry point return the same columns.
("Batch" means only the providers' Batch APIs, :mod:`llm_connect.adapters`: a
plan's rows go through them with ``batch=``, see ``llm_connect.grading.judge_many``.)

Every item becomes exactly one row, in input order: ``scored``, ``unscored``
(the judge's reply held no usable verdict: the reason is kept, the score is
NaN, never 0), ``error`` (the call failed: the error is kept) or, for a
selective judge (:class:`~llm_connect.grading.SelectiveJudge`, a cascade),
``abstained`` (its confidence was below its calibrated cut-off: no score, NaN,
never 0; its confidence in the row; never recorded in a ledger). Work runs on
the package's background event loop (so the sync API works inside Jupyter),
``concurrency`` workers pulling items. Ctrl-C stops a sync run: rows that
finished are kept, the others are ``error`` rows saying they were interrupted,
and ``df.attrs["interrupted"]`` is True.

Money: a run has one *run budget* (``budget=``, a :class:`BudgetTracker`
or a limit in USD; by default ``run_config.budget_tracker``; :func:`run_budget`).
Each row runs inside its scope (:func:`llm_connect.core.budget_scope`), so every paid
call made anywhere in the row (the judge's own, although its call config drops
the caller's tracker; each member of a compound judge; each unit of a
pipeline) is reserved on it before the call and charged after it. A reply
that came back is kept and its cost counted; once the money is spent no call
starts, and the rows not attempted are ``error`` rows saying "budget
exhausted". ``df.attrs["budget"]`` holds the budget's state at the end.

Recording to a ledger is the caller's: the runner only offers
:func:`record_row`, which records what a ``make()`` callable builds and reports a
failure in the row's ``ledger_error`` column (the judgment stands), and
:func:`record_rows_now`, its sync twin for a ``finish`` step. Both record once
(:func:`extend_once`): a judgment the ledger already holds (same item, grader,
rubric and candidate) is not written again, and ``attrs["ledger"]`` counts it.
Rows that finish together are written together (a group commit per ledger and
event loop), so the ledger recording lives with the runner that runs the rows.

What a row is of (item texts, item ids and keys) is :mod:`llm_connect.items`;
the columns a result frame holds are :mod:`llm_connect.columns`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from ._options import check_run_options
from ._runtime import on_background, run_sync, to_thread
from .core import BudgetTracker, LLMResponse, RunConfig, as_budget, budget_scope
from .errors import BudgetExceededError, JudgeAbstained, JudgeReplyError

if TYPE_CHECKING:
    import pandas as pd

    from .quality import BaseLedger, QualityObservation

__all__ = [
    "BUDGET_EXHAUSTED",
    "INTERRUPTED",
    "LEDGER_ERROR",
    "RECORDED",
    "LedgerSink",
    "Row",
    "RunPlan",
    "Work",
    "arun_plan",
    "arun_rows",
    "as_ledger",
    "attach_rows",
    "describe_error",
    "extend_once",
    "is_judge",
    "ledger_columns",
    "note_budget",
    "note_ledger",
    "progress_bar",
    "record_row",
    "record_rows_now",
    "row_for_exception",
    "run_budget",
    "run_plan",
    "run_rows",
]

log = logging.getLogger("llm_connect")

LEDGER_ERROR = "ledger_error"
BUDGET_EXHAUSTED = "budget exhausted"
INTERRUPTED = "interrupted: the run was stopped before this row finished"

Row = dict[str, Any]
Work = Callable[[int], Awaitable[Row]]

_FLOAT_COLUMNS = ("quality_score", "latency_ms", "judge_cost_usd")
_INT_COLUMNS = ("tokens_in", "tokens_out", "judge_tokens_in", "judge_tokens_out", "judge_tokens_cached", "calls")
#: The judge's usage under the names beside ``judge_cost_usd``: a row that does not set them
#: itself has its ``tokens_in`` / ``tokens_out`` there (see :func:`attach_rows`).
_JUDGE_TOKENS = {"judge_tokens_in": "tokens_in", "judge_tokens_out": "tokens_out"}


# -- rows of failures ----------------------------------------------------------------


def _usage_from_exception(exc: BaseException) -> Row:
    response = getattr(exc, "response", None)  # JudgeReplyError / BudgetExceededError carry what was paid
    if isinstance(response, LLMResponse):
        return {"tokens_in": response.tokens_in, "tokens_out": response.tokens_out,
                "judge_cost_usd": response.cost_usd, "judge_tokens_cached": response.tokens_cached}
    return {}


def describe_error(exc: BaseException) -> str:
    """``"TypeName: message"`` (the type alone when the message is empty).

    Parameters
    ----------
    exc : BaseException
        The exception.

    Returns
    -------
    str
        Its type's name and message.

    Examples
    --------
    >>> describe_error(ValueError("no 'prompt' column")), describe_error(TimeoutError())
    ("ValueError: no 'prompt' column", 'TimeoutError')
    """
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _not_attempted(budget: BudgetTracker) -> Row:
    return {
        "status": "error",
        "error": f"{BUDGET_EXHAUSTED}: this row was not attempted (spent ${budget.spent_usd:.6f} "
        f"of the ${budget.limit_usd:.6f} limit)",
    }


def row_for_exception(exc: Exception) -> Row:
    """The ``abstained``, ``unscored`` or ``error`` row an exception of a row's work makes (with the usage it reports).

    A :class:`~llm_connect.errors.JudgeAbstained` is an ``abstained`` row: no score (NaN, never 0), no error,
    its reason in ``notes``, its ``confidence`` and the judge's own columns it carries. A
    :class:`~llm_connect.errors.JudgeReplyError` is an ``unscored`` row (its reason in ``error`` and
    ``notes``); a :class:`~llm_connect.errors.BudgetExceededError` an ``error`` row saying "budget exhausted";
    any other exception an ``error`` row with :func:`describe_error`.

    Parameters
    ----------
    exc : Exception
        What the row's work raised.

    Returns
    -------
    dict
        The row's columns (``status``, ``error`` ...; with the tokens and cost the exception's response
        reports, when it carries one).

    Examples
    --------
    >>> row_for_exception(RuntimeError("refused"))
    {'status': 'error', 'error': 'RuntimeError: refused'}
    """
    if isinstance(exc, JudgeAbstained):
        return {**exc.columns, "status": "abstained", "error": None, "notes": str(exc), "confidence": exc.confidence,
                **_usage_from_exception(exc)}
    if isinstance(exc, JudgeReplyError):
        reason = str(exc)
        return {"status": "unscored", "error": reason, "notes": reason, **_usage_from_exception(exc)}
    if isinstance(exc, BudgetExceededError):
        return {
            "status": "error",
            "error": f"{BUDGET_EXHAUSTED} before this row finished: a call was refused (spent "
            f"${exc.spent_usd:.6f} of the ${exc.limit_usd:.6f} limit)",
            **_usage_from_exception(exc),
        }
    return {"status": "error", "error": describe_error(exc), **_usage_from_exception(exc)}


# -- the row runner ------------------------------------------------------------------


class _Run:
    """Shared state of one run: the rows, and an event set when the workers are gone."""

    def __init__(self, n: int) -> None:
        self.rows: list[Row | None] = [None] * n
        self.finished = threading.Event()


def _filled(rows: list[Row | None]) -> list[Row]:
    return [r if r is not None else {"status": "error", "error": INTERRUPTED} for r in rows]


async def arun_rows(
    n: int,
    work: Work,
    *,
    concurrency: int = 16,
    progress: Any = None,
    state: _Run | None = None,
    budget: BudgetTracker | None = None,
) -> list[Row]:
    """Run ``work(i)`` for ``i`` in ``range(n)`` with at most ``concurrency`` at once.

    ``work`` returns the row's result columns. A :class:`JudgeReplyError` makes
    the row ``unscored``, any other exception an ``error`` row; neither stops
    the run. Every row gets ``status``, ``error`` and ``latency_ms``.

    Parameters
    ----------
    n : int
        The rows to run.
    work : callable
        ``async work(i) -> dict``: row ``i``'s result columns.
    concurrency : int, default 16
        Rows in flight at once (checked by :func:`~llm_connect._options.check_run_options`).
    progress : tqdm-like, optional
        A bar (``update(1)`` per row), or ``None``.
    state : optional
        The run's shared state (the rows so far), kept by :func:`run_rows` for a Ctrl-C.
    budget : BudgetTracker, optional
        The run budget. Each row runs in its scope, so every adapter call of the row is charged to it;
        once it is spent, the rows not yet started are ``error`` rows saying "budget exhausted" (not
        attempted).

    Returns
    -------
    list of dict
        The ``n`` rows, in order.

    Raises
    ------
    ValidationError
        ``concurrency`` is not a positive integer.

    See Also
    --------
    run_rows : The sync driver.
    """
    check_run_options(concurrency=concurrency)
    state = state or _Run(n)
    rows = state.rows
    indices = iter(range(n))

    async def one(i: int) -> None:
        start = time.perf_counter()
        if budget is not None and budget.exhausted:
            row = _not_attempted(budget)
        else:
            try:
                with budget_scope(budget):
                    row = dict(await work(i))
                row.setdefault("status", "scored")
                row.setdefault("error", None)
            except Exception as exc:
                row = row_for_exception(exc)
        row.setdefault("latency_ms", (time.perf_counter() - start) * 1000.0)
        rows[i] = row
        if progress is not None:
            progress.update(1)

    async def worker() -> None:
        for i in indices:  # one shared iterator: each index is taken by exactly one worker
            await one(i)

    tasks = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, n))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        state.finished.set()
    return _filled(rows)


def progress_bar(total: int, progress: bool, desc: str) -> Any:
    """A tqdm bar of ``total`` items, or ``None`` when ``progress`` is off.

    The package's one bar (:func:`llm_connect.stats._progress.progress_bar`: live on a terminal or in a
    notebook, one line per 5% of the items in a log).

    Parameters
    ----------
    total : int
        The items.
    progress : bool
        Whether to show it.
    desc : str
        The bar's label.

    Returns
    -------
    tqdm or None
        The bar (close it when done), or ``None``.
    """
    if not progress:
        return None
    from .stats._progress import progress_bar as bar

    return bar(total, desc=desc, unit="item")


def run_rows(
    n: int,
    work: Work,
    *,
    concurrency: int = 16,
    progress: bool = True,
    desc: str = "judging",
    budget: BudgetTracker | None = None,
) -> tuple[list[Row], bool]:
    """Sync driver of :func:`arun_rows` on the background loop.

    A ``KeyboardInterrupt`` stops the run: finished rows are kept, the rest are
    ``error`` rows saying so, and ``interrupted`` is True.

    Parameters
    ----------
    n : int
        The rows to run.
    work : callable
        ``async work(i) -> dict``: row ``i``'s result columns.
    concurrency : int, default 16
        Rows in flight at once.
    progress : bool, default True
        Show a progress bar.
    desc : str, default "judging"
        The bar's label.
    budget : BudgetTracker, optional
        The run budget (see :func:`arun_rows`).

    Returns
    -------
    tuple of (list of dict, bool)
        ``(rows, interrupted)``.
    """
    state = _Run(n)
    bar = progress_bar(n, progress, desc)
    interrupted = False
    try:
        rows = run_sync(arun_rows(n, work, concurrency=concurrency, progress=bar, state=state, budget=budget))
    except KeyboardInterrupt:
        interrupted = True
        state.finished.wait(timeout=10.0)
        rows = _filled(state.rows)
        log.warning("llm_connect: interrupted; %d of %d rows had finished", sum(r is not None for r in state.rows), n)
    finally:
        if bar is not None:
            bar.close()
    return rows, interrupted


async def _arun_rows_with_bar(
    n: int, work: Work, *, concurrency: int, progress: bool, desc: str, budget: BudgetTracker | None
) -> list[Row]:
    bar = progress_bar(n, progress, desc)
    try:
        return await on_background(arun_rows(n, work, concurrency=concurrency, progress=bar, budget=budget))
    finally:
        if bar is not None:
            bar.close()


@dataclass
class RunPlan:
    """One run, ready to go: ``n`` rows of ``work``, turned into a frame by ``finish(rows, interrupted)``.

    What every judging entry point builds (``judge_many``'s :func:`~llm_connect.grading.judge_plan`,
    ``Pipeline.run_many``, ``grade_many``) and hands to :func:`run_plan` or :func:`arun_plan`, so its sync
    and async twins run the same rows and return the same columns.

    Parameters
    ----------
    n : int
        The rows to run (``work(0)`` to ``work(n - 1)``).
    work : callable
        ``async work(i) -> row``: row ``i``'s result columns (a dict). An exception makes an ``unscored``,
        ``abstained`` or ``error`` row (:func:`row_for_exception`); it never stops the run.
    finish : callable
        ``finish(rows, interrupted) -> frame``: the rows, in order, made into the run's result (usually
        :func:`attach_rows` onto the items frame).
    desc : str, default "judging"
        The progress bar's label.
    budget : BudgetTracker, optional
        The run budget (see the module docs): every paid call of a row is reserved on it.
    prepare : callable, optional
        ``async prepare(progress: bool)``, awaited once before the rows in the run budget's scope (e.g. an
        embedding judge embedding the run's distinct texts in a few large calls). It must not fail the run:
        a step it could not do is left to the rows.

    See Also
    --------
    run_plan, arun_plan : run a plan to its frame.
    """

    n: int
    work: Work
    finish: Callable[[list[Row], bool], Any]
    desc: str = "judging"
    budget: BudgetTracker | None = None
    prepare: Callable[[bool], Awaitable[None]] | None = None


async def _prepare(plan: RunPlan, progress: bool) -> None:
    if plan.prepare is not None and plan.n:
        with budget_scope(plan.budget):
            await plan.prepare(progress)


def run_plan(plan: RunPlan, *, concurrency: int = 16, progress: bool = True) -> Any:
    """Run ``plan`` to its frame (sync; works inside a running Jupyter loop).

    Parameters
    ----------
    plan : RunPlan
        The rows, their work and the step that makes them a frame.
    concurrency : int, default 16
        Rows in flight at once.
    progress : bool, default True
        Show a progress bar labelled ``plan.desc``.

    Returns
    -------
    Any
        What ``plan.finish`` returns (a DataFrame, with ``attrs["budget"]`` when the plan has a budget).
        Ctrl-C keeps the rows that finished; the others are ``error`` rows saying they were interrupted.

    Raises
    ------
    ValidationError
        ``concurrency`` is not a positive integer.

    See Also
    --------
    arun_plan : the awaitable twin.
    """
    try:
        run_sync(_prepare(plan, progress))
    except KeyboardInterrupt:  # no row has started: every row says it was interrupted
        log.warning("llm_connect: interrupted before any of %d rows had started", plan.n)
        return note_budget(plan.finish(_filled([None] * plan.n), True), plan.budget)
    rows, interrupted = run_rows(
        plan.n, plan.work, concurrency=concurrency, progress=progress, desc=plan.desc, budget=plan.budget
    )
    return note_budget(plan.finish(rows, interrupted), plan.budget)


async def arun_plan(plan: RunPlan, *, concurrency: int = 16, progress: bool = True) -> Any:
    """The awaitable twin of :func:`run_plan`: the same rows, the same frame.

    Parameters
    ----------
    plan : RunPlan
        The rows, their work and the step that makes them a frame.
    concurrency : int, default 16
        Rows in flight at once.
    progress : bool, default True
        Show a progress bar labelled ``plan.desc``.

    Returns
    -------
    Any
        What ``plan.finish`` returns, as :func:`run_plan` returns it.

    Raises
    ------
    ValidationError
        ``concurrency`` is not a positive integer.

    See Also
    --------
    run_plan : the sync twin.
    """
    await on_background(_prepare(plan, progress))
    rows = await _arun_rows_with_bar(
        plan.n, plan.work, concurrency=concurrency, progress=progress, desc=plan.desc, budget=plan.budget
    )
    return note_budget(plan.finish(rows, False), plan.budget)


# -- judges and items as an entry point is given them -------------------------------

def is_judge(value: Any) -> bool:
    """A judge: an object with a callable ``judge`` method (the :class:`~llm_connect.grading.Judge` protocol).

    Parameters
    ----------
    value : object
        What an entry point was given.

    Returns
    -------
    bool
        Whether it is a judge (a string, bytes or a mapping never is).
    """
    return callable(getattr(value, "judge", None)) and not isinstance(value, (str, bytes, Mapping))


# -- rows into a frame ----------------------------------------------------------------


def attach_rows(frame: Any, rows: list[Row], columns: Iterable[str], interrupted: bool) -> pd.DataFrame:
    """The input frame plus the result columns (an input column of the same name becomes ``<name>_input``).

    Scores, latencies and costs are floats (NaN when absent), token counts ints;
    ``judge_tokens_in`` / ``judge_tokens_out`` are the row's ``tokens_in`` / ``tokens_out`` unless
    it sets them.

    Parameters
    ----------
    frame : DataFrame
        The items frame (:func:`llm_connect.items.items_frame`).
    rows : list of dict
        One row per item, in order.
    columns : iterable of str
        The result columns to add, in order.
    interrupted : bool
        Whether the run was stopped (``attrs["interrupted"]``).

    Returns
    -------
    DataFrame
        A copy of ``frame`` with the columns; ``attrs["interrupted"]`` and ``attrs["counts"]`` (rows per
        status) are set, and ``attrs["ledger"]`` when the rows were recorded (:func:`note_ledger`).
    """
    import pandas as pd

    columns = list(columns)
    out = frame.copy()
    clashes = {c: f"{c}_input" for c in columns if c in out.columns}
    if clashes:
        out = out.rename(columns=clashes)
    data = {c: [r.get(c, r.get(_JUDGE_TOKENS[c])) if c in _JUDGE_TOKENS else r.get(c) for r in rows]
            for c in columns}
    for c in _FLOAT_COLUMNS:
        if c in data:
            data[c] = [math.nan if v is None else float(v) for v in data[c]]
    for c in _INT_COLUMNS:
        if c in data:
            data[c] = [0 if v is None else int(v) for v in data[c]]
    result = pd.DataFrame(data, index=out.index)
    out = pd.concat([out, result], axis=1)
    out.attrs["interrupted"] = interrupted
    out.attrs["counts"] = {s: sum(1 for r in rows if r.get("status") == s) for s in ("scored", "unscored", "error")}
    abstained = sum(1 for r in rows if r.get("status") == "abstained")
    if abstained:  # a selective judge's rows (its run plan adds the count even when it is 0)
        out.attrs["counts"]["abstained"] = abstained
    note_ledger(out, rows)
    return out


# -- money ---------------------------------------------------------------------------


def run_budget(budget: BudgetTracker | float | None, run_config: RunConfig | None) -> BudgetTracker | None:
    """The run budget of an entry point: ``budget``, else the run config's tracker.

    Parameters
    ----------
    budget : BudgetTracker, float or None
        A tracker, or a limit in USD (a new tracker with that limit; see :func:`llm_connect.core.as_budget`).
    run_config : RunConfig or None
        Its ``budget_tracker`` is the run budget when ``budget`` is ``None``.

    Returns
    -------
    BudgetTracker or None
        The tracker every paid call of the run is reserved on (``None``: no limit, nothing counted).

    Raises
    ------
    ValidationError
        ``budget`` is neither a tracker, a number >= 0 nor ``None``.
    """
    tracker = as_budget(budget)
    if tracker is None and run_config is not None:
        tracker = run_config.budget_tracker
    return tracker


def note_budget(out: Any, budget: BudgetTracker | None) -> pd.DataFrame:
    """Record the run budget's state in ``out.attrs["budget"]`` (when there is one).

    Parameters
    ----------
    out : DataFrame
        The run's frame.
    budget : BudgetTracker or None
        The run budget.

    Returns
    -------
    DataFrame
        ``out`` itself.
    """
    if budget is not None:
        out.attrs["budget"] = budget.snapshot()
    return out


# -- ledger --------------------------------------------------------------------------


class LedgerSink(Protocol):
    """What a run records to: a :class:`~llm_connect.quality.BaseLedger`, or any object with
    ``append(observation)`` (:func:`record_row` writes a group at once through its ``extend`` when it has one)."""

    def append(self, observation: QualityObservation, /) -> None:
        """Record one observation.

        Parameters
        ----------
        observation : QualityObservation
            The judgment (or label) to record.
        """


SinkT = TypeVar("SinkT", bound=LedgerSink)


@overload
def as_ledger(ledger: None) -> None: ...
@overload
def as_ledger(ledger: str | os.PathLike[str]) -> BaseLedger: ...
@overload
def as_ledger(ledger: SinkT) -> SinkT: ...
def as_ledger(ledger: Any) -> Any:
    """The ledger a run records to: a path or URI opened, a ledger (or ``None``) as it is.

    Parameters
    ----------
    ledger : BaseLedger or str or os.PathLike, optional
        A ledger (any :class:`LedgerSink`), or the path or URI of one: opened with
        :func:`~llm_connect.quality.open_ledger` (a JSON Lines file, existing or not; a Parquet directory
        or URI).

    Returns
    -------
    LedgerSink or None
        The ledger; ``None`` for ``None``.

    See Also
    --------
    llm_connect._options.check_run_options : Checks ``ledger`` (and its ``task_type``) first.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> as_ledger(pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")  # doctest: +ELLIPSIS
    QualityLedger('...ledger.jsonl')
    >>> as_ledger(None) is None
    True
    """
    if isinstance(ledger, (str, os.PathLike)):
        from .quality import open_ledger

        return open_ledger(ledger)
    return ledger


#: A row's private note of what became of its observation: ``"recorded"``, or ``"held"`` (the ledger already
#: held its judgment, so it was not recorded again); :func:`attach_rows` counts them in ``attrs["ledger"]``.
RECORDED = "_ledger"


def extend_once(ledger: Any, observations: list[Any]) -> list[bool]:
    """Write ``observations`` to ``ledger`` once.

    The ones whose judgment or label it already holds are skipped
    (:meth:`~llm_connect.quality.BaseLedger.extend_once`). A sink without ``extend_once`` gets them all
    (through ``extend``, else ``append``).

    Parameters
    ----------
    ledger : LedgerSink
        The ledger.
    observations : list of QualityObservation
        What to write.

    Returns
    -------
    list of bool
        For each, whether it was written.
    """
    once = getattr(ledger, "extend_once", None)
    if callable(once):
        return list(once(observations).written)
    if callable(getattr(ledger, "extend", None)):
        ledger.extend(observations)
    else:
        for o in observations:
            ledger.append(o)
    return [True] * len(observations)


class _GroupCommit:
    """Group commit of one ledger's observations on one event loop.

    Rows that finish while a write is in flight queue their observations; the next write takes them all in
    one :func:`extend_once` (one lock acquisition for a JSON Lines ledger, one file per partition for a
    :class:`~llm_connect.quality.ParquetLedger` instead of one file per row), which skips the judgments the
    ledger already holds. A row still waits for its own observation's write, so it is never reported
    recorded before it is. When the ledger refuses the group for one observation's sake (a
    :class:`ValueError` or :class:`TypeError`, raised before anything is written), the group is written
    again one observation at a time, so only that row fails; an :class:`OSError` fails the whole group
    (nothing is written twice).
    """

    def __init__(self, ledger: Any, key: tuple[int, int]) -> None:
        self.ledger, self.key = ledger, key
        self.pending: list[tuple[Any, asyncio.Future[bool]]] = []
        self.task: asyncio.Task[None] | None = None

    async def write(self, obs: Any) -> bool:
        """Record ``obs`` with the group; whether it was written (``False``: the ledger already held it)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self.pending.append((obs, done))
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        try:
            while self.pending:
                group, self.pending = self.pending, []
                results = await self._flush([o for o, _ in group])
                for (_, done), result in zip(group, results, strict=True):
                    if done.done():  # the row was cancelled meanwhile
                        continue
                    if isinstance(result, BaseException):
                        done.set_exception(result)
                    else:
                        done.set_result(result)
        finally:
            if not self.pending:
                _GROUPS.pop(self.key, None)

    async def _flush(self, group: list[Any]) -> list[bool | BaseException]:
        try:
            return list(await to_thread(extend_once, self.ledger, group))
        except (ValueError, TypeError) as exc:
            if len(group) == 1:
                return [exc]
        except Exception as exc:
            return [exc] * len(group)
        out: list[bool | BaseException] = []
        for o in group:
            try:
                out.extend(await to_thread(extend_once, self.ledger, [o]))
            except Exception as exc:
                out.append(exc)
        return out


_GROUPS: dict[tuple[int, int], _GroupCommit] = {}  # (id(loop), id(ledger)) -> its writer, while it writes


def _ledger_failed(row: Row, exc: BaseException) -> None:
    row[LEDGER_ERROR] = f"ledger append failed: {describe_error(exc)}"
    log.warning("llm_connect: a scored row was not recorded in the ledger: %s", describe_error(exc))


async def record_row(ledger: LedgerSink, make: Callable[[], Any], row: Row) -> None:
    """Record ``make()`` in the ledger once, setting ``row["ledger_error"]``.

    The judgment stands whatever happens: a failure to build or append the observation is reported
    there, never in the row's status or score. A judgment the ledger already holds (same item, grader,
    rubric and candidate) is not recorded again: the row notes it (:data:`RECORDED`) and the frame counts
    it (``attrs["ledger"]``).

    Rows recording at the same time are written together (see :class:`_GroupCommit`). In a run through the
    providers' Batch APIs, a row an earlier run of the same state already recorded (a resumed multi-round
    run re-runs the rows that ended in an earlier round) is not recorded again
    (:meth:`~llm_connect.adapters._batches.BatchCollector.recorded_before`).

    Parameters
    ----------
    ledger : LedgerSink
        The ledger.
    make : callable
        Builds the observation (called once; what it raises is reported in ``ledger_error``).
    row : dict
        The row; ``ledger_error`` and :data:`RECORDED` are set on it.
    """
    from .adapters._batches import active_collector

    row[LEDGER_ERROR] = None
    collector = active_collector()
    if collector is not None and collector.recorded_before(ledger):
        row[RECORDED] = "held"  # an earlier run of this batch state recorded it from the same replies
        return
    try:
        obs = make()
        if callable(getattr(ledger, "extend", None)):
            key = (id(asyncio.get_running_loop()), id(ledger))
            writer = _GROUPS.get(key)
            if writer is None:
                writer = _GROUPS[key] = _GroupCommit(ledger, key)
            written = await writer.write(obs)
        else:
            written = all(await to_thread(extend_once, ledger, [obs]))
        row[RECORDED] = "recorded" if written else "held"
    except Exception as exc:
        _ledger_failed(row, exc)
        return
    if collector is not None:
        collector.note_recorded(ledger)


def record_rows_now(ledger: LedgerSink, pairs: list[tuple[Row, Any]]) -> None:
    """Record each ``(row, observation)`` once, at once, as :func:`record_row` records one.

    The sync twin, for a plan's ``finish`` step: ``ledger_error`` and :data:`RECORDED` are set on each
    row. Rows whose observation is ``None`` are left alone.

    Parameters
    ----------
    ledger : LedgerSink
        The ledger.
    pairs : list of (dict, QualityObservation or None)
        Each row and its observation.
    """
    todo = [(row, obs) for row, obs in pairs if obs is not None]
    if not todo:
        return
    try:
        written = extend_once(ledger, [obs for _, obs in todo])
    except (ValueError, TypeError):  # one observation's fault: write them one at a time, so only it fails
        for row, obs in todo:
            try:
                row[RECORDED] = "recorded" if all(extend_once(ledger, [obs])) else "held"
            except Exception as exc:
                _ledger_failed(row, exc)
        return
    except Exception as exc:
        for row, _ in todo:
            _ledger_failed(row, exc)
        return
    for (row, _), w in zip(todo, written, strict=True):
        row[RECORDED] = "recorded" if w else "held"


def note_ledger(out: Any, rows: list[Row]) -> None:
    """Count what became of the rows' observations in ``out.attrs["ledger"]``, when the rows were recorded.

    ``recorded``: judgments written; ``already``: judgments the ledger held already, not recorded again;
    ``failed``: rows with a ``ledger_error``. A warning names how many were found already.

    Parameters
    ----------
    out : DataFrame
        The run's frame.
    rows : list of dict
        Its rows.
    """
    notes = [r.get(RECORDED) for r in rows]
    failed = sum(1 for r in rows if r.get(LEDGER_ERROR))
    if not failed and not any(notes):
        return
    held = notes.count("held")
    out.attrs["ledger"] = {"recorded": notes.count("recorded"), "already": held, "failed": failed}
    if held:
        graders = sorted({str(r["grader_id"]) for r in rows if r.get(RECORDED) == "held" and r.get("grader_id")})
        who = f"{', '.join(graders)}: " if graders else ""
        log.warning("llm_connect: %s%d judgment(s) already in the ledger, not recorded again", who, held)


def ledger_columns(ledger: LedgerSink | None) -> tuple[str, ...]:
    """``("ledger_error",)`` when a run records to a ledger, else nothing.

    Parameters
    ----------
    ledger : LedgerSink or None
        The run's ledger.

    Returns
    -------
    tuple of str
        The columns a run adds for its ledger.
    """
    return (LEDGER_ERROR,) if ledger is not None else ()
