"""calibrate() end to end with scripted judges: the tidy frame, the report, its HTML and widget."""

from __future__ import annotations

import base64
import json
import math
import re

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect.calibration import CalibrationReport, calibrate, score_items
from llm_connect.errors import JudgeFailedError
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
    return calibrate(judges(), dataset(), human="verdict", annotators=["rater1", "rater2"], reference_sep="|",
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
    score_items({"llm": LLMJudge(adapter)}, dataset(2), reference_sep="|", progress=False)
    assert "Paris 0\nthe city of Paris 0" in adapter.prompts[0]


def test_agreement_pairs_and_ceiling(report):
    frame = report.agreement_frame()
    assert len(frame) == 15  # 6 judges, every pair
    ceiling = frame[frame["ceiling"]]
    assert ceiling[["judge_a", "judge_b"]].values.tolist() == [["rater1", "rater2"]]
    llm_human = frame[(frame["judge_a"] == "llm") & (frame["judge_b"] == "human")].iloc[0]
    assert llm_human["n"] == 35  # the unscored row is dropped pairwise
    assert list(frame.columns[:9]) == ["judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa", "kappa_low",
                                       "kappa_high", "alpha_interval", "spearman"]


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


@pytest.mark.slow  # 15 s measured on 2 busy cores: out of the fast loop
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
    assert list(scores.columns) == [
        "id", "prompt", "baseline", "candidate", "candidate_model",
        "score_exact", "score_embedding", "score_llm", "score_human", "score_rater1", "score_rater2",
        "status_exact", "notes_exact", "reply_exact", "status_embedding", "notes_embedding", "reply_embedding",
        "status_llm", "notes_llm", "reply_llm",
    ]
    assert scores["score_llm"].isna().sum() == 1
    assert len(pd.read_csv(paths["bias"])) == 9


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
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
        score_items({"f": FunctionJudge(lambda b, c: 1.0)}, [{"prompt": "p", "baseline": "b"}], progress=False)
    with pytest.raises(ValueError, match="no label column"):
        score_items({"f": FunctionJudge(lambda b, c: 1.0)}, dataset(2), human="nope", progress=False)
    with pytest.raises(ValueError, match="not a label"):
        score_items({"f": FunctionJudge(lambda b, c: 1.0)}, [{**dataset(1)[0], "verdict": "perhaps"}],
                    human="verdict", progress=False)
    named = score_items([FunctionJudge(lambda b, c: 0.5, grader_id="half-score")], dataset(2), progress=False)
    assert named["score_half-score"].tolist() == [0.5, 0.5]  # score_<grader_id>, verbatim
    renamed = [{"prompt": "p", "reference": "Paris", "candidate": "paris"}]
    assert score_items({"exact": ExactMatchJudge(normalizer="lower")}, renamed, progress=False)[
        "score_exact"].tolist() == [1.0]


def test_calibrate_without_probes_or_labels():
    rep = calibrate({"exact": ExactMatchJudge(), "f": FunctionJudge(lambda b, c: 0.5)}, dataset(8), probes=None,
                    n_boot=50, progress=False)
    assert rep.bias is None and rep.reference == "exact"
    assert rep.bias_frame().empty and "<table" in rep._repr_html_()
    limited = calibrate({"f": FunctionJudge(lambda b, c: min(1.0, len(c) / 80))}, dataset(12), probes="length",
                        probe_limit=5, n_boot=50, progress=False)
    assert limited.bias.result("f", "length").stats.n == 5


def test_a_judge_that_never_scores_is_refused_with_its_first_error_not_reported():
    """No card saying "leaves 100% of items unscored", no agreement of a judge that judged nothing: calibrate
    refuses, naming the judge and the reason of its first row, before the probes spend anything."""
    refusing = LLMJudge(ScriptedAdapter(lambda p, rc: "no"))
    with pytest.raises(JudgeFailedError, match=r"judge llm scored none of the 6 items.*first error: .*quality_score"):
        calibrate({"exact": ExactMatchJudge(), "llm": refusing}, dataset(6), human="verdict", n_boot=20,
                  progress=False)
    # one scored row is enough: the rest are unscored rows, kept out of agreement, never 0
    half = LLMJudge(ScriptedAdapter(lambda p, rc: '{"quality_score": 1}' if "landmark 0" in p else "no"))
    rep = calibrate({"llm": half, "exact": ExactMatchJudge()}, dataset(6), human="verdict", n_boot=20,
                    progress=False)
    assert rep.scores["score_llm"].notna().sum() == 1 and rep.agreement.pair("llm", "human").n == 1
    assert "<img" in rep._repr_html_()


# -- the outputs a user reads back: scores table, parquet, plots per judge, p-values, intervals --------------


def test_scores_table_carries_texts_groups_statuses_notes_and_raw_replies(tmp_path):
    rows = dataset(8)
    for i, r in enumerate(rows):
        r["topic"] = ["geo", "=HYPERLINK(1)"][i % 2]  # a group column, once hostile
        r["score_old"] = i / 10  # the data's own column that looks like a judge's
    rep = calibrate(judges(), rows, human="verdict", annotators=["rater1", "rater2"], reference_sep="|",
                    probes=None, n_boot=20, progress=False)
    table = rep.scores_table()
    assert list(table.columns[:7]) == ["id", "prompt", "baseline", "candidate", "candidate_model", "topic",
                                       "input_score_old"]
    assert "score_old" not in rep.names and rep.judges == ["exact", "embedding", "llm"]
    assert table["prompt"].tolist() == [r["prompt"] for r in rows]
    assert table["input_score_old"].tolist() == [i / 10 for i in range(8)]
    refused = table.index[table["id"] == "q5"][0]  # the scripted LLM judge refuses landmark 5
    assert table.loc[refused, "status_llm"] == "unscored" and math.isnan(table.loc[refused, "score_llm"])
    assert table.loc[refused, "reply_llm"] == "I cannot grade this."  # the unusable reply, kept for audit
    assert "quality_score" in table.loc[refused, "notes_llm"]  # why it has no score
    assert json.loads(table.loc[0, "reply_llm"]) == {"notes": "ok", "quality_score": table.loc[0, "score_llm"]}
    assert table["reply_exact"].isna().all() and (table["status_exact"] == "scored").all()  # no model, no reply

    paths = rep.to_csv(tmp_path)
    csv = pd.read_csv(paths["scores"], keep_default_na=False)
    assert csv["topic"].tolist()[:2] == ["geo", "'=HYPERLINK(1)"]  # neutralised for a spreadsheet
    assert csv.loc[refused, "reply_llm"] == "I cannot grade this."

    parquet = pd.read_parquet(rep.to_parquet(tmp_path / "scores.parquet"))
    assert list(parquet.columns) == list(table.columns)
    assert parquet["topic"].tolist()[:2] == ["geo", "=HYPERLINK(1)"]  # as it was: parquet is read by code
    assert parquet["score_llm"].dtype == "float64" and parquet["score_llm"].isna().sum() == 1
    assert parquet["input_score_old"].dtype == "float64" and parquet["score_human"].tolist() == [
        1.0 if r["verdict"] == "yes" else 0.0 for r in rows]


def test_parquet_writes_a_column_of_mixed_kinds_as_text(tmp_path):
    rows = dataset(3)
    rows[0]["extra"], rows[1]["extra"], rows[2]["extra"] = 7, "seven", None
    rep = calibrate({"exact": ExactMatchJudge()}, rows, probes=None, n_boot=0, progress=False)
    back = pd.read_parquet(rep.to_parquet(tmp_path / "s.parquet"))
    assert back["extra"].tolist()[:2] == ["7", "seven"] and back["extra"].isna().tolist()[2]
    assert back["score_exact"].dtype == "float64"


def test_score_kind_and_the_plots_each_judge_gets(report):
    from llm_connect.calibration._report import PLOTS_BY_KIND, score_kind

    assert score_kind([1.0, 0.0, np.nan, 1.0]) == "binary"
    assert score_kind([1.0, 0.5, 0.0]) == "graded"
    assert score_kind([np.nan, None]) == "none"
    assert report.score_kind("exact") == "binary" and report.score_kind("llm") == "graded"
    assert report.plots_for("exact") == PLOTS_BY_KIND["binary"] == ("reliability", "length")
    assert report.plots_for("embedding") == ("scatter", "reliability", "threshold sweep", "length")
    figs = report.figures()
    assert "threshold sweep of exact" not in figs and "exact vs human" not in figs  # nothing to sweep at 0/1
    assert {"reliability of exact against human", "exact score vs length"} <= set(figs)
    for j in ("embedding", "llm"):
        assert {f"{j} vs human", f"threshold sweep of {j}", f"reliability of {j} against human"} <= set(figs)
    priced = LLMJudge(ScriptedAdapter(['{"quality_score": 1}'], cycle=True, cost_per_call=0.01))
    unpaid = calibrate({"llm": priced, "exact": ExactMatchJudge()}, dataset(6), human="verdict", probes=None,
                       n_boot=0, progress=False, budget=0.0)  # no money: the LLM judge scores nothing
    assert unpaid.score_kind("llm") == "none"
    assert unpaid.plots_for("llm") == () and not any("llm" in name for name in unpaid.figures())


def test_p_values_are_never_shown_as_zero():
    from llm_connect._html import format_p, p_text

    assert format_p(0.0) == format_p(1e-20) == format_p(0.00099) == "< 0.001"
    assert [format_p(v) for v in (0.001, 0.0056, 0.014, 0.5, 1.0)] == ["0.001", "0.0056", "0.014", "0.5", "1"]
    assert format_p(float("nan")) == format_p(None) == "—"
    assert p_text(0.0) == "p < 0.001" and p_text(0.03) == "p=0.03"


def test_report_shows_tiny_p_values_as_below_a_thousandth_and_intervals_unbroken(report):
    tiny = report.bias.result("embedding", "length").stats.p_value
    assert 0 < tiny < 1e-6  # the data make one; it used to be printed as 1.68e-07
    html = report.html(plots=False)
    assert "p &lt; 0.001" in html or "p < 0.001" in html
    assert re.search(r"p=\d(\.\d+)?e-\d", html) is None and "p=0.0," not in html
    p_cells = []  # every cell under a p / p_value header, in every table of the report
    for table in re.findall(r"<table.*?</table>", html, flags=re.S):
        header = re.findall(r"<th[^>]*>([^<]*)</th>", table)
        columns = [i for i, h in enumerate(header) if h in ("p", "p_value")]
        for row in re.findall(r"<tr>((?:<td[^>]*>[^<]*</td>)+)</tr>", table):
            cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
            p_cells += [cells[i] for i in columns if i < len(cells)]
    assert "&lt; 0.001" in p_cells and len(p_cells) >= 12  # bias probes, summary, judge cards
    assert all(c == "&lt; 0.001" or c == "—" or 0.001 <= float(c) <= 1 for c in p_cells), p_cells
    # intervals: a number, then [low, high] joined by no-break spaces, so a line never breaks inside one
    intervals = re.findall(r"-?\d[\d.]*\s\[-?[\d.]+,\s-?[\d.]+\]", html)
    assert intervals and all(" " not in i for i in intervals)
    assert all(i.count("\u00a0") == 2 for i in intervals)
    assert all("kappa" in v and "\n" not in v for v in report.verdicts())


def test_a_pairwise_judge_keeps_the_reply_of_each_order():
    from llm_connect.grading import PairwiseJudge

    def reply(prompt: str, rc) -> str:
        first = prompt.split("Answer A:\n", 1)[1].split("Answer B:", 1)[0]
        return f'{{"notes": "n", "winner": "{"A" if "Paris" in first else "B"}"}}'

    rep = calibrate({"pair": PairwiseJudge(ScriptedAdapter(reply))}, dataset(4), probes=None, n_boot=0,
                    progress=False)
    replies = rep.scores_table()["reply_pair"].tolist()
    assert all(r.startswith("[baseline-first] {") and "\n[candidate-first] {" in r for r in replies)


def test_items_of_conversations_and_agent_runs_are_shown_as_transcripts(report, tmp_path):
    assert "Transcripts" not in report.html(plots=False)  # plain items: no such section
    script = "<script>window.__pwned=1</script></details>"
    rows = []
    for i in range(12):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": {"q": script}}}
        run = [{"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}"},
               {"role": "assistant", "content": f"answer {i}"}]
        rows.append({"id": f"run-{i}", "prompt": f"question {i}", "baseline": f"answer {i}", "candidate": run,
                     "messages": [{"role": "user", "content": f"question {i}"}], "context": [script],
                     "human": "yes" if i % 3 else "no"})
    judge = FunctionJudge(lambda b, c: 0.9 if c.endswith(("1", "4", "7")) else 0.1, grader_id="ends-in-147")
    conv = calibrate([judge], rows, human="human", n_boot=20, progress=False)
    page = conv.html(plots=False)
    assert "<h3>Transcripts</h3>" in page and "<script>" not in page
    shown = re.findall(r"<details class='llmc-item'><summary>item (run-\d+) · ([^<]*)</summary>", page)
    assert len(shown) == 5  # the five where the judge and people disagree most, largest gap first
    gaps = conv.disagreements("ends-in-147", "human", top=5)
    assert [s[0] for s in shown] == gaps["id"].tolist()
    assert shown[0][1].startswith("ends-in-147 0.") and "human" in shown[0][1]
    assert page.count("class='llmc-call'") == 5 and "&lt;script&gt;window.__pwned=1" in page
    saved = conv.to_html(tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<h3>Transcripts</h3>" in saved


def test_the_summary_names_a_ceiling_only_when_two_annotators_give_one(report):
    from llm_connect.views.report import CEILING_HOWTO

    assert "the ceiling (in Agreement)" in CEILING_HOWTO
    assert "the ceiling (in Agreement)" in report._repr_html_()  # rater1 and rater2: their agreement is the ceiling
    one = calibrate(judges(), dataset(), human="verdict", reference_sep="|", probes=None, n_boot=0, progress=False)
    page = one._repr_html_()
    assert "ceiling" not in page and "second annotator" not in page


def test_the_estimates_plot_names_the_judge_it_corrects(report):
    from llm_connect.views import plot_estimates
    from llm_connect.views.report import estimates_figure

    est = report.estimates()
    judge = est["judge"].iloc[0]
    fig, ax = plt.subplots()
    plot_estimates(est, ax=ax)
    assert ax.get_title() == f"95% intervals from judge {judge}"
    assert not any(label.get_text().startswith(judge) for label in ax.get_yticklabels())  # a name, not a group
    fig2, ax2 = plt.subplots()
    plot_estimates(est.drop(columns=["judge"]), judge="my-judge", ax=ax2)
    assert ax2.get_title() == "95% intervals from judge my-judge"
    plt.close(fig)
    plt.close(fig2)
    (drawn,) = estimates_figure(est).axes  # the figure of the report's Estimates section
    assert drawn.get_title() == f"95% intervals from judge {judge}"
