"""`llm-connect demo` on the embedded models, and `llm-connect ledger stats`."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from llm_connect import QualityLedger, QualityObservation
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
    from llm_connect.calibration import read_judgments

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
