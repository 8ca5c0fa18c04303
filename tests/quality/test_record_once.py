"""Recording once (issue 34): ``extend_once`` writes a judgment once per item, grader, rubric and candidate and a
label once per item and annotator, for the JSON Lines and the Parquet ledger alike, under the ledger's lock
(real processes race here); ``append`` and ``extend`` still append what they are given. The entry points
(``judge_many``, ``record_labels``, the Labeller, ``grade_dataset``, the CLI) are tested in their own files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from strategies import T0, make_observation

from llm_connect import ParquetLedger, QualityLedger
from llm_connect.items import item_id_text
from llm_connect.quality import BaseLedger, Recorded
from llm_connect.quality._once import id_text

REPO = str(Path(__file__).resolve().parents[2])


def judgment(item, *, grader="llm-judge", rubric="r1", model="m1", task="qa", score=1.0, at=T0, **tags):
    base = {"grader_id": grader, "item_id": item, **({"rubric_hash": rubric} if rubric is not None else {}), **tags}
    return make_observation(task_type=task, adapter_id=model, model_id=model, quality_score=score,
                            baseline_adapter_id="baseline", recorded_at=at, tags=base)


def label(item, *, annotator="ann", score=1.0, model="m1", **tags):
    return make_observation(adapter_id=model, model_id=model, quality_score=score, cost_usd=0.0,
                            tags={"grader_id": "human", "item_id": item, "annotator": annotator, **tags})


@pytest.fixture(params=["jsonl", "parquet"])
def ledger(request, tmp_path) -> BaseLedger:
    return QualityLedger(tmp_path / "l.jsonl") if request.param == "jsonl" else ParquetLedger(tmp_path / "pq")


def reopened(ledger: BaseLedger) -> BaseLedger:
    """Another ledger object on the same storage (another writer: it has read nothing yet)."""
    return QualityLedger(ledger.path) if isinstance(ledger, QualityLedger) else ParquetLedger(ledger.path)


def test_a_judgment_is_recorded_once_per_item_grader_rubric_and_candidate(ledger):
    first = [judgment(k) for k in range(5)]
    assert ledger.extend_once(first) == Recorded((True,) * 5, (None,) * 5, (None,) * 5, 0)
    # the same judgments again, the ids as another dtype would write them, a new score: nothing is written
    again = [judgment(1.0), judgment("2"), judgment(3, score=0.0, epochs=2, run_id="x")]
    recorded = ledger.extend_once(again)
    assert recorded.written == (False, False, False) and recorded.n_held == 3 and recorded.n_written == 0
    assert recorded.held == (1.0, 1.0, 1.0) and recorded.differing == 1
    # each part of the key makes another judgment; an observation without a key is always written
    other = [judgment(1, grader="exact-match"), judgment(1, rubric="r2"), judgment(1, rubric=None),
             judgment(1, model="m2"), judgment(1, task="chat"), make_observation(), make_observation()]
    assert ledger.extend_once(other).written == (True,) * 7
    assert len(ledger.read_all()) == 5 + 7
    # within one call the first of several with one key is written
    assert ledger.extend_once([judgment(9, score=0.0), judgment(9.0)]).written == (True, False)
    assert len(ledger.read_all()) == 13


def test_append_and_extend_still_append_what_they_are_given(ledger):
    ledger.extend([judgment(1), judgment(1)])
    ledger.append(judgment(1))
    assert len(ledger.read_all()) == 3
    assert ledger.extend_once([judgment(1)]).written == (False,)
    assert len(ledger.read_all()) == 3


def test_a_label_is_recorded_once_per_item_and_annotator_until_it_is_undone(ledger):
    assert ledger.extend_once([label(1), label(1, annotator="bob"), label(2)]).n_written == 3
    recorded = ledger.extend_once([label(1, score=0.0), label(1.0, annotator="bob"), label(1, model="m2")])
    assert recorded.written == (False, False, True) and recorded.differing == 1
    # a Labeller's label taken back by an undo marker no longer stands: the item may be labelled again
    ledger.extend_once([label(3, label_id="L1")])
    assert ledger.extend_once([label(3, label_id="L2")]).held_ids == ("L1",)
    ledger.append(make_observation(tags={"grader_id": "human-undo", "item_id": 3, "annotator": "ann",
                                         "undoes": "L1"}))
    assert reopened(ledger).extend_once([label(3, label_id="L3", score=0.5)]).written == (True,)
    assert ledger.extend_once([label(3, label_id="L4")]).held_ids == ("L3",)
    # a label and a judgment of one item never stand for each other
    assert ledger.extend_once([judgment(1, grader="human", rubric=None)]).written == (True,)


def test_what_another_writer_appended_meanwhile_is_held(ledger):
    """The keys are read once and then only what is new: another object's writes, and a rewrite (prune or
    compaction) that replaced what was read, are seen."""
    assert ledger.extend_once([judgment(k) for k in range(3)]).n_written == 3
    other = reopened(ledger)
    assert other.extend_once([judgment(k) for k in range(6)]).written == (False,) * 3 + (True,) * 3
    other.extend([judgment(k) for k in range(6, 9)])  # plain writes count too
    assert ledger.extend_once([judgment(k) for k in range(10)]).written == (False,) * 9 + (True,)
    # a rewrite that removes observations: what it removed may be recorded again
    old = [judgment(k, grader="old", at=T0 - timedelta(days=9)) for k in range(4)]
    other.extend(old)
    assert ledger.extend_once(old).n_written == 0
    assert other.prune_before(T0 - timedelta(days=1)) == 4
    assert ledger.extend_once(old).n_written == 4
    if isinstance(ledger, ParquetLedger):
        ledger.compact()
    assert reopened(ledger).extend_once([*old, judgment(0)]).n_written == 0
    assert len(ledger.read_all()) == 14


RACER = """
import sys
from datetime import datetime, UTC
from llm_connect import QualityObservation, QualityLedger, ParquetLedger

kind, path, worker = sys.argv[1], sys.argv[2], int(sys.argv[3])
ledger = QualityLedger(path) if kind == "jsonl" else ParquetLedger(path)
for start in range(0, 200, 20):  # every process records the same 200 judgments and 50 labels, in groups
    batch = [QualityObservation(task_type="qa", adapter_id="m", model_id="m", cost_usd=0.0, quality_score=1.0,
                                latency_ms=0.0, tokens_in=0, tokens_out=0,
                                tags={"grader_id": "g", "item_id": k, "run_id": str(worker)})
             for k in range(start, start + 20)]
    batch += [QualityObservation(task_type="qa", adapter_id="m", model_id="m", cost_usd=0.0, quality_score=0.0,
                                 latency_ms=0.0, tokens_in=0, tokens_out=0,
                                 tags={"grader_id": "human", "item_id": k, "annotator": "a"})
              for k in range(start // 4, start // 4 + 5)]
    ledger.extend_once(batch)
"""


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_processes_racing_to_record_the_same_judgments_record_each_once(tmp_path, kind):
    path = tmp_path / ("l.jsonl" if kind == "jsonl" else "pq")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(RACER), kind, str(path), str(w)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True) for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    ledger = QualityLedger(path) if kind == "jsonl" else ParquetLedger(path)
    observations = ledger.read_all()
    judged = sorted(o.tags["item_id"] for o in observations if o.tags["grader_id"] == "g")
    labelled = sorted(o.tags["item_id"] for o in observations if o.tags["grader_id"] == "human")
    assert judged == list(range(200)) and labelled == list(range(50))


def test_ids_are_matched_as_the_batch_engine_matches_them():
    for value in (1, 1.0, "1", 2.5, True, "a", -0.0, 10**20, 1e20, [1, 2], {"a": 1}, None):
        assert id_text(value) == item_id_text(value), value
