"""Verdicts in words, judge cards and their registry (the estimates issue)."""

from __future__ import annotations

import json
import math
import multiprocessing as mp

import numpy as np
import pytest
from scipy import stats

from llm_connect.calibration._cards import (
    MIN_LABELLED,
    JudgeCard,
    JudgeCardRegistry,
    ProbeEffect,
    agreement_band,
    card_from_scores,
    judge_verdict,
    mean_difference,
    registry_path,
)
from llm_connect.errors import ValidationError


def test_verdict_no_better_than_chance_says_do_not_use():
    line = judge_verdict("llm-judge", kappa=0.02, kappa_low=-0.18, kappa_high=0.24, n=80)
    assert line == (
        "llm-judge: no better than chance against people (kappa 0.02, 95% CI -0.18..0.24); do not use its scores"
    )


def test_verdict_band_and_significant_bias_only():
    biases = [
        ProbeEffect("length", -0.08, -0.13, -0.03, 0.006, 40),
        ProbeEffect("format", 0.01, -0.02, 0.04, 0.6, 40),  # not significant: not mentioned
    ]
    line = judge_verdict("embedding-similarity", kappa=0.48, kappa_low=0.25, kappa_high=0.68, n=80, biases=biases)
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
    fair = judge_verdict("j", kappa=0.3, kappa_low=0.1, kappa_high=0.5, n=100)
    assert "fair agreement" in fair and "human correction" in fair
    few = judge_verdict("j", kappa=0.9, kappa_low=0.7, kappa_high=1.0, n=MIN_LABELLED - 1)
    assert "not enough evidence" in few and "label more" in few
    nan = judge_verdict("j", kappa=math.nan, kappa_low=math.nan, kappa_high=math.nan, n=200)
    assert "not enough evidence" in nan


def test_verdict_without_people_names_the_reference():
    line = judge_verdict("llm-judge", kappa=0.5, kappa_low=0.3, kappa_high=0.7, n=50, reference="exact-match",
                         people=False)
    assert "against exact-match (no human labels)" in line


def test_verdict_mentions_mean_bias_and_unscored_rate():
    line = judge_verdict("j", kappa=0.7, kappa_low=0.6, kappa_high=0.8, n=200, mean_bias=0.15, bias_low=0.1,
                         bias_high=0.2, unscored_rate=0.25)
    assert "scores 0.15 higher than people on average (+0.10..+0.20)" in line
    assert "leaves 25% of items unscored" in line
    quiet = judge_verdict("j", kappa=0.7, kappa_low=0.6, kappa_high=0.8, n=200, mean_bias=0.15, bias_low=-0.01,
                          bias_high=0.3, unscored_rate=0.05)
    assert "higher than people" not in quiet and "unscored" not in quiet


def test_mean_difference_matches_scipy_t_interval():
    rng = np.random.default_rng(3)
    human = rng.integers(0, 2, 120).astype(float)
    judge = np.clip(human + rng.normal(0.1, 0.3, 120), 0, 1)
    judge[:5] = np.nan
    mean, low, high, n = mean_difference(judge, human)
    d = (judge - human)[5:]
    ref = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert n == 115
    assert mean == pytest.approx(d.mean())
    assert (low, high) == pytest.approx((ref.low, ref.high))


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
