"""A panel of judges on the same item, aggregated (mean, median or majority), and Krippendorff's alpha between
its members (:class:`PanelAgreement`).
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._display import view
from .._docstrings import JUDGE_TEXTS, share_parameters
from ..core import LLMResponse, RunConfig
from ..errors import JudgeReplyError, ValidationError
from ._base import GradingResult, Judge, acall_judge, validate_grader_id, validate_score
from ._epochs import _alpha
from ._verdicts import majority_vote
from ._wrapper import _bound, _DetailedBatch, _details_list, _holding, _spent, _sum_usage, _usage_response

__all__ = ["PanelAgreement", "PanelJudge"]


_AGGREGATES = ("mean", "median", "majority")


@dataclass
class PanelJudge(_DetailedBatch):
    """Several judges (e.g. different models) on the same item, aggregated.

    All members run concurrently; the calls are the sum of the members'.
    ``aggregate``: ``"mean"`` or ``"median"`` of the members' scores, or
    ``"majority"``: each member votes pass when its score >= ``threshold``; the
    panel scores 1.0 when passes outnumber fails, else 0.0 (a tie scores 0.0:
    a split panel does not pass an item). ``details["passed"]`` is the panel
    score >= ``threshold``. A member whose reply is unusable abstains (its
    reason in ``details["member_errors"]``); with no member scored the
    judgment is *unscored*. Other member errors fail the judgment.
    ``agreement(results_or_frame)``: Krippendorff's alpha between members over
    a batch (interval for mean/median, nominal votes for majority).

    Parameters
    ----------
    judges : sequence of Judge
        The members (distinct ``grader_id``).
    aggregate : {"mean", "median", "majority"}, default "mean"
        How the members' scores become the panel's (above).
    grader_id : str, default "panel"
        The panel's id.
    threshold : float, default 0.5
        A member's pass in a majority vote, and ``details["passed"]``.

    Raises
    ------
    ValidationError
        No judges, a member without ``judge``, repeated member ids, an unknown ``aggregate`` or a threshold
        outside 0..1.

    See Also
    --------
    EscalationJudge : A dear judge only when a cheap one is unsure.

    Examples
    --------
    >>> from llm_connect import LLMResponse, RunConfig
    >>> from llm_connect.grading import ContainsJudge, ExactMatchJudge
    >>> panel = PanelJudge([ExactMatchJudge(), ContainsJudge()], aggregate="majority")
    >>> ref, answer = LLMResponse("Paris", "ref", "m"), LLMResponse("It is Paris.", "cand", "m")
    >>> panel.judge(ref, answer, prompt="Capital of France?", run_config=RunConfig()).quality_score
    0.0
    """

    judges: Sequence[Judge]
    aggregate: str = "mean"
    grader_id: str = "panel"
    threshold: float = 0.5

    #: ``judge_many`` hands the panel each item's messages and documents; it binds the members that read them.
    uses_item = True

    @share_parameters(texts=JUDGE_TEXTS)
    def with_item(self, *, messages: Any = None, context: Any = None) -> PanelJudge:
        """The panel of one conversation item: each member that reads an item's messages and documents bound to them.

        See :meth:`LLMJudge.with_item <llm_connect.grading.LLMJudge.with_item>`.

        Parameters
        ----------
        {messages}
        {context}

        Returns
        -------
        PanelJudge
            A copy with the members bound, or this panel when no member reads items.
        """
        return _holding(self, judges=[_bound(j, messages, context) for j in self.judges])

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        if isinstance(self.judges, (str, bytes)) or not isinstance(self.judges, Sequence) or not self.judges:
            raise ValidationError("PanelJudge needs a non-empty list of judges")
        self.judges = list(self.judges)
        for j in self.judges:
            if not callable(getattr(j, "judge", None)):
                raise ValidationError(f"PanelJudge member {j!r} has no judge(baseline, candidate, ...) method")
        ids = [str(j.grader_id) for j in self.judges]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValidationError(f"PanelJudge members need distinct grader_ids; repeated: {dupes}")
        if self.aggregate not in _AGGREGATES:
            raise ValidationError(f"aggregate must be one of {list(_AGGREGATES)}, got {self.aggregate!r}")
        self.threshold = validate_score(self.threshold, what="threshold")

    @property
    def members(self) -> list[str]:
        return [str(j.grader_id) for j in self.judges]

    @property
    def extra_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("passed", *(f"score_{m}" for m in self.members), "details")

    def combine(self, scores: Sequence[float]) -> tuple[float, dict[str, int] | None]:
        """The panel's score from its members' usable scores (``aggregate``; see the class docstring).

        What :meth:`judge` scores, and what a :class:`~llm_connect.grading.SelectiveJudge` of the panel
        scores too.

        Parameters
        ----------
        scores : sequence of float
            The members' scores (those that gave a usable verdict).

        Returns
        -------
        (float, dict or None)
            The panel's score, and the votes of a ``"majority"`` panel (``{"pass": n, "fail": m}``; ``None``
            otherwise).

        Raises
        ------
        ValidationError
            No score to combine.
        """
        valid = [float(s) for s in scores]
        if not valid:
            raise ValidationError("a panel needs at least one member's score to combine")
        votes = None
        if self.aggregate == "mean":
            score = math.fsum(valid) / len(valid)
        elif self.aggregate == "median":
            score = float(statistics.median(valid))
        else:
            ballots = [("pass", 1.0) if s >= self.threshold else ("fail", 0.0) for s in valid]
            _, score, counts, _tied = majority_vote(ballots, value=float, tie_break="lowest")  # a tie fails
            votes = {"pass": counts.get("pass", 0), "fail": counts.get("fail", 0)}
        return min(1.0, max(0.0, score)), votes

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        rc = run_config or RunConfig()
        done = await asyncio.gather(
            *(acall_judge(j, baseline, candidate, prompt=prompt, run_config=rc) for j in self.judges),
            return_exceptions=True,
        )
        scores: dict[str, float | None] = {}
        errors: dict[str, str] = {}
        spent: list[Any] = []
        member_details: dict[str, Any] = {}
        for member, d in zip(self.members, done, strict=True):
            if isinstance(d, JudgeReplyError):
                scores[member] = None
                errors[member] = str(d)
                spent.append(_spent(d))
            elif isinstance(d, BaseException):  # not a judge's reply: a real failure, raised as is
                raise d
            else:
                scores[member] = d.quality_score
                spent.append(d)
                member_details[member] = {"notes": d.notes, **dict(d.details)}
        valid = [s for s in scores.values() if s is not None]
        if not valid:
            reasons = "; ".join(f"{k}: {v}" for k, v in errors.items())
            exc = JudgeReplyError(f"no panel member gave a usable verdict: {reasons}")
            exc.response = _usage_response(spent, self.grader_id)
            raise exc
        score, votes = self.combine(valid)
        shown = ", ".join(f"{k}={'-' if v is None else f'{v:.3g}'}" for k, v in scores.items())
        notes = f"{self.aggregate} of {len(valid)}/{len(scores)} judges: {score:.3g} ({shown})"
        return GradingResult(
            quality_score=score,
            notes=notes,
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
            details={"kind": "panel", "aggregate": self.aggregate, "threshold": self.threshold,
                     "passed": score >= self.threshold, "member_scores": scores, "member_errors": errors,
                     "votes": votes, "members": member_details},
            **_sum_usage(spent),
        )

    def _columns(self, result: GradingResult) -> dict[str, Any]:
        cols: dict[str, Any] = {"passed": result.details["passed"]}
        for m, s in result.details["member_scores"].items():
            cols[f"score_{m}"] = math.nan if s is None else s
        return cols

    def agreement(self, results_or_frame: Any) -> PanelAgreement:
        """Krippendorff's alpha between the members over a batch (many items are needed for it to mean much).

        Interval for ``"mean"`` / ``"median"``, nominal votes (score >= ``threshold``) for ``"majority"``.

        Parameters
        ----------
        results_or_frame : list of GradingResult or DataFrame
            The panel's results, or the frame of its ``judge_many(items)``.

        Returns
        -------
        PanelAgreement
            The alpha, its level, the items and the members.
        """
        details = _details_list(results_or_frame, "panel", "PanelJudge.agreement")
        nominal = self.aggregate == "majority"
        matrix = []
        for m in self.members:
            row = []
            for d in details:
                s = d["member_scores"].get(m)
                if s is None:
                    row.append(math.nan)
                else:
                    row.append(float(s >= self.threshold) if nominal else float(s))
            matrix.append(row)
        return PanelAgreement(
            alpha=_alpha(matrix, "nominal" if nominal else "interval"),
            level="nominal" if nominal else "interval",
            n_items=len(details),
            members=tuple(self.members),
        )


@dataclass(frozen=True)
class PanelAgreement:
    """Krippendorff's alpha between panel members (1 = full agreement, 0 = chance; NaN = undefined).

    Parameters
    ----------
    alpha : float
        The alpha.
    level : {"interval", "nominal"}
        Its level of measurement.
    n_items : int
        The items it is over.
    members : tuple of str
        The members' ids.
    """

    alpha: float
    level: str
    n_items: int
    members: tuple[str, ...]

    def _repr_html_(self) -> str:
        return view("panel_agreement_html")(self)
