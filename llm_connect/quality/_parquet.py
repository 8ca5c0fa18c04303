"""``ParquetLedger``: a quality ledger many writers on many hosts extend at once, without locks.

Layout
------
The ledger is a directory (or an object-store prefix) of Parquet files,
partitioned hive-style by task type and UTC date::

    ROOT/task_type=<encoded task type>/date=YYYY-MM-DD/part-<writer id>-<seq>.parquet

- The task type is untrusted text: it is percent-encoded (everything but
  ASCII letters, digits, ``-`` and ``_``; so ``.``, ``/`` and ``\\`` are
  encoded and no task type can climb out of its directory), and a long one is
  cut and suffixed with a digest. The ``task_type`` column, not the directory
  name, is what readers use.
- ``<writer id>`` is a random UUID per ledger object and process (a new one
  after ``fork`` or unpickling, e.g. in a Ray actor) and ``<seq>`` counts that
  writer's files, so no two writers ever write the same name.
- Columns: ``task_type``, ``adapter_id``, ``model_id``,
  ``baseline_adapter_id`` (text, nullable), ``quality_score``, ``cost_usd``,
  ``latency_ms`` (float64), ``tokens_in``, ``tokens_out`` (int64),
  ``recorded_at`` (``timestamp[us, UTC]``) and ``tags`` (the tags as one JSON
  text, null when empty: any JSON value round-trips exactly). DuckDB reads it
  as ``read_parquet('ROOT/**/*.parquet', hive_partitioning = true)``, but sees
  the files as they are: the copies of retried writes, and during a compaction
  the files it replaces too; the ledger's own readers see neither.
- Files and directories whose name starts with ``.`` or ``_`` are not ledger
  files (temporary files, the compaction lock), nor is anything not ending in
  ``.parquet``.

Writing (no lock)
-----------------
``append`` writes one file; ``extend`` writes one file per (task type, date)
among its observations. Nothing is buffered: when the call returns, the
observations are stored. On a local file system each file is written under a
hidden temporary name in its partition directory and renamed into place
(``fsync=True`` also fsyncs the file and its directory), so readers see whole
files only; on an object store (``s3://``, ``gs://``...) an upload becomes
visible only once complete. Each call costs a file: prefer ``extend`` with
batches, and compact (``compact`` or ``prune_before``) to merge small files.
Token counts must fit Parquet's 64-bit integers (below ``2**63``): a larger one
is a ``ValidationError`` before anything is written (a ``QualityLedger``
takes any integer).

Reading
-------
Every reader lists the files once, reads them all (pyarrow), validates every
row as :meth:`QualityObservation.from_dict` would, and returns the valid
observations ordered by ``recorded_at`` (ties: by file name, then row). A file
that cannot be read as a ledger file (not Parquet, a missing, mistyped or
duplicated column, a ``compact-*`` file whose list of the files it replaces is
not a JSON list of names) counts once in
:meth:`~ParquetLedger.malformed_count` and is never deleted by a compaction; a
row that is not a valid observation counts once. A file removed by a concurrent compaction
while being read makes the reader list again, as does a compaction finishing
during the read (the reader lists the files a second time at the end to see),
so a reader sees the ledger before or after a compaction, never half of it. A
snapshot is held in memory (a few hundred bytes per observation).

Duplicates
----------
A retried task may write the same judgment twice. An observation whose tags
hold ``item_id``, ``grader_id`` and ``run_id`` (none of them null) is keyed by
those, its ``rubric_hash`` (:data:`DEDUPE_TAGS`; absent or null for a judge
without a rubric, such as exact match, counts as one value) and its
``task_type``, ``adapter_id``, ``model_id`` and ``baseline_adapter_id`` (so two
candidates judged on one item, or one item under two task types, are never
merged); among observations with one key only the first in read order (the
earliest ``recorded_at``) is read, and compaction keeps only that one. An
observation lacking ``item_id``, ``grader_id`` or ``run_id``, or with one of
them null (human labels, runs without a run id), is never deduplicated.

Compaction: ``prune_before`` and ``compact``
--------------------------------------------
Both read a snapshot, then, in each partition directory that has something to
change (rows to remove, duplicate copies, or more than one file), write one new
file ``compact-<writer id>-<seq>.parquet`` holding the rows kept (invalid rows
are kept as they are, like the malformed lines ``QualityLedger.prune_before``
keeps) whose Parquet metadata names the files it replaces, and only then delete
those files. Readers ignore a file that a ``compact-*`` file in its directory
replaces, so the switch is atomic for them; a crash before the deletions leaves
files that are ignored, and deleted by the next compaction. Compaction never
deletes a file it did not read (or that a compacted file did not replace):
observations appended meanwhile go to new files and survive, and a file it
cannot read is left alone (and counted as malformed). A partition whose rows
are all removed gets an empty ``compact-*`` file for the switch, removed at the
end. Compactions of one ledger must not overlap: on a local root they take
``filelock.FileLock(ROOT/_compaction.lock)``; on an object store run one
compactor at a time (e.g. one scheduled job). Empty directories are left. On a
local root, compaction also deletes the hidden temporary files of writers killed
mid-write (``.part-*.parquet.tmp``) once they are a day old.

Recording once
--------------
``extend_once`` (what ``judge_many``, ``record_labels``, ``grade_dataset`` and the
CLI record through) skips the judgments and labels the ledger already holds. On
a local root it holds ``filelock.FileLock(ROOT/_record.lock)`` while it checks
and writes, and every writer (``append``, ``extend``, ``extend_once``) names the
files it wrote in ``ROOT/_record.journal`` once the first ``extend_once``
created it (a compaction starts a new one), so
a writer's later calls read only the files written since its first; on an
object store it lists the partitions each time and takes no lock.

The rows themselves (the schema, observations to a table and back, the dedupe key, the directory name of a
task type) are in ``quality/_parquet_rows.py``; this module is the ledger: its files, writers, readers and
compaction.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .._textsafe import redact_urls
from ..errors import MissingDependencyError, ValidationError
from ._base import BaseLedger, _observations_of
from ._ledger_io import (
    FLOAT_FIELDS,
    INT_FIELDS,
    TEXT_FIELDS,
    ColumnBlock,
    TagLayout,
    fsync_dir,
    temp_file_beside,
)
from ._observation import QualityObservation, as_utc
from ._once import HeldKeys, Recorded, record_key
from ._parquet_rows import (
    _COLUMNS,
    DEDUPE_TAGS,
    _conform,
    _micros,
    _observations,
    _schema,
    _Snapshot,
    _table,
    _table_observations,
    encode_segment,
    unstorable,
)

__all__ = ["DEDUPE_TAGS", "ParquetLedger", "unstorable"]

_REPLACES_KEY = b"llm_connect.replaces"
_READ_ATTEMPTS = 20  # listings a reader tries before giving up on a ledger that keeps changing under it
_ORPHAN_AGE_S = 24 * 3600  # a writer's temporary file this old belongs to a writer that was killed
_JOURNAL = "_record.journal"  # a local root's list of the files written (see ParquetLedger.extend_once)


class _Vanished(Exception):
    """A listed file disappeared (a concurrent compaction): list again."""


class _HeldParquet:
    """What :meth:`ParquetLedger.extend_once` has read: the task types whose partitions it read, the files read,
    the keys they hold and, on a local root, the journal's ``(device, inode, offset read up to)``."""

    __slots__ = ("files", "journal", "keys", "types")

    def __init__(self, types: set[str]) -> None:
        self.types = set(types)
        self.files: set[str] = set()
        self.keys = HeldKeys()
        self.journal: tuple[int, int, int] | None = None


class ParquetLedger(BaseLedger):
    """A quality ledger stored as Parquet files that any number of writers extend at once, without locks.

    Offers the queries of :class:`QualityLedger` (``append``, ``extend``,
    ``read_all``, ``iter_observations``, ``by_task_type``, ``recent``,
    ``mean_quality``, ``prune_before``, ``malformed_count``) with the same
    validation and errors, plus :meth:`compact`. Layout, durability,
    deduplication of retried writes and compaction are described in the module
    docstring of ``llm_connect.quality._parquet``.

    Parameters
    ----------
    root : str or os.PathLike
        A local directory (created on the first write) or a URI that pyarrow's file systems open
        (``s3://bucket/ledger``, ``gs://...``, ``hdfs://...``, ``file:///abs/path``), else fsspec's
        (``memory://...``, ``az://...``; needs ``fsspec`` and its backend).
    filesystem : pyarrow.fs.FileSystem or fsspec.AbstractFileSystem, optional
        A file system to use with ``root`` as a path on it.
    fsync : bool, default False
        Local roots only: fsync each file and its directory before the write returns.

    Raises
    ------
    ValidationError
        A root that is not a path or URI.
    MissingDependencyError
        A URI needs fsspec and it is not installed.

    See Also
    --------
    QualityLedger : One JSON Lines file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from llm_connect import QualityObservation
    >>> ledger = ParquetLedger(pathlib.Path(tempfile.mkdtemp()) / "ledger")
    >>> ledger.extend([QualityObservation("qa", "small", "small-1", cost_usd=0.001, quality_score=q, latency_ms=90.0,
    ...                                   tokens_in=30, tokens_out=5) for q in (0.8, 1.0)])
    >>> ledger.mean_quality("qa")
    0.9
    """

    def __init__(
        self, root: str | os.PathLike[str], *, filesystem: Any = None, fsync: bool = False
    ) -> None:
        if isinstance(root, bytes) or not isinstance(root, (str, os.PathLike)):
            raise ValidationError(f"ParquetLedger takes a directory path or a URI, got {type(root).__name__}")
        text = os.fspath(root)
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"ParquetLedger takes a directory path or a URI, got {root!r}")
        self._root_arg = root
        self._root = text
        self._filesystem_arg = filesystem
        self._fsync = bool(fsync)
        self._is_uri = filesystem is None and "://" in text
        self._resolved: tuple[Any, str, bool] | None = None
        if filesystem is None and not self._is_uri:
            self._local_root: str | None = os.path.abspath(text)
        else:
            self._local_root = None
        self._new_writer()

    def _new_writer(self) -> None:
        self._pid = os.getpid()
        self._writer_id = uuid.uuid4().hex
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._once_lock = threading.Lock()  # extend_once: one check-and-write at a time in this object
        self._held: _HeldParquet | None = None  # extend_once: what it has read of the ledger

    def __getstate__(self) -> dict[str, Any]:
        # a local root travels as an absolute path: a Ray actor or a subprocess may run in another directory
        root = self._root_arg if self._local_root is None else self._local_root
        return {"root": root, "filesystem": self._filesystem_arg, "fsync": self._fsync}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"], filesystem=state["filesystem"], fsync=state["fsync"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"ParquetLedger({self.root!r})"

    def _repr_html_(self) -> str:
        from .._display import view

        return view("ledger_html")("ParquetLedger", self.root)

    # -- where it lives ------------------------------------------------------------------------

    @property
    def root(self) -> str:
        """The root as given (a URI's credentials, if any, redacted)."""
        return redact_urls(self._root) if self._is_uri else self._root

    @property
    def path(self) -> Path:
        """The local directory of the ledger (judge cards live beside it, in ``<path>.cards.json``).

        A ledger at a URI has none: ``ValidationError``.
        """
        if self._local_root is not None:
            return Path(self._root)
        if self._filesystem_arg is None:
            _, base, local = self._fs()
            if local:
                return Path(base)
        raise ValidationError(
            f"the Parquet ledger at {self.root!r} is not on the local file system, so it has no local path "
            "(judge cards live beside a local ledger): pass cards=JudgeCardRegistry(PATH) explicitly"
        )

    def _fs(self) -> tuple[Any, str, bool]:
        """``(pyarrow file system, root path on it, whether it is the local file system)``, resolved once."""
        if self._resolved is not None:
            return self._resolved
        import pyarrow as pa
        import pyarrow.fs as pafs

        if self._local_root is not None:
            resolved = (pafs.LocalFileSystem(), self._local_root.replace(os.sep, "/"), True)
        elif self._filesystem_arg is not None:
            fs = self._filesystem_arg
            if not isinstance(fs, pafs.FileSystem):
                fs = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
            base = self._root.rstrip("/") or "/"
            resolved = (fs, base, fs.type_name == "local")
        else:
            arrow_says = None
            try:
                fs, base = pafs.FileSystem.from_uri(self._root)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as arrow_exc:
                arrow_says = redact_urls(str(arrow_exc))  # it quotes the URI as given, credentials and all
            except OSError as exc:  # e.g. hdfs:// without libhdfs: its message may quote the URI
                raise self._error(exc, "open") from None
            if arrow_says is not None:
                fs, base = self._fsspec_fs(arrow_says)
            local = fs.type_name == "local"
            resolved = (fs, base.rstrip("/") or "/", local)
        self._resolved = resolved
        return resolved

    def _fsspec_fs(self, arrow_says: str) -> tuple[Any, str]:
        import pyarrow.fs as pafs

        try:
            import fsspec
        except ImportError:
            raise MissingDependencyError(
                "fsspec", "ray", f"the ledger root {self.root!r}, which pyarrow cannot open ({arrow_says}) "
                "(install also the URI's fsspec backend, e.g. s3fs, gcsfs, adlfs)"
            ) from None
        try:
            fs, base = fsspec.core.url_to_fs(self._root)
        except (ImportError, ValueError) as exc:
            raise ValidationError(
                f"cannot open the ledger root {self.root!r}: {redact_urls(str(exc))}; give a local directory or a "
                "URI that pyarrow or fsspec can open (s3://bucket/prefix, gs://..., file:///abs/path)"
            ) from None
        except OSError as exc:
            raise self._error(exc, "open") from None
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), base

    def _error(self, exc: OSError, action: str) -> OSError:
        """``exc`` as the same kind of ``OSError``, its message naming the ledger and what to do."""
        what = exc.strerror or str(exc) or type(exc).__name__
        where = f" ({os.fspath(exc.filename)!r})" if getattr(exc, "filename", None) else ""
        if isinstance(exc, NotADirectoryError) or exc.errno == errno.ENOTDIR:
            todo = "a ParquetLedger root is a directory; a JSON Lines ledger file is a QualityLedger"
        elif isinstance(exc, PermissionError):
            todo = "make the root and its partition directories writable (and readable) for this user"
        else:
            todo = "check the root and that its file system is reachable"
        out = type(exc)(exc.errno or errno.EIO, f"cannot {action} the Parquet ledger {self.root!r}: "
                        f"{redact_urls(what)}{redact_urls(where)}; {todo}")
        return out

    def _check_root(self, fs: Any, base: str) -> bool:
        """Whether the root exists (as a directory); a root that is a file is ``NotADirectoryError``."""
        import pyarrow.fs as pafs

        info = fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            return False
        if info.type != pafs.FileType.Directory:
            raise NotADirectoryError(
                errno.ENOTDIR,
                f"the Parquet ledger root {self.root!r} is a file, not a directory: a ParquetLedger is a "
                "directory of Parquet files; read a JSON Lines ledger file with QualityLedger, or move it with "
                "llm-connect ledger convert",
            )
        return True

    # -- writing -------------------------------------------------------------------------------

    def append(self, observation: QualityObservation) -> None:
        """Write one observation as one new Parquet file (no lock); see :meth:`extend` to write many at once.

        Parameters
        ----------
        observation : QualityObservation
            The observation.
        """
        if not isinstance(observation, QualityObservation):
            raise TypeError(f"append() takes a QualityObservation, got {type(observation).__name__}")
        self._write_observations([observation], "append()")

    def extend(self, observations: Sequence[QualityObservation] | Iterable[QualityObservation]) -> None:
        """Write observations: one new Parquet file per (task type, UTC date) among them, no lock.

        Every observation is checked before anything is written: a non-observation
        is a ``TypeError``, a token count of ``2**63`` or more a ``ValidationError``.

        Parameters
        ----------
        observations : iterable of QualityObservation
            The observations.

        Raises
        ------
        TypeError
            One is not a :class:`QualityObservation` (nothing is written).
        ValidationError
            A token count of ``2**63`` or more.
        """
        items = list(observations)
        for o in items:
            if not isinstance(o, QualityObservation):
                raise TypeError(f"extend() takes QualityObservations, got {type(o).__name__}")
        if items:
            self._write_observations(items, "extend()")

    def _write_observations(self, items: list[QualityObservation], caller: str) -> list[str]:
        self._check_storable(items, caller)
        groups: dict[tuple[str, str], list[QualityObservation]] = {}
        for o in items:
            groups.setdefault((o.task_type, o.recorded_at.date().isoformat()), []).append(o)
        written = [self._write_file(f"task_type={encode_segment(task_type)}/date={day}", "part", _table(group), None)
                   for (task_type, day), group in groups.items()]
        self._journal(written)
        return written

    @staticmethod
    def _check_storable(items: list[QualityObservation], caller: str) -> None:
        for i, o in enumerate(items):
            why = unstorable(o)
            if why is not None:
                which = "the observation" if len(items) == 1 else f"observation {i} of {caller}"
                raise ValidationError(f"{which} has {why}; nothing was written")

    def extend_once(self, observations: Iterable[QualityObservation]) -> Recorded:
        """Write the observations whose judgment or label the ledger does not hold yet (see
        :meth:`BaseLedger.extend_once`).

        On a local root the check and the write hold ``filelock.FileLock(ROOT/_record.lock)``, so writers
        on one host never record one key twice. The first call lists and reads the partitions of its task
        types; later calls read only the files written since, which every writer of a local root names in
        ``ROOT/_record.journal`` (a compaction starts a new journal, and the next call reads everything
        again), so a run recording group after group costs one small read per group, not a listing. On an
        object store the check lists the partitions on every call and takes no lock: two writers recording
        one key at the same moment may both write it (a retried write of one job is still read once, see
        :data:`DEDUPE_TAGS`).

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
        self._check_storable(items, "extend_once()")
        if all(record_key(o) is None for o in items):
            self._write_observations(items, "extend_once()")
            return Recorded.all_written(len(items))
        with self._once_lock, self._record_lock():
            held = self._read_held(sorted({o.task_type for o in items}))
            keep, recorded = held.keys.select(items)
            if keep:
                kept = [items[i] for i in keep]
                written = self._write_observations(kept, "extend_once()")
                held.keys.update(kept)
                held.files.update(written)
        return recorded

    @contextlib.contextmanager
    def _record_lock(self) -> Iterator[None]:
        """``filelock.FileLock(ROOT/_record.lock)`` on a local root (created if missing); nothing elsewhere."""
        fs, base, local = self._fs()
        if not local:
            yield
            return
        from filelock import FileLock

        try:
            self._check_root(fs, base)
            os.makedirs(base, exist_ok=True)
            lock = FileLock(os.path.join(base, "_record.lock"))
            lock.acquire()
        except OSError as exc:
            raise self._error(exc, "write to") from exc
        try:
            yield
        finally:
            lock.release()

    # -- the journal of a local root: which files were written since a reader last looked ----------

    def _journal(self, paths: Sequence[str]) -> None:
        """Name ``paths`` (just written) in ``ROOT/_record.journal``, one ``+<relative path>`` line each, with
        one appending write (local roots only, and only once some ``extend_once`` created the journal; a
        journal that cannot be written is left: the files stand, and the next full reading sees them)."""
        _, base, local = self._fs()
        if not local or not paths:
            return
        prefix = base.rstrip("/") + "/"
        lines = "".join(f"+{p[len(prefix):] if p.startswith(prefix) else p}\n" for p in paths)
        try:  # only into a journal that exists: a reader creates it before it lists the files, so a file
            # renamed into place after that listing is named in it, and one renamed before is listed
            fd = os.open(os.path.join(base, _JOURNAL), os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        with contextlib.suppress(OSError), os.fdopen(fd, "ab") as handle:
            handle.write(lines.encode("utf-8", "surrogateescape"))

    def _journal_state(self, base: str) -> tuple[int, int, int]:
        """``(device, inode, size)`` of the journal, created if missing (called under the record lock)."""
        try:
            with open(os.path.join(base, _JOURNAL), "ab") as handle:
                st = os.fstat(handle.fileno())
        except OSError as exc:
            raise self._error(exc, "write to") from exc
        return st.st_dev, st.st_ino, st.st_size

    def _journal_since(self, base: str, state: tuple[int, int, int]) -> tuple[list[str], tuple[int, int, int]] | None:
        """The files the journal names after ``state``'s offset and the new state; ``None`` when the journal is
        another file now (a compaction started a new one) or shorter: everything must be read again."""
        try:
            handle = open(os.path.join(base, _JOURNAL), "rb")  # noqa: SIM115 - closed below
        except OSError:
            return None
        with handle:
            st = os.fstat(handle.fileno())
            if (st.st_dev, st.st_ino) != state[:2] or st.st_size < state[2]:
                return None
            handle.seek(state[2])
            data = handle.read(st.st_size - state[2])
        cut = data.rfind(b"\n") + 1  # a line still being written by a writer without the lock: next time
        names = [line[1:].decode("utf-8", "surrogateescape") for line in data[:cut].split(b"\n")
                 if line.startswith(b"+")]
        return names, (state[0], state[1], state[2] + cut)

    def _new_journal(self) -> None:
        """Start a new journal (a compaction changed which files hold what): every reader reads again."""
        _, base, local = self._fs()
        if not local:
            return
        with contextlib.suppress(OSError), temp_file_beside(base, f"{_JOURNAL}.") as (fd, name):
            os.close(fd)
            os.replace(name, os.path.join(base, _JOURNAL))

    # -- what the ledger holds, for extend_once -------------------------------------------------------

    def _read_held(self, task_types: Sequence[str]) -> _HeldParquet:
        """What the partitions of ``task_types`` hold now: only what is new since the last call, when that can
        be known (a local root's journal; else a listing against the files read before), else everything."""
        last: str | None = None
        for _ in range(_READ_ATTEMPTS):
            try:
                held = self._held
                if held is not None and set(task_types) <= held.types and self._read_new(held):
                    return held
                self._held = None
                held = self._held = self._read_all_held(set(task_types) | (held.types if held else set()))
                return held
            except _Vanished as gone:
                self._held = None
                last = str(gone)
        raise OSError(
            errno.EAGAIN,
            f"cannot read the Parquet ledger {self.root!r}: its files kept changing while being read "
            f"({_READ_ATTEMPTS} attempts, last vanished: {last!r}); is a compaction running in a loop?",
        )

    def _read_new(self, held: _HeldParquet) -> bool:
        """Read into ``held`` the files written since it was read; ``False`` when everything must be read again."""
        fs, base, local = self._fs()
        if local:
            assert held.journal is not None
            since = self._journal_since(base, held.journal)
            if since is None:
                return False
            names, held.journal = since
            wanted = {f"task_type={encode_segment(t)}" for t in held.types}
            paths = [f"{base.rstrip('/')}/{n}" for n in names
                     if not n.startswith("task_type=") or n.split("/", 1)[0] in wanted]
        else:
            live = self._live_files(fs, held.types)
            if not held.files <= live:  # a compaction replaced files read before
                return False
            paths = sorted(live - held.files)
        for p in paths:
            if p not in held.files:
                table = self._read_file(fs, p)[0]  # a file gone meanwhile (a compaction): _Vanished, read again
                if table is not None:
                    held.keys.update(_table_observations(table))
                held.files.add(p)
        return True

    def _read_all_held(self, types: set[str]) -> _HeldParquet:
        fs, base, local = self._fs()
        held = _HeldParquet(types)
        if local:
            held.journal = self._journal_state(base)  # before listing: what is written after it is read next time
        for p in sorted(self._live_files(fs, types)):
            table = self._read_file(fs, p)[0]
            if table is not None:
                held.keys.update(_table_observations(table))
            held.files.add(p)
        return held

    def _live_files(self, fs: Any, types: set[str]) -> set[str]:
        """The ledger files of the partitions of ``types`` that no compacted file replaces."""
        listed: set[str] = set()
        try:
            for task_type in sorted(types):
                listed.update(self._list(task_type) or [])
        except OSError as exc:
            raise self._error(exc, "read") from exc
        replaced: set[str] = set()
        for p in sorted(listed):
            if p.rsplit("/", 1)[-1].startswith("compact-"):
                replaces = self._read_file(fs, p)[1]
                directory = p.rsplit("/", 1)[0]
                replaced.update(f"{directory}/{n}" for n in replaces or ())
        return listed - replaced

    def _next_name(self, prefix: str) -> str:
        if self._pid != os.getpid():  # a forked child must never reuse its parent's file names
            self._new_writer()
        with self._lock:
            seq = next(self._seq)
        return f"{prefix}-{self._writer_id}-{seq:08d}.parquet"

    def _write_file(self, rel_dir: str, prefix: str, table: Any, replaces: list[str] | None) -> str:
        """Write ``table`` as a new file in ``ROOT/rel_dir`` atomically; returns its path on the file system."""
        import pyarrow.parquet as pq

        fs, base, local = self._fs()
        if replaces is not None:
            meta = dict(table.schema.metadata or {})
            meta[_REPLACES_KEY] = json.dumps(sorted(replaces)).encode("utf-8")
            table = table.replace_schema_metadata(meta)
        name = self._next_name(prefix)
        directory = f"{base}/{rel_dir}" if rel_dir else base
        final = f"{directory}/{name}"
        try:
            if local:
                self._check_root(fs, base)
                os.makedirs(directory, exist_ok=True)
                tmp = f"{directory}/.{name}.tmp"
                try:
                    with open(tmp, "xb") as handle:
                        pq.write_table(table, handle, compression="zstd")
                        if self._fsync:
                            handle.flush()
                            os.fsync(handle.fileno())
                    os.replace(tmp, final)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
                if self._fsync:
                    fsync_dir(directory)
            else:
                self._check_root(fs, base)
                fs.create_dir(directory, recursive=True)
                with fs.open_output_stream(final) as out:  # an object store shows it once complete
                    pq.write_table(table, out, compression="zstd")
        except OSError as exc:
            raise self._error(exc, "write to") from exc
        return final

    # -- reading -------------------------------------------------------------------------------

    def _list(self, task_type: str | None) -> list[str] | None:
        """The ledger files under the root (sorted), or ``None`` when the root does not exist.

        With ``task_type``, only its partition (and files outside any ``task_type=`` directory)."""
        import pyarrow.fs as pafs

        fs, base, _ = self._fs()
        if not self._check_root(fs, base):
            return None
        prefix = base.rstrip("/") + "/"
        wanted = None if task_type is None else f"task_type={encode_segment(task_type)}"
        out = []
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
                continue
            rel = info.path[len(prefix):] if info.path.startswith(prefix) else info.base_name
            parts = rel.split("/")
            if any(p.startswith((".", "_")) for p in parts):
                continue
            if wanted is not None and parts[0].startswith("task_type=") and parts[0] != wanted:
                continue
            out.append(info.path)
        return sorted(out)

    def _read_file(self, fs: Any, path: str) -> tuple[Any, list[str] | None]:
        """``(table conformed to the schema, or None if unreadable; the names it replaces, if a compacted file)``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with fs.open_input_file(path) as handle:
                table = pq.ParquetFile(handle).read()  # a third of read_table's cost per small file
        except FileNotFoundError:
            raise _Vanished(path) from None
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise _Vanished(path) from None
            if isinstance(exc, PermissionError):
                raise self._error(exc, "read") from exc
            return None, None
        except (pa.ArrowException, ValueError, TypeError):
            return None, None
        replaces = None
        meta = table.schema.metadata or {}
        if _REPLACES_KEY in meta:
            # a compacted file names the files it replaces as a JSON list of names: anything else (not JSON,
            # JSON that is not a list of strings) makes it a file that cannot be read as a ledger file
            try:
                names = json.loads(meta[_REPLACES_KEY])
            except (ValueError, RecursionError):
                return None, None
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return None, None
            replaces = names
        return _conform(table), replaces

    def _snapshot(self, task_type: str | None = None, *, with_table: bool = False) -> _Snapshot:
        last: str | None = None
        for _ in range(_READ_ATTEMPTS):
            try:
                return self._read_once(task_type, with_table)
            except _Vanished as gone:
                last = str(gone)
        raise OSError(
            errno.EAGAIN,
            f"cannot read the Parquet ledger {self.root!r}: its files kept changing while being read "
            f"({_READ_ATTEMPTS} attempts, last vanished: {last!r}); is a compaction running in a loop?",
        )

    def _read_once(self, task_type: str | None, with_table: bool) -> _Snapshot:
        import numpy as np
        import pyarrow as pa

        fs = self._fs()[0]
        try:
            listed = self._list(task_type)
        except OSError as exc:
            raise self._error(exc, "read") from exc
        snap = _Snapshot()
        if not listed:
            return snap
        # Compacted files first: they say which other files are gone.
        by_name = {p: p.rsplit("/", 1)[-1] for p in listed}
        compacted = [p for p in listed if by_name[p].startswith("compact-")]
        tables: dict[str, Any] = {}
        for p in compacted:
            table, replaces = self._read_file(fs, p)
            tables[p] = table
            if replaces:
                directory = p.rsplit("/", 1)[0]
                # only those still listed: the others are gone already
                snap.replaced.update(f"{directory}/{n}" for n in replaces if f"{directory}/{n}" in by_name)
        parts = []
        for p in listed:
            if p in snap.replaced:
                continue
            table = tables[p] if p in tables else self._read_file(fs, p)[0]
            if table is None:
                snap.malformed += 1
                continue
            ordinal = len(snap.files)
            snap.files.append(p)
            n = table.num_rows
            parts.append(table.append_column("_file", pa.array(np.full(n, ordinal, dtype=np.int32)))
                         .append_column("_row", pa.array(np.arange(n, dtype=np.int64))))
        # A compaction that finished while we read (a new compacted file, or a file gone) means: read again.
        try:
            again = self._list(task_type) or []
        except OSError as exc:
            raise self._error(exc, "read") from exc
        now_listed = set(again)
        if any(p not in now_listed for p in snap.files) or any(
            p.rsplit("/", 1)[-1].startswith("compact-") and p not in by_name for p in again
        ):
            raise _Vanished("a compaction finished during the read")
        if not parts:
            return snap
        table = pa.concat_tables(parts)
        _observations(table, snap, task_type)
        if with_table:
            snap.table = table
        return snap

    def iter_observations(self) -> Iterator[QualityObservation]:
        """The valid observations, deduplicated, by ``recorded_at`` (one snapshot, read when iteration starts).

        Returns
        -------
        iterator of QualityObservation
            The observations.
        """
        yield from self._snapshot().observations

    def read_all(self) -> list[QualityObservation]:
        """Every valid observation, deduplicated, by ``recorded_at``.

        Returns
        -------
        list of QualityObservation
            The observations.
        """
        return self._snapshot().observations

    def _matching(self, task_type: str | None) -> Iterable[QualityObservation]:
        return self._snapshot(task_type).observations

    def read_with_malformed(self) -> tuple[list[QualityObservation], int]:
        """The observations (as :meth:`read_all`) and :meth:`malformed_count`, from one reading.

        Returns
        -------
        tuple of (list of QualityObservation, int)
            The observations and the malformed count.
        """
        snap = self._snapshot()
        return snap.observations, snap.malformed

    def column_block(self, tags: TagLayout = "columns") -> tuple[ColumnBlock | None, int]:
        """What :func:`llm_connect.frames.ledger_frame` builds its frame from: the observations of
        :meth:`read_all` as one column block (arrow columns, tags in ``tags`` layout; ``None`` when there
        are none) and :meth:`malformed_count`, from one reading.

        Parameters
        ----------
        tags : {"columns", "dicts"}, default "columns"
            How the tags are laid out (see :func:`~llm_connect.frames.ledger_frame`).

        Returns
        -------
        tuple of (ColumnBlock or None, int)
            The columns, and the malformed count.
        """
        import numpy as np
        import pyarrow as pa

        snap = self._snapshot(with_table=True)
        obs = snap.observations
        if not obs:
            return None, snap.malformed
        idx = pa.array(snap.rows, pa.int64())
        columns = {name: snap.table.column(name).combine_chunks().take(idx)
                   for name in (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS, "recorded_at")}
        if tags == "dicts":
            return ColumnBlock(np.arange(len(obs)), columns, [dict(o.tags) for o in obs]), snap.malformed
        keys: dict[str, None] = {}
        for o in obs:
            if o.tags:
                keys.update(dict.fromkeys(o.tags))
        by_key = {k: [o.tags.get(k) for o in obs] for k in keys}
        return ColumnBlock(np.arange(len(obs)), columns, by_key), snap.malformed

    def malformed_count(self) -> int:
        """Files that cannot be read as ledger files (one each) plus rows that are not valid observations.

        Returns
        -------
        int
            The count.
        """
        return self._snapshot().malformed

    # -- compaction ----------------------------------------------------------------------------

    def prune_before(self, timestamp: datetime) -> int:
        """Remove valid observations with ``recorded_at < timestamp`` (naive: UTC); return how many were removed.

        The count is of observations as readers see them (a duplicate copy
        dropped with them is not counted). A compaction, safe while others append:
        see the module docstring. Invalid rows and unreadable files are kept.

        Parameters
        ----------
        timestamp : datetime
            The cut (naive: UTC).

        Returns
        -------
        int
            How many observations were removed.
        """
        cutoff = as_utc(timestamp, "timestamp")
        return self._compact(cutoff)[0]

    def compact(self) -> int:
        """Merge each partition's files into one (dropping duplicate copies); return how many files it replaced.

        Safe while others append (see the module docstring); removes no observation.

        Returns
        -------
        int
            How many files it replaced.
        """
        return self._compact(None)[1]

    @contextlib.contextmanager
    def _compaction_lock(self) -> Iterator[None]:
        _, base, local = self._fs()
        if not local:
            yield
            return
        from filelock import FileLock

        with FileLock(os.path.join(base, "_compaction.lock")):
            yield

    def _remove_orphaned_temp_files(self, base: str) -> None:
        """Delete the temporary files (``.part-*.parquet.tmp``) of writers killed mid-write over a day ago."""
        cutoff = time.time() - _ORPHAN_AGE_S
        for directory, _, names in os.walk(base):
            for name in names:
                if name.startswith((".part-", ".compact-")) and name.endswith(".parquet.tmp"):
                    path = os.path.join(directory, name)
                    with contextlib.suppress(OSError):
                        if os.stat(path).st_mtime < cutoff:
                            os.unlink(path)

    def _compact(self, cutoff: datetime | None) -> tuple[int, int]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        fs, base, _ = self._fs()
        try:
            if not self._check_root(fs, base):
                return 0, 0
        except OSError as exc:
            raise self._error(exc, "prune") from exc
        with self._compaction_lock():
            if self._fs()[2]:
                self._remove_orphaned_temp_files(base)
            snap = self._snapshot(with_table=True)
            dirs: dict[str, list[int]] = {}
            for ordinal, p in enumerate(snap.files):
                dirs.setdefault(p.rsplit("/", 1)[0], []).append(ordinal)
            leftovers: dict[str, list[str]] = {}
            for p in snap.replaced:  # files a crashed compaction left behind
                leftovers.setdefault(p.rsplit("/", 1)[0], []).append(p)
                dirs.setdefault(p.rsplit("/", 1)[0], [])
            removed = 0
            replaced_files = 0
            table = snap.table
            if table is not None:
                file_col = table.column("_file").to_numpy()
                if cutoff is not None:
                    stamps = pc.cast(table.column("recorded_at"), pa.int64()).fill_null(0).to_numpy()
                    old = snap.valid & (stamps < _micros(cutoff))
                else:
                    old = np.zeros(table.num_rows, dtype=bool)
                keep_row = ~snap.valid | (snap.kept & ~old)
                gone_row = snap.kept & old
            for directory, ordinals in sorted(dirs.items()):
                victims = [snap.files[i] for i in ordinals] + leftovers.get(directory, [])
                if table is not None and ordinals:
                    in_dir = np.isin(file_col, ordinals)
                    n_gone = int((in_dir & gone_row).sum())
                    n_dropped = int((in_dir & ~keep_row).sum())
                else:
                    in_dir = None
                    n_gone = n_dropped = 0
                if not (n_dropped or len(victims) > 1 or leftovers.get(directory)):
                    continue
                if in_dir is not None:
                    kept = table.filter(pa.array(in_dir & keep_row))
                    order = [("recorded_at", "ascending"), ("_file", "ascending"), ("_row", "ascending")]
                    kept = kept.take(pc.sort_indices(kept, order))
                    kept = kept.select(list(_COLUMNS)).cast(_schema())
                else:
                    kept = _schema().empty_table()
                rel = directory[len(base.rstrip("/")) + 1:]
                names = [v.rsplit("/", 1)[-1] for v in victims]
                try:
                    written = self._write_file(rel, "compact", kept, names)
                    for victim in victims:
                        with contextlib.suppress(FileNotFoundError):
                            fs.delete_file(victim)
                    if kept.num_rows == 0:
                        fs.delete_file(written)
                except OSError as exc:
                    raise self._error(exc, "prune") from exc
                removed += n_gone
                replaced_files += len(victims)
            if replaced_files:
                self._new_journal()
            return removed, replaced_files
