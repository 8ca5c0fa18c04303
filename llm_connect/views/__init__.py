"""Every picture and page: plots, the report's HTML and widget, the judgment viewer,
the leaderboard page, the Labeller widget and the transcripts of conversations and agent runs
(:func:`transcript_html`, the one renderer the viewer, the report and the Labeller share).

Views draw what they are given (a frame, a report object) and compute nothing
of their own beyond layout; the numbers come from :mod:`llm_connect.stats` and
:mod:`llm_connect.calibration`. matplotlib, ipywidgets and ipyevents are
imported here and nowhere else in the package, and only when a view is drawn.
Plots are seaborn-shaped: ``plot_x(data, *, ..., ax=None, **kwargs) -> Axes``.
Every value goes into HTML through the one escaping helper,
:mod:`llm_connect._html`.
"""

from ._transcript import transcript_html
from .alignment import alignment_html
from .grading import (
    epoch_reliability_html,
    escalation_summary_html,
    grading_result_html,
    pairwise_summary_html,
    panel_agreement_html,
)
from .groups import group_breakdown_figure, group_breakdown_html, plot_group_kappa
from .labeller import labeller_widget
from .leaderboard import leaderboard_section, plot_leaderboard
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
from .report import pairwise_report_html, report_figures, report_html, report_widget, save_report_html
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
    "alignment_html",
    "content_security_policy",
    "epoch_reliability_html",
    "escalation_summary_html",
    "grading_result_html",
    "group_breakdown_figure",
    "group_breakdown_html",
    "labeller_widget",
    "leaderboard_section",
    "ledger_html",
    "length_profile",
    "pairwise_report_html",
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
    "quality_check_html",
    "report_figures",
    "report_html",
    "report_widget",
    "routing_decision_html",
    "save_report_html",
    "selective_cascade_html",
    "selective_cascade_summary_html",
    "selective_judge_html",
    "trace_html",
    "transcript_html",
    "viewer_html",
]
