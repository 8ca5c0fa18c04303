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

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .._html import Markup, fmt, frame_html, join, with_interval

__all__ = [
    "COUNT_COLUMNS",
    "GRADED_STATISTICS",
    "HUMAN_COUNT_COLUMNS",
    "STATISTICS",
    "AgreementTable",
    "Estimate",
    "GroupedCorrelation",
    "PairAgreement",
    "ThresholdChoice",
    "agreement_table",
    "bootstrap_ci",
    "choose_threshold",
    "grouped_correlation",
    "pair_agreement",
    "threshold_sweep",
    "to_scale",
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
_LABELS = {
    "percent_agreement": "percent agreement",
    "cohen_kappa": "Cohen's kappa",
    "alpha_interval": "Krippendorff's alpha (interval)",
    "alpha_nominal": "Krippendorff's alpha (nominal, verdicts)",
    "spearman": "Spearman rho",
    "kendall": "Kendall tau-b",
    "mean_abs_diff": "mean absolute difference",
}
# Column names of the interval bounds in a table row.
_BOUND_PREFIX = {
    "percent_agreement": "agreement",
    "cohen_kappa": "kappa",
    "alpha_interval": "alpha_interval",
    "alpha_nominal": "alpha_nominal",
    "spearman": "spearman",
    "kendall": "kendall",
    "mean_abs_diff": "mad",
}
#: The old names of statistics, still read by ``pair[...]`` (the frame has the new ones only).
_STAT_ALIASES = {"krippendorff_alpha": "alpha_interval", "krippendorff_alpha_nominal": "alpha_nominal"}
#: The verdict counts of a row, read from ``judge_a``'s side against ``judge_b`` (the reference rater):
#: ``judge_yes_ref_no`` = items judge_a said yes to and judge_b no.
COUNT_COLUMNS = ("judge_yes_ref_yes", "judge_yes_ref_no", "judge_no_ref_yes", "judge_no_ref_no")
#: The same counts on a row whose ``judge_b`` is a human label column (blank on rows of two machine judges).
HUMAN_COUNT_COLUMNS = ("judge_yes_human_yes", "judge_yes_human_no", "judge_no_human_yes", "judge_no_human_no")
#: Statistics on the labels' own rating scale (``pair_agreement(..., scale=(1, 5))``): each side's
#: scores in 0..1 are put on the scale by :func:`to_scale` (a machine judge's score binned, a label
#: given on the scale back to its rating) and compared as ratings.
GRADED_STATISTICS: tuple[str, ...] = ("scale_kappa_quadratic", "scale_alpha_ordinal", "scale_alpha_interval")
_GRADED_LABELS = {
    "scale_kappa_quadratic": "Cohen's kappa, quadratic weights (on the scale)",
    "scale_alpha_ordinal": "Krippendorff's alpha (ordinal, on the scale)",
    "scale_alpha_interval": "Krippendorff's alpha (interval, on the scale)",
}
_MAX_BOOT_CELLS = 4_000_000  # resampled values held in memory at once


@dataclass(frozen=True)
class Estimate:
    """A statistic with its bootstrap interval; ``reason`` says why ``value`` is NaN."""

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
        return with_interval(self.value, self.low, self.high)


def _as_float_array(values: Any, name: str) -> np.ndarray:
    if isinstance(values, pd.Series):
        values = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def paired(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows where both are finite, and how many were dropped."""
    x = _as_float_array(a, "a")
    y = _as_float_array(b, "b")
    if len(x) != len(y):
        raise ValueError(f"the two score arrays differ in length ({len(x)} vs {len(y)})")
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


_STAT_FUNCS: dict[str, Callable[..., np.ndarray]] = {
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
    :func:`~llm_connect.calibration.parse_labels`) comes back to its own rating (a non-integer
    rating, such as a mean of raters, to the nearest step). NaN stays NaN.
    """
    low, high = scale
    x = np.clip(_as_float_array(scores, "scores"), 0.0, 1.0)
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
    seed: int | None = 0,
) -> dict[str, Estimate]:
    """:data:`GRADED_STATISTICS` of two paired score arrays (0..1, no NaN) on ``scale``, with bootstrap intervals."""
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
        value = _finite_or_nan(float(func(ca[None], cb[None], k)[0]))
        if math.isnan(value):
            out[stat] = Estimate(math.nan, reason="every rating on the scale is the same (no variation to agree on)"
                                 if len(set(ca) | set(cb)) == 1 else "undefined on this data")
            continue
        lo, hi = bootstrap_ci(lambda p, q, f=func: f(p, q, k), ca, cb, n_boot=n_boot, confidence=confidence,
                              seed=seed)
        out[stat] = Estimate(value, _finite_or_nan(float(lo)), _finite_or_nan(float(hi)))
    return out


def _reasons(a: np.ndarray, b: np.ndarray, va: np.ndarray, vb: np.ndarray, names: tuple[str, str]) -> dict[str, str]:
    """Why each statistic is undefined on this data (only the undefined ones appear)."""
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


def _finite_or_nan(x: float) -> float:
    return float(x) if np.isfinite(x) else math.nan


def bootstrap_ci(
    statistic: Callable[..., np.ndarray],
    *arrays: np.ndarray,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap intervals of a vectorised statistic.

    ``statistic`` takes the ``arrays`` resampled together (each ``(k, n)``) and returns
    ``(k,)`` or ``(k, m)`` values. Returns ``(low, high)`` arrays (NaN where no
    resample gave a finite value). Resampling is done in chunks to bound memory.
    """
    n = len(arrays[0])
    if n == 0 or n_boot <= 0:
        return np.array(math.nan), np.array(math.nan)
    rng = np.random.default_rng(seed)
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


@dataclass(frozen=True)
class PairAgreement:
    """How well two judges agree on the items both scored."""

    judge_a: str
    judge_b: str
    n: int
    n_missing: int
    threshold: float
    threshold_b: float
    estimates: Mapping[str, Estimate]
    confusion: pd.DataFrame = field(compare=False, repr=False)
    ceiling: bool = False
    confidence: float = 0.95
    n_boot: int = 1000

    human_b: bool = False
    #: The rating scale of the graded statistics (``None``: no scale declared).
    scale: tuple[int, int] | None = None
    #: Further columns of the row (threshold selection, grouped correlations), in order.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __getitem__(self, statistic: str) -> Estimate:
        return self.estimates[_STAT_ALIASES.get(statistic, statistic)]

    def counts(self) -> dict[str, int | None]:
        """The verdict counts read from ``judge_a``'s side against ``judge_b``, the reference rater.

        ``judge_yes_ref_no`` counts the items ``judge_a`` said yes to and ``judge_b`` no (see
        :data:`COUNT_COLUMNS`). When ``judge_b`` is a human label column (``human_b``), the same
        counts are also given as ``judge_yes_human_yes`` ... ``judge_no_human_no``; they are
        ``None`` (blank in a CSV) on a row of two machine judges.
        """
        cm = self.confusion.to_numpy()
        yy, yn, ny, nn = int(cm[1, 1]), int(cm[1, 0]), int(cm[0, 1]), int(cm[0, 0])
        out: dict[str, int | None] = {"judge_yes_ref_yes": yy, "judge_yes_ref_no": yn,
                                      "judge_no_ref_yes": ny, "judge_no_ref_no": nn}
        human = dict(zip(HUMAN_COUNT_COLUMNS, (yy, yn, ny, nn), strict=True))
        out.update({k: (v if self.human_b else None) for k, v in human.items()})
        return out

    def row(self) -> dict[str, Any]:
        """One flat row: the statistics, their interval bounds, the confusion counts and notes."""
        row: dict[str, Any] = {
            "judge_a": self.judge_a,
            "judge_b": self.judge_b,
            "n": self.n,
            "n_missing": self.n_missing,
            "threshold": self.threshold,
        }
        for stat in self._statistics():
            est = self.estimates[stat]
            row[stat] = est.value
            prefix = _BOUND_PREFIX.get(stat, stat)
            row[f"{prefix}_low"] = est.low
            row[f"{prefix}_high"] = est.high
        if self.scale is not None:
            row["scale"] = f"{self.scale[0]}-{self.scale[1]}"
        row.update(self.counts())
        row.update(self.extra)
        row["ceiling"] = self.ceiling
        notes: dict[str, list[str]] = {}
        for stat in self._statistics():
            reason = self.estimates[stat].reason
            if reason:
                notes.setdefault(reason, []).append(stat)
        row["note"] = "; ".join(f"{', '.join(stats)}: {reason}" for reason, stats in notes.items())
        return row

    def _statistics(self) -> list[str]:
        return [*STATISTICS, *(g for g in GRADED_STATISTICS if g in self.estimates)]

    def _repr_html_(self) -> str:
        title = f"{self.judge_a} vs {self.judge_b}" + (" (human ceiling)" if self.ceiling else "")
        labels = {**_LABELS, **_GRADED_LABELS}
        rows = [
            {"statistic": labels[s], "value": str(self.estimates[s]) if self.estimates[s].defined else "—",
             "note": self.estimates[s].reason or ""}
            for s in self._statistics()
        ]
        table = frame_html(pd.DataFrame(rows), caption=f"{title}: n={self.n} ({self.n_missing} dropped), "
                           f"threshold {fmt(self.threshold)}; {int(self.confidence * 100)}% bootstrap intervals")
        cm = self.confusion.copy()
        cm.insert(0, f"{self.judge_a} \\ {self.judge_b}", ["no", "yes"])
        return join([table, Markup("<br>"), frame_html(cm, caption=f"verdicts (rows: {self.judge_a})")])


def pair_agreement(
    a: Any,
    b: Any,
    *,
    judge_a: str = "a",
    judge_b: str = "b",
    threshold: float = 0.5,
    threshold_b: float | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    ceiling: bool = False,
    statistics: Sequence[str] = STATISTICS,
    human_b: bool = False,
    scale: Any = None,
    verdicts_a: Any = None,
) -> PairAgreement:
    """Every agreement statistic between two score arrays, with seeded bootstrap intervals.

    ``threshold`` turns ``a``'s scores into verdicts (``score >= threshold``), and
    ``threshold_b`` (default: the same) ``b``'s. Pairs with a missing score are
    dropped. ``statistics`` limits which intervals are bootstrapped (the others
    still get point estimates); Kendall's interval is the slowest.

    Read from ``judge_a``'s side: ``judge_b`` is the reference rater (the human labels
    on a judge-versus-people row), and the verdict counts are named so
    (``judge_yes_ref_no``: ``judge_a`` yes, ``judge_b`` no; see :meth:`PairAgreement.counts`).
    ``human_b`` says ``judge_b`` is a human label column: the counts are then also given
    as ``judge_yes_human_no`` and so on.

    ``scale=(low, high)`` (or ``"1-5"``) adds :data:`GRADED_STATISTICS`: both sides put on
    the rating scale by :func:`to_scale`, then quadratic-weighted kappa and Krippendorff's
    alpha at the ordinal and interval levels on the ratings. ``verdicts_a`` (booleans, one
    per item) replaces ``a >= threshold`` as ``judge_a``'s verdicts (out-of-fold verdicts of a
    threshold chosen by cross-validation; see :func:`choose_threshold`).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    unknown = set(statistics) - set(STATISTICS)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {list(STATISTICS)}")
    tb = threshold if threshold_b is None else threshold_b
    from ._runner import parse_scale

    bounds = parse_scale(scale)
    x, y, missing = paired(a, b)
    vx, vy = x >= threshold, y >= tb
    if verdicts_a is not None:
        given = np.asarray(verdicts_a, dtype=bool)
        keep = np.isfinite(_as_float_array(a, "a")) & np.isfinite(_as_float_array(b, "b"))
        if given.shape != keep.shape:
            raise ValueError(f"verdicts_a has {given.size} values for {keep.size} scores")
        vx = given[keep]
    n = len(x)
    reasons = _reasons(x, y, vx, vy, (judge_a, judge_b))
    estimates: dict[str, Estimate] = {}
    x2, y2, vx2, vy2 = x[None, :], y[None, :], vx[None, :], vy[None, :]
    for stat in STATISTICS:
        reason = reasons.get(stat)
        if reason:
            estimates[stat] = Estimate(math.nan, reason=reason)
            continue
        if n == 0:
            estimates[stat] = Estimate(math.nan, reason="no paired scores")
            continue
        value = _finite_or_nan(_STAT_FUNCS[stat](x2, y2, vx2, vy2)[0])
        if math.isnan(value):
            estimates[stat] = Estimate(math.nan, reason="undefined on this data")
            continue
        low = high = math.nan
        if n >= 2 and stat in statistics:
            lo, hi = bootstrap_ci(
                lambda p, q, vp, vq, f=_STAT_FUNCS[stat]: f(p, q, vp, vq),
                x, y, vx, vy, n_boot=n_boot, confidence=confidence, seed=seed,
            )
            low, high = _finite_or_nan(float(lo)), _finite_or_nan(float(hi))
        estimates[stat] = Estimate(value, low, high)
    if bounds is not None:
        estimates.update(graded_estimates(x, y, bounds, n_boot=n_boot, confidence=confidence, seed=seed))
    confusion = pd.DataFrame(
        [[int((~vx & ~vy).sum()), int((~vx & vy).sum())], [int((vx & ~vy).sum()), int((vx & vy).sum())]],
        index=pd.Index([False, True], name=f"{judge_a} verdict"),
        columns=pd.Index([False, True], name=f"{judge_b} verdict"),
    )
    return PairAgreement(
        judge_a=judge_a, judge_b=judge_b, n=n, n_missing=missing, threshold=float(threshold),
        threshold_b=float(tb), estimates=estimates, confusion=confusion, ceiling=ceiling,
        confidence=confidence, n_boot=n_boot, human_b=human_b, scale=bounds,
    )


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
    """
    x, y, _ = paired(a, b)
    ts = np.round(np.linspace(0.05, 0.95, 19), 10) if thresholds is None else np.asarray(list(thresholds), float)
    rows = []
    for t in ts:
        vx = x >= t
        vy = y >= (t if reference_threshold is None else reference_threshold)
        if len(x):
            pa = float(_percent_agreement(x[None], y[None], vx[None], vy[None])[0])
            kappa = _finite_or_nan(float(_cohen_kappa(x[None], y[None], vx[None], vy[None])[0]))
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

    ``value``: the correlation (NaN with ``reason`` when undefined); ``n_groups``: the groups
    with at least one paired score; ``n_used``: the groups that entered the figure (the systems
    correlated, or the documents whose own correlation is defined and averaged).
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
            return _finite_or_nan(float(stats.kendalltau(x, y).statistic))
        if method == "spearman":
            return _finite_or_nan(float(stats.spearmanr(x, y).statistic))
        return _finite_or_nan(float(stats.pearsonr(x, y).statistic))


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    if name in frame.columns:
        return frame[name]
    if f"score_{name}" in frame.columns:
        return frame[f"score_{name}"]
    raise ValueError(f"no column {name!r} (nor score_{name}) in the frame; it has {list(frame.columns)}")


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
    """
    if level not in CORRELATION_LEVELS:
        raise ValueError(f"level must be one of {CORRELATION_LEVELS}, got {level!r}")
    if method not in CORRELATION_METHODS:
        raise ValueError(f"method must be one of {CORRELATION_METHODS}, got {method!r}")
    if group not in frame.columns:
        raise ValueError(f"no group column {group!r} in the frame; it has {list(frame.columns)}")
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

    ``value``: the threshold chosen on every labelled row (the one to use later);
    ``fold_thresholds``: the threshold chosen on the other folds, for each fold;
    ``verdicts``: per input row, the judge's out-of-fold verdict (the fold's rows judged at the
    threshold chosen without them; False where a score or label is missing), from which every
    verdict statistic against the reference is computed, so that none is measured on the rows
    that chose it. ``reason`` is set (and ``verdicts`` is ``None``) when there were too few
    labelled rows to cross-validate: ``value`` is then the ``fallback`` threshold.
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
    """
    if folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    a = _as_float_array(judge, "judge")
    b = _as_float_array(reference, "reference")
    if a.shape != b.shape:
        raise ValueError(f"the two score arrays differ in length ({len(a)} vs {len(b)})")
    keep = np.flatnonzero(np.isfinite(a) & np.isfinite(b))
    n = len(keep)
    if n < 2 * folds or len(set(b[keep] >= reference_threshold)) < 2:
        why = (f"only {n} labelled rows, {2 * folds} needed for {folds}-fold cross-validation" if n < 2 * folds
               else f"{reference_name} gives one verdict on every labelled row")
        return ThresholdChoice(judge_name, reference_name, float(fallback), n, folds, reason=why)
    x, y = a[keep], b[keep]
    rng = np.random.default_rng(seed)
    parts = np.array_split(rng.permutation(n), folds)
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


def _judge_columns(scores: pd.DataFrame) -> list[str]:
    return [c[len("score_"):] for c in scores.columns if isinstance(c, str) and c.startswith("score_")]


@dataclass
class AgreementTable:
    """Agreement of every pair of judges; ``frame`` has one row per pair."""

    pairs: list[PairAgreement]
    threshold: float
    confidence: float
    #: The thresholds chosen by cross-validation (``thresholds={judge: "best"}``), by judge.
    chosen: dict[str, ThresholdChoice] = field(default_factory=dict)
    #: Every threshold given or chosen, by judge (the others use ``threshold``).
    thresholds: dict[str, float] = field(default_factory=dict)

    @property
    def frame(self) -> pd.DataFrame:
        rows = [p.row() for p in self.pairs]
        if not rows:
            return pd.DataFrame(columns=["judge_a", "judge_b", "n", *STATISTICS])
        return pd.DataFrame(rows)

    def pair(self, judge_a: str, judge_b: str) -> PairAgreement:
        for p in self.pairs:
            if (p.judge_a, p.judge_b) in ((judge_a, judge_b), (judge_b, judge_a)):
                return p
        raise KeyError(f"no pair {judge_a!r} / {judge_b!r}; pairs: {[(p.judge_a, p.judge_b) for p in self.pairs]}")

    def matrix(self, statistic: str = "cohen_kappa") -> pd.DataFrame:
        """A symmetric judge-by-judge frame of one statistic (diagonal NaN)."""
        if statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {statistic!r}; choose from {list(STATISTICS)}")
        names: list[str] = []
        for p in self.pairs:
            for name in (p.judge_a, p.judge_b):
                if name not in names:
                    names.append(name)
        out = pd.DataFrame(np.nan, index=pd.Index(names, name="judge"), columns=pd.Index(names, name="judge"))
        for p in self.pairs:
            out.loc[p.judge_a, p.judge_b] = out.loc[p.judge_b, p.judge_a] = p.estimates[statistic].value
        return out

    def _repr_html_(self) -> str:
        rows = []
        for p in self.pairs:
            graded = {
                label: with_interval(*_triple(p[stat])) if stat in p.estimates else ""
                for stat, label in (("scale_kappa_quadratic", "qw-kappa (scale)"),
                                    ("scale_alpha_ordinal", "alpha ordinal (scale)"))
            } if any(q.scale is not None for q in self.pairs) else {}
            rows.append({
                "judge_a": p.judge_a,
                "judge_b": p.judge_b + (" (ceiling)" if p.ceiling else ""),
                "n": p.n,
                "threshold": fmt(p.threshold) + (" (best, CV)" if p.judge_a in self.chosen
                                                 and self.chosen[p.judge_a].verdicts is not None else ""),
                "agreement": with_interval(*_triple(p["percent_agreement"])),
                "kappa": with_interval(*_triple(p["cohen_kappa"])),
                "alpha (interval)": with_interval(*_triple(p["alpha_interval"])),
                "spearman": with_interval(*_triple(p["spearman"])),
                "kendall": with_interval(*_triple(p["kendall"])),
                "MAD": with_interval(*_triple(p["mean_abs_diff"])),
                **graded,
                **{k: fmt(v) if isinstance(v, float) else v for k, v in p.extra.items()
                   if k.startswith(("system_", "document_", "n_systems", "n_documents", "threshold_selection"))},
                "note": p.row()["note"],
            })
        caption = (f"Agreement at threshold {fmt(self.threshold)} unless the row says another "
                   f"({int(self.confidence * 100)}% bootstrap intervals; each row read from judge_a's side "
                   "against judge_b, the reference)")
        return frame_html(pd.DataFrame(rows), caption=caption)


def _triple(est: Estimate) -> tuple[float, float, float]:
    return est.value, est.low, est.high


def agreement_table(
    scores: pd.DataFrame | Mapping[str, Any],
    judges: Sequence[str] | None = None,
    *,
    threshold: float = 0.5,
    thresholds: Mapping[str, float | str] | None = None,
    annotators: Sequence[str] = (),
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    statistics: Sequence[str] = STATISTICS,
    labels: Sequence[str] | None = None,
    scale: Any = None,
    groups: Mapping[str, str] | None = None,
    reference: str | None = None,
    folds: int = CV_FOLDS,
) -> AgreementTable:
    """Agreement of every pair of judges.

    Each row is read from ``judge_a``'s side against ``judge_b``: on a row of a machine
    judge and a human label column, ``judge_b`` is always the label column (``labels``:
    the human label columns; default ``human`` and the ``annotators``), and the verdict
    counts are named ``judge_yes_human_no`` and so on (see :meth:`PairAgreement.counts`).

    ``scores`` is a frame with a ``score_<judge>`` column per judge (as
    :func:`~llm_connect.calibration.score_items` makes) or a mapping of judge name to
    scores. ``thresholds`` overrides the threshold per judge: a number, or ``"best"``
    (:data:`BEST`) for the threshold with the best kappa against ``reference`` (default:
    ``human``, else the first label column), chosen by ``folds``-fold cross-validation
    (:func:`choose_threshold`): the row against the reference then holds out-of-fold
    verdict statistics, ``threshold`` the value chosen on all labelled rows, and
    ``threshold_selection`` / ``fold_thresholds`` say how (:attr:`AgreementTable.chosen`).
    Pairs of two ``annotators`` (independent human labels) are flagged ``ceiling``: their
    agreement is what a judge can hope to reach; other label columns (several rating
    dimensions) are separate targets, never a ceiling.

    ``scale=(low, high)``: the labels are ratings on that scale; rows against a label gain
    :data:`GRADED_STATISTICS`. ``groups``: ``{"system": column, "document": column}`` of a
    frame; rows against a label gain :func:`grouped_correlation` at that level
    (``system_kendall``, ``system_spearman``, ``n_systems``; ``document_kendall``, ...).
    """
    if isinstance(scores, pd.DataFrame):
        available = _judge_columns(scores)
        columns = {name: scores[f"score_{name}"] for name in available}
    else:
        columns = dict(scores)
        available = list(columns)
    names = list(judges) if judges is not None else available
    missing = [j for j in names if j not in columns]
    if missing:
        raise ValueError(f"no scores for judge(s) {missing}; have {available}")
    people = set(annotators) | {"human"} if labels is None else set(labels)
    per: dict[str, float] = {}
    wanted_best: list[str] = []
    for name, value in (thresholds or {}).items():
        if isinstance(value, str) and value.strip().lower() == BEST:
            wanted_best.append(name)
        else:
            try:
                per[name] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"the threshold of {name!r} must be a number or 'best', got {value!r}") from None
    ref = reference
    if ref is None:
        present = [n for n in names if n in people]
        ref = "human" if "human" in present else (present[0] if present else None)
    chosen: dict[str, ThresholdChoice] = {}
    for name in wanted_best:
        if name not in columns:
            raise ValueError(f"threshold 'best' for {name!r}, which has no scores; have {available}")
        if ref is None or ref not in columns:
            raise ValueError(f"threshold 'best' for {name!r} needs human labels to choose against; the data has none")
        if name in people:
            raise ValueError(f"threshold 'best' is for a judge, not for the label column {name!r}")
        picked_here = choose_threshold(columns[name], columns[ref], judge_name=name, reference_name=ref,
                                       reference_threshold=per.get(ref, threshold), folds=folds, seed=seed,
                                       fallback=threshold)
        chosen[name] = picked_here
        per[name] = picked_here.value
    if groups and not isinstance(scores, pd.DataFrame):
        raise ValueError("groups= needs scores as a frame holding the group columns")
    pairs = []
    for ja, jb in itertools.combinations(names, 2):
        if ja in people and jb not in people:  # a judge is read against people, never people against a judge
            ja, jb = jb, ja
        choice = chosen.get(ja)
        against_ref = choice is not None and jb == ref and choice.verdicts is not None
        pair = pair_agreement(
            columns[ja], columns[jb], judge_a=ja, judge_b=jb,
            threshold=per.get(ja, threshold), threshold_b=per.get(jb, threshold),
            n_boot=n_boot, confidence=confidence, seed=seed,
            ceiling=ja in annotators and jb in annotators, statistics=statistics, human_b=jb in people,
            scale=scale if jb in people else None, verdicts_a=choice.verdicts if against_ref and choice else None,
        )
        extra: dict[str, Any] = {}
        if chosen:
            picked = [c for c in (chosen.get(ja), chosen.get(jb)) if c is not None]
            extra["threshold_selection"] = "; ".join(
                f"{c.judge}: {c.describe()}" if not against_ref else c.describe() for c in picked) or "fixed"
            extra["fold_thresholds"] = " ".join(fmt(t) for t in choice.fold_thresholds) if against_ref and choice \
                else ""
        if groups and jb in people and isinstance(scores, pd.DataFrame):
            for level, column in groups.items():
                plural = "systems" if level == "system" else "documents"
                corr: GroupedCorrelation | None = None
                for method in ("kendall", "spearman"):
                    corr = grouped_correlation(scores, f"score_{ja}", f"score_{jb}", group=column, level=level,
                                               method=method)
                    extra[f"{level}_{method}"] = corr.value
                extra[f"n_{plural}"] = corr.n_used if corr is not None else 0
        if extra:
            pair = replace(pair, extra=extra)
        pairs.append(pair)
    return AgreementTable(pairs=pairs, threshold=threshold, confidence=confidence, chosen=chosen,
                          thresholds=per)
