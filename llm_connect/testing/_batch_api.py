"""The loopback server's Batch APIs: OpenAI's (files + batches) and Anthropic's Message Batches.

Mounted by :class:`~llm_connect.testing.LoopbackServer` (``batch={...}`` configures it). Each request
of a batch is answered by the server's own chat / messages handler, so a batched reply is the reply
a direct call would get. A batch moves on when it is polled (never on a clock), so tests are
deterministic:

- ``validating`` on creation, ``in_progress`` at the first poll, ``completed`` (OpenAI) / ``ended``
  (Anthropic) at poll ``polls`` (default 2: a slow completion is a larger number);
- ``hold=True`` keeps every batch ``in_progress`` until ``POST /_batches/release`` (see
  :func:`release_batches`); ``hold_from=k`` holds only the k-th batch created and those after it
  (1-based: ``hold_from=2`` lets a run's first round end and holds its second);
- ``fail_every=k``: every k-th request of a batch (1-based) fails with a 400 and the provider's
  message; ``expire_after=n``: a batch runs its first ``n`` requests, then expires (the others come
  back expired); ``validation_error="..."``: a batch fails at validation with that message;
- ``max_requests``: a larger batch is refused with a 400 (as a provider's limit would);
- ``POST .../cancel`` cancels a batch (``cancelling``, then ``cancelled`` / ``ended`` at the next
  poll; requests not run come back cancelled);
- ``GET /v1/batches`` lists OpenAI batches newest first, a page at a time as OpenAI does (``limit``
  1-100, default 20; ``after``: the last id of the previous page; ``has_more``, ``first_id``,
  ``last_id``); ``list_error=STATUS`` makes every listing fail with that HTTP status (e.g. 500);
- :func:`forget_batch` makes the server forget a batch: it answers 404 for it from then on, as a
  provider does for a batch that was removed or belongs to another project's key.

``GET /_batches`` (:func:`batch_stats`) counts uploads, submissions, polls, listings, cancels and
downloads, sums the tokens of the requests it ran (``billed_tokens_in``, ``billed_tokens_out``: what a
provider bills) and lists the batch ids.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

__all__ = ["BatchAPI", "batch_stats", "forget_batch", "release_batches"]


class BatchAPI:
    """Batches held in memory by one loopback server (see the module docs)."""

    def __init__(self, core: Any, config: Mapping[str, Any] | None) -> None:
        config = dict(config or {})
        self.core = core
        self.polls = max(1, int(config.get("polls", 2)))
        self.hold = bool(config.get("hold", False))
        self.hold_from = config.get("hold_from")
        self.list_error = config.get("list_error")
        self.fail_every = int(config.get("fail_every", 0) or 0)
        self.expire_after = config.get("expire_after")
        self.validation_error = config.get("validation_error")
        self.max_requests = config.get("max_requests")
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**dict(self.counts), "batch_ids": list(self.batches),
                    "statuses": {k: b["status"] for k, b in self.batches.items()},
                    "requests_per_batch": {k: len(b["requests"]) for k, b in self.batches.items()}}

    # -- shared -------------------------------------------------------------------------

    def _new(self, kind: str, requests: list[tuple[str, dict[str, Any]]], extra: Mapping[str, Any]) -> dict[str, Any]:
        prefix = "batch_" if kind == "openai" else "msgbatch_"
        batch = {"id": f"{prefix}{uuid.uuid4().hex[:20]}", "kind": kind, "requests": requests, "status": "validating",
                 "polls": 0, "results": None, "created_at": int(time.time()), **extra}
        with self._lock:
            self.batches[batch["id"]] = batch
            self.counts["submissions"] += 1
            batch["held"] = self.hold_from is not None and self.counts["submissions"] >= int(self.hold_from)
            self.counts["requests_submitted"] += len(requests)
        return batch

    def _advance(self, batch: dict[str, Any]) -> None:
        """One poll's worth of progress (see the module docs)."""
        batch["polls"] += 1
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        if batch["status"] == "cancelling":
            self._finish(batch, cancelled=True)
            return
        if batch["status"] == "validating":
            if self.validation_error:
                batch["status"] = "failed"
                batch["results"] = {}
                return
            batch["status"] = "in_progress"
        if not self.hold and not batch["held"] and batch["polls"] >= self.polls:
            self._finish(batch)

    def _finish(self, batch: dict[str, Any], *, cancelled: bool = False) -> None:
        results: dict[str, tuple[str, Any]] = {}
        ran = 0
        expired = False
        for position, (custom_id, body) in enumerate(batch["requests"], start=1):
            if cancelled:
                results[custom_id] = ("cancelled", None)
                continue
            if self.expire_after is not None and ran >= int(self.expire_after):
                results[custom_id] = ("expired", None)
                expired = True
                continue
            ran += 1
            if self.fail_every and position % self.fail_every == 0:
                results[custom_id] = ("error", f"loopback batch fault on request {custom_id}: max_tokens is too large")
                continue
            reply = self.core._messages(body) if batch["kind"] == "anthropic" else self.core._chat(body)
            results[custom_id] = ("ok", reply)
            usage = reply.get("usage") or {}  # what the provider bills: the tokens of the requests it ran
            self.counts["billed_tokens_in"] += int(usage.get("prompt_tokens", usage.get("input_tokens", 0)))
            self.counts["billed_tokens_out"] += int(usage.get("completion_tokens", usage.get("output_tokens", 0)))
        batch["results"] = results
        batch["status"] = "cancelled" if cancelled else "expired" if expired else "completed"

    def _counts(self, batch: Mapping[str, Any]) -> dict[str, int]:
        results = batch["results"] or {}
        done = sum(1 for o in results.values() if o[0] == "ok")
        failed = sum(1 for o in results.values() if o[0] != "ok")
        n = len(batch["requests"])
        if batch["status"] == "in_progress":  # a slow batch shows its progress
            done = min(n - 1, n * batch["polls"] // (self.polls + 1)) if n else 0
        return {"total": n, "completed": done, "failed": failed}

    # -- OpenAI -------------------------------------------------------------------------

    def _openai_view(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        status = batch["status"]
        out = {"id": batch["id"], "object": "batch", "endpoint": batch["endpoint"], "input_file_id": batch["file_id"],
               "completion_window": "24h", "status": status, "created_at": batch["created_at"],
               "output_file_id": batch.get("output_file_id"), "error_file_id": batch.get("error_file_id"),
               "request_counts": self._counts(batch), "metadata": batch.get("metadata"), "errors": None}
        if status == "failed":
            out["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": self.validation_error,
                                                         "line": 1}]}
        return out

    def _openai_files(self, batch: dict[str, Any]) -> None:
        """Write the output and error files of an ended OpenAI batch (once)."""
        if batch.get("files_written") or batch["results"] is None:
            return
        out, err = [], []
        for custom_id, (kind, value) in batch["results"].items():
            rid = f"req_{uuid.uuid4().hex[:12]}"
            if kind == "ok":
                out.append({"id": f"batch_req_{rid}", "custom_id": custom_id,
                            "response": {"status_code": 200, "request_id": rid, "body": value}, "error": None})
            elif kind == "error":
                err.append({"id": f"batch_req_{rid}", "custom_id": custom_id,
                            "response": {"status_code": 400, "request_id": rid,
                                         "body": {"error": {"message": value, "type": "invalid_request_error",
                                                            "code": None}}}, "error": None})
            else:
                code = "batch_expired" if kind == "expired" else "batch_cancelled"
                message = ("This request could not be executed before the completion window expired."
                           if kind == "expired" else "This request was cancelled with its batch.")
                err.append({"id": f"batch_req_{rid}", "custom_id": custom_id, "response": None,
                            "error": {"code": code, "message": message}})
        for name, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                file_id = f"file-{uuid.uuid4().hex[:24]}"
                self.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode()
                batch[name] = file_id
        batch["files_written"] = True

    def mount(self, app: Any) -> None:
        from aiohttp import web

        def error(status: int, message: str, kind: str = "openai") -> Any:
            return self.core._error(web, kind, status, "invalid_request_error", message)

        async def upload(request: Any) -> Any:
            form = await request.post()
            upload = form.get("file")
            if upload is None or form.get("purpose") != "batch":
                return error(400, "a batch file needs purpose=batch and a file")
            data = upload.file.read()
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            with self._lock:
                self.files[file_id] = data
                self.counts["uploads"] += 1
            return web.json_response({"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch",
                                      "created_at": int(time.time()),
                                      "filename": getattr(upload, "filename", "batch.jsonl")})

        async def content(request: Any) -> Any:
            data = self.files.get(request.match_info["file_id"])
            if data is None:
                return error(404, f"No such File object: {request.match_info['file_id']}")
            self.counts["downloads"] += 1
            return web.Response(body=data, content_type="application/octet-stream")

        async def create(request: Any) -> Any:
            body = await request.json()
            data = self.files.get(str(body.get("input_file_id")))
            if data is None:
                return error(400, f"No such File object: {body.get('input_file_id')}")
            requests = []
            for line in data.decode().splitlines():
                if line.strip():
                    item = json.loads(line)
                    requests.append((item["custom_id"], item["body"]))
            if self.max_requests is not None and len(requests) > int(self.max_requests):
                return error(400, f"a batch may hold at most {self.max_requests} requests, got {len(requests)}")
            batch = self._new("openai", requests, {"file_id": body["input_file_id"], "endpoint": body.get("endpoint"),
                                                   "metadata": body.get("metadata")})
            return web.json_response(self._openai_view(batch))

        async def listing(request: Any) -> Any:
            with self._lock:
                self.counts["listings"] += 1
                failing = self.list_error
                newest_first = [b for b in self.batches.values() if b["kind"] == "openai"][::-1]
            if failing:
                return error(int(failing), "loopback listing fault: the batches could not be listed")
            try:
                limit = int(request.query.get("limit", 20))
            except ValueError:
                return error(400, "limit must be an integer")
            if not 1 <= limit <= 100:
                return error(400, "limit must be between 1 and 100")
            after = request.query.get("after")
            start = 0
            if after:
                ids = [b["id"] for b in newest_first]
                if after not in ids:
                    return error(400, f"after: no such batch {after}")
                start = ids.index(after) + 1
            page = [self._openai_view(b) for b in newest_first[start:start + limit]]
            return web.json_response({"object": "list", "data": page, "has_more": start + limit < len(newest_first),
                                      "first_id": page[0]["id"] if page else None,
                                      "last_id": page[-1]["id"] if page else None})

        async def retrieve(request: Any) -> Any:
            batch = self.batches.get(request.match_info["batch_id"])
            if batch is None or batch["kind"] != "openai":
                return error(404, f"No such Batch: {request.match_info['batch_id']}")
            with self._lock:
                self.counts["polls"] += 1
                self._advance(batch)
                self._openai_files(batch)
            return web.json_response(self._openai_view(batch))

        async def cancel(request: Any) -> Any:
            batch = self.batches.get(request.match_info["batch_id"])
            if batch is None:
                return error(404, f"No such Batch: {request.match_info['batch_id']}")
            with self._lock:
                self.counts["cancels"] += 1
                if batch["status"] in ("validating", "in_progress"):
                    batch["status"] = "cancelling"
            if batch["kind"] == "anthropic":
                return web.json_response(self._anthropic_view(batch))
            return web.json_response(self._openai_view(batch))

        # -- Anthropic ------------------------------------------------------------------

        async def a_create(request: Any) -> Any:
            body = await request.json()
            requests = [(r["custom_id"], r["params"]) for r in body.get("requests") or []]
            if not requests:
                return error(400, "requests: at least one request is needed", "anthropic")
            if self.max_requests is not None and len(requests) > int(self.max_requests):
                return error(400, f"a batch may hold at most {self.max_requests} requests", "anthropic")
            batch = self._new("anthropic", requests, {})
            return web.json_response(self._anthropic_view(batch))

        async def a_retrieve(request: Any) -> Any:
            batch = self.batches.get(request.match_info["batch_id"])
            if batch is None or batch["kind"] != "anthropic":
                return error(404, f"No such batch: {request.match_info['batch_id']}", "anthropic")
            with self._lock:
                self.counts["polls"] += 1
                self._advance(batch)
            return web.json_response(self._anthropic_view(batch, str(request.url.origin())))

        async def a_results(request: Any) -> Any:
            batch = self.batches.get(request.match_info["batch_id"])
            if batch is None or batch["results"] is None:
                return error(404, "the batch has not ended", "anthropic")
            self.counts["downloads"] += 1
            lines = []
            for custom_id, (kind, value) in batch["results"].items():
                if kind == "ok":
                    result: dict[str, Any] = {"type": "succeeded", "message": value}
                elif kind == "error":
                    result = {"type": "errored", "error": {"type": "error", "error": {
                        "type": "invalid_request_error", "message": value}}}
                else:
                    result = {"type": "canceled" if kind == "cancelled" else "expired"}
                lines.append(json.dumps({"custom_id": custom_id, "result": result}) + "\n")
            return web.Response(body="".join(lines).encode(), content_type="application/x-jsonl")

        async def stats(_: Any) -> Any:
            return web.json_response(self.stats())

        async def release(_: Any) -> Any:
            with self._lock:
                self.hold = False
                self.hold_from = None
                for batch in self.batches.values():
                    batch["held"] = False
            return web.json_response({"ok": True})

        async def forget(request: Any) -> Any:
            body = await request.json()
            with self._lock:
                gone = self.batches.pop(str(body.get("batch_id")), None)
            return web.json_response({"forgotten": gone is not None})

        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/files", upload)
            app.router.add_get(f"{prefix}/files/{{file_id}}/content", content)
            app.router.add_post(f"{prefix}/batches", create)
            app.router.add_get(f"{prefix}/batches", listing)
            app.router.add_get(f"{prefix}/batches/{{batch_id}}", retrieve)
            app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", cancel)
        app.router.add_post("/v1/messages/batches", a_create)
        app.router.add_get("/v1/messages/batches/{batch_id}", a_retrieve)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", a_results)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", cancel)
        app.router.add_get("/_batches", stats)
        app.router.add_post("/_batches/release", release)
        app.router.add_post("/_batches/forget", forget)

    def _anthropic_view(self, batch: Mapping[str, Any], origin: str = "") -> dict[str, Any]:
        status = batch["status"]
        ended = status in ("completed", "failed", "expired", "cancelled")
        results = batch["results"] or {}
        processing = 0 if ended else len(batch["requests"])
        counts = {"processing": processing,
                  "succeeded": sum(1 for o in results.values() if o[0] == "ok"),
                  "errored": sum(1 for o in results.values() if o[0] == "error"),
                  "canceled": sum(1 for o in results.values() if o[0] == "cancelled"),
                  "expired": sum(1 for o in results.values() if o[0] == "expired")}
        return {"id": batch["id"], "type": "message_batch",
                "processing_status": "ended" if ended else "canceling" if status == "cancelling" else "in_progress",
                "request_counts": counts,
                "results_url": f"{origin}/v1/messages/batches/{batch['id']}/results" if ended else None}


def _get(url: str, data: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def batch_stats(server: Any) -> dict[str, Any]:
    """What a loopback server's Batch APIs have seen: ``uploads``, ``submissions``, ``polls``, ``listings``,
    ``cancels``, ``downloads``, ``requests_submitted``, ``billed_tokens_in``/``billed_tokens_out`` (the tokens of
    the requests run), ``batch_ids`` and each batch's status."""
    return _get(server.url + "/_batches")


def release_batches(server: Any) -> None:
    """Let the batches of a server started with ``batch={"hold": True}`` (or ``hold_from``) finish at their
    next poll."""
    _get(server.url + "/_batches/release", b"{}")


def forget_batch(server: Any, batch_id: str) -> bool:
    """Make the server forget ``batch_id``: from now on it answers 404 for it (a batch removed at the provider,
    or one created with another project's key). ``True`` when it knew the batch."""
    return bool(_get(server.url + "/_batches/forget", json.dumps({"batch_id": batch_id}).encode())["forgotten"])
