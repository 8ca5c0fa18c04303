"""Bias as tables: what each probe did to a judge (:func:`probe_result_html`, :func:`bias_report_html`) and
what the observational diagnostics read from its scores (:func:`length_effect_html`,
:func:`length_controlled_html`, :func:`self_preference_html`). Each is the ``_repr_html_`` of the
matching :mod:`llm_connect.calibration` object; the bias forest plot is
:func:`~llm_connect.views.plot_bias_forest`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .._html import Markup, frame_html, html_format, p_text, with_interval

__all__ = [
    "bias_report_html",
    "length_controlled_html",
    "length_effect_html",
    "probe_result_html",
    "self_preference_html",
]

#: What each probe changes, as the page says it.
PROBE_DESCRIPTIONS = {
    "length": "neutral filler appended",
    "format": "reformatted as markdown",
    "injection": "instruction to the grader planted",
    "position": "baseline and candidate swapped",
}


def probe_result_html(result: Any) -> Markup:
    """One probe on one judge: the mean shift with its interval, the p-value, the flips, and the ten
    items whose score moved most.

    Parameters
    ----------
    result : ProbeResult
        One result of :func:`~llm_connect.calibration.run_probes`.

    Returns
    -------
    Markup
    """
    s = result.stats
    description = PROBE_DESCRIPTIONS.get(result.probe)
    head = html_format(
        "<p><b>{}</b>, probe <b>{}</b>{}: mean shift {}, {}, {:.1%} of verdicts flipped (n={})</p>",
        result.judge, result.probe, f" ({description})" if description else "",
        with_interval(s.mean_shift, s.shift_low, s.shift_high), p_text(s.p_value), s.flip_rate, s.n,
    )
    items = result.items
    cols = [c for c in ("id", "candidate", "perturbed_candidate", "original", "perturbed", "shift")
            if c in items.columns]
    top = items.reindex(items["shift"].abs().sort_values(ascending=False).index)[cols].head(10)
    return head + frame_html(top, caption="largest shifts")


def bias_report_html(report: Any) -> Markup:
    """Every probe's result in one table (mean shift with its interval, p-value, flips, note).

    Parameters
    ----------
    report : BiasReport
        What :func:`~llm_connect.calibration.run_probes` returns.

    Returns
    -------
    Markup
    """
    rows = []
    for r in report.results:
        s = r.stats
        note = s.note or (f"by definition: {r.expected}" if r.expected else "")
        rows.append({"judge": r.judge, "probe": r.probe, "n": s.n,
                     "mean shift": with_interval(s.mean_shift, s.shift_low, s.shift_high),
                     "p": s.p_value, "flipped": s.flip_rate, "note": note})
    return frame_html(pd.DataFrame(rows), caption="Bias probes (score after minus before, 95% bootstrap interval)")


def length_effect_html(effect: Any) -> Markup:
    """A :class:`~llm_connect.calibration.LengthEffect`: the length coefficient in words, then the OLS fit.

    Parameters
    ----------
    effect : LengthEffect

    Returns
    -------
    Markup
    """
    ctrl = ", ".join(effect.controls) if effect.controls else "nothing"
    head = html_format(
        "<p>Length effect on <b>{}</b> (controlling for {}): {} per unit of {}, {}, n={}, R²={:.3f}. {}</p>",
        effect.judge, ctrl, with_interval(effect.coef, effect.low, effect.high), effect.term,
        p_text(effect.p_value), effect.n, effect.r2, effect.note,
    )
    return head + frame_html(effect.fit.table(), caption="OLS fit")


def length_controlled_html(controlled: Any) -> Markup:
    """A :class:`~llm_connect.calibration.LengthControlled`: the length term, then raw against
    length-controlled means.

    Parameters
    ----------
    controlled : LengthControlled

    Returns
    -------
    Markup
    """
    head = html_format("<p>Length-controlled <b>{}</b>: length term {}</p>", controlled.judge,
                       with_interval(controlled.coef, controlled.low, controlled.high))
    return head + frame_html(controlled.summary, caption="raw vs length-controlled mean score")


def self_preference_html(preference: Any) -> Markup:
    """A :class:`~llm_connect.calibration.SelfPreference`: the pooled difference, then each stratum.

    Parameters
    ----------
    preference : SelfPreference

    Returns
    -------
    Markup
    """
    head = html_format("<p>Self-preference of <b>{}</b> for family <b>{}</b> (stratified by {}): {}. {}</p>",
                       preference.judge, preference.family, preference.label,
                       with_interval(preference.difference, preference.low, preference.high), preference.note)
    return head + frame_html(preference.strata, caption="per stratum")
