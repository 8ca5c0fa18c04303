"""Does a mean score clear a threshold? The interval of the mean, the gate's verdict, and the items to settle it.

A quality gate (a test that an LLM feature's mean score is at least ``at_least``) passes on evidence, not on
a point estimate: it passes when the lower end of a confidence interval for the mean is at least the
threshold, fails when the upper end is below it, and is *inconclusive* otherwise (:func:`gate_verdict`).

:func:`score_interval` makes the interval from scores in 0..1, by the method the scores allow:

``"clopper-pearson"``
    every score is 0 or 1 (a pass/fail verdict, booleans): the exact binomial interval (Clopper &
    Pearson 1934, *Biometrika* 26:404), the ``α/2`` and ``1 − α/2`` quantiles of ``Beta(k, n − k + 1)``
    and ``Beta(k + 1, n − k)``. Its coverage is at least the confidence for every ``n`` and every true
    rate; it equals statsmodels' ``proportion_confint(k, n, method="beta")`` and scipy's
    ``binomtest(k, n).proportion_ci(method="exact")``.
``"bootstrap-bca"``
    other scores, at least :data:`MIN_BOOTSTRAP` of them and not all equal: the bias-corrected and
    accelerated bootstrap of the mean (Efron 1987, *JASA* 82:171), computed as ``scipy.stats.bootstrap``
    does (its jackknife in closed form, so a large sample costs ``O(B n)``, not ``O(n²)``), 9,999
    resamples (fewer, never under 999, beyond 5,000 scores), seeded, so the same scores give the same
    interval.
``"hoeffding"``
    fewer than :data:`MIN_BOOTSTRAP` such scores, or all of them equal: a bootstrap has nothing to
    resample from (equal scores would give a zero-width interval, "proving" the mean from two items)
    or too little, so Hoeffding's bound (Hoeffding 1963, *JASA* 58:13) for a mean of ``n`` values
    in 0..1 is used, ``mean ± sqrt(ln(2/α) / (2n))`` clipped to 0..1: valid for any ``n`` and any
    distribution, and wide.

:func:`items_to_settle` says about how many items would settle an inconclusive gate: the smallest ``N``
whose half-width ``h_N`` on the threshold's side meets ``h_N (z + z_power) / z <= d``, with ``d`` the mean's
distance from the threshold, ``z`` the interval's normal quantile and ``z_power`` the ``power`` quantile (the
standard sample-size rule of a one-sided test): the bound then crosses the threshold with probability
``power`` if the mean stays where it is. ``h_N`` is the exact Clopper–Pearson half-width at ``N`` for 0/1
scores, and otherwise shrinks as ``1/sqrt(N)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ..errors import ValidationError
from ._validate import check_confidence

__all__ = [
    "GATE_VERDICTS",
    "INTERVAL_METHODS",
    "MIN_BOOTSTRAP",
    "ScoreInterval",
    "gate_verdict",
    "items_to_settle",
    "score_interval",
]

#: The verdicts of :func:`gate_verdict`.
GATE_VERDICTS: tuple[str, ...] = ("pass", "fail", "inconclusive")
#: The methods of :func:`score_interval`.
INTERVAL_METHODS: tuple[str, ...] = ("clopper-pearson", "bootstrap-bca", "hoeffding")
#: Fewer continuous scores than this get Hoeffding's bound instead of a bootstrap.
MIN_BOOTSTRAP = 20
_RESAMPLES = 9_999
_MAX_WORK = 50_000_000  # resampled values drawn in all (B n): 9,999 resamples up to 5,000 scores
_MAX_CELLS = 4_000_000  # resampled values held in memory at once


@dataclass(frozen=True)
class ScoreInterval:
    """The mean of ``n`` scores in 0..1 and its confidence interval ``[low, high]``, made by ``method``.

    Parameters
    ----------
    n : int
        The scores.
    mean : float
        Their mean.
    low : float
        The interval's lower end.
    high : float
        Its upper end.
    confidence : float
        Its confidence level.
    method : str
        How it was made.
    sd : float, default NaN
        The scores' standard deviation: plans how many more would narrow it (:func:`items_to_settle`).
    """

    n: int
    mean: float
    low: float
    high: float
    confidence: float
    method: str
    sd: float = math.nan  # the scores' standard deviation (divisor n - 1), for planning


def _scores_array(scores: Any) -> np.ndarray:
    try:
        arr = np.asarray(scores, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError("scores must be numbers in 0..1 (or booleans)") from None
    if arr.ndim != 1:
        raise ValidationError(f"scores must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValidationError("scores hold NaN or infinite values; drop the unscored items first")
    bad = np.flatnonzero((arr < 0.0) | (arr > 1.0))
    if bad.size:
        raise ValidationError(
            f"scores must be in 0..1, got {float(arr[bad[0]])!r} at position {int(bad[0])}; "
            "map a rating r on 1..5 to (r - 1) / 4"
        )
    return arr


def hoeffding_interval(mean: float, n: int, confidence: float) -> tuple[float, float]:
    """Hoeffding's two-sided interval for the mean of ``n`` independent values in 0..1, clipped to 0..1."""
    half = math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * n))
    return max(0.0, mean - half), min(1.0, mean + half)


def score_interval(scores: Any, *, confidence: float = 0.95, seed: int = 0) -> ScoreInterval:
    """The mean of scores in 0..1 with a confidence interval that is honest for their kind.

    Parameters
    ----------
    scores : array-like of float or bool
        One score per item, each in 0..1 (booleans are 0/1); at least one, none missing.
    confidence : float, default 0.95
        The interval's level, strictly between 0 and 1.
    seed : int, default 0
        The bootstrap's seed (continuous scores only): the same scores give the same interval.

    Returns
    -------
    ScoreInterval
        ``n``, ``mean``, ``low``, ``high``, ``confidence`` and ``method``: ``"clopper-pearson"`` when every
        score is 0 or 1, ``"bootstrap-bca"`` for at least :data:`MIN_BOOTSTRAP` other scores that are not all
        equal, ``"hoeffding"`` otherwise (see the module docstring).

    Raises
    ------
    ValidationError
        No scores, a score outside 0..1, NaN, text, or a bad ``confidence``.
    """
    conf = check_confidence(confidence)
    arr = _scores_array(scores)
    n = len(arr)
    if n == 0:
        raise ValidationError("no scores: an interval needs at least one")
    mean = float(arr.mean())
    sd = float(arr.std(ddof=1)) if n > 1 else math.nan
    alpha = 1.0 - conf
    if np.all((arr == 0.0) | (arr == 1.0)):
        from scipy.special import betaincinv  # the Beta quantile, without importing scipy.stats

        k = int(arr.sum())
        low = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, alpha / 2))
        high = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - alpha / 2))
        return ScoreInterval(n, mean, low, high, conf, "clopper-pearson", sd)
    if n < MIN_BOOTSTRAP or np.ptp(arr) == 0:
        low, high = hoeffding_interval(mean, n, conf)
        return ScoreInterval(n, mean, low, high, conf, "hoeffding", sd)
    low, high = _bca_mean(arr, conf, seed)
    if not (math.isfinite(low) and math.isfinite(high)):  # a degenerate resampling: the distribution-free bound
        low, high = hoeffding_interval(mean, n, conf)
        return ScoreInterval(n, mean, low, high, conf, "hoeffding", sd)
    return ScoreInterval(n, mean, max(0.0, low), min(1.0, high), conf, "bootstrap-bca", sd)


def _bca_mean(arr: np.ndarray, confidence: float, seed: int) -> tuple[float, float]:
    """The BCa bootstrap interval of the mean (Efron 1987), as ``scipy.stats.bootstrap(method="BCa")`` makes it.

    The mean's jackknife has a closed form (``(sum - x_i) / (n - 1)``), and the resamples are drawn in
    chunks of at most :data:`_MAX_CELLS` values, so memory stays bounded and time is ``O(B n)``:
    :data:`_RESAMPLES` resamples up to ``_MAX_WORK / _RESAMPLES`` scores, fewer (never under 999) beyond.
    """
    from scipy.special import ndtr, ndtri

    n = len(arr)
    resamples = max(999, min(_RESAMPLES, _MAX_WORK // n))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    chunk = max(1, _MAX_CELLS // n)
    for start in range(0, resamples, chunk):
        k = min(chunk, resamples - start)
        means[start:start + k] = arr[rng.integers(0, n, size=(k, n))].mean(axis=1)
    theta = float(arr.mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = ndtri(np.mean(means < theta))
        jack = (arr.sum() - arr) / (n - 1)
        d = jack.mean() - jack
        accel = float((d**3).sum() / (6.0 * (d**2).sum() ** 1.5))
        z = ndtri(np.array([(1 - confidence) / 2, (1 + confidence) / 2]))
        levels = ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    if not np.all(np.isfinite(levels)):
        return math.nan, math.nan
    low, high = np.percentile(means, levels * 100)
    return float(low), float(high)


def check_threshold(at_least: Any) -> float:
    """``at_least`` as a float in 0..1 (a score threshold), else a :class:`~llm_connect.errors.ValidationError`."""
    if isinstance(at_least, bool) or not isinstance(at_least, (int, float, np.integer, np.floating)):
        raise ValidationError(f"at_least must be a number in 0..1 (e.g. 0.8), got {at_least!r}")
    value = float(at_least)
    if not 0.0 <= value <= 1.0:  # NaN fails too
        hint = f"; did you mean {value / 100:g}?" if 1 < value <= 100 else ""
        raise ValidationError(f"at_least must be in 0..1 (scores are 0..1), got {at_least!r}{hint}")
    return value


def gate_verdict(low: float, high: float, at_least: float) -> str:
    """``"pass"`` when ``low >= at_least``, ``"fail"`` when ``high < at_least``, else ``"inconclusive"``.

    Parameters
    ----------
    low, high : float
        The ends of a confidence interval for the mean score.
    at_least : float
        The threshold the mean must clear.

    Returns
    -------
    str
        One of :data:`GATE_VERDICTS`.
    """
    if low >= at_least:
        return "pass"
    if high < at_least:
        return "fail"
    return "inconclusive"


def items_to_settle(interval: ScoreInterval, at_least: float, *, power: float = 0.8) -> int | None:
    """About how many items (in all, ``interval.n`` included) would settle an inconclusive gate.

    Parameters
    ----------
    interval : ScoreInterval
        The inconclusive interval (from :func:`score_interval`, or one made alike, e.g. PPI++'s with ``n`` its
        labels and ``method="ppi++"``).
    at_least : float
        The gate's threshold.
    power : float, default 0.8
        The probability of settling it wanted, if the mean stays where it is.

    Returns
    -------
    int or None
        The smallest ``N`` whose interval's half-width ``h_N`` on the threshold's side meets
        ``h_N (z + z_power) / z <= d`` (``d`` the mean's distance from the threshold): then the bound crosses
        the threshold with probability ``power`` if the mean stays where it is. ``h_N`` is the exact
        Clopper–Pearson half-width at ``N`` for 0/1 scores; for others ``z·sd/sqrt(N)``, the normal
        approximation the bootstrap follows once there are enough scores (Hoeffding's for equal scores);
        otherwise the half-width scaled as ``1/sqrt(N)`` from ``n``. At least ``n + 1``. ``None`` when the
        mean sits exactly on the threshold (no number of items settles it) or the interval has no width on
        the threshold's side.
    """
    conf = interval.confidence
    pw = check_confidence(power, name="power")
    n, mean = interval.n, interval.mean
    distance = abs(mean - at_least)
    half = (mean - interval.low) if mean >= at_least else (interval.high - mean)
    if n < 1 or distance == 0 or not half > 0 or not math.isfinite(half):
        return None
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    target = distance * z / (z + NormalDist().inv_cdf(pw))  # the half-width that settles it
    if interval.method == "clopper-pearson":
        return max(n + 1, _clopper_pearson_settles(mean, at_least, conf, target))
    if interval.method == "hoeffding" and math.isfinite(interval.sd):
        if interval.sd > 0:  # enough scores for a bootstrap: its half-width is about z sd / sqrt(N)
            needed = (z * interval.sd / target) ** 2
            return max(n + 1, MIN_BOOTSTRAP, math.ceil(needed - 1e-9))
        needed = math.log(2.0 / (1.0 - conf)) / (2.0 * target**2)  # equal scores: Hoeffding's own half-width
        return max(n + 1, math.ceil(needed - 1e-9))
    return max(n + 1, math.ceil(n * (half / target) ** 2 - 1e-9))


def _clopper_pearson_settles(mean: float, at_least: float, confidence: float, target: float) -> int:
    """The smallest N whose exact interval around ``mean`` (``mean·N`` successes) has a half-width on the
    threshold's side of at most ``target``; by doubling, then bisection (the half-width falls with N)."""
    from scipy.special import betaincinv

    alpha = 1.0 - confidence

    def half(n: int) -> float:
        k = mean * n
        if mean >= at_least:
            return mean - (0.0 if k <= 0 else float(betaincinv(k, n - k + 1, alpha / 2)))
        return (1.0 if k >= n else float(betaincinv(k + 1, n - k, 1 - alpha / 2))) - mean

    high = 1
    while half(high) > target:
        high *= 2
        if high > 10**9:
            return high
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if half(middle) > target:
            low = middle
        else:
            high = middle
    return high
