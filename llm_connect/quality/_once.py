"""Recording once: the key of a judgment or a label, and the keys a ledger already holds.

Every entry point that records judgments or labels (``judge_many``, ``grade_many``, ``record_labels``,
``grade_dataset``, the Labeller, the ``grade`` and ``calibrate`` commands) writes through
:meth:`~llm_connect.quality.BaseLedger.extend_once`, which skips what the ledger already holds, so running
a command again adds nothing. ``append`` and ``extend`` keep their contract: they append what they are given.

What is one record
------------------
- A **judgment** (tags ``grader_id`` and ``item_id``, no ``annotator``) is recorded once per task type,
  item, grader, rubric (``tags["rubric_hash"]``, absent for a judge without one) and candidate
  (``adapter_id``, ``model_id``) against one baseline (``baseline_adapter_id``). Its epochs, run id, cost
  and score are not part of the key: the first record of a judgment stands.
- A **label** (tags ``grader_id``, ``item_id`` and ``annotator``: :func:`~llm_connect.frames.record_labels`
  and the Labeller write them) is recorded once per task type, item, candidate, grader id (``"human"``, or
  the Labeller's ``human-skip``, which are never confused with each other) and annotator. A label taken back
  by an undo marker (tag ``undoes`` naming its ``label_id``) is no longer held: the item may be labelled again.
- Anything else (no ``item_id`` or no ``grader_id``) has no key and is always written.

Item ids are matched on their text as :func:`llm_connect.items.item_id_text` matches them (``1``, ``1.0`` and
``"1"`` are one item). A key is kept as a 16-byte digest: holding the keys of 100,000 records takes about
15 MB, not the records.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ._observation import QualityObservation

__all__ = ["HeldKeys", "Recorded", "id_text", "record_key"]

_digest = partial(hashlib.blake2b, digest_size=16)


def id_text(value: Any) -> str | None:
    """The text an item id stored in a ledger's tags is matched on (``None`` when missing): what
    :func:`llm_connect.items.item_id_text` gives for a JSON value (a whole float is its int)."""
    if value is None:
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
    return value if isinstance(value, str) else str(value)


def record_key(o: QualityObservation) -> tuple[bool, bytes] | None:
    """``(is_label, digest of its key)`` of a judgment or a label (see the module docs), ``None`` for an
    observation that has no key (it is always written)."""
    tags = o.tags
    if not tags:
        return None
    grader = tags.get("grader_id")
    item = id_text(tags.get("item_id"))
    if not isinstance(grader, str) or item is None:
        return None
    if "annotator" in tags:
        parts: tuple[Any, ...] = ("label", o.task_type, item, o.adapter_id, o.model_id, grader, str(tags["annotator"]))
        is_label = True
    else:
        parts = ("judgment", o.task_type, item, o.adapter_id, o.model_id, o.baseline_adapter_id, grader,
                 tags.get("rubric_hash"))
        is_label = False
    # the repr of a tuple of texts (and None, or a rubric hash of another JSON type) says which texts it holds
    return is_label, _digest(repr(parts).encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class Recorded:
    """What :meth:`~llm_connect.quality.BaseLedger.extend_once` did with the observations it was given.

    Parameters
    ----------
    written : tuple of bool
        For each, in order, whether it was written (``False``: the ledger already held its key, or an
        earlier observation of the same call had it).
    held : tuple of (float or None)
        For each one not written, the score of the record that stands (``None`` for those written).
    held_ids : tuple of (str or None)
        And its ``label_id`` (a Labeller's label; ``None`` otherwise).
    differing : int, default 0
        How many of those not written have another score than the record that stands (a changed label is
        not recorded again: the first stands until it is taken back, e.g. by
        :meth:`~llm_connect.labelling.Labeller.undo`).
    """

    written: tuple[bool, ...]
    held: tuple[float | None, ...]
    held_ids: tuple[str | None, ...]
    differing: int = 0

    @property
    def n_written(self) -> int:
        """How many observations were written."""
        return sum(self.written)

    @property
    def n_held(self) -> int:
        """How many were not written because the ledger already held them."""
        return len(self.written) - self.n_written

    @classmethod
    def all_written(cls, n: int) -> Recorded:
        """``n`` observations, every one written.

        Parameters
        ----------
        n : int
            How many.

        Returns
        -------
        Recorded
            The record of it.
        """
        return cls((True,) * n, (None,) * n, (None,) * n)


class HeldKeys:
    """The keys of the judgments and live labels a ledger holds (built by :meth:`add`, one observation at a
    time, in the ledger's order), and :meth:`select`: which of a batch to write."""

    __slots__ = ("_judgments", "_labels", "_undone")

    def __init__(self) -> None:
        self._judgments: dict[bytes, float] = {}  # key -> score of the first record
        self._labels: dict[bytes, dict[str | None, float]] = {}  # key -> label id -> score, in order
        self._undone: set[str] = set()

    def __len__(self) -> int:
        return len(self._judgments) + len(self._labels)

    def add(self, o: QualityObservation) -> None:
        """Take one observation of the ledger into account (adding one twice changes nothing)."""
        tags = o.tags
        if not tags:
            return
        undoes = tags.get("undoes")
        if isinstance(undoes, str):
            self._undone.add(undoes)
        key = record_key(o)
        if key is None:
            return
        is_label, digest = key
        if is_label:
            lid = tags.get("label_id")
            self._labels.setdefault(digest, {}).setdefault(lid if isinstance(lid, str) else None, o.quality_score)
        else:
            self._judgments.setdefault(digest, o.quality_score)

    def update(self, observations: Iterable[QualityObservation]) -> None:
        for o in observations:
            self.add(o)

    def held(self, key: tuple[bool, bytes]) -> tuple[str | None, float] | None:
        """``(label id, score)`` of the record that stands for ``key``, or ``None`` when none does."""
        is_label, digest = key
        if not is_label:
            score = self._judgments.get(digest)
            return None if score is None else (None, score)
        for lid, score in self._labels.get(digest, {}).items():
            if lid is None or lid not in self._undone:
                return lid, score
        return None

    def select(self, observations: Sequence[QualityObservation]) -> tuple[list[int], Recorded]:
        """Which of ``observations`` to write (their positions) and the :class:`Recorded` that says so: those
        whose key the ledger does not hold, the first of several with one key."""
        keep: list[int] = []
        written: list[bool] = []
        held: list[float | None] = []
        ids: list[str | None] = []
        differing = 0
        batch: dict[bytes, tuple[str | None, float]] = {}
        for i, o in enumerate(observations):
            key = record_key(o)
            standing = None if key is None else (self.held(key) or batch.get(key[1]))
            if standing is None:
                keep.append(i)
                written.append(True)
                held.append(None)
                ids.append(None)
                if key is not None:
                    lid = o.tags.get("label_id")
                    batch[key[1]] = (lid if isinstance(lid, str) else None, o.quality_score)
                continue
            written.append(False)
            held.append(standing[1])
            ids.append(standing[0])
            differing += standing[1] != o.quality_score
        return keep, Recorded(tuple(written), tuple(held), tuple(ids), differing)
