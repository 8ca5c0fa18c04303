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
- The ledger's path is resolved once, at construction (``os.path.realpath``):
  the lock (``<real path>.lock``), the temporary file of ``prune_before`` and
  its rename all use the real file, so a symbolic link and its target share one
  lock and a link stays a link. ``path`` is still the path as given.
- A line longer than ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`, 1 MiB,
  newline not counted) is malformed: counted and skipped by every reader, copied
  unchanged by ``prune_before``, and read in bounded chunks, never whole.
  ``append`` refuses (``ValidationError``) an observation whose line would be
  longer, before writing anything.
- Text must be valid Unicode: a lone surrogate in any string field, tag key or
  tag value is a ``ValidationError`` naming the field, and a line whose JSON
  escapes decode to one (``"\\ud800"``) is malformed.
- A ledger file with no write permission bit at all is read-only: ``append``,
  ``extend`` and ``prune_before`` refuse it with ``PermissionError`` (even for
  root, whom the kernel would let write), and ``prune_before`` needs exactly
  the access ``append`` needs (it opens the file for writing first), so it
  never replaces a file it could not append to. OS errors name the ledger, the
  file at fault and what to do, and keep their ``OSError`` subclass.

Speed
-----
``append`` serialises with the C string encoder (no intermediate dict), keeps
one :class:`filelock.FileLock` per ledger object and process (re-created after
a ``fork``) and polls it every millisecond under contention; the per-call
acquire/release of that lock is most of an append's cost. Readers parse each
line with a fast path that accepts only lines the full
:meth:`QualityObservation.from_dict` would accept, with the same result, and
hand every other line to ``from_dict`` itself.
"""

from __future__ import annotations

import errno
import heapq
import json
import math
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from numbers import Integral
from pathlib import Path
from typing import Any

from .errors import ValidationError

__all__ = ["MAX_LINE_BYTES", "QualityLedger", "QualityObservation", "is_stale"]

#: The longest ledger line (in bytes, newline not counted) readers parse; longer lines are malformed.
MAX_LINE_BYTES = 1 << 20

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
        out = value.replace(tzinfo=UTC)
    else:
        try:
            out = value.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00 has no UTC datetime
            raise ValidationError(f"{name} {value.isoformat()!r} is out of range once converted to UTC") from None
    # fold means nothing in UTC; clearing it makes an observation identical to its JSON round trip
    return out.replace(fold=0) if out.fold else out


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_error(where: str, text: str) -> ValidationError:
    found = _SURROGATE.search(text)
    assert found is not None
    return ValidationError(
        f"{where} holds a lone surrogate {found.group()!r} at index {found.start()} of {_short(text)}: "
        "it is not valid Unicode and cannot be written as UTF-8; fix the text where it was made "
        "(e.g. bytes decoded with errors='surrogateescape', or half of a UTF-16 pair)"
    )


def _find_surrogate(value: Any, where: str) -> tuple[str, str] | None:
    """``(where, text)`` of the first string (or key) in ``value`` holding a lone surrogate."""
    if isinstance(value, str):
        return (where, value) if _SURROGATE.search(value) else None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and _SURROGATE.search(k):
                return f"a key of {where}", k
            found = _find_surrogate(v, f"{where}[{k!r}]")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _find_surrogate(v, f"{where}[{i}]")
            if found:
                return found
    return None


def _non_empty_str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
    if not value.isascii() and _SURROGATE.search(value):
        raise _surrogate_error(name, value)
    return value


def _non_negative_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    try:
        out = float(value)
    except OverflowError:  # an int beyond float range
        out = math.inf
    if not math.isfinite(out) or out < 0:
        raise ValidationError(f"{name} must be a finite number >= 0, got {_short(value)}")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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
        try:
            q = float(q)
        except OverflowError:  # an int beyond float range
            q = math.inf
        if not 0.0 <= q <= 1.0:  # also rejects NaN
            raise ValidationError(f"quality_score must be in 0.0..1.0, got {_short(self.quality_score)}")
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
                text = json.dumps(dict(self.tags), allow_nan=False, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"tags must be JSON-serialisable (no NaN/inf): {exc}") from None
            if not text.isascii() and _SURROGATE.search(text):
                found = _find_surrogate(self.tags, "tags")
                raise _surrogate_error(*found) if found else ValidationError("tags hold a lone surrogate")
            # Store the JSON form, so an observation equals its own round trip.
            s(self, "tags", json.loads(text))
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


# -- fast serialisation and parsing ------------------------------------------------

_encode_str = getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
_encode_tags = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_float_repr = float.__repr__


def _encode_line(o: QualityObservation) -> str:
    """``json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False)``, byte for byte, without the dict."""
    if type(o) is not QualityObservation:  # a subclass may have its own to_dict
        return json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False)
    base = o.baseline_adapter_id
    return (
        f'{{"task_type":{_encode_str(o.task_type)},"adapter_id":{_encode_str(o.adapter_id)},'
        f'"model_id":{_encode_str(o.model_id)},"cost_usd":{_float_repr(o.cost_usd)},'
        f'"quality_score":{_float_repr(o.quality_score)},"latency_ms":{_float_repr(o.latency_ms)},'
        f'"tokens_in":{int.__repr__(o.tokens_in)},"tokens_out":{int.__repr__(o.tokens_out)},'
        f'"baseline_adapter_id":{"null" if base is None else _encode_str(base)},'
        f'"recorded_at":"{o.recorded_at.isoformat()}","tags":{_encode_tags(o.tags) if o.tags else "{}"}}}'
    )


_raw_decode = json.JSONDecoder().raw_decode
_new = object.__new__


def _finite_json(value: Any) -> bool:
    """True when no float inside ``value`` (parsed JSON) is NaN or infinite."""
    t = type(value)
    if t is float:
        return value - value == 0.0
    if t is dict:
        return all(_finite_json(v) for v in value.values())
    if t is list:
        return all(_finite_json(v) for v in value)
    return True


def _fast_observation(data: Any) -> QualityObservation | None:
    """The observation ``from_dict(data)`` gives, for the common shape of a ledger line; else ``None``.

    Accepts only what ``from_dict`` accepts, with an equal result: anything
    unusual (ints where floats are written, a non-UTC offset, NaN in the tags,
    a missing field...) returns ``None`` and the caller asks ``from_dict``.
    """
    if type(data) is not dict:
        return None
    get = data.get
    task_type, adapter_id, model_id = get("task_type"), get("adapter_id"), get("model_id")
    cost, quality, latency = get("cost_usd"), get("quality_score"), get("latency_ms")
    tokens_in, tokens_out = get("tokens_in"), get("tokens_out")
    base, stamp, tags = get("baseline_adapter_id"), get("recorded_at"), get("tags", _MISSING)
    if not (
        type(task_type) is str
        and type(adapter_id) is str
        and type(model_id) is str
        and type(cost) is float
        and type(quality) is float
        and type(latency) is float
        and type(tokens_in) is int
        and type(tokens_out) is int
        and type(stamp) is str
        and task_type.strip()
        and adapter_id.strip()
        and model_id.strip()
        and 0.0 <= quality <= 1.0
        and 0.0 <= cost < math.inf
        and 0.0 <= latency < math.inf
        and tokens_in >= 0
        and tokens_out >= 0
        and (base is None or (type(base) is str and base.strip()))
    ):
        return None
    if tags is _MISSING or tags is None:
        tags = {}
    elif type(tags) is not dict or not _finite_json(tags):
        return None
    try:
        recorded_at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    tz = recorded_at.tzinfo
    if tz is None:
        recorded_at = recorded_at.replace(tzinfo=UTC)
    elif tz is not UTC:
        return None
    obs = _new(QualityObservation)
    obs.__dict__.update(
        task_type=task_type,
        adapter_id=adapter_id,
        model_id=model_id,
        cost_usd=cost,
        quality_score=quality,
        latency_ms=latency,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        baseline_adapter_id=base,
        recorded_at=recorded_at,
        tags=tags,
    )
    return obs


_MISSING: Any = object()
_JSON_WS = " \t\n\r"


def _has_surrogate(o: QualityObservation) -> bool:
    """True when a string of ``o`` (ids, tag keys and values) holds a lone surrogate."""
    for text in (o.task_type, o.adapter_id, o.model_id, o.baseline_adapter_id):
        if text is not None and not text.isascii() and _SURROGATE.search(text):
            return True
    return bool(o.tags) and _find_surrogate(o.tags, "tags") is not None


def _parse_line(raw: bytes) -> QualityObservation:
    """The observation on one ledger line; raises one of ``_MALFORMED`` when it holds none."""
    try:
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):  # json.loads(bytes) drops a leading UTF-8 BOM
            text = text[1:]
        text = text.strip(_JSON_WS)
        data, end = _raw_decode(text)
        if end == len(text):
            obs = _fast_observation(data)
            # Only a \u escape can put a lone surrogate in a decoded string (strict UTF-8 refuses the raw bytes).
            if obs is not None and (b"\\u" not in raw or not _has_surrogate(obs)):
                return obs
    except (ValueError, RecursionError):
        pass
    # Everything else goes the full way, with its exact errors.
    return QualityObservation.from_dict(json.loads(raw))


# What a malformed line may raise while being parsed; anything else is a bug.
_MALFORMED = (ValueError, TypeError, UnicodeDecodeError, RecursionError, OverflowError)
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS = _OPEN_FLAGS | os.O_CREAT
_POLL_S = 0.001  # how often a waiting append re-tries the file lock
_SKIP_BYTES = 1 << 16  # the chunk an over-long line is read (and, by prune, copied) in


def _skip_long_line(readline: Any, head: bytes, spill: Any) -> bool:
    """Consume the rest of an over-long line whose first ``head`` bytes were read, in bounded chunks.

    Every chunk goes to ``spill`` (when given) as it is read. Returns whether
    the whole line was blank.
    """
    blank = head.isspace()
    if spill is not None:
        spill(head)
    while True:
        chunk = readline(_SKIP_BYTES)
        if not chunk:
            return blank
        if spill is not None:
            spill(chunk)
        if blank and not chunk.isspace():
            blank = False
        if chunk[-1] == 10:  # b"\n"
            return blank


def _explained(exc: BaseException) -> bool:
    return getattr(exc, "_llm_connect_ledger", False)


def _mark(exc: OSError) -> OSError:
    exc._llm_connect_ledger = True  # type: ignore[attr-defined]
    return exc


def _first_non_directory(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory (a file where a directory must be)."""
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):  # missing, or under the file we are looking for
            continue
        except OSError:
            return None
        return None if stat.S_ISDIR(st.st_mode) else parent
    return None


class QualityLedger:
    """An append-only JSON Lines file of :class:`QualityObservation`, safe for many writers.

    ``max_line_bytes``: lines longer than this (newline not counted) are
    malformed for every reader, and ``append`` refuses to write one. Every
    reader of a ledger should use the same value (default :data:`MAX_LINE_BYTES`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "ledger.jsonl",
        *,
        fsync: bool = False,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        cap: Any = max_line_bytes
        if isinstance(cap, bool) or not isinstance(cap, Integral) or cap < 1:
            raise ValidationError(f"max_line_bytes must be a positive integer, got {cap!r}")
        self._path = Path(path)
        self._fsync = bool(fsync)
        self._max_line_bytes = int(cap)
        # Resolved once: a symbolic link and its target are one ledger with one lock, and a link stays a link.
        self._real = Path(os.path.realpath(self._path))
        self._is_link = os.path.islink(self._path)
        self._fspath = os.fspath(self._real)
        self._thread_lock = threading.Lock()
        self._file_lock: Any = None  # created on first write, so construction creates nothing
        self._pid = os.getpid()

    @property
    def path(self) -> Path:
        """The ledger's path as given."""
        return self._path

    @property
    def real_path(self) -> Path:
        """The file read and written: :attr:`path` with symbolic links resolved (once, at construction)."""
        return self._real

    @property
    def lock_path(self) -> Path:
        """``<real_path>.lock``: the :class:`filelock.FileLock` every writer of this ledger takes."""
        return self._real.with_name(self._real.name + ".lock")

    @property
    def max_line_bytes(self) -> int:
        return self._max_line_bytes

    def _lock(self) -> Any:
        if self._file_lock is None:
            from filelock import FileLock

            # thread_local=False: our own thread lock already serialises this object's users.
            self._file_lock = FileLock(str(self.lock_path), thread_local=False, poll_interval=_POLL_S)
        return self._file_lock

    def _after_fork(self) -> None:
        """A forked child gets fresh locks: the parent's may be held by a thread the child does not have."""
        self._pid = os.getpid()
        self._thread_lock = threading.Lock()
        self._file_lock = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self._path, "fsync": self._fsync, "max_line_bytes": self._max_line_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["path"], fsync=state["fsync"], max_line_bytes=state.get("max_line_bytes", MAX_LINE_BYTES)
        )

    def __repr__(self) -> str:
        return f"QualityLedger({str(self._path)!r})"

    # -- OS errors ---------------------------------------------------------

    def _describe(self) -> str:
        if self._is_link or os.path.abspath(self._path) != self._fspath:
            return f"{str(self._path)!r} (the file {self._fspath!r})"
        return repr(str(self._path))

    def _explain(self, exc: OSError, action: str) -> OSError:
        """``exc`` as the same kind of ``OSError`` whose message names the ledger, the file at fault and what to do."""
        if exc.errno is None or _explained(exc):
            return exc
        code = exc.errno
        real = self._fspath
        directory = os.fspath(self._real.parent)
        lock = os.fspath(self.lock_path)
        culprit = os.fspath(exc.filename) if exc.filename is not None else None
        blocker = _first_non_directory(self._real)
        if blocker is not None:
            code = errno.ENOTDIR
            detail = f"{os.fspath(blocker)!r} is a file, not a directory, so no ledger can live under it"
            todo = "choose a ledger path inside a directory"
        elif self._is_link and not os.path.isdir(directory):
            code = errno.ENOENT
            detail = f"{str(self._path)!r} is a symbolic link to {real!r}, whose directory does not exist"
            todo = f"create {directory!r} or point the link at an existing ledger"
        elif os.path.isdir(real):
            code = errno.EISDIR
            detail = f"{real!r} is a directory"
            todo = f"give the path of a file, e.g. {os.path.join(real, 'ledger.jsonl')!r}"
        elif code in (errno.EACCES, errno.EPERM):
            if culprit == lock:
                detail = f"permission denied on its lock file {lock!r}, which lives beside the ledger"
                todo = (
                    f"make the directory {directory!r} writable for this user, or use a ledger in a writable directory"
                )
            elif culprit == real and action == "read":
                detail = f"permission denied reading {real!r}"
                todo = f"make it readable for this user (chmod u+r {real!r})"
            elif culprit == real:
                detail = f"permission denied writing {real!r}"
                todo = f"make it writable for this user (chmod u+w {real!r}) or use another ledger path"
            else:
                detail = f"permission denied on {culprit or directory!r}"
                todo = (
                    f"make the directory {directory!r} writable for this user (prune_before writes a temporary "
                    "file there and renames it over the ledger)"
                    if action == "prune"
                    else f"check the permissions of {directory!r} and of {real!r}"
                )
        elif code == errno.EROFS:
            detail = "the file system is mounted read-only"
            todo = "use a ledger path on a writable file system"
        elif code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            detail = "the file system is full (or over quota)"
            todo = "free some space and retry"
        elif code == errno.ELOOP:
            detail = f"{str(self._path)!r} goes through a loop of symbolic links"
            todo = "fix the links"
        else:
            detail = f"{exc.strerror or exc}" + (f" ({culprit!r})" if culprit else "")
            todo = f"check {real!r} and its directory"
        return _mark(OSError(code, f"cannot {action} the quality ledger {self._describe()}: {detail}; {todo}"))

    def _read_only_error(self, action: str, mode: int) -> OSError:
        return _mark(
            PermissionError(
                errno.EACCES,
                f"cannot {action} the quality ledger {self._describe()}: the file is read-only "
                f"(mode {stat.filemode(mode)}, no write permission bit; refused even for root); "
                f"make it writable (chmod u+w {self._fspath!r}) to change it, or work on a copy",
            )
        )

    # -- writing -----------------------------------------------------------

    def _too_long(self, line: str, which: str = "this observation") -> ValidationError:
        size = len(line.encode("utf-8"))
        return ValidationError(
            f"{which}'s ledger line would be {size} bytes, over the ledger's max_line_bytes "
            f"({self._max_line_bytes}), and readers would skip it as malformed; nothing was written. "
            "Keep bulky data out of tags (store a digest, an id or a path), or give every reader of this "
            "ledger a larger QualityLedger(max_line_bytes=...)"
        )

    def append(self, observation: QualityObservation) -> None:
        """Append one observation as one whole line, under both locks."""
        if not isinstance(observation, QualityObservation):
            raise TypeError(f"append() takes a QualityObservation, got {type(observation).__name__}")
        line = _encode_line(observation)
        payload = (line + "\n").encode("utf-8")
        if len(payload) > self._max_line_bytes + 1:
            raise self._too_long(line)
        self._write(payload)

    def extend(self, observations: list[QualityObservation] | tuple[QualityObservation, ...]) -> None:
        """Append several observations under one acquisition of the locks (one line each)."""
        for o in observations:
            if not isinstance(o, QualityObservation):
                raise TypeError(f"extend() takes QualityObservations, got {type(o).__name__}")
        if not observations:
            return
        lines = [_encode_line(o) for o in observations]
        cap = self._max_line_bytes
        if max(map(len, lines)) * 4 > cap:  # a UTF-8 character is at most 4 bytes
            for i, line in enumerate(lines):
                if len(line) > cap // 4 and len(line.encode("utf-8")) > cap:
                    raise self._too_long(line, f"observation {i} of extend()")
        self._write(("\n".join(lines) + "\n").encode("utf-8"))

    def _write(self, payload: bytes) -> None:
        """Write ``payload`` (whole lines) at the end of the ledger, under both locks."""
        if self._pid != os.getpid():
            self._after_fork()
        file_lock = self._file_lock or self._lock()
        with self._thread_lock:
            try:
                if self._is_link and not os.path.isdir(self._real.parent):
                    # Creating the directory of a dangling link's target (an unmounted disk?) would hide the fault.
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self._fspath)
                file_lock.acquire()
                try:
                    self._write_locked(payload)
                finally:
                    file_lock.release()
            except OSError as exc:
                if _explained(exc):
                    raise
                raise self._explain(exc, "append to") from exc

    def _write_locked(self, payload: bytes) -> None:
        created = False
        try:
            fd = os.open(self._fspath, _OPEN_FLAGS)
        except FileNotFoundError:
            if not self._is_link:
                self._real.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self._fspath, _APPEND_FLAGS | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:  # another writer created it meanwhile
                fd = os.open(self._fspath, _OPEN_FLAGS)
        try:
            st = os.fstat(fd)
            if not created and not st.st_mode & 0o222:
                raise self._read_only_error("append to", st.st_mode)
            size = st.st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload  # a writer died mid-line: start on a fresh one
            written = os.write(fd, payload)
            if written != len(payload):
                view = memoryview(payload)[written:]
                while view:
                    view = view[os.write(fd, view) :]
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    # -- reading -----------------------------------------------------------

    def _scan(self) -> Iterator[tuple[QualityObservation | None, bytes | None]]:
        """Yield ``(observation or None if malformed, raw line)`` for every non-blank line.

        An over-long line yields ``(None, None)``: it is never held whole.
        """
        try:
            handle = open(self._fspath, "rb")  # noqa: SIM115 - closed in finally, generator-friendly
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._explain(exc, "read") from exc
        try:
            yield from self._scan_handle(handle)
        finally:
            handle.close()

    def _scan_handle(self, handle: Any, spill: Any = None) -> Iterator[tuple[QualityObservation | None, bytes | None]]:
        """The lines of an open file as in :meth:`_scan`; an over-long line's bytes go to ``spill`` as read."""
        readline = handle.readline
        limit = self._max_line_bytes + 1
        while True:
            raw = readline(limit)
            if not raw:
                return
            if len(raw) == limit and raw[-1] != 10:  # no newline within the cap: an over-long line
                if not _skip_long_line(readline, raw, spill):
                    yield None, None
                continue
            if raw.isspace():
                continue
            try:
                yield _parse_line(raw), raw
            except _MALFORMED:
                yield None, raw

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
        """Remove valid observations with ``recorded_at < timestamp``; keep malformed lines. Atomic.

        Needs what ``append`` needs (the file open for writing, its lock) and a
        writable directory for the temporary file; without them it raises
        ``PermissionError`` (or another ``OSError``) naming what to fix, and
        removes nothing.
        """
        cutoff = _utc(timestamp, "timestamp")
        if self._pid != os.getpid():
            self._after_fork()
        with self._thread_lock:
            try:
                try:
                    os.stat(self._fspath)
                except FileNotFoundError:
                    return 0  # no ledger (yet): nothing to prune, and no lock file or directory to create
                file_lock = self._lock()
                file_lock.acquire()
                try:
                    return self._prune_locked(cutoff)
                finally:
                    file_lock.release()
            except OSError as exc:
                if _explained(exc):
                    raise
                raise self._explain(exc, "prune") from exc

    def _prune_locked(self, cutoff: datetime) -> int:
        try:
            # The access append needs: prune never replaces a file it could not append to.
            fd = os.open(self._fspath, _OPEN_FLAGS)
        except FileNotFoundError:
            return 0
        with os.fdopen(fd, "rb") as source:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _mark(
                    OSError(
                        errno.EINVAL,
                        f"cannot prune the quality ledger {self._describe()}: it is not a regular file "
                        f"({stat.filemode(st.st_mode)}); prune a copy of it instead",
                    )
                )
            if not st.st_mode & 0o222:
                raise self._read_only_error("prune", st.st_mode)
            directory = self._real.parent
            self._remove_orphaned_temp_files(directory)
            tmp_fd, tmp_name = tempfile.mkstemp(prefix=f".{self._real.name}.", suffix=".tmp", dir=directory)
            try:
                removed = 0
                with os.fdopen(tmp_fd, "wb") as out:
                    write = out.write
                    for obs, raw in self._scan_handle(source, write):
                        if raw is None:  # an over-long line: the scan copied it already
                            continue
                        if obs is not None and obs.recorded_at < cutoff:
                            removed += 1
                            continue
                        write(raw)
                    if removed:
                        out.flush()
                        _keep_owner_and_mode(out.fileno(), st)
                        os.fsync(out.fileno())
                if not removed:
                    os.unlink(tmp_name)
                    return 0
                os.replace(tmp_name, self._fspath)
            except BaseException:
                try:
                    os.unlink(tmp_name)
                except FileNotFoundError:
                    pass
                raise
        _fsync_dir(directory)
        return removed

    def _remove_orphaned_temp_files(self, directory: Path) -> None:
        """Delete temporary files a killed ``prune_before`` of this ledger left behind.

        Called with both locks held: no prune of this ledger is running, so
        every file named like its temporary files is an orphan.
        """
        pattern = re.compile(rf"\.{re.escape(self._real.name)}\.[a-z0-9_]{{8}}\.tmp")
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            if pattern.fullmatch(name):
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass

    def _repr_html_(self) -> str:
        import html

        return f"<code>QualityLedger</code> at <code>{html.escape(str(self._path))}</code>"


def _keep_owner_and_mode(fd: int, st: os.stat_result) -> None:
    """Give the rewritten ledger the old one's permissions and, where allowed, its owner and group."""
    try:
        os.fchmod(fd, st.st_mode & 0o777)
    except OSError:
        pass
    for uid in (st.st_uid, -1):  # root keeps the owner; others may still keep the group
        try:
            os.fchown(fd, uid, st.st_gid)
            break
        except OSError:
            continue


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
