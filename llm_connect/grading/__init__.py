"""The Baseline Grading contract: results, judges, graders and the batch runtime."""

from ._base import AsyncJudge, BaselineGrader, GradingResult, Judge

__all__ = ["AsyncJudge", "BaselineGrader", "GradingResult", "Judge"]
