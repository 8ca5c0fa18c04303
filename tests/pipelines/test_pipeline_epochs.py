"""Pipelines judged in epochs and in tournaments: every seeded unit's seed moves per epoch (so a response
cache never serves a repeat, but serves a rerun), Pipeline.run_many(epochs=k) reduces as judge_many does,
and a pipeline whose final verdict is pairwise is a pairwise judge. Loopback server and scripted adapters."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd
import pytest

from llm_connect import OpenAICompatibleAdapter, Pipeline, RunConfig, ValidationError, judge_many
from llm_connect.calibration import battle_outcomes
from llm_connect.grading import EPOCH_COLUMNS, reseed, tournament
from llm_connect.pipelines import (
    BooleanScale,
    JudgeUnit,
    Layer,
    MajorityPool,
    MeanPool,
    PairwiseUnit,
    PipelineJudge,
    VerifyUnit,
)
from llm_connect.stats import leaderboard
from llm_connect.testing import LoopbackServer, ScriptedAdapter

JUDGE_PROMPT = "Question: {prompt}\nReference: {baseline}\nAnswer: {candidate}\nIs the answer right?"


def seeded_pipeline(adapter=None) -> Pipeline:
    """Two copies of a seeded judge and an unseeded one, voted on: three calls per item."""
    seeded = JudgeUnit(JUDGE_PROMPT, BooleanScale(), name="seeded", seed=5, temperature=0.7)
    plain = JudgeUnit(JUDGE_PROMPT, BooleanScale(), name="plain")
    return Pipeline(Layer([seeded, seeded, plain]) >> MajorityPool(), adapter=adapter, name="vote")


def items(n: int) -> list[dict]:
    return [{"id": f"i{i}", "prompt": f"question {i}?", "baseline": f"reference {i}", "candidate": f"[c{i}]"}
            for i in range(n)]


def loopback_adapter(server: LoopbackServer, cache) -> OpenAICompatibleAdapter:
    return OpenAICompatibleAdapter("loopback-model", base_url=server.base_url, api_key="sk-loopback", cache=cache,
                                   backoff_initial_s=0.01, backoff_max_s=0.05)


def calls_by_unit(requests) -> Counter:
    """(unit, seed) -> how many requests: the unit told apart by its temperature."""
    return Counter(("seeded" if r.body.get("temperature") == 0.7 else "plain", r.body.get("seed")) for r in requests)


@pytest.mark.parametrize("route", ["judge_many", "run_many"])
def test_k_epochs_of_a_pipeline_make_k_times_the_requests_and_a_rerun_none(tmp_path, route):
    k, n = 3, 4
    with LoopbackServer(reply=lambda prompt: "Verdict: yes") as server:
        def run() -> pd.DataFrame:
            adapter = loopback_adapter(server, tmp_path / "cache")
            try:
                pipeline = seeded_pipeline(adapter)
                if route == "judge_many":
                    return judge_many(pipeline.as_judge(), items(n), progress=False, epochs=k)
                return pipeline.run_many(items(n), progress=False, epochs=k)
            finally:
                adapter.close()

        df = run()
        assert server.stats()["total"] == 3 * n * k  # three units x items x epochs: none served by the cache
        assert calls_by_unit(server.requests) == {
            # seed + epoch * copies + replica: 5, 6 | 7, 8 | 9, 10 -- no two epochs share a seed
            **{("seeded", s): n for s in range(5, 5 + 2 * k)},
            # the unseeded unit takes the run config's seed, moved by the epoch (none in epoch 0)
            ("plain", None): n, **{("plain", e): n for e in range(1, k)},
        }
        assert len({(r.body["messages"][-1]["content"], r.body.get("seed"), r.body.get("temperature"))
                    for r in server.requests}) == 3 * n * k  # every request its own cache key
        assert df["epochs_scored"].tolist() == [k] * n and df["quality_score"].tolist() == [1.0] * n
        assert df["calls"].tolist() == [3 * k] * n
        again = run()
        assert server.stats()["total"] == 3 * n * k  # the rerun: every epoch from the cache
        assert again["epoch_scores"].tolist() == df["epoch_scores"].tolist()
        assert again["judge_cost_usd"].sum() == 0.0


def epoch_reply(prompt: str, rc: RunConfig) -> str:
    """Item i's verdict in epoch e (the seeded unit's seed is 5 + 2e + replica): yes unless e == i % 3."""
    i = int(re.search(r"\[c(\d+)\]", prompt).group(1))
    seed = rc.model_params.get("seed")
    epoch = 0 if seed is None else (seed - 5) // 2 if rc.temperature == 0.7 else seed
    return "Verdict: no" if epoch == i % 3 else "Verdict: yes"


def test_run_many_with_epochs_reduces_as_judge_many_does():
    pipeline = seeded_pipeline(ScriptedAdapter(epoch_reply))
    ran = pipeline.run_many(items(6), progress=False, epochs=3, reducer="mean")
    judged = judge_many(pipeline.as_judge(), items(6), progress=False, epochs=3, reducer="mean")
    assert list(ran.columns[-len(EPOCH_COLUMNS):]) == list(EPOCH_COLUMNS)
    assert ran["epoch_scores"].tolist() == judged["epoch_scores"].tolist()
    assert ran["epoch_scores"].tolist() == [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]] * 2
    assert ran["quality_score"].tolist() == pytest.approx([2 / 3] * 6)
    assert ran.attrs["epochs"] == {"epochs": 3, "reducer": "mean"}
    assert ran.attrs["reliability"] == judged.attrs["reliability"]
    assert ran.attrs["reliability"]["agreement"] == pytest.approx(1 / 3)  # one of three pairs of epochs agrees
    assert ran.attrs["totals"]["items"] == 6 and ran.attrs["totals"]["calls"] == 6 * 3 * 3
    assert ran["calls"].tolist() == [9] * 6
    with_threshold = Pipeline(pipeline.stages, adapter=pipeline.adapter, threshold=0.5)
    passed = with_threshold.run_many(items(3), progress=False, epochs=3, reducer="min")
    assert passed["quality_score"].tolist() == [0.0] * 3 and passed["passed"].tolist() == [False] * 3
    single = pipeline.run_many(items(2), progress=False)
    assert not set(EPOCH_COLUMNS) & set(single.columns) and "epochs" not in single.attrs
    with pytest.raises(ValidationError, match="epochs must be a positive integer"):
        pipeline.run_many(items(2), progress=False, epochs=0)
    with pytest.raises(ValidationError, match="reducer must be one of"):
        pipeline.run_many(items(2), progress=False, epochs=2, reducer="average")


def test_with_seed_offset_is_the_hook_reseed_asks():
    adapter = ScriptedAdapter(lambda p, rc: "Verdict: yes")
    judge = seeded_pipeline(adapter).as_judge("vote")
    assert reseed(judge, 0) is judge
    moved = reseed(judge, 2)
    assert isinstance(moved, PipelineJudge) and moved.seed_offset == 2 and judge.seed_offset == 0
    assert moved.grader_id == "vote" and moved.rubric_hash == judge.rubric_hash and moved.pipeline is judge.pipeline
    assert reseed(moved, 1).seed_offset == 3
    judge_many(moved, items(1), progress=False)
    seeds = sorted(c.run_config.model_params.get("seed", -1) for c in adapter.calls if c.run_config.temperature)
    assert seeds == [9, 10]  # 5 + 2 * 2 + replica
    with pytest.raises(ValidationError, match="seed_offset"):
        PipelineJudge(judge.pipeline, "vote", seed_offset=-1)


MODELS = ["m1", "m2", "m3", "m4"]  # answer quality rises with the number


def answers(n_prompts: int) -> pd.DataFrame:
    return pd.DataFrame([{"prompt_id": f"p{p}", "prompt": f"question {p}?", "model": m,
                          "answer": f"answer by {m} (quality {m[1]})"} for p in range(n_prompts) for m in MODELS])


def better_of_two(prompt: str, rc: RunConfig) -> str:
    a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:", 1)[0]
    b = prompt.split("Answer B:\n", 1)[1]
    qa, qb = (int(re.search(r"quality (\d)", t).group(1)) for t in (a, b))
    return "Verdict: A" if qa > qb else "Verdict: B"


def both_orders() -> Layer:
    return Layer([PairwiseUnit(name="ab"), PairwiseUnit(name="ba", order="candidate-first")])


def test_a_pipeline_with_a_pairwise_final_verdict_runs_a_tournament():
    pipeline = Pipeline(both_orders() >> MajorityPool(), adapter=ScriptedAdapter(better_of_two), name="pair")
    judge = pipeline.as_judge()
    assert judge.pairwise and judge.not_pairwise_reason is None
    df = tournament(judge, answers(3), prompt_id="prompt_id", progress=False)
    assert len(df) == 3 * 6 and df["winner"].notna().all()
    better = ["a" if int(a[1]) > int(b[1]) else "b" for a, b in zip(df["model_a"], df["model_b"], strict=True)]
    assert df["winner"].tolist() == better
    assert set(df["verdict"]) <= {"baseline", "candidate"}
    board = leaderboard(df, n_boot=20, seed=0)
    assert board["model"].tolist() == ["m4", "m3", "m2", "m1"]
    pd.testing.assert_frame_equal(board, leaderboard(battle_outcomes(df), n_boot=20, seed=0), check_like=True)
    # a verified pairwise verdict, and one unit in one order, are pairwise too
    verified = Pipeline(PairwiseUnit(name="ab", explanation=True) >> VerifyUnit(),
                        adapter=ScriptedAdapter(lambda p, rc: "Verdict: yes"))
    assert verified.as_judge().pairwise
    tied = Pipeline(PairwiseUnit(name="ab", allow_tie=True), adapter=ScriptedAdapter(lambda p, rc: "Verdict: tie"))
    ties = tournament(tied.as_judge(), answers(1), progress=False)
    assert ties["winner"].tolist() == ["tie"] * 6


def test_a_pairwise_pipeline_in_epochs_reads_its_verdict_from_the_reduced_score():
    def flaky(prompt: str, rc: RunConfig) -> str:  # right in epochs 0 and 2, wrong in epoch 1
        right = better_of_two(prompt, rc)
        if rc.model_params.get("seed") == 1:
            return "Verdict: B" if right.endswith("A") else "Verdict: A"
        return right

    pipeline = Pipeline(PairwiseUnit(name="ab"), adapter=ScriptedAdapter(flaky), name="one-order")
    df = tournament(pipeline.as_judge(), answers(2), prompt_id="prompt_id", progress=False, epochs=3, reducer="mode")
    better = ["a" if int(a[1]) > int(b[1]) else "b" for a, b in zip(df["model_a"], df["model_b"], strict=True)]
    assert df["winner"].tolist() == better
    assert df["verdict"].tolist() == ["baseline" if w == "a" else "candidate" for w in better]
    assert all(len(s) == 3 for s in df["epoch_scores"])
    assert df.attrs["reliability"]["agreement"] == pytest.approx(1 / 3)


def test_a_pipeline_without_a_pairwise_final_verdict_is_refused_with_the_reason():
    graded = Pipeline(JudgeUnit(JUDGE_PROMPT, BooleanScale(), name="grade"), adapter=ScriptedAdapter(
        lambda p, rc: "Verdict: yes"), name="grader")
    judge = graded.as_judge()
    assert not judge.pairwise and "grade[0]" in judge.not_pairwise_reason
    with pytest.raises(ValidationError, match=r"pipeline 'grader' ends in grade\[0\].*not in a pairwise verdict"):
        tournament(judge, answers(1), progress=False)
    averaged = Pipeline(both_orders() >> MeanPool(), adapter=ScriptedAdapter(better_of_two), name="avg")
    with pytest.raises(ValidationError, match=r"ends in mean\[0\].*MajorityPool of pairwise units"):
        tournament(averaged.as_judge(), answers(1), progress=False)
