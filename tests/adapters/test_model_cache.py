"""The converted-model cache (``llm_connect.adapters._model_cache``) and the embedded judge on it.

The first half drives the cache with small real build functions (a conversion that writes two files), so
every way an entry can be missing, partial, corrupt or another model's is checked in milliseconds. The second
half runs the real SmolLM2 conversion in fresh processes: two processes loading at once with an empty cache,
a corrupt entry, a changed model file; verdicts from the cache are bit for bit those of the conversion.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llm_connect.adapters._model_cache import CACHE_ENV, cache_root, check_entry, entry_key, open_entry, source_digest
from llm_connect.errors import ConfigError

VERSIONS = {"writer": "1.0"}
WEIGHTS = bytes(range(256)) * 64  # 16 KiB


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + bytes(range(200)) * 50)
    return path


class Build:
    """A conversion writing two files (what ``convert`` does, in small); counts its calls."""

    def __init__(self, weights: bytes = WEIGHTS) -> None:
        self.calls = 0
        self.weights = weights

    def __call__(self, out: Path) -> dict:
        self.calls += 1
        (out / "weights.bin").write_bytes(self.weights)
        (out / "model.onnx").write_bytes(b"graph")
        return {"layers": 1}


def test_a_miss_converts_once_and_says_so_and_a_hit_loads_without_a_word(tmp_path, source, capsys):
    build = Build()
    entry, manifest = open_entry(source, VERSIONS, build, what="for tests", root=tmp_path / "cache")
    said = capsys.readouterr().err
    assert build.calls == 1
    assert "converting tiny.gguf for tests, once" in said and f"it is kept in {entry}" in said
    assert "converted tiny.gguf in " in said and said.rstrip().endswith(" s")
    assert manifest["config"] == {"layers": 1} and manifest["versions"] == VERSIONS
    assert (entry / "weights.bin").read_bytes() == WEIGHTS
    assert check_entry(entry, source_digest(source, tmp_path / "cache"), VERSIONS) is None
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir() if p.is_dir()] == [entry.name]  # no leftovers

    again, manifest_again = open_entry(source, VERSIONS, build, what="for tests", root=tmp_path / "cache")
    assert (again, manifest_again, build.calls) == (entry, manifest, 1)
    assert capsys.readouterr().err == ""


def test_the_key_is_the_content_and_the_writers_versions(tmp_path, source, capsys):
    """Other library versions write another entry; a copy of the file under another folder is the same model."""
    root = tmp_path / "cache"
    build = Build()
    entry, _ = open_entry(source, VERSIONS, build, what="for tests", root=root)
    upgraded, _ = open_entry(source, {"writer": "2.0"}, build, what="for tests", root=root)
    assert upgraded != entry and build.calls == 2
    elsewhere = tmp_path / "copy" / source.name
    elsewhere.parent.mkdir()
    shutil.copy2(source, elsewhere)
    assert open_entry(elsewhere, VERSIONS, build, what="for tests", root=root)[0] == entry and build.calls == 2


def test_a_changed_model_file_is_converted_again_even_with_its_size_and_time_put_back(tmp_path, source, capsys):
    root = tmp_path / "cache"
    build = Build()
    entry, first = open_entry(source, VERSIONS, build, what="for tests", root=root)
    before = source.stat()
    data = bytearray(source.read_bytes())
    data[-1] ^= 0xFF
    source.write_bytes(bytes(data))
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same modification time
    changed, second = open_entry(source, VERSIONS, build, what="for tests", root=root)
    assert build.calls == 2 and changed != entry
    assert second["source"]["sha256"] == source_digest(source, root) != first["source"]["sha256"]
    assert "converting tiny.gguf" in capsys.readouterr().err


def _flip_keeping_size_and_time(path: Path) -> None:
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _another_models_entry(entry: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF another model")
    their_entry, _ = open_entry(other, VERSIONS, Build(), what="for tests", root=tmp_path / "cache")
    shutil.rmtree(entry)
    shutil.copytree(their_entry, entry)


CORRUPTIONS = {
    "an unreadable manifest": (lambda e, t: (e / "manifest.json").write_text("{half a manifest"),
                               "its manifest.json is missing or unreadable"),
    "an edited manifest": (lambda e, t: (e / "manifest.json").write_text(
        (e / "manifest.json").read_text().replace('"layers": 1', '"layers": 2')), "its manifest.json is corrupt"),
    "no manifest (a partial copy)": (lambda e, t: (e / "manifest.json").unlink(), "its manifest.json is missing"),
    "a truncated file": (lambda e, t: os.truncate(e / "weights.bin", 100),
                         f"weights.bin has 100 bytes, {len(WEIGHTS)} were written"),
    "a missing file": (lambda e, t: (e / "model.onnx").unlink(), "model.onnx is missing"),
    "a changed byte (size and time put back)": (lambda e, t: _flip_keeping_size_and_time(e / "weights.bin"),
                                                "weights.bin is corrupt"),
    "another model's entry": (_another_models_entry, "it was converted from another model file"),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_an_unusable_entry_is_said_and_rebuilt_never_loaded(tmp_path, source, capsys, corruption):
    spoil, reason = CORRUPTIONS[corruption]
    root = tmp_path / "cache"
    build = Build()
    entry, _ = open_entry(source, VERSIONS, build, what="for tests", root=root)
    spoil(entry, tmp_path)
    capsys.readouterr()
    assert check_entry(entry, source_digest(source, root), VERSIONS) is not None
    rebuilt, manifest = open_entry(source, VERSIONS, build, what="for tests", root=root)
    said = capsys.readouterr().err
    assert rebuilt == entry and build.calls == 2
    assert f"the converted model in {entry} cannot be used: {reason}" in said and "converting it again" in said
    assert (entry / "weights.bin").read_bytes() == WEIGHTS and manifest["source"]["sha256"] == source_digest(source,
                                                                                                            root)
    assert check_entry(entry, source_digest(source, root), VERSIONS) is None
    assert sorted(p.name for p in (root / "models").iterdir() if p.is_dir() and p.name.startswith(".")) == []


def test_a_build_left_half_done_by_a_dead_process_is_cleared_and_a_failed_build_leaves_nothing(tmp_path, source):
    root = tmp_path / "cache"
    key = entry_key(source, source_digest(source, root), VERSIONS)
    leftover = root / "models" / f".{key}.dead1234"
    leftover.mkdir(parents=True)
    (leftover / "weights.bin").write_bytes(b"half")

    def failing(out: Path) -> dict:
        (out / "weights.bin").write_bytes(b"half")
        raise RuntimeError("the conversion broke")

    with pytest.raises(RuntimeError, match="the conversion broke"):
        open_entry(source, VERSIONS, failing, what="for tests", root=root)
    assert [p.name for p in (root / "models").iterdir() if p.is_dir()] == []  # neither the old nor its own
    build = Build()
    entry, _ = open_entry(source, VERSIONS, build, what="for tests", root=root)
    assert build.calls == 1 and check_entry(entry, source_digest(source, root), VERSIONS) is None


def test_an_unwritable_cache_is_refused_with_the_variable_to_set(tmp_path, source):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    with pytest.raises(ConfigError, match=f"set {CACHE_ENV} to a writable directory"):
        open_entry(source, VERSIONS, Build(), what="for tests", root=blocked)


def test_the_cache_directory_is_the_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
    assert cache_root() == tmp_path / "here"
    monkeypatch.delenv(CACHE_ENV)
    import platformdirs

    assert cache_root() == Path(platformdirs.user_cache_dir("llm-connect", appauthor=False))


# -- two processes at once ----------------------------------------------------------------------------------

BARRIER = """
import os, sys, time
from pathlib import Path
here, me = Path(sys.argv[1]), sys.argv[2]
(here / f"ready-{me}").touch()
deadline = time.monotonic() + 600
while not (here / "go").exists():  # both start together, whichever is faster
    if time.monotonic() > deadline:
        sys.exit("the test never said go")
    time.sleep(0.005)
"""


def _start_together(tmp_path: Path, code: str, args: list[str], env: dict[str, str]) -> list[subprocess.Popen]:
    """Two processes running ``BARRIER + code``, released at once when both are ready."""
    procs = [subprocess.Popen([sys.executable, "-c", BARRIER + code, str(tmp_path), me, *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("a", "b")]
    deadline = time.monotonic() + 600
    while not all((tmp_path / f"ready-{me}").exists() for me in ("a", "b")):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.monotonic() < deadline, "the processes never got ready"
        time.sleep(0.005)
    (tmp_path / "go").touch()
    return procs


def test_two_processes_with_an_empty_cache_both_succeed_and_one_converts(tmp_path, source):
    code = textwrap.dedent("""
        from llm_connect.adapters._model_cache import open_entry
        built = []
        def build(out):
            built.append(me)
            (out / "weights.bin").write_bytes(bytes(range(256)) * 4096)
            (out / "model.onnx").write_bytes(b"graph")
            return {"by": me}
        entry, manifest = open_entry(Path(sys.argv[3]), {"writer": "1.0"}, build, what="for tests",
                                     root=here / "cache")
        print(entry, manifest["config"]["by"], bool(built))
    """)
    procs = _start_together(tmp_path, code, [str(source)], dict(os.environ))
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lines = [out.split() for out, _ in outs]
    assert lines[0][:2] == lines[1][:2]  # the same entry, built by the same process
    assert sorted(line[2] for line in lines) == ["False", "True"]  # one converted, the other waited and loaded
    assert check_entry(Path(lines[0][0]), source_digest(source, tmp_path / "cache"), VERSIONS) is None


# -- the real model -----------------------------------------------------------------------------------------

JUDGE = """
import json
from llm_connect import LLMJudge, LLMResponse, RunConfig
from llm_connect.adapters import TransformersAdapter
items = [("What is the capital of France?", "Paris", "Paris."), ("Who wrote Hamlet?", "Shakespeare", "Dickens.")]
judge = LLMJudge(TransformersAdapter(sys.argv[3] if len(sys.argv) > 3 else None), seed=0)
scores = [judge.judge(LLMResponse(ref, "b", "ref"), LLMResponse(ans, "c", "cand"), prompt=q,
                      run_config=RunConfig()).quality_score for q, ref, ans in items]
print(json.dumps({"scores": [s.hex() for s in scores], "torch": "torch" in sys.modules,
                  "transformers": "transformers" in sys.modules}))
"""
NO_BARRIER = "import sys\nfrom pathlib import Path\nhere, me = Path(sys.argv[1]), sys.argv[2]\n"


def _judge(tmp_path: Path, cache: Path, model: Path | None = None) -> tuple[dict, str]:
    env = {**os.environ, CACHE_ENV: str(cache)}
    done = subprocess.run([sys.executable, "-c", NO_BARRIER + JUDGE, str(tmp_path), "x",
                           *([str(model)] if model else [])], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def _session_entry() -> Path:
    """The session cache's entry of the bundled model (converted by this process if it is not there yet)."""
    from llm_connect.adapters import TransformersAdapter

    adapter = TransformersAdapter().load()
    try:
        return adapter._model.entry
    finally:
        adapter.close()


@pytest.mark.local_models
def test_two_first_loads_at_once_both_judge_and_the_cached_model_gives_the_converted_ones_verdicts(tmp_path):
    """The issue's case: an empty cache, two processes loading at once. Both succeed, one converts (said on
    stderr with the time), the other waits and loads the entry; the verdicts of the model just converted and
    of the cached one are the same floats; a later process loads it without a word and without torch."""
    cache = tmp_path / "cache"
    env = {**os.environ, CACHE_ENV: str(cache)}
    procs = _start_together(tmp_path, JUDGE, [], env)
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in outs]
    said = [err for _, err in outs]
    assert sum("converting SmolLM2-135M-Instruct.Q4_1.gguf for onnxruntime, once" in err for err in said) == 1
    assert sum("converted SmolLM2-135M-Instruct.Q4_1.gguf in " in err for err in said) == 1
    first, second = (json.loads(out.splitlines()[-1]) for out, _ in outs)
    assert first["scores"] == second["scores"]  # converted and cached: bit for bit
    later, quiet = _judge(tmp_path, cache)
    assert later["scores"] == first["scores"] and "llm-connect:" not in quiet
    assert later["torch"] is False and later["transformers"] is False  # a warm load imports neither
    entries = [p for p in (cache / "models").iterdir() if p.is_dir()]
    assert len(entries) == 1 and not any(p.name.startswith(".") for p in entries)
    manifest = json.loads((entries[0] / "manifest.json").read_text())
    assert check_entry(entries[0], manifest["source"]["sha256"], manifest["versions"]) is None


@pytest.mark.local_models
def test_a_corrupt_entry_of_the_real_model_is_said_rebuilt_and_judges_as_before(tmp_path):
    session = _session_entry()
    cache = tmp_path / "cache"
    shutil.copytree(session.parent.parent / "sources", cache / "sources")
    shutil.copytree(session, cache / "models" / session.name)
    before, quiet = _judge(tmp_path, cache)
    assert "llm-connect:" not in quiet  # the copy is sound: a hit
    _flip_keeping_size_and_time(cache / "models" / session.name / "weights.bin")
    after, said = _judge(tmp_path, cache)
    assert "weights.bin is corrupt" in said and "converting it again" in said
    assert after["scores"] == before["scores"]


@pytest.mark.local_models
def test_a_changed_model_file_is_converted_again(tmp_path):
    from llm_connect.adapters import default_gguf_path

    session = _session_entry()
    cache = tmp_path / "cache"
    shutil.copytree(session, cache / "models" / session.name)
    model = tmp_path / default_gguf_path().name
    shutil.copy2(default_gguf_path(), model)
    _, quiet = _judge(tmp_path, cache, model)
    assert "llm-connect:" not in quiet  # the same content elsewhere: the same entry
    with open(model, "r+b") as f:  # the last byte of the last tensor's data: another model file
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0x01]))
    _, said = _judge(tmp_path, cache, model)
    assert f"converting {model.name} for onnxruntime, once" in said
    entries = sorted(p.name for p in (cache / "models").iterdir() if p.is_dir())
    assert len(entries) == 2 and session.name in entries
