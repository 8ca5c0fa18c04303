"""Agreement per group, drawn: the per-group kappa plot and the report's per-group section."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docstrings import PLOT_TEXTS, share_parameters
from .._html import Markup, frame_html, html_format, join, with_interval
from ..calibration._groups import ALL, GroupBreakdown, group_kappa
from ..errors import ValidationError
from ._figures import new_figure, png_data_uri
from .plots import _axes, _legend, _text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["group_breakdown_figure", "group_breakdown_html", "plot_group_kappa"]


@share_parameters(texts=PLOT_TEXTS)
def plot_group_kappa(
    data: GroupBreakdown | pd.DataFrame,
    *,
    judges: Sequence[str] | None = None,
    reference: str | None = None,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """Dot and whisker: each judge's Cohen's kappa against ``reference`` per group, with its
    bootstrap interval; the pooled row (:data:`ALL`) on top, 0 (chance) marked.

    ``data``: a :class:`GroupBreakdown` (its judges and reference by default) or the table of
    :func:`agreement_by_group` (then ``judges`` and ``reference`` are required). Group and judge
    names are drawn as literal text, cut to a few dozen characters.

    Parameters
    ----------
    data : GroupBreakdown or pandas.DataFrame
        The breakdown, or its table.
    judges : sequence of str, optional
        The judges drawn.
    reference : str, optional
        The reference.
    {ax}
    **kwargs
        Go to ``Axes.errorbar``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.

    Raises
    ------
    ValidationError
        A table without ``judges`` and ``reference``.
    """
    if isinstance(data, GroupBreakdown):
        table = data.agreement
        judges = list(judges) if judges is not None else list(data.judges)
        reference = reference or data.reference
    else:
        table = data
    if reference is None or not judges:
        raise ValidationError("plot_group_kappa needs judges= and reference= (the labels they are checked against)")
    ax = _axes(ax)
    frames = {j: group_kappa(table, j, reference) for j in judges if j != reference}
    groups = list(dict.fromkeys(g for f in frames.values() for g in f["group"]))
    groups = [ALL, *[g for g in groups if g != ALL]] if ALL in groups else groups
    ys = {g: float(len(groups) - 1 - i) for i, g in enumerate(groups)}
    step = 0.7 / max(1, len(frames))
    for k, (judge, f) in enumerate(frames.items()):
        offset = (k - (len(frames) - 1) / 2) * step
        f = f[f["kappa"].notna()]
        y = np.array([ys[g] for g in f["group"]]) + offset
        kappa = f["kappa"].to_numpy(dtype=float)
        low, high = f["kappa_low"].to_numpy(dtype=float), f["kappa_high"].to_numpy(dtype=float)
        xerr = np.clip(np.vstack([np.nan_to_num(kappa - low), np.nan_to_num(high - kappa)]), 0.0, None)
        ax.errorbar(kappa, y, xerr=xerr, fmt=kwargs.get("fmt", "o"), capsize=kwargs.get("capsize", 3),
                    label=_text(judge), **{k2: v for k2, v in kwargs.items() if k2 not in ("fmt", "capsize")})
    ax.axvline(0.0, color="0.4", linestyle="--", linewidth=1)
    if ALL in ys and len(groups) > 1:
        ax.axhline(ys[ALL] - 0.5, color="0.8", linewidth=1)
    ax.set_yticks(list(ys.values()), labels=[_text(g) for g in ys])
    ax.set_xlabel(_text(f"Cohen's kappa against {reference}", 60))
    ax.set_title("agreement per group")
    if not groups:
        ax.text(0.5, 0.5, "no agreement to show", transform=ax.transAxes, ha="center")
    _legend(ax)
    return ax


def group_breakdown_figure(breakdown: Any) -> Any:
    """The per-group plot (:func:`plot_group_kappa`) on a new figure, or ``None`` without a reference.

    Parameters
    ----------
    breakdown : GroupBreakdown
        The breakdown.

    Returns
    -------
    matplotlib.figure.Figure or None
        The figure.
    """
    if breakdown.reference is None or not [j for j in breakdown.judges if j != breakdown.reference]:
        return None
    fig, ax = new_figure(6, 1.4 + 0.45 * (len(breakdown.groups) + 1) * max(1, len(breakdown.judges)) ** 0.5)
    plot_group_kappa(breakdown, ax=ax)
    return fig

def group_breakdown_html(breakdown: Any, *, plots: bool = True) -> Markup:
    """The report's per-group section: kappa per group (pooled beside), the plot, and the full tables.

    Parameters
    ----------
    breakdown : GroupBreakdown
        The breakdown.
    plots : bool, default True
        Include the plot.

    Returns
    -------
    Markup
        The section's HTML (untrusted text escaped).
    """
    parts = [html_format("<h3>By {}</h3>", breakdown.by),
             html_format("<p>Every agreement and bias figure per value of {} ({} groups), the pooled figure "
                         "({}) beside. A group with fewer than {} paired items keeps its figures, with a note."
                         "</p>", breakdown.by, len(breakdown.groups), ALL, breakdown.min_n)]
    s = breakdown.summary()
    if len(s):
        shown = pd.DataFrame({"judge": s["judge"], "group": s["group"], "n": s["n"],
                              "kappa": [with_interval(k, lo, hi) for k, lo, hi in
                                        zip(s["kappa"], s["kappa_low"], s["kappa_high"], strict=True)],
                              "note": s["group_note"]})
        parts.append(frame_html(shown, caption=f"Cohen's kappa against {breakdown.reference} per {breakdown.by}",
                                max_rows=400))
    if plots:
        fig = group_breakdown_figure(breakdown)
        if fig is not None:
            parts.append(html_format("<figure><img src='{}' alt='{}'><figcaption>{}</figcaption></figure>",
                                     png_data_uri(fig), f"kappa per {breakdown.by}", f"kappa per {breakdown.by}"))
    parts.append(frame_html(breakdown.agreement, caption=f"Agreement per {breakdown.by}", max_rows=400))
    if len(breakdown.bias):
        parts.append(frame_html(breakdown.bias, caption=f"Bias probes per {breakdown.by}", max_rows=400))
    return join(parts)
