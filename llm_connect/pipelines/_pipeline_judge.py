"""A pipeline as a judge: :class:`PipelineJudge` (``Pipeline.as_judge()``), on the compound judges' wrapper base.

It runs the pipeline on the item ``{"prompt", "baseline", "candidate"}`` of each judgment, so a pipeline can
go wherever a judge goes (``judge_many``, ``calibrate``, ``tournament``, a panel, a cascade).
"""

from __future__ import annotations

from typing import Any

from ..columns import PIPELINE_EXTRA_COLUMNS
from ..core import LLMResponse, RunConfig
from ..errors import ConfigError, JudgeReplyError, ValidationError
from ..grading import WrapperJudge
from ..grading._base import GradingResult, validate_grader_id
from ._trace import Trace

__all__ = ["PipelineJudge"]


#: A pairwise verdict's values (as :class:`~llm_connect.pipelines.PairwiseUnit` gives them).
_PAIRWISE_VALUES = {"baseline": 0.0, "tie": 0.5, "candidate": 1.0}


def _not_pairwise_reason(g: Any, name: str) -> str | None:
    """``None`` when the graph's final verdict is pairwise (baseline/candidate, perhaps tie); else why not."""
    scale = g.nodes[g.exit].scale
    values = scale.label_values() if scale is not None else None
    folded = {str(k).casefold(): v for k, v in (values or {}).items()}
    if folded and {"baseline", "candidate"} <= set(folded) <= set(_PAIRWISE_VALUES) \
            and all(abs(v - _PAIRWISE_VALUES[k]) < 1e-12 for k, v in folded.items()):
        return None
    shown = scale.describe() if scale is not None else "no verdict scale"
    return (f"pipeline {name!r} ends in {g.exit} ({g.nodes[g.exit].unit.describe()}: {shown}), not in a pairwise "
            "verdict (baseline, candidate or tie); end it in a PairwiseUnit, a verify unit of one, or a "
            "MajorityPool of pairwise units")


def _usage_response(trace: Trace, adapter_id: str) -> LLMResponse:
    """A stand-in response holding a run's summed usage, for the runner's unscored/error rows."""
    return LLMResponse(content="", adapter_id=adapter_id, model_id="pipeline", tokens_in=trace.tokens_in,
                       tokens_out=trace.tokens_out, cost_usd=trace.cost_usd, latency_ms=trace.latency_ms)


class PipelineJudge(WrapperJudge):
    """A pipeline as a :class:`~llm_connect.grading.Judge` (on the compound judges' wrapper base).

    The item is ``{"prompt": prompt, "baseline": baseline.content,
    "candidate": candidate.content}``. As with :class:`LLMJudge`, the caller's
    run config is used without its budget tracker (the judge's spend is not the
    candidate's); units set their own temperature. The result carries the
    summed tokens, cost and latency of every unit call, and in ``details``:
    ``trace``, ``verdict``, ``passed``, ``threshold``, ``calls``, ``rubric_hash``.
    No final verdict raises :class:`JudgeReplyError` (an *unscored* row in a batch).

    ``pairwise``: True when the pipeline's final verdict is pairwise (``baseline``,
    ``candidate`` and perhaps ``tie``, worth 0.0, 1.0 and 0.5: it ends in a
    :class:`~llm_connect.pipelines.PairwiseUnit`, a verify unit of one, or a majority pool of
    them), so :func:`~llm_connect.grading.tournament`, bias probes and pairwise calibration take
    it as a pairwise judge; ``not_pairwise_reason`` says why not otherwise.

    ``seed_offset``: the epoch of repeated judging this judge runs (0: a single run); every
    seeded unit calls with ``seed + seed_offset * copies + replica``.
    :meth:`with_seed_offset` is the hook :func:`~llm_connect.grading.reseed` asks, so
    ``judge_many(pipeline.as_judge(), items, epochs=k)`` never has a repeat served from a
    response cache.

    Parameters
    ----------
    pipeline : Pipeline
        The pipeline.
    grader_id : str
        The judge's id.
    seed_offset : int, default 0
        The epoch of repeated judging (above).
    """

    extra_columns = PIPELINE_EXTRA_COLUMNS

    def __init__(self, pipeline: Any, grader_id: str, *, seed_offset: int = 0) -> None:
        if not callable(getattr(pipeline, "_run_traced", None)):  # a Pipeline (its module imports this one)
            raise ValidationError("PipelineJudge needs a Pipeline")
        if isinstance(seed_offset, bool) or not isinstance(seed_offset, int) or seed_offset < 0:
            raise ValidationError(f"seed_offset must be an integer >= 0 (the epoch), got {seed_offset!r}")
        self.pipeline = pipeline.validate()
        self.grader_id = validate_grader_id(grader_id)
        self.seed_offset = seed_offset
        self.not_pairwise_reason = _not_pairwise_reason(pipeline._compiled(), pipeline.name)
        self.pairwise = self.not_pairwise_reason is None
        extra = sorted(self.pipeline.item_fields - {"prompt", "baseline", "candidate"})
        if extra:
            raise ConfigError(
                f"{pipeline.name}: as a judge, templates see only {{prompt}}, {{baseline}} and {{candidate}}, "
                f"but they read {extra}; use run_many(items) for items with more fields"
            )

    @property
    def rubric_hash(self) -> str:
        return self.pipeline.rubric_hash

    def with_seed_offset(self, offset: int) -> PipelineJudge:
        """The judge of epoch ``seed_offset + offset`` (the hook :func:`~llm_connect.grading.reseed` asks).

        The same pipeline and grader id; every seeded unit's seed moves (see the class docs).

        Parameters
        ----------
        offset : int
            The epoch.

        Returns
        -------
        PipelineJudge
            The judge of that epoch.
        """
        return PipelineJudge(self.pipeline, self.grader_id, seed_offset=self.seed_offset + offset)

    def _item(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str) -> dict[str, str]:
        return {"prompt": prompt, "baseline": baseline.content, "candidate": candidate.content}

    async def _ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, prompt: str, run_config: RunConfig | None
    ) -> GradingResult:
        trace = Trace()
        rc = (run_config or RunConfig()).replace(budget_tracker=None)
        try:
            result = await self.pipeline._run_traced(self._item(baseline, candidate, prompt), rc, trace,
                                                     self.seed_offset)
        except JudgeReplyError as exc:
            exc.response = _usage_response(trace, self.grader_id)
            raise
        return GradingResult(
            quality_score=result.quality_score,
            notes=result.notes,
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
            tokens_in=trace.tokens_in,
            tokens_out=trace.tokens_out,
            cost_usd=trace.cost_usd,
            latency_ms=trace.latency_ms,
            details={
                "trace": trace,
                "verdict": result.verdict,
                "passed": result.passed,
                "threshold": result.threshold,
                "calls": trace.calls,
                "rubric_hash": self.rubric_hash,
                "pipeline": self.pipeline.name,
            },
        )

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        """The pipeline's own columns of a batch row (as :meth:`Pipeline.run_many` has them).

        Parameters
        ----------
        result : GradingResult
            One judgment.

        Returns
        -------
        dict
            ``verdict``, ``passed``, ``calls`` and ``trace``.
        """
        d = result.details
        return {"verdict": d["verdict"], "passed": d["passed"], "calls": d["calls"], "trace": d["trace"]}

    def __repr__(self) -> str:
        offset = f", seed_offset={self.seed_offset}" if self.seed_offset else ""
        return f"PipelineJudge({self.pipeline!r}, grader_id={self.grader_id!r}{offset})"

