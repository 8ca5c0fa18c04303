"""Agreement between two judges (or a judge and people), with bootstrap intervals.

Scores are numbers in 0..1; a *verdict* is ``score >= threshold``. Rows where
either score is missing (an unscored LLM reply, an unlabelled item) are dropped
pair by pair and the number kept is reported as ``n``. A statistic that is not
defined on the data (constant scores, fewer than two items) is NaN with a
reason; nothing here raises on degenerate data.

The point estimates equal scikit-learn's ``cohen_kappa_score``, scipy's
``spearmanr`` / ``kendalltau`` and the ``krippendorff`` package's ``alpha`` (the
tests check this on random data); they are computed in closed form here so the
bootstrap can be vectorised and so that continuous scores do not blow up the
``krippendorff`` package's coincidence matrix.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._format import fmt, with_interval
from ._validate import check_confidence

__all__ = [
    "BEST",
    "COUNT_COLUMNS",
    "CV_FOLDS",
    "GRADED_STATISTICS",
    "HUMAN_COUNT_COLUMNS",
    "STATISTICS",
    "STATISTIC_FUNCTIONS",
    "Estimate",
    "GroupedCorrelation",
    "ThresholdChoice",
    "as_float_array",
    "bootstrap_ci",
    "choose_threshold",
    "finite_or_nan",
    "graded_estimates",
    "grouped_correlation",
    "paired",
    "parse_scale",
    "threshold_sweep",
    "to_scale",
    "undefined_reasons",
]

STATISTICS: tuple[str, ...] = (
    "percent_agreement",
    "cohen_kappa",
    "alpha_interval",
    "alpha_nominal",
    "spearman",
    "kendall",
    "mean_abs_diff",
)
#: The verdict counts of a row, read from ``judge_a``'s side against ``judge_b`` (the reference rater):
#: ``judge_yes_ref_no`` = items judge_a said yes to and judge_b no.
COUNT_COLUMNS = ("judge_yes_ref_yes", "judge_yes_ref_no", "judge_no_ref_yes", "judge_no_ref_no")
#: The same counts on a row whose ``judge_b`` is a human label column (blank on rows of two machine judges).
HUMAN_COUNT_COLUMNS = ("judge_yes_human_yes", "judge_yes_human_no", "judge_no_human_yes", "judge_no_human_no")
#: Statistics on the labels' own rating scale (``pair_agreement(..., scale=(1, 5))``): each side's
#: scores in 0..1 are put on the scale by :func:`to_scale` (a machine judge's score binned, a label
#: given on the scale back to its rating) and compared as ratings.
GRADED_STATISTICS: tuple[str, ...] = ("scale_kappa_quadratic", "scale_alpha_ordinal", "scale_alpha_interval")
_MAX_BOOT_CELLS = 4_000_000  # resampled values held in memory at once


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap interval.

    Parameters
    ----------
    value : float
        The statistic.
    low : float, default NaN
        The interval's lower end.
    high : float, default NaN
        Its upper end.
    reason : str, optional
        Why ``value`` is NaN, or, beside a value without an interval, why there is no interval (e.g. too
        few conversations to resample).
    """

    value: float
    low: float = math.nan
    high: float = math.nan
    reason: str | None = None

    def __float__(self) -> float:
        return float(self.value)

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    def __str__(self) -> str:
        if not self.defined:
            return f"nan ({self.reason})" if self.reason else "nan"
        text = with_interval(self.value, self.low, self.high)
        return f"{text} ({self.reason})" if self.reason and math.isnan(self.low) else text


def as_float_array(values: Any, name: str) -> np.ndarray:
    """Scores as a one-dimensional float array, anything that is not a number as NaN.

    Parameters
    ----------
    values : array-like or pandas.Series
        The scores (a Series is read with ``pd.to_numeric(errors="coerce")``, so text and missing values
        become NaN).
    name : str
        What to call them in a message.

    Returns
    -------
    numpy.ndarray
        A float array.

    Raises
    ------
    ValidationError
        When the values are not one-dimensional.
    """
    if isinstance(values, pd.Series):
        values = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def paired(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows where both are finite, and how many were dropped.

    Parameters
    ----------
    a : array-like of float
        One rater's scores.
    b : array-like of float
        The other's.

    Returns
    -------
    tuple of (ndarray, ndarray, int)
        The kept scores of each, and how many rows were dropped.

    Examples
    --------
    >>> paired([0.1, float("nan"), 1.0], [1.0, 0.0, None])
    (array([0.1]), array([1.]), 2)
    """
    x = as_float_array(a, "a")
    y = as_float_array(b, "b")
    if len(x) != len(y):
        raise ValidationError(f"the two score arrays differ in length ({len(x)} vs {len(y)})")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep], int((~keep).sum())


# --- statistics over a batch of samples: each takes (k, n) arrays, returns (k,) --------------


def _nan_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast(num, den).shape, np.nan)
    ok = den != 0
    np.divide(num, den, out=out, where=ok)
    return out


def _percent_agreement(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    return (va == vb).mean(axis=1)


def _cohen_kappa(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    po = (va == vb).mean(axis=1)
    pa = va.mean(axis=1)
    pb = vb.mean(axis=1)
    pe = pa * pb + (1 - pa) * (1 - pb)
    # 1 - pe is 0 only when both judges give one and the same verdict everywhere.
    den = 1 - pe
    den = np.where(np.isclose(den, 0.0, atol=1e-15), 0.0, den)
    return _nan_div(po - pe, den)


def _alpha_interval(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    n = a.shape[1]
    big_n = 2 * n
    d_obs = ((a - b) ** 2).mean(axis=1)
    values = np.concatenate([a, b], axis=1)
    ss = ((values - values.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    d_exp = 2 * ss / (big_n - 1) if big_n > 1 else np.zeros_like(ss)
    d_exp = np.where(np.isclose(d_exp, 0.0, atol=1e-15), 0.0, d_exp)
    return 1 - _nan_div(d_obs, d_exp)


def _alpha_nominal(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    n = va.shape[1]
    big_n = 2 * n
    d_obs = (va != vb).mean(axis=1)
    n1 = va.sum(axis=1) + vb.sum(axis=1)
    n0 = big_n - n1
    d_exp = 2.0 * n1 * n0 / (big_n * (big_n - 1)) if big_n > 1 else np.zeros(len(va))
    return 1 - _nan_div(d_obs, d_exp)


def _rank_rows(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x, axis=1)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    num = (xc * yc).sum(axis=1)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    den = np.where(den <= 1e-12 * max(1.0, float(np.max(den, initial=0.0))), 0.0, den)
    return np.clip(_nan_div(num, den), -1.0, 1.0)


def _spearman(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    return _pearson_rows(_rank_rows(a), _rank_rows(b))


_KENDALL_PAIRS_PER_CHUNK = 4_000_000  # sign matrices held at once by the vectorised tau-b (about 32 MB each)


def _kendall(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair (NaN when either row is constant), as ``scipy.stats.kendalltau``.

    Short rows (a bootstrap of a few hundred items) are computed at once from the pairs' sign
    matrices: tau-b = (C - D) / sqrt((n0 - n1) (n0 - n2)) (Kendall 1945), where n0 counts the pairs,
    n1 and n2 the pairs tied in each row. Longer rows go through scipy one at a time.
    """
    n = a.shape[1]
    if 1 < n <= 400:
        out = np.full(len(a), np.nan)
        chunk = max(1, _KENDALL_PAIRS_PER_CHUNK // (n * n))
        n0 = n * (n - 1) / 2
        for start in range(0, len(a), chunk):
            x, y = a[start:start + chunk], b[start:start + chunk]
            sx = np.sign(x[:, :, None] - x[:, None, :])
            sy = np.sign(y[:, :, None] - y[:, None, :])
            concordance = (sx * sy).sum(axis=(1, 2)) / 2  # C - D: each pair is counted twice
            tied_x = ((sx == 0).sum(axis=(1, 2)) - n) / 2  # the diagonal is not a pair
            tied_y = ((sy == 0).sum(axis=(1, 2)) - n) / 2
            den = np.sqrt((n0 - tied_x) * (n0 - tied_y))
            with np.errstate(invalid="ignore", divide="ignore"):
                tau = np.where(den > 0, concordance / np.where(den > 0, den, 1.0), np.nan)
            out[start:start + chunk] = np.clip(tau, -1.0, 1.0)
        return out
    from scipy.stats import kendalltau

    out = np.full(len(a), np.nan)
    for i in range(len(a)):
        x, y = a[i], b[i]
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out[i] = kendalltau(x, y).statistic
    return out


def _mean_abs_diff(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray) -> np.ndarray:
    return np.abs(a - b).mean(axis=1)


#: Each statistic of :data:`STATISTICS` as a function of ``(a, b, va, vb)``: ``(k, n)`` arrays of scores and of
#: pass/fail verdicts, one row per resample, returning ``(k,)`` values (what :func:`bootstrap_ci` resamples).
STATISTIC_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "percent_agreement": _percent_agreement,
    "cohen_kappa": _cohen_kappa,
    "alpha_interval": _alpha_interval,
    "alpha_nominal": _alpha_nominal,
    "spearman": _spearman,
    "kendall": _kendall,
    "mean_abs_diff": _mean_abs_diff,
}


# --- statistics on a rating scale: each takes (k, n) arrays of step indices 0..K-1 -----------------


def to_scale(scores: Any, scale: tuple[int, int]) -> np.ndarray:
    """Scores in 0..1 put on the rating scale ``(low, high)``: ``low + floor(s * (high - low) + 0.5)``.

    The documented binning rule of graded agreement: a machine judge's score ``s`` goes to the
    nearest step of the scale (halves round up; 1..5: 0-0.124 -> 1, 0.125-0.374 -> 2, ...,
    0.875-1 -> 5), and a label given on the scale (stored as ``(rating - low) / (high - low)`` by
    :func:`~llm_connect.stats.labels.parse_labels`) comes back to its own rating (a non-integer
    rating, such as a mean of raters, to the nearest step). NaN stays NaN.

    Parameters
    ----------
    scores : array-like of float
        Scores in 0..1.
    scale : tuple of (int, int)
        ``(low, high)``.

    Returns
    -------
    ndarray of float
        The ratings.

    Examples
    --------
    >>> to_scale([0.0, 0.3, 1.0], (1, 5)).tolist()
    [1.0, 2.0, 5.0]
    """
    low, high = scale
    x = np.clip(as_float_array(scores, "scores"), 0.0, 1.0)
    return low + np.floor(x * (high - low) + 0.5)


def _confusion_batch(ca: np.ndarray, cb: np.ndarray, k: int) -> np.ndarray:
    """``(m, K, K)`` counts of each (a-step, b-step) in each of the ``m`` rows."""
    m = ca.shape[0]
    flat = (np.arange(m)[:, None] * k * k + ca * k + cb).ravel()
    return np.bincount(flat, minlength=m * k * k).reshape(m, k, k).astype(float)


def _kappa_quadratic(ca: np.ndarray, cb: np.ndarray, k: int) -> np.ndarray:
    """Cohen's (1968) weighted kappa with quadratic weights ``(i - j)^2``, as
    ``sklearn.metrics.cohen_kappa_score(a, b, weights="quadratic", labels=<the scale's steps>)``."""
    cm = _confusion_batch(ca, cb, k)
    n = cm.sum(axis=(1, 2))
    steps = np.arange(k, dtype=float)
    w = (steps[:, None] - steps[None, :]) ** 2
    expected = cm.sum(axis=2)[:, :, None] * cm.sum(axis=1)[:, None, :] / n[:, None, None]
    num = (w * cm).sum(axis=(1, 2))
    den = (w * expected).sum(axis=(1, 2))
    den = np.where(np.isclose(den, 0.0, atol=1e-12), 0.0, den)
    return 1 - _nan_div(num, den)


def _alpha_on_steps(ca: np.ndarray, cb: np.ndarray, k: int, level: str) -> np.ndarray:
    """Krippendorff's alpha of two raters with no missing values, from the coincidence matrix
    (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"): ``1 - (N - 1) * sum(o * d) /
    sum(n_c n_k d)``; ``d`` is ``(c - k)^2`` (interval) or the ordinal metric
    ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2``. Equals ``krippendorff.alpha(level_of_measurement=...)``."""
    cm = _confusion_batch(ca, cb, k)
    o = cm + cm.transpose(0, 2, 1)
    nc = o.sum(axis=2)  # (m, K): how often each step occurs among the 2n values
    big_n = nc.sum(axis=1)
    steps = np.arange(k)
    if level == "interval":
        d = np.broadcast_to(((steps[:, None] - steps[None, :]) ** 2).astype(float), o.shape)
    else:
        cum = np.cumsum(nc, axis=1)
        lo, hi = np.minimum.outer(steps, steps), np.maximum.outer(steps, steps)
        between = cum[:, hi] - cum[:, lo] + nc[:, lo]
        d = (between - (nc[:, :, None] + nc[:, None, :]) / 2) ** 2
    num = (o * d).sum(axis=(1, 2))
    den = (nc[:, :, None] * nc[:, None, :] * d).sum(axis=(1, 2))
    den = np.where(np.isclose(den, 0.0, atol=1e-12), 0.0, den)
    return 1 - (big_n - 1) * _nan_div(num, den)


_GRADED_FUNCS: dict[str, Callable[[np.ndarray, np.ndarray, int], np.ndarray]] = {
    "scale_kappa_quadratic": _kappa_quadratic,
    "scale_alpha_ordinal": lambda ca, cb, k: _alpha_on_steps(ca, cb, k, "ordinal"),
    "scale_alpha_interval": lambda ca, cb, k: _alpha_on_steps(ca, cb, k, "interval"),
}


def graded_estimates(
    a: np.ndarray, b: np.ndarray, scale: tuple[int, int], *, n_boot: int = 1000, confidence: float = 0.95,
    seed: int | None = 0, cluster: Any = None,
) -> dict[str, Estimate]:
    """:data:`GRADED_STATISTICS` of two paired score arrays (0..1, no NaN) on ``scale``, with bootstrap intervals.

    Parameters
    ----------
    a : ndarray
        One rater's scores.
    b : ndarray
        The other's.
    scale : tuple of (int, int)
        The rating scale ``(low, high)``.
    n_boot : int, default 1000
        Bootstrap resamples.
    confidence : float, default 0.95
        The intervals' confidence level.
    seed : int, optional
        Seeds the bootstrap (default 0).
    cluster : array-like, optional
        One cluster id per row, resampled whole; see :func:`bootstrap_ci`.

    Returns
    -------
    dict of str to Estimate
        Each statistic.
    """
    low, high = scale
    k = high - low + 1
    ca = (to_scale(a, scale) - low).astype(int)
    cb = (to_scale(b, scale) - low).astype(int)
    out: dict[str, Estimate] = {}
    n = len(ca)
    for stat, func in _GRADED_FUNCS.items():
        if n < 2:
            out[stat] = Estimate(math.nan, reason=f"only {n} paired rating{'s' if n != 1 else ''} (need at least 2)")
            continue
        value = finite_or_nan(float(func(ca[None], cb[None], k)[0]))
        if math.isnan(value):
            out[stat] = Estimate(math.nan, reason="every rating on the scale is the same (no variation to agree on)"
                                 if len(set(ca) | set(cb)) == 1 else "undefined on this data")
            continue
        lo, hi = bootstrap_ci(lambda p, q, f=func: f(p, q, k), ca, cb, n_boot=n_boot, confidence=confidence,
                              seed=seed, cluster=cluster)
        out[stat] = Estimate(value, finite_or_nan(float(lo)), finite_or_nan(float(hi)))
    return out


def undefined_reasons(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray,
                      names: tuple[str, str]) -> dict[str, str]:
    """Why each statistic of :data:`STATISTICS` is undefined on paired scores.

    Parameters
    ----------
    a, b : numpy.ndarray
        The two raters' scores on the items both scored.
    va, vb : numpy.ndarray
        Their pass/fail verdicts (booleans) on the same items.
    names : tuple of (str, str)
        The two raters' names, for the reasons.

    Returns
    -------
    dict of str to str
        Only the statistics that are undefined, each with the reason (too few items, a constant score, one
        verdict everywhere); a statistic mapped to ``""`` is defined.
    """
    n = len(a)
    if n < 2:
        reason = f"only {n} paired score{'s' if n != 1 else ''} (need at least 2)"
        return dict.fromkeys(STATISTICS, reason) | ({} if n == 0 else {"percent_agreement": "", "mean_abs_diff": ""})
    out: dict[str, str] = {}
    const_a, const_b = np.ptp(a) == 0, np.ptp(b) == 0
    if const_a or const_b:
        who = " and ".join(name for name, c in zip(names, (const_a, const_b), strict=True) if c)
        out["spearman"] = out["kendall"] = f"{who} gave one constant score"
    if const_a and const_b and a[0] == b[0]:
        out["alpha_interval"] = "every score is the same value (no variation to agree on)"
    vconst_a, vconst_b = va.min() == va.max(), vb.min() == vb.max()
    if vconst_a and vconst_b and va[0] == vb[0]:
        out["cohen_kappa"] = out["alpha_nominal"] = (
            "both gave the same single verdict on every item (chance agreement is 1)"
        )
    return out


def finite_or_nan(x: float) -> float:
    """``x`` as a float when finite, else NaN (an infinity is never reported as a statistic).

    Parameters
    ----------
    x : float
        A value.

    Returns
    -------
    float
        ``float(x)``, or NaN for an infinite or NaN ``x``.
    """
    return float(x) if np.isfinite(x) else math.nan


def bootstrap_ci(
    statistic: Callable[..., np.ndarray],
    *arrays: np.ndarray,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    cluster: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals of a vectorised statistic.

    Parameters
    ----------
    statistic
        Takes the ``arrays`` resampled together (each ``(k, n)``) and returns ``(k,)`` or ``(k, m)``
        values.
    *arrays
        The data, one value per row each, resampled together.
    n_boot
        The number of resamples.
    confidence
        The intervals' level.
    seed
        The seed of :func:`numpy.random.default_rng` (the same seed gives the same intervals).
    cluster
        ``None`` (rows are independent: each resample draws ``n`` rows with replacement), or one
        cluster id per row (the conversation of each turn): each resample then draws the ``G``
        clusters with replacement and takes all their rows (the cluster bootstrap; Davison &
        Hinkley 1997, *Bootstrap Methods and their Application*, section 3.8), so the resamples'
        lengths vary; the statistic is called once per length. A missing id is a cluster of its
        own.

    Returns
    -------
    tuple of numpy.ndarray
        ``(low, high)`` (NaN where no resample gave a finite value, and with no rows, no resamples
        or fewer than 2 clusters). Resampling is done in chunks to bound memory.
    """
    confidence = check_confidence(confidence)
    n = len(arrays[0])
    if n == 0 or n_boot <= 0:
        return np.array(math.nan), np.array(math.nan)
    rng = np.random.default_rng(seed)
    if cluster is not None:
        samples = _cluster_resamples(statistic, arrays, cluster, n_boot, rng)
        if samples is None:
            return np.array(math.nan), np.array(math.nan)
    else:
        chunk = max(1, min(n_boot, _MAX_BOOT_CELLS // max(n, 1)))
        parts = []
        done = 0
        while done < n_boot:
            k = min(chunk, n_boot - done)
            idx = rng.integers(0, n, size=(k, n))
            parts.append(np.asarray(statistic(*(arr[idx] for arr in arrays)), dtype=float))
            done += k
        samples = np.concatenate(parts, axis=0)
    tail = (1 - confidence) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, which is the answer
        low = np.nanpercentile(samples, tail, axis=0)
        high = np.nanpercentile(samples, 100 - tail, axis=0)
    return low, high


def _cluster_resamples(statistic: Callable[..., np.ndarray], arrays: tuple[np.ndarray, ...], cluster: Any,
                       n_boot: int, rng: np.random.Generator) -> np.ndarray | None:
    """The statistic on ``n_boot`` cluster-bootstrap resamples (``None`` with fewer than 2 clusters).

    Each resample draws G cluster numbers with replacement; its rows are the drawn clusters' rows,
    concatenated. Resamples are sorted by length so that those of one length are stacked into one
    ``(k, length)`` call of ``statistic``; the values are returned in the order drawn."""
    from .clusters import cluster_codes

    codes = cluster_codes(cluster)
    n = len(arrays[0])
    if len(codes) != n:
        raise ValidationError(f"cluster has {len(codes)} ids for {n} rows")
    n_clusters = int(codes.max()) + 1
    if n_clusters < 2:
        return None
    order = np.argsort(codes, kind="stable")  # the rows of cluster c are order[starts[c]: starts[c] + sizes[c]]
    sizes = np.bincount(codes, minlength=n_clusters)
    starts = np.cumsum(sizes) - sizes
    chunk = max(1, min(n_boot, _MAX_BOOT_CELLS // max(n, 1)))
    parts: list[np.ndarray] = []
    done = 0
    while done < n_boot:
        k = min(chunk, n_boot - done)
        draws = rng.integers(0, n_clusters, size=(k, n_clusters))
        lengths = sizes[draws].sum(axis=1)
        by_length = np.argsort(lengths, kind="stable")
        drawn = draws[by_length].ravel()
        sz = sizes[drawn]
        seg = np.repeat(np.cumsum(sz) - sz, sz)
        flat = order[np.repeat(starts[drawn], sz) + (np.arange(int(sz.sum())) - seg)]
        sorted_lengths = lengths[by_length]
        offsets = np.cumsum(sorted_lengths) - sorted_lengths
        values: np.ndarray | None = None
        first = 0
        for length, count in zip(*np.unique(sorted_lengths, return_counts=True), strict=True):
            idx = flat[offsets[first]: offsets[first] + count * length].reshape(count, length)
            got = np.asarray(statistic(*(arr[idx] for arr in arrays)), dtype=float)
            if values is None:
                values = np.full((k, *got.shape[1:]), np.nan)
            values[by_length[first: first + count]] = got
            first += count
        assert values is not None
        parts.append(values)
        done += k
    return np.concatenate(parts, axis=0)


def parse_scale(scale: Any) -> tuple[int, int] | None:
    """A declared rating scale as ``(low, high)`` integers: ``(1, 5)``, ``"1-5"`` or ``"1..5"`` (``None``: none).

    The scale's steps are the integers ``low..high`` (``high > low``); a
    :class:`~llm_connect.errors.ValidationError` says what to write otherwise.

    Parameters
    ----------
    scale : tuple of (int, int) or str or None
        The declared scale.

    Returns
    -------
    tuple of (int, int) or None
        ``(low, high)``, or ``None`` for none.

    Raises
    ------
    ValidationError
        Anything else.

    Examples
    --------
    >>> parse_scale("1-5"), parse_scale(None)
    ((1, 5), None)
    """
    if scale is None:
        return None
    parts: Any = scale
    if isinstance(scale, str):
        m = re.fullmatch(r"\s*(-?\d+)\s*(?:-|\.\.|:)\s*(-?\d+)\s*", scale)
        if not m:
            raise ValidationError(f"cannot read the scale {scale!r}; write LOW-HIGH with integers, e.g. 1-5")
        parts = (m.group(1), m.group(2))
    try:
        low, high = (int(v) for v in parts)
        exact = all(float(v) == int(v) for v in parts)
    except (TypeError, ValueError):
        raise ValidationError(f"a scale is two integers (low, high), e.g. (1, 5); got {scale!r}") from None
    if not exact or high <= low:
        raise ValidationError(f"a scale is two integers low < high, e.g. (1, 5); got {scale!r}")
    return low, high


def threshold_sweep(
    a: Any,
    b: Any,
    *,
    thresholds: Iterable[float] | None = None,
    reference_threshold: float | None = 0.5,
) -> pd.DataFrame:
    """Percent agreement and Cohen's kappa as ``a``'s threshold moves.

    ``b`` is the reference (human labels, exact match): its verdicts use
    ``reference_threshold``, or the moving threshold too when that is ``None``.
    One row per threshold: ``threshold``, ``n``, ``percent_agreement``,
    ``cohen_kappa``, ``positive_rate`` (share of ``a``'s "yes"), ``reference_rate``.

    Parameters
    ----------
    a : array-like of float
        The judge's scores.
    b : array-like of float
        The reference's.
    thresholds : iterable of float, optional
        The thresholds (default 0.05, 0.10, ..., 0.95).
    reference_threshold : float or None, default 0.5
        The reference's verdict threshold; ``None``: the moving one.

    Returns
    -------
    DataFrame
        One row per threshold (above).

    Examples
    --------
    >>> threshold_sweep([0.2, 0.8, 0.6, 0.4], [0, 1, 1, 0], thresholds=[0.5])[["threshold", "cohen_kappa"]]
       threshold  cohen_kappa
    0        0.5          1.0
    """
    x, y, _ = paired(a, b)
    ts = np.round(np.linspace(0.05, 0.95, 19), 10) if thresholds is None else np.asarray(list(thresholds), float)
    rows = []
    for t in ts:
        vx = x >= t
        vy = y >= (t if reference_threshold is None else reference_threshold)
        if len(x):
            pa = float(_percent_agreement(x[None], y[None], vx[None], vy[None])[0])
            kappa = finite_or_nan(float(_cohen_kappa(x[None], y[None], vx[None], vy[None])[0]))
            pos, ref = float(vx.mean()), float(vy.mean())
        else:
            pa = kappa = pos = ref = math.nan
        rows.append({"threshold": float(t), "n": len(x), "percent_agreement": pa, "cohen_kappa": kappa,
                     "positive_rate": pos, "reference_rate": ref})
    return pd.DataFrame(rows)


CORRELATION_METHODS = ("kendall", "spearman", "pearson")
CORRELATION_LEVELS = ("system", "document")


@dataclass(frozen=True)
class GroupedCorrelation:
    """A correlation between a judge and people at the system or document level.

    Parameters
    ----------
    level : {"system", "document"}
        The level.
    group : str
        The column grouped by.
    method : {"kendall", "spearman", "pearson"}
        The correlation.
    value : float
        The correlation (NaN with ``reason`` when undefined).
    n_groups : int
        The groups with at least one paired score.
    n_used : int
        The groups that entered the figure (the systems correlated, or the documents whose own correlation
        is defined and averaged).
    reason : str, optional
        Why ``value`` is NaN.
    """

    level: str
    group: str
    method: str
    value: float
    n_groups: int
    n_used: int
    reason: str | None = None


def _correlation(x: np.ndarray, y: np.ndarray, method: str) -> float:
    from scipy import stats

    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "kendall":
            return finite_or_nan(float(stats.kendalltau(x, y).statistic))
        if method == "spearman":
            return finite_or_nan(float(stats.spearmanr(x, y).statistic))
        return finite_or_nan(float(stats.pearsonr(x, y).statistic))


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name in frame.columns:
        return frame[name]
    if f"score_{name}" in frame.columns:
        return frame[f"score_{name}"]
    raise ValidationError(f"no column {name!r} (nor score_{name}) in the frame; it has {list(frame.columns)}")


def grouped_correlation(
    frame: pd.DataFrame,
    judge: str,
    human: str,
    *,
    group: str,
    level: str = "system",
    method: str = "kendall",
) -> GroupedCorrelation:
    """The judge's correlation with people per system or per document, as the summarisation
    literature reports it (Fabbri et al. 2021, "SummEval: Re-evaluating Summarization
    Evaluation", TACL 9; Deutsch, Dror & Roth 2022, "Re-Examining System-Level Correlations of
    Automatic Summarization Evaluation Metrics", NAACL).

    ``level="system"``: the mean judge score and the mean human score of each value of ``group``
    (a system, e.g. ``candidate_model``), over its rows where both are present, correlated across
    the systems. ``level="document"`` (SummEval's summary level): for each value of ``group`` (a
    document or source, e.g. ``prompt``), the correlation across its rows (the systems' outputs
    for that document), averaged over the documents where it is defined (at least two rows, and
    neither side constant). ``judge`` and ``human`` name columns (or ``score_<name>`` columns);
    ``method``: ``kendall`` (tau-b), ``spearman`` or ``pearson``, as scipy computes them.

    Parameters
    ----------
    frame : DataFrame
        The scores.
    judge : str
        The judge's column.
    human : str
        People's column.
    group : str
        The system or document column.
    level : {"system", "document"}, default "system"
        The level (above).
    method : {"kendall", "spearman", "pearson"}, default "kendall"
        The correlation.

    Returns
    -------
    GroupedCorrelation
        The correlation and how many groups it rests on.
    """
    if level not in CORRELATION_LEVELS:
        raise ValidationError(f"level must be one of {CORRELATION_LEVELS}, got {level!r}")
    if method not in CORRELATION_METHODS:
        raise ValidationError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")
    if group not in frame.columns:
        raise ValidationError(f"no group column {group!r} in the frame; it has {list(frame.columns)}")
    data = pd.DataFrame({
        "g": frame[group].to_numpy(),
        "j": pd.to_numeric(_column(frame, judge), errors="coerce").to_numpy(dtype=float),
        "h": pd.to_numeric(_column(frame, human), errors="coerce").to_numpy(dtype=float),
    })
    data = data[np.isfinite(data["j"]) & np.isfinite(data["h"]) & data["g"].notna()]
    groups = data.groupby("g", sort=True)
    n_groups = int(groups.ngroups)
    if level == "system":
        means = groups[["j", "h"]].mean()
        value = _correlation(means["j"].to_numpy(), means["h"].to_numpy(), method)
        reason = None
        if math.isnan(value):
            reason = (f"only {n_groups} system(s) with paired scores (need at least 2)" if n_groups < 2
                      else "the systems' mean scores do not vary on one side")
        return GroupedCorrelation(level, group, method, value, n_groups, n_groups if reason is None else 0, reason)
    per = [_correlation(g["j"].to_numpy(), g["h"].to_numpy(), method) for _, g in groups]
    defined = [v for v in per if not math.isnan(v)]
    if not defined:
        return GroupedCorrelation(level, group, method, math.nan, n_groups, 0,
                                  "no document has two rows with varying scores on both sides")
    return GroupedCorrelation(level, group, method, float(np.mean(defined)), n_groups, len(defined))


BEST = "best"
"""The threshold that asks for the kappa-maximising threshold, chosen by cross-validation."""
CV_FOLDS = 5
_THRESHOLD_GRID = np.round(np.arange(1, 101) / 100, 10)  # 0.01, 0.02, ..., 1.00


@dataclass(frozen=True)
class ThresholdChoice:
    """A judge's threshold chosen for the best Cohen's kappa against a reference, by k-fold CV.

    Parameters
    ----------
    judge : str
        The judge's name.
    reference : str
        The reference's name.
    value : float
        The threshold chosen on every labelled row (the one to use later).
    n : int
        The labelled rows.
    folds : int
        The folds.
    fold_thresholds : tuple of float, default ()
        The threshold chosen on the other folds, for each fold.
    verdicts : ndarray, optional
        Per input row, the judge's out-of-fold verdict (the fold's rows judged at the threshold chosen
        without them; False where a score or label is missing), from which every verdict statistic
        against the reference is computed, so that none is measured on the rows that chose it.
    reason : str, optional
        Set (and ``verdicts`` is ``None``) when there were too few labelled rows to cross-validate:
        ``value`` is then the ``fallback`` threshold.
    """

    judge: str
    reference: str
    value: float
    n: int
    folds: int
    fold_thresholds: tuple[float, ...] = ()
    verdicts: np.ndarray | None = field(default=None, compare=False, repr=False)
    reason: str | None = None

    def describe(self) -> str:
        """How the threshold was chosen, in words.

        Returns
        -------
        str
            E.g. "best for kappa against human, by 5-fold cross-validation on 120 labelled rows; verdict
            statistics against it are out of fold".
        """
        if self.reason:
            return f"best not chosen ({self.reason}); fixed {fmt(self.value)}"
        return (f"best for kappa against {self.reference}, by {self.folds}-fold cross-validation on {self.n} "
                "labelled rows; verdict statistics against it are out of fold")


def _best_threshold(x: np.ndarray, y: np.ndarray, reference_threshold: float) -> float:
    """The threshold of ``_THRESHOLD_GRID`` with the highest kappa of ``x >= t`` against ``y >= reference_threshold``;
    ties go to the threshold nearest 0.5 (then the lower)."""
    vx = x[None, :] >= _THRESHOLD_GRID[:, None]
    vy = np.broadcast_to(y >= reference_threshold, vx.shape)
    kappa = _cohen_kappa(vx, vy, vx, vy)
    kappa = np.where(np.isfinite(kappa), kappa, -np.inf)
    best = np.flatnonzero(np.isclose(kappa, kappa.max(), rtol=0, atol=1e-12))
    order = sorted(best, key=lambda i: (abs(_THRESHOLD_GRID[i] - 0.5), _THRESHOLD_GRID[i]))
    return float(_THRESHOLD_GRID[order[0]])


def choose_threshold(
    judge: Any,
    reference: Any,
    *,
    judge_name: str = "judge",
    reference_name: str = "human",
    reference_threshold: float = 0.5,
    folds: int = CV_FOLDS,
    seed: int | None = 0,
    fallback: float = 0.5,
    cluster: Any = None,
) -> ThresholdChoice:
    """The kappa-maximising threshold of ``judge`` against ``reference`` and its out-of-fold verdicts.

    The labelled rows (both scores present) are shuffled (seeded) into ``folds`` folds; for each
    fold the threshold (0.01, 0.02, ..., 1.00; ties to the one nearest 0.5) with the best Cohen's
    kappa on the *other* folds judges that fold's rows. Kappa computed from these out-of-fold
    verdicts is an honest estimate of the judge's agreement at a threshold chosen this way (the
    usual cross-validation estimate; Hastie, Tibshirani & Friedman 2009, *The Elements of
    Statistical Learning*, 7.10, on selecting on the same rows one reports). The threshold
    reported for later use is the one chosen on all labelled rows. Fewer than ``2 * folds``
    labelled rows: no choice is made (``reason`` says why) and ``fallback`` is kept.

    ``cluster`` (one id per row, e.g. the conversation of each turn; ``None``: independent rows):
    the folds are made of whole clusters (the clusters shuffled, seeded, and dealt into folds), so
    no conversation has turns on both sides of a fold; fewer clusters than folds among the labelled
    rows: no choice is made.

    Parameters
    ----------
    judge : array-like of float
        The judge's scores.
    reference : array-like of float
        The reference's (people's labels).
    judge_name : str, default "judge"
        Named in the result.
    reference_name : str, default "human"
        Named in the result.
    reference_threshold : float, default 0.5
        The reference's verdict threshold.
    folds : int, default 5
        The folds.
    seed : int, optional
        Seeds the shuffle (default 0).
    fallback : float, default 0.5
        The threshold kept when no choice is made.
    cluster : array-like, optional
        One id per row (above).

    Returns
    -------
    ThresholdChoice
        The threshold and the out-of-fold verdicts.
    """
    if folds < 2:
        raise ValidationError(f"folds must be at least 2, got {folds}")
    a = as_float_array(judge, "judge")
    b = as_float_array(reference, "reference")
    if a.shape != b.shape:
        raise ValidationError(f"the two score arrays differ in length ({len(a)} vs {len(b)})")
    keep = np.flatnonzero(np.isfinite(a) & np.isfinite(b))
    n = len(keep)
    if n < 2 * folds or len(set(b[keep] >= reference_threshold)) < 2:
        why = (f"only {n} labelled rows, {2 * folds} needed for {folds}-fold cross-validation" if n < 2 * folds
               else f"{reference_name} gives one verdict on every labelled row")
        return ThresholdChoice(judge_name, reference_name, float(fallback), n, folds, reason=why)
    x, y = a[keep], b[keep]
    rng = np.random.default_rng(seed)
    if cluster is None:
        parts = np.array_split(rng.permutation(n), folds)
    else:
        from .clusters import cluster_codes

        codes = cluster_codes(cluster)
        if len(codes) != len(a):
            raise ValidationError(f"cluster has {len(codes)} ids for {len(a)} rows")
        _, codes = np.unique(codes[keep], return_inverse=True)
        n_clusters = int(codes.max()) + 1
        if n_clusters < folds:
            return ThresholdChoice(judge_name, reference_name, float(fallback), n, folds,
                                   reason=f"the {n} labelled rows come from only {n_clusters} clusters "
                                   f"(conversations), {folds} needed for {folds}-fold cross-validation by conversation")
        fold_of = np.empty(n_clusters, dtype=np.intp)
        for f, chunk in enumerate(np.array_split(rng.permutation(n_clusters), folds)):
            fold_of[chunk] = f
        parts = [np.flatnonzero(fold_of[codes] == f) for f in range(folds)]
    oof = np.zeros(n, dtype=bool)
    chosen = []
    for part in parts:
        train = np.setdiff1d(np.arange(n), part)
        t = _best_threshold(x[train], y[train], reference_threshold)
        chosen.append(t)
        oof[part] = x[part] >= t
    verdicts = np.zeros(len(a), dtype=bool)
    verdicts[keep] = oof
    return ThresholdChoice(judge_name, reference_name, _best_threshold(x, y, reference_threshold), n, folds,
                           tuple(chosen), verdicts)
