"""Run judges against references and people: runs, probes, pairwise runs, groups, cards, reports.

This floor runs judges (:mod:`llm_connect.grading`) over a dataset and keeps what
comes out as data: scores frames, agreement tables, bias reports, judge cards (their
class and registry: :mod:`llm_connect.cards`), the calibration report. The statistics it applies are pure
functions in :mod:`llm_connect.stats`; every picture and page of its results is
drawn in :mod:`llm_connect.views`. This package exports only what it defines: import the
statistics from :mod:`llm_connect.stats` (``estimate_quality``, ``leaderboard``, ``threshold_sweep``...)
and the plots and pages from :mod:`llm_connect.views` (``plot_*``, ``JudgmentViewer``).

=================================  ==========================================================
what                               functions and classes
=================================  ==========================================================
run judges over a dataset          :func:`score_items` (several judges into one wide frame),
                                   (a file of items: ``items.load_items``; labels: ``stats.labels.parse_labels``)
agreement (with bootstrap CIs)     :func:`pair_agreement`, :func:`agreement_table`
                                   (kernels, ``threshold_sweep``: ``stats.agreement``)
bias probes                        :func:`run_probes`, :func:`probe_judge`, :func:`perturb_items`
                                   (the paired test: ``stats.paired_shift``; the perturbations:
                                   ``testing.pad_with_filler``, ``to_markdown``, ``plant_injection``)
observational diagnostics          :func:`length_effect`, :func:`length_controlled_scores`,
                                   :func:`self_preference`, :func:`reliability_table`,
                                   :func:`disagreements`
features                           :func:`model_family` (length and format: ``stats.text_features``)
quality estimates (PPI++,          ``stats.estimate_quality``, ``stats.labels_needed``
active inference)
verdicts and judge cards           :func:`card_from_scores`; the card, its verdict and the registry
                                   (``JudgeCard``, ``card_verdict``, ``agreement_verdict``, ``JudgeCardRegistry``)
                                   are :mod:`llm_connect.cards`
pairwise (a / b / tie)             :func:`calibrate_pairwise` -> :class:`PairwiseReport`,
                                   :func:`battle_outcomes` (preferences: ``stats.parse_preferences``)
align a judge to people            ``align`` -> ``Alignment``: :mod:`llm_connect.alignment`
                                   (rubrics: ``grading.Rubric``)
everything at once                 :func:`calibrate` -> :class:`CalibrationReport`
                                   (``_repr_html_``, ``.widget()``, ``.to_html(path)``, ``.view()``)
leaderboards                       :func:`compare_leaderboards` -> :class:`LeaderboardComparison`
                                   (the fit, ``leaderboard``, ``style_effects``, ``side_by_side``,
                                   ``length_controlled_win_rate``: ``stats``)
run-to-run reliability             ``calibrate(..., epochs=k)``, ``cards.JudgeCard.with_reliability``
every judgment in one page         :meth:`CalibrationReport.view` (records and ``judgments.jsonl``:
                                   ``views.judgment_records``, ``views.write_judgments``)
label in the notebook              ``Labeller``: :mod:`llm_connect.labelling` (designs: ``stats.sampling``;
                                   widget: ``views.labeller_widget``)
=================================  ==========================================================

A report's ``widget()``, ``html()``, ``to_html()`` and every object's ``_repr_html_`` reach their views through
:mod:`llm_connect._display` at call time, so this floor never imports ``views``
and matplotlib and ipywidgets are imported only when a plot or a widget is made.
"""

from ._agreement import AgreementTable, PairAgreement, agreement_table, pair_agreement
from ._bias import PROBES, BiasReport, ProbeResult, perturb_items, probe_judge, run_probes
from ._calibrate import calibrate
from ._cards import card_from_scores
from ._diagnostics import (
    LengthControlled,
    LengthEffect,
    SelfPreference,
    disagreements,
    length_controlled_scores,
    length_effect,
    reliability_table,
    self_preference,
)
from ._features import model_family
from ._leaderboard import LeaderboardComparison, compare_leaderboards
from ._pairwise import PairwiseReport, battle_outcomes, calibrate_pairwise
from ._report import CalibrationReport
from ._runner import ScoredItems, score_items

__all__ = ["PROBES", "AgreementTable", "BiasReport", "CalibrationReport", "LeaderboardComparison",
           "LengthControlled", "LengthEffect", "PairAgreement", "PairwiseReport", "ProbeResult", "ScoredItems",
           "SelfPreference", "agreement_table", "battle_outcomes", "calibrate", "calibrate_pairwise",
           "card_from_scores", "compare_leaderboards", "disagreements", "length_controlled_scores", "length_effect",
           "model_family", "pair_agreement", "perturb_items", "probe_judge", "reliability_table", "run_probes",
           "score_items", "self_preference"]
