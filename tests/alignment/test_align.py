"""``align()``: a judge improved from people's labels, accepted only when it holds on held-out labels.

The judge is a simulated endpoint whose accuracy depends on what the prompt shows it: it knows each
item's true label (from the candidate's text) and answers it correctly with one probability when the
prompt holds worked examples and another when it does not, the draw keyed on the whole prompt
(deterministic, and different for every rubric). In-process (``ScriptedAdapter``) where many runs are
needed, over HTTP (``LoopbackServer``) where the endpoint, the response cache and the command line matter.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from llm_connect import BudgetTracker, judge_many
from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.alignment import Alignment, align
from llm_connect.cards import JudgeCardRegistry
from llm_connect.errors import BudgetExceededError, UncalibratedJudgeError, ValidationError
from llm_connect.grading import Example, LLMJudge, Rubric
from llm_connect.quality import QualityLedger
from llm_connect.routing import route
from llm_connect.testing import LoopbackServer, ScriptedAdapter

POLITE = Rubric("Is the reply polite to the customer?", reference=False, name="politeness")
_ITEM = re.compile(r"<<<CANDIDATE (\w+)>>>\n(.*?)\n<<<END CANDIDATE \1>>>", re.DOTALL)


def labelled(n: int = 80, seed: int = 0) -> pd.DataFrame:
    """``n`` customer-service replies labelled polite (1) or not (0) by people, half each at random."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        polite = int(rng.random() < 0.5)
        text = (f"Reply {i}: thank you for asking, happy to help." if polite
                else f"Reply {i}: figure it out yourself.")
        rows.append({"id": f"r{i}", "prompt": f"Customer message {i}", "baseline": "", "candidate": text,
                     "human": polite, "notes": "" if polite else "dismissive"})
    return pd.DataFrame(rows)


def truth_of(prompt: str) -> int:
    return 1 if "happy to help" in _ITEM.findall(prompt)[-1][1] else 0  # the item is the last candidate block


def simulated(plain: float, with_examples: float, log: list | None = None):
    """A judge reply function: right with probability ``with_examples`` when the prompt shows worked examples,
    else ``plain``; which items it gets right is a hash of the whole prompt."""

    def reply(prompt: str, *_: object) -> str:
        accuracy = with_examples if "Worked examples" in prompt else plain
        draw = int(hashlib.sha256(prompt.encode()).hexdigest()[:12], 16) / 16**12
        truth = truth_of(prompt)
        verdict = truth if draw < accuracy else 1 - truth
        text = json.dumps({"notes": "simulated", "quality_score": verdict})
        if log is not None:
            log.append((prompt, text))
        return text

    return reply


def scripted(plain: float, with_examples: float, **kw) -> ScriptedAdapter:
    return ScriptedAdapter(simulated(plain, with_examples), **kw)


# -- the procedure --------------------------------------------------------------------------------------


def test_worked_examples_that_help_are_accepted_and_the_heldout_kappa_is_the_replies():
    data = labelled(100)
    log: list[tuple[str, str]] = []
    with LoopbackServer(reply=simulated(0.6, 0.97, log)) as server:
        adapter = OpenAICompatibleAdapter("loopback-model", base_url=server.base_url)
        judge = LLMJudge(adapter, rubric=POLITE)
        result = align(judge, data, human="human", progress=False)
    assert isinstance(result, Alignment)
    assert result.accepted, result.summary()
    assert result.rubric.examples and result.rubric is result.aligned_rubric
    assert result.judge.rubric is result.rubric and result.judge.rubric_hash == result.rubric.hash
    assert result.rubric.hash != POLITE.hash and result.original_rubric is POLITE
    held = result.heldout.set_index("rubric")
    assert list(held.index) == ["original", "aligned"]
    assert {"n", "kappa", "kappa_low", "kappa_high", "agreement"} <= set(held.columns)
    assert held.loc["aligned", "kappa_low"] <= held.loc["aligned", "kappa"] <= held.loc["aligned", "kappa_high"]
    assert result.difference.low > 0
    # the held-out kappa, recomputed independently from the endpoint's replies and people's labels
    ids = set(result.heldout_ids)
    by_text = data.set_index("candidate")
    for name, shows_examples in (("original", False), ("aligned", True)):
        human, judged = [], []
        for prompt, text in log:
            item = by_text.loc[_ITEM.findall(prompt)[-1][1]]
            if item["id"] in ids and ("Worked examples" in prompt) == shows_examples:
                human.append(int(item["human"]))
                judged.append(int(json.loads(text)["quality_score"] >= 0.5))
        assert len(judged) == len(ids) == held.loc[name, "n"]
        assert held.loc[name, "kappa"] == pytest.approx(cohen_kappa_score(human, judged))
        assert held.loc[name, "agreement"] == pytest.approx(np.mean(np.array(human) == np.array(judged)))
    assert result.reason.startswith("accepted")
    assert "accepted" in result.summary() and "<table" in result._repr_html_()


def test_no_worked_example_is_held_out_and_the_split_is_stratified():
    data = labelled(80, seed=3)
    shown = Example("Customer message 5", "", data.loc[5, "candidate"], int(data.loc[5, "human"]), item_id="r5")
    rubric = POLITE.replace(examples=(shown,))  # an item the original already shows: never held out
    result = align(LLMJudge(scripted(0.6, 0.95), rubric=rubric), data, human="human", progress=False, seed=1)
    held = set(result.heldout_ids)
    assert "r5" not in held
    for r in (result.rubric, result.aligned_rubric):
        assert not {e.item_id for e in r.examples} & held
    shown_in_folds = result.candidates.dropna(subset=["rubric_hash"])
    assert len(shown_in_folds) > 0
    # stratified: each label keeps its share in the held-out split
    for label, group in data.groupby("human"):
        n_held = group["id"].isin(held).sum()
        assert n_held == round(0.3 * len(group)) or (label == data.loc[5, "human"]
                                                     and n_held == round(0.3 * len(group)))
    # the candidates table: one row per candidate and fold, plus each candidate's pooled row
    cands = result.candidates
    folds = cands[cands["fold"] != "all"]
    assert set(folds["fold"]) == set(range(5))
    assert set(cands["candidate"]) == {"examples:2", "examples:4", "examples:8", "original"}
    assert (folds.groupby("candidate").size() == 5).all()
    # every selection item was judged once by each candidate, by a rubric built without it
    pooled = cands[(cands["fold"] == "all") & (cands["candidate"] != "original")]
    assert (pooled["judge_calls"] <= len(data) - len(held)).all()


@pytest.mark.slow
def test_no_false_improvements_over_200_seeds():
    """A judge no candidate can improve (the same accuracy whatever the prompt shows): kept in >= 95% of seeds."""
    data = labelled(50)
    adapter = scripted(0.75, 0.75)
    kept = 0
    for seed in range(200):
        result = align(LLMJudge(adapter, rubric=POLITE), data, human="human", seed=seed, progress=False)
        kept += not result.accepted
        assert not {e.item_id for e in result.aligned_rubric.examples} & set(result.heldout_ids)
        if not result.accepted:
            assert result.reason.startswith("kept: no held-out improvement")
            assert result.rubric is POLITE and result.judge.rubric is POLITE
    assert kept >= 190, f"accepted a noise 'improvement' in {200 - kept} of 200 seeds"


def test_kept_when_nothing_helps_says_why():
    result = align(LLMJudge(scripted(0.8, 0.8), rubric=POLITE), labelled(60), human="human", progress=False)
    assert not result.accepted and result.reason.startswith("kept: no held-out improvement")
    assert result.rubric is POLITE and result.judge.rubric_hash == POLITE.hash
    assert set(result.heldout["rubric"]) == {"original", "aligned"}  # the best candidate was measured anyway
    assert result.save_card("unused.jsonl") is None


def test_the_reason_says_where_the_difference_interval_lies():
    """Worked examples that make the judge worse: the interval of the difference lies below 0, and the reason
    says so (it once said the interval "reaches 0"); when it straddles 0, the reason says it includes 0."""
    worse = align(LLMJudge(scripted(0.95, 0.4), rubric=POLITE), labelled(60), human="human", progress=False)
    d = worse.difference
    assert not worse.accepted and d.high < 0
    assert worse.reason.endswith("lies below 0: the candidate agrees worse)") and "reaches" not in worse.reason
    same = align(LLMJudge(scripted(0.8, 0.8), rubric=POLITE), labelled(60), human="human", progress=False)
    d = same.difference
    assert d.low <= 0 <= d.high and same.reason.endswith("includes 0)")


def test_the_same_item_under_another_id_is_never_shown_while_judged():
    """Every item twice, under two ids (two models that answered alike): the split, the folds and the worked
    examples go by content, so no held-out item, and no item of a fold, is shown to the rubric judging it."""
    once = labelled(50, seed=4)
    data = pd.concat([once, once.assign(id=once["id"] + "-again")], ignore_index=True)
    shown_rubric = POLITE.replace(examples=(Example(data.loc[3, "prompt"], "", data.loc[3, "candidate"],
                                                    int(data.loc[3, "human"])),))  # no item id: by content
    log: list[tuple[str, str]] = []
    result = align(LLMJudge(ScriptedAdapter(simulated(0.6, 0.97, log)), rubric=shown_rubric), data, human="human",
                   progress=False)
    items = result.to_frame()
    content = items["prompt"] + "\x00" + items["candidate"]
    assert items.groupby(content)["split"].nunique().eq(1).all()  # both ids on one side
    assert items.groupby(content)["fold"].nunique().eq(1).all()  # and in one fold
    held = set(content[items["split"] == "heldout"])
    assert data.loc[3, "prompt"] + "\x00" + data.loc[3, "candidate"] not in held
    for rubric in (result.rubric, result.aligned_rubric):
        assert not {e.prompt + "\x00" + e.candidate for e in rubric.examples} & held
    # no prompt the endpoint saw shows, as a worked example, the item it asks about (but the original's own
    # example, which the original judges everywhere outside the held-out split)
    example = re.compile(r"<<<EXAMPLE \d+ CANDIDATE (\w+)>>>\n(.*?)\n<<<END EXAMPLE \d+ CANDIDATE \1>>>", re.DOTALL)
    asked = 0
    for prompt, _ in log:
        item = _ITEM.findall(prompt)[-1][1]
        shown = {text for _, text in example.findall(prompt)}
        assert item not in shown or item == data.loc[3, "candidate"]
        asked += len(shown) > 1
    assert asked > 100  # the candidates' prompts, with their worked examples, were all looked at


def test_a_conversation_is_never_split_across_heldout_folds_or_examples():
    """Turns of one conversation (a ``conversation_id`` column): the held-out split, the folds and the worked
    examples take the conversation as one unit, so no conversation has turns on both sides of the split or in
    two folds, and no prompt shows a turn of the conversation it asks about; the held-out intervals resample
    whole conversations."""
    data = labelled(120, seed=6).assign(conversation_id=lambda d: [f"c{i // 4}" for i in range(len(d))])
    log: list[tuple[str, str]] = []
    result = align(LLMJudge(ScriptedAdapter(simulated(0.6, 0.97, log)), rubric=POLITE), data, human="human",
                   progress=False, seed=2)
    items = result.to_frame()
    assert items.groupby("conversation_id")["split"].nunique().eq(1).all()
    assert items.groupby("conversation_id")["fold"].nunique().eq(1).all()
    assert result.provenance["split"]["grouped_by"] == ["content", "conversation_id"]
    conversation_of = dict(zip(data["candidate"], data["conversation_id"], strict=True))
    held = set(items.loc[items["split"] == "heldout", "conversation_id"])
    for rubric in (result.rubric, result.aligned_rubric):
        assert not {conversation_of[e.candidate] for e in rubric.examples} & held
    example = re.compile(r"<<<EXAMPLE \d+ CANDIDATE (\w+)>>>\n(.*?)\n<<<END EXAMPLE \d+ CANDIDATE \1>>>", re.DOTALL)
    shown_in = 0
    for prompt, _ in log:
        asked = conversation_of[_ITEM.findall(prompt)[-1][1]]
        shown = {conversation_of[text] for _, text in example.findall(prompt)}
        assert asked not in shown
        shown_in += bool(shown)
    assert shown_in > 100
    assert result.card("original").cluster == {"column": "conversation_id", "n_clusters": len(held)}
    # cluster=None: the rows are independent items again, and then conversations do straddle the split
    plain = align(LLMJudge(ScriptedAdapter(simulated(0.6, 0.97)), rubric=POLITE), data, human="human",
                  progress=False, seed=2, cluster=None)
    assert plain.provenance["split"]["grouped_by"] == ["content"]
    assert plain.to_frame().groupby("conversation_id")["split"].nunique().gt(1).any()
    assert plain.card("original").cluster is None


def test_a_judge_without_a_rubric_aligns_its_builtin_one():
    data = labelled(60).assign(baseline="a polite, helpful reply")
    result = align(LLMJudge(scripted(0.8, 0.8)), data, human="human", progress=False)
    assert result.original_rubric.name == "correctness"
    assert result.heldout.loc[0, "rubric_hash"] == LLMJudge(scripted(0.8, 0.8)).rubric_hash
    assert result.rubric.hash == result.judge.rubric_hash


# -- cost -------------------------------------------------------------------------------------------------


def test_cost_is_said_up_front_and_charged_to_the_budget(capsys, caplog):
    data = labelled(40)
    adapter = scripted(0.7, 0.7, cost_per_call=0.001)
    tracker = BudgetTracker(10.0)
    with caplog.at_level("INFO", logger="llm_connect"):
        result = align(LLMJudge(adapter, rubric=POLITE), data, human="human", budget=tracker, progress=True)
    err = capsys.readouterr().err
    first = err.strip().splitlines()[0]
    assert first.startswith("align: ") and f"{result.plan['judge_calls']:,} judge calls" in first
    assert any("judge calls" in r.getMessage() for r in caplog.records)
    assert result.plan["judge_calls"] == len(adapter.calls)  # the count said before is the count made
    assert tracker.spent_usd == pytest.approx(0.001 * len(adapter.calls))
    assert result.cost_usd == pytest.approx(tracker.spent_usd)
    with pytest.raises(BudgetExceededError, match="budget"):
        align(LLMJudge(scripted(0.7, 0.7, cost_per_call=0.001), rubric=POLITE), data, human="human",
              budget=0.02, progress=False)


def test_a_known_price_gives_dollars_before_judging_and_the_cache_makes_a_rerun_free(tmp_path):
    data = labelled(40)
    with LoopbackServer(reply=simulated(0.7, 0.7)) as server:
        def adapter() -> OpenAICompatibleAdapter:
            return OpenAICompatibleAdapter("loopback-model", base_url=server.base_url,
                                           prices={"loopback-model": (1.0, 2.0)}, cache=tmp_path / "cache")

        first = align(LLMJudge(adapter(), rubric=POLITE), data, human="human", progress=False)
        made = len(server.requests)
        assert first.plan["price_known"] and first.plan["cost_usd"] > 0
        assert "$" in first.plan["message"]
        assert first.cost_usd > 0 and made == first.plan["judge_calls"]
        again = align(LLMJudge(adapter(), rubric=POLITE), data, human="human", progress=False)
        assert len(server.requests) == made  # every reply from the cache
        assert again.cost_usd == 0.0
        pd.testing.assert_frame_equal(again.heldout, first.heldout)


def test_bad_input_is_refused_before_any_call():
    adapter = scripted(0.7, 0.7)
    with pytest.raises(ValidationError, match="at least"):
        align(LLMJudge(adapter, rubric=POLITE), labelled(8), human="human", progress=False)
    with pytest.raises(ValidationError, match="human"):
        align(LLMJudge(adapter, rubric=POLITE), labelled(40).drop(columns=["human"]), human="human", progress=False)
    with pytest.raises(ValidationError, match="metric"):
        align(LLMJudge(adapter, rubric=POLITE), labelled(40), human="human", metric="f1", progress=False)
    with pytest.raises(ValidationError, match="optimizer"):
        align(LLMJudge(adapter, rubric=POLITE), labelled(40), human="human", candidates=["rewrite"],
              progress=False)
    assert adapter.calls == []


def test_an_optimizer_rewrites_the_criteria_from_disagreements_and_notes():
    data = labelled(60)
    seen: list[str] = []

    def rewrite(prompt: str, *_: object) -> str:
        seen.append(prompt)
        return "<criteria>Is the reply courteous, and never dismissive of the customer?</criteria>"

    judge_adapter = ScriptedAdapter(simulated(0.6, 0.6))
    result = align(LLMJudge(judge_adapter, rubric=POLITE), data, human="human", optimizer=ScriptedAdapter(rewrite),
                   progress=False)
    assert {"rewrite", "rewrite+examples:4"} <= set(result.candidates["candidate"])
    # each rewrite once per fold, and once more on the whole selection split if a rewrite was chosen
    assert len(seen) == 2 * 5 + result.chosen.startswith("rewrite")
    assert "dismissive" in seen[0] and POLITE.criteria in seen[0]  # people's notes and the current criteria
    assert any("courteous" in c.prompt for c in judge_adapter.calls)
    assert result.plan["optimizer_calls"] == 2 * 5 + 1 >= len(seen)


# -- versioned judges -----------------------------------------------------------------------------------------


def test_accepting_writes_a_versioned_card_and_routing_reads_the_rubric_that_wrote_the_scores(tmp_path):
    data = labelled(120, seed=5)
    adapter = scripted(0.55, 0.97)
    judge = LLMJudge(adapter, rubric=POLITE)
    result = align(judge, data, human="human", progress=False)
    assert result.accepted, result.summary()
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    registry = JudgeCardRegistry.for_ledger(ledger)
    registry.save(result.card("original"))
    card = result.save_card(ledger)
    assert card is not None and card.rubric_hash == result.judge.rubric_hash
    prov = card.provenance
    assert prov["parent_rubric_hash"] == POLITE.hash
    assert prov["labels"] == {"n": 120, "pass": int(data["human"].sum()), "fail": int((1 - data["human"]).sum())}
    assert prov["split"]["selection"] + prov["split"]["heldout"] == 120
    assert prov["split"]["heldout"] == len(result.heldout_ids)
    assert prov["heldout"]["aligned"]["kappa"] == pytest.approx(result.heldout.loc[1, "kappa"])
    assert prov["difference"]["low"] > 0 and prov["examples"]
    versions = registry.versions(judge.grader_id)
    assert [c.rubric_hash for c in versions] == [POLITE.hash, card.rubric_hash]  # every version kept
    assert JudgeCardRegistry.for_ledger(ledger).get(judge.grader_id, card.rubric_hash).provenance == prov
    # scores written by the aligned rubric are routed on its card; the original's card is below the bar
    assert card.kappa_low > 0.4 > versions[0].kappa_low
    items = data.assign(candidate_model="m1")
    judge_many(result.judge, items, ledger=ledger, task_type="support", progress=False)
    decision = route(ledger, "support", threshold=0.0, require_calibrated=True, min_kappa=0.4)
    assert decision.rubric_hash == card.rubric_hash
    other = QualityLedger(tmp_path / "other.jsonl")
    judge_many(judge, items, ledger=other, task_type="support", progress=False)
    with pytest.raises(UncalibratedJudgeError, match="below the bar"):
        route(other, "support", threshold=0.0, require_calibrated=True, min_kappa=0.4, cards=registry)


# -- the command line ---------------------------------------------------------------------------------------


def _run(argv: list[str], capsys) -> tuple[int, str]:
    from llm_connect.cli import main

    code = main(argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize(("with_examples", "decision"), [(0.97, "accepted"), (0.6, "kept")])
def test_the_command_line_writes_the_rubric_the_tables_and_the_card(tmp_path, capsys, with_examples, decision):
    data = labelled(100)
    path = tmp_path / "labels.jsonl"
    data.to_json(path, orient="records", lines=True)
    rubric_file = tmp_path / "polite.yaml"
    POLITE.to_yaml(rubric_file)
    out, ledger = tmp_path / "out", tmp_path / "ledger.jsonl"
    with LoopbackServer(reply=simulated(0.6, with_examples)) as server:
        code, stdout = _run(["align", str(path), "--judge", "openai:loopback-model", "--base-url", server.base_url,
                             "--human", "human", "--rubric", str(rubric_file), "--out", str(out),
                             "--ledger", str(ledger), "--no-progress"], capsys)
    assert code == 0
    assert stdout.splitlines()[0].startswith(decision)
    for name in ("rubric.yaml", "alignment.csv", "alignment.html"):
        assert (out / name).is_file()
    written = Rubric.from_yaml(out / "rubric.yaml")
    table = pd.read_csv(out / "alignment.csv")
    assert {"heldout", "cross-validation"} == set(table["stage"])
    page = (out / "alignment.html").read_text(encoding="utf-8")
    assert "Held-out labels" in page and "disagreements" in page
    cards = JudgeCardRegistry.for_ledger(ledger).cards() if Path(str(ledger) + ".cards.json").exists() else []
    if decision == "accepted":
        assert written.examples and written.hash != POLITE.hash
        assert [c.rubric_hash for c in cards] == [written.hash]
        assert cards[0].provenance["parent_rubric_hash"] == POLITE.hash
    else:
        assert written == POLITE and cards == []


def test_the_command_line_refuses_a_bad_rubric_file(tmp_path, capsys):
    path = tmp_path / "labels.jsonl"
    labelled(40).to_json(path, orient="records", lines=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("criteria: x\nscale: stars\n", encoding="utf-8")
    from llm_connect.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["align", str(path), "--judge", "openai:m", "--base-url", "http://127.0.0.1:9", "--human", "human",
              "--rubric", str(bad), "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert "'scale'" in capsys.readouterr().err
