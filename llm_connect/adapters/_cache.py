"""An opt-in on-disk cache of adapter replies, shared safely between processes.

Backed by :mod:`diskcache` (SQLite). The key is a SHA-256 of everything that
changes a reply: the adapter class, the endpoint, the model, the prompt and
every parameter of the run config that reaches the provider. A hit is
returned with ``cached=True`` and ``cost_usd=0.0`` (nothing was spent); the
token counts are the ones recorded when the reply was first made.

A :class:`ReplySession` (started by the pytest plugin's ``--llm-cache DIR``) sends every adapter call of
the process through one such cache, whatever cache the adapter has of its own: ``"auto"`` replays a
recorded reply and records a missing one, ``"record"`` always calls and records, ``"replay"`` never
calls (a request without a recorded reply raises :class:`~llm_connect.errors.ReplayMissError`). The
runs of a repeated test after the first each keep their own replies (:attr:`ReplySession.run_index`
is mixed into the key), so replaying a repeated test replays n samples, not one sample n times.

Entries are JSON text, never pickles: diskcache's default ``Disk`` unpickles
what it reads, so anyone who can write to the cache directory could make the
next lookup run code. :class:`_JSONOnlyDisk` stores text only and refuses to
unpickle (a pickled entry, e.g. one from an older version, is a miss), and an
entry that is not JSON of the expected shape is a miss too, never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..core import LLMResponse, RunConfig, TokenLogprob
from ..errors import ReplayMissError, ValidationError

__all__ = ["SESSION_MODES", "ReplySession", "ResponseCache", "active_session", "cache_key", "open_cache",
           "start_session", "stop_session"]

_SCHEMA = 1
#: Decoded embedding vectors a :class:`ResponseCache` keeps in memory, counted in floats (8 bytes each: 8 MiB):
#: the most recently read, so a text embedded again is not decoded again; released by ``close()``.
_MEMO_FLOATS = 1 << 20

logger = logging.getLogger("llm_connect.adapters")
T = TypeVar("T")


def cache_key(adapter_class: str, endpoint: str, model: str, prompt: str, run_config: RunConfig) -> str:
    """A stable hex digest of everything that changes the reply (not the budget or the timeout)."""
    material = {
        "v": _SCHEMA,
        "adapter": adapter_class,
        "endpoint": endpoint,
        "model": model,
        "prompt": prompt,
        "temperature": float(run_config.temperature),
        "max_tokens": run_config.max_tokens,
        "model_params": {str(k): run_config.model_params[k] for k in sorted(run_config.model_params, key=str)},
        "system_prompt": run_config.system_prompt,
        "json_output": bool(run_config.json_output),
        "top_logprobs": run_config.top_logprobs,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def embedding_key(adapter_class: str, endpoint: str, model: str, dimensions: int | None, text: str) -> str:
    """A stable hex digest of everything that changes a text's embedding."""
    material = {"v": _SCHEMA, "kind": "embedding", "adapter": adapter_class, "endpoint": endpoint, "model": model,
                "dimensions": dimensions, "text": text}
    blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _encode(response: LLMResponse) -> dict[str, Any]:
    return {
        "content": response.content,
        "tokens_in": response.tokens_in,
        "tokens_out": response.tokens_out,
        "tokens_cached": response.tokens_cached,
        "finish_reason": response.finish_reason,
        "logprobs": None
        if response.logprobs is None
        else [[t.token, t.logprob, [list(p) for p in t.top]] for t in response.logprobs],
    }


class _Malformed(ValueError):
    """A cache entry that is not what :func:`_encode` writes."""


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed("a token count is not an int >= 0")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Malformed("a logprob is not a number")
    return float(value)


def _decode(text: Any, *, adapter_id: str, model_id: str, latency_ms: float) -> LLMResponse:
    """The reply stored as ``text``; :class:`_Malformed` (a ``ValueError``) unless it is exactly what we write."""
    if not isinstance(text, str):
        raise _Malformed(f"not JSON text but {type(text).__name__}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise _Malformed("nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("content"), str):
        raise _Malformed("not an object with a content string")
    finish_reason = data.get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise _Malformed("finish_reason is not a string")
    logprobs = data.get("logprobs")
    decoded: tuple[TokenLogprob, ...] | None = None
    if logprobs is not None:
        if not isinstance(logprobs, list):
            raise _Malformed("logprobs is not a list")
        items = []
        for entry in logprobs:
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
                raise _Malformed("a logprob entry is not [token, logprob, top]")
            token, logprob, top = entry
            if not isinstance(top, list) or not all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in top
            ):
                raise _Malformed("a top-logprobs list is not [[token, logprob], ...]")
            items.append(TokenLogprob(token, _number(logprob), tuple((a, _number(b)) for a, b in top)))
        decoded = tuple(items)
    if _count(data.get("tokens_cached", 0)) > _count(data.get("tokens_in", 0)):
        raise _Malformed("more cached tokens than prompt tokens")
    return LLMResponse(
        content=data["content"],
        adapter_id=adapter_id,
        model_id=model_id,
        tokens_in=_count(data.get("tokens_in", 0)),
        tokens_out=_count(data.get("tokens_out", 0)),
        tokens_cached=_count(data.get("tokens_cached", 0)),
        cost_usd=0.0,
        latency_ms=latency_ms,
        logprobs=decoded,
        cached=True,
        finish_reason=finish_reason,
    )


def _decode_vector(text: Any) -> list[float]:
    """The vector of an embedding entry written by :meth:`ResponseCache.put_vector` (else a ``ValueError``)."""
    entry = json.loads(text)
    vector = entry["embedding"] if isinstance(entry, dict) else None
    if not isinstance(vector, list) or not vector or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in vector
    ):
        raise ValueError("not an embedding")
    return [float(x) for x in vector]


def _json_only_disk() -> type:
    """A diskcache ``Disk`` that stores and returns text only: it never unpickles a key or a value.

    It also never reads or deletes a value file outside the cache directory
    (a planted row may name any path).
    """
    import diskcache
    from diskcache.core import MODE_BINARY, MODE_RAW, MODE_TEXT

    class _JSONOnlyDisk(diskcache.Disk):
        def _inside(self, filename: Any) -> bool:
            if not isinstance(filename, str):
                return False
            root = os.path.realpath(self._directory)
            return os.path.realpath(os.path.join(root, filename)).startswith(root + os.sep)

        def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
            if not isinstance(value, str):
                raise TypeError(f"the response cache stores JSON text only, not {type(value).__name__}")
            return super().store(value, read, key=key)

        def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
            if read or mode not in (MODE_RAW, MODE_TEXT, MODE_BINARY):
                return None  # never unpickle (MODE_PICKLE); never hand out an open file
            if mode != MODE_RAW and not self._inside(filename):
                return None
            try:
                return super().fetch(mode, filename, value, read)
            except (OSError, ValueError):  # a missing file, or text that is not UTF-8: a miss
                return None

        def get(self, key: Any, raw: bool) -> Any:
            if not raw:
                raise ValueError("the response cache has only text keys; a pickled key is refused")
            return super().get(key, raw)

        def remove(self, file_path: Any) -> None:
            if self._inside(file_path):
                super().remove(file_path)

    return _JSONOnlyDisk


class ResponseCache:
    """Replies on disk under ``directory``; safe to share between threads and processes.

    Pass one (or just a path) as an adapter's ``cache=``. ``size_limit`` bounds
    the disk it may use (bytes; least recently stored entries are evicted).
    Entries are JSON text; one that cannot be read back as a reply (a pickle,
    other JSON, a file outside the directory) is a miss and is logged, never
    an error and never code run. The embedding vectors read last are kept
    decoded in memory, at most ``_MEMO_FLOATS`` floats (8 MiB) per cache, and
    released by :meth:`close` and :meth:`clear`; each read returns a new list.

    Parameters
    ----------
    directory : str or os.PathLike
        The cache's folder (created when needed).
    size_limit : int, default 1073741824
        The disk it may use, in bytes (1 GiB).

    Examples
    --------
    >>> import tempfile
    >>> from llm_connect import LLMResponse
    >>> cache = ResponseCache(tempfile.mkdtemp())
    >>> cache.put("k", LLMResponse("Paris", "a", "m"))
    >>> cache.get("k", adapter_id="a", model_id="m").content
    'Paris'
    >>> cache.close()
    """

    def __init__(self, directory: str | os.PathLike[str], *, size_limit: int = 2**30) -> None:
        import diskcache  # a core dependency, imported on first use to keep `import llm_connect` light

        self.directory = Path(directory)
        self._cache = diskcache.Cache(
            str(self.directory),
            size_limit=size_limit,
            eviction_policy="least-recently-stored",
            disk=_json_only_disk(),
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        # cache key -> (hash of the entry's text, its vector): the vectors read last, _MEMO_FLOATS at most
        self._memo: OrderedDict[str, tuple[int, array[float]]] = OrderedDict()
        self._memo_floats = 0

    def get(self, key: str, *, adapter_id: str, model_id: str, latency_ms: float = 0.0) -> LLMResponse | None:
        """The stored reply, or ``None`` (a miss) when there is none or it is not a reply we wrote.

        Parameters
        ----------
        key : str
            The request's key.
        adapter_id : str
            The adapter asking (the reply is returned as its).
        model_id : str
            Its model.
        latency_ms : float, default 0.0
            The lookup's latency, reported as the reply's.

        Returns
        -------
        LLMResponse or None
            The reply (``cached=True``), or ``None``.
        """
        return self._lookup(
            key, lambda text: _decode(text, adapter_id=adapter_id, model_id=model_id, latency_ms=latency_ms),
            "response-cache",
        )

    def _lookup(self, key: str, decode: Callable[[Any], T], what: str) -> T | None:
        """``decode`` of the entry under ``key``, counted as a hit; a miss (``None``, counted) when there is
        none or ``decode`` cannot read it (logged, never raised)."""
        text = self._cache.get(key)
        hit = None
        if text is not None:
            try:
                hit = decode(text)
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("llm_connect: ignoring an unreadable %s entry (%s) in %s", what, exc, self.directory)
        with self._lock:
            if hit is None:
                self.misses += 1
            else:
                self.hits += 1
        return hit

    def put(self, key: str, response: LLMResponse) -> None:
        """Store ``response`` under ``key``.

        Parameters
        ----------
        key : str
            The request's key.
        response : LLMResponse
            The reply.
        """
        self._cache.set(key, json.dumps(_encode(response), ensure_ascii=False))

    def get_vector(self, key: str) -> list[float] | None:
        """A stored embedding (see :func:`embedding_key`), or ``None`` (a miss) when there is none or it is
        not a list of finite numbers we wrote.

        Parameters
        ----------
        key : str
            The text's key.

        Returns
        -------
        list of float or None
            The vector (a new list), or ``None``.
        """
        return self._lookup(key, lambda text: self._vector(key, text), "embedding-cache")

    def _vector(self, key: str, text: Any) -> list[float]:
        """The vector stored as ``text`` (a new list), decoded once while it stays among the last read."""
        fingerprint = hash(text)  # the entry read now: an entry rewritten on disk is decoded again
        with self._lock:
            held = self._memo.get(key)
            if held is not None and held[0] == fingerprint:
                self._memo.move_to_end(key)
                return list(held[1])
        vector = _decode_vector(text)
        packed = array("d", vector)
        if len(packed) <= _MEMO_FLOATS:
            with self._lock:
                old = self._memo.pop(key, None)
                if old is not None:
                    self._memo_floats -= len(old[1])
                self._memo[key] = (fingerprint, packed)
                self._memo_floats += len(packed)
                while self._memo_floats > _MEMO_FLOATS:
                    _, (_, dropped) = self._memo.popitem(last=False)
                    self._memo_floats -= len(dropped)
        return vector

    def _forget_vectors(self) -> None:
        with self._lock:
            self._memo.clear()
            self._memo_floats = 0

    def put_vector(self, key: str, vector: Sequence[float]) -> None:
        """Store an embedding under ``key`` (see :func:`embedding_key`).

        Parameters
        ----------
        key : str
            The text's key.
        vector : sequence of float
            The embedding.
        """
        self._cache.set(key, json.dumps({"embedding": [float(x) for x in vector]}))

    def clear(self) -> None:
        """Remove every entry, and release the vectors held in memory."""
        self._forget_vectors()
        self._cache.clear()

    def close(self) -> None:
        """Close the cache's files and release the vectors held in memory."""
        self._forget_vectors()
        self._cache.close()

    def __len__(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:  # never raises, even on a half-built or closed cache
        try:
            entries: Any = len(self)
        except Exception:
            entries = "?"
        return (
            f"ResponseCache({str(getattr(self, 'directory', '?'))!r}, entries={entries}, "
            f"hits={getattr(self, 'hits', 0)}, misses={getattr(self, 'misses', 0)})"
        )


def open_cache(cache: ResponseCache | str | os.PathLike[str] | None) -> ResponseCache | None:
    """``None`` stays ``None``; a path opens a :class:`ResponseCache` there."""
    if cache is None or isinstance(cache, ResponseCache):
        return cache
    return ResponseCache(cache)


#: The modes of a :class:`ReplySession`: replay what is recorded and record the rest; always call and
#: record; never call.
SESSION_MODES: tuple[str, ...] = ("auto", "record", "replay")


class ReplySession:
    """Every adapter call of this process goes through one response cache in ``directory``.

    Started by :func:`start_session` (the pytest plugin's ``--llm-cache DIR``). ``mode`` is one of
    :data:`SESSION_MODES`: ``"auto"`` replays a recorded reply and records a missing one; ``"record"``
    always calls the model and records its reply (over an older one); ``"replay"`` never calls a model: a
    request without a recorded reply raises :class:`~llm_connect.errors.ReplayMissError` naming it, and
    is listed in :attr:`missed`. The cache is a :class:`ResponseCache` (SQLite), so processes running at
    once (``pytest -n``) share it safely; it is opened on first use.

    ``run_index``: set by the runner of a repeated test to the run's number (0 for the first), and
    mixed into every key when not 0, so each run replays its own replies. ``replayed`` and ``sent``
    count the calls answered from the cache and the calls that reached a model.
    """

    def __init__(self, directory: str | os.PathLike[str], *, mode: str = "auto") -> None:
        if mode not in SESSION_MODES:
            raise ValidationError(f"mode must be one of {list(SESSION_MODES)}, got {mode!r}")
        self.directory = Path(directory)
        self.mode = mode
        self.run_index = 0
        self.replayed = 0
        self.sent = 0
        self.missed: list[str] = []
        self._cache: ResponseCache | None = None
        self._lock = threading.Lock()

    @property
    def cache(self) -> ResponseCache:
        """The session's :class:`ResponseCache` (opened on first use)."""
        with self._lock:
            if self._cache is None:
                self._cache = ResponseCache(self.directory)
            return self._cache

    def key(self, key: str) -> str:
        """``key`` as stored in this session: with the repeated test's run number mixed in after the first run."""
        if not self.run_index:
            return key
        return hashlib.sha256(f"{key}:run={self.run_index}".encode()).hexdigest()

    def recorded(self, key: str) -> bool:
        """Whether a reply or a vector is stored under ``key`` (a key from :meth:`key`)."""
        return key in self.cache._cache

    def replay(self, key: str, *, adapter_id: str, model_id: str) -> LLMResponse | None:
        """The reply recorded under ``key``, or ``None`` (always ``None`` in ``"record"`` mode)."""
        if self.mode == "record":
            return None
        hit = self.cache.get(key, adapter_id=adapter_id, model_id=model_id)
        if hit is not None:
            with self._lock:
                self.replayed += 1
        return hit

    def replay_vector(self, key: str) -> list[float] | None:
        """The embedding recorded under ``key``, or ``None`` (always ``None`` in ``"record"`` mode)."""
        if self.mode == "record":
            return None
        hit = self.cache.get_vector(key)
        if hit is not None:
            with self._lock:
                self.replayed += 1
        return hit

    def count_sent(self) -> None:
        with self._lock:
            self.sent += 1

    def miss(self, *, adapter_id: str, model_id: str, request: str | None, key: str) -> ReplayMissError:
        """The error for a request with no recorded reply in ``"replay"`` mode (also listed in :attr:`missed`)."""
        from .._textsafe import safe_text

        what = f"{safe_text(adapter_id, limit=60)} (model {safe_text(model_id, limit=60)})"
        if request is not None:
            what += f", request {safe_text(request, limit=100)!r}"
        if self.run_index:
            what += f", run {self.run_index + 1} of a repeated test"
        with self._lock:
            self.missed.append(what)
        return ReplayMissError(
            f"replay mode: no reply was recorded for {what} (key {key[:12]}) in {self.directory}; nothing was "
            "sent. Record the replies once where the API key is set (pytest --llm-cache DIR "
            "--llm-cache-mode=auto) and keep the folder with the tests",
            adapter_id=adapter_id,
        )

    def close(self) -> None:
        with self._lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    def __repr__(self) -> str:
        return (f"ReplySession({str(self.directory)!r}, mode={self.mode!r}, replayed={self.replayed}, "
                f"sent={self.sent}, missed={len(self.missed)})")


_session: ReplySession | None = None


def active_session() -> ReplySession | None:
    """The :class:`ReplySession` every adapter call of this process goes through, if one is started."""
    return _session


def start_session(directory: str | os.PathLike[str], *, mode: str = "auto") -> tuple[ReplySession,
                                                                                      ReplySession | None]:
    """Start a :class:`ReplySession` in ``directory``: ``(the session, the one it replaces)``.

    Give both to :func:`stop_session` to end it (sessions nest: a pytest run started inside another,
    as ``pytester`` does, restores the outer one).
    """
    global _session
    session = ReplySession(directory, mode=mode)
    previous, _session = _session, session
    return session, previous


def stop_session(session: ReplySession, previous: ReplySession | None = None) -> None:
    """Close ``session`` and make ``previous`` (from :func:`start_session`) the active one again."""
    global _session
    if _session is session:
        _session = previous
    session.close()
