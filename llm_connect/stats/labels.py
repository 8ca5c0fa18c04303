"""Human labels as numbers: booleans, yes/no words, 0..1 scores, or ratings on a declared scale.

One reading of a label column for every part of the package (calibration runs, selective judging,
the Labeller's frames, the command line), so a label means the same wherever it is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from .agreement import parse_scale

__all__ = ["parse_labels"]

_YES = {"yes", "y", "true", "t", "correct", "acceptable", "accept", "right", "pass", "good", "1", "1.0"}
_NO = {"no", "n", "false", "f", "incorrect", "unacceptable", "reject", "wrong", "fail", "bad", "0", "0.0"}
_BLANK = {"", "na", "n/a", "nan", "none", "null", "-", "?"}


def parse_labels(values: Iterable[Any], *, column: str = "human", scale: Any = None) -> np.ndarray:
    """Human labels as scores in 0..1: booleans, yes/no words, or numbers in 0..1.

    With ``scale=(low, high)`` (or ``"1-5"``; see :func:`parse_scale`) the labels are
    ratings on that scale (numbers from ``low`` to ``high``, e.g. 1..5 Likert
    ratings) and come back as ``(rating - low) / (high - low)``, so that 0..1 holds
    for every score of a run; the agreement statistics on the labels' own scale
    (:data:`~llm_connect.calibration._agreement.GRADED_STATISTICS`) map them back.

    Blank, ``None`` and NaN become NaN (an unlabelled item). Anything else
    raises ``ValueError`` naming the column and a few of the values it could
    not read (and, for whole numbers beyond 1, the ``scale`` to declare, also
    as the error's ``scale`` attribute: ``(low, high)``, else ``None``).

    Parameters
    ----------
    values : iterable
        The labels.
    column : str, default "human"
        Their column, for the error.
    scale : tuple of (float, float) or str, optional
        The rating scale (above).

    Returns
    -------
    ndarray of float
        The scores in 0..1 (NaN: unlabelled).

    Raises
    ------
    ValueError
        A label that cannot be read (above).

    Examples
    --------
    >>> parse_labels(["yes", "No", True, 0.5, None]).tolist()
    [1.0, 0.0, 1.0, 0.5, nan]
    >>> parse_labels([1, 3, 5], scale=(1, 5)).tolist()
    [0.0, 0.5, 1.0]
    """
    bounds = parse_scale(scale)
    out = []
    bad: list[Any] = []
    for v in values:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out.append(math.nan)
            continue
        if bounds is not None:
            f = _number(v)
            if isinstance(v, str) and v.strip().lower() in _BLANK:
                out.append(math.nan)
            elif math.isfinite(f) and bounds[0] <= f <= bounds[1]:
                out.append((f - bounds[0]) / (bounds[1] - bounds[0]))
            else:
                out.append(math.nan)
                bad.append(v)
        elif isinstance(v, (bool, np.bool_)):
            out.append(1.0 if v else 0.0)
        elif isinstance(v, (int, float, np.integer, np.floating)):
            f = float(v)
            if 0.0 <= f <= 1.0:
                out.append(f)
            else:
                out.append(math.nan)
                bad.append(v)
        else:
            text = str(v).strip().lower()
            if text in _BLANK:
                out.append(math.nan)
            elif text in _YES:
                out.append(1.0)
            elif text in _NO:
                out.append(0.0)
            else:
                try:
                    f = float(text)
                except ValueError:
                    f = math.nan
                if 0.0 <= f <= 1.0:
                    out.append(f)
                else:
                    out.append(math.nan)
                    bad.append(v)
    if bad:
        shown = ", ".join(repr(b) for b in list(dict.fromkeys(map(str, bad)))[:5])
        if bounds is not None:
            raise ValidationError(
                f"column {column!r} holds {len(bad)} value(s) outside the scale {bounds[0]}-{bounds[1]}: {shown}; "
                "use numbers on the scale (blank for unlabelled), or declare the scale the ratings use"
            )
        numbers = [f for f in (_number(b) for b in bad) if math.isfinite(f)]
        if numbers and len(numbers) == len(bad) and all(f == int(f) for f in numbers):
            low = int(min(0.0, *numbers)) if min(numbers) < 1 else 1
            exc = ValidationError(
                f"column {column!r} holds ratings such as {shown}, not 0-1 labels; declare their scale: "
                f"scale=({low}, {int(max(numbers))})"
            )
            exc.scale = (low, int(max(numbers)))  # type: ignore[attr-defined]  # the scale to suggest
            raise exc
        exc = ValidationError(
            f"column {column!r} holds {len(bad)} value(s) that are not a label: {shown}; "
            "use booleans, yes/no or a score from 0 to 1 (blank for unlabelled), or ratings on a declared "
            "scale (scale=(1, 5))"
        )
        exc.scale = None  # type: ignore[attr-defined]  # no scale to suggest from these values
        raise exc
    return np.asarray(out, dtype=float)


def _number(value: Any) -> float:
    """A number read from a value (a number, or text holding one); NaN when it holds none (booleans too)."""
    if isinstance(value, (bool, np.bool_)):
        return math.nan
    try:
        return float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        return math.nan
