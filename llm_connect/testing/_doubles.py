"""The scripted test doubles: an LLM adapter and an embedder, no network, no model.

- :class:`ScriptedAdapter`: an :class:`~llm_connect.core.LLMAdapter` that
  returns canned replies (a list, or a function of the prompt) and keeps a
  call history.
- :class:`DeterministicEmbedder`: an :class:`~llm_connect.core.EmbeddingAdapter`
  that hashes words into a fixed-size vector, so texts sharing words are close.

They are real implementations of the protocols, not mocks: they go through the
same code paths as the HTTP and local adapters.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..adapters._call import call_paid
from ..core import LLMResponse, RunConfig
from ..errors import LLMConnectError

__all__ = ["Call", "DeterministicEmbedder", "ScriptedAdapter"]

Reply = str | LLMResponse | BaseException
ReplyFn = Callable[[str, RunConfig], Reply]


@dataclass(frozen=True)
class Call:
    """One recorded call to a :class:`ScriptedAdapter`.

    Parameters
    ----------
    prompt : str
        The prompt.
    run_config : RunConfig
        The run config of the call.
    """

    prompt: str
    run_config: RunConfig


class ScriptedAdapter:
    """An LLM adapter that plays back scripted replies.

    ``replies`` is a sequence (played in order; ``cycle=True`` repeats it) or a
    callable ``(prompt, run_config) -> reply``. A reply is a string, a ready
    :class:`LLMResponse` (its content and logprobs are used), or an exception
    instance, which is raised (to script faults). Tokens are counted as
    whitespace-separated words; cost is ``cost_per_call`` (USD, also the
    estimate reserved before the call). Each call takes the real adapters' one
    call path: the cost is reserved on the run config's budget tracker and the
    run budgets in scope before the call (refused once a budget is spent:
    the call is then neither made nor recorded) and settled after it (the
    reply is kept even when it takes the spend past the limit). ``calls``
    holds the history. ``is_local=True`` declares it in-process, as
    ``LlamaCppAdapter`` does (``LLMJudge`` then uses its local defaults).

    Parameters
    ----------
    replies : sequence or callable
        The replies (above).
    adapter_id : str, default "scripted"
        The adapter's id.
    model_id : str, default "scripted-model"
        The model's id.
    cycle : bool, default False
        Repeat the replies.
    cost_per_call : float, default 0.0
        USD per call.
    latency_s : float, default 0.0
        Seconds each call waits.
    is_local : bool, default False
        Declare it in-process.

    Raises
    ------
    LLMConnectError
        No replies.

    Examples
    --------
    >>> adapter = ScriptedAdapter(["yes", "no"])
    >>> [adapter.complete("Is it?").content for _ in range(2)], adapter.prompts
    (['yes', 'no'], ['Is it?', 'Is it?'])
    """

    def __init__(
        self,
        replies: Sequence[Reply] | ReplyFn,
        *,
        adapter_id: str = "scripted",
        model_id: str = "scripted-model",
        cycle: bool = False,
        cost_per_call: float = 0.0,
        latency_s: float = 0.0,
        is_local: bool = False,
    ) -> None:
        self.adapter_id = adapter_id
        self.is_local = bool(is_local)
        self.model_id = model_id
        self.cost_per_call = float(cost_per_call)
        self.latency_s = float(latency_s)
        self._fn: ReplyFn | None = replies if callable(replies) else None
        if self._fn is None:
            items = list(replies)  # type: ignore[arg-type]
            if not items:
                raise LLMConnectError("ScriptedAdapter needs at least one reply")
            self._replies: Iterator[Reply] = itertools.cycle(items) if cycle else iter(items)
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    @property
    def prompts(self) -> list[str]:
        return [c.prompt for c in self.calls]

    def _next(self, prompt: str, run_config: RunConfig) -> Reply:
        if self._fn is not None:
            return self._fn(prompt, run_config)
        with self._lock:
            try:
                return next(self._replies)
            except StopIteration:
                raise LLMConnectError(
                    f"ScriptedAdapter {self.adapter_id!r} ran out of replies after {len(self.calls)} calls; "
                    "give more replies or cycle=True"
                ) from None

    def complete(self, prompt: str, run_config: RunConfig | None = None) -> LLMResponse:
        """Play the next reply (or raise the next scripted fault), through the adapters' one call path.

        Parameters
        ----------
        prompt : str
            The prompt (recorded in :attr:`calls`).
        run_config : RunConfig, optional
            How the call is made (its budget tracker is charged).

        Returns
        -------
        LLMResponse
            The reply.

        Raises
        ------
        LLMConnectError
            The replies ran out (without ``cycle``).
        BudgetExceededError
            A budget in scope refused the call.
        """
        run_config = run_config or RunConfig()
        return call_paid(
            lambda: self._play(prompt, run_config),
            run_config,
            estimate_usd=self.cost_per_call,  # a scripted call's cost is known before it is made
            adapter_id=self.adapter_id,
            model_id=self.model_id,
        )

    def _play(self, prompt: str, run_config: RunConfig) -> LLMResponse:
        with self._lock:
            self.calls.append(Call(prompt, run_config))
        start = time.perf_counter()
        if self.latency_s:
            time.sleep(self.latency_s)
        reply = self._next(prompt, run_config)
        if isinstance(reply, BaseException):
            raise reply
        latency_ms = (time.perf_counter() - start) * 1000.0
        content = reply.content if isinstance(reply, LLMResponse) else str(reply)
        logprobs = reply.logprobs if isinstance(reply, LLMResponse) else None
        return LLMResponse(
            content=content,
            adapter_id=self.adapter_id,
            model_id=self.model_id,
            tokens_in=len(prompt.split()),
            tokens_out=len(content.split()),
            cost_usd=self.cost_per_call,
            latency_ms=latency_ms,
            logprobs=logprobs,
        )

    def __repr__(self) -> str:
        return f"ScriptedAdapter(adapter_id={self.adapter_id!r}, model_id={self.model_id!r}, calls={len(self.calls)})"


_WORD = re.compile(r"\w+", re.UNICODE)


class DeterministicEmbedder:
    """Hashes lower-cased words into ``dim`` signed buckets and L2-normalises.

    Texts that share words have a high cosine similarity; unrelated texts are
    near 0. The same text gives the same vector in every process. A text with
    no word characters embeds to the zero vector (which the embedding judge
    rejects, as it should).

    Parameters
    ----------
    dim : int, default 256
        The vectors' length.

    Examples
    --------
    >>> a, b = DeterministicEmbedder(dim=16).embed(["the cat sat", "the cat sat"])
    >>> a == b
    True
    """

    def __init__(self, dim: int = 256) -> None:
        if dim <= 0:
            raise LLMConnectError("DeterministicEmbedder dim must be positive")
        self.dim = dim
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            vec[bucket] += sign
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order.

        Parameters
        ----------
        texts : sequence of str
            The texts.

        Returns
        -------
        list of list of float
            The unit vectors (the zero vector for a text with no word).
        """
        texts = list(texts)
        with self._lock:
            self.calls.append(texts)
        return [self._vector(t) for t in texts]
