"""An opt-in on-disk cache of adapter replies, shared safely between processes.

Backed by :mod:`diskcache` (SQLite). The key is a SHA-256 of everything that
changes a reply: the adapter class, the endpoint, the model, the prompt and
every parameter of the run config that reaches the provider. A hit is
returned with ``cached=True`` and ``cost_usd=0.0`` (nothing was spent); the
token counts are the ones recorded when the reply was first made.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..core import LLMResponse, RunConfig, TokenLogprob

__all__ = ["ResponseCache", "cache_key", "open_cache"]

_SCHEMA = 1


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


def _encode(response: LLMResponse) -> dict[str, Any]:
    return {
        "content": response.content,
        "tokens_in": response.tokens_in,
        "tokens_out": response.tokens_out,
        "finish_reason": response.finish_reason,
        "logprobs": None
        if response.logprobs is None
        else [[t.token, t.logprob, [list(p) for p in t.top]] for t in response.logprobs],
    }


def _decode(data: dict[str, Any], *, adapter_id: str, model_id: str, latency_ms: float) -> LLMResponse:
    logprobs = data.get("logprobs")
    return LLMResponse(
        content=data["content"],
        adapter_id=adapter_id,
        model_id=model_id,
        tokens_in=int(data.get("tokens_in", 0)),
        tokens_out=int(data.get("tokens_out", 0)),
        cost_usd=0.0,
        latency_ms=latency_ms,
        logprobs=None
        if logprobs is None
        else tuple(
            TokenLogprob(tok, float(lp), tuple((str(a), float(b)) for a, b in top)) for tok, lp, top in logprobs
        ),
        cached=True,
        finish_reason=data.get("finish_reason"),
    )


class ResponseCache:
    """Replies on disk under ``directory``; safe to share between threads and processes.

    Pass one (or just a path) as an adapter's ``cache=``. ``size_limit`` bounds
    the disk it may use (bytes; least recently stored entries are evicted).
    """

    def __init__(self, directory: str | os.PathLike[str], *, size_limit: int = 2**30) -> None:
        import diskcache  # a core dependency, imported on first use to keep `import llm_connect` light

        self.directory = Path(directory)
        self._cache = diskcache.Cache(
            str(self.directory), size_limit=size_limit, eviction_policy="least-recently-stored"
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str, *, adapter_id: str, model_id: str, latency_ms: float = 0.0) -> LLMResponse | None:
        data = self._cache.get(key)
        with self._lock:
            if data is None:
                self.misses += 1
            else:
                self.hits += 1
        if data is None:
            return None
        return _decode(data, adapter_id=adapter_id, model_id=model_id, latency_ms=latency_ms)

    def put(self, key: str, response: LLMResponse) -> None:
        self._cache.set(key, _encode(response))

    def clear(self) -> None:
        self._cache.clear()

    def close(self) -> None:
        self._cache.close()

    def __len__(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.directory)!r}, entries={len(self)}, hits={self.hits}, misses={self.misses})"


def open_cache(cache: ResponseCache | str | os.PathLike[str] | None) -> ResponseCache | None:
    """``None`` stays ``None``; a path opens a :class:`ResponseCache` there."""
    if cache is None or isinstance(cache, ResponseCache):
        return cache
    return ResponseCache(cache)
