"""Statistics on arrays and DataFrames: no judges, no I/O, no drawing.

Like :mod:`scipy.stats`, every function here takes numbers (arrays, Series,
DataFrames) and returns numbers (floats, arrays, DataFrames, small frozen
dataclasses). The floor imports nothing from the package but
:mod:`llm_connect.errors`, and never matplotlib, ipywidgets or IPython; the
objects that run judges and people through these functions live in
:mod:`llm_connect.calibration`, and their pictures in :mod:`llm_connect.views`.
Bad input raises :class:`~llm_connect.errors.ValidationError` (a ``ValueError``); a
``confidence=`` is checked, and a ``by=`` read, by one function each, for the whole package
(:func:`llm_connect.stats._validate.check_confidence`, :func:`~llm_connect.stats._validate.by_columns`).

==========================  =============================================================
module                      what
==========================  =============================================================
``stats.agreement``         percent agreement, Cohen's kappa (weighted on a scale),
                            Krippendorff's alpha, Spearman, Kendall, their seeded
                            bootstrap intervals; threshold sweep and cross-validated
                            threshold choice; system- and document-level correlations
``stats.estimates``         mean quality from judge scores and a few labels: PPI, PPI++,
                            IPW (active inference); ``labels_needed``
``stats.clusters``          rows that are not independent (turns of a conversation): the
                            one reading of ``cluster=``, cluster-robust (CR1) standard
                            errors, ``t(G - 1)``, the minimum number of clusters
``stats.sampling``          the Labeller's sampling designs: seeded orders, stratified,
                            overlap, active (inclusion probabilities, the residual walk)
``stats.bradley_terry``     Bradley–Terry leaderboards with bootstrap intervals and Arena
                            rank ranges (``leaderboard``, ``style_effects``); continuous
                            preferences; PPI++ Bradley–Terry; two boards compared, a raw
                            board beside its style-controlled twin (``side_by_side``; its
                            private neighbours ``_comparisons``, ``_bt_fit``, ``_ppi_bt``,
                            ``_compare_boards`` hold the pieces)
``stats.style``             Chatbot Arena's style features of an answer (length, headers,
                            lists, bold), their normalised differences, and the
                            style-controlled Bradley–Terry fit; an answer's length and
                            format features (``text_features``)
``stats.length_control``    AlpacaEval 2's length-controlled win rate (the GLM)
``stats.preferences``       a / b / tie preferences: coding, three-way agreement, position
                            bias
``stats.shift``             paired shifts (bootstrap interval, Wilcoxon signed-rank); the
                            mean difference with its t interval (``mean_difference``)
``stats.selective``         selective judging with a guaranteed agreement with people:
                            exact (Clopper-Pearson) bounds, fixed-sequence testing of the
                            cut-off, risk-coverage curves, cascades (Jung et al. 2025)
``stats.regression``        ordinary least squares with classical errors
``stats.alignment``         what ``align()`` decides on: stratified held-out split and folds,
                            kappa of pass/fail verdicts, the paired bootstrap of a kappa
                            difference
``stats.gate``              a quality gate: the interval of a mean score (exact, BCa
                            bootstrap, Hoeffding), its verdict against a threshold, the
                            items that would settle it
==========================  =============================================================

A new statistic goes here, in the module of its kind, with its paper cited in
the docstring and a test against a well-kept reference implementation
(scikit-learn, scipy, krippendorff, ppi-python, statsmodels, choix).
"""

from .agreement import (
    STATISTICS,
    Estimate,
    bootstrap_ci,
    choose_threshold,
    grouped_correlation,
    threshold_sweep,
)
from .bradley_terry import leaderboard, ppi_bradley_terry, side_by_side, style_effects
from .clusters import MIN_CLUSTERS, cluster_mean_se
from .estimates import ESTIMATE_METHODS, estimate_quality, labels_needed
from .gate import ScoreInterval, gate_verdict, items_to_settle, score_interval
from .length_control import length_controlled_win_rate
from .preferences import parse_preferences, position_bias, preference_agreement
from .regression import OLSResult, ols
from .sampling import SamplingPlan, make_plan
from .selective import SelectiveCutoff, fixed_sequence_cutoff, risk_coverage
from .shift import ShiftStats, mean_difference, paired_shift
from .style import text_features

__all__ = [
    "ESTIMATE_METHODS",
    "MIN_CLUSTERS",
    "STATISTICS",
    "Estimate",
    "OLSResult",
    "SamplingPlan",
    "ScoreInterval",
    "SelectiveCutoff",
    "ShiftStats",
    "bootstrap_ci",
    "choose_threshold",
    "cluster_mean_se",
    "estimate_quality",
    "fixed_sequence_cutoff",
    "gate_verdict",
    "grouped_correlation",
    "items_to_settle",
    "labels_needed",
    "leaderboard",
    "length_controlled_win_rate",
    "make_plan",
    "mean_difference",
    "ols",
    "paired_shift",
    "parse_preferences",
    "position_bias",
    "ppi_bradley_terry",
    "preference_agreement",
    "risk_coverage",
    "score_interval",
    "side_by_side",
    "style_effects",
    "text_features",
    "threshold_sweep",
]
