"""No secret survives: an API key or URL credentials held so that no ``repr``, pickle, message or traceback shows
them (:class:`_Secret`, :func:`_scrub`, :class:`_ForgetOnError`, :func:`_with_cause`), and credentials in a URL
split off to be sent as HTTP basic auth (:func:`_split_credentials`). Every HTTP adapter
(:mod:`llm_connect.adapters._http`) holds its key and credentials through these.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from .._textsafe import redact_urls
from ..errors import AdapterError

#: shapes of a secret in a text: an OpenAI-style key, a bearer token, basic credentials, an ``x-api-key`` header
_KEY_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)(bearer\s+)[^\s\"',]+"),
    # HTTP basic credentials: base64 with a digit, "+", "/" or "=" in it (so "Basic authentication" stays)
    re.compile(r"(?i)(?<![a-z])(basic\s+)(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"),
    re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)[^\s\"',]+"),
)
#: a secret shorter than this is not scrubbed from messages (it would mangle them and protects nothing)
_MIN_SCRUBBED = 3


class _Secret:
    """Holds an API key (or other credentials); its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value or None

    def get(self) -> Any:
        return self._value

    def __bool__(self) -> bool:
        return self._value is not None

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickle a key into a cache, a ledger or a worker
        raise TypeError("an API key is not picklable")


def _split_credentials(url: str) -> tuple[str, str | None, str | None, tuple[str, ...]]:
    """``(url without user:password@, user, password, every form of the secret to scrub from text)``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None, ()
    userinfo, _, hostport = parts.netloc.rpartition("@")
    stripped = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    if not userinfo:  # "http://@host": no credentials at all
        return stripped, None, None, ()
    raw_user, has_password, raw_password = userinfo.partition(":")
    user, password = unquote(raw_user), unquote(raw_password) if has_password else ""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    forms = (raw_password, password, token) if has_password else (token,)
    return stripped, user, password, tuple(f for f in forms if len(f) >= _MIN_SCRUBBED)


def _with_cause(error: AdapterError, cause: BaseException) -> AdapterError:
    """``error`` with ``cause`` as its ``__cause__``, every traceback in the cause's chain cleared.

    A chained exception keeps its frames alive, and aiohttp's frames hold the
    request's headers (the API key) and whatever body was read: ``raise ... from
    exc`` as such would show them to a ``capture_locals`` traceback, a debugger
    or an error tracker. The cause's type and message are what a reader needs.
    A cause that carries the request itself (``request_info``, with its
    headers) is not chained at all.
    """
    chain: list[BaseException] = []
    todo: list[BaseException | None] = [cause]
    while todo:
        exc = todo.pop()
        if exc is None or any(exc is seen for seen in chain):
            continue
        chain.append(exc)
        todo += [exc.__cause__, exc.__context__]
    if any(getattr(exc, "request_info", None) is not None for exc in chain):
        return error
    for exc in chain:
        exc.__traceback__ = None
    error.__cause__ = cause
    return error


class _ForgetOnError:
    """``with _ForgetOnError(kwargs):`` empties ``kwargs`` when the block raises.

    A traceback keeps every frame's locals; a constructor's ``**kwargs`` hold the
    API key and ``base_url``, so a failed constructor must not leave them there.
    """

    __slots__ = ("_kwargs",)

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._kwargs = kwargs

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self._kwargs.clear()


def _scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without ``secrets`` (each replaced by ``***``), the ``user:password@`` of any URL, or anything
    shaped like a key (:data:`_KEY_PATTERNS`)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    text = redact_urls(text, mask="***")
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
    return text
