"""Plots, seaborn-shaped: ``plot_x(data=None, *, ..., ax=None, **kwargs) -> Axes``.

Each draws what a pure function computes (tests check those numbers and the
artists, not images). matplotlib is imported inside the functions, nothing
changes global ``rcParams``, and with ``ax=None`` the current Axes is used.
``**kwargs`` go to the main matplotlib call of each plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docstrings import PLOT_TEXTS, share_parameters
from ..calibration._agreement import STATISTICS, AgreementTable, threshold_sweep
from ..calibration._bias import BiasReport
from ..calibration._diagnostics import reliability_table, score_column
from ..errors import ValidationError
from ..stats.estimates import RESULT_COLUMNS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "length_profile",
    "plot_agreement_heatmap",
    "plot_bias_forest",
    "plot_estimates",
    "plot_judge_scatter",
    "plot_reliability",
    "plot_score_vs_length",
    "plot_threshold_sweep",
]


def _axes(ax: Any) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.gca()


def _legend(ax: Any) -> None:
    """A legend only when something is labelled (matplotlib warns otherwise)."""
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8)


def _need(data: Any, what: str) -> None:
    if data is None:
        raise ValidationError(f"data is required: pass {what}")


_LABEL_CHARS = 32


def _text(value: Any, limit: int = _LABEL_CHARS) -> str:
    """``value`` as literal matplotlib text, at most ``limit`` characters (a longer judge name or
    group is cut with an ellipsis, so the axes keep their room; tables show it whole). A ``$`` is
    a dollar sign, never the start of mathtext (which could fail to parse and stop the report).
    Control characters from data (ESC, BEL, newlines, bidi overrides) are shown as escapes
    (``\\x1b``), so they reach neither the figure nor the terminal through matplotlib's warnings."""
    from .._textsafe import safe_text

    return safe_text(value, limit=limit).replace("$", r"\$")


def _label(name: str) -> str:
    return _text(name[len("score_"):] if name.startswith("score_") else name)


@share_parameters(texts=PLOT_TEXTS)
def plot_judge_scatter(
    data: pd.DataFrame,
    *,
    x: str,
    y: str,
    jitter: float = 0.0,
    seed: int = 0,
    identity: bool = True,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """One judge's scores against another's, with the identity line ``y = x``.

    ``x``/``y`` name judges (``"exact"`` or ``"score_exact"``). Items either judge
    left unscored are not drawn. ``jitter`` spreads tied scores (e.g. 0/1 labels)
    by up to that much, seeded.

    Parameters
    ----------
    {data}
    x : str
        The judge on the x axis.
    y : str
        The judge on the y axis.
    jitter : float, default 0.0
        Spread of tied scores (above).
    seed : int, default 0
        Seeds the jitter.
    identity : bool, default True
        Draw ``y = x``.
    {ax}
    **kwargs
        Go to ``Axes.scatter``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.

    See Also
    --------
    plot_agreement_heatmap : Every pair of judges at once.
    """
    _need(data, "the frame from score_items()")
    xc, yc = score_column(data, x), score_column(data, y)
    pts = data[[xc, yc]].apply(pd.to_numeric, errors="coerce").dropna()
    xs, ys = pts[xc].to_numpy(dtype=float), pts[yc].to_numpy(dtype=float)
    if jitter:
        rng = np.random.default_rng(seed)
        xs = xs + rng.uniform(-jitter, jitter, len(xs))
        ys = ys + rng.uniform(-jitter, jitter, len(ys))
    ax = _axes(ax)
    kwargs.setdefault("alpha", 0.6)
    kwargs.setdefault("s", 14)
    ax.scatter(xs, ys, **kwargs)
    if identity:
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.4", linewidth=1, label="identity")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"{_label(xc)} score")
    ax.set_ylabel(f"{_label(yc)} score")
    ax.set_title(f"{_label(yc)} vs {_label(xc)} (n={len(pts)})")
    return ax


@share_parameters(texts=PLOT_TEXTS)
def plot_agreement_heatmap(
    data: AgreementTable | pd.DataFrame,
    *,
    statistic: str = "cohen_kappa",
    annot: bool = True,
    cmap: str = "RdYlGn",
    vmin: float = -1.0,
    vmax: float = 1.0,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """A judge-by-judge heatmap of one agreement statistic (from :func:`agreement_table`).

    ``data`` is an :class:`AgreementTable` or a square frame (as ``table.matrix()``
    gives). Cells are annotated with their value; undefined ones are blank.

    Parameters
    ----------
    data : AgreementTable or pandas.DataFrame
        The table, or a square frame.
    statistic : str, default "cohen_kappa"
        The statistic shown.
    annot : bool, default True
        Write each cell's value.
    cmap : str, default "RdYlGn"
        The colour map.
    vmin : float, default -1.0
        The value of the map's low end.
    vmax : float, default 1.0
        The value of its high end.
    {ax}
    **kwargs
        Go to ``Axes.imshow``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _need(data, "an AgreementTable")
    if statistic not in STATISTICS:
        raise ValidationError(f"unknown statistic {statistic!r}; choose from {list(STATISTICS)}")
    matrix = data.matrix(statistic) if isinstance(data, AgreementTable) else data
    values = matrix.to_numpy(dtype=float)
    ax = _axes(ax)
    masked = np.ma.masked_invalid(values)
    if statistic in ("percent_agreement", "mean_abs_diff"):
        vmin, vmax = (0.0, 1.0) if vmin == -1.0 and vmax == 1.0 else (vmin, vmax)
    image = ax.imshow(masked, cmap=cmap, vmin=vmin, vmax=vmax, **kwargs)
    names = [_text(n) for n in matrix.index]
    ax.set_xticks(range(len(names)), labels=names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), labels=names)
    if annot:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                if np.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=9)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    ax.set_title(statistic.replace("_", " "))
    return ax


@share_parameters(texts=PLOT_TEXTS)
def plot_reliability(
    data: pd.DataFrame,
    *,
    judge: str,
    label: str = "human",
    bins: int = 10,
    threshold: float = 0.5,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """A reliability diagram: the judge's mean score per bin against the rate at which
    ``label`` (human or exact) says "correct", with Wilson intervals and the diagonal.
    The numbers are :func:`reliability_table`'s.

    Parameters
    ----------
    {data}
    {judge}
    {label}
    bins : int, default 10
        Score bins.
    threshold : float, default 0.5
        A label's verdict threshold.
    {ax}
    **kwargs
        Go to ``Axes.errorbar`` (the judge's points and intervals).

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _need(data, "the frame from score_items()")
    table = reliability_table(data, judge, label=label, bins=bins, threshold=threshold)
    shown = table[table["n"] > 0]
    ax = _axes(ax)
    ax.plot([0, 1], [0, 1], linestyle="--", color="0.5", linewidth=1, label="perfect calibration")
    yerr = np.clip(np.vstack([shown["correct_rate"] - shown["rate_low"], shown["rate_high"] - shown["correct_rate"]]),
                   0.0, None)
    kwargs.setdefault("marker", "o")
    kwargs.setdefault("capsize", 3)
    ax.errorbar(shown["mean_score"].to_numpy(dtype=float), shown["correct_rate"].to_numpy(dtype=float), yerr=yerr,
                label=f"{_label(judge)}", **kwargs)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(f"{_label(judge)} score (bin mean)")
    ax.set_ylabel(f"share {_label(label)} says correct")
    ax.set_title("reliability")
    _legend(ax)
    return ax


@share_parameters(texts=PLOT_TEXTS)
def plot_threshold_sweep(
    data: pd.DataFrame,
    *,
    judge: str | None = None,
    reference: str | None = None,
    statistics: Sequence[str] = ("cohen_kappa", "percent_agreement"),
    thresholds: Sequence[float] | None = None,
    reference_threshold: float | None = 0.5,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """Agreement against the threshold: one line per statistic, the best kappa marked.

    ``data`` is a sweep (from :func:`threshold_sweep`) or a score frame together
    with ``judge`` and ``reference``, in which case the sweep is computed.

    Parameters
    ----------
    data : pandas.DataFrame
        A sweep, or a score frame.
    judge : str, optional
        The judge (with a score frame).
    reference : str, optional
        The reference (with a score frame).
    statistics : sequence of str, default ("cohen_kappa", "percent_agreement")
        The lines.
    thresholds : sequence of float, optional
        The thresholds swept (with a score frame).
    reference_threshold : float or None, default 0.5
        The reference's verdict threshold (``None``: the moving one).
    {ax}
    **kwargs
        Go to each line.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.

    Raises
    ------
    ValidationError
        A score frame without ``judge`` and ``reference``.
    """
    _need(data, "a threshold_sweep() frame, or scores with judge= and reference=")
    if "threshold" in data.columns and judge is None:
        sweep = data
        title = "threshold sweep"
    else:
        if judge is None or reference is None:
            raise ValidationError("give judge= and reference= to sweep a score frame")
        sweep = threshold_sweep(data[score_column(data, judge)], data[score_column(data, reference)],
                                thresholds=thresholds, reference_threshold=reference_threshold)
        title = f"{_label(judge)} vs {_label(reference)}"
    ax = _axes(ax)
    for stat in statistics:
        if stat not in sweep.columns:
            raise ValidationError(f"the sweep has no column {stat!r}; it has {list(sweep.columns)}")
        ax.plot(sweep["threshold"].to_numpy(dtype=float), sweep[stat].to_numpy(dtype=float), marker=".",
                label=stat.replace("_", " "), **kwargs)
    if "cohen_kappa" in sweep.columns and sweep["cohen_kappa"].notna().any():
        best = sweep.iloc[int(np.nanargmax(sweep["cohen_kappa"].to_numpy(dtype=float)))]
        ax.axvline(best["threshold"], color="0.5", linestyle=":", linewidth=1,
                   label=f"best kappa at {best['threshold']:.2f}")
    ax.set_xlabel("threshold")
    ax.set_ylabel("agreement")
    ax.set_title(title)
    _legend(ax)
    return ax


@share_parameters(texts=PLOT_TEXTS)
def plot_bias_forest(
    data: BiasReport | pd.DataFrame,
    *,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """A forest plot: each judge and probe's mean score shift with its interval, and 0 marked.

    Rows without an estimate (a probe that did not apply) are left out.

    Parameters
    ----------
    data : BiasReport or pandas.DataFrame
        The report, or its frame.
    {ax}
    **kwargs
        Go to ``Axes.errorbar``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _need(data, "a BiasReport or its frame")
    frame = data.frame if isinstance(data, BiasReport) else data
    rows = frame[pd.to_numeric(frame["mean_shift"], errors="coerce").notna()].reset_index(drop=True)
    ax = _axes(ax)
    ys = np.arange(len(rows))[::-1]
    shift = rows["mean_shift"].to_numpy(dtype=float)
    low = rows["shift_low"].to_numpy(dtype=float)
    high = rows["shift_high"].to_numpy(dtype=float)
    # a percentile interval need not contain the mean (skewed data): never draw a negative arm
    xerr = np.clip(np.vstack([np.nan_to_num(shift - low), np.nan_to_num(high - shift)]), 0.0, None)
    kwargs.setdefault("fmt", "o")
    kwargs.setdefault("capsize", 3)
    ax.errorbar(shift, ys, xerr=xerr, **kwargs)
    ax.axvline(0.0, color="0.4", linestyle="--", linewidth=1)
    ax.set_yticks(ys, labels=[_text(f"{j} · {p}") for j, p in zip(rows["judge"], rows["probe"], strict=True)])
    ax.set_xlabel("mean score shift (perturbed − original)")
    ax.set_title("bias probes")
    if len(rows) == 0:
        ax.text(0.5, 0.5, "no probe results", transform=ax.transAxes, ha="center")
    return ax


@share_parameters(texts=PLOT_TEXTS)
def length_profile(
    data: pd.DataFrame,
    *,
    judge: str,
    length: str = "candidate_words",
    bins: int = 8,
    hue: str | None = None,
) -> pd.DataFrame:
    """Mean score per length bin (quantile bins of ``length``), per ``hue`` group if given.

    Columns: ``group``, ``bin``, ``length_mid`` (median length in the bin), ``mean_score``, ``n``.

    Parameters
    ----------
    {data}
    {judge}
    length : str, default "candidate_words"
        The length column.
    bins : int, default 8
        Quantile bins.
    hue : str, optional
        A column (or judge) splitting the items into groups.

    Returns
    -------
    pandas.DataFrame
        The profile (above).

    Raises
    ------
    ValidationError
        No ``length`` column.
    """
    yc = score_column(data, judge)
    if length not in data.columns:
        raise ValidationError(f"no column {length!r} in the data")
    cols = {"score": pd.to_numeric(data[yc], errors="coerce"), "length": pd.to_numeric(data[length], errors="coerce")}
    if hue is not None:
        hc = score_column(data, hue) if hue not in data.columns else hue
        cols["group"] = data[hc]
    frame = pd.DataFrame(cols).dropna()
    if hue is None:
        frame["group"] = "all"
    elif frame["group"].dtype.kind == "f":
        frame["group"] = np.where(frame["group"] >= 0.5, f"{_label(hue)}: yes", f"{_label(hue)}: no")
    if frame.empty:
        return pd.DataFrame(columns=["group", "bin", "length_mid", "mean_score", "n"])
    nb = max(1, min(bins, frame["length"].nunique()))
    # quantile bins of the length itself: tied lengths share a bin
    frame["bin"] = pd.qcut(frame["length"], nb, labels=False, duplicates="drop") if nb > 1 else 0
    out = frame.groupby(["group", "bin"], sort=True).agg(
        length_mid=("length", "median"), mean_score=("score", "mean"), n=("score", "size")).reset_index()
    return out


@share_parameters(texts=PLOT_TEXTS)
def plot_score_vs_length(
    data: pd.DataFrame,
    *,
    judge: str,
    length: str = "candidate_words",
    hue: str | None = None,
    bins: int = 8,
    logx: bool = True,
    ax: Any = None,
    **kwargs: Any,
) -> Axes:
    """The judge's score against answer length: the items as points and the binned means as
    a line per ``hue`` group (e.g. ``hue="human"`` splits correct from incorrect answers).
    The line is :func:`length_profile`'s.

    Parameters
    ----------
    {data}
    {judge}
    length : str, default "candidate_words"
        The length column.
    hue : str, optional
        Splits the items into groups, a line each.
    bins : int, default 8
        Quantile bins of the lines.
    logx : bool, default True
        A log x axis.
    {ax}
    **kwargs
        Go to ``Axes.scatter``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    _need(data, "the frame from score_items()")
    yc = score_column(data, judge)
    pts = pd.DataFrame({"x": pd.to_numeric(data[length], errors="coerce"),
                        "y": pd.to_numeric(data[yc], errors="coerce")}).dropna()
    ax = _axes(ax)
    kwargs.setdefault("alpha", 0.25)
    kwargs.setdefault("s", 10)
    ax.scatter(pts["x"].clip(lower=1 if logx else -math.inf).to_numpy(dtype=float), pts["y"].to_numpy(dtype=float),
               color="0.6", **kwargs)
    profile = length_profile(data, judge=judge, length=length, bins=bins, hue=hue)
    for group, part in profile.groupby("group", sort=True):
        ax.plot(part["length_mid"].clip(lower=1 if logx else -math.inf).to_numpy(dtype=float),
                part["mean_score"].to_numpy(dtype=float), marker="o", label=_text(group))
    if logx:
        from matplotlib.ticker import ScalarFormatter

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(length.replace("_", " "))
    ax.set_ylabel(f"{_label(yc)} score")
    ax.set_title(f"{_label(yc)} score vs length")
    _legend(ax)
    return ax


_METHOD_STYLE = {
    "judge": ("judge only (ignores its bias)", "s"),
    "human": ("human labels only", "o"),
    "ppi": ("PPI", "^"),
    "ppi++": ("PPI++", "D"),
}


@share_parameters(texts=PLOT_TEXTS)
def plot_estimates(data: pd.DataFrame, *, judge: str | None = None, ax: Any = None, **kwargs: Any) -> Axes:
    """A forest plot of :func:`estimate_quality`'s frame: per group, each method's interval and estimate.

    Groups run down the y axis (labelled by their ``by`` values); within a group
    the methods sit side by side (judge only, human only, PPI, PPI++, in that
    order), each with its own marker and a legend entry. Rows whose estimate is
    NaN (e.g. a group without labels) are not drawn. The title names the judge
    whose scores the estimates correct: ``judge``, else the frame's ``judge``
    column when it holds one name (as a calibration report's estimates do; a
    ``judge`` column with several names is a group like the others).
    ``**kwargs`` go to each ``Axes.errorbar`` call. Returns the Axes.

    Parameters
    ----------
    data : pandas.DataFrame
        The frame of :func:`~llm_connect.stats.estimates.estimate_quality`.
    judge : str, optional
        The judge the estimates come from, named in the title.
    {ax}
    **kwargs
        Go to each ``Axes.errorbar`` call.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    if not isinstance(data, pd.DataFrame):
        raise ValidationError("data must be the DataFrame returned by estimate_quality()")
    needed = ["method", "estimate", "ci_low", "ci_high"]
    missing = [c for c in needed if c not in data.columns]
    if missing:
        raise ValidationError(f"data lacks column(s) {missing}; pass the DataFrame returned by estimate_quality()")
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    if "judge" in data.columns and data["judge"].nunique(dropna=False) == 1:  # one judge: its name, not a group
        judge = judge if judge is not None else str(data["judge"].iloc[0])
        data = data.drop(columns=["judge"])
    by_cols = [c for c in data.columns if c not in RESULT_COLUMNS]
    frame = data.reset_index(drop=True)
    if by_cols:
        key_frame = frame[by_cols].astype(object).where(frame[by_cols].notna(), "(missing)")
        labels = [" · ".join(str(v) for v in row) for row in key_frame.itertuples(index=False)]
    else:
        labels = ["all"] * len(frame)
    group_labels = list(dict.fromkeys(labels))
    position = {g: i for i, g in enumerate(group_labels)}
    n_groups = len(group_labels)
    present = list(dict.fromkeys(frame["method"]))
    methods = [m for m in _METHOD_STYLE if m in present] + [m for m in present if m not in _METHOD_STYLE]
    k = len(methods)
    offsets = np.linspace(0.25, -0.25, k) if k > 1 else np.zeros(1)
    group_y = n_groups - 1 - np.array([position[g] for g in labels], dtype=float)
    drawn = 0
    for j, method in enumerate(methods):
        sel = (frame["method"] == method).to_numpy() & np.isfinite(frame["estimate"].to_numpy(dtype=float))
        if not sel.any():
            continue
        est = frame.loc[sel, "estimate"].to_numpy(dtype=float)
        low = frame.loc[sel, "ci_low"].to_numpy(dtype=float)
        high = frame.loc[sel, "ci_high"].to_numpy(dtype=float)
        xerr = np.clip(np.vstack([np.nan_to_num(est - low), np.nan_to_num(high - est)]), 0.0, None)
        label, marker = _METHOD_STYLE.get(method, (method, "o"))
        style = {"fmt": marker, "capsize": 3, "color": f"C{j}", "label": label, "markersize": 5, **kwargs}
        ax.errorbar(est, group_y[sel] + offsets[j], xerr=xerr, **style)
        drawn += int(sel.sum())
    ax.set_yticks(np.arange(n_groups)[::-1], labels=[_text(g) for g in group_labels])
    ax.set_ylim(-0.6, n_groups - 0.4)
    ax.set_xlabel("mean quality")
    conf = pd.to_numeric(frame.get("confidence", pd.Series(dtype=float)), errors="coerce").dropna().unique()
    title = f"{conf[0]:.0%} intervals" if len(conf) == 1 else "intervals"
    ax.set_title(f"{title} from judge {_text(judge)}" if judge else title)
    if drawn == 0:
        ax.text(0.5, 0.5, "no estimates", transform=ax.transAxes, ha="center")
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8)
    return ax
