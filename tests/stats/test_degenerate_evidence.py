"""Intervals from too little evidence are not confidence; fits say when they fail (issue 25).

Each case is reproduced through the public API and checked against an independent reference
(statsmodels' Clopper-Pearson interval, an unpenalised statsmodels GLM, leaderboard()).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from llm_connect import QualityLedger, QualityObservation, estimate_quality, labels_needed, route


def _frame(labels, judge=None, n_unlabelled=40, seed=0):
    rng = np.random.default_rng(seed)
    n = len(labels)
    judge = rng.uniform(0.6, 1.0, n + n_unlabelled) if judge is None else np.asarray(judge, float)
    human = np.concatenate([np.asarray(labels, float), np.full(n_unlabelled, np.nan)])
    return pd.DataFrame({"judge": judge, "human": human})


# -- estimates ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "n"), [(1.0, 2), (1.0, 10), (0.0, 3), (1.0, 60)])
def test_all_equal_binary_labels_get_the_exact_interval(value, n):
    from statsmodels.stats.proportion import proportion_confint

    out = estimate_quality(_frame([value] * n), judge="judge", human="human", methods=("ppi++", "ppi", "human"))
    low, high = proportion_confint(int(value * n), n, alpha=0.05, method="beta")
    for row in out.to_dict("records"):
        assert row["interval"] == "exact: all labels equal"
        assert row["ci_low"] <= low + 1e-12 and row["ci_high"] >= high - 1e-12  # at least the exact interval
    human = out.set_index("method").loc["human"]
    assert human["ci_low"] == pytest.approx(low, abs=1e-12) and human["ci_high"] == pytest.approx(high, abs=1e-12)
    assert human["ci_high"] - human["ci_low"] > 0.04  # never a zero-width "certainty"


def test_two_labels_never_prove_a_quality_of_one():
    out = estimate_quality(_frame([1, 1], judge=np.ones(42)), judge="judge", human="human")
    ppi = out.set_index("method").loc["ppi++"]
    assert ppi["estimate"] == 1.0 and ppi["ci_low"] < 0.2  # Clopper-Pearson: 0.025 ** (1/2) = 0.158


def test_equal_labels_off_the_ends_use_hoeffding_and_stay_in_range():
    out = estimate_quality(_frame([0.7] * 30), judge="judge", human="human", methods=("human",))
    row = out.iloc[0]
    half = math.sqrt(math.log(2 / 0.05) / 60)
    assert row["interval"] == "hoeffding: all labels equal"
    assert row["ci_low"] == pytest.approx(0.7 - half) and row["ci_high"] == pytest.approx(min(1.0, 0.7 + half))


def test_varied_labels_keep_the_normal_interval():
    out = estimate_quality(_frame([1, 0, 1, 1, 0, 1, 1, 1]), judge="judge", human="human")
    assert set(out["interval"]) == {"normal"}


def test_intervals_of_a_quality_stay_in_zero_to_one():
    labels = [1] * 19 + [0]
    out = estimate_quality(_frame(labels, judge=np.full(60, 0.99)), judge="judge", human="human")
    assert (out["ci_low"] >= 0).all() and (out["ci_high"] <= 1).all()
    human = out.set_index("method").loc["human"]
    assert human["ci_high"] == 1.0  # 0.95 + 1.96 * 0.0487 = 1.045 before clipping


def test_labels_needed_sees_equal_labels_through_floating_point():
    """Thirty labels of 0.7 leave a variance of 3.9e-16 in floating point: that is not a variance."""
    y = np.full(30, 0.7)
    assert (y * y).mean() - y.mean() ** 2 > 0  # the residue that made it say "2 labels, achievable"
    plan = labels_needed(_frame(y), judge="judge", human="human", width=0.1)
    assert plan["labels_needed"].isna().all() and not plan["achievable"].any()
    assert plan["reason"].str.contains("all human labels in the pilot are equal").all()


# -- routing -----------------------------------------------------------------------------------------------


def _ledger(tmp_path, n_labels, label=1.0, score=1.0, n_items=40):
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    now = datetime.now(UTC)
    obs = [QualityObservation("qa", "cheap", "m", 0.001, score, 5.0, 10, 2, recorded_at=now,
                              tags={"grader_id": "llm-judge", "item_id": i}) for i in range(n_items)]
    obs += [QualityObservation("qa", "cheap", "m", 0.0, label, 0.0, 0, 0, recorded_at=now,
                               tags={"grader_id": "human", "item_id": i}) for i in range(n_labels)]
    ledger.extend(obs)
    return ledger


def test_route_does_not_meet_a_threshold_on_two_labels(tmp_path):
    decision = route(_ledger(tmp_path, 2), "qa", threshold=0.95, human="human", min_observations=10)
    assert decision.adapter_id is None
    row = decision.evidence.iloc[0]
    assert row["quality_low"] < 0.2 and "lower bound" in row["reason"]


def test_route_meets_a_threshold_when_many_labels_agree(tmp_path):
    decision = route(_ledger(tmp_path, 40, n_items=400), "qa", threshold=0.9, human="human", min_observations=10)
    assert decision.adapter_id == "cheap"  # 40 of 40: Clopper-Pearson lower bound 0.912


# -- leaderboards ------------------------------------------------------------------------------------------


def _battles(seed=0, n=300, unlabelled_model="e"):
    """Five models; 'a' wins every comparison it is in; people never compare ``unlabelled_model``."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        x, y = rng.choice(list("abcde"), 2, replace=False)
        w = ("a" if x == "a" else "b") if "a" in (x, y) else rng.choice(["a", "b"])
        human = w if k % 3 == 0 and unlabelled_model not in (x, y) else None
        rows.append({"model_a": x, "model_b": y, "judge": w, "human": human})
    return pd.DataFrame(rows)


def test_a_model_that_wins_everything_is_flagged_on_every_board():
    from llm_connect import compare_leaderboards, leaderboard

    df = _battles()
    assert leaderboard(df, winner="judge", n_boot=20).attrs["separated"] == ["a"]
    out = compare_leaderboards(df, judge_winner="judge", human_winner="human", n_boot=20)
    anchored = out.anchored.set_index("model")
    assert np.isfinite(anchored["rating"]).all()  # the ridge keeps it finite: no LinAlgError, no 1e7
    assert anchored.loc["a", "note"].startswith("separated") and math.isnan(anchored.loc["a", "rating_low"])
    assert any("won or lost every comparison" in note for note in out.notes)


def test_a_model_no_person_compared_is_judge_only_without_an_interval():
    from llm_connect import compare_leaderboards

    out = compare_leaderboards(_battles(), judge_winner="judge", human_winner="human", n_boot=20)
    anchored = out.anchored.set_index("model")
    assert bool(anchored.loc["e", "judge_only"]) and anchored.loc["e", "note"].startswith("judge-only")
    assert math.isnan(anchored.loc["e", "rating_low"]) and math.isnan(anchored.loc["e", "rating_high"])
    assert (anchored.loc["e", "rank_low"], anchored.loc["e", "rank_high"]) == (1, 5)
    checked = anchored[~anchored["judge_only"] & (anchored["note"] == "")]
    assert (checked["rating_high"] - checked["rating_low"] > 0).all()
    assert any("no person compared e" in note for note in out.notes)


def test_the_anchored_fit_without_separation_is_unchanged_in_substance():
    """Away from separation the ridge (1e-6) moves nothing a user would see."""
    from llm_connect import compare_leaderboards
    from llm_connect.stats.bradley_terry import ppi_bradley_terry

    rng = np.random.default_rng(5)
    strength = {"a": 0.8, "b": 0.2, "c": -0.3, "d": -0.7}
    rows = []
    for k in range(600):
        x, y = rng.choice(list(strength), 2, replace=False)
        w = "a" if rng.random() < 1 / (1 + np.exp(strength[y] - strength[x])) else "b"
        rows.append({"model_a": x, "model_b": y, "judge": w, "human": w if k % 2 == 0 else None})
    out = compare_leaderboards(pd.DataFrame(rows), judge_winner="judge", human_winner="human", n_boot=20)
    assert out.anchored["note"].eq("").all() and not out.anchored["judge_only"].any()
    assert ppi_bradley_terry is not None
    people = out.human.set_index("model")["rating"]
    anchored = out.anchored.set_index("model")["rating"]
    assert (anchored - people.reindex(anchored.index)).abs().max() < 60  # same board, judge and people agree


# -- length-controlled win rate ----------------------------------------------------------------------------


def _separated_lc(n=24, seed=3):
    rng = np.random.default_rng(seed)
    len_b = rng.normal(900, 200, n)
    len_a = len_b + rng.choice([-300.0, 300.0], n) + rng.normal(0, 20, n)
    winner = np.where(len_a > len_b, "a", "b")  # the model wins exactly when it is longer
    return pd.DataFrame({"model": "m", "baseline_model": "base", "winner": winner, "length_a": len_a,
                         "length_b": len_b})


def test_length_control_says_when_the_glm_has_no_fit_and_penalises_it():
    from sklearn.linear_model import LogisticRegression

    from llm_connect import length_controlled_win_rate
    from llm_connect.stats.length_control import SEPARATION_PENALTY

    df = _separated_lc()
    with pytest.warns(RuntimeWarning, match="no maximum-likelihood fit"):
        out = length_controlled_win_rate(df, n_boot=50, seed=0)
    row = out.iloc[0]
    assert row["fit"].startswith("l2 penalty") and "separation" in row["fit"]
    # an independent penalised fit: scikit-learn's L2 logistic regression, C = 1 / penalty, no intercept
    delta = (df["length_a"] - df["length_b"]).to_numpy()
    x = np.column_stack([np.ones(len(df)), np.tanh(delta / delta.std(ddof=1))])
    y = (df["winner"] == "a").to_numpy(int)
    ref = LogisticRegression(C=1 / SEPARATION_PENALTY, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(x, y)
    assert row["length_coef"] == pytest.approx(ref.coef_[0][1], abs=1e-5)
    expected = (1 / (1 + np.exp(-ref.coef_[0][0]))).mean()
    assert row["lc_win_rate"] == pytest.approx(expected, abs=1e-6)
    assert 0.05 < row["lc_win_rate"] < 0.95  # not the 0.000 the unpenalised fit drifted to


def test_length_control_keeps_the_mle_when_it_exists():
    from llm_connect import length_controlled_win_rate

    rng = np.random.default_rng(8)
    df = _separated_lc(n=200)
    flip = rng.random(len(df)) < 0.2
    df.loc[flip, "winner"] = np.where(df.loc[flip, "winner"] == "a", "b", "a")
    out = length_controlled_win_rate(df, n_boot=0)
    assert out.iloc[0]["fit"] == "mle"
