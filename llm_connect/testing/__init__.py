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

For testing your own LLM features:

- :func:`assert_quality`: pass when a confidence interval for the mean score
  clears a threshold, fail when it lies below (:class:`~llm_connect.errors.QualityNotMet`),
  and otherwise say how many more items would settle it
  (:class:`~llm_connect.errors.QualityInconclusive`); each check is a :class:`QualityCheck`.
- :func:`pad_with_filler`, :func:`to_markdown`, :func:`plant_injection`: metamorphic tests of a
  judge, each changing one thing about an answer and keeping its correctness (longer, in
  markdown, with an instruction to the grader); the bias probes of
  :func:`~llm_connect.calibration.run_probes` apply them.
- :mod:`llm_connect.testing.pytest_plugin`: the pytest plugin (entry point
  ``llm_connect``): ``@pytest.mark.llm_repeat``, ``--llm-cache DIR``, the
  "llm_connect quality" summary.

``import llm_connect.testing`` stays light (pytest imports it at startup, for the
plugin, in every project that installs the package): the doubles' module, and
with it the adapters, is imported on first use of one of them, the loopback
server's module on first use of :class:`LoopbackServer` (and aiohttp only when a
server starts).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ..errors import QualityInconclusive, QualityNotMet
from ._assertions import QualityCheck, QualityInconclusiveWarning, assert_quality
from ._perturb import DEFAULT_INJECTION, pad_with_filler, plant_injection, to_markdown

if _TYPE_CHECKING:
    from ._doubles import Call, DeterministicEmbedder, ScriptedAdapter
    from .loopback import LoopbackServer

__all__ = [
    "DEFAULT_INJECTION",
    "Call",
    "DeterministicEmbedder",
    "LoopbackServer",
    "QualityCheck",
    "QualityInconclusive",
    "QualityInconclusiveWarning",
    "QualityNotMet",
    "ScriptedAdapter",
    "assert_quality",
    "pad_with_filler",
    "plant_injection",
    "to_markdown",
]

_LAZY = {"LoopbackServer": "loopback", "Call": "_doubles", "DeterministicEmbedder": "_doubles",
         "ScriptedAdapter": "_doubles"}


def __getattr__(name: str) -> _Any:
    """Import the doubles' and the loopback server's modules on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
