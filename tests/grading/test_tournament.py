"""Tournaments of N models' answers and pairwise judgments as battles for leaderboards: scheduling (all
pairs, seeded random subsets, A/B randomised), missing answers, unscored replies, battle_outcomes() reading
judge_many frames of pairwise judges and pipelines. Scripted adapters only."""

from __future__ import annotations

import itertools
import math
import re

import pandas as pd
import pytest

from llm_connect import (
    ExactMatchJudge,
    LLMJudge,
    PairwiseJudge,
    Pipeline,
    QualityLedger,
    RunConfig,
    ValidationError,
    judge_many,
)
from llm_connect.calibration import battle_outcomes
from llm_connect.grading import TOURNAMENT_COLUMNS, schedule_battles, tournament, winner_of
from llm_connect.pipelines import Layer, MajorityPool, PairwiseUnit
from llm_connect.stats import leaderboard
from llm_connect.testing import ScriptedAdapter

MODELS = ["m1", "m2", "m3", "m4"]  # answer quality rises with the number


def answers(n_prompts: int = 5, **drop) -> pd.DataFrame:
    rows = []
    for p in range(n_prompts):
        for m in MODELS:
            text = f"answer by {m} (quality {m[1]})"
            if drop.get(f"p{p}") == m:
                text = None
            rows.append({"prompt_id": f"p{p}", "prompt": f"question {p}?", "model": m, "answer": text})
    return pd.DataFrame(rows)


def quality(text: str) -> int:
    return int(re.search(r"quality (\d)", text).group(1))


def shown(prompt: str) -> tuple[str, str]:
    a = prompt.split("Answer A:\n", 1)[1].split("Answer B:", 1)[0]
    b = prompt.split("Answer B:\n", 1)[1]
    return a, b


def fair_judge(prompt: str, rc: RunConfig) -> str:
    """Prefers the better answer wherever it is shown; cannot decide on question 3 when m1 is shown first."""
    a, b = shown(prompt)
    if "question 3?" in prompt and "by m1" in a:
        return "They look the same to me."
    return f'{{"notes": "n", "winner": "{"A" if quality(a) > quality(b) else "B"}"}}'


def test_all_pairs_on_each_prompt_with_the_shown_order_randomised():
    sched = schedule_battles(answers(8), prompt_id="prompt_id", seed=1)
    assert len(sched) == 8 * 6 and list(sched.columns) == list(TOURNAMENT_COLUMNS[:-1])
    for _, group in sched.groupby("prompt_id"):
        assert sorted(tuple(sorted(p)) for p in zip(group["model_a"], group["model_b"], strict=True)) == sorted(
            itertools.combinations(MODELS, 2))
    first_sorted = sum(a < b for a, b in zip(sched["model_a"], sched["model_b"], strict=True))
    assert 0 < first_sorted < len(sched)  # a coin decides which model is A
    for _, row in sched.iterrows():
        assert row["answer_a"] == f"answer by {row['model_a']} (quality {row['model_a'][1]})"
    again = schedule_battles(answers(8), prompt_id="prompt_id", seed=1)
    pd.testing.assert_frame_equal(sched, again)  # seeded
    other = schedule_battles(answers(8), prompt_id="prompt_id", seed=2)
    assert not sched.equals(other)


def test_a_random_subset_of_pairs_per_prompt():
    sched = schedule_battles(answers(10), prompt_id="prompt_id", pairs=2, seed=0)
    assert sched.groupby("prompt_id").size().tolist() == [2] * 10
    assert sched.groupby("prompt_id").apply(
        lambda g: len({frozenset(p) for p in zip(g["model_a"], g["model_b"], strict=True)}),
        include_groups=False).tolist() == [2] * 10  # without replacement
    assert len(schedule_battles(answers(2), prompt_id="prompt_id", pairs=50)) == 12  # all when fewer


def test_a_missing_or_blank_answer_sits_that_prompt_out():
    data = answers(3, p1="m2")
    data.loc[(data["prompt_id"] == "p2") & (data["model"] == "m3"), "answer"] = "   "
    sched = schedule_battles(data, prompt_id="prompt_id")
    assert sched.attrs["missing"] == [("p1", "m2"), ("p2", "m3")]
    on = {p: set(g["model_a"]) | set(g["model_b"]) for p, g in sched.groupby("prompt_id")}
    assert on == {"p0": set(MODELS), "p1": {"m1", "m3", "m4"}, "p2": {"m1", "m2", "m4"}}
    assert sched.groupby("prompt_id").size().tolist() == [6, 3, 3]
    lonely = pd.DataFrame([{"prompt": "q", "model": "m1", "answer": "x"}, {"prompt": "r", "model": "m1", "answer": "y"},
                           {"prompt": "r", "model": "m2", "answer": "z"}])
    s = schedule_battles(lonely)
    assert len(s) == 1 and s.attrs["skipped_prompts"] == ["q"]  # the prompt text identifies the prompt


def test_tournament_judges_every_battle_and_names_the_winner():
    adapter = ScriptedAdapter(fair_judge)
    df = tournament(PairwiseJudge(adapter), answers(5, p1="m2"), prompt_id="prompt_id", seed=3, progress=False)
    assert list(df.columns[:7]) == list(TOURNAMENT_COLUMNS)
    assert len(df) == 6 * 4 + 3 and len(adapter.calls) == 2 * len(df)  # both orders
    assert df.attrs["missing"] == [("p1", "m2")]
    assert (df["baseline_model"] == df["model_a"]).all() and (df["candidate_model"] == df["model_b"]).all()
    decided = df[df["status"] == "scored"]
    for _, row in decided.iterrows():
        better_is_a = int(row["model_a"][1]) > int(row["model_b"][1])
        assert row["winner"] == ("a" if better_is_a else "b")
    # question 3: one order of each battle with m1 is unusable, so that battle is unscored, never a win
    unscored = df[df["status"] == "unscored"]
    assert len(unscored) == 3 and set(unscored["prompt_id"]) == {"p3"}
    assert unscored["winner"].isna().all() and unscored["quality_score"].isna().all()
    assert all("m1" in (a, b) for a, b in zip(unscored["model_a"], unscored["model_b"], strict=True))
    assert df.attrs["counts"] == {"scored": len(df) - 3, "unscored": 3, "error": 0}
    assert df.attrs["tournament"]["decided"] == len(df) - 3
    b = battle_outcomes(df)
    assert list(b.columns) == ["model_a", "model_b", "winner"] and len(b) == len(df) - 3
    assert b.attrs["dropped"] == 3
    wins = pd.concat([b.loc[b["winner"] == "a", "model_a"], b.loc[b["winner"] == "b", "model_b"]]).value_counts()
    assert wins.reindex(MODELS, fill_value=0).is_monotonic_increasing  # the stronger model wins more


def test_position_bias_in_one_order_is_a_coin_not_a_model_advantage():
    always_a = ScriptedAdapter(lambda p, rc: '{"winner": "A"}')
    df = tournament(PairwiseJudge(always_a, both_orders=False), answers(20), prompt_id="prompt_id",
                    progress=False, seed=0)
    assert set(df["winner"]) == {"a"}
    shown_first = df["model_a"].value_counts()
    assert shown_first.min() >= 15 and shown_first.max() <= 45  # 120 battles, about 30 each, not all for one
    both = tournament(PairwiseJudge(always_a), answers(3), prompt_id="prompt_id", progress=False)
    assert set(both["winner"]) == {"tie"}  # in both orders the bias cancels into ties


def test_tournament_with_epochs_and_a_ledger(tmp_path):
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    adapter = ScriptedAdapter(fair_judge)
    df = tournament(PairwiseJudge(adapter), answers(2), prompt_id="prompt_id", progress=False, epochs=2,
                    ledger=ledger, task_type="arena")
    assert len(adapter.calls) == 2 * 2 * 12
    assert df["epoch_scores"].map(len).tolist() == [2] * 12
    assert [p["rate"] for p in df.attrs["position_consistency"]] == [1.0, 1.0]
    assert df.attrs["reliability"]["agreement"] == 1.0
    obs = ledger.read_all()
    assert len(obs) == 12 and {o.tags["epochs"] for o in obs} == {2}
    assert {o.model_id for o in obs} <= set(MODELS)
    assert {o.tags["item_id"] for o in obs} == set(df["id"])


def test_tournament_refuses_what_it_cannot_run():
    with pytest.raises(ValidationError, match="pairwise judge"):
        tournament(LLMJudge(ScriptedAdapter(["{}"])), answers(1), progress=False)
    with pytest.raises(ValidationError, match="pairwise judge"):
        tournament(ExactMatchJudge(), answers(1), progress=False)
    judge = PairwiseJudge(ScriptedAdapter(fair_judge))
    twice = pd.concat([answers(1), answers(1)])
    with pytest.raises(ValidationError, match="several answers to one prompt"):
        tournament(judge, twice, progress=False)
    with pytest.raises(ValidationError, match="pairs must be"):
        tournament(judge, answers(1), pairs=0, progress=False)
    with pytest.raises(ValidationError, match="pairs must be"):
        tournament(judge, answers(1), pairs="some", progress=False)
    with pytest.raises(ValidationError, match="lack the column"):
        tournament(judge, answers(1).rename(columns={"answer": "response"}), progress=False)
    mixed = answers(1)
    mixed.loc[0, "prompt"] = "another question"
    with pytest.raises(ValidationError, match="several different texts"):
        tournament(judge, mixed, prompt_id="prompt_id", progress=False)


def test_winner_of_reads_the_reduced_score():
    assert [winner_of("scored", s) for s in (1.0, 0.75, 0.5, 0.25, 0.0)] == ["b", "b", "tie", "a", "a"]
    assert winner_of("unscored", math.nan) is None and winner_of("error", None) is None


def pairs_frame(n: int = 6) -> list[dict]:
    return [{"prompt": f"question {i}?", "baseline": f"answer by m{1 + i % 2} (quality {1 + i % 2})",
             "candidate": f"answer by m3 (quality {3 if i < 4 else 0})",
             "baseline_model": f"m{1 + i % 2}", "candidate_model": "m3"} for i in range(n)]


def test_battles_read_a_pairwise_judge_many_frame_without_reshaping():
    def reply(prompt, rc):
        if "question 5?" in prompt:
            return "no idea"
        return fair_judge(prompt, rc)

    df = judge_many(PairwiseJudge(ScriptedAdapter(reply)), pairs_frame(), progress=False)
    b = battle_outcomes(df)
    assert b.to_dict("records") == [
        {"model_a": "m1", "model_b": "m3", "winner": "b"}, {"model_a": "m2", "model_b": "m3", "winner": "b"},
        {"model_a": "m1", "model_b": "m3", "winner": "b"}, {"model_a": "m2", "model_b": "m3", "winner": "b"},
        {"model_a": "m1", "model_b": "m3", "winner": "a"}]
    assert b.attrs["dropped"] == 1
    positional = judge_many(PairwiseJudge(ScriptedAdapter(lambda p, rc: '{"winner": "B"}')), pairs_frame(2),
                            progress=False)
    assert battle_outcomes(positional)["winner"].tolist() == ["tie", "tie"]  # orders disagree: a tie
    with pytest.raises(ValidationError, match="baseline_model"):
        battle_outcomes(df.drop(columns=["baseline_model"]))
    renamed = df.rename(columns={"baseline_model": "ref_model"})
    assert battle_outcomes(renamed, baseline_model="ref_model").equals(b)


def test_battles_read_a_pipeline_of_pairwise_units():
    def reply(prompt, rc):
        a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:", 1)[0]
        b = prompt.split("Answer B:\n", 1)[1]
        return "Verdict: A" if quality(a) > quality(b) else "Verdict: B"

    pipeline = Pipeline(Layer([PairwiseUnit(name="ab"), PairwiseUnit(name="ba", order="candidate-first")])
                        >> MajorityPool(), adapter=ScriptedAdapter(reply))
    df = judge_many(pipeline.as_judge("pipe"), pairs_frame(), progress=False)
    b = battle_outcomes(df)
    assert b["winner"].tolist() == ["b", "b", "b", "b", "a", "a"]
    assert b["model_a"].tolist() == [f"m{1 + i % 2}" for i in range(6)]
    grading = judge_many(LLMJudge(ScriptedAdapter(lambda p, rc: '{"quality_score": 1, "notes": ""}')),
                         pairs_frame(2), progress=False)
    grading["verdict"] = ["pass", "fail"]
    with pytest.raises(ValidationError, match="not pairwise verdicts"):
        battle_outcomes(grading)


def test_a_tournament_frame_feeds_leaderboard_as_it_is():
    df = tournament(PairwiseJudge(ScriptedAdapter(fair_judge)), answers(6), prompt_id="prompt_id", seed=1,
                    progress=False)
    assert df["winner"].isna().sum() == 3  # the unscored battles of question 3
    board = leaderboard(df, n_boot=50, seed=0)
    assert board.attrs["n_unlabelled"] == 3 and board.attrs["n_comparisons"] == len(df) - 3
    assert board["model"].tolist() == ["m4", "m3", "m2", "m1"]  # the better answers win
    same = leaderboard(battle_outcomes(df), n_boot=50, seed=0)
    pd.testing.assert_frame_equal(board.reset_index(drop=True), same.reset_index(drop=True), check_like=True)
