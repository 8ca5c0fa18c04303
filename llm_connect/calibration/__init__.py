"""Run judges against references and people: runs, probes, pairwise runs, groups, cards, reports.

This floor runs judges (:mod:`llm_connect.grading`) over a dataset and keeps what
comes out as data: scores frames, agreement tables, bias reports, judge cards (their
class and registry: :mod:`llm_connect.cards`), the calibration report. The statistics it applies are pure
functions in :mod:`llm_connect.stats`; every picture and page of its results is
drawn in :mod:`llm_connect.views` (the ``plot_*`` names and ``JudgmentViewer`` are
still importable from here, loaded from ``views`` on first use).

=================================  ==========================================================
what                               functions and classes
=================================  ==========================================================
run judges over a dataset          :func:`score_items`, :func:`judge_items`, :func:`load_items`,
                                   :func:`parse_labels`
agreement (with bootstrap CIs)     :func:`pair_agreement`, :func:`agreement_table`,
                                   :func:`threshold_sweep` (kernels: ``stats.agreement``)
bias probes                        :func:`run_probes`, :func:`probe_judge`, :func:`paired_shift`,
                                   :func:`perturb_items`
observational diagnostics          :func:`length_effect`, :func:`length_controlled_scores`,
                                   :func:`self_preference`, :func:`reliability_table`,
                                   :func:`disagreements`
features                           :func:`model_family`, :func:`text_features`
quality estimates (PPI++,          :func:`estimate_quality`, :func:`labels_needed`
active inference)                  (from ``stats.estimates``)
verdicts and judge cards           :func:`card_from_scores`; the card, its verdict and the registry
                                   (:class:`JudgeCard`, :func:`agreement_verdict`, :class:`JudgeCardRegistry`)
                                   are :mod:`llm_connect.cards`
pairwise (a / b / tie)             :func:`calibrate_pairwise` -> :class:`PairwiseReport`,
                                   :func:`parse_preferences`, :func:`battles`
align a judge to people           :func:`align` -> :class:`Alignment` (held-out proof; rubrics:
                                   ``grading.Rubric``)
everything at once                 :func:`calibrate` -> :class:`CalibrationReport`
                                   (``_repr_html_``, ``.widget()``, ``.to_html(path)``, ``.view()``)
leaderboards                       :func:`leaderboard` (``style=``: style control),
                                   :func:`style_effects`, :func:`length_controlled_win_rate`
                                   (from ``stats``), :func:`compare_leaderboards` ->
                                   :class:`LeaderboardComparison`
run-to-run reliability             ``calibrate(..., epochs=k)``, :meth:`JudgeCard.with_reliability`
every judgment in one page         :meth:`CalibrationReport.view` (records and ``judgments.jsonl``:
                                   ``views.judgment_records``, ``views.write_judgments``)
label in the notebook              :class:`Labeller` (from :mod:`llm_connect.labelling`; designs:
                                   ``stats.sampling``; widget: ``views.labeller_widget``)
=================================  ==========================================================

A report's ``widget()``, ``html()``, ``to_html()`` and every object's ``_repr_html_`` reach their views through
:mod:`llm_connect._display` at call time, so this floor never imports ``views``
and matplotlib and ipywidgets are imported only when a plot or a widget is made.
"""

from ..cards import JudgeCard, JudgeCardRegistry, ProbeEffect, agreement_verdict, judge_verdict, registry_path
from ..labelling import Labeller
from ..stats.estimates import ESTIMATE_METHODS, estimate_quality, labels_needed
from ._agreement import (
    STATISTICS,
    AgreementTable,
    Estimate,
    PairAgreement,
    agreement_table,
    bootstrap_ci,
    pair_agreement,
    threshold_sweep,
)
from ._align import Alignment, align
from ._bias import PROBES, BiasReport, ProbeResult, paired_shift, perturb_items, probe_judge, run_probes
from ._calibrate import calibrate
from ._cards import card_from_scores
from ._diagnostics import (
    LengthControlled,
    LengthEffect,
    SelfPreference,
    disagreements,
    length_controlled_scores,
    length_effect,
    ols,
    reliability_table,
    self_preference,
)
from ._features import model_family, text_features
from ._leaderboard import (
    LeaderboardComparison,
    compare_leaderboards,
    leaderboard,
    length_controlled_win_rate,
    side_by_side,
    style_effects,
)
from ._pairwise import PairwiseReport, battles, calibrate_pairwise, parse_preferences, preference_codes
from ._perturb import DEFAULT_INJECTION, pad_with_filler, plant_injection, to_markdown
from ._report import CalibrationReport
from ._runner import ScoredItems, judge_items, load_items, parse_labels, score_items, score_judges

__all__ = [
    "DEFAULT_INJECTION",
    "ESTIMATE_METHODS",
    "PROBES",
    "STATISTICS",
    "AgreementTable",
    "Alignment",
    "BiasReport",
    "CalibrationReport",
    "Estimate",
    "JudgeCard",
    "JudgeCardRegistry",
    "JudgmentViewer",
    "Labeller",
    "LeaderboardComparison",
    "LengthControlled",
    "LengthEffect",
    "PairAgreement",
    "PairwiseReport",
    "ProbeEffect",
    "ProbeResult",
    "ScoredItems",
    "SelfPreference",
    "agreement_table",
    "agreement_verdict",
    "align",
    "battles",
    "bootstrap_ci",
    "calibrate",
    "calibrate_pairwise",
    "card_from_scores",
    "compare_leaderboards",
    "disagreements",
    "estimate_quality",
    "judge_items",
    "judge_verdict",
    "labels_needed",
    "leaderboard",
    "length_controlled_scores",
    "length_controlled_win_rate",
    "length_effect",
    "length_profile",
    "load_items",
    "model_family",
    "ols",
    "pad_with_filler",
    "pair_agreement",
    "paired_shift",
    "parse_labels",
    "parse_preferences",
    "perturb_items",
    "plant_injection",
    "plot_agreement_heatmap",
    "plot_bias_forest",
    "plot_estimates",
    "plot_judge_scatter",
    "plot_leaderboard",
    "plot_reliability",
    "plot_score_vs_length",
    "plot_threshold_sweep",
    "preference_codes",
    "probe_judge",
    "registry_path",
    "reliability_table",
    "run_probes",
    "score_items",
    "score_judges",
    "self_preference",
    "side_by_side",
    "style_effects",
    "text_features",
    "threshold_sweep",
    "to_markdown",
]


# Names that live in llm_connect.views (the floor above) and are importable from here as before:
# loaded on first access (PEP 562), so importing this package never imports views or matplotlib.
_FROM_VIEWS = frozenset({
    "JudgmentViewer",
    "length_profile",
    "plot_agreement_heatmap",
    "plot_bias_forest",
    "plot_estimates",
    "plot_judge_scatter",
    "plot_leaderboard",
    "plot_reliability",
    "plot_score_vs_length",
    "plot_threshold_sweep",
})


def __getattr__(name: str) -> object:
    if name in _FROM_VIEWS:
        from .._display import view

        return view(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
