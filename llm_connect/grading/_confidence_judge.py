"""The scorer of a :class:`~llm_connect.grading.SelectiveJudge`: every item judged with its confidence, none
abstained (:class:`ConfidenceJudge`, ``SelectiveJudge.scorer``).

Calibration runs it over the labelled items (:mod:`llm_connect.grading._selective_calibration`), and so
does ``calibrate(..., selective=...)``: its rows' ``confidence`` and ``pass_distribution`` columns are
what the cut-off is chosen on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._docstrings import JUDGE_TEXTS, share_parameters
from ..core import LLMResponse, RunConfig
from ._base import GradingResult, _declared
from ._confidence import PASS_DISTRIBUTION
from ._wrapper import WrapperJudge

__all__ = ["ConfidenceJudge"]


def _digest(identity: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over ``identity`` as canonical JSON (as :attr:`Rubric.hash` is made)."""
    canon = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def _judge_identity(judge: Any) -> list[Any]:
    """``[grader_id, rubric_hash]`` of a judge (its identity in a ledger)."""
    value = _declared(judge, "rubric_hash", None)
    return [str(judge.grader_id), value if isinstance(value, str) and value else None]


@dataclass
class ConfidenceJudge(WrapperJudge):
    """A :class:`SelectiveJudge` without its cut-off: every item judged, with its confidence.

    Its results are the selective judge's (``details["confidence"]``), never an abstention; its
    batches have a ``confidence`` column and a ``pass_distribution`` one (each judgment's verdict
    distribution, from which :meth:`SelectiveJudge.confidence_at` reads the confidence at another
    threshold). ``SelectiveJudge.scorer`` builds it; :meth:`SelectiveJudge.calibrate` and
    ``calibrate(..., selective=...)`` run it. Judged ``K`` times (``judge_many(scorer, epochs=K)``),
    an item's row has the confidence of the ``K`` judgments pooled, as the selective judge with
    ``epochs=K`` pools its own (:meth:`pool_epochs`).

    Parameters
    ----------
    selective : SelectiveJudge
        The selective judge whose confidence it reports.
    """

    selective: Any  # a SelectiveJudge (its module imports this one)

    @property
    def grader_id(self) -> str:  # type: ignore[override]
        return self.selective.grader_id

    @property
    def rubric_hash(self) -> str | None:
        """The inner judge's when the scores are its own (one judgment, not pooled); else a hash of what the
        score pools (the panel's members and aggregate, the epochs and reducer), so pooled scores are never
        recorded as the inner judge's."""
        sel = self.selective
        if sel._passthrough:
            return _judge_identity(sel.inner)[1]
        return _digest({"kind": "selective-scorer", **sel.scoring_identity()})

    @property
    def judge_model_id(self) -> str | None:  # type: ignore[override]
        return self.selective.judge_model_id

    @property
    def reference_sep(self) -> str | None:  # type: ignore[override]
        return self.selective.reference_sep

    @property
    def splits_references(self) -> bool:  # type: ignore[override]
        return self.selective.splits_references

    @property
    def needs_reference(self) -> bool:
        return self.selective.needs_reference

    uses_item = True

    @share_parameters(texts=JUDGE_TEXTS)
    def with_item(self, *, messages: Any = None, context: Any = None) -> ConfidenceJudge:
        """The scorer of one conversation item (:meth:`SelectiveJudge.with_item`).

        Parameters
        ----------
        {messages}
        {context}

        Returns
        -------
        ConfidenceJudge
            The bound scorer.
        """
        bound = self.selective.with_item(messages=messages, context=context)
        return self if bound is self.selective else dataclasses.replace(self, selective=bound)

    @property
    def pairwise(self) -> bool:  # type: ignore[override]
        return bool(_declared(self.selective.inner, "pairwise", False))

    @property
    def extra_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        own = self.selective.extra_columns
        return (own[0], PASS_DISTRIBUTION, *[c for c in own[1:] if c != PASS_DISTRIBUTION])

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        cols = self.selective.result_columns(result)
        dist = result.details.get(PASS_DISTRIBUTION)
        cols[PASS_DISTRIBUTION] = [[float(v), float(w)] for v, w in dist] if dist else None
        return cols

    def pool_epochs(self, results: Sequence[GradingResult], reducer: Any) -> dict[str, Any]:
        """The columns of an item's row judged ``K`` times that pooling sets.

        ``judge_many(scorer, epochs=K)``: ``confidence`` and ``pass_distribution`` of the ``K`` judgments pooled
        as the selective judge with ``epochs=K`` pools its own (:meth:`SelectiveJudge.pooled_epochs`), not the
        first epoch's.

        Parameters
        ----------
        results : sequence of GradingResult
            The item's scored epochs.
        reducer : str or callable
            The run's reducer.

        Returns
        -------
        dict
            ``confidence`` and ``pass_distribution``.
        """
        result, conf = self.selective.pooled_epochs(results, reducer)
        dist = result.details.get(PASS_DISTRIBUTION)
        return {"confidence": conf, PASS_DISTRIBUTION: [[float(v), float(w)] for v, w in dist] if dist else None}

    async def aprepare_run(self, pairs: Any, *, progress: Any = None) -> ConfidenceJudge:
        """The selective judge's pre-pass over a run (:meth:`SelectiveJudge.aprepare_run`).

        Parameters
        ----------
        pairs : iterable of (str, str)
            Each row's ``(baseline, candidate)`` texts.
        progress : callable, optional
            Makes a progress bar.

        Returns
        -------
        ConfidenceJudge
            The scorer of the prepared judge.
        """
        return ConfidenceJudge(await self.selective.aprepare_run(pairs, progress=progress))

    def with_seed_offset(self, offset: int) -> ConfidenceJudge:
        """The scorer of epoch ``offset`` (:meth:`SelectiveJudge.with_seed_offset`).

        Parameters
        ----------
        offset : int
            The epoch.

        Returns
        -------
        ConfidenceJudge
            The scorer of the reseeded judge.
        """
        return ConfidenceJudge(self.selective.with_seed_offset(offset))

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        result, _ = await self.selective.aconfident(baseline, candidate, prompt=prompt, run_config=run_config)
        return result
