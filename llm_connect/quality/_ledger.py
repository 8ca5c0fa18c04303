"""``QualityLedger``: the JSON Lines file of observations, safe for many writers.

Its lines are written and read by :mod:`._ledger_io`; this module owns the
file: locks, appends, queries, the atomic rewrite of ``prune_before`` and OS
errors that name the ledger and what to do.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from numbers import Integral
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ValidationError
from ._base import BaseLedger, _observations_of
from ._ledger_io import MAX_LINE_BYTES, encode_line, fsync_dir, scan_lines, temp_file_beside
from ._observation import QualityObservation, as_utc
from ._once import HeldKeys, Recorded, record_key

__all__ = ["QualityLedger"]

_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS = _OPEN_FLAGS | os.O_CREAT
_POLL_S = 0.001  # how often a waiting append re-tries the file lock
_T = TypeVar("_T")


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


class QualityLedger(BaseLedger):
    """An append-only JSON Lines file of :class:`QualityObservation`, safe for many writers.

    ``max_line_bytes``: lines longer than this (newline not counted) are
    malformed for every reader, and ``append`` refuses to write one. Every
    reader of a ledger should use the same value (default :data:`MAX_LINE_BYTES`).

    Parameters
    ----------
    path : str or os.PathLike, default "ledger.jsonl"
        The file (created on the first write; a symbolic link and its target are one ledger with one lock).
    fsync : bool, default False
        Fsync the file (and its directory) before a write returns.
    max_line_bytes : int, default MAX_LINE_BYTES
        Lines longer than this (newline not counted) are malformed for every reader, and ``append``
        refuses to write one. Every reader of a ledger should use the same value.

    Attributes
    ----------
    path : Path
        The file.
    lock_path : Path
        ``<real_path>.lock``: the :class:`filelock.FileLock` every writer of this ledger takes.

    Raises
    ------
    ValidationError
        A ``max_line_bytes`` that is not a positive integer.

    See Also
    --------
    ParquetLedger : Parquet files, for many hosts and object stores.
    open_ledger : The ledger at a path, of the right class.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from llm_connect import QualityObservation
    >>> ledger = QualityLedger(pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")
    >>> ledger.append(QualityObservation("qa", "small", "small-1", cost_usd=0.001, quality_score=0.9,
    ...                                  latency_ms=120.0, tokens_in=30, tokens_out=5))
    >>> ledger.mean_quality("qa")
    0.9
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
        self._held: _HeldFile | None = None  # extend_once: the keys read so far, and up to where

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
        """Append one observation as one whole line, under both locks.

        Parameters
        ----------
        observation : QualityObservation
            The observation.

        Raises
        ------
        TypeError
            Not a :class:`QualityObservation`.
        ValidationError
            Its line would be over ``max_line_bytes`` (nothing is written).
        """
        if not isinstance(observation, QualityObservation):
            raise TypeError(f"append() takes a QualityObservation, got {type(observation).__name__}")
        line = encode_line(observation)
        payload = (line + "\n").encode("utf-8")
        if len(payload) > self._max_line_bytes + 1:
            raise self._too_long(line)
        self._write(payload)

    def extend(self, observations: Sequence[QualityObservation]) -> None:
        """Append several observations under one acquisition of the locks (one line each).

        Parameters
        ----------
        observations : sequence of QualityObservation
            The observations, in order (all checked before anything is written).

        Raises
        ------
        TypeError
            One is not a :class:`QualityObservation`.
        ValidationError
            One's line would be over ``max_line_bytes``.
        """
        for o in observations:
            if not isinstance(o, QualityObservation):
                raise TypeError(f"extend() takes QualityObservations, got {type(o).__name__}")
        if not observations:
            return
        self._write(_payload(self._lines(observations, "extend()")))

    def _lines(self, observations: Sequence[QualityObservation], caller: str) -> list[str]:
        """Each observation's line; ``ValidationError`` (before anything is written) for one that is too long."""
        lines = [encode_line(o) for o in observations]
        cap = self._max_line_bytes
        if max(map(len, lines)) * 4 > cap:  # a UTF-8 character is at most 4 bytes
            for i, line in enumerate(lines):
                if len(line) > cap // 4 and len(line.encode("utf-8")) > cap:
                    raise self._too_long(line, f"observation {i} of {caller}")
        return lines

    def extend_once(self, observations: Iterable[QualityObservation]) -> Recorded:
        """Append the observations whose judgment or label the ledger does not hold yet (see
        :meth:`BaseLedger.extend_once`), reading the keys and writing under both locks.

        The keys read are kept with the file's identity and the offset read up to, so the next call reads
        only the lines appended since (by anyone); a file replaced by ``prune_before`` is read again whole.

        Parameters
        ----------
        observations : iterable of QualityObservation
            The observations to record, in order.

        Returns
        -------
        Recorded
            Which were written, and for the others the score (and label id) of the record that stands.
        """
        items = _observations_of(observations, "extend_once()")
        if not items:
            return Recorded.all_written(0)
        lines = self._lines(items, "extend_once()")
        if all(record_key(o) is None for o in items):
            self._write(_payload(lines))
            return Recorded.all_written(len(items))
        done = self._under_locks("append to", self._check_link, lambda: self._extend_once_locked(items, lines))
        assert done is not None  # _check_link says ready or raises
        return done

    def _extend_once_locked(self, items: list[QualityObservation], lines: list[str]) -> Recorded:
        held = self._read_held()
        keep, recorded = held.keys.select(items)
        if keep:
            before, after = self._write_locked(_payload([lines[i] for i in keep]))
            held.keys.update(items[i] for i in keep)
            if before == held.offset:  # nobody wrote between our read and our write (we hold the lock)
                held.offset = after
        return recorded

    def _read_held(self) -> _HeldFile:
        """The keys of the ledger as it is now (called under both locks): the lines appended since the last
        read are read; a file that is another one now (replaced) or shorter is read from its start."""
        held = self._held
        try:
            handle = open(self._fspath, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            self._held = held = _HeldFile(None, 0, HeldKeys())
            return held
        with handle:
            st = os.fstat(handle.fileno())
            identity = (st.st_dev, st.st_ino)
            if held is None or held.identity != identity or st.st_size < held.offset:
                held = _HeldFile(identity, 0, HeldKeys())
            handle.seek(held.offset)
            add = held.keys.add
            for obs, _ in scan_lines(handle, self._max_line_bytes):
                if obs is not None:
                    add(obs)
            held.offset = handle.tell()
        self._held = held
        return held

    def _write(self, payload: bytes) -> None:
        """Write ``payload`` (whole lines) at the end of the ledger, under both locks."""
        self._under_locks("append to", self._check_link, lambda: self._write_locked(payload))

    def _check_link(self) -> bool:
        if self._is_link and not os.path.isdir(self._real.parent):
            # Creating the directory of a dangling link's target (an unmounted disk?) would hide the fault.
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self._fspath)
        return True

    def _under_locks(self, action: str, ready: Callable[[], bool], work: Callable[[], _T]) -> _T | None:
        """``work()`` under the thread lock and the file lock (invariant 6), once ``ready()`` says there is
        something to do (else ``None``, taking no file lock); OS errors name the ledger and what to do."""
        if self._pid != os.getpid():
            self._after_fork()
        with self._thread_lock:
            try:
                if not ready():
                    return None
                file_lock = self._file_lock or self._lock()
                file_lock.acquire()
                try:
                    return work()
                finally:
                    file_lock.release()
            except OSError as exc:
                if _explained(exc):
                    raise
                raise self._explain(exc, action) from exc

    def _write_locked(self, payload: bytes) -> tuple[int, int]:
        """Append ``payload`` (under both locks); returns the file's size before and after."""
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
        return size, size + len(payload)

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
            yield from scan_lines(handle, self._max_line_bytes)
        finally:
            handle.close()

    def iter_observations(self) -> Iterator[QualityObservation]:
        """Stream valid observations in file order, skipping malformed lines (constant memory).

        Returns
        -------
        iterator of QualityObservation
            The observations, in file order.
        """
        for obs, _ in self._scan():
            if obs is not None:
                yield obs

    def malformed_count(self) -> int:
        """How many non-blank lines in the file, at call time, are not valid observations.

        Returns
        -------
        int
            The count.
        """
        return sum(1 for obs, _ in self._scan() if obs is None)

    # -- rewriting ---------------------------------------------------------

    def prune_before(self, timestamp: datetime) -> int:
        """Remove valid observations with ``recorded_at < timestamp``; keep malformed lines. Atomic.

        Needs what ``append`` needs (the file open for writing, its lock) and a
        writable directory for the temporary file; without them it raises
        ``PermissionError`` (or another ``OSError``) naming what to fix, and
        removes nothing.

        Parameters
        ----------
        timestamp : datetime
            The cut (a naive one is UTC).

        Returns
        -------
        int
            How many were removed.
        """
        cutoff = as_utc(timestamp, "timestamp")
        return self._under_locks("prune", self._file_exists, lambda: self._prune_locked(cutoff)) or 0

    def _file_exists(self) -> bool:
        """False when there is no ledger (yet): nothing to prune, and no lock file or directory to create."""
        try:
            os.stat(self._fspath)
        except FileNotFoundError:
            return False
        return True

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
            with temp_file_beside(directory, f".{self._real.name}.") as (tmp_fd, tmp_name):
                removed = 0
                with os.fdopen(tmp_fd, "wb") as out:
                    write = out.write
                    for obs, raw in scan_lines(source, self._max_line_bytes, write):
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
        fsync_dir(directory)
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
        from .._display import view

        return view("ledger_html")("QualityLedger", str(self._path))


def _payload(lines: Sequence[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


class _HeldFile:
    """What :meth:`QualityLedger.extend_once` has read of the file: its identity (device, inode), the offset
    read up to and the keys held."""

    __slots__ = ("identity", "keys", "offset")

    def __init__(self, identity: tuple[int, int] | None, offset: int, keys: HeldKeys) -> None:
        self.identity, self.offset, self.keys = identity, offset, keys


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
