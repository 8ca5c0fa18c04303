"""Every picture and page: plots, the report's HTML and widget, the judgment viewer and its records
(``judgments.jsonl``: :func:`judgment_records`, :func:`write_judgments`, :func:`read_judgments`),
the leaderboard page, the Labeller widget, the HTML every result object shows in Jupyter (every calibration
object: agreement, bias probes, judge cards, leaderboards compared; grading results, selective judges,
pipelines, routing decisions, ledgers, quality checks) and the transcripts of conversations and agent
runs (:func:`transcript_html`, the one renderer the viewer, the report and the Labeller share).

Views draw what they are given (a frame, a report object) and compute nothing
of their own beyond layout; the numbers come from :mod:`llm_connect.stats` and
:mod:`llm_connect.calibration`. matplotlib, ipywidgets and ipyevents are
imported here and nowhere else in the package, and only when a view is drawn.
Plots are seaborn-shaped: ``plot_x(data, *, ..., ax=None, **kwargs) -> Axes``.
Every value goes into HTML through the one escaping helper,
:mod:`llm_connect._html`.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._transcript import transcript_html
from .agreement import agreement_table_html, pair_agreement_html
from .alignment import alignment_html
from .bias import (
    bias_report_html,
    length_controlled_html,
    length_effect_html,
    probe_result_html,
    self_preference_html,
)
from .cards import card_registry_html, judge_card_html
from .grading import (
    epoch_reliability_html,
    escalation_summary_html,
    grading_result_html,
    pairwise_summary_html,
    panel_agreement_html,
)
from .groups import group_breakdown_figure, group_breakdown_html, plot_group_kappa
from .judgments import judgment_records, judgment_viewer, read_judgments, write_judgments
from .labeller import labeller_html, labeller_item_html, labeller_widget
from .leaderboard import leaderboard_comparison_html, leaderboard_section, plot_leaderboard
from .pipeline import pipeline_html, pipeline_result_html, plot_pipeline, trace_html
from .plots import (
    length_profile,
    plot_agreement_heatmap,
    plot_bias_forest,
    plot_estimates,
    plot_judge_scatter,
    plot_reliability,
    plot_score_vs_length,
    plot_threshold_sweep,
)
from .quality import ledger_html, quality_check_html
from .report import (
    pairwise_report_html,
    pairwise_section_html,
    report_figures,
    report_html,
    report_widget,
    save_report_html,
)
from .routing import routing_decision_html
from .selective import (
    plot_risk_coverage,
    selective_cascade_html,
    selective_cascade_summary_html,
    selective_judge_html,
)
from .viewer import JudgmentViewer, content_security_policy, viewer_html

__all__ = [
    "JudgmentViewer",
    "agreement_table_html",
    "alignment_html",
    "bias_report_html",
    "card_registry_html",
    "content_security_policy",
    "epoch_reliability_html",
    "escalation_summary_html",
    "grading_result_html",
    "group_breakdown_figure",
    "group_breakdown_html",
    "judge_card_html",
    "judgment_records",
    "judgment_viewer",
    "labeller_html",
    "labeller_item_html",
    "labeller_widget",
    "leaderboard_comparison_html",
    "leaderboard_section",
    "ledger_html",
    "length_controlled_html",
    "length_effect_html",
    "length_profile",
    "pair_agreement_html",
    "pairwise_report_html",
    "pairwise_section_html",
    "pairwise_summary_html",
    "panel_agreement_html",
    "pipeline_html",
    "pipeline_result_html",
    "plot_agreement_heatmap",
    "plot_bias_forest",
    "plot_estimates",
    "plot_group_kappa",
    "plot_judge_scatter",
    "plot_leaderboard",
    "plot_pipeline",
    "plot_reliability",
    "plot_risk_coverage",
    "plot_score_vs_length",
    "plot_threshold_sweep",
    "probe_result_html",
    "quality_check_html",
    "read_judgments",
    "report_figures",
    "report_html",
    "report_widget",
    "routing_decision_html",
    "save_report_html",
    "selective_cascade_html",
    "selective_cascade_summary_html",
    "selective_judge_html",
    "self_preference_html",
    "trace_html",
    "transcript_html",
    "viewer_html",
    "write_judgments",
]

if _TYPE_CHECKING:  # each view the seam names is what llm_connect._display promises it is (mypy checks)
    from .._display import (
        AlignmentPage,
        FigureView,
        LedgerPage,
        ObjectPage,
        Plot,
        ReportFigures,
        ReportPage,
        ReportViewer,
        SavedPage,
        SectionPage,
        Widget,
    )

    _object_pages: list[ObjectPage] = [
        agreement_table_html, bias_report_html, card_registry_html, epoch_reliability_html, escalation_summary_html,
        grading_result_html, judge_card_html, labeller_html, labeller_item_html, leaderboard_comparison_html,
        length_controlled_html, length_effect_html, pair_agreement_html, pairwise_summary_html, panel_agreement_html,
        pipeline_html, pipeline_result_html, probe_result_html, quality_check_html, routing_decision_html,
        selective_cascade_html, selective_cascade_summary_html, selective_judge_html, self_preference_html,
        trace_html,
    ]
    _ledger_page: LedgerPage = ledger_html
    _report_pages: list[ReportPage] = [pairwise_report_html, report_html]
    _plots: list[Plot] = [plot_pipeline, plot_risk_coverage]
    _widgets: list[Widget] = [labeller_widget, report_widget]
    _alignment_page: AlignmentPage = alignment_html
    _section_page: SectionPage = group_breakdown_html
    _figure: FigureView = group_breakdown_figure
    _figures: ReportFigures = report_figures
    _saved_page: SavedPage = save_report_html
    _viewer: ReportViewer = judgment_viewer
