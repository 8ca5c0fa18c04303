"""Leaderboards from pairwise comparisons: Bradley-Terry ratings with bootstrap intervals, style-controlled
ratings (Chatbot Arena's style control), continuous preferences, and the judge's leaderboard beside
people's (prediction-powered when people labelled a subset).

Bradley-Terry (Bradley & Terry 1952, "Rank analysis of incomplete block designs: I. The method of
paired comparisons") gives model ``i`` a strength ``theta_i`` with
``P(i beats j) = 1 / (1 + exp(-(theta_i - theta_j)))``. :func:`leaderboard` fits it by maximum
likelihood as Chatbot Arena does (Chiang et al. 2024, "Chatbot Arena: An Open Platform for
Evaluating LLMs by Human Preference", arXiv:2403.04132; FastChat's ``elo_analysis.py``,
``compute_elo_mle_with_tie``): a logistic regression on ``x = e_a - e_b`` without intercept, a tie
counted as half a win to each side (FastChat duplicates every battle and splits ties; the
likelihood is the same up to a factor 2). The comparisons are first aggregated into counts per
pair of models, so a million comparisons of ``M`` models cost at most ``M(M-1)/2`` terms, and the
likelihood is maximised by Newton's method (the log-likelihood is concave, Hunter 2004, "MM
algorithms for generalized Bradley-Terry models", Ann. Statist. 32(1); a ridge of ``1e-6`` keeps a
model that won or lost every comparison finite, as ``choix.opt_pairwise`` does).

Ratings are on the Elo scale, ``400 * log10`` odds, anchored so their mean is 1000. Intervals come
from a percentile bootstrap over comparisons, as FastChat's ``get_bootstrap_result`` (resample the
battles with replacement, refit, take quantiles): here a resample is drawn as multinomial counts
over the (pair, outcome) cells -- the same distribution -- and all resamples are fitted at once,
warm-started from the point estimate. Ranks follow Chatbot Arena: a model's best plausible rank
(``rank_low``) is one plus the number of models whose lower bound is above its upper bound (the
"rank (UB)" of the Arena leaderboard); its worst plausible rank (``rank_high``) is the number of
models whose upper bound is not below its lower bound.

Continuous preferences: a winner may be the probability that answer A is preferred (a judge's
logprob-weighted verdict; AlpacaEval's annotations carry it as ``preference - 1``, Dubois et al.
2024, arXiv:2404.04475). It is fitted by expected counts -- a comparison with probability ``p``
adds ``p`` to A's wins and ``1 - p`` to B's, the likelihood ``p log s + (1 - p) log(1 - s)`` -- and
the bootstrap draws over the distinct (pair, share won) outcomes.

Style control (:func:`leaderboard` with ``style=``, :func:`style_effects`) is Chatbot Arena's (LMSYS,
August 2024, "Does style matter? Disentangling style and substance in Chatbot Arena"; FastChat's
``rating_systems.py``, ``preprocess_for_style`` and ``fit_contextual_bt``, and ``elo_analysis.py``,
``construct_style_matrices``): the Bradley-Terry logistic regression with style covariates appended
(by default the normalised differences of the two answers' length, markdown headers, list items and
bold spans, :mod:`llm_connect.stats.style`), the ratings read as the model coefficients with the
style held at 0. It cannot use the per-pair aggregation (every comparison has its own covariates):
it is fitted per comparison by Newton's method, and the bootstrap resamples comparisons, every
resample fitted at once by chord steps.

The judge's leaderboard anchored to people's labels (:func:`ppi_bradley_terry`) is prediction-powered
inference for Bradley-Terry (Boyeau et al. 2024, "AutoEval Done Right", arXiv:2403.07008), with the
PPI++ weight of Angelopoulos, Duchi & Zrnic (2023), "PPI++: Efficient Prediction-Powered Inference",
arXiv:2311.01453.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._validate import by_columns, check_confidence
from .preferences import parse_preferences

__all__ = [
    "LEADERBOARD_COLUMNS",
    "MEAN",
    "SCALE",
    "STYLE_COLUMNS",
    "leaderboard",
    "ppi_bradley_terry",
    "style_effects",
]

#: The columns of :func:`leaderboard`'s frame (after the ``by`` columns).
LEADERBOARD_COLUMNS: tuple[str, ...] = (
    "model", "rating", "rating_low", "rating_high", "rank", "rank_low", "rank_high", "n", "win_rate",
)
METHODS: tuple[str, ...] = ("bradley-terry",)
#: Elo scale: ``SCALE * log10(odds)``; ratings are shifted so that their mean is ``MEAN``.
SCALE = 400.0
MEAN = 1000.0
_ELO = SCALE / math.log(10.0)
#: Ridge on the log-strengths (as ``choix.opt_pairwise``'s default): finite ratings for a model that
#: won or lost everything; on ordinary data it moves a rating by far less than 0.001.
RIDGE = 1e-6
N_BOOT_MAX = 100_000
_CELLS_BUDGET = 12_500_000  # floats per bootstrap chunk (resamples x models x models)


# -- checking the input ---------------------------------------------------------------------------


def _frame(data: Any) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data
    try:
        return pd.DataFrame.from_records(list(data))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"data must be a DataFrame (one row per comparison) or mappings: {exc}") from None


def _need_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in dict.fromkeys(columns) if c not in frame.columns]
    if missing:
        raise ValidationError(f"no column {', '.join(map(repr, missing))} in the data; it has "
                              f"{', '.join(map(str, frame.columns))}")


def _check_settings(confidence: Any, n_boot: Any, method: str = "bradley-terry") -> tuple[float, int]:
    conf = check_confidence(confidence)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 0 <= n_boot <= N_BOOT_MAX:
        raise ValidationError(f"n_boot must be a whole number from 0 to {N_BOOT_MAX}, got {n_boot!r}")
    if method not in METHODS:
        raise ValidationError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return conf, int(n_boot)


#: ``codes=`` naming a column of probabilities that answer A is preferred (0..1).
PROBABILITY_CODES: tuple[str, ...] = ("probability", "prob", "p")
_EXACT = {1.0: "a", 0.0: "b", 0.5: "tie"}


def is_probability_codes(codes: Any) -> bool:
    """Whether ``codes`` says the winner column holds probabilities that A is preferred
    (``codes="probability"``)."""
    return isinstance(codes, str) and codes.strip().casefold() in PROBABILITY_CODES


def _real(value: Any) -> float | None:
    """A real number (not a boolean, not text) as a float; ``None`` for anything else."""
    if isinstance(value, (bool, np.bool_, str)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def _probability_column(uniques: Sequence[Any]) -> bool:
    """A column read as probabilities without ``codes=``: every number in it lies in [0, 1] and at least
    one is not 0, 0.5 or 1 (a column of 0, 1 and 0.5 alone could be codes either way round, so it
    is never guessed)."""
    numbers = [f for f in map(_real, uniques) if f is not None and math.isfinite(f)]
    return bool(numbers) and all(0.0 <= f <= 1.0 for f in numbers) and any(f not in _EXACT for f in numbers)


def _read_probabilities(uniques: Sequence[Any], column: str) -> np.ndarray:
    """Each distinct value of a probability column: a label (``"a"``/``"b"``/``"tie"`` for the words,
    and for the exact probabilities 1, 0 and 0.5) or the float probability that A is preferred."""
    out = np.empty(len(uniques), dtype=object)
    bad: list[Any] = []
    for k, u in enumerate(uniques):
        f = _real(u)
        if f is None and isinstance(u, str):
            try:
                out[k] = parse_preferences([u], column=column)[0]
                continue
            except ValidationError:
                try:
                    f = float(u.strip())
                except ValueError:
                    f = None
        if f is None or not (math.isfinite(f) and 0.0 <= f <= 1.0):
            bad.append(u)
            continue
        out[k] = _EXACT.get(f, f)
    if bad:
        shown = ", ".join(repr(b) for b in list(dict.fromkeys(map(str, bad)))[:5])
        raise ValidationError(f"column {column!r} holds {len(bad)} value(s) that are neither a preference (a, b, tie) "
                              f"nor a probability from 0 to 1 that answer A is preferred: {shown}")
    return out


def _outcomes(values: Any, column: str, codes: Any) -> np.ndarray:
    """``"a"``/``"b"``/``"tie"``/``None`` per row (the words Chatbot Arena exports are read too), or,
    in a column of probabilities that A is preferred (``codes="probability"``, or numbers in [0, 1]
    not all 0, 0.5 or 1), a float in (0, 1) where the probability is not exactly 1, 0 or 0.5."""
    codes_, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    uniq = list(uniques)
    if is_probability_codes(codes) or (codes is None and _probability_column(uniq)):
        parsed = _read_probabilities(uniq, column)
    else:
        try:
            parsed = parse_preferences(uniq, codes=codes, column=column)
        except ValidationError as exc:
            numbers = [f for f in map(_real, uniq) if f is not None]
            if codes is None and numbers and all(0.0 <= f <= 1.0 for f in numbers):
                raise ValidationError(f"{exc} (or, when they are probabilities that answer A is preferred, "
                                      "codes='probability')") from None
            raise
    out = np.full(len(codes_), None, dtype=object)
    known = codes_ >= 0
    out[known] = parsed[codes_[known]]
    return out


def _worth(outcome: Any) -> np.ndarray:
    """Per row, the share of the comparison won by answer A: 1 for ``"a"``, 0 for ``"b"``, 0.5 for a
    tie, the probability itself for a probability; NaN where there is no winner."""
    table = {"a": 1.0, "b": 0.0, "tie": 0.5}
    return np.fromiter((table[o] if isinstance(o, str) else (math.nan if o is None else float(o))
                        for o in outcome), dtype=float, count=len(outcome))


def _names(values: pd.Series, column: str) -> np.ndarray:
    out = values.to_numpy(dtype=object)
    codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)
    empty = np.array([isinstance(v, str) and not v.strip() for v in uniques], dtype=bool)
    blank = (codes < 0) | (empty[np.maximum(codes, 0)] & (codes >= 0))
    if blank.any():
        rows = np.flatnonzero(blank)[:5].tolist()
        raise ValidationError(f"column {column!r} has {int(blank.sum())} row(s) with no model name (rows {rows}); "
                              "every comparison needs both models")
    return out


# -- the comparisons as counts per pair ------------------------------------------------------------


@dataclass
class _Pairs:
    """Comparisons aggregated per unordered pair ``(i, j)``, ``i < j``: wins of i, wins of j, ties.

    With probabilities among the winners (continuous preferences) a comparison adds its probability
    to the wins of the side it favours and the rest to the other side's (expected counts), and
    ``cells`` holds what the bootstrap resamples: the distinct (pair, share won by i) outcomes
    ``(pair index, share, count)``; ``None`` when every winner is a, b or tie."""

    models: list[Any]
    i: np.ndarray
    j: np.ndarray
    wins_i: np.ndarray
    wins_j: np.ndarray
    ties: np.ndarray
    cells: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def m(self) -> int:
        return len(self.models)

    @property
    def total(self) -> int:
        return int(self.wins_i.sum() + self.wins_j.sum() + self.ties.sum())


def _sort_key(value: Any) -> tuple[str, str]:
    return (type(value).__name__ if not isinstance(value, str) else "", str(value))


def _aggregate(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, all_models: Sequence[Any]) -> _Pairs:
    """Count per pair; ``outcome`` in ``"a"``/``"b"``/``"tie"`` (rows already filtered)."""
    models = sorted(set(all_models), key=_sort_key)
    ia = pd.Categorical(a, categories=models).codes.astype(np.int64)
    ib = pd.Categorical(b, categories=models).codes.astype(np.int64)
    lo, hi = np.minimum(ia, ib), np.maximum(ia, ib)
    m = len(models)
    key = lo * m + hi
    a_won = outcome == "a"
    b_won = outcome == "b"
    tie = outcome == "tie"
    lo_won = (a_won & (ia == lo)) | (b_won & (ib == lo))
    hi_won = (a_won & (ia == hi)) | (b_won & (ib == hi))
    cells, inverse = np.unique(key, return_inverse=True)
    p = len(cells)
    fractional = np.fromiter((not isinstance(o, str) for o in outcome), dtype=bool, count=len(outcome))
    if not fractional.any():
        return _Pairs(
            models=models, i=cells // m, j=cells % m,
            wins_i=np.bincount(inverse, weights=lo_won, minlength=p),
            wins_j=np.bincount(inverse, weights=hi_won, minlength=p),
            ties=np.bincount(inverse, weights=tie, minlength=p),
        )
    # continuous preferences: expected counts (a row adds p to one side's wins and 1 - p to the other's)
    y = _worth(outcome)
    share = np.where(ia == lo, y, 1.0 - y)  # the share won by the pair's first model
    outcomes, counts = np.unique(np.column_stack([inverse.astype(float), share]), axis=0, return_counts=True)
    return _Pairs(
        models=models, i=cells // m, j=cells % m,
        wins_i=np.bincount(inverse, weights=np.where(fractional, share, lo_won), minlength=p),
        wins_j=np.bincount(inverse, weights=np.where(fractional, 1.0 - share, hi_won), minlength=p),
        ties=np.bincount(inverse, weights=tie, minlength=p),
        cells=(outcomes[:, 0].astype(np.int64), outcomes[:, 1], counts.astype(float)),
    )


def _components(pairs: _Pairs) -> list[list[Any]]:
    """The connected components of the comparison graph (as model names), largest first."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = pairs.m
    graph = coo_matrix((np.ones(len(pairs.i)), (pairs.i, pairs.j)), shape=(m, m))
    n, labels = connected_components(graph, directed=False)
    groups = [[pairs.models[k] for k in np.flatnonzero(labels == c)] for c in range(n)]
    return sorted(groups, key=len, reverse=True)


def _shown(models: Sequence[Any], limit: int = 8) -> str:
    names = ", ".join(repr(str(m)) for m in list(models)[:limit])
    return names + (f" and {len(models) - limit} more" if len(models) > limit else "")


def _check_graph(pairs: _Pairs, compared: Sequence[Any], where: str) -> None:
    seen = set(compared)
    never = [m for m in pairs.models if m not in seen]
    if never:
        raise ValidationError(f"{where}model(s) {_shown(never)} never compared with another model (no row with a "
                              "winner against a different model): a rating needs at least one comparison; drop them "
                              "or add comparisons")
    comps = _components(pairs)
    if len(comps) > 1:
        shown = "; ".join(f"{{{_shown(c)}}}" for c in comps[:5])
        raise ValidationError(f"{where}the comparisons fall into {len(comps)} groups never compared with each other: "
                              f"{shown}. Ratings of different groups are not on one scale: add comparisons between "
                              "them, or rate each group on its own (by=)")


# -- fitting ---------------------------------------------------------------------------------------


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
    """The leaderboard frame (:data:`LEADERBOARD_COLUMNS`, best first) of ratings and their intervals,
    with each model's comparisons and win rate counted from ``pairs``."""
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


# -- style control (Chatbot Arena) -----------------------------------------------------------------

#: The L2 penalty of the fallback fit when the style features separate the outcomes (no maximum-likelihood
#: fit exists): on each style coefficient, in logits per root-mean-square unit of its feature.
STYLE_SEPARATION_PENALTY = 1.0
#: A style coefficient beyond this many logits per root-mean-square unit of its feature means the
#: likelihood was still rising: (quasi-)complete separation, not an estimate.
_SEPARATED_LOGIT = 15.0
#: Where the two answers' texts are looked for when ``text_a``/``text_b`` are not given.
TEXT_COLUMNS: tuple[tuple[str, str], ...] = (("response_a", "response_b"), ("candidate_a", "candidate_b"),
                                             ("answer_a", "answer_b"))
#: The columns of ``board.attrs["style"]`` and of :func:`style_effects` (after the ``by`` columns).
STYLE_COLUMNS: tuple[str, ...] = ("feature", "coefficient", "low", "high")
_ROWS_BUDGET = 2_000_000  # floats per (resamples x comparisons) array of the style bootstrap


@dataclass
class _Style:
    """The style covariates of every row of the data: ``x`` ``(rows, K)``, one column per feature;
    ``computed``: the Arena features computed from the texts (columns ``texts``); ``given``: the
    user's own covariates."""

    x: np.ndarray
    names: list[str]
    computed: list[str]
    given: list[str]
    texts: tuple[str, str] | None


def _text_columns(frame: pd.DataFrame, text_a: str | None, text_b: str | None) -> tuple[str, str]:
    if text_a is not None or text_b is not None:
        if text_a is None or text_b is None:
            raise ValidationError("name both answers' text columns: text_a= and text_b=")
        _need_columns(frame, [text_a, text_b])
        return text_a, text_b
    for first, second in TEXT_COLUMNS:
        if first in frame.columns and second in frame.columns:
            return first, second
    tried = ", ".join(f"{x}/{y}" for x, y in TEXT_COLUMNS)
    raise ValidationError(f"style control computes the Arena style features from the two answers' texts, and the "
                          f"data has no text columns ({tried}): name them with text_a= and text_b=, or pass your "
                          "own covariates (style=[columns] or a DataFrame)")


def _numeric_columns(values: pd.DataFrame, names: Sequence[str]) -> np.ndarray:
    out = np.empty((len(values), len(names)))
    for k, name in enumerate(names):
        column = values.iloc[:, k]
        if pd.api.types.is_bool_dtype(column):
            column = column.astype(float)
        number = pd.to_numeric(column, errors="coerce")
        if column.notna().sum() != number.notna().sum():
            shown = ", ".join(repr(v) for v in column[column.notna() & number.isna()].unique()[:5])
            raise ValidationError(f"style covariate {name!r} holds values that are not numbers: {shown}")
        out[:, k] = number.to_numpy(dtype=float)
    return out


def _style_design(frame: pd.DataFrame, style: Any, text_a: str | None, text_b: str | None) -> _Style | None:
    """The covariates ``style=`` asks for, on every row of ``frame`` (``None``: no style control)."""
    from .style import STYLE_FEATURES, style_differences, style_feature

    if style is None or style is False:
        return None
    if isinstance(style, pd.DataFrame):
        if len(style) != len(frame):
            raise ValidationError(f"style covariates: the DataFrame has {len(style)} rows and the data {len(frame)}; "
                                  "give one row per comparison, in the data's order")
        names = [str(c) for c in style.columns]
        if not names or len(set(names)) != len(names):
            raise ValidationError("style covariates: give a DataFrame with at least one column, each named once")
        return _Style(_numeric_columns(style, names), names, [], names, None)
    if style is True:
        wanted: list[Any] = list(STYLE_FEATURES)
    elif isinstance(style, str):
        wanted = [style]
    elif isinstance(style, Sequence) and not isinstance(style, (bytes, bytearray)):
        wanted = list(style)
    else:
        raise ValidationError(f"style must be True (Chatbot Arena's four style features), a list of features or "
                              f"columns, or a DataFrame of covariates; got {type(style).__name__}")
    if not wanted:
        raise ValidationError("style=[] names no feature: pass style=True for the Arena features, or leave it out")
    computed: list[str] = []
    given: list[str] = []
    for name in wanted:
        canon = style_feature(name)
        if canon is not None:
            if canon not in computed:
                computed.append(canon)
        elif isinstance(name, str) and name in frame.columns:
            if name not in given:
                given.append(name)
        else:
            raise ValidationError(f"style feature {name!r} is neither an Arena style feature "
                                  f"({', '.join(STYLE_FEATURES)}) nor a column of the data; it has "
                                  f"{', '.join(map(str, frame.columns))}")
    parts = []
    texts = None
    if computed:
        texts = _text_columns(frame, text_a, text_b)
        parts.append(style_differences(frame[texts[0]].tolist(), frame[texts[1]].tolist(), computed).to_numpy())
    if given:
        parts.append(_numeric_columns(frame[given], given))
    return _Style(np.column_stack(parts) if len(parts) > 1 else parts[0], [*computed, *given], computed, given, texts)


def _style_hessian(ia: np.ndarray, ib: np.ndarray, x: np.ndarray, v: np.ndarray, m: int) -> np.ndarray:
    """``Z^T diag(v) Z`` for the rows ``z = [e_a - e_b, x]`` of the style-controlled Bradley–Terry model."""
    k = x.shape[1]
    h = np.zeros((m + k, m + k))
    flat = np.bincount(ia * m + ia, weights=v, minlength=m * m) + np.bincount(ib * m + ib, weights=v, minlength=m * m)
    flat -= np.bincount(ia * m + ib, weights=v, minlength=m * m) + np.bincount(ib * m + ia, weights=v, minlength=m * m)
    h[:m, :m] = flat.reshape(m, m)
    for c in range(k):
        vx = v * x[:, c]
        h[:m, m + c] = np.bincount(ia, weights=vx, minlength=m) - np.bincount(ib, weights=vx, minlength=m)
    h[m:, :m] = h[:m, m:].T
    h[m:, m:] = x.T @ (v[:, None] * x)
    return h


def _sigmoid(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


def _style_penalty(m: int, k: int, penalty: float) -> np.ndarray:
    return np.concatenate([np.full(m, RIDGE), np.full(k, penalty)])


def _style_fit(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, m: int, *, w: np.ndarray | None = None,
               start: np.ndarray | None = None, penalty: float = 0.0, tol: float = 1e-9,
               max_iter: int = 100) -> tuple[np.ndarray, bool]:
    """Maximum likelihood of the style-controlled Bradley–Terry model on single comparisons, by Newton's method:
    ``logit P(A preferred) = theta_a - theta_b + x . beta`` with ``y`` the share won by A (1, 0, 0.5 for a
    tie, or a probability) and row weights ``w``; the ridge :data:`RIDGE` on ``theta`` (as :func:`_fit_bt`)
    and ``penalty`` on ``beta`` (0: unpenalised). Returns ``[theta (m), beta (k)]`` with ``theta`` of mean 0,
    and whether the steps settled below ``tol``."""
    k = x.shape[1]
    w = np.ones(len(y)) if w is None else w
    params = np.zeros(m + k) if start is None else np.array(start, dtype=float)
    params[:m] -= params[:m].mean()
    pen = _style_penalty(m, k, penalty)
    converged = False
    for _ in range(max_iter):
        eta = params[ia] - params[ib] + x @ params[m:]
        s = _sigmoid(eta)
        res = w * (y - s)
        grad = np.concatenate([np.bincount(ia, weights=res, minlength=m) - np.bincount(ib, weights=res, minlength=m),
                               x.T @ res]) - pen * params
        hess = _style_hessian(ia, ib, x, w * s * (1.0 - s), m) + np.diag(pen) + 1e-12 * np.eye(m + k)
        step = np.linalg.solve(hess, grad)
        step[:m] -= step[:m].mean()  # the likelihood ignores a common shift of theta: keep its mean at 0
        big = float(np.abs(step).max()) if len(step) else 0.0
        if big > 4.0:
            step *= 4.0 / big
        params += step
        if big <= tol:
            converged = True
            break
    params[:m] -= params[:m].mean()
    return params, converged


def _style_separated(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, params: np.ndarray, m: int,
                     converged: bool) -> str | None:
    """Why the maximum-likelihood style fit is not an estimate (``None`` when it is one)."""
    beta = params[m:]
    if beta.size and float(np.abs(beta).max()) > _SEPARATED_LOGIT:
        return "complete or quasi-complete separation: a style coefficient runs off to infinity"
    decided = (y == 0.0) | (y == 1.0)
    if decided.all() and float(np.abs(_sigmoid(params[ia] - params[ib] + x @ beta) - y).max()) < 1e-6:
        return "complete separation: the models and the style features predict every comparison exactly"
    if not converged:
        return "Newton's method did not converge"
    return None


def _style_bootstrap(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, m: int, params_hat: np.ndarray,
                     *, penalty: float, n_boot: int, seed: int | None, progress: bool | None, tol: float = 1e-9,
                     max_iter: int = 60) -> np.ndarray:
    """``(n_boot, m + k)`` fits of resamples of the comparisons (rows drawn with replacement, as FastChat's
    ``compute_bootstrap_style_control``), all at once by the chord method of :func:`_fit_bt_chord` (Newton
    steps with the Hessian held at the point estimate); a resample that does not settle is finished by
    :func:`_style_fit`."""
    from scipy.sparse import csr_matrix

    from ._progress import progress_bar

    r, k = x.shape
    pen = _style_penalty(m, k, penalty)
    s_hat = _sigmoid(params_hat[ia] - params_hat[ib] + x @ params_hat[m:])
    hess_inv = np.linalg.inv(_style_hessian(ia, ib, x, s_hat * (1.0 - s_hat), m) + np.diag(pen)
                             + 1e-12 * np.eye(m + k))
    # the design [e_a - e_b, x] as one sparse (r, m + k) matrix: eta = Z params, gradient = Z^T residuals
    rows = np.concatenate([np.arange(r), np.arange(r), np.repeat(np.arange(r), k)])
    cols = np.concatenate([ia, ib, np.tile(m + np.arange(k), r)])
    design = csr_matrix((np.concatenate([np.ones(r), -np.ones(r), x.ravel()]), (rows, cols)), shape=(r, m + k))
    design_t = design.T.tocsr()
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _ROWS_BUDGET // max(r, 1)))
    out = np.empty((n_boot, m + k))
    show = (n_boot > chunk) if progress is None else bool(progress)
    with progress_bar(n_boot, desc="leaderboard: style bootstrap", unit="resample", show=show, leave=False) as bar:
        done = 0
        while done < n_boot:
            b = min(chunk, n_boot - done)
            draws = rng.integers(0, r, size=(b, r)) + (np.arange(b) * r)[:, None]  # rows drawn with replacement
            w = np.bincount(draws.ravel(), minlength=b * r).reshape(b, r).astype(float)
            params = np.tile(params_hat, (b, 1))
            active = np.arange(b)
            last = np.full(b, np.inf)
            for _ in range(max_iter):
                if not len(active):
                    break
                p = params[active]
                eta = np.asarray(design @ p.T).T
                res = w[active] * (y[None, :] - _sigmoid(eta))
                grad = np.asarray(design_t @ res.T).T - pen[None, :] * p
                step = grad @ hess_inv
                step[:, :m] -= step[:, :m].mean(axis=1, keepdims=True)  # no drift along a common shift of theta
                big = np.abs(step).max(axis=1)
                growing = big > 2.0 * last[active]
                params[active] = np.where(growing[:, None], p, p + step)
                last[active] = big
                active = active[(big > tol) & ~growing]
            for u in np.flatnonzero(last > tol):
                params[u] = _style_fit(ia, ib, y, x, m, w=w[u], start=params_hat, penalty=penalty, tol=tol)[0]
            params[:, :m] -= params[:, :m].mean(axis=1, keepdims=True)
            out[done:done + b] = params
            done += b
            bar.update(b)
    return out


def _usable_features(ia: np.ndarray, ib: np.ndarray, x: np.ndarray, names: Sequence[str], m: int,
                     where: str) -> tuple[list[int], list[str]]:
    """The features that can be fitted, and what was dropped and why: a feature constant on the
    comparisons, or one that is a linear combination of the models and the features before it
    (either would make the fit singular)."""
    keep: list[int] = []
    notes: list[str] = []
    scope = where.rstrip(": ") or "the data"
    for c, name in enumerate(names):
        col = x[:, c]
        if float(np.ptp(col)) <= 1e-12 * max(1.0, float(np.abs(col).max())):
            notes.append(f"style feature {name!r} is constant ({float(col[0]):g}) on the comparisons of {scope}: "
                         "dropped (a constant cannot be told apart from the ratings)")
            continue
        keep.append(c)
    if not keep:
        return keep, notes
    scaled = x[:, keep] / np.sqrt(np.mean(x[:, keep] ** 2, axis=0))
    gram = _style_hessian(ia, ib, scaled, np.ones(len(ia)), m)
    base = int(np.linalg.matrix_rank(gram[:m, :m], hermitian=True)) if m > 1 and np.abs(gram[:m, :m]).max() > 0 else 0
    chosen: list[int] = []
    for pos, c in enumerate(keep):
        idx = [*range(m), *(m + q for q in chosen), m + pos]
        if int(np.linalg.matrix_rank(gram[np.ix_(idx, idx)], hermitian=True)) < base + len(chosen) + 1:
            notes.append(f"style feature {names[c]!r} is a linear combination of the models and the other features "
                         f"on the comparisons of {scope}: dropped (the fit would be singular)")
            continue
        chosen.append(pos)
    return [keep[q] for q in chosen], notes


@dataclass
class _StyleFit:
    """A fitted style-controlled model: ``theta`` (mean 0) and ``coef`` (Elo per unit of each feature), their
    bootstrap intervals, the features fitted, what was dropped, and how it was fitted."""

    theta: np.ndarray
    coef: np.ndarray
    rating_low: np.ndarray
    rating_high: np.ndarray
    coef_low: np.ndarray
    coef_high: np.ndarray
    features: list[str]
    notes: list[str]
    fit: str


def _fit_style_rows(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, names: Sequence[str], m: int, *,
                    where: str, confidence: float, n_boot: int, seed: int | None,
                    progress: bool | None) -> tuple[_StyleFit | None, list[str]]:
    """The style-controlled fit on single comparisons (``None`` when every feature had to be dropped)
    and what was said about it (features dropped, a separated fit), each also a warning."""
    import warnings

    finite = np.isfinite(x)
    if not finite.all():
        bad = [f"{names[c]!r} ({int((~finite[:, c]).sum())} row(s))" for c in range(x.shape[1])
               if not finite[:, c].all()]
        raise ValidationError(f"{where}style covariate(s) {', '.join(bad)} missing or not finite on comparisons with "
                              "a winner: give every compared pair a value")
    keep, notes = _usable_features(ia, ib, x, names, m, where)
    for note in notes:
        warnings.warn(f"leaderboard: {note}", UserWarning, stacklevel=5)
    if not keep:
        return None, notes
    xs = x[:, keep]
    scale = np.sqrt(np.mean(xs**2, axis=0))  # root mean square about 0: a conditioning, not a centring
    xs = xs / scale
    params, converged = _style_fit(ia, ib, y, xs, m)
    why = _style_separated(ia, ib, y, xs, params, m, converged)
    penalty = 0.0
    fit = "mle"
    if why is not None:
        penalty = STYLE_SEPARATION_PENALTY
        params, _ = _style_fit(ia, ib, y, xs, m, penalty=penalty)
        fit = f"l2 penalty {penalty:g} on the style coefficients ({why})"
        note = (f"{where}the style-controlled fit has no maximum-likelihood estimate ({why}; {len(y)} comparisons): "
                f"it is refitted with an L2 penalty of {penalty:g} on the style coefficients (logits per "
                "root-mean-square unit of each feature) and flagged; its ratings and coefficients rest on that "
                "penalty, not on the data alone")
        notes.append(note)
        warnings.warn(f"leaderboard: {note}", RuntimeWarning, stacklevel=5)
    theta, beta = params[:m], params[m:]
    coef = _ELO * beta / scale
    nan_m, nan_k = np.full(m, math.nan), np.full(len(keep), math.nan)
    r_low, r_high, c_low, c_high = nan_m, nan_m, nan_k, nan_k
    if n_boot > 0:
        boot = _style_bootstrap(ia, ib, y, xs, m, params, penalty=penalty, n_boot=n_boot, seed=seed,
                                progress=progress)
        tail = (1.0 - confidence) / 2.0
        r_low, r_high = np.quantile(_ratings(boot[:, :m]), [tail, 1.0 - tail], axis=0)
        c_low, c_high = np.quantile(_ELO * boot[:, m:] / scale, [tail, 1.0 - tail], axis=0)
    return _StyleFit(theta=theta, coef=coef, rating_low=r_low, rating_high=r_high, coef_low=c_low, coef_high=c_high,
                     features=[names[c] for c in keep], notes=notes, fit=fit), notes


class StyleEffects(pd.DataFrame):
    """The style coefficients, ``feature``, ``coefficient``, ``low``, ``high``: a DataFrame in every way but
    one. Two of them compare equal as wholes (``a == b`` is ``a.equals(b)``), because pandas compares
    the ``attrs`` of frames it concatenates and a board carries one in ``attrs["style"]``: with plain
    frames there, ``pd.concat([board_1, board_2])`` would fail. Any other comparison is elementwise."""

    @property
    def _constructor(self) -> Any:
        return StyleEffects

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, StyleEffects):
            return bool(self.equals(other))
        return super().__eq__(other)

    def __ne__(self, other: Any) -> Any:
        if isinstance(other, StyleEffects):
            return not self.equals(other)
        return super().__ne__(other)


def _style_frame(fit: _StyleFit | None) -> StyleEffects:
    if fit is None:
        return StyleEffects({"feature": pd.Series([], dtype=object), "coefficient": pd.Series([], dtype=float),
                             "low": pd.Series([], dtype=float), "high": pd.Series([], dtype=float)})
    return StyleEffects({"feature": fit.features, "coefficient": fit.coef, "low": fit.coef_low,
                         "high": fit.coef_high}, columns=list(STYLE_COLUMNS))


def _style_board(pairs: _Pairs, a: np.ndarray, b: np.ndarray, outcome: np.ndarray, x: np.ndarray,
                 names: Sequence[str], *, where: str, confidence: float, n_boot: int, seed: int | None,
                 progress: bool | None) -> pd.DataFrame:
    """The style-controlled board: ratings with the style features held at 0 (both answers alike)."""
    ia = pd.Categorical(a, categories=pairs.models).codes.astype(np.int64)
    ib = pd.Categorical(b, categories=pairs.models).codes.astype(np.int64)
    fit, notes = _fit_style_rows(ia, ib, _worth(outcome), x, names, pairs.m, where=where, confidence=confidence,
                                 n_boot=n_boot, seed=seed, progress=progress)
    if fit is None:
        out = _board(pairs, confidence=confidence, n_boot=n_boot, seed=seed, progress=progress)
        notes = [*notes, f"{where}no style feature left to control for: these are the raw ratings"]
        out.attrs.update(style=_style_frame(None), style_notes=notes, style_fit="none")
        return out
    out = _board_frame(pairs, _ratings(fit.theta), fit.rating_low, fit.rating_high, n_boot)
    out.attrs.update(style=_style_frame(fit), style_notes=fit.notes, style_fit=fit.fit)
    return out


def _prepare(data: Any, model_a: str, model_b: str, winner: str, codes: Any,
             extra: Sequence[str] = ()) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    frame = _frame(data)
    _need_columns(frame, [model_a, model_b, winner, *extra])
    a = _names(frame[model_a], model_a)
    b = _names(frame[model_b], model_b)
    outcome = _outcomes(frame[winner], winner, codes)
    same = np.asarray(a == b, dtype=bool)
    labelled = pd.notna(outcome).astype(bool)
    notes = {"n_rows": len(frame), "n_unlabelled": int((~labelled).sum()), "n_self": int((same & labelled).sum())}
    return frame, a, b, outcome, notes


def _one_board(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, *, where: str, confidence: float, n_boot: int,
               seed: int | None, progress: bool | None, style_x: np.ndarray | None = None,
               style_names: Sequence[str] = ()) -> pd.DataFrame:
    keep = pd.notna(outcome).astype(bool) & np.asarray(a != b, dtype=bool)
    all_models = pd.unique(np.concatenate([a, b])).tolist()
    if not keep.any():
        raise ValidationError(f"{where}no comparison with a winner between two different models")
    pairs = _aggregate(a[keep], b[keep], outcome[keep], all_models)
    _check_graph(pairs, pd.unique(np.concatenate([a[keep], b[keep]])).tolist(), where)
    if style_x is None:
        return _board(pairs, confidence=confidence, n_boot=n_boot, seed=seed, progress=progress)
    return _style_board(pairs, a[keep], b[keep], outcome[keep], style_x[keep], style_names, where=where,
                        confidence=confidence, n_boot=n_boot, seed=seed, progress=progress)


def _style_settings(design: _Style | None) -> dict[str, Any]:
    if design is None:
        return {}
    return {"style_features": list(design.names), "style_computed": list(design.computed),
            "style_given": list(design.given), "style_texts": design.texts}


def _with_groups(frame: pd.DataFrame, by_cols: Sequence[str], values: Sequence[Any]) -> pd.DataFrame:
    for c, v in reversed(list(zip(by_cols, values, strict=True))):
        frame.insert(0, c, v)
    return frame


def leaderboard(
    data: Any,
    *,
    model_a: str = "model_a",
    model_b: str = "model_b",
    winner: str = "winner",
    by: str | Sequence[str] | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int | None = 0,
    method: str = "bradley-terry",
    codes: str | Mapping[str, Any] | None = None,
    progress: bool | None = None,
    style: Any = None,
    text_a: str | None = None,
    text_b: str | None = None,
) -> pd.DataFrame:
    """Bradley-Terry ratings of the models compared in ``data``, with bootstrap intervals and ranks.

    ``data``: a DataFrame (or mappings), one row per comparison; ``model_a``/``model_b``: the columns
    naming the two models; ``winner``: the column saying which won, ``"a"``, ``"b"`` or ``"tie"``
    (a tie counts half to each side; the Chatbot Arena words ``model_a``, ``model_b``,
    ``tie (bothbad)`` are read too, numeric codes need ``codes=``, e.g. ``"a=1,b=2,tie=0"``), or
    the probability that answer A is preferred (continuous preferences, below). A
    blank winner (an unlabelled or unscored pair) and a model compared with itself are left out
    and counted in ``attrs``. ``by``: column(s) giving one leaderboard per group, the group
    columns first. ``confidence``: the interval level; ``n_boot``: bootstrap resamples (0: no
    intervals); ``seed``: the resampling seed; ``method``: ``"bradley-terry"`` (the only one);
    ``progress``: a ``tqdm`` bar over the resamples (default: when they take several chunks).

    Returns a DataFrame sorted best first, one row per model: ``model``, ``rating`` (Elo scale,
    ``400 * log10`` odds, mean 1000), ``rating_low``/``rating_high`` (percentile bootstrap over
    comparisons), ``rank`` (1 = best), ``rank_low``/``rank_high`` (best and worst plausible rank
    from the intervals, as Chatbot Arena ranks), ``n`` (comparisons of the model), ``win_rate``
    (ties half). ``attrs`` holds the settings and counts (``method``, ``confidence``, ``n_boot``,
    ``seed``, ``n_comparisons``, ``n_unlabelled``, ``n_self``).

    **Continuous preferences.** A winner column of probabilities that A is preferred (numbers from 0
    to 1, e.g. from a judge's logprobs; read as such when they are not all 0, 0.5 and 1, or always
    with ``codes="probability"``; the words a/b/tie may stand beside them) is fitted by expected
    counts: a comparison with probability ``p`` adds ``p`` to A's wins and ``1 - p`` to B's (the
    likelihood ``p log s + (1 - p) log(1 - s)``, as AlpacaEval's continuous preferences count
    ``preference - 1`` of a win; Dubois et al. 2024, arXiv:2404.04475, ``alpaca_eval`` ``get_winrate``).
    ``win_rate`` is then the expected share won; the bootstrap resamples comparisons as before.

    **Style control** (Chatbot Arena's, LMSYS 2024, "Does style matter? Disentangling style and
    substance in Chatbot Arena"; FastChat's ``compute_style_control``). ``style=True`` appends
    Arena's four style features (``length``, ``headers``, ``lists``, ``bold``; see
    :mod:`llm_connect.stats.style`) to the regression, each the normalised difference
    ``(a - b) / (a + b + 1)`` of the two answers' counts, computed from the texts in ``text_a`` /
    ``text_b`` (default: the first of the column pairs ``response_a``/``response_b``,
    ``candidate_a``/``candidate_b``, ``answer_a``/``answer_b``); ``style=["length", "bold"]``
    picks among them; other names in the list are columns of ``data`` holding the user's own
    covariates, and a DataFrame (one row per row of ``data``, in order) supplies covariates
    directly; a covariate is a number per comparison, oriented A minus B (positive: A has more).
    The model is ``logit P(A preferred) = theta_a - theta_b + x . beta``, fitted by maximum
    likelihood on the single comparisons (Newton's method; the ridge on ``theta`` as above, none
    on ``beta``), and the board's ratings are the ``theta`` — the ratings with the style
    features held at 0, i.e. for two answers of the same style. Unlike FastChat we do not centre
    the features (Arena standardises them, so its 0 is the data's mean style difference) and
    report each coefficient per unit of the feature itself. Intervals: percentile bootstrap over
    comparisons, every resample fitted at once (chord steps with the Hessian of the point
    estimate). ``board.attrs["style"]``: a DataFrame ``feature``, ``coefficient`` (Elo per unit
    of the feature: the rating points a comparison moves toward A when the feature goes from 0 to
    1), ``low``, ``high``; ``attrs["style_notes"]``: what was dropped or flagged;
    ``attrs["style_fit"]``: ``"mle"`` or the penalised fallback. A feature constant on the
    comparisons (or a linear combination of the models and the other features) is dropped, said
    in ``style_notes`` and with a ``UserWarning``, never fitted into a singular matrix; with no
    feature left the board is the raw one. When the style features separate the outcomes (no
    maximum-likelihood fit exists) the fit is redone with an L2 penalty
    (:data:`STYLE_SEPARATION_PENALTY`), flagged in ``style_fit`` and ``style_notes``, with a
    ``RuntimeWarning``: never a silent huge number. ``style=None`` (the default) is the
    aggregated fit above, unchanged.

    Raises :class:`~llm_connect.errors.ValidationError` for a missing column, a winner that is
    not a preference (listing the values), a row without a model name, a model never compared,
    or comparisons that fall into groups never compared with each other (naming the groups).

    References: Bradley & Terry (1952); Hunter (2004), "MM algorithms for generalized
    Bradley-Terry models"; Chiang et al. (2024), "Chatbot Arena", arXiv:2403.04132, and FastChat's
    ``elo_analysis.py`` (see the module docstring); for style control, FastChat's
    ``rating_systems.py`` (``preprocess_for_style``, ``fit_contextual_bt``) and ``add_markdown_info.py``.
    """
    conf, n_boot = _check_settings(confidence, n_boot, method)
    by_cols = by_columns(by, reserved=LEADERBOARD_COLUMNS, what="leaderboard")
    frame, a, b, outcome, notes = _prepare(data, model_a, model_b, winner, codes, by_cols)
    design = _style_design(frame.reset_index(drop=True), style, text_a, text_b)
    settings = {"method": method, "confidence": conf, "n_boot": n_boot, "seed": seed, **notes,
                **_style_settings(design)}
    style_kw: dict[str, Any] = {} if design is None else {"style_names": design.names}
    if not by_cols:
        out = _one_board(a, b, outcome, where="", confidence=conf, n_boot=n_boot, seed=seed, progress=progress,
                         style_x=None if design is None else design.x, **style_kw)
        out.attrs.update(settings, n_comparisons=int(out["n"].sum() // 2))
        return out
    parts = []
    styles: list[pd.DataFrame] = []
    style_notes: list[str] = []
    fits: list[str] = []
    grouped = frame.reset_index(drop=True).groupby(by_cols, sort=True, dropna=False, observed=True)
    for key, rows in grouped.indices.items():
        values = key if isinstance(key, tuple) else (key,)
        where = "group " + ", ".join(f"{c}={v!r}" for c, v in zip(by_cols, values, strict=True)) + ": "
        part = _one_board(a[rows], b[rows], outcome[rows], where=where, confidence=conf, n_boot=n_boot, seed=seed,
                          progress=progress, style_x=None if design is None else design.x[rows], **style_kw)
        if design is not None:  # a frame in attrs cannot be compared when the parts are concatenated
            styles.append(_with_groups(part.attrs.pop("style").copy(), by_cols, values))
            style_notes += part.attrs.pop("style_notes")
            fits.append(f"{where}{part.attrs.pop('style_fit')}")
        parts.append(_with_groups(part, by_cols, values))
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(settings, by=by_cols, n_comparisons=int(out["n"].sum() // 2))
    if design is not None:
        out.attrs.update(style=pd.concat(styles, ignore_index=True), style_notes=style_notes,
                         style_fit="; ".join(fits))
    return out


def style_effects(
    data: Any,
    style: Any = True,
    *,
    model_a: str | None = "model_a",
    model_b: str | None = "model_b",
    winner: str = "winner",
    by: str | Sequence[str] | None = None,
    text_a: str | None = None,
    text_b: str | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int | None = 0,
    codes: str | Mapping[str, Any] | None = None,
    progress: bool | None = None,
) -> pd.DataFrame:
    """What style is worth in the preferences of ``data``: the style coefficients of the
    style-controlled Bradley–Terry fit (Chatbot Arena's style control; see :func:`leaderboard`,
    whose ``attrs["style"]`` this is, for the same arguments).

    Returns a DataFrame (after the ``by`` columns) ``feature``, ``coefficient`` — in Elo per unit
    of the feature: how many rating points the preference moves toward answer A when the feature
    goes from 0 (both answers alike) to 1 (for the Arena features, the normalised difference
    ``(a - b) / (a + b + 1)``: only A has it) — and ``low``/``high``, its percentile-bootstrap
    interval. ``attrs``: ``notes`` (features dropped, a separated fit), ``fit``, ``n``.

    ``model_a=None`` and ``model_b=None``: comparisons whose models are not named (or not
    wanted): the regression is on the style features alone, ``logit P(A preferred) = x . beta``,
    without ratings (what a judge pays for style, quality not held fixed).
    """
    if (model_a is None) != (model_b is None):
        raise ValidationError("give both model columns (model_a=, model_b=) or neither (None: style alone)")
    if model_a is not None and model_b is not None:
        board = leaderboard(data, model_a=model_a, model_b=model_b, winner=winner, by=by, confidence=confidence,
                            n_boot=n_boot, seed=seed, codes=codes, progress=progress,
                            style=True if style is None else style, text_a=text_a, text_b=text_b)
        out = board.attrs["style"].copy()
        out.attrs.update(notes=list(board.attrs.get("style_notes", [])), fit=board.attrs.get("style_fit"),
                         n=board.attrs.get("n_comparisons"))
        return out
    conf, n_boot = _check_settings(confidence, n_boot)
    by_cols = by_columns(by, reserved=STYLE_COLUMNS, what="style_effects")
    frame = _frame(data).reset_index(drop=True)
    _need_columns(frame, [winner, *by_cols])
    outcome = _outcomes(frame[winner], winner, codes)
    design = _style_design(frame, True if style is None else style, text_a, text_b)
    assert design is not None
    labelled = pd.notna(outcome).astype(bool)
    groups: dict[Any, Any] = dict(frame.groupby(by_cols, sort=True, dropna=False, observed=True).indices) \
        if by_cols else {(): np.arange(len(frame))}
    parts, notes, fits = [], [], []
    for key, rows in groups.items():
        values = key if isinstance(key, tuple) else (key,)
        where = ("group " + ", ".join(f"{c}={v!r}" for c, v in zip(by_cols, values, strict=True)) + ": ") \
            if by_cols else ""
        used = np.asarray(rows)[labelled[rows]]
        if not len(used):
            raise ValidationError(f"{where}no comparison with a winner")
        zero = np.zeros(len(used), dtype=np.int64)
        fit, said = _fit_style_rows(zero, zero, _worth(outcome[used]), design.x[used], design.names, 1, where=where,
                                    confidence=conf, n_boot=n_boot, seed=seed, progress=progress)
        notes += said
        fits.append(f"{where}{'none' if fit is None else fit.fit}")
        parts.append(_with_groups(_style_frame(fit), by_cols, values))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    out.attrs.update(notes=notes, fit="; ".join(fits), n=int(labelled.sum()))
    return out


# -- human and judge side by side (prediction-powered) ---------------------------------------------


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


def ppi_bradley_terry(
    lab_i: np.ndarray, lab_j: np.ndarray, y: np.ndarray, yhat: np.ndarray, unl_i: np.ndarray, unl_j: np.ndarray,
    yhat_unlabelled: np.ndarray, m: int, *, lam: float | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Prediction-powered Bradley-Terry (Boyeau et al. 2024, "AutoEval Done Right",
    arXiv:2403.07008; PPI++ for M-estimators, Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453).

    Rows are comparisons of models ``i`` and ``j`` (indices below ``m``), ``y`` the people's
    outcome (1: i won, 0: j won, 0.5: tie) on the labelled rows, ``yhat`` the judge's on the same
    rows, ``yhat_unlabelled`` the judge's on rows people did not label. Minimises
    ``L_labelled(y) + lam * (L_unlabelled(yhat) - L_labelled(yhat))`` over log-strengths with
    model 0 fixed at 0; ``lam=None`` tunes it as PPI++ does (clipped to [0, 1]). Returns the
    ``m - 1`` log-strengths of models ``1..m-1``, their covariance (sandwich) and ``lam``.
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
    cov = _ppi_covariance(_ppi_stats(x, s, theta, use_u and lam != 0), lam)
    return theta, cov, float(lam)


def _oriented(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, index: Mapping[Any, int]) -> tuple[np.ndarray, ...]:
    ia = np.fromiter((index[v] for v in a), dtype=np.int64, count=len(a))
    ib = np.fromiter((index[v] for v in b), dtype=np.int64, count=len(b))
    ya = _worth(outcome)  # 1 / 0 / 0.5, or the probability that A is preferred
    flip = ia > ib
    return np.where(flip, ib, ia), np.where(flip, ia, ib), np.where(flip, 1.0 - ya, ya), flip


def _ppi_board(a: np.ndarray, b: np.ndarray, human: np.ndarray, judge: np.ndarray, *,
               confidence: float) -> tuple[pd.DataFrame, float]:
    """Human-anchored ratings: PPI++ Bradley-Terry with the judge's winners on every row and the
    people's on the rows they labelled; Wald intervals from the sandwich covariance."""
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
    theta_r, cov_r, lam = ppi_bradley_terry(li, lj, y, yh, ui, uj, yu, m)
    embed = np.zeros((m, m - 1))
    embed[1:, :] = np.eye(m - 1)
    centre = np.eye(m) - 1.0 / m
    a_map = _ELO * centre @ embed
    rating = MEAN + a_map @ theta_r
    se = np.sqrt(np.clip(np.diag(a_map @ cov_r @ a_map.T), 0.0, None))
    z = float(norm.ppf(0.5 + confidence / 2.0))
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
                       judge_only=[mm for mm, bad in zip(models, judge_only, strict=True) if bad])
    return frame, lam



# -- comparing two leaderboards ---------------------------------------------------------------------


def _correlation_row(first: pd.DataFrame, second: pd.DataFrame, name_a: str, name_b: str) -> dict[str, Any]:
    from scipy.stats import kendalltau, spearmanr

    merged = first[["model", "rating"]].merge(second[["model", "rating"]], on="model", suffixes=("_a", "_b"))
    row: dict[str, Any] = {"a": name_a, "b": name_b, "n_models": len(merged)}
    constant = len(merged) < 2 or merged["rating_a"].nunique() < 2 or merged["rating_b"].nunique() < 2
    if not constant:
        tau = kendalltau(merged["rating_a"], merged["rating_b"])
        rho = spearmanr(merged["rating_a"], merged["rating_b"])
        row.update(kendall_tau=float(tau.statistic), kendall_p=float(tau.pvalue),
                   spearman_rho=float(rho.statistic), spearman_p=float(rho.pvalue))
    else:
        row.update(kendall_tau=math.nan, kendall_p=math.nan, spearman_rho=math.nan, spearman_p=math.nan)
    return row


def _agree(j: Any, h: Any, jw: float, hw: float) -> float:
    """Whether two winners agree (three-way, a/b/tie); with a probability on either side, the chance
    that two independent draws agree (a tie counting as an even chance)."""
    if isinstance(j, str) and isinstance(h, str):
        return float(j == h)
    return jw * hw + (1.0 - jw) * (1.0 - hw)


def _pair_agreement(a: np.ndarray, b: np.ndarray, judge: np.ndarray, human: np.ndarray) -> pd.DataFrame:
    both = np.array([j is not None and h is not None for j, h in zip(judge, human, strict=True)], dtype=bool)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for x, y, j, h in zip(a[both], b[both], judge[both], human[both], strict=True):
        if x == y:
            continue
        first, second = sorted((x, y), key=_sort_key)
        flip = x != first
        r = rows.setdefault((first, second), {"model_1": first, "model_2": second, "n": 0, "agree": 0,
                                              "judge_won": 0.0, "human_won": 0.0})
        jw, hw = (float(v) for v in _worth([j, h]))
        r["n"] += 1
        r["agree"] += _agree(j, h, jw, hw)
        r["judge_won"] += 1.0 - jw if flip else jw
        r["human_won"] += 1.0 - hw if flip else hw
    out = [{"model_1": r["model_1"], "model_2": r["model_2"], "n": r["n"], "agreement": r["agree"] / r["n"],
            "judge_win_rate_1": r["judge_won"] / r["n"], "human_win_rate_1": r["human_won"] / r["n"]}
           for r in rows.values()]
    return pd.DataFrame(out, columns=["model_1", "model_2", "n", "agreement", "judge_win_rate_1",
                                      "human_win_rate_1"])

