"""Groups everywhere: ``calibrate(..., by=COLUMN)`` and ``llm-connect calibrate --by COLUMN``.

The data is written here: one model's answers ("extractive") are exactly the reference when
people accept them and something else when they reject them, so exact match agrees with people
perfectly; another's ("chat") are right or wrong independently of the people's verdict, so exact
match agrees at chance. The pooled kappa (0.5) describes neither group.
"""

from __future__ import annotations

import json
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy.stats import wilcoxon
from sklearn.metrics import cohen_kappa_score

matplotlib.use("Agg")

from llm_connect.calibration import calibrate
from llm_connect.calibration._groups import (
    ALL,
    MIN_GROUP_N,
    MISSING,
    agreement_by_group,
    group_labels,
)
from llm_connect.cards import JudgeCard
from llm_connect.cli import main
from llm_connect.errors import ValidationError
from llm_connect.grading import FunctionJudge
from llm_connect.views import plot_group_kappa


def _exact(b: str, c: str) -> float:
    return float(b.strip() == c.strip())


def rows(tiny: int = 0, missing: int = 0) -> list[dict]:
    """40 extractive rows (judge == people), 40 chat rows (judge independent of people), then
    ``tiny`` rows of a small group and ``missing`` rows with no model."""
    out = []
    for i in range(40):
        human = i % 2 == 0
        out.append({"id": f"x{i}", "prompt": f"q{i}", "baseline": "Paris", "candidate": "Paris" if human else "Lyon",
                    "human": "yes" if human else "no", "candidate_model": "extractive", "dataset": "nq",
                    "model": "reader-1"})
    for i in range(40):  # a balanced 2x2: 10 in each cell, so kappa is exactly 0
        judge_yes, human = i % 2 == 0, (i // 2) % 2 == 0
        out.append({"id": f"c{i}", "prompt": f"q{i}", "baseline": "Rome",
                    "candidate": "Rome" if judge_yes else "It is Rome, I think. " * (1 + i % 3),
                    "human": "yes" if human else "no", "candidate_model": "chat", "dataset": "triviaqa",
                    "model": "chat-7b"})
    for i in range(tiny):
        out.append({"id": f"t{i}", "prompt": "q", "baseline": "Oslo", "candidate": "Oslo" if i % 2 else "Bergen",
                    "human": "yes" if i < 2 else "no", "candidate_model": "tiny", "dataset": "nq", "model": "t"})
    for i in range(missing):
        out.append({"id": f"m{i}", "prompt": "q", "baseline": "Bern", "candidate": "Bern", "human": "yes",
                    "candidate_model": None, "dataset": "nq", "model": "m"})
    return out


JUDGE = {"exact-fn": FunctionJudge(_exact, grader_id="exact-fn")}


def run(data, **kwargs):
    kwargs.setdefault("n_boot", 200)
    kwargs.setdefault("probes", None)
    return calibrate(JUDGE, pd.DataFrame(data), human="human", progress=False, **kwargs)


def verdicts(scores: pd.DataFrame, name: str) -> np.ndarray:
    return (scores[f"score_{name}"].to_numpy(dtype=float) >= 0.5).astype(int)


def test_kappa_per_group_equals_sklearn_and_the_pooled_figure_hides_the_groups():
    report = run(rows(), by="candidate_model")
    table = report.by_group.agreement
    assert table["group"].tolist() == [ALL, "chat", "extractive"]
    s = report.scores
    for group in ("chat", "extractive"):
        sub = s[s["candidate_model"] == group]
        row = table[table["group"] == group].iloc[0]
        expected = cohen_kappa_score(verdicts(sub, "exact-fn"), verdicts(sub, "human"))
        assert row["cohen_kappa"] == pytest.approx(expected, abs=1e-12)
        assert row["n"] == row["n_items"] == 40
    pooled = table[table["group"] == ALL].iloc[0]
    assert pooled["cohen_kappa"] == pytest.approx(
        cohen_kappa_score(verdicts(s, "exact-fn"), verdicts(s, "human")), abs=1e-12)
    kappa = dict(zip(table["group"], table["cohen_kappa"], strict=True))
    assert kappa["extractive"] == pytest.approx(1.0)
    assert kappa["chat"] == pytest.approx(0.0, abs=1e-12)
    assert kappa[ALL] == pytest.approx(0.5)
    # the pooled row is the report's own agreement table, number for number
    assert pooled["cohen_kappa"] == report.agreement.pair("exact-fn", "human")["cohen_kappa"].value
    # the groups' intervals come from their own rows: chat's includes 0, extractive's is [1, 1]
    chat = table[table["group"] == "chat"].iloc[0]
    assert chat["kappa_low"] < 0 < chat["kappa_high"]


def test_a_tiny_group_keeps_its_figures_with_a_note_and_missing_values_form_a_group():
    report = run(rows(tiny=4, missing=3), by="candidate_model")
    table = report.by_group.agreement
    tiny = table[table["group"] == "tiny"].iloc[0]
    assert tiny["n"] == 4 and math.isfinite(tiny["cohen_kappa"])
    assert f"fewer than {MIN_GROUP_N}" in tiny["group_note"]
    s = report.scores
    sub = s[s["candidate_model"] == "tiny"]
    assert tiny["cohen_kappa"] == pytest.approx(
        cohen_kappa_score(verdicts(sub, "exact-fn"), verdicts(sub, "human")), abs=1e-12)
    assert table[table["group"] == "extractive"].iloc[0]["group_note"] == ""
    missing = table[table["group"] == MISSING].iloc[0]
    assert missing["n_items"] == 3  # kept: both gave "yes" everywhere, so kappa is undefined, with its reason
    assert math.isnan(missing["cohen_kappa"]) and "chance agreement is 1" in missing["note"]
    # no row dropped: the groups' rows add up to every row
    assert table[table["group"] != ALL]["n_items"].sum() == len(s) == 87


def test_bias_per_group_is_the_paired_shift_of_each_groups_probed_items():
    def long_is_good(b: str, c: str) -> float:
        return min(1.0, len(c) / 80)

    judges = {"likes-length": FunctionJudge(long_is_good, grader_id="likes-length")}
    data = pd.DataFrame(rows())
    report = calibrate(judges, data, human="human", by="candidate_model", probes="length", probe_limit=50,
                       n_boot=200, progress=False)
    bias = report.by_group.bias
    result = report.bias.result("likes-length", "length")
    assert bias["group"].tolist() == [ALL, "chat", "extractive"]
    pooled = bias[bias["group"] == ALL].iloc[0]
    assert pooled["mean_shift"] == result.stats.mean_shift and pooled["n"] == result.stats.n == 50
    model_of = dict(zip(report.scores["id"], report.scores["candidate_model"], strict=True))
    items = result.items.assign(group=result.items["id"].map(model_of))
    for group in ("chat", "extractive"):
        sub = items[items["group"] == group]
        row = bias[bias["group"] == group].iloc[0]
        d = (sub["perturbed"] - sub["original"]).to_numpy()
        assert row["n"] == row["n_items"] == len(sub) > 0
        assert row["mean_shift"] == pytest.approx(d.mean(), abs=1e-12)
        assert row["p_value"] == pytest.approx(wilcoxon(d, zero_method="wilcox").pvalue, rel=1e-9)
        assert row["shift_low"] <= row["mean_shift"] <= row["shift_high"]
    assert bias[bias["group"] != ALL]["n"].sum() == 50


def test_input_columns_travel_into_scores_and_a_clashing_name_is_grouped_as_input():
    data = [dict(r, candidate_words=r["candidate_model"][:2]) for r in rows()]
    report = run(data, by="candidate_words")
    table = report.scores_table()
    assert {"dataset", "model", "candidate_model", "input_candidate_words"} <= set(table.columns)
    assert table["dataset"].tolist() == [r["dataset"] for r in data]
    assert table["model"].tolist() == [r["model"] for r in data]
    # the input's candidate_words (not the feature of the same name) is the group
    assert report.by_group.column == "input_candidate_words"
    assert report.by_group.groups == ["ch", "ex"]
    assert report.by_group.by == "candidate_words"


def test_a_missing_column_is_an_error_before_any_judge_runs():
    calls: list[str] = []

    def counting(b: str, c: str) -> float:
        calls.append(c)
        return 1.0

    with pytest.raises(ValidationError, match=r"no column 'modle' to group by; the data has .*candidate_model"):
        calibrate({"j": FunctionJudge(counting, grader_id="j")}, pd.DataFrame(rows()), human="human", by="modle",
                  progress=False)
    with pytest.raises(ValidationError, match="label column"):
        calibrate({"j": FunctionJudge(counting, grader_id="j")}, pd.DataFrame(rows()), human="human", by="human",
                  progress=False)
    assert calls == []
    with pytest.raises(ValidationError, match="pooled row"):
        group_labels(["a", ALL])


def test_agreement_by_group_on_a_frame_made_by_hand():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"score_a": rng.integers(0, 2, 60).astype(float),
                          "score_b": rng.integers(0, 2, 60).astype(float),
                          "topic": rng.choice(["x", "y", "z"], 60)})
    frame.loc[3, "score_a"] = np.nan  # unscored: dropped pair by pair, never 0
    table = agreement_by_group(frame, "topic", n_boot=100, seed=1)
    for topic in ("x", "y", "z"):
        sub = frame[(frame["topic"] == topic) & frame["score_a"].notna()]
        row = table[table["group"] == topic].iloc[0]
        assert row["n"] == len(sub)
        assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(sub["score_a"], sub["score_b"]), abs=1e-12)


def test_report_section_plot_card_and_files(tmp_path):
    data = rows()
    for r in data[40:]:  # group names are untrusted text
        r["candidate_model"] = "<script>alert(1)</script>"
    for r in data[:40]:
        r["candidate_model"] = "=HYPERLINK(1)"
    report = run(data, by="candidate_model")
    html = str(report.html(plots=True))
    assert "<h3>By candidate_model</h3>" in html
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "kappa per candidate_model" in html
    assert report.by_group._repr_html_().count("<table") >= 2

    fig = report.by_group.figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == ALL and "=HYPERLINK(1)" in labels
    xs = sorted(float(x) for line in ax.lines for x in np.atleast_1d(line.get_xdata()) if line.get_marker() == "o")
    assert xs == pytest.approx(sorted(report.by_group.kappa("exact-fn")["kappa"]))
    plot_group_kappa(report.by_group.agreement, judges=["exact-fn"], reference="human")

    (card,) = report.judge_cards()
    entry = {g["group"]: g for g in card.by_group["groups"]}
    assert card.by_group["by"] == "candidate_model"
    assert entry["=HYPERLINK(1)"]["kappa"] == pytest.approx(1.0) and entry["=HYPERLINK(1)"]["n"] == 40
    again = JudgeCard.from_dict(json.loads(json.dumps(card.to_dict())))
    assert again.by_group == card.by_group
    card_html = card._repr_html_()
    assert "Cohen&#x27;s kappa by candidate_model" in card_html and "=HYPERLINK(1): 1" in card_html
    assert "<script>alert" not in card_html

    paths = report.to_csv(tmp_path)
    by_group = pd.read_csv(paths["agreement_by_group"], keep_default_na=False)
    assert by_group["group"].tolist() == [ALL, "<script>alert(1)</script>", "'=HYPERLINK(1)"]  # neutralised
    assert paths["bias_by_group"].exists()
    assert run(rows()).by_group is None  # without by=, no breakdown


def write_jsonl(path, data):
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return path


@pytest.mark.slow  # 6 s measured on 2 busy cores: out of the fast loop
def test_cli_by_candidate_model(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", rows(tiny=4))
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--by", "candidate_model",
                 "--probes", "length", "--n-boot", "200", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "agreement by candidate_model:" in printed
    assert "few items" in printed  # the tiny group, shown with a note
    scores = pd.read_csv(out / "scores.csv", keep_default_na=False)
    assert scores["dataset"].tolist() == [r["dataset"] for r in rows(tiny=4)]
    assert scores["model"].tolist() == [r["model"] for r in rows(tiny=4)]
    table = pd.read_csv(out / "agreement_by_group.csv")
    assert table["group"].tolist() == [ALL, "chat", "extractive", "tiny"]
    for group in ("chat", "extractive", "tiny"):
        sub = scores[scores["candidate_model"] == group]
        row = table[table["group"] == group].iloc[0]
        expected = cohen_kappa_score(verdicts(sub, "exact-match"), verdicts(sub, "human"))
        assert row["cohen_kappa"] == pytest.approx(expected, abs=1e-9)
    bias = pd.read_csv(out / "bias_by_group.csv")
    assert set(bias["group"]) == {ALL, "chat", "extractive", "tiny"} and set(bias["probe"]) == {"length"}
    assert "By candidate_model" in (out / "report.html").read_text(encoding="utf-8")

    # the same directory without --by: the per-group files of the run before are not left behind
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--probes", "none",
                 "--n-boot", "50", "--no-progress"])
    assert code == 0
    assert not (out / "agreement_by_group.csv").exists() and not (out / "bias_by_group.csv").exists()


def test_cli_by_a_missing_column_exits_2_naming_the_columns(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", rows())
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--by", "modle", "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--by" in err and "modle" in err and "candidate_model" in err
    assert "Traceback" not in err
    assert not out.exists()
