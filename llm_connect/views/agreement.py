"""Agreement as tables: one pair of raters (:func:`pair_agreement_html`) and every pair
(:func:`agreement_table_html`), the ``_repr_html_`` of
:class:`~llm_connect.calibration.PairAgreement` and :class:`~llm_connect.calibration.AgreementTable`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._html import Markup, fmt, frame_html, join, with_interval
from ..stats.clusters import cluster_sizes_text

__all__ = ["agreement_table_html", "pair_agreement_html"]

#: How each statistic of a pair is named on the page.
STATISTIC_LABELS = {
    "percent_agreement": "percent agreement",
    "cohen_kappa": "Cohen's kappa",
    "alpha_interval": "Krippendorff's alpha (interval)",
    "alpha_nominal": "Krippendorff's alpha (nominal, verdicts)",
    "spearman": "Spearman rho",
    "kendall": "Kendall tau-b",
    "mean_abs_diff": "mean absolute difference",
    "scale_kappa_quadratic": "Cohen's kappa, quadratic weights (on the scale)",
    "scale_alpha_ordinal": "Krippendorff's alpha (ordinal, on the scale)",
    "scale_alpha_interval": "Krippendorff's alpha (interval, on the scale)",
}


def _interval(est: Any) -> str:
    return with_interval(est.value, est.low, est.high)


def pair_agreement_html(pair: Any) -> Markup:
    """One pair of raters as HTML: each statistic with its interval and note, then the verdict counts.

    Parameters
    ----------
    pair : PairAgreement
        What :func:`~llm_connect.calibration.pair_agreement` returns.

    Returns
    -------
    Markup
        Two tables (every value escaped).
    """
    title = f"{pair.judge_a} vs {pair.judge_b}" + (" (human ceiling)" if pair.ceiling else "")
    rows = [
        {"statistic": STATISTIC_LABELS[s], "value": str(pair.estimates[s]) if pair.estimates[s].defined else "—",
         "note": pair.estimates[s].reason or ""}
        for s in pair.statistics()
    ]
    clustered = cluster_sizes_text(pair.cluster, pair.n_clusters)
    table = frame_html(pd.DataFrame(rows), caption=f"{title}: n={pair.n} ({pair.n_missing} dropped), "
                       f"threshold {fmt(pair.threshold)}; {int(pair.confidence * 100)}% bootstrap intervals"
                       + (f", resampling whole clusters ({clustered})" if clustered else ""))
    cm = pair.confusion.copy()
    cm.insert(0, f"{pair.judge_a} \\ {pair.judge_b}", ["no", "yes"])
    return join([table, Markup("<br>"), frame_html(cm, caption=f"verdicts (rows: {pair.judge_a})")])


def agreement_table_html(table: Any) -> Markup:
    """Every pair of raters in one table: each statistic with its interval, the threshold, the notes.

    Parameters
    ----------
    table : AgreementTable
        What :func:`~llm_connect.calibration.agreement_table` returns.

    Returns
    -------
    Markup
        One table; its caption says the threshold, the intervals and the clusters resampled.
    """
    graded_shown = any(q.scale is not None for q in table.pairs)
    rows = []
    for p in table.pairs:
        graded = {
            label: _interval(p[stat]) if stat in p.estimates else ""
            for stat, label in (("scale_kappa_quadratic", "qw-kappa (scale)"),
                                ("scale_alpha_ordinal", "alpha ordinal (scale)"))
        } if graded_shown else {}
        rows.append({
            "judge_a": p.judge_a,
            "judge_b": p.judge_b + (" (ceiling)" if p.ceiling else ""),
            "n": p.n,
            "threshold": fmt(p.threshold) + (" (best, CV)" if p.judge_a in table.chosen
                                             and table.chosen[p.judge_a].verdicts is not None else ""),
            "agreement": _interval(p["percent_agreement"]),
            "kappa": _interval(p["cohen_kappa"]),
            "alpha (interval)": _interval(p["alpha_interval"]),
            "spearman": _interval(p["spearman"]),
            "kendall": _interval(p["kendall"]),
            "MAD": _interval(p["mean_abs_diff"]),
            **graded,
            **{k: fmt(v) if isinstance(v, float) else v for k, v in p.extra.items()
               if k.startswith(("system_", "document_", "n_systems", "n_documents", "threshold_selection"))},
            "note": p.row()["note"],
        })
    clustered = cluster_sizes_text(table.cluster, table.n_clusters)
    caption = (f"Agreement at threshold {fmt(table.threshold)} unless the row says another "
               f"({int(table.confidence * 100)}% bootstrap intervals"
               + (f" resampling whole clusters, {clustered}" if clustered else "")
               + "; each row read from judge_a's side against judge_b, the reference)")
    return frame_html(pd.DataFrame(rows), caption=caption)
