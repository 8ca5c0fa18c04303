"""Style control (Chatbot Arena's) and continuous preferences (AlpacaEval's), issue 29.

The style-controlled Bradley-Terry fit is checked against an independent unpenalised logistic
regression (statsmodels) on features recomputed here with FastChat's own patterns, and against
simulated battles in which style alone decides; continuous preferences against a weighted GLM and
AlpacaEval's continuous win rate; judge cards and the pairwise report against a loopback judge
that likes bold text.
"""

from __future__ import annotations

import json
import math
import re
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest

from llm_connect.calibration import battle_outcomes, calibrate, compare_leaderboards
from llm_connect.errors import ValidationError
from llm_connect.stats import leaderboard, length_controlled_win_rate
from llm_connect.stats import leaderboard as stats_leaderboard
from llm_connect.stats.bradley_terry import StyleEffects
from llm_connect.stats.style import STYLE_FEATURES, style_counts, style_differences, text_features

ELO = 400 / math.log(10)
MODELS = ["terse", "plain", "verbose", "fancy"]
WORDS = {"terse": 15, "plain": 35, "verbose": 110, "fancy": 50}
BOLD = {"terse": 0.1, "plain": 0.4, "verbose": 0.6, "fancy": 2.5}


def text(rng: np.random.Generator, model: str) -> str:
    """An answer in the model's style: its length, bold spans, sometimes a header or a list."""
    lines = [f"## Part {h}" for h in range(rng.poisson(0.4))]
    body = " ".join(rng.choice(["the", "answer", "is", "here", "and", "so", "on"], size=max(1, int(
        rng.gamma(4.0, WORDS[model] / 4.0)))))
    body += "".join(f" **point {k}**" for k in range(rng.poisson(BOLD[model])))
    lines.append(body)
    lines += [f"- item {k}" for k in range(rng.poisson(0.8))]
    return "\n".join(lines)


def style_battles(n: int, seed: int, *, strengths: dict[str, float] | None = None, length: float = 1.5,
                  bold: float = 0.8, tie_rate: float = 0.0) -> pd.DataFrame:
    """Battles whose winner follows the models' strengths (0 by default: equally strong) plus style."""
    rng = np.random.default_rng(seed)
    strengths = strengths or dict.fromkeys(MODELS, 0.0)
    rows = []
    for _ in range(n):
        i, j = rng.choice(len(MODELS), size=2, replace=False)
        rows.append((MODELS[i], MODELS[j], text(rng, MODELS[i]), text(rng, MODELS[j])))
    df = pd.DataFrame(rows, columns=["model_a", "model_b", "response_a", "response_b"])
    x = fastchat_features(df["response_a"], df["response_b"])
    eta = (df["model_a"].map(strengths) - df["model_b"].map(strengths)).to_numpy() + length * x[:, 0] + bold * x[:, 3]
    won = rng.random(n) < 1.0 / (1.0 + np.exp(-eta))
    df["winner"] = np.where(rng.random(n) < tie_rate, "tie", np.where(won, "a", "b"))
    return df


def fastchat_features(a: pd.Series, b: pd.Series) -> np.ndarray:
    """FastChat's style features recomputed independently (``add_markdown_info.count_markdown_elements``:
    six header patterns, ordered and unordered lists, ** and __ bold, code blocks removed first;
    ``preprocess_for_style``: (a - b) / (a + b + 1)), tokens counted as words and punctuation."""

    def counts(t: str) -> list[int]:
        prose = t
        for block in re.findall("```([^`]*)```", t):
            prose = prose.replace(f"```{block}```", "")
        headers = sum(len(re.findall(rf"^#{{{k}}}\s", prose, re.MULTILINE)) for k in range(1, 7))
        lists = len(re.findall(r"^\s*\d+\.\s", prose, re.MULTILINE)) + len(re.findall(r"^\s*[-*+]\s", prose,
                                                                                       re.MULTILINE))
        bold = len(re.findall(r"\*\*[^*\n]+\*\*", prose)) + len(re.findall(r"__[^_\n]+__", prose))
        return [len(re.findall(r"\w+|[^\w\s]", t)), headers, lists, bold]

    ca = np.array([counts(t) for t in a], dtype=float)
    cb = np.array([counts(t) for t in b], dtype=float)
    return (ca - cb) / (ca + cb + 1.0)


def design(df: pd.DataFrame, x: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Rows ``e_a - e_b`` without the first model (its strength fixed at 0), then the style columns."""
    models = sorted(set(df["model_a"]) | set(df["model_b"]))
    index = {m: k for k, m in enumerate(models)}
    d = np.zeros((len(df), len(models)))
    d[np.arange(len(df)), df["model_a"].map(index)] = 1.0
    d[np.arange(len(df)), df["model_b"].map(index)] = -1.0
    return np.column_stack([d[:, 1:], x]), models


def glm(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Unpenalised logistic regression with fractional outcomes (statsmodels): each row twice, weighted
    ``y`` and ``1 - y`` (a tie is half a win to each side; a probability p is p of a win)."""
    import statsmodels.api as sm

    fit = sm.GLM(np.concatenate([np.ones(len(y)), np.zeros(len(y))]), np.vstack([z, z]),
                 family=sm.families.Binomial(), freq_weights=np.concatenate([y, 1.0 - y])).fit(tol=1e-13)
    return np.asarray(fit.params)


def ratings_from(theta_rest: np.ndarray) -> np.ndarray:
    theta = np.concatenate([[0.0], theta_rest])
    return 1000 + ELO * (theta - theta.mean())


# -- the features ---------------------------------------------------------------------------------


def test_features_count_as_fastchat_does():
    answer = ("# Title\n## Sub\n####### not a header\nSome **bold** and __also__ text.\n"
              "1. first\n2. second\n- dash\n* star\n```\n# code\n- not a list\n**not bold**\n```\nend")
    counts = style_counts([answer, "", None]).to_dict("records")
    assert counts[0] == {"length": len(re.findall(r"\w+|[^\w\s]", answer)), "headers": 2, "lists": 4, "bold": 2}
    assert counts[1] == counts[2] == dict.fromkeys(STYLE_FEATURES, 0)
    # a conversation (Arena's published data stores responses as JSON lists): the assistant turns, joined
    turns = style_counts([json.dumps(["# Hi", "- a", None]), [{"role": "user", "content": "# q"},
                                                              {"role": "assistant", "content": "**b**"}]])
    assert turns.to_dict("records") == [{"length": 4, "headers": 1, "lists": 1, "bold": 0},
                                        {"length": 5, "headers": 0, "lists": 0, "bold": 1}]
    diff = style_differences(["**a** **b**", "x"], ["", "x y z"], features=["bold_count", "length"])
    assert list(diff.columns) == ["bold", "length"]
    assert diff["bold"].tolist() == pytest.approx([2 / 3, 0.0]) and diff["length"].tolist()[1] == pytest.approx(-2 / 5)
    rng = np.random.default_rng(0)
    a, b = [text(rng, "fancy") for _ in range(50)], [text(rng, "terse") for _ in range(50)]
    np.testing.assert_allclose(style_differences(a, b).to_numpy(), fastchat_features(pd.Series(a), pd.Series(b)))


# -- the fit against an independent logistic regression -----------------------------------------------


def test_style_coefficients_match_an_unpenalised_logistic_regression():
    df = style_battles(1500, 1, strengths={"terse": 0.3, "plain": 0.0, "verbose": -0.2, "fancy": 0.1}, tie_rate=0.1)
    board = leaderboard(df, n_boot=0, style=True)
    x = fastchat_features(df["response_a"], df["response_b"])
    z, models = design(df, x)
    params = glm(z, df["winner"].map({"a": 1.0, "b": 0.0, "tie": 0.5}).to_numpy())
    m = len(models)
    style = board.attrs["style"]
    assert list(style.columns) == ["feature", "coefficient", "low", "high"]
    assert style["feature"].tolist() == list(STYLE_FEATURES)
    assert np.abs(style["coefficient"].to_numpy() / ELO - params[m - 1:]).max() < 1e-4
    got = board.set_index("model").loc[models, "rating"].to_numpy()
    assert np.abs(got - ratings_from(params[:m - 1])).max() / ELO < 1e-4
    assert board.attrs["style_fit"] == "mle" and board.attrs["style_notes"] == []
    assert board["rating"].mean() == pytest.approx(1000.0)
    assert list(board.columns) == list(leaderboard(df, n_boot=0).columns)


def test_sklearn_agrees_on_user_covariates_given_as_columns_or_a_frame():
    from sklearn.linear_model import LogisticRegression

    df = style_battles(1200, 2)
    df = df[df["winner"] != "tie"].reset_index(drop=True)
    rng = np.random.default_rng(2)
    df["mood"] = rng.normal(0, 1, len(df))
    df["lead"] = rng.normal(0, 1, len(df))
    as_columns = leaderboard(df, n_boot=0, style=["mood", "lead"])
    as_frame = leaderboard(df, n_boot=0, style=df[["mood", "lead"]])
    pd.testing.assert_frame_equal(as_columns, as_frame)
    pd.testing.assert_frame_equal(as_columns.attrs["style"], as_frame.attrs["style"])
    z, models = design(df, df[["mood", "lead"]].to_numpy())
    with warnings.catch_warnings():  # scikit-learn 1.8 deprecates penalty=None (use C=inf); older ones lack that
        warnings.simplefilter("ignore", FutureWarning)
        fit = LogisticRegression(penalty=None, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(
            z, (df["winner"] == "a").to_numpy(int))
    coef = as_columns.attrs["style"]["coefficient"].to_numpy() / ELO
    assert np.abs(coef - fit.coef_[0][len(models) - 1:]).max() < 1e-4
    mixed = leaderboard(df, n_boot=0, style=["bold", "mood"])
    assert mixed.attrs["style"]["feature"].tolist() == ["bold", "mood"]
    assert mixed.attrs["style_computed"] == ["bold"] and mixed.attrs["style_given"] == ["mood"]
    with pytest.raises(ValidationError, match="'sparkle' is neither an Arena style feature"):
        leaderboard(df, n_boot=0, style=["sparkle"])
    with pytest.raises(ValidationError, match="rows"):
        leaderboard(df, n_boot=0, style=df[["mood"]].iloc[:10])


def test_style_none_keeps_todays_numbers():
    """Ratings recorded from the leaderboard before style control existed (same data, same seed)."""
    rng = np.random.default_rng(99)
    s = np.array([0.6, 0.2, 0, -0.3, -0.5])
    a = rng.integers(0, 5, 400)
    b = (a + rng.integers(1, 5, 400)) % 5
    p = 1 / (1 + np.exp(-(s[a] - s[b])))
    u, tie = rng.random(400), rng.random(400) < 0.1
    df = pd.DataFrame({"model_a": [f"m{i}" for i in a], "model_b": [f"m{i}" for i in b],
                       "winner": np.where(tie, "tie", np.where(u < p, "a", "b"))})
    board = leaderboard(df, n_boot=200, seed=5)
    assert board["model"].tolist() == ["m0", "m1", "m2", "m3", "m4"]
    np.testing.assert_allclose(board["rating"], [1089.136344270731, 1038.711610639343, 992.3350566474942,
                                                 965.6002865069892, 914.2167019354428], rtol=0, atol=1e-9)
    np.testing.assert_allclose(board["rating_low"], [1042.6093356834142, 1000.8215135987729, 951.6641460004751,
                                                     924.9749021206782, 868.164665763276], rtol=0, atol=1e-9)
    np.testing.assert_allclose(board["rating_high"], [1137.9786997874755, 1081.252636782869, 1034.5446891453028,
                                                      1009.1464901602459, 960.1942390099283], rtol=0, atol=1e-9)
    assert "style" not in board.attrs


# -- simulated battles where style alone decides ----------------------------------------------------------


def test_when_style_alone_decides_controlled_ratings_agree_and_raw_ones_do_not():
    df = style_battles(3000, 7, length=1.6, bold=1.0)
    raw = leaderboard(df, n_boot=300, seed=1).set_index("model")
    controlled = leaderboard(df, n_boot=300, seed=1, style=True).set_index("model")
    # raw: the verbose and bold models look far better than the terse one, beyond their intervals
    assert raw.loc["terse", "rating_high"] < raw.loc["verbose", "rating_low"]
    assert raw.loc["terse", "rating_high"] < raw.loc["fancy", "rating_low"]
    # controlled: all equally strong, every interval overlaps every other and holds the common rating
    assert (controlled["rating_low"].max() < controlled["rating_high"].min())
    assert ((controlled["rating_low"] <= 1000) & (controlled["rating_high"] >= 1000)).all()
    assert (controlled["rank_low"] == 1).all() and (controlled["rank_high"] == 4).all()
    effects = controlled.attrs["style"].set_index("feature")
    for feature, truth in (("length", 1.6), ("bold", 1.0)):
        assert effects.loc[feature, "low"] <= truth * ELO <= effects.loc[feature, "high"]
    for feature in ("headers", "lists"):
        assert effects.loc[feature, "low"] <= 0 <= effects.loc[feature, "high"]


def test_style_effects_is_the_boards_frame_and_is_exported():
    import llm_connect
    from llm_connect.stats import style_effects

    assert llm_connect.style_effects is style_effects
    df = style_battles(600, 3)
    board = leaderboard(df, n_boot=100, seed=2, style=True)
    effects = style_effects(df, style=True, n_boot=100, seed=2)
    pd.testing.assert_frame_equal(effects, board.attrs["style"])
    assert isinstance(effects, pd.DataFrame) and effects.attrs["fit"] == "mle"
    assert (effects["low"] <= effects["coefficient"]).all() and (effects["coefficient"] <= effects["high"]).all()
    alone = style_effects(df, style=["length", "bold"], model_a=None, model_b=None, n_boot=50)
    assert alone["feature"].tolist() == ["length", "bold"] and np.isfinite(alone["coefficient"]).all()
    by = leaderboard(df.assign(task=np.where(np.arange(len(df)) % 2, "x", "y")), by="task", n_boot=20,
                     style=["length"])
    assert by.attrs["style"].columns.tolist() == ["task", *effects.columns] and len(by.attrs["style"]) == 2
    # style frames in attrs do not stop the boards from being concatenated (pandas compares attrs)
    both = pd.concat([board, leaderboard(df.iloc[:400], n_boot=10, style=True)])
    assert len(both) == 8 and isinstance(board.attrs["style"], StyleEffects)


# -- degenerate cases -----------------------------------------------------------------------------------


def test_a_constant_feature_is_dropped_and_said():
    df = style_battles(500, 4)
    df["response_a"] = df["response_a"].str.replace(r"(?m)^## .*\n", "", regex=True)
    df["response_b"] = df["response_b"].str.replace(r"(?m)^## .*\n", "", regex=True)  # no headers anywhere
    with pytest.warns(UserWarning, match="'headers' is constant"):
        board = leaderboard(df, n_boot=20, style=True)
    assert board.attrs["style"]["feature"].tolist() == ["length", "lists", "bold"]
    assert any("'headers' is constant" in n for n in board.attrs["style_notes"])
    plain = df.assign(response_a="same text", response_b="same text")
    with pytest.warns(UserWarning, match="constant"):
        flat = leaderboard(plain, n_boot=20, style=True)
    pd.testing.assert_frame_equal(flat, leaderboard(plain, n_boot=20))  # nothing left: the raw board, said
    assert len(flat.attrs["style"]) == 0 and "no style feature left" in flat.attrs["style_notes"][-1]


def test_a_model_never_compared_is_named_with_style_too():
    df = style_battles(60, 5)
    lonely = pd.DataFrame([{"model_a": "lonely", "model_b": "terse", "response_a": "x", "response_b": "y",
                            "winner": None}])
    with pytest.raises(ValidationError, match="'lonely' never compared"):
        leaderboard(pd.concat([df, lonely], ignore_index=True), n_boot=0, style=True)
    with pytest.raises(ValidationError, match="no text columns"):
        leaderboard(df.drop(columns=["response_a"]), n_boot=0, style=True)


def test_a_perfectly_style_separated_set_is_flagged_not_a_huge_number():
    df = style_battles(300, 6)
    x = style_differences(df["response_a"], df["response_b"])
    df["winner"] = np.where(x["length"] > 0, "a", "b")  # the longer answer always wins
    with pytest.warns(RuntimeWarning, match="no maximum-likelihood estimate"):
        board = leaderboard(df, n_boot=30, style=True)
    assert board.attrs["style_fit"].startswith("l2 penalty")
    assert any("separation" in n for n in board.attrs["style_notes"])
    style = board.attrs["style"]
    assert np.isfinite(style[["coefficient", "low", "high"]].to_numpy()).all()
    assert style["coefficient"].abs().max() < 20 * ELO  # shrunk and flagged, never run off to infinity


# -- continuous preferences ----------------------------------------------------------------------------


def probability_battles(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strengths = {"m0": 0.8, "m1": 0.2, "m2": -0.1, "m3": -0.9}
    names = list(strengths)
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    d = np.array([strengths[names[i]] - strengths[names[j]] for i, j in zip(a, b, strict=True)])
    p = 1.0 / (1.0 + np.exp(-(d + rng.normal(0, 0.7, n))))  # a judge's logprob-weighted preference
    return pd.DataFrame({"model_a": [names[i] for i in a], "model_b": [names[j] for j in b], "winner": p.round(4)})


def test_probabilities_are_fitted_by_expected_counts():
    df = probability_battles(800, 8)
    df["winner"] = df["winner"].astype(object)
    df.loc[:40, "winner"] = "tie"  # the words may stand beside the probabilities
    df.loc[41:60, "winner"] = 1.0
    board = leaderboard(df, n_boot=200, seed=0)
    y = df["winner"].map(lambda v: 0.5 if v == "tie" else float(v)).to_numpy()
    z, models = design(df, np.zeros((len(df), 0)))
    expected = ratings_from(glm(z, y))
    got = board.set_index("model").loc[models]
    assert np.abs(got["rating"].to_numpy() - expected).max() / ELO < 1e-4
    assert ((got["rating_low"] < got["rating"]) & (got["rating"] < got["rating_high"])).all()
    assert got["n"].sum() == 2 * len(df)
    won = {m: 0.0 for m in models}
    for (ma, mb), v in zip(df[["model_a", "model_b"]].itertuples(index=False), y, strict=True):
        won[ma] += v
        won[mb] += 1.0 - v
    np.testing.assert_allclose(got["win_rate"], [won[m] / got.loc[m, "n"] for m in models])
    lengths = np.random.default_rng(8).integers(1, 30, size=(2, len(df)))
    texts_a, texts_b = ["w " * k for k in lengths[0]], ["w " * k for k in lengths[1]]
    with_style = leaderboard(df.assign(response_a=texts_a, response_b=texts_b), n_boot=20, style=["length"])
    params = glm(design(df, style_differences(texts_a, texts_b, ["length"]).to_numpy())[0], y)
    assert abs(with_style.attrs["style"]["coefficient"].iloc[0] / ELO - params[-1]) < 1e-4


def test_probability_codes_and_numbers_that_could_be_codes():
    coded = pd.DataFrame({"model_a": ["x", "y", "x", "y"], "model_b": ["y", "x", "y", "x"],
                          "winner": [1, 0, 1, 0.5]})
    with pytest.raises(ValidationError, match="codes='probability'"):
        leaderboard(coded, n_boot=0)  # 0, 0.5 and 1 alone could be codes either way round: never guessed
    as_p = leaderboard(coded, n_boot=0, codes="probability")
    as_words = leaderboard(coded.assign(winner=["a", "b", "a", "tie"]), n_boot=0)
    pd.testing.assert_frame_equal(as_p, as_words)
    bad = coded.assign(winner=[0.2, 1.4, 0.5, 0.1])
    with pytest.raises(ValidationError, match=r"neither a preference .* nor a probability.*'1.4'"):
        leaderboard(bad, n_boot=0, codes="probability")
    b = battle_outcomes(pd.DataFrame({"model_a": ["x", "y", "x"], "model_b": ["y", "x", "y"],
                              "winner": [0.25, np.nan, "a"]}))
    assert b["winner"].tolist() == [0.25, "a"] and b.attrs["dropped"] == 1


def test_compare_leaderboards_reads_a_judges_probabilities():
    df = probability_battles(400, 9)
    df["judge"] = df["winner"]
    rng = np.random.default_rng(9)
    df["human"] = np.where(rng.random(len(df)) < df["winner"], "a", "b")
    df.loc[rng.random(len(df)) < 0.5, "human"] = None
    out = compare_leaderboards(df, judge_winner="judge", human_winner="human", n_boot=50)
    pd.testing.assert_frame_equal(out.judge, leaderboard(df, winner="judge", n_boot=50))
    assert out.anchored is not None and out.correlation["kendall_tau"].iloc[0] > 0.5
    labelled = df.dropna(subset=["human"])
    first = labelled[(labelled["model_a"] == "m0") & (labelled["model_b"] == "m1")]
    second = labelled[(labelled["model_a"] == "m1") & (labelled["model_b"] == "m0")]
    p_first = np.concatenate([first["judge"], 1 - second["judge"]])
    h_first = np.concatenate([first["human"] == "a", second["human"] == "b"]).astype(float)
    row = out.pairs[(out.pairs["model_1"] == "m0") & (out.pairs["model_2"] == "m1")].iloc[0]
    assert row["agreement"] == pytest.approx(np.mean(p_first * h_first + (1 - p_first) * (1 - h_first)))
    assert row["judge_win_rate_1"] == pytest.approx(p_first.mean())


def alpaca_eval_annotations() -> list[dict]:
    """A small fixture in AlpacaEval's public annotation format (``annotations.json`` of a leaderboard
    entry: ``instruction``, ``output_1`` by ``generator_1`` (the baseline), ``output_2`` by
    ``generator_2`` (the model), ``annotator``, and the continuous ``preference`` in [1, 2]: 1 the
    baseline preferred, 2 the model, in between the logprob-weighted probability plus one; 0 an
    old-style draw). We cannot download AlpacaEval's files here, so these rows are made up in that
    format, not copied from it."""
    rows = []
    prefs = {"model-x": [1.93, 1.12, 2.0, 1.5, 1.71, 1.04, 1.88, 0], "model-y": [1.21, 1.0, 1.36, 1.58, 1.09, 1.44,
                                                                                1.67, 1.02]}
    for generator, values in prefs.items():
        for k, pref in enumerate(values):
            rows.append({"instruction": f"Task {k}: explain something.", "output_1": "A baseline answer " * (3 + k),
                         "generator_1": "gpt4_1106_preview", "output_2": f"{generator} answers " * (2 + 2 * k % 5),
                         "generator_2": generator, "annotator": "weighted_alpaca_eval_gpt4_turbo",
                         "preference": pref})
    return rows


def test_alpaca_evals_continuous_win_rate_is_reproduced():
    annotations = pd.DataFrame(alpaca_eval_annotations())
    # AlpacaEval (alpaca_eval.metrics.get_winrate, AbsoluteScoringRule): 0 is a draw (1.5), win rate = mean(p - 1)
    pref = annotations["preference"].replace(0, 1.5)
    expected = (pref - 1).groupby(annotations["generator_2"]).mean() * 100
    frame = annotations.assign(p=pref - 1, length_a=annotations["output_2"].str.len(),
                               length_b=annotations["output_1"].str.len())
    with warnings.catch_warnings():  # eight rows per model: the GLM may need its penalised fallback
        warnings.simplefilter("ignore", RuntimeWarning)
        out = length_controlled_win_rate(frame, model="generator_2", baseline_model="generator_1", winner="p",
                                         n_boot=0)
    got = out.set_index("model")["win_rate"] * 100
    np.testing.assert_allclose(got.loc[expected.index], expected, rtol=0, atol=1e-12)
    board = stats_leaderboard(frame, model_a="generator_2", model_b="generator_1", winner="p", n_boot=0)
    assert board.set_index("model").loc["gpt4_1106_preview", "win_rate"] == pytest.approx(1 - (pref - 1).mean())


# -- judge cards and the pairwise report ---------------------------------------------------------------

CITIES = [("France", "Paris", "Lyon"), ("Italy", "Rome", "Milan"), ("Spain", "Madrid", "Seville"),
          ("Norway", "Oslo", "Bergen"), ("Japan", "Tokyo", "Osaka"), ("Peru", "Lima", "Cusco")]


def bold_pairs(n: int = 240) -> list[dict]:
    """Three models answering capital questions; answers carry bold text at random. People prefer
    the right capital (a tie when both or neither are right) and never look at the bold."""
    rng = np.random.default_rng(11)
    skill = {"strong": 0.9, "mid": 0.5, "weak": 0.1}
    names = list(skill)
    rows = []
    for i in range(n):
        ma, mb = names[i % 3], names[(i + 1 + (i // 3) % 2) % 3]
        country, right, wrong = CITIES[i % len(CITIES)]

        def say(model: str, right: str = right, wrong: str = wrong) -> tuple[str, bool]:
            ok = rng.random() < skill[model]
            city = right if ok else wrong
            filler = " ".join(["indeed"] * int(rng.integers(0, 6)))
            bold = "".join(f" **note {k}**" for k in range(int(rng.poisson(0.8))))
            return f"The capital is {city}. {filler}{bold}".strip(), ok

        a, ok_a = say(ma)
        b, ok_b = say(mb)
        rows.append({"id": f"q{i}", "prompt": f"What is the capital of {country}? (capital: {right})",
                     "candidate_a": a, "candidate_b": b, "model_a": ma, "model_b": mb,
                     "human": "tie" if ok_a == ok_b else ("a" if ok_a else "b")})
    return rows


def likes_bold(prompt: str) -> str:
    """Prefers the answer with more bold spans (now and then, by a hash of the pair, the other one), and
    otherwise the one naming the capital."""
    a = re.search(r"<<<ANSWER A [^>]*>>>\n(.*?)\n<<<END ANSWER A", prompt, re.S)[1]
    b = re.search(r"<<<ANSWER B [^>]*>>>\n(.*?)\n<<<END ANSWER B", prompt, re.S)[1]
    ref = re.search(r"\(capital: (\w+)\)", prompt)[1]
    bold_a, bold_b = a.count("**"), b.count("**")
    if bold_a != bold_b:
        pick_a = bold_a > bold_b
        if zlib.crc32("|".join(sorted((a, b))).encode()) % 4 == 0:
            pick_a = not pick_a
        winner = "A" if pick_a else "B"
    else:
        winner = "tie" if (ref in a) == (ref in b) else ("A" if ref in a else "B")
    return json.dumps({"notes": "looked", "winner": winner})


def test_judge_cards_and_the_report_show_what_a_judge_rewards(tmp_path):
    from llm_connect.adapters import OpenAICompatibleAdapter
    from llm_connect.cards import cards_frame
    from llm_connect.cli import main
    from llm_connect.grading import PairwiseJudge
    from llm_connect.testing import LoopbackServer

    rows = bold_pairs()
    data = tmp_path / "pairs.jsonl"
    pd.DataFrame(rows).to_json(data, orient="records", lines=True)
    with LoopbackServer(reply=likes_bold) as server:
        judge = PairwiseJudge(OpenAICompatibleAdapter("judge-1", base_url=server.base_url), grader_id="bold-lover")
        report = calibrate({"bold-lover": judge}, rows, pairwise=True, n_boot=200, progress=False)
        code = main(["calibrate", str(data), "--out", str(tmp_path / "cli"), "--pairwise", "--llm", "openai:judge-1",
                     "--base-url", server.base_url, "--n-boot", "50", "--no-progress", "--no-cache"])
    assert code == 0
    page = (tmp_path / "cli" / "report.html").read_text(encoding="utf-8")
    assert "Style-controlled leaderboards" in page and "rank change" in page and "this judge pays" in page
    assert "this judge pays" in pd.read_csv(tmp_path / "cli" / "cards.csv")["rewards"].iloc[0]
    effects = report.style_effects()
    assert list(effects) == ["human", "bold-lover"]
    judge_bold = effects["bold-lover"].set_index("feature").loc["bold"]
    people_bold = effects["human"].set_index("feature").loc["bold"]
    assert judge_bold["low"] > 0 and people_bold["low"] < 0 < people_bold["high"]
    assert judge_bold["coefficient"] > people_bold["coefficient"] + 200
    card = report.judge_cards()[0]
    line = card.style["line"]
    assert line.startswith("this judge pays ") and "Elo for bold text" in line and "; people pay " in line
    assert card.style["features"][0]["feature"] == "bold" and card.style["models"] is True
    assert cards_frame([card])["rewards"].iloc[0] == line
    assert "rewards besides quality" in card._repr_html_()
    again = type(card).from_dict(json.loads(json.dumps(card.to_dict())))
    assert again.style["line"] == line
    html = str(report.html(plots=False))
    assert "What the judges reward besides quality" in html and "this judge pays" in html
    assert "Style-controlled leaderboards" in html and "rank change" in html and "What human pays for style" in html
    boards = report.style_leaderboards()
    assert list(boards) == ["human", "bold-lover"]
    b = battle_outcomes(report, winner="bold-lover", texts=True)
    assert list(b.columns) == ["model_a", "model_b", "winner", "response_a", "response_b"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 'headers' and 'lists' are constant here: dropped, and said
        direct = leaderboard(b, n_boot=200, seed=report.seed, style=True)
    pd.testing.assert_frame_equal(direct, boards["bold-lover"])


# -- the command line ------------------------------------------------------------------------------------


def test_cli_leaderboard_style_prints_both_boards_and_the_rank_change(tmp_path, capsys):
    from llm_connect.cli import main

    df = style_battles(800, 12, strengths={"terse": 0.4, "plain": 0.2, "verbose": 0.0, "fancy": -0.2})
    path = tmp_path / "battles.jsonl"
    df.to_json(path, orient="records", lines=True)
    out = tmp_path / "out"
    assert main(["leaderboard", str(path), "--style", "--n-boot", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "raw beside style-controlled" in printed and "what style is worth" in printed
    both = pd.read_csv(out / "leaderboard_style.csv")
    assert list(both.columns[:5]) == ["model", "rating", "rating_low", "rating_high", "rank"]
    assert (both["rank_change"] == both["rank"] - both["style_rank"]).all()
    expected = leaderboard(df, n_boot=50, style=True)
    got = both.set_index("model")["style_rating"]
    np.testing.assert_allclose(got.loc[expected["model"]], expected["rating"])
    style = pd.read_csv(out / "style.csv")
    assert style["feature"].tolist() == list(STYLE_FEATURES)
    assert pd.read_csv(out / "leaderboard.csv")["rating"].tolist() == pytest.approx(
        leaderboard(df, n_boot=50)["rating"].tolist())
    df.rename(columns={"response_a": "left", "response_b": "right"}).to_json(path, orient="records", lines=True)
    assert main(["leaderboard", str(path), "--style", "bold", "--text-a", "left", "--text-b", "right",
                 "--n-boot", "0", "--out", str(out)]) == 0
    assert pd.read_csv(out / "style.csv")["feature"].tolist() == ["bold"]
    with pytest.raises(SystemExit) as exc:
        main(["leaderboard", str(path), "--style", "--n-boot", "0", "--out", str(out)])
    assert exc.value.code == 2 and "--text-a and --text-b" in capsys.readouterr().err


def test_text_features():
    f = text_features(["## Title\n\n- **bold** item\n\n`code`", "plain answer here", None], ["a b", "", "x"])
    assert f["candidate_words"].tolist() == [6, 3, 0]
    assert f["candidate_chars"].tolist()[1] == len("plain answer here")
    assert f[["has_header", "has_list", "has_bold", "has_code"]].iloc[0].tolist() == [True, True, True, True]
    assert f["markdown_features"].tolist() == [4, 0, 0]
    assert f["length_ratio"].iloc[0] == 3.0 and math.isnan(f["length_ratio"].iloc[1])
    assert text_features(["1. first\n2) second"])["has_list"].tolist() == [True]
    assert text_features(["no - list - here"])["has_list"].tolist() == [False]


def test_text_features_read_the_format_as_the_arena_style_counts():
    """One reading of an answer's markdown: a calibration run's flags are the style counts above 0 (a header or
    a list inside a fenced code block is code, not format)."""
    texts = ["# Title", "```\n# not a header\n- nor a list\n```", "__bold__ and 1. inline", "  - indented item",
             "1) numbered"]
    flags = text_features(texts)[["has_header", "has_list", "has_bold"]].to_numpy()
    assert (flags == (style_counts(texts)[["headers", "lists", "bold"]].to_numpy() > 0)).all()
    assert flags[1].tolist() == [False, False, False] and text_features(texts)["has_code"].tolist()[1]
