"""Judge cards: what is known about one judge under one rubric, its verdict in words, and the registry beside a
ledger that routing reads.

A calibration run measures (:mod:`llm_connect.calibration`: :func:`~llm_connect.calibration.card_from_scores`,
``CalibrationReport.judge_cards()``); the card keeps what it found and decides:

- a **card** (:class:`JudgeCard`, one per ``(grader_id, rubric_hash)``): how many labelled items, percent
  agreement and kappa with their intervals, the judge's mean bias (judge − human) with its interval, each bias
  probe's effect and p-value (:class:`ProbeEffect`), position consistency for pairwise judges, the unscored
  rate, and
- its **verdict**: one line a user can act on, worded by one rule (:func:`agreement_verdict`,
  :func:`card_verdict`, :func:`weak_judge_reasons`; the rule is told in :mod:`llm_connect.cards._verdicts`);
- a place in a **registry** (:class:`JudgeCardRegistry`): a small JSON file beside the ledger
  (``<ledger>.cards.json``, :func:`registry_path`), rewritten atomically under
  ``filelock.FileLock(<registry>.lock)``, which routing reads to refuse uncalibrated judges.

This floor sits above :mod:`llm_connect.calibration`, which makes cards, and routing, which reads them; a card's
HTML is drawn in :mod:`llm_connect.views.cards`.
"""

from ._card import CARD_COLUMNS, JudgeCard, cards_frame, reliability_entry
from ._registry import JudgeCardRegistry, registry_path
from ._verdicts import (
    BIAS_ALPHA,
    MAX_UNSCORED_RATE,
    MAX_YES_RATE,
    MIN_LABELLED,
    MIN_MEAN_BIAS,
    SHOWN_DIGITS,
    UNDECIDED_FROM,
    ProbeEffect,
    agreement_band,
    agreement_verdict,
    card_verdict,
    labels_to_settle,
    selective_line,
    style_entry,
    weak_judge_reasons,
)

__all__ = [
    "BIAS_ALPHA",
    "CARD_COLUMNS",
    "MAX_UNSCORED_RATE",
    "MAX_YES_RATE",
    "MIN_LABELLED",
    "MIN_MEAN_BIAS",
    "SHOWN_DIGITS",
    "UNDECIDED_FROM",
    "JudgeCard",
    "JudgeCardRegistry",
    "ProbeEffect",
    "agreement_band",
    "agreement_verdict",
    "card_verdict",
    "cards_frame",
    "labels_to_settle",
    "registry_path",
    "reliability_entry",
    "selective_line",
    "style_entry",
    "weak_judge_reasons",
]
