"""Two leaderboards of the same models side by side: the rank correlation of their ratings and, pair of models by
pair, how often the judge's winner agrees with people's (:func:`~llm_connect.calibration.compare_leaderboards`);
a raw board beside its style-controlled twin (:func:`side_by_side`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ._comparisons import _sort_key, _worth

__all__ = ["SIDE_BY_SIDE_COLUMNS", "rating_correlation", "side_by_side", "winner_agreement"]


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


#: The columns of :func:`side_by_side` (after the ``by`` columns).
SIDE_BY_SIDE_COLUMNS: tuple[str, ...] = (
    "model", "rating", "rating_low", "rating_high", "rank", "style_rating", "style_rating_low", "style_rating_high",
    "style_rank", "rank_change", "n",
)


def side_by_side(raw: pd.DataFrame, controlled: pd.DataFrame) -> pd.DataFrame:
    """A raw leaderboard and its style-controlled twin in one frame, ordered by the style-controlled rating.

    Parameters
    ----------
    raw : pandas.DataFrame
        A :func:`~llm_connect.stats.leaderboard` frame.
    controlled : pandas.DataFrame
        The leaderboard of the same comparisons with the style held equal (``leaderboard(..., style=True)``).
        A model on one board only keeps its row, NaN on the other side.

    Returns
    -------
    pandas.DataFrame
        One row per model (matched within its group): the group (``by``) columns first, then
        :data:`SIDE_BY_SIDE_COLUMNS`: the raw ``rating``, ``rating_low``, ``rating_high`` and ``rank``, the
        ``style_rating``, ``style_rating_low``, ``style_rating_high`` and ``style_rank``, ``rank_change`` (raw
        rank minus style-controlled rank: positive, the model climbs once style is held equal; negative, its
        raw rank was bought with style) and the raw ``n``. Sorted by group, then by ``style_rating``, highest
        first. ``attrs`` keeps ``by``, the raw board's ``confidence`` and the controlled board's
        ``style_notes`` and ``style_fit``.

    See Also
    --------
    leaderboard : Both boards (``style=`` for the controlled one).
    style_effects : What each rater pays for style.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a = rng.choice(["x", "y", "z"], 60)
    >>> b = np.array([rng.choice([m for m in "xyz" if m != v]) for v in a])
    >>> texts = ["Plain answer.", "**Bold** answer.", "# Head\\n- item", "- one\\n- two"]
    >>> pairs = pd.DataFrame({"model_a": a, "model_b": b, "winner": rng.choice(["a", "b", "tie"], 60),
    ...                       "response_a": rng.choice(texts, 60), "response_b": rng.choice(texts, 60)})
    >>> from llm_connect.stats import leaderboard
    >>> raw = leaderboard(pairs, n_boot=50, progress=False)
    >>> controlled = leaderboard(pairs, n_boot=50, progress=False, style=True)
    >>> both = side_by_side(raw, controlled)
    >>> list(both.columns) == list(SIDE_BY_SIDE_COLUMNS), sorted(both["model"])
    (True, ['x', 'y', 'z'])
    """
    by = [c for c in raw.attrs.get("by", []) if c in raw.columns and c in controlled.columns]
    keys = [*by, "model"]
    left = raw[[*keys, "rating", "rating_low", "rating_high", "rank", "n"]]
    right = controlled[[*keys, "rating", "rating_low", "rating_high", "rank"]].rename(
        columns={"rating": "style_rating", "rating_low": "style_rating_low", "rating_high": "style_rating_high",
                 "rank": "style_rank"})
    merged = left.merge(right, on=keys, how="outer")
    merged["rank_change"] = merged["rank"] - merged["style_rank"]
    merged = merged.sort_values([*by, "style_rating", "model"], ascending=[*([True] * len(by)), False, True])
    out = merged[[*by, *SIDE_BY_SIDE_COLUMNS]].reset_index(drop=True)
    out.attrs = {"by": by, "confidence": raw.attrs.get("confidence"), "style_notes": list(
        controlled.attrs.get("style_notes", [])), "style_fit": controlled.attrs.get("style_fit")}
    return out
