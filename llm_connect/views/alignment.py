"""The page of an :class:`~llm_connect.alignment.Alignment`: the decision, the held-out figures before and
after with their intervals, the candidates as cross-validation ranked them, the rubric, and the held-out
disagreements that remain. HTML only (no figure), every value escaped by :mod:`llm_connect._html`."""

from __future__ import annotations

import math
from typing import Any

from .._html import Markup, frame_html, html_format, html_table, join, kv_table, with_interval

__all__ = ["alignment_html"]

_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
          "table.llm-connect td,table.llm-connect th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
          "table{margin:1em 0;border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
          "caption{margin-bottom:4px;text-align:left;font-weight:bold}pre{white-space:pre-wrap;"
          "background:#f6f6f6;padding:8px}.kept{color:#8a4b00}.accepted{color:#1a6b1a}")


def _interval(value: float, low: float, high: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return with_interval(value, low, high)


def _short(text: Any, limit: int = 160) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def alignment_html(alignment: Any, *, full_page: bool = True, max_rows: int = 50) -> Markup:
    """The alignment page (a whole HTML document with ``full_page``, else a fragment for a notebook).

    Parameters
    ----------
    alignment : Alignment
        The result of :func:`~llm_connect.alignment.align`.
    full_page : bool, default True
        A whole HTML document, else a fragment.
    max_rows : int, default 50
        The most rows of a table shown.

    Returns
    -------
    Markup
        The HTML (untrusted text escaped).
    """
    a = alignment
    d = a.difference
    verdict = html_format("<p class='{}'><b>{}</b></p>", "accepted" if a.accepted else "kept", a.reason)
    held = a.heldout
    rows = [(r["rubric"], r["name"] or "", r["candidate"], r["rubric_hash"], int(r["n"]),
             _interval(r["kappa"], r["kappa_low"], r["kappa_high"]),
             _interval(r["agreement"], r["agreement_low"], r["agreement_high"])) for _, r in held.iterrows()]
    held_table = html_table(rows, header=["rubric", "name", "candidate", "hash", "n", "Cohen's kappa",
                                          "percent agreement"],
                            caption="Held-out labels (never seen by selection): before and after")
    diff_line = html_format(
        "<p>Paired bootstrap of the {} difference (aligned − original) on the same held-out items: {}. The "
        "candidate is accepted only when this interval lies above 0.</p>", a.metric,
        _interval(d.value, d.low, d.high) if d.defined else f"undefined ({d.reason})")
    split = a.provenance.get("split", {})
    labels = a.provenance.get("labels", {})
    facts = kv_table([
        ("labelled items", f"{labels.get('n')} ({labels.get('pass')} pass, {labels.get('fail')} fail)"),
        ("selection / held-out", f"{split.get('selection')} / {split.get('heldout')} (stratified by label, "
                                 f"seed {split.get('seed')})"),
        ("cross-validation folds", split.get("folds")),
        ("parent rubric", a.provenance.get("parent_rubric_hash")),
        ("judge calls planned", a.plan.get("judge_calls")),
        ("spent", f"${a.cost_usd:,.4f}"),
    ], caption="The run")
    ranking = a.ranking()[["candidate", "n", "kappa", "agreement", "judge_calls"]]
    cand = frame_html(ranking, caption="Candidates, ranked by cross-validation on the selection split "
                                       "(pooled out-of-fold)")
    folds = a.candidates[a.candidates["fold"] != "all"][["candidate", "fold", "n", "kappa", "agreement",
                                                          "examples", "threshold", "rubric_hash"]]
    folds_html = frame_html(folds, caption="Each candidate in each fold", max_rows=200)
    rubric = a.rubric if a.accepted else a.aligned_rubric
    rubric_html = html_format("<h3>{}</h3><pre>{}</pre>",
                              "The aligned rubric" if a.accepted else "The best candidate (not accepted)",
                              rubric.to_yaml())
    dis = a.disagreements()
    if dis.empty:
        dis_html = Markup("<p>No held-out disagreement remains.</p>")
    else:
        shown = dis.copy()
        for c in ("prompt", "baseline", "candidate", "notes"):
            if c in shown.columns:
                shown[c] = shown[c].map(_short)
        dis_html = frame_html(shown, caption=f"Held-out disagreements that remain ({len(dis)})", max_rows=max_rows)
    body = join([Markup("<h2>Aligning a judge to people</h2>"), verdict, held_table, diff_line, facts, cand,
                 rubric_html, dis_html, folds_html])
    if not full_page:
        return html_format("<div class='llm-connect-alignment'>{}</div>", body)
    return html_format("<!DOCTYPE html><html><head><meta charset='utf-8'><title>{}</title><style>{}</style>"
                       "</head><body>{}</body></html>", "Alignment", Markup(_STYLE), body)

