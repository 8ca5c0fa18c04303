"""A judge from a plain Python function: ``FunctionJudge(score_fn)`` scores ``score_fn(baseline, candidate)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .._docstrings import JUDGE_TEXTS, share_parameters
from ..core import LLMResponse, RunConfig
from ..errors import ValidationError
from ._base import GradingResult, JudgeBase, validate_grader_id

__all__ = ["FunctionJudge"]


@dataclass
class FunctionJudge(JudgeBase):
    """A judge whose score is ``score_fn(baseline_text, candidate_text)`` (a number in 0..1).

    For heuristics of your own, and for judges with a known behaviour in tests
    and bias probes, e.g. one that rewards length::

        FunctionJudge(lambda b, c: min(1.0, len(c) / 200), grader_id="likes-length")

    Parameters
    ----------
    score_fn : callable
        ``score_fn(baseline_text, candidate_text) -> float``: the score, a number in 0..1 (checked).
    grader_id : str, default "function-judge"
        The judge's id.
    notes : str, default ""
        The notes of every result.

    Raises
    ------
    ValidationError
        A ``score_fn`` that is not callable, or a blank ``grader_id``.

    Examples
    --------
    >>> from llm_connect import LLMResponse, RunConfig
    >>> judge = FunctionJudge(lambda b, c: min(1.0, len(c) / 200), grader_id="likes-length")
    >>> ref, answer = LLMResponse("x", "ref", "m"), LLMResponse("y" * 50, "cand", "m")
    >>> judge.judge(ref, answer, prompt="?", run_config=RunConfig()).quality_score
    0.25
    """

    score_fn: Callable[[str, str], float]
    grader_id: str = "function-judge"
    notes: str = ""

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        if not callable(self.score_fn):
            raise ValidationError("FunctionJudge needs a callable score_fn(baseline, candidate) -> float")

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """``score_fn`` of the two texts.

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            The score, with ``notes``.
        """
        return GradingResult(
            quality_score=self.score_fn(baseline.content, candidate.content),
            notes=self.notes,
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
        )
