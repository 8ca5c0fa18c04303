"""Pools: units without an LLM call that aggregate the verdicts of their inputs.

A pool aggregates the inputs that have a verdict and has none when fewer than
``min_valid`` (default 1) do (see "Missing verdicts" in
:mod:`llm_connect.pipelines._unit_base`).

Majority tie, pinned. :class:`MajorityPool` picks the most-voted label; a tie
goes to the tied label with the **lowest** 0..1 value (the pessimistic
verdict: a tie never passes an item), unless ``tie_break="highest"`` or
``"first"`` (first voted in input order).

Names, pinned: one class per pool. The majority vote is :class:`MajorityPool`,
config type ``majority-pool``; ``MaxPool`` and ``max-pool`` are aliases of it
(Verdict's name for majority vote), kept so configs written for Verdict load.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .._docstrings import PIPELINE_TEXTS, share_parameters
from ..errors import ConfigError, JudgeReplyError
from ..grading._parse import brief_repr
from ..grading._verdicts import TIE_BREAKS, majority_vote
from ._pipeline import Unit
from ._scales import ContinuousScale, Scale, finite_number
from ._trace import TraceRecord, UnitOutput
from ._unit_base import NodeContext, _check_int

__all__ = ["MajorityPool", "MaxPool", "MeanPool", "MedianPool", "PoolUnit", "WeightedMeanPool"]


@share_parameters(texts=PIPELINE_TEXTS)
class PoolUnit(Unit):
    """A unit without an LLM call that aggregates the verdicts of its inputs.

    Inputs without a verdict are left out; with fewer than ``min_valid`` valid
    inputs the pool has no verdict either.

    Parameters
    ----------
    name : str
        The pool's name.
    {min_valid}
    {origin}
    """

    kind = "pool"

    def __init__(self, *, name: str, min_valid: int = 1, origin: str | None = None) -> None:
        super().__init__(name, origin)
        self.min_valid = _check_int(f"pool {name!r}: min_valid", min_valid, 1)

    def item_fields(self) -> set[str]:
        """The item fields the pool reads: none (it reads its inputs' outputs).

        Returns
        -------
        set of str
            Empty.
        """
        return set()

    def check_inputs(self, inputs: Sequence[tuple[str, Unit]], where: str) -> None:
        if not inputs:
            raise ConfigError(f"{where}: a pool needs inputs; put it after the units it aggregates")
        if self.min_valid > len(inputs):
            raise ConfigError(f"{where}: min_valid={self.min_valid} but the pool has only {len(inputs)} inputs")

    def aggregate(self, valid: list[UnitOutput], ctx: NodeContext) -> tuple[Any, str, float, Scale | None, dict]:
        """The pool's verdict from its valid inputs (what each kind of pool defines).

        Parameters
        ----------
        valid : list of UnitOutput
            The inputs that gave a verdict (at least ``min_valid``).
        ctx : NodeContext
            The node being run.

        Returns
        -------
        tuple of (object, str, float, Scale or None, dict)
            The value, its verdict text, its 0..1 score, its scale and details (``votes``, ``scores``...).

        Raises
        ------
        JudgeReplyError
            No verdict can be drawn (the pool then has none).
        """
        raise NotImplementedError

    async def execute(self, ctx: NodeContext) -> UnitOutput:
        valid = [o for o in ctx.inputs if o.ok]
        inputs = tuple(o.node for o in ctx.inputs)
        if len(valid) < self.min_valid:
            reason = f"only {len(valid)} of {len(ctx.inputs)} inputs gave a verdict (min_valid={self.min_valid})"
            ctx.trace.add(TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="failed",
                                      inputs=inputs, error=reason))
            return UnitOutput(node=ctx.node, unit=self.name, kind=self.kind, ok=False, error=reason)
        try:
            value, verdict, score, scale, details = self.aggregate(valid, ctx)
        except JudgeReplyError as exc:
            ctx.trace.add(TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="failed",
                                      inputs=inputs, error=str(exc)))
            return UnitOutput(node=ctx.node, unit=self.name, kind=self.kind, ok=False, error=str(exc))
        details = {**details, "n_valid": len(valid), "n_inputs": len(ctx.inputs)}
        ctx.trace.add(TraceRecord(node=ctx.node, unit=self.name, kind=self.kind, status="ok", inputs=inputs,
                                  value=value, verdict=verdict, score=score))
        return UnitOutput(node=ctx.node, unit=self.name, kind=self.kind, ok=True, value=value, verdict=verdict,
                          score=score, scale=scale, details=details)


@share_parameters(texts=PIPELINE_TEXTS)
class MajorityPool(PoolUnit):
    """Majority vote over the inputs' verdict labels. Config type ``majority-pool``.

    ``MaxPool`` (config type ``max-pool``) is an alias of this class, Verdict's
    name for majority vote. A tie goes to the tied label with the lowest 0..1
    value (``tie_break="lowest"``, the default), the highest (``"highest"``) or
    the one voted first (``"first"``). The output keeps the inputs' scale; its
    score is the winning label's value.

    Parameters
    ----------
    name : str, default "majority"
        The pool's name.
    tie_break : {"lowest", "highest", "first"}, default "lowest"
        Which tied label wins (above).
    {min_valid}
    {origin}

    Raises
    ------
    ConfigError
        An unknown ``tie_break`` or a bad ``min_valid``.
    """

    kind = "majority-pool"
    TIE_BREAKS = TIE_BREAKS

    def __init__(self, *, name: str = "majority", tie_break: str = "lowest", min_valid: int = 1,
                 origin: str | None = None) -> None:
        super().__init__(name=name, min_valid=min_valid, origin=origin)
        if tie_break not in self.TIE_BREAKS:
            raise ConfigError(
                f"pool {name!r}: tie_break must be one of {list(self.TIE_BREAKS)}, got {brief_repr(tie_break)}"
            )
        self.tie_break = tie_break

    def describe(self) -> str:
        return f"majority vote (tie: {self.tie_break})"

    def output_scale(self, input_scales: Sequence[Scale | None], where: str) -> Scale:
        scales = list(input_scales)
        if any(s is None for s in scales) or not scales:
            raise ConfigError(f"{where}: a majority vote needs inputs with a verdict scale")
        first = scales[0]
        assert first is not None
        if first.discrete_values() is None:
            raise ConfigError(
                f"{where}: a majority vote needs discrete verdicts, not {first!r}; use a mean or median pool"
            )
        for s in scales[1:]:
            if s != first:
                raise ConfigError(
                    f"{where}: a majority vote needs all inputs on one scale, got {first!r} and {s!r}; "
                    "use a mean pool to combine different scales"
                )
        return first

    def aggregate(self, valid: list[UnitOutput], ctx: NodeContext) -> tuple[Any, str, float, Scale | None, dict]:
        scale = valid[0].scale
        assert scale is not None
        winner, value, votes, tied = majority_vote(  # the vote of PanelJudge(aggregate="majority") too
            ((scale.label(out.value), out.value) for out in valid), value=scale.normalize, tie_break=self.tie_break
        )
        return value, str(winner), scale.normalize(value), scale, {"votes": votes, "tie": tied}


#: Alias of :class:`MajorityPool`, Verdict's name for majority vote (the same class, not a subclass).
MaxPool = MajorityPool  # alias of MajorityPool, Verdict's name for majority vote


@share_parameters(texts=PIPELINE_TEXTS)
class MeanPool(PoolUnit):
    """The mean of the inputs' 0..1 scores.

    Parameters
    ----------
    name : str, default "mean"
        The pool's name.
    {min_valid}
    {origin}
    """

    kind = "mean-pool"

    def __init__(self, *, name: str = "mean", min_valid: int = 1, origin: str | None = None) -> None:
        super().__init__(name=name, min_valid=min_valid, origin=origin)

    def describe(self) -> str:
        return "mean of scores"

    def output_scale(self, input_scales: Sequence[Scale | None], where: str) -> Scale:
        return ContinuousScale()

    def combine(self, valid: list[UnitOutput]) -> float:
        """The pool's 0..1 score from its valid inputs' scores (here their mean).

        Parameters
        ----------
        valid : list of UnitOutput
            The inputs that gave a verdict.

        Returns
        -------
        float
            The score.
        """
        return math.fsum(float(o.score or 0.0) for o in valid) / len(valid)

    def aggregate(self, valid: list[UnitOutput], ctx: NodeContext) -> tuple[Any, str, float, Scale | None, dict]:
        score = min(1.0, max(0.0, self.combine(valid)))  # only float rounding can leave 0..1 here
        return score, f"{score:.4g}", score, ContinuousScale(), {"scores": {o.node: o.score for o in valid}}


@share_parameters(texts=PIPELINE_TEXTS)
class MedianPool(MeanPool):
    """The median of the inputs' 0..1 scores (the mean of the middle two for an even count).

    Parameters
    ----------
    name : str, default "median"
        The pool's name.
    {min_valid}
    {origin}
    """

    kind = "median-pool"

    def __init__(self, *, name: str = "median", min_valid: int = 1, origin: str | None = None) -> None:
        PoolUnit.__init__(self, name=name, min_valid=min_valid, origin=origin)

    def describe(self) -> str:
        return "median of scores"

    def combine(self, valid: list[UnitOutput]) -> float:
        return float(statistics.median(float(o.score or 0.0) for o in valid))


@share_parameters(texts=PIPELINE_TEXTS)
class WeightedMeanPool(MeanPool):
    """The weighted mean of the inputs' scores; ``weights`` maps unit names to weights (>= 0).

    Every input's unit name must have a weight, and every weight must name an
    input. Copies of a repeated unit share its weight.

    Parameters
    ----------
    weights : mapping of str to float
        Unit names to weights (>= 0, at least one positive).
    name : str, default "weighted_mean"
        The pool's name.
    {min_valid}
    {origin}

    Raises
    ------
    ConfigError
        Weights that are not numbers >= 0, none positive, or (at build time) an input without a weight or a
        weight that names no input.
    """

    kind = "weighted-mean-pool"

    def __init__(self, weights: Mapping[str, float], *, name: str = "weighted_mean", min_valid: int = 1,
                 origin: str | None = None) -> None:
        PoolUnit.__init__(self, name=name, min_valid=min_valid, origin=origin)
        if not isinstance(weights, Mapping) or not weights:
            raise ConfigError(f"pool {name!r}: weights must map unit names to numbers, got {brief_repr(weights)}")
        clean: dict[str, float] = {}
        for key, w in weights.items():
            if not finite_number(w) or w < 0:
                raise ConfigError(
                    f"pool {name!r}: weights[{brief_repr(key)}] must be a number >= 0, got {brief_repr(w)}"
                )
            clean[str(key)] = float(w)
        if not any(w > 0 for w in clean.values()):
            raise ConfigError(f"pool {name!r}: at least one weight must be positive")
        self.weights = clean

    def describe(self) -> str:
        return "weighted mean: " + ", ".join(f"{k}={v:g}" for k, v in self.weights.items())

    def check_inputs(self, inputs: Sequence[tuple[str, Unit]], where: str) -> None:
        super().check_inputs(inputs, where)
        names = {u.name for _, u in inputs}
        missing = sorted(names - set(self.weights))
        if missing:
            raise ConfigError(f"{where}: weights give no weight for the input unit(s) {missing}")
        unused = sorted(set(self.weights) - names)
        if unused:
            raise ConfigError(
                f"{where}: weights name {unused}, which are not inputs of this pool (inputs: {sorted(names)})"
            )

    def aggregate(self, valid: list[UnitOutput], ctx: NodeContext) -> tuple[Any, str, float, Scale | None, dict]:
        total = math.fsum(self.weights[o.unit] for o in valid)
        if total == 0:
            raise JudgeReplyError("every input with a verdict has weight 0")
        score = math.fsum(self.weights[o.unit] * float(o.score or 0.0) for o in valid) / total
        score = min(1.0, max(0.0, score))
        return score, f"{score:.4g}", score, ContinuousScale(), {"scores": {o.node: o.score for o in valid}}
