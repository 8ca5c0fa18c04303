"""One provider's Batch API, spoken through an adapter's HTTP machinery (auth, retries, redaction): the interface
every provider module implements (:class:`_Driver`: a request line, submit, poll, collect, cancel), and the
provider's words from an error object. OpenAI's is in ``_batch_openai.py``, Anthropic's in ``_batch_anthropic.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any


class _Driver:
    """One provider's Batch API, spoken through an adapter's HTTP machinery (auth, retries, redaction)."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    async def _json(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        body, _ = await self.adapter._send(method, path, data, timeout_s=self.adapter.timeout_s)
        return body

    def line(self, custom_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def submit(self, entry: dict[str, Any], lines: list[dict[str, Any]], save: Callable[[], None],
                     window: str) -> None:
        raise NotImplementedError

    async def poll(self, entry: dict[str, Any]) -> tuple[bool, dict[str, int], Any]:
        """``(finished, counts by validating/in_progress/completed/failed, the provider's batch object)``."""
        raise NotImplementedError

    async def collect(self, entry: dict[str, Any], info: Any) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    async def cancel(self, entry: Mapping[str, Any]) -> None:
        raise NotImplementedError


def _error_text(error: Any) -> str:
    """The provider's words from an error object (``{"message", "code"/"type"}``, nested or not)."""
    if isinstance(error, Mapping):
        inner = error.get("error")
        if isinstance(inner, Mapping):
            return _error_text(inner)
        message = error.get("message")
        kind = error.get("code") or error.get("type")
        if isinstance(message, str):
            return f"{kind}: {message}" if isinstance(kind, str) and kind else message
    return str(error)
