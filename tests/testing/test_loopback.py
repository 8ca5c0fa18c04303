"""The loopback server itself: modes, determinism, counters, bounds."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest
from interruptible import python_argv

from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.core import RunConfig
from llm_connect.testing.loopback import LoopbackServer, default_reply


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _chat(prompt: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": prompt}]}


def test_default_reply_is_a_deterministic_judge_verdict():
    verdict = json.loads(default_reply("some prompt"))
    assert set(verdict) == {"quality_score", "notes"}
    assert 0.0 <= verdict["quality_score"] <= 1.0
    assert default_reply("some prompt") == default_reply("some prompt")
    assert default_reply("some prompt") != default_reply("another prompt")


def test_thread_mode_serves_and_stops():
    with LoopbackServer(reply=lambda p: p.upper()) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.anthropic_base_url + "/v1" == server.base_url
        status, body = _post(server.base_url + "/chat/completions", _chat("hello"))
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "HELLO"
        status, body = _post(
            server.url + "/v1/messages",
            {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert body["content"][0]["text"] == "HI"
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"]
        assert server.stats()["total"] == 2
        assert [r.path for r in server.requests] == ["/v1/chat/completions", "/v1/messages"]
        url = server.base_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=2)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


def test_faults_are_deterministic_by_seed_and_reset_replays_them():
    def outcomes(seed: int) -> list[str]:
        with LoopbackServer(faults={"429": 0.3, "500": 0.2, "no_usage": 0.1}, seed=seed) as server:
            for i in range(40):
                _post(server.base_url + "/chat/completions", _chat(f"p{i}"))
            first = [r.outcome for r in server.requests]
            server.reset()
            assert server.stats()["total"] == 0
            for i in range(40):
                _post(server.base_url + "/chat/completions", _chat(f"p{i}"))
            assert [r.outcome for r in server.requests] == first
            return first

    a = outcomes(1)
    assert a == outcomes(1)
    assert a != outcomes(2)
    assert {"429", "500", "no_usage", "ok"} <= set(a)


def test_fail_first_then_succeed_and_error_bodies():
    with LoopbackServer(fail_first=2, fail_first_with="429", retry_after="7") as server:
        status, body = _post(server.base_url + "/chat/completions", _chat("x"))
        assert status == 429
        assert "loopback fault 429" in body["error"]["message"]
        status, body = _post(server.url + "/v1/messages", {"messages": [{"role": "user", "content": "x"}]})
        assert status == 429
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        status, _ = _post(server.base_url + "/chat/completions", _chat("x"))
        assert status == 200
        assert server.stats()["by_outcome"] == {"429": 2, "ok": 1}


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_body_faults_gzip_bomb_endless_and_echoed_auth(mode):
    bomb = 3 * 1024 * 1024 + 7
    with LoopbackServer(
        mode=mode,
        faults={"gzip": 0.2, "gzip_bomb": 0.2, "endless": 0.2, "echo_auth": 0.2, "echo_auth_json": 0.2},
        bomb_bytes=bomb,
        seed=3,
    ) as server:
        seen = set()
        for _ in range(40):
            url = server.base_url + "/chat/completions"
            request = urllib.request.Request(
                url, data=json.dumps(_chat("x")).encode(), headers={"Authorization": "Bearer sk-echo-me-123"}
            )
            with urllib.request.urlopen(request, timeout=30) as resp:
                encoding = resp.headers.get("Content-Encoding")
                if resp.headers.get("Transfer-Encoding") == "chunked" and encoding is None:
                    assert len(resp.read(2 * 1024 * 1024)) == 2 * 1024 * 1024  # endless: far more than that
                    seen.add("endless")
                    continue
                data = resp.read()
            if encoding == "gzip" and len(data) < 100_000 and len(data) > 1000:
                out = gzip.decompress(data)  # a valid gzip stream of bomb_bytes zeros, ~1 KiB a MiB on the wire
                assert len(out) == bomb and not out.strip(b"\0")
                seen.add("gzip_bomb")
            elif encoding == "gzip":
                assert json.loads(gzip.decompress(data))["choices"][0]["message"]["content"] == default_reply("x")
                seen.add("gzip")
            elif data.startswith(b"{"):
                assert "Bearer sk-echo-me-123" in json.loads(data)["detail"]
                seen.add("echo_auth_json")
            else:
                assert b"Authorization: Bearer sk-echo-me-123" in data
                seen.add("echo_auth")
        assert seen == {"gzip", "gzip_bomb", "endless", "echo_auth", "echo_auth_json"}


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="unknown fault"):
        LoopbackServer(faults={"explode": 0.1})
    with pytest.raises(ValueError, match="sum to <= 1"):
        LoopbackServer(faults={"500": 0.7, "429": 0.7})
    with pytest.raises(ValueError, match="mode"):
        LoopbackServer(mode="cluster")
    with pytest.raises(ValueError, match="callable reply"):
        LoopbackServer(mode="process", reply=lambda p: p)


def test_process_mode_serves_counts_and_exits():
    server = LoopbackServer(mode="process", latency_s=0.01, reply="fixed")
    with server:
        adapter = OpenAICompatibleAdapter("m", base_url=server.base_url)
        try:
            assert adapter.complete("hi", RunConfig()).content == "fixed"
        finally:
            adapter.close()
        stats = server.stats()
        assert stats["total"] == 1
        assert stats["by_outcome"] == {"ok": 1}
        with pytest.raises(RuntimeError, match="thread"):
            _ = server.requests
        process = server._process
        assert process is not None
        server.reset()
        assert server.stats()["total"] == 0
    assert process.returncode is not None


def test_a_dropped_server_stops():
    import gc

    server = LoopbackServer().start()
    thread = server._thread
    assert thread is not None and thread.is_alive()
    del server
    gc.collect()
    thread.join(10)
    assert not thread.is_alive()


def test_run_as_a_program_it_prints_its_base_url_serves_without_a_key_and_stops_on_ctrl_c():
    import os
    import re
    import signal
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    # python_argv: the child takes Ctrl-C even when this runner ignores SIGINT (nohup)
    proc = subprocess.Popen(python_argv("-m", "llm_connect.testing.loopback", "--port", "0"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:(\d+)/v1)\b", first)
        assert match, first
        assert "no API key needed" in first
        base_url = match.group(1)
        adapter = OpenAICompatibleAdapter("loopback-model", base_url=base_url)  # no key: a server on localhost
        try:
            reply = adapter.complete("Rate this answer", RunConfig()).content
        finally:
            adapter.close()
        assert reply == default_reply("Rate this answer")
        assert "--base-url " + base_url in proc.stdout.readline()  # the next line shows how to use it
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err


def test_a_port_in_use_is_one_line_not_a_traceback():
    import subprocess
    import sys

    with LoopbackServer() as server:
        proc = subprocess.run([sys.executable, "-m", "llm_connect.testing.loopback", "--port", str(server.port)],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert f"cannot listen on 127.0.0.1:{server.port}" in proc.stderr and "Traceback" not in proc.stderr
