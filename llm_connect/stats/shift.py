"""Paired shifts: how far a score moves when one thing about the item changes.

The mean of ``perturbed - original`` over the items scored both times, its
percentile-bootstrap interval, the Wilcoxon signed-rank test (Wilcoxon 1945;
scipy's ``wilcoxon`` with ``zero_method="wilcox"``; all-zero differences give
p = 1.0), and the verdicts that flipped at a threshold. The bias probes of
:mod:`llm_connect.calibration` report these. The mean of ``judge - human`` with a t interval
(:func:`mean_difference`) is a judge card's mean bias.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import check_confidence
from .agreement import bootstrap_ci

__all__ = ["ShiftStats", "empty_shift", "mean_difference", "paired_shift"]


@dataclass(frozen=True)
class ShiftStats:
    """How a perturbation moved a judge's scores: the mean shift with its interval, the test and the flips.

    Parameters
    ----------
    n : int
        Pairs scored both times.
    mean_original : float
        Mean original score.
    mean_perturbed : float
        Mean perturbed score.
    mean_shift : float
        Mean of ``perturbed - original``.
    shift_low : float
        Its bootstrap interval's lower end.
    shift_high : float
        Its upper end.
    p_value : float
        Wilcoxon signed-rank p-value.
    flip_rate : float
        Share of verdicts that flipped at the threshold.
    flips_up : int
        Fail to pass.
    flips_down : int
        Pass to fail.
    note : str, default ""
        Why a figure is missing.
    """
    n: int
    mean_original: float
    mean_perturbed: float
    mean_shift: float
    shift_low: float
    shift_high: float
    p_value: float
    flip_rate: float
    flips_up: int
    flips_down: int
    note: str = ""


def empty_shift(note: str) -> ShiftStats:
    """The shift of a probe that has nothing to measure: no item, every figure NaN, and why.

    Parameters
    ----------
    note : str
        Why there is no shift (e.g. "no item was scored both before and after").

    Returns
    -------
    ShiftStats
        ``n = 0``, NaN means, interval and p-value, no flips, and ``note``.
    """
    nan = math.nan
    return ShiftStats(n=0, mean_original=nan, mean_perturbed=nan, mean_shift=nan, shift_low=nan,
                      shift_high=nan, p_value=nan, flip_rate=nan, flips_up=0, flips_down=0, note=note)


def paired_shift(
    original: Any,
    perturbed: Any,
    *,
    threshold: float = 0.5,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> ShiftStats:
    """Mean of ``perturbed - original`` over the pairs scored both times, its bootstrap interval,
    the Wilcoxon signed-rank p-value, and how many verdicts flipped at ``threshold``.

    Parameters
    ----------
    original : array-like of float
        The scores of the original answers.
    perturbed : array-like of float
        The scores of the perturbed answers, aligned.
    threshold : float, default 0.5
        The verdict threshold.
    n_boot : int, default 1000
        Bootstrap resamples.
    confidence : float, default 0.95
        The interval's level.
    seed : int, optional
        The resampling seed (default 0).

    Returns
    -------
    ShiftStats
        The figures.
    """
    from scipy.stats import wilcoxon

    confidence = check_confidence(confidence)
    a = np.asarray(original, dtype=float)
    b = np.asarray(perturbed, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = len(a)
    if n == 0:
        return empty_shift("no item was scored both before and after")
    d = b - a
    va, vb = a >= threshold, b >= threshold
    flips_up, flips_down = int((~va & vb).sum()), int((va & ~vb).sum())
    low = high = math.nan
    note = ""
    if n >= 2:
        lo, hi = bootstrap_ci(lambda x: x.mean(axis=1), d, n_boot=n_boot, confidence=confidence, seed=seed)
        low, high = float(lo), float(hi)
    else:
        note = "one item: no interval"
    if not np.any(d != 0):
        p = 1.0
        note = note or "no score changed"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small-sample / ties notices; the p-value is still returned
            try:
                p = float(wilcoxon(d, zero_method="wilcox").pvalue)
            except ValueError as exc:
                p, note = math.nan, f"Wilcoxon test failed: {exc}"
    return ShiftStats(
        n=n, mean_original=float(a.mean()), mean_perturbed=float(b.mean()), mean_shift=float(d.mean()),
        shift_low=low, shift_high=high, p_value=p, flip_rate=float((va != vb).mean()),
        flips_up=flips_up, flips_down=flips_down, note=note,
    )


def mean_difference(judge: Any, human: Any, *, confidence: float = 0.95,
                    cluster: Any = None) -> tuple[float, float, float, int]:
    """The mean of ``judge - human`` over the items where both are present, with a t interval.

    Parameters
    ----------
    judge : array-like of float
        The judge's scores, NaN (or ``None``, or not a number) where missing.
    human : array-like of float
        The reference scores of the same items (people's labels), missing likewise.
    confidence : float, default 0.95
        The interval's confidence level.
    cluster : array-like, optional
        One cluster id per item (its conversation, say): the standard error is then cluster-robust (CR1,
        :func:`~llm_connect.stats.clusters.cluster_mean_se`) with ``t(G - 1)``, and the bounds are NaN with fewer
        than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` clusters. ``None``: independent items.

    Returns
    -------
    tuple of (float, float, float, int)
        ``(mean, low, high, n)``: the mean difference, its interval (NaN bounds with fewer than two pairs; both
        bounds the mean when every difference is the same) and the number of pairs (NaN mean with none).

    Raises
    ------
    ValidationError
        When ``judge`` and ``human`` are not of one length, ``cluster`` does not have one id per item, or
        ``confidence`` is not strictly between 0 and 1.

    See Also
    --------
    paired_shift : The same pairs read as a shift, with a bootstrap interval and a signed-rank test.

    Notes
    -----
    Student's t interval of a mean (Student 1908, "The probable error of a mean"); with clusters, the CR1
    cluster-robust standard error and ``G - 1`` degrees of freedom (Cameron & Miller 2015, "A practitioner's
    guide to cluster-robust inference").

    Examples
    --------
    >>> mean, low, high, n = mean_difference([0.9, 0.8, None, 0.4], [1.0, 0.5, 1.0, 0.0])
    >>> round(mean, 3), n, low < mean < high
    (0.2, 3, True)
    """
    import pandas as pd
    from scipy import stats

    from ..errors import ValidationError
    from .clusters import MIN_CLUSTERS, cluster_mean_se

    confidence = check_confidence(confidence)
    a = np.asarray(pd.to_numeric(pd.Series(judge), errors="coerce"), dtype=float)
    b = np.asarray(pd.to_numeric(pd.Series(human), errors="coerce"), dtype=float)
    if a.shape != b.shape:
        raise ValidationError(f"judge and human must score the same items: {a.size} judge scores, {b.size} human "
                              "scores")
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    n = int(d.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(d.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    if cluster is not None:
        ids = pd.Series(list(cluster), dtype=object)
        if len(ids) != keep.size:
            raise ValidationError(f"cluster has {len(ids)} ids for {keep.size} scores")
        se, g = cluster_mean_se(d, ids[keep].to_numpy())
        if g < MIN_CLUSTERS:
            return mean, math.nan, math.nan, n
        dof = g - 1
    else:
        se, dof = float(d.std(ddof=1)) / math.sqrt(n), n - 1
    if se == 0:
        return mean, mean, mean, n
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return mean, mean - half, mean + half, n
