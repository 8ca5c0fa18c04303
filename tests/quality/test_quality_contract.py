"""The quality contract: invariants 1-8, every error row, and the DESIGN.md pins."""

from __future__ import annotations

import json
import multiprocessing
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import T0, ledger_lines, observations, reference_read

from llm_connect import ParquetLedger, QualityLedger, QualityObservation
from llm_connect.errors import ValidationError
from llm_connect.quality import is_stale

# -- invariant 1: quality_score in 0..1 --------------------------------------------------


@pytest.mark.parametrize("q", [0.0, 0.5, 1.0, 1])
def test_invariant_1_quality_in_unit_interval_accepted(make_obs, q):
    assert make_obs(quality_score=q).quality_score == float(q)


@pytest.mark.parametrize("q", [-0.1, 1.1, float("nan"), float("inf"), "0.5", True, None])
def test_invariant_1_quality_outside_is_value_error(make_obs, q):
    with pytest.raises(ValueError, match="quality_score"):
        make_obs(quality_score=q)


# -- invariant 2: ids non-empty strings ------------------------------------------------------


@pytest.mark.parametrize("field", ["task_type", "adapter_id", "model_id"])
@pytest.mark.parametrize("bad", ["", "  ", None, 3])
def test_invariant_2_and_error_row_invalid_id_field(make_obs, field, bad):
    with pytest.raises(ValueError, match=field):
        make_obs(**{field: bad})


# -- invariant 3: non-negative numbers -----------------------------------------------------------


@pytest.mark.parametrize("field", ["cost_usd", "latency_ms", "tokens_in", "tokens_out"])
@pytest.mark.parametrize("bad", [-1, float("nan"), "1", True])
def test_invariant_3_and_error_row_negative_or_invalid_numbers(make_obs, field, bad):
    with pytest.raises(ValueError, match=field):
        make_obs(**{field: bad})


def test_invariant_3_tokens_must_be_integers(make_obs):
    with pytest.raises(ValueError, match="tokens_in"):
        make_obs(tokens_in=1.5)
    assert make_obs(cost_usd=0, latency_ms=0, tokens_in=0, tokens_out=0).total_tokens == 0


def test_total_tokens(make_obs):
    assert make_obs(tokens_in=7, tokens_out=5).total_tokens == 12


# -- invariant 4: recorded_at in UTC --------------------------------------------------------------


def test_invariant_4_naive_datetime_is_utc(make_obs):
    o = make_obs(recorded_at=datetime(2026, 3, 1, 8, 30))
    assert o.recorded_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert o.recorded_at.utcoffset() == timedelta(0)


def test_invariant_4_aware_datetime_is_converted_to_utc(make_obs):
    plus2 = timezone(timedelta(hours=2))
    o = make_obs(recorded_at=datetime(2026, 3, 1, 10, 30, tzinfo=plus2))
    assert o.recorded_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert o.recorded_at.tzinfo == UTC


def test_invariant_4_default_recorded_at_is_now_utc(make_obs):
    before = datetime.now(UTC)
    o = QualityObservation("qa", "a", "m", 0.0, 1.0, 0.0, 0, 0)
    assert before <= o.recorded_at <= datetime.now(UTC)
    assert o.recorded_at.tzinfo == UTC


@pytest.mark.parametrize("bad", ["2026-01-01", 1700000000, None])
def test_error_row_invalid_datetime_field(make_obs, bad):
    with pytest.raises((TypeError, ValueError)):
        make_obs(recorded_at=bad)


# -- invariant 5: JSON Lines, one to_dict per line -------------------------------------------------


def test_invariant_5_each_line_is_one_to_dict(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    obs = [make_obs(quality_score=i / 10, tags={"i": i}) for i in range(3)]
    for o in obs:
        ledger.append(o)
    lines = ledger_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [o.to_dict() for o in obs]


def test_to_dict_is_json_serialisable_with_offset_and_round_trips(make_obs):
    o = make_obs(baseline_adapter_id="base", tags={"rubric_hash": "abc", "nested": {"k": [1, 2]}})
    d = json.loads(json.dumps(o.to_dict()))
    assert d["recorded_at"] == "2026-01-01T12:00:00+00:00"
    assert QualityObservation.from_dict(d) == o


def test_from_dict_ignores_unknown_keys_and_rejects_missing_or_invalid_recorded_at(make_obs):
    d = make_obs().to_dict()
    assert QualityObservation.from_dict({**d, "future_field": 1}) == make_obs()
    missing = dict(d)
    del missing["recorded_at"]
    with pytest.raises((TypeError, ValueError)):
        QualityObservation.from_dict(missing)
    for bad in ("yesterday", 12345, None, ""):
        with pytest.raises((TypeError, ValueError)):
            QualityObservation.from_dict({**d, "recorded_at": bad})


def test_from_dict_naive_iso_string_is_utc(make_obs):
    d = {**make_obs().to_dict(), "recorded_at": "2026-01-01T12:00:00"}
    assert QualityObservation.from_dict(d).recorded_at == T0


def test_error_row_invalid_observation_field_from_dict(make_obs):
    d = make_obs().to_dict()
    for key in ("task_type", "quality_score", "tokens_in"):
        broken = dict(d)
        del broken[key]
        with pytest.raises(ValueError, match=key):
            QualityObservation.from_dict(broken)
    with pytest.raises(ValueError):
        QualityObservation.from_dict([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tags"):
        QualityObservation.from_dict({**d, "tags": [1]})


def test_tags_must_be_json_serialisable(make_obs):
    with pytest.raises(ValueError, match="tags"):
        make_obs(tags={"x": object()})
    with pytest.raises(ValueError, match="tags"):
        make_obs(tags={"x": float("nan")})


# -- invariant 6: process-local lock plus advisory file lock ---------------------------------------


def test_invariant_6_append_waits_for_the_file_lock_beside_the_ledger(ledger_path, make_obs):
    from filelock import FileLock

    ledger = QualityLedger(ledger_path)
    assert ledger.lock_path == Path(str(ledger_path) + ".lock")
    other = FileLock(str(ledger.lock_path))  # another tool holding the same lock
    other.acquire()
    done = threading.Event()
    t = threading.Thread(target=lambda: (ledger.append(make_obs()), done.set()))
    t.start()
    try:
        assert not done.wait(0.5), "append must wait while another holder has <path>.lock"
    finally:
        other.release()
    t.join(5)
    assert done.is_set()
    assert len(ledger.read_all()) == 1


def test_invariant_6_threads_appending_lose_nothing(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    obs = make_obs()

    def burst():
        for _ in range(200):
            ledger.append(obs)

    threads = [threading.Thread(target=burst) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ledger.read_all()) == 1600
    assert ledger.malformed_count() == 0


def _append_worker(path: str, worker: int, n: int) -> None:
    ledger = QualityLedger(path)
    for i in range(n):
        ledger.append(
            QualityObservation("qa", f"adapter-{worker}", "m", 0.0, 0.5, 1.0, 1, 1, tags={"w": worker, "i": i})
        )


@pytest.mark.slow  # 8 s measured on 2 busy cores: out of the fast loop
def test_invariant_6_four_processes_appending_at_once_lose_no_line(ledger_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_worker, args=(str(ledger_path), w, 500)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    ledger = QualityLedger(ledger_path)
    seen = {(o.tags["w"], o.tags["i"]) for o in ledger.read_all()}
    assert seen == {(w, i) for w in range(4) for i in range(500)}
    assert ledger.malformed_count() == 0
    assert len(ledger_path.read_bytes().splitlines()) == 2000


# -- invariant 7: malformed lines skipped and counted -------------------------------------------


def test_invariant_7_malformed_lines_are_skipped_and_counted(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    ledger.append(make_obs(quality_score=0.1))
    with open(ledger_path, "ab") as f:
        f.write(b"not json\n\n   \n")
        f.write(b'{"task_type": "qa"}\n')  # valid JSON, invalid observation
        f.write(b"\xff\xfe invalid utf-8\n")
        f.write(b"[1, 2]\n")
    ledger.append(make_obs(quality_score=0.2))
    assert [o.quality_score for o in ledger.read_all()] == [0.1, 0.2]
    assert ledger.malformed_count() == 4  # blank lines are neither observations nor malformed
    assert len(ledger.by_task_type("qa")) == 2
    assert ledger.mean_quality("qa") == pytest.approx(0.15)


def test_invariant_7_a_torn_last_line_does_not_swallow_the_next_append(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    ledger.append(make_obs(quality_score=0.1))
    with open(ledger_path, "ab") as f:
        f.write(b'{"task_type": "qa", "adapter_')  # a writer killed mid-line
    ledger.append(make_obs(quality_score=0.3))
    assert [o.quality_score for o in ledger.read_all()] == [0.1, 0.3]
    assert ledger.malformed_count() == 1


def test_missing_ledger_reads_empty(tmp_path):
    ledger = QualityLedger(tmp_path / "nope.jsonl")
    assert ledger.read_all() == [] and ledger.malformed_count() == 0
    assert ledger.prune_before(T0) == 0 and ledger.mean_quality("qa") is None
    assert not (tmp_path / "nope.jsonl").exists()


# -- invariant 8: prune_before removes only valid old observations ---------------------------------


def test_invariant_8_prune_removes_only_valid_old_observations_and_keeps_malformed(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    old = [make_obs(recorded_at=T0 - timedelta(days=d)) for d in (3, 2)]
    new = [make_obs(recorded_at=T0 + timedelta(days=d)) for d in (0, 1)]
    ledger.append(old[0])
    with open(ledger_path, "ab") as f:
        f.write(b"garbage line\n")
    for o in (old[1], *new):
        ledger.append(o)
    assert ledger.prune_before(T0) == 2
    assert ledger.read_all() == new  # recorded_at == cutoff is kept (strictly older is removed)
    assert ledger.malformed_count() == 1
    assert b"garbage line" in ledger_path.read_bytes()
    assert ledger.prune_before(T0) == 0


def test_prune_before_naive_timestamp_is_utc(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    ledger.append(make_obs(recorded_at=T0 - timedelta(minutes=1)))
    ledger.append(make_obs(recorded_at=T0 + timedelta(minutes=1)))
    assert ledger.prune_before(datetime(2026, 1, 1, 12, 0)) == 1


def test_prune_before_invalid_timestamp(ledger_path):
    with pytest.raises((TypeError, ValueError)):
        QualityLedger(ledger_path).prune_before("2026-01-01")  # type: ignore[arg-type]


def test_prune_is_atomic_replace_leaving_no_temp_file(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    for d in range(5):
        ledger.append(make_obs(recorded_at=T0 + timedelta(days=d)))
    ino_before = ledger_path.stat().st_ino
    assert ledger.prune_before(T0 + timedelta(days=2)) == 2
    assert ledger_path.stat().st_ino != ino_before  # a new file was renamed over the old one
    assert sorted(p.name for p in ledger_path.parent.iterdir()) == ["ledger.jsonl", "ledger.jsonl.lock"]


# -- recent --------------------------------------------------------------------------------------


def test_recent_newest_first_with_filters_and_limit(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    for d, task, adapter in [(1, "qa", "a"), (3, "qa", "b"), (2, "sum", "a"), (0, "qa", "a")]:
        ledger.append(make_obs(recorded_at=T0 + timedelta(days=d), task_type=task, adapter_id=adapter))
    days = [(o.recorded_at - T0).days for o in ledger.recent()]
    assert days == [3, 2, 1, 0]
    assert [(o.recorded_at - T0).days for o in ledger.recent(2)] == [3, 2]
    assert [(o.recorded_at - T0).days for o in ledger.recent(task_type="qa")] == [3, 1, 0]
    assert [(o.recorded_at - T0).days for o in ledger.recent(task_type="qa", adapter_id="a")] == [1, 0]
    assert ledger.recent(0) == []


@pytest.mark.parametrize("bad", [-1, -10])
def test_error_row_negative_recent_limit(ledger_path, bad):
    with pytest.raises(ValueError, match="limit"):
        QualityLedger(ledger_path).recent(bad)


# -- mean_quality ----------------------------------------------------------------------------------


def test_mean_quality_filters_min_observations_and_max_age(ledger_path, make_obs):
    ledger = QualityLedger(ledger_path)
    ledger.append(make_obs(quality_score=0.2, recorded_at=T0 - timedelta(days=10)))
    ledger.append(make_obs(quality_score=0.6, recorded_at=T0 - timedelta(hours=1)))
    ledger.append(make_obs(quality_score=1.0, recorded_at=T0, adapter_id="other"))
    assert ledger.mean_quality("qa") == pytest.approx(0.6)
    assert ledger.mean_quality("qa", adapter_id="other") == 1.0
    assert ledger.mean_quality("qa", max_age=timedelta(days=1), now=T0) == pytest.approx(0.8)
    assert ledger.mean_quality("qa", min_observations=4) is None
    assert ledger.mean_quality("qa", min_observations=3) == pytest.approx(0.6)
    assert ledger.mean_quality("nope") is None
    # an observation exactly max_age old is not stale, so it is kept
    assert ledger.mean_quality("qa", max_age=timedelta(hours=1), now=T0) == pytest.approx(0.8)


@pytest.mark.parametrize("bad", [0, -1])
def test_error_row_mean_quality_min_observations_not_positive(ledger_path, bad):
    with pytest.raises(ValueError, match="min_observations"):
        QualityLedger(ledger_path).mean_quality("qa", min_observations=bad)


def test_mean_quality_negative_max_age(ledger_path):
    with pytest.raises(ValueError):
        QualityLedger(ledger_path).mean_quality("qa", max_age=timedelta(seconds=-1))


# -- is_stale ------------------------------------------------------------------------------------------


def test_is_stale_is_strict(make_obs):
    o = make_obs(recorded_at=T0)
    assert not is_stale(o, timedelta(hours=1), now=T0 + timedelta(hours=1))
    assert is_stale(o, timedelta(hours=1), now=T0 + timedelta(hours=1, microseconds=1))
    assert not is_stale(o, timedelta(0), now=T0)
    assert not is_stale(o, timedelta(hours=1), now=datetime(2026, 1, 1, 12, 30))  # naive now is UTC


def test_error_row_is_stale_negative_max_age(make_obs):
    with pytest.raises(ValueError):
        is_stale(make_obs(), timedelta(seconds=-1))


# -- Hypothesis round trips -------------------------------------------------------------------------


@given(observations())
@settings(max_examples=200, deadline=None)
def test_hypothesis_round_trip_through_to_dict_json_from_dict(o):
    line = json.dumps(o.to_dict())
    back = QualityObservation.from_dict(json.loads(line))
    assert back == o
    assert back.to_dict() == o.to_dict()


@pytest.mark.slow  # 7 s measured on 2 busy cores: out of the fast loop
@given(st.lists(ledger_lines, max_size=12), st.integers(0, 5))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_hypothesis_garbage_lines_are_skipped_and_counted_never_raised(tmp_path, garbage, n_valid):
    path = tmp_path / f"g{abs(hash((tuple(garbage), n_valid)))}.jsonl"
    ledger = QualityLedger(path)
    good = QualityObservation("qa", "a", "m", 0.0, 0.5, 1.0, 1, 1, recorded_at=T0)
    lines = [g.replace(b"\r", b" ") for g in garbage]
    _, expected_bad = reference_read(b"\n".join(lines))
    with open(path, "wb") as f:
        for g in lines:
            f.write(g + b"\n")
    for _ in range(n_valid):
        ledger.append(good)
    assert ledger.malformed_count() == expected_bad
    assert ledger.read_all().count(good) >= n_valid
    ledger.prune_before(T0 + timedelta(days=1))
    assert ledger.malformed_count() == expected_bad  # malformed lines survive a prune


# -- tags nested too deep are refused at validation ----------------------------------------------------------


def obs(i: int = 0, **changes) -> QualityObservation:
    fields = {"task_type": "qa", "adapter_id": "a", "model_id": "m", "cost_usd": 0.0, "quality_score": 1.0,
              "latency_ms": 1.0, "tokens_in": 1, "tokens_out": 1, "tags": {"item_id": f"q{i}"}}
    return QualityObservation(**{**fields, **changes})



def _nested(depth: int) -> dict:
    value: object = "leaf"
    for _ in range(depth - 1):
        value = {"k": value}
    return {"deep": value}


@pytest.mark.parametrize("depth", [33, 990, 5000])
def test_tags_nested_deeper_than_the_cap_are_a_validation_error_naming_it(depth):
    """``QualityObservation(..., tags=<990 levels>)`` was accepted and written, then never read back (deeper:
    a raw RecursionError)."""
    with pytest.raises(ValidationError, match="TAGS_MAX_DEPTH = 32"):
        obs(tags=_nested(depth))
    from llm_connect.quality._observation import TAGS_MAX_DEPTH

    assert TAGS_MAX_DEPTH == 32


def test_tags_at_the_cap_round_trip_and_deeper_ones_written_by_others_are_malformed(tmp_path):
    import pyarrow.parquet as pq

    at_cap = obs(tags=_nested(32))
    jsonl = QualityLedger(tmp_path / "l.jsonl")
    jsonl.append(at_cap)
    parquet = ParquetLedger(tmp_path / "p")
    parquet.append(at_cap)
    assert jsonl.read_all() == [at_cap] and parquet.read_all() == [at_cap]
    # another tool writes deeper tags: every reader counts them as malformed (as from_dict refuses them)
    for depth in (33, 900):
        with open(jsonl.path, "a") as f:
            f.write(json.dumps({**at_cap.to_dict(), "tags": _nested(depth)}) + "\n")
    assert jsonl.read_all() == [at_cap] and jsonl.malformed_count() == 2
    assert len(list(jsonl.iter_observations())) == 1
    table = pq.read_table(next((tmp_path / "p").rglob("*.parquet")))
    deep = table.set_column(table.column_names.index("tags"), "tags",
                            [[json.dumps(_nested(33), separators=(",", ":"))]])
    pq.write_table(deep, next((tmp_path / "p").rglob("*.parquet")).with_name("part-other-00000000.parquet"))
    assert parquet.read_all() == [at_cap] and parquet.malformed_count() == 1

