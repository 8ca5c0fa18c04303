"""OpenAI-compatible chat and embeddings (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio...)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .._docstrings import ADAPTER_TEXTS, share_parameters
from .._runtime import on_background, run_sync
from ..core import BudgetTracker, RunConfig, TokenLogprob
from ..errors import MalformedResponseError, ValidationError
from ._cache import ResponseCache, active_session, embedding_key, open_cache
from ._http import ChatHTTPAdapter, HTTPAdapter, estimate_tokens, usage_int
from ._secrets import _ForgetOnError

__all__ = ["OpenAICompatibleAdapter", "OpenAICompatibleEmbedder"]


class OpenAICompatibleAdapter(ChatHTTPAdapter):
    """An LLM adapter for any OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``;
    the key to ``$OPENAI_API_KEY`` (``api_key_env=`` names another variable). No
    key is needed for a server on localhost. ``RunConfig`` maps onto the request:
    ``temperature``, ``max_tokens`` (sent as ``max_tokens_param``, e.g.
    ``"max_completion_tokens"`` for models that want it), ``system_prompt`` as a
    system message, ``json_output`` as ``response_format={"type": "json_object"}``,
    ``top_logprobs=k`` as ``logprobs: true, top_logprobs: k`` (parsed into
    ``LLMResponse.logprobs``), and every ``model_params`` entry (``seed``,
    ``top_p``, ``stop``...) as is. OpenAI caches a prompt's prefix shared with
    earlier requests by itself (prompts of 1024 tokens or more): the reply's
    ``usage.prompt_tokens_details.cached_tokens`` becomes
    ``LLMResponse.tokens_cached``, priced at the model's cached rate
    (:mod:`.pricing`); ``RunConfig.stable_prefix_chars`` needs no request field
    here, only a prompt whose stable part comes first. See :class:`~._http.HTTPAdapter` for retries,
    limits and the other keyword arguments; ``cache=`` (a path or a
    :class:`ResponseCache`) turns on the on-disk response cache.

    Parameters
    ----------
    model : str
        The model name.
    max_tokens_param : str, default "max_tokens"
        The request field ``RunConfig.max_tokens`` is sent as.
    **kwargs
        :class:`~._http.HTTPAdapter`'s keyword arguments and ``cache=``.

    Examples
    --------
    >>> from llm_connect.testing import LoopbackServer
    >>> with LoopbackServer(reply="Paris") as server:
    ...     adapter = OpenAICompatibleAdapter("local-model", base_url=server.base_url)
    ...     adapter.complete("Capital of France?").content
    'Paris'
    """

    provider: ClassVar[str] = "openai"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    default_api_key_env: ClassVar[str] = "OPENAI_API_KEY"
    chat_path: ClassVar[str] = "/chat/completions"

    def __init__(self, model: str, *, max_tokens_param: str = "max_tokens", **kwargs: Any) -> None:
        with _ForgetOnError(kwargs):  # on failure, no key or URL credentials stay in this frame's locals
            super().__init__(model, **kwargs)
        self.max_tokens_param = max_tokens_param

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _payload(self, prompt: str, run_config: RunConfig) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if run_config.system_prompt:
            messages.append({"role": "system", "content": run_config.system_prompt})
        messages.append({"role": "user", "content": prompt})
        payload: dict[str, Any] = {"model": self.model_id, "messages": messages, "temperature": run_config.temperature}
        if run_config.max_tokens is not None:
            payload[self.max_tokens_param] = run_config.max_tokens
        if run_config.json_output:
            payload["response_format"] = {"type": "json_object"}
        if run_config.top_logprobs is not None:
            payload["logprobs"] = True
            payload["top_logprobs"] = run_config.top_logprobs
        payload.update(run_config.model_params)
        return payload

    def _read_reply(
        self, body: Any
    ) -> tuple[str, int, int, str | None, tuple[TokenLogprob, ...] | None] | MalformedResponseError:
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            return self._malformed("choices[0].message", body)
        content = message.get("content") if isinstance(message, Mapping) else None
        if content is None:
            content = ""
        if not isinstance(content, str):
            return self._malformed("text in choices[0].message.content", body)
        usage = body.get("usage")
        return (
            content,
            usage_int(usage, "prompt_tokens", "input_tokens"),
            usage_int(usage, "completion_tokens", "output_tokens"),
            choice.get("finish_reason"),
            _parse_logprobs(choice.get("logprobs")),
        )

    def _cache_usage(self, body: Any) -> tuple[int, int]:
        return _cached_tokens(body), 0


def _cached_tokens(body: Any) -> int:
    """``usage.prompt_tokens_details.cached_tokens`` (Chat Completions) or ``usage.input_tokens_details.cached_tokens``
    (the Responses API's shape); 0 when absent."""
    usage = body.get("usage") if isinstance(body, Mapping) else None
    if not isinstance(usage, Mapping):
        return 0
    for name in ("prompt_tokens_details", "input_tokens_details"):
        cached = usage_int(usage.get(name), "cached_tokens")
        if cached:
            return cached
    return 0


def _parse_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """OpenAI's ``choices[0].logprobs.content`` as :class:`TokenLogprob` s; ``None`` when absent."""
    if not isinstance(logprobs, Mapping):
        return None
    content = logprobs.get("content")
    if not isinstance(content, list):
        return None
    out = []
    for item in content:
        if not isinstance(item, Mapping) or not isinstance(item.get("token"), str):
            continue
        try:
            logprob = float(item["logprob"])
        except (KeyError, TypeError, ValueError):
            continue
        top = []
        for alt in item.get("top_logprobs") or ():
            try:
                top.append((str(alt["token"]), float(alt["logprob"])))
            except (KeyError, TypeError, ValueError):
                continue
        out.append(TokenLogprob(item["token"], logprob, tuple(top)))
    return tuple(out)


class OpenAICompatibleEmbedder(HTTPAdapter):
    """An embedding adapter for any OpenAI-compatible ``/embeddings`` endpoint.

    Texts are sent in batches of ``batch_size`` (concurrently, within
    ``max_concurrency``); the vectors come back in the order of the texts,
    whatever order the server lists them in (by their ``index``).
    ``dimensions`` is passed on when set. Cost is charged to ``budget_tracker``
    when given; ``tokens_in`` and ``cost_usd`` keep running totals.
    ``cache=`` (a path or a :class:`ResponseCache`) keeps each text's vector on
    disk, keyed by endpoint, model, ``dimensions`` and text, so a repeated or
    resumed run requests only the texts it has not embedded before.

    Parameters
    ----------
    model : str, default "text-embedding-3-small"
        The model name.
    batch_size : int, default 256
        Texts per request.
    dimensions : int, optional
        Passed on when set.
    budget_tracker : BudgetTracker, optional
        Charged the cost.
    cache : ResponseCache or str or os.PathLike, optional
        The on-disk vector cache.
    **kwargs
        :class:`~._http.HTTPAdapter`'s keyword arguments.
    """

    provider: ClassVar[str] = "openai"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    base_url_env: ClassVar[str | None] = "OPENAI_BASE_URL"
    default_api_key_env: ClassVar[str] = "OPENAI_API_KEY"
    embeddings_path: ClassVar[str] = "/embeddings"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        batch_size: int = 256,
        dimensions: int | None = None,
        budget_tracker: BudgetTracker | None = None,
        cache: ResponseCache | str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        with _ForgetOnError(kwargs):  # on failure, no key or URL credentials stay in this frame's locals
            super().__init__(model, **kwargs)
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
                raise ValidationError(f"OpenAICompatibleEmbedder: batch_size must be an int >= 1, got {batch_size!r}")
            self.cache = open_cache(cache)
        self.batch_size = batch_size
        self.dimensions = dimensions
        self.budget_tracker = budget_tracker
        self.tokens_in = 0
        self.cost_usd = 0.0

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    @share_parameters(texts=ADAPTER_TEXTS)
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; blocking, safe inside a running event loop.

        Parameters
        ----------
        {texts}

        Returns
        -------
        list of list of float
            The vectors.
        """
        return run_sync(self._aembed(_check_texts(texts)))

    @share_parameters(texts=ADAPTER_TEXTS)
    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The awaitable twin of :meth:`embed`.

        Parameters
        ----------
        {texts}

        Returns
        -------
        list of list of float
            The vectors, in order.
        """
        return await on_background(self._aembed(_check_texts(texts)))

    async def _aembed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        session = active_session()
        cache = self.cache if session is None else session.cache
        if cache is None:
            return await self._request_vectors(texts)
        keys = {t: embedding_key(type(self).__qualname__, self.base_url, self.model_id, self.dimensions, t)
                for t in dict.fromkeys(texts)}
        if session is not None:
            keys = {t: session.key(k) for t, k in keys.items()}
        known: dict[str, list[float]] = {}
        for text, key in keys.items():
            vector = cache.get_vector(key) if session is None else session.replay_vector(key)
            if vector is not None:
                known[text] = vector
        missing = [t for t in keys if t not in known]
        if missing and session is not None and session.mode == "replay":
            raise session.miss(adapter_id=self.adapter_id, model_id=self.model_id,
                               request=f"embed {missing[0]!r}", key=keys[missing[0]])
        if missing:
            for text, vector in zip(missing, await self._request_vectors(missing), strict=True):
                cache.put_vector(keys[text], vector)
                known[text] = vector
            if session is not None:
                session.count_sent()
        return [list(known[t]) for t in texts]

    async def _request_vectors(self, texts: list[str]) -> list[list[float]]:
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        results = await asyncio.gather(*(self._embed_batch(batch) for batch in batches))
        return [vector for batch in results for vector in batch]

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        """One paid request through the shared path (``adapters._call``): budget reserve -> call -> settle."""
        from ..core import RunConfig
        from ._call import acall_paid

        async def invoke() -> tuple[list[list[float]], float]:
            payload: dict[str, Any] = {"model": self.model_id, "input": batch, "encoding_format": "float"}
            if self.dimensions is not None:
                payload["dimensions"] = self.dimensions
            body, _ = await self._post(
                self.embeddings_path, payload, timeout_s=self.timeout_s, tokens=estimate_tokens(*batch)
            )
            parsed = self._read_vectors(body, len(batch))
            body = None  # a traceback keeps this frame's locals, and a reply body may quote the key
            if isinstance(parsed, MalformedResponseError):
                raise parsed
            vectors, tokens = parsed
            cost = self._cost(tokens, 0)
            self.tokens_in += tokens
            self.cost_usd += cost
            return vectors, cost

        vectors, _ = await acall_paid(
            invoke,
            RunConfig(budget_tracker=self.budget_tracker),
            estimate_usd=self._cost(estimate_tokens(*batch), 0),
            cost_of=lambda result: result[1],
        )
        return vectors

    def _read_vectors(self, body: Any, n: int) -> tuple[list[list[float]], int] | MalformedResponseError:
        """``(the n vectors in input order, prompt tokens)``, or the error to raise (returned, not raised here)."""
        data = body.get("data") if isinstance(body, Mapping) else None
        if not isinstance(data, list) or len(data) != n:
            return self._malformed(f"{n} items in data", body)
        vectors: list[list[float] | None] = [None] * n
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, Mapping) else None
            vector = item.get("embedding") if isinstance(item, Mapping) else None
            in_range = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n
            if not in_range or not isinstance(index, int) or vectors[index] is not None:
                return self._malformed("a distinct valid index for every item", body)
            if not isinstance(vector, list):
                return self._malformed("embedding list (base64 is not supported)", body)
            try:
                vectors[index] = [float(v) for v in vector]
            except (TypeError, ValueError):
                return self._malformed("numbers in every embedding", body)
        return vectors, usage_int(body.get("usage"), "prompt_tokens", "total_tokens")  # type: ignore[return-value]


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValidationError("embed() takes a sequence of strings, not a single string; wrap it in a list")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise ValidationError(f"embed() texts must be strings, got {type(t).__name__}")
    return out
