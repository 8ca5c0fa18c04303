"""Agreement statistics, checked against scikit-learn, scipy and the krippendorff package."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from llm_connect.calibration import agreement_table, pair_agreement
from llm_connect.stats import STATISTICS, bootstrap_ci, threshold_sweep

# Scores on a grid of 11 values, so the krippendorff package's coincidence matrix stays small.
grid_scores = st.lists(st.integers(0, 10), min_size=2, max_size=60).map(lambda v: np.array(v) / 10)


@st.composite
def score_pairs(draw):
    a = draw(grid_scores)
    b = np.array(draw(st.lists(st.integers(0, 10), min_size=len(a), max_size=len(a)))) / 10
    return a, b


def reference_values(a: np.ndarray, b: np.ndarray, t: float) -> dict[str, float]:
    """The statistics as the libraries compute them (NaN where they are undefined)."""
    va, vb = a >= t, b >= t
    out = {"percent_agreement": float(np.mean(va == vb)), "mean_abs_diff": float(np.mean(np.abs(a - b)))}
    both_one_verdict = len(set(va) | set(vb)) == 1
    out["cohen_kappa"] = math.nan if both_one_verdict else float(cohen_kappa_score(va, vb))
    out["alpha_nominal"] = math.nan if both_one_verdict else float(
        krippendorff.alpha(reliability_data=np.vstack([va, vb]).astype(float), level_of_measurement="nominal"))
    if np.ptp(np.r_[a, b]) == 0:
        out["alpha_interval"] = math.nan
    else:
        out["alpha_interval"] = float(krippendorff.alpha(reliability_data=np.vstack([a, b]),
                                                             level_of_measurement="interval"))
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        out["spearman"] = out["kendall"] = math.nan
    else:
        out["spearman"] = float(stats.spearmanr(a, b).statistic)
        out["kendall"] = float(stats.kendalltau(a, b).statistic)
    return out


@settings(max_examples=80, deadline=None)
@given(score_pairs(), st.sampled_from([0.3, 0.5, 0.75]))
def test_point_estimates_match_the_libraries(pair, t):
    a, b = pair
    got = pair_agreement(a, b, threshold=t, n_boot=0)
    want = reference_values(a, b, t)
    for stat in STATISTICS:
        value = got[stat].value
        if math.isnan(want[stat]):
            assert math.isnan(value), (stat, value)
            assert got[stat].reason, stat
        else:
            assert value == pytest.approx(want[stat], abs=1e-9), stat
    cm = confusion_matrix(a >= t, b >= t, labels=[False, True])
    assert got.confusion.to_numpy().tolist() == cm.tolist()


def test_random_continuous_scores_match_scipy_and_sklearn():
    rng = np.random.default_rng(7)
    a = rng.random(400)
    b = np.clip(a + rng.normal(0, 0.25, 400), 0, 1)
    got = pair_agreement(a, b, n_boot=200)
    assert got["spearman"].value == pytest.approx(stats.spearmanr(a, b).statistic)
    assert got["kendall"].value == pytest.approx(stats.kendalltau(a, b).statistic)
    assert got["cohen_kappa"].value == pytest.approx(cohen_kappa_score(a >= 0.5, b >= 0.5))
    # interval alpha on continuous data: the package on a coarse copy agrees closely with ours on it
    coarse_a, coarse_b = np.round(a, 1), np.round(b, 1)
    want = krippendorff.alpha(reliability_data=np.vstack([coarse_a, coarse_b]), level_of_measurement="interval")
    assert pair_agreement(coarse_a, coarse_b, n_boot=0)["alpha_interval"].value == pytest.approx(want)
    for stat in STATISTICS:
        est = got[stat]
        assert est.low <= est.value <= est.high, stat


def test_bootstrap_is_seeded_and_intervals_shrink_with_n():
    rng = np.random.default_rng(0)
    a = rng.random(600)
    b = np.clip(a + rng.normal(0, 0.3, 600), 0, 1)
    one = pair_agreement(a, b, seed=3, n_boot=300)
    two = pair_agreement(a, b, seed=3, n_boot=300)
    other = pair_agreement(a, b, seed=4, n_boot=300)
    assert one.row() == two.row()
    assert one.row()["kappa_low"] != other.row()["kappa_low"]
    small = pair_agreement(a[:60], b[:60], seed=3, n_boot=300)
    width = lambda p: p["cohen_kappa"].high - p["cohen_kappa"].low  # noqa: E731
    assert width(small) > width(one)


def test_bootstrap_ci_percentiles_cover_the_mean():
    x = np.random.default_rng(1).normal(2.0, 1.0, 500)
    low, high = bootstrap_ci(lambda s: s.mean(axis=1), x, n_boot=2000, seed=0)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert low == pytest.approx(x.mean() - 1.96 * se, abs=0.03)
    assert high == pytest.approx(x.mean() + 1.96 * se, abs=0.03)


def test_missing_scores_are_dropped_pairwise_and_counted():
    a = np.array([1.0, 0.0, np.nan, 1.0, 0.0, 1.0])
    b = np.array([1.0, np.nan, 1.0, 1.0, 0.0, 0.0])
    got = pair_agreement(a, b, n_boot=50)
    assert got.n == 4 and got.n_missing == 2
    assert got["percent_agreement"].value == pytest.approx(0.75)
    assert got["cohen_kappa"].value == pytest.approx(cohen_kappa_score([1, 1, 0, 1], [1, 1, 0, 0]))


@pytest.mark.parametrize(
    ("a", "b", "nan_stats"),
    [
        ([], [], set(STATISTICS)),
        ([0.7], [0.2], set(STATISTICS) - {"percent_agreement", "mean_abs_diff"}),
        ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], {"cohen_kappa", "alpha_interval", "alpha_nominal",
                                             "spearman", "kendall"}),
        ([0.9, 0.8, 0.6], [0.6, 0.7, 0.9], {"cohen_kappa", "alpha_nominal"}),  # all "yes" both
        ([0.2, 0.2, 0.2], [0.1, 0.7, 0.9], {"spearman", "kendall"}),  # one judge constant
        ([np.nan, np.nan], [1.0, 0.0], set(STATISTICS)),
    ],
)
def test_degenerate_inputs_give_nan_with_a_reason(a, b, nan_stats):
    got = pair_agreement(a, b, judge_a="x", judge_b="y", n_boot=100)
    for stat in STATISTICS:
        est = got[stat]
        if stat in nan_stats:
            assert math.isnan(est.value), stat
            assert est.reason, stat
        else:
            assert not math.isnan(est.value), stat
    assert isinstance(got.row()["note"], str)
    assert "<table" in got._repr_html_()


def test_constant_judge_names_the_judge():
    got = pair_agreement([0.2, 0.2, 0.2], [0.1, 0.7, 0.9], judge_a="llm", judge_b="human", n_boot=0)
    assert "llm" in got["spearman"].reason and "human" not in got["spearman"].reason


def test_threshold_sweep_matches_direct_computation():
    rng = np.random.default_rng(2)
    judge = rng.random(200)
    human = (judge + rng.normal(0, 0.3, 200) > 0.5).astype(float)
    sweep = threshold_sweep(judge, human, thresholds=[0.2, 0.5, 0.8])
    assert sweep["threshold"].tolist() == [0.2, 0.5, 0.8]
    for _, row in sweep.iterrows():
        t = row["threshold"]
        assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(judge >= t, human >= 0.5))
        assert row["percent_agreement"] == pytest.approx(np.mean((judge >= t) == (human >= 0.5)))
        assert row["positive_rate"] == pytest.approx(np.mean(judge >= t))
    default = threshold_sweep(judge, human)
    assert len(default) == 19 and default["n"].eq(200).all()
    moving = threshold_sweep(judge, judge, reference_threshold=None)
    assert moving["percent_agreement"].eq(1.0).all()


def test_agreement_table_pairs_matrix_and_ceiling():
    rng = np.random.default_rng(5)
    truth = rng.random(120) > 0.4
    scores = pd.DataFrame({
        "score_llm": np.clip(truth + rng.normal(0, 0.4, 120), 0, 1),
        "score_exact": (truth & (rng.random(120) > 0.3)).astype(float),
        "score_a1": np.where(rng.random(120) > 0.1, truth, ~truth).astype(float),
        "score_a2": np.where(rng.random(120) > 0.1, truth, ~truth).astype(float),
        "other": 1,
    })
    table = agreement_table(scores, annotators=["a1", "a2"], n_boot=100)
    frame = table.frame
    assert len(frame) == 6
    assert frame.loc[frame["ceiling"], ["judge_a", "judge_b"]].values.tolist() == [["a1", "a2"]]
    for col in ("judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa", "kappa_low", "kappa_high",
                "alpha_interval", "spearman"):
        assert col in frame.columns
    m = table.matrix("cohen_kappa")
    assert m.loc["llm", "exact"] == m.loc["exact", "llm"] == table.pair("exact", "llm")["cohen_kappa"].value
    assert math.isnan(m.loc["llm", "llm"])
    assert "ceiling" in table._repr_html_()
    sub = agreement_table({"x": [0, 1, 1], "y": [0, 1, 0]}, n_boot=0, thresholds={"x": 0.9})
    assert sub.pairs[0].threshold == 0.9 and sub.pairs[0].threshold_b == 0.5
    with pytest.raises(ValueError, match="no scores"):
        agreement_table(scores, judges=["llm", "nope"])


@pytest.mark.parametrize("n", [2, 3, 17, 80, 400, 401])
def test_vectorised_kendall_tau_b_matches_scipy_with_ties(n):
    """The bootstrap's Kendall tau-b (vectorised up to 400 items, scipy beyond) equals scipy's on tied data."""
    from scipy.stats import kendalltau

    from llm_connect.stats.agreement import _kendall

    rng = np.random.default_rng(n)
    a = rng.integers(0, 3, size=(30, n)).astype(float)
    b = a + rng.integers(0, 2, size=(30, n))
    a[0] = 1.0  # a constant row: undefined
    got = _kendall(a, b, a >= 1, b >= 1)
    want = np.array([np.nan if np.ptp(x) == 0 or np.ptp(y) == 0 else kendalltau(x, y).statistic
                     for x, y in zip(a, b, strict=True)])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=0, atol=1e-12)
