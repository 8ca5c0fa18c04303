"""The calibration report as a page: its figures, its HTML and its ipywidgets explorer.

:class:`~llm_connect.calibration.CalibrationReport` holds the numbers; its ``figures()``,
``html()``, ``to_html()`` and ``widget()`` call the functions here (through
:func:`llm_connect._display.view`), which draw what the report computes and
compute nothing of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from .._html import Markup, fmt, frame_html, html_format, join, with_interval
from ..stats.preferences import PREFERENCES
from ._figures import new_figure, png_bytes, png_data_uri
from ._transcript import report_transcripts
from .agreement import agreement_table_html, pair_agreement_html
from .bias import bias_report_html, probe_result_html, self_preference_html
from .cards import judge_card_html
from .groups import group_breakdown_html
from .leaderboard import leaderboard_section
from .plots import (
    _text,
    plot_agreement_heatmap,
    plot_bias_forest,
    plot_estimates,
    plot_judge_scatter,
    plot_reliability,
    plot_score_vs_length,
    plot_threshold_sweep,
)
from .selective import plot_risk_coverage

__all__ = [
    "pairwise_report_html",
    "pairwise_section_html",
    "report_figures",
    "report_html",
    "report_widget",
    "save_report_html",
]


def report_figures(report: Any) -> dict[str, Any]:
    """The report's figures (``matplotlib.figure.Figure``, outside pyplot), by name.

    Each judge gets the plots that carry information for its kind of scores
    (:meth:`plots_for`): a 0/1 judge has no threshold to sweep and its scatter against
    the labels is a jittered 2x2 table, so it gets neither.

    Parameters
    ----------
    report : CalibrationReport
        The report.

    Returns
    -------
    dict of str to matplotlib.figure.Figure
        The figures.
    """
    figs: dict[str, Any] = {}
    if report.agreement.pairs:
        fig, ax = new_figure(1.2 + 0.9 * len(report.names), 0.8 + 0.8 * len(report.names))
        plot_agreement_heatmap(report.agreement, statistic="cohen_kappa", ax=ax)
        figs["agreement heatmap (Cohen's kappa)"] = fig
    ref = report.reference
    for j in report.judges:
        plots = report.plots_for(j)
        if "scatter" in plots and ref is not None:
            fig, ax = new_figure()
            plot_judge_scatter(report.scores, x=ref, y=j, jitter=0.02, seed=report.seed, ax=ax)
            figs[f"{j} vs {ref}"] = fig
        if "reliability" in plots and ref is not None:
            fig, ax = new_figure()
            plot_reliability(report.scores, judge=j, label=ref, threshold=report.threshold_of(ref), ax=ax)
            figs[f"reliability of {j} against {ref}"] = fig
        if "threshold sweep" in plots and ref is not None:
            fig, ax = new_figure()
            plot_threshold_sweep(report.sweep(j, ref), ax=ax)
            figs[f"threshold sweep of {j}"] = fig
        if "length" in plots:
            fig, ax = new_figure()
            hue = ref if ref and ref != j else None
            plot_score_vs_length(report.scores, judge=j, hue=hue, ax=ax)
            figs[f"{j} score vs length"] = fig
    for j, chosen in (getattr(report, "selective", None) or {}).items():  # calibrate(..., selective=...)
        if chosen.calibration is not None:
            fig, ax = new_figure()
            plot_risk_coverage(chosen, ax=ax, title=_text(f"risk-coverage of {j}"))
            figs[f"risk-coverage of {j} (selective)"] = fig
    if report.bias is not None and report.bias.results:
        fig, ax = new_figure(6, 1.2 + 0.35 * len(report.bias.results))
        plot_bias_forest(report.bias, ax=ax)
        figs["bias probes"] = fig
    for fig in figs.values():
        _fit_titles(fig)
    return figs


def _fit_titles(fig: Any) -> None:
    """Wrap each axes title that is wider than its axes (about 0.6 em a character), so none is cut off."""
    import textwrap

    for ax in fig.axes:
        title = ax.get_title()
        width_in = ax.get_position().width * fig.get_figwidth()
        chars = max(16, int(width_in * 72 / (0.6 * 12)))  # 12 pt titles
        if title and len(title) > chars:
            ax.set_title("\n".join(textwrap.wrap(title, chars)))


#: The "how to read this" line that heads each section of the report, by section.
HOW_TO_READ = {
    "Verdicts": "one line per judge, from its agreement with people (Cohen's kappa and its interval): "
                "\"no better than chance\" and \"one verdict\" mean do not use its scores; \"cannot tell yet\" "
                "means the interval is too wide to decide, and says about how many labels would settle it; "
                "biases found by the probes follow (an effect a judge has by definition is said as such).",
    "Judge runs": "how many items each judge scored; unscored rows are left out of every figure, never "
                  "counted as 0.",
    "Summary": "each judge's agreement with the reference at the threshold: higher is better.",
    "Agreement": "every pair of raters: kappa 0 is chance, 1 perfect; an interval reaching 0 means no "
                 "evidence of agreement.",
    "Judge cards": "what is saved for routing: the verdict with the numbers behind it.",
    "Selective judges": "coverage is the share of items a judge keeps; the guarantee holds on those.",
    "Estimates": "the judge alone can be biased; the PPI++ interval, corrected by the human labels, is "
                 "the one to quote.",
    "Bias probes": "each probe perturbs answers and re-judges them: a score change whose p-value is "
                   "small means the judge rewards that feature, not quality.",
    "Length effect": "how much the score moves per unit of answer length with quality held fixed; an "
                     "interval away from 0 is a length bias.",
    "Transcripts": "the items that are conversations or agent runs, where the judge and people disagree most: "
                   "open one to read its messages, tool calls and documents.",
    "Figures": "each plot is named below it and titled inside; a judge's scores are drawn against the "
               "reference labels, and the dotted line marks its best threshold.",
}


#: Added to the "Summary" line when the report has a ceiling: two annotators' agreement with each other.
CEILING_HOWTO = " Compare with the annotators' agreement with each other, the ceiling (in Agreement)."


def _section(name: str, *parts: Any, howto: str | None = None) -> Markup:
    """A report section: its heading, its "how to read this" line (``howto``, else :data:`HOW_TO_READ`'s),
    then its parts."""
    return join([html_format("<h3>{}</h3><p class='llm-connect-howto'><b>How to read this:</b> {}</p>",
                             name, HOW_TO_READ[name] if howto is None else howto), *parts])


def _has_ceiling(report: Any) -> bool:
    """Whether the report holds a ceiling: a pair of annotators (two or more label columns read as raters)."""
    return any(getattr(p, "ceiling", False) for p in report.agreement.pairs)


def _diagnostics_html(report: Any) -> Markup:
    parts: list[str] = []  # markup only: each a Markup from frame_html or a view
    rows = []
    for j in report.judges:
        eff = report.length_effect(j)
        rows.append({"judge": j, "controls": ", ".join(eff.controls) or "—", "term": eff.term,
                     "length coef": eff.coef, "low": eff.low, "high": eff.high, "p": eff.p_value, "n": eff.n,
                     "note": eff.note})
    if rows:
        parts.append(_section("Length effect",
                              frame_html(pd.DataFrame(rows), caption="Length effect (OLS; score change per unit)")))
    for j in report.judges:
        fam = report.meta.judge_families.get(j)
        if fam and report.scores["model_family"].notna().any():
            parts.append(self_preference_html(report.self_preference(j)))
    return join(parts)

def report_html(report: Any, *, plots: bool = True, title: str = "Calibration report") -> Markup:
    """The report as an HTML fragment (tables, and figures as embedded PNGs).

    Parameters
    ----------
    report : CalibrationReport
        The report.
    plots : bool, default True
        Embed the figures.
    title : str, default "Calibration report"
        The heading.

    Returns
    -------
    Markup
        The HTML (untrusted text escaped).

    See Also
    --------
    save_report_html : One self-contained file.
    """
    usage = report.meta.usage
    head = [html_format("<h2>{}</h2>", title),
            html_format("<p>{} items; judges: {}; labels: {}; threshold {}.</p>", len(report.scores),
                        ", ".join(report.judges) or "—", ", ".join(report.labels) or "—", fmt(report.threshold))]
    cards = report.judge_cards()
    if cards:
        head.append(_section("Verdicts", html_format("<ul class='llm-connect-verdicts'>{}</ul>",
                                                     join(html_format("<li>{}</li>", c.verdict) for c in cards))))
    if usage:
        udf = pd.DataFrame([{"judge": k, **v} for k, v in usage.items()])
        head.append(_section("Judge runs", frame_html(udf, caption="Judge runs (unscored rows are NaN, never 0)")))
    summary_howto = HOW_TO_READ["Summary"] + (CEILING_HOWTO if _has_ceiling(report) else "")
    body = [_section("Summary", frame_html(_summary_shown(report.summary(), report.confidence), caption="Summary"),
                     howto=summary_howto),
            _section("Agreement", agreement_table_html(report.agreement))]
    if cards:
        body.append(_section("Judge cards", join(judge_card_html(c) for c in cards)))
    if getattr(report, "selective", None):
        body.append(_selective_html(report))
    body.append(_estimates_html(report, plots=plots))
    if report.bias is not None:
        body.append(_section("Bias probes", bias_report_html(report.bias)))
    body.append(_diagnostics_html(report))
    if report.by_group is not None:
        body.append(group_breakdown_html(report.by_group, plots=plots))
    transcripts = report_transcripts(report)
    if transcripts:
        body.append(_section("Transcripts", transcripts))
    if plots:
        figs = report_figures(report)
        imgs = join(
            html_format("<figure style='display:inline-block;margin:4px'><img src='{}' alt='{}'>"
                        "<figcaption>{}</figcaption></figure>", png_data_uri(fig), name, name)
            for name, fig in figs.items()
        )
        body.append(_section("Figures", html_format("<div>{}</div>", imgs)))
    return html_format("<div class='llm-connect-report'>{}</div>", join([*head, *body]))

def _summary_shown(summary: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The Summary as the page shows it: kappa and its interval in one column (``0.75 [0.41, 0.98]``, as the
    Agreement table shows intervals), so the row leaves room for a weak judge's reason. The data
    (``CalibrationReport.summary()``, the CSV files) keep their three columns."""
    if not {"kappa", "kappa_low", "kappa_high"} <= set(summary.columns):
        return summary
    shown = summary.copy()
    at = list(shown.columns).index("kappa")
    kappa = [with_interval(k, lo, hi) for k, lo, hi in zip(shown["kappa"], shown["kappa_low"], shown["kappa_high"],
                                                           strict=True)]
    shown = shown.drop(columns=["kappa", "kappa_low", "kappa_high"])
    shown.insert(at, f"kappa [{confidence:.0%} CI]", kappa)
    return shown


def _selective_html(report: Any) -> Markup:
    """The "Selective judges" section (``calibrate(..., selective=...)``): what each judge judges above its
    cut-off, with the guarantee; the risk-coverage curves are among the figures."""
    frame = report.selective_frame()
    if frame.empty:
        return Markup("")
    shown = frame[["judge_a", "confidence_source", "cutoff", "n_judged", "n", "coverage", "percent_agreement",
                   "guaranteed_agreement", "confidence_level", "note"]].rename(columns={"judge_a": "judge"})
    return join([
        _section("Selective judges"),
        html_format("<p>Each judge judges only the items it is confident of, with a cut-off chosen on the labelled "
                    "items by fixed-sequence testing with exact binomial bounds (Jung, Brahman &amp; Choi, ICLR 2025) "
                    "so that it agrees with people on at least {} of the items it judges, with probability {}; "
                    "it abstains on the rest (left for a stronger judge or for people).</p>",
                    f"{float(frame['guaranteed_agreement'].iloc[0]):.0%}",
                    f"{float(frame['confidence_level'].iloc[0]):.0%}"),
        frame_html(shown, caption="Selective judges (calibration items)"),
    ])


def _estimates_html(report: Any, *, plots: bool) -> Markup:
    """The "Estimates" section: when the data names the candidates' models and has human labels."""
    if "candidate_model" not in report.scores.columns or not report.scores["candidate_model"].notna().any():
        return Markup("")
    est = report.estimates()
    if est is None or est.empty:
        return Markup("")
    shown = est[["judge", "candidate_model", "method", "estimate", "ci_low", "ci_high", "n_labelled", "n_total",
                 "reason"]]
    parts = [_section("Estimates"),
             html_format("<p>Mean quality of each model's answers: as judge {} alone would claim it, from the "
                         "human labels alone, and both combined by prediction-powered inference (PPI++), whose "
                         "interval stays valid however biased the judge is.</p>", str(est["judge"].iloc[0])),
             frame_html(shown, caption="Estimates per model", max_rows=200)]
    design = getattr(report, "label_design", None)
    if design is not None:
        parts.insert(2, html_format(
            "<p>Human labels used: a random sample of {} of the {} items (the others count as unlabelled), "
            "the same sample as the command line's estimates and estimates.csv.</p>",
            int(sum(bool(v) for v in design)), len(design)))
    if plots:
        parts.append(html_format("<figure><img src='{}' alt='estimates per model'></figure>",
                                 png_data_uri(estimates_figure(est))))
    return join(parts)


def estimates_figure(est: pd.DataFrame) -> Any:
    """The Estimates section's figure: :func:`plot_estimates` of the report's estimates, titled with the judge
    whose scores they correct (the frame's one ``judge``)."""
    fig, ax = new_figure(6, 1.2 + 0.45 * est["candidate_model"].nunique())
    plot_estimates(est, ax=ax)
    return fig

def save_report_html(report: Any, path: str | Path, *, title: str = "Calibration report") -> Path:
    """Write one self-contained HTML file (figures embedded) and return its path.

    Parameters
    ----------
    report : CalibrationReport
        The report.
    path : str or Path
        The file.
    title : str, default "Calibration report"
        The page's title.

    Returns
    -------
    Path
        The file written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    style = ("body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1600px}"
             # compact cells, headers that may wrap: the Summary and Agreement tables fit a 1400 px window
             # without a scrollbar, and a long cell (a weak judge's reason) wraps in two lines, not seven
             "table.llm-connect td,table.llm-connect th{border:1px solid #ccc;padding:2px 4px;"
             "text-align:right}table.llm-connect th{white-space:normal}"
             "table.llm-connect{margin:1em 0;font-size:0.82em!important}caption{margin-bottom:4px;text-align:left}"
             # a table still too wide scrolls inside its own box instead of widening the page
             ".llm-connect-report table{display:block;max-width:100%;overflow-x:auto}"
             ".llm-connect-report img{max-width:100%;height:auto}"
             ".llm-connect-howto{color:#4b5563;margin:0 0 6px;font-size:0.92em}")
    doc = html_format("<!DOCTYPE html><html><head><meta charset='utf-8'><title>{}</title>"
                      "<style>{}</style></head><body>{}</body></html>",
                      title, Markup(style), report.html(plots=True, title=title))
    p.write_text(doc, encoding="utf-8")
    return p


def report_widget(report: Any) -> Any:
    """An ipywidgets explorer: pick two judges, move the threshold, read the bias tabs, and
    browse the items where the two judges disagree most. The controls only call this
    report's pure functions and the plot functions. The returned box has a ``controls``
    attribute naming its parts (``judge_a``, ``judge_b``, ``threshold``, ``summary``,
    ``scatter``, ``sweep``, ``disagreements``, ``bias_tabs``, ``top``).

    Parameters
    ----------
    report : CalibrationReport
        The report.

    Returns
    -------
    ipywidgets.VBox
        The explorer.
    """
    try:
        import ipywidgets as w
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from ..errors import MissingDependencyError

        raise MissingDependencyError("ipywidgets", "notebooks", "CalibrationReport.widget()") from exc
    from types import SimpleNamespace

    names = report.names
    if len(names) < 2:
        raise ValueError("the widget needs at least two judges or labels")
    first = report.judges[0] if report.judges else names[0]
    second = (report.reference if report.reference and report.reference != first
              else next(n for n in names if n != first))
    judge_a = w.Dropdown(options=names, value=first, description="judge")
    judge_b = w.Dropdown(options=names, value=second, description="against")
    threshold = w.FloatSlider(value=report.threshold, min=0.05, max=0.95, step=0.05, description="threshold",
                              continuous_update=False, readout_format=".2f")
    top = w.IntSlider(value=10, min=1, max=50, description="items", continuous_update=False)
    summary = w.HTML()
    scatter = w.Image(format="png")
    sweep = w.Image(format="png")
    table = w.HTML()

    def render(draw: Callable[[Any], Any]) -> bytes:
        fig, ax = new_figure(4.6, 3.4)
        draw(ax)
        return png_bytes(fig)

    def update(_change: Any = None) -> None:
        a, b, t = judge_a.value, judge_b.value, float(threshold.value)
        if a == b:
            summary.value = "<p>choose two different judges</p>"
            return
        pair = report.pair(a, b, threshold=t, n_boot=200)
        summary.value = str(pair_agreement_html(pair))
        scatter.value = render(lambda ax: plot_judge_scatter(report.scores, x=b, y=a, jitter=0.02,
                                                                    seed=report.seed, ax=ax))

        def draw_sweep(ax: Any) -> None:
            plot_threshold_sweep(report.sweep(a, b), ax=ax)
            ax.axvline(t, color="tab:red", linewidth=1)

        sweep.value = render(draw_sweep)
        table.value = frame_html(report.disagreements(a, b, top=int(top.value)),
                                 caption=f"where {a} and {b} disagree most")

    for control in (judge_a, judge_b, threshold, top):
        control.observe(update, names="value")
    update()

    tabs = w.Tab()
    children, titles = [], []
    if report.bias is not None:
        for probe in dict.fromkeys(r.probe for r in report.bias.results):
            parts = [probe_result_html(r) if r.stats.n else html_format("<p>{}: {}</p>", r.judge, r.stats.note)
                     for r in report.bias.results if r.probe == probe]
            children.append(w.HTML(join(parts)))
            titles.append(probe)
    tabs.children = children
    for i, t in enumerate(titles):
        tabs.set_title(i, t)

    box = w.VBox([
        w.HBox([judge_a, judge_b, threshold]),
        summary,
        w.HBox([scatter, sweep]),
        w.HTML("<b>Bias probes</b>"),
        tabs,
        top,
        table,
    ])
    box.controls = SimpleNamespace(judge_a=judge_a, judge_b=judge_b, threshold=threshold, summary=summary,
                                   scatter=scatter, sweep=sweep, disagreements=table, bias_tabs=tabs, top=top)
    return box


def pairwise_report_html(report: Any, *, plots: bool = True, title: str = "Calibration report") -> Markup:
    """A pairwise report as an HTML fragment: verdicts, runs, the pairwise section, leaderboards, probes.

    Parameters
    ----------
    report : PairwiseReport
        The report.
    plots : bool, default True
        Embed the figures.
    title : str, default "Calibration report"
        The heading.

    Returns
    -------
    Markup
        The HTML.
    """
    head = [html_format("<h2>{}</h2>", title),
            html_format("<p>{} pairs; judges: {}; people: {}; no threshold (pairwise).</p>", len(report.scores),
                        ", ".join(report.judges) or "—", ", ".join(report.labels) or "—")]
    cards = report.judge_cards()
    if cards:
        head.append(html_format("<h3>Verdicts</h3><ul class='llm-connect-verdicts'>{}</ul>",
                                join(html_format("<li>{}</li>", c.verdict) for c in cards)))
        rewards = [(c.grader_id, c.style["line"]) for c in cards if c.style and c.style.get("line")]
        if rewards:
            head.append(html_format(
                "<h3>What the judges reward besides quality</h3><p>{}</p><ul class='llm-connect-rewards'>{}</ul>",
                "Style coefficients of each judge's own preferences beside people's (Chatbot Arena's style "
                "control): the rating points a comparison moves toward the answer that alone has the feature; "
                f"{report.confidence:.0%} bootstrap intervals.",
                join(html_format("<li><b>{}</b>: {}</li>", g, line) for g, line in rewards)))
    usage = report.meta.usage
    if usage:
        head.append(frame_html(pd.DataFrame([{"judge": k, **v} for k, v in usage.items()]),
                               caption="Judge runs (unscored pairs have no winner, never a tie)"))
    body = [pairwise_section_html(report)]
    boards = report.leaderboards()
    if boards:
        style_boards = report.style_leaderboards() if hasattr(report, "style_leaderboards") else {}
        body.append(leaderboard_section(boards, confidence=report.confidence, plots=plots,
                                        style_boards=style_boards))
    if report.bias is not None and report.bias.results:
        body.append(bias_report_html(report.bias))
    return html_format("<div class='llm-connect-report'>{}</div>", join([*head, *body]))


def pairwise_section_html(report: Any) -> Markup:
    """The pairwise section of a :class:`~llm_connect.calibration.PairwiseReport`: per judge against people
    (three-way agreement and kappa, accuracy on people's non-tie pairs, ties, consistency across orders, the
    first-shown win rate), each judge's 3x3 confusion against people, and every pair of raters.

    Parameters
    ----------
    report : PairwiseReport

    Returns
    -------
    Markup
    """
    parts = [html_format("<h3>Pairwise agreement (a / b / tie; no threshold)</h3><p>{}</p>",
                         "Three-way agreement and Cohen's kappa over a, b and tie; accuracy on the pairs "
                         "people did not call a tie (a judge's tie counts as not correct); consistency: "
                         "the share of pairs whose two orders picked the same answer; position: how often "
                         "the answer shown first won (0.5 = no bias), binomial test.")]
    rows = []
    for r in report.pairwise.to_dict("records"):
        rows.append({
            "judge": r["judge"], "n": r["n"],
            "agreement": with_interval(r["percent_agreement"], r["agreement_low"], r["agreement_high"]),
            "kappa": with_interval(r["cohen_kappa"], r["kappa_low"], r["kappa_high"]),
            "accuracy (non-tie)": f"{fmt(r['accuracy_non_tie'])} (decided {r['decided_non_tie']}"
                                  f"/{r['n_non_tie']})",
            "ties judge / people": f"{fmt(r['judge_tie_rate'])} / {fmt(r['human_tie_rate'])}",
            "consistency": r["consistency"],
            "first shown wins": with_interval(r["first_shown_win_rate"], r["position_low"] + 0.5,
                                              r["position_high"] + 0.5),
            "p": r["position_p_value"],
        })
    if rows:
        parts.append(frame_html(pd.DataFrame(rows), caption=f"Judges against people "
                                                          f"({int(report.confidence * 100)}% intervals)"))
    for r in report.pairwise.to_dict("records"):
        confusion = pd.DataFrame(
            [[f"judge {j}", *[r[f"judge_{j}_human_{h}"] for h in PREFERENCES]] for j in PREFERENCES],
            columns=["", *[f"people {h}" for h in PREFERENCES]])
        parts.append(frame_html(confusion, caption=f"Confusion of {r['judge']} against people"))
    if len(report.pair_agreement):
        shown = report.pair_agreement[["judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa",
                                       "krippendorff_alpha_nominal", "accuracy_non_tie", "ceiling"]]
        parts.append(frame_html(shown, caption="Every pair of raters (three-way)"))
    return join(parts)
