"""Verdicts in words, judge cards and their registry (the estimates issue)."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import sys

import numpy as np
import pytest

from llm_connect.calibration._cards import card_from_scores
from llm_connect.cards import (
    MIN_LABELLED,
    JudgeCard,
    JudgeCardRegistry,
    ProbeEffect,
    agreement_band,
    card_verdict,
    registry_path,
)
from llm_connect.errors import ValidationError


def test_verdict_no_better_than_chance_says_do_not_use():
    line = card_verdict("llm-judge", kappa=0.02, kappa_low=-0.18, kappa_high=0.24, n=80)
    assert line == (
        "llm-judge: no better than chance against people (kappa 0.02, 95% CI -0.18..0.24); do not use its scores"
    )


def test_verdict_band_and_significant_bias_only():
    biases = [
        ProbeEffect("length", -0.08, -0.13, -0.03, 0.006, 40),
        ProbeEffect("format", 0.01, -0.02, 0.04, 0.6, 40),  # not significant: not mentioned
    ]
    line = card_verdict("embedding-similarity", kappa=0.48, kappa_low=0.25, kappa_high=0.68, n=80, biases=biases)
    assert line == (
        "embedding-similarity: moderate agreement against people (kappa 0.48, 95% CI 0.25..0.68); "
        "biased against longer answers (-0.08, p=0.006)"
    )


@pytest.mark.parametrize(
    ("kappa", "band"),
    [(0.0, "slight"), (0.19, "slight"), (0.2, "fair"), (0.4, "moderate"), (0.6, "substantial"), (0.8, "almost perfect"),
     (1.0, "almost perfect")],
)
def test_landis_koch_bands(kappa, band):
    assert agreement_band(kappa) == band


def test_verdict_low_bands_advise_correction_and_small_n_asks_for_labels():
    fair = card_verdict("j", kappa=0.3, kappa_low=0.1, kappa_high=0.5, n=100)
    assert "fair agreement" in fair and "human correction" in fair
    few = card_verdict("j", kappa=0.9, kappa_low=0.7, kappa_high=1.0, n=MIN_LABELLED - 1)
    assert "not enough evidence" in few and "label more" in few
    nan = card_verdict("j", kappa=math.nan, kappa_low=math.nan, kappa_high=math.nan, n=200)
    assert "not enough evidence" in nan


def test_verdict_without_people_names_the_reference():
    line = card_verdict("llm-judge", kappa=0.5, kappa_low=0.3, kappa_high=0.7, n=50, reference="exact-match",
                         people=False)
    assert "against exact-match (no human labels)" in line


def test_verdict_mentions_mean_bias_and_unscored_rate():
    line = card_verdict("j", kappa=0.7, kappa_low=0.6, kappa_high=0.8, n=200, mean_bias=0.15, bias_low=0.1,
                         bias_high=0.2, unscored_rate=0.25)
    assert "scores 0.15 higher than people on average (+0.10..+0.20)" in line
    assert "leaves 25% of items unscored" in line
    quiet = card_verdict("j", kappa=0.7, kappa_low=0.6, kappa_high=0.8, n=200, mean_bias=0.15, bias_low=-0.01,
                          bias_high=0.3, unscored_rate=0.05)
    assert "higher than people" not in quiet and "unscored" not in quiet


def _labels(n=150, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 2, n).astype(float)
    flip = rng.random(n) < noise
    judge = np.where(flip, 1 - human, human)
    return judge, human


def test_card_from_scores_computes_agreement_kappa_and_verdict():
    from sklearn.metrics import cohen_kappa_score

    judge, human = _labels()
    judge = judge.copy()
    judge[:10] = np.nan  # unscored
    card = card_from_scores(judge, human, grader_id="llm-judge", rubric_hash="abc", n_boot=300)
    keep = ~np.isnan(judge)
    assert card.n_labelled == int(keep.sum())
    assert card.kappa == pytest.approx(cohen_kappa_score(judge[keep] >= 0.5, human[keep] >= 0.5))
    assert card.percent_agreement == pytest.approx(float(((judge[keep] >= 0.5) == (human[keep] >= 0.5)).mean()))
    assert card.kappa_low < card.kappa < card.kappa_high
    assert card.unscored_rate == pytest.approx(10 / 150)
    assert card.verdict.startswith("llm-judge: ") and card.verdict == str(card)
    assert card.calibrated and card.meets(min_kappa=0.5) and not card.meets(min_kappa=0.99)


def test_card_round_trips_through_json_and_registry(tmp_path):
    judge, human = _labels(seed=1)
    card = card_from_scores(judge, human, grader_id="g", rubric_hash=None, n_boot=200,
                            probes=[ProbeEffect("length", 0.3, 0.1, 0.5, 0.014, 24)], position_consistency=0.9)
    again = JudgeCard.from_dict(json.loads(json.dumps(card.to_dict())))
    assert again == card
    reg = JudgeCardRegistry.for_ledger(tmp_path / "ledger.jsonl")
    assert reg.path == registry_path(tmp_path / "ledger.jsonl") == tmp_path / "ledger.jsonl.cards.json"
    assert reg.get("g") is None and len(reg) == 0
    reg.save(card)
    other = card_from_scores(judge, human, grader_id="g", rubric_hash="r2", n_boot=200)
    reg.save([other])
    assert len(reg) == 2
    assert reg.get("g", None) in (card, other)
    assert reg.get("g", "r2") == other
    reg.save(other)  # replaces, does not duplicate
    assert len(reg) == 2
    assert list(reg.frame()["grader_id"]) == ["g", "g"]


def test_card_html_escapes_hostile_ids():
    judge, human = _labels(seed=2)
    card = card_from_scores(judge, human, grader_id="<img src=x onerror=alert(1)>", n_boot=100,
                            probes=[ProbeEffect("<script>", 0.2, 0.1, 0.3, 0.01, 10)])
    page = card._repr_html_()
    assert "<img" not in page and "<script>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_registry_rejects_a_corrupt_file_with_a_clear_error(tmp_path):
    path = tmp_path / "cards.json"
    path.write_text("{not json")
    with pytest.raises(ValidationError, match="not valid JSON"):
        JudgeCardRegistry(path).cards()
    path.write_text('{"cards": 3}')
    with pytest.raises(ValidationError, match="no 'cards' list"):
        JudgeCardRegistry(path).cards()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("people", None, "people must be true or false"),
    ("people", "false", "people must be true or false"),
    ("n_labelled", None, "n_labelled must be a count"),
    ("n_labelled", 12.5, "n_labelled must be a count"),
    ("n_items", -1, "n_items must be a count"),
    ("kappa", "0.9", "kappa must be a number"),
    ("verdict", None, "verdict must be a string"),
])
def test_a_card_of_the_wrong_types_is_refused_not_read_as_a_verdict(tmp_path, field, value, message):
    """A registry's card with ``"people": null`` was read back with people = NaN, which is truthy: the card was
    calibrated and met any kappa, so routing would take a judge nobody checked. Each field's type is checked."""
    judge, human = _labels(seed=3)
    data = json.loads(json.dumps(card_from_scores(judge, human, grader_id="g", n_boot=100).to_dict()))
    data[field] = value
    with pytest.raises(ValidationError, match=message):
        JudgeCard.from_dict(data)
    path = tmp_path / "cards.json"
    path.write_text(json.dumps({"cards": [data]}))
    with pytest.raises(ValidationError, match=message):
        JudgeCardRegistry(path).cards()


def test_a_card_read_back_keeps_its_unknown_figures_unknown_and_its_types_plain():
    judge, human = _labels(seed=4)
    card = card_from_scores(judge, human, grader_id="g", n_boot=100)
    data = json.loads(json.dumps(card.to_dict()))
    data["kappa"] = None  # JSON's spelling of an unknown figure
    again = JudgeCard.from_dict(data)
    assert math.isnan(again.kappa) and not again.calibrated and not again.meets(min_kappa=0.0)
    made = JudgeCard(**{**data, "kappa": 0.5, "people": np.bool_(True), "n_labelled": np.int64(40),
                        "n_items": 40.0, "probes": ()})
    assert type(made.people) is bool and type(made.n_labelled) is int and type(made.n_items) is int


def _save_many(path: str, start: int) -> None:
    judge, human = _labels(n=40, seed=start)
    reg = JudgeCardRegistry(path)
    for k in range(start, start + 10):
        reg.save(card_from_scores(judge, human, grader_id=f"g{k}", n_boot=100))


@pytest.mark.slow  # 19 s measured on 2 busy cores: out of the fast loop
def test_registry_keeps_every_card_saved_by_concurrent_processes(tmp_path):
    path = str(tmp_path / "cards.json")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_save_many, args=(path, s)) for s in (0, 100, 200)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    names = {c.grader_id for c in JudgeCardRegistry(path)}
    assert names == {f"g{k}" for s in (0, 100, 200) for k in range(s, s + 10)}


def _qa_items(n=60, seed=5):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ok = bool(rng.random() < 0.6)
        words = " ".join(["filler"] * int(rng.integers(0, 30)))
        rows.append({"id": f"i{i}", "prompt": f"q{i}", "baseline": f"answer {i}",
                     "candidate": f"answer {i}" if ok else f"wrong {i} {words}", "human": "yes" if ok else "no"})
    return rows


def test_cards_from_a_calibration_report_name_each_judge_and_its_biases():
    from llm_connect import ExactMatchJudge, FunctionJudge, calibrate
    from llm_connect.calibration._cards import cards_from_report

    likes_length = FunctionJudge(lambda b, c: min(1.0, len(c.split()) / 10), grader_id="likes-length")
    report = calibrate([ExactMatchJudge(), likes_length], _qa_items(), human="human", probes=["length"],
                       n_boot=200, progress=False)
    cards = {c.grader_id: c for c in cards_from_report(report)}
    assert set(cards) == {"exact-match", "likes-length"}
    exact, length = cards["exact-match"], cards["likes-length"]
    assert exact.people and exact.reference == "human" and exact.n_labelled == 60
    assert exact.kappa == pytest.approx(1.0) and exact.verdict.startswith("exact-match: almost perfect agreement")
    probe = next(p for p in length.probes if p.probe == "length")
    assert probe.source == "probe" and probe.effect > 0 and probe.p_value < 0.05
    assert "biased toward longer answers" in length.verdict
    assert "no better than chance" in length.verdict or "agreement" in length.verdict


def test_cards_without_labels_check_against_exact_match():
    from llm_connect import ExactMatchJudge, FunctionJudge, calibrate
    from llm_connect.calibration._cards import cards_from_report

    items = [{k: v for k, v in r.items() if k != "human"} for r in _qa_items()]
    coin = FunctionJudge(lambda b, c: float(len(c) % 2), grader_id="coin")
    report = calibrate([ExactMatchJudge(), coin], items, probes=None, n_boot=200, progress=False)
    (card,) = cards_from_report(report)
    assert card.grader_id == "coin" and card.reference == "exact-match" and not card.people
    assert "against exact-match (no human labels)" in card.verdict
    assert not card.calibrated and not card.meets(min_kappa=-1.0)


# -- one voice: every verdict comes from agreement_verdict ------------------------------------------------


def test_an_interval_too_wide_to_decide_says_so_and_how_many_labels_would_settle_it():
    from llm_connect.cards import agreement_verdict, labels_to_settle

    line = agreement_verdict(0.34, -0.02, 0.66, 32)
    assert line.startswith("cannot tell yet against people: kappa 0.34 (fair), but its 95% CI -0.02..0.66 on 32 items "
                           "reaches chance, too wide to decide")
    assert labels_to_settle(0.34, -0.02, 32) == 36 and "about 4 more labelled items (36 in all)" in line
    assert "human correction" in line and "fair agreement" not in line and "no better than chance" not in line
    # the verdict of a card is that clause, whatever reads it (CLI, demo, report, cards.csv)
    assert card_verdict("j", kappa=0.34, kappa_low=-0.02, kappa_high=0.66, n=32) == f"j: {line}"
    # slight at best is decided: no better than chance; no number of labels makes a kappa of 0 beat chance
    assert agreement_verdict(0.15, -0.1, 0.4, 32).startswith("no better than chance")
    assert labels_to_settle(0.0, -0.2, 32) is None


def test_more_labels_narrow_the_interval_as_one_over_root_n():
    """The premise of labels_to_settle: the bootstrap interval of kappa halves when the items are four times as
    many (the same judge, the same people)."""
    rng = np.random.default_rng(11)
    human = (rng.random(40) < 0.5).astype(float)
    judge = np.where(rng.random(40) < 0.7, human, 1 - human)
    small = card_from_scores(judge, human, grader_id="j", n_boot=2000, seed=1)
    big = card_from_scores(np.tile(judge, 4), np.tile(human, 4), grader_id="j", n_boot=2000, seed=1)
    assert big.kappa == pytest.approx(small.kappa)
    ratio = (big.kappa_high - big.kappa_low) / (small.kappa_high - small.kappa_low)
    assert 0.4 < ratio < 0.6


@pytest.mark.parametrize("verdict", [0.0, 1.0])
def test_a_judge_that_gives_one_verdict_is_flagged_whichever_the_verdict(verdict):
    rng = np.random.default_rng(3)
    human = (rng.random(60) < 0.5).astype(float)
    card = card_from_scores(np.full(60, verdict), human, grader_id="j", n_boot=200)
    word = "yes" if verdict else "no"
    assert f"it says {word} to 100% of the items it scored" in card.weak
    assert card.verdict.startswith(f"j: one verdict against people: it says {word} to every item it scored")
    assert "do not use its scores" in card.verdict and "flagged weak" in card.verdict
    nearly = np.where(np.arange(60) < 2, 1.0 - verdict, verdict)  # 58 of 60 the same: almost every item
    assert f"it says {word} to 97% of the items it scored" in card_from_scores(nearly, human, grader_id="j",
                                                                                 n_boot=200).weak
    # without human labels the one-verdict flag still holds (only the interval needs people)
    from llm_connect.cards import weak_judge_reasons

    assert weak_judge_reasons(kappa_low=0.0, kappa_high=0.0, yes_rate=0.0, people=False) != ""


def test_the_command_line_prints_the_whole_verdict_line(tmp_path, capsys):
    from llm_connect.cli._summary import _print_verdicts

    effects = [ProbeEffect(f"probe-{k}-" + "x" * 40, 0.2, 0.1, 0.3, 0.001, 30) for k in range(8)]
    card = card_from_scores(*_labels(seed=4), grader_id="llm-judge", n_boot=100, probes=effects,
                            unscored_rate=0.4)
    assert len(card.verdict) > 400
    _print_verdicts([card], sys.stdout)
    printed = capsys.readouterr().out
    assert card.verdict in printed and "…" not in printed  # never cut off


def test_every_verdict_of_a_report_is_the_one_wording(tmp_path):
    """Cards, the page and cards.csv print the same line, whose agreement clause is agreement_verdict's."""
    import html

    from llm_connect import ExactMatchJudge, FunctionJudge, calibrate
    from llm_connect.calibration._cards import cards_from_report
    from llm_connect.cards import agreement_verdict, cards_frame

    coin = FunctionJudge(lambda b, c: float(len(c) % 2), grader_id="coin")
    report = calibrate([ExactMatchJudge(), coin], _qa_items(32), human="human", probes=None, n_boot=300,
                       progress=False)
    page = report.to_html(tmp_path / "report.html").read_text(encoding="utf-8")
    cards = cards_from_report(report)
    assert cards_frame(cards)["verdict"].tolist() == [c.verdict for c in cards]
    for card in cards:
        head = agreement_verdict(card.kappa, card.kappa_low, card.kappa_high, card.n_labelled,
                                 yes_rate=card.yes_rate, confidence=card.confidence)
        assert card.verdict.startswith(f"{card.grader_id}: {head}")
        assert html.escape(card.verdict, quote=False) in page


def test_what_exact_match_does_by_definition_is_said_as_such_not_flagged_as_a_bias(tmp_path):
    from llm_connect import ExactMatchJudge, FunctionJudge, TokenF1Judge, calibrate
    from llm_connect.calibration._cards import cards_from_report

    likes_length = FunctionJudge(lambda b, c: min(1.0, len(c.split()) / 10), grader_id="likes-length")
    report = calibrate([ExactMatchJudge(), TokenF1Judge(), likes_length], _qa_items(), human="human",
                       probes=["length", "injection"], n_boot=200, progress=False)
    cards = {c.grader_id: c for c in cards_from_report(report)}
    exact = cards["exact-match"]
    assert "biased" not in exact.verdict  # a padded answer no longer equals the reference: no defect
    assert ("scores longer answers lower" in exact.verdict and "by definition, not as a bias: an answer padded with "
            "filler no longer equals the reference" in exact.verdict)
    assert "scores instructions planted in the answer lower" in exact.verdict
    assert all(p.expected for p in exact.probes if p.source == "probe")
    assert "biased" not in cards["token-f1"].verdict and "lower its precision" in cards["token-f1"].verdict
    assert "biased toward longer answers" in cards["likes-length"].verdict  # a judge without that definition
    bias = report.bias.frame.set_index(["judge", "probe"])
    assert bias.loc[("exact-match", "length"), "by_definition"].startswith("an answer padded")
    assert bias.loc[("likes-length", "length"), "by_definition"] == ""
    assert "by definition: an answer padded" in exact._repr_html_()
    # without a length probe, the length regression of exact match is read the same way
    plain = calibrate([ExactMatchJudge()], _qa_items(), human="human", probes=None, n_boot=200, progress=False)
    (card,) = cards_from_report(plain)
    regression = [p for p in card.probes if p.source == "regression"]
    assert regression and regression[0].by_definition.startswith("an answer padded")
    assert "biased" not in card.verdict
