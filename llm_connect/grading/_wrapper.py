"""The shared base of the judges made of other judges: :class:`WrapperJudge`, summed usage, and the per-item
details a batch diagnostic reads.

Each compound judge (:class:`~llm_connect.grading.PairwiseJudge`, :class:`~llm_connect.grading.PanelJudge`,
:class:`~llm_connect.grading.EscalationJudge`, the selective judges, :class:`~llm_connect.pipelines.PipelineJudge`)
is a :class:`~llm_connect.grading.Judge` with ``judge()`` and ``ajudge()`` (sub-calls that do not depend on
each other run concurrently), makes a documented number of calls, and reports in its
:class:`~llm_connect.grading.GradingResult` the summed ``tokens_in``, ``tokens_out``, ``cost_usd`` and
``latency_ms`` of every call it made, with what it saw in ``details``. Batch diagnostics (consistency,
agreement, escalation and savings) take a list of results or the frame of ``judge_many(judge, items)`` (or
the judge's own ``judge_many(items)``, the same): each judge declares the per-item columns they need (and a
``details`` column) as ``extra_columns``, added to the usual ones.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._docstrings import JUDGE_TEXTS, share_parameters
from .._runtime import on_background, run_sync
from ..core import BudgetTracker, LLMResponse, RunConfig
from ..errors import ValidationError
from ..quality import BaseLedger
from ._base import GradingResult, JudgeBase
from ._epochs import Reducer
from ._judge_many import judge_many

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["WrapperJudge"]


def _sum_usage(parts: Iterable[Any]) -> dict[str, Any]:
    """Summed usage of results / responses (anything with tokens_in, tokens_out, cost_usd, latency_ms)."""
    parts = [p for p in parts if p is not None]
    return {
        "tokens_in": sum(int(p.tokens_in) for p in parts),
        "tokens_out": sum(int(p.tokens_out) for p in parts),
        "tokens_cached": sum(int(getattr(p, "tokens_cached", 0)) for p in parts),
        "cost_usd": math.fsum(float(p.cost_usd) for p in parts),
        "latency_ms": math.fsum(float(p.latency_ms) for p in parts),
    }


def _usage_response(parts: Iterable[Any], adapter_id: str) -> LLMResponse:
    """A stand-in response with the summed usage, so an *unscored* batch row still reports what was spent."""
    return LLMResponse(content="", adapter_id=adapter_id, model_id="compound", **_sum_usage(parts))


def _spent(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    return response if isinstance(response, LLMResponse) else None


def _details_list(data: Any, kind: str, helper: str) -> list[Mapping[str, Any]]:
    """The ``details`` of each scored judgment in ``data`` (GradingResults, or a frame with a details column)."""
    try:
        import pandas as pd

        is_frame = isinstance(data, pd.DataFrame)
    except ImportError:  # pragma: no cover - pandas is a core dependency
        is_frame = False
    if is_frame:
        if "details" not in data.columns:
            raise ValidationError(
                f"{helper} needs per-item details, but the frame has no 'details' column; "
                "make it with the judge's own judge_many(items) method, or pass the GradingResults"
            )
        raw = list(data["details"])
    else:
        if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
            raise ValidationError(f"{helper} takes GradingResults or a frame from the judge's judge_many()")
        raw = [r.details if isinstance(r, GradingResult) else r for r in data]
    out = []
    for d in raw:
        if not isinstance(d, Mapping):
            continue  # an unscored or error row has no details
        if d.get("kind") != kind:
            raise ValidationError(f"{helper} reads {kind} judgments, got details of kind {d.get('kind')!r}")
        out.append(d)
    return out


class WrapperJudge(JudgeBase):
    """The shared base of the judges made of other judges: the compound judges, the selective judges and
    :class:`~llm_connect.pipelines.PipelineJudge`.

    A subclass writes one coroutine, ``_ajudge(baseline, candidate, prompt, run_config)``; sync
    :meth:`judge` runs it on the package's loop and :meth:`ajudge` awaits it there. It declares its batch
    columns (``extra_columns`` and ``result_columns(result)``), so
    :func:`~llm_connect.grading.judge_many` and :func:`~llm_connect.grading.ajudge_many` alike add
    them; ``judge_many`` is also a method.

    See Also
    --------
    JudgeBase : The base of every judge (the shared validation).
    PanelJudge, EscalationJudge, PairwiseJudge : Compound judges built on it.
    """

    grader_id: str

    async def _ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, prompt: str, run_config: RunConfig | None
    ) -> GradingResult:
        raise NotImplementedError

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig | None = None
    ) -> GradingResult:
        """Judge ``candidate`` against ``baseline`` for ``prompt`` (sync; works inside Jupyter's loop).

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        run_config : RunConfig, optional
            The caller's call configuration; each inner call is made from it.

        Returns
        -------
        GradingResult
            The judgment, with the summed usage of every call made and what the judge saw in ``details``.

        Raises
        ------
        JudgeReplyError
            No usable verdict (a batch run makes it an ``unscored`` row).
        JudgeAbstained
            A selective judge below its cut-off (an ``abstained`` row in a batch run).

        See Also
        --------
        ajudge : The awaitable twin.
        judge_many : Many items.
        """
        return run_sync(self._ajudge(baseline, candidate, prompt, run_config))

    @share_parameters(texts=JUDGE_TEXTS)
    async def ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig | None = None
    ) -> GradingResult:
        """The awaitable twin of :meth:`judge`: the same judgment, run on the package's loop.

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        run_config : RunConfig, optional
            The caller's call configuration.

        Returns
        -------
        GradingResult
            What :meth:`judge` returns.
        """
        return await on_background(self._ajudge(baseline, candidate, prompt, run_config))

    @share_parameters
    def judge_many(
        self,
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
        """:func:`llm_connect.grading.judge_many` of this judge (its own columns included).

        Parameters
        ----------
        items : DataFrame or iterable of mappings
            The items, as :func:`~llm_connect.grading.judge_many` takes them.
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
            ``judge_many(self, items, ...)``: one row per item, with this judge's own columns.

        See Also
        --------
        llm_connect.grading.judge_many : The function, for any judge.
        """
        return judge_many(self, items, concurrency=concurrency, progress=progress, run_config=run_config,
                          ledger=ledger, task_type=task_type, budget=budget, epochs=epochs, reducer=reducer,
                          batch=batch)


class _DetailedBatch(WrapperJudge):
    """A compound judge: its own columns, then a ``details`` column (what its summaries read)."""

    def _columns(self, result: GradingResult) -> dict[str, Any]:
        raise NotImplementedError

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        return {**self._columns(result), "details": dict(result.details)}



T = TypeVar("T")


def _bound(judge: Any, messages: Any, context: Any) -> Any:
    """``judge`` bound to one item's messages and documents when it reads them (declares ``uses_item``)."""
    if getattr(judge, "uses_item", False) is True:
        return judge.with_item(messages=messages, context=context)
    return judge


def _holding(owner: T, **parts: Any) -> T:
    """``owner`` when it already holds each of ``parts`` (a judge, or a sequence of judges, each the very one it
    holds), else a shallow copy holding them: a compound judge's ``with_item`` once its parts are bound."""
    def same(new: Any, old: Any) -> bool:
        if isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
            return len(new) == len(old) and all(a is b for a, b in zip(new, old, strict=True))
        return new is old

    if all(same(part, getattr(owner, name)) for name, part in parts.items()):
        return owner
    bound = copy.copy(owner)
    for name, part in parts.items():
        setattr(bound, name, part)
    return bound
