"""The Batch APIs' state folder (``<ledger>.batches/``): where it is, what removing it removes, runs that
share it, and the batches it names that the provider no longer knows or that a killed run never saved.

Every run goes through the real adapters against the loopback server's Batch APIs
(:mod:`llm_connect.testing._batch_api`); see tests/adapters/test_batch_api.py for the runs themselves."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from llm_connect import QualityLedger
from llm_connect.adapters import BatchOptions, OpenAICompatibleAdapter, resubmit_expired
from llm_connect.adapters._batches import state_subfolder
from llm_connect.errors import ValidationError
from llm_connect.grading import ExactMatchJudge, LLMJudge, judge_many
from llm_connect.testing import LoopbackServer
from llm_connect.testing._batch_api import batch_stats, forget_batch, release_batches

FAST = {"poll_interval_s": 0.0, "poll_max_interval_s": 0.01, "progress": False}
#: stops polling soon: the batches of a server that holds them stay submitted, as after a kill
IMPATIENT = {"max_wait_s": 0.2, "poll_interval_s": 0.02, "progress": False}


def items(n: int, start: int = 0) -> list[dict]:
    return [{"prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"reply {i % 7}", "id": i}
            for i in range(start, start + n)]


def openai(server: LoopbackServer) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter("gpt-4o-mini", base_url=server.base_url, max_retries=0)


def saved(state: Path) -> list[dict]:
    return json.loads((state / "state.json").read_text(encoding="utf-8"))["batches"]


# -- where a state folder is, and what removing it removes --------------------------------------------------

HOSTILE = ["..", ".", "/", "a/../..", "../../etc", "/etc/passwd", "C:\\Windows", "x\x00y", "\x00", "",
           "n" * 5000, "Judge", "judge", "JUDGE", "llm", "llm-0123456789abcdef", "é/..", "\ud800"]


def test_a_state_subfolder_is_always_directly_inside_its_root(tmp_path):
    root = tmp_path / "ledger.jsonl.batches"
    folders = [state_subfolder(root, name) for name in HOSTILE]
    assert len({f.name.lower() for f in folders}) == len(HOSTILE)  # distinct, even on a case-blind disk
    for folder in folders:
        assert folder.parent == root
        assert os.path.realpath(folder).startswith(os.path.realpath(root) + os.sep)
        assert len(folder.name) <= 57 and "\x00" not in folder.name and folder.name not in (".", "..")
        assert folder.name.isascii()
        folder.mkdir(parents=True)  # a real folder can be made of every name
    assert sorted(p.name for p in root.iterdir()) == sorted(f.name for f in folders)


def test_calibrate_with_a_judge_named_dotdot_keeps_the_ledger_and_everything_beside_it(tmp_path, monkeypatch):
    """calibrate(..., batch=True, ledger=L) with a judge named ``..`` once kept that judge's state in
    ``L.batches/..`` (L's folder) and removed it when the run finished: the ledger and every file beside it."""
    from llm_connect.calibration import calibrate

    monkeypatch.setenv("LLM_CONNECT_BATCH_POLL_S", "0.01")
    ledger = tmp_path / "ledger.jsonl"
    beside = tmp_path / "notes.txt"
    beside.write_text("keep me", encoding="utf-8")
    rows = [{**row, "human": i % 2 == 0} for i, row in enumerate(items(6))]
    with LoopbackServer(batch={"polls": 1}) as server:
        judges = {"..": LLMJudge(openai(server)), "/": ExactMatchJudge(), "a/../..": LLMJudge(openai(server))}
        report = calibrate(judges, rows, human="human", probes=None, n_boot=20, progress=False,
                           ledger=ledger, task_type="qa", batch=True)
        assert batch_stats(server)["submissions"] == 2  # one batch per LLM judge
    assert (report.scores["status_.."] == "scored").all()
    assert beside.read_text(encoding="utf-8") == "keep me"
    # ".." and "a/../.." are one judge (grader id "llm-judge", one rubric): its judgments are recorded once
    assert ledger.exists() and len(QualityLedger(ledger).read_all()) == 2 * 6
    assert not (tmp_path / "ledger.jsonl.batches").exists()  # every judge's state went, and the emptied root


def test_a_finished_run_removes_only_its_own_files_from_the_state_folder(tmp_path):
    """A state folder the user pointed at a folder of their own (``batch="."``, a data folder) loses only the
    files the run wrote there: never the user's files, never the folder while they are in it."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "data.jsonl").write_text("{}\n", encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "x.txt").write_text("x", encoding="utf-8")
    with LoopbackServer() as server:
        rows = judge_many(LLMJudge(openai(server)), items(4), progress=False,
                          batch=BatchOptions(state_dir=folder, **FAST))
    assert (rows["status"] == "scored").all()
    assert sorted(p.name for p in folder.iterdir()) == ["data.jsonl", "sub"]
    assert (folder / "sub" / "x.txt").read_text(encoding="utf-8") == "x"


def test_a_state_folder_outside_its_root_is_refused(tmp_path):
    with LoopbackServer() as server, pytest.raises(ValidationError, match="is not inside"):
        judge_many(LLMJudge(openai(server)), items(2), progress=False,
                   batch=BatchOptions(state_dir=tmp_path / "root" / ".." / "elsewhere", state_root=tmp_path / "root",
                                      **FAST))


# -- two runs on one state folder at once ------------------------------------------------------------------


class Meeting:
    """A judge whose rows start only once every judge of the meeting has started a row: each run built its
    collector (and read the state) before any row of either run made a call (and wrote the state)."""

    def __init__(self, judge, started: threading.Event, other: threading.Event):
        self.inner, self.started, self.other = judge, started, other
        self.grader_id = judge.grader_id

    def judge(self, baseline, candidate, *, prompt, run_config):
        self.started.set()
        assert self.other.wait(30), "the other run did not start"
        return self.inner.judge(baseline, candidate, prompt=prompt, run_config=run_config)


def test_two_runs_on_one_ledger_at_once_keep_both_batches_and_resume_without_paying_twice(tmp_path):
    """Two batched runs on one ledger read the state before either wrote it; each then wrote its batch. The
    state once kept only the last writer's batch, so the other run, resumed, submitted its batch again."""
    ledger = tmp_path / "ledger.jsonl"
    state = tmp_path / "ledger.jsonl.batches"
    a_started, b_started = threading.Event(), threading.Event()
    with LoopbackServer(batch={"hold": True}) as server:
        judge = LLMJudge(openai(server))
        runs = {"a": (Meeting(judge, a_started, b_started), items(5)),
                "b": (Meeting(judge, b_started, a_started), items(5, start=5))}
        out: dict = {}

        def run(name: str) -> None:
            meeting, batch_items = runs[name]
            out[name] = judge_many(meeting, batch_items, ledger=QualityLedger(ledger), task_type="qa",
                                   progress=False, batch=BatchOptions(**IMPATIENT))

        threads = [threading.Thread(target=run, args=(name,)) for name in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        first = batch_stats(server)
        assert first["submissions"] == 2
        assert all((out[name]["status"] == "error").all() for name in runs)  # both stopped polling
        assert sorted(b["batch_id"] for b in saved(state)) == sorted(first["batch_ids"])  # neither erased
        release_batches(server)
        again = {name: judge_many(judge, runs[name][1], ledger=QualityLedger(ledger), task_type="qa",
                                  progress=False, batch=BatchOptions(**FAST)) for name in runs}
        second = batch_stats(server)
    assert second["submissions"] == 2  # both collected, neither submitted again
    assert all((again[name]["status"] == "scored").all() for name in runs)
    assert sorted(o.tags["item_id"] for o in QualityLedger(ledger).read_all()) == list(range(10))
    assert not state.exists()


def test_a_run_that_finishes_leaves_the_batches_of_a_run_still_polling(tmp_path):
    """Run B polls a batch; run A, on the same ledger, finishes: A drops its own batches from the state and
    leaves B's (it once removed the whole folder when no batch was left uncollected, whoever's); the folder goes
    with the last run."""
    ledger = tmp_path / "ledger.jsonl"
    state = tmp_path / "ledger.jsonl.batches"
    with LoopbackServer() as quick, LoopbackServer(batch={"hold": True}) as slow:
        out: dict = {}
        polling = threading.Thread(target=lambda: out.setdefault("b", judge_many(
            LLMJudge(openai(slow)), items(4, start=10), ledger=QualityLedger(ledger), task_type="qa",
            progress=False, batch=BatchOptions(**FAST))))
        polling.start()
        deadline = time.monotonic() + 30
        while not batch_stats(slow).get("polls") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batch_stats(slow)["polls"]  # B submitted its batch (and saved it) and polls it
        a = judge_many(LLMJudge(openai(quick)), items(4), ledger=QualityLedger(ledger), task_type="qa",
                       progress=False, batch=BatchOptions(**FAST))
        assert (a["status"] == "scored").all()
        assert [b["batch_id"] for b in saved(state)] == batch_stats(slow)["batch_ids"]  # only B's is left
        release_batches(slow)
        polling.join(60)
    assert (out["b"]["status"] == "scored").all()
    assert len(QualityLedger(ledger).read_all()) == 8
    assert not state.exists()  # the last run to finish removed the folder


# -- a batch the provider does not know ----------------------------------------------------------------------


def test_a_batch_the_provider_does_not_know_fails_only_its_own_rows(tmp_path):
    """A batch in the state that the provider answers 404 for (removed, or another project's key) once failed
    every row of every later run ("check base_url"), and the new batches those runs submitted were paid and
    never collected. Now its own requests fail, saying so and naming the state folder; the rest are judged;
    resubmit_expired() sends its requests again."""
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    state = tmp_path / "ledger.jsonl.batches"
    with LoopbackServer(batch={"hold": True}) as server:
        judge = LLMJudge(openai(server))
        direct = judge_many(judge, items(10), progress=False)
        judge_many(judge, items(5), ledger=ledger, task_type="qa", progress=False, batch=BatchOptions(**IMPATIENT))
        (gone,) = batch_stats(server)["batch_ids"]
        assert forget_batch(server, gone)
        release_batches(server)
        rows = judge_many(judge, items(10), ledger=ledger, task_type="qa", progress=False, batch=BatchOptions(**FAST))
        stats = batch_stats(server)
        assert stats["submissions"] == 2 and stats["statuses"] == {b: "completed" for b in stats["batch_ids"]}
        lost, judged = rows.iloc[:5], rows.iloc[5:]
        assert (lost["status"] == "error").all()
        assert lost["error"].str.contains(f"does not know batch {gone}").all()
        assert lost["error"].str.contains(str(state), regex=False).all()
        assert not lost["error"].str.contains("check base_url").any()
        assert (judged["status"] == "scored").all()
        assert judged["quality_score"].tolist() == direct["quality_score"].iloc[5:].tolist()
        assert gone in [b["batch_id"] for b in saved(state)]  # kept: the right key would collect it

        assert resubmit_expired(state) == 5
        again = judge_many(judge, items(10), ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(**FAST))
        assert batch_stats(server)["requests_submitted"] == 5 + 5 + 5  # only the unknown batch's requests again
    assert (again["status"] == "scored").all()
    assert again["quality_score"].tolist() == direct["quality_score"].tolist()
    assert len(ledger.read_all()) == 10  # rows 5-9, recorded by the run that judged them, are not recorded again
    assert not state.exists()


# -- a run killed between creating an OpenAI batch and saving its id ---------------------------------------------


def _post(url: str, body: bytes, content_type: str) -> dict:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


def other_batches(server: LoopbackServer, n: int) -> None:
    """``n`` batches created after ours (other runs, other projects' jobs): ours is no longer on the first page."""
    line = json.dumps({"custom_id": "r0", "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}})
    form = ("--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--x\r\nContent-Disposition: "
            f"form-data; name=\"file\"; filename=\"o.jsonl\"\r\n\r\n{line}\n\r\n--x--\r\n").encode()
    file_id = _post(server.url + "/v1/files", form, "multipart/form-data; boundary=x")["id"]
    for _ in range(n):
        _post(server.url + "/v1/batches", json.dumps({"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                      "completion_window": "24h"}).encode(), "application/json")


def stopped_before_saving_the_batch_id(tmp_path: Path, server: LoopbackServer, ledger: QualityLedger) -> Path:
    """A real run's state, made as if the run were killed after the provider created the batch but before its
    id was saved (the id removed from the state file)."""
    state_file = tmp_path / "ledger.jsonl.batches" / "state.json"
    judge_many(LLMJudge(openai(server)), items(5), ledger=ledger, task_type="qa", progress=False,
               batch=BatchOptions(**IMPATIENT))
    state = json.loads(state_file.read_text())
    (entry,) = state["batches"]
    assert entry["file_id"] and entry["batch_id"]
    entry.update(batch_id=None, status="prepared")
    state_file.write_text(json.dumps(state))
    return state_file


def test_the_lookup_of_a_created_batch_reads_every_page_of_the_listing(tmp_path):
    """The batch is found by its uploaded file in ``GET /v1/batches``, which lists 100 at most per page; with
    more batches created since, it was on a later page, once never read: the batch was submitted (and paid
    for) again."""
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer(batch={"hold": True}) as server:
        direct = judge_many(LLMJudge(openai(server)), items(5), progress=False)
        stopped_before_saving_the_batch_id(tmp_path, server, ledger)
        other_batches(server, 130)
        release_batches(server)
        again = judge_many(LLMJudge(openai(server)), items(5), ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["submissions"] == 1 + 130  # ours was found, not submitted again
    assert stats["listings"] == 2  # the second page held it
    assert again["quality_score"].tolist() == direct["quality_score"].tolist()
    assert len(ledger.read_all()) == 5


def test_a_failed_listing_is_an_error_not_a_batch_to_submit_again(tmp_path):
    """A listing that fails once counted as "not found": the batch was submitted (and paid for) a second time.
    Now the rows say the lookup failed, nothing is submitted, the state is kept, and a later run finds it."""
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    with LoopbackServer(batch={"hold": True}) as server:
        stopped_before_saving_the_batch_id(tmp_path, server, ledger)
        release_batches(server)
        server._core.batch_api.list_error = 500
        failed = judge_many(LLMJudge(openai(server)), items(5), ledger=ledger, task_type="qa", progress=False,
                            batch=BatchOptions(**FAST))
        assert batch_stats(server)["submissions"] == 1
        assert (failed["status"] == "error").all()
        assert failed["error"].str.contains("could not look up whether the batch of the uploaded file").all()
        assert failed["error"].str.contains("HTTP 500").all()
        assert (tmp_path / "ledger.jsonl.batches" / "state.json").exists()
        server._core.batch_api.list_error = None
        again = judge_many(LLMJudge(openai(server)), items(5), ledger=ledger, task_type="qa", progress=False,
                           batch=BatchOptions(**FAST))
        stats = batch_stats(server)
    assert stats["submissions"] == 1 and stats["uploads"] == 1
    assert (again["status"] == "scored").all()
    assert len(ledger.read_all()) == 5
