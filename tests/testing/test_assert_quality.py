"""assert_quality and the statistics of a quality gate (llm_connect.stats.gate): intervals checked against
statsmodels, scipy and ppi-python; verdicts; the items that settle an inconclusive gate, by simulation;
frames from judge_many with unscored and error rows. The pytest plugin is tested in test_pytest_plugin.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from llm_connect import LLMJudge, judge_many
from llm_connect.errors import LLMConnectError, QualityInconclusive, QualityNotMet, ServerError, ValidationError
from llm_connect.stats.gate import MIN_BOOTSTRAP, ScoreInterval, gate_verdict, items_to_settle, score_interval
from llm_connect.testing import QualityCheck, QualityInconclusiveWarning, ScriptedAdapter, assert_quality


def binary(k: int, n: int) -> list[bool]:
    return [True] * k + [False] * (n - k)


# -- the intervals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (7, 10), (58, 60), (1, 1), (130, 200), (3, 500)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_the_exact_interval_of_01_scores_is_statsmodels_and_scipy_clopper_pearson(k, n, confidence):
    from scipy.stats import binomtest
    from statsmodels.stats.proportion import proportion_confint

    iv = score_interval(binary(k, n), confidence=confidence)
    low, high = proportion_confint(k, n, alpha=1 - confidence, method="beta")
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    assert iv.method == "clopper-pearson"
    assert (iv.n, iv.mean) == (n, k / n)
    assert iv.low == pytest.approx(low, abs=1e-12) == pytest.approx(ci.low, abs=1e-12)
    assert iv.high == pytest.approx(high, abs=1e-12) == pytest.approx(ci.high, abs=1e-12)


@pytest.mark.parametrize(("draw", "n"), [("beta", 25), ("likert", 60), ("beta", 400)])
def test_the_bootstrap_of_continuous_scores_is_scipys_bca(draw, n):
    from scipy.stats import bootstrap

    rng = np.random.default_rng(n)
    x = rng.beta(5, 2, size=n) if draw == "beta" else rng.integers(0, 5, size=n) / 4
    iv = score_interval(x)
    ref = bootstrap((x,), np.mean, method="BCa", n_resamples=9_999, vectorized=True,
                    random_state=np.random.default_rng(12345)).confidence_interval
    assert iv.method == "bootstrap-bca"
    assert iv.mean == pytest.approx(x.mean())
    width = ref.high - ref.low  # the two differ only by Monte Carlo error (different resamples)
    assert abs(iv.low - ref.low) < 0.03 * width + 1e-3
    assert abs(iv.high - ref.high) < 0.03 * width + 1e-3
    assert score_interval(x) == iv  # seeded: the same scores give the same interval


def test_few_or_equal_continuous_scores_get_hoeffdings_bound_not_a_zero_width_bootstrap():
    half = math.sqrt(math.log(2 / 0.05) / (2 * 30))
    equal = score_interval([0.7] * 30)
    assert equal.method == "hoeffding"
    assert (equal.low, equal.high) == (pytest.approx(0.7 - half), pytest.approx(min(1.0, 0.7 + half)))
    few = score_interval(np.linspace(0.6, 0.9, MIN_BOOTSTRAP - 1))
    assert few.method == "hoeffding" and few.high - few.low > 0.5
    # two passes out of two are not proof of a pass rate of 1
    two = score_interval([1, 1])
    assert two.method == "clopper-pearson" and two.low == pytest.approx(0.025 ** 0.5)


def test_the_gate_passes_a_feature_below_the_threshold_rarely():
    """Simulated: a pass rate of 0.75 gated at 0.8 passes in at most ~2.5% of runs (one-sided alpha)."""
    rng = np.random.default_rng(7)
    passed = 0
    for _ in range(1000):
        k = int(rng.binomial(200, 0.75))
        iv = score_interval(binary(k, 200))
        passed += gate_verdict(iv.low, iv.high, 0.8) == "pass"
    assert passed <= 25


def test_the_bca_interval_covers_the_mean_of_skewed_scores():
    rng = np.random.default_rng(11)
    true_mean = 5 / 7  # Beta(5, 2)
    covered = sum(
        (iv := score_interval(rng.beta(5, 2, size=60), seed=i)).low <= true_mean <= iv.high for i in range(150)
    )
    assert covered >= 0.9 * 150


# -- the verdicts --------------------------------------------------------------------------------------


def test_pass_returns_the_check():
    check = assert_quality(binary(58, 60), at_least=0.8)
    assert isinstance(check, QualityCheck) and check.passed and bool(check)
    assert (check.n, check.verdict, check.method, check.at_least, check.confidence) == (
        60, "pass", "clopper-pearson", 0.8, 0.95)
    assert check.low >= 0.8 and check.mean == pytest.approx(58 / 60)
    assert "Clopper–Pearson" in check.message
    json.dumps(check.as_dict())


def test_fail_raises_quality_not_met_an_assertion_error_naming_the_method():
    with pytest.raises(QualityNotMet) as info:
        assert_quality([0.3, 0.4, 0.5] * 10, at_least=0.8)
    assert isinstance(info.value, AssertionError) and isinstance(info.value, LLMConnectError)
    check = info.value.check
    assert check.verdict == "fail" and check.high < 0.8 and check.method == "bootstrap-bca"
    assert "BCa bootstrap" in str(info.value) and "0.8" in str(info.value)


def test_inconclusive_raises_and_says_how_many_more_items_would_settle_it():
    with pytest.raises(QualityInconclusive) as info:
        assert_quality(binary(9, 10), at_least=0.8)
    check = info.value.check
    assert isinstance(info.value, AssertionError)
    assert check.verdict == "inconclusive" and check.low < 0.8 <= check.high
    assert check.more_items == items_to_settle(score_interval(binary(9, 10)), 0.8) - 10 > 0
    assert f"about {check.more_items} more items ({check.more_items + 10} in all)" in str(info.value)


def test_inconclusive_pass_warns_and_skip_skips():
    with pytest.warns(QualityInconclusiveWarning, match="more items"):
        check = assert_quality(binary(9, 10), at_least=0.8, inconclusive="pass")
    assert check.verdict == "inconclusive"
    with pytest.raises(pytest.skip.Exception, match="more items"):
        assert_quality(binary(9, 10), at_least=0.8, inconclusive="skip")


def test_outside_pytest_skip_passes_with_a_warning_as_in_a_notebook():
    code = (
        "import warnings, json\n"
        "from llm_connect.testing import assert_quality\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    check = assert_quality([True] * 9 + [False], at_least=0.8, inconclusive='skip')\n"
        "print(json.dumps([check.verdict, [w.category.__name__ for w in seen]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["inconclusive", ["QualityInconclusiveWarning"]]


def test_a_mean_on_the_threshold_says_more_items_would_not_settle_it():
    with pytest.raises(QualityInconclusive, match="more items would not settle it"):
        assert_quality(binary(8, 10), at_least=0.8)


def _settled(draw, at_least: float, n: int, expect: str, *, starts: int, sims: int, seed: int) -> list[float]:
    """For ``starts`` inconclusive samples of ``n``: the share of ``sims`` draws of the suggested further items
    after which the gate gives the true verdict ``expect``."""
    rng = np.random.default_rng(seed)
    rates: list[float] = []
    while len(rates) < starts:
        x = draw(rng, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", QualityInconclusiveWarning)
            check = assert_quality(x, at_least=at_least, inconclusive="pass")
        if check.verdict != "inconclusive" or check.more_items is None:
            continue
        ok = 0
        for _ in range(sims):
            y = score_interval(np.concatenate([x, draw(rng, check.more_items)]))
            ok += gate_verdict(y.low, y.high, at_least) == expect
        rates.append(ok / sims)
    return rates


@pytest.mark.parametrize(("rate", "expect"), [(0.9, "pass"), (0.7, "fail")])
def test_the_suggested_items_settle_an_inconclusive_pass_rate_most_of_the_time(rate, expect):
    rates = _settled(lambda rng, n: rng.random(n) < rate, 0.8, 40, expect, starts=4, sims=30, seed=3)
    assert sum(rates) / len(rates) >= 0.7, rates


@pytest.mark.parametrize("n", [12, 30])  # Hoeffding's bound, then the bootstrap
def test_the_suggested_items_settle_an_inconclusive_mean_score_most_of_the_time(n):
    rates = _settled(lambda rng, n: rng.beta(9, 1.2, size=n), 0.8, n, "pass", starts=3, sims=12, seed=5)
    assert sum(rates) / len(rates) >= 0.7, rates


def test_items_to_settle_finds_the_size_whose_half_width_clears_the_threshold():
    # a pass rate of 0.9 against 0.8: the exact interval of 0.9 N successes in N loses 0.1 z/(z + z_0.8) at N
    total = items_to_settle(score_interval(binary(9, 10)), 0.8)
    z, zp = 1.959964, 0.841621
    for size, settles in ((total, True), (total - 1, False)):
        low = score_interval(binary(round(0.9 * size), size)).low if (0.9 * size).is_integer() else None
        if low is not None:
            assert (0.9 - low <= 0.1 * z / (z + zp) + 1e-3) == settles
    # scaled as 1/sqrt(N) from a bootstrap's half-width: h = 0.1 at n = 100, d = 0.05, power 0.5: (h/d)^2 n = 400
    wide = ScoreInterval(100, 0.85, 0.75, 0.95, 0.95, "bootstrap-bca", 0.3)
    assert items_to_settle(wide, 0.8, power=0.5) == 400
    assert items_to_settle(wide, 0.8) > 400  # 80% power asks for more
    # a mean exactly on the threshold: no number of items settles it
    assert items_to_settle(ScoreInterval(100, 0.8, 0.7, 0.9, 0.95, "bootstrap-bca", 0.3), 0.8) is None


# -- what it reads ------------------------------------------------------------------------------------------


def _judged(replies: list) -> pd.DataFrame:
    judge = LLMJudge(ScriptedAdapter(replies))
    n = len(replies)
    items = pd.DataFrame({"prompt": [f"q{i}" for i in range(n)], "baseline": ["a"] * n, "candidate": ["a"] * n})
    return judge_many(judge, items, progress=False, concurrency=1)


def test_a_judge_many_frame_counts_its_scored_rows_and_shows_the_others():
    frame = _judged(['{"quality_score": 1.0}'] * 30 + ["no verdict here", ServerError("the provider answered 503")])
    check = assert_quality(frame, at_least=0.8)
    assert (check.n, check.n_unscored, check.n_error) == (30, 1, 1)
    assert check.mean == 1.0  # the unscored and error rows are not zeros
    assert "not counted: 1 unscored, 1 error (first: ServerError: the provider answered 503)" in check.message


def test_a_frame_with_no_scored_row_fails_with_its_first_error():
    frame = _judged([ServerError("the provider answered 503"), "no verdict here"])
    with pytest.raises(QualityNotMet, match=r"no scored item.*ServerError: the provider answered 503"):
        assert_quality(frame, at_least=0.5)


def test_a_frame_read_with_to_pandas_as_a_ray_dataset_is():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"quality_score": [1.0] * 40 + [None], "status": ["scored"] * 40 + ["unscored"]})
    check = assert_quality(table, at_least=0.8)
    assert (check.n, check.n_unscored, check.verdict) == (40, 1, "pass")


def test_missing_scores_are_counted_never_read_as_zero():
    check = assert_quality(pd.Series([1.0] * 40 + [np.nan] * 10), at_least=0.85)
    assert (check.n, check.n_unscored, check.mean) == (40, 10, 1.0)
    check = assert_quality([True] * 40 + [None] * 5, at_least=0.85)
    assert (check.n, check.n_unscored) == (40, 5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"scores": ["yes", "no"]}, "numbers in 0..1"),
    ({"scores": [0.5, 3.0]}, r"in 0\.\.1, got 3\.0 at position 1"),
    ({"scores": "0.9"}, "sequence of numbers"),
    ({"scores": []}, "no scores"),
    ({"at_least": 80}, "did you mean 0.8"),
    ({"inconclusive": "maybe"}, "inconclusive must be one of"),
    ({"confidence": 95}, "did you mean 0.95"),
    ({"human": [1, None]}, "2 labels for 3 items"),
    ({"human": "label"}, "not a DataFrame"),
])
def test_bad_input_is_a_validation_error_saying_what_to_do(kwargs, match):
    args = {"scores": [0.9, 0.8, 0.7], "at_least": 0.8, **kwargs}
    with pytest.raises(ValidationError, match=match):
        assert_quality(args.pop("scores"), **args)


# -- with people's labels: PPI++ -------------------------------------------------------------------------------


def _biased_judge(seed: int = 0, n: int = 2000, labelled: int = 300) -> pd.DataFrame:
    """People pass 70% of answers; the judge passes every answer they pass and half of the others (mean 0.85)."""
    rng = np.random.default_rng(seed)
    human = (rng.random(n) < 0.7).astype(float)
    judge = np.where(human == 1, 1.0, (rng.random(n) < 0.5).astype(float))
    labels = np.full(n, np.nan)
    chosen = rng.choice(n, size=labelled, replace=False)
    labels[chosen] = human[chosen]
    return pd.DataFrame({"quality_score": judge, "status": "scored", "human": labels})


def test_with_human_labels_the_interval_is_ppi_pythons_ppi_plus_plus():
    ppi_py = pytest.importorskip("ppi_py")
    frame = _biased_judge()
    check = assert_quality(frame, at_least=0.5, human="human")
    labelled = frame["human"].notna().to_numpy()
    y, yhat = frame["human"][labelled].to_numpy(), frame["quality_score"][labelled].to_numpy()
    yhat_unlabelled = frame["quality_score"][~labelled].to_numpy()
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_unlabelled, alpha=0.05)
    assert check.method == "ppi++" and (check.n, check.n_labelled) == (2000, 300)
    assert (check.low, check.high) == (pytest.approx(float(low[0]), abs=1e-9), pytest.approx(float(high[0]), abs=1e-9))
    assert "PPI++" in check.message


def test_a_biased_judge_with_a_few_labels_gates_on_what_people_say():
    frame = _biased_judge()
    assert assert_quality(frame, at_least=0.8).verdict == "pass"  # the judge alone: 0.85, wrongly "good enough"
    with pytest.raises(QualityNotMet) as info:
        assert_quality(frame, at_least=0.8, human="human")  # people: 0.70
    assert info.value.check.high < 0.8
    labels = frame["human"].tolist()  # the labels may be a list beside the scores too
    with pytest.raises(QualityNotMet):
        assert_quality(frame["quality_score"].tolist(), at_least=0.8, human=labels)


def test_human_labels_on_no_scored_item_are_refused():
    frame = pd.DataFrame({"quality_score": [0.9] * 30, "status": "scored", "human": [None] * 30})
    with pytest.raises(ValidationError, match="label more of the scored items"):
        assert_quality(frame, at_least=0.8, human="human")


def test_the_check_shows_itself_in_a_notebook_escaped():
    frame = pd.DataFrame({"quality_score": [1.0] * 30 + [np.nan], "status": ["scored"] * 30 + ["error"],
                          "error": [None] * 30 + ["<script>alert(1)</script>"]})
    html = assert_quality(frame, at_least=0.8)._repr_html_()
    assert "pass" in html and "Clopper" in html
    assert "&lt;script&gt;" in html and "<script>" not in html
