"""The HTML Jupyter shows for a quality ledger and for a quality gate's check.

:class:`~llm_connect.quality.QualityLedger`, :class:`~llm_connect.quality.ParquetLedger` and
:class:`~llm_connect.testing.QualityCheck` reach these views by name (:func:`llm_connect._display.view`);
every value is escaped by :mod:`llm_connect._html`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._html import Markup, html_format, kv_table
from .grading import _fixed

if TYPE_CHECKING:
    from ..testing import QualityCheck

__all__ = ["ledger_html", "quality_check_html"]


def ledger_html(kind: str, location: str) -> Markup:
    """A ledger in one line: its kind and where it lives.

    Parameters
    ----------
    kind : str
        The ledger's class name (``"QualityLedger"``, ``"ParquetLedger"``).
    location : str
        Its path or root, credentials already redacted.

    Returns
    -------
    Markup
    """
    return html_format("<code>{}</code> at <code>{}</code>", kind, location)


def quality_check_html(check: QualityCheck) -> Markup:
    """A quality gate's evidence as a table: verdict, n, mean, interval, threshold, method, what was left out.

    Parameters
    ----------
    check : QualityCheck
        What :func:`~llm_connect.testing.assert_quality` returned.

    Returns
    -------
    Markup
    """
    rows = [("verdict", check.verdict), ("n", check.n), (check.what, _fixed(check.mean)),
            ("interval", f"[{_fixed(check.low)}, {_fixed(check.high)}] ({check.confidence:.0%})"),
            ("at least", "every run" if check.at_least is None else f"{check.at_least:g}"),
            ("method", check.method_text)]
    if check.more_items is not None:
        rows.append(("more items to settle it", f"about {check.more_items}"))
    if check.n_unscored or check.n_error:
        rows.append(("not counted", f"{check.n_unscored} unscored, {check.n_error} error"))
    if check.first_error:
        rows.append(("first error", check.first_error))
    return html_format("<div>{}</div>", kv_table(rows, caption="quality check"))
