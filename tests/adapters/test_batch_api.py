"""Provider Batch APIs (issue 30): judge_many(..., batch=True) against the loopback server's OpenAI and
Anthropic Batch APIs, driven through the real adapters; including a kill-and-resume in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pandas as pd
import pytest

from llm_connect import QualityLedger, RunConfig
from llm_connect.adapters import (
    AnthropicAdapter,
    BatchOptions,
    OpenAICompatibleAdapter,
    ResponseCache,
    pricing,
    resubmit_expired,
)
from llm_connect.adapters._batches import state_subfolder
from llm_connect.core import LLMResponse
from llm_connect.grading import GradingResult, LLMJudge, ajudge_many, judge_many
from llm_connect.testing import LoopbackServer
from llm_connect.testing._batch_api import batch_stats, release_batches
from llm_connect.testing.loopback import default_reply

COLUMNS = ["prompt", "baseline", "candidate", "id", "quality_score", "notes", "grader_id", "status", "error",
           "judge_tokens_in", "judge_tokens_out"]
FAST = {"poll_interval_s": 0.0, "poll_max_interval_s": 0.01, "progress": False}


def items(n: int) -> list[dict]:
    return [{"prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"reply {i % 7}", "id": i}
            for i in range(n)]


def openai(server: LoopbackServer, **kw) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter("gpt-4o-mini", base_url=server.base_url, max_retries=0, **kw)


def anthropic(server: LoopbackServer, **kw) -> AnthropicAdapter:
    return AnthropicAdapter("claude-3-haiku", base_url=server.anthropic_base_url, max_retries=0, **kw)


def same_rows(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a[COLUMNS].reset_index(drop=True), b[COLUMNS].reset_index(drop=True))
    assert list(a.columns) == list(b.columns)


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_batched_rows_equal_direct_rows_at_half_the_cost(make, tmp_path):
    with LoopbackServer(batch={"polls": 3}) as server:
        judge = LLMJudge(make(server))
        direct = judge_many(judge, items(25), progress=False)
        before = batch_stats(server).get("submissions", 0)
        calls_before = server.stats()["total"]
        batched = judge_many(judge, items(25), progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
        assert stats["submissions"] - before == 1  # one batch for the whole run
        assert server.stats()["total"] == calls_before  # no direct chat call was made
    same_rows(direct, batched)
    assert (batched["status"] == "scored").all()
    assert batched["judge_cost_usd"].sum() == pytest.approx(direct["judge_cost_usd"].sum() * pricing.BATCH_DISCOUNT)
    assert batched.attrs["batch"]["rounds"] == 1
    assert batched.attrs["batch"]["collected"] == batched.attrs["batch"]["submitted"]


def test_async_twin_and_logprobs_and_cache(tmp_path):
    with LoopbackServer() as server:
        cache = ResponseCache(tmp_path / "cache")
        adapter = openai(server, cache=cache)
        rc = RunConfig(top_logprobs=3)
        direct = openai(server).complete("hello there", rc)

        from llm_connect.adapters._batches import BatchCollector

        collector = BatchCollector(1, BatchOptions(**FAST))

        async def one(_: int):
            return await adapter.acomplete("hello there", rc)

        import asyncio

        from llm_connect._runtime import run_sync

        async def run():
            return await asyncio.gather(collector.wrap(one)(0))

        (batched,) = run_sync(run())
        assert batched.content == direct.content and batched.logprobs == direct.logprobs
        assert (batched.tokens_in, batched.tokens_out) == (direct.tokens_in, direct.tokens_out)
        assert batched.cost_usd == pytest.approx(direct.cost_usd / 2)
        assert len(cache) == 1  # the collected reply went into the response cache: the normal path serves it
        assert adapter.complete("hello there", rc).cached

        judge = LLMJudge(openai(server))
        direct_rows = judge_many(judge, items(6), progress=False)
        rows = run_sync(ajudge_many(judge, items(6), progress=False, batch=BatchOptions(**FAST)))
        same_rows(direct_rows, rows)


def test_ledger_records_equal_and_state_beside_the_ledger(tmp_path):
    with LoopbackServer() as server:
        judge = LLMJudge(openai(server))
        plain = QualityLedger(tmp_path / "plain.jsonl")
        batched = QualityLedger(tmp_path / "batched.jsonl")
        a = judge_many(judge, items(10), ledger=plain, task_type="qa", progress=False)
        b = judge_many(judge, items(10), ledger=batched, task_type="qa", progress=False, batch=BatchOptions(**FAST))
    same_rows(a, b)

    def records(ledger):
        out = []
        for o in ledger.recent(100):
            tags = dict(o.tags)
            cost = tags.pop("judge_cost_usd")
            out.append((json.dumps(tags, sort_keys=True, default=str), o.quality_score, o.task_type, round(cost, 12)))
        return sorted(out)

    assert [r[:3] for r in records(plain)] == [r[:3] for r in records(batched)]
    assert [r[3] / 2 for r in records(plain)] == pytest.approx([r[3] for r in records(batched)])  # the discount
    assert not (tmp_path / "batched.jsonl.batches").exists()  # a finished run leaves no state


def test_per_request_errors_carry_the_providers_reason():
    with LoopbackServer(batch={"fail_every": 4}) as server:
        for make in (openai, anthropic):
            rows = judge_many(LLMJudge(make(server)), items(12), progress=False, batch=BatchOptions(**FAST))
            failed = rows[rows["status"] == "error"]
            assert list(failed.index) == [3, 7, 11]
            assert failed["error"].str.contains("BatchRequestError").all()
            assert failed["error"].str.contains("max_tokens is too large").all()
            assert (rows.drop(failed.index)["status"] == "scored").all()


def test_limits_split_a_run_into_several_batches():
    with LoopbackServer(batch={"max_requests": 5}) as server:
        rows = judge_many(LLMJudge(openai(server)), items(12), progress=False,
                          batch=BatchOptions(max_requests=5, **FAST))
        stats = batch_stats(server)
    assert (rows["status"] == "scored").all()
    assert stats["submissions"] == 3
    assert sorted(stats["requests_per_batch"].values()) == [2, 5, 5]


def test_byte_limit_splits_too():
    with LoopbackServer() as server:
        rows = judge_many(LLMJudge(anthropic(server)), items(8), progress=False,
                          batch=BatchOptions(max_bytes=4000, **FAST))
        stats = batch_stats(server)
    assert (rows["status"] == "scored").all()
    assert stats["submissions"] > 1


def test_expired_batch_errors_then_resubmit_with_one_call(tmp_path):
    state = tmp_path / "state"
    with LoopbackServer(batch={"expire_after": 4}) as server:
        judge = LLMJudge(openai(server))
        direct = judge_many(judge, items(10), progress=False)
        rows = judge_many(judge, items(10), progress=False, batch=BatchOptions(state_dir=state, **FAST))
        assert (rows["status"].iloc[:4] == "scored").all()
        assert (rows["status"].iloc[4:] == "error").all()
        assert rows["error"].iloc[4:].str.contains("expired").all()
        assert (state / "state.json").exists()  # kept: the unfinished requests can be resubmitted
        assert resubmit_expired(state) == 6
        server._core.batch_api.expire_after = None
        again = judge_many(judge, items(10), progress=False, batch=BatchOptions(state_dir=state, **FAST))
        stats = batch_stats(server)
    assert stats["requests_submitted"] == 10 + 6  # only the expired requests were sent again
    same_rows(direct, again)
    assert not state.exists()


def test_cancelled_batch_becomes_error_rows():
    with LoopbackServer(batch={"hold": True}) as server:
        out: dict = {}
        judge = LLMJudge(anthropic(server))
        thread = threading.Thread(target=lambda: out.setdefault("rows", judge_many(
            judge, items(5), progress=False, batch=BatchOptions(**FAST))))
        thread.start()
        deadline = time.monotonic() + 20
        while not batch_stats(server).get("batch_ids") and time.monotonic() < deadline:
            time.sleep(0.01)
        (batch_id,) = batch_stats(server)["batch_ids"]
        request = urllib.request.Request(f"{server.url}/v1/messages/batches/{batch_id}/cancel", data=b"{}",
                                         method="POST")
        urllib.request.urlopen(request, timeout=10).read()
        thread.join(30)
    rows = out["rows"]
    assert (rows["status"] == "error").all()
    assert rows["error"].str.contains("cancelled").all()


def test_validation_failure_gives_the_providers_reason():
    with LoopbackServer(batch={"validation_error": "the model does not support batches"}) as server:
        rows = judge_many(LLMJudge(openai(server)), items(3), progress=False, batch=BatchOptions(**FAST))
    assert (rows["status"] == "error").all()
    assert rows["error"].str.contains("does not support batches").all()


class TwoStepJudge:
    """A compound judge whose second call depends on the first reply: two rounds."""

    grader_id = "two-step"

    def __init__(self, adapter):
        self.adapter = adapter

    def judge(self, baseline, candidate, *, prompt, run_config):
        first = self.adapter.complete(f"summarise: {candidate.content}", run_config)
        second = self.adapter.complete(f"grade {first.content[:40]} against {baseline.content}", run_config)
        score = json.loads(second.content)["quality_score"]
        return GradingResult(quality_score=score, grader_id=self.grader_id, notes="two steps",
                             tokens_in=first.tokens_in + second.tokens_in,
                             tokens_out=first.tokens_out + second.tokens_out,
                             cost_usd=first.cost_usd + second.cost_usd)


def test_compound_judge_runs_as_rounds():
    with LoopbackServer() as server:
        judge = TwoStepJudge(openai(server))
        direct = judge_many(judge, items(8), progress=False)
        rows = judge_many(judge, items(8), progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    same_rows(direct, rows)
    assert rows.attrs["batch"]["rounds"] == 2
    assert stats["submissions"] == 2


def test_budget_is_reserved_before_submission():
    pricing.register_price("budget-model", 1000.0, 1000.0)
    with LoopbackServer() as server:
        adapter = OpenAICompatibleAdapter("budget-model", base_url=server.base_url, max_retries=0)
        one = adapter._cost(50, 256, batch=True)  # about one request's reservation
        rows = judge_many(LLMJudge(adapter), items(10), progress=False, budget=one * 3.5,
                          batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["requests_submitted"] < 10  # what the budget cannot cover is never submitted
    assert rows["error"].fillna("").str.contains("budget exhausted").sum() == 10 - stats["requests_submitted"]
    assert rows.attrs["budget"]["spent_usd"] <= one * 3.5


def _probe(server: LoopbackServer) -> dict:
    return batch_stats(server)


CHILD = textwrap.dedent("""
    import json, sys
    from llm_connect import QualityLedger
    from llm_connect.adapters import OpenAICompatibleAdapter
    from llm_connect.grading import LLMJudge, judge_many
    base_url, ledger, out = sys.argv[1:4]
    items = [{"prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"reply {i % 7}", "id": i}
             for i in range(30)]
    judge = LLMJudge(OpenAICompatibleAdapter("gpt-4o-mini", base_url=base_url, max_retries=0))
    rows = judge_many(judge, items, ledger=QualityLedger(ledger), task_type="qa", progress=False, batch=True)
    rows[["quality_score", "status", "error", "judge_tokens_in", "judge_tokens_out", "notes"]].to_json(out)
""")


def test_killed_mid_poll_resumes_the_same_batch(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ledger = tmp_path / "ledger.jsonl"
    env = {**os.environ, "LLM_CONNECT_BATCH_POLL_S": "0.02"}
    with LoopbackServer(batch={"hold": True}) as server:
        direct = judge_many(LLMJudge(openai(server)), items(30), progress=False)
        child = subprocess.Popen([sys.executable, str(script), server.base_url, str(ledger), str(tmp_path / "a")],
                                 env=env)
        deadline = time.monotonic() + 60
        while _probe(server).get("polls", 0) < 3 and time.monotonic() < deadline:
            assert child.poll() is None
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        first = batch_stats(server)
        assert first["submissions"] == 1
        assert (tmp_path / "ledger.jsonl.batches" / "state.json").exists()
        saved = json.loads((tmp_path / "ledger.jsonl.batches" / "state.json").read_text())
        assert [b["batch_id"] for b in saved["batches"]] == first["batch_ids"]
        release_batches(server)
        rerun = subprocess.run([sys.executable, str(script), server.base_url, str(ledger), str(tmp_path / "b")],
                               env=env, timeout=120)
        assert rerun.returncode == 0
        second = batch_stats(server)
    assert second["submissions"] == 1  # collected, never submitted again
    assert second["batch_ids"] == first["batch_ids"]
    resumed = pd.read_json(tmp_path / "b")
    cols = ["quality_score", "status", "judge_tokens_in", "judge_tokens_out", "notes"]
    pd.testing.assert_frame_equal(resumed[cols].reset_index(drop=True), direct[cols].reset_index(drop=True),
                                  check_dtype=False)
    assert len(QualityLedger(ledger).recent(100)) == 30
    assert not (tmp_path / "ledger.jsonl.batches").exists()


def test_response_type_unchanged():
    assert LLMResponse  # the batched reply is an LLMResponse (see test_async_twin_and_logprobs_and_cache)


def test_calibrate_and_score_items_pass_batch_through(tmp_path):
    """calibrate(..., batch=...) sends every judge's calls through the Batch API, one state folder per judge,
    and its agreement figures are those of the run without batch."""
    from llm_connect.calibration import calibrate, score_items
    from llm_connect.grading import ExactMatchJudge

    rows = [{**row, "human": i % 2 == 0} for i, row in enumerate(items(12))]
    with LoopbackServer(batch={"polls": 2}) as server:
        judges = {"llm": LLMJudge(openai(server)), "exact": ExactMatchJudge()}
        direct = calibrate(judges, rows, human="human", probes=None, n_boot=50, progress=False)
        before = batch_stats(server).get("submissions", 0)
        state = tmp_path / "state"
        batched = calibrate(judges, rows, human="human", probes=None, n_boot=50, progress=False,
                            batch=BatchOptions(state_dir=state, keep_state=True, **FAST))
        assert batch_stats(server)["submissions"] - before == 1  # the LLM judge's one batch; exact match pays nothing
        frame = score_items(judges, rows, human="human", progress=False, batch=BatchOptions(**FAST))
    pd.testing.assert_frame_equal(direct.agreement.frame, batched.agreement.frame)
    assert state_subfolder(state, "llm").is_dir()  # the judge's own state folder
    assert state_subfolder(state, "llm").name.startswith("llm-")
    assert frame["score_llm"].tolist() == direct.scores["score_llm"].tolist()


def test_cli_calibrate_batch_goes_through_the_batch_api(tmp_path, monkeypatch):
    """``llm-connect calibrate --batch``: the LLM judge's calls go out as one batch, state under OUT/batches."""
    from llm_connect.cli import main

    monkeypatch.setenv("LLM_CONNECT_BATCH_POLL_S", "0.01")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({**row, "human": i % 2 == 0}) + "\n" for i, row in enumerate(items(8))),
                    encoding="utf-8")
    with LoopbackServer(batch={"polls": 1}) as server:
        out = tmp_path / "out"
        code = main(["calibrate", str(data), "--out", str(out), "--judges", "llm", "--llm", "openai:gpt-4o-mini",
                     "--base-url", server.base_url, "--probes", "none", "--n-boot", "50", "--no-progress",
                     "--no-cache", "--batch"])
        assert code == 0
        assert batch_stats(server)["submissions"] == 1
        assert server.stats()["total"] == 0  # no direct chat call: every reply came from the batch
    scores = pd.read_csv(out / "scores.csv")
    assert (scores["status_llm-judge"] == "scored").all()


def test_max_wait_keeps_the_state_and_the_rerun_collects_without_paying_twice(tmp_path):
    """A run that stops polling at ``max_wait_s`` leaves its submitted batches in the state: the same call later
    collects them (one submission in all), and only then is the state removed."""
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    state = tmp_path / "ledger.jsonl.batches"
    with LoopbackServer(batch={"hold": True}) as server:
        judge = LLMJudge(openai(server))
        direct = judge_many(judge, items(6), progress=False)
        impatient = BatchOptions(max_wait_s=0.2, poll_interval_s=0.02, progress=False)
        stopped = judge_many(judge, items(6), ledger=ledger, task_type="qa", progress=False, batch=impatient)
        assert (stopped["status"] == "error").all()
        assert stopped["error"].str.contains("did not end within max_wait_s=0.2s; they stay submitted").all()
        assert (state / "state.json").exists()  # kept: the batch was submitted, not collected
        assert ledger.recent(10) == []
        release_batches(server)
        again = judge_many(judge, items(6), ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["submissions"] == 1  # collected, never submitted again
    same_rows(direct, again[direct.columns])
    assert len(ledger.recent(10)) == 6
    assert not state.exists()


def test_max_wait_without_a_state_folder_says_a_rerun_submits_again():
    with LoopbackServer(batch={"hold": True}) as server:
        rows = judge_many(LLMJudge(openai(server)), items(2), progress=False,
                          batch=BatchOptions(max_wait_s=0.1, poll_interval_s=0.02, progress=False))
    assert rows["error"].str.contains("state was temporary").all()


def test_pipeline_run_many_batches_each_round(tmp_path):
    """Pipeline.run_many(batch=...): a layer of two units is one round, a verifier that reads their replies the
    next; the rows are those of the run without batch."""
    from llm_connect.pipelines import BooleanScale, JudgeUnit, Layer, MajorityPool, Pipeline, VerifyUnit

    prompt = "Question: {prompt}\nReference: {baseline}\nAnswer: {candidate}\nIs the answer right?"
    def reply(text: str) -> str:  # a verdict the units read: "reply 3" is wrong, the rest right
        return "Reasoning: compared with the reference.\nVerdict: " + ("no" if "reply 3" in text else "yes")

    with LoopbackServer(batch={"polls": 2}, reply=reply) as server:
        voted = Pipeline(Layer([JudgeUnit(prompt, BooleanScale(), name="a"),
                                JudgeUnit(prompt + " Be strict.", BooleanScale(), name="b")]) >> MajorityPool(),
                         adapter=openai(server), name="vote")
        verified = Pipeline(JudgeUnit(prompt, BooleanScale(), name="j", explanation=True) >> VerifyUnit(),
                            adapter=openai(server), name="verified")
        for pipeline, rounds in ((voted, 1), (verified, 2)):
            before = batch_stats(server).get("submissions", 0)
            billed = [batch_stats(server).get(k, 0) for k in ("billed_tokens_in", "billed_tokens_out")]
            direct = pipeline.run_many(items(9), progress=False)
            assert (direct["status"] == "scored").all() and set(direct["quality_score"]) == {0.0, 1.0}
            chats = server.stats()["total"]
            batched = pipeline.run_many(items(9), progress=False, batch=BatchOptions(**FAST))
            assert batch_stats(server)["submissions"] - before == rounds
            assert server.stats()["total"] == chats  # no direct chat call in the batched run
            assert batched.attrs["batch"]["rounds"] == rounds
            cols = [c for c in direct.columns if c not in ("latency_ms", "cost_usd", "judge_cost_usd", "trace")]
            pd.testing.assert_frame_equal(direct[cols], batched[cols])
            # the rows' costs add up to the provider's bill: the verifier's identical requests were sent (and
            # billed) once, so the batched run costs at most half the direct one
            stats = batch_stats(server)
            bill = pipeline.adapter._cost(stats["billed_tokens_in"] - billed[0], stats["billed_tokens_out"] - billed[1],
                                          batch=True)
            assert batched["judge_cost_usd"].sum() == pytest.approx(bill)
            assert bill <= direct["judge_cost_usd"].sum() * pricing.BATCH_DISCOUNT * (1 + 1e-9)


def test_cli_grade_batch_killed_mid_poll_resumes_and_records_once(tmp_path):
    """``llm-connect grade --batch``: killed while it polls, the same command collects the submitted batch
    (one submission in all), records every judgment once, and removes its state (LEDGER.batches)."""
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({**row, "human": i % 3 != 0}) + "\n" for i, row in enumerate(items(12))),
                    encoding="utf-8")
    ledger = tmp_path / "ledger.jsonl"
    env = {**os.environ, "LLM_CONNECT_BATCH_POLL_S": "0.02", "OPENAI_API_KEY": "sk-test"}
    with LoopbackServer(batch={"hold": True}) as server:
        command = [sys.executable, "-m", "llm_connect.cli", "grade", str(data), "--judge", "llm", "--llm",
                   "openai:gpt-4o-mini", "--base-url", server.base_url, "--ledger", str(ledger), "--task-type", "qa",
                   "--no-progress", "--batch"]
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while batch_stats(server).get("polls", 0) < 3 and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=10)
        assert (tmp_path / "ledger.jsonl.batches" / "state.json").exists()
        release_batches(server)
        rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        stats = batch_stats(server)
        assert server.stats()["total"] == 0  # no direct chat call
    assert rerun.returncode == 0, rerun.stderr
    assert stats["submissions"] == 1  # collected, never submitted again
    assert "12 scored" in rerun.stdout and "12 human label(s)" in rerun.stdout
    assert "0 provider batch(es) submitted, 1 collected" in rerun.stdout
    recorded = QualityLedger(ledger).read_all()
    assert sum(o.tags.get("grader_id") == "llm-judge" for o in recorded) == 12
    assert not (tmp_path / "ledger.jsonl.batches").exists()


def test_cli_grade_batch_human_stopped_mid_poll_records_no_label_and_the_rerun_records_each_once(tmp_path):
    """``llm-connect grade --batch --human`` stopped with Ctrl-C while it polls has judged nothing: it records
    no label and exits 1 with the first error. The same command collects the batch and records every judgment
    and label once; a third run records nothing and says how many it found."""
    from interruptible import python_argv

    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({**row, "human": i % 3 != 0}) + "\n" for i, row in enumerate(items(12))),
                    encoding="utf-8")
    ledger = tmp_path / "ledger.jsonl"
    env = {**os.environ, "LLM_CONNECT_BATCH_POLL_S": "0.02", "OPENAI_API_KEY": "sk-test"}
    with LoopbackServer(batch={"hold": True}) as server:
        args = ["grade", str(data), "--judge", "llm", "--llm", "openai:gpt-4o-mini", "--base-url", server.base_url,
                "--ledger", str(ledger), "--task-type", "qa", "--no-progress", "--batch"]
        # python_argv: the child takes Ctrl-C even when this runner ignores SIGINT (nohup)
        child = subprocess.Popen(python_argv("-m", "llm_connect.cli", *args), env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while batch_stats(server).get("polls", 0) < 3 and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 1, (out, err)
        assert "0 scored" in out and "0 human label(s)" in out
        assert "scored no row; first error: interrupted" in err and "no label was recorded" in err
        assert not ledger.exists() or not QualityLedger(ledger).read_all()
        release_batches(server)
        command = [sys.executable, "-m", "llm_connect.cli", *args]
        reruns = [subprocess.run(command, env=env, capture_output=True, text=True, timeout=120) for _ in range(2)]
    assert [r.returncode for r in reruns] == [0, 0], reruns[0].stderr
    assert "recorded 12 judgment(s) and 12 human label(s)" in reruns[0].stdout
    assert "recorded 0 judgment(s) and 0 human label(s)" in reruns[1].stdout
    assert "12 judgment(s) and 12 label(s) already in the ledger, not recorded again" in reruns[1].stdout
    recorded = QualityLedger(ledger).read_all()
    assert sorted(o.tags["grader_id"] for o in recorded) == ["human"] * 12 + ["llm-judge"] * 12


def test_cli_grade_batch_mistakes_exit_2(tmp_path, capsys):
    from llm_connect.cli import main

    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in items(2)), encoding="utf-8")
    common = ["grade", str(data), "--judge", "exact-match", "--task-type", "qa", "--no-progress"]
    for extra, said in ((["--ledger", str(tmp_path / "l.jsonl"), "--batch-state", str(tmp_path / "s")], "add --batch"),
                        (["--ledger", "s3://bucket/ledger", "--batch"], "--batch-state DIR")):
        with pytest.raises(SystemExit) as stopped:
            main([*common, *extra])
        assert stopped.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
    # a judge that calls no provider: judged as usual, and told
    assert main([*common, "--ledger", str(tmp_path / "l.jsonl"), "--batch"]) == 0
    captured = capsys.readouterr()
    assert "2 scored" in captured.out and "nothing went through a Batch API: exact-match" in captured.err


def test_grade_datasets_actor_keeps_a_state_per_ray_batch_and_resumes_it(tmp_path):
    """grade_dataset(batch=...)'s actor, run in this process (the Ray run is in test_distributed.py): a Ray
    batch's provider batch lives in its own folder named by its rows, so the actor that runs the same Ray
    batch again (a restarted actor, or the job run again) collects it instead of submitting again."""
    from llm_connect.distributed import RESUMED
    from llm_connect.distributed._actor import GradingActor

    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    frame = pd.DataFrame(items(8))
    with LoopbackServer(batch={"hold": True}) as server:
        direct = judge_many(LLMJudge(openai(server)), frame, progress=False)

        def actor(**options) -> GradingActor:
            batch = BatchOptions(state_dir=tmp_path / "ledger.jsonl.batches", **options)
            return GradingActor(lambda: LLMJudge(openai(server)), 4, ledger, "qa", None, None, None, run_id="r",
                                 batch=batch)

        stopped = actor(max_wait_s=0.2, poll_interval_s=0.02)(frame.iloc[:4])
        assert (stopped["status"] == "error").all()
        (folder,) = (tmp_path / "ledger.jsonl.batches").iterdir()
        assert folder.name.startswith("ray-") and (folder / "state.json").exists()
        release_batches(server)
        again = actor(**FAST)(frame.iloc[:4])  # the same Ray batch again (a restarted actor, or the job again)
        stats = batch_stats(server)
        chats = server.stats()["total"]
    assert stats["submissions"] == 1 and chats == 8  # collected, never submitted again; 8: the direct run
    pd.testing.assert_frame_equal(again[["quality_score", "status"]], direct[["quality_score", "status"]].iloc[:4])
    assert not again[RESUMED].any()  # nothing was recorded by the stopped run
    assert len(ledger.read_all()) == 4
    assert not folder.exists()  # removed once collected


def test_killed_between_creating_the_batch_and_saving_its_id_finds_it_by_its_file(tmp_path):
    """OpenAI: the uploaded file's id is saved before the batch is created; a run stopped after the provider
    created the batch but before its id was saved finds it by that file id (the batches listing) and collects it,
    instead of submitting it again. (The stop is made by removing the id from a real run's state file.)"""
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    state_file = tmp_path / "ledger.jsonl.batches" / "state.json"
    with LoopbackServer(batch={"hold": True}) as server:
        judge = LLMJudge(openai(server))
        direct = judge_many(judge, items(5), progress=False)
        impatient = BatchOptions(max_wait_s=0.1, poll_interval_s=0.02, progress=False)
        judge_many(judge, items(5), ledger=ledger, task_type="qa", progress=False, batch=impatient)
        state = json.loads(state_file.read_text())
        (entry,) = state["batches"]
        assert entry["file_id"] and entry["batch_id"]
        entry.update(batch_id=None, status="prepared")  # as if killed before the created batch's id was saved
        state_file.write_text(json.dumps(state))
        release_batches(server)
        again = judge_many(judge, items(5), ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["uploads"] == 1 and stats["submissions"] == 1
    same_rows(direct, again[direct.columns])


# -- money: what the provider bills ---------------------------------------------------------------------------


def test_rows_sharing_one_request_split_its_bill(tmp_path):
    """Rows with the same texts ask the same request: it is sent and billed once, and the rows split its cost
    evenly, so their judge_cost_usd (in the frame and the ledger) and the budget add up to the provider's bill
    (each row once charged the whole of it)."""
    rows = [{"prompt": "question?", "baseline": "answer", "candidate": f"reply {i % 3}", "id": i} for i in range(12)]
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer() as server:
        adapter = openai(server)
        out = judge_many(LLMJudge(adapter), rows, ledger=ledger, task_type="qa", progress=False, budget=1.0,
                         batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    bill = adapter._cost(stats["billed_tokens_in"], stats["billed_tokens_out"], batch=True)
    assert stats["requests_submitted"] == 3 and (out["status"] == "scored").all()
    assert out["judge_cost_usd"].sum() == pytest.approx(bill, rel=1e-9)
    assert out.attrs["budget"]["spent_usd"] == pytest.approx(bill, rel=1e-9)
    assert sum(o.tags["judge_cost_usd"] for o in ledger.read_all()) == pytest.approx(bill, rel=1e-9)
    for _, group in out.groupby(out["candidate"]):  # 4 rows per request, each a quarter of its cost
        assert group["judge_cost_usd"].nunique() == 1
        one = adapter._cost(int(group["judge_tokens_in"].iloc[0]), int(group["judge_tokens_out"].iloc[0]),
                            batch=True)
        assert group["judge_cost_usd"].iloc[0] == pytest.approx(one / 4, rel=1e-9)


def test_a_budget_is_charged_the_bill_once_not_once_per_row():
    """20 rows asking one request, a budget of 1.5 times its bill: each row once charged the whole bill, so the
    budget stopped the run after two rows although the provider billed one request."""
    rows = [{"prompt": "question?", "baseline": "answer", "candidate": "reply", "id": i} for i in range(20)]
    with LoopbackServer() as server:
        adapter = openai(server)
        judge_many(LLMJudge(adapter), rows[:1], progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
        one = adapter._cost(stats["billed_tokens_in"], stats["billed_tokens_out"], batch=True)
        out = judge_many(LLMJudge(adapter), rows, progress=False, budget=one * 1.5, batch=BatchOptions(**FAST))
        assert batch_stats(server)["requests_submitted"] == 2
    assert (out["status"] == "scored").all()
    assert out.attrs["budget"]["spent_usd"] == pytest.approx(one, rel=1e-9)
    assert out["judge_cost_usd"].sum() == pytest.approx(one, rel=1e-9)


def test_a_request_asked_again_in_a_later_round_costs_nothing_more():
    """A compound judge whose second call repeats its first (same prompt): one request, billed once, charged
    once (the round that asks it again is served from the state)."""
    class Twice:
        grader_id = "twice"

        def __init__(self, adapter):
            self.adapter = adapter

        def judge(self, baseline, candidate, *, prompt, run_config):
            first = self.adapter.complete(f"grade {candidate.content}", run_config)
            again = self.adapter.complete(f"grade {candidate.content}", run_config)
            return GradingResult(quality_score=json.loads(again.content)["quality_score"], notes="twice",
                                 grader_id="twice", baseline_response=baseline, candidate_response=candidate,
                                 cost_usd=first.cost_usd + again.cost_usd)

    with LoopbackServer() as server:
        adapter = openai(server)
        out = judge_many(Twice(adapter), items(7), progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["requests_submitted"] == 7 and (out["status"] == "scored").all()
    bill = adapter._cost(stats["billed_tokens_in"], stats["billed_tokens_out"], batch=True)
    assert out["judge_cost_usd"].sum() == pytest.approx(bill, rel=1e-9)


# -- lost work: a resumed multi-round run ------------------------------------------------------------------------


class Escalating:
    """A compound judge: a first call for every row, a second for three rows in four (a cascade's shape)."""

    grader_id = "escalating"

    def __init__(self, adapter):
        self.adapter = adapter

    def judge(self, baseline, candidate, *, prompt, run_config):
        reply = self.adapter.complete(f"cheap: {candidate.content} against {baseline.content}", run_config)
        cost = reply.cost_usd
        if int(candidate.content.split()[-1]) % 4:
            reply = self.adapter.complete(f"dear: {candidate.content} against {baseline.content}", run_config)
            cost += reply.cost_usd
        return GradingResult(quality_score=json.loads(reply.content)["quality_score"], notes="escalating",
                             grader_id=self.grader_id, baseline_response=baseline, candidate_response=candidate,
                             cost_usd=cost)


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "response-cache"])
def test_a_resumed_multi_round_run_records_each_row_once(tmp_path, cached):
    """Round 1 ends, its 5 finished rows are recorded, round 2 is still running when the run stops. The same call
    later collects round 2; it re-runs the 5 rows from the replies kept in the state and once recorded them a
    second time (25 records for 20 items). With a response cache, round 1's replies come from the cache."""
    rows = [{"prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"reply {i}", "id": i}
            for i in range(20)]
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer(batch={"polls": 1, "hold_from": 2}) as server:  # round 1 ends at its first poll, round 2 waits
        kw = {"cache": ResponseCache(tmp_path / "cache")} if cached else {}
        judge = Escalating(openai(server, **kw))
        first = judge_many(judge, rows, ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(max_wait_s=0.2, poll_interval_s=0.02, progress=False))
        assert (first["status"] == "scored").sum() == 5
        assert len(ledger.read_all()) == 5
        release_batches(server)
        again = judge_many(judge, rows, ledger=ledger, task_type="qa", progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["submissions"] == 2  # round 2 collected, nothing submitted again
    assert (again["status"] == "scored").all()
    assert again["quality_score"].tolist()[::4] == first["quality_score"].tolist()[::4]
    assert sorted(o.tags["item_id"] for o in ledger.read_all()) == list(range(20))
    assert not (tmp_path / "ledger.jsonl.batches").exists()


# -- conversation items: the Batch APIs take them unchanged ---------------------------------------------------


def _conversation(cid: str) -> dict:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(
        {"city": cid})}}
    return {"conversation_id": cid, "messages": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": f"Weather in {cid}?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"sunny in {cid}"},
        {"role": "assistant", "content": f"It is sunny in {cid}."},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": f"Rain in {cid} tomorrow."},
    ]}


def conversation_items():
    """Two conversations of two turns each (an agent run: a tool call, its result and the answer; then a reply):
    four items."""
    from llm_connect.conversations import per_turn

    return per_turn([_conversation("Oslo"), _conversation("Lima")]).assign(id="reply")


def goal_judge(adapter) -> LLMJudge:
    from llm_connect import Rubric

    return LLMJudge(adapter, rubric=Rubric("Did the agent reach the user's goal?", reference=False))


TURN_COLUMNS = ["conversation_id", "turn", "quality_score", "notes", "grader_id", "status", "error",
                "judge_tokens_in", "judge_tokens_out", "judge_tokens_cached"]


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_conversation_turns_batched_equal_direct_each_turn_its_own_request(make, tmp_path):
    """judge_many(LLMJudge, conversation turns, batch=...): the rows (scores, conversation_id, turn) and the
    ledger's item ids (``<conversation>/<id>#turn=<k>``) are those of the direct run; each turn is one request
    of the batch, whose body holds that turn's fenced transcript with the judged reply last."""
    items = conversation_items()
    sent: list[str] = []

    def reply(prompt: str) -> str:
        sent.append(prompt)
        return default_reply(prompt)

    with LoopbackServer(reply=reply) as server:
        judge = goal_judge(make(server))
        direct_ledger, batch_ledger = QualityLedger(tmp_path / "direct.jsonl"), QualityLedger(tmp_path / "b.jsonl")
        direct = judge_many(judge, items, ledger=direct_ledger, task_type="chat", progress=False)
        direct_prompts, sent[:] = list(sent), []
        batched = judge_many(judge, items, ledger=batch_ledger, task_type="chat", progress=False,
                             batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert (direct["status"] == "scored").all() and direct["quality_score"].nunique() > 1
    pd.testing.assert_frame_equal(direct[TURN_COLUMNS], batched[TURN_COLUMNS])
    assert list(batched["turn"]) == [0, 1] * 2 and list(batched["conversation_id"]) == ["Oslo"] * 2 + ["Lima"] * 2
    assert stats["submissions"] == 1 and stats["requests_submitted"] == len(items) == 4  # each turn its own request
    assert sorted(sent) == sorted(direct_prompts) and len(set(sent)) == 4

    def recorded(ledger):
        return sorted((o.tags["item_id"], o.tags["conversation_id"], o.tags["turn"], o.quality_score)
                      for o in ledger.read_all())

    assert recorded(batch_ledger) == recorded(direct_ledger)
    assert {r[0] for r in recorded(batch_ledger)} == {f"{c}/reply#turn={k}" for c in ("Oslo", "Lima")
                                                      for k in range(2)}
    for row in batched.itertuples():  # the request of this turn: its transcript fenced, its reply last
        (prompt,) = [p for p in sent if f"Weather in {row.conversation_id}?" in p
                     and p.count("<<<MESSAGE ") == len(row.messages)]
        assert f"<<<END MESSAGE {len(row.messages)} " in prompt
        assert prompt.rindex("<<<CANDIDATE") > prompt.rindex("<<<END MESSAGE ")
        assert prompt.rstrip().endswith(">>>") and prompt.rstrip().rsplit("\n", 1)[-1].startswith("<<<END CANDIDATE")


def test_conversation_turns_resume_from_the_batch_state_and_record_each_turn_once(tmp_path):
    """A batched run over conversation turns stopped while the batch runs keeps its state beside the ledger;
    the same call collects the batch (never submitted again), records each turn once under its own item id and
    gives the direct run's rows."""
    items = conversation_items()
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer(batch={"hold": True}) as server:
        judge = goal_judge(anthropic(server))
        direct = judge_many(judge, items, progress=False)
        impatient = BatchOptions(max_wait_s=0.2, poll_interval_s=0.02, progress=False)
        stopped = judge_many(judge, items, ledger=ledger, task_type="chat", progress=False, batch=impatient)
        assert (stopped["status"] == "error").all() and ledger.read_all() == []
        assert (tmp_path / "ledger.jsonl.batches" / "state.json").exists()
        release_batches(server)
        again = judge_many(judge, items, ledger=ledger, task_type="chat", progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["submissions"] == 1  # collected, never submitted again
    pd.testing.assert_frame_equal(direct[TURN_COLUMNS], again[TURN_COLUMNS])
    recorded = ledger.read_all()
    assert sorted(o.tags["item_id"] for o in recorded) == sorted(
        f"{c}/reply#turn={k}" for c in ("Oslo", "Lima") for k in range(2))
    assert sorted((o.tags["conversation_id"], o.tags["turn"]) for o in recorded) == sorted(
        zip(items["conversation_id"], items["turn"], strict=True))
    assert not (tmp_path / "ledger.jsonl.batches").exists()
