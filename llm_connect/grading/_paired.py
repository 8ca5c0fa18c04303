"""``PairedGrader`` and :func:`grade_many`: generate a baseline and a candidate answer, then judge them.

Runs on the one runner (:mod:`llm_connect.runner`) with the judge row
work of :mod:`._batch`; records through
:func:`~llm_connect.grading._base.observation_for`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._docstrings import share_parameters
from .._options import check_run_options
from .._runtime import acall_complete
from ..columns import GRADE_COLUMNS
from ..core import BudgetTracker, LLMAdapter, LLMResponse, RunConfig
from ..errors import ValidationError
from ..items import column_values, item_text, items_frame, reference_text, row_item_id
from ..quality import BaseLedger
from ..runner import Row, RunPlan, as_ledger, ledger_columns, row_for_exception, run_budget, run_plan
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

    Parameters
    ----------
    judge : Judge
        The judge comparing the two answers (a :class:`~llm_connect.grading.Judge`: a method
        ``judge(baseline, candidate, ...)``).
    ledger : BaseLedger, optional
        The ledger each scored grade is appended to; needs ``task_type``.
    task_type : str, optional
        The task the grades are recorded under.

    Raises
    ------
    ValidationError
        ``judge`` has no ``judge`` method, or a ``ledger`` is given without ``task_type``.

    See Also
    --------
    grade_many : Grade many prompts at once, on the runner.
    llm_connect.grading.judge_many : Judge answers you already have.

    Examples
    --------
    >>> from llm_connect import RunConfig
    >>> from llm_connect.grading import ExactMatchJudge
    >>> from llm_connect.testing import ScriptedAdapter
    >>> grader = PairedGrader(ExactMatchJudge())
    >>> result = grader.grade(ScriptedAdapter(["Paris"]), ScriptedAdapter(["Paris"]), "Capital of France?",
    ...                       RunConfig())
    >>> result.quality_score
    1.0
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
        """The judge's ``grader_id``."""
        return str(self.judge.grader_id)

    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult:
        """Generate the two answers to ``prompt``, judge them, and record the grade when there is a ledger.

        Parameters
        ----------
        baseline_adapter : LLMAdapter
            Answers the prompt for the baseline (the reference the candidate is judged against).
        candidate_adapter : LLMAdapter
            Answers the prompt for the candidate being graded.
        prompt : str
            The prompt both adapters answer, unchanged.
        run_config : RunConfig
            The call configuration of both answers and of the judge (its tracker is charged for the answers).

        Returns
        -------
        GradingResult
            The judge's result on the two answers.

        See Also
        --------
        agrade : The awaitable twin, which also returns the answers.
        """
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
        """Async twin of :meth:`grade` that also returns the two responses (for the runner).

        The two answers are generated at once. Nothing is recorded: the runner records (see :func:`grade_many`).

        Parameters
        ----------
        baseline_adapter : LLMAdapter
            Answers the prompt for the baseline.
        candidate_adapter : LLMAdapter
            Answers the prompt for the candidate.
        prompt : str
            The prompt both adapters answer, unchanged.
        run_config : RunConfig
            The call configuration of both answers and of the judge.

        Returns
        -------
        tuple of (LLMResponse, LLMResponse, GradingResult)
            The baseline's response, the candidate's, and the judge's result.
        """
        baseline, candidate = await asyncio.gather(
            acall_complete(baseline_adapter, prompt, run_config),
            acall_complete(candidate_adapter, prompt, run_config),
        )
        result = await acall_judge(self.judge, baseline, candidate, prompt=prompt, run_config=run_config)
        return baseline, candidate, result

    @share_parameters
    def grade_many(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        items: Any,
        *,
        run_config: RunConfig | None = None,
        concurrency: int = 16,
        progress: bool = True,
        ledger: BaseLedger | str | os.PathLike[str] | None = None,
        task_type: str | None = None,
        budget: BudgetTracker | float | None = None,
    ) -> pd.DataFrame:
        """Generate and grade many prompts with this grader: :func:`llm_connect.grading.grade_many`.

        Parameters
        ----------
        baseline_adapter : LLMAdapter
            Answers each prompt for the baseline.
        candidate_adapter : LLMAdapter
            Answers each prompt for the candidate.
        items : str or DataFrame or iterable
            Prompts (strings), or a DataFrame / mappings with a ``prompt`` column.
        {run_config}
        {concurrency}
        {progress}
        {ledger}
            ``None``: the grader's own ``ledger``.
        {task_type}
            ``None``: the grader's own ``task_type``.
        {budget}

        Returns
        -------
        DataFrame
            One row per item, as :func:`grade_many` returns it.
        """
        return grade_many(self, baseline_adapter, candidate_adapter, items, run_config=run_config,
                          concurrency=concurrency, progress=progress, ledger=ledger, task_type=task_type,
                          budget=budget)


@share_parameters
def grade_many(
    grader: PairedGrader | Judge,
    baseline_adapter: LLMAdapter,
    candidate_adapter: LLMAdapter,
    items: Any,
    *,
    run_config: RunConfig | None = None,
    concurrency: int = 16,
    progress: bool = True,
    ledger: BaseLedger | str | os.PathLike[str] | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
) -> pd.DataFrame:
    """Grade each prompt: generate a baseline and a candidate answer, then judge them.

    "Grade" is generate-then-judge; to judge answers you already have, call :func:`judge_many`.

    One row per item, in order, never fewer. Both adapters get the caller's ``prompt`` and
    ``run_config`` unchanged (so its tracker is charged for them). A missing prompt, or a blank
    generated baseline, is an ``error`` row (the generated texts and their usage are kept; a blank
    baseline is not judged).

    Parameters
    ----------
    grader : PairedGrader or Judge
        The grader, or a judge (made a :class:`PairedGrader`); its ``ledger`` and ``task_type`` are the
        defaults of those below.
    baseline_adapter : LLMAdapter
        Answers each prompt for the baseline.
    candidate_adapter : LLMAdapter
        Answers each prompt for the candidate.
    items : iterable of str, or DataFrame or iterable of mappings
        Prompts (strings), or a DataFrame / mappings with a ``prompt`` column (plus ``id`` and any
        extras, carried through).
    {run_config}
        Both adapters get it unchanged; a tracker in it that is not the run budget is charged for the two
        answers only.
    {concurrency}
    {progress}
    {ledger}
        ``None``: the grader's. Each scored row is appended as a :class:`QualityObservation` with the
        rubric hash, grader id and item id in ``tags`` (the item's ``id``; without one, the key of the
        prompt and the two answers, ``"row:<sha256>"``, see :func:`~llm_connect.items.content_item_id`),
        and a ``ledger_error`` column says when that failed (the row stays scored).
    {task_type}
        ``None``: the grader's.
    {budget}
        Both answers and the judge's own calls (which its call config would not charge) are charged to it
        once: ``budget=5.0`` caps the whole run at about $5. ``df.attrs["budget"]`` holds the limit, the
        spend and the calls.

    Returns
    -------
    DataFrame
        One row per item: the generated ``baseline`` and ``candidate`` texts, the judge's result columns
        (as in :func:`judge_many`; ``judge_cost_usd`` and tokens are the judge's) and the candidate's own
        usage (``candidate_cost_usd``...): :data:`~llm_connect.columns.GRADE_COLUMNS`.

    Raises
    ------
    ValidationError
        ``items`` are not prompts or have no ``prompt`` column, or a bad run option (a ledger without
        ``task_type``...: :func:`llm_connect._options.check_run_options`).

    See Also
    --------
    judge_many : Judge answers you already have.
    PairedGrader.grade : One prompt.

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge
    >>> from llm_connect.testing import ScriptedAdapter
    >>> df = grade_many(ExactMatchJudge(), ScriptedAdapter(["4", "6"]), ScriptedAdapter(["4", "7"]),
    ...                 ["2+2?", "3+3?"], progress=False, concurrency=1)
    >>> df[["prompt", "baseline", "candidate", "quality_score"]]
      prompt baseline candidate  quality_score
    0   2+2?        4         4            1.0
    1   3+3?        6         7            0.0
    """
    if not isinstance(grader, PairedGrader):
        grader = PairedGrader(grader)
    ledger = ledger if ledger is not None else grader.ledger
    task_type = task_type or grader.task_type
    check_run_options(run_config=run_config, concurrency=concurrency, progress=progress, ledger=ledger,
                      task_type=task_type, budget=budget)
    ledger = as_ledger(ledger)
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
