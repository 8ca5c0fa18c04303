"""Judge cards as HTML: one card (:func:`judge_card_html`, the ``_repr_html_`` of
:class:`~llm_connect.cards.JudgeCard`) and a registry of them (:func:`card_registry_html`)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .._html import Markup, fmt, frame_html, html_format, join, kv_table, with_interval
from ..cards import selective_line

__all__ = ["card_registry_html", "judge_card_html"]


def _num(value: Any) -> float:
    try:
        return math.nan if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return math.nan


def _kappa(group: Any) -> str:
    return with_interval(_num(group.get("kappa")), _num(group.get("kappa_low")), _num(group.get("kappa_high")))


def judge_card_html(card: Any) -> Markup:
    """A judge card: its verdict, the figures behind it (agreement, kappa, mean bias with their intervals,
    reliability, style, selective judging, provenance, kappa per group) and its bias probes.

    Parameters
    ----------
    card : JudgeCard

    Returns
    -------
    Markup
        A ``<div class='llm-connect-card'>`` (every value escaped).
    """
    rows = [
        ("rubric", card.rubric_hash or "—"),
        ("checked against", card.reference + ("" if card.people else " (no human labels)")),
        ("labelled items", card.n_labelled if not card.cluster else
         f"{card.n_labelled} in {card.cluster.get('n_clusters')} clusters of {card.cluster.get('column')!r} "
         "(intervals resample whole clusters)"),
        ("percent agreement", with_interval(card.percent_agreement, card.agreement_low, card.agreement_high)),
        ("Cohen's kappa", with_interval(card.kappa, card.kappa_low, card.kappa_high)),
        ("mean bias (judge − human)", with_interval(card.mean_bias, card.bias_low, card.bias_high)),
        ("unscored rate", fmt(card.unscored_rate)),
        ("says yes to", fmt(card.yes_rate)),
    ]
    if card.weak:
        rows.append(("flagged weak", card.weak))
    if card.position_consistency is not None:
        rows.append(("position consistency", fmt(card.position_consistency)))
    if card.reliability:
        r = card.reliability
        rows.append(("run-to-run reliability", f"{r.get('epochs')} epochs, {r.get('n_items')} items: agreement "
                     f"{fmt(_num(r.get('agreement')))}, Krippendorff's alpha ({r.get('level')}) "
                     f"{fmt(_num(r.get('alpha')))}"))
    if card.style and card.style.get("line"):
        rows.append(("rewards besides quality", card.style["line"]))
    if card.selective:
        rows.append((f"selective (alpha={card.selective.get('alpha')}, delta={card.selective.get('delta')})",
                     selective_line(card.selective)))
    if card.provenance and card.provenance.get("parent_rubric_hash"):
        p = card.provenance
        split = p.get("split") or {}
        rows.append(("aligned from", f"rubric {p.get('parent_rubric_hash')} ({p.get('candidate')}; "
                     f"{split.get('selection')} selection / {split.get('heldout')} held-out labels)"))
    if card.by_group:
        rows.append((f"Cohen's kappa by {card.by_group.get('by')}", "; ".join(
            f"{g.get('group')}: {_kappa(g)} (n={g.get('n')})" for g in card.by_group.get("groups") or ())))
    probes = Markup("")
    if card.probes:
        probes = frame_html(
            pd.DataFrame([{"probe": p.probe, "source": p.source, "effect": p.effect, "low": p.low,
                           "high": p.high, "p": p.p_value, "n": p.n,
                           "note": f"by definition: {p.by_definition}" if p.expected else ""}
                          for p in card.probes]),
            caption="bias probes",
        )
    return html_format(
        "<div class='llm-connect-card' style='border:1px solid #ccc;padding:6px;margin:6px 0'>"
        "<b>{}</b><p>{}</p>{}{}</div>",
        card.grader_id, card.verdict, kv_table(rows, attrs={"class_": "llm-connect"}), probes,
    )


def card_registry_html(registry: Any) -> Markup:
    """Every card of a :class:`~llm_connect.cards.JudgeCardRegistry`, or a line saying it has none.

    Parameters
    ----------
    registry : JudgeCardRegistry

    Returns
    -------
    Markup
    """
    cards = registry.cards()
    if not cards:
        return html_format("<p>no judge cards in {}</p>", registry.path)
    return join(judge_card_html(c) for c in cards)
