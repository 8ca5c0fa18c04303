"""The batch runtime: many judgments at a time, one row per item, never fewer.

Every item becomes exactly one row, in input order: ``scored``, ``unscored``
(the judge's reply held no usable verdict: the reason is kept, the score is
NaN, never 0) or ``error`` (the call failed: the error is kept). Work runs on
the package's background event loop (so the sync API works inside Jupyter),
``concurrency`` workers pulling items; sync judges run in threads. Ctrl-C stops
the run: rows that finished are kept, the others are ``error`` rows saying
they were interrupted, and ``df.attrs["interrupted"]`` is True.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._runtime import on_background, run_sync, to_thread
from ..core import LLMResponse, RunConfig
from ..errors import JudgeReplyError, ValidationError
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
) -> list[Row]:
    """Run ``work(i)`` for ``i`` in ``range(n)`` with at most ``concurrency`` at once.

    ``work`` returns the row's result columns. A :class:`JudgeReplyError` makes
    the row ``unscored``, any other exception an ``error`` row; neither stops
    the run. Every row gets ``status``, ``error`` and ``latency_ms``.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValidationError(f"concurrency must be a positive integer, got {concurrency!r}")
    state = state or _Run(n)
    rows = state.rows
    indices = iter(range(n))

    async def one(i: int) -> None:
        start = time.perf_counter()
        try:
            row = dict(await work(i))
            row.setdefault("status", "scored")
            row.setdefault("error", None)
        except JudgeReplyError as exc:
            reason = str(exc)
            row = {"status": "unscored", "error": reason, "notes": reason, **_usage_from_exception(exc)}
        except Exception as exc:
            row = {"status": "error", "error": _describe(exc), **_usage_from_exception(exc)}
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
    n: int, work: Work, *, concurrency: int = 16, progress: bool = True, desc: str = "judging"
) -> tuple[list[Row], bool]:
    """Sync driver of :func:`arun_rows` on the background loop; returns ``(rows, interrupted)``.

    A ``KeyboardInterrupt`` stops the run: finished rows are kept, the rest are
    ``error`` rows saying so, and ``interrupted`` is True.
    """
    state = _Run(n)
    bar = _progress_bar(n, progress, desc)
    interrupted = False
    try:
        rows = run_sync(arun_rows(n, work, concurrency=concurrency, progress=bar, state=state))
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


def _text(value: Any, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise ValidationError(f"{column} is missing (None/NaN) in this row")
    return str(value)


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


# -- ledger ----------------------------------------------------------------------


def observation_for(
    result: GradingResult,
    *,
    task_type: str,
    judge: Any = None,
    item_id: Any = None,
    extra_tags: Mapping[str, Any] | None = None,
) -> QualityObservation:
    """The candidate's :class:`QualityObservation` for one grade, with grader id, rubric hash and item id in tags."""
    cand = result.candidate_response
    tags: dict[str, Any] = {"grader_id": result.grader_id}
    rubric_hash = getattr(judge, "rubric_hash", None) or result.details.get("rubric_hash")
    if rubric_hash:
        tags["rubric_hash"] = rubric_hash
    if item_id is not None:
        tags["item_id"] = item_id if isinstance(item_id, (str, int, float, bool)) else str(item_id)
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


async def _record(ledger: Any, obs: QualityObservation, row: Row) -> None:
    try:
        await to_thread(ledger.append, obs)
    except Exception as exc:  # the judgment stands; say the recording failed
        row["error"] = f"ledger append failed: {_describe(exc)}"


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
        baseline = LLMResponse(content=_text(rec["baseline"], "baseline"), adapter_id="baseline", model_id="reference")
        candidate = _candidate_response(rec, _text(rec["candidate"], "candidate"))
        result = await _ajudge(judge, baseline, candidate, prompt, run_config)
        row = _result_row(result)
        if extra is not None:
            row.update(extra(result))
        if ledger is not None:
            item_id = ids[i] if ids[i] is not None else i
            await _record(ledger, observation_for(result, task_type=str(task_type), judge=judge, item_id=item_id), row)
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
) -> Any:
    """:func:`judge_many` with optional judge-specific columns (used by the compound judges)."""
    frame = _items_frame(items, _REQUIRED)
    _check_ledger(ledger, task_type)
    work, n = _judge_work(judge, frame, run_config or RunConfig(), ledger, task_type, extra)
    rows, interrupted = run_rows(n, work, concurrency=concurrency, progress=progress, desc=str(judge.grader_id))
    return _finish(judge, frame, rows, (*RESULT_COLUMNS, *extra_columns), interrupted)


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
) -> Any:
    """Judge many (prompt, baseline, candidate) items; one row per item, in input order, never fewer.

    ``items``: a DataFrame or an iterable of mappings with ``prompt``,
    ``baseline`` and ``candidate`` texts; other columns are carried through
    (``candidate_model`` also names the candidate's model, ``id`` the item).
    Returns the input columns plus ``quality_score``, ``notes``, ``grader_id``,
    ``status`` (``scored``/``unscored``/``error``), ``error``, ``latency_ms``,
    ``tokens_in``, ``tokens_out``, ``cost_usd`` (the judge's own usage).
    With ``ledger`` and ``task_type``, each scored row is appended to the ledger.
    """
    return _judge_batch(
        judge,
        items,
        concurrency=concurrency,
        progress=progress,
        run_config=run_config,
        ledger=ledger,
        task_type=task_type,
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
) -> Any:
    """The awaitable twin of :func:`judge_many` (for code already inside an event loop)."""
    frame = _items_frame(items, _REQUIRED)
    _check_ledger(ledger, task_type)
    work, n = _judge_work(judge, frame, run_config or RunConfig(), ledger, task_type)
    bar = _progress_bar(n, progress, str(judge.grader_id))
    try:
        rows = await on_background(arun_rows(n, work, concurrency=concurrency, progress=bar))
    finally:
        if bar is not None:
            bar.close()
    return _finish(judge, frame, rows, RESULT_COLUMNS, False)


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
) -> Any:
    """Generate a baseline and a candidate answer for each prompt, then grade them.

    ``items``: prompts (strings), or a DataFrame / mappings with a ``prompt``
    column (plus ``id`` and any extras, carried through). One row per item, in
    order, never fewer: the generated ``baseline`` and ``candidate`` texts, the
    judge's result columns (as in :func:`judge_many`; ``cost_usd`` and tokens are
    the judge's) and the candidate's own usage (``candidate_cost_usd``...).
    With ``ledger`` (or the grader's) and ``task_type``, each scored row is
    appended as a :class:`QualityObservation` with the rubric hash, grader id
    and item id in ``tags``.
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
    judge = grader.judge

    async def work(i: int) -> Row:
        prompt = _text(records[i]["prompt"], "prompt")
        baseline, candidate, result = await grader.agrade(baseline_adapter, candidate_adapter, prompt, rc)
        row = _result_row(result)
        row.update(
            baseline=baseline.content,
            candidate=candidate.content,
            candidate_adapter_id=candidate.adapter_id,
            candidate_model_id=candidate.model_id,
            candidate_cost_usd=candidate.cost_usd,
            candidate_latency_ms=candidate.latency_ms,
            candidate_tokens_in=candidate.tokens_in,
            candidate_tokens_out=candidate.tokens_out,
            baseline_cost_usd=baseline.cost_usd,
        )
        if ledger is not None:
            item_id = ids[i] if ids[i] is not None else i
            await _record(ledger, observation_for(result, task_type=str(task_type), judge=judge, item_id=item_id), row)
        return row

    rows, interrupted = run_rows(len(records), work, concurrency=concurrency, progress=progress, desc="grading")
    return _finish(judge, frame, rows, GRADE_COLUMNS, interrupted)
