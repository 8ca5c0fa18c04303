"""Compound judges: spend more judge-time compute to make a noisy LLM judge reliable.

Build a pipeline from units joined with ``>>``::

    from llm_connect.pipelines import CategoricalScale, JudgeUnit, Layer, MajorityPool, VerifyUnit

    judge = JudgeUnit("Does this response contain factual errors? Response: {candidate}",
                      CategoricalScale(["yes", "no"]), explanation=True)
    verify = VerifyUnit("Check the explanation. Explanation: {previous.explanation} Response: {candidate}")
    pipeline = (Layer(judge >> verify, repeat=3) >> MajorityPool()).with_options(adapter=adapter, threshold=0.7)
    pipeline.run({"candidate": "..."})           # PipelineResult: quality_score, verdict, passed, trace
    pipeline.run_many(items)                     # DataFrame, one row per item
    pipeline.as_judge("factual")                 # a Judge for PairedGrader / judge_many / the ledger

or from a dict / YAML file with :func:`from_config`. Every call is traced
(prompt, raw reply, parsed verdict, tokens, cost, latency). The rules the
pieces follow are pinned in the module docstrings: the reply format, planted
and missing verdicts in ``_unit_base``; verify semantics in ``_llm_units``;
tie-breaking and pool names in ``_pools``; value maps in ``_scales``;
connections in ``_pipeline``; limits in ``_config``.

``MaxPool`` (config type ``max-pool``) is an alias of :class:`MajorityPool`
(config type ``majority-pool``), Verdict's name for majority vote.
"""

from ._config import UNIT_TYPES, from_config
from ._llm_units import JudgeUnit, LLMUnit, PairwiseUnit, VerifyUnit
from ._pipeline import CONNECTIONS, PIPELINE_COLUMNS, Layer, Pipeline, Unit
from ._pipeline_judge import PipelineJudge
from ._pools import MajorityPool, MaxPool, MeanPool, MedianPool, PoolUnit, WeightedMeanPool
from ._scales import BooleanScale, CategoricalScale, ContinuousScale, LikertScale, Scale
from ._trace import PipelineResult, Trace, TraceRecord, UnitOutput

__all__ = [
    "CONNECTIONS",
    "PIPELINE_COLUMNS",
    "UNIT_TYPES",
    "BooleanScale",
    "CategoricalScale",
    "ContinuousScale",
    "JudgeUnit",
    "LLMUnit",
    "Layer",
    "LikertScale",
    "MajorityPool",
    "MaxPool",  # alias of MajorityPool, Verdict's name for majority vote
    "MeanPool",
    "MedianPool",
    "PairwiseUnit",
    "Pipeline",
    "PipelineJudge",
    "PipelineResult",
    "PoolUnit",
    "Scale",
    "Trace",
    "TraceRecord",
    "Unit",
    "UnitOutput",
    "VerifyUnit",
    "WeightedMeanPool",
    "from_config",
]
