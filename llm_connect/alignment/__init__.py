"""Align a judge to people: improve an LLM judge's rubric from their labels, and prove it on labels it never saw.

:func:`align` holds out a split of the labelled items that no selection step sees, proposes candidate rubrics
(worked-example sets, the decision threshold, criteria rewritten by an optimizer LLM), ranks them by
cross-validation on the rest, and accepts the best only when its held-out agreement with people beats the
original's (the paired bootstrap interval of the difference lies above 0). It returns an :class:`Alignment`: the
judge to use, the evidence, and the judge cards of both rubrics. The guide (``docs/guides/rubrics-and-align.md``)
tells the whole story.

This floor sits above :mod:`llm_connect.calibration` (an alignment's judge cards are made by
:func:`~llm_connect.calibration.card_from_scores`) and below :mod:`llm_connect.views`, which draws an
:class:`Alignment`'s page (:mod:`llm_connect.views.alignment`, reached through :mod:`llm_connect._display`) and
:mod:`llm_connect.cli` (``llm-connect align``). :func:`align` is a façade over three rooms: its entry point
(``_align``), its named steps (``_align_steps``: the labelled items, the split and the folds, the candidates and
their cost, cross-validation, the held-out proof) and its result (``_alignment``). The statistics it applies are
in :mod:`llm_connect.stats.alignment`.
"""

from ._align import align
from ._alignment import Alignment

__all__ = ["Alignment", "align"]
