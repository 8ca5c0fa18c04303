"""Test doubles shipped with the package, for tests, docs, notebooks and benchmarks.

- :class:`ScriptedAdapter`: an :class:`~llm_connect.core.LLMAdapter` that
  returns canned replies (a list, or a function of the prompt) and keeps a
  call history (each call a :class:`Call`).
- :class:`DeterministicEmbedder`: an :class:`~llm_connect.core.EmbeddingAdapter`
  that hashes words into a fixed-size vector, so texts sharing words are close.
- :class:`LoopbackServer`: a real HTTP server on 127.0.0.1 speaking the OpenAI
  and Anthropic APIs, with scripted faults (:mod:`llm_connect.testing.loopback`;
  also ``python -m llm_connect.testing.loopback``).

They are real implementations of the protocols, not mocks: they go through the
same code paths as the HTTP and local adapters.

``import llm_connect.testing`` stays light: the loopback server's module is
imported on first use of :class:`LoopbackServer` (and aiohttp only when a
server starts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._doubles import Call, DeterministicEmbedder, ScriptedAdapter

if TYPE_CHECKING:
    from .loopback import LoopbackServer

__all__ = ["Call", "DeterministicEmbedder", "LoopbackServer", "ScriptedAdapter"]

_LAZY = {"LoopbackServer": "loopback"}


def __getattr__(name: str) -> Any:
    """Import the loopback server's module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
