"""Anthropic's Messages API."""

from __future__ import annotations

from itertools import pairwise
from typing import Any, ClassVar

from ..core import RunConfig, TokenLogprob
from ..errors import MalformedResponseError
from ._http import ChatHTTPAdapter, usage_int
from ._secrets import _ForgetOnError
from .pricing import ANTHROPIC_CACHE_READ_FACTOR

__all__ = ["AnthropicAdapter"]

# Messages API parameters with no Anthropic equivalent; dropped rather than sent (the API would refuse them).
_UNSUPPORTED_PARAMS = frozenset({"seed"})
_EPHEMERAL = {"type": "ephemeral"}


def _content(prompt: str, breaks: tuple[int, ...]) -> str | list[dict[str, Any]]:
    """The user message's content: the prompt as is, or text blocks split at ``breaks`` with ``cache_control``
    on the block that ends the stable part (the last break inside the prompt)."""
    cuts = [k for k in breaks if 0 < k < len(prompt)]
    if not cuts:
        if breaks and breaks[-1] >= len(prompt) > 0:  # the whole prompt is stable
            return [{"type": "text", "text": prompt, "cache_control": dict(_EPHEMERAL)}]
        return prompt
    bounds = [0, *cuts, len(prompt)]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": prompt[a:b]} for a, b in pairwise(bounds)]
    stable = len(cuts) if breaks[-1] >= len(prompt) else len(cuts) - 1  # the index of the block ending the stable part
    blocks[stable]["cache_control"] = dict(_EPHEMERAL)
    return blocks


class AnthropicAdapter(ChatHTTPAdapter):
    """An LLM adapter for Anthropic's Messages API (``POST {base_url}/v1/messages``).

    ``base_url`` defaults to ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``;
    the key to ``$ANTHROPIC_API_KEY``. The API requires ``max_tokens``: when
    ``RunConfig.max_tokens`` is None, ``default_max_tokens`` (1024) is sent.
    ``system_prompt`` goes in ``system``; ``model_params`` (``top_p``,
    ``top_k``, ``stop_sequences``...) are passed as is, except ``seed``, which
    the API does not take and is dropped. The API offers neither a JSON mode
    nor token log-probabilities: ``json_output`` is not sent and ``logprobs``
    is always ``None``. Retries, limits, cache and the other keyword arguments
    are those of :class:`~._http.HTTPAdapter`.

    Prompt caching: when ``RunConfig.stable_prefix_chars`` marks the stable
    part of the prompt (an int ``N``: its first ``N`` characters; a sequence of
    increasing offsets ending at ``N``: also the boundaries of its parts), the
    user message is sent as text blocks split at those offsets, and the block
    ending at ``N`` carries ``cache_control: {"type": "ephemeral"}``. Anthropic
    caches the prefix up to that block and, on a later call, finds a cached
    prefix at any of the earlier block boundaries: a judge that passes the end
    of its instructions and of each earlier turn as offsets gets the previous
    turn's prefix read from the cache. The reply's ``cache_read_input_tokens``
    becomes ``LLMResponse.tokens_cached`` (priced at
    :data:`~.pricing.ANTHROPIC_CACHE_READ_FACTOR` of the input price unless the
    price table says otherwise) and ``cache_creation_input_tokens``
    ``tokens_cache_written`` (at :data:`~.pricing.ANTHROPIC_CACHE_WRITE_FACTOR`);
    ``tokens_in`` counts all three kinds of prompt tokens (Anthropic's
    ``input_tokens`` counts only the uncached ones).

    Parameters
    ----------
    model : str
        The model name.
    default_max_tokens : int, default 1024
        Sent when ``RunConfig.max_tokens`` is None.
    anthropic_version : str, default "2023-06-01"
        The ``anthropic-version`` header.
    **kwargs
        :class:`~._http.HTTPAdapter`'s keyword arguments and ``cache=``.
    """

    provider: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    base_url_env: ClassVar[str | None] = "ANTHROPIC_BASE_URL"
    default_api_key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    chat_path: ClassVar[str] = "/v1/messages"
    cached_input_factor: ClassVar[float] = ANTHROPIC_CACHE_READ_FACTOR

    def __init__(
        self,
        model: str,
        *,
        default_max_tokens: int = 1024,
        anthropic_version: str = "2023-06-01",
        **kwargs: Any,
    ) -> None:
        self.anthropic_version = anthropic_version
        with _ForgetOnError(kwargs):  # on failure, no key or URL credentials stay in this frame's locals
            super().__init__(model, **kwargs)
        self.default_max_tokens = default_max_tokens

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.anthropic_version}
        if key:
            headers["x-api-key"] = key
        return headers

    def _payload(self, prompt: str, run_config: RunConfig) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": run_config.max_tokens or self.default_max_tokens,
            "messages": [{"role": "user", "content": _content(prompt, run_config.stable_breaks)}],
            "temperature": run_config.temperature,
        }
        if run_config.system_prompt:
            payload["system"] = run_config.system_prompt
        payload.update({k: v for k, v in run_config.model_params.items() if k not in _UNSUPPORTED_PARAMS})
        return payload

    def _read_reply(
        self, body: Any
    ) -> tuple[str, int, int, str | None, tuple[TokenLogprob, ...] | None] | MalformedResponseError:
        blocks = body.get("content") if isinstance(body, dict) else None
        if not isinstance(blocks, list):
            return self._malformed("content list", body)
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if any(not isinstance(t, str) for t in texts):
            return self._malformed("text in the content blocks", body)
        usage = body.get("usage")
        read, written = self._cache_usage(body)
        return (
            "".join(texts),  # type: ignore[arg-type]
            usage_int(usage, "input_tokens") + read + written,
            usage_int(usage, "output_tokens"),
            body.get("stop_reason"),
            None,
        )

    def _cache_usage(self, body: Any) -> tuple[int, int]:
        usage = body.get("usage") if isinstance(body, dict) else None
        return usage_int(usage, "cache_read_input_tokens"), usage_int(usage, "cache_creation_input_tokens")
