"""calibrate() end to end with scripted judges: the tidy frame, the report, its HTML and widget."""

from __future__ import annotations

import base64
import json
import math
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect.calibration import CalibrationReport, calibrate, score_items
from llm_connect.grading import EmbeddingSimilarityJudge, ExactMatchJudge, FunctionJudge, LLMJudge
from llm_connect.testing import DeterministicEmbedder, ScriptedAdapter


def dataset(n: int = 36, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        correct = bool(rng.random() < 0.6)
        answer = f"Paris {i}" if correct else f"Lyon {i}"
        if rng.random() < 0.4:
            answer = f"I believe the answer is {answer}, as far as I know."
        rows.append({
            "id": f"q{i}",
            "prompt": f"Where is landmark {i}?",
            "baseline": f"Paris {i} | the city of Paris {i}",
            "candidate": answer,
            "verdict": "yes" if correct else "no",
            "rater1": "yes" if correct != (i % 9 == 0) else "no",
            "rater2": "yes" if correct != (i % 7 == 0) else "no",
            "candidate_model": ["gpt-4o-mini", "llama-3-8b", "claude-3-haiku"][i % 3],
        })
    return rows


def llm_reply(prompt: str, run_config) -> str:
    """Scores by whether 'Paris' is in the candidate part; refuses now and then; likes long answers."""
    candidate = prompt.split("Candidate answer:", 1)[1]
    if "landmark 5?" in prompt:
        return "I cannot grade this."
    score = 0.8 if "Paris" in candidate else 0.2
    score = min(1.0, score + 0.002 * len(candidate.split()))
    return json.dumps({"notes": "ok", "quality_score": round(score, 3)})


def judges():
    return {
        "exact": ExactMatchJudge(normalizer="squad", reference_sep="|"),
        "embedding": EmbeddingSimilarityJudge(DeterministicEmbedder(), reference_sep="|"),
        "llm": LLMJudge(ScriptedAdapter(llm_reply, model_id="gpt-4o-mini"), seed=0),
    }


@pytest.fixture(scope="module")
def report() -> CalibrationReport:
    return calibrate(dataset(), judges(), human="verdict", annotators=["rater1", "rater2"], reference_sep="|",
                     n_boot=200, progress=False)


def test_tidy_frame(report):
    s = report.scores
    assert len(s) == 36 and s["id"].tolist()[:2] == ["q0", "q1"]
    for col in ("score_exact", "score_embedding", "score_llm", "score_human", "score_rater1", "score_rater2",
                "status_llm", "notes_llm", "candidate_chars", "candidate_words", "has_bold", "model_family"):
        assert col in s.columns, col
    assert s["model_family"].tolist()[:3] == ["gpt", "llama", "claude"]
    # the refused reply is unscored: NaN, never 0
    row = s.index[s["id"] == "q5"][0]
    assert math.isnan(s.loc[row, "score_llm"]) and s.loc[row, "status_llm"] == "unscored"
    assert s.attrs["usage"]["llm"]["unscored"] == 1
    assert s.attrs["judge_families"] == {"exact": None, "embedding": None, "llm": "gpt"}
    assert report.judges == ["exact", "embedding", "llm"]
    assert report.labels == ["human", "rater1", "rater2"]
    assert s.attrs["usage"]["llm"]["judge_cost_usd"] == 0.0  # the judge's own cost, as in result frames


def test_stages_get_the_metadata_explicitly_not_through_attrs(report):
    from dataclasses import replace

    from llm_connect.calibration import ScoredItems

    assert isinstance(report.scored, ScoredItems) and report.scored.frame is report.scores
    assert report.scored.judge_families == {"exact": None, "embedding": None, "llm": "gpt"}
    assert report.scored.pairwise == {"exact": False, "embedding": False, "llm": False}
    # a pandas operation that drops attrs (or a user clearing them) changes nothing downstream
    bare = report.scores.copy()
    bare.attrs.clear()
    again = replace(report, scores=bare, scored=replace(report.scored, frame=bare))
    assert again.judges == report.judges and again.labels == report.labels
    assert [c.verdict for c in again.judge_cards()] == [c.verdict for c in report.judge_cards()]
    assert [c.rubric_hash for c in again.judge_cards()] == [c.rubric_hash for c in report.judge_cards()]
    assert report.reference == "human"


def test_exact_judge_uses_any_reference(report):
    s = report.scores
    matches = s["candidate"].str.fullmatch(r"Paris \d+")
    assert (s.loc[matches, "score_exact"] == 1.0).all()
    assert (s.loc[~matches, "score_exact"] == 0.0).all()


def test_llm_judge_sees_references_one_per_line():
    adapter = ScriptedAdapter(llm_reply)
    score_items(dataset(2), {"llm": LLMJudge(adapter)}, reference_sep="|", progress=False)
    assert "Paris 0\nthe city of Paris 0" in adapter.prompts[0]


def test_agreement_pairs_and_ceiling(report):
    frame = report.agreement_frame()
    assert len(frame) == 15  # 6 judges, every pair
    ceiling = frame[frame["ceiling"]]
    assert ceiling[["judge_a", "judge_b"]].values.tolist() == [["rater1", "rater2"]]
    llm_human = frame[(frame["judge_a"] == "llm") & (frame["judge_b"] == "human")].iloc[0]
    assert llm_human["n"] == 35  # the unscored row is dropped pairwise
    assert list(frame.columns[:9]) == ["judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa", "kappa_low",
                                       "kappa_high", "krippendorff_alpha", "spearman"]


def test_bias_probes_ran_where_they_apply(report):
    frame = report.bias_frame()
    assert set(frame["probe"]) == {"length", "format", "injection"}  # no pairwise judge: no position
    assert len(frame) == 9
    llm_length = report.bias.result("llm", "length").stats
    assert llm_length.mean_shift > 0 and llm_length.n == 35


def test_summary_and_diagnostics(report):
    summary = report.summary()
    assert summary["judge"].tolist() == ["exact", "embedding", "llm"]
    assert {"kappa", "kappa_low", "largest_bias"} <= set(summary.columns)
    eff = report.length_effect("llm")
    assert eff.controls == ["human"] and eff.n == 35
    assert report.length_controlled("llm").summary["group"].tolist() == ["claude", "gpt", "llama"]
    sp = report.self_preference("llm")
    assert sp.family == "gpt" and len(sp.strata) == 2
    assert report.sweep("llm")["n"].eq(35).all()
    assert report.disagreements("llm", "exact", top=3)["gap"].is_monotonic_decreasing


def test_html_and_file(report, tmp_path):
    html = report._repr_html_()
    assert "Agreement at threshold" in html and "Bias probes" in html
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert len(images) >= 5
    assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
    path = report.to_html(tmp_path / "sub" / "report.html")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<img src='data:image/png;base64," in text
    assert "http://" not in text and "https://" not in text  # self-contained
    paths = report.to_csv(tmp_path / "csv")
    scores = pd.read_csv(paths["scores"])
    assert list(scores.columns) == ["id", "score_exact", "score_embedding", "score_llm", "score_human",
                                    "score_rater1", "score_rater2"]
    assert scores["score_llm"].isna().sum() == 1
    assert len(pd.read_csv(paths["bias"])) == 9


def test_widget_builds_and_reacts(report):
    box = report.widget()
    c = box.controls
    assert c.judge_a.value == "exact" and c.judge_b.value == "human"
    summary, scatter, table = c.summary.value, c.scatter.value, c.disagreements.value
    assert "exact vs human" in summary and scatter[:4] == b"\x89PNG"
    c.threshold.value = 0.9
    assert c.summary.value != summary and "threshold 0.9" in c.summary.value
    c.judge_a.value = "llm"
    assert c.scatter.value != scatter and "llm vs human" in c.summary.value
    c.top.value = 3
    assert c.disagreements.value != table and c.disagreements.value.count("<tr>") == 4
    assert [c.bias_tabs.get_title(i) for i in range(len(c.bias_tabs.children))] == ["length", "format", "injection"]


def test_score_items_validates_inputs():
    with pytest.raises(ValueError, match="candidate"):
        score_items([{"prompt": "p", "baseline": "b"}], {"f": FunctionJudge(lambda b, c: 1.0)}, progress=False)
    with pytest.raises(ValueError, match="no label column"):
        score_items(dataset(2), {"f": FunctionJudge(lambda b, c: 1.0)}, human="nope", progress=False)
    with pytest.raises(ValueError, match="not a label"):
        score_items([{**dataset(1)[0], "verdict": "perhaps"}], {"f": FunctionJudge(lambda b, c: 1.0)},
                    human="verdict", progress=False)
    named = score_items(dataset(2), [FunctionJudge(lambda b, c: 0.5, grader_id="half-score")], progress=False)
    assert named["score_half-score"].tolist() == [0.5, 0.5]  # score_<grader_id>, verbatim
    renamed = [{"prompt": "p", "reference": "Paris", "candidate": "paris"}]
    assert score_items(renamed, {"exact": ExactMatchJudge(normalizer="lower")}, progress=False)[
        "score_exact"].tolist() == [1.0]


def test_calibrate_without_probes_or_labels():
    rep = calibrate(dataset(8), {"exact": ExactMatchJudge(), "f": FunctionJudge(lambda b, c: 0.5)}, probes=None,
                    n_boot=50, progress=False)
    assert rep.bias is None and rep.reference == "exact"
    assert rep.bias_frame().empty and "<table" in rep._repr_html_()
    limited = calibrate(dataset(12), {"f": FunctionJudge(lambda b, c: min(1.0, len(c) / 80))}, probes="length",
                        probe_limit=5, n_boot=50, progress=False)
    assert limited.bias.result("f", "length").stats.n == 5


def test_report_of_a_judge_that_never_scores():
    refusing = LLMJudge(ScriptedAdapter(lambda p, rc: "no"))
    rep = calibrate(dataset(6), {"llm": refusing, "exact": ExactMatchJudge()}, human="verdict", n_boot=20,
                    progress=False)
    assert rep.scores["score_llm"].isna().all()
    assert rep.agreement.pair("llm", "human").n == 0
    assert rep.bias.result("llm", "length").stats.n == 0
    assert "<img" in rep._repr_html_()
    assert rep.widget().controls.summary.value
