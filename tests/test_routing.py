"""Adaptive routing from a ledger: cheapest adapter meeting the threshold with confidence."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from llm_connect import QualityLedger, QualityObservation
from llm_connect.routing import RoutingPolicy, evidence_table, route

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def fill(ledger, adapter, *, n, quality, cost, task="qa", age=timedelta(hours=1), spread=0.05, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        q = min(1.0, max(0.0, quality + rng.uniform(-spread, spread)))
        ledger.append(
            QualityObservation(
                task,
                adapter,
                adapter.split(":")[-1],
                cost,
                q,
                100.0 + i,
                10,
                5,
                recorded_at=NOW - age - timedelta(seconds=i),
            )
        )


@pytest.fixture
def ledger(tmp_path):
    return QualityLedger(tmp_path / "ledger.jsonl")


def test_cheapest_adapter_meeting_the_threshold_wins(ledger):
    fill(ledger, "openai:big", n=40, quality=0.95, cost=0.01)
    fill(ledger, "openai:mid", n=40, quality=0.9, cost=0.002)
    fill(ledger, "local:tiny", n=40, quality=0.5, cost=0.0)
    decision = route(ledger, "qa", threshold=0.8, now=NOW)
    assert decision.adapter_id == "openai:mid"
    assert "cheapest" in decision.reason
    ev = decision.evidence.set_index("adapter_id")
    assert bool(ev.loc["local:tiny", "eligible"]) is False
    assert "lower bound" in ev.loc["local:tiny", "reason"]
    assert ev.loc["openai:big", "n"] == 40
    assert ev.loc["openai:mid", "mean_cost_usd"] == pytest.approx(0.002)


def test_the_lower_bound_not_the_mean_must_meet_the_threshold(ledger):
    # mean 0.82 but very noisy and few: the interval's lower end falls below 0.8
    rng = random.Random(1)
    for _ in range(20):
        q = 0.82 + rng.choice([-0.3, 0.3]) * rng.random()
        ledger.append(QualityObservation("qa", "noisy", "m", 0.0, min(1, max(0, q)), 1, 1, 1, recorded_at=NOW))
    fill(ledger, "steady", n=30, quality=0.9, cost=0.5, spread=0.01)
    d = route(ledger, "qa", threshold=0.8, now=NOW)
    ev = d.evidence.set_index("adapter_id")
    assert ev.loc["noisy", "quality_low"] < 0.8 < ev.loc["noisy", "quality_high"]
    assert d.adapter_id == "steady"


def test_bootstrap_interval_matches_an_independent_percentile_bootstrap(ledger):
    fill(ledger, "a", n=50, quality=0.7, cost=0.0, spread=0.2, seed=3)
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(n_resamples=4000), now=NOW)
    scores = np.array([o.quality_score for o in ledger.read_all()])
    rng = np.random.default_rng(123)
    means = scores[rng.integers(0, len(scores), (20000, len(scores)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert ev.loc[0, "quality_low"] == pytest.approx(low, abs=0.01)
    assert ev.loc[0, "quality_high"] == pytest.approx(high, abs=0.01)
    assert ev.loc[0, "mean_quality"] == pytest.approx(scores.mean())


def test_scores_all_equal_get_an_honest_interval_not_a_point(ledger):
    """Five judge scores of 0.9 and nothing else: every bootstrap resample has mean 0.9, so a bootstrap says
    [0.9, 0.9] and route would certify the adapter at 0.85 with certainty. The exact bound is used instead: the
    share of scores equal to 0.9 is at least q = 0.025^(1/5) (Clopper–Pearson), the rest anywhere in 0..1."""
    from scipy.stats import beta

    for _ in range(5):
        ledger.append(QualityObservation("qa", "same", "m", 0.0, 0.9, 1, 1, 1, recorded_at=NOW))
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(), now=NOW)
    q = beta.ppf(0.025, 5, 1)  # scipy's Clopper–Pearson lower bound of 5 successes in 5
    assert q == pytest.approx(0.025 ** (1 / 5))
    assert ev.loc[0, "quality_low"] == pytest.approx(0.9 * q) and ev.loc[0, "quality_high"] == pytest.approx(
        0.9 + 0.1 * (1 - q))
    assert route(ledger, "qa", threshold=0.85, min_observations=5, now=NOW).adapter_id is None


def test_min_observations_and_max_age(ledger):
    fill(ledger, "few", n=5, quality=0.99, cost=0.0)
    fill(ledger, "old", n=50, quality=0.99, cost=0.0, age=timedelta(days=90))
    fill(ledger, "ok", n=30, quality=0.95, cost=1.0)
    d = route(ledger, "qa", min_observations=20, max_age=timedelta(days=30), now=NOW)
    assert d.adapter_id == "ok"
    ev = d.evidence.set_index("adapter_id")
    assert "too few" in ev.loc["few", "reason"]
    assert bool(ev.loc["old", "stale"]) is True and ev.loc["old", "n"] == 0 and ev.loc["old", "n_stale"] == 50
    # without an age limit the old, free adapter wins
    assert route(ledger, "qa", max_age=None, now=NOW).adapter_id in {"old"}


def test_recent_limits_the_observations_used(ledger):
    # 100 old bad observations, then 30 recent good ones: only the recent 30 count
    fill(ledger, "improved", n=100, quality=0.2, cost=0.0, age=timedelta(days=2))
    fill(ledger, "improved", n=30, quality=0.95, cost=0.0, age=timedelta(hours=1))
    assert route(ledger, "qa", recent=30, now=NOW).adapter_id == "improved"
    assert route(ledger, "qa", recent=None, now=NOW).adapter_id is None


def test_no_adapter_qualifies_says_why(ledger):
    fill(ledger, "weak", n=40, quality=0.4, cost=0.0)
    d = route(ledger, "qa", now=NOW)
    assert d.adapter_id is None and not d
    assert "weak" in d.reason and "lower bound" in d.reason
    empty = route(ledger, "summarise", now=NOW)
    assert empty.adapter_id is None and "no observations" in empty.reason


def test_task_types_are_kept_apart_and_the_decision_renders(ledger):
    fill(ledger, "a", n=30, quality=0.9, cost=0.1, task="qa")
    fill(ledger, "b", n=30, quality=0.9, cost=0.01, task="code")
    assert route(ledger, "qa", now=NOW).adapter_id == "a"
    assert route(ledger, "code", now=NOW).adapter_id == "b"
    d = route(ledger, "qa", now=NOW)
    assert "<table" in d._repr_html_() and "a" in str(d)
    assert set(evidence_table(ledger, policy=RoutingPolicy(), now=NOW)["task_type"]) == {"qa", "code"}


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 1.5}, {"min_observations": 0}, {"confidence": 1.0}, {"max_age": timedelta(days=-1)}]
)
def test_bad_policy_is_a_value_error(kwargs):
    with pytest.raises(ValueError):
        RoutingPolicy(**kwargs)


def test_route_accepts_a_path_and_rejects_an_empty_task_type(ledger):
    fill(ledger, "a", n=25, quality=0.95, cost=0.0)
    assert route(str(ledger.path), "qa", now=NOW).adapter_id == "a"
    with pytest.raises(ValueError, match=r"task_type must be a non-empty string \(the task the judgments are "
                                         r"recorded and routed under\), got ''"):
        route(ledger, "")
    with pytest.raises(ValueError, match=r"task_type must be a non-empty string .*got 7"):
        route(ledger, 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="route needs a task_type"):
        route(ledger, None)  # type: ignore[arg-type]


def test_all_passes_do_not_prove_perfection_wilson_bound_for_pass_fail_scores(ledger):
    from scipy.stats import binomtest

    for _ in range(95):
        ledger.append(QualityObservation("qa", "perfect-so-far", "m", 0.0, 1.0, 1, 1, 1, recorded_at=NOW))
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(), now=NOW)
    low = binomtest(95, 95).proportion_ci(method="wilson").low
    assert ev.loc[0, "quality_low"] == pytest.approx(low)
    assert 0.95 < low < 0.97
    assert route(ledger, "qa", threshold=0.97, now=NOW).adapter_id is None
    assert route(ledger, "qa", threshold=0.95, now=NOW).adapter_id == "perfect-so-far"


def _turns(ledger, adapter, *, conversations, turns=5, seed=0, scores=None):
    """Observations that are turns of conversations (tag ``conversation_id``); a conversation's turns share its
    quality (some conversations go well, others badly)."""
    rng = np.random.default_rng(seed)
    for c in range(conversations):
        level = rng.choice([0.55, 0.95])
        for t in range(turns):
            q = float(np.clip(level + rng.normal(0, 0.03), 0, 1)) if scores is None else scores
            ledger.append(QualityObservation("qa", adapter, "m", 0.0, q, 1, 1, 1, recorded_at=NOW - timedelta(
                seconds=c * turns + t), tags={"conversation_id": f"c{c}"}))


def test_turns_of_a_conversation_are_resampled_together(ledger):
    _turns(ledger, "a", conversations=30)
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(recent=None), now=NOW).iloc[0]
    flat = evidence_table(ledger, "qa", policy=RoutingPolicy(recent=None, cluster=None), now=NOW).iloc[0]
    assert ev["method"] == "cluster bootstrap" and flat["method"] == "bootstrap"
    assert ev["cluster"] == "conversation_id" and ev["n_clusters"] == 30
    assert ev["quality_high"] - ev["quality_low"] > 1.5 * (flat["quality_high"] - flat["quality_low"])
    again = evidence_table(ledger, "qa", policy=RoutingPolicy(recent=None), now=NOW).iloc[0]
    assert (again["quality_low"], again["quality_high"]) == (ev["quality_low"], ev["quality_high"])  # seeded


def test_few_conversations_or_all_passes_are_not_proof(tmp_path):
    few = QualityLedger(tmp_path / "few.jsonl")
    _turns(few, "a", conversations=5, turns=10)
    ev = evidence_table(few, "qa", policy=RoutingPolicy(recent=None, min_observations=10), now=NOW).iloc[0]
    assert not ev["eligible"] and ev["reason"].startswith("no honest interval: only 5 conversation(s)")
    passes = QualityLedger(tmp_path / "passes.jsonl")
    _turns(passes, "a", conversations=12, turns=10, scores=1.0)
    ev = evidence_table(passes, "qa", policy=RoutingPolicy(recent=None, threshold=0.8), now=NOW).iloc[0]
    assert ev["method"] == "exact by conversation"  # 120 passes in 12 conversations: bounded as 12, not 120
    assert ev["quality_low"] == pytest.approx(0.025 ** (1 / 12)) and not ev["eligible"]


def test_whose_scores_and_which_labels_count_are_public(make_obs):
    """The CLI's ``route`` and ``ledger stats`` read whose score an observation is and which of people's labels
    still count through routing's public names: a label an undo marker took back no longer counts, markers and
    labels are never a judge."""
    from llm_connect.routing import grader_key, label_grader_ids, standing_labels

    judge = make_obs(tags={"grader_id": "llm", "rubric_hash": "abc"})
    untagged = make_obs(tags={"grader_id": 3})
    kept = make_obs(tags={"grader_id": "human", "item_id": "q1", "label_id": "L1"})
    undone = make_obs(tags={"grader_id": "human", "item_id": "q2", "label_id": "L2"})
    marker = make_obs(tags={"grader_id": "human-undo", "undoes": "L2"})
    other = make_obs(tags={"grader_id": "human", "item_id": "q3", "label_id": ["L2"]})  # names no label
    assert grader_key(judge) == ("llm", "abc") and grader_key(untagged) == (None, None)
    assert standing_labels([judge, kept, undone, marker, other], "human") == [kept, other]
    assert standing_labels([kept, undone], "human") == [kept, undone]  # no marker among them: nothing undone
    assert label_grader_ids() == {"human-skip", "human-undo", "human-hold"}
    assert label_grader_ids("annotator") >= {"annotator", "annotator-skip", "annotator-undo", "annotator-hold"}


def test_no_other_floor_imports_a_private_routing_name():
    """What the CLI needs of routing is public (``grader_key``, ``label_grader_ids``, ``standing_labels``): no module
    outside routing imports an underscore name from it."""
    import ast
    from pathlib import Path

    import llm_connect

    root = Path(llm_connect.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "routing":
                found += [f"{path.relative_to(root)}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []


# -- conversation items judged into the ledger --------------------------------------------------------------------


def _judged_turns(tmp_path, conversations: int = 12):
    """Turns of conversations judged by an LLM judge into a ledger (the last turn of each left unjudged) and
    labelled by people on every turn: the ledger ``grade --per-turn`` and the Labeller leave."""
    from llm_connect import LLMJudge, Rubric, judge_many
    from llm_connect.conversations import per_turn
    from llm_connect.frames import record_labels
    from llm_connect.testing import ScriptedAdapter

    rng = np.random.default_rng(0)
    convs = []
    for g in range(conversations):
        messages = [{"role": "system", "content": "You are a helpful bot."}]
        for t in range(3):
            messages += [{"role": "user", "content": f"question {t} of conversation {g}?"},
                         {"role": "assistant", "content": f"answer {t} of {g}: " + ("right" if g % 3 else "wrong")}]
        convs.append({"conversation_id": f"c{g}", "messages": messages})
    turns = per_turn(convs).assign(candidate_model="bot-1")
    def verdict(prompt: str, rc) -> str:  # the judge reads the judged reply, last in the prompt
        return json.dumps({"notes": "ok", "quality_score": int("right" in prompt.rsplit("<<<CANDIDATE", 1)[1])})

    judge = LLMJudge(ScriptedAdapter(verdict), rubric=Rubric("Is the answer right?", reference=False))
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    judged = judge_many(judge, turns[turns["turn"] < 2], ledger=ledger, task_type="chat", progress=False)
    assert (judged["status"] == "scored").all()
    labels = turns.assign(human=[float(("right" in c) if rng.random() < 0.9 else ("right" not in c))
                                 for c in turns["candidate"]])
    record_labels(ledger, labels, task_type="chat", label="human")
    return ledger


def test_route_on_conversation_turns_clusters_by_conversation_and_counts_the_unjudged_labels(tmp_path):
    ledger = _judged_turns(tmp_path)
    decision = route(ledger, "chat", human="human", threshold=0.1, min_observations=5)
    ev = decision.evidence.iloc[0]
    assert (ev["method"], ev["cluster"], ev["n_clusters"]) == ("ppi++", "conversation_id", 12)
    assert (ev["n"], ev["n_labelled"], ev["n_unjudged"]) == (36, 36, 12)  # the last turns: labelled, not judged
    flat = route(ledger, "chat", human="human", threshold=0.1, min_observations=5, cluster=None).evidence.iloc[0]
    assert flat["cluster"] is None and pd.isna(flat["n_clusters"])
    assert ev["quality_high"] - ev["quality_low"] > flat["quality_high"] - flat["quality_low"]
    shown = str(decision)
    assert "conversation_id" in shown and "n_unjudged" in shown


def test_cli_route_prints_the_clustering_and_the_unjudged_labels(tmp_path, capsys):
    from llm_connect.cli import main

    ledger = _judged_turns(tmp_path)
    args = ["route", str(ledger.path), "chat", "--threshold", "0.1", "--min-observations", "5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "clustered by tag 'conversation_id'" in out
    assert "12 labelled item(s) the judge did not score (n_unjudged)" in out
    lines = out.splitlines()
    header = next(line.split() for line in lines if "n_unjudged" in line and "adapter" in line)
    (row,) = [line.split() for line in lines if line.strip().startswith("bot-1")]
    assert header[:5] == ["adapter", "method", "n", "n_labelled", "n_unjudged"] and row[1:5] == ["ppi++", "36",
                                                                                                 "36", "12"]
    assert row[header.index("interval") + 1] == "12"  # the clusters column: the conversations it rests on
    assert main([*args, "--cluster", "none"]) == 0
    out = capsys.readouterr().out
    assert "observations taken as independent" in out
    (row,) = [line.split() for line in out.splitlines() if line.strip().startswith("bot-1")]
    assert row[header.index("interval") + 1] == "—"


def test_paired_frame_keeps_the_labelled_turns_the_judge_did_not_score(tmp_path):
    """The rows route counts as n_unjudged: labelled turns without a judge score, with their conversation."""
    from llm_connect.frames import paired_frame

    paired = paired_frame(_judged_turns(tmp_path), "chat", grader_id="llm-judge")
    unjudged = paired[paired["llm-judge"].isna()]
    assert len(paired) == 36 and len(unjudged) == 12 and unjudged["human"].notna().all()
    assert set(unjudged["turn"]) == {2} and unjudged["conversation_id"].nunique() == 12
