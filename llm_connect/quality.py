"""The quality contract: ``QualityObservation``, the JSON Lines ``QualityLedger``, ``is_stale``.

Durability model
----------------
- ``append`` holds a process-local :class:`threading.Lock` and a
  :class:`filelock.FileLock` on ``<path>.lock``, re-opens the file with
  ``O_APPEND`` (so a concurrent ``prune_before`` that replaced it is seen),
  writes one whole line with one ``write`` and flushes (``fsync=True`` also
  fsyncs). If the file does not end with a newline (a writer was killed
  mid-line), the new line starts on a fresh line, so a torn line never
  swallows the next observation.
- ``prune_before`` holds both locks, writes the kept lines to a temporary file
  in the same directory, fsyncs it and ``os.replace``-s it over the ledger: a
  crash leaves the old or the new ledger, never a mix.
- Readers do not lock: they see whole lines, skip malformed ones and count them.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from numbers import Integral
from pathlib import Path
from typing import Any

from .errors import ValidationError

__all__ = ["QualityLedger", "QualityObservation", "is_stale"]

_REQUIRED = (
    "task_type",
    "adapter_id",
    "model_id",
    "cost_usd",
    "quality_score",
    "latency_ms",
    "tokens_in",
    "tokens_out",
)


def _utc(value: Any, name: str) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken as UTC."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _non_empty_str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _non_negative_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    out = float(value)
    if not math.isfinite(out) or out < 0:
        raise ValidationError(f"{name} must be a finite number >= 0, got {value!r}")
    return out


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValidationError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    out = int(value)
    if out < 0:
        raise ValidationError(f"{name} must be >= 0, got {value!r}")
    return out


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class QualityObservation:
    """One observed outcome: how good, how costly and how slow a call was for a task type."""

    task_type: str
    adapter_id: str
    model_id: str
    cost_usd: float
    quality_score: float
    latency_ms: float
    tokens_in: int
    tokens_out: int
    baseline_adapter_id: str | None = None
    recorded_at: datetime = field(default_factory=_now)
    tags: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = object.__setattr__
        _non_empty_str("task_type", self.task_type)
        _non_empty_str("adapter_id", self.adapter_id)
        _non_empty_str("model_id", self.model_id)
        s(self, "cost_usd", _non_negative_float("cost_usd", self.cost_usd))
        s(self, "latency_ms", _non_negative_float("latency_ms", self.latency_ms))
        s(self, "tokens_in", _non_negative_int("tokens_in", self.tokens_in))
        s(self, "tokens_out", _non_negative_int("tokens_out", self.tokens_out))
        q = self.quality_score
        if isinstance(q, bool) or not isinstance(q, (int, float)):
            raise ValidationError(f"quality_score must be a number in 0.0..1.0, got {type(q).__name__} {q!r}")
        q = float(q)
        if not 0.0 <= q <= 1.0:  # also rejects NaN
            raise ValidationError(f"quality_score must be in 0.0..1.0, got {self.quality_score!r}")
        s(self, "quality_score", q)
        if self.baseline_adapter_id is not None:
            _non_empty_str("baseline_adapter_id", self.baseline_adapter_id)
        s(self, "recorded_at", _utc(self.recorded_at, "recorded_at"))
        if not isinstance(self.tags, Mapping):
            raise ValidationError(f"tags must be a dict, got {type(self.tags).__name__}")
        if self.tags:
            if not all(isinstance(k, str) for k in self.tags):
                raise ValidationError("tags keys must be strings")
            try:
                # Store the JSON form, so an observation equals its own round trip.
                s(self, "tags", json.loads(json.dumps(dict(self.tags), allow_nan=False)))
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"tags must be JSON-serialisable (no NaN/inf): {exc}") from None
        elif not isinstance(self.tags, dict):
            s(self, "tags", {})

    @property
    def total_tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict; ``recorded_at`` is ISO-8601 with its UTC offset."""
        return {
            "task_type": self.task_type,
            "adapter_id": self.adapter_id,
            "model_id": self.model_id,
            "cost_usd": self.cost_usd,
            "quality_score": self.quality_score,
            "latency_ms": self.latency_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "baseline_adapter_id": self.baseline_adapter_id,
            "recorded_at": self.recorded_at.isoformat(),
            "tags": dict(self.tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityObservation:
        """Build from ``to_dict()`` output. Unknown keys are ignored (later versions may add fields).

        Raises ``ValueError`` for a missing or invalid field and ``TypeError`` or
        ``ValueError`` for an invalid ``recorded_at``.
        """
        if not isinstance(data, Mapping):
            raise ValidationError(f"an observation must be a JSON object, got {type(data).__name__}")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise ValidationError(f"observation is missing field(s): {', '.join(missing)}")
        if "recorded_at" not in data:
            raise ValidationError("observation is missing field: recorded_at")
        raw_ts = data["recorded_at"]
        if isinstance(raw_ts, datetime):
            recorded_at = raw_ts
        elif isinstance(raw_ts, str):
            try:
                recorded_at = datetime.fromisoformat(raw_ts)
            except ValueError:
                raise ValidationError(f"recorded_at is not an ISO-8601 datetime: {raw_ts[:60]!r}") from None
        else:
            raise TypeError(f"recorded_at must be an ISO-8601 string, got {type(raw_ts).__name__}")
        tags = data.get("tags", {})
        if tags is None:
            tags = {}
        return cls(
            task_type=data["task_type"],
            adapter_id=data["adapter_id"],
            model_id=data["model_id"],
            cost_usd=data["cost_usd"],
            quality_score=data["quality_score"],
            latency_ms=data["latency_ms"],
            tokens_in=data["tokens_in"],
            tokens_out=data["tokens_out"],
            baseline_adapter_id=data.get("baseline_adapter_id"),
            recorded_at=recorded_at,
            tags=tags,
        )


def is_stale(observation: QualityObservation, max_age: timedelta, *, now: datetime | None = None) -> bool:
    """True when ``now - observation.recorded_at > max_age`` (strictly). Naive ``now`` is UTC."""
    if not isinstance(max_age, timedelta):
        raise TypeError(f"max_age must be a timedelta, got {type(max_age).__name__}")
    if max_age < timedelta(0):
        raise ValidationError(f"max_age must be >= 0, got {max_age!r}")
    current = _now() if now is None else _utc(now, "now")
    return current - observation.recorded_at > max_age


def _parse_line(raw: bytes) -> QualityObservation:
    data = json.loads(raw)
    return QualityObservation.from_dict(data)


# What a malformed line may raise while being parsed; anything else is a bug.
_MALFORMED = (ValueError, TypeError, UnicodeDecodeError, RecursionError, OverflowError)


class QualityLedger:
    """An append-only JSON Lines file of :class:`QualityObservation`, safe for many writers."""

    def __init__(self, path: str | os.PathLike[str] = "ledger.jsonl", *, fsync: bool = False) -> None:
        self._path = Path(path)
        self._fsync = bool(fsync)
        self._thread_lock = threading.Lock()
        self._file_lock: Any = None  # created on first write, so construction does no I/O

    @property
    def path(self) -> Path:
        return self._path

    @property
    def lock_path(self) -> Path:
        return self._path.with_name(self._path.name + ".lock")

    def _lock(self) -> Any:
        if self._file_lock is None:
            from filelock import FileLock

            self._file_lock = FileLock(str(self.lock_path))
        return self._file_lock

    def __repr__(self) -> str:
        return f"QualityLedger({str(self._path)!r})"

    # -- writing -----------------------------------------------------------

    def append(self, observation: QualityObservation) -> None:
        """Append one observation as one whole line, under both locks."""
        if not isinstance(observation, QualityObservation):
            raise TypeError(f"append() takes a QualityObservation, got {type(observation).__name__}")
        self.extend([observation])

    def extend(self, observations: list[QualityObservation] | tuple[QualityObservation, ...]) -> None:
        """Append several observations under one acquisition of the locks (one line each)."""
        for o in observations:
            if not isinstance(o, QualityObservation):
                raise TypeError(f"extend() takes QualityObservations, got {type(o).__name__}")
        if not observations:
            return
        payload = "".join(
            json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False) + "\n" for o in observations
        ).encode("utf-8")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, self._lock():
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    payload = b"\n" + payload
                view = memoryview(payload)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)

    # -- reading -----------------------------------------------------------

    def _scan(self) -> Iterator[tuple[QualityObservation | None, bytes]]:
        """Yield ``(observation or None if malformed, raw line)`` for every non-blank line."""
        try:
            handle = open(self._path, "rb")  # noqa: SIM115 - closed in finally, generator-friendly
        except FileNotFoundError:
            return
        try:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    yield _parse_line(raw), raw
                except _MALFORMED:
                    yield None, raw
        finally:
            handle.close()

    def iter_observations(self) -> Iterator[QualityObservation]:
        """Stream valid observations in file order, skipping malformed lines (constant memory)."""
        for obs, _ in self._scan():
            if obs is not None:
                yield obs

    __iter__ = iter_observations

    def read_all(self) -> list[QualityObservation]:
        return list(self.iter_observations())

    def malformed_count(self) -> int:
        """How many non-blank lines in the file, at call time, are not valid observations."""
        return sum(1 for obs, _ in self._scan() if obs is None)

    def by_task_type(self, task_type: str) -> list[QualityObservation]:
        return [o for o in self.iter_observations() if o.task_type == task_type]

    def recent(
        self, limit: int = 10, *, task_type: str | None = None, adapter_id: str | None = None
    ) -> list[QualityObservation]:
        """Up to ``limit`` matching observations, newest ``recorded_at`` first (later lines first on ties)."""
        if isinstance(limit, bool) or not isinstance(limit, Integral):
            raise ValidationError(f"limit must be an integer >= 0, got {limit!r}")
        if limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
        if limit == 0:
            return []
        matches = (
            (o.recorded_at, i, o)
            for i, o in enumerate(self.iter_observations())
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
        current = _now() if now is None else _utc(now, "now")
        total = 0.0
        count = 0
        for o in self.iter_observations():
            if o.task_type != task_type or (adapter_id is not None and o.adapter_id != adapter_id):
                continue
            if max_age is not None and is_stale(o, max_age, now=current):
                continue
            total += o.quality_score
            count += 1
        if count < min_observations:
            return None
        return total / count

    # -- rewriting ---------------------------------------------------------

    def prune_before(self, timestamp: datetime) -> int:
        """Remove valid observations with ``recorded_at < timestamp``; keep malformed lines. Atomic."""
        cutoff = _utc(timestamp, "timestamp")
        with self._thread_lock, self._lock():
            if not self._path.exists():
                return 0
            removed = 0
            directory = self._path.parent
            fd, tmp_name = tempfile.mkstemp(prefix=f".{self._path.name}.", suffix=".tmp", dir=directory)
            try:
                with os.fdopen(fd, "wb") as out:
                    for obs, raw in self._scan():
                        if obs is not None and obs.recorded_at < cutoff:
                            removed += 1
                            continue
                        out.write(raw)
                    out.flush()
                    os.fsync(out.fileno())
                if removed == 0:
                    os.unlink(tmp_name)
                    return 0
                try:
                    os.chmod(tmp_name, os.stat(self._path).st_mode & 0o777)
                except OSError:
                    pass
                os.replace(tmp_name, self._path)
            except BaseException:
                try:
                    os.unlink(tmp_name)
                except FileNotFoundError:
                    pass
                raise
            _fsync_dir(directory)
            return removed

    def _repr_html_(self) -> str:
        import html

        return f"<code>QualityLedger</code> at <code>{html.escape(str(self._path))}</code>"


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
