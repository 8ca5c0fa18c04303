"""When to try a request again: which errors are retried, and how long to wait (a server's ``Retry-After``,
honoured up to a cap, else exponential backoff with jitter). :class:`~llm_connect.adapters.HTTPAdapter` retries
through these.
"""

from __future__ import annotations

import email.utils
import random
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import AdapterConnectionError, AdapterTimeoutError, RateLimitError, ServerError

__all__ = ["parse_retry_after"]

#: the errors a request is retried on (429, 5xx, timeouts, connection errors); other 4xx are not retried
_RETRYABLE = (RateLimitError, ServerError, AdapterTimeoutError, AdapterConnectionError)


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date; a date in the
    past gives 0.0. Anything unreadable gives ``None``.

    Parameters
    ----------
    headers : mapping of str to str
        The reply's headers.
    now : datetime, optional
        The time a date is read against (default: now).

    Returns
    -------
    float or None
        The seconds.

    Examples
    --------
    >>> parse_retry_after({"Retry-After": "2"}), parse_retry_after({"retry-after-ms": "1500"})
    (2.0, 1.5)
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


def _backoff(attempt: int, initial_s: float, max_s: float, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (from 1): exponential from ``initial_s``, capped at ``max_s``, its
    second half drawn at random (jitter)."""
    delay = min(max_s, initial_s * (2 ** (attempt - 1)))
    return delay / 2 + rng.uniform(0, delay / 2)


def _retry_wait(exc: Any, attempt: int, *, initial_s: float, max_s: float, max_retry_after_s: float,
                rng: random.Random) -> float:
    """Seconds to wait after ``exc`` failed attempt ``attempt``: the server's ``Retry-After`` (``exc.retry_after``)
    up to ``max_retry_after_s``, with a little jitter on top so many callers told "1 s" do not all come back at
    once; else :func:`_backoff`."""
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        wait = min(float(retry_after), max_retry_after_s)
        return wait + rng.uniform(0, min(1.0, 0.1 * wait))
    return _backoff(attempt, initial_s, max_s, rng)
