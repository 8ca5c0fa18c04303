"""The Bradley–Terry fit on comparisons counted per pair of models: maximum likelihood by Newton's method, the
percentile bootstrap (all resamples fitted at once by chord steps), Elo-scale ratings, Arena rank ranges, and the
models whose strength the data cannot identify. :func:`~llm_connect.stats.bradley_terry.leaderboard` reads the
comparisons and calls :func:`_board`; the style-controlled fit (:mod:`llm_connect.stats.style`) and
prediction-powered Bradley–Terry reuse the pieces. The model and its references are in
:mod:`llm_connect.stats.bradley_terry`'s docstring.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ._comparisons import _Pairs

#: Elo scale: ``SCALE * log10(odds)``; ratings are shifted so that their mean is ``MEAN``.
SCALE = 400.0
MEAN = 1000.0
_ELO = SCALE / math.log(10.0)
#: Ridge on the log-strengths (as ``choix.opt_pairwise``'s default): finite ratings for a model that
#: won or lost everything; on ordinary data it moves a rating by far less than 0.001.
RIDGE = 1e-6
_CELLS_BUDGET = 12_500_000  # floats per bootstrap chunk (resamples x models x models)


def _incidence(pairs: _Pairs) -> tuple[Any, Any]:
    """Sparse (P, M) matrices: signed (``+1`` at i, ``-1`` at j) and absolute incidence."""
    from scipy.sparse import csr_matrix

    p = len(pairs.i)
    rows = np.concatenate([np.arange(p), np.arange(p)])
    cols = np.concatenate([pairs.i, pairs.j])
    signed = csr_matrix((np.concatenate([np.ones(p), -np.ones(p)]), (rows, cols)), shape=(p, pairs.m))
    absolute = csr_matrix((np.ones(2 * p), (rows, cols)), shape=(p, pairs.m))
    return signed, absolute


def _expit(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def _fit_bt(pairs: _Pairs, wi: np.ndarray, wj: np.ndarray, theta0: np.ndarray | None = None, *,
            ridge: float = RIDGE, tol: float = 1e-9, max_iter: int = 100) -> np.ndarray:
    """Maximum-likelihood log-strengths for each row of the weights ``wi``/``wj`` ``(B, P)`` (wins of
    i and of j, ties counted half to each), by Newton's method on all rows at once; ``(B, M)``.

    Maximises ``sum_k wi log s(d_k) + wj log s(-d_k) - ridge/2 |theta|^2`` with ``d = theta_i - theta_j``;
    the optimum has mean 0 (the gradient of the likelihood sums to zero over models). A step is
    shortened to at most 4 in log-odds so that a far start cannot overshoot."""
    b, m = wi.shape[0], pairs.m
    signed, absolute = _incidence(pairs)
    theta = np.zeros((b, m)) if theta0 is None else np.array(np.broadcast_to(theta0, (b, m)), dtype=float)
    total = wi + wj
    active = np.arange(b)
    eye = np.arange(m)
    for _ in range(max_iter):
        if not len(active):
            break
        th = theta[active]
        d = th[:, pairs.i] - th[:, pairs.j]
        s = _expit(d)
        resid = wi[active] - total[active] * s
        grad = np.asarray((signed.T @ resid.T).T) - ridge * th
        v = total[active] * s * (1.0 - s)
        hess = np.zeros((len(active), m, m))
        hess[:, pairs.i, pairs.j] = -v
        hess[:, pairs.j, pairs.i] = -v
        hess[:, eye, eye] = np.asarray((absolute.T @ v.T).T) + ridge
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        big = np.abs(step).max(axis=1)
        scale = np.where(big > 4.0, 4.0 / np.maximum(big, 1e-300), 1.0)
        step *= scale[:, None]
        theta[active] = th + step
        active = active[big > tol]
    return theta - theta.mean(axis=1, keepdims=True)


def _fit_bt_chord(pairs: _Pairs, wi: np.ndarray, wj: np.ndarray, theta0: np.ndarray, hess_inv: np.ndarray, *,
                  ridge: float = RIDGE, tol: float = 1e-9, max_iter: int = 60) -> np.ndarray:
    """The same optimum as :func:`_fit_bt` for resamples close to the data: Newton's method with the
    Hessian held at the point estimate (a chord method: one ``(M, M)`` inverse for every resample,
    linear convergence at a rate of the resamples' relative noise). A resample that does not settle
    within ``max_iter`` steps, or whose steps grow, is finished by full Newton steps."""
    b = wi.shape[0]
    signed, _ = _incidence(pairs)
    theta = np.array(np.broadcast_to(theta0, (b, pairs.m)), dtype=float)
    total = wi + wj
    active = np.arange(b)
    last = np.full(b, np.inf)
    for _ in range(max_iter):
        if not len(active):
            break
        th = theta[active]
        s = _expit(th[:, pairs.i] - th[:, pairs.j])
        grad = np.asarray((signed.T @ (wi[active] - total[active] * s).T).T) - ridge * th
        step = grad @ hess_inv
        big = np.abs(step).max(axis=1)
        growing = big > 2.0 * last[active]
        theta[active] = np.where(growing[:, None], th, th + step)
        last[active] = big
        active = active[(big > tol) & ~growing]
    unsettled = np.flatnonzero(last > tol)
    if len(unsettled):
        theta[unsettled] = _fit_bt(pairs, wi[unsettled], wj[unsettled], theta[unsettled], ridge=ridge, tol=tol)
    return theta - theta.mean(axis=1, keepdims=True)


def _hessian(pairs: _Pairs, theta: np.ndarray, total: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """The negative Hessian of the log-likelihood at ``theta`` (``(M,)``) for pair counts ``total``."""
    s = _expit(theta[pairs.i] - theta[pairs.j])
    v = total * s * (1.0 - s)
    hess = np.zeros((pairs.m, pairs.m))
    hess[pairs.i, pairs.j] = -v
    hess[pairs.j, pairs.i] = -v
    np.add.at(hess, (pairs.i, pairs.i), v)
    np.add.at(hess, (pairs.j, pairs.j), v)
    return hess + ridge * np.eye(pairs.m)


def _ratings(theta: np.ndarray) -> np.ndarray:
    return MEAN + _ELO * (theta - theta.mean(axis=-1, keepdims=True))


def _bootstrap_bt(pairs: _Pairs, theta_hat: np.ndarray, n_boot: int, seed: int | None,
                  progress: bool | None) -> np.ndarray:
    """``(n_boot, M)`` ratings of resamples of the comparisons (multinomial over the pair-outcome cells)."""
    if pairs.cells is not None:
        return _bootstrap_cells(pairs, theta_hat, n_boot, seed, progress)
    counts = np.concatenate([pairs.wins_i, pairs.wins_j, pairs.ties])
    keep = counts > 0
    cells = counts[keep]
    n = round(float(cells.sum()))
    p = len(pairs.i)
    kind = np.repeat(np.arange(3), p)[keep]
    pair = np.tile(np.arange(p), 3)[keep]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _CELLS_BUDGET // max(3 * p, pairs.m * pairs.m, 1)))
    out = np.empty((n_boot, pairs.m))
    from ._progress import progress_bar

    hess_inv = np.linalg.inv(_hessian(pairs, theta_hat, pairs.wins_i + pairs.wins_j + pairs.ties))
    show = (n_boot > chunk) if progress is None else bool(progress)
    with progress_bar(n_boot, desc="leaderboard: bootstrap", unit="resample", show=show, leave=False) as bar:
        done = 0
        while done < n_boot:
            k = min(chunk, n_boot - done)
            draws = rng.multinomial(n, cells / n, size=k).astype(float)
            wi = np.zeros((k, p))
            wj = np.zeros((k, p))
            for kd, targets in ((0, ((wi, 1.0),)), (1, ((wj, 1.0),)), (2, ((wi, 0.5), (wj, 0.5)))):
                sel = kind == kd  # each pair appears at most once per outcome
                for target, share in targets:
                    target[:, pair[sel]] += share * draws[:, sel]
            out[done:done + k] = _ratings(_fit_bt_chord(pairs, wi, wj, theta_hat, hess_inv))
            done += k
            bar.update(k)
    return out


def _bootstrap_cells(pairs: _Pairs, theta_hat: np.ndarray, n_boot: int, seed: int | None,
                     progress: bool | None) -> np.ndarray:
    """:func:`_bootstrap_bt` for continuous preferences: multinomial resamples over the distinct
    (pair, share won) outcomes of ``pairs.cells``, each adding its share to one side's wins and the
    rest to the other's."""
    from scipy.sparse import csr_matrix

    from ._progress import progress_bar

    assert pairs.cells is not None
    pair, share, counts = pairs.cells
    c, p = len(pair), len(pairs.i)
    n = round(float(counts.sum()))
    to_i = csr_matrix((share, (np.arange(c), pair)), shape=(c, p))
    to_j = csr_matrix((1.0 - share, (np.arange(c), pair)), shape=(c, p))
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _CELLS_BUDGET // max(c, p, pairs.m * pairs.m, 1)))
    out = np.empty((n_boot, pairs.m))
    hess_inv = np.linalg.inv(_hessian(pairs, theta_hat, pairs.wins_i + pairs.wins_j + pairs.ties))
    show = (n_boot > chunk) if progress is None else bool(progress)
    with progress_bar(n_boot, desc="leaderboard: bootstrap", unit="resample", show=show, leave=False) as bar:
        done = 0
        while done < n_boot:
            k = min(chunk, n_boot - done)
            draws = rng.multinomial(n, counts / counts.sum(), size=k).astype(float)
            wi = np.asarray((to_i.T @ draws.T).T)
            wj = np.asarray((to_j.T @ draws.T).T)
            out[done:done + k] = _ratings(_fit_bt_chord(pairs, wi, wj, theta_hat, hess_inv))
            done += k
            bar.update(k)
    return out


def _rank_intervals(rating: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, ...]:
    """Rank 1 = best; best and worst plausible ranks from the intervals, as Chatbot Arena does."""
    rank = 1 + (rating[None, :] > rating[:, None]).sum(axis=1)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        return rank, np.full(len(rating), -1), np.full(len(rating), -1)
    better = low[None, :] > high[:, None]  # [i, j]: j is surely better than i
    worse = high[None, :] < low[:, None]  # [i, j]: j is surely worse than i
    return rank, 1 + better.sum(axis=1), len(rating) - worse.sum(axis=1)


def not_identified(pairs: _Pairs) -> np.ndarray:
    """Models whose Bradley–Terry strength has no maximum-likelihood estimate, as a boolean mask.

    The MLE exists exactly when the directed graph "i beat j at least once" (a tie counts both ways)
    is strongly connected (Zermelo 1929; Ford 1957). Otherwise a group of models won (or lost) every
    comparison with the rest: their strengths run off to infinity and only the ridge keeps them
    finite, so their ratings and intervals say nothing. Flagged: every model outside the largest
    strongly connected component, and every model with no comparison."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    m = pairs.m
    beat_ij = (pairs.wins_i + pairs.ties) > 0
    beat_ji = (pairs.wins_j + pairs.ties) > 0
    rows = np.concatenate([pairs.i[beat_ij], pairs.j[beat_ji]])
    cols = np.concatenate([pairs.j[beat_ij], pairs.i[beat_ji]])
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(m, m))
    _, label = connected_components(graph, directed=True, connection="strong")
    compared = np.bincount(np.concatenate([pairs.i, pairs.j]), minlength=m) > 0
    sizes = np.bincount(label[compared], minlength=label.max() + 1) if compared.any() else np.zeros(1)
    largest = int(np.argmax(sizes))
    return ~compared | (label != largest)


def _board(pairs: _Pairs, *, confidence: float, n_boot: int, seed: int | None,
           progress: bool | None) -> pd.DataFrame:
    wi = (pairs.wins_i + 0.5 * pairs.ties)[None, :]
    wj = (pairs.wins_j + 0.5 * pairs.ties)[None, :]
    theta = _fit_bt(pairs, wi, wj)[0]
    rating = _ratings(theta)
    if n_boot > 0:
        boot = _bootstrap_bt(pairs, theta, n_boot, seed, progress)
        tail = (1.0 - confidence) / 2.0
        low, high = np.quantile(boot, [tail, 1.0 - tail], axis=0)
    else:
        low = high = np.full(pairs.m, math.nan)
    return _board_frame(pairs, rating, low, high, n_boot)


def _board_frame(pairs: _Pairs, rating: np.ndarray, low: np.ndarray, high: np.ndarray, n_boot: int) -> pd.DataFrame:
    """The leaderboard frame (:data:`~llm_connect.stats.bradley_terry.LEADERBOARD_COLUMNS`, best first) of
    ratings and their intervals, with each model's comparisons and win rate counted from ``pairs``."""
    rank, rank_low, rank_high = _rank_intervals(rating, low, high)
    n = np.bincount(pairs.i, weights=pairs.wins_i + pairs.wins_j + pairs.ties, minlength=pairs.m) + \
        np.bincount(pairs.j, weights=pairs.wins_i + pairs.wins_j + pairs.ties, minlength=pairs.m)
    won = np.bincount(pairs.i, weights=pairs.wins_i + 0.5 * pairs.ties, minlength=pairs.m) + \
        np.bincount(pairs.j, weights=pairs.wins_j + 0.5 * pairs.ties, minlength=pairs.m)
    frame = pd.DataFrame({
        "model": pairs.models, "rating": rating, "rating_low": low, "rating_high": high, "rank": rank,
        "rank_low": rank_low, "rank_high": rank_high, "n": np.rint(n).astype(np.int64), "win_rate": won / n,
    })
    if n_boot == 0:  # no intervals, no rank ranges
        frame["rank_low"] = pd.array([pd.NA] * pairs.m, dtype="Int64")
        frame["rank_high"] = pd.array([pd.NA] * pairs.m, dtype="Int64")
    out = frame.sort_values(["rating", "model"], ascending=[False, True]).reset_index(drop=True)
    # models that won or lost everything: their ratings are the ridge's, not the data's (attrs, as the
    # board's columns are fixed; compare_leaderboards and the CLI say so in words)
    out.attrs["separated"] = [mm for mm, bad in zip(pairs.models, not_identified(pairs), strict=True) if bad]
    return out
