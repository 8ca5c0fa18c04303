"""Routing that cannot be fooled by its own judge: one grader at a time, PPI++ with human labels, card gates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from llm_connect import QualityLedger, QualityObservation
from llm_connect.calibration import JudgeCardRegistry, card_from_scores
from llm_connect.errors import UncalibratedJudgeError, ValidationError
from llm_connect.routing import RoutingPolicy, evidence_table, route

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def obs(adapter, score, *, grader="llm-judge", rubric="r1", item=None, cost=0.0, task="qa"):
    tags = {"grader_id": grader}
    if rubric is not None:
        tags["rubric_hash"] = rubric
    if item is not None:
        tags["item_id"] = item
    return QualityObservation(task, adapter, adapter, cost, float(score), 10.0, 1, 1,
                              recorded_at=NOW - timedelta(hours=1), tags=tags)


@pytest.fixture
def ledger(tmp_path):
    return QualityLedger(tmp_path / "ledger.jsonl")


def fill_biased(ledger, *, n=300, labels=120, seed=0):
    """A judge that rates the cheap model 0.95 on average while people pass only 60% of its answers;
    the dear model is really good (people 0.95) and rated the same."""
    rng = np.random.default_rng(seed)
    out = []
    for adapter, truth, cost in (("cheap", 0.6, 0.001), ("dear", 0.95, 0.01)):
        human = (rng.random(n) < truth).astype(float)
        judge = np.where(rng.random(n) < 0.95, 1.0, 0.0)  # the judge says yes to nearly everything
        for i in range(n):
            out.append(obs(adapter, judge[i], item=f"{adapter}-{i}", cost=cost))
        for i in range(labels):
            out.append(obs(adapter, human[i], grader="human", rubric=None, item=f"{adapter}-{i}"))
    ledger.extend(out)


def test_several_graders_are_never_pooled(ledger):
    ledger.extend([obs("a", 1.0, grader="llm-judge", rubric="r1") for _ in range(30)])
    ledger.extend([obs("a", 0.0, grader="exact-match", rubric=None) for _ in range(30)])
    with pytest.raises(ValidationError, match=r"llm-judge \(rubric r1\).*exact-match|exact-match.*llm-judge"):
        route(ledger, "qa", now=NOW)
    good = route(ledger, "qa", grader_id="llm-judge", threshold=0.8, now=NOW)
    assert good.adapter_id == "a" and "llm-judge" in good.reason
    assert set(good.evidence["grader_id"]) == {"llm-judge"}
    bad = route(ledger, "qa", grader_id="exact-match", threshold=0.8, now=NOW)
    assert bad.adapter_id is None
    # evidence_table shows each grader on its own row, never a pooled mean
    ev = evidence_table(ledger, "qa", now=NOW)
    assert sorted(ev["grader_id"]) == ["exact-match", "llm-judge"]
    assert sorted(ev["mean_quality"]) == [0.0, 1.0]


def test_two_rubrics_of_one_grader_need_a_choice(ledger):
    ledger.extend([obs("a", 1.0, rubric="r1") for _ in range(25)] + [obs("a", 0.0, rubric="r2") for _ in range(25)])
    with pytest.raises(ValidationError, match="rubric_hash"):
        route(ledger, "qa", grader_id="llm-judge", now=NOW)
    assert route(ledger, "qa", grader_id="llm-judge", rubric_hash="r1", now=NOW, threshold=0.8).adapter_id == "a"


def test_human_labels_correct_a_lenient_judge(ledger):
    fill_biased(ledger)
    naive = route(ledger, "qa", grader_id="llm-judge", threshold=0.8, now=NOW)
    assert naive.adapter_id == "cheap"  # trusting the judge picks the cheap, bad model
    assert set(naive.evidence["method"]) == {"wilson"}
    fair = route(ledger, "qa", grader_id="llm-judge", human="human", threshold=0.8, now=NOW)
    assert fair.adapter_id == "dear"
    ev = fair.evidence.set_index("adapter_id")
    assert set(ev["method"]) == {"ppi++"}
    assert ev.loc["cheap", "n_labelled"] == 120
    assert ev.loc["cheap", "quality_high"] < 0.8  # the corrected interval sits near 0.6
    assert "(ppi++)" in fair.reason


def test_the_ppi_interval_matches_estimate_quality(ledger):
    import pandas as pd

    from llm_connect import estimate_quality

    fill_biased(ledger, n=80, labels=40, seed=4)
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(human="human", recent=None), now=NOW)
    ev = ev.set_index("adapter_id")
    rows = [o for o in ledger.read_all() if o.adapter_id == "cheap"]
    judge = {o.tags["item_id"]: o.quality_score for o in rows if o.tags["grader_id"] == "llm-judge"}
    human = {o.tags["item_id"]: o.quality_score for o in rows if o.tags["grader_id"] == "human"}
    frame = pd.DataFrame({"judge": list(judge.values()), "human": [human.get(k, np.nan) for k in judge]})
    ref = estimate_quality(frame, judge="judge", human="human", methods=("ppi++",)).iloc[0]
    assert ev.loc["cheap", "mean_quality"] == pytest.approx(ref["estimate"])
    assert ev.loc["cheap", "quality_low"] == pytest.approx(ref["ci_low"])


def test_an_adapter_without_labels_is_not_eligible_under_ppi(ledger):
    ledger.extend([obs("unlabelled", 1.0, item=f"u{i}") for i in range(40)])
    d = route(ledger, "qa", human="human", threshold=0.5, now=NOW)
    assert d.adapter_id is None
    assert "human labels" in d.evidence.loc[0, "reason"]


def _card(kappa_noise, grader="llm-judge", rubric="r1", seed=0):
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 2, 200).astype(float)
    judge = np.where(rng.random(200) < kappa_noise, 1 - human, human)
    return card_from_scores(judge, human, grader_id=grader, rubric_hash=rubric, n_boot=200)


def test_require_calibrated_refuses_a_missing_or_weak_card(ledger):
    ledger.extend([obs("a", 1.0) for _ in range(30)])
    with pytest.raises(UncalibratedJudgeError, match=r"llm-judge.*no judge card"):
        route(ledger, "qa", require_calibrated=True, now=NOW)
    registry = JudgeCardRegistry.for_ledger(ledger)
    registry.save(_card(0.45))  # near chance
    with pytest.raises(UncalibratedJudgeError, match="below the bar"):
        route(ledger, "qa", require_calibrated=True, min_kappa=0.4, now=NOW)
    registry.save(_card(0.05))  # same (grader, rubric): replaces the weak card
    d = route(ledger, "qa", require_calibrated=True, min_kappa=0.6, threshold=0.8, now=NOW)
    assert d.adapter_id == "a"
    # a card for another rubric does not vouch for this one
    other = QualityLedger(ledger.path.parent / "other.jsonl")
    other.extend([obs("a", 1.0, rubric="r2") for _ in range(30)])
    with pytest.raises(UncalibratedJudgeError, match="no judge card"):
        route(other, "qa", require_calibrated=True, cards=registry, now=NOW)


def test_require_calibrated_without_grader_tags_says_why(ledger):
    ledger.extend([QualityObservation("qa", "a", "a", 0.0, 1.0, 1.0, 1, 1, recorded_at=NOW) for _ in range(30)])
    with pytest.raises(UncalibratedJudgeError, match="no grader_id tag"):
        route(ledger, "qa", require_calibrated=True, now=NOW)


def test_labelling_in_the_widget_leaves_routing_one_judge_and_honours_undo(ledger):
    """A Labeller's skip and undo markers (human-skip, human-undo) are people's records, not a judge: routing
    still sees one grader, and a label taken back by undo no longer counts in the PPI++ evidence."""
    from llm_connect.calibration import Labeller

    fill_biased(ledger, n=60, labels=0)
    items = [{"id": f"{a}-{i}", "prompt": "q", "baseline": "ref", "candidate": "ans", "candidate_model": a}
             for a in ("cheap", "dear") for i in range(60)]
    lab = Labeller(items, ledger=ledger, task_type="qa", annotator="ann", grader_id="llm-judge")
    labelled = []
    for _ in range(12):
        labelled.append(lab.current["item_id"] if "item_id" in lab.current else lab.current["id"])
        lab.label(1.0)
    lab.skip()
    lab.label(0.0)  # taken back next
    lab.undo()
    graders = {o.tags.get("grader_id") for o in ledger.iter_observations()}
    assert {"human", "human-skip", "human-undo"} <= graders
    decision = route(ledger, "qa", human="human", threshold=0.0, now=NOW)  # no grader_id: one judge is there
    ev = decision.evidence.set_index("adapter_id")
    assert set(ev["grader_id"]) == {"llm-judge"}
    assert ev["n_labelled"].sum() == 12  # the undone 0.0 is not among them
    table = evidence_table(ledger, "qa", human="human", now=NOW)
    assert set(table["grader_id"]) == {"llm-judge"} and table["n_labelled"].sum() == 12
