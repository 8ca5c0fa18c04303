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
    "Markup",
    "escape",
    "fmt",
    "frame_html",
    "html_format",
    "join",
    "kv_table",
    "new_figure",
    "png_bytes",
    "png_data_uri",
    "with_interval",
]


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


def with_interval(value: float, low: float, high: float, digits: int = 3) -> str:
    text = fmt(value, digits)
    if isinstance(low, float) and isinstance(high, float) and not (math.isnan(low) or math.isnan(high)):
        text += f" [{fmt(low, digits)}, {fmt(high, digits)}]"
    return text


def frame_html(df: pd.DataFrame, *, caption: str | None = None, max_rows: int = 60, digits: int = 3) -> Markup:
    """A compact HTML table of ``df`` (the index is not shown); every name and value escaped."""
    shown = df.head(max_rows)
    return html_table(
        ([fmt(v, digits) for v in row] for row in shown.itertuples(index=False, name=None)),
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

