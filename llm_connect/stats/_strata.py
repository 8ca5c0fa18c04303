"""Two strata for :mod:`llm_connect.stats.estimates` (``judge_missing="stratify"``): the rows a judge scored and
the rows it did not (a selective judge's abstentions), each estimated on its own and combined by their shares,
with independent rows (:func:`_stratified`) or in clusters (:func:`_stratified_clustered`); see that module's
docstring (Fisch et al. 2024, arXiv:2406.04291).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._clustered import _Clustered, _Pairs
from ._estimators import _div, _finite0, _honest_se, _Sums, _widening


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
