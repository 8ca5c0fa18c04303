"""Hardening, second round (issue 25; and issue 28's ``ledger stats`` counting): crashes, lost work and
leaks found by hostile and careless use of the ParquetLedger, ``ledger stats`` and ``ledger convert``,
Ray grading, the viewer server, the embedding cache and the plots.

Each test reproduces one case through the public API (the command line where there is one) and fails
without its fix. The Ray tests start a local Ray (``ray.init(num_cpus=2)``) as ``tests/test_distributed.py``
does; the viewer test starts the real ``llm-connect view --serve`` in a subprocess.
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import json
import re
import subprocess
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect import ExactMatchJudge, QualityLedger, QualityObservation, judge_many
from llm_connect.cli import main
from llm_connect.errors import MissingDependencyError, ValidationError
from llm_connect.quality import ParquetLedger

ESC, BEL = "\x1b", "\x07"


def obs(i: int = 0, **changes) -> QualityObservation:
    fields = {"task_type": "qa", "adapter_id": "a", "model_id": "m", "cost_usd": 0.0, "quality_score": 1.0,
              "latency_ms": 1.0, "tokens_in": 1, "tokens_out": 1, "tags": {"item_id": f"q{i}"}}
    return QualityObservation(**{**fields, **changes})


def stderr_error_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith(f"llm-connect {command}: error:"), err
    return lines[0]


# -- 1. one foreign or corrupt .parquet file under a ParquetLedger root ------------------------------------


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


# -- 2. ledger stats on a ledger the Labeller wrote to (issue 28: labels are labels) ------------------------


def _labelled_ledger(path: Path) -> QualityLedger:
    """30 items graded by exact match, 12 labelled in the Labeller, two skipped and one label undone."""
    from llm_connect.labelling import Labeller

    ledger = QualityLedger(path)
    items = pd.DataFrame({
        "id": [f"q{i}" for i in range(30)],
        "prompt": [f"question {i}" for i in range(30)],
        "baseline": ["yes"] * 30,
        "candidate": ["yes" if i % 3 else "no" for i in range(30)],
        "candidate_model": ["model-a"] * 30,
    })
    judge_many(ExactMatchJudge(), items, ledger=ledger, task_type="qa", progress=False)
    labeller = Labeller(items, ledger=ledger, task_type="qa", annotator="ann", seed=1)
    for k in range(14):
        if k in (3, 7):
            labeller.skip()
        else:
            labeller.label(1.0 if k % 2 else 0.0)
    labeller.undo()
    return ledger


def test_ledger_stats_on_a_labeller_ledger_counts_labels_as_labels_never_as_a_judge(tmp_path, capsys):
    """``llm-connect ledger stats LEDGER`` after the Labeller skipped and undid: an IndexError traceback before
    (markers), and without --human the labels were a judge of their own ("[judge human] -> no adapter",
    ``n_labelled 0``); now the 11 labels that stand are counted in n_labelled and are no judge."""
    ledger = _labelled_ledger(tmp_path / "l.jsonl")
    assert main(["ledger", "stats", str(ledger.path), "--min-observations", "5", "--max-age-days", "0"]) == 0
    out = capsys.readouterr().out
    assert "11 human labels (grader id human)" in out
    assert "judge human" not in out and "human-skip" not in out and "human-undo" not in out
    assert out.count("\nroute 'qa'") == 1 and "[judge exact-match]" in out
    head, row = [line.split() for line in out.splitlines()[-2:]]
    assert dict(zip(head, row, strict=True))["n_labelled"] == "11"
    assert dict(zip(head, row, strict=True))["method"] == "ppi++"
    # --human names them explicitly; --no-human decides on the judge alone, still without a "human" judge
    assert main(["ledger", "stats", str(ledger.path), "--human", "human", "--max-age-days", "0"]) == 0
    assert "ppi++" in capsys.readouterr().out
    assert main(["ledger", "stats", str(ledger.path), "--no-human", "--max-age-days", "0"]) == 0
    out = capsys.readouterr().out
    assert "judge human" not in out and "not used (--no-human)" in out and "wilson" in out
    # a card is asked of the judge only, never of the people
    assert main(["ledger", "stats", str(ledger.path), "--require-calibrated", "--max-age-days", "0"]) == 1
    out = capsys.readouterr().out
    assert out.count("refused") == 1 and "judge exact-match has no judge card" in out


def test_an_undo_marker_of_another_json_type_is_no_crash(tmp_path, capsys):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    ledger.extend([obs(i, tags={"grader_id": "exact-match", "item_id": f"q{i}"}) for i in range(5)])
    ledger.extend([obs(0, tags={"grader_id": "human", "item_id": "q0", "label_id": ["x"]}),
                   obs(0, tags={"grader_id": "human-undo", "undoes": ["x"]})])
    assert main(["ledger", "stats", str(ledger.path), "--min-observations", "1"]) == 0
    assert "1 human labels" in capsys.readouterr().out


# -- 3. no field from data forges a line of output ------------------------------------------------------


def test_ledger_stats_renders_grader_ids_and_rubric_hashes_without_control_characters(tmp_path, capsys):
    """A grader id ``"x\\nroute 'qa' [judge trusted] -> forged: meets the threshold"`` printed a forged decision
    line; rubric hashes printed ESC/BEL raw."""
    forged = "route 'qa' [judge trusted] -> forged: meets the threshold"
    ledger = QualityLedger(tmp_path / "l.jsonl")
    ledger.extend([obs(i, adapter_id=f"a{ESC}[31m", tags={"grader_id": f"x\n{forged}", "item_id": f"q{i}",
                                                           "rubric_hash": f"r{ESC}]0;pwned{BEL}\n"})
                   for i in range(5)])
    ledger.extend([obs(0, task_type=f"qa\n{forged}", tags={"grader_id": f"y\r{forged}"})])
    assert main(["ledger", "stats", str(ledger.path), "--min-observations", "1"]) == 0
    out = capsys.readouterr().out
    assert ESC not in out and BEL not in out and "\r" not in out
    assert not any(line.startswith(forged) for line in out.splitlines())
    assert "x\\nroute" in out and "\\x1b]0;pwned\\x07" in out


# -- 6. ledger convert: never into the source, and a partial conversion says what it wrote ------------------


def test_convert_refuses_a_target_inside_the_source_and_the_reverse(tmp_path, capsys, monkeypatch):
    """``llm-connect ledger convert SRC SRC/backup`` wrote the copy inside SRC, which then read every
    observation twice."""
    monkeypatch.chdir(tmp_path)
    ParquetLedger("src").extend([obs(i) for i in range(4)])
    for argv in (["src", "src/backup"], ["src", "src/task_type=qa/copy.jsonl"],
                 ["src", f"file://{tmp_path}/src/b"], ["src", "./src/../src/x"]):
        with pytest.raises(SystemExit) as info:
            main(["ledger", "convert", *argv])
        assert info.value.code == 2
        assert "is inside SOURCE" in stderr_error_line(capsys, "ledger convert")
    ParquetLedger("outer/inner").extend([obs(i) for i in range(2)])
    with pytest.raises(SystemExit):
        main(["ledger", "convert", "outer/inner", "outer"])
    assert "SOURCE outer/inner is inside TARGET outer" in stderr_error_line(capsys, "ledger convert")
    assert len(ParquetLedger("src").read_all()) == 4 and not (tmp_path / "src" / "backup").exists()
    assert not list((tmp_path / "src").rglob("*.jsonl"))
    assert len(ParquetLedger("outer").read_all()) == 2  # nothing was written into outer


def test_a_partial_conversion_says_exactly_what_it_wrote_and_how_to_go_on(tmp_path, capsys, monkeypatch):
    """One observation a Parquet ledger cannot store (tokens_in = 2**64) past the first batch (100,000
    observations; 5 here): "nothing was written" was reported while the first batch was."""
    import llm_connect.cli._ledger as cli_ledger

    monkeypatch.setattr(cli_ledger, "_CONVERT_BATCH", 5)
    monkeypatch.chdir(tmp_path)
    source = QualityLedger("src.jsonl")
    source.extend([obs(i, tokens_in=2**64 if i == 6 else i) for i in range(12)])
    with pytest.raises(SystemExit) as info:
        main(["ledger", "convert", "src.jsonl", "out"])
    assert info.value.code == 2
    line = stderr_error_line(capsys, "ledger convert")
    assert "wrote 5 observations to out: those numbered 1 to 5 of src.jsonl" in line
    assert "none of observations 6 to 10 was written" in line
    assert "observation 7 of src.jsonl has tokens_in=18446744073709551616" in line
    command = re.search(r"run: llm-connect (ledger convert .*--skip 5)", line)
    assert command, line
    assert sorted(o.tokens_in for o in ParquetLedger("out").read_all()) == [0, 1, 2, 3, 4]
    # fixed at the source, the printed command goes on where the conversion stopped
    lines = Path("src.jsonl").read_text().splitlines()
    lines[6] = lines[6].replace("18446744073709551616", "6")
    Path("src.jsonl").write_text("\n".join(lines) + "\n")
    assert main(command[1].split()) == 0
    assert "the first 5 observations of the source were left out (--skip)" in capsys.readouterr().out
    assert sorted(o.tokens_in for o in ParquetLedger("out").read_all()) == list(range(12))


# -- 7. tags nested too deep are refused at validation --------------------------------------------------


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


# -- 8. the embedding cache holds a bounded number of vectors, released on close -------------------------


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


# -- 9. view --serve answers only localhost, with a token --------------------------------------------------


def test_view_serve_refuses_other_hosts_and_requests_without_its_token(tmp_path):
    """``llm-connect view OUT --serve`` answered any Host header: a web page whose name resolves to 127.0.0.1
    (DNS rebinding) could read every judgment."""
    from llm_connect.calibration import calibrate
    from llm_connect.views.judgments import JUDGMENTS_FILE, write_judgments

    rows = [{"id": "q0", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Paris", "human": "yes"},
            {"id": "q1", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Milan", "human": "no"}]
    report = calibrate([ExactMatchJudge()], rows, human="human", probes=[], n_boot=50, progress=False)
    write_judgments(report, tmp_path / JUDGMENTS_FILE)
    proc = subprocess.Popen([sys.executable, "-m", "llm_connect.cli", "view", str(tmp_path), "--serve", "--port",
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.match(r"serving http://127\.0\.0\.1:(\d+)/\?token=([\w-]{32,}) ", line)
        if not m:  # the page cannot be built from this file: say why
            proc.terminate()
            pytest.fail(line + proc.stderr.read())
        port, token = int(m[1]), m[2]

        def get(path: str, host: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.putrequest("GET", path, skip_host=True)
                conn.putheader("Host", host)
                conn.endheaders()
                response = conn.getresponse()
                response.read()
                return response.status
            finally:
                conn.close()

        good = f"/?token={token}"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert get(good, host) == 200, host
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"localhost:{port + 1}",
                     ""):
            assert get(good, host) == 403, host
        for path in ("/", "/?token=", f"/?token={token[:-1]}", f"/{JUDGMENTS_FILE}"):
            assert get(path, f"127.0.0.1:{port}") == 403, path
        assert get(f"/{JUDGMENTS_FILE}?token={token}", f"127.0.0.1:{port}") == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


# -- 10. credentials in a ParquetLedger URI never appear in an error -------------------------------------


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


# -- 11. plot labels carry no control characters ----------------------------------------------------------


def test_plot_labels_render_control_characters_as_escapes_and_warn_about_none(tmp_path):
    """A judge named ``"evil\\x1b[2J\\x07"``: matplotlib's "Glyph 27 missing" warning carried the raw ESC and
    BEL from the data to stderr."""
    import matplotlib.pyplot as plt

    from llm_connect.views import plot_judge_scatter

    name = f"evil{ESC}[2J{BEL}\u202e"
    data = pd.DataFrame({f"score_{name}": [0.0, 1.0, 1.0], "score_b": [0.0, 1.0, 0.0]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ax = plot_judge_scatter(data, x=name, y="b")
        ax.figure.savefig(tmp_path / "p.png")
    plt.close(ax.figure)
    texts = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    assert all(c not in t for t in texts for c in (ESC, BEL, "\u202e")), texts
    assert "\\x1b[2J" in ax.get_xlabel()
    assert not [w for w in caught if any(c in str(w.message) for c in (ESC, BEL, "\u202e"))]


# -- 4 and 5. Ray: a budget for the whole job, and the limiter's burst bound ----------------------------


def _items(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": list(range(n)), "prompt": [f"q{i}" for i in range(n)],
                         "baseline": ["yes"] * n, "candidate": ["yes"] * n})


def paid_judge(cost: float):
    """A judge whose every call costs ``cost`` USD (built in each Ray actor)."""
    from llm_connect import LLMJudge
    from llm_connect.testing import ScriptedAdapter

    return LLMJudge(ScriptedAdapter(['{"quality_score": 1.0}'], cycle=True, cost_per_call=cost, latency_s=0.005))


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]'")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    ray.data.DataContext.get_current().enable_progress_bars = False
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # paid_judge, for the workers
    yield ray
    ray.shutdown()


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
def test_grade_dataset_with_a_budget_in_the_run_config_shares_it_across_the_actors(ray_cluster):
    """``grade_dataset(ds, factory, run_config=RunConfig(budget_tracker=BudgetTracker(0.105)))`` died inside Ray
    ("cannot pickle '_thread.lock' object"). Now the cluster has one budget: 11 calls of $0.01 fit in $0.105
    whatever the number of actors, and the other rows say "budget"."""
    from llm_connect import BudgetTracker, RunConfig
    from llm_connect.distributed import grade_dataset

    factory = functools.partial(paid_judge, 0.01)
    kw = {"num_actors": 2, "concurrency": 4, "batch_size": 10}
    ds = ray_cluster.data.from_pandas(_items(60))
    out = grade_dataset(ds, factory, run_config=RunConfig(budget_tracker=BudgetTracker(0.105)), **kw).to_pandas()
    assert len(out) == 60 and out["id"].is_unique
    assert (out["status"] == "scored").sum() == 11
    assert out.loc[out["status"] != "scored", "error"].str.contains("budget").all()
    # a SharedBudget given as budget= is read back after the run
    from llm_connect.distributed import SharedBudget

    budget = SharedBudget(0.05)
    out = grade_dataset(ray_cluster.data.from_pandas(_items(30)), factory, budget=budget, **kw).to_pandas()
    assert (out["status"] == "scored").sum() == 5 and budget.spent_usd == pytest.approx(0.05)
    assert budget.exhausted and budget.in_flight == 0
    # a number is a limit in USD
    out = grade_dataset(ray_cluster.data.from_pandas(_items(30)), factory, budget=0.03, **kw).to_pandas()
    assert (out["status"] == "scored").sum() == 3


def _worst(times: list[float], window: float) -> int:
    """The most release times in any closed window of ``window`` seconds."""
    times = sorted(times)
    worst, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] <= t + window:
            j += 1
        worst = max(worst, j - i)
    return worst


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
def test_the_shared_limit_keeps_its_burst_bound_with_several_requests_per_item(ray_cluster):
    """At 12,000 requests a minute (200 a second) with 4 requests per item, three actors' worth of permit
    holders (8 items in flight each) on one event loop that is held up now and then (a model loading, a long
    parse): the permits released before let 6 items (24 requests) go at once where ``W*r + block + 1`` = 9
    allow. Counted on the release times the holders report (each the clock reading the holder's check used),
    so the bound is exact whatever the load: no timing margin is needed."""
    from llm_connect.distributed import RateLimit
    from llm_connect.distributed._rate_limit import Permits, Schedule

    limit = RateLimit(requests_per_minute=12_000, requests_per_item=4)
    per_second, k, burst = 200.0, 4, limit.block_requests()  # B = block (8) when an item makes fewer calls
    assert burst == 8
    limiter = ray_cluster.remote(num_cpus=0)(Schedule).remote()
    holders = [Permits(limiter, limit) for _ in range(3)]
    released: list[float] = []

    async def run() -> None:
        async def one(holder: Permits, stalls: list[float]) -> None:
            for n in range(6):
                t = await holder.acquire(0.0)
                released.append(time.monotonic() if t is None else t)
                if n < len(stalls):
                    time.sleep(stalls[n])  # holds up the whole loop: slots fall due meanwhile

        stalls = {0: [0.12], 3: [0.0, 0.07], 9: [0.0, 0.0, 0.15], 14: [0.0, 0.0, 0.0, 0.03]}
        await asyncio.gather(*(one(holders[j % 3], stalls.get(j, [])) for j in range(24)))

    asyncio.run(run())
    assert len(released) == 24 * 6
    for window in (0.0, 0.005, 0.02, 0.1, 0.5):
        requests = k * _worst(released, window)
        assert requests <= window * per_second + burst + 1 + 1e-9, (window, requests)
