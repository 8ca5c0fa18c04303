"""A selective judge's risk-coverage curve with its cut-off, and the HTML of selective judges, cascades and a
cascade's batch (Jung, Brahman & Choi, ICLR 2025).

Drawn from the curve :func:`llm_connect.stats.selective.risk_coverage` computes (a selective judge's
``calibration.curve``) and from the objects' own numbers (their one :class:`~llm_connect.stats.selective.Guarantee`);
nothing is computed here but the layout. :class:`~llm_connect.grading.SelectiveJudge`,
:class:`~llm_connect.grading.SelectiveCascade` and :class:`~llm_connect.grading.SelectiveCascadeSummary` reach
their HTML here by name (:func:`llm_connect._display.view`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docstrings import PLOT_TEXTS, share_parameters
from .._html import Markup, fmt, frame_html, html_format, join, kv_table
from ..errors import UncalibratedJudgeError, ValidationError
from .plots import _axes, _legend, _text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..grading import SelectiveCascade, SelectiveCascadeSummary, SelectiveJudge

__all__ = ["plot_risk_coverage", "selective_cascade_html", "selective_cascade_summary_html", "selective_judge_html"]


def _curve_of(data: Any) -> tuple[pd.DataFrame, float | None, float | None, str | None, float | None]:
    """``(curve, alpha, cutoff, name, coverage at the cut-off)`` of a selective judge, a cut-off or a curve."""
    calibration = getattr(data, "calibration", None)
    name = getattr(data, "grader_id", None)
    if calibration is None and hasattr(data, "calibration") and callable(getattr(data, "judge", None)):
        raise UncalibratedJudgeError(f"selective judge {name!r} has no calibration to plot (no risk-coverage curve): "
                                     "call .calibrate(data, human=COLUMN) first")
    if calibration is not None and hasattr(calibration, "curve"):
        data = calibration
    if hasattr(data, "curve") and hasattr(data, "cutoff"):
        coverage = data.coverage if math.isfinite(data.cutoff) else None
        return data.curve, data.alpha, data.cutoff, name, coverage
    if isinstance(data, pd.DataFrame):
        return data, None, None, name, None
    raise ValidationError("plot_risk_coverage takes a calibrated SelectiveJudge, a SelectiveCutoff or a "
                          "risk_coverage() frame")


@share_parameters(texts=PLOT_TEXTS)
def plot_risk_coverage(data: Any, *, alpha: float | None = None, title: str | None = None, ax: Any = None,
                       **kwargs: Any) -> Axes:
    """Disagreement with people against coverage, most confident items first, with the chosen cut-off.

    ``data``: a calibrated :class:`~llm_connect.grading.SelectiveJudge`, its
    :class:`~llm_connect.stats.selective.SelectiveCutoff` or a
    :func:`~llm_connect.stats.selective.risk_coverage` frame. The solid line is the empirical
    disagreement among the items kept at each cut-off, the dashed one its exact upper bound (at
    ``1 − delta``), the dotted horizontal line ``alpha`` (the most disagreement the guarantee
    allows) and the vertical line the coverage at the chosen cut-off (none when the judge abstains
    on every item). ``**kwargs`` go to the empirical line.

    Parameters
    ----------
    data : SelectiveJudge or SelectiveCutoff or pandas.DataFrame
        What to draw (above).
    alpha : float, optional
        The guarantee's ``alpha`` (default: the judge's or cut-off's).
    title : str, optional
        The title.
    {ax}
    **kwargs
        Go to the empirical line.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.

    Raises
    ------
    UncalibratedJudgeError
        A selective judge with no calibration (call its ``.calibrate(data, human=COLUMN)`` first).
    ValidationError
        ``data`` is none of the above.
    """
    curve, level, cutoff, name, coverage = _curve_of(data)
    level = alpha if alpha is not None else level
    ax = _axes(ax)
    if len(curve):
        x = curve["coverage"].to_numpy(dtype=float)
        kwargs.setdefault("label", "disagreement (calibration items)")
        ax.plot(x, curve["risk"].to_numpy(dtype=float), **kwargs)
        upper = curve["risk_upper"].to_numpy(dtype=float)
        tested = curve["tested"].to_numpy(dtype=bool) if "tested" in curve else np.isfinite(upper)
        ax.plot(x[tested], upper[tested], linestyle="--", color="0.4", linewidth=1, label="exact upper bound")
    if level is not None:
        ax.axhline(level, color="C3", linestyle=":", linewidth=1, label=f"alpha = {level:g}")
    if coverage is not None and cutoff is not None:
        ax.axvline(coverage, color="C2", linewidth=1, label=f"cut-off {cutoff:.3g}: judges {coverage:.0%}")
    elif cutoff is not None:
        ax.text(0.5, 0.95, "abstains on every item", transform=ax.transAxes, ha="center", va="top", fontsize=8)
    ax.set_xlim(0.0, 1.02)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("coverage (share of items judged)")
    ax.set_ylabel("disagreement with people")
    ax.set_title(title if title is not None else _text(f"risk-coverage of {name}" if name else "risk-coverage"))
    _legend(ax)
    return ax


def selective_judge_html(judge: SelectiveJudge) -> Markup:
    """A selective judge's verdict line, then its calibration as a table: the confidence, the cut-off, the
    coverage and agreement on the calibration items, the guarantee and the labelled items it rests on.

    Parameters
    ----------
    judge : SelectiveJudge
        Calibrated or not (the table then says so).

    Returns
    -------
    Markup
    """
    s, g = judge.summary(), judge.guarantee
    rows = [("judge", judge.grader_id), ("confidence", s["source"] or "none (no usable signal)"),
            ("cut-off", fmt(s["cutoff"]) if s["cutoff"] is not None else "∞ (abstains on every item)"),
            ("coverage (calibration items judged)", fmt(s["coverage"])),
            ("agreement on judged items", fmt(s["agreement"])),
            ("guarantee", f"agreement ≥ {g.guaranteed_agreement:.0%} with probability ≥ "
                          f"{g.confidence_level:.0%} (alpha={g.alpha:g}, delta={g.delta:g})"),
            ("labelled items", f"{s['n']} (at least {s['n_min']} needed)")]
    if s["note"]:
        rows.append(("note", s["note"]))
    return html_format("<div class='llm-connect-selective'><p><b>{}</b></p>{}</div>", judge.describe(),
                       kv_table(rows, caption="selective judge", attrs={"class_": "llm-connect"}))


def selective_cascade_html(cascade: SelectiveCascade) -> Markup:
    """A cascade's verdict line, then what calibration saw of each stage (when calibrated).

    Parameters
    ----------
    cascade : SelectiveCascade

    Returns
    -------
    Markup
    """
    parts = [html_format("<p><b>{}</b></p>", cascade.describe())]
    if cascade.calibration:
        parts.append(frame_html(pd.DataFrame(list(cascade.calibration)), caption="stages (calibration)"))
    return html_format("<div class='llm-connect-selective'>{}</div>", join(parts))


def selective_cascade_summary_html(summary: SelectiveCascadeSummary) -> Markup:
    """A cascade's batch: who decided how many items, the guarantee, the cost against always asking the last
    judge, people's labels when known, and one row per stage.

    Parameters
    ----------
    summary : SelectiveCascadeSummary

    Returns
    -------
    Markup
    """
    share = summary.judged / summary.n if summary.n else math.nan
    rows = [("items", summary.n), ("decided by judges", f"{summary.judged} ({fmt(share)})"),
            ("left for people", f"{summary.human} ({fmt(summary.human_share)})"),
            ("guarantee", f"agreement ≥ {summary.guarantee.guaranteed_agreement:.0%} with probability ≥ "
                          f"{summary.guarantee.confidence_level:.0%}"),
            ("judges' cost per item (USD)", fmt(summary.cost_per_item_usd)),
            ("always the last judge (USD)", fmt(summary.always_last_cost_usd)),
            ("saved", fmt(summary.saved_share))]
    if summary.labelled_by_people:
        rows += [("labelled by people", summary.labelled_by_people),
                 ("combined agreement (at least)", fmt(summary.combined_agreement))]
    return html_format("<div class='llm-connect-selective'><p><b>{}</b></p>{}{}</div>", summary.describe(),
                       kv_table(rows, caption="cascade", attrs={"class_": "llm-connect"}),
                       frame_html(summary.to_frame(), caption="who decided"))
