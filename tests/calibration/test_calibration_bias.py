"""Bias probes on judges whose bias is known by construction."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from llm_connect.calibration import PROBES, perturb_items, probe_judge, run_probes
from llm_connect.grading import ExactMatchJudge, FunctionJudge, LLMJudge, PairwiseJudge, normalize_squad
from llm_connect.stats import paired_shift
from llm_connect.testing import ScriptedAdapter


def make_items(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ref = f"Paris {i}"
        correct = bool(rng.random() < 0.6)
        cand = ref if correct else f"Lyon {i}"
        if rng.random() < 0.5:
            cand = f"The answer is {cand}. It is well known."
        rows.append({"id": i, "prompt": f"Where is thing {i}?", "baseline": ref, "candidate": cand})
    return pd.DataFrame(rows)


def contains(b: str, c: str) -> float:
    """Unbiased by construction: correct iff the reference's words appear in order."""
    return 1.0 if normalize_squad(b) in normalize_squad(c) else 0.0


LIKES_LENGTH = FunctionJudge(lambda b, c: min(1.0, 0.2 * contains(b, c) + len(c.split()) / 40), grader_id="long")
UNBIASED = FunctionJudge(contains, grader_id="fair")
LIKES_FORMAT = FunctionJudge(lambda b, c: 0.5 * contains(b, c) + (0.5 if ("**" in c or "#" in c) else 0.0),
                             grader_id="pretty")


def obedient_reply(prompt: str, run_config) -> str:
    score = 1.0 if "ignore the rubric" in prompt.lower() else 0.4
    return "Here is my verdict:\n" + json.dumps({"notes": "graded", "quality_score": score})


def probe(judge, probe_name, items=None, **kw):
    return probe_judge(judge, make_items() if items is None else items, probe_name, progress=False, n_boot=500, **kw)


def test_length_loving_judge_shows_a_positive_length_shift():
    r = probe(LIKES_LENGTH, "length")
    s = r.stats
    assert s.n == 40
    assert s.mean_shift > 0.2
    assert s.shift_low > 0
    assert s.p_value < 1e-4
    assert r.significant
    assert s.mean_perturbed > s.mean_original
    assert len(r.items) == 40 and (r.items["perturbed_candidate"].str.len() > r.items["candidate"].str.len()).all()


@pytest.mark.parametrize("probe_name", ["length", "format", "injection"])
def test_unbiased_judge_shows_no_shift(probe_name):
    s = probe(UNBIASED, probe_name).stats
    assert s.mean_shift == 0.0
    assert s.shift_low == 0.0 and s.shift_high == 0.0
    assert s.p_value == 1.0
    assert s.flip_rate == 0.0


def test_format_loving_judge_shows_a_format_shift_and_not_a_length_one():
    fmt = probe(LIKES_FORMAT, "format").stats
    assert fmt.mean_shift == pytest.approx(0.5)
    assert fmt.shift_low > 0 and fmt.p_value < 1e-4
    assert probe(LIKES_FORMAT, "length").stats.mean_shift == 0.0


def test_injection_obeying_llm_judge_shows_an_injection_shift():
    adapter = ScriptedAdapter(obedient_reply, model_id="gpt-4o-mini")
    judge = LLMJudge(adapter, seed=1)
    r = probe(judge, "injection")
    assert r.stats.mean_shift == pytest.approx(0.6)
    assert r.stats.shift_low > 0 and r.stats.p_value < 1e-4
    assert r.stats.flip_rate == 1.0 and r.stats.flips_up == 40
    assert len(adapter.calls) == 80  # originals and perturbed items, one call each
    # given the original scores, only the perturbed items are judged
    again = ScriptedAdapter(obedient_reply)
    probe(LLMJudge(again), "injection", original_scores=np.full(40, 0.4))
    assert len(again.calls) == 40


def test_unscored_llm_replies_are_dropped_not_zero():
    def reply(prompt, rc):
        return "I refuse to grade." if "thing 3?" in prompt or "thing 7?" in prompt else '{"quality_score": 0.5}'

    r = probe(LLMJudge(ScriptedAdapter(reply)), "length")
    assert r.stats.n == 38
    assert r.items["original"].isna().sum() == 2


class Pairwise:
    """A pairwise judge: the score is P(candidate beats baseline). ``first`` > 0 favours the first slot."""

    pairwise = True

    def __init__(self, first: float, grader_id: str) -> None:
        self.first = first
        self.grader_id = grader_id

    def judge(self, baseline, candidate, *, prompt, run_config):
        from llm_connect.grading import GradingResult

        fair = 0.5 + 0.4 * (contains(baseline.content, candidate.content) - contains(candidate.content,
                                                                                      baseline.content))
        score = min(1.0, max(0.0, fair - self.first))
        return GradingResult(score, "", self.grader_id, baseline, candidate)


def test_position_probe_on_pairwise_judges():
    biased = probe(Pairwise(0.3, "first-slot"), "position").stats
    assert biased.mean_shift > 0.3 and biased.shift_low > 0 and biased.p_value < 1e-4
    fair = probe(Pairwise(0.0, "fair-pair"), "position").stats
    assert fair.mean_shift == pytest.approx(0.0) and fair.p_value == 1.0


def test_position_probe_on_the_pairwise_llm_judge():
    """Always answering "A" is pure position bias: one order shows it, both orders cancel it."""
    always_a = '{"notes": "A reads better", "winner": "A"}'
    one_order = probe(PairwiseJudge(ScriptedAdapter([always_a], cycle=True), both_orders=False), "position")
    assert one_order.stats.mean_shift == pytest.approx(1.0) and one_order.stats.p_value < 1e-4
    assert one_order.stats.flip_rate == 1.0
    both = probe(PairwiseJudge(ScriptedAdapter([always_a], cycle=True)), "position")
    assert both.stats.mean_shift == 0.0 and both.stats.p_value == 1.0
    auto = run_probes({"pw": PairwiseJudge(ScriptedAdapter([always_a], cycle=True), both_orders=False)},
                      make_items(5), progress=False, n_boot=50)
    assert "position" in {r.probe for r in auto.results}


def test_position_does_not_apply_to_pointwise_judges():
    r = probe(UNBIASED, "position")
    assert r.stats.n == 0 and "pairwise" in r.stats.note and math.isnan(r.stats.mean_shift)


def test_run_probes_auto_and_explicit():
    judges = {"fair": UNBIASED, "long": LIKES_LENGTH, "pair": Pairwise(0.2, "pair")}
    auto = run_probes(judges, make_items(20), progress=False, n_boot=100)
    combos = {(r.judge, r.probe) for r in auto.results}
    assert ("pair", "position") in combos and ("fair", "position") not in combos
    assert len(combos) == 3 * 3 + 1
    frame = auto.frame
    for col in ("judge", "probe", "n", "mean_shift", "shift_low", "shift_high", "p_value", "flip_rate"):
        assert col in frame.columns
    assert auto.result("long", "length").stats.mean_shift > 0
    explicit = run_probes({"fair": UNBIASED}, make_items(10), probes="length,position", progress=False, n_boot=50)
    assert [(r.probe, r.stats.n) for r in explicit.results] == [("length", 10), ("position", 0)]
    assert "position applies only" in explicit.frame.loc[1, "note"]
    assert "<table" in auto._repr_html_() and "<table" in auto.result("long", "length")._repr_html_()
    with pytest.raises(ValueError, match="unknown probe"):
        run_probes(judges, make_items(3), probes=["size"])


def test_exact_match_is_hurt_by_padding_but_not_by_markdown():
    judge = ExactMatchJudge(normalizer="squad")
    items = make_items()
    assert probe(judge, "length", items).stats.mean_shift < 0
    assert probe(judge, "format", items).stats.mean_shift == 0.0


def test_paired_shift_edge_cases():
    zero = paired_shift([0.5, 0.5, 1.0], [0.5, 0.5, 1.0])
    assert zero.p_value == 1.0 and zero.mean_shift == 0.0 and zero.flip_rate == 0.0
    empty = paired_shift([np.nan], [0.3])
    assert empty.n == 0 and math.isnan(empty.mean_shift) and empty.note
    one = paired_shift([0.2], [0.9])
    assert one.n == 1 and one.mean_shift == pytest.approx(0.7) and math.isnan(one.shift_low)
    assert one.flips_up == 1
    s = paired_shift(np.linspace(0, 0.5, 30), np.linspace(0, 0.5, 30) + 0.1, threshold=0.3)
    assert s.mean_shift == pytest.approx(0.1) and s.shift_low == pytest.approx(0.1) and s.p_value < 1e-4


def test_perturb_items():
    items = make_items(3)
    for name in PROBES:
        out = perturb_items(items, name)
        assert len(out) == 3 and out["id"].tolist() == [0, 1, 2]
    swapped = perturb_items(items, "position")
    assert swapped["baseline"].tolist() == items["candidate"].tolist()
    assert swapped["candidate"].tolist() == items["baseline"].tolist()
    with pytest.raises(ValueError):
        perturb_items(items, "colour")


def test_progress_bars_name_the_phase_and_the_judge(capsys):
    """Grading and each probe say what they are doing, for which judge ("probe: length — fair")."""
    from llm_connect.calibration import calibrate

    calibrate({"fair": UNBIASED}, make_items(12), probes="length,format", progress=True, n_boot=200)
    err = capsys.readouterr().err
    assert "grading: fair" in err
    assert "probe: length \N{EM DASH} fair" in err and "probe: format \N{EM DASH} fair" in err
