"""GradingResult and the Judge / BaselineGrader protocols."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core import LLMAdapter, LLMResponse, RunConfig
from ..errors import ValidationError

__all__ = ["AsyncJudge", "BaselineGrader", "GradingResult", "Judge", "validate_grader_id", "validate_score"]


def validate_grader_id(grader_id: Any) -> str:
    """Return ``grader_id`` or raise ``ValueError`` when it is empty or blank."""
    if not isinstance(grader_id, str) or not grader_id.strip():
        raise ValidationError(f"grader_id must be a non-empty string, got {grader_id!r}")
    return grader_id


def validate_score(score: Any, *, what: str = "quality_score") -> float:
    """Return ``score`` as a float in 0..1 or raise ``ValueError`` saying what is wrong."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValidationError(f"{what} must be a number in 0.0..1.0, got {type(score).__name__} {score!r}")
    value = float(score)
    if math.isnan(value):
        raise ValidationError(f"{what} must be a number in 0.0..1.0, got NaN")
    if not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be in 0.0..1.0, got {value!r}")
    return value


@dataclass(frozen=True)
class GradingResult:
    """One judgment of a candidate against a baseline.

    The first five fields are the contract's. The extras record what the
    judgment itself cost (for an LLM judge: its own calls) and ``details`` for
    audit: the raw reply, the rubric hash, the order asked, a pipeline trace...
    """

    quality_score: float
    notes: str
    grader_id: str
    baseline_response: LLMResponse
    candidate_response: LLMResponse
    # extras: the judge's own usage, and details for audit
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "quality_score", validate_score(self.quality_score))
        validate_grader_id(self.grader_id)
        if not isinstance(self.notes, str):
            raise ValidationError(f"notes must be a str, got {type(self.notes).__name__}")
        for name in ("baseline_response", "candidate_response"):
            if not isinstance(getattr(self, name), LLMResponse):
                raise ValidationError(f"{name} must be an LLMResponse")

    def _repr_html_(self) -> str:
        from ._html import kv_table

        return kv_table([
            ("grader_id", self.grader_id),
            ("quality_score", f"{self.quality_score:.4g}"),
            ("notes", self.notes),
            ("baseline", self.baseline_response.content[:300]),
            ("candidate", self.candidate_response.content[:300]),
            ("judge cost (USD)", f"{self.cost_usd:.6f}"),
        ])


@runtime_checkable
class Judge(Protocol):
    """Compares a candidate response with a baseline response."""

    grader_id: str

    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult: ...


@runtime_checkable
class AsyncJudge(Judge, Protocol):
    """A judge the batch runtime can await instead of running in a thread."""

    async def ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult: ...


@runtime_checkable
class BaselineGrader(Protocol):
    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult: ...
