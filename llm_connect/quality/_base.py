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
reads only that partition).
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

__all__ = ["BaseLedger", "is_parquet_location"]


class BaseLedger(ABC):
    """The interface of a quality ledger: append observations, read them back, query and prune them."""

    @abstractmethod
    def append(self, observation: QualityObservation) -> None:
        """Record one observation."""

    @abstractmethod
    def extend(self, observations: Sequence[QualityObservation]) -> None:
        """Record several observations at once."""

    @abstractmethod
    def iter_observations(self) -> Iterator[QualityObservation]:
        """The valid observations, skipping malformed records."""

    @abstractmethod
    def malformed_count(self) -> int:
        """How many records, at call time, are not valid observations."""

    @abstractmethod
    def prune_before(self, timestamp: datetime) -> int:
        """Remove valid observations with ``recorded_at < timestamp``; return how many were removed."""

    def __iter__(self) -> Iterator[QualityObservation]:
        return self.iter_observations()

    def _matching(self, task_type: str | None) -> Iterable[QualityObservation]:
        """The observations of ``task_type`` (all when ``None``), in read order."""
        if task_type is None:
            return self.iter_observations()
        return (o for o in self.iter_observations() if o.task_type == task_type)

    def read_all(self) -> list[QualityObservation]:
        return list(self.iter_observations())

    def by_task_type(self, task_type: str) -> list[QualityObservation]:
        return [o for o in self._matching(task_type) if o.task_type == task_type]

    def recent(
        self, limit: int = 10, *, task_type: str | None = None, adapter_id: str | None = None
    ) -> list[QualityObservation]:
        """Up to ``limit`` matching observations, newest ``recorded_at`` first (on ties, later in read order first)."""
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
        """Mean ``quality_score`` of matching, non-stale observations; ``None`` if fewer than ``min_observations``."""
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


def is_parquet_location(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a Parquet ledger root: a URI (``scheme://...``) or an existing directory.

    Anything else (a file, or a path that does not exist) is a JSON Lines ledger.
    """
    text = os.fspath(location)
    if isinstance(text, bytes):
        raise ValidationError("a ledger location must be text, not bytes")
    return "://" in text or Path(text).is_dir()

