"""Item identity is one rule everywhere (issue 25).

An item's id is converted once (``canonical_item_id``: a whole float is an int, numpy scalars are plain
Python, NaN/None/NA is missing) and matched on its text; an item without an id is keyed by its texts
(``"row:<sha256>"``), never by its row position (which is another item's id); with its candidate, an
item's key is ``item_key``. ``judge_many`` records these ids, ``record_labels`` and the Labeller write them,
``paired_frame`` joins on them and ``grade_dataset`` resumes by them. Each test below failed before.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest

from llm_connect import ExactMatchJudge, QualityLedger, judge_many
from llm_connect.errors import ValidationError
from llm_connect.frames import paired_frame, record_labels
from llm_connect.items import (
    CONTENT_KEY_PREFIX,
    canonical_item_id,
    content_item_id,
    item_id_text,
    item_ids,
    item_key,
    load_items,
    row_item_id,
)
from llm_connect.labelling import Labeller

# Ray's own deprecation notices are not ours
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")


def _items(ids, candidates, models=None) -> pd.DataFrame:
    frame = pd.DataFrame({
        "id": ids,
        "prompt": [f"question {k}" for k in range(len(ids))],
        "baseline": ["right"] * len(ids),
        "candidate": candidates,
    })
    if models is not None:
        frame["candidate_model"] = models
    return frame


# -- the one conversion ----------------------------------------------------------------------------


def test_one_conversion_of_ids():
    for value, expected in ((np.int64(1), 1), (1.0, 1), (np.float64(2.0), 2), (2.5, 2.5), (True, True),
                            ("1", "1"), ("row", "row")):
        got = canonical_item_id(value)
        assert got == expected and type(got) is type(expected), value
    for missing in (None, math.nan, np.float64("nan"), pd.NA, pd.NaT):
        assert canonical_item_id(missing) is None and item_id_text(missing) is None
    assert item_id_text(np.int64(1)) == item_id_text(1.0) == item_id_text("1") == item_id_text(1) == "1"
    assert item_key(1.0, "m1") == item_key("1", "m1") == ("1", "m1", "m1")
    assert item_key(1, "m1") != item_key(1, "m2")  # one question, two models: two items
    assert item_key(1) == ("1", "unknown", "unknown") == item_key(1, " ", None)
    with pytest.raises(ValidationError, match="without an id"):
        item_key(math.nan, "m1")


def test_an_id_less_item_is_keyed_by_its_texts_never_by_its_position():
    key = content_item_id("q", "ref", "answer")
    assert key.startswith(CONTENT_KEY_PREFIX) and len(key) == len(CONTENT_KEY_PREFIX) + 24
    assert key == content_item_id("q", "ref", "answer")  # the same item in every run and ordering
    assert key != content_item_id("q", "ref", "another answer") != content_item_id("q2", "ref", "answer")
    assert row_item_id([math.nan], 0, ("q", "ref", "answer")) == key
    with pytest.raises(ValidationError, match="no item id"):
        row_item_id([math.nan], 0)  # a row's position is never its id
    frame = _items([1, 2, 3, math.nan], ["a", "b", "c", "d"])
    ids = item_ids(frame)
    assert ids[:3] == [1, 2, 3] and all(type(i) is int for i in ids[:3])
    assert ids[3] == content_item_id("question 3", "right", "d") and ids[3] != 3
    # reordered, an id-less item keeps its key
    assert item_ids(frame.iloc[::-1])[0] == ids[3]


# -- judge_many, record_labels, paired_frame ---------------------------------------------------------


def test_judge_many_never_records_an_id_less_item_under_another_items_id(tmp_path):
    """ids [1, 2, 3, NaN]: the NaN row was recorded as item 3 (its position), so paired_frame averaged two
    answers as item 3."""
    ledger = QualityLedger(tmp_path / "l.jsonl")
    frame = _items([1, 2, 3, math.nan], ["right", "right", "right", "wrong"])
    assert frame["id"].dtype == float  # pandas made them 1.0, 2.0, 3.0, NaN
    df = judge_many(ExactMatchJudge(), frame, ledger=ledger, task_type="qa", progress=False)
    assert df["quality_score"].tolist() == [1.0, 1.0, 1.0, 0.0]
    recorded = [o.tags["item_id"] for o in ledger.read_all()]
    assert sorted(r for r in recorded if isinstance(r, int)) == [1, 2, 3]
    assert sum(isinstance(r, str) and r.startswith(CONTENT_KEY_PREFIX) for r in recorded) == 1
    pf = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(pf) == 4 and pf["n_judge"].tolist() == [1, 1, 1, 1]
    assert pf.set_index("item_id").loc["3", "exact-match"] == 1.0  # not the mean of 1.0 and 0.0


def test_whole_float_ids_of_labels_pair_with_the_judges_scores(tmp_path):
    """judge_many wrote 1, record_labels wrote "1.0": paired_frame found 0 pairs."""
    ledger = QualityLedger(tmp_path / "l.jsonl")
    frame = _items([1.0, 2.0, 3.0], ["right", "wrong", "right"], models=["m1"] * 3)
    judge_many(ExactMatchJudge(), frame, ledger=ledger, task_type="qa", progress=False)
    labels = frame.assign(human=[1.0, 0.0, np.nan])
    assert record_labels(ledger, labels, task_type="qa") == 2
    written = [o.tags["item_id"] for o in ledger.read_all() if o.tags["grader_id"] == "human"]
    assert written == [1, 2] and all(type(i) is int for i in written)
    pf = paired_frame(ledger, "qa", grader_id="exact-match").set_index("item_id").sort_index()
    assert len(pf) == 3 and (pf["human"].notna() & pf["exact-match"].notna()).sum() == 2  # 2 pairs, not 0
    assert pf.loc["1", "human"] == 1.0 and pf.loc["2", "human"] == 0.0 and pf.loc["2", "exact-match"] == 0.0


def test_labeller_labels_with_float_ids_pair_with_the_judges_scores(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    frame = _items([1.0, 2.0, 3.0], ["right", "wrong", "right"], models=["m1"] * 3)
    judge_many(ExactMatchJudge(), frame, ledger=ledger, task_type="qa", progress=False)
    lab = Labeller(frame, ledger=ledger, task_type="qa", annotator="ann", grader_id="exact-match")
    assert lab.frame()["judge"].notna().all()  # the judge's scores were found for float ids
    while lab.current is not None:
        shown = lab.current["item_id"]
        assert type(shown) is int
        lab.label(1.0 if shown != 2 else 0.0)
    pf = paired_frame(ledger, "qa", grader_id="exact-match")
    assert len(pf) == 3 and pf["human"].notna().all() and (pf["human"] == pf["exact-match"]).all()


# -- grade_dataset's resume --------------------------------------------------------------------------


def _exact_judge():
    """The judge factory the actors call."""
    return ExactMatchJudge()


def _actor(ledger):
    from llm_connect.distributed._actor import GradingActor

    return GradingActor(_exact_judge, 4, ledger, "qa", None, None, None, run_id="r1")


def test_the_actor_resumes_by_id_and_candidate_model(tmp_path):
    """The pool's actor in this process (no Ray): q1/m2 came back with q1/m1's score."""
    from llm_connect.distributed import RESUMED

    ledger = QualityLedger(tmp_path / "l.jsonl")
    both = _items(["q1", "q1", "q2", "q2"], ["right", "wrong", "wrong", "right"], models=["m1", "m2", "m1", "m2"])
    first = _actor(ledger)(both[both["candidate_model"] == "m1"].reset_index(drop=True))
    assert first["quality_score"].tolist() == [1.0, 0.0]
    again = _actor(ledger)(both)
    assert again[RESUMED].tolist() == [True, False, True, False]
    assert again["quality_score"].tolist() == [1.0, 0.0, 0.0, 1.0]  # m2's own scores, not m1's
    assert len(ledger.read_all()) == 4


def test_the_actor_never_resumes_an_item_with_an_id_less_items_score(tmp_path):
    """An id-less row at position 0 was recorded as item 0; a rerun "resumed" item 0 with its score."""
    from llm_connect.distributed import RESUMED

    ledger = QualityLedger(tmp_path / "l.jsonl")
    idless = _items([math.nan], ["wrong"])
    assert _actor(ledger)(idless)["quality_score"].tolist() == [0.0]
    rows = pd.concat([_items([0.0], ["right"]), idless], ignore_index=True)
    again = _actor(ledger)(rows)
    assert again[RESUMED].tolist() == [False, True]  # item 0 is judged; the id-less item (same texts) resumes
    assert again["quality_score"].tolist() == [1.0, 0.0]


@pytest.fixture(scope="module")
def ray_cluster(ray_session):
    """The session's Ray cluster (tests/conftest.py), with the factory above sent to the workers by value."""
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return ray_session


def test_a_rerun_of_grade_dataset_resumes_by_id_and_candidate_model(ray_cluster, tmp_path):
    """On a local Ray cluster: two candidate models per id, and an id-less row."""
    from llm_connect.distributed import RESUMED, grade_dataset

    ledger = QualityLedger(tmp_path / "l.jsonl")
    kw = {"ledger": ledger, "task_type": "qa", "num_actors": 1, "concurrency": 2}
    both = _items([0, 0, 1, 1, math.nan], ["right", "wrong", "wrong", "right", "wrong"],
                  models=["m1", "m2", "m1", "m2", "m1"])
    first_rows = both.iloc[[4, 2]].reset_index(drop=True)  # the id-less row at position 0, and q1/m1
    first = grade_dataset(ray_cluster.data.from_pandas(first_rows), _exact_judge, **kw).to_pandas()
    assert first["quality_score"].tolist() == [0.0, 0.0] and not first[RESUMED].any()
    again = grade_dataset(ray_cluster.data.from_pandas(both), _exact_judge, **kw).to_pandas()
    assert len(again) == 5
    got = {(item_id_text(i) or "none", m): (bool(r), float(q)) for i, m, r, q in
           zip(again["id"], again["candidate_model"], again[RESUMED], again["quality_score"], strict=True)}
    assert got == {("0", "m1"): (False, 1.0), ("0", "m2"): (False, 0.0),  # item 0 is not the id-less row
                   ("1", "m1"): (True, 0.0), ("1", "m2"): (False, 1.0),  # m2's own score, not m1's
                   ("none", "m1"): (True, 0.0)}  # the id-less row resumes itself
    assert len(ledger.read_all()) == 5


# -- a file of items ---------------------------------------------------------------


def test_load_items_reads_each_format_as_text_and_refuses_what_it_cannot_read(tmp_path):
    (tmp_path / "a.csv").write_text("prompt,reference,candidate,n\nq,,c,01\n", encoding="utf-8")
    frame = load_items(tmp_path / "a.csv")
    assert list(frame.columns) == ["prompt", "baseline", "candidate", "n"]
    assert frame.iloc[0].tolist() == ["q", "", "c", "01"]  # no NA guessing: text stays text
    (tmp_path / "b.json").write_text('[{"prompt": "q", "baseline": "b", "candidate": "c"}]', encoding="utf-8")
    assert load_items(tmp_path / "b.json")["baseline"].tolist() == ["b"]
    (tmp_path / "c.jsonl").write_text('{"label": 1}\n\n{"label": 0}\n', encoding="utf-8")
    assert load_items(tmp_path / "c.jsonl", items=False)["label"].tolist() == [1, 0]
    with pytest.raises(ValidationError, match="candidate"):
        load_items(tmp_path / "c.jsonl")
    (tmp_path / "d.csv").write_text("prompt,prompt,candidate\nq,q,c\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="'prompt' more than once"):
        load_items(tmp_path / "d.csv")
    (tmp_path / "e.jsonl").write_text('{"a": 1, "a": 2}\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="line 1 has the key 'a' twice"):
        load_items(tmp_path / "e.jsonl", items=False)
    with pytest.raises(ValidationError, match="no such file"):
        load_items(tmp_path / "missing.csv")
    (tmp_path / "f.xlsx").write_text("x", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"use a \.jsonl, \.csv or \.tsv file"):
        load_items(tmp_path / "f.xlsx")
