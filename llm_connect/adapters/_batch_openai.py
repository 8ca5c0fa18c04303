"""OpenAI's Batch API: ``POST /v1/files`` uploads a JSONL of requests, ``POST /v1/batches`` starts it,
``GET /v1/batches/{id}`` polls it, ``GET /v1/files/{id}/content`` downloads the output and error files. A run
killed between creating a batch and saving its id finds it again by its uploaded file (every page of
``GET /batches``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import AdapterError
from ._batch_driver import _Driver, _error_text

#: terminal states of a batch (OpenAI's and Anthropic's)
_OPENAI_DONE = frozenset({"completed", "failed", "expired", "cancelled"})

class _OpenAIDriver(_Driver):
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def _endpoint(self) -> str:
        return urlsplit(self.adapter.base_url).path.rstrip("/") + self.adapter.chat_path

    def line(self, custom_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": self._endpoint(), "body": dict(payload)}

    async def submit(self, entry: dict[str, Any], lines: list[dict[str, Any]], save: Callable[[], None],
                     window: str) -> None:
        if not entry.get("file_id"):
            jsonl = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
            boundary = f"llmconnect{uuid.uuid4().hex}"
            head = (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
                    f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{entry["local_id"]}.jsonl"'
                    "\r\nContent-Type: application/jsonl\r\n\r\n").encode()
            body = head + jsonl + f"\r\n--{boundary}--\r\n".encode()
            uploaded, _ = await self.adapter._send(
                "POST", "/files", body, timeout_s=max(self.adapter.timeout_s, 300.0),
                headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
            entry["file_id"] = uploaded["id"]
            created_at = uploaded.get("created_at") if isinstance(uploaded, Mapping) else None
            if isinstance(created_at, (int, float)) and not isinstance(created_at, bool):
                entry["file_created_at"] = created_at  # the provider's clock: no batch of it is older
            save()
        else:  # a run killed after the upload: the batch may have been created before the kill
            found = await self._find(entry)
            if found is not None:
                entry["batch_id"] = found
                entry["status"] = "submitted"
                save()
                return
        created = await self._json("POST", "/batches", {
            "input_file_id": entry["file_id"], "endpoint": self._endpoint(), "completion_window": window,
            "metadata": {"llm_connect_batch": entry["local_id"]}})
        entry["batch_id"] = created["id"]
        entry["status"] = "submitted"
        save()

    #: batches per page of ``GET /batches`` (OpenAI's maximum)
    page_size = 100

    async def _find(self, entry: Mapping[str, Any]) -> str | None:
        """The id of the batch created from ``entry``'s uploaded file, if the provider has one: every page
        of ``GET /batches`` (newest first) is read until it is found, the listing ends, or (the file's
        ``created_at`` known) the batches listed are older than the file. A listing that fails raises:
        "not found" would submit (and pay for) the batch a second time."""
        file_id = entry["file_id"]
        since = entry.get("file_created_at")
        after: str | None = None
        seen: set[str] = set()
        while True:
            path = f"/batches?limit={self.page_size}" + (f"&after={after}" if after else "")
            try:
                listing = await self._json("GET", path)
            except AdapterError as exc:
                raise type(exc)(
                    f"could not look up whether the batch of the uploaded file {file_id} was created before the "
                    f"last run stopped (nothing was submitted again, so nothing is paid twice): {exc}",
                    status=exc.status, provider_message=exc.provider_message, adapter_id=exc.adapter_id) from exc
            data = listing.get("data") if isinstance(listing, Mapping) else None
            if not isinstance(data, list):
                raise AdapterError(f"the provider's batch listing has no data list (looking up file {file_id}); "
                                   "nothing was submitted again", adapter_id=self.adapter.adapter_id)
            older = False
            for batch in data:
                if not isinstance(batch, Mapping):
                    continue
                if batch.get("input_file_id") == file_id:
                    return str(batch["id"])
                created = batch.get("created_at")
                if isinstance(since, (int, float)) and isinstance(created, (int, float)) and created < since:
                    older = True  # newest first: the rest were created before the file was uploaded
            last = data[-1].get("id") if data and isinstance(data[-1], Mapping) else None
            if older or not listing.get("has_more") or not isinstance(last, str) or last in seen:
                return None
            seen.add(last)
            after = last

    async def poll(self, entry: dict[str, Any]) -> tuple[bool, dict[str, int], Any]:
        info = await self._json("GET", f"/batches/{entry['batch_id']}")
        status = str(info.get("status"))
        counts = info.get("request_counts") or {}
        total = int(counts.get("total") or len(entry["requests"]))
        done, failed = int(counts.get("completed") or 0), int(counts.get("failed") or 0)
        shown = {"validating": total if status == "validating" else 0,
                 "in_progress": max(0, total - done - failed) if status not in ("validating", *_OPENAI_DONE) else 0,
                 "completed": done, "failed": failed}
        entry["provider_status"] = status
        return status in _OPENAI_DONE, shown, info

    async def _lines(self, file_id: Any) -> list[dict[str, Any]]:
        if not file_id:
            return []
        raw, _ = await self.adapter._send("GET", f"/files/{file_id}/content", None,
                                          timeout_s=max(self.adapter.timeout_s, 300.0), as_bytes=True)
        out = []
        for line in raw.decode("utf-8").splitlines():
            if line.strip():
                out.append(json.loads(line))
        return out

    async def collect(self, entry: dict[str, Any], info: Any) -> dict[str, dict[str, Any]]:
        status = str(info.get("status"))
        outcomes: dict[str, dict[str, Any]] = {}
        for item in await self._lines(info.get("output_file_id")) + await self._lines(info.get("error_file_id")):
            cid = item.get("custom_id")
            if not isinstance(cid, str):
                continue
            response = item.get("response") or {}
            code = response.get("status_code") if isinstance(response, Mapping) else None
            if item.get("error") is None and code == 200:
                outcomes[cid] = {"ok": True, "body": response.get("body")}
            else:
                reason = _error_text(item.get("error") or (response.get("body") if isinstance(response, Mapping)
                                                           else None))
                kind = "expired" if "expired" in reason else "cancelled" if "cancel" in reason else "error"
                outcomes[cid] = {"ok": False, "kind": kind, "error": reason, "status": code}
        errors = info.get("errors") or {}
        why = "; ".join(_error_text(e) for e in (errors.get("data") or [])) if isinstance(errors, Mapping) else ""
        for cid in entry["requests"]:
            if cid not in outcomes:
                kind = {"expired": "expired", "cancelled": "cancelled"}.get(status, "failed")
                outcomes[cid] = {"ok": False, "kind": kind,
                                 "error": f"the batch {status} before this request ran" + (f": {why}" if why else "")}
        return outcomes

    async def cancel(self, entry: Mapping[str, Any]) -> None:
        await self._json("POST", f"/batches/{entry['batch_id']}/cancel", {})
