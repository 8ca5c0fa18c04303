"""estimate_quality, labels_needed and plot_estimates.

Checked three ways: against ppi-python (the PPI++ authors' reference code) on the
same data, by simulation (coverage and width over a thousand seeded runs, done in
one grouped call: one group per run), and by inspecting the plot's artists.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure

from llm_connect.errors import ValidationError
from llm_connect.stats.estimates import estimate_quality, labels_needed
from llm_connect.views import plot_estimates

ALL = ("ppi++", "ppi", "human", "judge")


@pytest.fixture(scope="module")
def ppi():
    """ppi-python, imported quietly (it imports numba and statsmodels, and resets warning filters)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ppi_py = pytest.importorskip("ppi_py")
        from ppi_py.baselines import classical_mean_ci
        from ppi_py.ppi import _calc_lam_glm
    return ppi_py, classical_mean_ci, _calc_lam_glm


def _frame(seed: int, groups: int = 4) -> pd.DataFrame:
    """Groups of different sizes; binary labels in some, graded (0..1) labels in others."""
    rng = np.random.default_rng(seed)
    parts = []
    for g in range(groups):
        n, big_n = int(rng.integers(30, 150)), int(rng.integers(0 if g == 3 else 100, 600))
        big_n = max(big_n, 50)
        p = rng.beta(2, 2, n + big_n)
        y = (rng.random(n + big_n) < p).astype(float) if g % 2 == 0 else np.round(p * 4) / 4
        f = np.clip(p + 0.1 * g - 0.1 + rng.normal(0, 0.15, n + big_n), 0, 1)
        human = y.copy()
        human[rng.permutation(n + big_n)[: big_n]] = np.nan  # labelled rows scattered, not first
        parts.append(pd.DataFrame({"task": f"t{g}", "judge": f, "human": human}))
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _row(out: pd.DataFrame, method: str, **keys) -> pd.Series:
    sel = out["method"] == method
    for k, v in keys.items():
        sel &= out[k] == v
    assert sel.sum() == 1
    return out[sel].iloc[0]


# --- (a) agreement with ppi-python ------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_matches_ppi_python(ppi, confidence):
    ppi_py, classical_mean_ci, calc_lam = ppi
    df = _frame(0)
    out = estimate_quality(df, judge="judge", human="human", by="task", methods=ALL, confidence=confidence)
    alpha = 1 - confidence
    for task, g in df.groupby("task"):
        lab = g["human"].notna()
        Y, Yhat, Yu = g.loc[lab, "human"].to_numpy(), g.loc[lab, "judge"].to_numpy(), g.loc[~lab, "judge"].to_numpy()
        pp = _row(out, "ppi++", task=task)
        assert pp["estimate"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(Y, Yhat, Yu)[0]), abs=1e-10)
        low, high = ppi_py.ppi_mean_ci(Y, Yhat, Yu, alpha=alpha)
        assert (pp["ci_low"], pp["ci_high"]) == pytest.approx((low[0], high[0]), abs=1e-10)
        theta1 = ppi_py.ppi_mean_pointestimate(Y, Yhat, Yu, lam=1)
        lam = calc_lam(Y - theta1, Yhat - theta1, Yu - theta1, np.eye(1), clip=True)
        assert pp["lambda"] == pytest.approx(float(lam), abs=1e-10)

        p1 = _row(out, "ppi", task=task)
        low, high = ppi_py.ppi_mean_ci(Y, Yhat, Yu, alpha=alpha, lam=1)
        assert p1["estimate"] == pytest.approx(float(ppi_py.ppi_mean_pointestimate(Y, Yhat, Yu, lam=1)[0]), abs=1e-10)
        assert (p1["ci_low"], p1["ci_high"], p1["lambda"]) == pytest.approx((low[0], high[0], 1.0), abs=1e-10)

        hu = _row(out, "human", task=task)
        low, high = classical_mean_ci(Y, alpha=alpha)
        assert hu["estimate"] == pytest.approx(Y.mean(), abs=1e-12)
        assert (hu["ci_low"], hu["ci_high"]) == pytest.approx((low, high), abs=1e-10)
        assert hu["ess_gain"] == pytest.approx(1.0)
        assert pp["ess_gain"] == pytest.approx((Y.std() / pp["se"]) ** 2 / len(Y), rel=1e-9)

        ju = _row(out, "judge", task=task)
        allf = g["judge"].to_numpy()
        assert ju["estimate"] == pytest.approx(allf.mean(), abs=1e-12)
        assert ju["se"] == pytest.approx(allf.std() / math.sqrt(len(allf)), rel=1e-9)
        assert math.isnan(ju["ess_gain"]) and math.isnan(ju["lambda"])
        assert (pp["n_labelled"], pp["n_total"], pp["n_judge_missing"]) == (lab.sum(), len(g), 0)


def _ipw_reference(f, y, xi, pi, lam):
    """Active inference written per row, straight from Zrnic & Candès (2024)."""
    w = np.where(xi, 1.0 / np.where(xi, pi, 1.0), 0.0)
    yl = np.where(xi, y, 0.0)
    a, b = yl * w, f * (w - 1.0)
    if lam is None:
        cov = np.cov(a, b, bias=True)
        lam = float(np.clip(cov[0, 1] / cov[1, 1], 0, 1))
    z = lam * f + (yl - lam * f) * w
    return z.mean(), z.std() / math.sqrt(len(z)), lam


def test_ipw_matches_a_per_row_reference():
    rng = np.random.default_rng(3)
    m = 3000
    f = rng.random(m)
    y = (rng.random(m) < np.clip(f - 0.1, 0, 1)).astype(float)
    pi = 0.03 + 0.2 * f
    xi = rng.random(m) < pi
    df = pd.DataFrame({"judge": f, "human": np.where(xi, y, np.nan), "pi": np.where(xi, pi, np.nan)})
    out = estimate_quality(df, judge="judge", human="human", weights="pi", methods=ALL)
    z = 1.959963984540054
    for method, lam in (("ppi++", None), ("ppi", 1.0)):
        est, se, lam_used = _ipw_reference(f, y, xi, pi, lam)
        row = _row(out, method)
        assert (row["estimate"], row["se"], row["lambda"]) == pytest.approx((est, se, lam_used), rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((est - z * se, est + z * se), rel=1e-9)
    hajek = _row(out, "human")
    wts = 1 / pi[xi]
    theta = np.sum(wts * y[xi]) / np.sum(wts)
    assert hajek["estimate"] == pytest.approx(theta, rel=1e-12)
    assert hajek["se"] == pytest.approx(math.sqrt(np.sum(wts**2 * (y[xi] - theta) ** 2)) / np.sum(wts), rel=1e-9)
    # weights on unlabelled rows are ignored, whatever they hold
    df.loc[~xi, "pi"] = 7.0
    again = estimate_quality(df, judge="judge", human="human", weights="pi", methods=ALL)
    pd.testing.assert_frame_equal(out, again)


def test_ipw_with_uniform_probabilities_is_close_to_ppi():
    df = _frame(1, groups=1)
    rate = df["human"].notna().mean()
    df["pi"] = rate
    plain = estimate_quality(df, judge="judge", human="human", methods=ALL)
    ipw = estimate_quality(df, judge="judge", human="human", methods=ALL, weights="pi")
    assert _row(ipw, "human")["estimate"] == pytest.approx(_row(plain, "human")["estimate"], rel=1e-12)
    for method in ("ppi++", "ppi", "human"):
        se = _row(plain, method)["se"]
        assert abs(_row(ipw, method)["estimate"] - _row(plain, method)["estimate"]) < 0.3 * se
        assert _row(ipw, method)["se"] == pytest.approx(se, rel=0.1)


# --- (b) validity by simulation: one group per seeded run ---------------------------------------

RUNS = 1000


def _generous(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A judge whose mean score is 0.15 above the people's (it is lenient on wrong answers)."""
    return np.clip(0.54 + 0.36 * y + rng.normal(0, 0.1, y.shape), 0, 1)


def _simulate(kind: str, *, runs: int = RUNS, n: int = 200, big_n: int = 1000, seed: int = 7) -> pd.DataFrame:
    """``runs`` independent data sets of n labelled + N unlabelled items; the true mean quality is 0.6."""
    rng = np.random.default_rng(seed)
    m = n + big_n
    p = rng.beta(3, 2, (runs, m))  # mean 0.6
    y = (rng.random((runs, m)) < p).astype(float)
    if kind == "biased":  # sees right from wrong, but 0.15 too generous on average, and noisy
        f = _generous(y, rng)
    elif kind == "useless":
        f = rng.random((runs, m))
    elif kind == "excellent":
        f = np.clip(y + rng.normal(0, 0.05, (runs, m)), 0, 1)
    else:
        raise AssertionError(kind)
    human = y.copy()
    human[:, n:] = np.nan  # rows are exchangeable, so the first n are a random sample
    return pd.DataFrame({"run": np.repeat(np.arange(runs), m), "judge": f.ravel(), "human": human.ravel()})


@pytest.mark.parametrize("kind", ["biased", "useless", "excellent"])
def test_ppi_plus_plus_covers_and_is_never_much_wider(kind):
    out = estimate_quality(_simulate(kind), judge="judge", human="human", by="run", methods=ALL)
    wide = out.pivot(index="run", columns="method", values=["ci_low", "ci_high"])
    cover = (wide["ci_low"] <= 0.6) & (wide["ci_high"] >= 0.6)
    width = wide["ci_high"] - wide["ci_low"]
    assert len(cover) == RUNS
    assert 0.93 <= cover["ppi++"].mean() <= 0.97, cover.mean()
    assert 0.93 <= cover["ppi"].mean() <= 0.97, cover.mean()
    assert 0.93 <= cover["human"].mean() <= 0.97, cover.mean()
    ratio = width["ppi++"] / width["human"]
    if kind == "useless":
        assert ratio.max() <= 1.05 and ratio.mean() <= 1.01
        assert (width["ppi"] / width["human"]).mean() > 1.1  # plain PPI pays for a useless judge
    else:
        assert ratio.mean() < 0.7
    if kind == "biased":
        assert cover["judge"].mean() < 0.05  # the judge alone is off, and its interval does not know it
        assert (out.loc[out["method"] == "judge", "estimate"].mean() - 0.6) == pytest.approx(0.15, abs=0.01)
    if kind == "excellent":
        assert ratio.mean() < 0.45
        assert out.loc[out["method"] == "ppi++", "ess_gain"].mean() > 4


def test_ipw_covers_under_non_uniform_selection():
    """More labels where the judge scores high: the unweighted estimators are biased, IPW is not."""
    rng = np.random.default_rng(11)
    runs, m = RUNS, 1500
    p = rng.beta(3, 2, (runs, m))
    y = (rng.random((runs, m)) < p).astype(float)
    f = _generous(y, rng)
    pi = 0.02 + 0.2 * f**2  # about 11% labelled, 11 times likelier at the top than at the bottom
    xi = rng.random((runs, m)) < pi
    df = pd.DataFrame({
        "run": np.repeat(np.arange(runs), m), "judge": f.ravel(),
        "human": np.where(xi, y, np.nan).ravel(), "pi": pi.ravel(),
    })
    weighted = estimate_quality(df, judge="judge", human="human", by="run", methods=ALL, weights="pi")
    naive = estimate_quality(df, judge="judge", human="human", by="run", methods=ALL)

    def coverage(out):
        return ((out["ci_low"] <= 0.6) & (out["ci_high"] >= 0.6)).groupby(out["method"]).mean()

    good, bad = coverage(weighted), coverage(naive)
    for method in ("ppi++", "ppi", "human"):
        assert 0.93 <= good[method] <= 0.97, good
        assert bad[method] < 0.75, bad
    width = (weighted["ci_high"] - weighted["ci_low"]).groupby(weighted["method"]).mean()
    assert width["ppi++"] < width["human"]
    assert width["ppi++"] <= width["ppi"] * 1.01


# --- (d) planning the number of labels --------------------------------------------------------


def _population(rng, m):
    p = rng.beta(3, 2, m)
    y = (rng.random(m) < p).astype(float)
    return y, np.clip(p + 0.15 + rng.normal(0, 0.1, m), 0, 1)


def test_labels_needed_reaches_the_target_width():
    rng = np.random.default_rng(5)
    m, pilot, target = 4000, 400, 0.07
    y, f = _population(rng, m)
    df = pd.DataFrame({"judge": f, "human": np.where(np.arange(m) < pilot, y, np.nan)})
    plan = labels_needed(df, judge="judge", human="human", width=target)
    assert list(plan["method"]) == ["ppi++", "human"]
    assert plan["achievable"].all() and plan["reason"].isna().all()
    need = dict(zip(plan["method"], plan["labels_needed"], strict=True))
    assert need["ppi++"] < need["human"]
    assert (plan["more_labels"] == plan["labels_needed"] - pilot).all()
    # label that many of m fresh items, 300 times over, in one grouped call
    runs = 300
    widths = {}
    for method, n in need.items():
        ys, fs = zip(*(_population(rng, m) for _ in range(runs)), strict=True)
        human = np.array(ys)
        human[:, n:] = np.nan
        sim = pd.DataFrame({"run": np.repeat(np.arange(runs), m), "judge": np.ravel(fs), "human": human.ravel()})
        out = estimate_quality(sim, judge="judge", human="human", by="run", methods=(method,))
        widths[method] = (out["ci_high"] - out["ci_low"]).mean()
    assert widths["ppi++"] == pytest.approx(target, rel=0.06)
    assert widths["human"] == pytest.approx(target, rel=0.06)


def test_labels_needed_agrees_with_ppi_python_power_analysis(ppi):
    ppi_py = ppi[0]
    rng = np.random.default_rng(8)
    m, pilot = 20000, 2000
    y, f = _population(rng, m)
    df = pd.DataFrame({"judge": f, "human": np.where(np.arange(m) < pilot, y, np.nan)})
    target = 0.03
    plan = labels_needed(df, judge="judge", human="human", width=target)
    n_human = _row(plan, "human")["labels_needed"]
    assert n_human == math.ceil(y[:pilot].var() / (target / (2 * 1.959963984540054)) ** 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ppi_py.ppi_mean_power(y[:pilot], f[:pilot], cost_Y=1.0, cost_Yhat=1e-9, effective_n=n_human, n_max=m)
    # the same closed form n = n0 M (1 - ρ²) / (M - ρ² n0); ρ differs in how var(f) is estimated
    assert _row(plan, "ppi++")["labels_needed"] == pytest.approx(ref["n"], rel=0.03)


def test_labels_needed_pool_assumptions_and_limits():
    rng = np.random.default_rng(6)
    m = 1000
    y, f = _population(rng, m)
    df = pd.DataFrame({"judge": f, "human": np.where(np.arange(m) < 100, y, np.nan)})
    widths = [0.2, 0.1, 0.03]
    data = labels_needed(df, judge="judge", human="human", width=widths)
    infinite = labels_needed(df, judge="judge", human="human", width=widths, pool="infinite")
    assert list(data["width"]) == [0.2, 0.2, 0.1, 0.1, 0.03, 0.03]
    assert (infinite["labels_needed"] <= data["labels_needed"]).all()
    assert infinite["achievable"].all()
    # narrower than labelling every item can give: not achievable, and told why
    narrow = data[data["width"] == 0.03].set_index("method")
    assert not narrow["achievable"].any()
    assert narrow.loc["human", "labels_needed"] > m
    assert "more labels than the 1000 judged items" in narrow.loc["ppi++", "reason"]
    # the labels needed shrink as the width grows
    per_method = data.pivot(index="width", columns="method", values="labels_needed")
    assert per_method["ppi++"].is_monotonic_decreasing and per_method["human"].is_monotonic_decreasing


def test_labels_needed_without_a_usable_pilot():
    df = pd.DataFrame({
        "task": ["a"] * 4 + ["b"] * 4 + ["c"] * 4,
        "judge": [0.1, 0.5, 0.9, 0.3] * 3,
        "human": [np.nan] * 4 + [1, np.nan, np.nan, np.nan] + [1, 1, 1, np.nan],
    })
    plan = labels_needed(df, judge="judge", human="human", width=0.1, by="task").set_index(["task", "method"])
    assert plan["labels_needed"].isna().all() and not plan["achievable"].any()
    assert "no human labels" in plan.loc[("a", "ppi++"), "reason"]
    assert "only 1" in plan.loc[("b", "human"), "reason"]
    assert "all human labels in the pilot are equal" in plan.loc[("c", "human"), "reason"]
    with pytest.raises(ValidationError, match="width must be a positive number"):
        labels_needed(df, judge="judge", human="human", width=0)
    with pytest.raises(ValidationError, match="pool must be"):
        labels_needed(df, judge="judge", human="human", width=0.1, pool="huge")


# --- (e) edge cases ---------------------------------------------------------------------------


def test_group_without_labels_or_with_one_gets_nan_and_a_reason():
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"task": np.repeat(["none", "one", "ok"], 50), "judge": rng.random(150)})
    df["human"] = np.nan
    df.loc[df["task"] == "one", "human"] = [1.0] + [np.nan] * 49
    df.loc[df["task"] == "ok", "human"] = (rng.random(50) < 0.5).astype(float)
    df.loc[df.index[-10:], "human"] = np.nan  # the "ok" group has 40 labelled, 10 unlabelled
    out = estimate_quality(df, judge="judge", human="human", by="task", methods=ALL).set_index(["task", "method"])
    for task, words in (("none", "no human labels in this group; label at least ~30 items"), ("one", "only 1")):
        for method in ("ppi++", "ppi", "human"):
            row = out.loc[(task, method)]
            assert math.isnan(row["estimate"]) and math.isnan(row["ci_low"]) and math.isnan(row["lambda"])
            assert words in row["reason"]
        judge = out.loc[(task, "judge")]
        assert judge["estimate"] == pytest.approx(df.loc[df["task"] == task, "judge"].mean())
        assert judge["reason"] is None
    assert out.loc[("ok", "ppi++"), "reason"] is None
    assert out.loc[("none", "judge"), "n_labelled"] == 0 and out.loc[("one", "ppi++"), "n_labelled"] == 1


def test_all_rows_labelled():
    rng = np.random.default_rng(4)
    y = (rng.random(60) < 0.7).astype(float)
    df = pd.DataFrame({"judge": np.clip(y + rng.normal(0, 0.2, 60), 0, 1), "human": y})
    out = estimate_quality(df, judge="judge", human="human", methods=ALL).set_index("method")
    assert out.loc["ppi++", "lambda"] == 0.0
    assert out.loc["ppi++", ["estimate", "ci_low", "ci_high"]].tolist() == pytest.approx(
        out.loc["human", ["estimate", "ci_low", "ci_high"]].tolist())
    assert math.isnan(out.loc["ppi", "estimate"]) and "no unlabelled rows" in out.loc["ppi", "reason"]


def test_missing_judge_scores_are_counted_and_excluded_not_zero():
    df = _frame(9, groups=2)
    rng = np.random.default_rng(9)
    gone = rng.random(len(df)) < 0.1
    holes = df.copy()
    holes.loc[gone, "judge"] = np.nan
    out = estimate_quality(holes, judge="judge", human="human", by="task", methods=ALL)
    dropped = estimate_quality(df[~gone], judge="judge", human="human", by="task", methods=ALL)
    cols = ["task", "method", "estimate", "ci_low", "ci_high", "lambda", "n_labelled", "n_total"]
    pd.testing.assert_frame_equal(out[cols], dropped[cols])
    per_task = pd.Series(gone).groupby(df["task"]).sum()
    assert (out.groupby("task")["n_judge_missing"].first() == per_task).all()
    as_zero = estimate_quality(holes.fillna({"judge": 0.0}), judge="judge", human="human", by="task")
    assert not np.allclose(as_zero["estimate"], out.loc[out["method"].isin(["ppi++", "human", "judge"]), "estimate"])
    # a labelled group whose judge never answered
    lost = pd.DataFrame({"judge": [np.nan] * 5 + [0.5] * 5, "human": [1.0, 0, 1, 1, 0] + [np.nan] * 5})
    row = _row(estimate_quality(lost, judge="judge", human="human"), "ppi++")
    assert "none of the 5 human-labelled row(s)" in row["reason"] and row["n_judge_missing"] == 5


def test_booleans_and_nullable_columns_equal_floats():
    df = _frame(12, groups=1)
    as_float = estimate_quality(df, judge="judge", human="human", methods=ALL)
    binary = df.assign(human=(df["human"] > 0.5).where(df["human"].notna()))
    as_bool = binary.assign(human=binary["human"].astype("boolean"))  # True/False/<NA>
    as_object = binary.assign(human=binary["human"].astype(object).where(binary["human"].notna(), None))
    ref = estimate_quality(binary.assign(human=binary["human"].astype(float)), judge="judge", human="human")
    as_category = binary.assign(human=binary["human"].astype(float).astype("category"))
    for frame in (as_bool, as_object, as_category):
        pd.testing.assert_frame_equal(estimate_quality(frame, judge="judge", human="human"), ref)
    verdicts = df.assign(judge=df["judge"] > 0.5)  # a boolean judge (e.g. exact match)
    out = estimate_quality(verdicts, judge="judge", human="human", methods=ALL)
    assert _row(out, "judge")["estimate"] == pytest.approx((df["judge"] > 0.5).mean())
    assert _row(as_float, "human")["estimate"] == pytest.approx(df["human"].mean())


def test_by_several_columns_keeps_keys_types_and_order():
    df = _frame(13, groups=3)
    rng = np.random.default_rng(13)
    df["model"] = pd.Categorical(rng.choice(["small", "large"], len(df)), categories=["small", "large"])
    df.loc[df.index[:40], "task"] = None  # rows with a missing key are a group of their own
    out = estimate_quality(df, judge="judge", human="human", by=["task", "model"])
    assert list(out.columns[:3]) == ["task", "model", "method"]
    assert isinstance(out["model"].dtype, pd.CategoricalDtype)
    keys = out[["task", "model"]].drop_duplicates()
    assert len(keys) == len(df.groupby(["task", "model"], dropna=False, observed=True))
    assert keys["task"].isna().sum() == 2 and keys["task"].iloc[-2:].isna().all()  # missing keys sort last
    assert list(keys["model"].iloc[:2]) == ["small", "large"]  # categories in their own order
    for (task, model), part in df.groupby(["task", "model"], observed=True):
        alone = estimate_quality(part, judge="judge", human="human")
        mine = out[(out["task"] == task) & (out["model"] == model)]
        np.testing.assert_allclose(mine["estimate"].to_numpy(), alone["estimate"].to_numpy(), rtol=1e-12)
    assert out.groupby("method")["n_total"].sum().eq(len(df)).all()


def test_empty_inputs():
    empty = pd.DataFrame({"task": pd.Series([], dtype=str), "judge": [], "human": []})
    out = estimate_quality(empty, judge="judge", human="human", by="task")
    assert out.empty and "estimate" in out.columns
    whole = estimate_quality(empty, judge="judge", human="human")
    assert whole["estimate"].isna().all() and whole["reason"].notna().all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"judge": "nope"}, r"no column for judge='nope'"),
        ({"by": ["task", "missing"]}, r"by\[1\]='missing'"),
        ({"methods": ("ppi++", "bayes")}, r"unknown method 'bayes'; choose from"),
        ({"methods": ()}, "methods is empty"),
        ({"confidence": 95}, r"strictly between 0 and 1.*did you mean 0.95"),
        ({"confidence": 1.0}, "strictly between 0 and 1"),
        ({"confidence": True}, "a number between 0 and 1"),
        ({"human": "judge"}, "the same column"),
        ({"weights": "nope"}, "no column for weights='nope'"),
    ],
)
def test_bad_arguments_say_what_to_do(kwargs, message):
    df = _frame(14, groups=2)
    args = {"judge": "judge", "human": "human", "by": "task", **kwargs}
    with pytest.raises(ValidationError, match=message):
        estimate_quality(df, **args)


def test_bad_values_say_what_to_do():
    df = _frame(15, groups=1)
    with pytest.raises(ValidationError, match=r"scores in 0..1 .* e.g. 4.0 at row 3. Rescale"):
        estimate_quality(df.assign(judge=df["judge"].where(df.index != 3, 4.0)), judge="judge", human="human")
    with pytest.raises(ValidationError, match=r"the human column .human. must hold scores in 0..1"):
        estimate_quality(df.assign(human=df["human"] * 5), judge="judge", human="human")
    with pytest.raises(ValidationError, match=r"must hold numbers .* pd.to_numeric"):
        estimate_quality(df.assign(judge="good"), judge="judge", human="human")
    with pytest.raises(ValidationError, match="must be a pandas DataFrame"):
        estimate_quality(df.to_dict("list"), judge="judge", human="human")
    labelled = df["human"].notna()
    for bad in (0.0, 1.5, np.nan, -0.2):
        pi = pd.Series(0.3, index=df.index).where(~labelled | (df.index != labelled.idxmax()), bad)
        with pytest.raises(ValidationError, match=r"probability \(0 < p <= 1\).*pass their reciprocal"):
            estimate_quality(df.assign(pi=pi), judge="judge", human="human", weights="pi")
    assert isinstance(ValidationError("x"), ValueError)


def test_module_is_light_to_import():
    code = ("import sys, llm_connect.stats.estimates;"
            "print(sorted(m for m in ('matplotlib', 'scipy', 'ppi_py') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- (e) the plot -----------------------------------------------------------------------------


def _segments(ax) -> dict[str, int]:
    """Intervals drawn per legend label (one error-bar segment per interval)."""
    out = {}
    for container in ax.containers:
        _, _, bars = container.lines
        out[container.get_label()] = len(bars[0].get_segments())
    return out


def test_plot_draws_one_interval_per_group_and_method():
    df = _frame(16, groups=3)
    df.loc[df["task"] == "t2", "human"] = np.nan  # no labels: its label-based rows are NaN and not drawn
    out = estimate_quality(df, judge="judge", human="human", by="task", methods=ALL)
    before = dict(matplotlib.rcParams)
    ax = Figure().add_subplot()
    assert plot_estimates(out, ax=ax) is ax
    assert _segments(ax) == {"judge only (ignores its bias)": 3, "human labels only": 2, "PPI": 2, "PPI++": 2}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["t0", "t1", "t2"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "judge only (ignores its bias)", "human labels only", "PPI", "PPI++"]
    assert ax.get_title() == "95% intervals"
    # the interval drawn is the one in the frame
    row = _row(out, "ppi++", task="t0")
    container = next(c for c in ax.containers if c.get_label() == "PPI++")
    (x0, _), (x1, _) = container.lines[2][0].get_segments()[0]
    assert (x0, x1) == pytest.approx((row["ci_low"], row["ci_high"]))
    assert dict(matplotlib.rcParams) == before


def test_plot_with_several_keys_and_no_groups():
    df = _frame(17, groups=2)
    df["model"] = np.where(np.arange(len(df)) % 2, "m1", "m2")
    out = estimate_quality(df, judge="judge", human="human", by=["task", "model"], methods=("ppi++", "human"))
    ax = Figure().add_subplot()
    plot_estimates(out, ax=ax, elinewidth=2)
    assert _segments(ax) == {"human labels only": 4, "PPI++": 4}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["t0 · m1", "t0 · m2", "t1 · m1", "t1 · m2"]
    ax = Figure().add_subplot()
    plot_estimates(estimate_quality(df, judge="judge", human="human"), ax=ax)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["all"]
    with pytest.raises(ValidationError, match="estimate_quality"):
        plot_estimates(None, ax=ax)
    with pytest.raises(ValidationError, match="lacks column"):
        plot_estimates(df, ax=ax)


# --- (g) rows without a judge score as a stratum (a selective judge's abstentions) -----------------------


def _selective(runs: int, seed: int, m: int = 300, spot: int = 40, share_a: float = 0.5) -> pd.DataFrame:
    """``runs`` samples of ``m`` items of true mean quality 0.5 (p ~ Beta(2, 2), Y ~ Bernoulli(p)). A generous
    judge (0.1 too high, noisy) scores only the items it is sure are good (its score above 0.6) and abstains on
    the rest; people label ``spot`` judged items at random and each abstained item with probability ``share_a``."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, (runs, m))
    y = (rng.random((runs, m)) < p).astype(float)
    f = np.clip(p + 0.1 + rng.normal(0, 0.1, (runs, m)), 0, 1)
    judged = f > 0.6
    rank = np.where(judged, rng.random((runs, m)), np.inf).argsort(axis=1).argsort(axis=1)
    labelled = np.where(judged, rank < spot, rng.random((runs, m)) < share_a)
    return pd.DataFrame({"run": np.repeat(np.arange(runs), m), "judge": np.where(judged, f, np.nan).ravel(),
                         "human": np.where(labelled, y, np.nan).ravel()})


def test_stratified_estimate_covers_the_people_quality_where_the_judged_rows_alone_miss():
    data = _selective(RUNS, seed=21)
    methods = ("ppi++", "ppi", "human")
    strat = estimate_quality(data, judge="judge", human="human", by="run", methods=methods, judge_missing="stratify")
    plain = estimate_quality(data, judge="judge", human="human", by="run", methods=methods)
    for out, lo, hi in ((strat, 0.93, 0.97), (plain, 0.0, 0.4)):  # the judged rows alone: covered 3 times in 10
        wide = out.pivot(index="run", columns="method", values=["ci_low", "ci_high"])
        cover = (wide["ci_low"] <= 0.5) & (wide["ci_high"] >= 0.5)
        for method in methods:
            assert lo <= cover[method].mean() <= hi, (method, cover[method].mean())
    assert (strat["interval"] == "stratified").all() and strat["reason"].isna().all()
    pp = strat[strat["method"] == "ppi++"]
    assert abs(pp["estimate"].mean() - 0.5) < 0.005  # unbiased; the judged rows alone say about 0.7
    assert plain.loc[plain["method"] == "ppi++", "estimate"].mean() > 0.65
    # the judge still earns its keep on the stratum it scored: PPI++ narrower than people's labels alone
    width = strat.pivot(index="run", columns="method", values="ci_high") - strat.pivot(
        index="run", columns="method", values="ci_low")
    assert (width["ppi++"] / width["human"]).mean() < 1.0


def test_stratified_figures_are_ppi_python_s_per_stratum_combined_by_shares(ppi):
    ppi_py, classical_mean_ci, _ = ppi
    data = _selective(1, seed=5, m=400, spot=50, share_a=0.4)
    out = estimate_quality(data, judge="judge", human="human", methods=ALL, judge_missing="stratify",
                           confidence=0.9)
    z = 1.6448536269514722
    judged, lab = data["judge"].notna(), data["human"].notna()
    y, yhat, yu = (data.loc[judged & lab, "human"].to_numpy(), data.loc[judged & lab, "judge"].to_numpy(),
                   data.loc[judged & ~lab, "judge"].to_numpy())
    ya = data.loc[~judged & lab, "human"].to_numpy()
    w_j, w_a, m = judged.mean(), 1 - judged.mean(), len(data)
    for method in ("ppi++", "ppi", "human"):
        if method == "human":
            est_j, (low, high) = y.mean(), classical_mean_ci(y, alpha=0.1)
        else:
            lam = None if method == "ppi++" else 1
            est_j = float(ppi_py.ppi_mean_pointestimate(y, yhat, yu, lam=lam)[0])
            low, high = (float(v[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yu, alpha=0.1, lam=lam))
        se_j = (high - low) / (2 * z)
        low_a, high_a = classical_mean_ci(ya, alpha=0.1)
        se_a = (high_a - low_a) / (2 * z)
        est = w_j * est_j + w_a * ya.mean()
        se = math.sqrt(w_j**2 * se_j**2 + w_a**2 * se_a**2 + w_j * w_a * (est_j - ya.mean()) ** 2 / m)
        row = _row(out, method)
        assert (row["estimate"], row["se"]) == pytest.approx((est, se), rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((est - z * se, est + z * se), rel=1e-9)
        assert (row["n_labelled"], row["n_total"], row["n_judge_missing"]) == (lab.sum(), m, (~judged).sum())
    judge_row = _row(out, "judge")  # the judge's naive mean is over the rows it scored, as always
    assert judge_row["estimate"] == pytest.approx(data["judge"].mean()) and judge_row["interval"] == "normal"


def test_stratify_refuses_a_stratum_without_labels_and_changes_nothing_without_missing_scores():
    rng = np.random.default_rng(8)
    f = rng.random(60)
    y = (rng.random(60) < f).astype(float)
    human = np.where(np.arange(60) < 30, y, np.nan)
    cases = {
        "complete": (f, human),  # every row has a judge score: the usual estimate
        "no labels judged": (np.where(np.arange(60) < 30, np.nan, f), np.where(np.arange(60) < 20, y, np.nan)),
        "no labels missing": (np.where(np.arange(60) >= 50, np.nan, f), human),
        "only missing": (np.full(60, np.nan), human),
    }
    df = pd.concat([pd.DataFrame({"case": k, "judge": a, "human": b}) for k, (a, b) in cases.items()])
    out = estimate_quality(df, judge="judge", human="human", by="case", methods=ALL, judge_missing="stratify")
    out = out.set_index(["case", "method"])
    plain = estimate_quality(df[df["case"] == "complete"], judge="judge", human="human", methods=ALL)
    pd.testing.assert_frame_equal(out.loc["complete"].reset_index(drop=True).drop(columns="case", errors="ignore"),
                                  plain.drop(columns="method").reset_index(drop=True), check_dtype=False)
    for method in ("ppi++", "human"):
        row = out.loc[("no labels judged", method)]
        assert math.isnan(row["estimate"]) and "judged stratum has no human labels" in row["reason"]
        assert "random sample of the judged rows" in row["reason"]
        row = out.loc[("no labels missing", method)]
        assert math.isnan(row["estimate"]) and "10 row(s) without a judge score" in row["reason"]
        row = out.loc[("only missing", method)]  # nothing judged: people's labels are the estimate
        assert row["estimate"] == pytest.approx(y[:30].mean()) and row["reason"] is None
    with pytest.raises(ValidationError, match="judge_missing"):
        estimate_quality(df, judge="judge", human="human", judge_missing="drop")
    with pytest.raises(ValidationError, match="weights"):
        estimate_quality(df.assign(p=0.5), judge="judge", human="human", weights="p", judge_missing="stratify")


def test_a_stratum_of_equal_labels_is_not_certainty():
    """Three abstained items, all labelled 0: their variance is 0, but three labels are no proof of a quality of 0;
    the stratum's standard error covers the exact (Clopper-Pearson) interval of 0 of 3."""
    rng = np.random.default_rng(4)
    f = rng.random(100)
    y = (rng.random(100) < f).astype(float)
    judge = np.concatenate([f, [np.nan] * 3])
    human = np.concatenate([np.where(np.arange(100) < 50, y, np.nan), [0.0] * 3])
    df = pd.DataFrame({"judge": judge, "human": human})
    row = _row(estimate_quality(df, judge="judge", human="human", judge_missing="stratify"), "human")
    w_a, z = 3 / 103, 1.959963984540054
    se_a = (1 - 0.025 ** (1 / 3)) / z  # the upper end of the exact interval, as a standard error
    assert row["se"] ** 2 >= (w_a * se_a) ** 2
    no_floor = math.sqrt((1 - w_a) ** 2 * np.var(y[:50]) / 50 + (1 - w_a) * w_a * y[:50].mean() ** 2 / 103)
    assert row["se"] > no_floor * 1.01
