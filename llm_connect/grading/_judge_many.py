"""Judging many items: :func:`judge_many` and :func:`ajudge_many`, on the runner.

The runner (rows in order, never fewer; unscored / error rows; budget; Ctrl-C)
is :mod:`llm_connect.runner`; this module supplies the judge's row work: the
item's texts as responses, the judge called through its declared abilities
(:func:`~llm_connect.grading._base.acall_judge`), the judge's own columns, and
the ledger record (:func:`~llm_connect.grading._base.observation_for`).
``judge_many`` and ``ajudge_many`` build the same :class:`~llm_connect.runner.RunPlan`,
so they return the same columns.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from .._docstrings import share_parameters
from .._options import check_run_options
from ..columns import RESULT_COLUMNS
from ..conversations import as_response, normalize_messages
from ..core import BudgetTracker, LLMResponse, RunConfig
from ..errors import JudgeFailedError, JudgeReplyError, ValidationError
from ..items import (
    candidate_names,
    conversation_tags,
    is_missing,
    item_ids,
    item_text,
    items_frame,
    reference_text,
    row_item_id,
)
from ..quality import BaseLedger
from ..runner import (
    BUDGET_EXHAUSTED,
    INTERRUPTED,
    LEDGER_ERROR,
    LedgerSink,
    Row,
    RunPlan,
    arun_plan,
    arun_rows,
    as_ledger,
    attach_rows,
    describe_error,
    ledger_columns,
    progress_bar,
    record_row,
    record_rows_now,
    run_budget,
    run_plan,
    run_rows,
)
from ._base import GradingResult, Judge, _declared, acall_judge, judge_abilities, judge_result_columns, observation_for
from ._batch_api import provider_batch_plan
from ._epochs import (
    EPOCH_COLUMNS,
    Reducer,
    epoch_reliability,
    epoch_run_config,
    position_consistency_by_epoch,
    reduce_scores,
    reducer_of,
    reseed,
)
from ._llm_judge import LLMJudge

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("llm_connect")

__all__ = [
    "EPOCH_COLUMNS",
    "RESULT_COLUMNS",
    "ajudge_many",
    "arun_rows",
    "judge_many",
    "judge_plan",
    "observation_for",
    "refuse_total_failure",
    "run_rows",
    "total_failure",
]


def candidate_response(row: Mapping[str, Any], text: str) -> LLMResponse:
    """The candidate as a response: ``candidate_model`` names its model, ``candidate_adapter`` its adapter;
    a candidate that is a list of messages is a trajectory (:func:`~llm_connect.conversations.as_response`)."""
    adapter, model = candidate_names(row.get("candidate_model"), row.get("candidate_adapter"))
    return as_response(row.get("candidate"), text=text, adapter_id=adapter, model_id=model)


def result_row(judge: Judge, result: GradingResult) -> Row:
    """A judgment's result columns, with the judge's own (its declared ``extra_columns``)."""
    return {
        "quality_score": result.quality_score,
        "notes": result.notes,
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "judge_cost_usd": result.cost_usd,
        "judge_tokens_cached": getattr(result, "tokens_cached", 0),
        **judge_result_columns(judge, result),
    }


async def record_result(ledger: LedgerSink, row: Row, result: GradingResult, *, judge: Judge, task_type: str,
                        item_id: Any, tags: Mapping[str, Any] | None = None) -> None:
    """Record a scored row's judgment in ``ledger`` (a failure goes to ``ledger_error``); ``tags``: the item's own
    (a conversation item's ``conversation_id`` and ``turn``)."""
    await record_row(ledger, lambda: observation_for(result, task_type=task_type, judge=judge, item_id=item_id,
                                                     extra_tags=tags or None), row)


def finish_rows(judge: Judge, frame: Any, columns: tuple[str, ...],
                replies: Mapping[int, str] | None = None, prompts: Mapping[int, str] | None = None) -> Any:
    """The ``finish`` step of a judge's run: its ``grader_id`` on every row, the rows attached to ``frame``
    (with ``replies`` and ``prompts``: the raw reply and the judge's prompt of each unscored or abstained
    row, by position, in its ``raw_reply`` and ``judge_prompt``). A judge that may abstain (it declares
    ``abstains``: a selective judge, a cascade) has ``attrs["counts"]["abstained"]`` even when it is 0."""

    def finish(rows: list[Row], interrupted: bool) -> Any:
        for i, r in enumerate(rows):
            r["grader_id"] = judge.grader_id
            if r.get("status") in ("unscored", "abstained"):
                if replies is not None and i in replies:
                    r.setdefault(RAW_REPLY, replies[i])
                if prompts is not None and i in prompts:
                    r.setdefault(JUDGE_PROMPT, prompts[i])
        out = attach_rows(frame, rows, columns, interrupted)
        if _declared(judge, "abstains", False):
            out.attrs["counts"].setdefault("abstained", 0)
        return out

    return finish


#: The column ``judge_plan(..., replies=True)`` adds: the judge's raw reply (``None`` for a judge without one).
RAW_REPLY = "raw_reply"
#: The other column ``judge_plan(..., replies=True)`` adds: the exact prompt the judge sent (``None`` without one).
JUDGE_PROMPT = "judge_prompt"


def judge_prompt_of(details: Mapping[str, Any]) -> str | None:
    """The exact prompt text a judgment sent, from its ``details``, for audit; ``None`` when it made no LLM call.

    ``LLMJudge`` keeps it as ``judge_prompt`` (with its system message, when it sent one, shown first
    as ``[system]`` then ``[user]``); a pairwise judge has one per order (``[order]``), a panel one per
    member (``[member]``), an escalation judge the dear judge's when it escalated, else the cheap one's.
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
    text (``label``-led, joined by ``sep``), else the escalation judge's deciding judge's."""
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
    ``[order] reply`` lines), a panel one per member (``[member] reply``), an escalation judge the dear
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


def item_frame(items: Any, judge: Judge) -> Any:
    """``items`` as a frame a judge can read: ``candidate`` always; ``prompt`` unless the items carry ``messages``
    (it is then the text of the last user message); ``baseline`` unless the judge needs no reference
    (``needs_reference = False``). A missing column is a :class:`ValidationError` naming it."""
    frame = items_frame(items, ("candidate",))
    if not len(frame):  # no items: the plain item's columns, nothing to check
        return frame.reindex(columns=[*frame.columns, *(c for c in ("prompt", "baseline") if c not in frame.columns)])
    missing = []
    if "prompt" not in frame.columns and "messages" not in frame.columns:
        missing.append("prompt")
    if "baseline" not in frame.columns and judge_abilities(judge).needs_reference:
        missing.append("baseline")
    if missing:
        extra = (f" ({judge.grader_id!r} compares the candidate with a reference: give each item a 'baseline', or "
                 "use a judge that needs none)") if "baseline" in missing else ""
        raise ValidationError(f"items lack the column(s) {missing}; they have {list(frame.columns)}{extra}. A "
                              "conversation item may give 'messages' instead of 'prompt'. Rename your columns (e.g. "
                              "df.rename(columns={'question': 'prompt'}))")
    return frame


def item_messages(rec: Mapping[Any, Any]) -> list[dict[str, Any]] | None:
    """An item's ``messages`` (a list of chat messages, or a JSON string of one, as a CSV cell holds it), checked;
    ``None`` for an item without them."""
    value = rec.get("messages")
    if isinstance(value, (list, tuple, str)) or type(value).__name__ == "ndarray":
        return normalize_messages(value, where="messages")
    if value is None or is_missing(value):
        return None
    return normalize_messages(value, where="messages")  # says what it is instead


def item_prompt(rec: Mapping[Any, Any], messages: list[dict[str, Any]] | None) -> str:
    """An item's question: its ``prompt``; for a conversation item without one, the last user message's text."""
    value = rec.get("prompt")
    if messages is not None and (value is None or is_missing(value)):
        for message in reversed(messages):
            if message["role"] == "user":
                return str(message["content"])
        raise ValidationError("prompt is missing and the messages hold no user message to take it from")
    return item_text(value, "prompt")
def total_failure(statuses: Any, errors: Any) -> str | None:
    """The first error of a run in which no row was scored, or ``None`` when the run is no total failure.

    ``statuses`` / ``errors``: each row's ``status`` and ``error`` (a frame's columns, or lists). ``None``
    when there are no rows, when any row was scored or abstained (a selective judge's abstention is a
    decision), or when every failure is the run's budget running out or a stop (Ctrl-C): those say
    nothing about the judge. Otherwise the first error that is the judge's own (an unscored row's reason
    counts: a reply with no verdict on every row is a judge that does not work).
    """
    statuses, errors = list(statuses), list(errors)
    if not statuses or any(s in ("scored", "abstained") for s in statuses):
        return None
    for status, error in zip(statuses, errors, strict=True):
        if status not in ("error", "unscored"):
            continue
        text = "no reason given" if error is None or (isinstance(error, float) and math.isnan(error)) else str(error)
        if BUDGET_EXHAUSTED in text or text == INTERRUPTED:
            continue
        return text
    return None


def refuse_total_failure(frame: Any, judge: str, *, what: str = "") -> None:
    """Raise :class:`~llm_connect.errors.JudgeFailedError` (naming ``judge`` and its first error) when the
    result ``frame`` (``judge_many``'s) scored no row for a reason of the judge's own (:func:`total_failure`)."""
    if frame is None or not len(frame):
        return
    first = total_failure(frame["status"], frame["error"])
    if first is not None:
        raise JudgeFailedError(judge, first, len(frame), what=what)


def _warn_total_failure(rows: list[Row], label: str) -> None:
    first = total_failure([r.get("status") for r in rows], [r.get("error") for r in rows])
    if first is not None:
        log.warning("llm_connect: %s scored none of the %d items: every row failed; first error: %s", label,
                    len(rows), first)


def judge_plan(
    judge: Judge,
    items: Any,
    *,
    run_config: RunConfig | None = None,
    ledger: LedgerSink | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
    replies: bool = False,
    desc: str | None = None,
    epochs: int = 1,
    reducer: str | Reducer = "mean",
    warn_failure: bool = True,
) -> RunPlan:
    """The run plan of ``judge_many(judge, items, ...)``: what the sync and async twins both run.

    ``warn_failure``: log a warning with the first error when no row was scored (see :func:`judge_many`);
    a caller that refuses such a run itself (``calibrate``, ``align``) turns it off.

    ``desc`` labels the progress bar (default: the judge's ``grader_id``; calibration says
    ``"grading: <grader_id>"`` and ``"probe: <probe> — <grader_id>"``).

    ``replies=True`` adds a ``raw_reply`` column (after the result columns): the judge's raw reply
    for a scored row (:func:`raw_reply_of` its details) and the unusable reply of an unscored one;
    ``None`` for a judge that makes no LLM call and for error rows; and a ``judge_prompt`` column: the
    exact prompt it sent (:func:`judge_prompt_of`; for an unscored ``LLMJudge`` row, rebuilt by its
    pure ``build_prompt``).

    ``epochs``/``reducer``: see :func:`judge_many`. With ``epochs=k > 1`` the plan has ``k * n``
    judgments (epoch-major: every item's epoch 0 first, so a budget that runs out leaves the
    fewest items without a score) and its ``finish`` reduces them to ``n`` rows.
    """
    # the options this plan takes (calibration builds plans too); judge_many has checked them all already
    check_run_options(run_config=run_config, ledger=ledger, task_type=task_type, budget=budget, epochs=epochs,
                      reducer=reducer)
    k = epochs
    reducer_name, _ = reducer_of(reducer)
    if k > 1 and _declared(judge, "abstains", False):
        raise ValidationError(
            f"{judge.grader_id!r} may abstain (a selective judge or cascade): its guarantee holds for the judgment "
            f"it was calibrated on, and {k} judgments an item reduced to one are not that judgment; calibrate a "
            f"judge that judges {k} times instead: SelectiveJudge(judge, epochs={k}).calibrate(...) (or "
            f"calibrate(..., epochs={k}, selective=...)), and judge with epochs=1")
    abilities = judge_abilities(judge)
    frame = item_frame(items, judge)
    rc = run_config or RunConfig()
    records = cast(list[dict[str, Any]], frame.to_dict("records"))  # items_frame: str column names
    n = len(records)
    ids = item_ids(frame)  # each row's recorded id: its own, else its texts' key (never its position)
    unusable: dict[int, str] = {}  # work position -> the reply of a judgment that comes out unscored
    unusable_prompts: dict[int, str] = {}  # work position -> the prompt sent for it
    label = desc or str(judge.grader_id)
    runner = [judge]  # the judge the rows call: the one its ``aprepare_run`` returned, when it has one
    prepare_run = _declared(judge, "aprepare_run", None)
    epoch_judges: dict[int, Any] = {}  # epoch -> its (reseeded) judge, built after the pre-pass
    results: dict[tuple[int, int], GradingResult] = {}  # (item, epoch) -> result, for the ledger (k > 1)
    item_judges: dict[int, Any] = {}  # item -> the judge bound to it (its rubric hash is the record's), k > 1

    async def prepare(progress: bool) -> None:
        pairs = []
        for rec in records:  # the texts each row's work will hand the judge; rows that will fail are left out
            try:
                item_prompt(rec, item_messages(rec))
                pairs.append((reference_text(rec.get("baseline"), sep=abilities.reference_sep,
                                             required=abilities.needs_reference),
                              item_text(rec["candidate"], "candidate")))
            except ValidationError:
                continue
        try:
            runner[0] = await prepare_run(
                pairs, progress=lambda total: progress_bar(total, progress, f"{label}: embedding {total:,} texts"))
        except Exception as exc:  # the rows run as they would without it
            log.warning("llm_connect: %s: the pre-pass failed (%s); judging row by row",
                        label, describe_error(exc))

    def judge_of(epoch: int) -> Any:
        if epoch not in epoch_judges:
            epoch_judges[epoch] = reseed(runner[0], epoch)
        return epoch_judges[epoch]

    async def judge_item(i: int, epoch: int, pos: int) -> Row:
        rec = records[i]
        messages = item_messages(rec)
        prompt = item_prompt(rec, messages)
        reference = reference_text(rec.get("baseline"), sep=abilities.reference_sep,
                                   required=abilities.needs_reference)
        baseline = as_response(rec.get("baseline"), text=reference, adapter_id="baseline", model_id="reference")
        candidate = candidate_response(rec, item_text(rec["candidate"], "candidate"))
        this, config = judge_of(epoch), epoch_run_config(rc, epoch)
        recorder = judge  # whose rubric hash the record carries: the judge bound to the item, when it is bound
        if _declared(this, "uses_item", False):  # a judge that reads the item's messages / documents
            this = recorder = this.with_item(messages=messages, context=rec.get("context"))
        try:
            result = await acall_judge(this, baseline, candidate, prompt=prompt, run_config=config)
        except JudgeReplyError as exc:  # the engine makes the row unscored; keep what the judge said
            text = _reply_of_error(exc) if replies else None
            if text is not None:
                unusable[pos] = text
            sent = _prompt_sent(this, baseline, candidate, prompt, config) if replies else None
            if sent is not None:
                unusable_prompts[pos] = sent
            raise
        row = result_row(judge, result)
        if replies:
            row[RAW_REPLY] = raw_reply_of(result.details)
            row[JUDGE_PROMPT] = judge_prompt_of(result.details)
        if k > 1:
            results[(i, epoch)] = result  # recorded once reduced (finish)
            item_judges.setdefault(i, recorder)
        elif ledger is not None:
            await record_result(ledger, row, result, judge=recorder, task_type=str(task_type),
                                item_id=row_item_id(ids, i), tags=conversation_tags(rec))
        return row

    async def work(pos: int) -> Row:
        epoch, i = divmod(pos, n)
        return await judge_item(i, epoch, pos)

    reply_columns = (RAW_REPLY, JUDGE_PROMPT) if replies else ()
    if k == 1:
        columns = (*RESULT_COLUMNS, *abilities.extra_columns, *reply_columns, *ledger_columns(ledger))
        finish = finish_rows(judge, frame, columns, unusable if replies else None,
                             unusable_prompts if replies else None)
    else:
        columns = (*RESULT_COLUMNS, *abilities.extra_columns, *EPOCH_COLUMNS, *reply_columns,
                   *ledger_columns(ledger))
        attach = finish_rows(judge, frame, columns)

        def finish(rows: list[Row], interrupted: bool) -> Any:
            for pos, r in enumerate(rows):
                if r.get("status") == "unscored" and replies:
                    if pos in unusable:
                        r.setdefault(RAW_REPLY, unusable[pos])
                    if pos in unusable_prompts:
                        r.setdefault(JUDGE_PROMPT, unusable_prompts[pos])
            by_item = [[rows[e * n + i] for e in range(k)] for i in range(n)]
            reduced = [reduce_item(epoch_rows, reducer, reducer_name, pairwise=abilities.pairwise,
                                   extra=abilities.extra_columns) for epoch_rows in by_item]
            pool = _declared(judge, "pool_epochs", None)
            if callable(pool):  # a judge whose epochs pool into one judgment (a selective judge's scorer)
                for i, row in enumerate(reduced):
                    scored = [results[(i, e)] for e in range(k) if (i, e) in results]
                    if row.get("status") == "scored" and scored:
                        row.update(pool(scored, reducer))
            if ledger is not None:
                record_rows_now(ledger, [
                    (row, reduced_observation(row, results, i, judge=item_judges.get(i, judge),
                                              task_type=str(task_type), item_id=row_item_id(ids, i),
                                              reducer_name=reducer_name, tags=conversation_tags(records[i])))
                    for i, row in enumerate(reduced)])
            out = attach(reduced, interrupted)
            out.attrs["epochs"] = {"epochs": k, "reducer": reducer_name}
            out.attrs["reliability"] = epoch_reliability([r["epoch_scores"] for r in reduced],
                                                         reducer=reducer_name).to_dict()
            if abilities.pairwise and "consistent" in abilities.extra_columns:
                out.attrs["position_consistency"] = position_consistency_by_epoch(
                    [[r.get("consistent") if r.get("status") == "scored" else None for r in rows[e * n:(e + 1) * n]]
                     for e in range(k)])
            return out

    plain_finish = finish

    def finish_and_warn(rows: list[Row], interrupted: bool) -> Any:
        if warn_failure and not interrupted:
            _warn_total_failure(rows, label)
        return plain_finish(rows, interrupted)

    return RunPlan(n * k, work, finish_and_warn, desc=label if k == 1 else f"{label} ({k} epochs)",
                     budget=run_budget(budget, run_config), prepare=prepare if callable(prepare_run) else None)


def _pairwise_verdict(score: float) -> str:
    """A pairwise verdict from a (reduced) score: above 0.5 the candidate, below the baseline, 0.5 a tie."""
    return "candidate" if score > 0.5 else "baseline" if score < 0.5 else "tie"


def reduce_item(epoch_rows: list[Row], reducer: Any, reducer_name: str, *, pairwise: bool = False,
                extra: tuple[str, ...] = ()) -> Row:
    """One item's row from its ``k`` epoch rows (see :func:`judge_many`, ``epochs``).

    Scored when any epoch scored: ``quality_score`` is the reducer over the scored epochs, the
    judge's own columns come from the first scored epoch (a pairwise judge's ``verdict`` is read
    from the reduced score, and ``consistent`` is whether every scored epoch was consistent);
    else the first unscored epoch's row (or the first error's), its reason prefixed. Usage,
    latency and a ``calls`` column (a pipeline's) are summed over every epoch.
    """
    k = len(epoch_rows)
    scores = [float(r["quality_score"]) if r.get("status") == "scored" and r.get("quality_score") is not None
              else math.nan for r in epoch_rows]
    scored = [e for e, s in enumerate(scores) if not math.isnan(s)]
    if scored:
        first = scored[0]
        row = dict(epoch_rows[first])
        failed = k - len(scored)
        try:
            value = reduce_scores(scores, reducer)
        except Exception as exc:  # a callable reducer that failed or returned nonsense: this row says so
            row.update(status="error", error=f"reducer {reducer_name!r} failed: {describe_error(exc)}",
                       quality_score=math.nan)
        else:
            row["quality_score"] = value
            row["error"] = None
            row["notes"] = (f"{reducer_name} of {len(scored)}/{k} epochs"
                            + (f" ({failed} unscored or failed)" if failed else "")
                            + f"; epoch {first}: {epoch_rows[first].get('notes')}")
            if pairwise and "verdict" in extra:
                row["verdict"] = _pairwise_verdict(value)
            if pairwise and "consistent" in extra:
                flags = [epoch_rows[e].get("consistent") for e in scored]
                row["consistent"] = None if any(f is None for f in flags) else all(bool(f) for f in flags)
    else:
        pick = next((e for e, r in enumerate(epoch_rows) if r.get("status") == "unscored"), 0)
        row = dict(epoch_rows[pick])
        row["error"] = f"no epoch of {k} scored; epoch {pick}: {row.get('error')}"
        row["quality_score"] = math.nan
    row["tokens_in"] = sum(int(r.get("tokens_in") or 0) for r in epoch_rows)
    row["tokens_out"] = sum(int(r.get("tokens_out") or 0) for r in epoch_rows)
    row["judge_cost_usd"] = math.fsum(_finite_or_zero(r.get("judge_cost_usd")) for r in epoch_rows)
    row["judge_tokens_cached"] = sum(int(r.get("judge_tokens_cached") or 0) for r in epoch_rows)
    row["latency_ms"] = math.fsum(_finite_or_zero(r.get("latency_ms")) for r in epoch_rows)
    if "calls" in extra:  # a pipeline's (or any judge's) count of LLM calls: every epoch's
        row["calls"] = sum(int(r.get("calls") or 0) for r in epoch_rows)
    kept = [scores[e] for e in scored]
    row["epoch_scores"] = scores
    row["epochs_scored"] = len(kept)
    row["score_spread"] = (max(kept) - min(kept)) if kept else math.nan
    row["score_std"] = statistics.stdev(kept) if len(kept) >= 2 else math.nan
    return row


def _finite_or_zero(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def reduced_observation(row: Row, results: Mapping[tuple[int, int], GradingResult], i: int, *,
                        judge: Judge, task_type: str, item_id: Any, reducer_name: str,
                        tags: Mapping[str, Any] | None = None) -> Any:
    """The observation of a reduced, scored row: one per item (see :func:`judge_many`); ``None`` for a row
    that is not scored (nothing to record) or whose observation cannot be built (said in ``ledger_error``)."""
    row[LEDGER_ERROR] = None
    if row.get("status") != "scored":
        return None
    scores = row["epoch_scores"]
    first = next(e for e, s in enumerate(scores) if not math.isnan(s))
    try:
        result = replace(results[(i, first)], quality_score=row["quality_score"],
                         tokens_in=int(row["tokens_in"]), tokens_out=int(row["tokens_out"]),
                         tokens_cached=int(row.get("judge_tokens_cached") or 0),
                         cost_usd=float(row["judge_cost_usd"]))
        return observation_for(result, task_type=task_type, judge=judge, item_id=item_id, extra_tags={
            **(tags or {}), "epochs": len(scores), "reducer": reducer_name,
            "epoch_scores": [None if math.isnan(s) else s for s in scores]})
    except Exception as exc:
        row[LEDGER_ERROR] = f"ledger append failed: {describe_error(exc)}"
        log.warning("llm_connect: a scored row was not recorded in the ledger: %s", describe_error(exc))
        return None


@share_parameters
def judge_many(
    judge: Judge,
    items: Any,
    *,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: BaseLedger | str | os.PathLike[str] | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
    epochs: int = 1,
    reducer: str | Reducer = "mean",
    batch: Any = False,
) -> pd.DataFrame:
    """Judge many (prompt, baseline, candidate) items; one row per item, in input order, never fewer.

    Every item becomes exactly one row: ``scored``, ``unscored`` (the judge's reply held no usable verdict:
    the reason in ``error`` and ``notes``, the score NaN, never 0), ``error`` (the call failed, or a text is
    missing: the error kept) or, for a selective judge or a cascade below its calibrated cut-off,
    ``abstained`` (no score, its ``confidence`` in the row, never recorded in the ledger; see
    :class:`~llm_connect.grading.SelectiveJudge`). A missing (None/NaN) prompt, baseline or candidate, or a
    blank baseline, is an ``error`` row naming the column (never a match); an empty candidate is an answer
    and is scored. The rows run on the package's runner (:mod:`llm_connect.runner`), ``concurrency`` at a
    time, on a background event loop (so this works inside Jupyter); Ctrl-C keeps the rows that finished
    and ``df.attrs["interrupted"]`` says so.

    A run that scored no row -- every row an ``error`` or ``unscored`` for a reason of the judge's own, not
    the budget running out or a stop -- logs a warning with the first error (logger ``llm_connect``), so
    a judge that cannot run (a missing model or extra, a refused key) is never a silent column of NaN;
    :func:`~llm_connect.calibration.calibrate` and :func:`~llm_connect.alignment.align` refuse such a run
    (:class:`~llm_connect.errors.JudgeFailedError`).

    Parameters
    ----------
    judge : Judge
        Any judge (the :class:`~llm_connect.grading.Judge` protocol): a built-in judge, a compound judge,
        ``pipeline.as_judge()``, a selective judge or cascade.
    items : DataFrame or iterable of mappings
        ``prompt``, ``baseline`` and ``candidate`` texts (a judge shown no reference, such as an
        ``LLMJudge`` whose rubric has ``reference=False``, needs no ``baseline`` column: a missing or blank
        one is no error; a conversation item may give ``messages`` instead of ``prompt``). Other columns are
        carried through: ``id`` names the item, ``candidate_model`` / ``candidate_adapter`` its candidate.
    {concurrency}
    {progress}
    {run_config}
        The judge's own call config drops the tracker (as the grading contract says); the run budget still
        counts the judge's calls.
    {ledger}
        ``df.attrs["ledger"]`` counts ``recorded`` and ``already``, and a warning says how many were found
        already. Each record carries its item id: the ``id`` as :func:`~llm_connect.items.canonical_item_id`
        converts it (a whole float is an int); a row without one -- no ``id`` column, or NaN/None in it -- is
        keyed by its texts, ``"row:<sha256>"`` (:func:`~llm_connect.items.content_item_id`), never by its
        position, which is another item's id. A ``ledger_error`` column is added: a row whose observation
        could not be recorded keeps its status and score, and says why there.
    {task_type}
    {budget}
        The judge's own calls are charged too, although its call config drops the caller's tracker: so
        ``judge_many(judge, items, budget=5.0)`` spends at most about $5 on judging. ``df.attrs["budget"]``
        holds the limit, the spend and the calls.
    {epochs}
        Epoch 0 is the plain run; epoch ``e > 0`` is judged by :func:`~llm_connect.grading.reseed`'s copy.
        Still one row per item, in order, with :data:`~llm_connect.grading.EPOCH_COLUMNS` added after the
        judge's columns: ``epoch_scores`` (one per epoch; an unscored or failed epoch is NaN, never 0, and
        the reducer never sees it), ``epochs_scored``, ``score_spread`` (max − min of the scored epochs) and
        ``score_std`` (their sample standard deviation). An item with no scored epoch is ``unscored`` (or
        ``error``) as a single judgment would be, with the first epoch's reason. The judge's own columns
        come from the first scored epoch, except a pairwise judge's ``verdict`` (read from the reduced
        score: above 0.5 candidate, below baseline, 0.5 tie) and ``consistent`` (every scored epoch
        consistent across orders). Tokens, cost, latency (and a pipeline's ``calls``) are summed over the
        epochs. ``df.attrs["reliability"]``: run-to-run reliability, the epochs as coders
        (:func:`~llm_connect.grading.epoch_reliability`: percent agreement and Krippendorff's alpha);
        ``df.attrs["epochs"]``: ``{"epochs", "reducer"}``; for a pairwise judge in both orders
        ``df.attrs["position_consistency"]``: per epoch, the share of its judgments whose two orders
        agreed. With ``ledger``, each scored item is recorded **once**, with the reduced score, its summed
        judge cost and the tags ``epochs``, ``reducer`` and ``epoch_scores`` (so
        :func:`~llm_connect.frames.paired_frame`, which averages a judge's repeated observations of an
        item, reads the reduced score: one observation per run); the records are written when the epochs
        are done. A judge that may abstain (a selective judge or cascade) is not judged in epochs: its
        guarantee is about the judgment it was calibrated on (calibrate ``SelectiveJudge(judge, epochs=k)``
        instead); a selective judge's :attr:`~llm_connect.grading.SelectiveJudge.scorer` is, its row's
        confidence then that of the ``k`` judgments pooled.
    {reducer}
    {batch}
        A compound judge whose later calls depend on earlier replies takes several rounds.
        ``df.attrs["batch"]`` says what was done at the provider.

    Returns
    -------
    DataFrame
        The input columns plus ``quality_score``, ``notes``, ``grader_id``, ``status``, ``error``,
        ``latency_ms``, ``judge_tokens_cached``, ``judge_tokens_in``,
        ``judge_tokens_out``, ``judge_cost_usd`` (the judge's own usage: every call it made;
        :data:`~llm_connect.columns.RESULT_COLUMNS`), then the judge's own columns when it declares
        ``extra_columns`` (a compound judge's verdict, votes, ``details``...); an input column of the same
        name as a result column becomes ``<name>_input``. ``df.attrs["counts"]``: rows per status.

    Raises
    ------
    ValidationError
        Items lacking a column the judge needs, a bad run option (a ledger without ``task_type``, a bad
        ``concurrency``, ``epochs``, ``reducer``, ``budget``...: :func:`llm_connect._options.check_run_options`),
        or epochs of a judge that may abstain.

    See Also
    --------
    ajudge_many : the awaitable twin.
    grade_many : generate the baseline and candidate answers first, then judge them.
    llm_connect.calibration.score_items : several judges over the same items, with human labels.
    llm_connect.distributed.grade_dataset : the same rows from a Ray Dataset on a pool of actors.

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge
    >>> items = [{"prompt": "2+2?", "baseline": "4", "candidate": "4"},
    ...          {"prompt": "3+3?", "baseline": "6", "candidate": "7"}]
    >>> df = judge_many(ExactMatchJudge(), items, progress=False)
    >>> df[["quality_score", "status"]]
       quality_score  status
    0            1.0  scored
    1            0.0  scored
    """
    check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                      task_type=task_type, budget=budget, epochs=epochs, reducer=reducer, batch=batch)
    sink = as_ledger(ledger)
    plan = judge_plan(judge, items, run_config=run_config, ledger=sink, task_type=task_type, budget=budget,
                      epochs=epochs, reducer=reducer)
    plan, concurrency = provider_batch_plan(plan, batch, ledger=sink, concurrency=concurrency, progress=progress)
    return run_plan(plan, concurrency=concurrency, progress=progress)


@share_parameters
async def ajudge_many(
    judge: Judge,
    items: Any,
    *,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: BaseLedger | str | os.PathLike[str] | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
    epochs: int = 1,
    reducer: str | Reducer = "mean",
    batch: Any = False,
) -> pd.DataFrame:
    """The awaitable twin of :func:`judge_many` (for code already inside an event loop): the same rows and columns.

    Parameters
    ----------
    judge : Judge
        Any judge, as :func:`judge_many` takes it.
    items : DataFrame or iterable of mappings
        The items, as :func:`judge_many` takes them.
    {concurrency}
    {progress}
    {run_config}
    {ledger}
    {task_type}
    {budget}
    {epochs}
    {reducer}
    {batch}

    Returns
    -------
    DataFrame
        What :func:`judge_many` returns for the same arguments.

    Raises
    ------
    ValidationError
        As :func:`judge_many`.

    See Also
    --------
    judge_many : the sync twin.

    Examples
    --------
    >>> import asyncio
    >>> from llm_connect.grading import ExactMatchJudge
    >>> items = [{"prompt": "2+2?", "baseline": "4", "candidate": "4"}]
    >>> asyncio.run(ajudge_many(ExactMatchJudge(), items, progress=False))["status"].tolist()
    ['scored']
    """
    check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                      task_type=task_type, budget=budget, epochs=epochs, reducer=reducer, batch=batch)
    sink = as_ledger(ledger)
    plan = judge_plan(judge, items, run_config=run_config, ledger=sink, task_type=task_type, budget=budget,
                      epochs=epochs, reducer=reducer)
    plan, concurrency = provider_batch_plan(plan, batch, ledger=sink, concurrency=concurrency, progress=progress)
    return await arun_plan(plan, concurrency=concurrency, progress=progress)
