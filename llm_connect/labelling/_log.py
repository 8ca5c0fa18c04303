"""What a :class:`~llm_connect.labelling.Labeller` keeps in the ledger, and the state it reads back from it.

Every action is one appended :class:`~llm_connect.quality.QualityObservation` of the labeller's
``task_type``, with the candidate's ``adapter_id`` / ``model_id`` chosen exactly as
:func:`~llm_connect.grading.judge_many` chooses them, so :func:`~llm_connect.frames.paired_frame` joins
labels with the judge's observations on (``item_id``, ``adapter_id``):

- a **label**: grader ``human`` (``quality_score`` the label in 0..1), tags ``grader_id``, ``item_id``,
  ``annotator``, ``label_id`` (unique), ``strategy``, ``seed``, ``plan`` (an id of the sampling plan),
  ``sampling_probability``, ``stratum``, ``rank``, ``stratum_size`` and ``note`` when one was written
  (and ``unit``, ``conversation_id``, ``turn`` for turns and conversations); recorded once per item and
  annotator (:meth:`~llm_connect.quality.BaseLedger.extend_once`);
- a **skip**: grader ``human-skip`` (score 0, never read as a label), the same tags;
- an **undo**: grader ``human-undo`` (score 0) with tag ``undoes=<label_id>``: the ledger stays append-only,
  and :func:`~llm_connect.frames.paired_frame` and the labeller leave an undone label (or skip) out;
- a **hold**: grader ``human-hold`` (score 0), tags ``item_id``, ``annotator``, ``hold_id``, ``hold_seconds``
  and ``plan``, written when an item is shown, so other annotators pass it over.

Skip, undo and hold markers are people's records, never a judge's score nor a label: routing,
``llm-connect ledger stats`` and :func:`~llm_connect.frames.paired_frame` leave them out. How holds are read
is :meth:`LabelLog.read`'s; the guide (``docs/guides/labelling.md``) tells the whole story.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..frames import HOLD_GRADER_ID, HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID, ledger_frame
from ..items import canonical_item_id, item_id_text
from ..quality import BaseLedger, QualityObservation
from ._items import LabelItems

__all__ = ["LabelLog", "LabelState"]


def _values(part: pd.DataFrame, name: str) -> list[Any]:
    """Column ``name`` of ``part`` as Python objects (``None`` for each row when there is no such column)."""
    return part[name].astype(object).tolist() if name in part.columns else [None] * len(part)


def _is_seconds(value: Any) -> bool:
    """Whether a ``hold_seconds`` tag is a usable span (a finite number of seconds > 0)."""
    return (isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
            and math.isfinite(float(value)) and float(value) > 0)


@dataclass
class LabelState:
    """What the ledger says of a Labeller's items, for one annotator and one plan."""

    mine: set[tuple[str, str]]  # done (labelled or skipped) by this annotator, not undone
    labelled_by_others: set[tuple[str, str]]
    plan_done: set[tuple[str, str]]  # done by anyone under this plan
    last_action: tuple[str, tuple[str, str]] | None  # (label_id, key) of this annotator's last action
    labels: pd.DataFrame  # this plan's labels, not undone: key, annotator, score
    n_mine: int
    held_by_others: set[tuple[str, str]] = field(default_factory=set)  # whose first live hold is another's
    my_holds: dict[tuple[str, str], float] = field(default_factory=dict)  # the item I hold: my latest hold's time


class LabelLog:
    """The ledger of one annotator's labels of one task type: what is appended, and what is read back."""

    def __init__(self, ledger: BaseLedger, *, task_type: str, annotator: str) -> None:
        self.ledger = ledger
        self.task_type = task_type
        self.annotator = annotator

    def rows(self) -> pd.DataFrame:
        """The ledger's observations of the task type (empty when the ledger file does not exist yet)."""
        path = getattr(self.ledger, "real_path", None)
        if path is not None and not path.exists():
            return pd.DataFrame()
        df = ledger_frame(self.ledger)
        if not len(df):
            return df
        return df[(df["task_type"] == self.task_type).to_numpy(dtype=bool)]

    def read(self, items: LabelItems, plan_id: str) -> tuple[LabelState, dict[tuple[str, str], float]]:
        """What the ledger says now: the :class:`LabelState` of ``items`` under ``plan_id``, and the sampling
        probability recorded with each item's first label under the plan (to replay a learned plan)."""
        df = self.rows()
        empty = pd.DataFrame(columns=["key", "annotator", "score"])
        if not len(df) or "tag.grader_id" not in df.columns:
            return LabelState(set(), set(), set(), None, empty, 0), {}
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
            if key not in items.index:
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
            if plan == plan_id:
                plan_done.add(key)
                if prob is not None and prob is not pd.NA and key not in recorded:
                    recorded[key] = float(prob)
                if is_label:
                    rows.append((key, who_s, float(score)))
        labels = pd.DataFrame(rows, columns=["key", "annotator", "score"]) if rows else empty
        state = LabelState(mine, others, plan_done, last, labels, n_mine)
        self._read_holds(state, items, df[(grader == HOLD_GRADER_ID).to_numpy(dtype=bool)], done_by)
        return state, recorded

    def _read_holds(self, state: LabelState, items: LabelItems, holds: pd.DataFrame,
                    done_by: Mapping[tuple[str, str], set[str]]) -> None:
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
            if key not in items.index or who in done_by.get(key, ()) or since + span <= now:
                continue
            if key not in owner or start < owner[key][0]:
                owner[key] = (start, who)
            if who == self.annotator:
                mine[key] = since
        state.held_by_others = {k for k, (_, who) in owner.items() if who != self.annotator}
        state.my_holds = {k: t for k, t in mine.items() if owner[k][1] == self.annotator}

    def observation(self, items: LabelItems, index: int, grader: str, score: float,
                    tags: dict[str, Any]) -> QualityObservation:
        """The observation of one action on item ``index`` (grader ``human``, ``human-skip``, ...)."""
        row = items.frame.iloc[index]
        return QualityObservation(
            task_type=self.task_type, adapter_id=str(row["adapter_id"]), model_id=str(row["model_id"]),
            cost_usd=0.0, quality_score=float(score), latency_ms=0.0, tokens_in=0, tokens_out=0,
            tags={"grader_id": grader, "item_id": items.ids[index], "annotator": self.annotator,
                  **(items.tags[index] if items.tags else {}), **tags},
        )

    @staticmethod
    def unit_tags(items: LabelItems, index: int, unit: str) -> dict[str, Any]:
        """What a label of a conversation or of one of its turns says it labels: ``unit``, ``conversation_id``
        and (a turn) ``turn``; nothing for items that are not part of a conversation."""
        row = items.frame.iloc[index]
        conversation = row["conversation_id"]
        if conversation is None:
            return {}
        tags: dict[str, Any] = {"unit": unit, "conversation_id": canonical_item_id(conversation)}
        turn = row["turn"]
        if unit == "turn" and turn is not None:
            turn_id = canonical_item_id(turn)
            tags["turn"] = int(turn_id) if isinstance(turn_id, (int, float)) and not isinstance(turn_id, bool) \
                else turn_id
        return tags
