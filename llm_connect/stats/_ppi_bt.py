"""Prediction-powered Bradley–Terry: the judge's leaderboard anchored to people's labels on a subset of the
comparisons (Boyeau et al. 2024, "AutoEval Done Right", arXiv:2403.07008), with the PPI++ weight of Angelopoulos,
Duchi & Zrnic (2023), "PPI++: Efficient Prediction-Powered Inference", arXiv:2311.01453, and sandwich (Wald)
intervals. :func:`ppi_bradley_terry` is the estimator on index arrays; :func:`ppi_board` the leaderboard frame
:func:`~llm_connect.calibration.compare_leaderboards` shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._bt_fit import _ELO, MEAN, RIDGE, _expit, not_identified
from ._comparisons import _aggregate, _sort_key, _worth

__all__ = ["ppi_board", "ppi_bradley_terry"]


def _design(pairs_i: np.ndarray, pairs_j: np.ndarray, m: int) -> np.ndarray:
    """(P, M-1) rows ``e_i - e_j`` with model 0 as the reference (its strength fixed at 0)."""
    x = np.zeros((len(pairs_i), m))
    x[np.arange(len(pairs_i)), pairs_i] = 1.0
    x[np.arange(len(pairs_i)), pairs_j] = -1.0
    return x[:, 1:]


@dataclass
class _Sums:
    """Per pair (oriented i < j; y = 1 when i won): counts and sums of the people's ``y`` and the
    judge's ``yhat`` on the labelled rows, and of ``yhat`` on the unlabelled rows."""

    n: np.ndarray
    y: np.ndarray
    yh: np.ndarray
    yy: np.ndarray
    hh: np.ndarray
    yh_cross: np.ndarray
    n_u: np.ndarray
    yh_u: np.ndarray
    hh_u: np.ndarray


def _ppi_objective_fit(x: np.ndarray, s: _Sums, lam: float, theta0: np.ndarray, *, tol: float = 1e-12,
                       max_iter: int = 200) -> np.ndarray:
    """Minimise ``L_n(y) + lam * (L_N(yhat_unlabelled) - L_n(yhat)) + RIDGE/(2n) |theta|^2`` (mean
    logistic losses) by Newton's method; for ``lam`` in [0, 1] the objective is convex. The ridge is
    :func:`leaderboard`'s (:data:`RIDGE` on the summed likelihood), so a model that won every labelled
    comparison gets a finite strength, as on the other boards, instead of a singular Hessian."""
    n, big_n = s.n.sum(), s.n_u.sum()
    ridge = RIDGE / max(float(n), 1.0)
    theta = theta0.copy()
    for _ in range(max_iter):
        sig = _expit(x @ theta)
        coef = ((1.0 - lam) * s.n * sig + lam * s.yh - s.y) / n
        if big_n > 0 and lam:
            coef = coef + lam * (s.n_u * sig - s.yh_u) / big_n
        grad = x.T @ coef + ridge * theta
        w = ((1.0 - lam) * s.n / n + (lam * s.n_u / big_n if big_n > 0 else 0.0)) * sig * (1.0 - sig)
        hess = x.T @ (w[:, None] * x)
        step = np.linalg.solve(hess + (ridge + 1e-12) * np.eye(len(theta)), grad)
        biggest = float(np.abs(step).max()) if len(step) else 0.0
        if biggest > 4.0:
            step *= 4.0 / biggest
        theta = theta - step
        if biggest < tol:
            break
    return theta


def _ppi_stats(x: np.ndarray, s: _Sums, theta: np.ndarray, use_unlabelled: bool) -> dict[str, np.ndarray]:
    """What PPI++ needs at ``theta`` (Angelopoulos, Duchi & Zrnic 2023, as ``ppi_py``'s
    ``_logistic_get_stats``), from the per-pair sums: the Hessian over all rows, and the means,
    covariances and cross-covariance of the per-row gradients ``x (sigma - y)`` and ``x (sigma - yhat)``."""
    n, big_n = s.n.sum(), s.n_u.sum()
    sig = _expit(x @ theta)
    v = sig * (1.0 - sig)
    if use_unlabelled:
        hess = x.T @ (((s.n + s.n_u) * v)[:, None] * x) / (n + big_n)
    else:
        hess = x.T @ ((s.n * v)[:, None] * x) / n
    hess = hess + RIDGE / max(float(n), 1.0) * np.eye(x.shape[1])  # the fit's ridge: never singular

    def outer(weights: np.ndarray) -> np.ndarray:
        return x.T @ (weights[:, None] * x)

    g_mean = x.T @ (s.n * sig - s.y) / n
    h_mean = x.T @ (s.n * sig - s.yh) / n
    u_mean = x.T @ (s.n_u * sig - s.yh_u) / big_n if big_n else np.zeros(x.shape[1])
    gg = outer(s.n * sig**2 - 2 * sig * s.y + s.yy)  # sum over rows of g g^T
    hh = outer(s.n * sig**2 - 2 * sig * s.yh + s.hh)
    gh = outer(s.n * sig**2 - sig * (s.y + s.yh) + s.yh_cross)
    uu = outer(s.n_u * sig**2 - 2 * sig * s.yh_u + s.hh_u)
    return {"hess": hess, "n": np.asarray(n), "N": np.asarray(big_n), "g_mean": g_mean, "h_mean": h_mean,
            "u_mean": u_mean, "gg": gg, "hh": hh, "gh": gh, "uu": uu}


def _ppi_lambda(st: dict[str, Any]) -> float:
    """The PPI++ power-tuning parameter (``ppi_py._calc_lhat_glm``, clipped to [0, 1])."""
    n, big_n = float(st["n"]), float(st["N"])
    inv = np.linalg.inv(st["hess"])
    g, h, u = st["g_mean"], st["h_mean"], st["u_mean"]
    cross = (st["gh"] - n * np.outer(g, h)) / n
    cov = cross + cross.T
    total = n + big_n
    pooled_mean = (n * h + big_n * u) / total
    var_hat = (st["hh"] + st["uu"] - total * np.outer(pooled_mean, pooled_mean)) / (total - 1)
    num = np.trace(inv @ cov @ inv)
    den = 2.0 * (1.0 + n / big_n) * np.trace(inv @ var_hat @ inv)
    return float(np.clip(num / den, 0.0, 1.0)) if den > 0 else 0.0


def _ppi_covariance(st: dict[str, Any], lam: float) -> np.ndarray:
    """``Sigma / n`` of the PPI++ estimate (``ppi_py.ppi_logistic_ci``): sandwich with the
    labelled rectifier ``g - lam * ghat`` and the unlabelled ``lam * ghat``."""
    n, big_n = float(st["n"]), float(st["N"])
    inv = np.linalg.inv(st["hess"])
    g, h, u = st["g_mean"], st["h_mean"], st["u_mean"]
    d_mean = g - lam * h
    d_second = st["gg"] - lam * (st["gh"] + st["gh"].T) + lam**2 * st["hh"]
    var = (d_second - n * np.outer(d_mean, d_mean)) / (n - 1)
    var_u = lam**2 * (st["uu"] - big_n * np.outer(u, u)) / (big_n - 1) if big_n > 1 else np.zeros_like(var)
    sigma = inv @ (n / big_n * var_u + var) @ inv if big_n > 0 else inv @ var @ inv
    return sigma / n


def _ppi_sums(lab_i: np.ndarray, lab_j: np.ndarray, y: np.ndarray, yh: np.ndarray, unl_i: np.ndarray,
              unl_j: np.ndarray, yh_u: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, _Sums]:
    """Aggregate oriented rows into per-pair sums over the pairs seen in either set."""
    key_l = lab_i * m + lab_j
    key_u = unl_i * m + unl_j
    cells = np.unique(np.concatenate([key_l, key_u]))
    pos_l = np.searchsorted(cells, key_l)
    pos_u = np.searchsorted(cells, key_u)
    p = len(cells)

    def total(pos: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(pos, weights=w, minlength=p).astype(float)

    sums = _Sums(n=total(pos_l), y=total(pos_l, y), yh=total(pos_l, yh), yy=total(pos_l, y * y),
                 hh=total(pos_l, yh * yh), yh_cross=total(pos_l, y * yh), n_u=total(pos_u), yh_u=total(pos_u, yh_u),
                 hh_u=total(pos_u, yh_u * yh_u))
    return cells // m, cells % m, sums


def _clustered_covariance(st: dict[str, Any], theta: np.ndarray, lam: float, rows: tuple[np.ndarray, ...],
                          clusters: np.ndarray, clusters_unlabelled: np.ndarray, m: int) -> tuple[np.ndarray, int]:
    """The cluster-robust (CR1) sandwich covariance of the PPI++ estimate, and the number of clusters.

    The estimate solves ``(1/n) sum_labelled d_r + (1/N) sum_unlabelled e_u = 0`` with per-row gradients
    ``d_r = x_r ((1 - lam) sigma_r - y_r + lam yhat_r)`` and ``e_u = lam x_u (sigma_u - yhat_u)``; its
    influence terms ``(d_r - dbar) / n`` and ``(e_u - ebar) / N`` are summed within each cluster (the labelled
    and unlabelled comparisons of one conversation together), and ``Sigma = H^-1 [G/(G-1) sum_g S_g S_g^T]
    H^-1`` (Cameron & Miller 2015, "A Practitioner's Guide to Cluster-Robust Inference", sections II-III:
    the sandwich of an M-estimator with the meat summed by cluster). Without clusters (each row its own)
    this is the usual sandwich up to the factors ``n/(n-1)``."""
    lab_i, lab_j, y, yh, unl_i, unl_j, yh_u = rows
    full = np.concatenate([[0.0], theta])
    n, big_n = len(lab_i), len(unl_i)
    _, codes = np.unique(np.concatenate([np.asarray(clusters), np.asarray(clusters_unlabelled)]),
                         return_inverse=True)
    codes = np.asarray(codes, dtype=np.int64).reshape(-1)
    g = int(codes.max()) + 1 if len(codes) else 0
    c_lab, c_unl = codes[:n], codes[n:]

    def per_cluster(i: np.ndarray, j: np.ndarray, coef: np.ndarray, where: np.ndarray) -> np.ndarray:
        out = np.zeros((g, m))
        np.add.at(out, (where, i), coef)
        np.add.at(out, (where, j), -coef)
        return out[:, 1:]  # model 0 is the reference

    sig_l = _expit(full[lab_i] - full[lab_j])
    d = per_cluster(lab_i, lab_j, (1.0 - lam) * sig_l - y + lam * yh, c_lab)
    meat = (d - np.bincount(c_lab, minlength=g)[:, None] * (d.sum(axis=0) / n)) / n
    if big_n and lam:
        sig_u = _expit(full[unl_i] - full[unl_j])
        e = per_cluster(unl_i, unl_j, lam * (sig_u - yh_u), c_unl)
        meat = meat + (e - np.bincount(c_unl, minlength=g)[:, None] * (e.sum(axis=0) / big_n)) / big_n
    if g < 2:
        return np.full((m - 1, m - 1), np.nan), g
    inv = np.linalg.inv(st["hess"])
    return inv @ (g / (g - 1.0) * meat.T @ meat) @ inv, g


def ppi_bradley_terry(
    lab_i: np.ndarray, lab_j: np.ndarray, y: np.ndarray, yhat: np.ndarray, unl_i: np.ndarray, unl_j: np.ndarray,
    yhat_unlabelled: np.ndarray, m: int, *, lam: float | None = None, clusters: np.ndarray | None = None,
    clusters_unlabelled: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Prediction-powered Bradley-Terry (Boyeau et al. 2024, "AutoEval Done Right",
    arXiv:2403.07008; PPI++ for M-estimators, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453).

    Rows are comparisons of models ``i`` and ``j`` (indices below ``m``), ``y`` the people's
    outcome (1: i won, 0: j won, 0.5: tie) on the labelled rows, ``yhat`` the judge's on the same
    rows, ``yhat_unlabelled`` the judge's on rows people did not label. Minimises
    ``L_labelled(y) + lam * (L_unlabelled(yhat) - L_labelled(yhat))`` over log-strengths with
    model 0 fixed at 0; ``lam=None`` tunes it as PPI++ does (clipped to [0, 1]). Returns the
    ``m - 1`` log-strengths of models ``1..m-1``, their covariance (sandwich) and ``lam``.

    Parameters
    ----------
    lab_i : ndarray of int
        Model ``i`` of each labelled comparison.
    lab_j : ndarray of int
        Model ``j`` of each labelled comparison.
    y : ndarray of float
        The people's outcome on the labelled rows.
    yhat : ndarray of float
        The judge's on the same rows.
    unl_i : ndarray of int
        Model ``i`` of each unlabelled comparison.
    unl_j : ndarray of int
        Model ``j`` of each unlabelled comparison.
    yhat_unlabelled : ndarray of float
        The judge's outcome on the unlabelled rows.
    m : int
        The number of models.
    lam : float, optional
        The PPI++ weight; ``None``: tuned (as without clusters: any ``lam`` gives a valid estimate; the
        tuning only makes it tighter).
    clusters, clusters_unlabelled : ndarray, optional
        One cluster id per labelled / unlabelled row (the conversation of a comparison made on one of its
        turns); the covariance is then cluster-robust (CR1, the gradients summed within each cluster,
        labelled and unlabelled rows of a cluster together; see :func:`_clustered_covariance`), NaN with
        fewer than 2 clusters.

    Returns
    -------
    tuple of (ndarray, ndarray, float)
        The log-strengths, their covariance and ``lam``.
    """
    pi, pj, s = _ppi_sums(lab_i, lab_j, y, yhat, unl_i, unl_j, yhat_unlabelled, m)
    x = _design(pi, pj, m)
    use_u = s.n_u.sum() > 0
    start = _ppi_objective_fit(x, s, 0.0, np.zeros(m - 1))  # the people-only fit, to start from
    if lam is None:
        if use_u:
            theta1 = _ppi_objective_fit(x, s, 1.0, start)
            lam = _ppi_lambda(_ppi_stats(x, s, theta1, True))
        else:
            lam = 0.0
    theta = _ppi_objective_fit(x, s, lam, start)
    st = _ppi_stats(x, s, theta, use_u and lam != 0)
    if clusters is not None:
        unlabelled = np.arange(len(unl_i)) if clusters_unlabelled is None else clusters_unlabelled
        cov, _ = _clustered_covariance(st, theta, lam, (lab_i, lab_j, y, yhat, unl_i, unl_j, yhat_unlabelled),
                                       clusters, unlabelled, m)
        return theta, cov, float(lam)
    return theta, _ppi_covariance(st, lam), float(lam)


def _oriented(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, index: Mapping[Any, int]) -> tuple[np.ndarray, ...]:
    ia = np.fromiter((index[v] for v in a), dtype=np.int64, count=len(a))
    ib = np.fromiter((index[v] for v in b), dtype=np.int64, count=len(b))
    ya = _worth(outcome)  # 1 / 0 / 0.5, or the probability that A is preferred
    flip = ia > ib
    return np.where(flip, ib, ia), np.where(flip, ia, ib), np.where(flip, 1.0 - ya, ya), flip


def ppi_board(a: np.ndarray, b: np.ndarray, human: np.ndarray, judge: np.ndarray, *,
               confidence: float, clusters: np.ndarray | None = None,
               cluster: str | None = None) -> tuple[pd.DataFrame, float]:
    """People's leaderboard anchored by the judge: PPI++ Bradley–Terry with the judge's winners on every
    comparison and people's on the ones they labelled, with Wald intervals from the sandwich covariance.

    Parameters
    ----------
    a, b : numpy.ndarray
        The two models of each comparison.
    human : numpy.ndarray
        People's winners (``"a"``, ``"b"``, ``"tie"``, a probability that A is preferred, or ``None`` where
        people did not label the comparison), as :func:`~llm_connect.stats.bradley_terry.read_outcomes` reads
        them.
    judge : numpy.ndarray
        The judge's winners, read the same way (``None``: the judge did not decide).
    confidence : float
        The interval level.
    clusters : numpy.ndarray, optional
        One cluster id per comparison (the conversation of a comparison made on one of its turns): the
        intervals are then cluster-robust (CR1 sandwich, ``t(G - 1)`` critical values; see
        :func:`ppi_bradley_terry`), and with fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS`
        clusters there are none (the ``note`` column and ``attrs["cluster_note"]`` say why).
    cluster : str, optional
        The name of the cluster column, for the notes.

    Returns
    -------
    board : pandas.DataFrame
        One row per model, best first: the leaderboard columns
        (:data:`~llm_connect.stats.bradley_terry.LEADERBOARD_COLUMNS`, ``n`` and ``win_rate`` counted on
        people's comparisons), then ``judge_only`` and ``note``. A model no person compared (``judge_only``)
        or whose strength people's comparisons cannot identify (it won or lost all of them) has no interval
        and the widest rank range. ``attrs``: ``method``, ``confidence``, ``lam``, ``n_labelled``,
        ``n_unlabelled``, ``separated``, ``judge_only``, ``cluster``, ``n_clusters``, ``cluster_note``.
    lam : float
        The PPI++ weight of the judge's comparisons, in [0, 1].

    See Also
    --------
    ppi_bradley_terry : the estimator on index arrays.
    """
    from scipy.stats import norm

    has_j = np.array([o is not None for o in judge], dtype=bool)
    has_h = np.array([o is not None for o in human], dtype=bool)
    differ = np.asarray(a != b, dtype=bool)
    lab = has_j & has_h & differ
    unl = has_j & ~has_h & differ
    models = sorted(set(a[lab | unl].tolist()) | set(b[lab | unl].tolist()), key=_sort_key)
    index = {mname: k for k, mname in enumerate(models)}
    li, lj, y, _ = _oriented(a[lab], b[lab], human[lab], index)
    _, _, yh, _ = _oriented(a[lab], b[lab], judge[lab], index)
    ui, uj, yu, _ = _oriented(a[unl], b[unl], judge[unl], index)
    m = len(models)
    grouped = {} if clusters is None else {"clusters": np.asarray(clusters)[lab],
                                           "clusters_unlabelled": np.asarray(clusters)[unl]}
    theta_r, cov_r, lam = ppi_bradley_terry(li, lj, y, yh, ui, uj, yu, m, **grouped)
    embed = np.zeros((m, m - 1))
    embed[1:, :] = np.eye(m - 1)
    centre = np.eye(m) - 1.0 / m
    a_map = _ELO * centre @ embed
    rating = MEAN + a_map @ theta_r
    se = np.sqrt(np.clip(np.diag(a_map @ cov_r @ a_map.T), 0.0, None))
    z = float(norm.ppf(0.5 + confidence / 2.0))
    n_clusters, cluster_note = None, None
    if clusters is not None:
        from .clusters import MIN_CLUSTERS, few_clusters_reason, t_critical

        n_clusters = len(np.unique(np.asarray(clusters)[lab | unl]))
        z = float(t_critical(confidence, n_clusters - 1))
        if n_clusters < MIN_CLUSTERS:
            cluster_note = few_clusters_reason(n_clusters, column=cluster, what="compared")
            se = np.full(m, np.nan)
    low, high = rating - z * se, rating + z * se
    pairs = _aggregate(a[lab], b[lab], human[lab], models)
    people_n = np.bincount(np.concatenate([pairs.i, pairs.j]),
                           weights=np.tile(pairs.wins_i + pairs.wins_j + pairs.ties, 2), minlength=m)
    judge_only = people_n == 0
    separated = not_identified(pairs) & ~judge_only
    note = np.where(judge_only, "judge-only: no person compared this model, so people's labels cannot correct "
                    "the judge here; no interval", "")
    note = np.where(separated, "separated: in people's comparisons this model won (or lost) every time, so its "
                    "strength is not identified; no interval", note)
    flagged = judge_only | separated
    low, high = np.where(flagged, np.nan, low), np.where(flagged, np.nan, high)
    rank = 1 + (rating[None, :] > rating[:, None]).sum(axis=1)
    ok = ~flagged  # rank ranges among the models with intervals; a flagged model could be anywhere
    better = (low[None, :] > high[:, None]) & ok[None, :] & ok[:, None]
    worse = (high[None, :] < low[:, None]) & ok[None, :] & ok[:, None]
    rank_low = np.where(flagged, 1, 1 + better.sum(axis=1))
    rank_high = np.where(flagged, m, m - worse.sum(axis=1))
    n = np.bincount(pairs.i, weights=pairs.wins_i + pairs.wins_j + pairs.ties, minlength=m) + \
        np.bincount(pairs.j, weights=pairs.wins_i + pairs.wins_j + pairs.ties, minlength=m)
    won = np.bincount(pairs.i, weights=pairs.wins_i + 0.5 * pairs.ties, minlength=m) + \
        np.bincount(pairs.j, weights=pairs.wins_j + 0.5 * pairs.ties, minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rate = won / n
    frame = pd.DataFrame({"model": models, "rating": rating, "rating_low": low, "rating_high": high, "rank": rank,
                          "rank_low": rank_low.astype(np.int64), "rank_high": rank_high.astype(np.int64),
                          "n": n.astype(np.int64), "win_rate": win_rate, "judge_only": judge_only,
                          "note": note})
    frame = frame.sort_values(["rating", "model"], ascending=[False, True]).reset_index(drop=True)
    frame.attrs.update(method="ppi++ bradley-terry", confidence=confidence, lam=lam,
                       n_labelled=int(lab.sum()), n_unlabelled=int(unl.sum()),
                       separated=[mm for mm, bad in zip(models, separated, strict=True) if bad],
                       judge_only=[mm for mm, bad in zip(models, judge_only, strict=True) if bad],
                       cluster=cluster if clusters is not None else None, n_clusters=n_clusters,
                       cluster_note=cluster_note)
    return frame, lam
