"""Which item a :class:`~llm_connect.labelling.Labeller` shows next: its seeded sampling plan, the queue the
plan walks, and the rule that passes over items already done, labelled by another annotator or held by one.

The designs (``"random"``, ``"stratified"``, ``"active"``, ``"overlap"``, ``"abstained"``) are statistics on
arrays, in :mod:`llm_connect.stats.sampling`: what each does, its inclusion probabilities, and when ``"active"``
pays. The learned ``"active"`` plan is replayed from the ledger (a shown item keeps the ``π`` recorded with its
label), so a restarted kernel resumes it. An item passed over because it was skipped, or shown to an annotator
who has not answered yet, counts as visited and unlabelled.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..stats.sampling import active_probabilities, learned_plan, make_plan, residual_walk
from ._items import LabelItems
from ._log import LabelState

__all__ = ["LabelQueue"]


class LabelQueue:
    """The plan of a Labeller's items (:func:`~llm_connect.stats.sampling.make_plan`, or the learned
    ``"active"`` plan), its id (``plan_id``: the labels given under it carry it), the queue it walks, the
    item shown now (``current``) and one brought back by undo (``pinned``).

    Raises
    ------
    ValidationError
        ``strategy="active"`` without the judge's scores or a column of uncertainty.
    """

    def __init__(self, items: LabelItems, *, strategy: str, seed: int, group: str | None, overlap: float,
                 floor: float, uncertainty: str | None, burn_in: int, bins: int, unit: str,
                 priority: np.ndarray | None) -> None:
        frame = items.frame
        self.seed, self.floor, self.burn_in, self.bins = seed, floor, burn_in, bins
        self.learned = strategy == "active" and uncertainty is None
        probs = None
        if strategy == "active":
            u = frame["uncertainty"] if uncertainty not in (None, "judge") else None
            if u is None and frame["judge_score"].isna().all():
                raise ValidationError(
                    "strategy='active' needs the judge's scores: pass grader_id='GRADER_ID' with a score column "
                    "(GRADER_ID or score_GRADER_ID) in items or its observations in the ledger, or uncertainty="
                    "'COLUMN'"
                )
            if self.learned:  # checked now, replayed from the ledger in replay()
                residual_walk(np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1), dtype=np.intp), np.full(1, np.nan),
                              floor=floor, burn_in=burn_in, bins=bins)
            else:  # the fixed rule: the judge's own sqrt(s(1 - s)) (uncertainty="judge") or the column
                probs = active_probabilities(frame["judge_score"].to_numpy(dtype=float),
                                             uncertainty=None if u is None else u.to_numpy(dtype=float), floor=floor)
        self.plan = make_plan(list(frame["key_text"]), strategy=strategy, seed=seed,
                              probabilities=probs if not self.learned else np.ones(len(frame)),
                              groups=frame["group"] if strategy == "stratified" else None,
                              overlap=overlap, priority=priority)
        plan_key: tuple[Any, ...] = (strategy, seed, overlap if strategy == "overlap" else None,
                                     floor if strategy == "active" else None, group)
        if unit != "turn":  # a plan of conversations is another plan (the turn plan keeps its old id)
            plan_key += (("unit", unit),)
        if strategy == "active":
            plan_key += (("learned", burn_in, bins) if self.learned else ("uncertainty", uncertainty),)
        digest = hashlib.blake2b(repr(plan_key).encode(), digest_size=6).hexdigest()
        self.plan_id = f"{strategy}-{seed}-{digest}"
        self.keys = items.keys
        self.queue = self.plan.queue()
        self.pinned: int | None = None  # an item brought back by undo
        self.current: int | None = None

    def replay(self, items: LabelItems, state: LabelState, recorded: Mapping[tuple[str, str], float]) -> None:
        """Rebuild the learned ``"active"`` plan from this plan's labels and recorded probabilities."""
        if not self.learned:
            return
        n = len(self.keys)
        y = np.full(n, np.nan)
        labels = state.labels
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).mean()
            for key, value in zip(per.index, per.to_numpy(dtype=float), strict=True):
                y[items.index[key]] = value
        rec = np.full(n, np.nan)
        for key, value in recorded.items():
            if math.isfinite(value) and 0 < value <= 1:
                rec[items.index[key]] = value
        self.plan = learned_plan(list(items.frame["key_text"]), items.frame["judge_score"].to_numpy(dtype=float),
                                 seed=self.seed, labels=y, recorded=rec, floor=self.floor, burn_in=self.burn_in,
                                 bins=self.bins)
        self.queue = self.plan.queue()

    def choose(self, state: LabelState) -> None:
        """Set :attr:`current`: the item brought back by undo, else the item this annotator holds, else the
        first free item of the queue (``None`` when every item is done)."""
        if self.pinned is not None and self.keys[self.pinned] not in state.mine:
            self.current = self.pinned
            return
        self.pinned = None
        current = self.current
        if current is not None and self.keys[current] in state.my_holds and self.free(current, state):
            return  # the item this annotator holds stays shown until it is labelled or skipped
        for i in self.queue:
            if self.free(int(i), state):
                self.current = int(i)
                return
        self.current = None

    def shared(self, i: int) -> bool:
        """Whether item ``i`` is in the ``"overlap"`` share every annotator labels."""
        overlap = self.plan.overlap
        return bool(len(overlap) and overlap[i])

    def free(self, i: int, state: LabelState) -> bool:
        """Whether item ``i`` may be shown to this annotator: not done by them and, outside the overlap share,
        neither labelled by another annotator nor held by one."""
        key = self.keys[i]
        if key in state.mine:
            return False
        return self.shared(i) or (key not in state.labelled_by_others and key not in state.held_by_others)

    def n_left(self, state: LabelState) -> int:
        """Items of the plan still to show to anyone: queued, not yet labelled or skipped under the plan
        (nor labelled elsewhere, outside the overlap share)."""
        overlap = self.plan.overlap
        return sum(1 for i in self.queue if self.keys[i] not in state.plan_done and self.keys[i] not in state.mine
                   and (self.keys[i] not in state.labelled_by_others or (len(overlap) and overlap[i])))
