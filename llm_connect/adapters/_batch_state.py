"""The state store of a run through the providers' Batch APIs: a folder (beside the ledger, or the one given as
``batch=``) whose ``state.json`` names every submitted batch and its requests, written before anything is
submitted, merged under a lock when several runs share the folder, with the collected replies kept until the run
finishes (:class:`BatchState`); :func:`state_subfolder` names one part's folder, :func:`resubmit_expired` sends the
unfinished requests again. How a run goes through the Batch APIs is in :mod:`llm_connect.adapters._batches`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import AdapterError, ValidationError

__all__ = ["BatchState", "resubmit_expired", "state_subfolder"]

logger = logging.getLogger("llm_connect.adapters")

_STATE_FILE = "state.json"
_STATE_VERSION = 1
#: how long a write waits for another run's hold on the state's lock (it holds it for one write)
_LOCK_TIMEOUT_S = 120.0
#: kinds of per-request outcome that :func:`resubmit_expired` sends again
_UNFINISHED = frozenset({"expired", "cancelled"})


def state_subfolder(root: str | os.PathLike[str], name: str) -> Path:
    """The state folder of one part of a run (one judge of ``calibrate``) inside ``root``, whatever ``name`` is.

    The folder's name is a readable slug of ``name`` (letters, digits, ``_`` and ``-``; at most 40) and
    the first 16 hex digits of its SHA-256, so ``".."``, ``"/"``, ``"a/../.."``, an absolute path, a NUL,
    a very long name or two names differing only in case each get their own folder, always directly
    inside ``root``.

    Parameters
    ----------
    root : str or os.PathLike
        The run's state folder (``<ledger>.batches``, or the one given as ``batch=``).
    name : str
        The part's name (e.g. the judge's name in ``calibrate``); any text.

    Returns
    -------
    pathlib.Path
        ``root / "<slug>-<hash>"``.

    Raises
    ------
    ValidationError
        If the folder would not be inside ``root`` (it cannot be: the check guards the derivation).
    """
    text = str(name)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", text)[:40].strip("_") or "part"
    folder = Path(root) / f"{slug}-{digest}"
    if not _inside(folder, root, strict=True):
        raise ValidationError(f"the batch state folder for {name!r} would not be inside {os.fspath(root)!r}")
    return folder


def _inside(path: str | os.PathLike[str], root: str | os.PathLike[str], *, strict: bool = False) -> bool:
    """Whether ``path`` (resolved: ``..`` and symbolic links followed) is ``root`` or inside it (``strict``:
    strictly inside)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    if real == top:
        return not strict
    return os.path.commonpath([real, top]) == top


def _lock_path(root: Path) -> Path:
    """The lock every writer of a state folder takes: ``<root>.lock``, beside the root (never inside a folder
    that is removed, so no writer ever holds a lock on a deleted file)."""
    absolute = Path(os.path.abspath(root))
    return absolute.with_name(absolute.name + ".lock") if absolute.name else absolute / ".batch-state.lock"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a crash leaves the old file or the new one, never half."""
    from ..quality._ledger_io import temp_file_beside

    path.parent.mkdir(parents=True, exist_ok=True)
    with temp_file_beside(path.parent, f".{path.name}.") as (fd, tmp):
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)


def _dump(entry: Mapping[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, ensure_ascii=False)


#: the files a state folder holds (all of them ours): removed one by one, never the folder's other contents
_OWN_NAME = r"(?:state\.json|recorded\.jsonl|b\d+-[0-9a-f]{8}\.results\.jsonl)"
_OWN_FILE = re.compile(rf"{_OWN_NAME}|\.{_OWN_NAME}\.[^.]+\.tmp")  # and the temporary files of atomic writes
_RECORDED_FILE = "recorded.jsonl"


class BatchState:
    """The batches of a state folder, on disk: each entry its provider ids, its requests (``custom_id`` ->
    cache key and rows) and, once collected, its outcomes in ``<local_id>.results.jsonl``.

    Several runs may use one folder at once (two ``judge_many(..., batch=True)`` calls on one ledger):
    every write takes the folder's lock (``<root>.lock``, beside it) and merges with what is on disk, so
    an entry another run wrote is never erased: an entry this run changed is written as it has it, one
    it did not change is taken from the disk (the other run may have advanced it), one it dropped is
    dropped. ``root``: the folder the state must stay inside (``directory`` itself unless the run keeps
    one state per part, see :func:`state_subfolder`); nothing outside it is ever removed.
    """

    def __init__(self, directory: Path, *, root: Path | None = None, shared: bool = True) -> None:
        self.directory = Path(directory)
        self.root = Path(root) if root is not None else self.directory
        self.path = self.directory / _STATE_FILE
        self._lock: Any = None
        if shared:
            from filelock import FileLock

            self._lock = FileLock(str(_lock_path(self.root)), thread_local=False)
        self._results: dict[str, dict[str, dict[str, Any]]] = {}
        self._where: dict[str, tuple[dict[str, Any], str]] | None = None
        #: rows recorded in the ledger by runs that used this state (see :meth:`BatchCollector.recorded_before`)
        self.marks: set[str] = set()
        self.pending_marks: list[str] = []
        with self._locked():
            self.batches: list[dict[str, Any]] = self._read()
            self.marks = self._read_marks()
        self._seen = {e["local_id"]: _dump(e) for e in self.batches}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock is None:
            yield
            return
        try:
            self._lock.acquire(timeout=_LOCK_TIMEOUT_S)
        except TimeoutError as exc:  # filelock's Timeout is a TimeoutError
            raise AdapterError(f"the batch state {self.directory} stayed locked by another run for "
                               f"{_LOCK_TIMEOUT_S:g}s ({_lock_path(self.root)}): wait for it, or remove that lock "
                               "file if no run is using the state") from exc
        try:
            yield
        finally:
            self._lock.release()

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("llm_connect: ignoring an unreadable batch state file %s (%s)", self.path, exc)
            return []
        if not isinstance(data, dict) or data.get("version") != _STATE_VERSION:
            return []
        return [b for b in data.get("batches", []) if isinstance(b, dict) and isinstance(b.get("local_id"), str)]

    def _write(self, batches: list[dict[str, Any]]) -> None:
        _write_atomic(self.path, json.dumps({"version": _STATE_VERSION, "batches": batches}, indent=1))
        if self.pending_marks:
            with open(self.directory / _RECORDED_FILE, "a", encoding="utf-8") as fh:
                fh.write("".join(mark + "\n" for mark in self.pending_marks))
            self.pending_marks = []

    def _read_marks(self) -> set[str]:
        try:
            text = (self.directory / _RECORDED_FILE).read_text(encoding="utf-8")
        except OSError:
            return set()
        return {line for line in text.splitlines() if line.strip()}

    def save(self) -> None:
        """Write this run's entries, merged (under the lock) with what other runs wrote meanwhile."""
        with self._locked():
            self._merge_and_write()

    def _merge_and_write(self) -> None:
        disk = {e["local_id"]: e for e in self._read()}
        mine = {e["local_id"]: e for e in self.batches}
        merged: list[dict[str, Any]] = []
        for local_id, theirs in disk.items():
            entry = mine.get(local_id)
            if entry is None:
                if local_id not in self._seen:  # another run's: kept
                    merged.append(theirs)
                continue  # this run dropped it
            if _dump(entry) == self._seen.get(local_id):  # unchanged here: the disk's may be newer
                entry.clear()
                entry.update(theirs)
            merged.append(entry)
        for local_id, entry in mine.items():
            if local_id not in disk and (local_id not in self._seen or _dump(entry) != self._seen[local_id]):
                merged.append(entry)  # new here (or changed here after another run dropped it)
        self._write(merged)
        self.batches = merged
        self._seen = {e["local_id"]: _dump(e) for e in merged}
        self._where = None

    def where(self) -> dict[str, tuple[dict[str, Any], str]]:
        """cache key -> (its batch entry, its custom_id)."""
        if self._where is None:
            out: dict[str, tuple[dict[str, Any], str]] = {}
            for entry in self.batches:
                for custom_id, request in entry.get("requests", {}).items():
                    out[request["key"]] = (entry, custom_id)
            self._where = out
        return self._where

    def changed(self) -> None:
        """Entries were added, dropped or given other requests in memory: :meth:`where` looks again."""
        self._where = None

    def results(self, entry: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        local = entry["local_id"]
        if local not in self._results:
            found: dict[str, dict[str, Any]] = {}
            path = self.directory / f"{local}.results.jsonl"
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        item = json.loads(line)
                        found[item["custom_id"]] = item
            self._results[local] = found
        return self._results[local]

    def store_results(self, entry: dict[str, Any], outcomes: dict[str, dict[str, Any]]) -> None:
        text = "".join(json.dumps({"custom_id": cid, **o}, ensure_ascii=False) + "\n" for cid, o in outcomes.items())
        with self._locked():
            _write_atomic(self.directory / f"{entry['local_id']}.results.jsonl", text)
            self._results[entry["local_id"]] = outcomes
            entry["status"] = "collected"
            entry.pop("unknown", None)
            self._merge_and_write()

    def uncollected(self, local_ids: Collection[str] | None = None) -> int:
        """Batches submitted (or uploaded) whose replies were not collected (a run that gave up polling, a
        batch the provider did not know): all of them, or those of ``local_ids``."""
        return sum(1 for e in self.batches
                   if (local_ids is None or e["local_id"] in local_ids)
                   and e.get("status") != "collected" and (e.get("batch_id") or e.get("file_id")))

    def unfinished(self, local_ids: Collection[str] | None = None) -> int:
        """Requests of expired or cancelled batches (all of them, or those of ``local_ids``)."""
        return sum(1 for e in self.batches if local_ids is None or e["local_id"] in local_ids
                   for o in self.results(e).values() if o.get("kind") in _UNFINISHED)

    def finish(self, local_ids: Collection[str] | None = None) -> None:
        """Drop the entries of ``local_ids`` (every entry: ``None``) and their replies; when no entry is left
        (another run's included), remove the state folder (see :meth:`remove`)."""
        with self._locked():
            if local_ids is None:
                local_ids = {e["local_id"] for e in self.batches} | {e["local_id"] for e in self._read()}
            for local_id in local_ids:
                with contextlib.suppress(OSError):
                    (self.directory / f"{local_id}.results.jsonl").unlink()
                self._results.pop(local_id, None)
            self.batches = [e for e in self.batches if e["local_id"] not in local_ids]
            self._merge_and_write()
            if not self.batches:
                self._remove_files()

    def remove(self) -> None:
        """Remove the state folder's own files (state, replies, marks of recorded rows), then the folder when
        that leaves it empty (and ``root`` too, when it is another folder left empty): never anything else,
        and nothing at all unless the folder is inside ``root``."""
        with self._locked():
            self._remove_files()

    def _remove_files(self) -> None:
        if not _inside(self.directory, self.root):
            logger.warning("llm_connect: not removing the batch state %s: it is not inside %s",
                           self.directory, self.root)
            return
        try:
            names = os.listdir(self.directory)
        except OSError:
            names = []
        for name in names:
            if _OWN_FILE.fullmatch(name):
                with contextlib.suppress(OSError):
                    os.unlink(self.directory / name)
        for folder in (self.directory, self.root) if self.root != self.directory else (self.directory,):
            with contextlib.suppress(OSError):
                os.rmdir(folder)  # only when empty
        self.batches = []
        self._seen = {}
        self._results = {}
        self._where = None


def resubmit_expired(state_dir: str | os.PathLike[str]) -> int:
    """Make the next run send again every request of an expired or cancelled batch that never ran, and of a
    batch the provider no longer knows (it answered 404 for it: removed, or created with another key).

    ``state_dir``: the run's batch folder (``<ledger>.batches``, or the one given as ``batch=``). The
    outcomes of those requests are forgotten, so the same ``judge_many(..., batch=True)`` call submits
    them in a new batch (the replies that came back are kept). Returns how many will be resubmitted.

    Parameters
    ----------
    state_dir : str or os.PathLike
        The state folder the error message named.

    Returns
    -------
    int
        How many requests the next run sends again.
    """
    state = BatchState(Path(state_dir))
    if not state.batches:
        return 0
    count = 0
    for entry in list(state.batches):
        if entry.get("unknown") and entry.get("status") != "collected":
            count += len(entry.get("requests", {}))
            state.batches.remove(entry)
            continue
        outcomes = state.results(entry)
        drop = [cid for cid, o in outcomes.items() if o.get("kind") in _UNFINISHED]
        if not drop:
            continue
        for cid in drop:
            outcomes.pop(cid)
            entry["requests"].pop(cid, None)
        count += len(drop)
        state.store_results(entry, outcomes)
    state.save()
    return count
