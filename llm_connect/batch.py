"""The one batch engine: items in, one row per item out, in order, never fewer.

``grading`` (``judge_many``, ``grade_many``), ``pipelines`` (``Pipeline.run_many``)
and ``calibration`` (through ``judge_many``) all run here; this module imports
none of them. A batch is an items frame (:func:`items_frame`), a per-row
coroutine ``work(i) -> row`` and a ``finish(rows, interrupted) -> frame`` step
(usually :func:`attach_rows`), gathered in a :class:`BatchPlan` and run by
:func:`run_batch` (sync) or :func:`arun_batch` (awaitable): both take the same
path, so the sync and async twins of a batch return the same columns.

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

Money: a run has one *batch budget* (``budget=``, a :class:`BudgetTracker`
or a limit in USD; by default ``run_config.budget_tracker``). Each row runs
inside its scope (:func:`llm_connect.core.budget_scope`), so every paid call
made anywhere in the row (the judge's own, although its call config drops
the caller's tracker; each member of a compound judge; each unit of a
pipeline) is reserved on it before the call and charged after it. A reply
that came back is kept and its cost counted; once the money is spent no call
starts, and the rows not attempted are ``error`` rows saying "budget
exhausted". ``df.attrs["budget"]`` holds the budget's state at the end.

Recording to a ledger is the caller's: the engine only offers
:func:`record_row`, which records what a ``make()`` callable builds and reports a
failure in the row's ``ledger_error`` column (the judgment stands), and
:func:`record_rows_now`, its sync twin for a ``finish`` step. Both record once
(:func:`extend_once`): a judgment the ledger already holds (same item, grader,
rubric and candidate) is not written again, and ``attrs["ledger"]`` counts it.

Item identity is one rule, kept here: an item's id is converted once (:func:`canonical_item_id`: a whole
float is an int, numpy scalars are plain Python, NaN/None/NA is missing) and matched on its text
(:func:`item_id_text`); an item without an id is keyed by its texts (:func:`content_item_id`,
``"row:<sha256>"``), never by its row position; with its candidate, an item's key is :func:`item_key`.
``judge_many`` and ``grade_many`` record these ids, ``record_labels`` and the Labeller write them,
``paired_frame`` joins on them and ``grade_dataset`` resumes by them.

Every column tuple of a result frame lives here: :data:`RESULT_COLUMNS` (a
judge's result), :data:`GRADE_COLUMNS` (``grade_many``) and
:data:`PIPELINE_EXTRA_COLUMNS` (what a pipeline adds to a judge's result; :data:`PIPELINE_COLUMNS`
is ``Pipeline.run_many``'s). A judge's own cost is ``judge_cost_usd`` in every result
frame (``cost_usd`` in a ledger frame is the candidate's).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ._runtime import on_background, run_sync, to_thread
from .core import BudgetTracker, LLMResponse, RunConfig, as_budget, budget_scope
from .errors import BudgetExceededError, JudgeAbstained, JudgeReplyError, ValidationError

if TYPE_CHECKING:
    import pandas as pd

    from .quality import QualityObservation

__all__ = [
    "BUDGET_EXHAUSTED",
    "CONTENT_KEY_PREFIX",
    "CONVERSATION_COLUMNS",
    "CONVERSATION_TAGS",
    "GRADE_COLUMNS",
    "INTERRUPTED",
    "ITEM_COLUMNS",
    "LEDGER_ERROR",
    "PIPELINE_COLUMNS",
    "PIPELINE_EXTRA_COLUMNS",
    "RECORDED",
    "RESULT_COLUMNS",
    "RESULT_FRAME_COLUMNS",
    "BatchPlan",
    "LedgerSink",
    "arun_batch",
    "arun_rows",
    "attach_rows",
    "batch_budget",
    "candidate_names",
    "canonical_item_id",
    "check_ledger",
    "column_values",
    "content_item_id",
    "conversation_tags",
    "describe_error",
    "extend_once",
    "is_judge",
    "is_missing",
    "item_id_of",
    "item_id_text",
    "item_ids",
    "item_key",
    "item_text",
    "items_frame",
    "ledger_columns",
    "note_budget",
    "note_ledger",
    "plain_item_id",
    "progress_bar",
    "record_row",
    "record_rows_now",
    "reference_text",
    "row_for_exception",
    "row_item_id",
    "run_batch",
    "run_rows",
]

log = logging.getLogger("llm_connect")

#: The columns of one judgment, in every result frame (``judge_many``, ``grade_many``,
#: ``Pipeline.run_many``). ``judge_cost_usd`` is what the judging itself cost (every call
#: the judge made) and ``judge_tokens_in`` / ``judge_tokens_out`` the tokens those calls used (once, under
#: these names: a ledger's ``tokens_in`` is the candidate's); ``judge_tokens_cached`` is
#: how many of ``judge_tokens_in`` the provider read from its prompt cache (priced at the cached rate in
#: ``judge_cost_usd``); a candidate's own cost is ``candidate_cost_usd`` (``grade_many``).
RESULT_COLUMNS = (
    "quality_score",
    "notes",
    "grader_id",
    "status",
    "error",
    "latency_ms",
    "judge_tokens_cached",
    "judge_tokens_in",
    "judge_tokens_out",
    "judge_cost_usd",
)
#: ``grade_many``: the generated texts, the judge's result, then the candidate's own usage.
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
#: What a pipeline adds to a judge's result columns (``Pipeline.run_many`` and
#: ``judge_many(pipeline.as_judge())`` alike).
PIPELINE_EXTRA_COLUMNS = ("verdict", "passed", "calls", "trace")
#: ``Pipeline.run_many``: a judge's result columns, then the pipeline's own.
PIPELINE_COLUMNS = (*RESULT_COLUMNS, *PIPELINE_EXTRA_COLUMNS)
#: ``frames.results_frame``: GradingResult objects as rows -- the texts, both sides' ids, the
#: candidate's own usage, then the judge's (named as in ``RESULT_COLUMNS``).
RESULT_FRAME_COLUMNS = (
    "grader_id",
    "quality_score",
    "notes",
    "baseline",
    "candidate",
    "baseline_adapter_id",
    "baseline_model_id",
    "candidate_adapter_id",
    "candidate_model_id",
    "candidate_tokens_in",
    "candidate_tokens_out",
    "candidate_cost_usd",
    "candidate_latency_ms",
    "judge_tokens_in",
    "judge_tokens_out",
    "judge_cost_usd",
    "latency_ms",
)
#: The texts a judgment reads from each item.
ITEM_COLUMNS = ("prompt", "baseline", "candidate")
#: What a conversation item adds to its texts (see :mod:`llm_connect.conversations`): the messages before the
#: judged reply, the conversation it belongs to and the reply's turn in it. They are part of the item's identity
#: (:func:`item_ids`) and travel with every row (result frames, ledger tags, labels).
CONVERSATION_COLUMNS = ("messages", "conversation_id", "turn")
#: The columns of an item that travel to its ledger records as tags of the same name.
CONVERSATION_TAGS = ("conversation_id", "turn")
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
    """``"TypeName: message"`` (the type alone when the message is empty)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _not_attempted(budget: BudgetTracker) -> Row:
    return {
        "status": "error",
        "error": f"{BUDGET_EXHAUSTED}: this row was not attempted (spent ${budget.spent_usd:.6f} "
        f"of the ${budget.limit_usd:.6f} limit)",
    }


def row_for_exception(exc: Exception) -> Row:
    """The ``abstained``, ``unscored`` or ``error`` row an exception of a row's work makes (with the usage it
    reports). A :class:`~llm_connect.errors.JudgeAbstained` is an ``abstained`` row: no score (NaN, never 0),
    no error, its reason in ``notes``, its ``confidence`` and the judge's own columns it carries."""
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
    """Shared state of one batch run: the rows, and an event set when the workers are gone."""

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
    ``progress``: a tqdm-like bar (``update(1)`` per row) or ``None``.

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
    """A tqdm bar of ``total`` items, or ``None`` when ``progress`` is off: the package's one bar
    (:func:`llm_connect.stats._progress.progress_bar`: live on a terminal or in a notebook, one line per 5%
    of the items in a log)."""
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
    """Sync driver of :func:`arun_rows` on the background loop; returns ``(rows, interrupted)``.

    A ``KeyboardInterrupt`` stops the run: finished rows are kept, the rest are
    ``error`` rows saying so, and ``interrupted`` is True. ``budget``: the
    run's batch budget (see :func:`arun_rows`).
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
class BatchPlan:
    """One batch, ready to run: ``n`` rows of ``work``, turned into a frame by ``finish(rows, interrupted)``.

    ``desc`` labels the progress bar; ``budget`` is the batch budget (see the module docs).
    ``prepare``: an optional ``async prepare(progress: bool)`` awaited once before the rows, in the
    batch budget's scope (e.g. an embedding judge embedding the batch's distinct texts in a few large
    calls); it must not fail the batch (a step it could not do is left to the rows).
    """

    n: int
    work: Work
    finish: Callable[[list[Row], bool], Any]
    desc: str = "judging"
    budget: BudgetTracker | None = None
    prepare: Callable[[bool], Awaitable[None]] | None = None


async def _prepare(plan: BatchPlan, progress: bool) -> None:
    if plan.prepare is not None and plan.n:
        with budget_scope(plan.budget):
            await plan.prepare(progress)


def run_batch(plan: BatchPlan, *, concurrency: int = 16, progress: bool = True) -> Any:
    """Run ``plan`` to its frame (sync; works inside a running Jupyter loop). Ctrl-C keeps finished rows."""
    try:
        run_sync(_prepare(plan, progress))
    except KeyboardInterrupt:  # no row has started: every row says it was interrupted
        log.warning("llm_connect: interrupted before any of %d rows had started", plan.n)
        return note_budget(plan.finish(_filled([None] * plan.n), True), plan.budget)
    rows, interrupted = run_rows(
        plan.n, plan.work, concurrency=concurrency, progress=progress, desc=plan.desc, budget=plan.budget
    )
    return note_budget(plan.finish(rows, interrupted), plan.budget)


async def arun_batch(plan: BatchPlan, *, concurrency: int = 16, progress: bool = True) -> Any:
    """The awaitable twin of :func:`run_batch`: the same rows, the same frame."""
    await on_background(_prepare(plan, progress))
    rows = await _arun_rows_with_bar(
        plan.n, plan.work, concurrency=concurrency, progress=progress, desc=plan.desc, budget=plan.budget
    )
    return note_budget(plan.finish(rows, False), plan.budget)


# -- items ---------------------------------------------------------------------------


def is_judge(value: Any) -> bool:
    """A judge: an object with a callable ``judge`` method (the :class:`~llm_connect.grading.Judge` protocol)."""
    return callable(getattr(value, "judge", None)) and not isinstance(value, (str, bytes, Mapping))


def items_frame(items: Any, required: Iterable[str], *, aliases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``items`` (a DataFrame, copied, or an iterable of mappings) as a DataFrame holding ``required``.

    ``aliases`` maps an accepted alternative name to a required column
    (``{"reference": "baseline"}``): it is renamed only when the required column is absent.
    A missing column is a :class:`ValidationError` naming it and what the items have.
    """
    import pandas as pd

    required = list(required)
    if isinstance(items, pd.DataFrame):
        frame = items.copy()
    else:
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise ValidationError("items must be a DataFrame or an iterable of mappings with " + ", ".join(required))
        records = list(items)
        for k, rec in enumerate(records):
            if not isinstance(rec, Mapping):
                raise ValidationError(f"item {k} is a {type(rec).__name__}, not a mapping with " + ", ".join(required))
        frame = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=required)
    renames = {alt: name for alt, name in (aliases or {}).items() if name not in frame.columns and alt in frame.columns}
    if renames:
        frame = frame.rename(columns=renames)
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


def item_text(value: Any, column: str) -> str:
    """The text of an item's ``column``; a missing value (None/NaN/NA) is an error, never the text "nan"."""
    if isinstance(value, str):
        return value
    if is_missing(value):
        raise ValidationError(f"{column} is missing (None/NaN) in this row")
    return str(value)


def reference_text(value: Any, *, sep: str | None = None, column: str = "baseline", required: bool = True) -> str:
    """The baseline's text; missing or blank (nothing to compare with) is an error, as is a baseline
    with no non-empty reference when split on ``sep`` (a judge's declared reference separator).
    ``required=False`` (a judge shown no reference, e.g. a rubric with ``reference=False``): any
    baseline is fine, a missing one is ``""``."""
    if not required:
        return "" if is_missing(value) else item_text(value, column)
    text = item_text(value, column)
    if not text.strip():
        raise ValidationError(f"{column} is blank (empty or whitespace only): there is no reference to compare with")
    if isinstance(sep, str) and sep and not any(part.strip() for part in text.split(sep)):
        raise ValidationError(f"{column} holds no non-empty reference when split on reference_sep={sep!r}")
    return text


def column_values(frame: Any, column: str) -> list[Any]:
    """The values of ``column`` as a list (``None`` for each row when there is no such column)."""
    return frame[column].tolist() if column in frame.columns else [None] * len(frame)


def attach_rows(frame: Any, rows: list[Row], columns: Iterable[str], interrupted: bool) -> pd.DataFrame:
    """The input frame plus the result columns (an input column of the same name becomes ``<name>_input``).

    Scores, latencies and costs are floats (NaN when absent), token counts ints;
    ``judge_tokens_in`` / ``judge_tokens_out`` are the row's ``tokens_in`` / ``tokens_out`` unless
    it sets them; ``attrs["interrupted"]`` and ``attrs["counts"]`` (rows per status) are set, and
    ``attrs["ledger"]`` when the rows were recorded (:func:`note_ledger`).
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
    if abstained:  # a selective judge's rows (its batch plan adds the count even when it is 0)
        out.attrs["counts"]["abstained"] = abstained
    note_ledger(out, rows)
    return out


# -- money ---------------------------------------------------------------------------


def batch_budget(budget: BudgetTracker | float | None, run_config: RunConfig | None) -> BudgetTracker | None:
    """The batch budget of a run: ``budget`` (a tracker, or a limit in USD), else the run config's tracker."""
    tracker = as_budget(budget)
    if tracker is None and run_config is not None:
        tracker = run_config.budget_tracker
    return tracker


def note_budget(out: Any, budget: BudgetTracker | None) -> pd.DataFrame:
    """Record the batch budget's state in ``out.attrs["budget"]`` (when there is one)."""
    if budget is not None:
        out.attrs["budget"] = budget.snapshot()
    return out


# -- ledger --------------------------------------------------------------------------


# Item identity: one rule everywhere. An item's id is converted once (canonical_item_id) and matched on its
# text (item_id_text); an item without an id is keyed by its texts (content_item_id), never by its row position
# (which is another item's id); with the candidate, an item's key is item_key. judge_many / grade_many record
# these ids, record_labels and the Labeller write them, paired_frame joins on them and grade_dataset resumes by
# them.

#: The prefix of the key of an item without an id (``"row:"`` and 24 hex digits of a SHA-256 of its texts,
#: see :func:`content_item_id`). Ids of this form are reserved: give your own ids another form.
CONTENT_KEY_PREFIX = "row:"
_CONTENT_DIGITS = 24  # 96 bits: two different texts share a key with probability ~2**-96 per pair


def canonical_item_id(value: Any) -> str | int | float | bool | None:
    """The one conversion of an item id, as every ledger record stores it.

    ``None`` when missing (None, NaN, NaT, pd.NA); numpy / pandas scalars as plain Python; a whole
    float as an int (pandas turns ids 1, 2, NaN into 1.0, 2.0, NaN, so ``1.0`` is item ``1``); a
    non-finite float and any other object (not str, int, float or bool) as its text. Strings are
    kept as they are (``"1"`` stays text; ids are matched on their text, :func:`item_id_text`)."""
    if is_missing(value):
        return None
    item = getattr(value, "item", None)  # numpy / pandas scalars
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


#: The former name of :func:`canonical_item_id` (kept: it is public).
plain_item_id = canonical_item_id


def item_id_text(value: Any) -> str | None:
    """The text an item id is matched on everywhere (``paired_frame``'s join, the Labeller, ``grade_dataset``'s
    resume): ``str`` of :func:`canonical_item_id`, ``None`` when missing. So ``1``, ``1.0``, ``np.int64(1)``
    and ``"1"`` are one item, as they are once written to a CSV and read back."""
    item_id = canonical_item_id(value)
    return None if item_id is None else str(item_id)


def _content_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    value = _as_plain_list(value)
    if isinstance(value, (list, tuple, Mapping)):  # a trajectory or a list of messages: its JSON, keys sorted
        return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return None if is_missing(value) else str(value)


def _as_plain_list(value: Any) -> Any:
    """A numpy array (a list column read from Parquet) as a list; anything else as it is."""
    if type(value).__name__ == "ndarray" and hasattr(value, "tolist"):
        return value.tolist()
    return value


def content_item_id(*texts: Any) -> str:
    """The key of an item without an id: :data:`CONTENT_KEY_PREFIX` and 24 hex digits of a SHA-256 of its
    texts (``prompt``, ``baseline``, ``candidate``, then for a conversation item its ``messages``,
    ``conversation_id`` and ``turn``; a missing text counts as absent, a list of messages as its JSON).

    It depends on the item alone, never on its row position, so it cannot be another item's id: the same
    texts are the same item in every run and every ordering (judged twice, they are averaged as one item, as
    they should be), different texts are different items."""
    payload = json.dumps([_content_text(t) for t in texts], ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.sha256(payload.encode("ascii")).hexdigest()
    return CONTENT_KEY_PREFIX + digest[:_CONTENT_DIGITS]


def _messages_text(messages: Any) -> str | None:
    """The messages of an item as they are keyed: their JSON, keys sorted (a JSON string and the list it holds are
    one conversation); ``None`` when missing."""
    messages = _as_plain_list(messages)
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            return messages  # not JSON: keyed by its text (its row fails on its own)
    elif not isinstance(messages, (list, tuple)) and is_missing(messages):
        return None
    return _content_text(messages)


def item_id_of(item_id: Any, texts: Iterable[Any] = (), *, messages: Any = None, conversation_id: Any = None,
               turn: Any = None) -> str | int | float | bool:
    """The item id recorded for one item: the one rule behind :func:`item_ids` and :func:`row_item_id`.

    Parameters
    ----------
    item_id : Any
        The item's ``id`` (missing: None/NaN/NA).
    texts : iterable
        Its texts (``prompt``, ``baseline``, ``candidate``), which key an item without an id.
    messages, conversation_id, turn : Any, optional
        A conversation item's messages before the judged reply, its conversation and the reply's turn.

    Returns
    -------
    str, int, float or bool
        An item that is not part of a conversation (no ``conversation_id``, no ``turn``): its id as
        :func:`canonical_item_id` converts it, as always. With a ``turn``, every turn of a conversation is its own
        item: ``"<id>#turn=<k>"`` (``"<conversation_id>/<id>#turn=<k>"`` when the conversation id is not the
        item's id). An item without an id: the key of its texts (:func:`content_item_id`), which for a
        conversation item also covers its messages, conversation id and turn.

    Raises
    ------
    ValidationError
        An item without an id and without texts to key it by.
    """
    cid, k = canonical_item_id(conversation_id), canonical_item_id(turn)
    found = canonical_item_id(item_id)
    if found is not None:
        if cid is None and k is None:
            return found
        text = str(found)
        if cid is not None and str(cid) != text:
            text = f"{cid}/{text}"
        return text if k is None else f"{text}#turn={k}"
    texts = list(texts)
    if not texts:
        raise ValidationError("an item has no id (its 'id' is missing) and no texts to key it by: give every item an "
                              "id, or pass its texts (prompt, baseline, candidate)")
    if cid is None and k is None and _messages_text(messages) is None:
        return content_item_id(*texts)  # a plain item: the key it always had
    return content_item_id(*texts, _messages_text(messages), cid, k)


def row_item_id(ids: list[Any], i: int, texts: Iterable[Any] | None = None, *, messages: Any = None,
                conversation_id: Any = None, turn: Any = None) -> str | int | float | bool:
    """The item id recorded for row ``i``: its ``id`` (:func:`canonical_item_id`); for a row without one, the
    key of its ``texts`` (:func:`content_item_id`); a conversation item's turn makes it its own item
    (:func:`item_id_of`). An id-less row without ``texts`` is a :class:`ValidationError`: a row's position is
    never its id (it is another item's)."""
    if texts is None and canonical_item_id(ids[i]) is None:
        raise ValidationError(f"row {i} has no item id (its 'id' is missing) and no texts to key it by: "
                              "give every item an id, or pass its texts (prompt, baseline, candidate)")
    return item_id_of(ids[i], () if texts is None else texts, messages=messages, conversation_id=conversation_id,
                      turn=turn)


def item_ids(frame: Any, texts: Iterable[str] = ITEM_COLUMNS) -> list[str | int | float | bool]:
    """The item id of every row of ``frame``, as :func:`judge_many` records it (:func:`item_id_of`): the row's
    ``id`` (:func:`canonical_item_id`), or for a row without one (no ``id`` column, or a missing value in it) the
    key of its ``texts`` columns (:func:`content_item_id`); a row of a conversation (``conversation_id`` /
    ``turn`` columns) is keyed by its turn too, and an id-less one by its ``messages``."""
    ids = column_values(frame, "id")
    columns = [column_values(frame, c) for c in texts]
    messages, cids, turns = (column_values(frame, c) for c in CONVERSATION_COLUMNS)
    return [item_id_of(ids[i], [col[i] for col in columns], messages=messages[i], conversation_id=cids[i],
                       turn=turns[i]) for i in range(len(ids))]


def conversation_tags(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The tags a conversation item's records carry: its ``conversation_id`` and ``turn`` (plain JSON values,
    :func:`canonical_item_id`), those it has."""
    out: dict[str, Any] = {}
    for key in CONVERSATION_TAGS:
        value = canonical_item_id(row.get(key))
        if value is not None:
            out[key] = value
    return out


def candidate_names(candidate_model: Any, candidate_adapter: Any = None) -> tuple[str, str]:
    """``(adapter_id, model_id)`` of an item's candidate, as :func:`~llm_connect.grading.judge_many` records
    them: ``candidate_model`` names its model (``"unknown"`` when absent or blank), ``candidate_adapter`` its
    adapter (else the model)."""
    model = candidate_model if isinstance(candidate_model, str) and candidate_model.strip() else "unknown"
    adapter = candidate_adapter if isinstance(candidate_adapter, str) and candidate_adapter.strip() else model
    return adapter, model


def item_key(item_id: Any, candidate_model: Any = None, candidate_adapter: Any = None) -> tuple[str, str, str]:
    """The one canonical key of a judged item: ``(id text, adapter_id, model_id)`` -- its id as matched
    everywhere (:func:`item_id_text`) and its candidate (:func:`candidate_names`), so the same question
    answered by two models is two items. For a ledger observation pass ``tags["item_id"]``, ``model_id``
    and ``adapter_id``; for an item, its recorded id (:func:`item_ids`), ``candidate_model`` and
    ``candidate_adapter``. A missing id is a :class:`ValidationError` (key an id-less item by
    :func:`item_ids` first)."""
    text = item_id_text(item_id)
    if text is None:
        raise ValidationError("an item without an id has no key: give it an id, or key it by its texts (item_ids)")
    adapter, model = candidate_names(candidate_model, candidate_adapter)
    return text, adapter, model


class LedgerSink(Protocol):
    """What a batch records to: a :class:`~llm_connect.quality.BaseLedger`, or any object with
    ``append(observation)`` (:func:`record_row` writes a group at once through its ``extend`` when it has one)."""

    def append(self, observation: QualityObservation, /) -> None: ...


def check_ledger(ledger: LedgerSink | None, task_type: str | None) -> None:
    """A ledger needs a task type (observations are routed on it)."""
    if ledger is not None and not (isinstance(task_type, str) and task_type.strip()):
        raise ValidationError("a ledger needs task_type='...' so its observations can be routed on")


#: A row's private note of what became of its observation: ``"recorded"``, or ``"held"`` (the ledger already
#: held its judgment, so it was not recorded again); :func:`attach_rows` counts them in ``attrs["ledger"]``.
RECORDED = "_ledger"


def extend_once(ledger: Any, observations: list[Any]) -> list[bool]:
    """Write ``observations`` to ``ledger`` once (:meth:`~llm_connect.quality.BaseLedger.extend_once`: the
    ones whose judgment or label it already holds are skipped); returns, for each, whether it was written.
    A sink without ``extend_once`` gets them all (through ``extend``, else ``append``)."""
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
    """Record ``make()`` in the ledger once, setting ``row["ledger_error"]``. The judgment stands whatever
    happens: a failure to build or append the observation is reported there, never in the row's status or
    score. A judgment the ledger already holds (same item, grader, rubric and candidate) is not recorded
    again: the row notes it (:data:`RECORDED`) and the frame counts it (``attrs["ledger"]``).

    Rows recording at the same time are written together (see :class:`_GroupCommit`). In a run through the
    providers' Batch APIs, a row an earlier run of the same state already recorded (a resumed multi-round
    run re-runs the rows that ended in an earlier round) is not recorded again
    (:meth:`~llm_connect.adapters._batches.BatchCollector.recorded_before`)."""
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
    """Record each ``(row, observation)`` once, at once (sync: a batch's ``finish`` step), as
    :func:`record_row` records one: ``ledger_error`` and :data:`RECORDED` set on each row. Rows whose
    observation is ``None`` are left alone."""
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
    """``out.attrs["ledger"]`` (``recorded``: judgments written; ``already``: judgments the ledger held
    already, not recorded again; ``failed``: rows with a ``ledger_error``) when the rows were recorded, and a
    warning naming how many were found already."""
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
    """``("ledger_error",)`` when a batch records to a ledger, else nothing."""
    return (LEDGER_ERROR,) if ledger is not None else ()
