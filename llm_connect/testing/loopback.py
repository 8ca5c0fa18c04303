"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic APIs, for tests, benchmarks and demos.

::

    from llm_connect.testing import LoopbackServer
    from llm_connect.adapters import OpenAICompatibleAdapter

    with LoopbackServer(latency_s=0.05, faults={"429": 0.1}) as server:
        adapter = OpenAICompatibleAdapter("loopback-model", base_url=server.base_url)
        print(adapter.complete("Rate this answer ...").content)
        print(server.stats())

It serves ``POST /v1/chat/completions``, ``POST /v1/embeddings`` (OpenAI) and
``POST /v1/messages`` (Anthropic), plus ``GET /v1/models`` and ``GET /_stats``.
It runs either in a background thread with its own event loop
(``mode="thread"``, the default: ``reply`` may be a callable and every request
is logged in :attr:`LoopbackServer.requests`) or in a subprocess
(``mode="process"``: its CPU time is not the caller's, as a benchmark needs).

Replies are deterministic: by default a judge verdict
``{"quality_score": s, "notes": ...}`` whose score is a hash of the prompt.
Faults are drawn per call from ``faults`` (fractions keyed by kind: an HTTP
status such as ``"429"`` or ``"500"``, ``"hang"`` (sleep ``hang_s`` before
answering), ``"truncated"`` (a 200 with half a JSON body), ``"no_usage"`` (a
good reply without ``usage``), ``"gzip"`` (a good reply sent gzip-encoded),
``"gzip_bomb"`` (a 200 whose gzip body inflates to ``bomb_bytes`` zero bytes,
streamed from a few KiB a MiB), ``"endless"`` (a 200 whose chunked body never
ends), ``"echo_auth"`` (a 200 whose non-JSON body echoes the request's
``Authorization`` / ``x-api-key``, as a broken proxy might) and
``"echo_auth_json"`` (the same as a JSON object without the API's fields)), decided by
``seed`` and the call's index, so a run is reproducible; ``fail_first=K`` makes the first K calls fail with
``fail_first_with`` and the rest succeed. 429 replies carry
``Retry-After: retry_after`` unless it is ``None``.

Prompt caching (``prompt_cache=True``, the default, as OpenAI's is on): the
server counts a prompt's tokens as its words (as ``usage`` always did) and
behaves like the providers' prompt caches, per server and model. Chat
completions: a prompt of 1024 tokens or more has the longest prefix it shares
with an earlier such request cached in 128-token steps (at least 1024),
reported in ``usage.prompt_tokens_details.cached_tokens`` (part of
``prompt_tokens``). Messages: the prefix up to a content block marked with
``cache_control`` (1024 tokens or more) is written to the cache, reported in
``usage.cache_creation_input_tokens``; a later request whose prefix up to that
block, or up to one of the 20 block boundaries before it, was cached reads it,
reported in ``usage.cache_read_input_tokens``; ``input_tokens`` counts the rest,
as Anthropic's does. :meth:`LoopbackServer.reset` empties the cache.

The server binds 127.0.0.1 only and stops when the ``with`` block ends (a
subprocess also stops when its parent goes away, and after ``max_lifetime_s``).
aiohttp is imported when a server starts. Run one from a shell with
``python -m llm_connect.testing.loopback --port 8000``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import weakref
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FAULT_KINDS", "LoopbackServer", "RecordedRequest", "default_reply"]

# plus any HTTP status given as a string, e.g. "429", "500"
FAULT_KINDS = ("hang", "truncated", "no_usage", "gzip", "gzip_bomb", "endless", "echo_auth", "echo_auth_json")

_MiB = 1024 * 1024
_ENDLESS_CHUNK = b"a" * 65536

_WORD = re.compile(r"\S+")
#: OpenAI's prompt cache: prompts this long or longer, cached in steps of this many tokens
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
#: Anthropic's prompt cache looks for a cached prefix this many content blocks back from a breakpoint
CACHE_LOOKBACK_BLOCKS = 20
_CACHE_MAX_ENTRIES = 200_000
_TOKEN = re.compile(r"\s*\S+")


def default_reply(prompt: str) -> str:
    """A judge verdict as JSON whose score (0..1, three decimals) is a hash of ``prompt``.

    Parameters
    ----------
    prompt : str
        The prompt.

    Returns
    -------
    str
        ``{"quality_score": ..., "notes": ...}``.
    """
    digest = hashlib.sha256(prompt.encode("utf-8")).digest()
    score = int.from_bytes(digest[:4], "big") % 1001 / 1000
    return json.dumps({"quality_score": score, "notes": "loopback judge: a deterministic score from the prompt"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (thread mode).

    Parameters
    ----------
    index : int
        Its number, from 0.
    path : str
        The path.
    headers : mapping of str to str
        The headers.
    body : object
        The parsed JSON body.
    outcome : str
        What the server did (``"ok"`` or a fault's kind).
    received_at : float, optional
        When (``time.monotonic``).
    """

    index: int
    path: str
    headers: Mapping[str, str]
    body: Any
    outcome: str
    received_at: float = field(default_factory=time.time)


def _gzip_zeros(total: int) -> Iterator[bytes]:
    """A gzip stream of ``total`` zero bytes, made in pieces (about 1 KiB per MiB), never all in memory."""
    whole, rest = divmod(total, _MiB)
    if not whole:
        yield gzip.compress(bytes(rest))
        return
    block = bytes(_MiB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    # a full flush resets the compressor, so the compressed form of each further MiB is the same bytes
    first = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)  # with the gzip header
    again = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for i in range(whole):
        yield first if i == 0 else again
        crc = zlib.crc32(block, crc)
    last = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # the remainder, as the final deflate block
    yield last.compress(bytes(rest)) + last.flush()
    crc = zlib.crc32(bytes(rest), crc)
    yield crc.to_bytes(4, "little") + (total & 0xFFFFFFFF).to_bytes(4, "little")


def _count_words(text: str) -> int:
    return len(text.split())


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _token_logprob(token: str) -> float:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest()
    return -round(int.from_bytes(digest, "big") % 3000 / 1000, 4)


def _vector(text: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        vec[int.from_bytes(digest[:4], "little") % dim] += 1.0 if digest[4] & 1 else -1.0
    norm = sum(v * v for v in vec) ** 0.5
    return [v / norm for v in vec] if norm else vec


class _Core:
    """The request handling, shared by thread and process modes (runs on the server's loop)."""

    def __init__(self, config: Mapping[str, Any], reply: Callable[[str], str] | str | None, log: bool) -> None:
        self.latency_s = float(config.get("latency_s", 0.0))
        self.faults = {str(k): float(v) for k, v in (config.get("faults") or {}).items()}
        total = sum(self.faults.values())
        if any(v < 0 for v in self.faults.values()) or total > 1.0 + 1e-9:
            raise ValueError(f"LoopbackServer: fault fractions must be >= 0 and sum to <= 1, got {self.faults}")
        for kind in self.faults:
            if kind not in FAULT_KINDS and not (kind.isdigit() and 400 <= int(kind) <= 599):
                raise ValueError(f"LoopbackServer: unknown fault {kind!r}; use an HTTP status or one of {FAULT_KINDS}")
        self.fail_first = int(config.get("fail_first", 0))
        self.fail_first_with = str(config.get("fail_first_with", "500"))
        self.retry_after = config.get("retry_after", "1")
        self.hang_s = float(config.get("hang_s", 30.0))
        self.bomb_bytes = int(config.get("bomb_bytes", 1024 * _MiB))
        self.seed = int(config.get("seed", 0))
        self.embedding_dim = int(config.get("embedding_dim", 16))
        self.model = config.get("model")
        self.require_api_key = config.get("require_api_key")
        self.prompt_cache = bool(config.get("prompt_cache", True))
        self._prefixes: dict[tuple[str, str, bytes], None] = {}  # (api, model, digest of a prefix), oldest first
        self.reply = reply
        self.log = log
        from ._batch_api import BatchAPI  # the Batch APIs (files, batches; Anthropic's message batches)

        self.batch_api = BatchAPI(self, config.get("batch"))
        self.requests: list[RecordedRequest] = []
        self.max_logged = int(config.get("max_logged", 100_000))
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.index = 0
            self.outcomes: Counter[str] = Counter()
            self.paths: Counter[str] = Counter()
            self.in_flight = 0
            self.max_in_flight = 0
            self.requests.clear()
            self._prefixes.clear()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "total": sum(self.paths.values()),
                "by_outcome": dict(self.outcomes),
                "by_path": dict(self.paths),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "process_cpu_s": time.process_time(),
            }

    def _decide(self, index: int) -> str:
        if index < self.fail_first:
            return self.fail_first_with
        if not self.faults:
            return "ok"
        draw = random.Random(self.seed * 1_000_003 + index).random()
        for kind in sorted(self.faults):
            draw -= self.faults[kind]
            if draw < 0:
                return kind
        return "ok"

    def _reply_text(self, prompt: str) -> str:
        if self.reply is None:
            return default_reply(prompt)
        if callable(self.reply):
            return str(self.reply(prompt))
        return str(self.reply)

    def _authorised(self, request: Any) -> bool:
        if self.require_api_key is None:
            return True
        auth = request.headers.get("Authorization", "")
        return auth == f"Bearer {self.require_api_key}" or request.headers.get("x-api-key") == self.require_api_key

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        kind = "anthropic" if request.path.endswith("/messages") else "openai"
        with self._lock:
            index = self.index
            self.index += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.paths[request.path] += 1
        outcome = "ok"
        raw, body = b"", None
        try:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = None
            if not self._authorised(request):
                outcome = "401"
                shown = request.headers.get("Authorization") or request.headers.get("x-api-key") or "(none)"
                # like real providers, echo what was received: clients must scrub it from their errors
                return self._error(web, kind, 401, "authentication_error", f"Incorrect API key provided: {shown}")
            if not isinstance(body, dict):
                outcome = "400"
                return self._error(web, kind, 400, "invalid_request_error", "the body is not a JSON object")
            outcome = self._decide(index)
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            if outcome == "hang":
                await asyncio.sleep(self.hang_s)
            if outcome in ("echo_auth", "echo_auth_json"):
                auth = request.headers.get("Authorization", "(none)")
                key = request.headers.get("x-api-key", "(none)")
                text = f"proxy error; you sent Authorization: {auth}, x-api-key: {key}"
                if outcome == "echo_auth_json":
                    return web.json_response({"detail": text, "echo": {"authorization": auth, "x-api-key": key}})
                return web.Response(text=text)
            if outcome in ("gzip_bomb", "endless"):
                return await self._stream_fault(web, request, outcome)
            if outcome.isdigit():
                status = int(outcome)
                headers = {}
                if status == 429 and self.retry_after is not None:
                    headers["Retry-After"] = str(self.retry_after)
                kinds = {429: "rate_limit_error", 500: "api_error", 503: "overloaded_error"}
                message = f"loopback fault {status} on call {index}"
                return self._error(web, kind, status, kinds.get(status, "invalid_request_error"), message, headers)
            if request.path.endswith("/embeddings"):
                payload = self._embeddings(body)
            elif kind == "anthropic":
                payload = self._messages(body)
            else:
                payload = self._chat(body)
            if outcome == "no_usage":
                payload.pop("usage", None)
            data = json.dumps(payload).encode("utf-8")
            if outcome == "truncated":
                data = data[: len(data) // 2]
            if outcome == "gzip":
                return web.Response(
                    body=gzip.compress(data), content_type="application/json", headers={"Content-Encoding": "gzip"}
                )
            return web.Response(body=data, content_type="application/json")
        finally:
            with self._lock:
                self.in_flight -= 1
                self.outcomes[outcome] += 1
                if self.log and len(self.requests) < self.max_logged:
                    self.requests.append(
                        RecordedRequest(index, request.path, dict(request.headers), body if raw else None, outcome)
                    )

    @staticmethod
    def _error(
        web: Any, kind: str, status: int, err_type: str, message: str, headers: Mapping[str, str] | None = None
    ) -> Any:
        if kind == "anthropic":
            payload: dict[str, Any] = {"type": "error", "error": {"type": err_type, "message": message}}
        else:
            payload = {"error": {"message": message, "type": err_type, "code": None}}
        return web.json_response(payload, status=status, headers=headers)

    async def _stream_fault(self, web: Any, request: Any, outcome: str) -> Any:
        """A 200 whose body is a gzip bomb or never ends; server memory stays small either way."""
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        if outcome == "gzip_bomb":
            resp.headers["Content-Encoding"] = "gzip"
        await resp.prepare(request)
        try:
            if outcome == "endless":
                await resp.write(b'{"choices": [{"message": {"role": "assistant", "content": "')
                while True:
                    await resp.write(_ENDLESS_CHUNK)
            else:
                for piece in _gzip_zeros(self.bomb_bytes):
                    await resp.write(piece)
                await resp.write_eof()
        except ConnectionError:  # the client stopped reading and closed the connection: that is the point
            pass
        return resp

    def _complete(self, prompt: str, max_tokens: Any) -> tuple[str, str]:
        text = self._reply_text(prompt)
        if isinstance(max_tokens, int) and max_tokens > 0:
            tokens = _TOKEN.findall(text)
            if len(tokens) > max_tokens:
                return "".join(tokens[:max_tokens]), "length"
        return text, "stop"

    # -- the prompt cache ------------------------------------------------------------

    def _remember(self, keys: list[tuple[str, str, bytes]]) -> None:
        with self._lock:
            for key in keys:
                self._prefixes.pop(key, None)
                self._prefixes[key] = None
            while len(self._prefixes) > _CACHE_MAX_ENTRIES:
                del self._prefixes[next(iter(self._prefixes))]

    def _known(self, key: tuple[str, str, bytes]) -> bool:
        with self._lock:
            return key in self._prefixes

    def _openai_cached(self, model: str, messages: list[Any]) -> int:
        """OpenAI's automatic prefix cache: how many of this prompt's tokens an earlier request had cached."""
        digest = hashlib.sha256()
        steps: list[tuple[int, bytes]] = []  # (tokens, digest of the prefix) at every 128-token step
        count = 0
        for m in messages:
            if not isinstance(m, dict):
                continue
            digest.update(b"\x01" + str(m.get("role")).encode("utf-8") + b"\x01")
            for word in _message_text(m.get("content")).split():
                digest.update(word.encode("utf-8") + b"\x00")
                count += 1
                if count % CACHE_STEP_TOKENS == 0:
                    steps.append((count, digest.copy().digest()))
        if count < CACHE_MIN_TOKENS:
            return 0
        cached = 0
        for tokens, key in reversed(steps):
            if tokens < CACHE_MIN_TOKENS:
                break
            if self._known(("openai", model, key)):
                cached = tokens
                break
        self._remember([("openai", model, key) for tokens, key in steps if tokens >= CACHE_MIN_TOKENS])
        return cached

    def _anthropic_cached(self, model: str, body: dict[str, Any]) -> tuple[int, int, int]:
        """``(all prompt tokens, read from the cache, written to it)`` for a Messages request."""
        blocks: list[tuple[str, Any]] = []  # (role, block or text) in the order the API reads them
        system = body.get("system")
        for block in (system if isinstance(system, list) else [system] if isinstance(system, str) else []):
            blocks.append(("system", block))
        for m in body.get("messages") or []:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            for block in (content if isinstance(content, list) else [content]):
                blocks.append((str(m.get("role")), block))
        digest = hashlib.sha256()
        ends: list[tuple[int, bytes, bool]] = []  # per block: (tokens so far, digest so far, has cache_control)
        count = 0
        for role, block in blocks:
            text = block.get("text", "") if isinstance(block, dict) else block if isinstance(block, str) else ""
            digest.update(b"\x01" + role.encode("utf-8") + b"\x01")
            for word in str(text).split():
                digest.update(word.encode("utf-8") + b"\x00")
                count += 1
            ends.append((count, digest.copy().digest(), isinstance(block, dict) and bool(block.get("cache_control"))))
        marks = [i for i, end in enumerate(ends) if end[2]]
        if not self.prompt_cache or not marks:
            return count, 0, 0
        last = marks[-1]
        if ends[last][0] < CACHE_MIN_TOKENS:
            return count, 0, 0
        read = 0
        for i in range(last, max(-1, last - CACHE_LOOKBACK_BLOCKS - 1), -1):
            if ends[i][0] >= CACHE_MIN_TOKENS and self._known(("anthropic", model, ends[i][1])):
                read = ends[i][0]
                break
        written = ends[last][0] - read
        self._remember([("anthropic", model, ends[i][1]) for i in marks if ends[i][0] >= CACHE_MIN_TOKENS])
        return count, read, written

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        users = [_message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else ""
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        content, finish = self._complete(prompt, max_tokens)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish,
            "logprobs": None,
        }
        if body.get("logprobs"):
            k = int(body.get("top_logprobs") or 0)
            entries = []
            for token in _TOKEN.findall(content):
                lp = _token_logprob(token)
                top = [{"token": token, "logprob": lp, "bytes": None}]
                top += [{"token": f"<alt{j}>", "logprob": lp - j, "bytes": None} for j in range(1, k)]
                entries.append({"token": token, "logprob": lp, "bytes": None, "top_logprobs": top[:k]})
            choice["logprobs"] = {"content": entries, "refusal": None}
        tokens_in = sum(_count_words(_message_text(m.get("content"))) for m in messages if isinstance(m, dict))
        tokens_out = max(1, _count_words(content))
        model = str(body.get("model", ""))
        cached = self._openai_cached(model, messages) if self.prompt_cache else 0
        return {
            "id": f"chatcmpl-loopback-{self.index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or body.get("model", "loopback-model"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }

    def _messages(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        users = [_message_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else ""
        content, finish = self._complete(prompt, body.get("max_tokens"))
        tokens_in, read, written = self._anthropic_cached(str(body.get("model", "")), body)
        usage: dict[str, Any] = {"input_tokens": tokens_in - read - written,
                                 "output_tokens": max(1, _count_words(content))}
        if self.prompt_cache:
            usage["cache_creation_input_tokens"] = written
            usage["cache_read_input_tokens"] = read
        return {
            "id": f"msg_loopback_{self.index}",
            "type": "message",
            "role": "assistant",
            "model": self.model or body.get("model", "loopback-model"),
            "content": [{"type": "text", "text": content}],
            "stop_reason": "end_turn" if finish == "stop" else "max_tokens",
            "stop_sequence": None,
            "usage": usage,
        }

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dim = int(body.get("dimensions") or self.embedding_dim)
        data = [{"object": "embedding", "index": i, "embedding": _vector(str(t), dim)} for i, t in enumerate(texts)]
        data.reverse()  # listed out of order on purpose: clients must sort by index
        tokens = sum(_count_words(str(t)) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": self.model or body.get("model", "loopback-embedding"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def app(self) -> Any:
        from aiohttp import web

        async def stats(_: Any) -> Any:
            return web.json_response(self.stats())

        async def reset(_: Any) -> Any:
            self.reset()
            return web.json_response({"ok": True})

        async def models(_: Any) -> Any:
            return web.json_response(
                {"object": "list", "data": [{"id": self.model or "loopback-model", "object": "model"}]}
            )

        app = web.Application(client_max_size=64 * 1024**2)
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self.handle)
            app.router.add_post(f"{prefix}/embeddings", self.handle)
            app.router.add_post(f"{prefix}/messages", self.handle)
            app.router.add_get(f"{prefix}/models", models)
        app.router.add_get("/_stats", stats)
        app.router.add_post("/_reset", reset)
        self.batch_api.mount(app)
        return app


async def _start_site(core: _Core, port: int) -> tuple[Any, int]:
    from aiohttp import web

    runner = web.AppRunner(core.app(), access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, bound


class LoopbackServer:
    """A local OpenAI/Anthropic-compatible HTTP server; use it as a context manager.

    Parameters
    ----------
    mode : {"thread", "process"}, default "thread"
        Run in a thread of this process or in a subprocess.
    latency_s : float, default 0.0
        Seconds every reply waits before it is sent.
    reply : str or callable, optional
        The reply text; ``None`` = :func:`default_reply` (a judge verdict from the prompt); a callable
        ``prompt -> str`` in thread mode.
    faults : mapping of str to float, optional
        Fractions of calls that fail, by kind (see the module docstring).
    fail_first : int, default 0
        The first ``fail_first`` calls fail with ``fail_first_with``.
    fail_first_with : str, default "500"
        Their kind.
    retry_after : float or str, optional
        The ``Retry-After`` header of 429 replies (default ``"1"``; ``None`` = no header).
    hang_s : float, default 30.0
        How long a ``"hang"`` fault sleeps.
    bomb_bytes : int, default 1073741824
        How many zero bytes a ``"gzip_bomb"`` body inflates to (1 GiB).
    seed : int, default 0
        Makes the fault draws reproducible.
    model : str, optional
        The model name in replies (default: the one asked for).
    require_api_key : str, optional
        When set, requests without this key get a 401 that echoes what they sent.
    embedding_dim : int, default 16
        Length of the embedding vectors.
    port : int, default 0
        0 picks a free port.
    max_lifetime_s : float, default 3600.0
        A subprocess server exits after this long regardless.
    batch : mapping, optional
        The Batch APIs' behaviour (``polls``, ``hold``, ``hold_from``, ``fail_every``, ``expire_after``,
        ``validation_error``, ``max_requests``, ``list_error``; see :mod:`llm_connect.testing._batch_api`).
    prompt_cache : bool, default True
        Simulate the providers' prompt caches (see the module docstring).

    Raises
    ------
    ValueError
        An unknown ``mode``, or a callable ``reply`` in process mode.

    Examples
    --------
    >>> from llm_connect import OpenAICompatibleAdapter
    >>> with LoopbackServer(reply="4") as server:
    ...     OpenAICompatibleAdapter("m", base_url=server.base_url).complete("2+2?").content
    '4'
    """

    def __init__(
        self,
        *,
        mode: str = "thread",
        latency_s: float = 0.0,
        reply: str | Callable[[str], str] | None = None,
        faults: Mapping[str, float] | None = None,
        fail_first: int = 0,
        fail_first_with: str = "500",
        retry_after: float | str | None = "1",
        hang_s: float = 30.0,
        bomb_bytes: int = 1024 * _MiB,
        seed: int = 0,
        model: str | None = None,
        require_api_key: str | None = None,
        embedding_dim: int = 16,
        port: int = 0,
        max_lifetime_s: float = 3600.0,
        batch: Mapping[str, Any] | None = None,
        prompt_cache: bool = True,
    ) -> None:
        if mode not in ("thread", "process"):
            raise ValueError(f"LoopbackServer: mode must be 'thread' or 'process', got {mode!r}")
        if mode == "process" and callable(reply):
            raise ValueError("LoopbackServer: a callable reply needs mode='thread'; give a string in process mode")
        self.mode = mode
        self.port = port
        self.max_lifetime_s = max_lifetime_s
        self._config: dict[str, Any] = {
            "latency_s": latency_s,
            "faults": dict(faults or {}),
            "fail_first": fail_first,
            "fail_first_with": str(fail_first_with),
            "retry_after": None if retry_after is None else str(retry_after),
            "hang_s": hang_s,
            "bomb_bytes": bomb_bytes,
            "seed": seed,
            "model": model,
            "require_api_key": require_api_key,
            "embedding_dim": embedding_dim,
            "reply": reply if isinstance(reply, str) else None,
            "batch": dict(batch or {}),
            "prompt_cache": bool(prompt_cache),
        }
        self._reply = reply
        # validate now, in the caller's thread
        self._core: _Core | None = _Core(self._config, reply, log=True) if mode == "thread" else None
        if mode == "process":
            _Core(self._config, None, log=False)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._started = False
        self._finalizer: weakref.finalize | None = None

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Start serving (``with LoopbackServer() as server`` starts it too).

        Returns
        -------
        LoopbackServer
            ``self``, with :attr:`base_url` set.
        """
        if self._started:
            return self
        if self.mode == "thread":
            import aiohttp.web  # noqa: F401  (imported here, not on the server's loop, where it would block it)

            self._start_thread()
        else:
            self._start_process()
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._thread, self._process)
        self._started = True
        return self

    def _start_thread(self) -> None:
        assert self._core is not None
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []
        bound: list[int] = []
        core, port = self._core, self.port

        def run() -> None:  # holds no reference to self, so a dropped server is collected and stopped
            asyncio.set_event_loop(loop)
            try:
                runner, actual = loop.run_until_complete(_start_site(core, port))
                bound.append(actual)
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(runner.cleanup())
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="llm_connect-loopback", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise RuntimeError(f"LoopbackServer could not start: {failure[0]}") from failure[0]
        self.port = bound[0]

    def _start_process(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the folder holding the llm_connect package
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        config = {**self._config, "port": self.port, "max_lifetime_s": self.max_lifetime_s, "watch_stdin": True}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "llm_connect.testing.loopback", "--config-json", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode().strip()
        if not line.startswith("PORT "):
            self._process.kill()
            self._process.wait()
            raise RuntimeError(f"LoopbackServer subprocess did not start (said {line!r})")
        self.port = int(line.split()[1])

    def stop(self) -> None:
        """Stop serving (also done when the server is garbage-collected or the interpreter exits)."""
        if not self._started:
            return
        self._started = False
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._thread = None
        self._loop = None
        self._process = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if not self._started:
            raise RuntimeError("LoopbackServer is not running; use it in a `with` block or call start()")
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The Anthropic-style base URL (the adapter appends ``/v1/messages``)."""
        return self.url

    # -- what happened -----------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``{"total", "by_outcome", "by_path", "in_flight", "max_in_flight"}``.

        Returns
        -------
        dict
            The counts.
        """
        if self._core is not None:
            return self._core.stats()
        with urllib.request.urlopen(self.url + "/_stats", timeout=10) as resp:
            return json.loads(resp.read())

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in arrival order (thread mode only)."""
        if self._core is None:
            raise RuntimeError("LoopbackServer.requests is only kept in mode='thread'; use stats() in process mode")
        with self._core._lock:
            return list(self._core.requests)

    def reset(self) -> None:
        """Zero the counters, forget the requests and the prompt cache and restart the call index (so
        ``fail_first`` applies again)."""
        if self._core is not None:
            self._core.reset()
            return
        req = urllib.request.Request(self.url + "/_reset", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def __repr__(self) -> str:  # never raises, even on a half-built server (a failed __init__)
        started = getattr(self, "_started", False)
        where = f"http://127.0.0.1:{getattr(self, 'port', '?')}" if started else "stopped"
        return f"LoopbackServer(mode={getattr(self, 'mode', '?')!r}, {where})"


def _shutdown(
    loop: asyncio.AbstractEventLoop | None,
    thread: threading.Thread | None,
    process: subprocess.Popen[bytes] | None,
) -> None:
    """Stop a server's thread (its loop cleans up and closes) or its subprocess."""
    if thread is not None and loop is not None:
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # closed meanwhile
                pass
        if thread is not threading.current_thread():
            thread.join(10)
    if process is not None:
        try:
            if process.stdin is not None:
                process.stdin.close()  # the child exits on EOF
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            if process.stdout is not None:
                process.stdout.close()


def announcement(port: int) -> str:
    """What ``python -m llm_connect.testing.loopback`` prints once it serves: the base URLs to copy."""
    return (
        f"serving a fake OpenAI-compatible API at http://127.0.0.1:{port}/v1 "
        f"(Anthropic: http://127.0.0.1:{port}); no API key needed; Ctrl-C stops it\n"
        f"try: llm-connect calibrate DATA --out DIR --judges llm --llm openai:loopback-model "
        f"--base-url http://127.0.0.1:{port}/v1"
    )


def _serve(config: dict[str, Any]) -> None:
    """Run a server until stdin closes (the parent is gone), ``max_lifetime_s`` passes or Ctrl-C.

    A parent (``mode="process"``, ``watch_stdin``) reads the port from a first line ``PORT N``;
    run from a shell, it prints :func:`announcement` (the base URL) instead.
    """
    core = _Core(config, config.get("reply"), log=False)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        runner, port = loop.run_until_complete(_start_site(core, int(config.get("port", 0))))
    except OSError as exc:  # the port is taken, or may not be bound
        loop.close()
        where = f"127.0.0.1:{config.get('port', 0)}"
        raise SystemExit(f"loopback: cannot listen on {where}: {exc.strerror or exc}") from None
    sys.stdout.write(f"PORT {port}\n" if config.get("watch_stdin") else announcement(port) + "\n")
    sys.stdout.flush()

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        loop.call_soon_threadsafe(loop.stop)

    if config.get("watch_stdin"):
        threading.Thread(target=watch_stdin, daemon=True).start()
    loop.call_later(float(config.get("max_lifetime_s", 3600.0)), loop.stop)
    # Ctrl-C stops the loop between callbacks (as asyncio.run does), never as a KeyboardInterrupt raised
    # inside a request handler, which the cleanup below would raise again as a traceback.
    on_ctrl_c = (sys.platform != "win32" and threading.current_thread() is threading.main_thread()
                 and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    if on_ctrl_c:
        loop.add_signal_handler(signal.SIGINT, loop.stop)
    try:
        loop.run_forever()
    except KeyboardInterrupt:  # Ctrl-C in a shell: stop quietly
        pass
    finally:
        loop.run_until_complete(runner.cleanup())
        if on_ctrl_c:
            loop.remove_signal_handler(signal.SIGINT)
        loop.close()


def main(argv: list[str] | None = None) -> None:
    """The command line: print the base URL (``http://127.0.0.1:PORT/v1``) and serve until interrupted
    (``--port``, ``--latency``, ``--reply``)."""
    parser = argparse.ArgumentParser(prog="python -m llm_connect.testing.loopback",
                                     description="Serve a fake OpenAI/Anthropic API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each reply waits")
    parser.add_argument("--reply", default=None, help="a fixed reply (default: a judge verdict from the prompt)")
    parser.add_argument("--config-json", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.config_json:
        config = json.loads(args.config_json)
    else:
        config = {"port": args.port, "latency_s": args.latency, "reply": args.reply, "max_lifetime_s": 10 * 365 * 86400}
    _serve(config)


if __name__ == "__main__":
    main()
