"""The one HTML and escaping helper: every ``_repr_html_``, report, page and table goes through it.

Every field a user or a model can set (a grader id, an item id, an adapter id,
a note, a reply...) may hold markup, so no value is ever put into HTML by hand.
Markup comes only from constant templates and the helpers here:

- :func:`html_format` is ``str.format`` that escapes every argument;
- :func:`html_table` and :func:`kv_table` build a table from plain values;
- :class:`Markup` marks text that *is* HTML (only these helpers make it), so
  one fragment can be placed in another without being escaped twice.

Numbers are shown one way everywhere: :func:`fmt`, :func:`format_p` (p-values),
:func:`with_interval` (``0.48 [0.25, 0.68]``, never broken across lines) and
:func:`frame_html` (a DataFrame as an escaped table).

The module sits in the lowest layer that every producer of HTML may import
(grading, pipelines, calibration, routing, views) and imports nothing from the
package; drawing figures (matplotlib) lives in :mod:`llm_connect.views`.
"""

from __future__ import annotations

import html
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from .stats._format import NBSP, P_FLOOR, fmt, format_p, p_text, with_interval

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
    "html_table",
    "join",
    "kv_table",
    "p_text",
    "with_interval",
]


class Markup(str):
    """Text that is already HTML, made by the helpers of this module; inserted as is.

    Adding plain text to it escapes the text (``Markup("<b>x</b>") + "<i>"`` is
    ``<b>x</b>&lt;i&gt;``), so fragments can be concatenated without a second thought.
    """

    __slots__ = ()

    def __add__(self, other: object) -> Markup:
        if isinstance(other, str):
            return Markup(str.__add__(self, escape(other)))
        return NotImplemented

    def __radd__(self, other: object) -> Markup:
        if isinstance(other, str):
            return Markup(str.__add__(escape(other), self))
        return NotImplemented


def escape(value: Any) -> Markup:
    """``value`` as text safe in an element or a quoted attribute (a :class:`Markup` is kept as is)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


class _EscapingFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Markup) and not format_spec:
            return value
        return html.escape(format(value, format_spec), quote=True)


_formatter = _EscapingFormatter()


def html_format(template: str, /, *args: Any, **kwargs: Any) -> Markup:
    """``template.format(*args, **kwargs)`` with every argument escaped after formatting.

    ``template`` is constant markup written in the code, never data. A :class:`Markup`
    argument (a fragment made here) is inserted as is.
    """
    return Markup(_formatter.vformat(template, args, kwargs))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Fragments joined; plain strings among them are escaped."""
    return Markup(escape(sep).join(escape(p) for p in parts))


def _attrs(attrs: Mapping[str, Any] | None) -> str:
    if not attrs:
        return ""
    return "".join(f" {escape(k.rstrip('_'))}='{escape(v)}'" for k, v in attrs.items() if v is not None)


def html_table(
    rows: Iterable[Sequence[Any]],
    *,
    header: Sequence[Any] | None = None,
    caption: Any = None,
    caption_attrs: Mapping[str, Any] | None = None,
    note: Any = None,
    attrs: Mapping[str, Any] | None = None,
) -> Markup:
    """A ``<table>`` of ``rows`` (each a sequence of cell values), every value escaped.

    ``header`` names the columns (``<thead>``); ``caption`` and ``note`` (a last row
    spanning every column, e.g. "... 12 more rows") are text. ``attrs`` and
    ``caption_attrs`` are the attributes of ``<table>`` and ``<caption>``
    (``class_`` for ``class``).
    """
    table = [list(row) for row in rows]
    body = [f"<tr>{''.join(f'<td>{escape(v)}</td>' for v in row)}</tr>" for row in table]
    if note is not None:
        width = len(header) if header is not None else max((len(r) for r in table), default=1)
        body.append(f"<tr><td colspan='{max(width, 1)}'>{escape(note)}</td></tr>")
    cap = f"<caption{_attrs(caption_attrs)}>{escape(caption)}</caption>" if caption is not None else ""
    head = f"<thead><tr>{''.join(f'<th>{escape(h)}</th>' for h in header)}</tr></thead>" if header is not None else ""
    return Markup(f"<table{_attrs(attrs)}>{cap}{head}<tbody>{''.join(body)}</tbody></table>")


def kv_table(
    pairs: Iterable[tuple[Any, Any]], *, caption: Any = None, attrs: Mapping[str, Any] | None = None
) -> Markup:
    """A two-column ``<table>``: each key a row header (``<th>``), its value beside it; all escaped."""
    body = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in pairs)
    cap = f"<caption>{escape(caption)}</caption>" if caption is not None else ""
    return Markup(f"<table{_attrs(attrs)}>{cap}<tbody>{body}</tbody></table>")

#: Table columns that hold p-values (:func:`frame_html` shows them with :func:`format_p`).
P_COLUMNS = ("p", "p_value", "p-value")


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
