"""Paired shifts: how far a score moves when one thing about the item changes.

The mean of ``perturbed - original`` over the items scored both times, its
percentile-bootstrap interval, the Wilcoxon signed-rank test (Wilcoxon 1945;
scipy's ``wilcoxon`` with ``zero_method="wilcox"``; all-zero differences give
p = 1.0), and the verdicts that flipped at a threshold. The bias probes of
:mod:`llm_connect.calibration` report these.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import check_confidence
from .agreement import bootstrap_ci

__all__ = ["ShiftStats", "empty_shift", "paired_shift"]


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
