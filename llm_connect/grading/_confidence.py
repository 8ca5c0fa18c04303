"""How sure a judge is of a verdict: the confidence sources of a selective judge and the verdict distributions
they read (Jung, Brahman & Choi, ICLR 2025, arXiv:2407.18370).

A :class:`~llm_connect.grading.SelectiveJudge` judges an item only when its confidence in the verdict reaches
its calibrated cut-off. This module says which confidences a judge supports and reads them from judgments: a
judgment's distribution over label values (from its token probabilities), the mixture of several judgments'
(a panel's members, the epochs) and the margin of a graded score. The judge that runs them is
:mod:`llm_connect.grading._selective`.

Confidence (``confidence=``)
----------------------------
``"logprob"``
    the judge's own probability of its verdict, from the token probabilities of a yes/no or
    Likert rating (``LLMJudge(scoring="yes-no")`` or ``scoring="logprob"``): the probability mass
    of the labels on the verdict's side of ``threshold`` (``P(yes)`` for a "yes" verdict).
``"panel"``
    agreement across several versions of the judge, the paper's *Simulated Annotators*: each
    version's probability of a pass (its ``logprob`` probability, else 1 or 0 by its verdict)
    averaged, and the confidence is that average's mass on the side of the verdict (the verdict of
    a :class:`~llm_connect.grading.PanelJudge`'s own score, by its ``aggregate``: a majority panel
    scores 0 or 1; of the members' mean otherwise). The versions are
    the members of a :class:`~llm_connect.grading.PanelJudge`, the judges given as ``panel=``
    (with the judge itself), or, for an ``LLMJudge`` whose :class:`~llm_connect.grading.Rubric`
    has worked examples, ``panel_size`` copies of it each shown a seeded half of the examples
    (the paper's annotators differ in the few-shot examples they are shown; built at
    :meth:`SelectiveJudge.calibrate`, seeded by its ``seed``).
``"epochs"``
    agreement across ``epochs=K`` repeated judgments (epoch ``e`` reseeded as
    ``judge_many(..., epochs=K)`` does, :func:`~llm_connect.grading.reseed`): the share of them
    whose verdict is the item's (the verdict of their reduced score; their probabilities of a pass
    averaged when they have them). A judge at temperature 0 that never varies gives every item the
    same confidence, so it judges all items or none. ``epochs=K`` with another source judges K
    times too, and that source reads the pooled judgment (the reduced score's margin; the
    probabilities averaged over epochs, and over members for a panel).
``"margin"``
    how far the score is from ``threshold``: ``0.5 + |score − threshold| / (2·max(threshold,
    1 − threshold))``, for judges with graded scores (token F1, embedding similarity, a JSON LLM
    judge).
a callable ``GradingResult -> float``
    your own (higher = surer); ``None`` or NaN for an item means no confidence there: it abstains.
``"auto"`` (the default)
    the first the judge supports, in this order: ``"logprob"`` (a judge scoring from token
    probabilities), ``"panel"`` (a panel judge, ``panel=`` given, or an ``LLMJudge`` whose rubric
    has at least two worked examples), ``"epochs"`` (only when ``epochs=`` is given: it costs
    ``K`` calls an item), ``"margin"`` (any judge but the 0/1 ones: exact match, contains, a
    pairwise judge). :attr:`SelectiveJudge.source` says which it picked. A judge with none
    (exact match) has no usable signal: it abstains on every item and says so, rather than claim
    the level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ._base import GradingResult, Judge, _declared
from ._panel import PanelJudge

__all__ = ["CONFIDENCE_SOURCES", "PASS_DISTRIBUTION", "confidence_sources", "pass_distribution", "pass_mass",
           "pass_probability"]

#: The named confidence sources, in the order ``confidence="auto"`` tries them.
CONFIDENCE_SOURCES = ("logprob", "panel", "epochs", "margin")
_DEFAULT_LABEL_VALUES = {"yes": 1.0, "no": 0.0, "1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0}
_BINARY_JUDGES = ("ExactMatchJudge", "ContainsJudge")

#: The key of a judgment's ``details`` (and the scorer's column) holding its verdict distribution.
PASS_DISTRIBUTION = "pass_distribution"


def _scores_from_logprobs(judge: Any) -> bool:
    return getattr(judge, "scoring", None) in ("yes-no", "logprob")


def _rubric_examples(judge: Any) -> int:
    rubric = getattr(judge, "rubric", None)
    examples = getattr(rubric, "examples", None)
    return len(examples) if examples is not None and callable(getattr(judge, "with_rubric", None)) else 0


def _binary(judge: Any) -> bool:
    return type(judge).__name__ in _BINARY_JUDGES or bool(_declared(judge, "pairwise", False))


def confidence_sources(judge: Judge, *, panel: Sequence[Judge] = (), epochs: int | None = None) -> list[str]:
    """The named confidence sources ``judge`` supports, in the order ``confidence="auto"`` tries them.

    See the module docstring.

    Parameters
    ----------
    judge : Judge
        Any judge.
    panel : sequence of Judge, default ()
        A panel to compare it with (makes ``"panel"`` available).
    epochs : int, optional
        Repeated judgments (makes ``"epochs"`` available).

    Returns
    -------
    list of str
        The sources; ``[]`` for a judge with no usable signal (exact match).

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge, LLMJudge
    >>> from llm_connect.testing import ScriptedAdapter
    >>> confidence_sources(LLMJudge(ScriptedAdapter(["x"]))), confidence_sources(ExactMatchJudge())
    (['margin'], [])
    """
    out = []
    if _scores_from_logprobs(judge):
        out.append("logprob")
    if isinstance(judge, PanelJudge) or panel or _rubric_examples(judge) >= 2:
        out.append("panel")
    if epochs is not None:
        out.append("epochs")
    if not _binary(judge):
        out.append("margin")
    return out


def _label_values(judge: Any) -> dict[str, float]:
    rubric = getattr(judge, "current_rubric", None)
    labels = getattr(rubric, "labels", None)
    if callable(labels):
        try:
            return {str(k).strip().lower(): float(v) for k, v in labels().items()}
        except Exception:  # a rubric that cannot say: the built-in labels
            pass
    return dict(_DEFAULT_LABEL_VALUES)


#: A verdict distribution: ``(label value, weight)`` pairs whose weights sum to 1 (see :func:`pass_distribution`).
Distribution = list[tuple[float, float]]


def pass_distribution(result: GradingResult, values: Mapping[str, float] | None = None) -> Distribution | None:
    """The judgment's distribution over label values from its ``label_probs`` (normalised; labels with no
    value left out); ``None`` when it has none (a judge that does not score from token probabilities).

    The probability of a pass at any threshold ``t`` is the weight on values ``>= t``
    (:func:`pass_mass`), so a confidence can be read again at another threshold without judging again.
    """
    probs = result.details.get("label_probs") if isinstance(result.details, Mapping) else None
    if not isinstance(probs, Mapping) or not probs:
        return None
    values = values or _DEFAULT_LABEL_VALUES
    pairs: Distribution = []
    for label, p in probs.items():
        value = values.get(str(label).strip().lower())
        if value is None:
            try:
                value = float(label)
            except (TypeError, ValueError):
                continue
        pairs.append((float(value), float(p)))
    total = math.fsum(p for _, p in pairs)
    if not total > 0:
        return None
    return [(v, p / total) for v, p in pairs]


def pass_mass(distribution: Sequence[Sequence[float]], threshold: float) -> float:
    """The weight of ``distribution`` on values ``>= threshold``: the probability of a pass there."""
    return math.fsum(float(w) for v, w in distribution if float(v) >= threshold)


def pass_probability(result: GradingResult, threshold: float,
                     values: Mapping[str, float] | None = None) -> float | None:
    """The judgment's probability of a pass (a label valued ``>= threshold``) from its ``label_probs``;
    ``None`` when it has none (a judge that does not score from token probabilities)."""
    dist = pass_distribution(result, values)
    return None if dist is None else pass_mass(dist, threshold)


def _member_distribution(result: GradingResult, values: Mapping[str, float]) -> Distribution:
    """A pooled member's distribution: its own (a panel's pooled one, else from its label probabilities), else
    all its weight on its score (its verdict at any threshold)."""
    dist = result.details.get(PASS_DISTRIBUTION) if isinstance(result.details, Mapping) else None
    if dist:
        return [(float(v), float(w)) for v, w in dist]
    return pass_distribution(result, values) or [(float(result.quality_score), 1.0)]


def _mixture(distributions: Sequence[Distribution]) -> Distribution:
    """The equal-weight mixture of several distributions (the members' or the epochs' pooled)."""
    n = len(distributions)
    return [(v, w / n) for d in distributions for v, w in d]


def _on_verdict(p_pass: float, score: float, threshold: float) -> float:
    """The weight on the verdict's side: ``P(pass)`` for a pass (``score >= threshold``), else ``1 − P(pass)``."""
    return p_pass if score >= threshold else 1.0 - p_pass


def _margin(score: float, threshold: float) -> float:
    return 0.5 + abs(score - threshold) / (2.0 * max(threshold, 1.0 - threshold))
