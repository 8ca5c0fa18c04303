"""Converted models kept on disk: where they live, under which key, how they are checked and written.

The embedded judge converts a GGUF file once (transformers dequantises it; see ``_onnx_llama``) and keeps the
result here, so that later processes load it in a fraction of a second instead of converting again::

    <cache>/models/<name>-<source hash>-<versions hash>/   one entry: manifest.json and its files
    <cache>/models/<entry>.lock                            held while an entry is built (filelock)
    <cache>/sources/<hash of the path>.json                a model file's content hash, by its stat

``<cache>`` is ``$LLM_CONNECT_CACHE_DIR``, else the user cache directory (``platformdirs``:
``~/.cache/llm-connect`` on Linux). An entry's key is the model file's content hash (SHA-256) and the versions
of the libraries that wrote it, so a changed file or an upgrade builds a new entry. Its manifest records every
file's size and SHA-256, and its own (of the rest of its content).

**Checked before use, cheaply.** Hashing the 540 MB of weights at every load would cost half a second, so the
full hashes are compared once, and again whenever a file's stat (size, modification and change times, inode)
is no longer the one recorded beside the manifest (``stat.json``) when the hashes last matched: any write to a
file moves its change time, which a program cannot set back. A model file's own hash is kept the same way
(``sources/``). An entry whose manifest is unreadable, whose files are missing, truncated or changed, or that
was converted from another model file, is said on stderr and rebuilt; it is never loaded silently.

**Written atomically.** An entry is built in a temporary directory beside it and renamed into place, under a
file lock per entry: two processes loading at once both succeed, one of them converts, the other waits for it
and loads its result. A temporary directory left by a process that died is removed by the next build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MissingDependencyError

__all__ = ["CACHE_ENV", "cache_root", "open_entry", "source_digest"]

#: The environment variable that moves the cache (tests point it at a temporary directory).
CACHE_ENV = "LLM_CONNECT_CACHE_DIR"
#: The manifest's own format; raised when the layout of an entry changes.
FORMAT = 1
MANIFEST = "manifest.json"
STAMP = "stat.json"
_CHUNK = 1 << 20


def cache_root() -> Path:
    """The cache directory: ``$LLM_CONNECT_CACHE_DIR``, else the user cache directory of ``llm-connect``."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    try:
        import platformdirs
    except ImportError as exc:
        raise MissingDependencyError("platformdirs", "local", f"the converted-model cache (or set {CACHE_ENV})") \
            from exc
    return Path(platformdirs.user_cache_dir("llm-connect", appauthor=False))


def say(message: str) -> None:
    """One line for the user on stderr (conversions, rebuilds): what happens and why."""
    print(f"llm-connect: {message}", file=sys.stderr, flush=True)


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, atomically (a temporary file beside it, then ``os.replace``)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def _digest_of(manifest: dict[str, Any]) -> str:
    """The SHA-256 of a manifest's content without its own ``digest`` (so an edited manifest is found)."""
    body = {key: value for key, value in manifest.items() if key != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


def _read_json(path: Path) -> Any:
    """The JSON object at ``path``, or ``None`` when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def source_digest(path: Path, root: Path | None = None) -> str:
    """The SHA-256 of a model file's content, hashed once and then remembered by its stat under ``root``."""
    root = cache_root() if root is None else root
    real = Path(os.path.realpath(path))
    memo = root / "sources" / f"{hashlib.sha256(str(real).encode()).hexdigest()[:24]}.json"
    stat = _stat_key(real)
    known = _read_json(memo)
    if known is not None and known.get("path") == str(real) and known.get("stat") == stat \
            and isinstance(known.get("sha256"), str):
        return str(known["sha256"])
    digest = _file_sha256(real)
    if _stat_key(real) == stat:  # not changed while it was read
        with contextlib.suppress(OSError):
            memo.parent.mkdir(parents=True, exist_ok=True)
            _write_json(memo, {"path": str(real), "stat": stat, "sha256": digest})
    return digest


def entry_key(source: Path, digest: str, versions: dict[str, str]) -> str:
    """The directory name of a model's entry: its name, its content hash and the writers' versions."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", source.stem)[:48] or "model"
    written_by = hashlib.sha256(json.dumps({"format": FORMAT, **versions}, sort_keys=True).encode()).hexdigest()
    return f"{name}-{digest[:16]}-{written_by[:8]}"


def check_entry(entry: Path, digest: str, versions: dict[str, str]) -> str | None:
    """Why ``entry`` cannot be used (``"missing"`` when it does not exist), or ``None`` when it is sound.

    The manifest must name this model file's hash and these versions, and every file it lists must exist
    with its size; files whose stat is not the one recorded when their hashes last matched are hashed again.
    """
    if not entry.is_dir():
        return "missing"
    manifest = _read_json(entry / MANIFEST)
    if manifest is None:
        return f"its {MANIFEST} is missing or unreadable"
    if manifest.get("digest") != _digest_of(manifest):
        return f"its {MANIFEST} is corrupt (its content is not what was written)"
    if manifest.get("format") != FORMAT:
        return f"its format is {manifest.get('format')!r}, this version writes {FORMAT}"
    source = manifest.get("source")
    if not isinstance(source, dict) or source.get("sha256") != digest:
        return "it was converted from another model file"
    if manifest.get("versions") != versions:
        return "it was written by other library versions"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return f"its {MANIFEST} lists no files"
    stamp = _read_json(entry / STAMP) or {}
    current: dict[str, list[int]] = {}
    for name, meta in files.items():
        path = entry / name
        if not isinstance(meta, dict) or "/" in name or name.startswith("."):
            return f"its {MANIFEST} is malformed"
        try:
            current[name] = _stat_key(path)
        except OSError:
            return f"{name} is missing"
        if current[name][0] != meta.get("size"):
            return f"{name} has {current[name][0]} bytes, {meta.get('size')} were written"
    changed = [name for name in files if stamp.get(name) != current[name]]
    for name in changed:
        if _file_sha256(entry / name) != files[name].get("sha256"):
            return f"{name} is corrupt (its content is not what was written)"
    if changed:
        with contextlib.suppress(OSError):
            _write_json(entry / STAMP, current)
    return None


def _stale_builds(models: Path, key: str) -> None:
    """Remove temporary directories a dead process left building ``key`` (called with its lock held)."""
    for leftover in models.glob(f".{key}.*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)


def open_entry(source: Path, versions: dict[str, str], build: Callable[[Path], dict[str, Any]], *,
               what: str, root: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """The sound cache entry of ``source`` (its directory and manifest), built first when needed.

    Parameters
    ----------
    source
        The model file the entry is converted from (keyed by its content hash).
    versions
        The versions of the libraries that write the entry (part of the key, checked on load).
    build
        Writes the entry's files into the directory it is given and returns what the manifest records
        beside them (the model's configuration); called with the entry's lock held, at most once.
    what
        What the conversion makes, for the message on stderr (``"for onnxruntime"``).
    root
        The cache directory (default: :func:`cache_root`).

    Returns
    -------
    tuple
        ``(directory, manifest)``.

    Raises
    ------
    ConfigError
        When the cache directory cannot be written (set ``LLM_CONNECT_CACHE_DIR`` to one that can).
    """
    root = cache_root() if root is None else root
    digest = source_digest(source, root)
    key = entry_key(source, digest, versions)
    models = root / "models"
    entry = models / key
    problem = check_entry(entry, digest, versions)
    if problem is None:
        return entry, _read_json(entry / MANIFEST) or {}
    try:
        models.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"the converted-model cache {models} cannot be created ({exc}); set {CACHE_ENV} to a "
                          "writable directory") from exc
    from filelock import FileLock

    with FileLock(str(models / f"{key}.lock")):
        problem = check_entry(entry, digest, versions)  # another process may have built it meanwhile
        if problem is None:
            return entry, _read_json(entry / MANIFEST) or {}
        if problem != "missing":
            say(f"the converted model in {entry} cannot be used: {problem}; converting it again")
        _stale_builds(models, key)
        building = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=models))
        try:
            say(f"converting {source.name} {what}, once (about 20 s on 2 cores); it is kept in {entry}")
            start = time.perf_counter()
            config = build(building)
            files = {}
            for path in sorted(building.iterdir()):
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
                files[path.name] = {"size": path.stat().st_size, "sha256": _file_sha256(path)}
            took = time.perf_counter() - start
            manifest = {"format": FORMAT, "versions": versions, "files": files, "config": config,
                        "source": {"name": source.name, "sha256": digest, "size": source.stat().st_size},
                        "seconds": round(took, 1)}
            manifest["digest"] = _digest_of(manifest)
            _write_json(building / MANIFEST, manifest)
            _write_json(building / STAMP, {name: _stat_key(building / name) for name in files})
            if entry.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=models))
                os.replace(entry, old / "entry")  # readers of the old files keep them until they close them
                shutil.rmtree(old, ignore_errors=True)
            os.replace(building, entry)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        from ..quality._ledger_io import fsync_dir

        fsync_dir(models)
        say(f"converted {source.name} in {took:.1f} s")
        return entry, manifest
