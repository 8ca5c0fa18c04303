"""Escalation: a cheap judge first, the dear one only when the cheap one is unsure (a fixed band of scores), and
what that saved over a batch (:class:`EscalationSummary`). The cascade with a guaranteed agreement with people is
:func:`~llm_connect.grading.cascade` (:mod:`llm_connect.grading._selective_cascade`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._display import view
from .._docstrings import JUDGE_TEXTS, share_parameters
from ..core import LLMResponse, RunConfig
from ..errors import JudgeReplyError, ValidationError
from ._base import GradingResult, Judge, acall_judge, validate_grader_id, validate_score
from ._wrapper import _bound, _DetailedBatch, _details_list, _holding, _spent, _sum_usage, _usage_response

__all__ = ["EscalationJudge", "EscalationSummary"]


@dataclass
class EscalationJudge(_DetailedBatch):
    """A cheap judge first; the dear one only when the cheap one is unsure.

    Escalates when the cheap score lies within ``band`` (inclusive: ``lo <=
    score <= hi``) or when the cheap judge's reply was unusable
    (:class:`JudgeReplyError`: an unsure judge too). Any other error of the
    cheap judge fails the judgment (escalating would hide an outage). Calls:
    the cheap judge's, plus the dear judge's when escalated. The score is the
    dear judge's when escalated, else the cheap one's. ``details``:
    ``escalated``, ``reason``, both scores and costs. ``summary(...)`` gives the
    share escalated and the cost saved over a batch.

    The band is fixed by hand and promises nothing, and every item gets a score. That is
    the difference from :func:`~llm_connect.grading.cascade`
    (:class:`~llm_connect.grading.SelectiveCascade`; Jung, Brahman & Choi, ICLR 2025,
    arXiv:2407.18370), which chooses each judge's cut-off on labelled items so that the
    judged items agree with people at a guaranteed level, and leaves the items no judge is
    sure of to people. Use this judge to save the dear judge's cost; use ``cascade`` when
    the agreement must be guaranteed.

    Parameters
    ----------
    cheap, dear : Judge
        The judge asked first, and the one asked when the cheap one is unsure.
    band : tuple of float
        ``(lo, hi)``, the cheap scores (inclusive) that escalate; ``0 <= lo <= hi <= 1``.
    grader_id : str
        The judge's id in results and the ledger (default ``"escalation"``).

    Raises
    ------
    ValidationError
        A member that is not a judge, or a band that is not a pair within ``[0, 1]`` in order.

    See Also
    --------
    cascade : judges in turn, each trusted above a cut-off chosen with a guarantee; people last.
    """

    cheap: Judge
    dear: Judge
    band: tuple[float, float] = (0.3, 0.7)
    grader_id: str = "escalation"

    extra_columns = ("escalated", "cheap_score", "dear_score", "details")

    #: ``judge_many`` hands the judge each item's messages and documents; it binds the judges that read them.
    uses_item = True

    @share_parameters(texts=JUDGE_TEXTS)
    def with_item(self, *, messages: Any = None, context: Any = None) -> EscalationJudge:
        """The judge of one conversation item: its cheap and dear judges bound to the item's messages and documents
        when they read them.

        Parameters
        ----------
        {messages}
        {context}

        Returns
        -------
        EscalationJudge
            A copy with the judges bound, or this judge when neither reads items.
        """
        return _holding(self, cheap=_bound(self.cheap, messages, context), dear=_bound(self.dear, messages, context))

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        for name in ("cheap", "dear"):
            if not callable(getattr(getattr(self, name), "judge", None)):
                raise ValidationError(f"EscalationJudge {name} must be a judge with a judge(...) method")
        try:
            lo, hi = self.band
        except (TypeError, ValueError):
            raise ValidationError(f"band must be a pair (lo, hi), got {self.band!r}") from None
        lo = validate_score(lo, what="band low")
        hi = validate_score(hi, what="band high")
        if lo > hi:
            raise ValidationError(f"band low must not exceed band high, got {self.band!r}")
        self.band = (lo, hi)

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        rc = run_config or RunConfig()
        lo, hi = self.band
        cheap_result: GradingResult | None = None
        reason: str | None
        try:
            cheap_result = await acall_judge(self.cheap, baseline, candidate, prompt=prompt, run_config=rc)
        except JudgeReplyError as exc:
            cheap_spent = _spent(exc)
            reason = f"cheap judge unscored: {exc}"
        else:
            cheap_spent = cheap_result
            reason = None
            if lo <= cheap_result.quality_score <= hi:
                reason = f"cheap score {cheap_result.quality_score:.3g} in band [{lo:g}, {hi:g}]"
        cheap_cost = float(cheap_spent.cost_usd) if cheap_spent is not None else 0.0
        details: dict[str, Any] = {
            "kind": "escalation", "band": (lo, hi), "escalated": reason is not None, "reason": reason,
            "cheap_score": cheap_result.quality_score if cheap_result else None,
            "cheap_notes": cheap_result.notes if cheap_result else None,
            "cheap_cost_usd": cheap_cost, "dear_score": None, "dear_cost_usd": 0.0,
            "cheap_details": dict(cheap_result.details) if cheap_result else None,
        }
        if reason is None:
            assert cheap_result is not None
            return GradingResult(
                quality_score=cheap_result.quality_score, notes=f"cheap judge: {cheap_result.notes}",
                grader_id=self.grader_id, baseline_response=baseline, candidate_response=candidate,
                details=details, **_sum_usage([cheap_result]),
            )
        try:
            dear_result = await acall_judge(self.dear, baseline, candidate, prompt=prompt, run_config=rc)
        except JudgeReplyError as exc:
            exc.response = _usage_response([cheap_spent, _spent(exc)], self.grader_id)
            raise
        details.update(dear_score=dear_result.quality_score, dear_cost_usd=float(dear_result.cost_usd),
                       dear_notes=dear_result.notes, dear_details=dict(dear_result.details))
        return GradingResult(
            quality_score=dear_result.quality_score, notes=f"escalated ({reason}): {dear_result.notes}",
            grader_id=self.grader_id, baseline_response=baseline, candidate_response=candidate,
            details=details, **_sum_usage([cheap_spent, dear_result]),
        )

    def _columns(self, result: GradingResult) -> dict[str, Any]:
        d = result.details
        return {
            "escalated": d["escalated"],
            "cheap_score": math.nan if d["cheap_score"] is None else d["cheap_score"],
            "dear_score": math.nan if d["dear_score"] is None else d["dear_score"],
        }

    @staticmethod
    def summary(results_or_frame: Any) -> EscalationSummary:
        """Share escalated and cost saved versus always asking the dear judge, over the scored judgments.

        The dear judge's cost per item is estimated as its mean cost over the
        escalated items (so it is NaN, as are the savings, when none escalated).

        Parameters
        ----------
        results_or_frame : list of GradingResult or DataFrame
            The judge's results, or the frame of its ``judge_many(items)``.

        Returns
        -------
        EscalationSummary
            The escalations and costs.
        """
        details = _details_list(results_or_frame, "escalation", "EscalationJudge.summary")
        n = len(details)
        escalated = [d for d in details if d["escalated"]]
        cheap_cost = math.fsum(float(d["cheap_cost_usd"]) for d in details)
        dear_cost = math.fsum(float(d["dear_cost_usd"]) for d in escalated)
        per_item = dear_cost / len(escalated) if escalated else math.nan
        always = per_item * n
        actual = cheap_cost + dear_cost
        saved = always - actual
        return EscalationSummary(
            n=n,
            escalated=len(escalated),
            share_escalated=len(escalated) / n if n else math.nan,
            cost_usd=actual,
            cheap_cost_usd=cheap_cost,
            dear_cost_usd=dear_cost,
            dear_cost_per_item_usd=per_item,
            always_dear_cost_usd=always,
            saved_usd=saved,
            saved_share=saved / always if always and not math.isnan(always) else math.nan,
        )


@dataclass(frozen=True)
class EscalationSummary:
    """How an :class:`EscalationJudge` did over a batch: escalations, what it cost, and what always-dear would
    have cost.

    Parameters
    ----------
    n : int
        The scored judgments.
    escalated : int
        Those the dear judge made.
    share_escalated : float
        ``escalated / n``.
    cost_usd : float
        What the judgments cost (cheap and dear).
    cheap_cost_usd : float
        The cheap judge's cost.
    dear_cost_usd : float
        The dear judge's cost.
    dear_cost_per_item_usd : float
        The dear judge's mean cost over the escalated items (NaN when none escalated).
    always_dear_cost_usd : float
        What asking the dear judge on every item would have cost, at that mean.
    saved_usd : float
        ``always_dear_cost_usd - cost_usd``.
    saved_share : float
        ``saved_usd / always_dear_cost_usd``.
    """

    n: int
    escalated: int
    share_escalated: float
    cost_usd: float
    cheap_cost_usd: float
    dear_cost_usd: float
    dear_cost_per_item_usd: float
    always_dear_cost_usd: float
    saved_usd: float
    saved_share: float

    def _repr_html_(self) -> str:
        return view("escalation_summary_html")(self)
