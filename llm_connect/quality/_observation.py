"""``QualityObservation`` and ``is_stale``: what one observation is, and the rules it obeys.

:meth:`QualityObservation.from_dict` is the one full reader of a record: the
ledger's fast paths (:mod:`._ledger_io`) accept only records it accepts, with
an equal result, and hand every other one to it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from numbers import Integral
from typing import Any

from ..errors import ValidationError

__all__ = ["TAGS_MAX_DEPTH", "QualityObservation", "as_utc", "has_lone_surrogate", "is_stale", "tags_depth",
           "utc_now"]

#: How deeply an observation's tags may nest: the tags object is level 1, an object or list inside it level 2,
#: and so on. Deeper tags are a ``ValidationError`` (they could be written but not read back: JSON readers and
#: writers recurse once per level), and a ledger line or row holding them is malformed.
TAGS_MAX_DEPTH = 32

_REQUIRED = (
    "task_type",
    "adapter_id",
    "model_id",
    "cost_usd",
    "quality_score",
    "latency_ms",
    "tokens_in",
    "tokens_out",
)


def as_utc(value: Any, name: str) -> datetime:
    """A datetime as an aware UTC datetime; a naive one is taken as UTC.

    Parameters
    ----------
    value : datetime
        The datetime.
    name : str
        What it is, for the error message.

    Returns
    -------
    datetime
        The same instant in UTC (``fold`` cleared).

    Raises
    ------
    TypeError
        When ``value`` is not a datetime.
    ValidationError
        When it has no UTC datetime (out of range once converted).
    """
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        out = value.replace(tzinfo=UTC)
    else:
        try:
            out = value.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00 has no UTC datetime
            raise ValidationError(f"{name} {value.isoformat()!r} is out of range once converted to UTC") from None
    # fold means nothing in UTC; clearing it makes an observation identical to its JSON round trip
    return out.replace(fold=0) if out.fold else out


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_error(where: str, text: str) -> ValidationError:
    found = _SURROGATE.search(text)
    assert found is not None
    return ValidationError(
        f"{where} holds a lone surrogate {found.group()!r} at index {found.start()} of {_short(text)}: "
        "it is not valid Unicode and cannot be written as UTF-8; fix the text where it was made "
        "(e.g. bytes decoded with errors='surrogateescape', or half of a UTF-16 pair)"
    )


def _find_surrogate(value: Any, where: str) -> tuple[str, str] | None:
    """``(where, text)`` of the first string (or key) in ``value`` holding a lone surrogate."""
    if isinstance(value, str):
        return (where, value) if _SURROGATE.search(value) else None
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and _SURROGATE.search(k):
                return f"a key of {where}", k
            found = _find_surrogate(v, f"{where}[{k!r}]")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _find_surrogate(v, f"{where}[{i}]")
            if found:
                return found
    return None


def tags_depth(value: Any, *, stop: int = TAGS_MAX_DEPTH + 1) -> int:
    """How many levels of objects (mappings) and lists a value nests, counted without recursion.

    Parameters
    ----------
    value : object
        A JSON-like value.
    stop : int, default TAGS_MAX_DEPTH + 1
        Stop counting at this depth, so a deep value costs no more than a shallow one.

    Returns
    -------
    int
        The depth: 0 for a scalar, 1 for a flat mapping or list; at most ``stop``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest >= stop:
                return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (Mapping, list, tuple)))
    return deepest


def _non_empty_str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
    if not value.isascii() and _SURROGATE.search(value):
        raise _surrogate_error(name, value)
    return value


def _as_float(name: str, value: Any, expected: str) -> float:
    """``value`` (an int or a float, never a bool) as a float; an int beyond float range is infinite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be {expected}, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _non_negative_float(name: str, value: Any) -> float:
    out = _as_float(name, value, "a number")
    if not math.isfinite(out) or out < 0:
        raise ValidationError(f"{name} must be a finite number >= 0, got {_short(value)}")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _non_negative_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValidationError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    out = int(value)
    if out < 0:
        raise ValidationError(f"{name} must be >= 0, got {value!r}")
    return out


def utc_now() -> datetime:
    """The current time as an aware UTC datetime (an observation's default ``recorded_at``).

    Returns
    -------
    datetime
        Now, in UTC.
    """
    return datetime.now(UTC)


@dataclass(frozen=True)
class QualityObservation:
    """One observed outcome: how good, how costly and how slow a call was for a task type.

    A frozen value, checked when made (and equal to its own JSON round trip); what a ledger holds, one per
    line or row. ``judge_many(..., ledger=...)`` records one per scored judgment,
    :func:`~llm_connect.frames.record_labels` one per human label, and :func:`~llm_connect.route` chooses a
    model from them.

    Parameters
    ----------
    task_type : str
        The task it was observed on (e.g. ``"qa"``); non-empty.
    adapter_id : str
        The adapter of the model observed (for a judgment, the candidate's); non-empty.
    model_id : str
        The model observed; non-empty.
    cost_usd : float
        What the call cost, in USD (finite, >= 0).
    quality_score : float
        How good the outcome was, in 0.0..1.0 (a judge's score or a person's label).
    latency_ms : float
        How long the call took, in milliseconds (finite, >= 0).
    tokens_in : int
        Prompt tokens (>= 0).
    tokens_out : int
        Generated tokens (>= 0).
    baseline_adapter_id : str, optional
        The adapter the candidate was compared with, when there was one.
    recorded_at : datetime, optional
        When it was observed (default: now). A naive datetime is UTC; kept in UTC.
    tags : dict, optional
        More about it (``grader_id``, ``item_id``, ``rubric_hash``, ``annotator``, ...): a dict of JSON
        values (string keys; no NaN or infinity), nested at most :data:`TAGS_MAX_DEPTH` (32) levels deep.

    Attributes
    ----------
    total_tokens : int
        ``tokens_in + tokens_out``.

    Raises
    ------
    ValidationError
        When a field is missing its kind or range (the message names it), a text holds a lone surrogate,
        or the tags are not JSON or nest deeper than :data:`TAGS_MAX_DEPTH`.
    TypeError
        When ``recorded_at`` is not a datetime.

    See Also
    --------
    llm_connect.QualityLedger : A JSON Lines file of observations.
    is_stale : Whether an observation is older than a maximum age.

    Examples
    --------
    >>> from datetime import datetime
    >>> seen = QualityObservation(task_type="qa", adapter_id="openai", model_id="gpt-4o-mini", cost_usd=0.002,
    ...                           quality_score=1.0, latency_ms=350.0, tokens_in=120, tokens_out=4,
    ...                           recorded_at=datetime(2025, 1, 31, 12, 0), tags={"grader_id": "llm-judge"})
    >>> seen.recorded_at.isoformat()
    '2025-01-31T12:00:00+00:00'
    >>> QualityObservation.from_dict(seen.to_dict()) == seen
    True
    """

    task_type: str
    adapter_id: str
    model_id: str
    cost_usd: float
    quality_score: float
    latency_ms: float
    tokens_in: int
    tokens_out: int
    baseline_adapter_id: str | None = None
    recorded_at: datetime = field(default_factory=utc_now)
    tags: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = object.__setattr__
        _non_empty_str("task_type", self.task_type)
        _non_empty_str("adapter_id", self.adapter_id)
        _non_empty_str("model_id", self.model_id)
        s(self, "cost_usd", _non_negative_float("cost_usd", self.cost_usd))
        s(self, "latency_ms", _non_negative_float("latency_ms", self.latency_ms))
        s(self, "tokens_in", _non_negative_int("tokens_in", self.tokens_in))
        s(self, "tokens_out", _non_negative_int("tokens_out", self.tokens_out))
        q = _as_float("quality_score", self.quality_score, "a number in 0.0..1.0")
        if not 0.0 <= q <= 1.0:  # also rejects NaN
            raise ValidationError(f"quality_score must be in 0.0..1.0, got {_short(self.quality_score)}")
        s(self, "quality_score", q)
        if self.baseline_adapter_id is not None:
            _non_empty_str("baseline_adapter_id", self.baseline_adapter_id)
        s(self, "recorded_at", as_utc(self.recorded_at, "recorded_at"))
        if not isinstance(self.tags, Mapping):
            raise ValidationError(f"tags must be a dict, got {type(self.tags).__name__}")
        if self.tags:
            if not all(isinstance(k, str) for k in self.tags):
                raise ValidationError("tags keys must be strings")
            if tags_depth(self.tags) > TAGS_MAX_DEPTH:
                raise ValidationError(
                    f"tags are nested more than TAGS_MAX_DEPTH = {TAGS_MAX_DEPTH} levels deep (the tags object is "
                    "level 1, each object or list inside adds one): flatten them, or store the deep part as one "
                    "JSON string"
                )
            try:
                text = json.dumps(dict(self.tags), allow_nan=False, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"tags must be JSON-serialisable (no NaN/inf): {exc}") from None
            if not text.isascii() and _SURROGATE.search(text):
                found = _find_surrogate(self.tags, "tags")
                raise _surrogate_error(*found) if found else ValidationError("tags hold a lone surrogate")
            # Store the JSON form, so an observation equals its own round trip.
            s(self, "tags", json.loads(text))
        elif not isinstance(self.tags, dict):
            s(self, "tags", {})

    @property
    def total_tokens(self) -> int:
        """``tokens_in + tokens_out``."""
        return self.tokens_in + self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        """The observation as a JSON-serialisable dict, as a ledger line holds it.

        Returns
        -------
        dict
            Every field; ``recorded_at`` as ISO-8601 with its UTC offset.
        """
        return {
            "task_type": self.task_type,
            "adapter_id": self.adapter_id,
            "model_id": self.model_id,
            "cost_usd": self.cost_usd,
            "quality_score": self.quality_score,
            "latency_ms": self.latency_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "baseline_adapter_id": self.baseline_adapter_id,
            "recorded_at": self.recorded_at.isoformat(),
            "tags": dict(self.tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityObservation:
        """An observation from :meth:`to_dict` output (a ledger line); the one full reader of a record.

        Parameters
        ----------
        data : mapping
            The record. Unknown keys are ignored (later versions may add fields); ``tags`` may be missing
            or null (no tags).

        Returns
        -------
        QualityObservation
            The observation, checked as a new one is.

        Raises
        ------
        ValidationError
            When ``data`` is not a mapping, a field is missing or invalid, or ``recorded_at`` (required) is
            not an ISO-8601 datetime.
        TypeError
            When ``recorded_at`` is neither a string nor a datetime.
        """
        if not isinstance(data, Mapping):
            raise ValidationError(f"an observation must be a JSON object, got {type(data).__name__}")
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise ValidationError(f"observation is missing field(s): {', '.join(missing)}")
        if "recorded_at" not in data:
            raise ValidationError("observation is missing field: recorded_at")
        raw_ts = data["recorded_at"]
        if isinstance(raw_ts, datetime):
            recorded_at = raw_ts
        elif isinstance(raw_ts, str):
            try:
                recorded_at = datetime.fromisoformat(raw_ts)
            except ValueError:
                raise ValidationError(f"recorded_at is not an ISO-8601 datetime: {raw_ts[:60]!r}") from None
        else:
            raise TypeError(f"recorded_at must be an ISO-8601 string, got {type(raw_ts).__name__}")
        tags = data.get("tags", {})
        if tags is None:
            tags = {}
        return cls(
            task_type=data["task_type"],
            adapter_id=data["adapter_id"],
            model_id=data["model_id"],
            cost_usd=data["cost_usd"],
            quality_score=data["quality_score"],
            latency_ms=data["latency_ms"],
            tokens_in=data["tokens_in"],
            tokens_out=data["tokens_out"],
            baseline_adapter_id=data.get("baseline_adapter_id"),
            recorded_at=recorded_at,
            tags=tags,
        )


def is_stale(observation: QualityObservation, max_age: timedelta, *, now: datetime | None = None) -> bool:
    """Whether an observation is older than a maximum age: ``now - observation.recorded_at > max_age``.

    Parameters
    ----------
    observation : QualityObservation
        The observation.
    max_age : timedelta
        The oldest an observation may be and still count (>= 0).
    now : datetime, optional
        The time to measure from (default: now); a naive one is UTC.

    Returns
    -------
    bool
        Whether it is strictly older than ``max_age``.

    Raises
    ------
    TypeError
        When ``max_age`` is not a timedelta (or ``now`` not a datetime).
    ValidationError
        When ``max_age`` is negative.

    See Also
    --------
    llm_connect.QualityLedger.mean_quality : Leaves stale observations out with ``max_age=``.

    Examples
    --------
    >>> from datetime import datetime, timedelta
    >>> seen = QualityObservation(task_type="qa", adapter_id="openai", model_id="gpt-4o-mini", cost_usd=0.0,
    ...                           quality_score=1.0, latency_ms=0.0, tokens_in=0, tokens_out=0,
    ...                           recorded_at=datetime(2025, 1, 1))
    >>> is_stale(seen, timedelta(days=30), now=datetime(2025, 1, 31))
    False
    >>> is_stale(seen, timedelta(days=30), now=datetime(2025, 2, 1))
    True
    """
    if not isinstance(max_age, timedelta):
        raise TypeError(f"max_age must be a timedelta, got {type(max_age).__name__}")
    if max_age < timedelta(0):
        raise ValidationError(f"max_age must be >= 0, got {max_age!r}")
    current = utc_now() if now is None else as_utc(now, "now")
    return current - observation.recorded_at > max_age


def has_lone_surrogate(o: QualityObservation) -> bool:
    """Whether a string of an observation (ids, tag keys and values) holds a lone surrogate.

    Only a JSON ``\\u`` escape can put one in a parsed line (strict UTF-8 refuses the raw bytes); the
    ledger's fast path, which skips ``__post_init__``, asks this.

    Parameters
    ----------
    o : QualityObservation
        The observation.

    Returns
    -------
    bool
        Whether one of its strings holds a lone surrogate.
    """
    for text in (o.task_type, o.adapter_id, o.model_id, o.baseline_adapter_id):
        if text is not None and not text.isascii() and _SURROGATE.search(text):
            return True
    return bool(o.tags) and _find_surrogate(o.tags, "tags") is not None
