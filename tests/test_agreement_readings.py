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


def test_alpha_columns_say_their_level_and_old_names_still_read():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 11, 60) / 10, rng.integers(0, 11, 60) / 10
    pair = pair_agreement(a, b, n_boot=0)
    row = pair.row()
    assert "alpha_interval" in row and "alpha_nominal" in row and "krippendorff_alpha" not in row
    assert row["alpha_interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=np.vstack([a, b]), level_of_measurement="interval"))
    assert row["alpha_nominal"] == pytest.approx(krippendorff.alpha(
        reliability_data=np.vstack([a >= 0.5, b >= 0.5]).astype(float), level_of_measurement="nominal"))
    assert pair["krippendorff_alpha"] is pair["alpha_interval"]
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(a >= 0.5, b >= 0.5))
    assert not math.isnan(row["alpha_interval_low"]) or pair.n_boot == 0
