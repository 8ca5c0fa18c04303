"""The HTTP adapters against a real HTTP server on 127.0.0.1 (llm_connect.testing.loopback); nothing mocked."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import traceback
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from llm_connect.adapters import (
    AnthropicAdapter,
    OpenAICompatibleAdapter,
    OpenAICompatibleEmbedder,
    Price,
    ResponseCache,
    parse_retry_after,
    pricing,
    register_price,
)
from llm_connect.core import AsyncLLMAdapter, BudgetTracker, EmbeddingAdapter, LLMAdapter, RunConfig, TokenLogprob
from llm_connect.errors import (
    AdapterConnectionError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
)
from llm_connect.testing.loopback import LoopbackServer, default_reply

SECRET = "sk-test-SECRET-123"
FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}


@pytest.fixture
def servers():
    started: list[LoopbackServer] = []

    def make(**kwargs) -> LoopbackServer:
        server = LoopbackServer(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def adapters():
    made = []

    def keep(adapter):
        made.append(adapter)
        return adapter

    yield keep
    for adapter in made:
        adapter.close()


def openai(server: LoopbackServer, keep, model: str = "loopback-model", **kwargs) -> OpenAICompatibleAdapter:
    return keep(OpenAICompatibleAdapter(model, base_url=server.base_url, **{**FAST, **kwargs}))


def anthropic(server: LoopbackServer, keep, model: str = "claude-3-5-haiku", **kwargs) -> AnthropicAdapter:
    kwargs.setdefault("api_key", SECRET)
    return keep(AnthropicAdapter(model, base_url=server.anthropic_base_url, **{**FAST, **kwargs}))


# -- success, parameters, protocols -----------------------------------------------------


def test_success_reports_tokens_latency_and_cost(servers, adapters):
    server = servers(latency_s=0.02)
    adapter = openai(server, adapters, "gpt-4o-mini", api_key=SECRET)
    assert isinstance(adapter, LLMAdapter)
    assert isinstance(adapter, AsyncLLMAdapter)
    prompt = "Rate this answer: Paris is the capital of France."
    response = adapter.complete(prompt, RunConfig())
    assert response.content == default_reply(prompt)
    assert response.adapter_id == "openai:gpt-4o-mini"
    assert response.model_id == "gpt-4o-mini"
    assert response.tokens_in == len(prompt.split())
    assert response.tokens_out == len(response.content.split())
    assert response.latency_ms >= 20
    expected = pricing.DEFAULT_PRICES["gpt-4o-mini"].cost(response.tokens_in, response.tokens_out)
    assert response.cost_usd == pytest.approx(expected)
    assert response.cost_usd > 0
    assert response.cached is False
    assert response.finish_reason == "stop"
    assert adapter.cost_known
    [request] = server.requests
    assert request.headers["Authorization"] == f"Bearer {SECRET}"


def test_run_config_reaches_the_request_and_logprobs_are_parsed(servers, adapters):
    server = servers()
    adapter = openai(server, adapters, adapter_id="judge-a")
    config = RunConfig(
        temperature=0.3,
        max_tokens=50,
        model_params={"seed": 7, "top_p": 0.9},
        system_prompt="You are a strict judge.",
        json_output=True,
        top_logprobs=3,
    )
    response = adapter.complete("Is 2+2=4?", config)
    assert response.adapter_id == "judge-a"
    body = server.requests[0].body
    assert body["model"] == "loopback-model"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 50
    assert body["seed"] == 7
    assert body["top_p"] == 0.9
    assert body["messages"] == [
        {"role": "system", "content": "You are a strict judge."},
        {"role": "user", "content": "Is 2+2=4?"},
    ]
    assert body["response_format"] == {"type": "json_object"}
    assert body["logprobs"] is True
    assert body["top_logprobs"] == 3
    assert response.logprobs is not None
    assert all(isinstance(t, TokenLogprob) for t in response.logprobs)
    assert "".join(t.token for t in response.logprobs) == response.content
    first = response.logprobs[0]
    assert len(first.top) == 3
    assert first.top[0] == (first.token, first.logprob)
    assert first.logprob <= 0


def test_no_logprobs_unless_asked(servers, adapters):
    server = servers()
    response = openai(server, adapters).complete("hello", RunConfig())
    assert response.logprobs is None
    assert "logprobs" not in server.requests[0].body


def test_max_tokens_param_name_and_length_finish(servers, adapters):
    server = servers(reply="one two three four five six")
    adapter = openai(server, adapters, max_tokens_param="max_completion_tokens")
    response = adapter.complete("count", RunConfig(max_tokens=2))
    assert server.requests[0].body["max_completion_tokens"] == 2
    assert response.content == "one two"
    assert response.finish_reason == "length"


def test_base_url_and_key_from_the_environment(servers, adapters, monkeypatch):
    server = servers()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    adapter = adapters(OpenAICompatibleAdapter("loopback-model"))
    assert adapter.base_url == server.base_url
    adapter.complete("hi", RunConfig())
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"


def test_missing_key_names_the_env_var_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("MY_GATEWAY_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):
        OpenAICompatibleAdapter("gpt-4o-mini")
    with pytest.raises(AuthenticationError, match="MY_GATEWAY_KEY"):
        OpenAICompatibleAdapter(
            "gpt-4o-mini", base_url="https://gateway.example.invalid/v1", api_key_env="MY_GATEWAY_KEY"
        )
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        AnthropicAdapter("claude-3-5-haiku")
    # a server on this machine needs no key
    OpenAICompatibleAdapter("local-model", base_url="http://localhost:8000/v1")


@pytest.mark.parametrize("key_env", [None, ""])
def test_a_server_on_this_machine_needs_no_key_and_gets_no_authorization_header(servers, adapters, monkeypatch,
                                                                                key_env):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    if key_env is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key_env)  # set but empty: no key either
    server = servers()
    for host in ("127.0.0.1", "localhost"):
        base_url = server.base_url.replace("127.0.0.1", host)
        chat = adapters(OpenAICompatibleAdapter("local-model", base_url=base_url, **FAST))
        assert chat.complete("hi", RunConfig()).content == default_reply("hi")
        embedder = adapters(OpenAICompatibleEmbedder("local-embed", base_url=base_url, **FAST))
        assert len(embedder.embed(["a", "b"])) == 2
    explicit = adapters(OpenAICompatibleAdapter("local-model", base_url=server.base_url, api_key="", **FAST))
    explicit.complete("again", RunConfig())
    assert len(server.requests) == 5
    for request in server.requests:
        assert "Authorization" not in request.headers and "x-api-key" not in request.headers
    with pytest.raises(AuthenticationError, match="OPENAI_API_KEY"):  # not on this machine: a key is needed
        OpenAICompatibleAdapter("m", base_url="http://192.0.2.1:8000/v1", api_key="")


def test_missing_usage_is_not_an_error(servers, adapters):
    server = servers(faults={"no_usage": 1.0})
    response = openai(server, adapters, "gpt-4o-mini", api_key=SECRET).complete("hi", RunConfig())
    assert response.content
    assert (response.tokens_in, response.tokens_out, response.cost_usd) == (0, 0, 0.0)


# -- retries -------------------------------------------------------------------------------


def test_429_with_retry_after_is_honoured_then_succeeds(servers, adapters):
    server = servers(fail_first=1, fail_first_with="429", retry_after="1")
    adapter = openai(server, adapters)
    start = time.monotonic()
    response = adapter.complete("hi", RunConfig())
    elapsed = time.monotonic() - start
    assert response.content == default_reply("hi")
    assert elapsed >= 1.0
    assert server.stats()["by_outcome"] == {"429": 1, "ok": 1}


def test_retry_after_is_capped(servers, adapters):
    server = servers(fail_first=1, fail_first_with="429", retry_after="100")
    adapter = openai(server, adapters, max_retry_after_s=0.2)
    start = time.monotonic()
    adapter.complete("hi", RunConfig())
    assert time.monotonic() - start < 5
    assert server.stats()["total"] == 2


def test_retry_after_beyond_the_total_retry_time_gives_up_at_once(servers, adapters):
    server = servers(faults={"429": 1.0}, retry_after="30")
    adapter = openai(server, adapters, max_retry_time_s=2.0)
    start = time.monotonic()
    with pytest.raises(RateLimitError) as info:
        adapter.complete("hi", RunConfig())
    assert time.monotonic() - start < 2.0
    assert info.value.status == 429
    assert server.stats()["total"] == 1


def test_500_is_retried_then_succeeds(servers, adapters):
    server = servers(fail_first=2, fail_first_with="500")
    response = openai(server, adapters).complete("hi", RunConfig())
    assert response.content == default_reply("hi")
    assert server.stats()["by_outcome"] == {"500": 2, "ok": 1}


def test_persistent_500_raises_server_error_after_bounded_attempts(servers, adapters):
    server = servers(faults={"500": 1.0})
    adapter = openai(server, adapters, max_retries=3)
    with pytest.raises(ServerError) as info:
        adapter.complete("hi", RunConfig())
    assert server.stats()["total"] == 4
    err = info.value
    assert err.status == 500
    assert "gave up after 4 attempts" in str(err)
    assert "loopback fault 500" in err.provider_message
    assert isinstance(err.__cause__, ServerError)


def test_default_retry_bound(servers, adapters):
    server = servers(faults={"503": 1.0})
    adapter = openai(server, adapters)
    with pytest.raises(ServerError):
        adapter.complete("hi", RunConfig())
    assert server.stats()["total"] == adapter.max_retries + 1 == 6


def test_400_is_not_retried(servers, adapters):
    server = servers(faults={"400": 1.0})
    with pytest.raises(BadRequestError) as info:
        openai(server, adapters).complete("hi", RunConfig())
    assert server.stats()["total"] == 1
    assert info.value.status == 400
    assert "not retried" in str(info.value)


def test_timeouts_are_retried_then_raise_adapter_timeout(servers, adapters):
    server = servers(faults={"hang": 1.0}, hang_s=10)
    adapter = openai(server, adapters, timeout_s=0.2, max_retries=2)
    start = time.monotonic()
    with pytest.raises(AdapterTimeoutError) as info:
        adapter.complete("hi", RunConfig())
    assert isinstance(info.value, TimeoutError)
    assert time.monotonic() - start < 3
    assert server.stats()["total"] == 3
    assert "timeout_s" in str(info.value)


def test_run_config_timeout_overrides_the_adapter(servers, adapters):
    server = servers(fail_first=1, fail_first_with="hang", hang_s=10)
    adapter = openai(server, adapters, timeout_s=60, max_retries=1)
    start = time.monotonic()
    response = adapter.complete("hi", RunConfig(timeout_s=0.2))
    assert response.content
    assert time.monotonic() - start < 3
    assert server.stats()["total"] == 2


def test_truncated_json_is_malformed_and_not_retried(servers, adapters):
    server = servers(faults={"truncated": 1.0})
    with pytest.raises(MalformedResponseError, match="not valid JSON"):
        openai(server, adapters).complete("hi", RunConfig())
    assert server.stats()["total"] == 1


def test_connection_refused_is_retried_then_raises(adapters):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, **FAST))
    with pytest.raises(AdapterConnectionError) as info:
        adapter.complete("hi", RunConfig())
    assert "gave up after 2 attempts" in str(info.value)


def test_parse_retry_after():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    date = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(7.0)
    past = format_datetime(now - timedelta(seconds=7), usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-1"}) is None
    assert parse_retry_after({}) is None


# -- keys never leak -----------------------------------------------------------------------


def test_api_key_never_appears_in_errors_or_repr(servers, adapters):
    server = servers(require_api_key="sk-the-right-key-999")
    adapter = openai(server, adapters, api_key=SECRET)
    assert SECRET not in repr(adapter)
    assert "***" in repr(adapter)
    with pytest.raises(AuthenticationError) as info:
        adapter.complete("hi", RunConfig())
    # the server did receive the key and echoed it back in its error body...
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert server.stats()["total"] == 1  # 401 is not retried
    # ...and none of it reaches the caller
    err = info.value
    text = "".join(traceback.format_exception(err))
    for shown in (str(err), repr(err), err.provider_message or "", text):
        assert SECRET not in shown
    assert "OPENAI_API_KEY" in str(err)
    assert err.status == 401

    claude = anthropic(server, adapters, api_key=SECRET)
    assert SECRET not in repr(claude)
    with pytest.raises(AuthenticationError) as info:
        claude.complete("hi", RunConfig())
    assert SECRET not in str(info.value)
    assert "ANTHROPIC_API_KEY" in str(info.value)


# -- Anthropic -----------------------------------------------------------------------------


def test_anthropic_success_and_request_shape(servers, adapters):
    server = servers(latency_s=0.01)
    adapter = anthropic(server, adapters)
    assert adapter.adapter_id == "anthropic:claude-3-5-haiku"
    response = adapter.complete(
        "Judge this.", RunConfig(system_prompt="Be fair.", model_params={"seed": 3, "top_k": 5})
    )
    assert response.content == default_reply("Judge this.")
    assert response.tokens_in == 4  # "Judge this." + "Be fair."
    assert response.tokens_out == len(response.content.split())
    price = pricing.DEFAULT_PRICES["claude-3-5-haiku"]
    assert response.cost_usd == pytest.approx(price.cost(response.tokens_in, response.tokens_out))
    assert response.finish_reason == "end_turn"
    assert response.logprobs is None
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in request.headers
    body = request.body
    assert body["max_tokens"] == 1024
    assert body["system"] == "Be fair."
    assert body["messages"] == [{"role": "user", "content": "Judge this."}]
    assert body["top_k"] == 5
    assert "seed" not in body  # the Messages API has no seed


def test_anthropic_env_defaults_and_max_tokens(servers, adapters, monkeypatch):
    server = servers()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    adapter = adapters(AnthropicAdapter("claude-sonnet-4-20250514"))
    adapter.complete("hi", RunConfig(max_tokens=20))
    assert server.requests[0].body["max_tokens"] == 20
    assert server.requests[0].headers["x-api-key"] == SECRET


def test_anthropic_retries_and_errors(servers, adapters):
    server = servers(fail_first=1, fail_first_with="529")
    assert anthropic(server, adapters).complete("hi", RunConfig()).content
    assert server.stats()["by_outcome"] == {"529": 1, "ok": 1}

    server = servers(fail_first=1, fail_first_with="429", retry_after="0.3")
    start = time.monotonic()
    anthropic(server, adapters).complete("hi", RunConfig())
    assert time.monotonic() - start >= 0.3

    server = servers(faults={"400": 1.0})
    with pytest.raises(BadRequestError) as info:
        anthropic(server, adapters).complete("hi", RunConfig())
    assert "invalid_request_error" in info.value.provider_message
    assert server.stats()["total"] == 1

    server = servers(faults={"truncated": 1.0})
    with pytest.raises(MalformedResponseError):
        anthropic(server, adapters).complete("hi", RunConfig())

    server = servers(faults={"no_usage": 1.0})
    response = anthropic(server, adapters).complete("hi", RunConfig())
    assert (response.tokens_in, response.tokens_out, response.cost_usd) == (0, 0, 0.0)


# -- embeddings ----------------------------------------------------------------------------


def test_embedder_batches_and_keeps_order(servers, adapters):
    server = servers()
    embedder = adapters(OpenAICompatibleEmbedder("text-embedding-3-small", base_url=server.base_url, batch_size=3))
    assert isinstance(embedder, EmbeddingAdapter)
    texts = [f"text number {i} about topic {i % 4}" for i in range(10)]
    vectors = embedder.embed(texts)
    assert len(vectors) == 10
    assert all(len(v) == 16 for v in vectors)
    paths = [r.path for r in server.requests]
    assert paths == ["/v1/embeddings"] * 4
    assert sorted(len(r.body["input"]) for r in server.requests) == [1, 3, 3, 3]
    # the server lists items in reverse; each vector must still belong to its own text
    singles = [embedder.embed([t])[0] for t in texts]
    assert vectors == singles
    assert embedder.embed([]) == []
    assert embedder.tokens_in > 0
    assert embedder.cost_usd > 0
    assert asyncio.run(embedder.aembed(texts[:2])) == vectors[:2]


def test_embedder_charges_the_budget(servers, adapters):
    server = servers()
    tracker = BudgetTracker(limit_usd=100.0)
    embedder = adapters(
        OpenAICompatibleEmbedder(
            "emb", base_url=server.base_url, prices={"emb": Price(1_000_000)}, budget_tracker=tracker
        )
    )
    embedder.embed(["one two", "three"])
    assert tracker.spent_usd == pytest.approx(3.0)


def test_embedder_calls_are_charged_to_a_batch_budget(servers, adapters):
    from llm_connect import EmbeddingSimilarityJudge, judge_many

    server = servers()
    embedder = adapters(OpenAICompatibleEmbedder("emb", base_url=server.base_url, prices={"emb": Price(1_000_000)}))
    items = [{"prompt": "q", "baseline": f"answer {i}", "candidate": f"reply {i}"} for i in range(4)]
    budget = BudgetTracker(limit_usd=1000.0)
    df = judge_many(EmbeddingSimilarityJudge(embedder), items, budget=budget, progress=False)
    assert (df["status"] == "scored").all()
    assert budget.spent_usd == pytest.approx(embedder.cost_usd) and budget.spent_usd > 0
    assert budget.reserved_usd == 0


# -- budget, cost, pricing ----------------------------------------------------------------


def test_budget_is_charged_and_a_call_refused_once_spent(servers, adapters):
    server = servers(reply="ok")
    adapter = openai(server, adapters, "priced-model", prices={"priced-model": Price(1_000_000, 0)})
    tracker = BudgetTracker(limit_usd=6.0)
    config = RunConfig(budget_tracker=tracker)
    assert adapter.complete("a b c", config).cost_usd == pytest.approx(3.0)
    adapter.complete("d e f", config)
    assert tracker.spent_usd == pytest.approx(6.0)
    with pytest.raises(BudgetExceededError):
        adapter.complete("g h i", config)
    assert server.stats()["total"] == 2  # the refused call never reached the server

    # a call that starts under the limit and costs more than is left is paid for: its reply is kept,
    # and the next call is refused before it reaches the server
    over = BudgetTracker(limit_usd=1.0)
    reply = adapter.complete("a b c", RunConfig(budget_tracker=over))
    assert reply.content == "ok" and over.spent_usd == pytest.approx(3.0)
    with pytest.raises(BudgetExceededError):
        adapter.complete("a b c", RunConfig(budget_tracker=over))
    assert server.stats()["total"] == 3


def test_pricing_table_lookup_and_overrides():
    assert pricing.price_for("gpt-4o-mini-2024-07-18") == pricing.DEFAULT_PRICES["gpt-4o-mini"]
    assert pricing.price_for("gpt-4o-2024-08-06") == pricing.DEFAULT_PRICES["gpt-4o"]
    assert pricing.price_for("claude-3-5-haiku-20241022") == pricing.DEFAULT_PRICES["claude-3-5-haiku"]
    assert pricing.price_for("no-such-model-xyz") is None
    assert pricing.cost_usd("no-such-model-xyz", 1000, 1000) == 0.0
    register_price("my-finetune-xyz", 2.0, 4.0)
    assert pricing.cost_usd("my-finetune-xyz", 1_000_000, 500_000) == pytest.approx(4.0)
    assert pricing.price_for("gpt-4o", {"gpt-4o": (1.0, 1.0)}) == Price(1.0, 1.0)
    assert pricing.price_for("unknown-abc", {"gpt-4o": (1.0, 1.0)}) is None
    with pytest.raises(ValueError):
        Price(-1.0, 0.0)


def test_unknown_model_costs_zero_and_says_so(servers, adapters, monkeypatch):
    server = servers()
    adapter = openai(server, adapters, "mystery-model-42")
    response = adapter.complete("hi", RunConfig())
    assert response.cost_usd == 0.0
    assert adapter.price is None
    assert adapter.cost_known  # a server on this machine is free
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    hosted = OpenAICompatibleAdapter("mystery-model-42")
    assert not hosted.cost_known


# -- cache ---------------------------------------------------------------------------------


def test_cache_hit_is_marked_free_and_shared_between_instances(servers, adapters, tmp_path):
    server = servers()
    model = "gpt-4o-mini"
    first = openai(server, adapters, model, api_key=SECRET, cache=tmp_path / "cache")
    config = RunConfig(model_params={"seed": 1}, top_logprobs=2)
    miss = first.complete("judge me", config)
    assert miss.cached is False
    assert miss.cost_usd > 0

    second = openai(server, adapters, model, api_key=SECRET, cache=ResponseCache(tmp_path / "cache"))
    tracker = BudgetTracker(limit_usd=1.0)
    hit = second.complete("judge me", config.replace(budget_tracker=tracker))
    assert hit.cached is True
    assert hit.cost_usd == 0.0
    assert (hit.content, hit.tokens_in, hit.tokens_out, hit.logprobs) == (
        miss.content,
        miss.tokens_in,
        miss.tokens_out,
        miss.logprobs,
    )
    assert tracker.spent_usd == 0.0
    assert server.stats()["total"] == 1
    assert second.cache.hits == 1

    # anything that changes the reply is a different key
    for changed in (
        config.replace(temperature=0.5),
        config.replace(max_tokens=10),
        config.replace(model_params={"seed": 2}),
        config.replace(system_prompt="x"),
        config.replace(json_output=True),
        config.replace(top_logprobs=None),
    ):
        assert second.complete("judge me", changed).cached is False
    assert second.complete("judge me!", config).cached is False
    other_model = openai(server, adapters, "gpt-4o", api_key=SECRET, cache=tmp_path / "cache")
    assert other_model.complete("judge me", config).cached is False
    assert server.stats()["total"] == 9


def test_cache_is_shared_with_another_process(servers, adapters, tmp_path):
    server = servers()
    cache_dir = tmp_path / "shared-cache"
    adapter = openai(server, adapters, cache=cache_dir)
    original = adapter.complete("cross process", RunConfig(model_params={"seed": 5}))
    code = textwrap.dedent(
        """
        import json, sys
        from llm_connect.adapters import OpenAICompatibleAdapter
        from llm_connect.core import RunConfig
        adapter = OpenAICompatibleAdapter("loopback-model", base_url=sys.argv[1], cache=sys.argv[2],
                                          backoff_initial_s=0.01, backoff_max_s=0.05)
        r = adapter.complete("cross process", RunConfig(model_params={"seed": 5}))
        adapter.close()
        print(json.dumps({"cached": r.cached, "content": r.content, "cost": r.cost_usd}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code, server.base_url, str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"cached": True, "content": original.content, "cost": 0.0}
    assert server.stats()["total"] == 1


# -- limits and concurrency ----------------------------------------------------------------


async def _gather(adapter, n: int, config: RunConfig | None = None) -> list:
    return await asyncio.gather(*(adapter.acomplete(f"prompt {i}", config or RunConfig()) for i in range(n)))


def test_requests_per_minute_limits(servers, adapters):
    server = servers()
    adapter = openai(server, adapters, requests_per_minute=120)  # 2 per second, a burst of 2
    start = time.monotonic()
    asyncio.run(_gather(adapter, 5))
    elapsed = time.monotonic() - start
    assert 1.4 <= elapsed < 4
    assert server.stats()["total"] == 5


def test_tokens_per_minute_limits(servers, adapters):
    server = servers(reply="ok")
    # 100 tokens a second; each call reserves about 150 (prompt estimate + max_tokens): 40 fit at once
    adapter = openai(server, adapters, tokens_per_minute=6000)
    config = RunConfig(max_tokens=149)
    start = time.monotonic()
    asyncio.run(_gather(adapter, 40, config))
    first_40 = time.monotonic() - start
    asyncio.run(_gather(adapter, 1, config))
    first_41 = time.monotonic() - start
    # the 41st call needs 150 more tokens at 100 a second: it cannot finish before ~1.5 s from the start,
    # whatever the machine's load did to the first 40 (which need no waiting)
    assert first_40 < 1.4
    assert first_41 >= 1.4


def test_no_limits_by_default(servers, adapters):
    server = servers(latency_s=0.05)
    adapter = openai(server, adapters)
    assert adapter.requests_per_minute is None
    assert adapter.tokens_per_minute is None
    start = time.monotonic()
    asyncio.run(_gather(adapter, 100))
    assert time.monotonic() - start < 1.5
    assert server.stats()["max_in_flight"] > 50


def test_max_concurrency_is_respected(servers, adapters):
    server = servers(latency_s=0.1)
    adapter = openai(server, adapters, max_concurrency=3)
    start = time.monotonic()
    results = asyncio.run(_gather(adapter, 12))
    assert len(results) == 12
    assert server.stats()["max_in_flight"] == 3
    assert time.monotonic() - start >= 0.4


# -- event loops ---------------------------------------------------------------------------


def test_sync_complete_works_inside_a_running_event_loop(servers, adapters):
    server = servers(latency_s=0.01)
    adapter = openai(server, adapters)

    async def notebook_cell():
        # what a Jupyter cell does: a plain sync call while the kernel's loop is running
        first = adapter.complete("from a notebook", RunConfig())
        second = await adapter.acomplete("awaited", RunConfig())
        return first, second

    first, second = asyncio.run(asyncio.wait_for(notebook_cell(), timeout=20))
    assert first.content == default_reply("from a notebook")
    assert second.content == default_reply("awaited")


def test_adapter_works_across_caller_loops_and_after_close(servers, adapters):
    server = servers()
    adapter = openai(server, adapters)
    for _ in range(2):
        assert asyncio.run(adapter.acomplete("x", RunConfig())).content
    adapter.close()
    adapter.close()
    assert adapter.complete("again", RunConfig()).content

    async def use_async_context():
        async with OpenAICompatibleAdapter("m", base_url=server.base_url) as a:
            return await a.acomplete("ctx", RunConfig())

    assert asyncio.run(use_async_context()).content
    with OpenAICompatibleAdapter("m", base_url=server.base_url) as a:
        assert a.complete("ctx", RunConfig()).content


def test_an_adapter_dropped_without_close_warns_nothing(servers):
    server = servers()
    adapter = OpenAICompatibleAdapter("m", base_url=server.base_url)
    adapter.complete("hi", RunConfig())
    del adapter
    gc.collect()  # would raise through pytest's unraisable hook if the session leaked


def test_importing_adapters_and_loopback_stays_light():
    code = (
        "import sys, llm_connect, llm_connect.adapters, llm_connect.testing.loopback\n"
        "heavy = [m for m in ('aiohttp', 'llama_cpp', 'torch', 'sentence_transformers', 'diskcache', 'tenacity')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ))
    assert out.stdout.strip() == ""


def test_unserialisable_model_params_are_a_validation_error(servers, adapters):
    server = servers()
    with pytest.raises(ValueError, match="JSON-serialisable"):
        openai(server, adapters).complete("hi", RunConfig(model_params={"seed": object()}))
    assert server.stats()["total"] == 0


def test_credentials_in_the_url_beside_an_api_key_are_a_clear_error_without_leaking_either():
    from llm_connect.adapters import OpenAICompatibleAdapter
    from llm_connect.errors import ValidationError

    with pytest.raises(ValidationError, match="holds credentials") as info:
        OpenAICompatibleAdapter("m", base_url="http://user:hunter2@127.0.0.1:9/v1", api_key="sk-test-SECRET-123")
    assert "hunter2" not in str(info.value) and "sk-test-SECRET-123" not in str(info.value)
