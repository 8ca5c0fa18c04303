"""Security of the HTTP adapters, against a real HTTP server on 127.0.0.1 (llm_connect.testing); nothing mocked.

- credentials in ``base_url`` never appear in a message, a repr, a traceback or a batch's ``error`` column;
- a reply that echoes the API key leaves no trace of it in the exception, its chain or its traceback's locals;
- ``repr()`` of a half-built adapter works (debuggers and ``capture_locals`` tracebacks call it);
- the response cache stores JSON only: a planted pickle is a miss, never code;
- reply bodies are capped (gzip bombs, endless bodies) with bounded memory;
- an API key never reaches a ledger, a log, a repr, an error or a report, through a whole run and calibration.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import pathlib
import pickle
import socket
import sqlite3
import time
import traceback
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from llm_connect import LLMJudge, QualityLedger, judge_many
from llm_connect.adapters import AnthropicAdapter, OpenAICompatibleAdapter, OpenAICompatibleEmbedder, ResponseCache
from llm_connect.adapters._http import MAX_RESPONSE_BYTES  # not re-exported by llm_connect.adapters (yet)
from llm_connect.core import RunConfig
from llm_connect.errors import (
    AdapterConnectionError,
    AdapterError,
    AdapterTimeoutError,
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ValidationError,
)
from llm_connect.testing.loopback import LoopbackServer, default_reply

KEY = "lc-live-KEY-4f9a2c"  # no "sk-" prefix: nothing may rely on recognising the shape of a key
PASSWORD = "hunter2-Pw"
BASIC = base64.b64encode(f"judge:{PASSWORD}".encode()).decode()
ODD, ODD_ENCODED = "p@ss:w0rd/x", "p%40ss%3Aw0rd%2Fx"
FAST = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05}
MiB = 1024 * 1024
ITEM = {"prompt": "What is the capital of France?", "baseline": "Paris", "candidate": "Paris, France"}


@pytest.fixture
def servers():
    started: list[LoopbackServer] = []

    def make(**kwargs: Any) -> LoopbackServer:
        server = LoopbackServer(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def adapters():
    made: list[Any] = []

    def keep(adapter: Any) -> Any:
        made.append(adapter)
        return adapter

    yield keep
    for adapter in made:
        adapter.close()


def with_credentials(url: str, password: str = PASSWORD) -> str:
    return url.replace("http://", f"http://judge:{password}@", 1)


def everything_shown(exc: BaseException) -> str:
    """All an exception can show: a capture_locals traceback over its chain, and for every exception
    in the chain (suppressed context included) its str, repr, attributes and its frames' locals."""
    parts = ["".join(traceback.TracebackException(type(exc), exc, exc.__traceback__, capture_locals=True).format())]
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts += [str(e), repr(e), *(repr(v) for v in vars(e).values())]
        tb = e.__traceback__
        while tb is not None:
            parts += [f"{k}={v!r}" for k, v in tb.tb_frame.f_locals.items()]
            tb = tb.tb_next
        todo += [e.__cause__, e.__context__]
    return "\n".join(parts)


def assert_secret_free(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{secret!r} leaked"


# -- 1. credentials in base_url -------------------------------------------------------------


def test_url_credentials_are_sent_but_never_shown_by_a_404_its_traceback_or_a_batch(servers, adapters):
    server = servers(faults={"404": 1.0})
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=with_credentials(server.base_url), **FAST))
    assert_secret_free(repr(adapter) + str(adapter.base_url), PASSWORD, BASIC)
    assert "***@" in repr(adapter)  # it does say credentials are in use
    with pytest.raises(BadRequestError, match="Not found") as info:
        adapter.complete("hi", RunConfig())
    assert info.value.status == 404
    assert_secret_free(everything_shown(info.value), PASSWORD, BASIC)
    assert "127.0.0.1" in str(info.value)
    # the credentials did reach the server, as HTTP basic auth
    assert server.requests[0].headers["Authorization"] == f"Basic {BASIC}"

    frame = judge_many(LLMJudge(adapter), [ITEM], progress=False)
    assert frame["status"].tolist() == ["error"]
    error = frame["error"].iloc[0]
    assert "BadRequestError" in error and "404" in error
    assert_secret_free(error, PASSWORD, BASIC)


def test_url_credentials_are_redacted_from_echoes_refusals_and_every_adapter(servers, adapters):
    # a 401 that echoes the Basic header it was sent
    server = servers(require_api_key="the-only-key")
    for adapter in (
        OpenAICompatibleAdapter("m", base_url=with_credentials(server.base_url), **FAST),
        AnthropicAdapter("claude", base_url=with_credentials(server.anthropic_base_url), **FAST),
        OpenAICompatibleEmbedder("e", base_url=with_credentials(server.base_url), **FAST),
    ):
        adapters(adapter)
        assert_secret_free(repr(adapter), PASSWORD, BASIC)
        with pytest.raises(AuthenticationError) as info:
            adapter.embed(["x"]) if isinstance(adapter, OpenAICompatibleEmbedder) else adapter.complete("hi")
        assert_secret_free(everything_shown(info.value), PASSWORD, BASIC)
    assert all(r.headers["Authorization"] == f"Basic {BASIC}" for r in server.requests)

    # a percent-encoded password is redacted in both forms (module constants: this frame's locals are checked too)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = adapters(
        OpenAICompatibleAdapter("m", base_url=f"http://judge:{ODD_ENCODED}@127.0.0.1:{port}/v1", max_retries=0, **FAST)
    )
    with pytest.raises(AdapterConnectionError) as info:
        refused.complete("hi")
    assert_secret_free(everything_shown(info.value) + repr(refused), ODD, ODD_ENCODED)

    # credentials stand in for a key on a remote server (none is contacted here)
    remote = OpenAICompatibleAdapter("m", base_url=f"https://judge:{PASSWORD}@llm.example.invalid/v1", api_key="")
    assert remote.base_url == "https://llm.example.invalid/v1"
    assert_secret_free(repr(remote), PASSWORD)

    # a URL refused by validation is shown redacted too
    for scheme in ("ftp://", ""):
        with pytest.raises(ValidationError, match="must start with http") as info:
            OpenAICompatibleAdapter("m", base_url=f"{scheme}judge:{PASSWORD}@127.0.0.1/v1")
        assert_secret_free(everything_shown(info.value), PASSWORD)


# -- 2. a reply that echoes the API key ---------------------------------------------------------


def _complete(adapter: Any, how: str) -> None:
    if isinstance(adapter, OpenAICompatibleEmbedder):
        if how == "sync":
            adapter.embed(["x"])
        else:
            asyncio.run(adapter.aembed(["x"]))
    elif how == "sync":
        adapter.complete("hi", RunConfig())
    else:
        asyncio.run(adapter.acomplete("hi", RunConfig()))


@pytest.mark.parametrize("how", ["sync", "async"])
@pytest.mark.parametrize("echo", ["401", "echo_auth"])
def test_an_echoed_key_leaves_no_trace_in_the_exception_chain_or_traceback_locals(servers, adapters, echo, how):
    if echo == "401":  # a provider that refuses the key and quotes it back
        server, expected = servers(require_api_key="the-only-key"), AuthenticationError
    else:  # a 200 whose body is not JSON but quotes the request's auth headers
        server, expected = servers(faults={"echo_auth": 1.0}), MalformedResponseError
    made = [
        OpenAICompatibleAdapter("m", base_url=server.base_url, api_key=KEY, **FAST),
        AnthropicAdapter("claude", base_url=server.anthropic_base_url, api_key=KEY, **FAST),
        OpenAICompatibleEmbedder("e", base_url=server.base_url, api_key=KEY, **FAST),
    ]
    for adapter in made:
        adapters(adapter)
        with pytest.raises(expected) as info:
            _complete(adapter, how)
        assert_secret_free(everything_shown(info.value), KEY)
    # the server did get the key, and sent it back
    assert {r.headers.get("Authorization") or r.headers.get("x-api-key") for r in server.requests} == {
        f"Bearer {KEY}",
        KEY,
    }
    assert server.stats()["total"] == 3  # neither is retried


def test_a_json_reply_of_the_wrong_shape_that_echoes_the_key_leaves_no_trace(servers, adapters):
    server = servers(faults={"echo_auth_json": 1.0})
    for adapter in (
        OpenAICompatibleAdapter("m", base_url=server.base_url, api_key=KEY, **FAST),
        AnthropicAdapter("claude", base_url=server.anthropic_base_url, api_key=KEY, **FAST),
        OpenAICompatibleEmbedder("e", base_url=server.base_url, api_key=KEY, **FAST),
    ):
        adapters(adapter)
        with pytest.raises(MalformedResponseError, match="has no") as info:
            _complete(adapter, "sync")
        assert_secret_free(everything_shown(info.value), KEY)


def test_an_echoed_key_is_absent_from_a_batch_error_column(servers, adapters):
    server = servers(require_api_key="the-only-key")
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=server.base_url, api_key=KEY, **FAST))
    frame = judge_many(LLMJudge(adapter), [ITEM, ITEM], progress=False)
    assert frame["status"].tolist() == ["error", "error"]
    for error in frame["error"]:
        assert error.startswith("AuthenticationError")
        assert_secret_free(error, KEY)


def test_timeouts_and_refused_connections_chain_no_key_either(servers, adapters):
    server = servers(faults={"hang": 1.0}, hang_s=5)
    slow = adapters(
        OpenAICompatibleAdapter("m", base_url=server.base_url, api_key=KEY, timeout_s=0.2, max_retries=0, **FAST)
    )
    with pytest.raises(AdapterTimeoutError) as info:
        slow.complete("hi")
    assert_secret_free(everything_shown(info.value), KEY)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = adapters(
        OpenAICompatibleAdapter("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=1, **FAST)
    )
    with pytest.raises(AdapterConnectionError) as info:
        refused.complete("hi")
    assert "gave up after 2 attempts" in str(info.value)
    shown = everything_shown(info.value)
    assert_secret_free(shown, KEY)
    assert "ClientConnectorError" in shown  # the cause is still chained, for diagnosis


def test_a_constructor_error_keeps_no_key_in_its_traceback_locals():
    for make in (
        lambda: OpenAICompatibleAdapter("m", base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=-1),
        lambda: AnthropicAdapter("m", base_url="http://127.0.0.1:9", api_key=KEY, timeout_s=0),
        lambda: OpenAICompatibleEmbedder("m", base_url="http://127.0.0.1:9/v1", api_key=KEY, batch_size=0),
        lambda: OpenAICompatibleAdapter("m", base_url=f"http://judge:{PASSWORD}@127.0.0.1:9/v1", api_key=KEY),
    ):
        with pytest.raises(ValidationError) as info:
            make()
        assert_secret_free(everything_shown(info.value), KEY, PASSWORD)


# -- 3. repr of a half-built adapter --------------------------------------------------------------


def test_repr_of_a_half_built_adapter_never_raises():
    for cls in (OpenAICompatibleAdapter, AnthropicAdapter, OpenAICompatibleEmbedder):
        bare = object.__new__(cls)
        assert repr(bare).startswith(f"{cls.__name__}(")
        bare.close()  # harmless too
    bare_cache = object.__new__(ResponseCache)
    assert repr(bare_cache).startswith("ResponseCache(")
    assert repr(object.__new__(LoopbackServer)).startswith("LoopbackServer(")

    # a constructor that fails midway: a capture_locals traceback shows the half-built `self`
    with pytest.raises(ValidationError) as info:
        OpenAICompatibleAdapter("m", base_url="http://127.0.0.1:9/v1", max_concurrency=0)
    shown = "".join(
        traceback.TracebackException(
            type(info.value), info.value, info.value.__traceback__, capture_locals=True
        ).format()
    )
    assert "OpenAICompatibleAdapter(model='m'" in shown


# -- 4. the response cache never unpickles --------------------------------------------------------


class _Touch:
    """A pickle that, when loaded, creates a file (the stand-in for arbitrary code)."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (pathlib.Path.touch, (self.path,))


def _plant(cache_dir: pathlib.Path, mode: int, value: Any, filename: str | None = None) -> None:
    """Overwrite the one entry of the cache's SQLite table, as someone with write access to the directory could."""
    with sqlite3.connect(cache_dir / "cache.db") as db:
        (count,) = db.execute("SELECT COUNT(*) FROM Cache").fetchone()
        assert count == 1
        db.execute("UPDATE Cache SET mode = ?, value = ?, filename = ?", (mode, value, filename))


def test_a_planted_pickle_in_the_cache_is_a_miss_and_never_runs(servers, adapters, tmp_path):
    import diskcache.core

    server = servers()
    cache_dir = tmp_path / "cache"
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=server.base_url, cache=cache_dir, **FAST))
    first = adapter.complete("judge me", RunConfig())
    assert adapter.complete("judge me", RunConfig()).cached is True
    marker = tmp_path / "pwned"

    # a pickle inline in the SQLite row, then one in a value file the row points at
    (cache_dir / "planted.val").write_bytes(pickle.dumps(_Touch(marker)))
    for value, filename in ((sqlite3.Binary(pickle.dumps(_Touch(marker))), None), (None, "planted.val")):
        before = server.stats()["total"]
        _plant(cache_dir, diskcache.core.MODE_PICKLE, value, filename)
        again = adapter.complete("judge me", RunConfig())
        assert not marker.exists(), "the cache unpickled a planted entry"
        assert again.cached is False  # a miss: the call went to the server...
        assert server.stats()["total"] == before + 1
        assert again.content == first.content
        assert adapter.complete("judge me", RunConfig()).cached is True  # ...and its reply replaced the entry


@pytest.mark.parametrize(
    ("mode", "value"),
    [
        ("raw", "not json {"),
        ("raw", '{"content": 5}'),
        ("raw", '["a", "list"]'),
        ("raw", '{"content": "x", "tokens_in": -3}'),
        ("raw", '{"content": "x", "logprobs": [["t", "NaN?", []]]}'),
        ("raw", "[" * 100_000),
        ("raw", sqlite3.Binary(b"\x80\x04\x95 binary")),
        ("raw", 12345),
        ("text", "../outside.val"),  # a value file outside the cache directory
        ("text", None),  # a text row that names no file
        ("text", "binary.val"),  # a value file that is not UTF-8 text
    ],
)
def test_an_undecodable_or_wrong_shaped_cache_entry_is_a_miss(servers, adapters, tmp_path, mode, value):
    import diskcache.core

    server = servers()
    cache_dir = tmp_path / "cache"
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=server.base_url, cache=cache_dir, **FAST))
    adapter.complete("judge me", RunConfig())
    if mode == "raw":
        _plant(cache_dir, diskcache.core.MODE_RAW, value)
    else:
        (tmp_path / "outside.val").write_text('{"content": "planted", "tokens_in": 1, "tokens_out": 1}')
        (cache_dir / "binary.val").write_bytes(b"\xff\xfe\x00 not utf-8")
        _plant(cache_dir, diskcache.core.MODE_TEXT, None, value)
    response = adapter.complete("judge me", RunConfig())
    assert response.cached is False
    assert response.content == default_reply("judge me")
    assert server.stats()["total"] == 2
    assert adapter.cache.misses >= 2


@pytest.mark.parametrize(
    ("mode", "value"),
    [
        ("raw", "not json {"),
        ("raw", '{"embedding": []}'),
        ("raw", '{"embedding": [1.0, "2"]}'),
        ("raw", '{"embedding": [1.0, NaN]}'),
        ("raw", '{"embedding": [true, 1.0]}'),
        ("raw", '[[1.0, 2.0]]'),
        ("raw", sqlite3.Binary(b"\x80\x04\x95 binary")),
        ("raw", 12345),
        ("text", "../outside.val"),
    ],
)
def test_an_undecodable_embedding_cache_entry_is_a_miss(servers, tmp_path, mode, value):
    import diskcache.core

    server = servers()
    cache_dir = tmp_path / "cache"
    embedder = OpenAICompatibleEmbedder("e", base_url=server.base_url, cache=cache_dir, **FAST)
    first = embedder.embed(["Paris"])
    assert embedder.embed(["Paris"]) == first and server.stats()["total"] == 1  # stored, then reused
    if mode == "raw":
        _plant(cache_dir, diskcache.core.MODE_RAW, value)
    else:
        (tmp_path / "outside.val").write_text('{"embedding": [9.0, 9.0]}')
        _plant(cache_dir, diskcache.core.MODE_TEXT, None, value)
    assert embedder.embed(["Paris"]) == first  # a miss: asked again, never the planted vector
    assert server.stats()["total"] == 2
    assert embedder.embed(["Paris"]) == first and server.stats()["total"] == 2  # the fresh vector replaced it


# -- 5. reply bodies are capped -----------------------------------------------------------------


def _peak_while(call: Any) -> tuple[BaseException, float, float]:
    """(the exception ``call`` raised, peak traced memory in bytes, seconds taken)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = time.monotonic()
        with pytest.raises(AdapterError) as info:
            call()
        elapsed = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return info.value, peak, elapsed


@pytest.mark.parametrize("fault", ["gzip_bomb", "endless"])
def test_a_huge_body_stops_at_the_default_cap_quickly_with_bounded_memory(servers, adapters, fault):
    server = servers(faults={fault: 1.0}, bomb_bytes=256 * MiB)
    # timeout and retries bounded so that a regression costs seconds and ~1 GB, not the machine
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=server.base_url, timeout_s=10, max_retries=0, **FAST))
    err, peak, elapsed = _peak_while(lambda: adapter.complete("hi", RunConfig()))
    assert peak < 100 * MiB, f"peak {peak / MiB:.0f} MiB"
    assert elapsed < 8, f"{elapsed:.1f} s"
    assert isinstance(err, MalformedResponseError)
    assert "max_response_bytes=16777216 " in str(err) and "pass a larger max_response_bytes" in str(err)
    assert adapter.max_response_bytes == MAX_RESPONSE_BYTES == 16 * MiB
    assert server.stats()["total"] == 1  # not retried


def test_the_cap_is_configurable_and_applies_to_the_embedder_and_batches(servers, adapters):
    bomb = servers(faults={"gzip_bomb": 1.0}, bomb_bytes=64 * MiB)
    embedder = adapters(OpenAICompatibleEmbedder("e", base_url=bomb.base_url, max_response_bytes=MiB, **FAST))
    err, peak, _ = _peak_while(lambda: embedder.embed(["a", "b"]))
    assert isinstance(err, MalformedResponseError) and "1048576" in str(err)
    assert peak < 50 * MiB

    endless = servers(faults={"endless": 1.0})
    adapter = adapters(OpenAICompatibleAdapter("m", base_url=endless.base_url, max_response_bytes=MiB, **FAST))
    frame = judge_many(LLMJudge(adapter), [ITEM, ITEM], progress=False)
    assert frame["status"].tolist() == ["error", "error"]
    assert all(e.startswith("MalformedResponseError") and "max_response_bytes" in e for e in frame["error"])

    # a normal reply, plain or gzip-encoded, passes; over a small cap it does not (no body read needed)
    fine = servers(faults={"gzip": 0.5})
    ok = adapters(OpenAICompatibleAdapter("m", base_url=fine.base_url, **FAST))
    assert [ok.complete(f"p{i}", RunConfig()).content for i in range(4)] == [default_reply(f"p{i}") for i in range(4)]
    assert fine.stats()["by_outcome"].get("gzip", 0) >= 1
    vectors = adapters(OpenAICompatibleEmbedder("e", base_url=fine.base_url, **FAST)).embed(["a", "b", "c"])
    assert len(vectors) == 3
    tiny = adapters(OpenAICompatibleAdapter("m", base_url=fine.base_url, max_response_bytes=64, **FAST))
    with pytest.raises(MalformedResponseError, match="max_response_bytes=64 "):
        tiny.complete("p0", RunConfig())

    for bad in (0, -1, 1.5, True, None, "16"):
        with pytest.raises(ValidationError, match="max_response_bytes"):
            OpenAICompatibleAdapter("m", base_url=fine.base_url, max_response_bytes=bad)


# -- secrets ------------------------------------------------------------------------------------------

SECRET = "sk-test-SECRET-XYZ-4f1c9a7be2d3068a5b"
SECRET_MARKS = (SECRET, "SECRET-XYZ", "4f1c9a7be2d3068a5b")


def _all_text_under(path: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(path.rglob("*")) if p.is_file())


def _calibration_html(judge: LLMJudge, items: list[dict], tmp_path: Path) -> str:
    """Calibrate the HTTP judge against exact match and human labels and write the HTML report."""
    from llm_connect import ExactMatchJudge
    from llm_connect.calibration import calibrate

    labelled = [{**item, "human": i % 2 == 0} for i, item in enumerate(items)]
    report = calibrate(
        {"http": judge, "exact": ExactMatchJudge()},
        labelled,
        human="human",
        probes=["injection", "length"],
        probe_limit=10,
        n_boot=50,
        concurrency=8,
        progress=False,
    )
    path = report.to_html(tmp_path / "report.html")
    return path.read_text(encoding="utf-8") + "\n" + report.scores.to_csv()


@pytest.mark.slow
def test_an_api_key_never_reaches_ledgers_logs_reprs_errors_or_reports(tmp_path, monkeypatch, caplog, capfd):
    from llm_connect.adapters import OpenAICompatibleAdapter
    from llm_connect.testing.loopback import LoopbackServer

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    errors: list[BaseException] = []
    faults = {"429": 0.1, "500": 0.1, "truncated": 0.1, "hang": 0.05, "no_usage": 0.05}
    items = [{"prompt": f"q{i}", "baseline": f"a{i}", "candidate": f"c{i}", "id": i} for i in range(60)]
    ledger = QualityLedger(tmp_path / "ledger.jsonl")

    with (
        LoopbackServer(require_api_key=SECRET, faults=faults, retry_after="0.01", hang_s=2.0, seed=3) as good,
        LoopbackServer(require_api_key="sk-the-right-key-000000000") as refusing,
    ):
        adapter = OpenAICompatibleAdapter(
            "loopback-judge",
            base_url=good.base_url,
            timeout_s=0.5,
            max_retries=1,
            backoff_initial_s=0.01,
            cache=tmp_path / "cache",
        )
        df = judge_many(LLMJudge(adapter), items, concurrency=8, progress=True, ledger=ledger, task_type="qa")
        texts.append(_calibration_html(LLMJudge(adapter), items[:30], tmp_path))
        assert good.requests[0].headers["Authorization"] == f"Bearer {SECRET}"  # the key was really used
        assert (df["status"] == "error").any() and (df["status"] == "scored").any()

        refused = OpenAICompatibleAdapter("loopback-judge", base_url=refusing.base_url)
        explicit = OpenAICompatibleAdapter("loopback-judge", base_url=refusing.base_url, api_key=SECRET)
        with pytest.raises(ValidationError, match="holds credentials") as info:  # key in the URL and a key set
            OpenAICompatibleAdapter(
                "loopback-judge", base_url=refusing.base_url.replace("http://", f"http://user:{SECRET}@")
            )
        credentials_error = info.value
        in_url = OpenAICompatibleAdapter(  # the key only in the URL (a proxy's basic auth), none in the environment
            "loopback-judge",
            base_url=refusing.base_url.replace("http://", f"http://user:{SECRET}@"),
            api_key="",
        )
        df401 = judge_many(LLMJudge(refused), items[:5], progress=False)
        assert (df401["status"] == "error").all()
        for a in (refused, explicit):
            with pytest.raises(AuthenticationError) as info:
                a.complete("hello")
            errors.append(info.value)
        with pytest.raises(Exception) as info:  # whatever fails, its text must not hold the key
            in_url.complete("hello")
        errors.append(info.value)
        # the provider's message is kept, with the key it echoed scrubbed
        assert "Incorrect API key provided: Bearer ***" in str(errors[0])
        errors.append(credentials_error)
        assert any(SECRET in r.headers.get("Authorization", "") for r in refusing.requests)

        for a in (adapter, refused, explicit, in_url):
            texts += [repr(a), str(a), repr(LLMJudge(a))]
            with pytest.raises(TypeError):
                pickle.dumps(a)
            a.close()

    texts += [df.to_csv(), df401.to_csv(), df.to_html()]
    for exc in errors:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        texts += [str(getattr(exc, "provider_message", ""))]
    texts.append(_all_text_under(tmp_path))  # ledger, response cache, report
    captured = capfd.readouterr()
    texts += [captured.out, captured.err, caplog.text]
    texts += [r.getMessage() for r in caplog.records]

    everything = "\n".join(texts)
    assert len(ledger.read_all()) == (df["status"] == "scored").sum() > 0
    for mark in SECRET_MARKS:
        assert mark not in everything, f"the API key leaked ({mark!r})"


# -- the embedding cache holds a bounded number of vectors, released on close --------------------------------


def test_the_embedding_cache_holds_a_bounded_memo_released_on_close(tmp_path):
    """``get_vector`` went through a module-level ``functools.cache``: every vector read stayed in memory for
    good (even after ``close()``), and a caller that changed the list it got changed the cache's copy."""
    from llm_connect.adapters import ResponseCache
    from llm_connect.adapters._cache import _MEMO_FLOATS

    cache = ResponseCache(tmp_path / "cache")
    dims, n = 512, 3000  # 1.5 M floats: more than the memo holds (1 M)
    for i in range(n):
        cache.put_vector(f"k{i}", [float(i)] * dims)
    first = cache.get_vector("k0")
    first[0] = -1.0  # the caller's list is its own
    assert cache.get_vector("k0")[0] == 0.0
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            assert cache.get_vector(f"k{i}")[1] == float(i)
        held = tracemalloc.get_traced_memory()[0] - base
        assert cache._memo_floats <= _MEMO_FLOATS
        assert held < 8 * _MEMO_FLOATS * 1.5, held  # 8 bytes a float, and a little for the keys
        cache.close()
        assert tracemalloc.get_traced_memory()[0] - base < 2_000_000  # released
    finally:
        tracemalloc.stop()

