"""The HTML of a judgment and of the compound judges' batch diagnostics.

What Jupyter shows for a :class:`~llm_connect.grading.GradingResult`, a
:class:`~llm_connect.grading.PairwiseSummary`, a :class:`~llm_connect.grading.PanelAgreement`, a
:class:`~llm_connect.grading.EscalationSummary` and an :class:`~llm_connect.grading.EpochReliability`: each
object's ``_repr_html_`` reaches its view here by name (:func:`llm_connect._display.view`). The numbers are
the objects'; nothing is computed here but the layout, and every value is escaped by
:mod:`llm_connect._html`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._html import Markup, kv_table

if TYPE_CHECKING:
    from ..grading import EpochReliability, EscalationSummary, GradingResult, PairwiseSummary, PanelAgreement

__all__ = [
    "epoch_reliability_html",
    "escalation_summary_html",
    "grading_result_html",
    "pairwise_summary_html",
    "panel_agreement_html",
]


def grading_result_html(result: GradingResult) -> Markup:
    """One judgment as a table: grader, score, notes, the two answers (first 300 characters) and its cost.

    Parameters
    ----------
    result : GradingResult
        The judgment.

    Returns
    -------
    Markup
        A ``<table>``, every value escaped.
    """
    return kv_table([
        ("grader_id", result.grader_id),
        ("quality_score", f"{result.quality_score:.4g}"),
        ("notes", result.notes),
        ("baseline", result.baseline_response.content[:300]),
        ("candidate", result.candidate_response.content[:300]),
        ("judge cost (USD)", f"{result.cost_usd:.6f}"),
    ])


def _fields_table(rows: Sequence[tuple[str, Any]], caption: str) -> Markup:
    return kv_table(((k, _shown(v)) for k, v in rows), caption=caption)


def _shown(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _fixed(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals, or ``"n/a"`` when it is ``None`` or not finite (a rate, an alpha)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def pairwise_summary_html(summary: PairwiseSummary) -> Markup:
    """A pairwise judge's batch (:func:`~llm_connect.grading.consistency_rate` and the win counts) as a table.

    Parameters
    ----------
    summary : PairwiseSummary

    Returns
    -------
    Markup
    """
    return _fields_table(list(summary.__dict__.items()), "pairwise summary")


def panel_agreement_html(agreement: PanelAgreement) -> Markup:
    """Krippendorff's alpha between a panel's members, as a table.

    Parameters
    ----------
    agreement : PanelAgreement

    Returns
    -------
    Markup
    """
    rows = [("Krippendorff's alpha", agreement.alpha), ("level", agreement.level), ("items", agreement.n_items),
            ("members", ", ".join(agreement.members))]
    return _fields_table(rows, "panel agreement")


def escalation_summary_html(summary: EscalationSummary) -> Markup:
    """An escalation judge's batch (escalations, cost, savings) as a table.

    Parameters
    ----------
    summary : EscalationSummary

    Returns
    -------
    Markup
    """
    return _fields_table(list(summary.__dict__.items()), "escalation summary")


def epoch_reliability_html(reliability: EpochReliability) -> Markup:
    """A judge's run-to-run reliability (agreement and Krippendorff's alpha across epochs) as a table.

    Parameters
    ----------
    reliability : EpochReliability

    Returns
    -------
    Markup
    """
    r = reliability
    rows = [("epochs", r.epochs), ("items with 2+ scored epochs", r.n_items),
            ("percent agreement", _fixed(r.agreement)), ("unanimous items", _fixed(r.unanimous)),
            (f"Krippendorff's alpha ({r.level})", _fixed(r.alpha)),
            ("alpha (nominal, on labels)", _fixed(r.alpha_nominal)),
            ("alpha (interval, on scores)", _fixed(r.alpha_interval)),
            ("agreement on", "the same score" if r.labels == "exact" else f"the verdict at {r.threshold:g}")]
    if r.reducer:
        rows.append(("reducer", r.reducer))
    return kv_table(rows, caption="run-to-run reliability")
