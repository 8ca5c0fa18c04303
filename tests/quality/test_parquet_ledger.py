"""ParquetLedger (issue 18): the quality contract's queries over a lock-free Parquet dataset, deduplication of
retried writes, compaction that is safe while others append, URIs, and ``llm-connect ledger convert``."""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import T0, make_observation, nested_tags, nth_observation

from llm_connect import ExactMatchJudge, ParquetLedger, QualityLedger, QualityObservation, judge_many
from llm_connect.cli import main
from llm_connect.errors import MissingDependencyError
from llm_connect.frames import ledger_frame, paired_frame, record_labels
from llm_connect.quality import DEDUPE_TAGS, BaseLedger, open_ledger
from llm_connect.routing import evidence_table, route

SRC = str(Path(__file__).resolve().parents[2])


def parquet_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if not p.name.startswith("."))


def keyed(i: int, *, run: str = "r1", **overrides) -> QualityObservation:
    tags = {"item_id": i, "grader_id": "llm-judge", "rubric_hash": "abc", "run_id": run}
    return nth_observation(i, tags=tags, **overrides)


# -- round trip ------------------------------------------------------------------------------------------


def test_round_trip_keeps_every_field_and_tag_exactly(tmp_path):
    ledger = ParquetLedger(tmp_path / "pq")
    obs = [
        nth_observation(i, tags={"nested": {"a": [1, 2.5, None, True]}, "big": 2**70, "text": "é\u202e\n",
                                 "f": 0.1, "null": None, "item_id": i})
        for i in range(5)
    ]
    obs.append(make_observation(baseline_adapter_id="base", tags={}, recorded_at=T0 - timedelta(days=3)))
    obs.append(make_observation(task_type="other", tokens_in=2**63 - 1, recorded_at=datetime(1, 1, 2, tzinfo=UTC)))
    ledger.extend(obs[:3])
    for o in obs[3:]:
        ledger.append(o)
    got = ledger.read_all()
    assert got == sorted(obs, key=lambda o: o.recorded_at)
    assert all(o.recorded_at.tzinfo is UTC for o in got)
    assert [QualityObservation.from_dict(json.loads(json.dumps(o.to_dict()))) for o in got] == got
    assert ledger.malformed_count() == 0
    # one file per append, one per (task type, date) of an extend, in hive-style partitions
    rel = sorted(str(p.relative_to(tmp_path / "pq")) for p in parquet_files(tmp_path / "pq"))
    assert len(rel) == 1 + 4 and all(r.startswith("task_type=") and "/date=" in r for r in rel)
    assert "task_type=other/date=0001-01-02" in "\n".join(rel)


_int64 = st.integers(0, 2**63 - 1)


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hypothesis_round_trip_matches_the_json_lines_ledger(tmp_path_factory, data):
    from strategies import observations

    obs = data.draw(st.lists(observations(tags=nested_tags), min_size=1, max_size=6).map(
        lambda xs: [QualityObservation(**{**o.__dict__, "tokens_in": o.tokens_in % 2**63,
                                           "tokens_out": o.tokens_out % 2**63}) for o in xs]))
    root = tmp_path_factory.mktemp("pq")
    ParquetLedger(root).extend(obs)
    jsonl = QualityLedger(root.parent / f"{root.name}.jsonl")
    jsonl.extend(obs)
    got = ParquetLedger(root).read_all()
    assert [o.recorded_at for o in got] == sorted(o.recorded_at for o in got)  # ties: by file name, then row
    def canonical(xs):
        return sorted(xs, key=lambda o: (o.recorded_at, json.dumps(o.to_dict(), sort_keys=True)))
    assert canonical(got) == canonical(jsonl.read_all())


# -- the contract's queries and errors, on both ledgers ------------------------------------------------------


@pytest.fixture(params=["jsonl", "parquet"])
def any_ledger(request, tmp_path) -> BaseLedger:
    return QualityLedger(tmp_path / "l.jsonl") if request.param == "jsonl" else ParquetLedger(tmp_path / "pq")


def test_recent_newest_first_with_filters_and_limit(any_ledger):
    for i in range(6):
        any_ledger.append(nth_observation(i, adapter_id="a" if i % 2 else "b", task_type="qa" if i < 4 else "x"))
    assert [o.tokens_in - 10 for o in any_ledger.recent(3)] == [5, 4, 3]
    assert [o.tokens_in - 10 for o in any_ledger.recent(10, task_type="qa", adapter_id="a")] == [3, 1]
    assert any_ledger.recent(0) == []
    assert [o.task_type for o in any_ledger.by_task_type("x")] == ["x", "x"]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="limit"):
            any_ledger.recent(bad)


def test_mean_quality_filters_min_observations_and_max_age(any_ledger):
    any_ledger.extend([make_observation(quality_score=q, recorded_at=T0 - timedelta(days=d))
                       for q, d in [(1.0, 0), (0.5, 1), (0.0, 10)]])
    assert any_ledger.mean_quality("qa") == pytest.approx(0.5)
    assert any_ledger.mean_quality("qa", max_age=timedelta(days=2), now=T0) == pytest.approx(0.75)
    assert any_ledger.mean_quality("qa", min_observations=4) is None
    assert any_ledger.mean_quality("nope") is None
    with pytest.raises(ValueError, match="min_observations"):
        any_ledger.mean_quality("qa", min_observations=0)
    with pytest.raises(ValueError, match="max_age"):
        any_ledger.mean_quality("qa", max_age=timedelta(days=-1))


def test_prune_before_removes_old_valid_observations_naive_is_utc(any_ledger):
    any_ledger.extend([nth_observation(i, recorded_at=T0 + timedelta(days=i)) for i in range(5)])
    assert any_ledger.prune_before((T0 + timedelta(days=2)).replace(tzinfo=None)) == 2
    assert [o.recorded_at for o in any_ledger.read_all()] == [T0 + timedelta(days=i) for i in (2, 3, 4)]
    assert any_ledger.prune_before(T0) == 0
    with pytest.raises(TypeError, match="timestamp"):
        any_ledger.prune_before("2026-01-01")


def test_write_errors_match_the_json_lines_ledger(any_ledger):
    with pytest.raises(TypeError, match="QualityObservation"):
        any_ledger.append({"task_type": "qa"})
    with pytest.raises(TypeError, match="QualityObservations"):
        any_ledger.extend([make_observation(), "x"])
    assert any_ledger.read_all() == [] and any_ledger.malformed_count() == 0
    assert isinstance(any_ledger, BaseLedger)


def test_token_counts_beyond_int64_are_refused_before_writing(tmp_path):
    ledger = ParquetLedger(tmp_path / "pq")
    with pytest.raises(ValueError, match=r"tokens_out=.*64-bit"):
        ledger.extend([make_observation(), make_observation(tokens_out=2**63)])
    assert not (tmp_path / "pq").exists()


def test_missing_root_reads_empty_and_creates_nothing(tmp_path):
    ledger = ParquetLedger(tmp_path / "nothing")
    assert ledger.read_all() == [] and ledger.malformed_count() == 0 and ledger.prune_before(T0) == 0
    assert ledger.compact() == 0 and not (tmp_path / "nothing").exists()


def test_a_root_that_is_a_file_is_refused_with_what_to_do(tmp_path):
    f = tmp_path / "ledger.jsonl"
    f.write_text("")
    with pytest.raises(NotADirectoryError, match="QualityLedger"):
        ParquetLedger(f).read_all()
    with pytest.raises(NotADirectoryError, match="not a directory"):
        ParquetLedger(f).append(make_observation())
    with pytest.raises(ValueError, match="directory path or a URI"):
        ParquetLedger(b"/tmp/x")  # type: ignore[arg-type]


# -- task types are untrusted: never a path out of the root ---------------------------------------------------


@pytest.mark.parametrize("task_type", ["../../escape", "/etc/passwd", "..", ".", "a/b\\c", "x" * 1000,
                                       "task_type=qa", "%2E%2E", "naïve ~ 😀", " \t.hidden"])
def test_task_types_stay_inside_the_root(tmp_path, task_type):
    root = tmp_path / "deep" / "pq"
    ledger = ParquetLedger(root)
    ledger.append(make_observation(task_type=task_type))
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(root in p.parents for p in files)
    (part,) = files
    rel = part.relative_to(root).parts
    assert len(rel) == 3 and rel[0].startswith("task_type=") and len(rel[0]) <= 140
    assert rel[1] == "date=2026-01-01" and not rel[2].startswith(".")
    assert [o.task_type for o in ledger.read_all()] == [task_type]
    assert ledger.by_task_type(task_type)[0].task_type == task_type


# -- malformed files and rows ----------------------------------------------------------------------------------


def test_malformed_files_and_rows_are_counted_skipped_and_kept_by_prune(tmp_path):
    root = tmp_path / "pq"
    ledger = ParquetLedger(root)
    ledger.extend([nth_observation(i) for i in range(3)])
    part = root / "task_type=qa" / "date=2026-01-01"
    (part / "garbage.parquet").write_bytes(b"not parquet at all")
    pq.write_table(pa.table({"task_type": ["qa"]}), part / "no-columns.parquet")  # a required column missing
    (part / ".in-flight.parquet.tmp").write_bytes(b"x")  # a writer's temporary file: not a ledger file
    (part / "_notes.parquet").write_bytes(b"x")  # hidden by its name
    (root / "README.txt").write_text("not a ledger file")
    good = make_observation().to_dict()
    rows = [dict(good, quality_score=2.0), dict(good, adapter_id="  "), dict(good, tags="[1, 2]"),
            dict(good, tags="{not json"), dict(good, tags='{"x": NaN}'), dict(good, tags='{"x": 1e999}'),
            dict(good, tags='{"s": "\\ud800"}'),
            dict(good, tags='{"ok": 1}', tokens_in=-1), dict(good, tags='{"valid": true}')]
    for r in rows:
        r["recorded_at"] = datetime.fromisoformat(r["recorded_at"])
        if isinstance(r["tags"], dict):
            r["tags"] = json.dumps(r["tags"])
    pq.write_table(pa.Table.from_pylist(rows), part / "foreign.parquet")
    offsets = pa.py_buffer(b"\x00\x00\x00\x00\x01\x00\x00\x00")
    not_utf8 = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(b"\xff")])
    one = pa.Table.from_pylist(rows[-1:])
    pq.write_table(one.set_column(one.schema.get_field_index("adapter_id"), "adapter_id", not_utf8),
                   part / "not-utf8.parquet")
    assert ledger.malformed_count() == 3 + 8
    got = ledger.read_all()
    assert len(got) == 4 and sum(o.tags == {"valid": True} for o in got) == 1
    frame = ledger_frame(ledger)
    assert len(frame) == 4 and frame.attrs["malformed_count"] == 11
    # prune keeps what it cannot read and the invalid rows, removes the old valid ones
    assert ledger.prune_before(T0 + timedelta(seconds=1, microseconds=8)) == 3  # items 0, 1 and the foreign valid one
    assert ledger.malformed_count() == 11
    assert all((part / name).exists() for name in ("garbage.parquet", "not-utf8.parquet", "no-columns.parquet"))
    assert not (part / "foreign.parquet").exists()  # read, rewritten into the compacted file
    assert [o.tokens_in for o in ledger.read_all()] == [12]


# -- retried writes are read once ---------------------------------------------------------------------------------


def test_retried_keyed_writes_are_read_once_and_compaction_drops_the_copies(tmp_path):
    ledger = ParquetLedger(tmp_path / "pq")
    first = [keyed(i) for i in range(5)]
    ledger.extend(first)
    retried = [keyed(i, recorded_at=T0 + timedelta(hours=1), quality_score=0.0) for i in range(2, 5)]
    ledger.extend(retried)  # a retried task writes some judgments again, later
    other_run = keyed(0, run="r2")
    unkeyed = [nth_observation(9, tags={"item_id": 9, "grader_id": "g"}) for _ in range(2)]  # no rubric, no run
    other_adapter = keyed(1, adapter_id="another")
    null_run = nth_observation(8, tags={**keyed(8).tags, "run_id": None})
    no_rubric = nth_observation(7, tags={"item_id": 7, "grader_id": "exact-match", "run_id": "r1"})  # exact match
    ledger.extend([other_run, *unkeyed, other_adapter, null_run, null_run, no_rubric, no_rubric])
    got = ledger.read_all()
    assert [o for o in got if o in first] == first  # the first write of each key is the one read
    assert not any(o in retried for o in got)
    assert sum(o == unkeyed[0] for o in got) == 2 and sum(o == null_run for o in got) == 2
    assert other_run in got and other_adapter in got
    assert sum(o == no_rubric for o in got) == 1  # a judge without a rubric, retried in one run: read once
    assert len(got) == 5 + 1 + 2 + 1 + 2 + 1
    assert set(DEDUPE_TAGS) == {"item_id", "grader_id", "rubric_hash", "run_id"}
    as_text = nth_observation(1, tags={**keyed(1).tags, "item_id": "1"})  # "1" is not 1, nor 1.0, nor true
    as_float = nth_observation(1, tags={**keyed(1).tags, "item_id": 1.0})
    as_bool = nth_observation(1, tags={**keyed(1).tags, "item_id": True})
    ledger.extend([as_text, as_float, as_bool])
    got = ledger.read_all()
    kinds = sorted(type(o.tags["item_id"]).__name__ for o in got
                   if o.adapter_id == keyed(1).adapter_id and o.tags.get("item_id") in (1, "1"))
    assert kinds == ["bool", "float", "int", "str"]
    files = len(parquet_files(tmp_path / "pq"))
    assert ledger.compact() == files  # one partition, every file merged
    assert len(parquet_files(tmp_path / "pq")) == 1
    assert ledger.read_all() == got
    assert pq.read_table(parquet_files(tmp_path / "pq")[0]).num_rows == len(got)  # the copies are gone


# -- a reader sees a compaction whole ---------------------------------------------------------------------------


def test_files_a_compacted_file_replaces_are_ignored_and_removed_later(tmp_path):
    """A compaction killed after writing its file, before deleting the ones it replaces, changes nothing."""
    root = tmp_path / "pq"
    ledger = ParquetLedger(root)
    ledger.extend([nth_observation(i) for i in range(3)])
    ledger.extend([nth_observation(i) for i in range(3, 5)])
    before = ledger.read_all()
    olds = parquet_files(root)
    saved = {p: p.read_bytes() for p in olds}
    ledger.compact()
    for p, data in saved.items():  # as if the deletions never happened
        p.write_bytes(data)
    assert ledger.read_all() == before and ledger.malformed_count() == 0
    ledger.append(nth_observation(7))
    from llm_connect.quality._parquet_rows import _table

    # a file outside the partitions (copied in by hand)
    pq.write_table(_table([nth_observation(8), nth_observation(9)]), root / "copied-in.parquet")
    assert ledger.compact() == 4  # the compacted file, the new one, the two leftovers; the root has one file only
    assert len(ledger.read_all()) == 8 and len(parquet_files(root)) == 2
    ledger.append(nth_observation(10, task_type="other"))
    pq.write_table(_table([nth_observation(11)]), root / "another.parquet")
    assert ledger.compact() == 2  # the root's two files merge into one compacted file at the root
    assert sorted(p.name.split("-")[0] for p in parquet_files(root)) == ["compact", "compact", "part"]
    assert len(ledger.read_all()) == 10 and ledger.compact() == 0


def test_compaction_deletes_a_killed_writers_temporary_file_once_a_day_old(tmp_path):
    ledger = ParquetLedger(tmp_path / "pq")
    ledger.append(make_observation())
    part = parquet_files(tmp_path / "pq")[0].parent
    old, fresh = part / ".part-dead-00000000.parquet.tmp", part / ".part-live-00000000.parquet.tmp"
    old.write_bytes(b"half a file")
    fresh.write_bytes(b"being written")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    ledger.compact()
    assert not old.exists() and fresh.exists() and len(ledger.read_all()) == 1


# -- URIs --------------------------------------------------------------------------------------------------------


def test_file_uri_and_fsspec_memory_uri(tmp_path):
    uri = (tmp_path / "pq").as_uri()
    ledger = ParquetLedger(uri)
    ledger.extend([keyed(i) for i in range(3)])
    assert ParquetLedger(tmp_path / "pq").read_all() == ledger.read_all()
    assert ledger.path == tmp_path / "pq"
    fsspec = pytest.importorskip("fsspec", reason="fsspec opens memory:// URIs: pip install fsspec")
    mem = ParquetLedger("memory://llm-connect-test/ledger")
    try:
        mem.extend([keyed(i) for i in range(3)])
        mem.append(keyed(1))  # a retry: read once
        mem.append(nth_observation(5, recorded_at=T0 - timedelta(days=5)))
        assert mem.read_all() == ledger.read_all()[:0] + sorted([nth_observation(5, recorded_at=T0 - timedelta(
            days=5)), *[keyed(i) for i in range(3)]], key=lambda o: o.recorded_at)
        assert mem.prune_before(T0) == 1 and len(mem.read_all()) == 3
        with pytest.raises(ValueError, match="no local path"):
            _ = mem.path
        assert "memory://" in repr(mem)
    finally:
        fsspec.filesystem("memory").rm("/llm-connect-test", recursive=True)


def test_uri_credentials_are_never_shown(tmp_path):
    ledger = ParquetLedger("memory://user:s3cr3t@bucket/ledger")
    assert "s3cr3t" not in repr(ledger) and "s3cr3t" not in ledger._repr_html_()


def test_unknown_uri_scheme_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot open the ledger root"):
        ParquetLedger("nosuchscheme-xyz://bucket/ledger").read_all()


def test_open_ledger_picks_the_class(tmp_path):
    (tmp_path / "dir").mkdir()
    assert isinstance(open_ledger(tmp_path / "dir"), ParquetLedger)
    assert isinstance(open_ledger("s3://bucket/ledger"), ParquetLedger)
    assert isinstance(open_ledger(tmp_path / "l.jsonl"), QualityLedger)


def test_pickled_writers_get_their_own_file_names_and_an_absolute_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ledger = ParquetLedger("pq")  # relative: a pickled copy keeps the absolute path
    monkeypatch.chdir(tmp_path.parent)
    clone = pickle.loads(pickle.dumps(ledger))
    assert clone._writer_id != ledger._writer_id and clone.root == str(tmp_path / "pq")
    ledger.append(make_observation())
    clone.append(make_observation())
    assert len(parquet_files(tmp_path / "pq")) == 2 and len(ledger.read_all()) == 2


# -- many writers while a compaction runs ------------------------------------------------------------------------

WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from llm_connect import ParquetLedger, QualityObservation
root, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ledger = ParquetLedger(root)
now = datetime.now(UTC)
for i in range(n):
    tags = {"writer": name, "i": i}
    if i % 4 == 0:  # a keyed judgment, retried: written twice, read once
        tags.update(item_id=f"{name}-{i}", grader_id="g", rubric_hash="h", run_id="run")
    o = QualityObservation("qa" if i % 3 else "math", "a", "m", 0.0, 0.5, 1.0, 1, 1, recorded_at=now, tags=tags)
    if i % 5 == 0:
        ledger.extend([o, o] if i % 4 == 0 else [o])
    else:
        ledger.append(o)
        if i % 4 == 0:
            ledger.append(o)
"""


def _seed_old(ledger: ParquetLedger) -> int:
    old = [nth_observation(i, task_type="qa" if i % 2 else "math") for i in range(40)]
    for k in range(0, 40, 8):
        ledger.extend(old[k:k + 8])
    return len(old)


def _check_writers(ledger: ParquetLedger, names: list[str], n: int) -> None:
    got = ledger.read_all()
    assert all(o.recorded_at > T0 + timedelta(days=1) for o in got)  # every seeded old one is pruned
    seen = sorted((o.tags["writer"], o.tags["i"]) for o in got)
    assert seen == sorted((name, i) for name in names for i in range(n))  # nothing lost, nothing twice
    assert ledger.malformed_count() == 0


def _prune_while(ledger: ParquetLedger, running) -> int:
    """prune_before in a loop while the writers run; returns how many observations it removed in all.

    Asserts that some of those passes merged files while writers were still appending."""
    cutoff = T0 + timedelta(days=1)
    removed, merged_during = 0, 0
    while running():
        gone, replaced = ledger._compact(cutoff)  # what prune_before runs, with the count of files it replaced
        removed += gone
        merged_during += replaced if running() else 0
        time.sleep(0.02)
    assert merged_during > 0, "no compaction overlapped the writers"
    return removed + ledger.prune_before(cutoff)


@pytest.mark.slow
def test_four_processes_append_while_a_compaction_runs_lose_and_duplicate_nothing(tmp_path):
    import subprocess

    root = tmp_path / "pq"
    ledger = ParquetLedger(root)
    n_old = _seed_old(ledger)
    names, n = [f"p{k}" for k in range(4)], 60
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), name, str(n)], env=env) for name in names]
    removed = _prune_while(ledger, lambda: any(p.poll() is None for p in procs))
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    assert removed == n_old
    _check_writers(ledger, names, n)
    ledger.compact()
    assert len(parquet_files(root)) == 2  # one file per partition (two task types, one date)
    _check_writers(ledger, names, n)


@pytest.mark.slow
def test_ray_actors_and_processes_append_while_a_compaction_runs(tmp_path):
    """The issue's test: 4 processes plus 2 Ray actors append to one ParquetLedger while prune_before runs."""
    try:
        import ray
    except ImportError:
        pytest.skip("Ray is not installed: pip install 'llm-connect[ray]'")
    import subprocess

    root = tmp_path / "pq"
    ledger = ParquetLedger(root)
    n_old = _seed_old(ledger)
    n = 30
    started = ray.is_initialized()
    if not started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        @ray.remote(num_cpus=0)
        class Writer:
            def run(self, ledger: ParquetLedger, name: str, n: int) -> int:
                ns: dict = {}
                code = WRITER.split("ledger = ParquetLedger(root)\n", 1)[1]
                exec(code, {**ns, "ledger": ledger, "name": name, "n": n,  # the writer script's loop
                            "datetime": datetime, "UTC": UTC, "QualityObservation": QualityObservation})
                return os.getpid()

        actors = [Writer.remote() for _ in range(2)]
        env = {**os.environ, "PYTHONPATH": SRC}
        names = [f"p{k}" for k in range(4)]
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), name, str(n)], env=env) for name in names]
        refs = [a.run.remote(ledger, f"ray{k}", n) for k, a in enumerate(actors)]
        removed = _prune_while(ledger, lambda: any(p.poll() is None for p in procs) or bool(ray.wait(
            refs, num_returns=len(refs), timeout=0)[1]))
        pids = ray.get(refs, timeout=120)
        assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        assert removed == n_old
        _check_writers(ledger, [*names, "ray0", "ray1"], n)
    finally:
        if not started:
            ray.shutdown()


# -- everything that reads a ledger takes one -----------------------------------------------------------------


def test_ledger_frame_route_evidence_and_paired_frame_accept_a_parquet_ledger(tmp_path):
    jsonl = QualityLedger(tmp_path / "l.jsonl")
    pql = ParquetLedger(tmp_path / "pq")
    now = datetime.now(UTC)
    obs = [make_observation(adapter_id=a, quality_score=q, cost_usd=c, recorded_at=now - timedelta(minutes=i),
                            tags={"grader_id": "llm-judge", "item_id": i, "maybe": None if i % 2 else [i]})
           for i in range(30) for a, q, c in [("cheap", 0.95, 0.001), ("dear", 1.0, 0.01)]]
    jsonl.extend(obs)
    pql.extend(obs)
    for mode in ("expand", "dict"):
        pd.testing.assert_frame_equal(
            ledger_frame(pql, tags=mode).sort_values(["recorded_at", "adapter_id"]).reset_index(drop=True),
            ledger_frame(jsonl, tags=mode).sort_values(["recorded_at", "adapter_id"]).reset_index(drop=True))
    assert ledger_frame(pql, tags="dict")["tags"].map(lambda t: "maybe" in t).all()  # a null tag stays in dicts
    assert len(ledger_frame(str(tmp_path / "pq"))) == 60  # a directory path is a Parquet root
    assert len(ledger_frame((tmp_path / "pq").as_uri(), tags="dict")) == 60
    assert route(pql, "qa", threshold=0.8).adapter_id == route(jsonl, "qa", threshold=0.8).adapter_id == "cheap"
    assert route(str(tmp_path / "pq"), "qa").adapter_id == "cheap"
    pd.testing.assert_frame_equal(evidence_table(pql, "qa", now=now), evidence_table(jsonl, "qa", now=now))
    labels = pd.DataFrame({"item_id": list(range(10)), "adapter_id": "cheap", "human": [1.0] * 9 + [0.0]})
    assert record_labels(pql, labels, task_type="qa", label="human") == 10
    record_labels(jsonl, labels, task_type="qa", label="human")
    a = paired_frame(pql, "qa", grader_id="llm-judge").sort_values(["item_id", "adapter_id"]).reset_index(drop=True)
    b = paired_frame(jsonl, "qa", grader_id="llm-judge").sort_values(["item_id", "adapter_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(ValueError, match="QualityLedger or a ParquetLedger"):
        record_labels("not a ledger", labels, task_type="qa")  # type: ignore[arg-type]


def test_judge_many_records_into_a_parquet_ledger(tmp_path):
    ledger = ParquetLedger(tmp_path / "pq")
    items = [{"id": f"q{i}", "prompt": "p", "baseline": "yes", "candidate": "yes" if i % 2 else "no"}
             for i in range(6)]
    df = judge_many(ExactMatchJudge(), items, ledger=ledger, task_type="qa", progress=False)
    assert df["ledger_error"].isna().all()
    got = sorted(ledger.read_all(), key=lambda o: o.tags["item_id"])
    assert [o.tags["item_id"] for o in got] == [f"q{i}" for i in range(6)]
    assert [o.quality_score for o in got] == [0.0, 1.0] * 3


# -- the command line ----------------------------------------------------------------------------------------------


def test_cli_convert_both_ways_and_stats_on_a_parquet_root(tmp_path, capsys):
    src = tmp_path / "l.jsonl"
    jsonl = QualityLedger(src)
    jsonl.extend([keyed(i, task_type="qa" if i % 2 else "x") for i in range(20)])
    with open(src, "a") as f:
        f.write("{broken\n")
    root = tmp_path / "pq"
    assert main(["ledger", "convert", str(src), str(root)]) == 0
    out = capsys.readouterr().out
    assert "converted 20 observations" in out and "(JSON Lines)" in out and "(Parquet)" in out
    assert "1 malformed lines skipped" in out
    assert sorted(ParquetLedger(root).read_all(), key=lambda o: o.tags["item_id"]) == jsonl.read_all()
    back = tmp_path / "back.jsonl"
    assert main(["ledger", "convert", str(root), str(back)]) == 0
    assert "converted 20 observations" in capsys.readouterr().out
    assert sorted(QualityLedger(back).read_all(), key=lambda o: o.tags["item_id"]) == jsonl.read_all()
    # a non-empty target is refused unless --append; with it the retried copies are read once
    with pytest.raises(SystemExit) as exc:
        main(["ledger", "convert", str(src), str(root)])
    assert exc.value.code == 2 and "--append" in capsys.readouterr().err
    assert main(["ledger", "convert", str(src), root.as_uri(), "--append"]) == 0
    capsys.readouterr()
    assert len(ParquetLedger(root).read_all()) == 20
    assert main(["ledger", "stats", str(root), "--min-observations", "1"]) == 0
    out = capsys.readouterr().out
    assert "20 observations, 0 malformed files or rows skipped" in out and "qa" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ledger", "convert", "{tmp}/missing.jsonl", "{tmp}/pq"], "no ledger at"),
        (["ledger", "convert", "{tmp}/l.jsonl", "{tmp}/l.jsonl"], "same ledger"),
        (["ledger", "stats", "{tmp}/missing.jsonl"], "no ledger at"),
        (["ledger", "stats", "nosuchscheme-xyz://b/l"], "cannot open the ledger root"),
    ],
)
def test_cli_ledger_errors_are_one_line_exit_2(tmp_path, capsys, args, message):
    QualityLedger(tmp_path / "l.jsonl").append(make_observation())
    with pytest.raises(SystemExit) as exc:
        main([a.replace("{tmp}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1


def test_cli_stats_require_calibrated_on_a_uri_ledger_is_a_clear_error(tmp_path, capsys):
    fsspec = pytest.importorskip("fsspec", reason="fsspec opens memory:// URIs: pip install fsspec")
    ParquetLedger("memory://llm-connect-cli/l").append(make_observation())
    try:
        with pytest.raises(SystemExit) as exc:
            main(["ledger", "stats", "memory://llm-connect-cli/l", "--require-calibrated"])
        assert exc.value.code == 2 and "no local path" in capsys.readouterr().err
    finally:
        fsspec.filesystem("memory").rm("/llm-connect-cli", recursive=True)


# -- a foreign or corrupt .parquet file under the root; credentials in a URI ---------------------------------


def obs(i: int = 0, **changes) -> QualityObservation:
    fields = {"task_type": "qa", "adapter_id": "a", "model_id": "m", "cost_usd": 0.0, "quality_score": 1.0,
              "latency_ms": 1.0, "tokens_in": 1, "tokens_out": 1, "tags": {"item_id": f"q{i}"}}
    return QualityObservation(**{**fields, **changes})



def _write_foreign(root: Path, kind: str) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = root / "task_type=qa" / "date=2024-01-01"
    directory.mkdir(parents=True, exist_ok=True)
    if kind == "duplicated column":
        table = pa.table([pa.array(["qa"]), pa.array(["qa"])], names=["task_type", "task_type"])
        path = directory / "part-foreign-00000000.parquet"
    else:  # a compact-* file whose list of the files it replaces is not a JSON list of names
        good = next(root.rglob("part-*.parquet"))
        table = pq.read_table(good)
        meta = {**(table.schema.metadata or {}), b"llm_connect.replaces": kind.encode()}
        table = table.replace_schema_metadata(meta)
        path = directory / "compact-foreign-00000000.parquet"
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("kind", ["duplicated column", "5", "null", '{"part-x.parquet": 1}', '"part-x.parquet"',
                                  "[1, 2]", "not json"])
def test_a_foreign_or_corrupt_parquet_file_is_counted_as_malformed_by_every_reader(tmp_path, kind, capsys):
    """``python -c "import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table([[1], [2]],
    names=['task_type', 'task_type']), 'ROOT/x.parquet')"`` then ``llm-connect ledger stats ROOT``:
    a KeyError or TypeError traceback from every reader before; now the file is one malformed file."""
    from llm_connect import ledger_frame

    root = tmp_path / "ledger"
    ledger = ParquetLedger(root)
    ledger.extend([obs(i) for i in range(3)])
    foreign = _write_foreign(root, kind)
    assert len(ledger.read_all()) == 3 and ledger.malformed_count() == 1
    assert ledger.read_with_malformed()[1] == 1
    assert len(ledger_frame(ledger)) == 3
    assert ledger.mean_quality("qa") == 1.0 and len(ledger.recent(10)) == 3
    ledger.compact()
    assert foreign.exists()  # never deleted: it was not read
    assert len(ledger.read_all()) == 3 and ledger.malformed_count() == 1
    assert main(["ledger", "stats", str(root), "--min-observations", "1"]) == 0
    assert "3 observations, 1 malformed files or rows skipped" in capsys.readouterr().out



@pytest.mark.parametrize("uri", ["memory://user:s3cr3t-pw@bucket/ledger", "file://user:s3cr3t-pw@localhost/tmp/l"])
def test_a_uris_password_is_redacted_from_the_missing_fsspec_error(uri, monkeypatch, capsys):
    """``ParquetLedger('memory://user:PW@b/l').read_all()`` without fsspec: pyarrow's message, quoted in the
    error, held the URI with its password."""
    monkeypatch.setitem(sys.modules, "fsspec", None)
    for call in (lambda: ParquetLedger(uri).read_all(), lambda: ParquetLedger(uri).append(obs())):
        with pytest.raises(MissingDependencyError) as info:
            call()
        assert "s3cr3t" not in str(info.value) and "fsspec" in str(info.value)
    with pytest.raises(SystemExit):
        main(["ledger", "stats", uri])
    assert "s3cr3t" not in capsys.readouterr().err

