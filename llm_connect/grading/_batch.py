"""Judging many items: :func:`judge_many` and :func:`ajudge_many`, on the one batch engine.

The engine (rows in order, never fewer; unscored / error rows; budget; Ctrl-C)
is :mod:`llm_connect.batch`; this module supplies the judge's row work: the
item's texts as responses, the judge called through its declared abilities
(:func:`~llm_connect.grading._base.acall_judge`), the judge's own columns, and
the ledger record (:func:`~llm_connect.grading._base.observation_for`).
``judge_many`` and ``ajudge_many`` build the same :class:`~llm_connect.batch.BatchPlan`,
so they return the same columns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..batch import (
    ITEM_COLUMNS,
    RESULT_COLUMNS,
    BatchPlan,
    Row,
    arun_batch,
    arun_rows,
    attach_rows,
    batch_budget,
    check_ledger,
    column_values,
    describe_error,
    item_text,
    items_frame,
    ledger_columns,
    progress_bar,
    record_row,
    reference_text,
    row_item_id,
    run_batch,
    run_rows,
)
from ..core import BudgetTracker, LLMResponse, RunConfig
from ..errors import JudgeReplyError, ValidationError
from ._base import GradingResult, _declared, acall_judge, judge_abilities, judge_result_columns, observation_for

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("llm_connect")

__all__ = [
    "RESULT_COLUMNS",
    "ajudge_many",
    "arun_rows",
    "judge_many",
    "judge_plan",
    "observation_for",
    "run_rows",
]


def candidate_response(row: Mapping[str, Any], text: str) -> LLMResponse:
    """The candidate as a response: ``candidate_model`` names its model, ``candidate_adapter`` its adapter."""
    model = row.get("candidate_model")
    model = model if isinstance(model, str) and model.strip() else "unknown"
    adapter = row.get("candidate_adapter")
    adapter = adapter if isinstance(adapter, str) and adapter.strip() else model
    return LLMResponse(content=text, adapter_id=adapter, model_id=model)


def result_row(judge: Any, result: GradingResult) -> Row:
    """A judgment's result columns, with the judge's own (its declared ``extra_columns``)."""
    return {
        "quality_score": result.quality_score,
        "notes": result.notes,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "judge_cost_usd": result.cost_usd,
        **judge_result_columns(judge, result),
    }


async def record_result(ledger: Any, row: Row, result: GradingResult, *, judge: Any, task_type: str,
                        item_id: Any) -> None:
    """Record a scored row's judgment in ``ledger`` (a failure goes to ``ledger_error``)."""
    await record_row(ledger, lambda: observation_for(result, task_type=task_type, judge=judge, item_id=item_id), row)


def finish_rows(judge: Any, frame: Any, columns: tuple[str, ...],
                replies: Mapping[int, str] | None = None, prompts: Mapping[int, str] | None = None) -> Any:
    """The ``finish`` step of a judge's batch: its ``grader_id`` on every row, the rows attached to ``frame``
    (with ``replies`` and ``prompts``: the raw reply and the judge's prompt of each unscored row, by
    position, in its ``raw_reply`` and ``judge_prompt``)."""

    def finish(rows: list[Row], interrupted: bool) -> Any:
        for i, r in enumerate(rows):
            r["grader_id"] = judge.grader_id
            if r.get("status") == "unscored":
                if replies is not None and i in replies:
                    r.setdefault(RAW_REPLY, replies[i])
                if prompts is not None and i in prompts:
                    r.setdefault(JUDGE_PROMPT, prompts[i])
        return attach_rows(frame, rows, columns, interrupted)

    return finish


#: The column ``judge_plan(..., replies=True)`` adds: the judge's raw reply (``None`` for a judge without one).
RAW_REPLY = "raw_reply"
#: The other column ``judge_plan(..., replies=True)`` adds: the exact prompt the judge sent (``None`` without one).
JUDGE_PROMPT = "judge_prompt"


def judge_prompt_of(details: Mapping[str, Any]) -> str | None:
    """The exact prompt text a judgment sent, from its ``details``, for audit; ``None`` when it made no LLM call.

    ``LLMJudge`` keeps it as ``judge_prompt`` (with its system message, when it sent one, shown first
    as ``[system]`` then ``[user]``); a pairwise judge has one per order (``[order]``), a panel one per
    member (``[member]``), a cascade the dear judge's when it escalated, else the cheap one's.
    """
    def own(d: Mapping[str, Any]) -> str | None:
        text, system = d.get("judge_prompt"), d.get("judge_system_prompt")
        if not isinstance(text, str):
            return None
        return f"[system]\n{system}\n\n[user]\n{text}" if isinstance(system, str) else text

    return _audit_text(details, own, "prompt", lambda key, text: f"[{key}]\n{text}", "\n\n")


def _audit_text(details: Any, own: Callable[[Mapping[str, Any]], str | None], order_field: str,
                label: Callable[[str, str], str], sep: str) -> str | None:
    """The one walk of a judgment's ``details`` behind :func:`judge_prompt_of` and :func:`raw_reply_of`:
    the judge's own text (``own``), else each pairwise order's ``order_field`` and each panel member's
    text (``label``-led, joined by ``sep``), else the cascade's deciding judge's."""
    if not isinstance(details, Mapping):
        return None
    text = own(details)
    if text is not None:
        return text
    parts: list[str] = []
    for order in details.get("orders") or ():
        if isinstance(order, Mapping) and isinstance(order.get(order_field), str):
            parts.append(label(str(order.get("order", "?")), order[order_field]))
    members = details.get("members")
    if isinstance(members, Mapping):
        for name, member in members.items():
            inner = _audit_text(member, own, order_field, label, sep)
            if inner is not None:
                parts.append(label(str(name), inner))
    if parts:
        return sep.join(parts)
    for key in ("dear_details", "cheap_details"):
        inner = _audit_text(details.get(key), own, order_field, label, sep)
        if inner is not None:
            return inner
    return None

def _prompt_sent(judge: Any, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                 run_config: RunConfig) -> str | None:
    """The prompt an ``LLMJudge`` sent for a reply it could not use (the error does not carry it): its
    prompt is a pure function of the texts (``build_prompt``) and its system message of the run config."""
    from ._judges import LLMJudge

    if not isinstance(judge, LLMJudge):
        return None
    system = judge.judge_config(run_config).system_prompt
    sent: dict[str, Any] = {"judge_prompt": judge.build_prompt(baseline, candidate, prompt)}
    if system is not None:
        sent["judge_system_prompt"] = system
    return judge_prompt_of(sent)


def raw_reply_of(details: Mapping[str, Any]) -> str | None:
    """The raw reply text in a judgment's ``details``, for audit; ``None`` when the judge made no LLM call.

    ``LLMJudge`` keeps it as ``raw_reply``; a pairwise judge has one per order (shown as
    ``[order] reply`` lines), a panel one per member (``[member] reply``), a cascade the dear
    judge's when it escalated, else the cheap one's.
    """
    def own(d: Mapping[str, Any]) -> str | None:
        reply = d.get("raw_reply")
        return reply if isinstance(reply, str) else None

    return _audit_text(details, own, "raw_reply", lambda key, text: f"[{key}] {text}", "\n")

def _reply_of_error(exc: JudgeReplyError) -> str | None:
    """The reply that held no usable verdict (from the response it came in, else the error's own copy)."""
    response = exc.response
    if isinstance(response, LLMResponse):
        return response.content
    return exc.reply if isinstance(exc.reply, str) else None


def judge_plan(
    judge: Any,
    items: Any,
    *,
    run_config: RunConfig | None = None,
    ledger: Any = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
    replies: bool = False,
    desc: str | None = None,
) -> BatchPlan:
    """The batch plan of ``judge_many(judge, items, ...)``: what the sync and async twins both run.

    ``desc`` labels the progress bar (default: the judge's ``grader_id``; calibration says
    ``"grading: <grader_id>"`` and ``"probe: <probe> — <grader_id>"``).

    ``replies=True`` adds a ``raw_reply`` column (after the result columns): the judge's raw reply
    for a scored row (:func:`raw_reply_of` its details) and the unusable reply of an unscored one;
    ``None`` for a judge that makes no LLM call and for error rows; and a ``judge_prompt`` column: the
    exact prompt it sent (:func:`judge_prompt_of`; for an unscored ``LLMJudge`` row, rebuilt by its
    pure ``build_prompt``).
    """
    frame = items_frame(items, ITEM_COLUMNS)
    check_ledger(ledger, task_type)
    abilities = judge_abilities(judge)
    rc = run_config or RunConfig()
    records = cast(list[dict[str, Any]], frame.to_dict("records"))  # items_frame: str column names
    ids = column_values(frame, "id")
    unusable: dict[int, str] = {}  # position -> the reply of a row that comes out unscored
    unusable_prompts: dict[int, str] = {}  # position -> the prompt sent for it
    label = desc or str(judge.grader_id)
    runner = [judge]  # the judge the rows call: the one its ``aprepare_batch`` returned, when it has one
    prepare_batch = _declared(judge, "aprepare_batch", None)

    async def prepare(progress: bool) -> None:
        pairs = []
        for rec in records:  # the texts each row's work will hand the judge; rows that will fail are left out
            try:
                item_text(rec["prompt"], "prompt")
                pairs.append((reference_text(rec["baseline"], sep=abilities.reference_sep),
                              item_text(rec["candidate"], "candidate")))
            except ValidationError:
                continue
        try:
            runner[0] = await prepare_batch(
                pairs, progress=lambda total: progress_bar(total, progress, f"{label}: embedding {total:,} texts"))
        except Exception as exc:  # the rows run as they would without it
            log.warning("llm_connect: %s: the batch pre-pass failed (%s); judging row by row",
                        label, describe_error(exc))

    async def work(i: int) -> Row:
        rec = records[i]
        prompt = item_text(rec["prompt"], "prompt")
        reference = reference_text(rec["baseline"], sep=abilities.reference_sep)
        baseline = LLMResponse(content=reference, adapter_id="baseline", model_id="reference")
        candidate = candidate_response(rec, item_text(rec["candidate"], "candidate"))
        try:
            result = await acall_judge(runner[0], baseline, candidate, prompt=prompt, run_config=rc)
        except JudgeReplyError as exc:  # the engine makes the row unscored; keep what the judge said
            text = _reply_of_error(exc) if replies else None
            if text is not None:
                unusable[i] = text
            sent = _prompt_sent(judge, baseline, candidate, prompt, rc) if replies else None
            if sent is not None:
                unusable_prompts[i] = sent
            raise
        row = result_row(judge, result)
        if replies:
            row[RAW_REPLY] = raw_reply_of(result.details)
            row[JUDGE_PROMPT] = judge_prompt_of(result.details)
        if ledger is not None:
            await record_result(ledger, row, result, judge=judge, task_type=str(task_type),
                                item_id=row_item_id(ids, i))
        return row

    columns = (*RESULT_COLUMNS, *abilities.extra_columns, *((RAW_REPLY, JUDGE_PROMPT) if replies else ()),
               *ledger_columns(ledger))
    finish = finish_rows(judge, frame, columns, unusable if replies else None,
                         unusable_prompts if replies else None)
    return BatchPlan(len(records), work, finish, desc=label, budget=batch_budget(budget, run_config),
                     prepare=prepare if callable(prepare_batch) else None)


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
) -> pd.DataFrame:
    """Judge many (prompt, baseline, candidate) items; one row per item, in input order, never fewer.

    ``items``: a DataFrame or an iterable of mappings with ``prompt``,
    ``baseline`` and ``candidate`` texts; other columns are carried through
    (``candidate_model`` also names the candidate's model, ``id`` the item).
    Returns the input columns plus ``quality_score``, ``notes``, ``grader_id``,
    ``status`` (``scored``/``unscored``/``error``), ``error``, ``latency_ms``,
    ``tokens_in``, ``tokens_out``, ``judge_cost_usd`` (the judge's own usage: every call it made), then
    the judge's own columns when it declares ``extra_columns`` (a compound
    judge's verdict, votes, ``details``...).
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
    plan = judge_plan(judge, items, run_config=run_config, ledger=ledger, task_type=task_type, budget=budget)
    return run_batch(plan, concurrency=concurrency, progress=progress)


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
) -> pd.DataFrame:
    """The awaitable twin of :func:`judge_many` (for code already inside an event loop): the same rows and columns.

    Cap the judge's spend with ``budget=`` (a tracker, or a limit in USD; by
    default ``run_config.budget_tracker``): every paid call of a row, the
    judge's included, is charged to it, and once it is spent the rows not
    attempted are ``error`` rows saying "budget exhausted" (see :func:`judge_many`).
    """
    plan = judge_plan(judge, items, run_config=run_config, ledger=ledger, task_type=task_type, budget=budget)
    return await arun_batch(plan, concurrency=concurrency, progress=progress)
