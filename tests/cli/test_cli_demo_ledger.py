"""`llm-connect demo` on the embedded models, and `llm-connect ledger stats` and `ledger convert`."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from llm_connect import ExactMatchJudge, ParquetLedger, QualityLedger, QualityObservation, judge_many
from llm_connect.cli import main


@pytest.mark.local_models
def test_demo_runs_offline_on_the_local_models_and_writes_its_outputs(tmp_path):
    out = tmp_path / "demo-out"
    proc = subprocess.run(
        [sys.executable, "-m", "llm_connect.cli", "demo", "--out", str(out), "--rows", "8", "--probe-limit", "3"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the longest phase is announced before it starts, timed on this machine: 8 items + 3 probes x 3 items
    assert re.search(r"the LLM judge \(SmolLM2-135M on llama\.cpp\) takes about \d+\.\d\d s per item .* "
                     r"\(17 judgments\) will take about \d+ s",
                     proc.stdout)
    assert proc.stdout.index("will take about") < proc.stdout.index("verdicts:")
    # the estimate is measured on the run's first items, and the demo ends on the next step
    assert "measured on 4 item(s)" in proc.stdout and "estimated " in proc.stdout
    from llm_connect.cli._demo import NEXT_STEP_COMMAND

    assert proc.stdout.rstrip().splitlines()[-2].strip() == NEXT_STEP_COMMAND
    # every phase is labelled in its progress bar (stderr)
    for label in ("grading: llm-judge", "grading: embedding-similarity", "probe: length \N{EM DASH} llm-judge"):
        assert label in proc.stderr, label
    for name in ("ledger.jsonl", "scores.csv", "agreement.csv", "bias.csv", "report.html", "estimates.csv",
                 "judgments.jsonl"):
        assert (out / name).is_file(), name
    from llm_connect.views import read_judgments

    judged = [r["judges"]["llm-judge"] for r in read_judgments(out / "judgments.jsonl") if r["kind"] == "item"]
    assert len(judged) == 8 and all(j["judge_prompt"] and j["raw_reply"] is not None for j in judged)
    with open(out / "scores.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8
    assert {"id", "score_exact-match", "score_embedding-similarity", "score_llm-judge", "score_human"} <= set(rows[0])
    with open(out / "agreement.csv", newline="") as f:
        pairs = {(r["judge_a"], r["judge_b"]) for r in csv.DictReader(f)}
    assert ("exact-match", "human") in pairs and ("human", "human_2") in pairs
    ledger = QualityLedger(out / "ledger.jsonl")
    obs = ledger.read_all()
    judged = [o for o in obs if o.tags["grader_id"] != "human"]
    scored = sum(1 for r in rows for j in ("exact-match", "embedding-similarity", "llm-judge") if r[f"score_{j}"] != "")
    assert len(judged) == scored >= 16  # every scored (item, judge) observation, exact and embedding never fail
    assert {o.tags["grader_id"] for o in judged} >= {"exact-match", "embedding-similarity"}
    ids = {r["id"] for r in rows}
    assert {o.tags["item_id"] for o in judged} == ids  # the items' own ids, as judge_many records them
    labels = [o for o in obs if o.tags["grader_id"] == "human"]
    assert len(labels) == 16 and {o.tags["annotator"] for o in labels} == {"human", "human_2"}
    assert {c.grader_id for c in __import__("llm_connect").JudgeCardRegistry.for_ledger(ledger)} == {
        "exact-match", "embedding-similarity", "llm-judge"}
    assert "agreement" in proc.stdout and "report.html" in proc.stdout and "bias probes" in proc.stdout
    # after the lines saying what runs and how long it will take, the verdicts come first
    assert proc.stdout.splitlines()[2] == "verdicts:"
    assert "llm-judge: " in proc.stdout and "embedding-similarity: " in proc.stdout
    assert "alone would claim" in proc.stdout and "corrected with" in proc.stdout
    estimates = list(csv.DictReader((out / "estimates.csv").read_text().splitlines()))
    assert {r["method"] for r in estimates} == {"ppi++", "human", "judge"}
    assert "<img" in (out / "report.html").read_text(encoding="utf-8")


def _fill(ledger, adapter, quality, cost, n=30, task="qa"):
    now = datetime.now(UTC)
    for i in range(n):
        q = quality if i % 2 else min(1.0, quality + 0.02)
        ledger.append(
            QualityObservation(task, adapter, adapter, cost, q, 100.0, 5, 5, recorded_at=now - timedelta(minutes=i))
        )


def test_ledger_stats_prints_the_evidence_and_the_decision(tmp_path, capsys):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    _fill(ledger, "cheap", 0.6, 0.001)
    _fill(ledger, "good", 0.9, 0.01)
    _fill(ledger, "best", 0.97, 0.1)
    _fill(ledger, "summariser", 0.9, 0.0, task="summary")
    with open(ledger.path, "a") as f:
        f.write("not json\n")
    assert main(["ledger", "stats", str(ledger.path), "--threshold", "0.85"]) == 0
    out = capsys.readouterr().out
    assert "120 observations, 1 malformed" in out
    assert "route 'qa' -> good" in out and "route 'summary' -> summariser" in out
    for word in ("cheap", "best", "mean_quality", "quality_low", "mean_cost_usd", "stale"):
        assert word in out
    assert main(["ledger", "stats", str(ledger.path), "--task-type", "qa", "--threshold", "0.99"]) == 0
    assert "route 'qa' -> no adapter" in capsys.readouterr().out


def test_ledger_stats_on_a_missing_ledger_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["ledger", "stats", str(tmp_path / "nope.jsonl")])
    assert info.value.code == 2
    assert "no ledger" in capsys.readouterr().err


def test_demo_help_says_what_it_does(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = capsys.readouterr().out
    assert "--rows" in text and "ledger.jsonl" in text
    from llm_connect.cli._demo import _data_file

    lines = _data_file("qa_calibration.jsonl").read_text(encoding="utf-8").splitlines()
    assert len([json.loads(line) for line in lines if line.strip()]) >= 200


def test_the_demo_ends_on_the_next_step_when_the_embedded_judge_is_weak():
    import io

    import numpy as np

    from llm_connect.calibration import card_from_scores
    from llm_connect.cli._demo import NEXT_STEP_COMMAND, _print_next_step
    from llm_connect.cli._judges import _model_spec

    rng = np.random.default_rng(0)
    human = (rng.random(80) < 0.5).astype(float)
    chance = card_from_scores((rng.random(80) < 0.5).astype(float), human, grader_id="llm-judge", n_boot=200)
    assert chance.kappa_low <= 0  # a coin against people
    out = io.StringIO()
    _print_next_step([chance], "local", out)
    text = out.getvalue()
    assert "SmolLM2-135M" in text and "135M-parameter" in text  # why
    assert text.strip().splitlines()[-2].strip() == NEXT_STEP_COMMAND  # the one command, on its own line
    # the command is the CLI's own judge spec: --llm openai:MODEL (with --base-url) parses as a model spec
    assert NEXT_STEP_COMMAND.split()[:2] == ["llm-connect", "demo"]
    assert _model_spec(NEXT_STEP_COMMAND.split("--llm ")[1].split()[0], "llm") == ("openai", "MODEL")
    assert "--base-url http://" in NEXT_STEP_COMMAND
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--llm", "openai:MODEL", "--base-url", "http://HOST:1/v1", "--help"])
    assert exit_.value.code == 0  # demo takes these options
    # a judge that did well, or one that is not the embedded model, gets no such advice
    good = card_from_scores(np.where(rng.random(80) < 0.9, human, 1 - human), human, grader_id="llm-judge",
                            n_boot=200)
    assert good.kappa_low > 0.4 and not good.weak
    for card, llm in ((good, "local"), (chance, "openai:gpt-4o-mini")):
        out = io.StringIO()
        _print_next_step([card], llm, out)
        assert out.getvalue() == ""


# -- ledger stats on a Labeller's ledger, output no field forges, ledger convert never into its source -------


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

