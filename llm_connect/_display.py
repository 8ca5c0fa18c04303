"""The one seam between data and its drawing.

:mod:`llm_connect.views` sits above every floor that computes: it draws what the
others give it, and nothing below it imports it. A data object that offers a
picture or a page as a convenience (``CalibrationReport.widget()``,
``.to_html()``, ``Labeller.widget()``, ``Pipeline.plot()``) looks its view up
here by name when it is called, as pandas' ``DataFrame.plot`` finds its plotting
backend. So the floors stay one-way, ``import llm_connect`` never loads
matplotlib or ipywidgets, and a view is one function in ``views/`` that takes
the object (or plain data) and returns HTML, a figure or a widget.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["view"]

_VIEWS = "llm_connect.views"


def view(name: str) -> Any:
    """The function ``name`` of :mod:`llm_connect.views` (imported on first use)."""
    return getattr(importlib.import_module(_VIEWS), name)
