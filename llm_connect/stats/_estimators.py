"""The estimators of :mod:`llm_connect.stats.estimates` in closed form, from per-group sums: the input checks,
the sufficient statistics (one pass over the rows), PPI, PPI++, active inference (IPW), Hájek and the human and
judge means, why a group has no estimate, and the honest bounds of a group whose labels are all equal
(:func:`equal_labels_interval`). The formulas and their references are in that module's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = ["CLUSTER_ROBUST", "EXACT_EQUAL", "HOEFFDING_EQUAL", "NORMAL", "STRATIFIED", "equal_labels_interval"]

_HINT = "label at least ~30 items"


# --- validation --------------------------------------------------------------------------------


def _check_frame(data: Any, needed: dict[str, str]) -> None:
    if not isinstance(data, pd.DataFrame):
        raise ValidationError(
            f"data must be a pandas DataFrame with one row per graded item, got {type(data).__name__}"
        )
    missing = [f"{role}={col!r}" for role, col in needed.items() if col not in data.columns]
    if missing:
        have = ", ".join(map(repr, list(data.columns)[:20]))
        raise ValidationError(f"no column for {', '.join(missing)} in the data; its columns are: {have}")


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _numeric(series: pd.Series, what: str) -> np.ndarray:
    """A column as floats (booleans as 0/1, missing as NaN); text is an error, not NaN."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    kind = pd.api.types.infer_dtype(series, skipna=True)
    if kind not in ("boolean", "integer", "floating", "mixed-integer-float", "decimal", "empty"):
        raise ValidationError(
            f"{what} must hold numbers (or booleans), found {kind} values such as {series.dropna().iloc[0]!r}; "
            "convert the column with pd.to_numeric first"
        )
    try:
        return series.to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} must hold numbers (or booleans): {exc}") from exc


def _scores(data: pd.DataFrame, column: str, role: str) -> np.ndarray:
    values = _numeric(data[column], f"the {role} column {column!r}")
    bad = ~np.isnan(values) & ~((values >= 0.0) & (values <= 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(
            f"the {role} column {column!r} must hold scores in 0..1 (booleans are fine); {int(bad.sum())} "
            f"value(s) are outside, e.g. {float(values[i])!r} at row {data.index[i]!r}. Rescale it first, e.g. "
            "(score - lowest) / (highest - lowest) for a 1..5 scale; leave a missing score as NaN"
        )
    return values


def _probabilities(data: pd.DataFrame, column: str, labelled: np.ndarray) -> np.ndarray:
    values = _numeric(data[column], f"the weights column {column!r}")
    bad = labelled & ~((values > 0.0) & (values <= 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValidationError(
            f"the weights column {column!r} must hold, on every human-labelled row, the probability "
            f"(0 < p <= 1) with which that row was chosen for labelling; {int(bad.sum())} labelled row(s) do "
            f"not, e.g. {float(values[i])!r} at row {data.index[i]!r}. If you hold inverse-probability weights "
            "1/p, pass their reciprocal; if the labelled rows were a simple random sample, pass weights=None"
        )
    return values


# --- grouping and sufficient statistics --------------------------------------------------------


@dataclass
class _Sums:
    """Per-group sufficient statistics (arrays of length G)."""

    n: np.ndarray  # labelled rows with a judge score
    N: np.ndarray  # unlabelled rows with a judge score
    labelled_any: np.ndarray  # labelled rows, judge score or not
    judge_missing: np.ndarray
    sy: np.ndarray
    sf: np.ndarray
    syy: np.ndarray
    sff: np.ndarray
    syf: np.ndarray
    tf: np.ndarray  # unlabelled sums
    tff: np.ndarray
    y_min: np.ndarray  # the smallest and largest label of the labelled rows (NaN: none)
    y_max: np.ndarray
    ipw: dict[str, np.ndarray] | None = None

    @property
    def labels_equal(self) -> np.ndarray:
        """Groups whose labels (two or more) are all the same value, found exactly (min == max), not
        from a variance that floating point leaves at 1e-17 instead of 0."""
        return (self.n >= 2) & (self.y_min == self.y_max)


def _sums(codes: np.ndarray, n_groups: int, y: np.ndarray, f: np.ndarray, pi: np.ndarray | None) -> _Sums:
    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=n_groups)

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(codes[mask], minlength=n_groups).astype(np.int64)

    has_y = ~np.isnan(y)
    has_f = ~np.isnan(f)
    lab = has_y & has_f
    unl = ~has_y & has_f
    yl = np.where(lab, y, 0.0)
    fl = np.where(lab, f, 0.0)
    fu = np.where(unl, f, 0.0)
    y_min = np.full(n_groups, np.inf)
    y_max = np.full(n_groups, -np.inf)
    np.minimum.at(y_min, codes[lab], y[lab])
    np.maximum.at(y_max, codes[lab], y[lab])
    sums = _Sums(
        n=count(lab), N=count(unl), labelled_any=count(has_y), judge_missing=count(~has_f),
        sy=total(yl), sf=total(fl), syy=total(yl * yl), sff=total(fl * fl), syf=total(yl * fl),
        tf=total(fu), tff=total(fu * fu),
        y_min=np.where(np.isfinite(y_min), y_min, np.nan), y_max=np.where(np.isfinite(y_max), y_max, np.nan),
    )
    if pi is not None:
        w = np.zeros_like(y)
        np.divide(1.0, pi, out=w, where=lab)  # ξ/π: 0 on unlabelled rows
        a = yl * w  # Y ξ/π
        b = np.where(has_f, f * (w - 1.0), 0.0)  # f (ξ/π - 1)
        sums.ipw = {
            "sa": total(a), "sb": total(b), "saa": total(a * a), "sbb": total(b * b), "sab": total(a * b),
            "sw": total(w), "sw2": total(w * w), "sw2y": total(w * a),
        }
    return sums


# --- estimators in closed form -------------------------------------------------------------


def _finite0(x: np.ndarray) -> np.ndarray:
    """``x`` with every NaN or infinite value (a row of a group whose figure is undefined) set to 0."""
    return np.where(np.isfinite(x), x, 0.0)


def _div(num: Any, den: Any) -> np.ndarray:
    num, den = np.broadcast_arrays(np.asarray(num, dtype=float), np.asarray(den, dtype=float))
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


@dataclass
class _Moments:
    ybar: np.ndarray
    fbar_l: np.ndarray
    vy: np.ndarray  # var(Y), labelled, divisor n
    vf_l: np.ndarray
    cyf: np.ndarray
    fbar_u: np.ndarray
    vf_u: np.ndarray
    fbar_all: np.ndarray
    vf_all0: np.ndarray  # divisor M
    vf_all1: np.ndarray  # divisor M - 1 (numpy's cov, as PPI++'s λ uses)


def _moments(s: _Sums) -> _Moments:
    n = s.n.astype(float)
    big_n = s.N.astype(float)
    m = n + big_n
    ybar, fbar_l, fbar_u = _div(s.sy, n), _div(s.sf, n), _div(s.tf, big_n)
    fbar_all = _div(s.sf + s.tf, m)
    ss_all = s.sff + s.tff - m * fbar_all**2
    equal = s.y_min == s.y_max  # one value among the labels: var(Y) and cov(Y, f) are exactly 0
    return _Moments(
        ybar=np.where(equal, s.y_min, ybar), fbar_l=fbar_l,
        vy=np.where(equal, 0.0, np.maximum(_div(s.syy, n) - ybar**2, 0.0)),
        vf_l=np.maximum(_div(s.sff, n) - fbar_l**2, 0.0),
        cyf=np.where(equal, 0.0, _div(s.syf, n) - ybar * fbar_l),
        fbar_u=fbar_u,
        vf_u=np.maximum(_div(s.tff, big_n) - fbar_u**2, 0.0),
        fbar_all=fbar_all,
        vf_all0=np.maximum(_div(ss_all, m), 0.0),
        vf_all1=np.maximum(_div(ss_all, m - 1), 0.0),
    )


def _ppi_lambda(s: _Sums, mo: _Moments) -> np.ndarray:
    """PPI++'s power-tuning λ for the mean: cov(Y, f) / ((1 + n/N) var(f)), clipped to 0..1.

    It minimises the estimated variance of the PPI estimator (PPI++, Example 6.1);
    with no unlabelled rows or a constant judge it is 0 (the human-only estimate).
    """
    lam = _div(mo.cyf, (1.0 + _div(s.n, s.N)) * mo.vf_all1)
    ok = (s.N > 0) & (mo.vf_all1 > 0) & np.isfinite(lam)
    return np.where(ok, np.clip(lam, 0.0, 1.0), 0.0)


def _ppi(s: _Sums, mo: _Moments, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    has_unl = s.N > 0
    imputed = np.where(has_unl, lam * mo.fbar_u, 0.0)
    estimate = imputed + mo.ybar - lam * mo.fbar_l
    rect_var = np.maximum(mo.vy - 2 * lam * mo.cyf + lam**2 * mo.vf_l, 0.0)
    var = np.where(has_unl, lam**2 * _div(mo.vf_u, s.N), 0.0) + _div(rect_var, s.n)
    return estimate, var


def _ipw(s: _Sums, lam: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Active-inference estimate: mean of Z = A - λB over all judged rows; λ=None tunes it."""
    p = s.ipw
    assert p is not None
    m = (s.n + s.N).astype(float)
    ma, mb = _div(p["sa"], m), _div(p["sb"], m)
    va = np.maximum(_div(p["saa"], m) - ma**2, 0.0)
    vb = np.maximum(_div(p["sbb"], m) - mb**2, 0.0)
    cab = _div(p["sab"], m) - ma * mb
    if lam is None:
        tuned = _div(cab, vb)
        lam = np.where((vb > 0) & np.isfinite(tuned), np.clip(tuned, 0.0, 1.0), 0.0)
    estimate = ma - lam * mb
    var = _div(np.maximum(va - 2 * lam * cab + lam**2 * vb, 0.0), m)
    return estimate, var, lam


def _hajek(s: _Sums) -> tuple[np.ndarray, np.ndarray]:
    p = s.ipw
    assert p is not None
    theta = _div(p["sa"], p["sw"])
    resid = np.maximum(p["saa"] - 2 * theta * p["sw2y"] + theta**2 * p["sw2"], 0.0)
    return theta, _div(resid, p["sw"] ** 2)


def _label_reasons(s: _Sums) -> np.ndarray:
    """Why a label-based estimate is NaN in each group (None where it is defined)."""
    out = np.full(len(s.n), None, dtype=object)
    for g in np.flatnonzero(s.n < 2):
        if s.labelled_any[g] == 0:
            out[g] = f"no human labels in this group; {_HINT}"
        elif s.n[g] == 0:
            out[g] = (f"none of the {s.labelled_any[g]} human-labelled row(s) in this group has a judge score; "
                      "re-run the judge on them or label other items")
        else:
            out[g] = f"only 1 human-labelled row with a judge score in this group; an interval needs 2 or more, {_HINT}"
    return out


def _estimate(
    s: _Sums, method: str, *, weighted: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, variance, λ, reason) per group for one method."""
    n_groups = len(s.n)
    nan = np.full(n_groups, np.nan)
    mo = _moments(s)
    reasons = _label_reasons(s)
    if method == "judge":
        m = s.n + s.N
        reasons = np.full(n_groups, None, dtype=object)
        reasons[m == 0] = "no judge scores in this group"
        reasons[m == 1] = "only 1 judge score in this group; an interval needs 2 or more"
        return mo.fbar_all, _div(mo.vf_all0, m), nan, reasons
    if weighted:
        if method == "human":
            est, var = _hajek(s)
            lam = nan
        else:
            est, var, lam = _ipw(s, None if method == "ppi++" else np.ones(n_groups))
    elif method == "human":
        est, var, lam = mo.ybar, _div(mo.vy, s.n), nan
    else:
        lam = _ppi_lambda(s, mo) if method == "ppi++" else np.ones(n_groups)
        est, var = _ppi(s, mo, lam)
        if method == "ppi":
            no_unl = (s.N == 0) & (reasons == None)  # noqa: E711 (elementwise on an object array)
            reasons[no_unl] = ("no unlabelled rows in this group, so the judge has nothing to add; "
                               "read the 'human' row")
    return est, var, lam, reasons


# --- honest bounds when the labels are all equal ------------------------------------------------

#: How an interval was made (the ``interval`` column of :func:`estimate_quality`).
NORMAL = "normal"
EXACT_EQUAL = "exact: all labels equal"
HOEFFDING_EQUAL = "hoeffding: all labels equal"
STRATIFIED = "stratified"
CLUSTER_ROBUST = "cluster-robust"


def equal_labels_interval(value: float, n: int, confidence: float) -> tuple[float, float, str]:
    """An honest interval for the mean of ``n`` labels in 0..1 that all equal ``value``.

    Their sample variance is 0, so a normal interval has width 0 however few they are (two labels
    of 1 would "prove" a quality of 1 with certainty). For 0/1 labels this is the exact
    Clopper–Pearson interval (Clopper & Pearson 1934): ``n`` successes of ``n`` give
    ``[(α/2)^(1/n), 1]``, none give ``[0, 1 − (α/2)^(1/n)]``. For another value shared by every label
    nothing bounds the spread but the 0..1 range, so Hoeffding's bound (Hoeffding 1963) gives
    ``value ± sqrt(ln(2/α) / (2n))``, clipped to 0..1.

    Parameters
    ----------
    value : float
        The value every label has.
    n : int
        How many labels.
    confidence : float
        The interval's confidence level (``α = 1 - confidence``).

    Returns
    -------
    tuple of (float, float, str)
        ``(low, high, method)``: :data:`EXACT_EQUAL` (Clopper–Pearson) or :data:`HOEFFDING_EQUAL`.

    Examples
    --------
    >>> low, high, method = equal_labels_interval(1.0, 10, 0.95)
    >>> round(low, 3), high, method
    (0.692, 1.0, 'exact: all labels equal')
    """
    alpha = 1.0 - confidence
    if value == 1.0:
        return (alpha / 2) ** (1.0 / n), 1.0, EXACT_EQUAL
    if value == 0.0:
        return 0.0, 1.0 - (alpha / 2) ** (1.0 / n), EXACT_EQUAL
    half = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    return max(0.0, value - half), min(1.0, value + half), HOEFFDING_EQUAL


def _honest_bounds(s: _Sums, method: str, low: np.ndarray, high: np.ndarray, confidence: float,
                   skip: np.ndarray | None = None,
                   n_eff: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The interval bounds as reported: clipped to 0..1 (the scores' range; clipping a valid interval to
    the parameter's range keeps its coverage), and, for the label-based methods in a group whose labels
    are all equal, widened to contain :func:`equal_labels_interval` (a zero-width normal interval from
    equal labels is not confidence). ``skip``: groups already widened per stratum (:func:`_stratified`).
    ``n_eff``: how many independent units the labels are (their conversations, with clusters), else ``s.n``."""
    low, high = np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)
    how = np.full(len(low), NORMAL, dtype=object)
    if method == "judge":
        return low, high, how
    widen = s.labels_equal & np.isfinite(low) & np.isfinite(high)
    if skip is not None:
        widen &= ~skip
    for g in np.flatnonzero(widen):
        units = int(s.n[g]) if n_eff is None else max(int(n_eff[g]), 1)
        lo, hi, how[g] = equal_labels_interval(float(s.y_min[g]), units, confidence)
        low[g], high[g] = min(low[g], lo), max(high[g], hi)
    return low, high, how


def _honest_se(est: float, se: float, labels_equal: bool, value: float, n: int, confidence: float, z: float) -> float:
    """A stratum's standard error, widened (when its labels are all equal, so their variance is 0) to cover
    :func:`equal_labels_interval` around ``est``: the stratified interval inherits the stratum's honesty."""
    if not labels_equal:
        return se
    lo, hi, _ = equal_labels_interval(value, n, confidence)
    return max(se, (est - lo) / z, (hi - est) / z)


def _widening(est: float, var: float, labels_equal: bool, value: float, n: int, confidence: float,
              z: float) -> float:
    """What to add to a stratum's variance so that its interval covers :func:`equal_labels_interval` (labels all
    equal, counted in conversations ``n``): 0 otherwise."""
    if not labels_equal or n < 1 or not math.isfinite(z):
        return 0.0
    se = _honest_se(est, math.sqrt(max(var, 0.0)), True, value, n, confidence, z)
    return max(se**2 - var, 0.0)
