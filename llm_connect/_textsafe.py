"""Neutralise untrusted text before it reaches a terminal or a spreadsheet.

Data (item ids, adapter and grader ids, judge replies, error texts) comes from
users' files and from model replies, so the command line treats it as
untrusted:

- :func:`safe_text` renders it on one line with no control characters: C0 and
  C1 controls (ESC, CR, BEL, ...), DEL, line and paragraph separators, bidi
  overrides and lone surrogates become visible escapes (``\\x1b``, ``\\n``,
  ``\\u202e``, ``\\udc80``), so a value can neither drive the terminal nor fake
  a line of output, and printing never fails on an unencodable character.
- :func:`redact_urls` drops the ``user:password@`` part of any URL in a text (or masks it as ``***@``).
- :func:`csv_cell` / :func:`csv_safe_frame` apply the OWASP rule against CSV
  (formula) injection: a text cell starting with ``=``, ``+``, ``-``, ``@``,
  tab or carriage return gets a leading ``'``. Numbers are never touched, nor
  is a text cell that is a plain number (``-0.5`` stays ``-0.5``), so numeric
  columns read back as numbers. Every CSV the command line writes passes
  through :func:`csv_safe_frame`; ``scores.parquet`` does not: Parquet keeps
  the values as they were, for code to read, and no spreadsheet runs it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FORMULA_PREFIXES", "csv_cell", "csv_safe_frame", "one_line", "redact_urls", "safe_text"]

# C0 controls, DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates, surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# scheme://userinfo@ -- userinfo runs to the last '@' before the host's path, query or fragment
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#]*@")

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def redact_urls(text: str, *, mask: str = "") -> str:
    """``text`` with the credentials of every ``scheme://user:password@host`` URL removed.

    Parameters
    ----------
    text : str
        Any text: a URL, a message quoting URLs.
    mask : str, default ""
        What stands where the credentials were: ``""`` drops them with their ``@``
        (``https://host/v1``); ``"***"`` shows that there were some (``https://***@host/v1``), as the
        adapters' messages and ``repr`` do.

    Returns
    -------
    str
        ``text`` with the ``user:password@`` part of every URL (up to the last ``@`` before the host's
        path, query or fragment) replaced.
    """
    return _URL_USERINFO.sub(lambda m: m.group(1) + (mask + "@" if mask else ""), text)


def safe_text(value: Any, *, limit: int | None = None) -> str:
    """``value`` as one printable line: control characters escaped, URL credentials removed.

    ``limit`` cuts the result to that many characters (ending in ``…``).
    """
    text = value if isinstance(value, str) else str(value)
    text = _UNSAFE.sub(_escape, redact_urls(text))
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def one_line(message: Any, *, limit: int | None = None) -> str:
    """A (possibly multi-line) message of our own on one line: lines joined with a space, then :func:`safe_text`."""
    text = message if isinstance(message, str) else str(message)
    joined = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return safe_text(joined, limit=limit)


def csv_cell(value: Any) -> Any:
    """A cell safe to open in a spreadsheet: text starting with a formula character gets a leading ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_safe_frame(frame: Any) -> Any:
    """A copy of a DataFrame whose text cells (and column names) pass :func:`csv_cell`; numbers untouched."""
    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        series = out[column]
        if pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype):
            continue
        if pd.api.types.is_datetime64_any_dtype(series.dtype):
            continue
        out[column] = series.map(csv_cell).astype(object) if len(series) else series
    out.columns = [csv_cell(c) for c in out.columns]
    return out
