"""Every picture and page: plots, the report's HTML and widget, the judgment viewer,
the leaderboard page and the Labeller widget.

Views draw what they are given (a frame, a report object) and compute nothing
of their own beyond layout; the numbers come from :mod:`llm_connect.stats` and
:mod:`llm_connect.calibration`. matplotlib, ipywidgets and ipyevents are
imported here and nowhere else in the package, and only when a view is drawn.
Plots are seaborn-shaped: ``plot_x(data, *, ..., ax=None, **kwargs) -> Axes``.
Every value goes into HTML through the one escaping helper,
:mod:`llm_connect._html`.
"""

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

__all__ = [
    "length_profile",
    "plot_agreement_heatmap",
    "plot_bias_forest",
    "plot_estimates",
    "plot_judge_scatter",
    "plot_reliability",
    "plot_score_vs_length",
    "plot_threshold_sweep",
]
