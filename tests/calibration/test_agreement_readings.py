"""The readings of agreement: verdict counts named from the judge's side, alpha columns that say their
level, per-judge thresholds (cross-validated ``best``) and the flags on weak judges.

Data is small and written here; every statistic is checked against scikit-learn or ``krippendorff``.
"""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from llm_connect.calibration import agreement_table, pair_agreement
from llm_connect.calibration._agreement import COUNT_COLUMNS, HUMAN_COUNT_COLUMNS


def _scores() -> pd.DataFrame:
    # 10 items: the judge says yes to items 0-5, people to items 2-7 (and item 9).
    judge = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    human = [0, 0, 1, 1, 1, 1, 1, 1, 0, 1]
    other = [1, 0, 1, 0, 1, 0, 1, 0, 1, 0]
    # people first in the frame: the table must still read the judge against them
    return pd.DataFrame({"score_human": human, "score_exact": judge, "score_llm": other}, dtype=float)


def test_counts_are_named_from_the_judge_side_against_people():
    table = agreement_table(_scores(), n_boot=0)
    frame = table.frame.set_index(["judge_a", "judge_b"])
    assert ("exact", "human") in frame.index and ("human", "exact") not in frame.index
    row = frame.loc[("exact", "human")]
    # sklearn's confusion matrix with people as the truth (rows) and the judge as the prediction (columns)
    (tn, fp), (fn, tp) = confusion_matrix(_scores()["score_human"], _scores()["score_exact"])
    assert row["judge_yes_human_no"] == fp == 2  # the judge accepted, people rejected
    assert row["judge_no_human_yes"] == fn == 3  # the judge rejected, people accepted
    assert row["judge_yes_human_yes"] == tp == 4 and row["judge_no_human_no"] == tn == 1
    for ref, human in zip(COUNT_COLUMNS, HUMAN_COUNT_COLUMNS, strict=True):
        assert row[ref] == row[human]
    # a row of two machine judges has the judge-vs-reference counts, and blank human ones
    machine = frame.loc[("exact", "llm")]
    assert all(pd.isna(machine[c]) for c in HUMAN_COUNT_COLUMNS)
    assert machine["judge_yes_ref_no"] == 3 and machine["judge_no_ref_yes"] == 2
    assert not {"tn", "fp", "fn", "tp"} & set(table.frame.columns)


def test_annotators_are_the_reference_side_and_their_pair_is_the_ceiling():
    frame = _scores().assign(score_a2=[0, 0, 1, 1, 1, 0, 1, 1, 0, 1.0])
    table = agreement_table(frame, annotators=["human", "a2"], n_boot=0).frame.set_index(["judge_a", "judge_b"])
    assert ("llm", "a2") in table.index and ("exact", "a2") in table.index
    assert bool(table.loc[("human", "a2"), "ceiling"])
    assert table.loc[("human", "a2"), "judge_yes_human_no"] == 1  # item 5: human yes, a2 no


def test_alpha_columns_say_their_level_and_only_their_names_read():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 11, 60) / 10, rng.integers(0, 11, 60) / 10
    pair = pair_agreement(a, b, n_boot=0)
    row = pair.row()
    assert "alpha_interval" in row and "alpha_nominal" in row and "krippendorff_alpha" not in row
    assert row["alpha_interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=np.vstack([a, b]), level_of_measurement="interval"))
    assert row["alpha_nominal"] == pytest.approx(krippendorff.alpha(
        reliability_data=np.vstack([a >= 0.5, b >= 0.5]).astype(float), level_of_measurement="nominal"))
    assert pair["alpha_interval"] is pair.estimates["alpha_interval"]
    with pytest.raises(KeyError):  # no second name for a statistic
        pair["krippendorff_alpha"]
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(a >= 0.5, b >= 0.5))
    assert not math.isnan(row["alpha_interval_low"]) or pair.n_boot == 0


def _shifted_judge(n: int = 200, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """A judge whose scores separate people's verdicts best near 0.3, not at 0.5."""
    rng = np.random.default_rng(seed)
    human = (rng.random(n) < 0.5).astype(float)
    judge = np.clip(np.where(human == 1, 0.4, 0.2) + rng.normal(0, 0.08, n), 0, 1)
    return judge, human


def test_best_threshold_is_chosen_by_cross_validation_and_reported_out_of_fold():
    from llm_connect.calibration._agreement import choose_threshold

    judge, human = _shifted_judge()
    choice = choose_threshold(judge, human, seed=0)
    assert 0.2 < choice.value < 0.4 and len(choice.fold_thresholds) == 5
    # the out-of-fold verdicts: each fold judged at the threshold chosen on the other folds, by hand
    perm = np.random.default_rng(0).permutation(len(judge))
    grid = np.arange(1, 101) / 100
    for fold, t in zip(np.array_split(perm, 5), choice.fold_thresholds, strict=True):
        train = np.setdiff1d(np.arange(len(judge)), fold)
        kappas = [cohen_kappa_score(judge[train] >= g, human[train] >= 0.5) for g in grid]
        assert max(kappas) == pytest.approx(cohen_kappa_score(judge[train] >= t, human[train] >= 0.5))
        assert (choice.verdicts[fold] == (judge[fold] >= t)).all()
    table = agreement_table({"judge": judge, "human": human}, thresholds={"judge": "best"}, n_boot=100)
    row = table.frame.iloc[0]
    assert row["threshold"] == choice.value and table.thresholds["judge"] == choice.value
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(choice.verdicts, human >= 0.5))
    in_sample = cohen_kappa_score(judge >= choice.value, human >= 0.5)
    assert row["cohen_kappa"] <= in_sample + 1e-12  # never the optimistic in-sample figure
    assert "5-fold cross-validation" in row["threshold_selection"] and len(row["fold_thresholds"].split()) == 5
    assert row["judge_yes_human_no"] == int((choice.verdicts & (human == 0)).sum())


def test_best_threshold_needs_labels_and_enough_rows():
    from llm_connect.calibration._agreement import choose_threshold

    with pytest.raises(ValueError, match="needs human labels"):
        agreement_table({"a": [0.1, 0.9], "b": [0.2, 0.8]}, thresholds={"a": "best"}, labels=[], n_boot=0)
    with pytest.raises(ValueError, match="number or 'best'"):
        agreement_table({"a": [0.1, 0.9], "human": [0, 1]}, thresholds={"a": "high"}, n_boot=0)
    few = choose_threshold([0.1, 0.9, 0.4], [0, 1, 0], fallback=0.5)
    assert few.value == 0.5 and few.verdicts is None and "only 3 labelled rows" in few.reason
    table = agreement_table({"a": [0.1, 0.9, 0.4], "human": [0, 1, 0]}, thresholds={"a": "best"}, n_boot=0)
    assert "best not chosen" in table.frame.iloc[0]["threshold_selection"]


def test_weak_judges_are_flagged_with_the_reason():
    from llm_connect.calibration import card_from_scores
    from llm_connect.cards import MAX_YES_RATE, weak_judge_reasons

    rng = np.random.default_rng(4)
    human = (rng.random(60) < 0.5).astype(float)
    says_yes = np.where(rng.random(60) < 0.98, 1.0, 0.0)
    says_yes[:2] = 0.0  # a couple of no's keeps kappa defined
    card = card_from_scores(says_yes, human, grader_id="yes-man", n_boot=200)
    assert card.yes_rate == pytest.approx(np.mean(says_yes >= 0.5)) and card.yes_rate > MAX_YES_RATE
    assert "says yes to" in card.weak and "flagged weak" in card.verdict
    coin = (rng.random(60) < 0.5).astype(float)  # unrelated to people: its kappa interval holds 0
    random_card = card_from_scores(coin, human, grader_id="coin", n_boot=200)
    assert random_card.kappa_low <= 0 <= random_card.kappa_high
    assert "includes 0" in random_card.weak and random_card.to_dict()["weak"] == random_card.weak
    good = card_from_scores(human, human, grader_id="oracle", n_boot=200)
    assert good.weak == "" and "flagged" not in good.verdict
    assert weak_judge_reasons(kappa_low=0.1, kappa_high=0.5, yes_rate=0.5) == ""
    assert weak_judge_reasons(kappa_low=-0.1, kappa_high=0.5, yes_rate=0.5, people=False) == ""


def test_cli_prints_weak_judges_and_the_report_shows_them(tmp_path, capsys):
    from llm_connect.cli import main

    rows = [{"id": str(i), "prompt": f"q{i}", "baseline": "paris", "candidate": "paris",
             "human": "yes" if i % 3 else "no"} for i in range(30)]
    data = tmp_path / "items.csv"
    pd.DataFrame(rows).to_csv(data, index=False)
    code = main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--probes", "none",
                 "--n-boot", "50", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 0
    weak_line = next(line for line in printed.splitlines() if line.strip().startswith("WEAK JUDGE exact-match:"))
    assert "it says yes to 100% of the items it scored" in weak_line and "includes 0" in weak_line
    html = (tmp_path / "o" / "report.html").read_text(encoding="utf-8")
    assert "flagged weak" in html and "says yes to 100%" in html
