"""The one progress bar of the package: a tqdm bar that is quiet when asked and brief in a log.

Every bar (a batch's rows, an embedding pre-pass, a provider batch's polling, a bootstrap) is made by
:func:`progress_bar`. It lives on the statistics floor because the bootstraps here draw one too and this
floor imports nothing of the package but its errors; the floors below import it from here.

- ``show=False`` is a disabled bar: nothing is written, whatever the caller's defaults.
- On a terminal, or in a notebook (``tqdm.auto``'s widget), the usual live bar.
- Anywhere else -- stderr redirected to a file, a CI log, a pipe -- a live bar would write a
  carriage-return redraw ten times a second into the log. There the bar writes **one plain line per
  5% of the work** (:data:`LOG_STEPS` lines at most, plus the last), never a carriage return, so a
  long run leaves a few readable lines.
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["LOG_STEPS", "is_interactive", "progress_bar"]

#: Outside a terminal a bar writes at most this many progress lines (one per 5% of its total), and the last.
LOG_STEPS = 20
#: Outside a terminal, a bar of unknown total writes at most one line per this many seconds.
LOG_INTERVAL_S = 30.0


def _is_notebook_bar(cls: Any) -> bool:
    """Whether ``tqdm.auto`` chose the notebook widget (a Jupyter kernel with ipywidgets)."""
    return any(c.__name__ == "tqdm_notebook" for c in getattr(cls, "__mro__", ()))


def is_interactive(stream: Any = None) -> bool:
    """Whether ``stream`` (default: ``sys.stderr``) is a terminal a live bar can redraw in place."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # a closed or odd stream
        return False


class _Lines:
    """A file for tqdm that turns each redraw (``"\\r" + status``) into one line of its own: for logs."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        flush = getattr(self.stream, "flush", None)
        if callable(flush):
            flush()


def progress_bar(total: int | None, *, desc: str, unit: str = "item", show: bool = True, leave: bool = True,
                 file: Any = None) -> Any:
    """A tqdm bar of ``total`` steps, labelled ``desc``.

    Parameters
    ----------
    total : int or None
        The steps the bar counts (``None``: unknown).
    desc, unit : str
        Its label and the name of a step.
    show : bool
        ``False``: a disabled bar (it writes nothing; ``update`` and ``close`` still work).
    leave : bool
        Keep the finished bar on screen (tqdm's ``leave``).
    file : file-like, optional
        Where it writes (default: ``sys.stderr``).

    Returns
    -------
    tqdm.tqdm
        On a terminal or in a notebook, the usual live bar; elsewhere (a log, a pipe) a bar that writes one
        plain line per 5% of ``total`` (at most :data:`LOG_STEPS` and the last), or one per
        :data:`LOG_INTERVAL_S` seconds when the total is unknown.
    """
    from tqdm.auto import tqdm

    stream = sys.stderr if file is None else file
    if not show:
        return tqdm(total=total, desc=desc, unit=unit, disable=True, file=stream)
    if _is_notebook_bar(tqdm) or is_interactive(stream):
        return tqdm(total=total, desc=desc, unit=unit, leave=leave, dynamic_ncols=True, file=stream)
    from tqdm import tqdm as plain  # no widget, no redraws: plain lines

    if total:
        step = max(1, math.ceil(total / LOG_STEPS))
        return plain(total=total, desc=desc, unit=unit, leave=leave, file=_Lines(stream), miniters=step,
                     mininterval=0.0, maxinterval=float("inf"), ncols=80, ascii=True)
    return plain(total=total, desc=desc, unit=unit, leave=leave, file=_Lines(stream), mininterval=LOG_INTERVAL_S,
                 maxinterval=float("inf"), ncols=80, ascii=True)
