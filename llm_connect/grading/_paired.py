"""``PairedGrader`` and :func:`grade_many`: generate a baseline and a candidate answer, then judge them.

Runs on the one runner (:mod:`llm_connect.runner`) with the judge row
work of :mod:`._batch`; records through
:func:`~llm_connect.grading._base.observation_for`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._runtime import acall_complete
from ..columns import GRADE_COLUMNS
from ..core import BudgetTracker, LLMAdapter, LLMResponse, RunConfig
from ..errors import ValidationError
from ..items import column_values, item_text, items_frame, reference_text, row_item_id
from ..quality import BaseLedger
from ..runner import Row, RunPlan, check_ledger, ledger_columns, row_for_exception, run_budget, run_plan
from ._base import GradingResult, Judge, acall_judge, judge_abilities, observation_for
from ._judge_many import finish_rows, record_result, result_row

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GRADE_COLUMNS", "PairedGrader", "grade_many"]


@dataclass
class PairedGrader:
    """Runs a baseline and a candidate adapter on one prompt, then lets ``judge`` compare them.

    Both adapters receive the caller's ``prompt`` and ``run_config`` unchanged.
    With a ``ledger`` (and ``task_type``), each scored grade is appended to it as
    a :class:`~llm_connect.quality.QualityObservation` of the candidate, with the
    grader id, rubric hash and item id in ``tags``.
    """

    judge: Judge
    ledger: BaseLedger | None = None
    task_type: str | None = None

    def __post_init__(self) -> None:
        if not callable(getattr(self.judge, "judge", None)):
            raise ValidationError("PairedGrader needs a judge with a judge(baseline, candidate, ...) method")
        if self.ledger is not None and not self.task_type:
            raise ValidationError("PairedGrader(ledger=...) also needs task_type='...' to record observations")

    @property
    def grader_id(self) -> str:
        return str(self.judge.grader_id)

    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult:
        baseline = baseline_adapter.complete(prompt, run_config)
        candidate = candidate_adapter.complete(prompt, run_config)
        result: GradingResult = self.judge.judge(baseline, candidate, prompt=prompt, run_config=run_config)
        if self.ledger is not None:
            self.ledger.append(observation_for(result, task_type=str(self.task_type), judge=self.judge))
        return result

    async def agrade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> tuple[LLMResponse, LLMResponse, GradingResult]:
        """Async twin of :meth:`grade` that also returns the two responses (for the runner)."""
        baseline, candidate = await asyncio.gather(
            acall_complete(baseline_adapter, prompt, run_config),
            acall_complete(candidate_adapter, prompt, run_config),
        )
        result = await acall_judge(self.judge, baseline, candidate, prompt=prompt, run_config=run_config)
        return baseline, candidate, result

    def grade_many(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """Generate and grade many prompts; see :func:`llm_connect.grading.grade_many`."""
        return grade_many(self, *args, **kwargs)


def grade_many(
    grader: PairedGrader | Judge,
    baseline_adapter: LLMAdapter,
    candidate_adapter: LLMAdapter,
    items: Any,
    *,
    run_config: RunConfig | None = None,
    concurrency: int = 16,
    progress: bool = True,
    ledger: BaseLedger | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
) -> pd.DataFrame:
    """Grade each prompt: generate a baseline and a candidate answer, then judge them.

    "Grade" is generate-then-judge; to judge answers you already have, call :func:`judge_many`.

    ``items``: prompts (strings), or a DataFrame / mappings with a ``prompt``
    column (plus ``id`` and any extras, carried through). One row per item, in
    order, never fewer: the generated ``baseline`` and ``candidate`` texts, the
    judge's result columns (as in :func:`judge_many`; ``judge_cost_usd`` and tokens
    are the judge's) and the candidate's own usage (``candidate_cost_usd``...).
    Both adapters get the caller's ``prompt`` and ``run_config`` unchanged (so
    its tracker is charged for them). A missing prompt, or a blank generated
    baseline, is an ``error`` row (the generated texts and their usage are
    kept; a blank baseline is not judged). With ``ledger`` (or the grader's)
    and ``task_type``, each scored row is appended as a
    :class:`QualityObservation` with the rubric hash, grader id and item id in
    ``tags`` (the item's ``id``; without one, the key of the prompt and the two
    answers, ``"row:<sha256>"``, see :func:`~llm_connect.items.content_item_id`),
    and a ``ledger_error`` column says when that failed (the row stays scored).

    Spend, and how to cap the judge's: the run budget is ``budget`` (a
    tracker, or a limit in USD), else ``run_config.budget_tracker``; every
    paid call of a row (both answers and the judge's own, which its call
    config would not charge) is charged to it once. ``budget=5.0`` caps the
    whole run at about $5: once it is spent no call starts, and the rows not
    attempted are ``error`` rows saying "budget exhausted". A tracker in
    ``run_config`` that is not the run budget is charged for the two
    answers only. ``df.attrs["budget"]`` holds the limit, the spend and the calls.
    """
    if not isinstance(grader, PairedGrader):
        grader = PairedGrader(grader)
    ledger = ledger if ledger is not None else grader.ledger
    task_type = task_type or grader.task_type
    check_ledger(ledger, task_type)
    if not isinstance(items, Iterable) or isinstance(items, (str, bytes)):
        raise ValidationError("items must be prompts, a DataFrame or mappings with a 'prompt' column")
    import pandas as pd

    if not isinstance(items, pd.DataFrame):
        items = [{"prompt": p} if isinstance(p, str) else p for p in items]
    frame = items_frame(items, ("prompt",))
    records = frame.to_dict("records")
    ids = column_values(frame, "id")
    rc = run_config or RunConfig()
    judge = grader.judge
    sep = judge_abilities(judge).reference_sep

    async def work(i: int) -> Row:
        prompt = item_text(records[i]["prompt"], "prompt")
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
                row.update(row_for_exception(failed))  # the answer that came back is kept, with its cost
                return row
        assert isinstance(baseline, LLMResponse) and isinstance(candidate, LLMResponse)
        try:  # the answers were paid for: whatever happens next, the row keeps them
            reference_text(baseline.content, sep=sep)
            result = await acall_judge(judge, baseline, candidate, prompt=prompt, run_config=rc)
        except Exception as exc:
            row.update(row_for_exception(exc))
            return row
        row.update(result_row(judge, result))
        if ledger is not None:
            await record_result(ledger, row, result, judge=judge, task_type=str(task_type),
                                item_id=row_item_id(ids, i, (prompt, baseline.content, candidate.content)))
        return row

    columns = (*GRADE_COLUMNS, *ledger_columns(ledger))
    plan = RunPlan(len(records), work, finish_rows(judge, frame, columns), desc="grading",
                     budget=run_budget(budget, run_config))
    return run_plan(plan, concurrency=concurrency, progress=progress)
