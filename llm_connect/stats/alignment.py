"""The statistics of aligning a judge to people: splits, folds, agreement of pass/fail verdicts, and the
paired bootstrap of the difference between two judges' agreement with the same people.

Everything here takes arrays of 0/1 verdicts (NaN where missing) and returns numbers; the judging
is :func:`llm_connect.alignment.align`'s.

- :func:`stratified_split`: a held-out share of the items, stratified by label, that no selection
  step sees (items that must stay out of it, e.g. worked examples, are never drawn into it);
- :func:`stratified_folds`: k folds of the rest, stratified by label, for cross-validation;
- :func:`verdict_agreement`: Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal
  scales", Educational and Psychological Measurement 20) and percent agreement of a judge's verdicts
  with people's, with seeded percentile bootstrap intervals (Efron & Tibshirani 1993, *An
  Introduction to the Bootstrap*, ch. 13);
- :func:`paired_difference`: the difference ``b - a`` of two judges' kappa (or percent agreement)
  with the same people on the same items, with the interval of the **paired** bootstrap: each
  resample draws items once and scores both judges on them, so the interval reflects the
  uncertainty of the difference itself, which is far smaller than the two separate intervals
  suggest when the judges agree on most items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from .agreement import Estimate, bootstrap_ci

__all__ = [
    "METRICS",
    "VerdictAgreement",
    "kappa_rows",
    "paired_difference",
    "stratified_folds",
    "stratified_split",
    "verdict_agreement",
]

#: What :func:`paired_difference` and :func:`verdict_agreement` compare: Cohen's kappa or percent agreement.
METRICS = ("kappa", "agreement")


def _verdicts(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be one-dimensional, got shape {arr.shape}")
    ok = np.isfinite(arr)
    if not np.isin(arr[ok], (0.0, 1.0)).all():
        raise ValidationError(f"{name} must hold 0/1 verdicts (NaN where missing)")
    return arr


def kappa_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each row of two ``(k, n)`` arrays of 0/1 verdicts (NaN when both raters give one
    and the same verdict everywhere: chance agreement is then 1 and kappa undefined).

    Parameters
    ----------
    x : ndarray
        ``(k, n)`` 0/1 verdicts of one rater.
    y : ndarray
        ``(k, n)`` of the other.

    Returns
    -------
    ndarray
        ``k`` kappas.

    Examples
    --------
    >>> import numpy as np
    >>> kappa_rows(np.array([[1, 0, 1, 0]]), np.array([[1, 0, 1, 1]]))
    array([0.5])
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.atleast_2d(np.asarray(y, dtype=float))
    po = (x == y).mean(axis=1)
    px, py = x.mean(axis=1), y.mean(axis=1)
    pe = px * py + (1 - px) * (1 - py)
    den = 1 - pe
    out = np.full(po.shape, np.nan)
    ok = ~np.isclose(den, 0.0, atol=1e-12)
    out[ok] = (po[ok] - pe[ok]) / den[ok]
    return out


def _agreement_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (np.atleast_2d(x) == np.atleast_2d(y)).mean(axis=1)


def _metric_rows(metric: str) -> Any:
    if metric not in METRICS:
        raise ValidationError(f"metric must be one of {METRICS}, got {metric!r}")
    return kappa_rows if metric == "kappa" else _agreement_rows


@dataclass(frozen=True)
class VerdictAgreement:
    """A judge's pass/fail agreement with people: ``n`` items, kappa and percent agreement with intervals.

    Parameters
    ----------
    n : int
        The items.
    kappa : float
        Cohen's kappa.
    kappa_low : float
        Its interval's lower end.
    kappa_high : float
        Its upper end.
    agreement : float
        Percent agreement.
    agreement_low : float
        Its interval's lower end.
    agreement_high : float
        Its upper end.
    """

    n: int
    kappa: float
    kappa_low: float
    kappa_high: float
    agreement: float
    agreement_low: float
    agreement_high: float

    def metric(self, name: str) -> float:
        """The figure named ``name``: ``"kappa"`` or ``"agreement"``.

        Parameters
        ----------
        name : {"kappa", "agreement"}
            The metric.

        Returns
        -------
        float
            Its value.

        Raises
        ------
        ValidationError
            Another name.
        """
        _metric_rows(name)
        return self.kappa if name == "kappa" else self.agreement


def _kept_clusters(cluster: Any, keep: np.ndarray) -> tuple[np.ndarray | None, int | None]:
    """The cluster codes of the kept rows and how many clusters they hold (``None, None`` without clusters)."""
    if cluster is None:
        return None, None
    from .clusters import cluster_codes

    codes = cluster_codes(cluster)
    if codes.shape != keep.shape:
        raise ValidationError(f"cluster has {codes.size} ids for {keep.size} rows")
    codes = codes[keep]
    return codes, len(np.unique(codes))


def verdict_agreement(judge: Any, human: Any, *, n_boot: int = 2000, confidence: float = 0.95,
                      seed: int | None = 0, cluster: Any = None) -> VerdictAgreement:
    """Cohen's kappa and percent agreement of 0/1 ``judge`` verdicts with 0/1 ``human`` labels (rows where both
    are present), with seeded percentile bootstrap intervals. ``cluster`` (one id per row, e.g. its
    conversation): the bootstrap resamples whole clusters, and with fewer than
    :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` of them the intervals are NaN.

    Parameters
    ----------
    judge : array-like
        0/1 verdicts.
    human : array-like
        0/1 labels.
    n_boot : int, default 2000
        Bootstrap resamples.
    confidence : float, default 0.95
        The intervals' confidence level.
    seed : int, optional
        Seeds the bootstrap (default 0).
    cluster : array-like, optional
        One id per row (above).

    Returns
    -------
    VerdictAgreement
        The figures.
    """
    from .clusters import MIN_CLUSTERS

    a, h = _verdicts(judge, "judge"), _verdicts(human, "human")
    if a.shape != h.shape:
        raise ValidationError(f"judge and human differ in length ({a.size} vs {h.size})")
    keep = np.isfinite(a) & np.isfinite(h)
    groups, n_clusters = _kept_clusters(cluster, keep)
    a, h = a[keep], h[keep]
    n = int(a.size)
    if n == 0:
        return VerdictAgreement(0, *(math.nan,) * 6)
    kappa = float(kappa_rows(a, h)[0])
    agreement = float(_agreement_rows(a, h)[0])

    def both(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.stack([kappa_rows(x, y), _agreement_rows(x, y)], axis=1)

    low, high = bootstrap_ci(both, a, h, n_boot=n_boot, confidence=confidence, seed=seed, cluster=groups)
    low, high = np.atleast_1d(low), np.atleast_1d(high)
    if low.size < 2 or (n_clusters is not None and n_clusters < MIN_CLUSTERS):  # no resample, or too few clusters
        low = high = np.array([math.nan, math.nan])
    return VerdictAgreement(n, kappa, float(low[0]), float(high[0]), agreement, float(low[1]), float(high[1]))


def paired_difference(human: Any, a: Any, b: Any, *, metric: str = "kappa", n_boot: int = 2000,
                      confidence: float = 0.95, seed: int | None = 0, cluster: Any = None) -> Estimate:
    """``metric(b, human) - metric(a, human)`` on the items where all three are present, with the percentile
    interval of the paired bootstrap (the same resampled items for both judges; resamples where either
    kappa is undefined are left out). ``reason`` says why the value is NaN (no common item, or a kappa
    undefined on the items). ``cluster`` (one id per item, e.g. its conversation): the bootstrap resamples
    whole clusters; with fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` of them there is no
    interval and ``reason`` says why.

    Parameters
    ----------
    human : array-like
        People's 0/1 labels.
    a : array-like
        The first judge's 0/1 verdicts.
    b : array-like
        The second judge's.
    metric : {"kappa", "agreement"}, default "kappa"
        The figure compared.
    n_boot : int, default 2000
        Bootstrap resamples.
    confidence : float, default 0.95
        The interval's confidence level.
    seed : int, optional
        Seeds the bootstrap (default 0).
    cluster : array-like, optional
        One id per item (above).

    Returns
    -------
    Estimate
        The difference and its interval.
    """
    from .clusters import MIN_CLUSTERS, few_clusters_reason

    rows = _metric_rows(metric)
    h, x, y = _verdicts(human, "human"), _verdicts(a, "a"), _verdicts(b, "b")
    if not (h.shape == x.shape == y.shape):
        raise ValidationError("human, a and b must have the same length")
    keep = np.isfinite(h) & np.isfinite(x) & np.isfinite(y)
    groups, n_clusters = _kept_clusters(cluster, keep)
    h, x, y = h[keep], x[keep], y[keep]
    if h.size == 0:
        return Estimate(math.nan, reason="no item has a human label and both judges' verdicts")

    def diff(hh: np.ndarray, xx: np.ndarray, yy: np.ndarray) -> np.ndarray:
        return rows(yy, hh) - rows(xx, hh)

    value = float(diff(h, x, y)[0])
    if math.isnan(value):
        return Estimate(math.nan, reason=f"{metric} is undefined on these items (one verdict everywhere)")
    if n_clusters is not None and n_clusters < MIN_CLUSTERS:
        return Estimate(value, reason=f"no interval: {few_clusters_reason(n_clusters, column=None, what='held-out')}")
    low, high = bootstrap_ci(diff, h, x, y, n_boot=n_boot, confidence=confidence, seed=seed, cluster=groups)
    return Estimate(value, float(low), float(high))


def stratified_split(labels: Any, share: float, *, seed: int = 0,
                     keep_out: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(selection, heldout)`` positions: ``round(share * n_c)`` items of each label ``c`` held out, drawn with
    ``seed``; ``keep_out`` (booleans) marks items never held out (they stay in the selection split).
    Positions come back sorted.

    Parameters
    ----------
    labels : array-like
        Each item's label.
    share : float
        The share held out.
    seed : int, default 0
        Seeds the draw.
    keep_out : array-like of bool, optional
        Items never held out.

    Returns
    -------
    tuple of (ndarray, ndarray)
        The selection and held-out positions.

    Examples
    --------
    >>> stratified_split([0, 0, 0, 1, 1, 1], 0.34)
    (array([0, 1, 3, 4]), array([2, 5]))
    """
    y = np.asarray(labels)
    if not 0.0 < float(share) < 1.0:
        raise ValidationError(f"heldout must be a share between 0 and 1, got {share!r}")
    never = np.zeros(y.size, dtype=bool) if keep_out is None else np.asarray(keep_out, dtype=bool)
    rng = np.random.default_rng(seed)
    held: list[int] = []
    for value in sorted(set(y.tolist())):
        members = np.flatnonzero(y == value)
        want = round(share * members.size)
        eligible = members[~never[members]]
        if want and eligible.size:
            held.extend(rng.permutation(eligible)[: min(want, eligible.size)].tolist())
    heldout = np.array(sorted(held), dtype=int)
    selection = np.setdiff1d(np.arange(y.size), heldout)
    return selection, heldout


def stratified_folds(labels: Any, folds: int, *, seed: int = 0) -> np.ndarray:
    """The fold (0..folds-1) of each item: each label's items shuffled with ``seed`` and dealt round-robin, so
    every fold holds about ``1/folds`` of each label.

    Parameters
    ----------
    labels : array-like
        Each item's label.
    folds : int
        The folds.
    seed : int, default 0
        Seeds the shuffle.

    Returns
    -------
    ndarray of int
        Each item's fold.
    """
    y = np.asarray(labels)
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValidationError(f"folds must be an integer >= 2, got {folds!r}")
    rng = np.random.default_rng(seed)
    out = np.empty(y.size, dtype=int)
    start = 0
    for value in sorted(set(y.tolist())):
        members = rng.permutation(np.flatnonzero(y == value))
        out[members] = (np.arange(members.size) + start) % folds
        start += members.size  # the next label starts where this one stopped, so fold sizes stay even
    return out
