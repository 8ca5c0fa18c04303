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
