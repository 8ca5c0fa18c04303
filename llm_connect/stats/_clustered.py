"""Rows in clusters (the turns of a conversation) for :mod:`llm_connect.stats.estimates`: each estimator's
per-row influence terms summed within each (group, cluster), the cluster-robust (CR1) variance, and PPI++'s
``lambda`` tuned on cluster-level covariances (see that module's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._estimators import _div, _finite0, _label_reasons, _Moments, _ppi, _Sums


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
