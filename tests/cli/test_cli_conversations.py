"""The CLI on conversation items: ``grade`` / ``calibrate`` read JSON Lines with list-valued ``messages``,
``candidate``, ``baseline`` and ``context``; ``--per-turn`` splits conversations into one item per assistant
reply; ``view`` gets the transcript data (``judgments.jsonl``)."""

from __future__ import annotations

import json

import pytest

from llm_connect.cli import main
from llm_connect.quality import QualityLedger

FRANCE = [{"role": "user", "content": "Capital of France?"}]
ITALY = [*FRANCE, {"role": "assistant", "content": "Paris"}, {"role": "user", "content": "And Italy?"}]
ITEMS = [
    {"conversation_id": "c1", "turn": 0, "messages": FRANCE, "candidate": "Paris", "baseline": "Paris",
     "context": ["France's capital is Paris."], "label": 1},
    {"conversation_id": "c1", "turn": 1, "messages": ITALY, "candidate": [{"role": "assistant", "content": "Rome"}],
     "baseline": "Rome", "label": 1},
    {"conversation_id": "c2", "turn": 0, "messages": [{"role": "user", "content": "2+2?"}], "candidate": "5",
     "baseline": "4", "label": 0},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_grade_reads_conversation_items_and_records_each_turn_once(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    ledger = tmp_path / "l.jsonl"
    argv = ["grade", str(data), "--judge", "exact", "--ledger", str(ledger), "--task-type", "chat",
            "--human", "label", "--no-progress"]
    assert main(argv) == 0
    assert "3 scored" in capsys.readouterr().out
    obs = QualityLedger(ledger).read_all()
    judged = [o for o in obs if o.tags["grader_id"] == "exact-match"]
    # recorded as they finish; the trajectory's final answer is compared
    assert sorted((o.tags["conversation_id"], o.tags["turn"], o.quality_score) for o in judged) == [
        ("c1", 0, 1.0), ("c1", 1, 1.0), ("c2", 0, 0.0)]
    labels = [o for o in obs if o.tags["grader_id"] == "human"]
    assert sorted((o.tags["conversation_id"], o.tags["turn"]) for o in labels) == [("c1", 0), ("c1", 1), ("c2", 0)]
    assert main(argv) == 0  # a rerun records nothing new
    assert "3 judgment(s) and 3 label(s) already in the ledger" in capsys.readouterr().out
    assert len(QualityLedger(ledger).read_all()) == 6


def test_per_turn_splits_conversations_and_names_a_missing_reference(tmp_path, capsys):
    conv = {"conversation_id": "c1", "messages": [*ITALY, {"role": "assistant", "content": "Rome"}]}
    data = write_jsonl(tmp_path / "conv.jsonl", [conv])
    ledger = tmp_path / "l.jsonl"
    with pytest.raises(SystemExit) as exc:  # a judge that compares with a reference: no baseline per turn
        main(["grade", str(data), "--per-turn", "--judge", "exact", "--ledger", str(ledger), "--task-type", "chat",
              "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "baseline" in err and "Traceback" not in err
    assert "'conversation_id'" in err and "'turn'" in err  # the file was split per turn


def test_per_turn_needs_conversations(tmp_path, capsys):
    data = write_jsonl(tmp_path / "plain.jsonl", [{"prompt": "q", "baseline": "a", "candidate": "a"}])
    with pytest.raises(SystemExit) as exc:
        main(["grade", str(data), "--per-turn", "--judge", "exact", "--ledger", str(tmp_path / "l.jsonl"),
              "--task-type", "chat", "--no-progress"])
    assert exc.value.code == 2
    assert "--per-turn" in capsys.readouterr().err


def test_calibrate_and_view_get_the_conversation(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    out = tmp_path / "out"
    assert main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--probes", "none",
                 "--human", "label", "--no-progress"]) == 0
    records = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    items = [r for r in records if r["kind"] == "item"]
    assert [(r["fields"]["conversation_id"], r["fields"]["turn"]) for r in items] == [
        ("c1", "0"), ("c1", "1"), ("c2", "0")]
    assert items[1]["messages"] == ITALY and items[1]["candidate"] == "Rome"
    assert items[1]["candidate_run"] == [{"role": "assistant", "content": "Rome"}]
    assert items[0]["context"] == ["France's capital is Paris."] and items[0]["prompt"] == "Capital of France?"
    assert items[1]["judges"]["exact-match"]["score"] == 1.0
    assert main(["view", str(out)]) == 0
    assert (out / "viewer.html").is_file()


def test_per_turn_grades_a_conversation_with_a_reference_free_rubric(tmp_path, capsys, monkeypatch):
    """``grade --per-turn --judge llm --rubric R.yaml``: a rubric with ``reference: false`` judges each assistant
    reply of a conversation file with no baseline; each turn is recorded once, with its conversation and turn,
    and the judge was shown the transcript before the reply."""
    from llm_connect import Rubric
    from llm_connect.testing import LoopbackServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    rubric = tmp_path / "polite.yaml"
    Rubric("Is the reply polite and on topic?", reference=False, name="polite").to_yaml(rubric)
    conv = {"conversation_id": "c1", "messages": [*ITALY, {"role": "assistant", "content": "Rome"}]}
    data = write_jsonl(tmp_path / "conv.jsonl", [conv])
    ledger = tmp_path / "l.jsonl"
    argv = ["grade", str(data), "--per-turn", "--judge", "llm", "--rubric", str(rubric), "--ledger", str(ledger),
            "--task-type", "chat", "--no-progress"]
    with LoopbackServer() as server:
        assert main([*argv, "--llm", "openai:judge-1", "--base-url", server.base_url]) == 0
        prompts = [r.body["messages"][-1]["content"] for r in server.requests if r.path.endswith("/completions")]
    assert "2 scored" in capsys.readouterr().out
    assert len(prompts) == 2
    assert prompts[1].index("And Italy?") < prompts[1].index("The reply to grade:") < prompts[1].rindex("Rome")
    obs = QualityLedger(ledger).read_all()
    assert sorted((o.tags["conversation_id"], o.tags["turn"]) for o in obs) == [("c1", 0), ("c1", 1)]
    with pytest.raises(SystemExit) as exc:  # a rubric only applies to the llm judge
        main(["grade", str(data), "--per-turn", "--judge", "exact", "--rubric", str(rubric), "--ledger",
              str(ledger), "--task-type", "chat", "--no-progress"])
    assert exc.value.code == 2 and "--rubric" in capsys.readouterr().err
