"""Figures outside pyplot's global state, and their PNG bytes (matplotlib is imported on first use)."""

from __future__ import annotations

import base64
import io
from typing import Any

__all__ = ["new_figure", "png_bytes", "png_data_uri"]


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
