"""The quality ledger under many writers, crashes, prune under load, fsync, memory and fuzzed lines.

Every writer here is a real process (``subprocess`` running a small script);
crashes are real ``SIGKILL`` s. Nothing of ``llm_connect`` is mocked: the
fsync check wraps ``os.fsync`` itself inside the writer process. Adversarial
paths, permissions, text and line sizes are ``test_ledger_paths_and_lines.py``'s.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import (
    T0,
    json_values,
    ledger_lines,
    line_of,
    near_valid_records,
    observations,
    reference_parse,
)
from strategies import make_observation as obs

from llm_connect import QualityLedger, QualityObservation

OLD = datetime(2000, 1, 1, tzinfo=UTC)
CUTOFF = datetime(2020, 1, 1, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and signals")


def run_script(code: str, *args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def start_script(code: str, *args: object, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], text=True, cwd=REPO, **kw)


def lines_of(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


# -- many writers ---------------------------------------------------------------------------------

WRITER = """
import sys
from llm_connect import QualityLedger, QualityObservation
path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ledger = QualityLedger(path)
for i in range(n):
    ledger.append(QualityObservation("qa", f"adapter-{w}", "m", 0.0, 0.5, 1.0, 1, 1, tags={"w": w, "i": i}))
"""


@pytest.mark.slow
def test_eight_processes_appending_5000_each_lose_nothing_and_leave_no_malformed_line(ledger_path):
    writers, n = 8, 5000
    procs = [start_script(WRITER, ledger_path, w, n, stderr=subprocess.PIPE) for w in range(writers)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    raw = lines_of(ledger_path)
    assert len(raw) == writers * n
    assert ledger_path.read_bytes().endswith(b"\n")
    ledger = QualityLedger(ledger_path)
    assert ledger.malformed_count() == 0
    seen = [(o.tags["w"], o.tags["i"]) for o in ledger.iter_observations()]
    assert len(seen) == len(set(seen)) == writers * n
    assert set(seen) == {(w, i) for w in range(writers) for i in range(n)}
    for w in range(writers):  # each writer's lines are in the order it wrote them
        assert [i for ww, i in seen if ww == w] == list(range(n))


def _fork_child_appends(ledger: QualityLedger, i: int) -> None:
    ledger.append(obs(tags={"child": i}))


@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")  # Python >= 3.12 warns
def test_a_ledger_used_before_fork_still_appends_in_forked_children(ledger_path):
    # filelock refuses a lock object inherited across fork; the ledger makes fresh locks in the child.
    ledger = QualityLedger(ledger_path)
    ledger.append(obs(tags={"parent": True}))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fork_child_appends, args=(ledger, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    ledger.append(obs(tags={"parent": "again"}))
    assert sorted(json.dumps(o.tags, sort_keys=True) for o in ledger.read_all()) == sorted(
        json.dumps(t, sort_keys=True)
        for t in [{"parent": True}, {"parent": "again"}, *({"child": i} for i in range(3))]
    )


@pytest.mark.slow  # 3 s measured on 2 busy cores: out of the fast loop
def test_a_ledger_pickles_to_spawned_workers(ledger_path):
    ledger = QualityLedger(ledger_path, fsync=True)
    ledger.append(obs())  # its locks exist now; the pickle carries only path and options
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_fork_child_appends, args=(ledger, 7))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    assert [o.tags for o in ledger.read_all()] == [{}, {"child": 7}]


# -- crashes ----------------------------------------------------------------------------------------

BURST = """
import random, sys
from llm_connect import QualityLedger, QualityObservation
path, rnd = sys.argv[1], int(sys.argv[2])
ledger = QualityLedger(path)
rng = random.Random(rnd)
for i in range(10**9):
    size = rng.choice([10, 10, 10, 2_000, 300_000])  # big lines make a kill inside write() likely
    ledger.append(QualityObservation("qa", "a", "m", 0.0, 0.5, 1.0, 1, 1, tags={"r": rnd, "s": i, "pad": "x" * size}))
    if i == 0:
        print("first", flush=True)
"""


@pytest.mark.slow
def test_sigkill_in_a_burst_leaves_at_most_the_line_being_written_malformed(ledger_path):
    rng = random.Random(1234)
    rounds, torn = 10, 0
    ledger = QualityLedger(ledger_path)
    for r in range(rounds):
        before = len(lines_of(ledger_path)) if ledger_path.exists() else 0
        proc = start_script(BURST, ledger_path, r, stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "first"
        time.sleep(rng.uniform(0.0, 0.08))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL

        data = ledger_path.read_bytes()
        new_lines = [line for line in data.split(b"\n") if line.strip()][before:]
        # every line the writer finished is intact and in order; only the last one may be torn
        parsed = []
        for k, line in enumerate(new_lines):
            try:
                parsed.append(json.loads(line)["tags"])
            except ValueError:
                assert k == len(new_lines) - 1, f"round {r}: malformed line {k} is not the last one"
                assert not data.endswith(b"\n"), "a torn line is the unfinished end of the file"
                torn += 1
        assert [t["s"] for t in parsed] == list(range(len(parsed)))
        assert all(t["r"] == r for t in parsed)
        # the ledger still reads, and counts at most one malformed line per kill so far
        assert ledger.malformed_count() == torn
    # and the next append is not swallowed by a torn line
    ledger.append(obs(tags={"after": "crash"}))
    assert ledger.read_all()[-1].tags == {"after": "crash"}
    assert ledger.malformed_count() == torn
    assert len(ledger.read_all()) == len(lines_of(ledger_path)) - torn


PRUNER = """
import sys
from datetime import datetime, UTC
from llm_connect import QualityLedger
ledger = QualityLedger(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
print(ledger.prune_before(datetime(2020, 1, 1, tzinfo=UTC)), flush=True)
"""


def _write_big_ledger(path: Path, n: int) -> None:
    rng = random.Random(5)
    with open(path, "wb") as f:
        for i in range(n):
            when = OLD if rng.random() < 0.4 else T0
            o = obs(recorded_at=when + timedelta(seconds=i), tags={"i": i, "run": "crash-prune"})
            f.write(line_of(o) + b"\n")
            if i % 20_000 == 7:
                f.write(b'{"not": "an observation"}\n')  # malformed lines survive a prune


def _temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.slow
def test_prune_killed_at_random_points_leaves_the_old_or_the_new_ledger(tmp_path):
    path = tmp_path / "big.jsonl"
    _write_big_ledger(path, 60_000)
    old = path.read_bytes()
    expected_new = b"".join(
        line + b"\n"
        for line in old.split(b"\n")
        if line and not (line.startswith(b'{"task_type"') and b'"recorded_at":"2000-' in line)
    )
    # one undisturbed prune: how long it takes, and what it writes
    proc = start_script(PRUNER, path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready"
    t = time.perf_counter()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    removed = int(proc.stdout.readline())
    duration = time.perf_counter() - t
    proc.communicate(timeout=60)
    assert path.read_bytes() == expected_new
    assert removed == old.count(b'"recorded_at":"2000-')

    rng = random.Random(99)
    outcomes = {"old": 0, "new": 0}
    kills = 12
    for k in range(kills):  # kill times spread over the whole prune and a little past it, one per stratum
        path.write_bytes(old)
        proc = start_script(PRUNER, path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        time.sleep(duration * 1.1 * rng.uniform(k, k + 1) / kills)
        proc.kill()
        proc.wait(30)
        proc.stdin.close()
        proc.stdout.close()
        now = path.read_bytes()
        assert now in (old, expected_new), "a killed prune left neither the old nor the new ledger"
        outcomes["old" if now == old else "new"] += 1
        # the lock died with the process: the ledger is writable at once
        QualityLedger(path).append(obs(recorded_at=T0, tags={"probe": True}))
    assert outcomes["old"] >= 1  # most kills land before the rename
    # temporary files a killed prune left behind are removed by the next prune
    QualityLedger(path).prune_before(CUTOFF)
    assert _temp_files(tmp_path) == []


# -- prune while others append ----------------------------------------------------------------------

APPENDER = """
import sys
from datetime import datetime, UTC
from llm_connect import QualityLedger, QualityObservation
path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ledger = QualityLedger(path)
old = datetime(2000, 1, 1, tzinfo=UTC)
for i in range(n):
    ledger.append(QualityObservation("qa", "a", "m", 0.0, 0.5, 1.0, 1, 1, tags={"w": w, "i": i}))
    ledger.append(QualityObservation("qa", "a", "m", 0.0, 0.5, 1.0, 1, 1, recorded_at=old, tags={"old": 1}))
"""

PRUNE_LOOP = """
import os, sys, time
from datetime import datetime, UTC
from llm_connect import QualityLedger
path, stop = sys.argv[1], sys.argv[2]
ledger = QualityLedger(path)
prunes = removed = 0
while not os.path.exists(stop):
    r = ledger.prune_before(datetime(2020, 1, 1, tzinfo=UTC))
    prunes += 1
    removed += r
    time.sleep(0.02)  # let the appenders in between rewrites
print(prunes, removed)
"""


@pytest.mark.slow
def test_prune_in_one_process_while_four_others_append_loses_no_new_observation(tmp_path):
    path, stop = tmp_path / "shared.jsonl", tmp_path / "stop"
    writers, n = 4, 1500
    pruner = start_script(PRUNE_LOOP, path, stop, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs = [start_script(APPENDER, path, w, n, stderr=subprocess.PIPE) for w in range(writers)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    stop.touch()
    out, err = pruner.communicate(timeout=60)
    assert pruner.returncode == 0, err
    prunes, removed_during = map(int, out.split())
    ledger = QualityLedger(path)
    removed_after = ledger.prune_before(CUTOFF)
    assert prunes >= 5 and removed_during > 0  # the prunes really interleaved with the appends
    assert removed_during + removed_after == writers * n  # every old one removed exactly once
    got = [(o.tags["w"], o.tags["i"]) for o in ledger.read_all()]
    assert sorted(got) == [(w, i) for w in range(writers) for i in range(n)]  # every new one, once
    assert ledger.malformed_count() == 0
    assert len(lines_of(path)) == writers * n


# -- durability option ----------------------------------------------------------------------------

FSYNC_COUNTER = """
import json, os, sys
calls = []
_real_fsync = os.fsync
def counting_fsync(fd):
    calls.append(os.readlink(f"/proc/self/fd/{fd}"))
    return _real_fsync(fd)
os.fsync = counting_fsync  # wraps the OS call itself; llm_connect is not touched

from llm_connect import QualityLedger, QualityObservation
synced, plain = sys.argv[1], sys.argv[2]
o = QualityObservation("qa", "a", "m", 0.0, 0.5, 1.0, 1, 1)
a, b = QualityLedger(synced, fsync=True), QualityLedger(plain)
for _ in range(25):
    a.append(o)
    b.append(o)
a.extend([o] * 10)
print(json.dumps({"synced": calls.count(synced), "plain": calls.count(plain), "lines": len(a.read_all())}))
"""


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to name the fsynced file")
def test_fsync_true_fsyncs_every_append_and_fsync_false_none(tmp_path):
    synced, plain = tmp_path / "synced.jsonl", tmp_path / "plain.jsonl"
    out = json.loads(run_script(FSYNC_COUNTER, synced, plain).stdout)
    # 25 appends + one extend: one fsync of the ledger each; the plain ledger is never fsynced
    assert out == {"synced": 26, "plain": 0, "lines": 35}


# -- memory ---------------------------------------------------------------------------------------


def _write_lines(path: Path, n: int) -> None:
    adapters = ["openai:gpt-4o-mini", "local:smollm2", "anthropic:haiku"]
    with open(path, "wb") as f:
        for i in range(n):
            o = obs(
                task_type=("qa", "summarise", "code")[i % 3],
                adapter_id=adapters[i % 3],
                model_id=adapters[(i + 1) % 3].split(":")[1],
                baseline_adapter_id="openai:gpt-4o" if i % 2 else None,
                recorded_at=T0 + timedelta(seconds=i),
                tags={"item_id": i, "grader_id": "llm-judge"},
            )
            f.write(line_of(o) + b"\n")


def _peaks(ledger: QualityLedger) -> tuple[int, int, int]:
    """(count, peak bytes while iterating, peak bytes of read_all) under tracemalloc."""
    tracemalloc.start()
    try:
        count = sum(1 for _ in ledger.iter_observations())
        _, iter_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        everything = ledger.read_all()
        _, all_peak = tracemalloc.get_traced_memory()
        assert len(everything) == count
        del everything
    finally:
        tracemalloc.stop()
    return count, iter_peak, all_peak


@pytest.mark.slow
def test_iterating_streams_in_memory_that_does_not_grow_with_the_ledger(tmp_path):
    # benchmarks/ledger.py shows the same on 200,000 lines
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _write_lines(small, 4_000)
    _write_lines(large, 40_000)
    n_small, iter_small, all_small = _peaks(QualityLedger(small))
    n_large, iter_large, all_large = _peaks(QualityLedger(large))
    assert (n_small, n_large) == (4_000, 40_000)
    assert iter_large < 500_000, f"iter_observations peaked at {iter_large} bytes on 40k lines"
    assert iter_large < 2 * iter_small + 64_000  # flat in the number of lines
    assert all_large > 8 * all_small  # read_all holds them all: grows with the ledger
    assert all_large > 50 * iter_large


# -- the written line is exactly one to_dict() ------------------------------------------------------


@given(st.lists(observations(), min_size=1, max_size=4), st.booleans())
@settings(max_examples=80, deadline=None)
def test_hypothesis_each_appended_line_is_json_dumps_of_to_dict_and_reads_back_equal(batch, use_extend):
    with tempfile.TemporaryDirectory() as d:
        ledger = QualityLedger(Path(d) / "l.jsonl")
        if use_extend:
            ledger.extend(batch)
        else:
            for o in batch:
                ledger.append(o)
        raw = (Path(d) / "l.jsonl").read_bytes()
        expected = b"".join(
            json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for o in batch
        )
        assert raw == expected
        back = ledger.read_all()
        assert back == batch
        assert [repr(o) for o in back] == [repr(o) for o in batch]  # same types too (float vs int)


def test_an_unencodable_observation_raises_before_anything_is_written(ledger_path):
    ledger = QualityLedger(ledger_path)
    ledger.append(obs())
    before = ledger_path.read_bytes()
    with pytest.raises(ValueError):  # a lone surrogate cannot be UTF-8
        ledger.append(obs(tags={"x": "\ud800"}))
    with pytest.raises(ValueError):
        ledger.extend([obs(), obs(task_type="\udfff")])
    assert ledger_path.read_bytes() == before


# -- fuzzing: from_dict and the line reader -----------------------------------------------------------


@pytest.mark.slow  # 8 s measured on 2 busy cores: out of the fast loop
@given(json_values | near_valid_records)
@settings(max_examples=400, deadline=None)
def test_hypothesis_from_dict_on_arbitrary_json_raises_only_value_or_type_error(data):
    try:
        o = QualityObservation.from_dict(data)
    except (ValueError, TypeError):
        return
    assert 0.0 <= o.quality_score <= 1.0 and o.recorded_at.tzinfo is UTC
    assert QualityObservation.from_dict(json.loads(json.dumps(o.to_dict()))) == o


def _render(data, style: int) -> bytes:
    if style == 0:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    elif style == 1:
        text = json.dumps(data, indent=None)
    else:
        text = " \t" + json.dumps(data, ensure_ascii=True) + " \r"
    raw = text.encode("utf-8", "surrogatepass")
    return b"\xef\xbb\xbf" + raw if style == 3 else raw


@pytest.mark.slow  # 7 s measured on 2 busy cores: out of the fast loop
@given(st.lists(st.tuples(json_values | near_valid_records, st.integers(0, 3)), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_hypothesis_the_ledger_reads_exactly_what_from_dict_accepts(entries):
    lines = [_render(d, style).replace(b"\n", b" ") for d, style in entries]
    assume(all(line.strip() for line in lines))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        expected = [r for r in map(reference_parse, lines) if r is not None]
        got = QualityLedger(path).read_all()
        assert [repr(o) for o in got] == [repr(o) for o in expected]
        assert QualityLedger(path).malformed_count() == len(lines) - len(expected)


@given(
    st.lists(ledger_lines, max_size=10),
    st.lists(st.tuples(st.sampled_from(["qa", "sum"]), st.integers(-3, 3), st.floats(0, 1)), max_size=6),
    st.integers(0, 4),
)
@pytest.mark.slow  # 6 s measured on 2 busy cores: out of the fast loop
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_every_reader_survives_arbitrary_lines_and_agrees(garbage, valid, limit):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.jsonl"
        good = [obs(task_type=t, quality_score=q, recorded_at=T0 + timedelta(days=k)) for t, k, q in valid]
        chunks = [g.replace(b"\n", b" ").replace(b"\r", b" ") for g in garbage]
        chunks += [line_of(o, compact=False, ensure_ascii=True) for o in good]
        random.Random(len(chunks)).shuffle(chunks)
        path.write_bytes(b"".join(c + b"\n" for c in chunks))
        ledger = QualityLedger(path)

        everything = ledger.read_all()
        non_blank = [c for c in chunks if c.strip()]
        malformed = ledger.malformed_count()
        assert len(everything) + malformed == len(non_blank)
        assert list(ledger.iter_observations()) == everything
        for o in good:
            assert o in everything
        recent = ledger.recent(limit, task_type="qa")
        qa = [o for o in everything if o.task_type == "qa"]
        assert len(recent) == min(limit, len(qa))
        assert [o.recorded_at for o in recent] == sorted((o.recorded_at for o in recent), reverse=True)
        mean = ledger.mean_quality("qa", max_age=timedelta(days=1), now=T0 + timedelta(days=1))
        fresh = [o.quality_score for o in qa if T0 + timedelta(days=1) - o.recorded_at <= timedelta(days=1)]
        assert mean == (pytest.approx(sum(fresh) / len(fresh)) if fresh else None)
        assert ledger.by_task_type("sum") == [o for o in everything if o.task_type == "sum"]

        old = [o for o in everything if o.recorded_at < T0]
        assert ledger.prune_before(T0) == len(old)
        assert ledger.malformed_count() == malformed  # malformed lines survive
        assert ledger.read_all() == [o for o in everything if o.recorded_at >= T0]
        assert sorted(p.name for p in Path(d).iterdir()) == ["l.jsonl", "l.jsonl.lock"]
