"""Shared HTTP machinery of the hosted-model adapters, written once.

:class:`HTTPAdapter` gives every HTTP adapter the same behaviour:

- one ``aiohttp.ClientSession`` per adapter, living on the package's
  background event loop (:mod:`llm_connect._runtime`), so the sync API
  (``complete``) works in a script and inside a running Jupyter loop alike,
  and the async API (``acomplete``) can be awaited from any loop;
- retries with exponential backoff and jitter on 429, 5xx, timeouts and
  connection errors, honouring ``Retry-After`` (seconds or an HTTP date,
  capped), bounded in attempts and in total time; other 4xx are not retried;
- client-side limits: ``requests_per_minute`` and ``tokens_per_minute``
  (``None`` = unlimited, the default) and ``max_concurrency`` requests in flight;
- errors translated at the boundary into :mod:`llm_connect.errors`, with the
  status, the provider's message (truncated) and what to do next; the API key
  is scrubbed from every message and never shown by ``repr``.

:class:`ChatHTTPAdapter` adds what every chat adapter shares: the opt-in
response cache, budget checks and charges, cost from :mod:`.pricing`.

``aiohttp``, ``tenacity`` and ``aiolimiter`` are imported on first use, so
``import llm_connect.adapters`` stays light.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from .. import _runtime
from ..core import LLMResponse, RunConfig, TokenLogprob
from ..errors import (
    AdapterConnectionError,
    AdapterError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
    ValidationError,
)
from . import pricing
from ._cache import ResponseCache, cache_key, open_cache

if TYPE_CHECKING:
    import aiohttp
    import aiolimiter

__all__ = ["ChatHTTPAdapter", "HTTPAdapter", "is_loopback_url", "parse_retry_after"]

logger = logging.getLogger("llm_connect.adapters")

_RETRYABLE = (RateLimitError, ServerError, AdapterTimeoutError, AdapterConnectionError)
_PROVIDER_MESSAGE_MAX = 500
_KEY_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)(bearer\s+)[^\s\"',]+"),
    re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',]+"),
)


class _Secret:
    """Holds an API key; its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or None

    def get(self) -> str | None:
        return self._value

    def __bool__(self) -> bool:
        return self._value is not None

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickle a key into a cache, a ledger or a worker
        raise TypeError("an API key is not picklable")


def is_loopback_url(url: str) -> bool:
    """True for http(s) URLs on this machine (``localhost``, ``127.x``, ``::1``)."""
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.") or host.endswith(".localhost")


def _safe_url(url: str) -> str:
    """``url`` without any ``user:password@`` part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date; a date in the
    past gives 0.0. Anything unreadable gives ``None``.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
        except ValueError:
            pass
        else:
            if ms >= 0:
                return ms / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        now = now or datetime.now(UTC)
        return max(0.0, (when - now).total_seconds())
    return seconds if seconds >= 0 else None


def _truncate(text: str, limit: int = _PROVIDER_MESSAGE_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _provider_message(raw: bytes) -> str:
    """The provider's own words from an error body (OpenAI / Anthropic shapes, else the text)."""
    text = raw.decode("utf-8", errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        return _truncate(text) if text.strip() else "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            kind = err.get("type") or err.get("code")
            return _truncate(f"{kind}: {err['message']}" if isinstance(kind, str) and kind else err["message"])
        if isinstance(err, str):
            return _truncate(err)
        for key in ("message", "detail"):
            if isinstance(body.get(key), str):
                return _truncate(body[key])
    return _truncate(text)


class _LoopState:
    """What an adapter holds on one event loop: session, limits."""

    __slots__ = ("loop", "rpm", "semaphore", "session", "timeouts", "tpm")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        session: aiohttp.ClientSession,
        semaphore: asyncio.Semaphore,
        rpm: aiolimiter.AsyncLimiter | None,
        tpm: aiolimiter.AsyncLimiter | None,
    ) -> None:
        self.loop = loop
        self.session = session
        self.semaphore = semaphore
        self.rpm = rpm
        self.tpm = tpm
        self.timeouts: dict[float, aiohttp.ClientTimeout] = {}


def _close_session(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
    """Close ``session`` on its loop; used when an adapter is garbage-collected or at exit."""
    if session.closed or loop.is_closed() or not loop.is_running():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(session.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
        return
    future = asyncio.run_coroutine_threadsafe(session.close(), loop)
    try:
        future.result(timeout=2.0)
    except Exception:
        pass


_closing: set[asyncio.Task[None]] = set()


class HTTPAdapter:
    """Base class of the HTTP adapters: session, retries, limits, error translation.

    Subclasses set the class attributes and implement :meth:`_auth_headers`.

    Keyword arguments (all adapters):
        base_url: endpoint root; default from ``base_url_env`` else ``default_base_url``.
        api_key: the key; default from the environment variable ``api_key_env``.
            A key is required unless ``base_url`` is on this machine.
        timeout_s: per-attempt timeout (``RunConfig.timeout_s`` overrides per call).
        max_retries: retries after the first attempt (so ``max_retries + 1`` attempts at most).
        max_retry_time_s: no retry starts later than this after the first attempt.
        max_retry_after_s: a server's ``Retry-After`` is honoured up to this many seconds.
        backoff_initial_s, backoff_max_s: exponential backoff with jitter between retries.
        requests_per_minute, tokens_per_minute: client-side limits; ``None`` (default) = unlimited.
            Requests are paced evenly with a burst of at most one second's worth.
        max_concurrency: requests in flight at once (also the connection pool size).
        headers: extra HTTP headers sent with every request.
    """

    provider: ClassVar[str] = "http"
    default_base_url: ClassVar[str] = ""
    base_url_env: ClassVar[str | None] = None
    default_api_key_env: ClassVar[str] = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        adapter_id: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        max_retry_time_s: float = 120.0,
        max_retry_after_s: float = 60.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 20.0,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_concurrency: int = 128,
        prices: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"{type(self).__name__}: model must be a non-empty string, got {model!r}")
        self.model_id = model
        env_url = os.environ.get(self.base_url_env) if self.base_url_env else None
        url = (base_url or env_url or self.default_base_url).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValidationError(f"{type(self).__name__}: base_url must start with http:// or https://, got {url!r}")
        self.base_url = url
        self.api_key_env = api_key_env or self.default_api_key_env
        key = api_key if api_key is not None else os.environ.get(self.api_key_env) if self.api_key_env else None
        self._api_key = _Secret(key)
        if key and "@" in url.split("://", 1)[1].split("/", 1)[0]:
            raise ValidationError(
                f"{type(self).__name__}: base_url {_safe_url(url)} holds credentials (user:password@) and an API key "
                "is set too; the key is sent as a header, so remove the credentials from the URL"
            )
        self._loopback = is_loopback_url(url)
        if not self._api_key and not self._loopback:
            raise AuthenticationError(
                f"{type(self).__name__} needs an API key for {_safe_url(url)}: set the {self.api_key_env} "
                "environment variable or pass api_key=... (no key is needed for a server on localhost)",
                adapter_id=adapter_id,
            )
        self.adapter_id = adapter_id or f"{self.provider}:{model}"
        for name, value, low in (
            ("timeout_s", timeout_s, 0.0),
            ("max_retry_time_s", max_retry_time_s, 0.0),
            ("max_retry_after_s", max_retry_after_s, 0.0),
            ("backoff_initial_s", backoff_initial_s, 0.0),
            ("backoff_max_s", backoff_max_s, 0.0),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
                raise ValidationError(f"{type(self).__name__}: {name} must be a number >= {low}, got {value!r}")
        if timeout_s <= 0:
            raise ValidationError(f"{type(self).__name__}: timeout_s must be > 0, got {timeout_s!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError(f"{type(self).__name__}: max_retries must be an int >= 0, got {max_retries!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValidationError(
                f"{type(self).__name__}: max_concurrency must be an int >= 1, got {max_concurrency!r}"
            )
        for name, value in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValidationError(f"{type(self).__name__}: {name} must be None or a number > 0, got {value!r}")
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.max_retry_time_s = float(max_retry_time_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_concurrency = max_concurrency
        self.prices = dict(prices) if prices else None
        self._extra_headers = dict(headers or {})
        self._price_cache: tuple[int, pricing.Price | None] | None = None
        self._state_obj: _LoopState | None = None
        self._finalizer: weakref.finalize | None = None
        self._state_lock = threading.Lock()
        self._random = random.Random()

    # -- subclass hooks -------------------------------------------------------------

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        """Headers that carry ``key`` (and the provider's version headers)."""
        return {}

    # -- pricing ----------------------------------------------------------------------

    @property
    def price(self) -> pricing.Price | None:
        """The price used for this adapter's model, or ``None`` when unknown (cost is then 0.0)."""
        return pricing.price_for(self.model_id, self.prices)

    @property
    def cost_known(self) -> bool:
        """Whether ``cost_usd`` reflects a real price (always true for a server on this machine)."""
        return self.price is not None or self._loopback

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        version = pricing.table_version()
        if self._price_cache is None or self._price_cache[0] != version:
            self._price_cache = (version, self.price)
        price = self._price_cache[1]
        if price is None:
            if not self._loopback:
                _warn_unknown_price(self.model_id)
            return 0.0
        return price.cost(tokens_in, tokens_out)

    # -- session on the background loop -------------------------------------------

    async def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state_obj
        if state is not None and state.loop is loop and not state.session.closed:
            return state
        import aiohttp

        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers.update(self._auth_headers(self._api_key.get()))
        headers.update(self._extra_headers)
        connector = aiohttp.TCPConnector(limit=self.max_concurrency, ttl_dns_cache=300)
        session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            trust_env=not self._loopback,
            cookie_jar=aiohttp.DummyCookieJar(),  # an API client keeps no cookies
        )
        rpm = tpm = None
        if self.requests_per_minute is not None or self.tokens_per_minute is not None:
            import aiolimiter

            if self.requests_per_minute is not None:
                burst = max(1.0, self.requests_per_minute / 60.0)
                rpm = aiolimiter.AsyncLimiter(burst, burst * 60.0 / self.requests_per_minute)
            if self.tokens_per_minute is not None:
                tpm = aiolimiter.AsyncLimiter(self.tokens_per_minute, 60.0)
        old = state
        state = _LoopState(loop, session, asyncio.Semaphore(self.max_concurrency), rpm, tpm)
        with self._state_lock:
            self._state_obj = state
            if self._finalizer is not None:
                self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _close_session, session, loop)
        if old is not None and not old.session.closed:
            _close_session(old.session, old.loop)
        return state

    async def _aclose(self) -> None:
        with self._state_lock:
            state, self._state_obj = self._state_obj, None
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
        if state is not None and not state.session.closed:
            await state.session.close()

    def close(self) -> None:
        """Close the HTTP session (a later call opens a new one)."""
        state = self._state_obj
        if state is None or state.loop.is_closed() or not state.loop.is_running():
            return
        if state.loop is _runtime.background_loop():
            _runtime.run_sync(self._aclose())
        else:  # pragma: no cover - sessions only live on the background loop
            asyncio.run_coroutine_threadsafe(self._aclose(), state.loop).result()

    async def aclose(self) -> None:
        await _runtime.on_background(self._aclose())

    def __enter__(self) -> HTTPAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> HTTPAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- one request, with limits, retries and error translation --------------------

    def _scrub(self, text: str) -> str:
        key = self._api_key.get()
        if key:
            text = text.replace(key, "***")
        for pattern in _KEY_PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
        return text

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_initial_s * (2 ** (attempt - 1)))
        return delay / 2 + self._random.uniform(0, delay / 2)

    def _wait(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            wait = min(float(retry_after), self.max_retry_after_s)
            # a little jitter on top, so many callers told "1 s" do not all come back at once
            return wait + self._random.uniform(0, min(1.0, 0.1 * wait))
        return self._backoff(retry_state.attempt_number)

    async def _post(self, path: str, payload: Mapping[str, Any], *, timeout_s: float, tokens: int) -> tuple[Any, float]:
        """POST ``payload`` as JSON to ``base_url + path``; the decoded body and the attempt's latency (ms)."""
        import tenacity

        state = await self._state()
        url = self.base_url + path
        try:
            data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"{self.adapter_id}: the request cannot be sent as JSON ({exc}); "
                "RunConfig.model_params values must be JSON-serialisable"
            ) from exc
        started = time.monotonic()
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1) | tenacity.stop_before_delay(self.max_retry_time_s),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(_RETRYABLE),
            sleep=asyncio.sleep,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(state, url, data, timeout_s, tokens)
        except tenacity.RetryError as gave_up:
            last = gave_up.last_attempt.exception()
            assert isinstance(last, AdapterError)
            n = gave_up.last_attempt.attempt_number
            elapsed = time.monotonic() - started
            err = type(last)(
                f"{last} (gave up after {n} attempt{'s' if n != 1 else ''} in {elapsed:.1f}s; "
                "raise max_retries / max_retry_time_s to keep trying longer)",
                status=last.status,
                provider_message=last.provider_message,
                adapter_id=self.adapter_id,
            )
            err.attempts = n  # type: ignore[attr-defined]
            raise err from last
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self, state: _LoopState, url: str, data: bytes, timeout_s: float, tokens: int
    ) -> tuple[Any, float]:
        import aiohttp

        if state.rpm is not None:
            await state.rpm.acquire()
        if state.tpm is not None:
            await state.tpm.acquire(min(float(tokens), state.tpm.max_rate))
        timeout = state.timeouts.get(timeout_s)
        if timeout is None:
            timeout = state.timeouts[timeout_s] = aiohttp.ClientTimeout(total=timeout_s)
        async with state.semaphore:
            t0 = time.perf_counter()
            try:
                async with state.session.post(url, data=data, timeout=timeout) as resp:
                    raw = await resp.read()
                    status = resp.status
                    headers = resp.headers
            except TimeoutError as exc:
                raise AdapterTimeoutError(
                    f"{self.adapter_id}: no reply from {_safe_url(url)} within {timeout_s:g}s; "
                    "raise timeout_s (or RunConfig.timeout_s) if the model is slow",
                    adapter_id=self.adapter_id,
                ) from exc
            except aiohttp.ClientError as exc:
                raise AdapterConnectionError(
                    f"{self.adapter_id}: could not talk to {_safe_url(url)}: "
                    f"{self._scrub(_truncate(f'{type(exc).__name__}: {exc}'))}; "
                    "check base_url and that the server is running and reachable",
                    adapter_id=self.adapter_id,
                ) from exc
            latency_ms = (time.perf_counter() - t0) * 1000.0
        if status >= 400:
            raise self._status_error(status, raw, headers, _safe_url(url))
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise MalformedResponseError(
                f"{self.adapter_id}: HTTP {status} from {_safe_url(url)} but the body is not valid JSON "
                f"(truncated?): {self._scrub(_truncate(raw.decode('utf-8', 'replace'), 200))!r}; "
                "check that base_url points at the API, then retry",
                status=status,
                adapter_id=self.adapter_id,
            ) from exc
        return body, latency_ms

    def _status_error(self, status: int, raw: bytes, headers: Mapping[str, str], url: str) -> AdapterError:
        message = self._scrub(_provider_message(raw))
        head = f"{self.adapter_id}: HTTP {status} from {url}: {message}"
        kw: dict[str, Any] = {"status": status, "provider_message": message, "adapter_id": self.adapter_id}
        if status in (401, 403):
            return AuthenticationError(
                f"{head}. The key was refused: check the {self.api_key_env} environment variable "
                f"(or api_key=...) and that it may use model {self.model_id!r}",
                **kw,
            )
        if status == 429:
            err: AdapterError = RateLimitError(
                f"{head}. Rate limited: lower max_concurrency / requests_per_minute or raise max_retries", **kw
            )
            err.retry_after = parse_retry_after(headers)  # type: ignore[attr-defined]
            return err
        if status >= 500:
            err = ServerError(f"{head}. The provider failed; it usually recovers: retry later", **kw)
            err.retry_after = parse_retry_after(headers) if status == 503 else None  # type: ignore[attr-defined]
            return err
        if status == 404:
            return BadRequestError(
                f"{head}. Not found: check base_url ({self.base_url}) and the model name {self.model_id!r}", **kw
            )
        return BadRequestError(f"{head}. The request was rejected (not retried): fix the model or parameters", **kw)

    def _malformed(self, what: str, body: Any) -> MalformedResponseError:
        shown = self._scrub(_truncate(json.dumps(body, default=str), 200))
        return MalformedResponseError(
            f"{self.adapter_id}: the reply from {_safe_url(self.base_url)} has no {what}: {shown}; "
            "check that base_url speaks this API",
            adapter_id=self.adapter_id,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model_id!r}, base_url={_safe_url(self.base_url)!r}, "
            f"api_key={self._api_key!r}, adapter_id={self.adapter_id!r})"
        )


_unknown_price_lock = threading.Lock()
_unknown_price_models: set[str] = set()


def _warn_unknown_price(model: str) -> None:
    with _unknown_price_lock:
        if model in _unknown_price_models:
            return
        _unknown_price_models.add(model)
    logger.info(
        "no price known for model %r: its cost_usd is reported as 0.0; "
        "pass prices={...} to the adapter or call llm_connect.adapters.pricing.register_price()",
        model,
    )


def estimate_tokens(*texts: str | None) -> int:
    """A rough token count (4 characters a token) for rate limiting when nothing better is known."""
    return sum(len(t) for t in texts if t) // 4 + 1


class ChatHTTPAdapter(HTTPAdapter):
    """An HTTP chat adapter: cache, budget, cost and the sync/async entry points.

    Subclasses set ``chat_path`` and implement :meth:`_payload` and :meth:`_parse`.
    """

    chat_path: ClassVar[str] = ""
    #: ``max_tokens`` sent when ``RunConfig.max_tokens`` is None (``None`` = send none)
    default_max_tokens: int | None = None

    def __init__(
        self, model: str, *, cache: ResponseCache | str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(model, **kwargs)
        self.cache = open_cache(cache)

    def _payload(self, prompt: str, run_config: RunConfig) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, body: Any) -> tuple[str, int, int, str | None, tuple[TokenLogprob, ...] | None]:
        """``(content, tokens_in, tokens_out, finish_reason, logprobs)`` from a reply body."""
        raise NotImplementedError

    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One call, blocking; safe inside a running event loop (e.g. Jupyter)."""
        return _runtime.run_sync(self._acomplete(prompt, run_config or RunConfig()))

    async def acomplete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One call, awaited from any event loop."""
        return await _runtime.on_background(self._acomplete(prompt, run_config or RunConfig()))

    async def _acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        if not isinstance(prompt, str):
            raise ValidationError(f"prompt must be a str, got {type(prompt).__name__}")
        key = None
        if self.cache is not None:
            t0 = time.perf_counter()
            key = cache_key(type(self).__qualname__, self.base_url, self.model_id, prompt, run_config)
            hit = self.cache.get(key, adapter_id=self.adapter_id, model_id=self.model_id)
            if hit is not None:
                from dataclasses import replace

                return replace(hit, latency_ms=(time.perf_counter() - t0) * 1000.0)
        tracker = run_config.budget_tracker
        if tracker is not None:
            tracker.check()
        payload = self._payload(prompt, run_config)
        tokens = estimate_tokens(prompt, run_config.system_prompt) + (
            run_config.max_tokens or self.default_max_tokens or 256
        )
        body, latency_ms = await self._post(
            self.chat_path, payload, timeout_s=run_config.timeout_s or self.timeout_s, tokens=tokens
        )
        content, tokens_in, tokens_out, finish_reason, logprobs = self._parse(body)
        response = LLMResponse(
            content=content,
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self._cost(tokens_in, tokens_out),
            latency_ms=latency_ms,
            logprobs=logprobs,
            finish_reason=finish_reason,
            raw=body,
        )
        if key is not None and self.cache is not None:
            self.cache.put(key, response)
        if tracker is not None:
            tracker.charge(response.cost_usd)
        return response


def usage_int(usage: Any, *names: str) -> int:
    """The first non-negative int among ``usage[name]``; 0 when missing (not an error)."""
    if not isinstance(usage, Mapping):
        return 0
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0
