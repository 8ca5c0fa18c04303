"""The risk-coverage curve of a selective judge, with its cut-off (Jung, Brahman & Choi, ICLR 2025).

Drawn from the curve :func:`llm_connect.stats.selective.risk_coverage` computes (a selective judge's
``calibration.curve``); nothing is computed here but the layout.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import UncalibratedJudgeError, ValidationError
from .plots import _axes, _legend, _text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_risk_coverage"]


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
