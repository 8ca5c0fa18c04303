"""Small HTML helpers shared by the results objects (no third-party imports at module level)."""

from __future__ import annotations

import base64
import html
import io
import math
from typing import Any

import pandas as pd

__all__ = ["escape", "fmt", "frame_html", "new_figure", "png_bytes", "png_data_uri", "with_interval"]


def escape(value: Any) -> str:
    return html.escape(str(value))


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


def frame_html(df: pd.DataFrame, *, caption: str | None = None, max_rows: int = 60, digits: int = 3) -> str:
    """A compact, escaped HTML table of ``df`` (the index is not shown)."""
    shown = df.head(max_rows)
    head = "".join(f"<th>{escape(c)}</th>" for c in shown.columns)
    rows = []
    for _, row in shown.iterrows():
        cells = "".join(f"<td>{escape(fmt(v, digits))}</td>" for v in row.tolist())
        rows.append(f"<tr>{cells}</tr>")
    more = ""
    if len(df) > max_rows:
        more = f"<tr><td colspan='{len(shown.columns)}'>… {len(df) - max_rows} more rows</td></tr>"
    cap = f"<caption style='text-align:left;font-weight:bold'>{escape(caption)}</caption>" if caption else ""
    return (
        "<table class='llm-connect' style='border-collapse:collapse;font-size:0.9em'>"
        f"{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}{more}</tbody></table>"
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

