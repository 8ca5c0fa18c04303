"""The batch runtime: many judgments at a time, one row per item, never fewer.

Every item becomes exactly one row, in input order: ``scored``, ``unscored``
(the judge's reply held no usable verdict: the reason is kept, the score is
NaN, never 0) or ``error`` (the call failed: the error is kept). Work runs on
the package's background event loop (so the sync API works inside Jupyter),
``concurrency`` workers pulling items; sync judges run in threads. Ctrl-C stops
the run: rows that finished are kept, the others are ``error`` rows saying
they were interrupted, and ``df.attrs["interrupted"]`` is True.

Money: a run has one *batch budget* (``budget=``, a :class:`BudgetTracker`
or a limit in USD; by default ``run_config.budget_tracker``). Each row runs
inside its scope (:func:`llm_connect.core.budget_scope`), so every paid call
made anywhere in the row (the judge's own, although its call config drops
the caller's tracker; each member of a compound judge; each unit of a
pipeline) is reserved on it before the call and charged after it. A reply
that came back is kept and its cost counted; once the money is spent no call
starts, and the rows not attempted are ``error`` rows saying "budget
exhausted". ``df.attrs["budget"]`` holds the budget's state at the end.

Inputs: a missing (None/NaN) prompt, baseline or candidate, or a blank
baseline (no reference to compare with), makes an ``error`` row naming the
column; it is never scored. An empty candidate is an answer, and is scored.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._runtime import acall_complete, on_background, run_sync, to_thread
from ..core import BudgetTracker, LLMResponse, RunConfig, as_budget, budget_scope
from ..errors import BudgetExceededError, JudgeReplyError, ValidationError
from ..quality import QualityObservation
from ._base import GradingResult

__all__ = [
    "RESULT_COLUMNS",
    "ajudge_many",
    "arun_rows",
    "grade_many",
    "judge_many",
    "observation_for",
    "run_rows",
]

log = logging.getLogger("llm_connect")

RESULT_COLUMNS = (
    "quality_score",
    "notes",
    "grader_id",
    "status",
    "error",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "cost_usd",
)
_REQUIRED = ("prompt", "baseline", "candidate")
INTERRUPTED = "interrupted: the run was stopped before this row finished"

Row = dict[str, Any]
Work = Callable[[int], Awaitable[Row]]


# -- the engine ------------------------------------------------------------------


def _usage_from_exception(exc: BaseException) -> Row:
    response = getattr(exc, "response", None)
    if isinstance(response, LLMResponse):
        return {"tokens_in": response.tokens_in, "tokens_out": response.tokens_out, "cost_usd": response.cost_usd}
    return {}


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


BUDGET_EXHAUSTED = "budget exhausted"


def _not_attempted(budget: BudgetTracker) -> Row:
    return {
        "status": "error",
        "error": f"{BUDGET_EXHAUSTED}: this row was not attempted (spent ${budget.spent_usd:.6f} "
        f"of the ${budget.limit_usd:.6f} limit)",
    }


def _row_for_exception(exc: Exception) -> Row:
    """The ``unscored`` or ``error`` row an exception of a row's work makes (with the usage it reports)."""
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
    return {"status": "error", "error": _describe(exc), **_usage_from_exception(exc)}


class _Run:
    """Shared state of one batch run: the rows, and an event set when the workers are gone."""

    def __init__(self, n: int) -> None:
        self.rows: list[Row | None] = [None] * n
        self.finished = threading.Event()


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

    ``budget``: the run's batch budget. Each row runs in its scope, so every
    adapter call of the row is charged to it; once it is spent, the rows not
    yet started are ``error`` rows saying "budget exhausted" (not attempted).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValidationError(f"concurrency must be a positive integer, got {concurrency!r}")
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
                row = _row_for_exception(exc)
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
    return [r if r is not None else {"status": "error", "error": INTERRUPTED} for r in rows]


def _progress_bar(total: int, progress: bool, desc: str) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="item", dynamic_ncols=True)


def run_rows(
    n: int,
    work: Work,
    *,
    concurrency: int = 16,
    progress: bool = True,
    desc: str = "judging",
    budget: BudgetTracker | None = None,
) -> tuple[list[Row], bool]:
    """Sync driver of :func:`arun_rows` on the background loop; returns ``(rows, interrupted)``.

    A ``KeyboardInterrupt`` stops the run: finished rows are kept, the rest are
    ``error`` rows saying so, and ``interrupted`` is True. ``budget``: the
    run's batch budget (see :func:`arun_rows`).
    """
    state = _Run(n)
    bar = _progress_bar(n, progress, desc)
    interrupted = False
    try:
        rows = run_sync(arun_rows(n, work, concurrency=concurrency, progress=bar, state=state, budget=budget))
    except KeyboardInterrupt:
        interrupted = True
        state.finished.wait(timeout=10.0)
        rows = [r if r is not None else {"status": "error", "error": INTERRUPTED} for r in state.rows]
        log.warning("llm_connect: interrupted; %d of %d rows had finished", sum(r is not None for r in state.rows), n)
    finally:
        if bar is not None:
            bar.close()
    return rows, interrupted


# -- items -------------------------------------------------------------------------


def _items_frame(items: Any, required: Iterable[str]) -> Any:
    import pandas as pd

    if isinstance(items, pd.DataFrame):
        frame = items.copy()
    else:
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise ValidationError("items must be a DataFrame or an iterable of mappings with " + ", ".join(required))
        records = list(items)
        for k, rec in enumerate(records):
            if not isinstance(rec, Mapping):
                raise ValidationError(f"item {k} is a {type(rec).__name__}, not a mapping with " + ", ".join(required))
        frame = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=list(required))
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValidationError(
            f"items lack the column(s) {missing}; they have {list(frame.columns)}. "
            "Rename your columns (e.g. df.rename(columns={'question': 'prompt'}))"
        )
    return frame


def is_missing(value: Any) -> bool:
    """True for None and for the missing-value markers of Python, numpy and pandas (NaN, NaT, pd.NA)."""
    if value is None:
        return True
    if isinstance(value, str):
        return False
    if isinstance(value, float):
        return math.isnan(value)
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a container: not a missing scalar
        return False


def _text(value: Any, column: str) -> str:
    """The text of an item's ``column``; a missing value (None/NaN/NA) is an error, never the text "nan"."""
    if isinstance(value, str):
        return value
    if is_missing(value):
        raise ValidationError(f"{column} is missing (None/NaN) in this row")
    return str(value)


def _reference_text(value: Any, judge: Any = None, column: str = "baseline") -> str:
    """The baseline's text; missing or blank (nothing to compare with) is an error, as is a baseline
    with no non-empty reference when the judge splits references on ``reference_sep``."""
    text = _text(value, column)
    if not text.strip():
        raise ValidationError(f"{column} is blank (empty or whitespace only): there is no reference to compare with")
    sep = getattr(judge, "reference_sep", None)
    if isinstance(sep, str) and sep and not any(part.strip() for part in text.split(sep)):
        raise ValidationError(f"{column} holds no non-empty reference when split on reference_sep={sep!r}")
    return text


def _column_values(frame: Any, column: str) -> list[Any]:
    return frame[column].tolist() if column in frame.columns else [None] * len(frame)


def _attach(frame: Any, rows: list[Row], columns: Iterable[str], interrupted: bool) -> Any:
    """The input frame plus the result columns (an input column of the same name becomes ``<name>_input``)."""
    import pandas as pd

    columns = list(columns)
    out = frame.copy()
    clashes = {c: f"{c}_input" for c in columns if c in out.columns}
    if clashes:
        out = out.rename(columns=clashes)
    data = {c: [r.get(c) for r in rows] for c in columns}
    for c in ("quality_score", "latency_ms", "cost_usd"):
        if c in data:
            data[c] = [math.nan if v is None else float(v) for v in data[c]]
    for c in ("tokens_in", "tokens_out"):
        if c in data:
            data[c] = [0 if v is None else int(v) for v in data[c]]
    result = pd.DataFrame(data, index=out.index)
    out = pd.concat([out, result], axis=1)
    out.attrs["interrupted"] = interrupted
    out.attrs["counts"] = {s: sum(1 for r in rows if r.get("status") == s) for s in ("scored", "unscored", "error")}
    return out


def batch_budget(budget: BudgetTracker | float | None, run_config: RunConfig | None) -> BudgetTracker | None:
    """The batch budget of a run: ``budget`` (a tracker, or a limit in USD), else the run config's tracker."""
    tracker = as_budget(budget)
    if tracker is None and run_config is not None:
        tracker = run_config.budget_tracker
    return tracker


def note_budget(out: Any, budget: BudgetTracker | None) -> Any:
    """Record the batch budget's state in ``out.attrs["budget"]`` (when there is one)."""
    if budget is not None:
        out.attrs["budget"] = budget.snapshot()
    return out


# -- ledger ----------------------------------------------------------------------


def plain_item_id(value: Any) -> str | int | float | bool | None:
    """An item id a ledger can store: ``None`` when missing (None/NaN/NA), numpy/pandas scalars as
    plain Python (a whole float as an int: pandas turns ids 1, 2, NaN into 1.0, 2.0, NaN), other objects as text."""
    if is_missing(value):
        return None
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            value = item()  # numpy / pandas scalar -> Python
        except (TypeError, ValueError):
            pass
    if isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return int(value) if value.is_integer() else value
    return str(value)


def observation_for(
    result: GradingResult,
    *,
    task_type: str,
    judge: Any = None,
    item_id: Any = None,
    extra_tags: Mapping[str, Any] | None = None,
) -> QualityObservation:
    """The candidate's :class:`QualityObservation` for one grade, with grader id, rubric hash and item id in tags.

    ``item_id`` is stored as plain JSON (see :func:`plain_item_id`); a missing one (None/NaN) is left out.
    """
    cand = result.candidate_response
    tags: dict[str, Any] = {"grader_id": result.grader_id}
    rubric_hash = getattr(judge, "rubric_hash", None) or result.details.get("rubric_hash")
    if rubric_hash:
        tags["rubric_hash"] = rubric_hash
    item_id = plain_item_id(item_id)
    if item_id is not None:
        tags["item_id"] = item_id
    if result.cost_usd:
        tags["judge_cost_usd"] = result.cost_usd
    if extra_tags:
        tags.update(extra_tags)
    base = result.baseline_response.adapter_id
    return QualityObservation(
        task_type=task_type,
        adapter_id=cand.adapter_id,
        model_id=cand.model_id,
        cost_usd=cand.cost_usd,
        quality_score=result.quality_score,
        latency_ms=cand.latency_ms,
        tokens_in=cand.tokens_in,
        tokens_out=cand.tokens_out,
        baseline_adapter_id=base if base and base.strip() else None,
        tags=tags,
    )


def _check_ledger(ledger: Any, task_type: str | None) -> None:
    if ledger is not None and not (isinstance(task_type, str) and task_type.strip()):
        raise ValidationError("a ledger needs task_type='...' so its observations can be routed on")


LEDGER_ERROR = "ledger_error"


def _row_item_id(ids: list[Any], i: int) -> str | int | float | bool:
    """The item id recorded for row ``i``: its ``id`` as plain JSON, the row's position when it has none."""
    item_id = plain_item_id(ids[i])
    return i if item_id is None else item_id


async def _record(ledger: Any, make: Callable[[], QualityObservation], row: Row) -> None:
    """Append ``make()`` to the ledger. The judgment stands whatever happens: a failure to build or
    append the observation is reported in the row's ``ledger_error``, never in its status or score."""
    try:
        obs = make()
        await to_thread(ledger.append, obs)
    except Exception as exc:
        row[LEDGER_ERROR] = f"ledger append failed: {_describe(exc)}"
        log.warning("llm_connect: a scored row was not recorded in the ledger: %s", _describe(exc))


def _ledger_columns(ledger: Any) -> tuple[str, ...]:
    return (LEDGER_ERROR,) if ledger is not None else ()


# -- judge_many --------------------------------------------------------------------


def _candidate_response(row: Mapping[str, Any], text: str) -> LLMResponse:
    model = row.get("candidate_model")
    model = model if isinstance(model, str) and model.strip() else "unknown"
    adapter = row.get("candidate_adapter")
    adapter = adapter if isinstance(adapter, str) and adapter.strip() else model
    return LLMResponse(content=text, adapter_id=adapter, model_id=model)


def _result_row(result: GradingResult) -> Row:
    return {
        "quality_score": result.quality_score,
        "notes": result.notes,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": result.cost_usd,
    }


async def _ajudge(judge: Any, baseline: LLMResponse, candidate: LLMResponse, prompt: str, rc: RunConfig) -> Any:
    ajudge = getattr(judge, "ajudge", None)
    if ajudge is not None:
        return await ajudge(baseline, candidate, prompt=prompt, run_config=rc)
    return await to_thread(judge.judge, baseline, candidate, prompt=prompt, run_config=rc)


def _judge_work(
    judge: Any,
    frame: Any,
    run_config: RunConfig,
    ledger: Any,
    task_type: str | None,
    extra: Callable[[GradingResult], Row] | None = None,
) -> tuple[Work, int]:
    """The per-item coroutine of a judge batch; ``extra(result)`` adds a judge's own columns."""
    records = frame.to_dict("records")
    ids = _column_values(frame, "id")

    async def work(i: int) -> Row:
        rec = records[i]
        prompt = _text(rec["prompt"], "prompt")
        reference = _reference_text(rec["baseline"], judge)
        baseline = LLMResponse(content=reference, adapter_id="baseline", model_id="reference")
        candidate = _candidate_response(rec, _text(rec["candidate"], "candidate"))
        result = await _ajudge(judge, baseline, candidate, prompt, run_config)
        row = _result_row(result)
        if extra is not None:
            row.update(extra(result))
        if ledger is not None:
            row[LEDGER_ERROR] = None
            item_id = _row_item_id(ids, i)
            await _record(
                ledger,
                lambda: observation_for(result, task_type=str(task_type), judge=judge, item_id=item_id),
                row,
            )
        return row

    return work, len(records)


def _judge_batch(
    judge: Any,
    items: Any,
    *,
    concurrency: int,
    progress: bool,
    run_config: RunConfig | None,
    ledger: Any,
    task_type: str | None,
    extra: Callable[[GradingResult], Row] | None = None,
    extra_columns: Iterable[str] = (),
    budget: BudgetTracker | float | None = None,
) -> Any:
    """:func:`judge_many` with optional judge-specific columns (used by the compound judges)."""
    frame = _items_frame(items, _REQUIRED)
    _check_ledger(ledger, task_type)
    tracker = batch_budget(budget, run_config)
    work, n = _judge_work(judge, frame, run_config or RunConfig(), ledger, task_type, extra)
    rows, interrupted = run_rows(
        n, work, concurrency=concurrency, progress=progress, desc=str(judge.grader_id), budget=tracker
    )
    columns = (*RESULT_COLUMNS, *extra_columns, *_ledger_columns(ledger))
    return note_budget(_finish(judge, frame, rows, columns, interrupted), tracker)


def _finish(judge: Any, frame: Any, rows: list[Row], columns: Iterable[str], interrupted: bool) -> Any:
    for r in rows:
        r["grader_id"] = judge.grader_id
    return _attach(frame, rows, columns, interrupted)


def judge_many(
    judge: Any,
    items: Any,
    *,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: Any = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
) -> Any:
    """Judge many (prompt, baseline, candidate) items; one row per item, in input order, never fewer.

    ``items``: a DataFrame or an iterable of mappings with ``prompt``,
    ``baseline`` and ``candidate`` texts; other columns are carried through
    (``candidate_model`` also names the candidate's model, ``id`` the item).
    Returns the input columns plus ``quality_score``, ``notes``, ``grader_id``,
    ``status`` (``scored``/``unscored``/``error``), ``error``, ``latency_ms``,
    ``tokens_in``, ``tokens_out``, ``cost_usd`` (the judge's own usage).
    A missing (None/NaN) prompt, baseline or candidate, or a blank baseline,
    is an ``error`` row naming the column (never a match); an empty candidate
    is an answer and is scored.

    With ``ledger`` and ``task_type``, each scored row is appended to the
    ledger with its item id (the ``id``, as plain JSON; the row's position when
    it has none) and a ``ledger_error`` column is added: a row whose
    observation could not be recorded keeps its status and score, and says why there.

    Spend, and how to cap the judge's: every paid call made for a row is
    charged to the batch budget, the judge's own included (the judge's call
    config drops the caller's tracker, as the grading contract says, but the
    batch still counts its cost). The batch budget is ``budget`` (a
    :class:`~llm_connect.BudgetTracker`, or a limit in USD), else
    ``run_config.budget_tracker``. So ``judge_many(judge, items, budget=5.0)``
    spends at most about $5 on judging: a call starts only while money is
    left (the limit is overshot by at most the calls in flight when it was
    reached), a reply that came back is kept and counted, and the rows not
    attempted once the money is spent are ``error`` rows saying "budget
    exhausted". ``df.attrs["budget"]`` holds the limit, the spend and the calls.
    """
    return _judge_batch(
        judge,
        items,
        concurrency=concurrency,
        progress=progress,
        run_config=run_config,
        ledger=ledger,
        task_type=task_type,
        budget=budget,
    )


async def ajudge_many(
    judge: Any,
    items: Any,
    *,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: Any = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
) -> Any:
    """The awaitable twin of :func:`judge_many` (for code already inside an event loop).

    Cap the judge's spend with ``budget=`` (a tracker, or a limit in USD; by
    default ``run_config.budget_tracker``): every paid call of a row, the
    judge's included, is charged to it, and once it is spent the rows not
    attempted are ``error`` rows saying "budget exhausted" (see :func:`judge_many`).
    """
    frame = _items_frame(items, _REQUIRED)
    _check_ledger(ledger, task_type)
    tracker = batch_budget(budget, run_config)
    work, n = _judge_work(judge, frame, run_config or RunConfig(), ledger, task_type)
    bar = _progress_bar(n, progress, str(judge.grader_id))
    try:
        rows = await on_background(arun_rows(n, work, concurrency=concurrency, progress=bar, budget=tracker))
    finally:
        if bar is not None:
            bar.close()
    return note_budget(_finish(judge, frame, rows, (*RESULT_COLUMNS, *_ledger_columns(ledger)), False), tracker)


# -- grade_many -------------------------------------------------------------------

GRADE_COLUMNS = (
    "baseline",
    "candidate",
    *RESULT_COLUMNS,
    "candidate_adapter_id",
    "candidate_model_id",
    "candidate_cost_usd",
    "candidate_latency_ms",
    "candidate_tokens_in",
    "candidate_tokens_out",
    "baseline_cost_usd",
)


def grade_many(
    grader: Any,
    baseline_adapter: Any,
    candidate_adapter: Any,
    items: Any,
    *,
    run_config: RunConfig | None = None,
    concurrency: int = 16,
    progress: bool = True,
    ledger: Any = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
) -> Any:
    """Generate a baseline and a candidate answer for each prompt, then grade them.

    ``items``: prompts (strings), or a DataFrame / mappings with a ``prompt``
    column (plus ``id`` and any extras, carried through). One row per item, in
    order, never fewer: the generated ``baseline`` and ``candidate`` texts, the
    judge's result columns (as in :func:`judge_many`; ``cost_usd`` and tokens are
    the judge's) and the candidate's own usage (``candidate_cost_usd``...).
    Both adapters get the caller's ``prompt`` and ``run_config`` unchanged (so
    its tracker is charged for them). A missing prompt, or a blank generated
    baseline, is an ``error`` row (the generated texts and their usage are
    kept; a blank baseline is not judged). With ``ledger`` (or the grader's)
    and ``task_type``, each scored row is appended as a
    :class:`QualityObservation` with the rubric hash, grader id and item id in
    ``tags``, and a ``ledger_error`` column says when that failed (the row
    stays scored).

    Spend, and how to cap the judge's: the batch budget is ``budget`` (a
    tracker, or a limit in USD), else ``run_config.budget_tracker``; every
    paid call of a row (both answers and the judge's own, which its call
    config would not charge) is charged to it once. ``budget=5.0`` caps the
    whole run at about $5: once it is spent no call starts, and the rows not
    attempted are ``error`` rows saying "budget exhausted". A tracker in
    ``run_config`` that is not the batch budget is charged for the two
    answers only. ``df.attrs["budget"]`` holds the limit, the spend and the calls.
    """
    from ._judges import PairedGrader

    if not isinstance(grader, PairedGrader):
        grader = PairedGrader(grader)
    ledger = ledger if ledger is not None else grader.ledger
    task_type = task_type or grader.task_type
    _check_ledger(ledger, task_type)
    if not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
        raise ValidationError("items must be prompts, a DataFrame or mappings with a 'prompt' column")
    try:
        import pandas as pd

        is_frame = isinstance(items, pd.DataFrame)
    except ImportError:  # pragma: no cover - pandas is a core dependency
        is_frame = False
    if not is_frame:
        items = [{"prompt": p} if isinstance(p, str) else p for p in items]
    frame = _items_frame(items, ("prompt",))
    records = frame.to_dict("records")
    ids = _column_values(frame, "id")
    rc = run_config or RunConfig()
    tracker = batch_budget(budget, run_config)
    judge = grader.judge

    async def work(i: int) -> Row:
        prompt = _text(records[i]["prompt"], "prompt")
        answers: tuple[Any, Any] = await asyncio.gather(
            acall_complete(baseline_adapter, prompt, rc),
            acall_complete(candidate_adapter, prompt, rc),
            return_exceptions=True,
        )
        baseline, candidate = answers
        row: Row = {}
        if isinstance(baseline, LLMResponse):
            row.update(baseline=baseline.content, baseline_cost_usd=baseline.cost_usd)
        if isinstance(candidate, LLMResponse):
            row.update(
                candidate=candidate.content,
                candidate_adapter_id=candidate.adapter_id,
                candidate_model_id=candidate.model_id,
                candidate_cost_usd=candidate.cost_usd,
                candidate_latency_ms=candidate.latency_ms,
                candidate_tokens_in=candidate.tokens_in,
                candidate_tokens_out=candidate.tokens_out,
            )
        for failed in (baseline, candidate):
            if isinstance(failed, BaseException):
                if not isinstance(failed, Exception):
                    raise failed
                row.update(_row_for_exception(failed))  # the answer that came back is kept, with its cost
                return row
        assert isinstance(baseline, LLMResponse) and isinstance(candidate, LLMResponse)
        try:  # the answers were paid for: whatever happens next, the row keeps them
            _reference_text(baseline.content, judge)
            result = await _ajudge(judge, baseline, candidate, prompt, rc)
        except Exception as exc:
            row.update(_row_for_exception(exc))
            return row
        row.update(_result_row(result))
        if ledger is not None:
            row[LEDGER_ERROR] = None
            item_id = _row_item_id(ids, i)
            await _record(
                ledger,
                lambda: observation_for(result, task_type=str(task_type), judge=judge, item_id=item_id),
                row,
            )
        return row

    rows, interrupted = run_rows(
        len(records), work, concurrency=concurrency, progress=progress, desc="grading", budget=tracker
    )
    out = _finish(judge, frame, rows, (*GRADE_COLUMNS, *_ledger_columns(ledger)), interrupted)
    return note_budget(out, tracker)
