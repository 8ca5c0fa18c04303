"""The one check of a confidence level, the one reading of group columns (``by``), and the one check that a
frame has the columns a function reads (:func:`need_columns`).

Every function of the package that takes ``confidence=`` checks it with :func:`check_confidence`,
and every one that takes ``by=`` (one column name or several) reads it with :func:`by_columns`,
so a bad value gets the same :class:`~llm_connect.errors.ValidationError` wherever it is passed.

Group columns are the user's: a function whose result holds its group columns beside columns of
its own (``estimate_quality``'s ``method``, ``estimate``, ``se``, ``reason``...; a leaderboard's
``model``, ``rating``...) passes those names as ``reserved``, and a ``by`` naming one of them is
refused with a message saying how to rename it, never overwritten by the result. :func:`group_codes`
numbers the groups present in the data (never the product of every column's distinct values, which
overflows with many high-cardinality columns).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["by_columns", "check_confidence", "group_codes", "need_columns"]


def check_confidence(confidence: Any, *, name: str = "confidence") -> float:
    """``confidence`` as a float strictly between 0 and 1 (the level of an interval, e.g. 0.95).

    A boolean, a text or anything else that is not a real number, and a number outside (0, 1)
    (NaN included), is a :class:`~llm_connect.errors.ValidationError`; a percentage such as 95
    gets a hint (``did you mean 0.95?``).
    """
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise ValidationError(f"{name} must be a number between 0 and 1 (e.g. 0.95), got {confidence!r}")
    conf = float(confidence)
    if not 0.0 < conf < 1.0:  # NaN fails too
        hint = f"; did you mean {conf / 100:g}?" if 1 < conf < 100 else ""
        raise ValidationError(f"{name} must be between 0 and 1 (e.g. 0.95), got {confidence!r}: an interval's "
                              f"level is strictly between 0 and 1{hint}")
    return conf


def need_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    """Check that ``frame`` has every column of ``columns``.

    Parameters
    ----------
    frame : pandas.DataFrame
        The data.
    columns : sequence of str
        The columns a function reads (a name given twice is checked once).

    Raises
    ------
    ValidationError
        Naming every missing column and listing the columns the data has.
    """
    missing = [c for c in dict.fromkeys(columns) if c not in frame.columns]
    if missing:
        raise ValidationError(f"no column {', '.join(map(repr, missing))} in the data; it has "
                              f"{', '.join(map(str, frame.columns))}")


def by_columns(by: str | Sequence[str] | None, *, reserved: Iterable[str] = (),
               what: str = "the result") -> list[str]:
    """``by`` (``None``, a column name, or a list of them) as a list of distinct column names.

    ``reserved``: the columns ``what`` adds beside the group columns. A group column of one of
    those names would be overwritten by the result (``estimate_quality(by="method")``): it is a
    :class:`~llm_connect.errors.ValidationError` saying to rename the column, never a silent
    overwrite. A name that is not a string, or the same name twice, is one too. Whether the data
    has the columns is the caller's check (it knows the data's form).
    """
    if by is None:
        return []
    if isinstance(by, str):
        cols = [by]
    elif isinstance(by, Iterable) and not isinstance(by, (bytes, bytearray)):
        cols = list(by)
    else:
        raise ValidationError(f"by must be a column name or a list of column names, got {by!r}")
    if not all(isinstance(c, str) for c in cols):
        raise ValidationError(f"by must be a column name or a list of column names, got {by!r}")
    if len(set(cols)) != len(cols):
        raise ValidationError(f"by names a column twice: {cols}")
    taken = [c for c in cols if c in set(reserved)]
    if taken:
        c = taken[0]
        raise ValidationError(
            f"by names the column {c!r}, which {what} adds itself ({', '.join(dict.fromkeys(reserved))}): your "
            f"groups would be overwritten. Rename that column first, e.g. "
            f"data.rename(columns={{{c!r}: {c + '_group'!r}}}), and group by the new name"
        )
    return cols


def group_codes(data: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """Group codes 0..G-1 per row and the keys, sorted by key (missing keys last, kept as a group).

    Each key column is factorised and the combinations present are numbered in sorted order:
    linear in the rows (pandas' ``ngroup`` is several times slower). Only the combinations present
    are numbered: when the product of the columns' distinct values would overflow (a few
    high-cardinality columns), the combinations of the columns so far are renumbered first, so a
    number never exceeds the rows times one column's distinct values.
    """
    import numpy as np
    import pandas as pd

    if not by:
        return np.zeros(len(data), dtype=np.intp), pd.DataFrame(index=range(1))
    codes: list[np.ndarray] = []
    uniques: list[Any] = []
    for col in by:
        try:
            c, u = pd.factorize(data[col], sort=True, use_na_sentinel=False)
        except TypeError:  # keys of mixed types cannot be sorted: keep them in order of appearance
            c, u = pd.factorize(data[col], sort=False, use_na_sentinel=False)
        codes.append(c.astype(np.int64))
        uniques.append(u)
    n = len(data)
    combined = codes[0]
    width = max(len(uniques[0]), 1)  # combined < width
    for c, u in zip(codes[1:], uniques[1:], strict=True):
        size = max(len(u), 1)
        if width * size >= _MAX_CODES:  # number the combinations present so far, in order
            slots, inverse = np.unique(combined, return_inverse=True)
            combined, width = inverse.reshape(-1).astype(np.int64), max(len(slots), 1)
        combined = combined * size + c  # lexicographic: the order of the sorted keys
        width *= size
    if width <= max(4 * n, 1 << 20):
        present = np.bincount(combined, minlength=width) > 0
        group = (np.cumsum(present) - 1)[combined] if n else np.zeros(0, dtype=np.int64)
        n_groups = int(present.sum())
    else:
        slots, inverse = np.unique(combined, return_inverse=True)
        group, n_groups = inverse.reshape(-1), len(slots)
    row = np.zeros(n_groups, dtype=np.intp)  # a row of each group (all its rows share the keys)
    row[group] = np.arange(n)
    keys = pd.DataFrame({col: u.take(c[row]) for col, c, u in zip(by, codes, uniques, strict=True)})
    return group.astype(np.intp), keys


#: Group numbers stay below this (int64 arithmetic with room to spare).
_MAX_CODES = 1 << 62
