"""Small HTML helpers shared by the results objects (no third-party imports at module level).

Every value goes into HTML escaped, through :mod:`llm_connect.grading._html`
(``escape``, ``html_format``, ``html_table``); nothing here builds markup from
data by hand.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import pandas as pd

from ..grading._html import Markup, escape, html_format, html_table, join, kv_table

__all__ = [
    "NBSP",
    "P_COLUMNS",
    "P_FLOOR",
    "Markup",
    "escape",
    "fmt",
    "format_p",
    "frame_html",
    "html_format",
    "join",
    "kv_table",
    "new_figure",
    "p_text",
    "png_bytes",
    "png_data_uri",
    "with_interval",
]

#: p-values below this are shown as ``< 0.001``: a test's p-value is never exactly 0, and digits
#: beyond this say more about floating point than about the data.
P_FLOOR = 0.001
#: Table columns that hold p-values (:func:`frame_html` shows them with :func:`format_p`).
P_COLUMNS = ("p", "p_value", "p-value")
#: Joins the parts of an interval (``0.48 [0.25, 0.68]``) so a line never breaks inside it:
#: a no-break space (U+00A0).
NBSP = "\u00a0"


def fmt(value: Any, digits: int = 3) -> str:
    """A number as text: ``nan`` shown as an em dash, floats with ``digits`` significant places."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:.{digits}g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"
    try:
        if pd.isna(value):
            return "—"
    except (TypeError, ValueError):
        pass
    return str(value)


def format_p(value: Any) -> str:
    """A p-value as text, the one way every table, report and command line shows it: two significant
    digits (``0.014``, ``0.0056``, ``0.5``), ``< 0.001`` below :data:`P_FLOOR` (never ``0.0`` or
    ``1e-20``), an em dash when there is none (``None``, NaN)."""
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


def with_interval(value: float, low: float, high: float, digits: int = 3) -> str:
    """``0.48 [0.25, 0.68]``, its spaces no-break (:data:`NBSP`) so HTML never wraps the interval."""
    text = fmt(value, digits)
    if _finite(low) and _finite(high):
        text += f"{NBSP}[{fmt(low, digits)},{NBSP}{fmt(high, digits)}]"
    return text


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def frame_html(df: pd.DataFrame, *, caption: str | None = None, max_rows: int = 60, digits: int = 3) -> Markup:
    """A compact HTML table of ``df`` (the index is not shown); every name and value escaped.

    Numbers are shown by :func:`fmt`, p-values (the columns :data:`P_COLUMNS`) by :func:`format_p`.
    """
    shown = df.head(max_rows)
    is_p = [str(c) in P_COLUMNS for c in shown.columns]
    return html_table(
        ([format_p(v) if p else fmt(v, digits) for v, p in zip(row, is_p, strict=True)]
         for row in shown.itertuples(index=False, name=None)),
        header=[str(c) for c in shown.columns],
        caption=caption or None,
        caption_attrs={"style": "text-align:left;font-weight:bold"},
        note=f"… {len(df) - max_rows} more rows" if len(df) > max_rows else None,
        attrs={"class_": "llm-connect", "style": "border-collapse:collapse;font-size:0.9em"},
    )


def png_data_uri(fig: Any, *, dpi: int = 90) -> str:
    """Render a matplotlib figure to a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig, dpi=dpi)).decode("ascii")


def png_bytes(fig: Any, *, dpi: int = 90) -> bytes:
    """PNG bytes of a matplotlib figure (made with ``matplotlib.figure.Figure``, no pyplot state)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


def new_figure(width: float = 5.0, height: float = 3.6) -> Any:
    """A figure and one Axes outside pyplot's registry, so nothing global changes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()

