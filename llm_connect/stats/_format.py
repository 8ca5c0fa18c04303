"""Numbers as text, the one way every table, report, card and command line shows them.

Plain text (no markup): :mod:`llm_connect._html` builds its tables on these.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["NBSP", "P_FLOOR", "fmt", "format_p", "p_text", "with_interval"]

#: p-values below this are shown as ``< 0.001``: a test's p-value is never exactly 0, and digits
#: beyond this say more about floating point than about the data.
P_FLOOR = 0.001
#: Joins the parts of an interval (``0.48 [0.25, 0.68]``) so a line never breaks inside it:
#: a no-break space (U+00A0).
NBSP = "\u00a0"


def _is_missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # an array or an odd object: not one missing value
        return False


#: Below this magnitude a float is floating point's rounding residue (``9.84e-17`` for an exact 0), shown as 0.
ZERO_TOLERANCE = 1e-12


def fmt(value: Any, digits: int = 3) -> str:
    """A number as text: ``nan`` shown as an em dash, floats with ``digits`` significant places; a float
    within :data:`ZERO_TOLERANCE` of 0 is ``0`` (never ``9.84e-17``)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if abs(value) < ZERO_TOLERANCE:
            value = 0.0
        return f"{value:.{digits}g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
    if _is_missing(value):
        return "—"
    return str(value)


def format_p(value: Any) -> str:
    """A p-value as text: two significant digits (``0.014``, ``0.0056``, ``0.5``), ``< 0.001`` below
    :data:`P_FLOOR` (never ``0.0`` or ``1e-20``), an em dash when there is none (``None``, NaN)."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        return "—"
    if math.isnan(p):
        return "—"
    if p < P_FLOOR:
        return f"< {P_FLOOR:g}"
    return f"{p:.2g}"


def p_text(value: Any) -> str:
    """``p=0.014``, ``p < 0.001`` (:func:`format_p` after ``p``), for a sentence."""
    shown = format_p(value)
    return f"p {shown}" if shown.startswith("<") else f"p={shown}"


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def with_interval(value: float, low: float, high: float, digits: int = 3) -> str:
    """``0.48 [0.25, 0.68]``, its spaces no-break (:data:`NBSP`) so HTML never wraps the interval."""
    text = fmt(value, digits)
    if _finite(low) and _finite(high):
        text += f"{NBSP}[{fmt(low, digits)},{NBSP}{fmt(high, digits)}]"
    return text
