"""The shipped conversations and agent runs (data/conversations.jsonl, data/agent_runs.jsonl): made by
data/make_conversations.py byte for byte, read by read_conversations, labelled per turn."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from llm_connect import RunConfig, TrajectoryMatchJudge
from llm_connect.conversations import as_response, normalize_messages, per_turn, read_conversations

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def maker():
    spec = importlib.util.spec_from_file_location("_make_conversations", DATA / "make_conversations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_script_writes_the_shipped_files_byte_for_byte(maker, tmp_path, monkeypatch):
    monkeypatch.setattr(maker, "CONVERSATIONS", tmp_path / "conversations.jsonl")
    monkeypatch.setattr(maker, "AGENT_RUNS", tmp_path / "agent_runs.jsonl")
    maker.main()
    for name in ("conversations.jsonl", "agent_runs.jsonl"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), (
            f"data/{name} is not what data/make_conversations.py writes: run it")


def test_conversations_are_read_one_item_per_turn_with_labels():
    items = read_conversations(DATA / "conversations.jsonl")
    assert len(items) == 73 and items["conversation_id"].nunique() == 20
    sizes = items.groupby("conversation_id")["turn"].agg(["min", "max", "size"])
    assert (sizes["min"] == 0).all() and (sizes["max"] + 1 == sizes["size"]).all()
    assert sizes["size"].between(3, 6).all()
    assert set(items["human"]) == {"yes", "no"} and (items["human"] == "no").sum() == 17
    assert ((items["human"] == "yes") == (items["flaw"] == "none")).all()
    for row in items.itertuples():
        assert row.messages[0]["role"] == "system" and row.messages[-1]["role"] == "user"
        assert row.prompt == row.messages[-1]["content"] and isinstance(row.candidate, str)
        assert row.context and all(isinstance(d, str) and d for d in row.context)
        assert len(row.messages) == 2 * row.turn + 2  # the whole history before the reply
    # each line's history is the conversation so far: the last line's messages and reply rebuild it whole
    last = items.sort_values("turn").groupby("conversation_id").tail(1).iloc[0]
    whole = per_turn([{"messages": [*last["messages"], {"role": "assistant", "content": last["candidate"]}],
                       "conversation_id": last["conversation_id"]}])
    mine = items[items["conversation_id"] == last["conversation_id"]].sort_values("turn")
    assert whole["candidate"].tolist() == mine["candidate"].tolist()


def test_agent_runs_are_trajectories_with_references_and_documents():
    runs = read_conversations(DATA / "agent_runs.jsonl")
    assert len(runs) == 15 and runs["id"].is_unique
    assert set(runs["flaw"]) == {"none", "wrong-args", "needless-call", "unsupported", "missing-call",
                                 "wrong-order", "contradicted"}
    for row in runs.itertuples():
        for run in (row.candidate, row.baseline):
            assert normalize_messages(run) and run[-1]["role"] == "assistant" and run[-1]["content"]
            for message in run:
                for call in message.get("tool_calls", []):
                    json.loads(call["function"]["arguments"])
        assert row.context == [m["content"] for m in row.baseline if m["role"] == "tool"]


def test_the_strict_trajectory_match_catches_every_call_fault_and_misses_the_rest():
    """What the labels were made for: the call faults are visible to a trajectory judge; a wrong answer after
    the right calls (unsupported, contradicted) is not, and one good run calls with equivalent arguments."""
    runs = read_conversations(DATA / "agent_runs.jsonl")
    judge = TrajectoryMatchJudge("strict")
    scores = {row.id: judge.judge(as_response(row.baseline), as_response(row.candidate), prompt=row.prompt,
                                  run_config=RunConfig()).quality_score for row in runs.itertuples()}
    flaw = dict(zip(runs["id"], runs["flaw"], strict=True))
    assert {i for i, s in scores.items() if s == 0.0} == {
        i for i, f in flaw.items() if f in ("wrong-args", "needless-call", "missing-call", "wrong-order")} | {"run-09"}
    assert {flaw[i] for i, s in scores.items() if s == 1.0} == {"none", "unsupported", "contradicted"}
