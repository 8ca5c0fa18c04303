"""Intervals on correlated rows: the turns of one conversation (``cluster=``, ``"auto"``: ``conversation_id``).

Checked three ways: against statsmodels' cluster-robust standard error of a mean and against a per-cluster
reference written out by hand; by seeded simulation (80 conversations of 6 turns with a strong conversation
effect, 25 of them labelled: the clustered intervals cover about 95% of the time, those that treat the turns as
independent clearly less); and by what the results say (the column clustered by, the number of clusters, a
reason when there are too few).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from llm_connect.calibration import agreement_table, calibrate, card_from_scores, pair_agreement
from llm_connect.errors import ValidationError
from llm_connect.grading import ExactMatchJudge
from llm_connect.stats.agreement import _percent_agreement, bootstrap_ci, choose_threshold
from llm_connect.stats.clusters import MIN_CLUSTERS, cluster_column, cluster_mean_se
from llm_connect.stats.estimates import estimate_quality, labels_needed

RUNS = 300
CONVERSATIONS, TURNS, LABELLED = 80, 6, 25


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _truth(seed: int = 99) -> float:
    """The population mean quality of the simulation below (a large Monte Carlo sample of it)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 1.5, 4_000_000)
    return float(_logistic(0.4 + u + rng.normal(0, 0.5, u.shape)).mean())


TRUTH = _truth()


def conversations(runs: int = RUNS, *, seed: int = 3, labelled: int = LABELLED, judge_noise: float = 0.25,
                  conversations: int = CONVERSATIONS, turns: int = TURNS) -> pd.DataFrame:
    """``runs`` data sets (``run``) of ``conversations`` x ``turns`` turns; a strong conversation effect (some
    conversations go well, others badly) sets each turn's chance of a good answer; people labelled every turn of
    ``labelled`` conversations drawn at random; the judge sees the chance through noise."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 1.5, (runs, conversations, 1))
    p = _logistic(0.4 + u + rng.normal(0, 0.5, (runs, conversations, turns)))
    y = (rng.random(p.shape) < p).astype(float)
    f = np.clip(0.1 + 0.7 * p + rng.normal(0, judge_noise, p.shape), 0, 1)
    chosen = np.argsort(rng.random((runs, conversations)), axis=1)[:, :labelled]
    lab = np.zeros((runs, conversations), dtype=bool)
    np.put_along_axis(lab, chosen, True, axis=1)
    human = np.where(lab[:, :, None], y, np.nan)
    return pd.DataFrame({
        "run": np.repeat(np.arange(runs), conversations * turns),
        "conversation_id": np.tile(np.repeat([f"c{i}" for i in range(conversations)], turns), runs),
        "turn": np.tile(np.arange(turns), runs * conversations),
        "judge": f.ravel(), "human": human.ravel(), "truth": y.ravel(),
    })


def _coverage(out: pd.DataFrame, truth: float) -> pd.Series:
    return ((out["ci_low"] <= truth) & (out["ci_high"] >= truth)).groupby(out["method"]).mean()


# --- (a) the variance: against statsmodels and a reference by hand -------------------------------


@pytest.fixture(scope="module")
def sm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip("statsmodels.api")


def test_the_cluster_robust_se_of_a_mean_is_statsmodels(sm):
    one = conversations(1, seed=5)
    lab = one.dropna(subset=["human"])
    for values, groups in ((lab["human"], lab["conversation_id"]), (one["judge"], one["conversation_id"])):
        fit = sm.OLS(values.to_numpy(), np.ones(len(values))).fit(cov_type="cluster",
                                                                  cov_kwds={"groups": pd.factorize(groups)[0]})
        se, g = cluster_mean_se(values, groups)
        assert se == pytest.approx(float(fit.bse[0]), rel=1e-10) and g == groups.nunique()
    out = estimate_quality(one, judge="judge", human="human", methods=("human", "judge")).set_index("method")
    for method, values in (("human", lab), ("judge", one)):
        column = "human" if method == "human" else "judge"
        fit = sm.OLS(values[column].to_numpy(), np.ones(len(values))).fit(
            cov_type="cluster", cov_kwds={"groups": pd.factorize(values["conversation_id"])[0]})
        assert out.loc[method, "se"] == pytest.approx(float(fit.bse[0]), rel=1e-10)
        assert out.loc[method, "interval"] == "cluster-robust"
    assert out.loc["human", "n_clusters"] == LABELLED and out.loc["judge", "n_clusters"] == CONVERSATIONS
    assert (out["cluster"] == "conversation_id").all() and out.attrs["cluster"] == "conversation_id"
    # the interval uses t(G - 1): Cameron & Miller's advice for a cluster-robust interval
    from scipy import stats

    t = stats.t.ppf(0.975, LABELLED - 1)
    row = out.loc["human"]
    assert row["ci_high"] - row["estimate"] == pytest.approx(t * row["se"])


def _ppi_reference(g: pd.DataFrame) -> tuple[float, float, float]:
    """PPI++ with cluster-robust variance, written out per conversation (no vectorisation): (estimate, se, λ)."""
    lab = g[g["human"].notna()]
    unl = g[g["human"].isna()]
    n, big_n = len(lab), len(unl)
    ybar, fl, fu = lab["human"].mean(), lab["judge"].mean(), unl["judge"].mean()
    a, bl, bu = {}, {}, {}
    for c, rows in lab.groupby("conversation_id"):
        a[c] = ((rows["human"] - ybar) / n).sum()
        bl[c] = ((rows["judge"] - fl) / n).sum()
    for c, rows in unl.groupby("conversation_id"):
        bu[c] = ((rows["judge"] - fu) / big_n).sum()
    g_l, g_u = len(a), len(bu)
    kl, ku = math.sqrt(g_l / (g_l - 1)), math.sqrt(g_u / (g_u - 1))
    keys = set(a) | set(bu)
    av = {c: kl * a.get(c, 0.0) for c in keys}
    bv = {c: kl * bl.get(c, 0.0) - ku * bu.get(c, 0.0) for c in keys}
    lam = sum(av[c] * bv[c] for c in keys) / sum(bv[c] ** 2 for c in keys)
    lam = min(max(lam, 0.0), 1.0)
    est = ybar + lam * (fu - fl)
    var = sum((av[c] - lam * bv[c]) ** 2 for c in keys)
    return est, math.sqrt(var), lam


def test_clustered_ppi_plus_plus_is_the_per_conversation_reference():
    df = conversations(3, seed=8)
    # one conversation straddles: some of its turns labelled, the others not
    first = (df["run"] == 0) & (df["conversation_id"] == "c0")
    df.loc[first & (df["turn"] >= 3), "human"] = np.nan
    df.loc[first & (df["turn"] < 3), "human"] = df.loc[first & (df["turn"] < 3), "truth"]
    out = estimate_quality(df, judge="judge", human="human", by="run", methods=("ppi++",))
    for run, g in df.groupby("run"):
        est, se, lam = _ppi_reference(g)
        row = out[out["run"] == run].iloc[0]
        assert (row["estimate"], row["se"], row["lambda"]) == pytest.approx((est, se, lam), rel=1e-9)


def test_one_turn_per_conversation_is_independent_rows_with_the_cr1_factor():
    """Every cluster one row: the same estimates (the same λ), each variance part times G/(G - 1)."""
    rng = np.random.default_rng(2)
    m = 400
    y = (rng.random(m) < 0.6).astype(float)
    f = np.clip(0.2 + 0.6 * y + rng.normal(0, 0.2, m), 0, 1)
    human = np.where(np.arange(m) < 120, y, np.nan)
    df = pd.DataFrame({"judge": f, "human": human, "pi": 0.3, "conversation_id": np.arange(m)})
    for weights in (None, "pi"):
        plain = estimate_quality(df, judge="judge", human="human", methods=("human", "judge"), weights=weights,
                                 cluster=None).set_index("method")
        clustered = estimate_quality(df, judge="judge", human="human", methods=("human", "judge"),
                                     weights=weights).set_index("method")
        factor = {"human": 120 / 119, "judge": m / (m - 1)}
        for method in ("human", "judge"):
            assert clustered.loc[method, "estimate"] == pytest.approx(plain.loc[method, "estimate"])
            assert clustered.loc[method, "se"] == pytest.approx(plain.loc[method, "se"] * math.sqrt(factor[method]))
    plain = estimate_quality(df, judge="judge", human="human", methods="ppi++", weights="pi", cluster=None)
    clustered = estimate_quality(df, judge="judge", human="human", methods="ppi++", weights="pi")
    assert clustered["lambda"].iloc[0] == pytest.approx(plain["lambda"].iloc[0])
    assert clustered["se"].iloc[0] == pytest.approx(plain["se"].iloc[0] * math.sqrt(m / (m - 1)))


# --- (b) coverage by simulation ---------------------------------------------------------------------


def test_clustered_intervals_cover_and_those_of_independent_turns_do_not():
    df = conversations()
    methods = ("ppi++", "ppi", "human")
    clustered = estimate_quality(df, judge="judge", human="human", by="run", methods=methods)
    naive = estimate_quality(df, judge="judge", human="human", by="run", methods=methods, cluster=None)
    good, bad = _coverage(clustered, TRUTH), _coverage(naive, TRUTH)
    assert len(clustered) == RUNS * len(methods) and clustered["reason"].isna().all()
    for method, contrast in (("human", 0.12), ("ppi++", 0.08), ("ppi", 0.05)):
        assert good[method] >= 0.90, good
        assert good[method] - bad[method] >= contrast, (good, bad)
    assert bad["human"] <= 0.85, bad  # independent turns: 6 turns counted as 6 items, about 3/4 coverage
    # PPI++ still pays off with clusters: narrower than people alone
    width = (clustered["ci_high"] - clustered["ci_low"]).groupby(clustered["method"]).mean()
    assert width["ppi++"] < width["human"]


def test_stratified_clustered_intervals_cover_when_a_selective_judge_abstains_on_turns():
    """A selective judge abstains on the turns it is unsure of (more often in bad conversations); people label
    every turn of 25 conversations: the stratified estimate, with the strata summed within each conversation,
    covers; the same without clusters does not."""
    df = conversations(seed=12)
    unsure = np.abs(df["judge"] - 0.45) < 0.12
    df.loc[unsure, "judge"] = np.nan
    kw = dict(judge="judge", human="human", by="run", methods=("ppi++", "human"), judge_missing="stratify")
    clustered = estimate_quality(df, **kw)
    naive = estimate_quality(df, **kw, cluster=None)
    good, bad = _coverage(clustered, TRUTH), _coverage(naive, TRUTH)
    assert (clustered["interval"] == "stratified").all() and clustered["reason"].isna().all()
    assert good["ppi++"] >= 0.90 and good["human"] >= 0.90, good
    assert bad["human"] <= 0.87 and good["ppi++"] - bad["ppi++"] >= 0.05, (good, bad)


def test_a_cluster_bootstrap_of_agreement_covers_and_a_row_bootstrap_does_not():
    """Percent agreement of a judge with people, whose agreement rate varies by conversation."""
    rng = np.random.default_rng(21)
    runs, k, t = 300, 40, 6
    rate = _logistic(1.0 + rng.normal(0, 1.5, (runs, k, 1)))
    truth = float(_logistic(1.0 + np.random.default_rng(0).normal(0, 1.5, 2_000_000)).mean())
    agree = rng.random((runs, k, t)) < np.broadcast_to(rate, (runs, k, t))
    human = rng.random((runs, k, t)) < 0.5
    judge = np.where(agree, human, ~human)
    groups = np.repeat(np.arange(k), t)
    hit = {"cluster": 0, "rows": 0}
    for r in range(runs):
        a, h = judge[r].ravel().astype(float), human[r].ravel().astype(float)
        for kind, cluster in (("cluster", groups), ("rows", None)):
            lo, hi = bootstrap_ci(_percent_agreement, a, h, a >= 0.5, h >= 0.5, n_boot=300, seed=r, cluster=cluster)
            hit[kind] += float(lo) <= truth <= float(hi)
    assert hit["cluster"] / runs >= 0.90, hit
    assert hit["rows"] / runs <= 0.85 and hit["cluster"] - hit["rows"] >= 0.08 * runs, hit


def test_a_cluster_bootstrap_draws_whole_clusters_is_seeded_and_takes_several_statistics():
    sizes = np.array([1, 2, 3, 5, 8, 4, 2, 6, 1, 7, 3, 2])
    ids = np.repeat(np.arange(len(sizes)), sizes)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(ids))  # a cluster's rows need not be next to each other
    ids, values = ids[order], rng.random(len(ids))
    seen = []

    def whole(cluster_rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        counts = np.stack([(cluster_rows == c).sum(axis=1) for c in range(len(sizes))], axis=1)
        seen.append(bool(((counts % sizes) == 0).all()))  # every cluster drawn whole, or not at all
        assert cluster_rows.shape[1] == counts.sum(axis=1)[0]
        return np.stack([x.mean(axis=1), x.max(axis=1)], axis=1)

    low, high = bootstrap_ci(whole, ids, values, n_boot=500, seed=7, cluster=ids)
    assert low.shape == (2,) and all(seen) and len(seen) > 1  # one call per resample length
    again = bootstrap_ci(whole, ids, values, n_boot=500, seed=7, cluster=ids)
    assert np.array_equal(low, again[0]) and np.array_equal(high, again[1])
    assert not np.array_equal(low, bootstrap_ci(whole, ids, values, n_boot=500, seed=8, cluster=ids)[0])
    one = bootstrap_ci(lambda x: x.mean(axis=1), values, n_boot=200, seed=1, cluster=np.zeros(len(values)))
    assert np.isnan(one[0]) and np.isnan(one[1])  # one cluster: nothing to resample


# --- (c) what "auto" means, and what the results say -------------------------------------------------


def test_auto_without_conversation_id_is_todays_numbers_and_none_ignores_the_column():
    df = conversations(4, seed=1)
    bare = df.drop(columns=["conversation_id"])
    auto = estimate_quality(bare, judge="judge", human="human", by="run", methods=("ppi++", "human", "judge"))
    plain = estimate_quality(df, judge="judge", human="human", by="run", methods=("ppi++", "human", "judge"),
                             cluster=None)
    pd.testing.assert_frame_equal(auto, plain)
    assert auto["cluster"].isna().all() and auto["n_clusters"].isna().all() and auto.attrs["cluster"] is None
    assert set(auto["interval"]) == {"normal"}
    named = estimate_quality(df.rename(columns={"conversation_id": "session"}), judge="judge", human="human",
                             by="run", cluster="session")
    auto = estimate_quality(df, judge="judge", human="human", by="run")
    pd.testing.assert_frame_equal(named.drop(columns="cluster"), auto.drop(columns="cluster"))
    assert (named["cluster"] == "session").all()
    assert labels_needed(bare, judge="judge", human="human", width=0.2).equals(
        labels_needed(df, judge="judge", human="human", width=0.2, cluster=None))


def test_too_few_conversations_give_no_interval_and_say_why():
    df = conversations(1, seed=4, labelled=MIN_CLUSTERS - 1)
    out = estimate_quality(df, judge="judge", human="human", methods=("ppi++", "human", "judge"))
    label_based = out[out["method"] != "judge"]
    assert label_based["ci_low"].isna().all() and label_based["estimate"].isna().all()
    for reason in label_based["reason"]:
        assert f"only {MIN_CLUSTERS - 1} labelled conversation(s)" in reason and "at least 10" in reason
        assert "cluster=None" in reason
    judge_row = out[out["method"] == "judge"].iloc[0]
    assert judge_row["reason"] is None and judge_row["n_clusters"] == CONVERSATIONS
    # the same labels as independent rows (a user's explicit choice) give the old interval
    assert estimate_quality(df, judge="judge", human="human", cluster=None)["reason"].isna().all()
    plan = labels_needed(df, judge="judge", human="human", width=0.1)
    assert plan["labels_needed"].isna().all() and plan["reason"].str.contains("conversation").all()


def test_unlabelled_turns_of_a_single_conversation_add_nothing_that_can_be_measured():
    df = conversations(1, seed=3)
    lab = df["human"].notna()
    one = df[lab | (df["conversation_id"] == df.loc[~lab, "conversation_id"].iloc[0])]
    out = estimate_quality(one, judge="judge", human="human", methods=("ppi++", "ppi", "human")).set_index("method")
    assert out.loc["ppi++", "lambda"] == 0 and out.loc["ppi++", "se"] == out.loc["human", "se"]
    assert np.isnan(out.loc["ppi", "estimate"]) and "all come from one conversation" in out.loc["ppi", "reason"]


def test_a_missing_cluster_column_is_an_error_that_names_the_columns():
    df = conversations(1)
    with pytest.raises(ValidationError, match="cluster='session' names no column"):
        estimate_quality(df, judge="judge", human="human", cluster="session")
    with pytest.raises(ValidationError, match="cluster must be"):
        cluster_column(df, 3)
    with pytest.raises(ValidationError, match="names no column"):
        labels_needed(df, judge="judge", human="human", width=0.1, cluster="session")


def test_a_turn_without_a_conversation_id_is_a_conversation_of_its_own():
    df = conversations(1, seed=9)
    lone = df.copy()
    lone["conversation_id"] = lone["conversation_id"].astype(object)
    lone.loc[lone["conversation_id"] == "c3", "conversation_id"] = None
    explicit = lone.copy()
    mask = explicit["conversation_id"].isna()
    explicit.loc[mask, "conversation_id"] = [f"alone{i}" for i in range(int(mask.sum()))]
    a = estimate_quality(lone, judge="judge", human="human")
    b = estimate_quality(explicit, judge="judge", human="human")
    pd.testing.assert_frame_equal(a, b)


def test_labels_needed_plans_whole_conversations_and_reaches_the_width():
    """A pilot of 25 labelled conversations plans the labels (and conversations) a target width needs; labelling
    that many conversations gives about that width, where the plan for independent turns falls short."""
    pilot = conversations(1, seed=30)
    target = 0.16
    plan = labels_needed(pilot, judge="judge", human="human", width=target, pool="infinite").set_index("method")
    naive = labels_needed(pilot, judge="judge", human="human", width=target, pool="infinite",
                          cluster=None).set_index("method")
    assert plan.attrs["cluster"] == "conversation_id" and (plan["n_clusters_pilot"] == LABELLED).all()
    assert (plan["labels_needed"] > naive["labels_needed"]).all()  # correlated turns are worth less
    for method in ("ppi++", "human"):
        assert plan.loc[method, "clusters_needed"] == math.ceil(plan.loc[method, "labels_needed"] / TURNS - 1e-9)
    need = int(plan.loc["human", "clusters_needed"])
    sim = conversations(200, seed=31, labelled=need, conversations=need + 40)
    out = estimate_quality(sim, judge="judge", human="human", by="run", methods="human")
    width = float((out["ci_high"] - out["ci_low"]).mean())
    assert width == pytest.approx(target, rel=0.2)
    few = int(naive.loc["human", "labels_needed"]) // TURNS + 1  # the independent-turns plan, in conversations
    sim = conversations(200, seed=32, labelled=few, conversations=few + 40)
    out = estimate_quality(sim, judge="judge", human="human", by="run", methods="human")
    assert float((out["ci_high"] - out["ci_low"]).mean()) > target * 1.25


# --- (d) agreement, cards and calibrate -----------------------------------------------------------


def _agreeing(seed: int = 0, conversations: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rate = _logistic(1.0 + rng.normal(0, 1.5, (conversations, 1)))
    human = rng.random((conversations, TURNS)) < 0.5
    judge = np.where(rng.random((conversations, TURNS)) < rate, human, ~human)
    return pd.DataFrame({"conversation_id": np.repeat([f"c{i}" for i in range(conversations)], TURNS),
                         "score_judge": judge.ravel().astype(float), "score_human": human.ravel().astype(float)})


def test_agreement_table_resamples_conversations_and_says_so():
    scores = _agreeing()
    table = agreement_table(scores, seed=3)
    flat = agreement_table(scores, seed=3, cluster=None)
    again = agreement_table(scores, seed=3)
    row, flat_row = table.frame.iloc[0], flat.frame.iloc[0]
    assert table.cluster == "conversation_id" and table.n_clusters == 30
    assert row["cluster"] == "conversation_id" and row["n_clusters"] == 30
    assert "cluster" not in flat.frame.columns and flat.cluster is None
    assert row["cohen_kappa"] == flat_row["cohen_kappa"]  # the same point estimate
    assert row["kappa_high"] - row["kappa_low"] > 1.2 * (flat_row["kappa_high"] - flat_row["kappa_low"])
    assert row["kappa_low"] == again.frame.iloc[0]["kappa_low"]  # seeded
    html = table._repr_html_()
    assert "resampling whole clusters" in html and "conversation_id" in html and "30 clusters" in html
    pair = table.pairs[0]
    assert pair.n_clusters == 30 and "resampling whole clusters" in pair._repr_html_()
    # a column name, or one id per item with a mapping of scores
    named = agreement_table(scores.rename(columns={"conversation_id": "session"}), seed=3, cluster="session")
    assert named.frame.iloc[0]["kappa_low"] == row["kappa_low"]
    mapping = agreement_table({"judge": scores["score_judge"], "human": scores["score_human"]}, seed=3,
                              cluster=scores["conversation_id"])
    assert mapping.frame.iloc[0]["kappa_low"] == row["kappa_low"]
    with pytest.raises(ValidationError, match="names no column"):
        agreement_table(scores, cluster="session")


def test_agreement_with_too_few_conversations_has_no_interval_and_says_why():
    scores = _agreeing(conversations=6)
    pair = agreement_table(scores).pairs[0]
    kappa = pair["cohen_kappa"]
    assert kappa.defined and math.isnan(kappa.low) and math.isnan(kappa.high)
    assert "only 6 paired conversation(s)" in kappa.reason and "no interval" in str(kappa)
    assert "only 6 paired conversation(s)" in pair.row()["note"]


def test_a_best_threshold_is_cross_validated_by_conversation():
    scores = _agreeing(seed=5)
    rng = np.random.default_rng(1)
    scores["score_judge"] = np.clip(scores["score_judge"] * 0.6 + rng.random(len(scores)) * 0.4, 0, 1)
    choice = choose_threshold(scores["score_judge"], scores["score_human"], cluster=scores["conversation_id"])
    assert choice.reason is None and choice.verdicts is not None
    table = agreement_table(scores, thresholds={"judge": "best"})
    assert table.chosen["judge"].fold_thresholds == choice.fold_thresholds
    three = scores["conversation_id"].map(lambda c: int(c[1:]) % 3)  # 180 turns in 3 clusters
    too_few = choose_threshold(scores["score_judge"], scores["score_human"], folds=5, cluster=three)
    assert too_few.reason is not None and "only 3 clusters" in too_few.reason and too_few.verdicts is None


def test_a_judge_card_from_conversations_resamples_them_and_records_it():
    scores = _agreeing(seed=2, conversations=40)
    clustered = card_from_scores(scores["score_judge"], scores["score_human"], grader_id="j",
                                 cluster=scores["conversation_id"])
    flat = card_from_scores(scores["score_judge"], scores["score_human"], grader_id="j")
    assert clustered.cluster == {"column": "conversation_id", "n_clusters": 40} and flat.cluster is None
    assert clustered.kappa == flat.kappa
    assert clustered.kappa_high - clustered.kappa_low > flat.kappa_high - flat.kappa_low
    assert clustered.bias_high - clustered.bias_low > flat.bias_high - flat.bias_low
    assert "240 in 40 clusters of &#x27;conversation_id&#x27;" in clustered._repr_html_()
    again = type(clustered).from_dict(clustered.to_dict())
    assert again.cluster == clustered.cluster and type(flat).from_dict(flat.to_dict()).cluster is None
    direct = pair_agreement(scores["score_judge"], scores["score_human"], cluster=scores["conversation_id"],
                            statistics=("cohen_kappa",))
    assert (direct["cohen_kappa"].low, direct["cohen_kappa"].high) == (clustered.kappa_low, clustered.kappa_high)


def test_calibrate_clusters_by_conversation_id_and_the_cards_and_estimates_follow():
    rng = np.random.default_rng(4)
    rows = []
    for c in range(24):
        good = rng.random() < 0.6
        for t in range(5):
            right = rng.random() < (0.9 if good else 0.3)
            rows.append({"id": f"c{c}t{t}", "conversation_id": f"c{c}", "turn": t, "prompt": f"q{c}-{t}",
                         "baseline": "yes", "candidate": "yes" if right else "no",
                         "human": float(right if rng.random() < 0.85 else not right)})
    items = pd.DataFrame(rows)
    report = calibrate(ExactMatchJudge(), items, human="human", probes=None, progress=False, n_boot=300)
    assert report.agreement.cluster == "conversation_id" and report.agreement.n_clusters == 24
    row = report.agreement.frame.iloc[0]
    assert row["n_clusters"] == 24
    card = report.judge_cards()[0]
    assert card.cluster == {"column": "conversation_id", "n_clusters": 24}
    est = report.estimates(by=None)
    assert (est["cluster"] == "conversation_id").all() and (est["n_clusters"].dropna() == 24).all()
    flat = calibrate(ExactMatchJudge(), items, human="human", probes=None, progress=False, n_boot=300, cluster=None)
    assert flat.agreement.cluster is None and flat.judge_cards()[0].cluster is None
    assert row["kappa_high"] - row["kappa_low"] > flat.agreement.frame.iloc[0]["kappa_high"] - \
        flat.agreement.frame.iloc[0]["kappa_low"]
    with pytest.raises(ValidationError, match="names no column"):
        calibrate(ExactMatchJudge(), items, human="human", probes=None, progress=False, cluster="session")
