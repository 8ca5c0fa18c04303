"""Label answers in the notebook: a :class:`Labeller` that feeds the ledger and the estimates.

One item at a time (prompt, reference(s), candidate; the judge's score and reply only on
request, so they do not anchor the annotator), each label appended to the quality ledger the
moment it is given, and progress told in the terms that matter: how wide the interval on the
mean quality is now, and about how many more labels would make it as narrow as wanted.

This floor sits above :mod:`llm_connect.calibration` (which runs judges; the labels given here are what it
checks them against) and below :mod:`llm_connect.views`, which draws the Labeller's pages and widget
(:mod:`llm_connect.views.labeller`, reached through :mod:`llm_connect._display`). The :class:`Labeller` is a
façade over three rooms: its items (``_items``: ids, keys, the judge's scores, conversations as items,
:func:`conversation_items`), the ledger it writes and reads back (``_log``: labels, skips, undos and holds),
and the plan that chooses the next item (``_queue``, over the designs of :mod:`llm_connect.stats.sampling`,
:data:`~llm_connect.stats.sampling.STRATEGIES`). The guide (``docs/guides/labelling.md``) tells the whole story.

A restarted kernel (a new ``Labeller`` with the same items, ledger, task type, annotator,
strategy and seed) rebuilds the same seeded order and shows the first item that annotator has
neither labelled nor skipped: an item is never shown twice to one annotator unless its label was
undone. Several annotators may label at once from separate processes: each action is one
``append`` under the ledger's file lock, and before choosing the next item the labeller re-reads
the ledger, so an item another annotator has labelled, or holds (shown to them and not yet
labelled, skipped or expired after ``hold_seconds``), is passed over (except the ``"overlap"``
share, which everyone labels). Of two annotators who take one item at the same moment, the first
hold in the ledger's order keeps it.

Every strategy gives each labelled item an inclusion probability ``π_i · K_s / N_s`` (the
``inclusion_probability`` column of :meth:`Labeller.frame`), and :meth:`Labeller.estimate` weights
by it (for the learned ``"active"`` rule with the judge calibrated on the labels, each item's own
label left out: the ``prediction`` column). Only labels given under the labeller's own plan
(``tags["plan"]``) enter :meth:`Labeller.frame` and the estimates; labels from elsewhere still keep
their items from being shown again.

``unit="conversation"`` labels a whole conversation: one label of the conversation, recorded once
with ``item_id`` = the conversation id, never copied onto its turns (a person who read the whole
conversation gave one judgment: copying it onto each of K turns would count it K times and pair it
with per-turn judge scores the person never gave). In :meth:`Labeller.frame` and the estimates a
conversation is one item; its judge score is the mean of its turns' scores.
"""

from ._items import UNITS, conversation_items
from ._labeller import Labeller

__all__ = ["UNITS", "Labeller", "conversation_items"]
