"""Routing that cannot be fooled by its own judge: one grader at a time, PPI++ with human labels, card gates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from llm_connect import QualityLedger, QualityObservation
from llm_connect.calibration import card_from_scores
from llm_connect.cards import JudgeCardRegistry
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
    from llm_connect.labelling import Labeller

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


# -- a selective judge: the abstained items are people's stratum ------------------------------------------------


def _selective_loop(tmp_path, *, spot_check: int, labeller: bool = True, seed: int = 0):
    """The documented loop on one adapter whose quality by people is 0.50: a selective judge scores the 40 items
    it is sure of (38 of them good) and abstains on the other 40 (2 good); people label every abstained item
    (``Labeller(strategy="abstained")``, or ``record_labels`` of those rows) and, with ``spot_check``, that many
    judged items drawn at random."""
    import pandas as pd

    from llm_connect.frames import record_labels
    from llm_connect.grading import FunctionJudge, SelectiveJudge, judge_many
    from llm_connect.labelling import Labeller

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(80):
        sure = i < 40
        good = (i % 20 != 0) if sure else (i % 20 == 0)  # 95 good of the sure, 5 good of the rest
        rows.append({"id": f"q{i}", "prompt": f"question {i}", "baseline": "ref",
                     "candidate": f"{'sure' if sure else 'unsure'} {'good' if good else 'bad'} {i}",
                     "candidate_model": "cheap", "truth": float(good)})
    items = pd.DataFrame(rows)
    assert items["truth"].mean() == 0.5
    judge = SelectiveJudge(
        FunctionJudge(lambda b, c: 1.0 if " good " in c else 0.0, grader_id="llm-judge"),
        confidence=lambda r: 0.99 if r.candidate_response.content.startswith("sure") else 0.2, cutoff=0.5)
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    frame = judge_many(judge, items.drop(columns="truth"), ledger=ledger, task_type="qa", progress=False)
    assert frame.attrs["counts"]["abstained"] == 40
    truth = items.set_index("id")["truth"]
    if labeller:
        people = Labeller(frame, ledger=ledger, task_type="qa", annotator="ann", strategy="abstained")
        while people.current is not None:
            people.label(truth[people.current["item_id"]])
    else:
        left = items[(frame["status"] == "abstained").to_numpy()]
        record_labels(ledger, left.assign(human=left["truth"]), task_type="qa")
    if spot_check:
        judged = items.iloc[rng.permutation(40)[:spot_check]]
        record_labels(ledger, judged.assign(human=judged["truth"]), task_type="qa")
    return ledger, items


def test_a_selective_judges_abstentions_labelled_by_people_count_in_routing(tmp_path):
    """Quality 0.50 by people, a judge sure only of the good answers: PPI++ over the judged items alone said 0.95
    (lower bound 0.98: certified at 0.8); the abstained items' labels are a stratum of their own."""
    ledger, items = _selective_loop(tmp_path, spot_check=20)
    decision = route(ledger, "qa", human="human", threshold=0.8, now=datetime.now(UTC))
    assert decision.adapter_id is None, decision.reason
    row = decision.evidence.iloc[0]
    assert row["method"] == "ppi++" and row["n_unjudged"] == 40 and row["n_labelled"] == 60
    assert row["n"] == 80
    assert row["quality_low"] <= 0.5 <= row["quality_high"]  # covers the people's quality
    assert row["quality_high"] < 0.8
    assert abs(row["mean_quality"] - 0.5) < 0.08
    # the same figures as estimate_quality's stratified estimate on the items
    import pandas as pd

    from llm_connect import estimate_quality

    judged = {o.tags["item_id"]: o.quality_score for o in ledger.read_all() if o.tags["grader_id"] == "llm-judge"}
    labels = {o.tags["item_id"]: o.quality_score for o in ledger.read_all() if o.tags["grader_id"] == "human"}
    frame = pd.DataFrame({"judge": [judged.get(i, np.nan) for i in items["id"]],
                          "human": [labels.get(i, np.nan) for i in items["id"]]})
    ref = estimate_quality(frame, judge="judge", human="human", methods="ppi++", judge_missing="stratify").iloc[0]
    assert row["mean_quality"] == pytest.approx(ref["estimate"]) and row["quality_low"] == pytest.approx(ref["ci_low"])


def test_routing_refuses_when_the_judged_items_have_no_labels(tmp_path):
    """People labelled only what the judge abstained on: nothing checks the judge on the items it scored, so
    there is no honest interval, and the reason says what to label."""
    ledger, _ = _selective_loop(tmp_path, spot_check=0, labeller=False)
    decision = route(ledger, "qa", human="human", threshold=0.5, now=datetime.now(UTC))
    assert decision.adapter_id is None
    row = decision.evidence.iloc[0]
    assert row["n_unjudged"] == 40 and np.isnan(row["quality_low"])
    assert "judged stratum has no human labels" in row["reason"] and "random sample" in row["reason"]


def test_unjudged_labels_are_fresh_by_their_time_and_share_the_recent_window(ledger):
    """Labels of items the judge never scored count when fresh (max_age reads their newest label), the recent
    window keeps the newest items of both kinds, and without human= they are not read."""
    from dataclasses import replace

    judged = [replace(obs("a", 1.0, item=f"j{i}"), recorded_at=NOW - timedelta(hours=3)) for i in range(30)]
    spot = [obs("a", 1.0, grader="human", rubric=None, item=f"j{i}") for i in range(10)]
    fresh = [replace(obs("a", 0.0, grader="human", rubric=None, item=f"u{i}"), recorded_at=NOW - timedelta(hours=2))
             for i in range(20)]
    old = [replace(obs("a", 0.0, grader="human", rubric=None, item=f"u{i}"), recorded_at=NOW - timedelta(days=60))
           for i in range(20, 30)]
    ledger.extend(judged + spot + fresh + old)
    row = evidence_table(ledger, "qa", policy=RoutingPolicy(human="human", recent=None), now=NOW).iloc[0]
    assert (row["n"], row["n_unjudged"], row["n_labelled"]) == (50, 20, 30)
    assert row["mean_quality"] == pytest.approx(30 / 50)  # the judge is right on its stratum; people's are 0
    window = evidence_table(ledger, "qa", policy=RoutingPolicy(human="human", recent=25), now=NOW).iloc[0]
    assert (window["n"], window["n_unjudged"]) == (25, 20)  # the 20 newest are people's, then 5 judged
    plain = evidence_table(ledger, "qa", grader_id="llm-judge", policy=RoutingPolicy(recent=None), now=NOW).iloc[0]
    assert (plain["n"], plain["n_unjudged"], plain["method"]) == (30, 0, "wilson")


def _conversation_obs(adapter, score, *, conversation, grader="llm-judge", item=None):
    o = obs(adapter, score, grader=grader, rubric=None if grader == "human" else "r1", item=item)
    o.tags["conversation_id"] = conversation
    return o


def fill_conversations(ledger, *, conversations=60, turns=5, labelled=25, seed=0):
    """Turns of conversations: some conversations go well, others badly (people pass most turns of a good one),
    the judge says yes to nearly everything; people labelled every turn of ``labelled`` conversations."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(conversations):
        good = rng.random() < 0.6
        for t in range(turns):
            item = f"c{c}-t{t}"
            human = float(rng.random() < (0.95 if good else 0.2))
            out.append(_conversation_obs("cheap", float(rng.random() < 0.95), conversation=f"c{c}", item=item))
            if c < labelled:
                out.append(_conversation_obs("cheap", human, conversation=f"c{c}", grader="human", item=item))
    ledger.extend(out)


def test_routing_clusters_turns_by_their_conversation(ledger):
    import pandas as pd

    from llm_connect import estimate_quality

    fill_conversations(ledger)
    policy = RoutingPolicy(human="human", recent=None)
    ev = evidence_table(ledger, "qa", policy=policy, now=NOW).iloc[0]
    flat = evidence_table(ledger, "qa", policy=RoutingPolicy(human="human", recent=None, cluster=None), now=NOW)
    flat = flat.iloc[0]
    assert ev["cluster"] == "conversation_id" and ev["n_clusters"] == 25
    assert flat["cluster"] is None and pd.isna(flat["n_clusters"])
    assert ev["mean_quality"] == pytest.approx(flat["mean_quality"], abs=0.05)
    assert ev["quality_high"] - ev["quality_low"] > 1.3 * (flat["quality_high"] - flat["quality_low"])
    rows = list(ledger.read_all())
    judge = {o.tags["item_id"]: o for o in rows if o.tags["grader_id"] == "llm-judge"}
    human = {o.tags["item_id"]: o.quality_score for o in rows if o.tags["grader_id"] == "human"}
    frame = pd.DataFrame({"judge": [o.quality_score for o in judge.values()],
                          "human": [human.get(k, np.nan) for k in judge],
                          "conversation_id": [o.tags["conversation_id"] for o in judge.values()]})
    ref = estimate_quality(frame, judge="judge", human="human", methods=("ppi++",)).iloc[0]
    assert (ev["quality_low"], ev["quality_high"]) == pytest.approx((ref["ci_low"], ref["ci_high"]))
    decision = route(ledger, "qa", human="human", threshold=0.0, now=NOW, recent=None, min_observations=1)
    assert decision.evidence.iloc[0]["n_clusters"] == 25
    named = route(ledger, "qa", human="human", threshold=0.0, now=NOW, recent=None, min_observations=1,
                  cluster=None)
    assert named.evidence.iloc[0]["cluster"] is None


def test_routing_with_few_labelled_conversations_has_no_interval_and_says_why(ledger):
    fill_conversations(ledger, labelled=6)
    ev = evidence_table(ledger, "qa", policy=RoutingPolicy(human="human", recent=None), now=NOW).iloc[0]
    assert not ev["eligible"] and np.isnan(ev["quality_low"])
    assert ev["reason"].startswith("no honest interval: only 6 labelled conversation(s)")
