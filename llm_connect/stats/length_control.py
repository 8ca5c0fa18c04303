"""AlpacaEval 2's length-controlled win rate: how often a model beats a baseline once the judge's
taste for longer answers is regressed out.

Dubois, Galambosi, Liang & Hashimoto (2024), "Length-Controlled AlpacaEval: A Simple Way to Debias
Automatic Evaluators", arXiv:2404.04475, and ``alpaca_eval/metrics/glm_winrate.py``: per (model,
baseline), the GLM ``logit P(model wins) = theta + phi * tanh(delta / sd(delta)) + psi * gamma_x``
is fitted by maximum likelihood (ties as half a win), and the length-controlled win rate is the
mean predicted win rate with the length term set to zero. Intervals are a percentile bootstrap over
the model's comparisons, every resample fitted at once by Newton's method.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._bt_fit import _expit
from ._comparisons import _frame, _names, _worth, read_outcomes
from ._validate import need_columns
from .bradley_terry import check_leaderboard_settings

__all__ = ["LENGTH_CONTROLLED_COLUMNS", "SEPARATION_PENALTY", "length_controlled_win_rate"]

#: The columns of :func:`length_controlled_win_rate`'s frame.
LENGTH_CONTROLLED_COLUMNS: tuple[str, ...] = (
    "model", "baseline", "n", "win_rate", "win_rate_low", "win_rate_high", "lc_win_rate", "lc_win_rate_low",
    "lc_win_rate_high", "length_coef", "fit",
)


def _numbers(values: pd.Series, column: str) -> np.ndarray:
    out = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(out)
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise ValidationError(f"column {column!r} has {int(bad.sum())} value(s) that are not numbers (rows {rows}); "
                              "give each answer's length (characters or tokens)")
    return out


def _fit_glm(x: np.ndarray, y: np.ndarray, w: np.ndarray, beta0: np.ndarray | None = None, *,
             tol: float = 1e-10, max_iter: int = 100, penalty: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Logistic regression with fractional targets ``y`` in [0, 1] and row weights ``w`` ``(B, n)``,
    no intercept beyond ``x``'s columns, by Newton's method on every row of ``w`` at once.

    ``penalty``: an L2 penalty ``penalty/2 |beta|^2`` on the summed log-likelihood (every coefficient,
    as AlpacaEval penalises every coefficient of its GLM). Returns the coefficients ``(B, k)`` and, per
    row, whether Newton's method settled (its last step below ``tol``) within ``max_iter`` steps."""
    b, k = w.shape[0], x.shape[1]
    beta = np.zeros((b, k)) if beta0 is None else np.array(np.broadcast_to(beta0, (b, k)), dtype=float)
    active = np.arange(b)
    ridge = (penalty + 1e-8) * np.eye(k)
    converged = np.zeros(b, dtype=bool)
    for _ in range(max_iter):
        if not len(active):
            break
        bt = beta[active]
        mu = _expit(bt @ x.T)
        ww = w[active]
        grad = (ww * (y[None, :] - mu)) @ x - penalty * bt
        hess = np.einsum("bn,ni,nj->bij", ww * mu * (1.0 - mu), x, x) + ridge
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        big = np.abs(step).max(axis=1)
        step *= np.where(big > 4.0, 4.0 / np.maximum(big, 1e-300), 1.0)[:, None]
        beta[active] = bt + step
        converged[active[big <= tol]] = True
        active = active[big > tol]
    return beta, converged


#: The L2 penalty of the fallback fit when the maximum-likelihood GLM does not exist (see
#: :func:`length_controlled_win_rate`): a standard-normal prior on each coefficient, in logits.
SEPARATION_PENALTY = 1.0
#: A coefficient beyond this many logits (a win probability past 1 - 3e-7 from one feature in -1..1)
#: means the likelihood was still rising: (quasi-)complete separation, not an estimate.
_SEPARATED_LOGIT = 15.0


def _separated(x: np.ndarray, y: np.ndarray, beta: np.ndarray, converged: bool) -> str | None:
    """Why the maximum-likelihood fit is not an estimate (``None`` when it is one)."""
    if np.abs(beta).max() > _SEPARATED_LOGIT:
        return "complete or quasi-complete separation: a coefficient runs off to infinity"
    decided = (y == 0.0) | (y == 1.0)
    if decided.all() and np.abs(_expit(x @ beta) - y).max() < 1e-6:
        return "complete separation: the model predicts every comparison exactly"
    if not converged:
        return "Newton's method did not converge"
    return None


def _difficulty(frame: pd.DataFrame, model: str, instruction: str, y: np.ndarray) -> np.ndarray:
    """Per row, the instruction's difficulty ``gamma_x``: the instruction's effect in a logistic
    regression of the preference on model and instruction indicators over every model in the data
    (sum-zero instruction effects, a small ridge for instructions every model won or lost), higher =
    harder for the models. The same idea as AlpacaEval's ``instruction_difficulty`` but not its
    values: AlpacaEval fits it once over its leaderboard's models and ships it (see
    :func:`length_controlled_win_rate`)."""
    models, mi = np.unique(frame[model].astype(str).to_numpy(), return_inverse=True)
    instr, ii = np.unique(frame[instruction].astype(str).to_numpy(), return_inverse=True)
    n, k_m, k_i = len(y), len(models), len(instr)
    x = np.zeros((n, k_m + k_i))
    x[np.arange(n), mi] = 1.0
    x[np.arange(n), k_m + ii] = 1.0
    beta = np.zeros(k_m + k_i)
    penalty = np.zeros(k_m + k_i)
    penalty[k_m:] = 1e-3
    for _ in range(100):
        mu = _expit(x @ beta)
        grad = x.T @ (y - mu) - penalty * beta
        hess = x.T @ ((mu * (1.0 - mu))[:, None] * x) + np.diag(penalty) + 1e-10 * np.eye(k_m + k_i)
        step = np.linalg.solve(hess, grad)
        biggest = float(np.abs(step).max())
        if biggest > 4.0:
            step *= 4.0 / biggest
        beta += step
        if biggest < 1e-10:
            break
    effect = beta[k_m:] - beta[k_m:].mean()
    return -effect[ii]


def length_controlled_win_rate(
    data: Any,
    *,
    model: str = "model",
    baseline_model: str = "baseline_model",
    winner: str = "winner",
    length_a: str = "length_a",
    length_b: str = "length_b",
    instruction: str | None = None,
    difficulty: str | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int | None = 0,
    codes: str | Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Raw and length-controlled win rates of models against a baseline, as AlpacaEval 2 computes
    them (Dubois et al. 2024, "Length-Controlled AlpacaEval: A Simple Way to Debias Automatic
    Evaluators", arXiv:2404.04475; ``alpaca_eval/metrics/glm_winrate.py``).

    ``data``: one row per comparison of a model's answer (side a) with the baseline's (side b):
    ``model`` and ``baseline_model`` name the columns holding the two models' names, ``winner``
    the column saying which won (``"a"``: the model, ``"b"``: the baseline, ``"tie"``: half) or the
    probability that the model's answer is preferred (continuous preferences, as AlpacaEval's
    weighted annotators give them: AlpacaEval's ``preference`` in [1, 2] is ``1 + p``; numbers from 0
    to 1 not all 0, 0.5 and 1 are read as probabilities, or any with ``codes="probability"``; each
    comparison then counts ``p`` of a win, so ``win_rate`` is AlpacaEval's continuous win rate, the
    mean of ``preference - 1``, ``alpaca_eval.metrics.get_winrate``), ``length_a``/``length_b`` the
    columns of the two answers' lengths. ``instruction``: a column
    naming the instruction (prompt); with several models on the same instructions their
    difficulty ``gamma_x`` is estimated jointly (a logistic regression on model and instruction
    indicators) and enters each model's fit; ``difficulty``: a column of given difficulties
    instead (AlpacaEval ships them for its 805 instructions).

    For each (model, baseline) the GLM
    ``logit P(model wins) = theta + phi * tanh(delta / sd(delta)) + psi * gamma_x``, with
    ``delta = length_a - length_b``, is fitted by maximum likelihood (ties as half a win;
    AlpacaEval's formula, without its L1 cross-validation and regularisation toward its gamed
    baselines, which need its leaderboard data). The length-controlled win rate is the model's
    mean predicted win rate with the length term set to zero, ``mean_x sigma(theta + psi *
    gamma_x)``. Intervals: percentile bootstrap over the model's comparisons (the length scale
    ``sd(delta)`` and the difficulties held fixed).

    When the maximum-likelihood fit does not exist — a model that wins exactly when its answer
    is longer (complete separation, common on small sets) — or Newton's method does not settle,
    the row is refitted with an L2 penalty (:data:`SEPARATION_PENALTY`; AlpacaEval fits its GLM
    with L1 regularisation chosen by cross-validation for the same reason), a ``RuntimeWarning``
    says so, and the row's ``fit`` column names the penalty and the reason (``"mle"`` otherwise).
    Its bootstrap resamples use the same penalty.

    The instruction difficulty estimated here (``instruction=``) is not AlpacaEval's: AlpacaEval
    estimates it once from many models' annotations on its 805 instructions and ships the values,
    and regularises each fit toward its gamed baselines; here it is estimated from the models in
    ``data``. On AlpacaEval's own annotations the resulting LC win rates are lower than its
    published ones (3.3 points on average). To reproduce AlpacaEval's figures, pass its shipped
    difficulties as ``difficulty=``.

    Returns a DataFrame, one row per (model, baseline): :data:`LENGTH_CONTROLLED_COLUMNS`
    (``length_coef`` is ``phi``: positive when the judge favours the longer answer; ``fit``:
    ``"mle"`` or the penalised fallback and why).

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        One row per comparison of a model's answer with the baseline's.
    model : str, default "model"
        The column naming the model.
    baseline_model : str, default "baseline_model"
        The column naming the baseline.
    winner : str, default "winner"
        The column saying which won, or the probability that the model's answer is preferred.
    length_a : str, default "length_a"
        The column of the model's answer's length.
    length_b : str, default "length_b"
        The column of the baseline's.
    instruction : str, optional
        The column naming the instruction (difficulty estimated jointly).
    difficulty : str, optional
        A column of given difficulties instead.
    confidence : float, default 0.95
        The intervals' level.
    n_boot : int, default 1000
        Bootstrap resamples.
    seed : int, optional
        The resampling seed (default 0).
    codes : str or mapping, optional
        What the winner column's values mean.

    Returns
    -------
    DataFrame
        :data:`LENGTH_CONTROLLED_COLUMNS`, one row per (model, baseline).
    """
    conf, n_boot = check_leaderboard_settings(confidence, n_boot)
    frame = _frame(data).reset_index(drop=True)
    need_columns(frame, [model, baseline_model, winner, length_a, length_b,
                          *([instruction] if instruction else []), *([difficulty] if difficulty else [])])
    _names(frame[model], model)
    _names(frame[baseline_model], baseline_model)
    outcome = read_outcomes(frame[winner], winner, codes)
    keep = pd.notna(outcome).astype(bool)
    if not keep.any():
        raise ValidationError(f"column {winner!r} has no winner: nothing to compute a win rate from")
    frame = frame[keep].reset_index(drop=True)
    y = _worth(outcome[keep])  # 1 / 0 / 0.5, or the probability that the model's answer is preferred
    delta = _numbers(frame[length_a], length_a) - _numbers(frame[length_b], length_b)
    if difficulty is not None:
        gamma: np.ndarray | None = _numbers(frame[difficulty], difficulty)
    elif instruction is not None:
        gamma = _difficulty(frame, model, instruction, y)
    else:
        gamma = None
    tail = (1.0 - conf) / 2.0
    rng = np.random.default_rng(seed)
    rows = []
    groups = frame.groupby([model, baseline_model], sort=True, dropna=False, observed=True).indices
    for key, idx in groups.items():
        mname, bname = key if isinstance(key, tuple) else (key, None)
        yy, dd = y[idx], delta[idx]
        sd = float(np.std(dd, ddof=1)) if len(dd) > 1 else 0.0
        length_term = np.tanh(dd / sd) if sd > 0 else np.zeros(len(dd))
        columns = [np.ones(len(idx)), length_term]
        if gamma is not None:
            columns.append(gamma[idx])
        x = np.column_stack(columns)
        x0 = x.copy()
        x0[:, 1] = 0.0
        fitted, settled = _fit_glm(x, yy, np.ones((1, len(idx))))
        beta = fitted[0]
        why = _separated(x, yy, beta, bool(settled[0]))
        penalty = 0.0
        fit = "mle"
        if why is not None:
            penalty = SEPARATION_PENALTY
            fitted, settled = _fit_glm(x, yy, np.ones((1, len(idx))), penalty=penalty)
            beta = fitted[0]
            fit = f"l2 penalty {penalty:g} ({why})"
            warnings.warn(
                f"length_controlled_win_rate: the GLM of {mname!r} against {bname!r} has no maximum-likelihood "
                f"fit ({why}; {len(idx)} comparisons); its row is fitted with an L2 penalty of {penalty:g} "
                "instead and flagged in the 'fit' column. Its length-controlled win rate rests on that penalty: "
                "add comparisons before reading it.", RuntimeWarning, stacklevel=2)
        lc = float(_expit(x0 @ beta).mean())
        raw = float(yy.mean())
        lo_r = hi_r = lo_lc = hi_lc = math.nan
        if n_boot > 0 and len(idx) > 1:
            chunk = max(1, min(n_boot, 2_000_000 // len(idx)))
            raws, lcs = [], []
            done = 0
            while done < n_boot:
                k = min(chunk, n_boot - done)
                w = rng.multinomial(len(idx), np.full(len(idx), 1.0 / len(idx)), size=k).astype(float)
                betas = _fit_glm(x, yy, w, beta, penalty=penalty)[0]
                raws.append(w @ yy / len(idx))
                lcs.append(_expit(betas @ x0.T).mean(axis=1))
                done += k
            r_all, l_all = np.concatenate(raws), np.concatenate(lcs)
            lo_r, hi_r = (float(v) for v in np.quantile(r_all, [tail, 1 - tail]))
            lo_lc, hi_lc = (float(v) for v in np.quantile(l_all, [tail, 1 - tail]))
        rows.append({"model": mname, "baseline": bname, "n": len(idx), "win_rate": raw, "win_rate_low": lo_r,
                     "win_rate_high": hi_r, "lc_win_rate": lc, "lc_win_rate_low": lo_lc, "lc_win_rate_high": hi_lc,
                     "length_coef": float(beta[1]), "fit": fit})
    out = pd.DataFrame(rows, columns=list(LENGTH_CONTROLLED_COLUMNS))
    out.attrs.update(method="alpacaeval-2 glm", confidence=conf, n_boot=n_boot, seed=seed,
                     difficulty="given" if difficulty else ("estimated" if instruction else "none"))
    return out
