"""The model family, label parsing and the observational diagnostics (length effect, length control,
self-preference, reliability)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from llm_connect.calibration import (
    disagreements,
    length_controlled_scores,
    length_effect,
    model_family,
    reliability_table,
    self_preference,
)
from llm_connect.stats import ols
from llm_connect.stats.labels import parse_labels


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o-mini", "gpt"),
        ("claude-3-haiku", "claude"),
        ("llama-3-8b", "llama"),
        ("smollm2-135m-instruct", "smollm"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm"),
        ("openai/gpt-4.1", "gpt"),
        ("o3-mini", "gpt"),
        ("text-davinci-003", "gpt"),
        ("Qwen2.5-7B-Instruct", "qwen"),
        ("mistral-large", "mistral"),
        ("mixtral-8x7b", "mixtral"),
        ("gemini-1.5-pro", "gemini"),
        ("phi-3-mini", "phi"),
        ("sophia-2", "sophia"),
        ("", None),
        (None, None),
        (float("nan"), None),
    ],
)
def test_model_family(name, family):
    assert model_family(name) == family


def test_parse_labels():
    got = parse_labels([True, False, "Yes", "no", " TRUE ", "0", "1", 0.25, 1, None, "", float("nan"), "correct"])
    expected = [1, 0, 1, 0, 1, 0, 1, 0.25, 1, np.nan, np.nan, np.nan, 1]
    np.testing.assert_array_equal(got, np.array(expected, dtype=float))
    with pytest.raises(ValueError, match="'maybe'"):
        parse_labels(["yes", "maybe"], column="verdict")
    with pytest.raises(ValueError, match="verdict"):
        parse_labels([3], column="verdict")


def test_ols_matches_scipy_linregress():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 1.5 + 0.7 * x + rng.normal(0, 0.5, 200)
    fit = ols(y, np.column_stack([np.ones(200), x]), ["intercept", "x"])
    lr = stats.linregress(x, y)
    assert fit["x"]["coef"] == pytest.approx(lr.slope)
    assert fit["x"]["se"] == pytest.approx(lr.stderr)
    assert fit["intercept"]["se"] == pytest.approx(lr.intercept_stderr)
    assert fit["x"]["p_value"] == pytest.approx(lr.pvalue)
    t = stats.t.ppf(0.975, 198)
    assert fit["x"]["low"] == pytest.approx(lr.slope - t * lr.stderr)
    assert fit.r2 == pytest.approx(lr.rvalue**2)
    degenerate = ols([1.0, 2.0], np.ones((2, 2)), ["a", "b"])
    assert np.isnan(degenerate.se).all()


def simulated(n: int = 400, *, length_bias: float, seed: int = 0) -> pd.DataFrame:
    """Correctness drives the human label; the judge adds ``length_bias`` per doubling of length."""
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.5
    words = np.where(correct, rng.integers(2, 60, n), rng.integers(2, 60, n))  # length independent of correctness
    judge = np.clip(0.2 + 0.5 * correct + length_bias * np.log2(words + 1) + rng.normal(0, 0.05, n), 0, 1)
    family = rng.choice(["gpt", "llama"], n)
    return pd.DataFrame({
        "id": range(n),
        "candidate": ["w " * w for w in words],
        "score_llm": judge,
        "score_human": correct.astype(float),
        "candidate_words": words,
        "baseline_words": np.full(n, 3),
        "model_family": family,
    })


def test_length_effect_recovers_the_simulated_bias():
    biased = length_effect(simulated(length_bias=0.05), "llm", control="human")
    assert biased.coef == pytest.approx(0.05, abs=0.01)
    assert biased.low > 0 and biased.p_value < 1e-6
    assert biased.n == 400 and biased.controls == ["human"]
    fair = length_effect(simulated(length_bias=0.0, seed=1), "llm", control="human")
    assert fair.low < 0 < fair.high
    per100 = length_effect(simulated(length_bias=0.05), "llm", control="human", transform="per100")
    assert per100.term == "words / 100" and per100.coef > 0
    assert "OLS" in biased._repr_html_()


def test_length_effect_drops_unscored_rows():
    df = simulated(length_bias=0.05)
    df.loc[:9, "score_llm"] = np.nan
    assert length_effect(df, "llm", control="human").n == 390
    tiny = length_effect(df.iloc[10:12], "llm", control="human")
    assert math.isnan(tiny.low) and tiny.note


def test_length_controlled_score_removes_the_length_gap():
    df = simulated(length_bias=0.05, seed=3)
    # gpt answers are longer than llama's, and no better
    longer = df["model_family"] == "gpt"
    df.loc[longer, "candidate_words"] *= 4
    df["score_llm"] = np.clip(0.2 + 0.5 * df["score_human"] + 0.05 * np.log2(df["candidate_words"] + 1), 0, 1)
    lc = length_controlled_scores(df, "llm", control="human")
    assert lc.coef > 0 and lc.low > 0
    summary = lc.summary.set_index("group")
    raw_gap = summary.loc["gpt", "raw_mean"] - summary.loc["llama", "raw_mean"]
    lc_gap = summary.loc["gpt", "lc_mean"] - summary.loc["llama", "lc_mean"]
    assert raw_gap > 0.05
    assert abs(lc_gap) < raw_gap / 2
    assert "score_llm_lc" in lc.scores.columns and len(lc.scores) == len(df)
    assert "<table" in lc._repr_html_()


def test_self_preference_at_equal_correctness():
    df = simulated(length_bias=0.0, seed=4)
    own = df["model_family"] == "gpt"
    df.loc[own, "score_llm"] = np.clip(df.loc[own, "score_llm"] + 0.1, 0, 1)
    df.attrs["judge_families"] = {"llm": "gpt"}
    sp = self_preference(df, "llm", label="human", n_boot=500)
    assert sp.family == "gpt"
    assert sp.difference == pytest.approx(0.1, abs=0.03)
    assert sp.low > 0
    assert set(sp.strata["stratum"]) == {"correct", "incorrect"}
    none = self_preference(simulated(length_bias=0.0, seed=5), "llm", family="gpt", label="human", n_boot=500)
    assert none.low < 0 < none.high
    unknown = self_preference(df.drop(columns="model_family"), "llm", label="human")
    assert math.isnan(unknown.difference) and "candidate_model" in unknown.note
    df.attrs["judge_families"] = {}
    assert "family" in self_preference(df, "llm", label="human").note


def test_reliability_table_and_disagreements():
    df = pd.DataFrame({"score_llm": [0.05, 0.15, 0.12, 0.95, 0.91, 0.55, np.nan],
                       "score_human": [0, 0, 1, 1, 1, 0, 1]})
    rt = reliability_table(df, "llm", bins=10)
    assert len(rt) == 10 and rt["n"].sum() == 6
    first = rt.iloc[1]
    assert first["n"] == 2 and first["correct_rate"] == 0.5 and first["mean_score"] == pytest.approx(0.135)
    assert rt.iloc[9]["correct_rate"] == 1.0 and rt.iloc[9]["rate_high"] == pytest.approx(1.0)
    assert (rt["rate_low"].dropna() <= rt["correct_rate"].dropna()).all()
    assert rt.iloc[3]["n"] == 0 and math.isnan(rt.iloc[3]["correct_rate"])
    d = disagreements(df.assign(id=range(7), candidate="c"), "llm", "human", top=2)
    assert d["gap"].tolist() == pytest.approx([0.88, 0.55])
    with pytest.raises(ValueError, match="no scores for judge"):
        reliability_table(df, "nope")
