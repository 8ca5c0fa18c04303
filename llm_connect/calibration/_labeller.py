"""Label answers in the notebook: a :class:`Labeller` that feeds the ledger and the estimates.

One item at a time (prompt, reference(s), candidate; the judge's score and reply only on
request, so they do not anchor the annotator), each label appended to the quality ledger the
moment it is given, and progress told in the terms that matter: how wide the interval on the
mean quality is now, and about how many more labels would make it as narrow as wanted.

What goes in the ledger
-----------------------
Every action is one appended :class:`~llm_connect.quality.QualityObservation` of the
labeller's ``task_type``, with the candidate's ``adapter_id`` / ``model_id`` chosen exactly as
:func:`~llm_connect.grading.judge_many` chooses them (``adapter_id`` or ``candidate_adapter``
column, else ``candidate_model``, else ``"unknown"``), so :func:`~llm_connect.frames.paired_frame`
joins labels with the judge's observations on (``item_id``, ``adapter_id``):

- a **label**: grader ``human`` (``quality_score`` the label in 0..1), tags ``grader_id``,
  ``item_id``, ``annotator`` (as :func:`~llm_connect.frames.record_labels` writes them), plus
  ``label_id`` (unique), ``strategy``, ``seed``, ``plan`` (an id of the sampling plan),
  ``sampling_probability`` (the probability with which the item is shown once the walk through
  the seeded order reaches it: 1 except for ``"active"``), ``stratum``, ``rank`` (the item's
  place in its stratum's seeded order), ``stratum_size`` and ``note`` when one was written;
- a **skip**: grader ``human-skip`` (score 0, never read as a label), the same tags;
- labels and skips are recorded once per item and annotator
  (:meth:`~llm_connect.quality.BaseLedger.extend_once`): one the ledger holds already (the same
  annotator labelled the item in another session) is not recorded again, until it is undone;
- an **undo**: grader ``human-undo`` (score 0) with tag ``undoes=<label_id>``. The ledger stays
  append-only; :func:`~llm_connect.frames.paired_frame` and the labeller leave an undone label
  (or skip) out;
- a **hold**: grader ``human-hold`` (score 0), tags ``item_id``, ``annotator``, ``hold_id``,
  ``hold_seconds`` and ``plan``, written when an item is shown (:attr:`Labeller.current`), so other
  annotators pass it over (see below).

Skip, undo and hold markers are people's records, never a judge's score nor a label: routing,
``llm-connect ledger stats`` and :func:`~llm_connect.frames.paired_frame` leave them out.

Item ids are converted as :func:`~llm_connect.grading.judge_many` records them
(:func:`~llm_connect.batch.canonical_item_id`: numpy integers are plain ints, a whole float such as
``1.0`` is ``1``) and matched on their text (:func:`~llm_connect.batch.item_id_text`), so labels pair
with the judge's scores whatever the ids' dtype.

A restarted kernel (a new ``Labeller`` with the same items, ledger, task type, annotator,
strategy and seed) rebuilds the same seeded order and shows the first item that annotator has
neither labelled nor skipped: an item is never shown twice to one annotator unless its label was
undone. Several annotators may label at once from separate processes: each action is one
``append`` under the ledger's file lock, and before choosing the next item the labeller re-reads
the ledger, so an item another annotator has already labelled is passed over (except the
``"overlap"`` share, which everyone labels).

Annotators labelling at the same time get different items: the item shown to an annotator is *held*
(a ``human-hold`` marker appended when :attr:`Labeller.current` first shows it), and every other
annotator's labeller passes over items held by someone else, giving each annotator the next item nobody
holds. Two annotators who take the same item at the same moment both append a hold and read the ledger
again: the first hold in the ledger's order keeps the item and the other moves on (for a
:class:`~llm_connect.quality.QualityLedger`, whose appends are serialised by its file lock, the order
is the order of the appends). An annotator holds one item at a time (that of their latest hold). A
hold ends when its annotator labels or skips the item or takes another, or expires ``hold_seconds``
(default 900) after it was written, so an annotator who walked away does not keep items from the
others; it is renewed once half that time has passed while the item is still shown.
The ``"overlap"`` share is never held: everyone labels it.

Which items to show (``strategy``)
----------------------------------
``"random"`` (a uniform random order), ``"stratified"`` (round-robin over the groups of
``group=``, default the candidate model column), ``"active"`` (active statistical inference,
Zrnic & Candès 2024, *Active Statistical Inference*, ICML, arXiv:2403.03208: more labels where
the judge, calibrated on the labels so far, is unsure; with ``uncertainty="judge"`` or
``"COLUMN"`` a fixed rule instead), ``"overlap"`` (a seeded share every annotator labels first;
:meth:`Labeller.agreement`) or ``"abstained"`` (only the items a selective judge or a cascade
abstained on, most uncertain first: ``items`` is the frame of ``judge_many(selective_judge, ...)``,
whose ``status`` says ``abstained`` (or ``decided_by`` says ``human``) and whose ``confidence`` orders
them; Jung, Brahman & Choi 2025, *Trust or Escalate*). The designs are statistics on arrays, in
:mod:`llm_connect.stats.sampling`: what each does, its inclusion probabilities, and when
``"active"`` pays and which of its rules to pick are explained there. Each item's key is its id
and adapter; the learned ``"active"`` plan is replayed from the ledger (a shown item keeps the
``π`` recorded with its label), so a restarted kernel resumes it.

Every strategy gives each labelled item an inclusion probability ``π_i · K_s / N_s`` (the
``inclusion_probability`` column of :meth:`Labeller.frame`), and :meth:`Labeller.estimate` weights
by it (for the learned ``"active"`` rule with the judge calibrated on the labels, each item's own
label left out: the ``prediction`` column). An item passed over because it was skipped, or shown
to an annotator who has not answered yet, counts as visited and unlabelled (skips are assumed
unrelated to the label; skip sparingly). Only labels given under the labeller's own plan
(``tags["plan"]``) enter :meth:`Labeller.frame` and the estimates; labels from elsewhere still keep
their items from being shown again.

Conversations and agent runs
----------------------------
Items may be turns of conversations (:func:`~llm_connect.conversations.per_turn`,
:func:`~llm_connect.conversations.read_conversations`): the labeller shows each as a transcript (the
messages before the reply, the reply or the agent's trajectory, a reference trajectory, the context
documents; :func:`llm_connect.views._transcript.transcript_html`).

``unit="turn"`` (the default) labels one reply: the label is recorded as above, with the tags
``unit="turn"``, ``conversation_id`` and ``turn`` when the items have them, so it pairs with the
judge's score of that turn.

``unit="conversation"`` labels a whole conversation: the rows of one ``conversation_id`` (and
candidate model) are one item (:func:`conversation_items`), shown whole. Its label is **one label of
the conversation**, recorded once with ``item_id`` = the conversation id and the tags
``unit="conversation"`` and ``conversation_id`` (no ``turn``); it is never copied onto the
conversation's turns. A person who read the whole conversation gave one judgment: copying it onto
each of K turns would count it K times (intervals too narrow by about ``sqrt(K)``) and pair it with
per-turn judge scores the person never gave, so agreement with a per-turn judge would be measured
on labels that do not exist. In :meth:`Labeller.frame` and the estimates a conversation is one
item; its judge score is the mean of its turns' scores (the items' score column; else the ledger's
observations whose ``item_id`` is the conversation id, a judge of whole conversations).
:func:`~llm_connect.frames.paired_frame` pairs such a label with the judge's observations of the
same ``item_id``, i.e. with a judge of whole conversations.

Judge scores and replies in ``items``
-------------------------------------
With ``judge="NAME"``, the score is read from the items' column ``NAME``, else ``score_NAME``
(as ``calibrate``'s ``scores.csv`` writes it), else from the ledger's observations of the task
type with ``tags["grader_id"] == NAME`` (mean per item and adapter). The reply shown on request
is the column ``reply_NAME``, ``notes_NAME``, ``reply`` or ``notes``, the first present.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._display import view
from ..batch import CONVERSATION_COLUMNS, canonical_item_id, conversation_tags, item_id_text, item_ids, renamed_keyword
from ..errors import ValidationError
from ..frames import HOLD_GRADER_ID, HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID, ledger_frame
from ..quality import BaseLedger, QualityObservation
from ..stats._validate import check_confidence
from ..stats.estimates import estimate_quality, labels_needed
from ..stats.sampling import (
    STRATEGIES,
    active_probabilities,
    calibrated_scores,
    learned_plan,
    make_plan,
    residual_walk,
)

__all__ = ["STRATEGIES", "Labeller"]

_log = logging.getLogger("llm_connect")
_ID_COLUMNS = ("item_id", "id")
_REFERENCE_COLUMNS = ("references", "reference", "baseline")
_MIN_LABELS_FOR_WIDTH = 10  # below this the progress text gives no width (the normal interval is not yet one)
_MAX_TAKES = 100  # items lost in a row to annotators who took them at the same moment before showing one anyway


# -- items ---------------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value if isinstance(value, str) else str(value)


def _items_frame(items: Any) -> pd.DataFrame:
    if isinstance(items, pd.DataFrame):
        frame = items.reset_index(drop=True)
    elif isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ValidationError(
            f"items must be a DataFrame or an iterable of mappings (one per answer to label), got "
            f"{type(items).__name__}"
        )
    else:
        rows = list(items)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, Mapping)]
        if bad:
            raise ValidationError(f"items must be mappings; item {bad[0]} is a {type(rows[bad[0]]).__name__}")
        frame = pd.DataFrame(rows)
    if not len(frame):
        raise ValidationError("items is empty: pass the answers to label (a DataFrame or a list of dicts)")
    return frame


def _abstained_rows(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows a selective judge or a cascade abstained on (``status == "abstained"``, or ``decided_by ==
    "human"``) and their confidences (NaN where none), for ``strategy="abstained"``."""
    if "status" in frame.columns:
        mask = (frame["status"].astype(object) == "abstained").to_numpy(dtype=bool)
    elif "decided_by" in frame.columns:
        mask = (frame["decided_by"].astype(object) == "human").to_numpy(dtype=bool)
    else:
        raise ValidationError("strategy='abstained' takes the frame of judge_many(selective_judge, items) (or of a "
                              "cascade): items need a 'status' column (abstained rows) or a 'decided_by' column")
    if not mask.any():
        raise ValidationError(f"strategy='abstained': none of the {len(frame)} rows was abstained on; there is "
                              "nothing left for people")
    part = frame[mask].reset_index(drop=True)
    confidence = (pd.to_numeric(part["confidence"], errors="coerce").to_numpy(dtype=float)
                  if "confidence" in part.columns else np.full(len(part), np.nan))
    return part, confidence


def _values(part: pd.DataFrame, name: str) -> list[Any]:
    """Column ``name`` of ``part`` as Python objects (``None`` for each row when there is no such column)."""
    return part[name].astype(object).tolist() if name in part.columns else [None] * len(part)


def _is_seconds(value: Any) -> bool:
    """Whether a ``hold_seconds`` tag is a usable span (a finite number of seconds > 0)."""
    return (isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
            and math.isfinite(float(value)) and float(value) > 0)


def _column(frame: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    return next((c for c in candidates if c in frame.columns), None)


def _is_trajectory(value: Any) -> bool:
    """A reply or reference that is a list of chat messages (an agent run), not texts."""
    return isinstance(value, (list, tuple)) and any(isinstance(m, Mapping) for m in value)


def _reply_text(value: Any) -> str:
    """A reply as text: a trajectory's final answer (the text of its last assistant message), else the text."""
    if _is_trajectory(value):
        last = value[-1] if value else None
        if isinstance(last, Mapping) and last.get("role") == "assistant":
            content = last.get("content")
            return content if isinstance(content, str) else ""
        return ""
    return _text(value) or ""


def _references(value: Any, sep: str | None) -> list[str]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [t for t in (_text(v) for v in value) if t is not None]
    text = _text(value)
    if text is None:
        return []
    if sep:
        parts = [p.strip() for p in text.split(sep)]
        return [p for p in parts if p] or [text]
    return [text]


# -- conversations as items ------------------------------------------------------------------------

#: What one item of a :class:`Labeller` is: a row (``"turn"``: one reply) or a conversation.
UNITS = ("turn", "conversation")
# per-turn columns a conversation item does not carry over (it gets its own)
_TURN_ONLY = ("id", "item_id", "turn", "prompt", "candidate", "baseline", "reference", "references", "messages",
              "context", "status", "confidence", "decided_by")


def _missing_value(value: Any) -> bool:
    if isinstance(value, (list, tuple, dict, np.ndarray)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _listed(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def _score_columns(frame: pd.DataFrame, judge: str | None, uncertainty: str | None) -> list[str]:
    """The numeric columns a conversation item averages over its turns: the judge's score, the uncertainty."""
    names = [] if judge is None else [judge, f"score_{judge}"]
    if uncertainty not in (None, "judge"):
        names.append(str(uncertainty))
    return [c for c in names if c in frame.columns]


def _as_messages(reply: Any) -> list[Any]:
    """A turn's reply as messages: a trajectory as it is, a text as one assistant message."""
    reply = _listed(reply)
    if isinstance(reply, (list, tuple)):
        return list(reply)
    if _missing_value(reply):
        return []
    return [{"role": "assistant", "content": reply if isinstance(reply, str) else str(reply)}]


def conversation_items(frame: pd.DataFrame, *, score_columns: Sequence[str] = ()) -> pd.DataFrame:
    """One row per conversation (and candidate model) of a frame of turns: what ``Labeller(unit="conversation")``
    shows and labels.

    Parameters
    ----------
    frame : pandas.DataFrame
        Turns, as :func:`~llm_connect.conversations.per_turn` or
        :func:`~llm_connect.conversations.read_conversations` give them: ``conversation_id``, ``turn``
        (optional: the rows' order otherwise), ``messages`` (the conversation before the reply),
        ``candidate`` (a text or a trajectory), optional ``context``.
    score_columns : sequence of str
        Numeric columns averaged over a conversation's turns (the judge's score: a conversation's
        judge score is the mean of its turns' scores, NaN when none is scored).

    Returns
    -------
    pandas.DataFrame
        ``id`` (the conversation id), ``conversation_id``, ``n_turns``, ``messages`` (the whole
        conversation: each turn's messages not already shown, then its reply), ``prompt`` (the first
        user message), ``candidate`` (the last reply), ``context`` (every turn's documents, each
        once), the ``score_columns`` averaged, and every other column whose value is the same on
        every turn (``candidate_model``, a group column...).

    Raises
    ------
    ValidationError
        No ``conversation_id`` column, or a row without one.
    """
    if "conversation_id" not in frame.columns:
        raise ValidationError("unit='conversation' needs a conversation_id column: read the data with "
                              "llm_connect.conversations.read_conversations or split conversations with per_turn")
    ids = frame["conversation_id"].astype(object).tolist()
    if any(_missing_value(v) for v in ids):
        raise ValidationError("unit='conversation': every row needs its conversation_id; some are missing")
    model_col = _column(frame, ("adapter_id", "candidate_adapter", "candidate_model", "model_id"))
    models = frame[model_col].astype(object).tolist() if model_col else [None] * len(frame)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (cid, model) in enumerate(zip(ids, models, strict=True)):
        groups.setdefault((str(item_id_text(cid)), str(_text(model))), []).append(i)
    turns = frame["turn"].astype(object).tolist() if "turn" in frame.columns else None

    def position(i: int) -> tuple[float, int]:
        turn = turns[i] if turns is not None else None
        return (math.inf if turn is None or _missing_value(turn) else float(turn), i)

    kept = [c for c in frame.columns if c not in _TURN_ONLY and c not in score_columns and c != "conversation_id"]
    rows = []
    for rows_of in groups.values():
        order = sorted(rows_of, key=position)
        shown: list[Any] = []
        context: list[str] = []
        for i in order:
            before = _listed(frame["messages"].iloc[i]) if "messages" in frame.columns else None
            before = list(before) if isinstance(before, (list, tuple)) else []
            shown += before[len(shown):] if before[: len(shown)] == shown else before
            shown += _as_messages(frame["candidate"].iloc[i]) if "candidate" in frame.columns else []
            docs = _listed(frame["context"].iloc[i]) if "context" in frame.columns else None
            if isinstance(docs, (list, tuple)):
                context += [d for d in docs if d not in context]
        first, last = order[0], order[-1]
        prompt = next((m.get("content") for m in shown if isinstance(m, Mapping) and m.get("role") == "user"), None)
        row: dict[str, Any] = {
            "id": canonical_item_id(ids[first]), "conversation_id": ids[first], "n_turns": len(order),
            "messages": shown, "prompt": prompt if isinstance(prompt, str) else "",
            "candidate": _listed(frame["candidate"].iloc[last]) if "candidate" in frame.columns else "",
            "context": context or None,
        }
        for column in score_columns:
            values = pd.to_numeric(frame[column].iloc[order], errors="coerce").to_numpy(dtype=float)
            row[column] = float(np.nanmean(values)) if np.isfinite(values).any() else math.nan
        for column in kept:
            same = frame[column].iloc[order].astype(object).tolist()
            if all(repr(v) == repr(same[0]) for v in same):
                row[column] = same[0]
        rows.append(row)
    return pd.DataFrame(rows)


# -- the labeller --------------------------------------------------------------------------------


@dataclass
class _State:
    mine: set[tuple[str, str]]  # done (labelled or skipped) by this annotator, not undone
    labelled_by_others: set[tuple[str, str]]
    plan_done: set[tuple[str, str]]  # done by anyone under this plan
    last_action: tuple[str, tuple[str, str]] | None  # (label_id, key) of this annotator's last action
    labels: pd.DataFrame  # this plan's labels, not undone: key, annotator, score
    n_mine: int
    held_by_others: set[tuple[str, str]] = field(default_factory=set)  # whose first live hold is another's
    my_holds: dict[tuple[str, str], float] = field(default_factory=dict)  # the item I hold: my latest hold's time


class Labeller:
    """Label answers one at a time in Jupyter; every label goes to the ledger at once.

    ``items``: a DataFrame or an iterable of mappings with an item id (``id`` or ``item_id``),
    ``prompt``, ``candidate``, optionally reference(s) (``references`` list, ``reference`` or
    ``baseline``; ``reference_sep="|"`` splits one text into several), ``candidate_model`` /
    ``candidate_adapter`` / ``adapter_id`` / ``model_id``, and the judge's score and reply (see
    the module docstring). One item is one (id, adapter): the same question answered by two
    models is two items.

    ``ledger``: the :class:`~llm_connect.quality.QualityLedger` the labels go to (and the judge's
    scores may come from); ``task_type``: the task type of the judge's observations;
    ``annotator``: who labels (a name); ``grader_id``: the judge's grader id (its scores drive
    ``"active"`` and the estimates; ``None``: human-only intervals; ``judge=``, its older name, is
    still accepted with a :class:`DeprecationWarning`); ``strategy``: ``"random"``,
    ``"stratified"``, ``"active"``, ``"overlap"`` or ``"abstained"`` (the rows of a selective judge's or
    cascade's ``judge_many`` frame it abstained on, most uncertain first); ``seed``: the order's seed.

    Keyword options: ``group`` (the stratifying column; default ``candidate_model``),
    ``overlap`` (share every annotator labels, default 0.2), ``floor`` (the uniform share of
    ``"active"``, default 0.1), ``uncertainty`` (``"active"``'s fixed rule: ``"judge"`` for the
    judge's own ``sqrt(s(1 − s))``, for a judge known to be calibrated, or a column of uncertainty,
    e.g. several judges' disagreement; without it, the default, the rule is learned from the
    labels: safer when the judge may be confidently wrong, see :mod:`llm_connect.stats.sampling`), ``burn_in``
    (labels taken uniformly before it learns, default 20), ``bins``
    (judge-score bins of the learned rule, default 5), ``reference_sep``, ``show_judge`` (reveal
    the judge's verdict from the start; default hidden, to avoid anchoring), ``target_width``
    (the interval width progress plans for, default 0.05), ``confidence`` (0.95), ``hold_seconds``
    (how long an item shown to this annotator is held from the others, default 900 s, renewed while
    it is shown; 0 takes no holds; see the module docstring), ``unit`` (``"turn"``, the default: each
    row is an item; ``"conversation"``: the rows of one ``conversation_id`` (and candidate model) are
    one item, the whole conversation shown and labelled at once; see "Conversations and agent runs"
    in the module docstring).

    Items of a conversation or an agent run (columns ``messages``, ``context``, a ``candidate`` or
    reference that is a list of chat messages; see :mod:`llm_connect.conversations`) are shown as a
    transcript: roles, tool calls with their arguments, tool results and the documents, collapsible.

    The programmatic API (the widget's buttons call it): :attr:`current`, :meth:`label`,
    :meth:`skip`, :meth:`undo`, :meth:`progress`, :attr:`n_labelled`; and for the results
    :meth:`frame`, :meth:`estimate`, :meth:`agreement`. Bad input raises
    :class:`~llm_connect.errors.ValidationError` saying what to change.
    """

    def __init__(
        self,
        items: Any,
        *,
        ledger: BaseLedger,
        task_type: str,
        annotator: str,
        grader_id: str | None = None,
        strategy: str = "random",
        seed: int = 0,
        group: str | None = None,
        overlap: float = 0.2,
        floor: float = 0.1,
        uncertainty: str | None = None,
        burn_in: int = 20,
        bins: int = 5,
        reference_sep: str | None = None,
        show_judge: bool = False,
        target_width: float = 0.05,
        confidence: float = 0.95,
        hold_seconds: float = 900.0,
        unit: str = "turn",
        judge: str | None = None,
    ) -> None:
        judge = renamed_keyword(grader_id, judge, func="Labeller", new_name="grader_id", old_name="judge")
        if strategy not in STRATEGIES:
            raise ValidationError(f"unknown strategy {strategy!r}; choose from {list(STRATEGIES)}")
        if unit not in UNITS:
            raise ValidationError(f"unknown unit {unit!r}; choose 'turn' (each row is an item: one reply) or "
                                  "'conversation' (the rows of one conversation_id are one item)")
        if unit == "conversation" and strategy == "abstained":
            raise ValidationError("strategy='abstained' shows the turns a selective judge abstained on: use "
                                  "unit='turn' with it")
        self.unit = unit
        for name, value in (("task_type", task_type), ("annotator", annotator)):
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ValidationError(f"judge must be the judge's grader id (a string) or None, got {judge!r}")
        if judge in (HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID, HOLD_GRADER_ID):
            raise ValidationError(f"judge={judge!r} names the human labels; pass the machine judge's grader id")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValidationError(f"seed must be an integer, got {seed!r}")
        if not hasattr(ledger, "append"):
            raise ValidationError(f"ledger must be a QualityLedger (labels are appended to it), got "
                                  f"{type(ledger).__name__}")
        if not (isinstance(target_width, (int, float)) and not isinstance(target_width, bool)
                and 0 < target_width < 1):
            raise ValidationError(f"target_width must be a number in (0, 1), e.g. 0.05; got {target_width!r}")
        if (isinstance(hold_seconds, bool) or not isinstance(hold_seconds, (int, float))
                or not math.isfinite(hold_seconds) or hold_seconds < 0):
            raise ValidationError(f"hold_seconds must be a number of seconds >= 0 (0: take no holds), e.g. 900; "
                                  f"got {hold_seconds!r}")
        self.hold_seconds = float(hold_seconds)
        self.group: str | None = None
        self.judge_source: str | None = None
        self.ledger = ledger
        self.task_type = task_type
        self.annotator = annotator
        self.judge = judge
        self.strategy = strategy
        self.seed = int(seed)
        self.show_judge = bool(show_judge)
        self.target_width = float(target_width)
        self.confidence = check_confidence(confidence)
        frame = _items_frame(items)
        if unit == "conversation":
            frame = conversation_items(frame, score_columns=_score_columns(frame, judge, uncertainty))
        priority = None
        if strategy == "abstained":  # only the rows a selective judge or cascade abstained on
            frame, priority = _abstained_rows(frame)
        self._build_items(frame, group=group, reference_sep=reference_sep, uncertainty=uncertainty)
        probs = None
        self.floor, self.burn_in, self.bins = floor, burn_in, bins
        self._learned = strategy == "active" and uncertainty is None
        if strategy == "active":
            u = self._items["uncertainty"] if uncertainty not in (None, "judge") else None
            if u is None and self._items["judge_score"].isna().all():
                raise ValidationError(
                    "strategy='active' needs the judge's scores: pass grader_id='GRADER_ID' with a score column "
                    "(GRADER_ID or score_GRADER_ID) in items or its observations in the ledger, or uncertainty="
                    "'COLUMN'"
                )
            if self._learned:  # checked now, replayed from the ledger in _refresh
                residual_walk(np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1), dtype=np.intp), np.full(1, np.nan),
                              floor=floor, burn_in=burn_in, bins=bins)
            else:  # the fixed rule: the judge's own sqrt(s(1 - s)) (uncertainty="judge") or the column
                probs = active_probabilities(self._items["judge_score"].to_numpy(dtype=float),
                                             uncertainty=None if u is None else u.to_numpy(dtype=float), floor=floor)
        self.plan = make_plan(list(self._items["key_text"]), strategy=strategy, seed=self.seed,
                              probabilities=probs if not self._learned else np.ones(len(self._items)),
                              groups=self._items["group"] if strategy == "stratified" else None,
                              overlap=overlap, priority=priority)
        plan_key: tuple[Any, ...] = (strategy, self.seed, overlap if strategy == "overlap" else None,
                                     floor if strategy == "active" else None, group)
        if unit != "turn":  # a plan of conversations is another plan (the turn plan keeps its old id)
            plan_key += (("unit", unit),)
        if strategy == "active":
            plan_key += (("learned", burn_in, bins) if self._learned else ("uncertainty", uncertainty),)
        digest = hashlib.blake2b(repr(plan_key).encode(), digest_size=6).hexdigest()
        self.plan_id = f"{strategy}-{self.seed}-{digest}"
        self._queue = self.plan.queue()
        self._pinned: int | None = None  # an item brought back by undo
        self._current: int | None = None
        self._refresh()

    # -- items ----------------------------------------------------------------------------------

    def _build_items(self, frame: pd.DataFrame, *, group: str | None, reference_sep: str | None,
                     uncertainty: str | None) -> None:
        id_col = _column(frame, _ID_COLUMNS)
        conversational = any(c in frame.columns for c in CONVERSATION_COLUMNS)
        missing = [name for name, ok in (("an item id ('id' or 'item_id')", id_col is not None or conversational),
                                         ("'prompt'", "prompt" in frame.columns or "messages" in frame.columns),
                                         ("'candidate'", "candidate" in frame.columns)) if not ok]
        if missing:
            raise ValidationError(f"items lack {', '.join(missing)}; their columns are {list(frame.columns)[:20]}")
        if conversational:  # a conversation's turns: keyed as judge_many keys them (the turn is part of the item)
            if "prompt" not in frame.columns:
                from ..grading._batch import item_messages, item_prompt

                frame = frame.assign(prompt=[item_prompt(r, item_messages(r)) for r in frame.to_dict("records")])
            keyed = frame.rename(columns={id_col: "id"}) if id_col not in (None, "id") else frame
            ids: list[Any] = item_ids(keyed)
        else:
            assert id_col is not None
            ids = [canonical_item_id(v) for v in frame[id_col].tolist()]  # the one conversion (1.0 is 1), as judged
        if any(v is None for v in ids):
            raise ValidationError(f"every item needs an id; column {id_col!r} has missing values")
        self._item_tags = [conversation_tags(r) for r in frame.to_dict("records")] if conversational else None
        adapter_col = _column(frame, ("adapter_id", "candidate_adapter", "candidate_model"))
        model_col = _column(frame, ("model_id", "candidate_model"))

        def names(col: str | None) -> list[str | None]:
            if col is None:
                return [None] * len(frame)
            return [t if t is not None and t.strip() else None for t in map(_text, frame[col].tolist())]

        models = [m or "unknown" for m in names(model_col)]
        adapters = [a or m for a, m in zip(names(adapter_col), models, strict=True)]
        keys = [(str(item_id_text(i)), a) for i, a in zip(ids, adapters, strict=True)]
        seen: dict[tuple[str, str], int] = {}
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
        dup = [k for k, c in seen.items() if c > 1]
        if dup:
            raise ValidationError(
                f"{len(dup)} item(s) appear more than once, e.g. id {dup[0][0]!r} for adapter {dup[0][1]!r}; each "
                "(id, candidate model) must be one row: drop the duplicates (df.drop_duplicates) or give them "
                "distinct ids"
            )
        ref_col = _column(frame, _REFERENCE_COLUMNS)
        raw_refs = [_listed(v) for v in frame[ref_col].tolist()] if ref_col else [None] * len(frame)
        refs = [[] if _is_trajectory(v) else _references(v, reference_sep) for v in raw_refs]
        replies = [_listed(v) for v in frame["candidate"].tolist()]
        data = pd.DataFrame({
            "item_id": pd.Series(ids, dtype=object),  # plain Python ids (numpy int64 is no JSON tag)
            "key_text": [f"{i}\x1f{a}" for i, a in keys],
            "adapter_id": adapters,
            "model_id": models,
            "prompt": [_text(v) or "" for v in frame["prompt"].tolist()],
            "candidate": [_reply_text(v) for v in replies],
            "references": refs,
        })
        # a conversation or an agent run: what the transcript shows (None where the items have no such column)
        data["reply"] = pd.Series(replies, dtype=object)
        data["reference_run"] = pd.Series([v if _is_trajectory(v) else None for v in raw_refs], dtype=object)
        for name in ("messages", "context", "conversation_id", "turn"):
            values = [_listed(v) for v in frame[name].tolist()] if name in frame.columns else [None] * len(frame)
            data[name] = pd.Series([None if _missing_value(v) else v for v in values], dtype=object)
        self._ids = ids
        self._keys = keys
        self._index = {k: i for i, k in enumerate(keys)}
        if self.strategy == "stratified" or group is not None:
            gcol = group if group is not None else _column(frame, ("candidate_model", "model_id", "adapter_id"))
            if gcol is None or gcol not in frame.columns:
                raise ValidationError(
                    f"strategy='stratified' needs a group column: group={gcol!r} is not among the items' columns "
                    f"{list(frame.columns)[:20]}; pass group='COLUMN' (e.g. the candidate model)"
                )
            data["group"] = [_text(v) or "(missing)" for v in frame[gcol].tolist()]
            self.group = gcol
        else:
            data["group"] = "all"
            self.group = None
        data["judge_score"] = np.nan
        data["judge_reply"] = None
        if uncertainty is not None and uncertainty != "judge":
            if not isinstance(uncertainty, str) or uncertainty not in frame.columns:
                raise ValidationError(f"uncertainty={uncertainty!r} is not a column of the items; pass a column "
                                      "name, 'judge' (the judge's own sqrt(s(1 - s))) or None (learned)")
            data["uncertainty"] = pd.to_numeric(frame[uncertainty], errors="coerce").to_numpy(dtype=float)
        if self.judge is not None:
            score_col = _column(frame, (self.judge, f"score_{self.judge}"))
            if score_col is not None:
                scores = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(dtype=float)
                if np.any((scores < 0) | (scores > 1)):
                    raise ValidationError(f"the judge's scores in column {score_col!r} must be in 0..1; rescale first")
                data["judge_score"] = scores
                self.judge_source = f"items[{score_col!r}]"
            else:
                data["judge_score"] = self._judge_from_ledger(keys)
                self.judge_source = "ledger"
            reply_col = _column(frame, (f"reply_{self.judge}", f"notes_{self.judge}", "reply", "notes"))
            if reply_col is not None:
                data["judge_reply"] = [_text(v) for v in frame[reply_col].tolist()]
        self._items = data

    def _judge_from_ledger(self, keys: list[tuple[str, str]]) -> np.ndarray:
        df = self._ledger_rows()
        out = np.full(len(keys), np.nan)
        if not len(df) or "tag.grader_id" not in df.columns or "tag.item_id" not in df.columns:
            return out
        mine = df[(df["tag.grader_id"] == self.judge).to_numpy(dtype=bool) & df["tag.item_id"].notna().to_numpy()]
        if not len(mine):
            return out
        means = pd.DataFrame({
            "item": mine["tag.item_id"].astype(object).map(item_id_text).to_numpy(),
            "adapter": mine["adapter_id"].astype(str).to_numpy(),
            "score": mine["quality_score"].to_numpy(dtype=float),
        }).groupby(["item", "adapter"])["score"].mean()
        lookup = means.to_dict()
        return np.array([lookup.get(k, np.nan) for k in keys], dtype=float)

    # -- the ledger ----------------------------------------------------------------------------

    def _ledger_rows(self) -> pd.DataFrame:
        path = getattr(self.ledger, "real_path", None)
        if path is not None and not path.exists():
            return pd.DataFrame()
        df = ledger_frame(self.ledger)
        if not len(df):
            return df
        return df[(df["task_type"] == self.task_type).to_numpy(dtype=bool)]

    def _refresh(self) -> None:
        df = self._ledger_rows()
        empty = pd.DataFrame(columns=["key", "annotator", "score"])
        if not len(df) or "tag.grader_id" not in df.columns:
            self._state = _State(set(), set(), set(), None, empty, 0)
            self._replay({})
            self._choose()
            return
        grader = df["tag.grader_id"].astype(object)
        human = df[grader.isin([HUMAN_GRADER_ID, SKIP_GRADER_ID]).to_numpy(dtype=bool)]
        undo = df[(grader == UNDO_GRADER_ID).to_numpy(dtype=bool)]

        def col(part: pd.DataFrame, name: str) -> list[Any]:
            return part[name].astype(object).tolist() if name in part.columns else [None] * len(part)

        undone = {v for v in col(undo, "tag.undoes") if v is not None and v is not pd.NA}
        mine: set[tuple[str, str]] = set()
        others: set[tuple[str, str]] = set()
        plan_done: set[tuple[str, str]] = set()
        rows: list[tuple[tuple[str, str], str, float]] = []
        last: tuple[str, tuple[str, str]] | None = None
        n_mine = 0
        recorded: dict[tuple[str, str], float] = {}
        done_by: dict[tuple[str, str], set[str]] = {}  # who labelled or skipped each item (not undone)
        for item, adapter, who, lid, g, plan, score, prob in zip(
            col(human, "tag.item_id"), human["adapter_id"].astype(str).tolist(), col(human, "tag.annotator"),
            col(human, "tag.label_id"), human["tag.grader_id"].tolist(), col(human, "tag.plan"),
            human["quality_score"].tolist(), col(human, "tag.sampling_probability"), strict=True,
        ):
            text = item_id_text(item)
            if text is None or (lid is not None and lid is not pd.NA and lid in undone):
                continue
            key = (text, adapter)
            if key not in self._index:
                continue
            who_s = str(who) if who is not None and who is not pd.NA else "anonymous"
            is_label = g == HUMAN_GRADER_ID
            done_by.setdefault(key, set()).add(who_s)
            if who_s == self.annotator:
                mine.add(key)
                n_mine += int(is_label)
                if lid is not None and lid is not pd.NA:
                    last = (str(lid), key)
            elif is_label:
                others.add(key)
            if plan == self.plan_id:
                plan_done.add(key)
                if prob is not None and prob is not pd.NA and key not in recorded:
                    recorded[key] = float(prob)
                if is_label:
                    rows.append((key, who_s, float(score)))
        labels = pd.DataFrame(rows, columns=["key", "annotator", "score"]) if rows else empty
        self._state = _State(mine, others, plan_done, last, labels, n_mine)
        self._read_holds(df[(grader == HOLD_GRADER_ID).to_numpy(dtype=bool)], done_by)
        self._replay(recorded)
        self._choose()

    def _read_holds(self, holds: pd.DataFrame, done_by: Mapping[tuple[str, str], set[str]]) -> None:
        """Which items are held, from the hold markers in the ledger's order.

        An annotator holds at most one item: the one of their latest hold. Their hold on it runs from the
        first of their consecutive holds on it (renewals continue it while it has not expired) and is live
        until ``hold_seconds`` after the latest, unless they have labelled or skipped the item. An item
        belongs to the live hold that began first; every other annotator passes it over."""
        if not len(holds):
            return
        now = time.time()
        at = ((holds["recorded_at"] - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).tolist()
        streak: dict[str, tuple[tuple[str, str], int, float, float]] = {}  # annotator -> key, start, time, span
        for pos, (item, adapter, who, since, span) in enumerate(zip(
            _values(holds, "tag.item_id"), holds["adapter_id"].astype(str).tolist(), _values(holds, "tag.annotator"),
            at, _values(holds, "tag.hold_seconds"), strict=True,
        )):
            text = item_id_text(item)
            if text is None or not isinstance(who, str) or not _is_seconds(span):
                continue
            key, before = (text, adapter), streak.get(who)
            start = before[1] if before is not None and before[0] == key and since <= before[2] + before[3] else pos
            streak[who] = (key, start, since, float(span))
        owner: dict[tuple[str, str], tuple[int, str]] = {}  # key -> (start, annotator) of its first live hold
        mine: dict[tuple[str, str], float] = {}
        for who, (key, start, since, span) in streak.items():
            if key not in self._index or who in done_by.get(key, ()) or since + span <= now:
                continue
            if key not in owner or start < owner[key][0]:
                owner[key] = (start, who)
            if who == self.annotator:
                mine[key] = since
        st = self._state
        st.held_by_others = {k for k, (_, who) in owner.items() if who != self.annotator}
        st.my_holds = {k: t for k, t in mine.items() if owner[k][1] == self.annotator}

    def _replay(self, recorded: Mapping[tuple[str, str], float]) -> None:
        """Rebuild the learned ``"active"`` plan from this plan's labels and recorded probabilities."""
        if not self._learned:
            return
        n = len(self._keys)
        y = np.full(n, np.nan)
        labels = self._state.labels
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).mean()
            for key, value in zip(per.index, per.to_numpy(dtype=float), strict=True):
                y[self._index[key]] = value
        rec = np.full(n, np.nan)
        for key, value in recorded.items():
            if math.isfinite(value) and 0 < value <= 1:
                rec[self._index[key]] = value
        self.plan = learned_plan(list(self._items["key_text"]), self._items["judge_score"].to_numpy(dtype=float),
                                 seed=self.seed, labels=y, recorded=rec, floor=self.floor, burn_in=self.burn_in,
                                 bins=self.bins)
        self._queue = self.plan.queue()

    def _choose(self) -> None:
        st = self._state
        if self._pinned is not None and self._keys[self._pinned] not in st.mine:
            self._current = self._pinned
            return
        self._pinned = None
        current = self._current
        if current is not None and self._keys[current] in st.my_holds and self._free(current):
            return  # the item this annotator holds stays shown until it is labelled or skipped
        for i in self._queue:
            if self._free(int(i)):
                self._current = int(i)
                return
        self._current = None

    def _shared(self, i: int) -> bool:
        """Whether item ``i`` is in the ``"overlap"`` share every annotator labels."""
        overlap = self.plan.overlap
        return bool(len(overlap) and overlap[i])

    def _free(self, i: int) -> bool:
        """Whether item ``i`` may be shown to this annotator: not done by them and, outside the overlap share,
        neither labelled by another annotator nor held by one."""
        st, key = self._state, self._keys[i]
        if key in st.mine:
            return False
        return self._shared(i) or (key not in st.labelled_by_others and key not in st.held_by_others)

    def _take(self) -> None:
        """Hold the current item for this annotator (a ``human-hold`` marker), so other annotators pass it over.

        The hold is appended, then the ledger is read again: when another annotator held the item first (in
        the ledger's order: both took it at the same moment), this annotator moves on to the next free item
        and holds that. A hold is renewed once half of ``hold_seconds`` has passed while the item is shown.
        Items of the overlap share are never held; neither is an item brought back by undo that another
        annotator holds by now (it is shown, not contested)."""
        if self.hold_seconds <= 0:
            return
        for _ in range(_MAX_TAKES):
            i = self._current
            if i is None or self._shared(i):
                return
            key = self._keys[i]
            if key in self._state.held_by_others:
                return
            since = self._state.my_holds.get(key)
            if since is not None and time.time() - since < self.hold_seconds / 2:
                return
            self.ledger.append(self._observation(i, HOLD_GRADER_ID, 0.0, {
                "hold_id": uuid.uuid4().hex, "hold_seconds": self.hold_seconds, "plan": self.plan_id}))
            self._refresh()

    def _observation(self, index: int, grader: str, score: float, tags: dict[str, Any]) -> QualityObservation:
        row = self._items.iloc[index]
        return QualityObservation(
            task_type=self.task_type, adapter_id=str(row["adapter_id"]), model_id=str(row["model_id"]),
            cost_usd=0.0, quality_score=float(score), latency_ms=0.0, tokens_in=0, tokens_out=0,
            tags={"grader_id": grader, "item_id": self._ids[index], "annotator": self.annotator,
                  **(self._item_tags[index] if self._item_tags else {}), **tags},
        )

    def _unit_tags(self, index: int) -> dict[str, Any]:
        """What a label of a conversation or of one of its turns says it labels: ``unit``, ``conversation_id``
        and (a turn) ``turn``; nothing for items that are not part of a conversation."""
        row = self._items.iloc[index]
        conversation = row["conversation_id"]
        if conversation is None:
            return {}
        tags: dict[str, Any] = {"unit": self.unit, "conversation_id": canonical_item_id(conversation)}
        turn = row["turn"]
        if self.unit == "turn" and turn is not None:
            turn_id = canonical_item_id(turn)
            tags["turn"] = int(turn_id) if isinstance(turn_id, (int, float)) and not isinstance(turn_id, bool) \
                else turn_id
        return tags

    def _record(self, grader: str, score: float, note: str) -> str:
        if self._current is None:
            raise ValidationError("every item is done: there is nothing to label (undo() brings the last one back)")
        if not isinstance(note, str):
            raise ValidationError(f"note must be text, got {type(note).__name__}")
        i = self._current
        label_id = uuid.uuid4().hex
        tags: dict[str, Any] = {
            "label_id": label_id, "strategy": self.strategy, "seed": self.seed, "plan": self.plan_id,
            "sampling_probability": float(self.plan.prob[i]),
            "stratum": self.plan.stratum_names[int(self.plan.stratum[i])],
            "rank": int(self.plan.rank[i]), "stratum_size": int(self.plan.size[i]),
        }
        if note.strip():
            tags["note"] = note
        tags.update(self._unit_tags(i))
        obs = self._observation(i, grader, score, tags)
        once = getattr(self.ledger, "extend_once", None)
        if callable(once):  # once per item and annotator: another session of this annotator may have labelled it
            recorded = once([obs])
            if not recorded.written[0]:
                what = "labelled" if grader == HUMAN_GRADER_ID else "skipped"
                _log.warning("llm_connect: %s has %s item %r (%s) already, e.g. in another session; not recorded "
                             "again (undo() takes the recorded one back)", self.annotator, what, self._ids[i],
                             self._keys[i][1])
                label_id = recorded.held_ids[0] or label_id
        else:
            self.ledger.append(obs)
        self._pinned = None
        self._refresh()
        return label_id

    # -- the programmatic API ------------------------------------------------------------------

    @property
    def current(self) -> dict[str, Any] | None:
        """The item shown now, as a dict (``item_id``, ``adapter_id``, ``model_id``, ``prompt``,
        ``references``, ``candidate``, ``judge_score``, ``judge_reply``, ``sampling_probability``),
        or None when every item is done. ``item_id`` is the plain Python id (a numpy integer id is an int).

        Showing an item holds it for this annotator (a ``human-hold`` marker, renewed while it is shown):
        other annotators' labellers pass it over until it is labelled, skipped or the hold expires
        (``hold_seconds``); an item another annotator took at the same moment is left to them and the
        next free one is shown."""
        self._take()
        if self._current is None:
            return None
        row = self._items.iloc[self._current]
        score = float(row["judge_score"])
        return {
            "item_id": self._ids[self._current], "adapter_id": row["adapter_id"], "model_id": row["model_id"],
            "prompt": row["prompt"], "references": list(row["references"]), "candidate": row["candidate"],
            "judge_score": None if math.isnan(score) else score, "judge_reply": row["judge_reply"],
            "sampling_probability": float(self.plan.prob[self._current]),
            "reply": row["reply"], "reference_run": row["reference_run"], "messages": row["messages"],
            "context": row["context"], "conversation_id": row["conversation_id"], "turn": row["turn"],
            "unit": self.unit,
        }

    def label(self, score: float, note: str = "") -> str:
        """Label the current item: 1.0 correct, 0.0 incorrect, anything between partial. Appends the
        label to the ledger at once, moves on, and returns the label's id."""
        if isinstance(score, bool):
            score = float(score)
        if not isinstance(score, (int, float, np.number)) or not math.isfinite(float(score)) or not (
                0.0 <= float(score) <= 1.0):
            raise ValidationError(f"a label is a score in 0..1 (1 correct, 0 incorrect, between: partial), "
                                  f"got {score!r}")
        return self._record(HUMAN_GRADER_ID, float(score), note)

    def skip(self, note: str = "") -> str:
        """Skip the current item (recorded, so it is not shown to this annotator again; undo brings it back)."""
        return self._record(SKIP_GRADER_ID, 0.0, note)

    def undo(self) -> dict[str, Any] | None:
        """Take back this annotator's last label or skip (an ``undoes`` marker is appended; nothing is
        deleted) and show that item again. Returns it, or None when there is nothing to undo."""
        self._refresh()
        last = self._state.last_action
        if last is None:
            return None
        label_id, key = last
        index = self._index[key]
        self.ledger.append(self._observation(index, UNDO_GRADER_ID, 0.0, {"undoes": label_id, "plan": self.plan_id}))
        self._pinned = index
        self._refresh()
        return self.current

    @property
    def n_labelled(self) -> int:
        """How many of these items this annotator has labelled (skips and undone labels not counted)."""
        return self._state.n_mine

    @property
    def n_total(self) -> int:
        """How many items this labeller shows in all (for ``"active"``: the ones its draws select; with the
        learned rule a projection from the labels so far, which moves as labels come in)."""
        return len(self._queue)

    def progress(self) -> dict[str, Any]:
        """Where labelling stands: ``text`` (e.g. "41 labelled; interval width now 0.09; about 60 more
        for 0.05"), ``n_labelled`` (this annotator), ``n_plan_labels`` (everyone under this plan),
        ``n_total``, ``n_left`` (items of the plan still to show), ``width`` (the current interval's
        width, NaN before 2 labels), ``target_width``, ``more`` (labels still needed for it; None when
        unknown) and ``reachable`` (False when ``more`` exceeds the items left, None when unknown).

        The text gives a width only once it means something: with fewer than
        10 labels under the plan, or a width of 1 or more, the normal
        interval is not yet a statement about the mean, so it says "interval width needs about 10
        labels". When the labels needed exceed the items left, it says the target is out of reach and
        about how wide labelling all of them would leave the interval (the width scaled as
        ``1/sqrt(labels)``; for ``"random"`` with a judge, PPI++'s ``(1 − ρ²)/n + ρ²/M``)."""
        n = self.n_labelled
        width, more = math.nan, None
        n_plan = int(self._state.labels["key"].nunique()) if len(self._state.labels) else 0
        if n_plan >= 2:
            est = self.estimate()
            row = est.iloc[0]
            width = float(row["ci_high"] - row["ci_low"])
            if math.isfinite(width) and width > 0:
                more = self._more_for(width, n_plan)
        left = self._n_left()
        reachable = None if more is None else more <= left
        text = f"{n} labelled"
        target = f"{self.target_width:.2f}"
        if n_plan < _MIN_LABELS_FOR_WIDTH or not math.isfinite(width) or width >= 1:
            text += f"; interval width needs about {_MIN_LABELS_FOR_WIDTH} labels"
        else:
            text += f"; interval width now {width:.2f}"
            if more is not None and more > left:
                reach = self._width_with(width, n_plan, left)
                text += (f"; {target} is out of reach: all {left} items left would give about {reach:.2f}" if left
                         else f"; {target} is out of reach: no items left")
            elif more is not None:
                text += f"; about {more} more for {target}" if more > 0 else f"; narrower than {target}"
        if self._current is None:
            text += "; all items done"
        return {"text": text, "n_labelled": n, "n_plan_labels": n_plan, "n_total": self.n_total, "n_left": left,
                "width": width, "target_width": self.target_width, "more": more, "reachable": reachable}

    def _n_left(self) -> int:
        """Items of the plan still to show to anyone: queued, not yet labelled or skipped under the plan
        (nor labelled elsewhere, outside the overlap share)."""
        st = self._state
        overlap = self.plan.overlap
        return sum(1 for i in self._queue if self._keys[i] not in st.plan_done and self._keys[i] not in st.mine
                   and (self._keys[i] not in st.labelled_by_others or (len(overlap) and overlap[i])))

    def _width_with(self, width: float, n_plan: int, left: int) -> float:
        """About the width with ``left`` more labels: ``1/sqrt(labels)``, or PPI++'s
        ``var(Y)·((1 − ρ²)/n + ρ²/M)`` (:func:`~llm_connect.calibration.labels_needed`) for ``"random"``
        and ``"overlap"`` with a judge, with ``ρ`` the judge–label correlation on the labels."""
        total = n_plan + left
        if self.judge is not None and self.strategy in ("random", "overlap"):
            frame = self.frame()
            lab = frame[frame["human"].notna() & frame["judge"].notna()]
            m = int(frame["judge"].notna().sum())
            rho2 = 0.0
            if len(lab) >= 3 and lab["judge"].std() > 0 and lab["human"].std() > 0:
                rho2 = float(np.corrcoef(lab["judge"], lab["human"])[0, 1] ** 2)
            if m > 0:
                now, then = (1 - rho2) / n_plan + rho2 / m, (1 - rho2) / total + rho2 / m
                return width * math.sqrt(then / now)
        return width * math.sqrt(n_plan / total)

    def _more_for(self, width: float, n_plan: int) -> int | None:
        if self.judge is not None and self.strategy in ("random", "overlap") and n_plan >= 2:
            frame = self.frame()
            plan = labels_needed(frame, judge="judge", human="human", width=self.target_width,
                                 confidence=self.confidence, pool="data")
            value = plan.loc[plan["method"] == "ppi++", "more_labels"]
            if len(value) and value.notna().all():
                return int(value.iloc[0])
            return None
        # weighted designs (and no judge): the width shrinks as 1/sqrt(labels)
        return max(math.ceil(n_plan * (width / self.target_width) ** 2) - n_plan, 0)

    # -- results -------------------------------------------------------------------------------

    def frame(self) -> pd.DataFrame:
        """One row per item: ``item_id``, ``adapter_id``, ``model_id``, ``group``, ``stratum``,
        ``judge`` (its score; 0 for every item when there is no judge), ``human`` (the mean label
        under this plan, NaN when unlabelled), ``prediction`` (what the estimates use as the judge: the
        score itself, or for the learned ``"active"`` rule the judge calibrated on the labels with each
        item's own label left out, :func:`calibrated_scores`), ``n_labels``, ``sampling_probability``
        (``π_i``: for a shown item the one it was shown with) and
        ``inclusion_probability`` (``π_i · K_s / N_s``, the ``weights=`` column of
        :func:`~llm_connect.calibration.estimate_quality`; ``df.attrs["weights"]`` names it)."""
        self._refresh()
        items = self._items
        labels = self._state.labels
        human = np.full(len(items), np.nan)
        n_labels = np.zeros(len(items), dtype=np.int64)
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).agg(
                ["mean", "size"])
            for key, mean, size in zip(per.index, per["mean"], per["size"], strict=True):
                human[self._index[key]] = mean
                n_labels[self._index[key]] = size
        done = np.array([k in self._state.plan_done for k in self._keys], dtype=bool)
        judge = items["judge_score"].to_numpy(dtype=float) if self.judge is not None else np.zeros(len(items))
        prediction = calibrated_scores(judge, human, bins=self.bins)[0] if self._learned else judge
        out = pd.DataFrame({
            "item_id": items["item_id"].map(item_id_text), "adapter_id": items["adapter_id"],
            "model_id": items["model_id"], "group": items["group"],
            "stratum": [self.plan.stratum_names[s] for s in self.plan.stratum],
            "judge": judge, "prediction": prediction, "human": human, "n_labels": n_labels,
            "sampling_probability": self.plan.prob, "inclusion_probability": self.plan.inclusion(done),
        })
        out.attrs["weights"] = "inclusion_probability"
        return out

    def _weighted(self) -> bool:
        return self.strategy != "random"

    def estimate(self, by: str | Sequence[str] | None = None, **kwargs: Any) -> pd.DataFrame:
        """:func:`~llm_connect.calibration.estimate_quality` on :meth:`frame` with the right weights:
        none for ``"random"``; ``inclusion_probability`` otherwise. ``by`` names columns of the frame
        (e.g. ``"model_id"``). Without a judge only the human-only interval is given. Other keyword
        arguments (``methods``, ``confidence``) go through."""
        frame = self.frame()
        kwargs.setdefault("confidence", self.confidence)
        if self.judge is None:
            kwargs["methods"] = ("human",)
        else:
            kwargs.setdefault("methods", ("ppi++", "human", "judge"))
        weights = "inclusion_probability" if self._weighted() else None
        if self.strategy == "stratified" and by is not None and (by == "group" or by == ["group"]):
            weights = None  # within a group the labels are a simple random sample
        methods = kwargs.pop("methods")
        methods = (methods,) if isinstance(methods, str) else tuple(methods)
        if not self._learned or methods == ("judge",):
            return estimate_quality(frame, judge="judge", human="human", by=by, weights=weights, methods=methods,
                                    **kwargs)
        # the learned rule: label-based methods on the calibrated judge, the judge's own mean on its scores
        label_based = [m for m in methods if m != "judge"]
        parts = [estimate_quality(frame, judge="prediction", human="human", by=by, weights=weights,
                                  methods=label_based, **kwargs)]
        if "judge" in methods:
            parts.append(estimate_quality(frame, judge="judge", human="human", by=by, weights=weights,
                                          methods=("judge",), **kwargs))
        out = pd.concat(parts, ignore_index=True)
        rank = {m: i for i, m in enumerate(methods)}
        by_cols = [] if by is None else ([by] if isinstance(by, str) else list(by))
        key = out["method"].map(rank)
        out = out.assign(_m=key).sort_values([*by_cols, "_m"], kind="stable").drop(columns="_m")
        return out.reset_index(drop=True)

    def agreement(self, threshold: float = 0.5) -> dict[str, Any]:
        """Inter-annotator agreement over items labelled by two or more annotators under this plan:
        ``n_items``, ``n_annotators``, ``percent_agreement`` (share of agreeing annotator pairs, verdicts
        at ``threshold``) and ``alpha`` (Krippendorff's alpha, nominal; Krippendorff 2011,
        *Computing Krippendorff's Alpha-Reliability*). NaN when no item has two annotators."""
        self._refresh()
        labels = self._state.labels
        per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().reset_index()
        multi = per[per.groupby("key")["annotator"].transform("size") > 1]
        result: dict[str, Any] = {"n_items": int(multi["key"].nunique()) if len(multi) else 0,
                                  "n_annotators": int(per["annotator"].nunique()) if len(per) else 0,
                                  "percent_agreement": math.nan, "alpha": math.nan}
        if not len(multi):
            return result
        yes = (multi["score"] >= threshold).astype(float)
        counts = pd.DataFrame({"key": multi["key"], "yes": yes}).groupby("key")["yes"].agg(["sum", "size"])
        n, k = counts["size"].to_numpy(float), counts["sum"].to_numpy(float)
        pairs = n * (n - 1) / 2
        agree = (k * (k - 1) + (n - k) * (n - k - 1)) / 2
        result["percent_agreement"] = float(agree.sum() / pairs.sum())
        matrix = pd.DataFrame({"key": multi["key"], "annotator": multi["annotator"], "yes": yes}).pivot_table(
            index="annotator", columns="key", values="yes", aggfunc="first")
        values = matrix.to_numpy(dtype=float)
        if np.unique(values[np.isfinite(values)]).size >= 2:
            import krippendorff

            result["alpha"] = float(krippendorff.alpha(reliability_data=values, level_of_measurement="nominal"))
        elif np.isfinite(values).any():
            result["alpha"] = 1.0 if result["percent_agreement"] == 1.0 else math.nan
        return result

    # -- display -------------------------------------------------------------------------------

    def item_html(self) -> str:
        """The current item as HTML (every text escaped); the done message when all are done. Drawn by
        :func:`llm_connect.views.labeller_item_html`."""
        return str(view("labeller_item_html")(self))

    def _repr_html_(self) -> str:
        return str(view("labeller_html")(self))

    def __repr__(self) -> str:
        return (f"Labeller(annotator={self.annotator!r}, task_type={self.task_type!r}, strategy={self.strategy!r}, "
                f"labelled={self.n_labelled}/{self.n_total})")

    # -- the widget ----------------------------------------------------------------------------

    def widget(self) -> Any:
        """The labelling widget (ipywidgets): the item, buttons Correct / Incorrect / Partial (with the
        score slider) / Skip / Undo / Show judge, a note, the progress line. Keyboard shortcuts with
        ``ipyevents`` installed (hover over the item): ``c`` correct, ``x`` incorrect, ``p`` partial,
        ``s`` skip, ``u`` undo, ``j`` show/hide the judge. CSS classes for scripts and tests: root
        ``llmc-labeller``; ``llmc-correct``, ``llmc-incorrect``, ``llmc-partial``, ``llmc-skip``,
        ``llmc-undo``, ``llmc-reveal``, ``llmc-partial-score``, ``llmc-note``, ``llmc-item``,
        ``llmc-progress``. The returned box has a ``controls`` attribute naming them. Drawn by
        :func:`llm_connect.views.labeller_widget`; it needs the ``notebooks`` extra (ipywidgets)."""
        return view("labeller_widget")(self)
