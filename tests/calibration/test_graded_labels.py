"""Graded labels on their own scale: parse_labels with a scale, the binning rule, weighted kappa and
ordinal/interval alpha (against scikit-learn and krippendorff), and SummEval-style grouped correlations
(against scipy on the same per-group data). Small data written here, seeded."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from llm_connect.calibration import agreement_table, pair_agreement
from llm_connect.calibration._agreement import grouped_correlation, to_scale
from llm_connect.errors import ValidationError
from llm_connect.stats.labels import parse_labels


def test_ratings_are_read_on_a_declared_scale_and_refused_without_one():
    assert parse_labels(["1", 5, 3.0, None, ""], scale=(1, 5)).tolist()[:3] == [0.0, 1.0, 0.5]
    assert parse_labels([1, 5], scale="1-5").tolist() == [0.0, 1.0]
    with pytest.raises(ValidationError, match=r"scale=\(1, 5\)") as info:  # the library's words; the CLI says --scale
        parse_labels([1, 2, 5, 4], column="coherence")
    assert info.value.scale == (1, 5) and "--scale" not in str(info.value)
    with pytest.raises(ValidationError, match="outside the scale 1-5"):
        parse_labels([1, 7], scale=(1, 5))
    with pytest.raises(ValidationError, match="LOW-HIGH"):
        parse_labels([1], scale="five")
    with pytest.raises(ValidationError, match="low < high"):
        parse_labels([1], scale=(5, 1))


def test_binning_rule_puts_scores_on_the_nearest_step():
    got = to_scale([0.0, 0.124, 0.125, 0.5, 0.874, 0.875, 1.0], (1, 5))
    assert got.tolist() == [1, 1, 2, 3, 4, 5, 5]
    ratings = np.arange(1, 6)
    assert to_scale((ratings - 1) / 4, (1, 5)).tolist() == ratings.tolist()  # a label comes back to its rating


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graded_statistics_match_sklearn_and_krippendorff(seed):
    rng = np.random.default_rng(seed)
    human = rng.choice([1, 2, 4, 5], 80)  # step 3 absent: weights still follow the scale's steps
    judge = np.clip((human - 1) / 4 + rng.normal(0, 0.25, 80), 0, 1)
    pair = pair_agreement(judge, parse_labels(human, scale=(1, 5)), scale=(1, 5), n_boot=200, seed=seed)
    binned = to_scale(judge, (1, 5))
    want_kappa = cohen_kappa_score(binned, human, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert pair["scale_kappa_quadratic"].value == pytest.approx(want_kappa)
    data = np.vstack([binned, human]).astype(float)
    for level in ("ordinal", "interval"):
        est = pair[f"scale_alpha_{level}"]
        assert est.value == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
        assert est.low <= est.value <= est.high
    assert pair["spearman"].value == pytest.approx(stats.spearmanr(judge, human).statistic)
    assert pair.row()["scale"] == "1-5"


def _summeval_like() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    quality = {"s1": 0.2, "s2": 0.5, "s3": 0.8, "s4": 0.6}
    for doc in range(6):
        for system, q in quality.items():
            human = int(np.clip(round(1 + 4 * q + rng.normal(0, 0.8)), 1, 5))
            rows.append({"doc": f"d{doc}", "system": system, "score_human": (human - 1) / 4,
                         "score_judge": float(np.clip(q + rng.normal(0, 0.2), 0, 1))})
    frame = pd.DataFrame(rows)
    frame.loc[3, "score_judge"] = math.nan  # one unscored row, dropped pair by pair
    return frame


def test_system_and_document_level_correlations_as_summeval_reports_them():
    frame = _summeval_like()
    paired = frame.dropna()
    system = grouped_correlation(frame, "judge", "human", group="system", level="system", method="kendall")
    means = paired.groupby("system")[["score_judge", "score_human"]].mean()
    assert system.value == pytest.approx(stats.kendalltau(means["score_judge"], means["score_human"]).statistic)
    assert system.n_groups == system.n_used == 4
    doc = grouped_correlation(frame, "score_judge", "score_human", group="doc", level="document", method="spearman")
    per = []
    for _, g in paired.groupby("doc"):
        if g["score_human"].nunique() > 1 and g["score_judge"].nunique() > 1:
            per.append(stats.spearmanr(g["score_judge"], g["score_human"]).statistic)
    assert doc.value == pytest.approx(np.mean(per)) and doc.n_used == len(per)
    single = grouped_correlation(frame.assign(one="x"), "judge", "human", group="one", level="system")
    assert math.isnan(single.value) and "need at least 2" in single.reason
    with pytest.raises(ValueError, match="level"):
        grouped_correlation(frame, "judge", "human", group="doc", level="corpus")


def test_several_human_dimensions_are_separate_targets_with_grouped_figures():
    frame = _summeval_like().rename(columns={"score_human": "score_coherence"})
    frame["score_relevance"] = frame["score_coherence"].iloc[::-1].to_numpy()
    table = agreement_table(frame, labels=["coherence", "relevance"], scale=(1, 5), n_boot=0,
                            groups={"system": "system", "document": "doc"})
    rows = table.frame.set_index(["judge_a", "judge_b"])
    assert {("judge", "coherence"), ("judge", "relevance"), ("coherence", "relevance")} <= set(rows.index)
    assert not rows["ceiling"].any()
    row = rows.loc[("judge", "coherence")]
    assert row["system_kendall"] == pytest.approx(
        grouped_correlation(frame, "judge", "coherence", group="system", level="system").value)
    assert row["n_systems"] == 4 and row["n_documents"] >= 1
    assert not math.isnan(row["scale_kappa_quadratic"])
    html = table._repr_html_()
    assert "ceiling" not in html and "qw-kappa (scale)" in html and "system_kendall" in html


def _graded_rows() -> list[dict]:
    """Summaries of 4 systems for 8 documents, rated 1-5 for coherence and relevance (written here)."""
    rng = np.random.default_rng(21)
    rows = []
    answers = {"sys-good": "the cat sat on the mat", "sys-ok": "the cat sat", "sys-bad": "a dog ran",
               "sys-empty": "nothing"}
    for doc in range(8):
        for system, answer in answers.items():
            quality = {"sys-good": 5, "sys-ok": 4, "sys-bad": 2, "sys-empty": 1}[system]
            rows.append({"id": f"{doc}-{system}", "prompt": f"summarise document {doc}",
                         "baseline": "the cat sat on the mat", "candidate": answer, "candidate_model": system,
                         "coherence": int(np.clip(quality + rng.integers(-1, 2), 1, 5)),
                         "relevance": int(np.clip(quality + rng.integers(-1, 2), 1, 5))})
    return rows


def test_cli_graded_dimensions_best_threshold_and_weak_flags(tmp_path, capsys):
    from llm_connect.cli import main

    data = tmp_path / "summaries.csv"
    pd.DataFrame(_graded_rows()).to_csv(data, index=False)
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--human",
                 "coherence,relevance", "--scale", "1-5", "--threshold", "exact=best", "--probes", "none",
                 "--n-boot", "100", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    agreement = pd.read_csv(out / "agreement.csv").set_index(["judge_a", "judge_b"])
    for target in ("coherence", "relevance"):
        row = agreement.loc[("exact-match", target)]
        assert row["scale"] == "1-5" and not math.isnan(row["scale_kappa_quadratic"])
        assert row["n_systems"] == 4 and row["n_documents"] == 8
    assert not agreement["ceiling"].any()
    best = agreement.loc[("exact-match", "coherence")]
    assert "5-fold cross-validation" in best["threshold_selection"]
    assert "threshold of exact-match" in printed and "qw-kappa" in printed
    assert "(ceiling)" not in printed and "WEAK JUDGE" not in printed


def test_cli_refuses_ratings_without_a_scale_and_bad_threshold_specs(tmp_path, capsys):
    from llm_connect.cli import main

    data = tmp_path / "summaries.csv"
    pd.DataFrame(_graded_rows()).to_csv(data, index=False)
    for extra, message in [
        ([], "--scale 1-5"),
        (["--scale", "1-5", "--threshold", "nobody=best"], "do not run"),
        (["--scale", "1-5", "--threshold", "exact=high"], "not a number"),
        (["--scale", "one-five"], "LOW-HIGH"),
        (["--doc-column", "prompt"], "go with --scale"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--human",
                  "coherence", "--probes", "none", "--no-progress", *extra])
        code = exc.value.code
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)


def test_per_judge_thresholds_and_scales_are_refused_on_pairwise_data(tmp_path, capsys):
    from llm_connect.cli import main

    pairs = tmp_path / "pairs.jsonl"
    pd.DataFrame([{"prompt": "q", "candidate_a": "x", "candidate_b": "y", "human": "a"}]).to_json(
        pairs, orient="records", lines=True)
    for extra in (["--threshold", "llm=0.6"], ["--scale", "1-5"]):
        with pytest.raises(SystemExit) as exc:
            main(["calibrate", str(pairs), "--out", str(tmp_path / "o"), "--no-progress", *extra])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "do not apply to pairwise data" in err and len(err.strip().splitlines()) == 1
