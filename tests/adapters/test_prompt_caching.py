"""Prompt caching: cached input tokens reported by the providers (and the loopback server that mimics them),
recorded on every response and result, and priced at the cached rate."""

from __future__ import annotations

import json
import urllib.request

import pytest

from llm_connect import LLMJudge, LLMResponse, QualityLedger, RunConfig, judge_many
from llm_connect.adapters import AnthropicAdapter, OpenAICompatibleAdapter
from llm_connect.adapters.pricing import (
    ANTHROPIC_CACHE_READ_FACTOR,
    ANTHROPIC_CACHE_WRITE_FACTOR,
    CACHED_INPUT_FACTOR,
    Price,
)
from llm_connect.core import BudgetTracker
from llm_connect.errors import ValidationError
from llm_connect.testing import LoopbackServer

PRICE = Price(2.0, 8.0)  # USD per million: input, output; cached at the provider's default factor
PRICES = {"judge-model": PRICE}


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def post(server: LoopbackServer, path: str, body: dict) -> dict:
    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def chat(server: LoopbackServer, text: str, model: str = "m") -> dict:
    return post(server, "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": text}]})


# -- the loopback server's caches ----------------------------------------------------------------------


def test_loopback_caches_the_shared_prefix_in_128_token_steps_as_openai_does():
    with LoopbackServer() as server:
        first = chat(server, words(1500) + " first ending")["usage"]
        second = chat(server, words(1500) + " second ending")["usage"]
        other_model = chat(server, words(1500) + " third ending", model="other")["usage"]
    assert first["prompt_tokens"] == second["prompt_tokens"] == 1502
    assert first["prompt_tokens_details"]["cached_tokens"] == 0  # nothing was cached before
    # 1500 shared words: the longest multiple of 128 inside them
    assert second["prompt_tokens_details"]["cached_tokens"] == 1500 // 128 * 128 == 1408
    assert other_model["prompt_tokens_details"]["cached_tokens"] == 0  # a cache per model


def test_loopback_caches_nothing_below_1024_tokens_or_when_turned_off():
    with LoopbackServer() as server:
        chat(server, words(1000) + " a")
        short = chat(server, words(1000) + " b")["usage"]
        chat(server, words(1100, "x") + " a")
        just_over = chat(server, words(1100, "x") + " b")["usage"]
    assert short["prompt_tokens_details"]["cached_tokens"] == 0
    assert just_over["prompt_tokens_details"]["cached_tokens"] == 1024
    with LoopbackServer(prompt_cache=False) as server:
        chat(server, words(1500) + " a")
        off = chat(server, words(1500) + " b")["usage"]
    assert off["prompt_tokens"] == 1501 and off["prompt_tokens_details"]["cached_tokens"] == 0


def test_loopback_reset_empties_the_prompt_cache():
    with LoopbackServer() as server:
        chat(server, words(1500) + " a")
        server.reset()
        again = chat(server, words(1500) + " b")["usage"]
    assert again["prompt_tokens_details"]["cached_tokens"] == 0


# -- the OpenAI adapter ----------------------------------------------------------------------------------


def test_openai_adapter_records_cached_tokens_and_prices_them_at_the_cached_rate():
    with LoopbackServer() as server:
        adapter = OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES)
        first = adapter.complete(words(1500) + " first")
        second = adapter.complete(words(1500) + " second")
    assert first.tokens_cached == 0 and second.tokens_cached == 1408
    assert second.tokens_in == 1501
    expected = ((1501 - 1408) * 2.0 + 1408 * 2.0 * CACHED_INPUT_FACTOR + second.tokens_out * 8.0) / 1e6
    assert second.cost_usd == pytest.approx(expected)
    assert first.cost_usd == pytest.approx((1501 * 2.0 + first.tokens_out * 8.0) / 1e6)


def test_a_models_own_cached_rate_wins_over_the_default_factor():
    with LoopbackServer() as server:
        adapter = OpenAICompatibleAdapter("judge-model", base_url=server.base_url,
                                          prices={"judge-model": Price(2.0, 8.0, cached_input_per_million=0.5)})
        adapter.complete(words(1500) + " first")
        second = adapter.complete(words(1500) + " second")
    assert second.cost_usd == pytest.approx(((1501 - 1408) * 2.0 + 1408 * 0.5 + second.tokens_out * 8.0) / 1e6)


def test_a_budget_is_charged_the_cached_price():
    tracker = BudgetTracker(limit_usd=1.0)
    with LoopbackServer() as server:
        adapter = OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES)
        replies = [adapter.complete(words(1500) + f" ending {k}", RunConfig(budget_tracker=tracker)) for k in range(3)]
    assert [r.tokens_cached for r in replies] == [0, 1408, 1408]
    assert tracker.spent_usd == pytest.approx(sum(r.cost_usd for r in replies))
    full = sum(PRICE.cost(r.tokens_in, r.tokens_out) for r in replies)
    assert tracker.spent_usd < full - 2 * 1408 * 2.0 * (1 - CACHED_INPUT_FACTOR) / 1e6 + 1e-12


# -- the Anthropic adapter -------------------------------------------------------------------------------


def test_anthropic_request_marks_the_stable_block_with_cache_control_and_prices_reads_and_writes():
    stable = words(1500) + "\n"
    with LoopbackServer() as server:
        adapter = AnthropicAdapter("judge-model", base_url=server.anthropic_base_url, prices=PRICES)
        config = RunConfig(stable_prefix_chars=len(stable))
        first = adapter.complete(stable + "reply one", config)
        second = adapter.complete(stable + "reply two", config)
        sent = [r.body for r in server.requests]
    content = sent[0]["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "reply one"},
    ]
    # the first call writes the stable prefix, the second reads it; tokens_in counts every prompt token
    assert (first.tokens_in, first.tokens_cached, first.tokens_cache_written) == (1502, 0, 1500)
    assert (second.tokens_in, second.tokens_cached, second.tokens_cache_written) == (1502, 1500, 0)
    assert first.cost_usd == pytest.approx(
        (2 * 2.0 + 1500 * 2.0 * ANTHROPIC_CACHE_WRITE_FACTOR + first.tokens_out * 8.0) / 1e6)
    assert second.cost_usd == pytest.approx(
        (2 * 2.0 + 1500 * 2.0 * ANTHROPIC_CACHE_READ_FACTOR + second.tokens_out * 8.0) / 1e6)


def test_anthropic_reads_the_previous_turns_prefix_at_an_earlier_block_boundary():
    """Turn k+1's stable part extends turn k's: with the turns' ends as offsets, turn k's cached prefix is found."""
    head = words(1100, "i") + "\n"
    turns = [words(50, f"t{k}_") + "\n" for k in range(3)]
    with LoopbackServer() as server:
        adapter = AnthropicAdapter("judge-model", base_url=server.anthropic_base_url, prices=PRICES)
        replies = []
        for k in range(1, 4):
            stable = head + "".join(turns[:k])
            offsets = [len(head)] + [len(head + "".join(turns[:j])) for j in range(1, k + 1)]
            replies.append(adapter.complete(stable + f"judged reply {k}", RunConfig(stable_prefix_chars=offsets)))
        last = server.requests[-1].body["messages"][0]["content"]
    assert [b.get("cache_control") for b in last] == [None, None, None, {"type": "ephemeral"}, None]
    assert [r.tokens_cached for r in replies] == [0, 1150, 1200]
    assert [r.tokens_cache_written for r in replies] == [1150, 50, 50]


def test_anthropic_prompt_without_a_stable_prefix_is_sent_as_a_string_and_reports_no_cache():
    with LoopbackServer() as server:
        adapter = AnthropicAdapter("judge-model", base_url=server.anthropic_base_url, prices=PRICES)
        adapter.complete(words(1500))
        reply = adapter.complete(words(1500))
        body = server.requests[-1].body
    assert body["messages"][0]["content"] == words(1500)
    assert (reply.tokens_in, reply.tokens_cached, reply.tokens_cache_written) == (1500, 0, 0)


def test_the_stable_prefix_and_the_cached_counts_are_checked():
    with pytest.raises(ValidationError, match="stable_prefix_chars"):
        RunConfig(stable_prefix_chars=[10, 5])
    with pytest.raises(ValidationError, match="stable_prefix_chars"):
        RunConfig(stable_prefix_chars=-1)
    with pytest.raises(ValidationError, match="tokens_cached"):
        LLMResponse("x", "a", "m", tokens_in=10, tokens_cached=11)
    with pytest.raises(ValidationError, match="cached"):
        PRICE.cost(10, 0, tokens_cached=8, tokens_cache_written=3)
    assert RunConfig(stable_prefix_chars=[5, 10]).stable_breaks == (5, 10)


# -- judge_many ------------------------------------------------------------------------------------------


def test_judge_many_reports_the_judges_cached_tokens_and_their_price_and_tags_the_ledger(tmp_path):
    question = words(1500, "q")
    rows = [{"id": i, "prompt": question, "baseline": f"reference {i}", "candidate": f"answer {i}"} for i in range(3)]
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer() as server:
        judge = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        df = judge_many(judge, rows, concurrency=1, progress=False, ledger=ledger, task_type="qa")
    cached = df["judge_tokens_cached"].tolist()
    assert cached[0] == 0 and cached[1] > 1024 and cached[1] % 128 == 0 and cached[2] == cached[1]
    for _, row in df.iterrows():
        out = row["judge_tokens_out"]
        expected = PRICE.cost(int(row["judge_tokens_in"]), int(out), tokens_cached=int(row["judge_tokens_cached"]))
        assert row["judge_cost_usd"] == pytest.approx(expected)
    assert df["judge_cost_usd"][1] < PRICE.cost(int(df["judge_tokens_in"][1]), int(df["judge_tokens_out"][1]))
    tags = [o.tags for o in ledger]
    assert [t.get("judge_tokens_cached", 0) for t in tags] == cached


def test_per_turn_judging_marks_the_transcript_stable_and_later_turns_read_it_from_the_cache():
    """An LLMJudge on the turns of one conversation: each prompt's documents and transcript are marked stable
    (``stable_prefix_chars``, block ends), so the Anthropic adapter puts ``cache_control`` on them and every turn
    after the first reads the earlier turns' prefix from the provider's cache."""
    from llm_connect.conversations import per_turn

    messages = [{"role": "system", "content": words(1100, "s")}]
    for k in range(4):
        messages += [{"role": "user", "content": f"question {k}? " + words(40, f"u{k}_")},
                     {"role": "assistant", "content": f"answer {k}. " + words(40, f"a{k}_")}]
    items = per_turn([{"id": "conv", "messages": messages}]).assign(baseline="a reference answer")
    with LoopbackServer() as server:
        adapter = AnthropicAdapter("judge-model", base_url=server.anthropic_base_url, prices=PRICES)
        df = judge_many(LLMJudge(adapter), items, concurrency=1, progress=False)
        bodies = [r.body for r in server.requests if r.path.endswith("/messages")]
    assert len(bodies) == 4
    for body in bodies:
        blocks = body["messages"][0]["content"]
        marked = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        assert marked == [len(blocks) - 2]  # the stable part's last block; the replies come after it
        assert "The reply to grade:" in blocks[-1]["text"] and "The reply to grade:" not in blocks[-2]["text"]
    cached = df["judge_tokens_cached"].tolist()
    assert cached[0] == 0 and all(c > 1000 for c in cached[1:])


# -- every result frame and every row that is not a verdict reports them -----------------------------------------


def _long_rows(n: int) -> list[dict]:
    question = words(1500, "q")  # a shared prefix past the loopback's 1024-token cache minimum
    return [{"id": i, "prompt": question, "baseline": f"reference {i}", "candidate": f"answer {i}"} for i in range(n)]


def test_results_frame_reports_the_judges_cached_tokens_as_judge_many_does():
    from llm_connect.frames import results_frame

    rows = _long_rows(3)
    with LoopbackServer() as server:
        judge = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        results = [judge.judge(LLMResponse(r["baseline"], "reference", "answers"),
                               LLMResponse(r["candidate"], "m", "m"), prompt=r["prompt"], run_config=RunConfig())
                   for r in rows]
    with LoopbackServer() as server:  # a fresh cache: the same prompts, the same counts
        judge = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        many = judge_many(judge, rows, concurrency=1, progress=False)
    frame = results_frame(results)
    assert frame["judge_tokens_cached"].tolist() == [r.tokens_cached for r in results]
    assert frame["judge_tokens_cached"].tolist() == many["judge_tokens_cached"].tolist()
    assert frame["judge_tokens_cached"].iloc[0] == 0 and frame["judge_tokens_cached"].iloc[1] > 1024
    assert frame["judge_tokens_cached"].dtype == "int64"


def test_abstained_selective_rows_and_rows_a_cascade_leaves_report_their_cached_tokens():
    """A selective judge that abstains (and a cascade whose every stage abstains) returns no verdict, but the calls
    were made: their rows carry the cached input tokens (priced at the cached rate) as a scored row would."""
    from llm_connect.grading import SelectiveJudge, cascade

    rows = _long_rows(4)
    with LoopbackServer() as server:
        inner = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        scored = judge_many(inner, rows, concurrency=1, progress=False)
    with LoopbackServer() as server:
        inner = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        never_sure = SelectiveJudge(inner, confidence="margin", cutoff=1.0 + 1e-9)
        abstained = judge_many(never_sure, rows, concurrency=1, progress=False)
    with LoopbackServer() as server:
        inner = LLMJudge(OpenAICompatibleAdapter("judge-model", base_url=server.base_url, prices=PRICES))
        chain = cascade([SelectiveJudge(inner, confidence="margin", cutoff=1.0 + 1e-9)], alpha=0.1, delta=0.1)
        left = judge_many(chain, rows, concurrency=1, progress=False)
    for frame in (abstained, left):
        assert (frame["status"] == "abstained").all()
        assert frame["judge_tokens_cached"].tolist() == scored["judge_tokens_cached"].tolist()
        assert frame["judge_cost_usd"].tolist() == pytest.approx(scored["judge_cost_usd"].tolist())
    assert scored["judge_tokens_cached"].iloc[1] > 1024
