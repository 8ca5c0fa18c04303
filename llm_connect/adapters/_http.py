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
  is scrubbed from every message and never shown by ``repr``;
- no secret survives in an error: credentials in ``base_url``
  (``http://user:password@host``) are sent as HTTP basic auth and every URL
  shown (messages, ``repr``, ``base_url`` itself) is redacted; an error is
  raised from a frame that holds neither the reply body nor the aiohttp
  response, and a chained low-level cause is stripped of its traceback (whose
  frames hold the request's auth headers), so even a ``capture_locals``
  traceback shows no key;
- reply bodies are read incrementally and capped at ``max_response_bytes``
  (default :data:`MAX_RESPONSE_BYTES`, 16 MiB, counted after gzip/deflate
  decoding, which this module does itself with bounded output), so a gzip bomb
  or an endless body fails fast as a :class:`MalformedResponseError` instead
  of filling memory.

:class:`ChatHTTPAdapter` adds what every chat adapter shares: the opt-in
response cache, budget checks and charges, cost from :mod:`.pricing`.

``aiohttp``, ``tenacity`` and ``aiolimiter`` are imported on first use, so
``import llm_connect.adapters`` stays light.

The pieces live beside this module, one idea each: holding and scrubbing secrets
(``_secrets.py``), reading and decoding a reply body (``_body.py``), and when to retry
(``_retry.py``: the retried errors, ``Retry-After``, backoff).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from .._docstrings import ADAPTER_TEXTS, share_parameters
from .._runtime import background_loop, on_background, run_sync
from .._textsafe import redact_urls
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
from ._body import (
    _ACCEPT_ENCODING,
    _ERROR_BODY_MAX,
    MAX_RESPONSE_BYTES,
    _BodyError,
    _provider_message,
    _read_body,
    _truncate,
)
from ._cache import ResponseCache, active_session, cache_key, open_cache
from ._retry import _RETRYABLE, _retry_wait, parse_retry_after
from ._secrets import _ForgetOnError, _scrub, _Secret, _split_credentials, _with_cause

if TYPE_CHECKING:
    import aiohttp
    import aiolimiter

__all__ = ["MAX_RESPONSE_BYTES", "ChatHTTPAdapter", "HTTPAdapter", "is_loopback_url", "parse_retry_after"]

logger = logging.getLogger("llm_connect.adapters")


def is_loopback_url(url: str) -> bool:
    """True for http(s) URLs on this machine (``localhost``, ``127.x``, ``::1``).

    Parameters
    ----------
    url : str
        A URL.

    Returns
    -------
    bool
        Whether it is on this machine.

    Examples
    --------
    >>> is_loopback_url("http://127.0.0.1:8000/v1"), is_loopback_url("https://api.openai.com/v1")
    (True, False)
    """
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.") or host.endswith(".localhost")


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

    Subclasses set the class attributes and implement :meth:`_auth_headers`. The keyword arguments below
    are those of every HTTP adapter.

    Parameters
    ----------
    model : str
        The provider's model name (``model_id``).
    base_url : str, optional
        Endpoint root; default from ``base_url_env`` else ``default_base_url``. Credentials in it
        (``http://user:password@host/v1``, for a server that takes them instead of an API key) are sent as
        HTTP basic auth; ``self.base_url`` and every message show the URL without them.
    api_key : str, optional
        The key; default from the environment variable ``api_key_env``. A key is required unless
        ``base_url`` is on this machine or holds credentials, or recorded replies are replayed (pytest
        ``--llm-cache-mode=replay``: nothing is sent).
    api_key_env : str, optional
        The environment variable holding the key (default: the adapter's, e.g. ``OPENAI_API_KEY``).
    adapter_id : str, optional
        The adapter's id in results and ledgers (default ``"<provider>:<model>"``).
    timeout_s : float, default 60.0
        Per-attempt timeout (``RunConfig.timeout_s`` overrides per call).
    max_retries : int, default 5
        Retries after the first attempt (so ``max_retries + 1`` attempts at most).
    max_retry_time_s : float, default 120.0
        No retry starts later than this after the first attempt.
    max_retry_after_s : float, default 60.0
        A server's ``Retry-After`` is honoured up to this many seconds.
    backoff_initial_s, backoff_max_s : float, default 0.5 and 20.0
        Exponential backoff with jitter between retries.
    requests_per_minute, tokens_per_minute : float, optional
        Client-side limits; ``None`` (default) = unlimited. Requests are paced evenly with a burst of at
        most one second's worth.
    max_concurrency : int, default 128
        Requests in flight at once (also the connection pool size).
    max_response_bytes : int, default MAX_RESPONSE_BYTES
        The largest reply body accepted, in bytes after gzip/deflate decoding (16 MiB); a larger one is a
        :class:`MalformedResponseError`, not retried.
    prices : mapping, optional
        Prices of models (USD per million tokens) over the registered ones (:mod:`.pricing`).
    headers : mapping of str to str, optional
        Extra HTTP headers sent with every request.

    Raises
    ------
    ValidationError
        A blank ``model`` or a setting out of its range (named).
    AuthenticationError
        No API key where one is needed (the message names the variable to set).
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
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        prices: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        try:
            self._configure_endpoint(base_url, api_key, api_key_env, headers)
        finally:
            # the key and URL credentials are held by _Secret's now; a traceback keeps this frame's
            # locals (a failure below, or above), so the arguments must not hold them any more
            api_key = base_url = headers = None
        name = type(self).__name__
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"{name}: model must be a non-empty string, got {model!r}")
        self.model_id = model
        if not self._api_key and not self._basic_auth and not self._loopback and not _replaying():
            raise AuthenticationError(
                f"{name} needs an API key for {self._display_url}: set the {self.api_key_env} "
                "environment variable or pass api_key=... (no key is needed for a server on localhost, "
                "nor for one that takes user:password@ in base_url)",
                adapter_id=adapter_id,
            )
        self.adapter_id = adapter_id or f"{self.provider}:{model}"
        for field, value, low in (
            ("timeout_s", timeout_s, 0.0),
            ("max_retry_time_s", max_retry_time_s, 0.0),
            ("max_retry_after_s", max_retry_after_s, 0.0),
            ("backoff_initial_s", backoff_initial_s, 0.0),
            ("backoff_max_s", backoff_max_s, 0.0),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
                raise ValidationError(f"{name}: {field} must be a number >= {low}, got {value!r}")
        if timeout_s <= 0:
            raise ValidationError(f"{name}: timeout_s must be > 0, got {timeout_s!r}")
        for field, value, low in (
            ("max_retries", max_retries, 0),
            ("max_concurrency", max_concurrency, 1),
            ("max_response_bytes", max_response_bytes, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(f"{name}: {field} must be an int >= {low}, got {value!r}")
        for field, limit in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0):
                raise ValidationError(f"{name}: {field} must be None or a number > 0, got {limit!r}")
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.max_retry_time_s = float(max_retry_time_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.backoff_initial_s = float(backoff_initial_s)
        self.backoff_max_s = float(backoff_max_s)
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_concurrency = max_concurrency
        self.max_response_bytes = max_response_bytes
        self.prices = dict(prices) if prices else None
        self._price_cache: tuple[int, pricing.Price | None] | None = None
        self._state_obj: _LoopState | None = None
        self._finalizer: weakref.finalize | None = None
        self._state_lock = threading.Lock()
        self._random = random.Random()

    def _configure_endpoint(
        self, base_url: str | None, api_key: str | None, api_key_env: str | None, headers: Mapping[str, str] | None
    ) -> None:
        """Set ``base_url`` (without credentials), the key and URL credentials (as secrets) and extra headers.

        Everything that touches a secret is here, so that on failure the caller
        can clear the arguments; this frame's own locals are cleared too.
        """
        name = type(self).__name__
        try:
            env_url = os.environ.get(self.base_url_env) if self.base_url_env else None
            url = (base_url or env_url or self.default_base_url).rstrip("/")
            if not url.startswith(("http://", "https://")):
                # "user:pw@host" without a scheme: its credentials are masked too
                shown = redact_urls(url, mask="***") if "://" in url else re.sub(r"^[^/]*@", "***@", url)
                raise ValidationError(f"{name}: base_url must start with http:// or https://, got {shown!r}")
            url, user, password, scrubbed = _split_credentials(url)
            self.base_url = url
            self._display_url = url.replace("://", "://***@", 1) if user is not None else url
            self.api_key_env = api_key_env or self.default_api_key_env
            self._api_key = _Secret(
                api_key if api_key is not None else os.environ.get(self.api_key_env) if self.api_key_env else None
            )
            basic = None
            if user is not None:
                basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._basic_auth = _Secret(basic)
            key = self._api_key.get()
            self._scrubbed = _Secret(tuple(f for f in (key, *scrubbed) if f))
            self._extra_headers = dict(headers or {})
            if basic and self._api_key:
                raise ValidationError(
                    f"{name}: base_url {self._display_url} holds credentials (user:password@) and an API key "
                    "is set too; the key is sent as a header, so remove the credentials from the URL"
                )
            if basic and any(str(h).lower() == "authorization" for h in self._extra_headers):
                raise ValidationError(
                    f"{name}: base_url {self._display_url} holds credentials (user:password@) and headers= has an "
                    "Authorization header too; keep one of them"
                )
            self._loopback = is_loopback_url(url)
        except BaseException:
            # drop every local that may hold a secret: a traceback keeps this frame's locals
            base_url = api_key = headers = env_url = url = shown = user = password = scrubbed = basic = key = None  # type: ignore[assignment]
            self._extra_headers = {}
            raise

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

    #: a cached input token's price as a share of the input price when the price table gives none
    cached_input_factor: ClassVar[float] = pricing.CACHED_INPUT_FACTOR

    def _cost(
        self, tokens_in: int, tokens_out: int, *, batch: bool = False, tokens_cached: int = 0,
        tokens_cache_written: int = 0,
    ) -> float:
        """The list price of the tokens (``batch=True``: the Batch API's discounted price); prompt tokens read
        from (``tokens_cached``) or written to (``tokens_cache_written``) the provider's prompt cache at the
        cached and cache-write rates."""
        version = pricing.table_version()
        if self._price_cache is None or self._price_cache[0] != version:
            self._price_cache = (version, self.price)
        price = self._price_cache[1]
        if price is None:
            if not self._loopback:
                _warn_unknown_price(self.model_id)
            return 0.0
        return price.cost(tokens_in, tokens_out, batch=batch, tokens_cached=tokens_cached,
                          tokens_cache_written=tokens_cache_written, cached_factor=self.cached_input_factor)

    # -- session on the background loop -------------------------------------------

    async def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state_obj
        if state is not None and state.loop is loop and not state.session.closed:
            return state
        import aiohttp

        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": _ACCEPT_ENCODING,
        }
        headers.update(self._auth_headers(self._api_key.get()))
        if self._basic_auth:
            headers["Authorization"] = self._basic_auth.get()
        headers.update(self._extra_headers)
        connector = aiohttp.TCPConnector(limit=self.max_concurrency, ttl_dns_cache=300)
        session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            trust_env=not self._loopback,
            cookie_jar=aiohttp.DummyCookieJar(),  # an API client keeps no cookies
            auto_decompress=False,  # _read_body decodes, with its output bounded
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
        state = getattr(self, "_state_obj", None)  # None too on a half-built adapter
        if state is None or state.loop.is_closed() or not state.loop.is_running():
            return
        if state.loop is background_loop():
            run_sync(self._aclose())
        else:  # pragma: no cover - sessions only live on the background loop
            asyncio.run_coroutine_threadsafe(self._aclose(), state.loop).result()

    async def aclose(self) -> None:
        """The awaitable twin of :meth:`close`: close the HTTP session."""
        await on_background(self._aclose())

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
        """``text`` without the key, URL credentials (in any form) or anything shaped like a key."""
        return _scrub(text, getattr(self, "_scrubbed", _Secret(None)).get() or ())

    def _wait(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        return _retry_wait(exc, retry_state.attempt_number, initial_s=self.backoff_initial_s,
                           max_s=self.backoff_max_s, max_retry_after_s=self.max_retry_after_s, rng=self._random)

    async def _post(self, path: str, payload: Mapping[str, Any], *, timeout_s: float, tokens: int) -> tuple[Any, float]:
        """POST ``payload`` as JSON to ``base_url + path``; the decoded body and the attempt's latency (ms)."""
        try:
            data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"{self.adapter_id}: the request cannot be sent as JSON ({exc}); "
                "RunConfig.model_params values must be JSON-serialisable"
            ) from exc
        return await self._send("POST", path, data, timeout_s=timeout_s, tokens=tokens)

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        *,
        timeout_s: float,
        tokens: int = 0,
        headers: Mapping[str, str] | None = None,
        as_bytes: bool = False,
    ) -> tuple[Any, float]:
        """One request to ``base_url + path`` with the adapter's limits, retries and error translation.

        ``(the decoded JSON body, or the raw bytes when as_bytes=True; the attempt's latency in ms)``.
        ``headers`` are sent with this request only (e.g. a multipart ``Content-Type``); the Batch APIs
        (:mod:`._batches`) upload, poll and download through here.
        """
        import tenacity

        state = await self._state()
        url = self.base_url + path
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
                    return await self._attempt(state, url, data, timeout_s, tokens, method, headers, as_bytes)
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
        self, state: _LoopState, url: str, data: bytes | None, timeout_s: float, tokens: int,
        method: str = "POST", headers: Mapping[str, str] | None = None, as_bytes: bool = False,
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
            body, error = await self._exchange(state.session, url, data, timeout, timeout_s, method, headers, as_bytes)
            latency_ms = (time.perf_counter() - t0) * 1000.0
        if error is not None:
            # raised here, not where it was made: the frame that held the raw body and the response is gone
            raise error
        return body, latency_ms

    async def _exchange(
        self, session: aiohttp.ClientSession, url: str, data: bytes | None, timeout: aiohttp.ClientTimeout,
        timeout_s: float, method: str = "POST", headers: Mapping[str, str] | None = None, as_bytes: bool = False,
    ) -> tuple[Any, AdapterError | None]:
        """One POST: ``(the decoded JSON body, None)`` or ``(None, the error to raise)``; never raises an error.

        It returns its error instead of raising it, so that the caller raises
        from a frame that holds neither the raw body nor the aiohttp response
        (a provider may echo the key in either): a ``capture_locals``
        traceback, a debugger or an error tracker finds no trace of them.
        """
        import aiohttp

        shown = self._shown(url)
        cap = self.max_response_bytes
        try:
            async with session.request(method, url, data=data, timeout=timeout, headers=headers) as resp:
                status = resp.status
                if status >= 400:
                    try:
                        raw, more = await _read_body(resp, min(cap, _ERROR_BODY_MAX))
                    except _BodyError:
                        raw, more = b"", True
                    if more:
                        resp.close()  # the rest is not read: drop the connection rather than reuse it
                    return None, self._status_error(status, raw, resp.headers, shown)
                raw, more = await _read_body(resp, cap)
                if more:
                    resp.close()
                    return None, MalformedResponseError(
                        f"{self.adapter_id}: the reply from {shown} is larger than max_response_bytes={cap} "
                        f"({cap / 2**20:g} MiB after decoding) and was not read further; if replies this large "
                        "are expected, pass a larger max_response_bytes=... to the adapter",
                        status=status,
                        adapter_id=self.adapter_id,
                    )
        except TimeoutError as exc:
            return None, _with_cause(
                AdapterTimeoutError(
                    f"{self.adapter_id}: no reply from {shown} within {timeout_s:g}s; "
                    "raise timeout_s (or RunConfig.timeout_s) if the model is slow",
                    adapter_id=self.adapter_id,
                ),
                exc,
            )
        except aiohttp.ClientError as exc:
            return None, _with_cause(
                AdapterConnectionError(
                    f"{self.adapter_id}: could not talk to {shown}: "
                    f"{self._scrub(_truncate(f'{type(exc).__name__}: {exc}'))}; "
                    "check base_url and that the server is running and reachable",
                    adapter_id=self.adapter_id,
                ),
                exc,
            )
        except _BodyError as exc:
            return None, MalformedResponseError(
                f"{self.adapter_id}: HTTP {status} from {shown} but {exc}; check that base_url points at the API",
                status=status,
                adapter_id=self.adapter_id,
            )
        if as_bytes:
            return raw, None
        try:
            return json.loads(raw), None
        except ValueError as exc:  # not chained: a JSONDecodeError holds the whole body (.doc)
            reason = _truncate(str(exc), 120)
        return None, MalformedResponseError(
            f"{self.adapter_id}: HTTP {status} from {shown} but the body is not valid JSON ({reason}; truncated?): "
            f"{self._scrub(_truncate(raw.decode('utf-8', 'replace'), 200))!r}; "
            "check that base_url points at the API, then retry",
            status=status,
            adapter_id=self.adapter_id,
        )

    def _shown(self, url: str) -> str:
        """``url`` as messages show it: ``***@`` where ``base_url`` had credentials."""
        base = getattr(self, "base_url", "")
        display = getattr(self, "_display_url", base)
        if base and url.startswith(base):
            url = display + url[len(base) :]
        return redact_urls(url, mask="***")

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
                f"{head}. Not found: check base_url ({self._shown(self.base_url)}) and the model name "
                f"{self.model_id!r}",
                **kw,
            )
        return BadRequestError(f"{head}. The request was rejected (not retried): fix the model or parameters", **kw)

    def _malformed(self, what: str, body: Any) -> MalformedResponseError:
        shown = self._scrub(_truncate(json.dumps(body, default=str), 200))
        return MalformedResponseError(
            f"{self.adapter_id}: the reply from {self._shown(self.base_url)} has no {what}: {shown}; "
            "check that base_url speaks this API",
            adapter_id=self.adapter_id,
        )

    def __repr__(self) -> str:  # never raises, even on a half-built adapter (debuggers, capture_locals)
        return (
            f"{type(self).__name__}(model={getattr(self, 'model_id', None)!r}, "
            f"base_url={self._shown(getattr(self, 'base_url', ''))!r}, "
            f"api_key={getattr(self, '_api_key', _Secret(None))!r}, adapter_id={getattr(self, 'adapter_id', None)!r})"
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


def _replaying() -> bool:
    """Whether a reply session that never sends a request is active (pytest ``--llm-cache-mode=replay``):
    then an adapter needs no API key, so tests replay recorded replies in CI without one."""
    session = active_session()
    return session is not None and session.mode == "replay"


def estimate_tokens(*texts: str | None) -> int:
    """A rough token count (4 characters a token) for rate limiting when nothing better is known."""
    return sum(len(t) for t in texts if t) // 4 + 1


class ChatHTTPAdapter(HTTPAdapter):
    """An HTTP chat adapter: cache, budget, cost and the sync/async entry points.

    Subclasses set ``chat_path`` and implement :meth:`_payload` and :meth:`_read_reply`.

    Parameters
    ----------
    model : str
        The provider's model name.
    cache : ResponseCache or str or os.PathLike, optional
        The on-disk response cache (a path or a :class:`ResponseCache`).
    **kwargs
        :class:`HTTPAdapter`'s keyword arguments.
    """

    chat_path: ClassVar[str] = ""
    #: ``max_tokens`` sent when ``RunConfig.max_tokens`` is None (``None`` = send none)
    default_max_tokens: int | None = None

    def __init__(
        self, model: str, *, cache: ResponseCache | str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> None:
        with _ForgetOnError(kwargs):  # on failure, no key or URL credentials stay in this frame's locals
            super().__init__(model, **kwargs)
            self.cache = open_cache(cache)

    def _payload(self, prompt: str, run_config: RunConfig) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, body: Any) -> tuple[str, int, int, str | None, tuple[TokenLogprob, ...] | None]:
        """``(content, tokens_in, tokens_out, finish_reason, logprobs)`` from a reply body (else a malformed error)."""
        parsed = self._read_reply(body)
        if isinstance(parsed, AdapterError):
            body = None  # a traceback keeps this frame's locals, and a reply body may quote the key
            raise parsed
        return parsed

    def _read_reply(
        self, body: Any
    ) -> tuple[str, int, int, str | None, tuple[TokenLogprob, ...] | None] | MalformedResponseError:
        """What :meth:`_parse` returns, or the error to raise (returned, so no frame holding ``body`` raises it)."""
        raise NotImplementedError

    def _cache_usage(self, body: Any) -> tuple[int, int]:
        """``(prompt tokens read from the provider's prompt cache, prompt tokens written to it)`` from a reply
        body; ``(0, 0)`` when it says nothing (the default)."""
        return 0, 0

    def _response(
        self, body: Any, latency_ms: float, *, batch: bool = False, share: Callable[[float], float] | None = None
    ) -> LLMResponse:
        """The :class:`LLMResponse` of a reply body, with its prompt-cache usage priced at the cached rates.

        A provider that reports more cached tokens than prompt tokens is believed about the prompt tokens
        and the cached count is cut to them (logged), so the cost is never below the cached price.
        """
        try:
            content, tokens_in, tokens_out, finish_reason, logprobs = self._parse(body)
            read, written = self._cache_usage(body)
        except BaseException:
            body = None  # a traceback keeps this frame's locals, and a reply body may quote the key
            raise
        if read + written > tokens_in:
            logger.warning("%s: the reply reports %d cached + %d cache-written of %d prompt tokens; counting at "
                           "most the prompt tokens as cached", self.adapter_id, read, written, tokens_in)
            written = min(written, tokens_in)
            read = min(read, tokens_in - written)
        cost = self._cost(tokens_in, tokens_out, batch=batch, tokens_cached=read, tokens_cache_written=written)
        return LLMResponse(
            content=content,
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=share(cost) if share is not None else cost,
            latency_ms=latency_ms,
            logprobs=logprobs,
            finish_reason=finish_reason,
            raw=body,
            tokens_cached=read,
            tokens_cache_written=written,
        )

    @share_parameters(texts=ADAPTER_TEXTS)
    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One call, blocking; safe inside a running event loop (e.g. Jupyter).

        Parameters
        ----------
        {prompt}
        {run_config}

        Returns
        -------
        LLMResponse
            The reply, with its tokens, cost and latency.

        Raises
        ------
        AdapterError
            The call failed after its retries (a subclass says how: rate limit, timeout, authentication...).
        BudgetExceededError
            A budget in scope refused the call.
        """
        return run_sync(self._acomplete(prompt, run_config or RunConfig()))

    @share_parameters(texts=ADAPTER_TEXTS)
    async def acomplete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """One call, awaited from any event loop.

        Parameters
        ----------
        {prompt}
        {run_config}

        Returns
        -------
        LLMResponse
            What :meth:`complete` returns.
        """
        return await on_background(self._acomplete(prompt, run_config or RunConfig()))

    async def _acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        """One call through the shared path: cache, budget reservation, the request, settlement (see ``_call``)."""
        from ._call import DEFAULT_OUTPUT_TOKENS, acall_paid

        if not isinstance(prompt, str):
            raise ValidationError(f"prompt must be a str, got {type(prompt).__name__}")
        tokens_in_estimate = estimate_tokens(prompt, run_config.system_prompt)
        tokens_out_cap = run_config.max_tokens or self.default_max_tokens or DEFAULT_OUTPUT_TOKENS

        async def invoke() -> LLMResponse:
            payload = self._payload(prompt, run_config)
            body, latency_ms = await self._post(
                self.chat_path,
                payload,
                timeout_s=run_config.timeout_s or self.timeout_s,
                tokens=tokens_in_estimate + tokens_out_cap,
            )
            try:
                return self._response(body, latency_ms)
            except BaseException:
                body = None  # a traceback keeps this frame's locals, and a reply body may quote the key
                raise

        estimate_usd = self._cost(tokens_in_estimate, tokens_out_cap)
        from ._batches import active_collector

        call: Callable[[], Awaitable[Any]] = invoke
        collector = active_collector()
        if collector is not None:  # a run with batch=True: the reply comes through the provider's Batch API
            call, estimate_usd = await collector.route(self, prompt, run_config, invoke, estimate_usd)
        return await acall_paid(
            call,
            run_config,
            # the price of the estimated prompt plus the output cap (0.0 when the price is unknown)
            estimate_usd=estimate_usd,
            cache=self.cache,
            cache_key=lambda: cache_key(type(self).__qualname__, self.base_url, self.model_id, prompt, run_config),
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            request=prompt,
        )


def usage_int(usage: Any, *names: str) -> int:
    """The first non-negative int among ``usage[name]``; 0 when missing (not an error)."""
    if not isinstance(usage, Mapping):
        return 0
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0
