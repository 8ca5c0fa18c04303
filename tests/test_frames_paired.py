"""Human labels in the ledger, and the paired judge/human frame built from it (the estimates issue)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from llm_connect import ExactMatchJudge, QualityLedger, judge_many
from llm_connect.errors import ValidationError
from llm_connect.frames import ledger_frame, paired_frame, record_labels

ITEMS = [
    {"id": "q1", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Paris", "candidate_model": "m1"},
    {"id": "q2", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Milan", "candidate_model": "m1"},
    {"id": "q3", "prompt": "2+2?", "baseline": "4", "candidate": "4", "candidate_model": "m1"},
    {"id": "q1", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Lyon", "candidate_model": "m2"},
    {"id": "q2", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Rome", "candidate_model": "m2"},
]


@pytest.fixture
def ledger(tmp_path):
    led = QualityLedger(tmp_path / "ledger.jsonl")
    df = judge_many(ExactMatchJudge(), ITEMS, ledger=led, task_type="qa", progress=False)
    assert (df["status"] == "scored").all()
    return led


def test_labels_are_observations_paired_on_item_and_adapter(ledger):
    labels = pd.DataFrame({
        "item_id": ["q1", "q2", "q1"],
        "adapter_id": ["m1", "m1", "m2"],
        "human": [1.0, True, 0],
        "who": ["ann", "ann", "bob"],
    })
    assert record_labels(ledger, labels, task_type="qa", annotator="who") == 3
    frame = ledger_frame(ledger)
    humans = frame[frame["tag.grader_id"] == "human"]
    assert len(humans) == 3
    assert set(humans["tag.annotator"]) == {"ann", "bob"}
    assert (humans["cost_usd"] == 0).all()

    pf = paired_frame(ledger, "qa", grader_id="exact-match", human="human")
    pf = pf.set_index(["item_id", "adapter_id"]).sort_index()
    assert len(pf) == 5  # every judged (item, adapter), labelled or not
    assert pf.loc[("q1", "m1"), "exact-match"] == 1.0 and pf.loc[("q1", "m1"), "human"] == 1.0
    assert pf.loc[("q2", "m1"), "exact-match"] == 0.0 and pf.loc[("q2", "m1"), "human"] == 1.0
    assert pf.loc[("q1", "m2"), "human"] == 0.0
    assert math.isnan(pf.loc[("q3", "m1"), "human"])  # unlabelled
    assert pf.loc[("q2", "m2"), "model_id"] == "m2"
    assert pf.loc[("q1", "m1"), "n_annotators"] == 1 and pf.loc[("q3", "m1"), "n_annotators"] == 0
    # aliases for estimate_quality(judge="judge", human="human")
    assert (pf["judge"] == pf["exact-match"]).all()


def test_several_annotators_give_their_mean_and_agreement(ledger):
    labels = pd.DataFrame({
        "item_id": ["q1", "q1", "q1", "q2", "q2"],
        "adapter_id": ["m1"] * 5,
        "label": [1, 1, 0, 0, 0],
        "annotator": ["a", "b", "c", "a", "b"],
    })
    record_labels(ledger, labels, task_type="qa", label="label", annotator="annotator")
    pf = paired_frame(ledger, "qa", grader_id="exact-match").set_index(["item_id", "adapter_id"])
    assert pf.loc[("q1", "m1"), "human"] == pytest.approx(2 / 3)
    assert pf.loc[("q1", "m1"), "n_annotators"] == 3
    assert pf.loc[("q1", "m1"), "annotator_agreement"] == pytest.approx(1 / 3)  # one pair of three agrees
    assert pf.loc[("q2", "m1"), "annotator_agreement"] == 1.0
    assert "annotator_alpha" in pf.attrs


def test_unlabelled_rows_are_skipped_and_bad_labels_refused_before_writing(ledger):
    before = len(ledger.read_all())
    ok = pd.DataFrame({"id": ["q1", "q2"], "adapter_id": ["m1", "m1"], "human": [np.nan, 1.0]})
    assert record_labels(ledger, ok, task_type="qa") == 1
    bad = pd.DataFrame({"id": ["q1", "q2"], "adapter_id": ["m1", "m1"], "human": [1.0, 7.0]})
    with pytest.raises(ValidationError, match=r"0\.\.1"):
        record_labels(ledger, bad, task_type="qa")
    assert len(ledger.read_all()) == before + 1  # nothing of the bad frame was written
    with pytest.raises(ValidationError, match="item_id"):
        record_labels(ledger, pd.DataFrame({"adapter_id": ["m1"], "human": [1.0]}), task_type="qa")


def test_paired_frame_never_pools_rubrics_and_names_the_graders(ledger, tmp_path):
    from llm_connect import QualityObservation

    for rubric in ("r1", "r2"):
        ledger.append(QualityObservation("qa", "m1", "m1", 0.0, 1.0, 1.0, 1, 1,
                                         tags={"grader_id": "llm-judge", "rubric_hash": rubric, "item_id": "q1"}))
    with pytest.raises(ValidationError, match="rubric"):
        paired_frame(ledger, "qa", grader_id="llm-judge")
    assert len(paired_frame(ledger, "qa", grader_id="llm-judge", rubric_hash="r1")) == 1
    with pytest.raises(ValidationError, match="graders present"):
        paired_frame(ledger, "qa", grader_id="nobody")


def test_paired_frame_feeds_estimate_quality(ledger):
    from llm_connect import estimate_quality

    labels = pd.DataFrame({"item_id": ["q1", "q2", "q3", "q1", "q2"], "adapter_id": ["m1", "m1", "m1", "m2", "m2"],
                           "human": [1, 0, 1, 0, 1]})
    record_labels(ledger, labels, task_type="qa")
    pf = paired_frame(ledger, "qa", grader_id="exact-match")
    est = estimate_quality(pf, judge="exact-match", human="human", by="model_id", methods=("human", "judge"))
    human = est[est["method"] == "human"].set_index("model_id")["estimate"]
    assert human["m1"] == pytest.approx(2 / 3) and human["m2"] == pytest.approx(0.5)


# -- grader_id= only -----------------------------------------------------------------------------------------


def items(n: int) -> list[dict]:
    return [{"id": i, "prompt": f"question {i}", "baseline": f"answer {i}",
             "candidate": f"answer {i}" if i % 3 else f"reply {i}", "human": bool(i % 3)} for i in range(n)]


def test_paired_frame_takes_grader_id_only(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    judge_many(ExactMatchJudge(), items(4), ledger=ledger, task_type="qa", progress=False)
    new = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(new) == 4
    with pytest.raises(TypeError, match="judge"):  # the old keyword is no second name
        paired_frame(ledger, "qa", judge="exact-match")
    with pytest.raises(ValidationError, match="needs grader_id="):
        paired_frame(ledger, "qa")
