"""``BaseLedger``: what every quality ledger offers, and the queries written once for all of them.

:class:`~llm_connect.quality.QualityLedger` (one JSON Lines file under a file
lock) and :class:`~llm_connect.quality.ParquetLedger` (a lock-free Parquet
dataset many writers share) both derive from it, so code that reads a ledger
(``ledger_frame``, ``route``, ``evidence_table``, ``paired_frame``,
``record_labels``, ``judge_many(ledger=...)``) takes either: it checks
``isinstance(x, BaseLedger)`` and calls only the methods below.

A subclass provides ``append``, ``extend``, ``iter_observations``,
``malformed_count`` and ``prune_before``; ``read_all``, ``by_task_type``,
``recent`` and ``mean_quality`` are built here on ``_matching`` (by default
``iter_observations`` filtered by task type; a ledger partitioned by task type
reads only that partition). ``extend_once`` (record what the ledger does not
hold yet, :mod:`._once`) is built here on ``iter_observations`` and ``extend``;
both subclasses do it under their lock, reading only what is new.
"""

from __future__ import annotations

import heapq
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from numbers import Integral
from pathlib import Path

from ..errors import ValidationError
from ._observation import QualityObservation, as_utc, is_stale, utc_now
from ._once import HeldKeys, Recorded, record_key

__all__ = ["BaseLedger", "is_parquet_location"]


class BaseLedger(ABC):
    """The interface of a quality ledger: append observations, read them back, query and prune them."""

    @abstractmethod
    def append(self, observation: QualityObservation) -> None:
        """Record one observation.

        Parameters
        ----------
        observation : QualityObservation
            The observation.
        """

    @abstractmethod
    def extend(self, observations: Sequence[QualityObservation]) -> None:
        """Record several observations at once.

        Parameters
        ----------
        observations : sequence of QualityObservation
            The observations, in order.
        """

    @abstractmethod
    def iter_observations(self) -> Iterator[QualityObservation]:
        """The valid observations, skipping malformed records.

        Returns
        -------
        iterator of QualityObservation
            The observations, in the ledger's order.
        """

    @abstractmethod
    def malformed_count(self) -> int:
        """How many records, at call time, are not valid observations.

        Returns
        -------
        int
            The count.
        """

    @abstractmethod
    def prune_before(self, timestamp: datetime) -> int:
        """Remove valid observations with ``recorded_at < timestamp``.

        Parameters
        ----------
        timestamp : datetime
            The cut (a naive one is UTC).

        Returns
        -------
        int
            How many were removed.
        """

    def extend_once(self, observations: Iterable[QualityObservation]) -> Recorded:
        """Record the observations the ledger does not hold yet: each judgment once per item, grader, rubric
        and candidate, each label once per item and annotator (see :mod:`llm_connect.quality._once`);
        observations without such a key are always written.

        This is how ``judge_many``, ``record_labels``, ``grade_dataset``, the Labeller and the CLI record, so
        running them again adds nothing. :meth:`append` and :meth:`extend` still append what they are given.

        Parameters
        ----------
        observations
            The observations to record, in order. An earlier one with the same key as a later one wins.

        Returns
        -------
        Recorded
            Which were written, and for the others the score (and label id) of the record that stands.

        Raises
        ------
        TypeError
            When one of them is not a :class:`QualityObservation` (nothing is written).

        Notes
        -----
        :class:`QualityLedger` reads the keys and writes under its file lock, so concurrent writers on
        one host never record one key twice; it keeps the keys it has read and reads only what was appended
        since. :class:`ParquetLedger` does the same under a lock file in a local root; on an object store the
        check takes no lock (two writers recording one key at the same moment may both write it). This
        default reads the whole ledger, without a lock.
        """
        items = _observations_of(observations, "extend_once()")
        if not items or all(record_key(o) is None for o in items):
            if items:
                self.extend(items)
            return Recorded.all_written(len(items))
        held = HeldKeys()
        held.update(self.iter_observations())
        keep, recorded = held.select(items)
        if keep:
            self.extend([items[i] for i in keep])
        return recorded

    def __iter__(self) -> Iterator[QualityObservation]:
        return self.iter_observations()

    def _matching(self, task_type: str | None) -> Iterable[QualityObservation]:
        """The observations of ``task_type`` (all when ``None``), in read order."""
        if task_type is None:
            return self.iter_observations()
        return (o for o in self.iter_observations() if o.task_type == task_type)

    def read_all(self) -> list[QualityObservation]:
        """Every valid observation, in the ledger's order.

        Returns
        -------
        list of QualityObservation
            The observations.
        """
        return list(self.iter_observations())

    def by_task_type(self, task_type: str) -> list[QualityObservation]:
        """The valid observations of one task type, in the ledger's order.

        Parameters
        ----------
        task_type : str
            The task type.

        Returns
        -------
        list of QualityObservation
            Its observations.
        """
        return [o for o in self._matching(task_type) if o.task_type == task_type]

    def recent(
        self, limit: int = 10, *, task_type: str | None = None, adapter_id: str | None = None
    ) -> list[QualityObservation]:
        """Up to ``limit`` matching observations, newest ``recorded_at`` first (on ties, later in read order first).

        Parameters
        ----------
        limit : int, default 10
            The most to return (>= 0; ``0`` gives ``[]``).
        task_type : str, optional
            Keep one task type.
        adapter_id : str, optional
            Keep one adapter.

        Returns
        -------
        list of QualityObservation
            The observations.

        Raises
        ------
        ValidationError
            A ``limit`` that is not an integer >= 0.
        """
        if isinstance(limit, bool) or not isinstance(limit, Integral):
            raise ValidationError(f"limit must be an integer >= 0, got {limit!r}")
        if limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
        if limit == 0:
            return []
        matches = (
            (o.recorded_at, i, o)
            for i, o in enumerate(self._matching(task_type))
            if (task_type is None or o.task_type == task_type) and (adapter_id is None or o.adapter_id == adapter_id)
        )
        return [o for _, _, o in heapq.nlargest(int(limit), matches, key=lambda t: (t[0], t[1]))]

    def mean_quality(
        self,
        task_type: str,
        *,
        adapter_id: str | None = None,
        min_observations: int = 1,
        max_age: timedelta | None = None,
        now: datetime | None = None,
    ) -> float | None:
        """Mean ``quality_score`` of matching, non-stale observations.

        Parameters
        ----------
        task_type : str
            The task type.
        adapter_id : str, optional
            Keep one adapter.
        min_observations : int, default 1
            The fewest observations to give a mean (> 0).
        max_age : timedelta, optional
            Observations older than this are stale (:func:`is_stale`) and left out; ``None``: any age.
        now : datetime, optional
            The time staleness is judged at (default: now; a naive one is UTC).

        Returns
        -------
        float or None
            The mean; ``None`` if fewer than ``min_observations`` match.

        Raises
        ------
        ValidationError
            A ``min_observations`` that is not a positive integer, or a negative ``max_age``.
        TypeError
            A ``max_age`` that is not a timedelta.
        """
        if isinstance(min_observations, bool) or not isinstance(min_observations, Integral):
            raise ValidationError(f"min_observations must be a positive integer, got {min_observations!r}")
        if min_observations <= 0:
            raise ValidationError(f"min_observations must be > 0, got {min_observations}")
        if max_age is not None:
            if not isinstance(max_age, timedelta):
                raise TypeError(f"max_age must be a timedelta, got {type(max_age).__name__}")
            if max_age < timedelta(0):
                raise ValidationError(f"max_age must be >= 0, got {max_age!r}")
        current = utc_now() if now is None else as_utc(now, "now")
        total = 0.0
        count = 0
        for o in self._matching(task_type):
            if o.task_type != task_type or (adapter_id is not None and o.adapter_id != adapter_id):
                continue
            if max_age is not None and is_stale(o, max_age, now=current):
                continue
            total += o.quality_score
            count += 1
        if count < min_observations:
            return None
        return total / count


def _observations_of(observations: Iterable[QualityObservation], caller: str) -> list[QualityObservation]:
    items = list(observations)
    for o in items:
        if not isinstance(o, QualityObservation):
            raise TypeError(f"{caller} takes QualityObservations, got {type(o).__name__}")
    return items


def is_parquet_location(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a Parquet ledger root: a URI (``scheme://...``) or an existing directory.

    Anything else (a file, or a path that does not exist) is a JSON Lines ledger.
    """
    text = os.fspath(location)
    if isinstance(text, bytes):
        raise ValidationError("a ledger location must be text, not bytes")
    return "://" in text or Path(text).is_dir()

