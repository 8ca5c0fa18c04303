"""The quality ledger on adversarial paths and permissions, and text and line sizes every reader must agree on:
symlinks, read-only files and directories, another user, lone surrogates, lines over the cap, 100 MiB lines.

Nothing of ``llm_connect`` is mocked: the permission checks run the ledger in a forked child that dropped from
root to user ``nobody``. Many writers, crashes and prune under load are ``test_ledger_writers.py``'s.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import tempfile
import threading
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from filelock import FileLock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    T0,
    line_of,
    lone_surrogates,
    reference_read,
)
from strategies import make_observation as obs

from llm_connect import QualityLedger, QualityObservation
from llm_connect.cli import main as cli_main
from llm_connect.errors import ValidationError
from llm_connect.frames import ledger_frame, observations_from_frame
from llm_connect.quality import MAX_LINE_BYTES
from llm_connect.quality._ledger_io import line_blocks

OLD = datetime(2000, 1, 1, tzinfo=UTC)
CUTOFF = datetime(2020, 1, 1, tzinfo=UTC)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and signals")


# == adversarial paths, permissions, text and line sizes =================================================
#
# Each test below failed before the fix it names (see the report of that change); together they pin
# that every reader agrees -- iter_observations, read_all, recent, mean_quality, by_task_type,
# malformed_count, prune_before, ledger_frame (arrow and fallback paths) -- on what a line holds.

NOBODY = 65534


def everything_agrees(ledger: QualityLedger, expected: list[QualityObservation], malformed: int) -> None:
    """Every reader of ``ledger`` (and ``ledger_frame``, both tag modes) sees ``expected`` and ``malformed``."""
    assert ledger.read_all() == expected
    assert list(ledger.iter_observations()) == expected
    assert ledger.malformed_count() == malformed
    for task in {o.task_type for o in expected} | {"qa"}:
        mine = [o for o in expected if o.task_type == task]
        assert ledger.by_task_type(task) == mine
        scores = [o.quality_score for o in mine]
        assert ledger.mean_quality(task) == (pytest.approx(sum(scores) / len(scores)) if scores else None)
        newest = sorted(enumerate(mine), key=lambda t: (t[1].recorded_at, t[0]), reverse=True)
        assert ledger.recent(len(mine) + 1, task_type=task) == [o for _, o in newest]
    for mode in ("dict", "expand"):
        df = ledger_frame(ledger, tags=mode)
        assert df.attrs["malformed_count"] == malformed, mode
        assert len(df) == len(expected), mode
        if mode == "dict":
            assert observations_from_frame(df) == expected
    if ledger.path.exists():
        by_path = ledger_frame(ledger.path, tags="dict") if ledger.max_line_bytes == MAX_LINE_BYTES else None
        if by_path is not None:
            assert by_path.attrs["malformed_count"] == malformed
            assert observations_from_frame(by_path) == expected


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- 1. a symlinked ledger: one lock, and the link survives a prune -----------------------------------------


def test_prune_through_a_symlink_keeps_the_link_and_rewrites_the_target(tmp_path):
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "ledger.jsonl"
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(target)
    old, new = obs(recorded_at=OLD, tags={"k": "old"}), obs(recorded_at=T0, tags={"k": "new"})
    target.write_bytes(line_of(old) + b"\n" + b"not json\n" + line_of(new) + b"\n")
    via_link = QualityLedger(link)

    assert via_link.prune_before(CUTOFF) == 1
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"not json\n" + line_of(new) + b"\n"  # malformed line kept
    assert via_link.path == link and via_link.real_path == target
    assert via_link.lock_path == QualityLedger(target).lock_path == Path(str(target) + ".lock")
    assert not Path(str(link) + ".lock").exists()
    assert temp_files(tmp_path) == temp_files(tmp_path / "data") == []
    via_link.append(obs(recorded_at=T0, tags={"k": "after"}))
    assert [o.tags["k"] for o in QualityLedger(target).read_all()] == ["new", "after"]
    everything_agrees(via_link, QualityLedger(target).read_all(), 1)


def test_a_symlink_and_its_target_share_one_lock(tmp_path):
    target = tmp_path / "target.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    other_tool = FileLock(str(target) + ".lock")  # what another tool takes for the target ledger
    done = threading.Event()
    errors: list[BaseException] = []

    def append_via_link() -> None:
        try:
            QualityLedger(link).append(obs())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    with other_tool:
        worker = threading.Thread(target=append_via_link)
        worker.start()
        assert not done.wait(0.5), "an append through the link did not wait for the target's lock"
        assert not target.exists()
    assert done.wait(30) and not errors
    worker.join()
    assert len(QualityLedger(target).read_all()) == 1


# -- 2. a read-only ledger: prune needs exactly what append needs ---------------------------------------------


def test_a_ledger_without_write_permission_bits_refuses_prune_and_append_and_stays_unchanged(ledger_path):
    # Tests run as root here, whom the kernel lets write a 0o444 file: the ledger reads the mode bits.
    ledger = QualityLedger(ledger_path)
    ledger.extend([obs(recorded_at=OLD), obs(recorded_at=T0)])
    ledger_path.chmod(0o444)
    before, inode = ledger_path.read_bytes(), ledger_path.stat().st_ino
    try:
        with pytest.raises(PermissionError) as prune_error:
            ledger.prune_before(CUTOFF)
        with pytest.raises(PermissionError) as append_error:
            ledger.append(obs())
        with pytest.raises(PermissionError):
            ledger.extend([obs(), obs()])
        for message in (str(prune_error.value), str(append_error.value)):
            assert str(ledger_path) in message and "read-only" in message and "chmod u+w" in message
        assert prune_error.value.errno == errno.EACCES
        assert ledger_path.read_bytes() == before
        assert ledger_path.stat().st_ino == inode and stat.S_IMODE(ledger_path.stat().st_mode) == 0o444
        assert temp_files(ledger_path.parent) == []
        assert len(ledger.read_all()) == 2  # still readable
    finally:
        ledger_path.chmod(0o644)
    assert ledger.prune_before(CUTOFF) == 1  # writable again: prune works


def test_prune_keeps_the_mode_and_owner_of_the_ledger(ledger_path):
    ledger = QualityLedger(ledger_path)
    ledger.extend([obs(recorded_at=OLD), obs(recorded_at=T0)])
    ledger_path.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(ledger_path, NOBODY, NOBODY)
    before = ledger_path.stat()
    assert ledger.prune_before(CUTOFF) == 1
    after = ledger_path.stat()
    assert stat.S_IMODE(after.st_mode) == 0o640
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


def _run_as_nobody(fn, *args):
    """``fn(*args)`` in a forked child that dropped root for user nobody: ``("ok", result)`` or
    ``(exception class name, errno, message)``. Only our code runs in the child; nothing is mocked."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 0
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                out = ["ok", fn(*args)]
            except Exception as exc:
                out = [type(exc).__name__, getattr(exc, "errno", None), str(exc)]
            os.write(write_end, json.dumps(out).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return tuple(json.loads(data))


def _append(path: str) -> int:
    QualityLedger(path).append(obs(recorded_at=T0))
    return 1


def _prune(path: str) -> int:
    return QualityLedger(path).prune_before(CUTOFF)


def _read(path: str) -> int:
    return len(QualityLedger(path).read_all())


@pytest.fixture
def shared_dir():
    """A directory user nobody can reach (pytest's tmp_path is private to root)."""
    if os.geteuid() != 0:
        pytest.skip("drops from root to user nobody")
    d = Path(tempfile.mkdtemp(prefix="ledger-perm-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in sorted(d.rglob("*"), reverse=True):
            p.chmod(0o700) if p.is_dir() and not p.is_symlink() else None
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        d.rmdir()


@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_as_another_user_prune_fails_exactly_when_append_fails_and_removes_nothing(shared_dir):
    # A root-owned 0o644 ledger in a directory nobody may write: before the fix, nobody's append
    # failed but its prune succeeded (it renamed a new file over one it could not write).
    ledger_path = shared_dir / "ledger.jsonl"
    QualityLedger(ledger_path).extend([obs(recorded_at=OLD), obs(recorded_at=T0)])
    os.chown(shared_dir, NOBODY, NOBODY)
    (shared_dir / "ledger.jsonl.lock").chmod(0o666)
    before, inode = ledger_path.read_bytes(), ledger_path.stat().st_ino

    appended = _run_as_nobody(_append, str(ledger_path))
    pruned = _run_as_nobody(_prune, str(ledger_path))
    assert appended[0] == pruned[0] == "PermissionError", (appended, pruned)
    assert str(ledger_path) in pruned[2] and "chmod u+w" in pruned[2]
    assert _run_as_nobody(_read, str(ledger_path)) == ("ok", 2)
    assert ledger_path.read_bytes() == before and ledger_path.stat().st_ino == inode
    assert temp_files(shared_dir) == []

    os.chown(ledger_path, NOBODY, NOBODY)  # now nobody may write the ledger: both work
    assert _run_as_nobody(_append, str(ledger_path)) == ("ok", 1)
    assert _run_as_nobody(_prune, str(ledger_path)) == ("ok", 1)
    assert ledger_path.stat().st_uid == NOBODY


@pytest.mark.filterwarnings("ignore:.*multi-threaded.*fork:DeprecationWarning")
def test_as_another_user_a_read_only_directory_names_the_lock_file_and_what_to_do(shared_dir):
    ledger_path = shared_dir / "ledger.jsonl"
    ledger_path.write_bytes(line_of(obs(recorded_at=OLD)) + b"\n")
    ledger_path.chmod(0o666)  # the file is writable; its directory (root's, 0o755) is not
    before = ledger_path.read_bytes()
    for fn in (_append, _prune):
        name, code, message = _run_as_nobody(fn, str(ledger_path))
        assert (name, code) == ("PermissionError", errno.EACCES), message
        assert f"{str(ledger_path) + '.lock'!r}" in message, message
        assert f"make the directory {str(shared_dir)!r} writable" in message, message
    assert ledger_path.read_bytes() == before
    assert sorted(p.name for p in shared_dir.iterdir()) == ["ledger.jsonl"]

    # With its lock file already there, append works; prune still needs the directory for its
    # temporary file and atomic rename, and says so, removing nothing.
    (shared_dir / "ledger.jsonl.lock").touch(mode=0o666)
    (shared_dir / "ledger.jsonl.lock").chmod(0o666)
    assert _run_as_nobody(_append, str(ledger_path)) == ("ok", 1)
    after_append = ledger_path.read_bytes()
    name, code, message = _run_as_nobody(_prune, str(ledger_path))
    assert name == "PermissionError", message
    assert f"make the directory {str(shared_dir)!r} writable" in message and "temporary file" in message
    assert ledger_path.read_bytes() == after_append
    assert sorted(p.name for p in shared_dir.iterdir()) == ["ledger.jsonl", "ledger.jsonl.lock"]


# -- 3. lone surrogates ---------------------------------------------------------------------------------------

TEXT_FIELDS = ["task_type", "adapter_id", "model_id", "baseline_adapter_id"]


@given(st.sampled_from(TEXT_FIELDS), st.text(min_size=1, max_size=8).filter(str.strip), lone_surrogates, st.data())
@settings(max_examples=60, deadline=None)
def test_hypothesis_a_lone_surrogate_in_any_text_field_is_a_validation_error_naming_it(field, text, bad, data):
    at = data.draw(st.integers(0, len(text)))
    with pytest.raises(ValidationError) as caught:
        obs(**{field: text[:at] + bad + text[at:]})
    assert str(caught.value).startswith(f"{field} holds a lone surrogate")
    str(caught.value).encode("utf-8")  # the message itself is printable


@pytest.mark.parametrize(
    ("tags", "where"),
    [
        ({"k": "v\ud800"}, "tags['k']"),
        ({"k\udc00": 1}, "a key of tags"),
        ({"n": [1, {"deep": "\udfff"}]}, "tags['n'][1]['deep']"),
        ({"n": {"k\ud800": None}}, "a key of tags['n']"),
        ({"n": ("x", "\ud83d")}, "tags['n'][1]"),
    ],
)
def test_a_lone_surrogate_anywhere_in_tags_is_a_validation_error_naming_where(tags, where):
    with pytest.raises(ValidationError) as caught:
        obs(tags=tags)
    assert str(caught.value).startswith(f"{where} holds a lone surrogate"), str(caught.value)


def test_valid_astral_text_is_still_accepted(ledger_path):
    o = obs(adapter_id="a😀", tags={"😀": ["😀", {"k": "é"}]})
    QualityLedger(ledger_path).append(o)
    assert QualityLedger(ledger_path).read_all() == [o]


def _surrogate_lines() -> tuple[list[bytes], list[bytes]]:
    """(lines whose JSON escapes decode to a lone surrogate in a field the ledger reads, valid look-alikes)."""
    base = obs(recorded_at=T0).to_dict()
    bad = []
    for field in TEXT_FIELDS:
        bad.append({**base, field: "x\ud800"})
    for tags in ({"k": "v\ud800"}, {"k\udc00": 1}, {"n": [{"deep": "\udfff"}]}, {"n": {"k\ud800": 1}}):
        bad.append({**base, "tags": tags})
    good = [
        {**base, "tags": {"emoji": "😀"}},  # a surrogate *pair* escape is one valid character
        {**base, "future\ud800": 1},  # unknown keys are ignored, whatever they hold
        {**base, "future": ["\udfff"]},
    ]
    dump = lambda d: json.dumps(d, separators=(",", ":")).encode("ascii")  # noqa: E731 - ensure_ascii escapes
    return [dump(d) for d in bad], [dump(d) for d in good]


def test_a_line_holding_a_lone_surrogate_escape_is_malformed_for_every_reader(ledger_path, capsys):
    bad, good = _surrogate_lines()
    assert all(b"\\ud" in line for line in bad)
    filler = [obs(quality_score=i % 3 * 0.5, recorded_at=T0 + timedelta(seconds=i), tags={"i": i}) for i in range(40)]
    lines = [line_of(o) for o in filler]
    for k, line in enumerate(bad + good):  # scattered through a block big enough for the arrow path
        lines.insert(3 * k + 1, line)
    ledger_path.write_bytes(b"\n".join(lines) + b"\n")
    ledger = QualityLedger(ledger_path)
    expected = [QualityObservation.from_dict(json.loads(line)) for line in lines if line not in bad]
    assert len(expected) == len(filler) + len(good)

    everything_agrees(ledger, expected, len(bad))
    assert cli_main(["ledger", "stats", str(ledger_path)]) == 0
    assert f"{len(bad)} malformed" in capsys.readouterr().out
    cutoff = T0 + timedelta(seconds=20)
    assert ledger.prune_before(cutoff) == sum(o.recorded_at < cutoff for o in expected) == 23
    kept = ledger_path.read_bytes().split(b"\n")
    assert all(line in kept for line in bad)  # malformed lines survive the prune byte for byte
    assert ledger.malformed_count() == len(bad)


def test_the_ledger_and_frames_still_read_non_ascii_written_with_ensure_ascii(ledger_path):
    many = [obs(recorded_at=T0 + timedelta(seconds=i), tags={"t": "é😀" * (i % 3)}) for i in range(30)]
    ledger_path.write_bytes(b"".join(line_of(o, ensure_ascii=True) + b"\n" for o in many))
    everything_agrees(QualityLedger(ledger_path), many, 0)


# -- 4. OS errors name the path and the next step -------------------------------------------------------------

LEDGER_ACTIONS = [
    lambda ledger: ledger.append(obs()),
    lambda ledger: ledger.prune_before(CUTOFF),
    lambda ledger: ledger.read_all(),
]


def test_a_ledger_under_a_regular_file_is_a_clear_not_a_directory_error(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    for path in (plain / "ledger.jsonl", plain / "sub" / "ledger.jsonl"):
        for action in LEDGER_ACTIONS:
            with pytest.raises(NotADirectoryError) as caught:
                action(QualityLedger(path))
            message = str(caught.value)
            assert str(path) in message and f"{str(plain)!r} is a file, not a directory" in message, message
            assert "choose a ledger path inside a directory" in message
    assert plain.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["plain.txt"]


def test_a_dangling_symlink_whose_directory_is_gone_is_a_clear_error_and_creates_nothing(tmp_path):
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(tmp_path / "unmounted" / "ledger.jsonl")
    ledger = QualityLedger(link)
    with pytest.raises(FileNotFoundError) as caught:
        ledger.append(obs())
    message = str(caught.value)
    assert "is a symbolic link to" in message and str(tmp_path / "unmounted") in message, message
    assert f"create {str(tmp_path / 'unmounted')!r}" in message
    assert not (tmp_path / "unmounted").exists()  # no directory made through a dangling link
    assert ledger.read_all() == [] and ledger.prune_before(CUTOFF) == 0 and ledger.malformed_count() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl"]


def test_a_dangling_symlink_into_an_existing_directory_creates_the_target_and_stays_a_link(tmp_path):
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "ledger.jsonl"
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(target)
    QualityLedger(link).append(obs())
    assert link.is_symlink() and target.is_file()
    assert QualityLedger(target).read_all() == [obs()]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["ledger.jsonl", "ledger.jsonl.lock"]


def test_a_directory_as_ledger_path_is_a_clear_error(tmp_path):
    for action in LEDGER_ACTIONS:
        with pytest.raises(IsADirectoryError) as caught:
            action(QualityLedger(tmp_path))
        assert f"{str(tmp_path)!r} is a directory; give the path of a file" in str(caught.value)


# -- 5. lines over max_line_bytes ---------------------------------------------------------------------------


def padded(length: int, **fields) -> tuple[QualityObservation, bytes]:
    """An observation whose ledger line is exactly ``length`` bytes (newline not counted)."""
    o = obs(**fields, tags={"pad": ""})
    pad = length - len(line_of(o))
    assert pad >= 0
    o = obs(**fields, tags={"pad": "x" * pad})
    line = line_of(o)
    assert len(line) == length
    return o, line


def test_the_default_cap_is_one_mebibyte():
    assert MAX_LINE_BYTES == 1 << 20
    assert QualityLedger("x.jsonl").max_line_bytes == MAX_LINE_BYTES
    for bad in (0, -1, True, 1.5, "1"):
        with pytest.raises(ValidationError):
            QualityLedger("x.jsonl", max_line_bytes=bad)


def test_a_line_over_max_line_bytes_is_malformed_for_every_reader_and_kept_by_prune(ledger_path):
    cap = 600
    at_cap_old, at_cap_line_old = padded(cap, recorded_at=OLD)
    at_cap, at_cap_line = padded(cap, recorded_at=T0)
    _, over_line = padded(cap + 1, recorded_at=T0)  # a valid observation, but one byte too long
    _, over_old = padded(cap + 300, recorded_at=OLD)
    small = [obs(recorded_at=T0 + timedelta(seconds=i), tags={"i": i}) for i in range(20)]
    lines = [line_of(o) for o in small]
    lines[3:3] = [at_cap_line_old, over_line, b" " * (cap + 50), at_cap_line, b"y" * (5 * cap), over_old]
    ledger_path.write_bytes(b"\n".join(lines) + b"\n" + b"z" * (cap + 1))  # and a last line without newline
    ledger = QualityLedger(ledger_path, max_line_bytes=cap)
    expected = [*small[:3], at_cap_old, at_cap, *small[3:]]
    everything_agrees(ledger, expected, 4)  # the long blank line is blank, not malformed
    assert QualityLedger(ledger_path).read_all() == [
        *small[:3],
        at_cap_old,
        padded(cap + 1, recorded_at=T0)[0],
        at_cap,
        padded(cap + 300, recorded_at=OLD)[0],
        *small[3:],
    ]

    before = ledger_path.read_bytes()
    assert ledger.prune_before(CUTOFF) == 1
    assert ledger_path.read_bytes() == before.replace(at_cap_line_old + b"\n", b"", 1)
    assert ledger.malformed_count() == 4


def test_append_and_extend_refuse_a_line_over_the_cap_before_writing_anything(ledger_path):
    cap = 600
    ledger = QualityLedger(ledger_path, max_line_bytes=cap)
    fits, _ = padded(cap)
    too_long, _ = padded(cap + 1)
    with pytest.raises(ValidationError) as caught:
        ledger.append(too_long)
    assert f"would be {cap + 1} bytes" in str(caught.value) and "max_line_bytes" in str(caught.value)
    assert not ledger_path.exists() and not ledger.lock_path.exists()
    ledger.append(fits)
    before = ledger_path.read_bytes()
    with pytest.raises(ValidationError, match="observation 1 of extend"):
        ledger.extend([fits, too_long, fits])
    with pytest.raises(ValidationError):  # multi-byte text: the cap counts UTF-8 bytes, not characters
        ledger.append(obs(tags={"t": "é" * cap}))
    assert ledger_path.read_bytes() == before
    ledger.extend([fits, fits])
    assert ledger.read_all() == [fits] * 3


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_over_long_line_is_read_in_bounded_chunks_never_whole(ledger_path):
    cap = 64 << 10
    huge = b'{"task_type":"' + b"q" * (8 << 20) + b'"}'
    ledger_path.write_bytes(line_of(obs(recorded_at=OLD)) + b"\n" + huge + b"\n" + line_of(obs(recorded_at=T0)) + b"\n")
    ledger = QualityLedger(ledger_path, max_line_bytes=cap)
    count, peak = _peak(ledger.malformed_count)
    assert count == 1 and peak < 1 << 20, peak
    removed, peak = _peak(lambda: ledger.prune_before(CUTOFF))
    assert removed == 1 and peak < 1 << 20, peak
    assert ledger_path.read_bytes() == huge + b"\n" + line_of(obs(recorded_at=T0)) + b"\n"


@pytest.mark.slow
def test_a_100_mib_line_with_the_default_cap_is_malformed_and_never_loaded_whole(ledger_path):
    huge = b"x" * (100 << 20)
    good = [obs(recorded_at=T0 + timedelta(seconds=i)) for i in range(3)]
    ledger_path.write_bytes(line_of(good[0]) + b"\n" + huge + b"\n" + b"".join(line_of(o) + b"\n" for o in good[1:]))
    del huge
    ledger = QualityLedger(ledger_path)
    got, peak = _peak(ledger.read_all)
    assert got == good and peak < 4 << 20, peak
    frame, peak = _peak(lambda: ledger_frame(ledger, tags="dict"))
    assert observations_from_frame(frame) == good and frame.attrs["malformed_count"] == 1
    assert peak < 80 << 20, peak  # one 64 MiB read block at most, never the 100 MiB line
    assert ledger.prune_before(T0 + timedelta(seconds=1)) == 1
    assert ledger.malformed_count() == 1 and ledger_path.stat().st_size > 100 << 20


# -- the ledger and ledger_frame agree on any mix of the above ------------------------------------------------

CAP = 700
_bad_surrogate, _good_escapes = _surrogate_lines()
line_kinds = st.one_of(
    st.integers(CAP - 4, CAP + 4).map(lambda n: padded(n, recorded_at=T0)[1]),  # around the cap
    st.integers(0, 50).map(lambda i: line_of(obs(recorded_at=T0 + timedelta(seconds=i), tags={"i": i}))),
    # tags that change type from row to row send ledger_frame down its other arrow path
    st.sampled_from([{"v": "s"}, {"v": [1, "é"]}, {"v": 2.5}]).map(lambda t: line_of(obs(recorded_at=T0, tags=t))),
    st.sampled_from(_bad_surrogate + _good_escapes),
    st.sampled_from([b"", b" ", b"\t\r", b" " * (CAP + 1), b"x" * (CAP + 1), b"x" * CAP, b"{}", b"\xff\xfe"]),
    st.integers(CAP - 2, 3 * CAP).map(lambda n: b"y" * n),
)


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
@given(st.lists(line_kinds, max_size=40), st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hypothesis_the_ledger_and_ledger_frame_agree_on_long_blank_and_surrogate_lines(lines, final_newline):
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")
    expected, bad = reference_read(data, CAP)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.jsonl"
        path.write_bytes(data)
        ledger = QualityLedger(path, max_line_bytes=CAP)
        everything_agrees(ledger, expected, bad)
        ledger.prune_before(T0 + timedelta(seconds=25))
        assert ledger.malformed_count() == bad


@given(st.lists(line_kinds, max_size=30), st.integers(1, 3 * CAP), st.integers(1, 5))
@settings(max_examples=150, deadline=None)
def test_hypothesis_frames_splits_lines_as_the_ledger_at_any_read_size(lines, read_bytes, block_lines):
    data = b"\n".join(lines)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "l.jsonl"
        path.write_bytes(data)
        got, over = [], 0
        for block, n in line_blocks(path, CAP, block_lines, read_bytes):
            got += block
            over += n
    assert got == [line for line in data.split(b"\n") if line.strip() and len(line) <= CAP]
    assert over == sum(1 for line in data.split(b"\n") if line.strip() and len(line) > CAP)
