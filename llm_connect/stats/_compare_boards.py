"""Two leaderboards of the same models side by side: the rank correlation of their ratings and, pair of models by
pair, how often the judge's winner agrees with people's (:func:`~llm_connect.calibration.compare_leaderboards`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ._comparisons import _sort_key, _worth

__all__ = ["rating_correlation", "winner_agreement"]


def rating_correlation(first: pd.DataFrame, second: pd.DataFrame, name_a: str, name_b: str) -> dict[str, Any]:
    """The rank correlation of two leaderboards' ratings, on the models both rate.

    Parameters
    ----------
    first, second : pandas.DataFrame
        Leaderboards (columns ``model`` and ``rating`` at least).
    name_a, name_b : str
        What to call them in the row.

    Returns
    -------
    dict
        ``a``, ``b`` (the names), ``n_models`` (rated on both boards), ``kendall_tau``, ``kendall_p``,
        ``spearman_rho``, ``spearman_p`` (``scipy.stats``); the last four NaN when fewer than two models are
        shared or either board's ratings are constant.
    """
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


def winner_agreement(a: np.ndarray, b: np.ndarray, judge: np.ndarray, human: np.ndarray) -> pd.DataFrame:
    """Per pair of models, how often the judge's winner agrees with people's.

    Parameters
    ----------
    a, b : numpy.ndarray
        The two models of each comparison.
    judge, human : numpy.ndarray
        The judge's and people's winners (``"a"``, ``"b"``, ``"tie"``, a probability that A is preferred, or
        ``None``), as :func:`~llm_connect.stats.bradley_terry.read_outcomes` reads them.

    Returns
    -------
    pandas.DataFrame
        One row per unordered pair compared by both (a model against itself left out): ``model_1``,
        ``model_2``, ``n``, ``agreement`` (three-way, a/b/tie; with a probability on either side the chance that
        two independent draws agree, a tie counting as an even chance), ``judge_win_rate_1`` and
        ``human_win_rate_1`` (the share won by ``model_1``).
    """
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
