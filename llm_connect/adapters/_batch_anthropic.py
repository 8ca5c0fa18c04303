"""Anthropic's Batch API (Message Batches): ``POST /v1/messages/batches`` submits,
``GET /v1/messages/batches/{id}`` polls, and its ``results`` (JSON Lines) are collected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._batch_driver import _Driver, _error_text


class _AnthropicDriver(_Driver):
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024
    path = "/v1/messages/batches"

    def line(self, custom_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": dict(payload)}

    async def submit(self, entry: dict[str, Any], lines: list[dict[str, Any]], save: Callable[[], None],
                     window: str) -> None:
        created = await self._json("POST", self.path, {"requests": lines})
        entry["batch_id"] = created["id"]
        entry["status"] = "submitted"
        save()

    async def poll(self, entry: dict[str, Any]) -> tuple[bool, dict[str, int], Any]:
        info = await self._json("GET", f"{self.path}/{entry['batch_id']}")
        counts = info.get("request_counts") or {}
        status = str(info.get("processing_status"))
        entry["provider_status"] = status
        shown = {"validating": 0, "in_progress": int(counts.get("processing") or 0),
                 "completed": int(counts.get("succeeded") or 0),
                 "failed": sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))}
        return status == "ended", shown, info

    async def collect(self, entry: dict[str, Any], info: Any) -> dict[str, dict[str, Any]]:
        url = info.get("results_url") or ""
        base = self.adapter.base_url
        path = url[len(base):] if isinstance(url, str) and url.startswith(base) else \
            f"{self.path}/{entry['batch_id']}/results"
        raw, _ = await self.adapter._send("GET", path, None, timeout_s=max(self.adapter.timeout_s, 300.0),
                                          as_bytes=True)
        outcomes: dict[str, dict[str, Any]] = {}
        for line in raw.decode("utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            cid, result = item.get("custom_id"), item.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                outcomes[cid] = {"ok": True, "body": result.get("message")}
            elif kind == "errored":
                outcomes[cid] = {"ok": False, "kind": "error", "error": _error_text(result.get("error"))}
            else:
                name = "cancelled" if kind == "canceled" else str(kind)
                outcomes[cid] = {"ok": False, "kind": name, "error": f"the batch request was {name} before it ran"}
        for cid in entry["requests"]:
            outcomes.setdefault(cid, {"ok": False, "kind": "failed", "error": "no result for this request"})
        return outcomes

    async def cancel(self, entry: Mapping[str, Any]) -> None:
        await self._json("POST", f"{self.path}/{entry['batch_id']}/cancel", {})
