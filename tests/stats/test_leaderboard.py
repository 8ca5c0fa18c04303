"""Bradley-Terry leaderboards, the judge beside people (PPI++), the length-controlled win rate, the plot
and the ``llm-connect leaderboard`` command, checked against independent implementations (choix, sklearn,
ppi-python, statsmodels) and against simulations from known strengths."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from llm_connect import leaderboard as top_level_leaderboard
from llm_connect.calibration import LeaderboardComparison, compare_leaderboards
from llm_connect.errors import ValidationError
from llm_connect.stats import leaderboard, length_controlled_win_rate
from llm_connect.views import plot_leaderboard

ELO = 400 / math.log(10)


def simulate(strengths: np.ndarray, n: int, rng: np.random.Generator, *, tie_rate: float = 0.0,
             names: np.ndarray | None = None) -> pd.DataFrame:
    """Comparisons of random pairs drawn from Bradley-Terry with the given log-strengths."""
    m = len(strengths)
    names = np.array([f"m{i}" for i in range(m)]) if names is None else names
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p = 1.0 / (1.0 + np.exp(-(strengths[a] - strengths[b])))
    u = rng.random(n)
    tie = rng.random(n) < tie_rate
    winner = np.where(tie, "tie", np.where(u < p, "a", "b"))
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def true_ratings(strengths: np.ndarray) -> np.ndarray:
    return 1000 + ELO * (strengths - strengths.mean())


# -- the fit -----------------------------------------------------------------------------------------


def test_matches_choix_on_the_same_data_with_ties_counted_half():
    import choix

    rng = np.random.default_rng(3)
    strengths = rng.normal(0, 1, 7)
    df = simulate(strengths, 1500, rng, tie_rate=0.15)
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=0)
    # FastChat's way with ties: every battle twice, a tie once to each side
    index = {f"m{i}": i for i in range(7)}
    duplicated = []
    for a, b, w in df.itertuples(index=False):
        i, j = index[a], index[b]
        duplicated += {"a": [(i, j), (i, j)], "b": [(j, i), (j, i)], "tie": [(i, j), (j, i)]}[w]
    theta = choix.ilsr_pairwise(7, duplicated, alpha=0.0, tol=1e-12)
    expected = 1000 + ELO * (theta - theta.mean())
    got = board.set_index("model").loc[list(index), "rating"].to_numpy()
    assert np.abs(got - expected).max() < 1e-4
    assert board["rating"].mean() == pytest.approx(1000.0, abs=1e-9)


def test_matches_a_logistic_regression_without_intercept():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(11)
    strengths = np.array([0.8, 0.3, 0.0, -0.2, -0.9])
    df = simulate(strengths, 1200, rng)
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=0)
    index = {f"m{i}": i for i in range(5)}
    x = np.zeros((len(df), 5))
    x[np.arange(len(df)), df["model_a"].map(index)] = 1.0
    x[np.arange(len(df)), df["model_b"].map(index)] = -1.0
    y = (df["winner"] == "a").to_numpy(int)
    with warnings.catch_warnings():  # scikit-learn 1.8 deprecates penalty=None (use C=inf); older ones lack that
        warnings.simplefilter("ignore", FutureWarning)
        fit = LogisticRegression(penalty=None, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(x[:, 1:], y)
    theta = np.concatenate([[0.0], fit.coef_[0]])
    expected = 1000 + ELO * (theta - theta.mean())
    got = board.set_index("model").loc[list(index), "rating"].to_numpy()
    assert np.abs(got - expected).max() < 1e-3


def test_simulated_ranking_matches_the_true_one():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(2024)
    strengths = np.linspace(-1.2, 1.2, 8)
    rng.shuffle(strengths)
    df = simulate(strengths, 2000, rng)
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=200)
    got = board.set_index("model").loc[[f"m{i}" for i in range(8)], "rating"].to_numpy()
    assert kendalltau(got, strengths).statistic >= 0.9
    assert list(board["rank"]) == list(range(1, 9))


@pytest.mark.slow  # 27 s measured on 2 busy cores: out of the fast loop
def test_intervals_cover_the_true_ratings_about_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    strengths = np.linspace(-1.2, 1.2, 8)
    truth = true_ratings(strengths)
    names = [f"m{i}" for i in range(8)]
    covered = total = 0
    for run in range(400):
        df = simulate(strengths, 2000, rng)
        board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=500, seed=run)
        b = board.set_index("model").loc[names]
        covered += int(((b["rating_low"] <= truth) & (truth <= b["rating_high"])).sum())
        total += len(names)
    assert 0.93 <= covered / total <= 0.97, covered / total


def test_orientation_order_and_arena_words_do_not_change_the_fit():
    rng = np.random.default_rng(5)
    df = simulate(np.array([0.5, 0.0, -0.5, 0.2]), 600, rng, tie_rate=0.1)
    flipped = pd.DataFrame({"model_a": df["model_b"], "model_b": df["model_a"],
                            "winner": df["winner"].map({"a": "model_b", "b": "model_a", "tie": "tie (bothbad)"})})
    flipped = flipped.sample(frac=1.0, random_state=1).reset_index(drop=True)
    first = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=50, seed=4)
    second = leaderboard(flipped, model_a="model_a", model_b="model_b", winner="winner", n_boot=50, seed=4)
    pd.testing.assert_frame_equal(first[["model", "rating", "n", "win_rate"]],
                                  second[["model", "rating", "n", "win_rate"]], rtol=1e-8)
    again = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=50, seed=4)
    pd.testing.assert_frame_equal(first, again)  # seeded


def test_columns_counts_win_rates_and_arena_rank_intervals():
    rng = np.random.default_rng(8)
    df = simulate(np.array([1.0, 0.9, 0.0, -1.5]), 400, rng, tie_rate=0.2)
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=300)
    assert list(board.columns) == ["model", "rating", "rating_low", "rating_high", "rank", "rank_low", "rank_high",
                                   "n", "win_rate"]
    assert list(board["rating"]) == sorted(board["rating"], reverse=True)
    for r in board.to_dict("records"):
        mine = df[(df["model_a"] == r["model"]) | (df["model_b"] == r["model"])]
        won = ((mine["model_a"] == r["model"]) & (mine["winner"] == "a")).sum() + \
            ((mine["model_b"] == r["model"]) & (mine["winner"] == "b")).sum() + 0.5 * (mine["winner"] == "tie").sum()
        assert r["n"] == len(mine)
        assert r["win_rate"] == pytest.approx(won / len(mine))
        assert r["rating_low"] <= r["rating"] <= r["rating_high"]
        others = board[board["model"] != r["model"]]
        # Chatbot Arena: 1 + the models surely better; worst: the models not surely worse
        assert r["rank_low"] == 1 + int((others["rating_low"] > r["rating_high"]).sum())
        assert r["rank_high"] == len(board) - int((others["rating_high"] < r["rating_low"]).sum())
        assert r["rank_low"] <= r["rank"] <= r["rank_high"]
    assert board.attrs["n_boot"] == 300 and board.attrs["confidence"] == 0.95
    assert board.attrs["n_comparisons"] == len(df)


def test_by_gives_one_board_per_group_with_the_group_first():
    rng = np.random.default_rng(9)
    one = simulate(np.array([0.5, 0.0, -0.5]), 300, rng).assign(task="code")
    two = simulate(np.array([-0.5, 0.0, 0.5]), 300, rng).assign(task="chat")
    both = pd.concat([one, two], ignore_index=True)
    board = leaderboard(both, model_a="model_a", model_b="model_b", winner="winner", by="task", n_boot=40)
    assert list(board.columns[:2]) == ["task", "model"]
    alone = leaderboard(two, model_a="model_a", model_b="model_b", winner="winner", n_boot=40)
    got = board[board["task"] == "chat"].drop(columns="task").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, alone, check_like=False)
    assert board[board["task"] == "code"].iloc[0]["model"] == "m0"
    assert board[board["task"] == "chat"].iloc[0]["model"] == "m2"


def test_blank_winners_and_self_comparisons_are_left_out_and_counted():
    df = pd.DataFrame({"model_a": ["x", "x", "y", "x", "y"], "model_b": ["y", "y", "x", "x", "x"],
                       "winner": ["a", None, "a", "a", ""]})
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=0)
    assert board.attrs["n_unlabelled"] == 2 and board.attrs["n_self"] == 1
    assert board["n"].tolist() == [2, 2]
    assert board["rank_low"].isna().all() and board["rating_low"].isna().all()


def test_a_model_that_won_everything_gets_a_finite_rating():
    df = pd.DataFrame({"model_a": ["x", "x", "y", "z"], "model_b": ["y", "z", "z", "y"],
                       "winner": ["a", "a", "a", "tie"]})
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=20)
    assert np.isfinite(board[["rating", "rating_low", "rating_high"]].to_numpy()).all()
    assert board.iloc[0]["model"] == "x"


# -- bad input ----------------------------------------------------------------------------------------


def test_bad_winner_values_are_listed():
    df = pd.DataFrame({"model_a": ["x", "y"], "model_b": ["y", "x"], "winner": ["a", "left"]})
    with pytest.raises(ValidationError, match=r"'winner'.*'left'"):
        leaderboard(df, model_a="model_a", model_b="model_b", winner="winner")


def test_a_model_never_compared_is_named():
    df = pd.DataFrame({"model_a": ["x", "y", "lonely"], "model_b": ["y", "x", "x"], "winner": ["a", "b", None]})
    with pytest.raises(ValidationError, match="'lonely' never compared"):
        leaderboard(df, model_a="model_a", model_b="model_b", winner="winner")


def test_a_disconnected_comparison_graph_names_its_components():
    df = pd.DataFrame({"model_a": ["x", "y", "p", "q"], "model_b": ["y", "x", "q", "p"],
                       "winner": ["a", "b", "a", "tie"]})
    with pytest.raises(ValidationError, match=r"2 groups never compared with each other: \{'p', 'q'\}; \{'x', 'y'\}"):
        leaderboard(df, model_a="model_a", model_b="model_b", winner="winner")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"winner": "nope"}, "no column 'nope'"),
    ({"confidence": 1.5}, "confidence must be between 0 and 1"),
    ({"n_boot": -1}, "n_boot must be a whole number"),
    ({"method": "elo"}, "unknown method 'elo'"),
])
def test_bad_arguments_say_what_to_do(kwargs, message):
    df = pd.DataFrame({"model_a": ["x"], "model_b": ["y"], "winner": ["a"]})
    with pytest.raises(ValidationError, match=message):
        leaderboard(df, **{"model_a": "model_a", "model_b": "model_b", "winner": "winner", **kwargs})


def test_exported_from_the_package():
    assert top_level_leaderboard is leaderboard


# -- plot ---------------------------------------------------------------------------------------------


def test_plot_draws_sorted_ratings_with_their_intervals():
    from matplotlib.figure import Figure

    rng = np.random.default_rng(1)
    board = leaderboard(simulate(np.array([0.6, -0.4, 0.1]), 300, rng), model_a="model_a", model_b="model_b",
                        winner="winner", n_boot=50)
    ax = Figure().add_subplot()
    assert plot_leaderboard(board, ax=ax) is ax
    points = ax.lines[0].get_xydata()
    assert np.allclose(points[:, 0], board["rating"].to_numpy()[::-1])  # best at the top
    assert [t.get_text() for t in ax.get_yticklabels()] == board["model"].tolist()[::-1]
    segments = ax.collections[0].get_segments()  # the interval bars
    assert np.allclose([s[0][0] for s in segments], board["rating_low"].to_numpy()[::-1])
    assert np.allclose([s[1][0] for s in segments], board["rating_high"].to_numpy()[::-1])


# -- the judge beside people --------------------------------------------------------------------------


def _judged(rng: np.random.Generator, n: int, labelled: float, *, ties: bool) -> pd.DataFrame:
    strengths = np.array([0.9, 0.4, 0.0, -0.3, -1.0])
    df = simulate(strengths, n, rng, tie_rate=0.1 if ties else 0.0).rename(columns={"winner": "human"})
    flip = rng.random(n) < 0.2  # the judge gets a fifth wrong, and favours m4
    judge = df["human"].where(~flip, df["human"].map({"a": "b", "b": "a", "tie": "a"}))
    judge = judge.where(~((df["model_a"] == "m4") & (rng.random(n) < 0.3)), "a")
    df["judge"] = judge
    df.loc[rng.random(n) >= labelled, "human"] = None
    return df


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
def test_ppi_ratings_match_ppi_python_on_data_without_ties():
    """ppi-python's logistic PPI++ on the same rows, design ``e_a - e_b`` without the first model: the
    point estimate (tuned lambda) and the interval. Its per-row statistics are run as plain Python
    (``py_func``), which gives the same numbers without numba's half-minute compilation."""
    ppi = pytest.importorskip("ppi_py.ppi")

    from llm_connect.stats.bradley_terry import ppi_bradley_terry

    rng = np.random.default_rng(12)
    df = _judged(rng, 2000, 0.15, ties=False)
    models = sorted(set(df["model_a"]) | set(df["model_b"]))
    index = {m: k for k, m in enumerate(models)}
    lab = df["human"].notna().to_numpy()

    def design(rows: pd.DataFrame) -> np.ndarray:
        x = np.zeros((len(rows), len(models)))
        x[np.arange(len(rows)), rows["model_a"].map(index)] = 1.0
        x[np.arange(len(rows)), rows["model_b"].map(index)] = -1.0
        return np.ascontiguousarray(x[:, 1:])

    x_l, x_u = design(df[lab]), design(df[~lab])
    y = (df.loc[lab, "human"] == "a").to_numpy(float)
    yh = (df.loc[lab, "judge"] == "a").to_numpy(float)
    yu = (df.loc[~lab, "judge"] == "a").to_numpy(float)
    ia, ib = df["model_a"].map(index).to_numpy(), df["model_b"].map(index).to_numpy()
    theta, cov, lam = ppi_bradley_terry(ia[lab], ib[lab], y, yh, ia[~lab], ib[~lab], yu, len(models))

    stats = getattr(ppi._logistic_get_stats, "py_func", ppi._logistic_get_stats)
    with warnings.catch_warnings():  # ppi_py starts from scikit-learn's penalty=None, deprecated in 1.8
        warnings.simplefilter("ignore", FutureWarning)
        theta1 = ppi.ppi_logistic_pointestimate(x_l, y, yh, x_u, yu, lam=1)
        expected_lam = ppi._calc_lam_glm(*stats(theta1, x_l, y, yh, x_u, yu), clip=True)
        expected = ppi.ppi_logistic_pointestimate(x_l, y, yh, x_u, yu, lam=expected_lam)
    assert lam == pytest.approx(expected_lam, abs=1e-5)
    assert 0.0 < lam <= 1.0
    assert np.abs(theta - expected).max() < 1e-4
    # ppi_logistic_ci's interval at this lambda: the sandwich of its per-row gradients
    grads, grads_hat, grads_hat_u, inv_hessian = stats(expected, x_l, y, yh, x_u, yu, use_unlabeled=True)
    n, big_n = len(y), len(yu)
    sigma = inv_hessian @ (n / big_n * np.cov(lam * grads_hat_u.T) + np.cov(grads.T - lam * grads_hat.T)) @ inv_hessian
    assert np.allclose(np.sqrt(np.diag(cov)), np.sqrt(np.diag(sigma) / n), rtol=1e-4)


def test_compare_leaderboards_side_by_side():
    from scipy.stats import kendalltau, spearmanr

    rng = np.random.default_rng(21)
    df = _judged(rng, 2500, 0.2, ties=True)
    out = compare_leaderboards(df, model_a="model_a", model_b="model_b", judge_winner="judge", human_winner="human",
                               n_boot=100)
    assert isinstance(out, LeaderboardComparison)
    assert out.judge["n"].sum() == 2 * len(df)
    assert out.human is not None and out.human["n"].sum() == 2 * df["human"].notna().sum()
    assert out.anchored is not None and 0.0 <= out.lam <= 1.0
    assert out.anchored.attrs["n_labelled"] == df["human"].notna().sum()
    # the judge's bias for m4 lifts it on the judge's board; the anchored board pulls it back
    rating = {name: b.set_index("model")["rating"] for name, b in
              (("judge", out.judge), ("human", out.human), ("anchored", out.anchored))}
    assert rating["judge"]["m4"] > rating["anchored"]["m4"]
    merged = out.judge.merge(out.human, on="model")
    row = out.correlation.iloc[0]
    assert row["kendall_tau"] == pytest.approx(kendalltau(merged["rating_x"], merged["rating_y"]).statistic)
    assert row["spearman_rho"] == pytest.approx(spearmanr(merged["rating_x"], merged["rating_y"]).statistic)
    both = df[df["human"].notna()]
    pair = out.pairs[(out.pairs["model_1"] == "m0") & (out.pairs["model_2"] == "m1")].iloc[0]
    sub = both[((both["model_a"] == "m0") & (both["model_b"] == "m1")) |
               ((both["model_a"] == "m1") & (both["model_b"] == "m0"))]
    assert pair["n"] == len(sub)
    assert pair["agreement"] == pytest.approx((sub["judge"] == sub["human"]).mean())
    html = out._repr_html_()
    assert "anchored" in html and "PPI++" in html


def test_compare_escapes_model_names_in_html():
    df = pd.DataFrame({"model_a": ["<script>x</script>", "b"] * 10, "model_b": ["b", "<script>x</script>"] * 10,
                       "judge": ["a", "b", "b", "a"] * 5, "human": ["a", None, "b", None] * 5})
    html = compare_leaderboards(df, judge_winner="judge", human_winner="human", n_boot=20)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html


# -- length-controlled win rate -----------------------------------------------------------------------


def _length_biased(rng: np.random.Generator, n: int, quality: float) -> pd.DataFrame:
    """A model as good as the baseline (``quality``) whose answers are longer; the judge likes length."""
    instr = rng.integers(0, 60, n)
    gamma = rng.normal(0, 1, 60)
    len_b = rng.normal(900, 200, n)
    len_a = len_b + rng.normal(500, 300, n)
    delta = len_a - len_b
    logit = quality + 1.5 * np.tanh(delta / delta.std(ddof=1)) - 0.4 * gamma[instr]
    p = 1.0 / (1.0 + np.exp(-logit))
    u = rng.random(n)
    winner = np.where(u < p, "a", "b")
    return pd.DataFrame({"model": "verbose", "baseline_model": "base", "winner": winner, "length_a": len_a,
                         "length_b": len_b, "instruction": instr, "difficulty": gamma[instr]})


def test_length_controlled_win_rate_matches_a_statsmodels_glm():
    import statsmodels.api as sm

    rng = np.random.default_rng(31)
    df = _length_biased(rng, 800, 0.0)
    df.loc[rng.random(len(df)) < 0.1, "winner"] = "tie"
    out = length_controlled_win_rate(df, model="model", baseline_model="baseline_model", winner="winner",
                                     length_a="length_a", length_b="length_b", difficulty="difficulty", n_boot=0)
    # AlpacaEval's formula, fitted independently: preference ~ 1 + tanh(std_delta_len) + difficulty,
    # a fractional preference as two weighted rows (y=1 with weight p, y=0 with weight 1-p)
    pref = df["winner"].map({"a": 1.0, "b": 0.0, "tie": 0.5}).to_numpy()
    delta = (df["length_a"] - df["length_b"]).to_numpy()
    design = np.column_stack([np.ones(len(df)), np.tanh(delta / delta.std(ddof=1)), df["difficulty"]])
    x2 = np.vstack([design, design])
    y2 = np.concatenate([np.ones(len(df)), np.zeros(len(df))])
    w2 = np.concatenate([pref, 1 - pref])
    fit = sm.GLM(y2, x2, family=sm.families.Binomial(), freq_weights=w2).fit(tol=1e-12)
    no_length = design.copy()
    no_length[:, 1] = 0.0
    expected = fit.predict(no_length).mean()
    row = out.iloc[0]
    assert row["lc_win_rate"] == pytest.approx(expected, abs=1e-6)
    assert row["length_coef"] == pytest.approx(fit.params[1], abs=1e-5)
    assert row["win_rate"] == pytest.approx(pref.mean())


def test_length_control_removes_a_planted_length_bias():
    rng = np.random.default_rng(41)
    df = _length_biased(rng, 1500, 0.0)
    out = length_controlled_win_rate(df, model="model", baseline_model="baseline_model", winner="winner",
                                     length_a="length_a", length_b="length_b", instruction="instruction",
                                     n_boot=300).iloc[0]
    assert out["win_rate_low"] > 0.6  # raw: the longer answers win
    assert out["lc_win_rate_low"] <= 0.5 <= out["lc_win_rate_high"]  # controlled: as good as the baseline
    assert out["length_coef"] > 0.5
    assert out["win_rate_low"] <= out["win_rate"] <= out["win_rate_high"]


# -- the command line ---------------------------------------------------------------------------------


def test_cli_prints_the_table_and_writes_a_safe_csv(tmp_path, capsys):
    from llm_connect.cli import main

    rng = np.random.default_rng(4)
    df = simulate(np.array([0.7, 0.0, -0.7]), 300, rng, names=np.array(["=HYPERLINK(1)", "beta\x1b[31m", "gamma"]))
    df["task"] = np.where(rng.random(len(df)) < 0.5, "x", "y")
    path = tmp_path / "battles.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "out"
    code = main(["leaderboard", str(path), "--model-a", "model_a", "--model-b", "model_b", "--winner", "winner",
                 "--n-boot", "50", "--seed", "3", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "leaderboard (Bradley-Terry" in printed
    written = pd.read_csv(out / "leaderboard.csv")
    expected = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=50, seed=3)
    assert written["rating"].to_numpy() == pytest.approx(expected["rating"].to_numpy())
    assert "'=HYPERLINK(1)" in written["model"].tolist()  # neutralised against formulas
    assert main(["leaderboard", str(path), "--by", "task", "--n-boot", "0", "--out", str(out)]) == 0
    assert list(pd.read_csv(out / "leaderboard.csv").columns[:2]) == ["task", "model"]


@pytest.mark.parametrize(("rows", "args", "message"), [
    ([{"model_a": "x", "model_b": "y", "winner": "left"}], [], "'left'"),
    ([{"model_a": "x", "model_b": "y", "winner": "a"}], ["--winner", "who"], "no column 'who'"),
    ([{"model_a": "x", "model_b": "y", "winner": "a"}, {"model_a": "p", "model_b": "q", "winner": "b"}], [],
     "never compared with each other"),
    ([{"model_a": "x", "model_b": "y", "winner": "a"}], ["--n-boot", "-3"], "--n-boot"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, rows, args, message):
    from llm_connect.cli import main

    path = tmp_path / "battles.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    with pytest.raises(SystemExit) as exc:
        main(["leaderboard", str(path), "--out", str(tmp_path / "out"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_the_bootstraps_chord_steps_reach_the_same_optimum_as_newton():
    from llm_connect.stats._bt_fit import _fit_bt, _fit_bt_chord, _hessian
    from llm_connect.stats._comparisons import _aggregate

    rng = np.random.default_rng(13)
    df = simulate(rng.normal(0, 1, 12), 3000, rng, tie_rate=0.1)
    pairs = _aggregate(df["model_a"].to_numpy(object), df["model_b"].to_numpy(object), df["winner"].to_numpy(object),
                       sorted(set(df["model_a"]) | set(df["model_b"])))
    wi0, wj0 = pairs.wins_i + 0.5 * pairs.ties, pairs.wins_j + 0.5 * pairs.ties
    theta = _fit_bt(pairs, wi0[None], wj0[None])[0]
    noise = rng.gamma(20.0, 1 / 20.0, size=(30, len(wi0)))  # resample-like weights, and two far-off ones
    noise[0] = rng.gamma(1.0, 1.0, len(wi0))
    wi, wj = wi0 * noise, wj0 * noise[::-1]
    hess_inv = np.linalg.inv(_hessian(pairs, theta, wi0 + wj0))
    assert np.abs(_fit_bt_chord(pairs, wi, wj, theta, hess_inv) - _fit_bt(pairs, wi, wj)).max() < 1e-7


# -- the calibrate report -----------------------------------------------------------------------------


def _prefers_the_capital(prompt: str) -> str:
    import json
    import re

    a = re.search(r"<<<ANSWER A [^>]*>>>\n(.*?)\n<<<END ANSWER A", prompt, re.S)
    b = re.search(r"<<<ANSWER B [^>]*>>>\n(.*?)\n<<<END ANSWER B", prompt, re.S)
    ref = re.search(r"\(capital: (\w+)\)", prompt)
    assert a and b and ref, prompt
    hit_a, hit_b = ref[1] in a[1], ref[1] in b[1]
    return json.dumps({"notes": "checked", "winner": "tie" if hit_a == hit_b else ("A" if hit_a else "B")})


def _model_pairs(n: int = 36) -> list[dict]:
    """Three models in turn on both sides; 'strong' names the capital more often than 'weak'."""
    rng = np.random.default_rng(0)
    skill = {"strong": 0.9, "mid": 0.6, "weak": 0.3}
    names = list(skill)
    rows = []
    for i in range(n):
        ma, mb = names[i % 3], names[(i + 1 + i // 3 % 2) % 3]
        right_a, right_b = rng.random() < skill[ma], rng.random() < skill[mb]
        a = "Paris" if right_a else "Lyon"
        b = "It is Paris." if right_b else "It is Lyon."
        human = "tie" if right_a == right_b else ("a" if right_a else "b")
        rows.append({"id": f"p{i}", "prompt": "What is the capital of France? (capital: Paris)", "candidate_a": a,
                     "candidate_b": b, "model_a": ma, "model_b": mb, "human": human})
    return rows


def test_pairwise_report_and_cli_carry_a_leaderboard_section(tmp_path, capsys):
    from llm_connect.adapters import OpenAICompatibleAdapter
    from llm_connect.calibration import battle_outcomes, calibrate
    from llm_connect.cli import main
    from llm_connect.grading import PairwiseJudge
    from llm_connect.testing import LoopbackServer

    rows = _model_pairs()
    with LoopbackServer(reply=_prefers_the_capital) as server:
        judge = PairwiseJudge(OpenAICompatibleAdapter("judge-1", base_url=server.base_url), grader_id="capital")
        report = calibrate({"capital": judge}, rows, pairwise=True, n_boot=200, progress=False)
        boards = report.leaderboards()
        assert list(boards) == ["human", "capital"]
        expected = leaderboard(battle_outcomes(report, winner="human"), n_boot=200, seed=report.seed)
        pd.testing.assert_frame_equal(boards["human"], expected)
        assert boards["human"].iloc[0]["model"] == "strong"
        html = str(report.html(plots=True))
        assert "Leaderboards (Bradley-Terry)" in html and "leaderboard (human)" in html and "<img" in html
        paths = report.to_csv(tmp_path / "api")
        written = pd.read_csv(paths["leaderboard"])
        assert written.columns[0] == "rater" and set(written["rater"]) == {"human", "capital"}

        data = tmp_path / "pairs.jsonl"
        pd.DataFrame(rows).to_json(data, orient="records", lines=True)
        out = tmp_path / "cli"
        code = main(["calibrate", str(data), "--out", str(out), "--pairwise", "--llm", "openai:judge-1",
                     "--base-url", server.base_url, "--n-boot", "50", "--no-progress", "--no-cache"])
    assert code == 0
    capsys.readouterr()
    cli_board = pd.read_csv(out / "leaderboard.csv")
    assert set(cli_board["rater"]) == {"human", "pairwise"}
    assert "Leaderboards (Bradley-Terry)" in (out / "report.html").read_text(encoding="utf-8")


# -- comparisons on the turns of conversations: the bootstrap resamples whole conversations -------------------


def simulate_conversations(rng: np.random.Generator, strengths: np.ndarray, conversations: int, turns: int, *,
                           rho: float = 0.8) -> pd.DataFrame:
    """Bradley-Terry comparisons made on the turns of conversations: each conversation compares one pair of
    models on all its turns, and a turn repeats the conversation's own outcome with probability ``rho`` (else
    a fresh draw). Every turn is a Bradley-Terry draw, so the true ratings are those of ``strengths``; the turns
    of one conversation are correlated (``rho**2``)."""
    m = len(strengths)
    i = rng.integers(0, m, conversations)
    j = (i + rng.integers(1, m, conversations)) % m
    p = 1.0 / (1.0 + np.exp(-(strengths[i] - strengths[j])))
    shared = rng.random(conversations) < p
    repeat = rng.random((conversations, turns)) < rho
    won = np.where(repeat, shared[:, None], rng.random((conversations, turns)) < p[:, None])
    names = np.array([f"m{k}" for k in range(m)])
    return pd.DataFrame({"model_a": np.repeat(names[i], turns), "model_b": np.repeat(names[j], turns),
                         "winner": np.where(won.ravel(), "a", "b"),
                         "conversation_id": np.repeat([f"c{g}" for g in range(conversations)], turns),
                         "turn": np.tile(np.arange(turns), conversations)})


def test_a_bootstrap_over_conversations_covers_the_true_ratings_where_one_over_turns_does_not():
    """50 conversations of 6 correlated turns: the bootstrap over single comparisons covers the true ratings
    about 62% of the time instead of 95%; resampling whole conversations (cluster="auto") is near nominal."""
    rng = np.random.default_rng(0)
    strengths = np.array([0.6, 0.0, -0.6])
    truth = true_ratings(strengths)
    names = ["m0", "m1", "m2"]
    covered = {"auto": 0, None: 0}
    for run in range(100):
        df = simulate_conversations(rng, strengths, 50, 6)
        for cluster in covered:
            b = leaderboard(df, n_boot=200, seed=run, cluster=cluster).set_index("model").loc[names]
            covered[cluster] += int(((b["rating_low"] <= truth) & (truth <= b["rating_high"])).sum())
    rate = {k: v / 300 for k, v in covered.items()}
    assert rate[None] < 0.8, rate
    assert 0.88 <= rate["auto"] <= 0.99, rate


def test_cluster_auto_finds_the_conversations_and_says_which_clustering_it_used():
    rng = np.random.default_rng(1)
    df = simulate_conversations(rng, np.array([0.5, 0.0, -0.5, 0.2]), 40, 5)
    auto = leaderboard(df, n_boot=300)
    flat = leaderboard(df, n_boot=300, cluster=None)
    assert (auto.attrs["cluster"], auto.attrs["n_clusters"], auto.attrs["cluster_notes"]) == ("conversation_id", 40,
                                                                                               [])
    assert (flat.attrs["cluster"], flat.attrs["n_clusters"]) == (None, None)
    pd.testing.assert_series_equal(auto["rating"], flat["rating"])  # the point ratings do not depend on it
    width = (auto["rating_high"] - auto["rating_low"]).mean() / (flat["rating_high"] - flat["rating_low"]).mean()
    assert width > 1.4  # the design effect of 5 correlated turns
    # any column names the conversations; none without one; a missing one is an error naming the columns
    named = leaderboard(df.rename(columns={"conversation_id": "session"}), n_boot=300, cluster="session")
    assert named[["rating_low", "rating_high"]].equals(auto[["rating_low", "rating_high"]])
    assert named.attrs["cluster"] == "session"
    assert leaderboard(df.drop(columns="conversation_id"), n_boot=50).attrs["cluster"] is None
    with pytest.raises(ValidationError, match="cluster='nope' names no column"):
        leaderboard(df, cluster="nope")
    # groups: each group's turns resampled by conversation
    grouped = leaderboard(df.assign(task=np.where(df["conversation_id"].str[1:].astype(int) % 2, "x", "y")),
                          by="task", n_boot=100)
    assert grouped.attrs["cluster"] == "conversation_id" and grouped.attrs["n_clusters"] == 40


def test_too_few_conversations_give_no_interval_and_say_why():
    rng = np.random.default_rng(2)
    df = simulate_conversations(rng, np.array([0.5, -0.5, 0.0]), 6, 8)
    board = leaderboard(df, n_boot=200)
    assert board["rating"].notna().all() and board["rating_low"].isna().all() and board["rank_low"].isna().all()
    (note,) = board.attrs["cluster_notes"]
    assert "only 6 compared conversation(s)" in note and "at least 10" in note
    assert leaderboard(df, n_boot=200, cluster=None)["rating_low"].notna().all()  # independent rows: as before
    labelled = df.assign(judge=df["winner"], human=df["winner"].where(np.arange(len(df)) % 2 == 0))
    out = compare_leaderboards(labelled, judge_winner="judge", human_winner="human", n_boot=100)
    assert out.anchored is not None and out.anchored["rating_low"].isna().all()
    said = [n for n in out.notes if "only 6 compared conversation(s) (clusters of 'conversation_id')" in n]
    assert [n.split(":")[0] for n in said] == ["on the judge's board", "on the people's board", "on the anchored board"]


def test_continuous_preferences_and_style_control_resample_conversations_too():
    from llm_connect.stats import style_effects

    rng = np.random.default_rng(3)
    df = simulate_conversations(rng, np.array([0.6, 0.0, -0.6]), 30, 6)
    df["p"] = np.clip(np.where(df["winner"] == "a", 0.8, 0.2) + rng.normal(0, 0.05, len(df)), 0, 1)
    df["response_a"] = ["word " * int(k) for k in rng.integers(5, 50, len(df))]
    df["response_b"] = ["word " * int(k) for k in rng.integers(5, 50, len(df))]
    for kw in ({"winner": "p"}, {"style": ["length"]}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto, flat = leaderboard(df, n_boot=200, **kw), leaderboard(df, n_boot=200, cluster=None, **kw)
        assert auto.attrs["cluster"] == "conversation_id" and auto.attrs["n_clusters"] == 30
        pd.testing.assert_series_equal(auto["rating"], flat["rating"])
        widths = [(b["rating_high"] - b["rating_low"]).mean() for b in (auto, flat)]
        assert widths[0] > 1.3 * widths[1], kw
    effects = style_effects(df, ["length"], n_boot=100)
    assert effects.attrs["cluster"] == "conversation_id"
    alone = style_effects(df, ["length"], model_a=None, model_b=None, n_boot=100)
    assert alone.attrs["cluster"] == "conversation_id" and alone["low"].notna().all()


def test_the_anchored_boards_cluster_robust_covariance_is_statsmodels_for_people_alone():
    """With people's labels alone (lambda 0) PPI++ Bradley-Terry is the logistic regression on their
    comparisons: its clustered covariance is statsmodels' cluster-robust one (CR1; statsmodels also scales by
    (n - 1) / (n - k))."""
    sm = pytest.importorskip("statsmodels.api")
    from llm_connect.stats.bradley_terry import ppi_bradley_terry

    rng = np.random.default_rng(4)
    df = simulate_conversations(rng, np.array([0.5, 0.0, -0.3, 0.2]), 30, 5, rho=0.6)
    index = {"m0": 0, "m1": 1, "m2": 2, "m3": 3}
    ia, ib = df["model_a"].map(index).to_numpy(), df["model_b"].map(index).to_numpy()
    lo, hi = np.minimum(ia, ib), np.maximum(ia, ib)
    y = np.where(ia < ib, df["winner"] == "a", df["winner"] == "b").astype(float)
    groups = pd.factorize(df["conversation_id"])[0]
    none = np.zeros(0, dtype=np.int64)
    theta, cov, lam = ppi_bradley_terry(lo, hi, y, y, none, none, np.zeros(0), 4, clusters=groups)
    x = np.zeros((len(df), 4))
    x[np.arange(len(df)), lo], x[np.arange(len(df)), hi] = 1.0, -1.0
    fit = sm.Logit(y, x[:, 1:]).fit(disp=0, cov_type="cluster", cov_kwds={"groups": groups})
    n, k = len(df), 3
    assert lam == 0.0 and np.abs(theta - fit.params).max() < 1e-5
    assert np.allclose(cov, fit.cov_params() / ((n - 1) / (n - k)), rtol=1e-4)


def test_compare_leaderboards_on_conversation_turns_clusters_every_board():
    rng = np.random.default_rng(5)
    df = simulate_conversations(rng, np.array([0.8, 0.3, 0.0, -0.4]), 60, 5).rename(columns={"winner": "human"})
    df["judge"] = df["human"].where(rng.random(len(df)) > 0.15, df["human"].map({"a": "b", "b": "a"}))
    labelled = df["conversation_id"].isin([f"c{g}" for g in range(0, 60, 3)])  # people labelled 20 conversations
    df.loc[~labelled, "human"] = None
    out = compare_leaderboards(df, judge_winner="judge", human_winner="human", n_boot=200)
    flat = compare_leaderboards(df, judge_winner="judge", human_winner="human", n_boot=200, cluster=None)
    assert (out.cluster, out.n_clusters, flat.cluster) == ("conversation_id", 60, None)
    assert out.judge.attrs["n_clusters"] == 60 and out.human.attrs["n_clusters"] == 20
    assert out.anchored is not None and out.anchored.attrs["n_clusters"] == 60
    for name in ("judge", "human", "anchored"):
        a, b = getattr(out, name), getattr(flat, name)
        pd.testing.assert_series_equal(a["rating"], b["rating"])
        assert (a["rating_high"] - a["rating_low"]).mean() > 1.3 * (b["rating_high"] - b["rating_low"]).mean(), name
    assert any("clustered by 'conversation_id' (60 clusters)" in note for note in out.notes)
    assert "clustered by" in out._repr_html_()


# -- pairwise judging of conversation turns feeds the leaderboards -----------------------------------------------


def _weather_turns(conversations: int = 12) -> pd.DataFrame:
    """Conversation turns, each answered by two of three models; 'good' names the forecast, 'poor' rarely."""
    from llm_connect.conversations import per_turn

    rng = np.random.default_rng(6)
    skill = {"good": 0.9, "fair": 0.6, "poor": 0.2}
    models = list(skill)
    rows = []
    for g in range(conversations):
        msgs = [{"role": "system", "content": "You are a weather bot."}]
        for city in ("Oslo", "Lima", "Pune"):
            msgs += [{"role": "user", "content": f"Weather in {city}?"},
                     {"role": "assistant", "content": f"Forecast for {city}: sunny."}]
        conv = per_turn([{"conversation_id": f"c{g}", "messages": msgs}])
        ma, mb = models[g % 3], models[(g + 1) % 3]
        for row in conv.to_dict("records"):
            right_a, right_b = rng.random() < skill[ma], rng.random() < skill[mb]
            rows.append({**row, "baseline": "It is sunny." if right_a else "No idea.",
                         "candidate": "Sunny, I checked." if right_b else "Cannot say.",
                         "baseline_model": ma, "candidate_model": mb,
                         "human": "tie" if right_a == right_b else ("a" if right_a else "b")})
    return pd.DataFrame(rows)


def _prefers_the_sunny_answer(prompt: str) -> str:
    import json
    import re

    a = re.search(r"<<<ANSWER A [^>]*>>>\n(.*?)\n<<<END ANSWER A", prompt, re.S)
    b = re.search(r"<<<ANSWER B [^>]*>>>\n(.*?)\n<<<END ANSWER B", prompt, re.S)
    assert a and b and "<<<MESSAGE 1 SYSTEM" in prompt, prompt  # the judge is shown the conversation
    hit_a, hit_b = "unny" in a[1], "unny" in b[1]
    return json.dumps({"notes": "checked", "winner": "tie" if hit_a == hit_b else ("A" if hit_a else "B")})


def test_pairwise_judging_of_conversation_turns_feeds_a_leaderboard_clustered_by_conversation():
    from llm_connect.calibration import battle_outcomes
    from llm_connect.grading import PairwiseJudge, judge_many
    from llm_connect.testing import ScriptedAdapter

    turns = _weather_turns()
    adapter = ScriptedAdapter(lambda prompt, rc: _prefers_the_sunny_answer(prompt))
    judged = judge_many(PairwiseJudge(adapter, allow_tie=True), turns, progress=False)
    assert (judged["status"] == "scored").all()
    comparisons = battle_outcomes(judged)
    assert list(comparisons["conversation_id"]) == list(turns["conversation_id"])
    assert list(comparisons["turn"]) == list(turns["turn"])
    board = leaderboard(comparisons, n_boot=200)
    assert board.attrs["cluster"] == "conversation_id" and board.attrs["n_clusters"] == 12
    assert board.iloc[0]["model"] == "good"


def test_calibrate_pairwise_shows_the_judge_each_turns_conversation_and_clusters_its_leaderboards():
    from llm_connect.calibration import calibrate
    from llm_connect.grading import PairwiseJudge
    from llm_connect.testing import ScriptedAdapter

    turns = _weather_turns().rename(columns={"baseline": "candidate_a", "candidate": "candidate_b",
                                             "baseline_model": "model_a", "candidate_model": "model_b"})
    adapter = ScriptedAdapter(lambda prompt, rc: _prefers_the_sunny_answer(prompt))
    report = calibrate({"sunny": PairwiseJudge(adapter, allow_tie=True)}, turns.drop(columns="prompt"),
                       pairwise=True, n_boot=100, progress=False)
    assert (report.scores["status_sunny"] == "scored").all()  # every prompt showed the transcript (the reply checks)
    assert sum("Weather in Pune?" in p for p in adapter.prompts) == 12 * 2  # the third turns, in both orders
    assert list(report.scores["conversation_id"]) == list(turns["conversation_id"])
    boards = report.leaderboards()
    assert {name: b.attrs["cluster"] for name, b in boards.items()} == {"human": "conversation_id",
                                                                         "sunny": "conversation_id"}
    assert boards["sunny"].attrs["n_clusters"] == 12


def test_cli_says_which_clustering_it_used(tmp_path, capsys):
    from llm_connect.cli import main

    rng = np.random.default_rng(7)
    path = tmp_path / "turns.csv"
    simulate_conversations(rng, np.array([0.5, 0.0, -0.5]), 20, 4).to_csv(path, index=False)
    assert main(["leaderboard", str(path), "--n-boot", "50", "--out", str(tmp_path / "a")]) == 0
    assert "clustered by 'conversation_id' (20 clusters)" in capsys.readouterr().out
    assert main(["leaderboard", str(path), "--n-boot", "50", "--cluster", "none", "--out", str(tmp_path / "b")]) == 0
    assert "bootstrap over single comparisons, taken as independent" in capsys.readouterr().out
    few = tmp_path / "few.csv"
    simulate_conversations(rng, np.array([0.5, 0.0, -0.5]), 4, 6).to_csv(few, index=False)
    assert main(["leaderboard", str(few), "--n-boot", "50", "--out", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr().out
    assert "only 4 compared conversation(s)" in printed and "--cluster none" in printed
    with pytest.raises(SystemExit) as exc:
        main(["leaderboard", str(path), "--cluster", "session", "--out", str(tmp_path / "d")])
    assert exc.value.code == 2 and "--cluster none" in capsys.readouterr().err
