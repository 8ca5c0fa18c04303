"""The built-in adapters, embedders and judges, as factories the registry loads by name.

Declared twice, in the same words: as entry points in ``pyproject.toml`` (groups ``llm_connect.adapters``,
``llm_connect.embedders``, ``llm_connect.judges``) and in :data:`~llm_connect.plugins._registry.BUILTINS`, so
they are found from a source tree too. Each factory imports what it builds when called: importing this module
imports neither the adapters' clients nor a model runtime.

An adapter or embedder factory takes the text after the spec's colon as its first argument (``openai:gpt-4o``
-> ``openai_adapter("gpt-4o")``); a judge factory takes keyword options only. The shared options
(``base_url``, ``cache``; for judges also ``llm``, ``embedder``, ``seed``, ``rubric``, ``normalizer``,
``reference_sep``) reach a factory only when its signature names them.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

from ..errors import ConfigError

__all__ = [
    "anthropic_adapter",
    "contains_judge",
    "embedding_judge",
    "exact_judge",
    "llm_judge",
    "local_adapter",
    "local_embedder",
    "openai_adapter",
    "openai_embedder",
    "token_f1_judge",
    "trajectory_strict_judge",
    "trajectory_subset_judge",
    "trajectory_superset_judge",
    "trajectory_unordered_judge",
]

def _make(cls: Any, *args: Any, **options: Any) -> Any:
    """``cls(*args, **options)``, an option it does not take a :class:`ConfigError` listing those it does."""
    try:
        inspect.signature(cls).bind(*args, **options)
    except TypeError as exc:
        takes = [n for n, p in inspect.signature(cls).parameters.items()
                 if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)][len(args):]
        raise ConfigError(f"{cls.__name__}: {exc}; it takes {', '.join(takes)}") from None
    return cls(*args, **options)


# -- LLM adapters -------------------------------------------------------------------------------------------


def local_adapter(path: str | os.PathLike[str] | None = None, *, cache: Any = None) -> Any:
    """``local`` / ``local:PATH``: the embedded LLM (SmolLM2-135M-Instruct) or another GGUF file, in-process,
    on llama.cpp when it is installed, else on transformers (see :func:`llm_connect.adapters.local_adapter`)."""
    from ..adapters import local_adapter as make

    return make(path, cache=cache)


def openai_adapter(model: str, *, base_url: str | None = None, cache: Any = None, **options: Any) -> Any:
    """``openai:MODEL``: any OpenAI-compatible chat endpoint (``base_url``, else ``$OPENAI_BASE_URL``, else
    OpenAI's; the key from ``$OPENAI_API_KEY``)."""
    from ..adapters import OpenAICompatibleAdapter

    return OpenAICompatibleAdapter(model, base_url=base_url, cache=cache, **options)


def anthropic_adapter(model: str, *, base_url: str | None = None, cache: Any = None, **options: Any) -> Any:
    """``anthropic:MODEL``: Anthropic's Messages API (``base_url``, else ``$ANTHROPIC_BASE_URL``, else
    Anthropic's; the key from ``$ANTHROPIC_API_KEY``)."""
    from ..adapters import AnthropicAdapter

    return AnthropicAdapter(model, base_url=base_url, cache=cache, **options)


# -- embedders --------------------------------------------------------------------------------------------------


def local_embedder(path: str | None = None, **options: Any) -> Any:
    """``local`` / ``local:PATH``: sentence-transformers in-process (all-MiniLM-L6-v2 by default)."""
    from ..adapters import SentenceTransformerEmbedder

    return _make(SentenceTransformerEmbedder, path, **options)


def openai_embedder(model: str, *, base_url: str | None = None, cache: Any = None, **options: Any) -> Any:
    """``openai:MODEL``: any OpenAI-compatible ``/embeddings`` endpoint (key from ``$OPENAI_API_KEY``)."""
    from ..adapters import OpenAICompatibleEmbedder

    return OpenAICompatibleEmbedder(model, base_url=base_url, cache=cache, **options)


# -- judges -----------------------------------------------------------------------------------------------------


def exact_judge(*, normalizer: Any = None, reference_sep: str | None = None, **options: Any) -> Any:
    """``exact`` (grader id ``exact-match``): 1.0 when the answer equals a reference."""
    from ..grading import ExactMatchJudge

    return _make(ExactMatchJudge, normalizer=normalizer, reference_sep=reference_sep, **options)


def contains_judge(*, normalizer: Any = "squad", reference_sep: str | None = None, **options: Any) -> Any:
    """``contains``: 1.0 when a reference, normalised (SQuAD's rule by default), occurs as whole words."""
    from ..grading import ContainsJudge

    return _make(ContainsJudge, normalizer=normalizer, reference_sep=reference_sep, **options)


def token_f1_judge(*, normalizer: Any = "squad", reference_sep: str | None = None, **options: Any) -> Any:
    """``token-f1``: SQuAD token F1 with the best reference."""
    from ..grading import TokenF1Judge

    return _make(TokenF1Judge, normalizer=normalizer, reference_sep=reference_sep, **options)


def embedding_judge(*, embedder: Any, reference_sep: str | None = None, **options: Any) -> Any:
    """``embedding`` (grader id ``embedding-similarity``): cosine similarity of the embeddings; ``embedder`` is
    an embedder or an embedder spec (``local``, ``openai:MODEL``)."""
    from ..grading import EmbeddingSimilarityJudge

    return _make(EmbeddingSimilarityJudge, embedder, reference_sep=reference_sep, **options)


def llm_judge(*, llm: Any, seed: int | None = None, rubric: Any = None, **options: Any) -> Any:
    """``llm`` (grader id ``llm-judge``): an LLM grading with a rubric; ``llm`` is an adapter or an adapter spec
    (``local``, ``openai:MODEL``, ``anthropic:MODEL``)."""
    from ..grading import LLMJudge

    return _make(LLMJudge, llm, seed=seed, rubric=rubric, **options)


def _trajectory(mode: str, options: dict[str, Any]) -> Any:
    from ..grading import TrajectoryMatchJudge

    return _make(TrajectoryMatchJudge, mode, **options)


def trajectory_strict_judge(**options: Any) -> Any:
    """``trajectory-strict``: the same messages by role in the same order, each with the same tool calls."""
    return _trajectory("strict", options)


def trajectory_unordered_judge(**options: Any) -> Any:
    """``trajectory-unordered``: the same tool calls, in any order."""
    return _trajectory("unordered", options)


def trajectory_subset_judge(**options: Any) -> Any:
    """``trajectory-subset``: every candidate call is in the reference."""
    return _trajectory("subset", options)


def trajectory_superset_judge(**options: Any) -> Any:
    """``trajectory-superset``: every reference call is in the candidate."""
    return _trajectory("superset", options)
