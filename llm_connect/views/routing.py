"""The HTML Jupyter shows for a routing decision: the choice and why, then the evidence table it rests on.

:class:`~llm_connect.routing.RoutingDecision`'s ``_repr_html_`` reaches :func:`routing_decision_html` by name
(:func:`llm_connect._display.view`); every value is escaped by :mod:`llm_connect._html`.
"""

from __future__ import annotations

import math
from typing import Any

from .._html import Markup, html_format, html_table

__all__ = ["routing_decision_html"]


def routing_decision_html(decision: Any) -> Markup:
    """The decision in one paragraph (task type, adapter, reason, the policy's threshold, confidence and
    minimum n), then its evidence table (one row per adapter) when it has one.

    Parameters
    ----------
    decision : RoutingDecision
        What :func:`~llm_connect.routing.route` returned (routing sits below views, so it is not imported here).

    Returns
    -------
    Markup
    """
    head = html_format(
        "<p><b>{}</b> &rarr; <b>{}</b>: {} (threshold {:g} on the lower end of a {:.0%} interval, n &ge; {})</p>",
        decision.task_type, decision.adapter_id or "no adapter", decision.reason, decision.policy.threshold,
        decision.policy.confidence, decision.policy.min_observations,
    )
    if decision.evidence is None or not len(decision.evidence):
        return head
    rows = ([_cell(v) for v in row] for row in decision.evidence.itertuples(index=False, name=None))
    return head + html_table(rows, header=[str(c) for c in decision.evidence.columns])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    if value is None:
        return ""
    return str(value)
