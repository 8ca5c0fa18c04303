"""The whole loop from the command line: ``llm-connect grade`` puts judgments (and human labels) into a
ledger as ``judge_many(ledger=...)`` and ``record_labels`` do, ``calibrate --ledger`` records what it
judged, and ``llm-connect route`` prints the decision with its evidence (method, n, n_labelled, interval)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from llm_connect import ExactMatchJudge, QualityLedger, judge_many
from llm_connect.cli import main
from llm_connect.frames import paired_frame, record_labels
from llm_connect.testing import LoopbackServer

ROWS = [
    {"id": f"q{k}", "prompt": f"question {k}", "baseline": "Paris",
     "candidate": "Paris" if k % 4 else "Lyon", "candidate_model": "m1" if k % 2 else "m2",
     "label": "yes" if k % 4 else "no"}
    for k in range(24)
]


def write_csv(path, rows, sep=","):
    pd.DataFrame(rows).to_csv(path, index=False, sep=sep)
    return path


def grade(data, ledger, *extra):
    return main(["grade", str(data), "--judge", "exact-match", "--ledger", str(ledger), "--task-type", "qa",
                 "--no-progress", *extra])


def test_grade_records_judgments_and_labels_as_the_library_does(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", ROWS)
    ledger = tmp_path / "cli.jsonl"
    assert grade(data, ledger, "--human", "label") == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert "exact-match: 24 rows, 24 scored, 0 unscored, 0 errors" in out[0]
    assert "recorded 24 judgment(s) and 24 human label(s)" in out[0]
    # the same records as judge_many(ledger=...) + record_labels, the timestamps aside
    lib = QualityLedger(tmp_path / "lib.jsonl")
    items = pd.DataFrame(ROWS)
    judge_many(ExactMatchJudge(), items, ledger=lib, task_type="qa", progress=False)
    record_labels(lib, items.assign(item_id=items["id"], label=[1.0 if v == "yes" else 0.0 for v in items["label"]]),
                  task_type="qa", label="label")

    def plain(path):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return sorted(json.dumps({k: v for k, v in r.items() if k != "recorded_at"}, sort_keys=True) for r in rows)

    assert plain(ledger) == plain(lib.path)
    paired = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(paired) == 24 and paired["human"].notna().all()
    assert (paired["exact-match"] == paired["human"]).all()


def test_grade_without_labels_warns_and_exits_1_when_nothing_scored(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", ROWS)
    assert grade(data, tmp_path / "l.jsonl") == 0
    captured = capsys.readouterr()
    assert "0 human label(s)" in captured.out
    assert "no human label column found" in captured.err and "--human label" in captured.err
    blank = [dict(r, baseline="") for r in ROWS[:3]]
    assert grade(write_csv(tmp_path / "blank.csv", blank), tmp_path / "l.jsonl", "--human", "label") == 1
    captured = capsys.readouterr()
    assert "0 scored" in captured.out and "3 errors" in captured.out and "0 human label(s)" in captured.out
    assert "scored no row" in captured.err and "no label was recorded" in captured.err
    assert not any(o.tags["grader_id"] == "human" for o in QualityLedger(tmp_path / "l.jsonl").read_all())


def test_grade_user_errors_exit_2(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", ROWS)
    with pytest.raises(SystemExit) as exc:
        grade(data, tmp_path / "l.jsonl", "--human", "nope")
    assert exc.value.code == 2
    assert "--human: no column 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(data), "--judge", "exact-mach", "--ledger", str(tmp_path / "l.jsonl"), "--task-type", "qa"])
    assert exc.value.code == 2
    assert "did you mean exact-match?" in capsys.readouterr().err
    assert not (tmp_path / "l.jsonl").exists()


def test_route_prints_the_decision_with_its_evidence(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", ROWS)
    ledger = tmp_path / "l.jsonl"
    assert grade(data, ledger, "--human", "label") == 0
    capsys.readouterr()
    assert main(["route", str(ledger), "qa", "--threshold", "0.5", "--min-observations", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("route 'qa' [judge exact-match] -> ")
    assert "PPI++ with 24 human label(s)" in out
    lines = out.splitlines()
    header = next(line for line in lines if "n_labelled" in line)
    for word in ("method", "n", "n_labelled", "95% interval"):
        assert word in header
    rows = [line.split() for line in lines if line.strip().startswith(("m1", "m2"))]
    assert len(rows) == 2 and all(r[1] == "ppi++" and r[2] == "12" and r[3] == "12" for r in rows)
    for line in lines:  # every interval in 0..1, at three places, on its line
        if line.strip().startswith(("m1", "m2")):
            low, high = line.split("[", 1)[1].split("]", 1)[0].split(", ")
            assert 0.0 <= float(low) <= float(high) <= 1.0 and len(low.split(".")[1]) == 3
    # --no-human: the judge's raw scores, Wilson for 0/1 scores
    assert main(["route", str(ledger), "qa", "--threshold", "0.5", "--min-observations", "5", "--no-human"]) == 0
    out = capsys.readouterr().out
    assert "wilson" in out and "24 human label(s) not used" in out
    # no adapter is still a decision: exit 0 (unless --require-adapter)
    assert main(["route", str(ledger), "qa", "--threshold", "1.0", "--min-observations", "5"]) == 0
    assert "-> no adapter" in capsys.readouterr().out
    assert main(["route", str(ledger), "qa", "--threshold", "1.0", "--min-observations", "5",
                 "--require-adapter"]) == 1


def test_route_user_errors_and_escaping(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", [dict(r, candidate_model="m\x1b[31m") for r in ROWS])
    ledger = tmp_path / "l.jsonl"
    assert grade(data, ledger) == 0
    capsys.readouterr()
    assert main(["route", str(ledger), "qa", "--threshold", "0.1", "--min-observations", "5"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "m\\x1b[31m" in out
    with pytest.raises(SystemExit) as exc:
        main(["route", str(ledger), "other", "--threshold", "0.5"])
    assert exc.value.code == 2 and "its task types: 'qa'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["route", str(ledger), "qa", "--threshold", "1.5"])
    assert exc.value.code == 2 and "--threshold must be a quality in 0..1" in capsys.readouterr().err


def test_calibrate_ledger_records_judgments_and_labels(tmp_path, capsys):
    data = write_csv(tmp_path / "qa.csv", [dict(r, human=r.pop("label")) for r in map(dict, ROWS)])
    ledger = tmp_path / "l.jsonl"
    assert main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact-match", "--probes", "none",
                 "--n-boot", "200", "--no-progress", "--ledger", str(ledger), "--task-type", "qa"]) == 0
    out = capsys.readouterr().out
    assert "recorded 24 judgment(s) and 24 human label(s)" in out and "saved 1 judge card(s)" in out
    paired = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(paired) == 24 and paired["human"].notna().all()
    assert main(["route", str(ledger), "qa", "--threshold", "0.5", "--min-observations", "5",
                 "--require-calibrated", "--min-kappa", "0.0"]) == 0
    assert "ppi++" in capsys.readouterr().out


# -- recording once: the documented loop counts each item once --------------------------------------------------


def route_lines(ledger, capsys) -> tuple[str, list[list[str]]]:
    assert main(["route", str(ledger), "qa", "--threshold", "0.5", "--min-observations", "5"]) == 0
    out = capsys.readouterr().out
    return out, [line.split() for line in out.splitlines() if line.strip().startswith(("m1", "m2"))]


def test_grade_then_calibrate_on_one_ledger_records_each_judgment_and_label_once(tmp_path, capsys):
    """The documented loop: ``grade --human`` then ``calibrate --ledger`` on the same ledger. calibrate finds
    the judgments and labels grade recorded and says so; route counts each item once (n, n_labelled and the
    interval are those of the items, not of the copies) and its header counts distinct labels."""
    data = write_csv(tmp_path / "qa.csv", ROWS)
    ledger = tmp_path / "l.jsonl"
    assert grade(data, ledger, "--human", "label") == 0
    capsys.readouterr()
    before, rows = route_lines(ledger, capsys)
    assert "PPI++ with 24 human label(s)" in before and all(r[2] == r[3] == "12" for r in rows)
    assert main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact-match", "--human",
                 "label", "--probes", "none", "--n-boot", "200", "--no-progress", "--ledger", str(ledger),
                 "--task-type", "qa"]) == 0
    out = capsys.readouterr().out
    assert ("recorded 0 judgment(s) and 0 human label(s)" in out
            and "24 judgment(s) and 24 label(s) already in the ledger, not recorded again" in out)
    assert grade(data, ledger, "--human", "label") == 0  # a rerun adds nothing and says how many it found
    out = capsys.readouterr().out
    assert "recorded 0 judgment(s) and 0 human label(s)" in out and "24 judgment(s) and 24 label(s) already" in out
    assert len(QualityLedger(ledger).read_all()) == 48
    after, rows_after = route_lines(ledger, capsys)
    assert after == before and rows_after == rows


def test_route_counts_distinct_labels_in_a_ledger_that_holds_copies(tmp_path, capsys):
    """A ledger written before labels were recorded once holds copies: route's header counts each label once
    (and an undone one not at all), as n_labelled does."""
    ledger = QualityLedger(tmp_path / "l.jsonl")
    items = pd.DataFrame(ROWS)
    judge_many(ExactMatchJudge(), items, ledger=ledger, task_type="qa", progress=False)
    labels = items.assign(item_id=items["id"], label=[1.0 if v == "yes" else 0.0 for v in items["label"]])
    record_labels(ledger, labels, task_type="qa", label="label")
    ledger.extend([o for o in ledger.read_all() if o.tags["grader_id"] == "human"])  # old copies
    assert len(ledger.read_all()) == 24 + 48
    out, rows = route_lines(ledger.path, capsys)
    assert "PPI++ with 24 human label(s)" in out and all(r[3] == "12" for r in rows)


def test_grade_that_judged_nothing_records_no_label_and_the_rerun_records_them_once(tmp_path, capsys,
                                                                                   monkeypatch):
    """``grade --human`` against an endpoint that fails every call judges nothing: it records no label and
    exits 1 with the first error; run again once the endpoint works, it records every label once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = write_csv(tmp_path / "qa.csv", ROWS[:6])
    ledger = tmp_path / "l.jsonl"

    def llm_grade(server):
        return main(["grade", str(data), "--judge", "llm", "--llm", "openai:judge-1", "--base-url", server.base_url,
                     "--ledger", str(ledger), "--task-type", "qa", "--human", "label", "--no-progress"])

    with LoopbackServer(faults={"400": 1.0}) as down:
        assert llm_grade(down) == 1
    captured = capsys.readouterr()
    assert "0 scored" in captured.out and "0 human label(s)" in captured.out
    assert re.search(r"scored no row; first error: .*400", captured.err) and "no label was recorded" in captured.err
    assert not ledger.exists() or not QualityLedger(ledger).read_all()
    with LoopbackServer() as up:
        assert llm_grade(up) == 0
        assert "6 scored" in capsys.readouterr().out
        assert llm_grade(up) == 0
    assert "recorded 0 judgment(s) and 0 human label(s)" in capsys.readouterr().out
    recorded = QualityLedger(ledger).read_all()
    assert sorted(o.tags["grader_id"] for o in recorded) == ["human"] * 6 + ["llm-judge"] * 6


def _observations(ledger):
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def test_grade_names_the_candidate_model_or_says_it_is_unknown(tmp_path, capsys):
    rows = [{k: v for k, v in r.items() if k != "candidate_model"} for r in ROWS]
    data = write_csv(tmp_path / "qa.csv", rows)
    assert grade(data, tmp_path / "unknown.jsonl", "--human", "label") == 0
    err = capsys.readouterr().err
    assert "qa.csv has no candidate_model column" in err and "'unknown'" in err and "--candidate-model" in err
    assert {o["model_id"] for o in _observations(tmp_path / "unknown.jsonl")} == {"unknown"}
    ledger = tmp_path / "named.jsonl"
    assert grade(data, ledger, "--human", "label", "--candidate-model", "gpt-x") == 0
    assert "candidate_model" not in capsys.readouterr().err
    observations = _observations(ledger)
    assert {(o["adapter_id"], o["model_id"]) for o in observations} == {("gpt-x", "gpt-x")}
    assert sum(o["tags"]["grader_id"] == "human" for o in observations) == 24  # the labels under the same model
    paired = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(paired) == 24 and paired["human"].notna().all()
    # rows that name their model keep it; the option names the others
    mixed = write_csv(tmp_path / "mixed.csv", [dict(r, candidate_model="m1" if k < 4 else "")
                                               for k, r in enumerate(ROWS)])
    assert grade(mixed, tmp_path / "mixed.jsonl", "--candidate-model", "m9") == 0
    models = [o["model_id"] for o in _observations(tmp_path / "mixed.jsonl")]
    assert models.count("m1") == 4 and models.count("m9") == 20
    capsys.readouterr()
    assert grade(mixed, tmp_path / "mixed2.jsonl") == 0
    assert "names no candidate_model on 20 of its 24 rows" in capsys.readouterr().err
    # every row names its model: the option would do nothing, so it is a mistake
    with pytest.raises(SystemExit) as exc:
        grade(write_csv(tmp_path / "all.csv", ROWS), tmp_path / "x.jsonl", "--candidate-model", "m9")
    assert exc.value.code == 2 and "drop --candidate-model" in capsys.readouterr().err


def test_calibrate_takes_the_candidate_model_and_warns_only_when_it_records(tmp_path, capsys):
    rows = [{"id": r["id"], "prompt": r["prompt"], "baseline": r["baseline"], "candidate": r["candidate"],
             "human": r["label"]} for r in ROWS]
    data = write_csv(tmp_path / "qa.csv", rows)
    args = ["calibrate", str(data), "--judges", "exact", "--probes", "none", "--n-boot", "0", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "o1")]) == 0
    assert "candidate_model" not in capsys.readouterr().err  # nothing recorded: nothing to say
    ledger = tmp_path / "l.jsonl"
    assert main([*args, "--out", str(tmp_path / "o2"), "--ledger", str(ledger)]) == 0
    assert "recorded under model 'unknown'" in capsys.readouterr().err
    named = tmp_path / "named.jsonl"
    assert main([*args, "--out", str(tmp_path / "o3"), "--ledger", str(named), "--candidate-model", "gpt-x"]) == 0
    assert "candidate_model" not in capsys.readouterr().err
    assert {o["model_id"] for o in _observations(named)} == {"gpt-x"}
    scores = pd.read_csv(tmp_path / "o3" / "scores.csv")
    assert (scores["candidate_model"] == "gpt-x").all()


def test_grade_takes_a_label_scale_and_no_command_suggests_an_option_it_lacks(tmp_path, capsys):
    rated = [dict(r, label=5 if r["label"] == "yes" else 1) for r in ROWS]
    data = write_csv(tmp_path / "rated.csv", rated)
    with pytest.raises(SystemExit) as exc:
        grade(data, tmp_path / "l.jsonl", "--human", "label")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--scale 1-5" in err and "scale=(" not in err
    ledger = tmp_path / "l.jsonl"
    assert grade(data, ledger, "--human", "label", "--scale", "1-5") == 0
    labels = [o["quality_score"] for o in _observations(ledger) if o["tags"]["grader_id"] == "human"]
    assert sorted(set(labels)) == [0.0, 1.0] and len(labels) == 24
    with pytest.raises(SystemExit) as exc:
        grade(data, tmp_path / "l2.jsonl", "--scale", "1-5")
    assert exc.value.code == 2 and "add --human COLUMN" in capsys.readouterr().err
    # estimate has no --scale: it says what it reads instead of suggesting one
    graded = write_csv(tmp_path / "graded.csv", [{"judge": 0.5, "label": r["label"]} for r in rated])
    with pytest.raises(SystemExit) as exc:
        main(["estimate", str(graded), "--judge", "judge", "--human", "label", "--out", str(tmp_path / "e")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--scale" not in err and "reads 0-1 labels" in err
