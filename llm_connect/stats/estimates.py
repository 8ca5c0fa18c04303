"""Estimate mean quality from many judge scores and a few human labels, with valid intervals.

An LLM judge grades every item; people label a few. The judge alone is cheap but
biased, people alone are unbiased but few. Prediction-powered inference combines
them: the judge's mean over all items, corrected by the judge's error measured on
the labelled items. The interval stays valid however bad the judge is, and it is
narrower than the human-only one when the judge tracks the people.

Methods (``method`` column of :func:`estimate_quality`), with ``Y`` the human
label, ``f`` the judge score, ``n`` labelled and ``N`` unlabelled rows:

``"ppi++"``
    ``λ·mean_unlabelled(f) + mean_labelled(Y − λ f)`` with the power-tuning
    parameter ``λ`` estimated from the data and clipped to 0..1 (Angelopoulos,
    Duchi & Zrnic 2023, *PPI++: Efficient Prediction-Powered Inference*,
    arXiv:2311.01453). ``λ = 0`` is the human-only estimate, ``λ = 1`` is PPI.
    With a useless judge ``λ`` goes to 0 and the interval is (almost) the
    human-only one; it is never much wider.
``"ppi"``
    the same with ``λ = 1`` (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
    *Prediction-powered inference*, Science 382:669).
``"human"``
    the classical CLT interval on the labelled rows alone.
``"judge"``
    the naive mean of the judge's scores over all rows; its interval ignores the
    judge's bias and is **not** a valid interval for the human mean (it is there
    to show how far off the judge alone would be).

The point estimates and intervals equal those of ``ppi_py.ppi_mean_ci`` (``lam=None``
and ``lam=1``) and ``ppi_py.classical_mean_ci`` on the same data (the tests check
this): normal intervals ``estimate ± z·se`` with ``se² = λ²·var(f_unlabelled)/N +
var(Y − λ f)/n`` (variances with divisor n, as numpy's ``std``) and
``λ = cov(Y, f) / ((1 + n/N)·var(f over all rows))`` (the last with divisor n+N−1).

With ``weights=`` the labelled rows were chosen with known, possibly unequal
probabilities ``π_i`` (e.g. more labels where the judge is unsure) and the
inverse-probability-weighted estimator of active inference is used instead
(Zrnic & Candès 2024, *Active Statistical Inference*, ICML, arXiv:2403.03208).
With ``ξ_i = 1`` for a labelled row and 0 otherwise, over all M rows with a
judge score::

    θ̂_λ = (1/M) Σ_i [ λ f_i + (Y_i − λ f_i) ξ_i / π_i ]

which is unbiased for every λ because ``E[ξ_i/π_i] = 1``. The per-row terms
``Z_i = A_i − λ B_i`` with ``A_i = Y_i ξ_i/π_i`` and ``B_i = f_i (ξ_i/π_i − 1)``
are independent when rows are drawn independently and each is labelled
independently with probability ``π_i`` (Poisson sampling), so ``se² = var(Z)/M``.
The variance-minimising ``λ = cov(A, B)/var(B)`` is used for ``"ppi++"`` (clipped
to 0..1), ``λ = 1`` for ``"ppi"``; ``"human"`` is then the Hájek estimator
``Σ ξ Y/π / Σ ξ/π`` with its linearised variance ``Σ ξ (Y − θ̂)²/π² / (Σ ξ/π)²``.
(Note the parametrisation: ``f + λ (Y − f) ξ/π`` would be biased for ``λ ≠ 1``.)

With ``judge_missing="stratify"`` the rows without a judge score are a stratum of their own
instead of being left out. A selective judge scores only the items it is sure of and abstains on the
others, which go to people (``Labeller(strategy="abstained")``): the two kinds of item differ, so
PPI++ over the judged rows alone estimates the quality of the items the judge was sure of, not of all
items. The stratified estimate combines PPI++ (Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453) on
the ``M_J`` judged rows with the human mean on the ``M_A`` rows without a judge score, weighted by the
strata's shares ``w_J = M_J / M`` and ``w_A = M_A / M`` (``M = M_J + M_A``), as stratified PPI does
(Fisch et al. 2024, *Stratified Prediction-Powered Inference for Hybrid Language Model Evaluation*,
NeurIPS, arXiv:2406.04291; there the shares are known, here they are estimated)::

    θ̂ = w_J θ̂_J + w_A ȳ_A
    se² = w_J² se_J² + w_A² var(Y_A)/n_A + w_J w_A (θ̂_J − ȳ_A)² / M

The last term is the variance of the estimated shares (the items are a sample, so which stratum an
item falls in is random too); the strata's estimates are independent, so their variances add. It
assumes the labels within each stratum are a random sample of it (every row of a stratum labelled
is the simplest case). A stratum with rows but too few labels is refused (NaN and a reason): the
other stratum's labels cannot stand in for it.

With ``cluster=`` (``"auto"``: the ``conversation_id`` column when present) the rows are turns of
conversations and not independent (:mod:`llm_connect.stats.clusters`). Each estimator above is a sum
of per-row influence terms (for PPI++: ``(Y_i − λ f_i − ȳ + λ f̄_l)/n`` on a labelled row and
``λ (f_j − f̄_u)/N`` on an unlabelled one; their squares add up to the ``se²`` above); with clusters
the terms are summed within each conversation first, and ``se²`` is the sum of the squared
conversation sums, each part (labelled, unlabelled, each stratum, the shares) times its CR1 factor
``G/(G − 1)`` (Cameron & Miller 2015, *A Practitioner's Guide to Cluster-Robust Inference*, J. Human
Resources 50:317). PPI++'s ``λ`` is the one minimising that variance, ``Σ a_g b_g / Σ b_g²`` over the
conversation sums of the two terms (the power tuning of Angelopoulos, Duchi & Zrnic 2023 with
cluster-level covariances), and the interval is ``estimate ± t(G − 1)·se``.

Everything is computed from per-group sums (counts, sums of ``Y``, ``f``, ``Y²``,
``f²``, ``Y·f`` over labelled rows and of ``f``, ``f²`` over unlabelled rows) in one
pass, so a million rows in a hundred groups take well under a second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._validate import by_columns, check_confidence, group_codes
from .clusters import MIN_CLUSTERS, cluster_codes, cluster_column, few_clusters_reason, t_critical

__all__ = ["ESTIMATE_METHODS", "RESULT_COLUMNS", "equal_labels_interval", "estimate_quality", "labels_needed"]

ESTIMATE_METHODS: tuple[str, ...] = ("ppi++", "ppi", "human", "judge")
_DEFAULT_METHODS: tuple[str, ...] = ("ppi++", "human", "judge")
# columns of estimate_quality's frame after the group columns
RESULT_COLUMNS: tuple[str, ...] = (
    "method", "estimate", "ci_low", "ci_high", "se", "n_labelled", "n_total", "n_judge_missing",
    "lambda", "ess_gain", "confidence", "reason", "interval", "cluster", "n_clusters",
)
_PLANNING_COLUMNS: tuple[str, ...] = (
    "method", "width", "labels_needed", "more_labels", "n_labelled_pilot", "n_total", "achievable", "reason",
    "cluster", "n_clusters_pilot", "clusters_needed",
)
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


def _check_methods(methods: str | Sequence[str]) -> tuple[str, ...]:
    chosen = (methods,) if isinstance(methods, str) else tuple(methods)
    if not chosen:
        raise ValidationError(f"methods is empty; choose from {list(ESTIMATE_METHODS)}")
    unknown = [m for m in chosen if m not in ESTIMATE_METHODS]
    if unknown:
        raise ValidationError(f"unknown method {unknown[0]!r}; choose from {list(ESTIMATE_METHODS)}")
    return tuple(dict.fromkeys(chosen))


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


# --- rows in clusters (conversations): cluster-robust variances ----------------------------


@dataclass
class _Clustered:
    """Every figure of one method per group, with clusters: point estimate, cluster-robust variance, λ,
    reason, the clusters it rests on and the degrees of freedom of its ``t`` critical value; ``parts``: the
    per-(group, cluster) sums of the influence terms (already scaled by their CR1 factors), whose squares
    add up to ``var`` (the stratified estimate combines them)."""

    est: np.ndarray
    var: np.ndarray
    lam: np.ndarray
    reason: np.ndarray
    n_clusters: np.ndarray
    parts: np.ndarray


class _Pairs:
    """The (group, cluster) pairs of the rows: the cluster sums of influence terms are taken over these."""

    def __init__(self, codes: np.ndarray, n_groups: int, clusters: np.ndarray) -> None:
        n_clusters = int(clusters.max()) + 1 if len(clusters) else 1
        key = codes.astype(np.int64) * n_clusters + clusters
        uniq, self.pair = np.unique(key, return_inverse=True)
        self.pair = self.pair.reshape(-1)
        self.k = len(uniq)
        self.group = (uniq // n_clusters).astype(np.intp)
        self.codes = codes
        self.n_groups = n_groups

    def sums(self, psi: np.ndarray) -> np.ndarray:
        """Per pair: the sum of ``psi`` over its rows."""
        return np.bincount(self.pair, weights=psi, minlength=self.k)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per group: how many clusters have a row in ``mask``."""
        has = np.bincount(self.pair[mask], minlength=self.k) > 0
        return np.bincount(self.group[has], minlength=self.n_groups).astype(np.int64)

    def scale(self, mask: np.ndarray) -> np.ndarray:
        """Per pair: the square root of its group's CR1 factor ``G/(G − 1)``, ``G`` the clusters with a row in
        ``mask`` (1 where ``G < 2``: one cluster's centred sum is 0 anyway)."""
        from .clusters import cr1_factor

        factor = cr1_factor(self.count(mask))
        return np.sqrt(np.where(np.isfinite(factor), factor, 1.0))[self.group]

    def total(self, per_pair: np.ndarray) -> np.ndarray:
        """Per group: the sum of ``per_pair`` over its pairs."""
        return np.bincount(self.group, weights=per_pair, minlength=self.n_groups)


def _tuned(a: np.ndarray, b: np.ndarray, pairs: _Pairs, allowed: np.ndarray) -> np.ndarray:
    """The λ minimising ``Σ_g (a_g − λ b_g)²`` per group (the cluster-robust variance of ``A − λB``), clipped to
    0..1; 0 where ``allowed`` is False or ``b`` is all 0 (PPI++'s power tuning with cluster-level covariances)."""
    sab, sbb = pairs.total(a * b), pairs.total(b * b)
    lam = _div(sab, sbb)
    return np.where(allowed & (sbb > 0) & np.isfinite(lam), np.clip(lam, 0.0, 1.0), 0.0)


@np.errstate(divide="ignore", invalid="ignore")  # rows of groups whose figure is undefined: 0 by _finite0
def _clustered(s: _Sums, mo: _Moments, pairs: _Pairs, method: str, y: np.ndarray, f: np.ndarray,
               pi: np.ndarray | None) -> _Clustered:
    """One method's figures per group with cluster-robust (CR1) variances; rows without a judge score are
    left out (the stratum of :func:`_stratified_clustered` is added on top)."""
    codes, n_groups = pairs.codes, pairs.n_groups
    has_y, has_f = ~np.isnan(y), ~np.isnan(f)
    lab, unl = has_y & has_f, ~has_y & has_f
    g_lab = pairs.count(lab)
    n, big_n, m = s.n.astype(float), s.N.astype(float), (s.n + s.N).astype(float)
    reasons = _label_reasons(s)
    nan = np.full(n_groups, np.nan)

    def per_row(values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=float)[codes]

    if method == "judge":
        reasons = np.full(n_groups, None, dtype=object)
        reasons[m == 0] = "no judge scores in this group"
        reasons[m == 1] = "only 1 judge score in this group; an interval needs 2 or more"
        psi = np.where(has_f, (f - per_row(mo.fbar_all)) / per_row(m), 0.0)
        part = pairs.scale(has_f) * pairs.sums(_finite0(psi))
        return _Clustered(mo.fbar_all, pairs.total(part**2), nan, reasons, pairs.count(has_f), part)
    if pi is not None:  # active inference (IPW) and Hájek, the per-row terms of the module docstring
        w = np.zeros_like(y)
        np.divide(1.0, pi, out=w, where=lab)
        y0 = np.where(lab, y, 0.0)
        if method == "human":
            p = s.ipw
            assert p is not None
            theta = _div(p["sa"], p["sw"])
            psi = np.where(lab, w * (y0 - per_row(theta)) / per_row(p["sw"]), 0.0)
            part = pairs.scale(lab) * pairs.sums(_finite0(psi))
            return _Clustered(theta, pairs.total(part**2), nan, reasons, g_lab, part)
        a_row = y0 * w
        b_row = np.where(has_f, f * (w - 1.0), 0.0)
        mean_a, mean_b = _div(np.bincount(codes, weights=a_row, minlength=n_groups), m), _div(
            np.bincount(codes, weights=b_row, minlength=n_groups), m)
        root = pairs.scale(has_f)
        a = root * pairs.sums(_finite0(np.where(has_f, (a_row - per_row(mean_a)) / per_row(m), 0.0)))
        b = root * pairs.sums(_finite0(np.where(has_f, (b_row - per_row(mean_b)) / per_row(m), 0.0)))
        lam = _tuned(a, b, pairs, np.ones(n_groups, bool)) if method == "ppi++" else np.ones(n_groups)
        part = a - lam[pairs.group] * b
        return _Clustered(mean_a - lam * mean_b, pairs.total(part**2), lam, reasons, g_lab, part)
    root_l, root_u = pairs.scale(lab), pairs.scale(unl)
    a = root_l * pairs.sums(_finite0(np.where(lab, (y - per_row(mo.ybar)) / per_row(n), 0.0)))
    if method == "human":
        return _Clustered(mo.ybar, pairs.total(a**2), nan, reasons, g_lab, a)
    b_lab = root_l * pairs.sums(_finite0(np.where(lab, (f - per_row(mo.fbar_l)) / per_row(n), 0.0)))
    b_unl = root_u * pairs.sums(_finite0(np.where(unl, (f - per_row(mo.fbar_u)) / per_row(big_n), 0.0)))
    b = b_lab - b_unl  # θ = ȳ − λ (f̄_labelled − f̄_unlabelled)
    # unlabelled rows all from one conversation: the variance of their mean cannot be estimated, so PPI++ keeps
    # to the labels (λ = 0) and PPI has no interval
    one_unlabelled = (s.N > 0) & (pairs.count(unl) < 2)
    lam = _tuned(a, b, pairs, (s.N > 0) & ~one_unlabelled) if method == "ppi++" else np.ones(n_groups)
    est, _ = _ppi(s, mo, lam)
    part = a - lam[pairs.group] * b
    if method == "ppi":
        no_unl = (s.N == 0) & (reasons == None)  # noqa: E711 (elementwise on an object array)
        reasons[no_unl] = "no unlabelled rows in this group, so the judge has nothing to add; read the 'human' row"
        one = one_unlabelled & (reasons == None)  # noqa: E711 (elementwise on an object array)
        reasons[one] = ("the unlabelled rows of this group all come from one conversation, so the variance of "
                        "their mean cannot be estimated; read the 'ppi++' or 'human' row")
    return _Clustered(est, pairs.total(part**2), lam, reasons, g_lab, part)


@np.errstate(divide="ignore", invalid="ignore")
def _stratified_clustered(s: _Sums, u: _Unjudged, pairs: _Pairs, method: str, judged: _Clustered, y: np.ndarray,
                          f: np.ndarray, confidence: float, z: np.ndarray) -> _Clustered:
    """:func:`_stratified` with clusters: the judged stratum's influence terms (``judged.parts``), the unjudged
    stratum's ``(Y − ȳ_A)/n_A`` and the shares' ``(1[judged] − w_J)(θ_J − ȳ_A)/M`` are summed within each
    conversation before squaring, so a conversation with turns in both strata counts once (the strata are then
    not independent). A stratum whose labels are all equal has its variance raised to cover
    :func:`equal_labels_interval` on its labelled conversations, as :func:`_honest_se` does."""
    codes = pairs.codes
    has_y, has_f = ~np.isnan(y), ~np.isnan(f)
    lab_a = has_y & ~has_f
    g_lab = pairs.count(has_y & has_f)
    g_lab_a = pairs.count(lab_a)
    est, var, reason = judged.est.copy(), judged.var.copy(), judged.reason.copy()
    n_clusters = pairs.count(has_y)
    m_j, m_a = (s.n + s.N).astype(float), u.M.astype(float)
    total = m_j + m_a
    w_j, w_a = _div(m_j, total), _div(m_a, total)
    gap = judged.est - u.mean
    ybar_a = u.mean
    psi_a = np.where(lab_a, (y - ybar_a[codes]) / u.n[codes], 0.0)
    part_a = pairs.scale(lab_a) * pairs.sums(_finite0(psi_a))
    in_group = np.ones(len(codes), dtype=bool)
    share = np.where(has_f, 1.0, 0.0) - w_j[codes]
    part_share = pairs.scale(in_group) * pairs.sums(_finite0(share * gap[codes] / total[codes]))
    grp = pairs.group
    for g in np.flatnonzero(u.M > 0):
        n_j, n_a = int(s.n[g]), int(u.n[g])
        if m_j[g] > 0 and reason[g] is not None:
            why = "has no human labels" if n_j == 0 else f"has only {n_j} human label(s)"
            reason[g] = (
                f"{method} is stratified here ({int(m_j[g])} row(s) with a judge score, {int(m_a[g])} without, e.g. a "
                f"selective judge's abstentions) and the judged stratum {why}: labels of the rows without a judge "
                "score cannot stand in for it (the judge scored the items it was sure of, which differ). Label a "
                "random sample of the judged rows too, at least ~30"
            )
            continue
        if n_a == 0:
            reason[g] = (
                f"the {int(m_a[g])} row(s) without a judge score (e.g. a selective judge's abstentions) have no human "
                f"label, so their quality is unknown and they are {m_a[g] / total[g]:.0%} of the rows: label them "
                "(Labeller(..., strategy='abstained')) or a random sample of them"
            )
            continue
        reason[g] = None
        mine = grp == g
        var_a = float((part_a[mine] ** 2).sum())
        extra_a = _widening(float(u.mean[g]), var_a, bool(u.equal[g]), float(u.mean[g]), int(g_lab_a[g]),
                            confidence, float(z[g]))
        if m_j[g] == 0:
            est[g], var[g] = u.mean[g], var_a + extra_a
            continue
        extra_j = _widening(float(judged.est[g]), float(judged.var[g]), bool(s.labels_equal[g]), float(s.y_min[g]),
                            int(g_lab[g]), confidence, float(z[g]))
        combined = w_j[g] * judged.parts[mine] + w_a[g] * part_a[mine] + part_share[mine]
        est[g] = w_j[g] * judged.est[g] + w_a[g] * u.mean[g]
        var[g] = float((combined**2).sum()) + w_j[g] ** 2 * extra_j + w_a[g] ** 2 * extra_a
    return _Clustered(est, var, judged.lam, reason, np.where(u.M > 0, n_clusters, judged.n_clusters), judged.parts)


def _widening(est: float, var: float, labels_equal: bool, value: float, n: int, confidence: float,
              z: float) -> float:
    """What to add to a stratum's variance so that its interval covers :func:`equal_labels_interval` (labels all
    equal, counted in conversations ``n``): 0 otherwise."""
    if not labels_equal or n < 1 or not math.isfinite(z):
        return 0.0
    se = _honest_se(est, math.sqrt(max(var, 0.0)), True, value, n, confidence, z)
    return max(se**2 - var, 0.0)


# --- public API ----------------------------------------------------------------------------


def estimate_quality(
    data: pd.DataFrame,
    *,
    judge: str,
    human: str,
    by: str | Sequence[str] | None = None,
    methods: str | Sequence[str] = _DEFAULT_METHODS,
    confidence: float = 0.95,
    weights: str | None = None,
    judge_missing: str = "exclude",
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """Mean quality per group from judge scores and a few human labels, with confidence intervals.

    ``methods`` are explained in the module docstring: PPI++ (Angelopoulos, Duchi & Zrnic 2023,
    arXiv:2311.01453), PPI (Angelopoulos et al., *Science* 2023), the human-only CLT interval, and the
    judge's naive mean, whose interval ignores its bias.

    Parameters
    ----------
    data
        One row per graded item.
    judge, human
        Columns of scores in 0..1 (booleans are fine). A row whose ``human`` score is missing
        (NaN/None) is unlabelled. A row whose ``judge`` score is missing (an unscored reply) is
        excluded from every method — never read as 0 — and counted in ``n_judge_missing``.
    by
        A column name or a list of them; rows with a missing key form their own group.
    methods
        Any of ``"ppi++"``, ``"ppi"``, ``"human"``, ``"judge"``.
    confidence
        The intervals' level.
    weights
        A column holding, on each labelled row, the probability with which that row was chosen
        for labelling (values on unlabelled rows are ignored). With it the
        inverse-probability-weighted estimator of active inference (Zrnic & Candès 2024,
        arXiv:2403.03208) is used, which stays valid when labels were drawn unevenly (e.g. more
        where the judge is unsure); ``"human"`` is then the Hájek (weighted) mean. It assumes each
        row was labelled independently with its probability (Poisson sampling); for a fixed-size
        sample drawn without replacement the interval is typically slightly conservative.
    judge_missing
        What the rows without a judge score are. ``"exclude"`` (the default): left out of every
        method, as if the judge's failures were at random. ``"stratify"``: a stratum of their own, as
        a selective judge's abstentions are (it scores the items it is sure of, which differ from
        the others): the label-based methods combine their estimate on the judged rows with the
        human mean of the rows without a judge score, weighted by the strata's shares, with the
        variances added (see the module docstring; Fisch et al. 2024, arXiv:2406.04291). A group
        with rows in a stratum but too few labels there gets NaN and a reason. ``n_labelled`` and
        ``n_total`` then count the rows of both strata, and ``interval`` says ``"stratified"`` for
        the groups that have rows without a judge score. Not combined with ``weights``.
    cluster
        Which rows are not independent (:mod:`llm_connect.stats.clusters`). ``"auto"`` (the
        default): the ``conversation_id`` column when the data has one (the turns of one
        conversation), else independent rows; a column name: that column; ``None``: independent
        rows. With clusters every variance is cluster-robust: the estimator's per-row influence
        terms are summed within each (group, cluster) and the variance is the sum of the squared
        cluster sums times ``G/(G − 1)`` (CR1; Cameron & Miller 2015, *A Practitioner's Guide to
        Cluster-Robust Inference*), PPI++'s ``λ`` minimises that variance (cluster-level
        covariances), and the interval uses the ``t(G − 1)`` critical value, ``G`` the clusters
        holding the labelled rows (for ``"judge"``: the judged rows). With
        ``judge_missing="stratify"`` the strata's terms are summed within each conversation
        before squaring (a conversation with turns in both strata is one unit). Fewer than
        :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` (10) such clusters in a group: NaN and a
        reason. The clustered numbers are not those of independent rows even when every cluster
        holds one row (the factor ``G/(G − 1)`` and ``t``); ``cluster=None`` gives those.

    Returns
    -------
    pandas.DataFrame
        One row per group and method, with columns ``[*by], method, estimate, ci_low, ci_high, se,
        n_labelled, n_total, n_judge_missing, lambda, ess_gain, confidence, reason, interval,
        cluster, n_clusters`` (``attrs["cluster"]``: the cluster column, or ``None``):

        - ``n_labelled``: the group's labelled rows with a judge score (the ones the label-based
          methods use); ``n_total``: all its rows with a judge score (with
          ``judge_missing="stratify"``: its labelled rows and all its rows, judge score or not);
        - ``lambda``: the power-tuning parameter (1 for ``"ppi"``, NaN for ``"human"`` and
          ``"judge"``);
        - ``ess_gain``: ``var(human-only) / var(method)``, the factor by which the method
          multiplies the effective number of labels (NaN for ``"judge"``, whose interval is not
          valid);
        - ``reason``: None, or why the estimate is NaN (e.g. a group with no labels, or too few
          conversations);
        - ``interval``: how ``ci_low``/``ci_high`` were made: ``"normal"`` (CLT),
          ``"cluster-robust"`` (with clusters), or, for a label-based method in a group whose
          labels are all equal (where the normal interval has width 0), ``"exact: all labels
          equal"`` (Clopper–Pearson for 0/1 labels) or ``"hoeffding: all labels equal"`` (see
          :func:`equal_labels_interval`; with clusters its ``n`` is the labelled conversations),
          or ``"stratified"`` (``judge_missing="stratify"`` in a group with rows without a judge
          score: normal, each stratum's standard error widened as above when its labels are all
          equal);
        - ``cluster``: the column clustered by (``None``: independent rows); ``n_clusters``: the
          clusters the interval rests on (holding labelled rows; for ``"judge"``, judged rows),
          ``<NA>`` without clusters.

        Intervals are clipped to 0..1 (the scores' range); with fewer than ~30 labels in a group
        read them with care.

    Raises
    ------
    ValidationError
        A column is missing, scores are outside 0..1 or not numbers, or an option is unknown.

    Examples
    --------
    >>> df = pd.DataFrame({"judge": [0.9, 0.8, 0.4, 1.0, 0.7], "human": [1, 1, 0, None, None]})
    >>> estimate_quality(df, judge="judge", human="human")[["method", "estimate", "n_labelled"]]
      method  estimate  n_labelled
    0  ppi++  0.779874           3
    1  human  0.666667           3
    2  judge  0.760000           3
    """
    by_cols = by_columns(by, reserved=RESULT_COLUMNS, what="estimate_quality")
    needed = {"judge": judge, "human": human, **{f"by[{i}]": c for i, c in enumerate(by_cols)}}
    if weights is not None:
        needed["weights"] = weights
    _check_frame(data, needed)
    if judge == human:
        raise ValidationError(f"judge and human name the same column {judge!r}; pass two different columns")
    chosen = _check_methods(methods)
    conf = check_confidence(confidence)
    if judge_missing not in ("exclude", "stratify"):
        raise ValidationError(f"judge_missing must be 'exclude' or 'stratify', got {judge_missing!r}")
    if judge_missing == "stratify" and weights is not None:
        raise ValidationError("judge_missing='stratify' does not combine with weights=: estimate the rows without a "
                              "judge score apart, or pass judge_missing='exclude'")
    z = _z(conf)
    f = _scores(data, judge, "judge")
    y = _scores(data, human, "human")
    pi = _probabilities(data, weights, ~np.isnan(y)) if weights is not None else None
    codes, keys = group_codes(data, by_cols)
    s = _sums(codes, len(keys), y, f, pi)
    n_groups = len(keys)
    unjudged = _unjudged(codes, n_groups, y, f) if judge_missing == "stratify" else None
    strata = unjudged.M > 0 if unjudged is not None else np.zeros(n_groups, dtype=bool)

    cluster_col = cluster_column(data, cluster)
    pairs = _Pairs(codes, n_groups, cluster_codes(data[cluster_col])) if cluster_col is not None else None
    mo = _moments(s)

    def clustered(method: str) -> _Clustered:
        assert pairs is not None
        fig = _clustered(s, mo, pairs, method, y, f, pi)
        if unjudged is not None and method != "judge" and strata.any():
            labelled = pairs.count(~np.isnan(y))
            t_strata = t_critical(conf, np.where(strata, labelled, fig.n_clusters) - 1)
            fig = _stratified_clustered(s, unjudged, pairs, method, fig, y, f, conf, t_strata)
        return fig

    if pairs is not None:
        human_var = clustered("human").var
    else:
        human_var = _hajek(s)[1] if pi is not None else _div(mo.vy, s.n)
        if unjudged is not None and strata.any():  # the human-only estimate is stratified too
            h_est, h_var, _, h_reason = _estimate(s, "human", weighted=False)
            _, h_se, _ = _stratified(s, unjudged, "human", h_est, h_var, h_reason, conf, z)
            human_var = np.where(strata, h_se**2, human_var)
    columns: dict[str, list[np.ndarray]] = {c: [] for c in RESULT_COLUMNS}
    for method in chosen:
        n_clusters = np.zeros(n_groups, dtype=np.int64)
        crit = np.full(n_groups, z)
        if pairs is not None:
            fig = clustered(method)
            est, var, lam, reason, n_clusters = fig.est, fig.var, fig.lam, fig.reason, fig.n_clusters
            few = (n_clusters < MIN_CLUSTERS) & (reason == None)  # noqa: E711 (elementwise on an object array)
            for g in np.flatnonzero(few):
                reason[g] = few_clusters_reason(int(n_clusters[g]), column=cluster_col,
                                                what="judged" if method == "judge" else "labelled")
            crit = t_critical(conf, n_clusters - 1)
        else:
            est, var, lam, reason = _estimate(s, method, weighted=pi is not None)
            if unjudged is not None and method != "judge" and strata.any():
                est, se_strat, reason = _stratified(s, unjudged, method, est, var, reason, conf, z)
                var = se_strat**2
        invalid = reason != None  # noqa: E711 (elementwise on an object array)
        est = np.where(invalid, np.nan, est)
        se = np.where(invalid, np.nan, np.sqrt(np.maximum(var, 0.0)))
        gain = np.full(n_groups, np.nan) if method == "judge" else _ess(human_var, var)
        columns["method"].append(np.full(n_groups, method, dtype=object))
        columns["estimate"].append(est)
        columns["ci_low"].append(est - crit * se)
        columns["ci_high"].append(est + crit * se)
        columns["se"].append(se)
        if unjudged is not None:
            columns["n_labelled"].append(s.n + unjudged.n.astype(np.int64))
            columns["n_total"].append(s.n + s.N + unjudged.M.astype(np.int64))
        else:
            columns["n_labelled"].append(s.n)
            columns["n_total"].append(s.n + s.N)
        columns["n_judge_missing"].append(s.judge_missing)
        columns["lambda"].append(np.where(invalid, np.nan, lam))
        columns["ess_gain"].append(np.where(invalid, np.nan, gain))
        columns["confidence"].append(np.full(n_groups, conf))
        columns["reason"].append(reason)
        low, high, how = _honest_bounds(s, method, est - crit * se, est + crit * se, conf, skip=strata,
                                        n_eff=n_clusters if pairs is not None else None)
        if pairs is not None:
            how[how == NORMAL] = CLUSTER_ROBUST
        if method != "judge":
            how[strata] = STRATIFIED
        columns["ci_low"][-1], columns["ci_high"][-1] = low, high
        columns["interval"].append(how)
        columns["cluster"].append(np.full(n_groups, cluster_col, dtype=object))
        columns["n_clusters"].append(n_clusters)
    # group-major order: all methods of group 0, then group 1, ...
    k = len(chosen)
    order = np.arange(n_groups * k).reshape(k, n_groups).T.ravel()
    out = keys.iloc[np.repeat(np.arange(n_groups), k)].reset_index(drop=True)
    for name, parts in columns.items():
        values = np.concatenate(parts)[order]
        out[name] = pd.Series(values, dtype=object) if name in ("reason", "interval", "cluster") else values
    out["n_clusters"] = (out["n_clusters"].astype("Int64") if pairs is not None
                         else pd.Series([pd.NA] * len(out), dtype="Int64"))
    out.attrs["cluster"] = cluster_col
    return out


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


@dataclass
class _Unjudged:
    """Per-group sums of the rows without a judge score (the second stratum of ``judge_missing="stratify"``)."""

    M: np.ndarray  # rows without a judge score
    n: np.ndarray  # ... of them labelled
    mean: np.ndarray  # their labels' mean (NaN: none)
    var: np.ndarray  # their labels' variance, divisor n (0 when all equal)
    equal: np.ndarray  # all their labels (one or more) the same value


def _unjudged(codes: np.ndarray, n_groups: int, y: np.ndarray, f: np.ndarray) -> _Unjudged:
    missing = np.isnan(f)
    lab = missing & ~np.isnan(y)
    yl = np.where(lab, y, 0.0)
    n = np.bincount(codes[lab], minlength=n_groups).astype(float)
    mean = _div(np.bincount(codes, weights=yl, minlength=n_groups), n)
    var = np.maximum(_div(np.bincount(codes, weights=yl * yl, minlength=n_groups), n) - mean**2, 0.0)
    y_min, y_max = np.full(n_groups, np.inf), np.full(n_groups, -np.inf)
    np.minimum.at(y_min, codes[lab], y[lab])
    np.maximum.at(y_max, codes[lab], y[lab])
    equal = (n >= 1) & (y_min == y_max)
    return _Unjudged(M=np.bincount(codes[missing], minlength=n_groups).astype(float), n=n,
                     mean=np.where(equal, y_min, mean), var=np.where(equal, 0.0, var), equal=equal)


def _honest_se(est: float, se: float, labels_equal: bool, value: float, n: int, confidence: float, z: float) -> float:
    """A stratum's standard error, widened (when its labels are all equal, so their variance is 0) to cover
    :func:`equal_labels_interval` around ``est``: the stratified interval inherits the stratum's honesty."""
    if not labels_equal:
        return se
    lo, hi, _ = equal_labels_interval(value, n, confidence)
    return max(se, (est - lo) / z, (hi - est) / z)


def _stratified(s: _Sums, u: _Unjudged, method: str, est: np.ndarray, var: np.ndarray, reason: np.ndarray,
                confidence: float, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, reason) per group: ``method``'s estimate on the judged rows and the human mean on the rows
    without a judge score, combined by their shares (see the module docstring). Groups whose every row has a
    judge score are returned as they are."""
    est, se, reason = est.copy(), np.sqrt(np.maximum(var, 0.0)), reason.copy()
    for g in np.flatnonzero(u.M > 0):
        m_j, m_a, n_j, n_a = int(s.n[g] + s.N[g]), int(u.M[g]), int(s.n[g]), int(u.n[g])
        if m_j > 0 and reason[g] is not None:
            why = ("has no human labels" if n_j == 0 else f"has only {n_j} human label(s)")
            reason[g] = (
                f"{method} is stratified here ({m_j} row(s) with a judge score, {m_a} without, e.g. a selective "
                f"judge's abstentions) and the judged stratum {why}: labels of the rows without a judge score "
                f"cannot stand in for it (the judge scored the items it was sure of, which differ). Label a random "
                f"sample of the judged rows too, at least ~30"
            )
            est[g] = se[g] = np.nan
            continue
        if n_a == 0:
            reason[g] = (
                f"the {m_a} row(s) without a judge score (e.g. a selective judge's abstentions) have no human "
                f"label, so their quality is unknown and they are {m_a / (m_j + m_a):.0%} of the rows: label them "
                "(Labeller(..., strategy='abstained')) or a random sample of them"
            )
            est[g] = se[g] = np.nan
            continue
        reason[g] = None
        se_a = _honest_se(float(u.mean[g]), math.sqrt(float(u.var[g]) / n_a), bool(u.equal[g]), float(u.mean[g]),
                          n_a, confidence, z)
        if m_j == 0:
            est[g], se[g] = u.mean[g], se_a
            continue
        se_j = _honest_se(float(est[g]), float(se[g]), bool(s.labels_equal[g]), float(s.y_min[g]), n_j,
                          confidence, z)
        w_j, w_a, m = m_j / (m_j + m_a), m_a / (m_j + m_a), m_j + m_a
        gap = float(est[g]) - float(u.mean[g])
        est[g] = w_j * est[g] + w_a * u.mean[g]
        se[g] = math.sqrt(w_j**2 * se_j**2 + w_a**2 * se_a**2 + w_j * w_a * gap**2 / m)
    return est, se, reason


def _ess(human_var: np.ndarray, var: np.ndarray) -> np.ndarray:
    gain = _div(human_var, var)
    gain = np.where((var == 0) & (human_var > 0), np.inf, gain)
    return gain


def labels_needed(
    data: pd.DataFrame,
    *,
    judge: str,
    human: str,
    width: float | Sequence[float],
    by: str | Sequence[str] | None = None,
    confidence: float = 0.95,
    pool: str = "data",
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """How many human labels give an interval of a target full ``width`` (``ci_high - ci_low``).

    Plans from a labelled pilot: the labelled rows give ``var(Y)``, ``cov(Y, f)``,
    and all judged rows give ``var(f)`` (``ρ`` is the judge–human correlation). With
    ``t = (width / (2 z))²`` the target variance and ``M`` the judged rows in a group:

    - ``"human"``: ``se² = var(Y)/n``, so ``n = var(Y) / t``.
    - ``"ppi++"`` with ``pool="data"`` (the M items are what there is; labelling n
      of them leaves ``N = M − n`` unlabelled): with PPI++'s λ
      ``se² = min_λ [var(Y − λ f)/n + λ² var(f)/(M − n)]``, which for an unclipped λ is
      ``var(Y)·((1 − ρ²)/n + ρ²/M)``; the smallest such n is found by bisection
      (λ clipped to 0..1 as the estimator does). Labelling all M items gives
      ``var(Y)/M``, so a narrower target is not achievable (``achievable`` False;
      ``labels_needed`` then holds the infinite-pool number: that many labels would
      do with many more judged items).
    - ``"ppi++"`` with ``pool="infinite"`` (N large): ``n = var(Y − λ f)/t`` with
      ``λ = cov(Y, f)/var(f)`` clipped to 0..1, i.e. ``var(Y)(1 − ρ²)/t``.

    With clusters (the turns of one conversation) each variance above is multiplied by its
    design effect read off the pilot (Kish 1965: the cluster-robust variance of
    :func:`estimate_quality` over the variance of independent rows; for PPI++ one for the
    labelled residual ``Y − λ f`` and one for the judge's scores), so the plan assumes further
    labels come as the pilot's did: whole conversations of about the pilot's number of labelled
    turns. ``clusters_needed`` is ``labels_needed`` in such conversations.

    Parameters
    ----------
    data
        The pilot: one row per judged item, the labelled ones with a ``human`` score.
    judge, human
        Columns of scores in 0..1.
    width
        The target full width, one number or several (a row each).
    by
        A column name or a list of them.
    confidence
        The intervals' level.
    pool
        ``"data"`` (the judged items are what there is) or ``"infinite"``.
    cluster
        ``"auto"`` (the default: ``conversation_id`` when present), a column name, or ``None``
        (independent rows), as :func:`estimate_quality` reads it. A pilot whose labels come from
        fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` conversations gives no plan
        (a reason says so): its design effect is too uncertain.

    Returns
    -------
    pandas.DataFrame
        Columns ``[*by], method, width, labels_needed`` (total labels including the pilot),
        ``more_labels`` (beyond the pilot), ``n_labelled_pilot, n_total, achievable, reason,
        cluster, n_clusters_pilot, clusters_needed`` (the last two ``<NA>`` without clusters;
        ``attrs["cluster"]`` names the column). ``achievable`` is False when more labels are needed
        than the group has items (with ``pool="data"``). The pilot's variances are estimates: plan
        with a pilot of 30 or more labels and round up; below ~30 labels the normal interval
        itself is unreliable.

    Raises
    ------
    ValidationError
        A column is missing, a width is not positive, or ``pool`` is unknown.
    """
    by_cols = by_columns(by, reserved=_PLANNING_COLUMNS, what="labels_needed")
    _check_frame(data, {"judge": judge, "human": human, **{f"by[{i}]": c for i, c in enumerate(by_cols)}})
    conf = check_confidence(confidence)
    widths = [width] if isinstance(width, (int, float, np.number)) else list(width)
    if not widths or any(isinstance(w, bool) or not isinstance(w, (int, float, np.number)) or not (
            math.isfinite(w) and w > 0) for w in widths):
        raise ValidationError(f"width must be a positive number (or a list of them), e.g. 0.1; got {width!r}")
    if pool not in ("data", "infinite"):
        raise ValidationError(f"pool must be 'data' or 'infinite', got {pool!r}")
    z = _z(conf)
    f = _scores(data, judge, "judge")
    y = _scores(data, human, "human")
    codes, keys = group_codes(data, by_cols)
    s = _sums(codes, len(keys), y, f, None)
    mo = _moments(s)
    m = (s.n + s.N).astype(float)
    base = _label_reasons(s)
    flat = (base == None) & s.labels_equal  # noqa: E711 (exact: min == max, not a variance of 1e-17)
    base[flat] = ("all human labels in the pilot are equal, so their variance cannot be estimated; "
                  "label a larger pilot (at least ~30 items)")
    vy, c, vf = mo.vy, mo.cyf, mo.vf_all0
    beta = np.where(vf > 0, _div(c, vf), 0.0)
    cluster_col = cluster_column(data, cluster)
    ones = np.ones(len(keys))
    deff_h, deff_r, deff_f, g_pilot = ones, ones, ones, np.zeros(len(keys), dtype=np.int64)
    if cluster_col is not None:
        pairs = _Pairs(codes, len(keys), cluster_codes(data[cluster_col]))
        deff_h, deff_r, deff_f, g_pilot = _design_effects(s, mo, pairs, y, f, np.clip(beta, 0.0, 1.0))
        few = (base == None) & (g_pilot < MIN_CLUSTERS)  # noqa: E711 (elementwise on an object array)
        for i in np.flatnonzero(few):
            base[i] = ("a plan for correlated rows reads the design effect off the pilot: "
                       + few_clusters_reason(int(g_pilot[i]), column=cluster_col))
    turns_per_cluster = _div(s.n, g_pilot)

    rows: list[dict[str, Any]] = []
    for wd in widths:
        t = (float(wd) / (2 * z)) ** 2
        n_human = np.ceil(deff_h * vy / t - 1e-9)
        lam_inf = np.clip(beta, 0.0, 1.0)
        n_inf = np.ceil(deff_r * np.maximum(vy - 2 * lam_inf * c + lam_inf**2 * vf, 0.0) / t - 1e-9)
        if pool == "data":
            n_ppi, reach = _bisect_pool(vy, c, vf, beta, m, t, deff_r, deff_f)
            n_ppi = np.where(reach, n_ppi, n_inf)
            ok_ppi, ok_human = reach, n_human <= m
        else:
            n_ppi, ok_ppi, ok_human = n_inf, np.ones(len(m), bool), np.ones(len(m), bool)
        for g in range(len(keys)):
            for method, need, ok in (("ppi++", n_ppi[g], ok_ppi[g]), ("human", n_human[g], ok_human[g])):
                reason = base[g]
                value: Any = pd.NA
                if reason is None:
                    value = int(max(need, 2.0))
                    if not ok:
                        reason = (f"needs more labels than the {int(m[g])} judged items in this group; collect more "
                                  "items or accept a wider interval")
                        if method == "ppi++":
                            reason += " (labels_needed assumes a much larger pool of judged items)"
                rows.append({
                    **{col: keys.iloc[g][col] for col in by_cols},
                    "method": method, "width": float(wd), "labels_needed": value,
                    "more_labels": pd.NA if value is pd.NA else max(value - int(s.n[g]), 0),
                    "n_labelled_pilot": int(s.n[g]), "n_total": int(m[g]),
                    "achievable": bool(ok) and reason is None, "reason": reason,
                    "cluster": cluster_col,
                    "n_clusters_pilot": int(g_pilot[g]) if cluster_col is not None else pd.NA,
                    "clusters_needed": (math.ceil(value / turns_per_cluster[g] - 1e-9)
                                        if cluster_col is not None and value is not pd.NA else pd.NA),
                })
    out = pd.DataFrame(rows, columns=[*by_cols, *_PLANNING_COLUMNS])
    out["reason"] = out["reason"].astype(object).where(out["reason"].notna(), None)
    for col in ("labels_needed", "more_labels", "n_clusters_pilot", "clusters_needed"):
        out[col] = out[col].astype("Int64")
    out["cluster"] = out["cluster"].astype(object).where(out["cluster"].notna(), None)
    out.attrs["cluster"] = cluster_col
    if by_cols and len(out):
        for col in by_cols:  # keep the key columns' dtypes (e.g. categoricals)
            out[col] = out[col].astype(keys[col].dtype)
    return out


def _design_effects(s: _Sums, mo: _Moments, pairs: _Pairs, y: np.ndarray, f: np.ndarray,
                    lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group, from the pilot: the design effects (Kish 1965, *Survey Sampling*: the cluster-robust variance
    over the variance of independent rows) of the human mean, of the PPI++ residual mean ``mean(Y − λ f)``
    and of the judge's mean over all judged rows, and the pilot's labelled clusters. A design effect is 1
    where the independent-rows variance is 0 (nothing to inflate)."""
    codes = pairs.codes
    has_y, has_f = ~np.isnan(y), ~np.isnan(f)
    lab = has_y & has_f
    n, m = s.n.astype(float), (s.n + s.N).astype(float)
    human = _clustered(s, mo, pairs, "human", y, f, None)
    r = y - lam[codes] * f
    r_bar = _div(np.bincount(codes, weights=np.where(lab, r, 0.0), minlength=pairs.n_groups), n)
    r_var = np.maximum(_div(np.bincount(codes, weights=np.where(lab, r * r, 0.0), minlength=pairs.n_groups), n)
                       - r_bar**2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        part_r = pairs.scale(lab) * pairs.sums(_finite0(np.where(lab, (r - r_bar[codes]) / n[codes], 0.0)))
        part_f = pairs.scale(has_f) * pairs.sums(_finite0(np.where(has_f, (f - mo.fbar_all[codes]) / m[codes],
                                                                            0.0)))

    def ratio(clustered: np.ndarray, independent: np.ndarray) -> np.ndarray:
        out = _div(clustered, independent)
        return np.where((independent > 0) & np.isfinite(out), np.maximum(out, 0.0), 1.0)

    return (ratio(human.var, _div(mo.vy, n)), ratio(pairs.total(part_r**2), _div(r_var, n)),
            ratio(pairs.total(part_f**2), _div(mo.vf_all0, m)), human.n_clusters)


def _pool_variance(vy: np.ndarray, c: np.ndarray, vf: np.ndarray, beta: np.ndarray, m: np.ndarray,
                   n: np.ndarray, deff_r: Any = 1.0, deff_f: Any = 1.0) -> np.ndarray:
    """PPI++'s variance with n labelled of m judged rows, λ = clip(β (m − n)/m, 0, 1); with clusters the
    labelled part is inflated by its design effect ``deff_r`` and the unlabelled part by ``deff_f``."""
    lam = np.clip(beta * (m - n) / m, 0.0, 1.0)
    rest = np.where(m > n, lam**2 * _div(vf, m - n), 0.0)
    return deff_r * np.maximum(vy - 2 * lam * c + lam**2 * vf, 0.0) / n + deff_f * rest


def _bisect_pool(vy: np.ndarray, c: np.ndarray, vf: np.ndarray, beta: np.ndarray, m: np.ndarray,
                 t: float, deff_r: Any = 1.0, deff_f: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Smallest n in 1..m with variance <= t, per group, and whether labelling all m reaches t."""
    with np.errstate(all="ignore"):
        hi = np.maximum(m, 1.0)
        reach = _pool_variance(vy, c, vf, beta, m, hi, deff_r, deff_f) <= t * (1 + 1e-12)
        lo = np.zeros_like(hi)  # invariant: V(lo) > t (n = 0 never works), V(hi) <= t
        for _ in range(64):
            active = hi - lo > 1
            if not active.any():
                break
            mid = np.floor((lo + hi) / 2)
            good = _pool_variance(vy, c, vf, beta, m, np.maximum(mid, 1.0), deff_r, deff_f) <= t * (1 + 1e-12)
            hi = np.where(active & good, mid, hi)
            lo = np.where(active & ~good, mid, lo)
    return hi, reach
