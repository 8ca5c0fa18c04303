"""Comparisons as data: who was compared with whom and who won, read from a frame, and counted per pair of
models, with the checks every Bradley–Terry fit needs (a winner that is a preference or a probability, a name on
both sides, every model compared, one connected graph of comparisons).

A winner is ``"a"``, ``"b"`` or ``"tie"`` (:func:`~llm_connect.stats.preferences.parse_preferences` reads the
codes), or the probability that answer A is preferred (continuous preferences); :func:`read_outcomes` says which,
:func:`read_comparisons` reads a whole frame. The Bradley–Terry fits (:mod:`llm_connect.stats.bradley_terry`,
:mod:`llm_connect.stats.style`, prediction-powered Bradley–Terry) all start from these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._validate import need_columns
from .preferences import parse_preferences

__all__ = [
    "PROBABILITY_CODES",
    "is_probability_codes",
    "is_probability_column",
    "read_comparisons",
    "read_outcomes",
    "real_number",
]


def _frame(data: Any) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data
    try:
        return pd.DataFrame.from_records(list(data))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"data must be a DataFrame (one row per comparison) or mappings: {exc}") from None


#: ``codes=`` naming a column of probabilities that answer A is preferred (0..1).
PROBABILITY_CODES: tuple[str, ...] = ("probability", "prob", "p")
_EXACT = {1.0: "a", 0.0: "b", 0.5: "tie"}


def is_probability_codes(codes: Any) -> bool:
    """Whether ``codes`` says the winner column holds probabilities that A is preferred.

    Parameters
    ----------
    codes : str, mapping or None
        A leaderboard's ``codes=``.

    Returns
    -------
    bool
        True for ``"probability"`` (or ``"prob"``, ``"p"``; see :data:`PROBABILITY_CODES`), in any case.
    """
    return isinstance(codes, str) and codes.strip().casefold() in PROBABILITY_CODES


def real_number(value: Any) -> float | None:
    """A real number as a float, or ``None``.

    Parameters
    ----------
    value : object
        A cell of a winner column.

    Returns
    -------
    float or None
        ``value`` as a float when it is an int or a float (numpy's too), ``None`` for anything else: a boolean,
        a text (even ``"0.5"``), ``None``.
    """
    if isinstance(value, (bool, np.bool_, str)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def is_probability_column(uniques: Sequence[Any]) -> bool:
    """Whether a winner column is read as probabilities that A is preferred when ``codes=`` does not say.

    Parameters
    ----------
    uniques : sequence
        The column's distinct values.

    Returns
    -------
    bool
        True when every number among them (see :func:`real_number`) lies in [0, 1] and at least one is not 0,
        0.5 or 1. A column of 0, 1 and 0.5 alone could be codes either way round, so it is never guessed.
    """
    numbers = [f for f in map(real_number, uniques) if f is not None and math.isfinite(f)]
    return bool(numbers) and all(0.0 <= f <= 1.0 for f in numbers) and any(f not in _EXACT for f in numbers)


def _read_probabilities(uniques: Sequence[Any], column: str) -> np.ndarray:
    """Each distinct value of a probability column: a label (``"a"``/``"b"``/``"tie"`` for the words,
    and for the exact probabilities 1, 0 and 0.5) or the float probability that A is preferred."""
    out = np.empty(len(uniques), dtype=object)
    bad: list[Any] = []
    for k, u in enumerate(uniques):
        f = real_number(u)
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


def read_outcomes(values: Any, column: str, codes: Any) -> np.ndarray:
    """Read a winner column: a preference or a probability per row.

    Parameters
    ----------
    values : array-like
        The winners, one per comparison.
    column : str
        The column's name, for messages.
    codes : str, mapping or None
        How the winners are coded (as :func:`~llm_connect.stats.preferences.parse_preferences` reads them), or
        ``"probability"`` (:func:`is_probability_codes`); ``None`` reads the words and guesses a column of
        probabilities (:func:`is_probability_column`).

    Returns
    -------
    numpy.ndarray
        An object array: ``"a"``, ``"b"``, ``"tie"`` or ``None`` (no winner) per row (the words Chatbot Arena
        exports are read too); in a column of probabilities, a float in (0, 1) where the probability is not
        exactly 1, 0 or 0.5 (those read as ``"a"``, ``"b"``, ``"tie"``).

    Raises
    ------
    ValidationError
        For a value that is neither a preference nor a probability from 0 to 1, listing such values.
    """
    codes_, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    uniq = list(uniques)
    if is_probability_codes(codes) or (codes is None and is_probability_column(uniq)):
        parsed = _read_probabilities(uniq, column)
    else:
        try:
            parsed = parse_preferences(uniq, codes=codes, column=column)
        except ValidationError as exc:
            numbers = [f for f in map(real_number, uniq) if f is not None]
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


def read_comparisons(data: Any, model_a: str, model_b: str, winner: str, codes: Any,
             extra: Sequence[str] = ()) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """Read the comparisons of ``data``: the two models and the winner of each row.

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        One row per comparison.
    model_a, model_b : str
        The columns naming the two models.
    winner : str
        The column saying who won (see :func:`read_outcomes`).
    codes : str, mapping or None
        How the winners are coded (see :func:`read_outcomes`).
    extra : sequence of str, default ()
        Further columns the caller needs (checked to exist).

    Returns
    -------
    frame : pandas.DataFrame
        ``data`` as a frame.
    a, b : numpy.ndarray
        The model names of each row (object arrays).
    outcome : numpy.ndarray
        The winners, as :func:`read_outcomes` gives them.
    notes : dict
        ``n_rows``, ``n_unlabelled`` (rows without a winner) and ``n_self`` (a model compared with itself,
        with a winner).

    Raises
    ------
    ValidationError
        For data that is not a table, a missing column, a row without a model name, or a winner that cannot be
        read.
    """
    frame = _frame(data)
    need_columns(frame, [model_a, model_b, winner, *extra])
    a = _names(frame[model_a], model_a)
    b = _names(frame[model_b], model_b)
    outcome = read_outcomes(frame[winner], winner, codes)
    same = np.asarray(a == b, dtype=bool)
    labelled = pd.notna(outcome).astype(bool)
    notes = {"n_rows": len(frame), "n_unlabelled": int((~labelled).sum()), "n_self": int((same & labelled).sum())}
    return frame, a, b, outcome, notes
