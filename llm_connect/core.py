"""Core value types and the adapter protocols. No I/O happens here."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from .errors import BudgetExceededError, ValidationError

__all__ = [
    "AsyncEmbeddingAdapter",
    "AsyncLLMAdapter",
    "BudgetTracker",
    "EmbeddingAdapter",
    "LLMAdapter",
    "LLMResponse",
    "RunConfig",
    "TokenLogprob",
]


def _check_non_negative(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number, got {type(value).__name__}")
    if math.isnan(value) or value < 0:
        raise ValidationError(f"{name} must be >= 0, got {value!r}")


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class LLMResponse:
    """What one adapter call returned, with its usage.

    The first seven fields are pinned by the design; the rest are optional extras.
    """

    content: str
    adapter_id: str
    model_id: str
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    # extras
    logprobs: tuple[TokenLogprob, ...] | None = None
    cached: bool = False
    finish_reason: str | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise ValidationError(f"LLMResponse.content must be a str, got {type(self.content).__name__}")
        for name in ("tokens_in", "tokens_out", "cost_usd", "latency_ms"):
            _check_non_negative(f"LLMResponse.{name}", getattr(self, name))

    @property
    def total_tokens(self) -> int:
        return self.tokens_in + self.tokens_out


class BudgetTracker:
    """A thread-safe running total of spend against an optional limit.

    ``charge()`` adds the cost, then raises :class:`BudgetExceededError` if
    ``spent_usd > limit_usd``. ``check()`` refuses a new call once the budget is
    spent (``spent_usd >= limit_usd``). ``limit_usd=None`` never refuses.
    """

    def __init__(self, limit_usd: float | None = None) -> None:
        if limit_usd is not None:
            _check_non_negative("limit_usd", limit_usd)
        self.limit_usd = None if limit_usd is None else float(limit_usd)
        self._spent = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent

    @property
    def calls(self) -> int:
        """How many charges were recorded."""
        with self._lock:
            return self._calls

    @property
    def remaining_usd(self) -> float | None:
        if self.limit_usd is None:
            return None
        with self._lock:
            return max(0.0, self.limit_usd - self._spent)

    @property
    def exhausted(self) -> bool:
        if self.limit_usd is None:
            return False
        with self._lock:
            return self._spent >= self.limit_usd

    def charge(self, cost_usd: float) -> None:
        _check_non_negative("cost_usd", cost_usd)
        with self._lock:
            self._spent += float(cost_usd)
            self._calls += 1
            spent = self._spent
        if self.limit_usd is not None and spent > self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` if no further call may be made."""
        if self.limit_usd is None:
            return
        spent = self.spent_usd
        if spent >= self.limit_usd:
            raise BudgetExceededError(spent, self.limit_usd)

    def __repr__(self) -> str:
        return f"BudgetTracker(limit_usd={self.limit_usd!r}, spent_usd={self.spent_usd:.6f})"


@dataclass(frozen=True)
class RunConfig:
    """How one call is made. The first four fields are pinned; the rest are extras."""

    temperature: float = 0.0
    max_tokens: int | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)  # seed, top_p, ...
    budget_tracker: BudgetTracker | None = None
    # extras
    timeout_s: float | None = None
    system_prompt: str | None = None
    json_output: bool = False
    top_logprobs: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValidationError("RunConfig.temperature must be a number")
        if math.isnan(self.temperature) or self.temperature < 0:
            raise ValidationError(f"RunConfig.temperature must be >= 0, got {self.temperature!r}")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens <= 0
        ):
            raise ValidationError(f"RunConfig.max_tokens must be a positive int or None, got {self.max_tokens!r}")
        if not isinstance(self.model_params, Mapping):
            raise ValidationError("RunConfig.model_params must be a mapping (e.g. {'seed': 0})")
        if self.timeout_s is not None and not (self.timeout_s > 0):
            raise ValidationError(f"RunConfig.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.top_logprobs is not None and not (0 <= self.top_logprobs <= 20):
            raise ValidationError("RunConfig.top_logprobs must be between 0 and 20")

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)


@runtime_checkable
class LLMAdapter(Protocol):
    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...


@runtime_checkable
class AsyncLLMAdapter(Protocol):
    """An adapter that can also be awaited (the batch runtime prefers it)."""

    adapter_id: str
    model_id: str

    def complete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...

    async def acomplete(self, prompt: str, run_config: RunConfig) -> LLMResponse: ...


@runtime_checkable
class EmbeddingAdapter(Protocol):
    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


@runtime_checkable
class AsyncEmbeddingAdapter(Protocol):
    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...

    async def aembed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...
