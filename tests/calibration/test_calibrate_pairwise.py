"""Pairwise data in ``calibrate`` and ``llm-connect calibrate --pairwise``: a/b/tie, never a threshold.

The pairwise judges talk to the project's real OpenAI-compatible loopback server on 127.0.0.1;
each reply function decides from the two answers it is shown (never from the people's labels).
Statistics are checked against scikit-learn, scipy and krippendorff on the same rows.
"""

from __future__ import annotations

import json
import math
import re

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.calibration import CalibrationReport, PairwiseReport, battle_outcomes, calibrate
from llm_connect.calibration._pairwise import position_bias, preference_agreement
from llm_connect.cli import main
from llm_connect.errors import ValidationError
from llm_connect.grading import PairwiseJudge
from llm_connect.stats import parse_preferences
from llm_connect.stats.preferences import preference_codes
from llm_connect.testing import LoopbackServer

CITIES = [("France", "Paris", "Lyon"), ("Italy", "Rome", "Milan"), ("Spain", "Madrid", "Seville"),
          ("Norway", "Oslo", "Bergen"), ("Japan", "Tokyo", "Osaka"), ("Kenya", "Nairobi", "Mombasa"),
          ("Peru", "Lima", "Cusco"), ("Chile", "Santiago", "Valparaiso"), ("Egypt", "Cairo", "Luxor"),
          ("Canada", "Ottawa", "Toronto")]


def answers(prompt: str) -> tuple[str, str]:
    """The two answers a pairwise judge was shown (A first), from its rubric's fenced blocks."""
    a = re.search(r"<<<ANSWER A [^>]*>>>\n(.*?)\n<<<END ANSWER A", prompt, re.S)
    b = re.search(r"<<<ANSWER B [^>]*>>>\n(.*?)\n<<<END ANSWER B", prompt, re.S)
    assert a and b, prompt
    return a[1], b[1]


def capital(prompt: str) -> str:
    """The reference the question names: '... (capital: Paris)'."""
    m = re.search(r"\(capital: (\w+)\)", prompt)
    assert m, prompt
    return m[1]


def knows(prompt: str) -> str:
    """Prefers the answer naming the capital; a tie when both or neither do."""
    a, b = answers(prompt)
    ref = capital(prompt)
    winner = "tie" if (ref in a) == (ref in b) else ("A" if ref in a else "B")
    return json.dumps({"notes": "checked the capital", "winner": winner})


def first_shown(prompt: str) -> str:
    return json.dumps({"notes": "the first one", "winner": "A"})


def always_tie(prompt: str) -> str:
    return json.dumps({"notes": "cannot tell", "winner": "tie"})


def pairs(n: int = 30) -> list[dict]:
    """``n`` pairs: a right (people: a), b right (people: b), both right (people: tie), in turn; three
    annotators who each disagree with the others now and then."""
    rows = []
    for i in range(n):
        country, right, wrong = CITIES[i % len(CITIES)]
        kind = i % 3
        a, b = {0: (right, wrong), 1: (wrong, right), 2: (right, f"It is {right}.")}[kind]
        human = ("a", "b", "tie")[kind]
        r1 = human if i % 7 else "tie"
        r2 = human if i % 5 != 1 else ("a" if human == "b" else "b")
        rows.append({"id": f"p{i}", "prompt": f"What is the capital of {country}? (capital: {right})",
                     "candidate_a": a, "candidate_b": b, "model_a": f"m{i % 2}", "model_b": f"m{(i + 1) % 2 + 1}",
                     "human": human, "r1": r1, "r2": r2, "r3": human, "topic": "geo"})
    return rows


@pytest.fixture(scope="module")
def servers():
    with LoopbackServer(reply=knows) as k, LoopbackServer(reply=first_shown) as f, \
            LoopbackServer(reply=always_tie) as t:
        yield {"knows": k, "first": f, "tie": t}


def judge(server: LoopbackServer, name: str, **kwargs) -> PairwiseJudge:
    return PairwiseJudge(OpenAICompatibleAdapter("judge-1", base_url=server.base_url), grader_id=name, **kwargs)


# -- reading preferences ------------------------------------------------------------------------------


def test_preferences_are_read_as_a_b_tie_with_declared_codes():
    got = parse_preferences(["a", "B", " tie ", "model_a", "model_b", "tie (bothbad)", None, "", float("nan")])
    assert got.tolist() == ["a", "b", "tie", "a", "b", "tie", None, None, None]
    codes = preference_codes("a=1,b=2,tie=0|3")
    assert codes == {"1": "a", "2": "b", "0": "tie", "3": "tie"}
    got = parse_preferences([1, "2", 0.0, 3, 2.0, None], codes="a=1,b=2,tie=0|3")
    assert got.tolist() == ["a", "b", "tie", "tie", "b", None]
    assert parse_preferences([1, 2, 0], codes={"a": 1, "b": 2, "tie": [0]}).tolist() == ["a", "b", "tie"]
    with pytest.raises(ValidationError, match=r"column 'pref' .* '1', '2'.*a=1,b=2,tie=0"):
        parse_preferences(["a", 1, 2], column="pref")  # a number is never guessed
    with pytest.raises(ValidationError, match=r"'maybe'.*accepted: a=a\|model_a"):
        parse_preferences(["a", "maybe"])
    with pytest.raises(ValidationError, match="no code for tie"):
        preference_codes("a=1,b=2")
    with pytest.raises(ValidationError, match="both 'a' and 'b'"):
        preference_codes("a=1,b=1,tie=0")
    with pytest.raises(ValidationError, match="LABEL=CODE"):
        preference_codes("a:1,b=2,tie=0")


# -- statistics against well-kept packages --------------------------------------------------------------


def test_three_way_agreement_matches_sklearn_and_krippendorff():
    rng = np.random.default_rng(3)
    labels = np.array(["a", "b", "tie"])
    human = rng.choice(labels, size=80, p=[0.4, 0.4, 0.2]).astype(object)
    judge_said = np.where(rng.random(80) < 0.7, human, rng.choice(labels, size=80)).astype(object)
    judge_said[[3, 9]] = None  # unscored
    human[[5]] = None  # unlabelled
    row = preference_agreement(judge_said, human, n_boot=300, seed=1)
    keep = [i for i in range(80) if judge_said[i] is not None and human[i] is not None]
    j, h = judge_said[keep].astype(str), human[keep].astype(str)
    assert row["n"] == len(keep) == 77
    assert row["percent_agreement"] == pytest.approx(float((j == h).mean()))
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(j, h, labels=list(labels)))
    assert row["kappa_low"] < row["cohen_kappa"] < row["kappa_high"]
    codes = {"a": 0, "b": 1, "tie": 2}
    alpha = krippendorff.alpha(reliability_data=np.array([[codes[x] for x in j], [codes[x] for x in h]], float),
                               level_of_measurement="nominal")
    assert row["krippendorff_alpha_nominal"] == pytest.approx(alpha)
    cm = confusion_matrix(j, h, labels=list(labels))  # rows: the judge, columns: people
    for r, jl in enumerate(labels):
        for c, hl in enumerate(labels):
            assert row[f"judge_{jl}_human_{hl}"] == cm[r, c]
    non_tie = h != "tie"
    assert row["n_non_tie"] == non_tie.sum()
    assert row["accuracy_non_tie"] == pytest.approx(float((j[non_tie] == h[non_tie]).mean()))
    assert row["decided_non_tie"] == int((j[non_tie] != "tie").sum())
    assert row["tie_rate_a"] == pytest.approx(float((j == "tie").mean()))
    assert row["tie_rate_b"] == pytest.approx(float((h == "tie").mean()))
    # the same seed, the same interval
    assert preference_agreement(judge_said, human, n_boot=300, seed=1) == row


def test_position_bias_is_scipys_binomial_test():
    got = position_bias(27, 36)
    test = binomtest(27, 36, 0.5)
    ci = test.proportion_ci(0.95, method="exact")
    assert got["first_shown_win_rate"] == pytest.approx(0.75) and got["position_bias"] == pytest.approx(0.25)
    assert got["position_p_value"] == pytest.approx(test.pvalue)
    assert (got["position_low"], got["position_high"]) == pytest.approx((ci.low - 0.5, ci.high - 0.5))
    assert math.isnan(position_bias(0, 0)["position_p_value"])


# -- calibrate on pairwise data -------------------------------------------------------------------------


def test_calibrate_detects_pairs_and_measures_three_ways(servers):
    data = pd.DataFrame(pairs(30))
    judges = {"knows": judge(servers["knows"], "knows", allow_tie=True),
              "first": judge(servers["first"], "first"),
              "tie": judge(servers["tie"], "tie", allow_tie=True)}
    report = calibrate(judges, data, annotators=["r1", "r2", "r3"], n_boot=200, progress=False)
    assert isinstance(report, PairwiseReport)
    s = report.scores_table()
    assert s["winner_human"].tolist() == [("a", "b", "tie")[i % 3] for i in range(30)]
    assert s["winner_knows"].tolist() == s["winner_human"].tolist()
    assert set(s["winner_first"]) == {"tie"} and not s["consistent_first"].any()  # orders always disagree
    assert (s["winner_a_first_first"] == "a").all() and (s["winner_b_first_first"] == "b").all()
    assert s["consistent_knows"].all() and s["winner"].tolist() == s["winner_human"].tolist()
    assert s["topic"].tolist() == ["geo"] * 30 and "score_knows" not in s.columns  # no 0..1 score to threshold
    p = report.pairwise.set_index("judge")
    assert p.loc["knows", "percent_agreement"] == 1.0 and p.loc["knows", "cohen_kappa"] == pytest.approx(1.0)
    assert p.loc["knows", "consistency"] == 1.0 and p.loc["knows", "first_shown_win_rate"] == pytest.approx(0.5)
    # the first-shown judge: every order picks the first answer
    assert p.loc["first", "consistency"] == 0.0 and p.loc["first", "first_shown_win_rate"] == 1.0
    assert p.loc["first", "position_p_value"] == pytest.approx(binomtest(60, 60, 0.5).pvalue)
    assert p.loc["first", "accuracy_non_tie"] == 0.0 and p.loc["first", "decided_non_tie"] == 0
    assert p.loc["first", "percent_agreement"] == pytest.approx(10 / 30)  # its ties meet people's ties only
    assert p.loc["first", "judge_tie_rate"] == 1.0 and p.loc["first", "human_tie_rate"] == pytest.approx(1 / 3)
    # the judge that always says tie: consistent, never decides, no position bias measurable
    assert p.loc["tie", "consistency"] == 1.0 and p.loc["tie", "n_position"] == 0
    assert p.loc["tie", "accuracy_non_tie"] == 0.0 and p.loc["tie", "cohen_kappa"] == pytest.approx(0.0)
    # people: the human column, and each annotator against the others as the ceiling
    pa = report.pair_agreement.set_index(["judge_a", "judge_b"])
    assert pa.loc[("r1", "r2"), "ceiling"] and not pa.loc[("knows", "human"), "ceiling"]
    r1, r2 = data["r1"], data["r2"]
    assert pa.loc[("r1", "r2"), "cohen_kappa"] == pytest.approx(cohen_kappa_score(r1, r2, labels=["a", "b", "tie"]))
    # position probe in bias.csv, from the two orders (no extra call)
    bias = report.bias_frame().set_index("judge")
    assert bias.loc["first", "probe"] == "position" and bias.loc["first", "flip_rate"] == 1.0
    assert bias.loc["knows", "flip_rate"] == 0.0
    assert servers["knows"].stats()["total"] >= 60
    # cards and verdicts: three-way kappa, consistency, position
    cards = {c.grader_id: c for c in report.judge_cards()}
    assert cards["knows"].position_consistency == 1.0 and cards["first"].position_consistency == 0.0
    assert "biased toward the answer shown first" in cards["first"].verdict
    assert "consistent across orders 0%" in cards["first"].verdict
    outcomes = battle_outcomes(report)
    assert outcomes.columns.tolist() == ["model_a", "model_b", "winner"] and len(outcomes) == 30
    assert battle_outcomes(report, winner="knows")["winner"].tolist() == s["winner_knows"].tolist()


def test_majority_of_annotators_is_the_reference_without_a_human_column(servers):
    data = pd.DataFrame(pairs(12)).drop(columns=["human"])
    report = calibrate([judge(servers["knows"], "knows", allow_tie=True)], data, annotators=["r1", "r2", "r3"],
                       pairwise=True, n_boot=0, progress=False, probes=None)
    # r3 is always right; where r1 or r2 dissent, the other two still make the majority
    assert report.scores["winner_human"].tolist() == [("a", "b", "tie")[i % 3] for i in range(12)]
    assert report.bias is None


def test_a_judge_deciding_one_pair_in_30_is_not_reported_at_63_percent(servers):
    """The defect: ties scored 0.5 and thresholded at 0.5 became 'second answer better', so a judge
    that decided 1 pair in 30 (wrongly) agreed with people on the 19 pairs where B was better."""

    def stubborn(prompt: str) -> str:  # picks the first shown, except on one pair it gets wrong both ways
        a, _b = answers(prompt)
        ref = capital(prompt)
        if ref == "Oslo":
            return json.dumps({"winner": "B" if ref in a else "A"})
        return json.dumps({"winner": "A"})

    rows = []
    for i in range(30):
        others = [c for c in CITIES if c[1] != "Oslo"]
        country, right, wrong = CITIES[3] if i == 0 else others[i % len(others)]
        b_better = i < 19
        a, b = (wrong, right) if b_better else (right, wrong)
        rows.append({"id": i, "prompt": f"Capital of {country}? (capital: {right})", "candidate_a": a,
                     "candidate_b": b, "pref": 2 if b_better else 1})
    with LoopbackServer(reply=stubborn) as server:
        report = calibrate([judge(server, "stubborn")], rows, human="pref", preference_codes="a=1,b=2,tie=0",
                           n_boot=200, progress=False)
    p = report.pairwise.iloc[0]
    assert p["n"] == 30 and p["n_non_tie"] == 30
    assert p["decided_non_tie"] == 1 and p["accuracy_non_tie"] == 0.0  # 0/30, never 19/30
    assert p["consistency"] == pytest.approx(1 / 30)
    assert p["percent_agreement"] == 0.0  # three-way: its 29 ties are not people's a/b
    assert p["cohen_kappa"] <= 0.0 and p["kappa_low"] <= 0.0
    assert "no better than chance" in report.judge_cards()[0].verdict


def test_one_order_judge_gets_the_swapped_order_from_the_position_probe(servers):
    data = pairs(9)
    report = calibrate([judge(servers["first"], "first", both_orders=False)], data, n_boot=0, progress=False,
                       probes="position", probe_limit=5)
    s = report.scores
    assert (s["winner_first"] == "a").all()  # one order: A shown first always wins
    assert s["winner_b_first_first"].notna().sum() == 5 and (s["winner_b_first_first"].dropna() == "b").all()
    p = report.pairwise.iloc[0]
    assert p["n_both_orders"] == 5 and p["consistency"] == 0.0 and p["first_shown_win_rate"] == 1.0


def test_a_pairwise_report_offers_only_what_it_can_honour(servers, tmp_path):
    """A pairwise report shares the run with a calibration report (not its threshold): it has no widget,
    no judgment viewer and no threshold, rather than methods that raise."""
    report = calibrate([judge(servers["knows"], "knows", allow_tie=True)], pairs(6), n_boot=0, progress=False)
    assert isinstance(report, PairwiseReport) and not isinstance(report, CalibrationReport)
    for missing in ("widget", "view", "threshold", "threshold_of", "sweep", "pair", "estimates"):
        assert not hasattr(report, missing), missing
    for method in ("widget", "view", "threshold_of", "estimates"):
        assert callable(getattr(CalibrationReport, method))
    # what both share: the run, its cards, its files and its page
    assert report.judges == ["knows"] and report.verdicts() == [c.verdict for c in report.judge_cards()]
    assert report.to_html(tmp_path / "r.html").read_text().count("Pairwise agreement") == 1
    assert len(pd.read_parquet(report.to_parquet(tmp_path / "s.parquet"))) == 6
    assert report.bias_frame()["probe"].tolist() == ["position"]


def test_pairwise_errors_are_clear(servers):
    from llm_connect.grading import ExactMatchJudge

    with pytest.raises(ValidationError, match="not pairwise"):
        calibrate([ExactMatchJudge()], pairs(3), progress=False)
    with pytest.raises(ValidationError, match="position probe only"):
        calibrate([judge(servers["knows"], "k")], pairs(3), probes="length", progress=False)
    with pytest.raises(ValidationError, match="needs the column"):
        calibrate([judge(servers["knows"], "k")], [{"prompt": "q", "candidate_a": "x"}], pairwise=True,
                  progress=False)
    with pytest.raises(ValidationError, match="do not apply to pairwise"):
        calibrate([judge(servers["knows"], "k")], pairs(3), by="topic", progress=False)


def test_report_html_escapes_untrusted_names(servers, tmp_path):
    data = pairs(6)
    for r in data:
        r["<b>evil</b>"] = "=cmd()"
    report = calibrate({"<i>j</i>": judge(servers["knows"], "x", allow_tie=True)}, data, n_boot=0,
                       progress=False)
    html = report.to_html(tmp_path / "r.html").read_text()
    assert "<i>j</i>" not in html and "&lt;i&gt;j&lt;/i&gt;" in html
    assert "Pairwise agreement" in html and "Confusion of" in html
    paths = report.to_csv(tmp_path / "csv")
    assert set(paths) == {"scores", "agreement", "pairwise", "bias"}
    scores = pd.read_csv(paths["scores"])
    assert scores["<b>evil</b>"].tolist() == ["'=cmd()"] * 6
    assert "<table" in report._repr_html_()


# -- the command line -----------------------------------------------------------------------------------


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_pairwise(tmp_path, servers, capsys):
    rows = pairs(30)
    for r in rows:
        for column in ("human", "r1", "r2"):
            r[column] = {"a": 1, "b": 2, "tie": 0}[r[column]]
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--pairwise", "--llm", "openai:judge-1",
                 "--base-url", servers["first"].base_url, "--preference-codes", "a=1,b=2,tie=0",
                 "--annotators", "r1,r2", "--n-boot", "100", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    scores = pd.read_csv(out / "scores.csv")
    assert scores.columns[:6].tolist() == ["id", "prompt", "candidate_a", "candidate_b", "model_a", "model_b"]
    assert {"winner_human", "winner_r1", "winner", "winner_pairwise", "consistent_pairwise"} <= set(scores.columns)
    assert set(scores["winner_pairwise"]) == {"tie"} and scores["winner"].tolist()[:3] == ["a", "b", "tie"]
    pairwise = pd.read_csv(out / "pairwise.csv")
    assert pairwise["judge"].tolist() == ["pairwise"] and pairwise["consistency"].tolist() == [0.0]
    assert pairwise["accuracy_non_tie"].tolist() == [0.0]
    assert pd.read_csv(out / "bias.csv")["probe"].tolist() == ["position"]
    assert (out / "report.html").exists() and (out / "agreement.csv").exists()
    assert "three-way" in captured.out and "kappa on thresholded" not in captured.out
    assert "first shown" in captured.out
    # a gate on the three-way kappa: the first-shown judge fails it (exit 1, one line naming the figure)
    code = main(["calibrate", str(data), "--out", str(tmp_path / "gated"), "--pairwise", "--llm", "openai:judge-1",
                 "--base-url", servers["first"].base_url, "--preference-codes", "a=1,b=2,tie=0", "--n-boot", "0",
                 "--no-progress", "--require", "pairwise:kappa>=0.4"])
    assert code == 1 and "requirement failed: pairwise:kappa>=0.4 (kappa is 0)" in capsys.readouterr().err


def test_cli_pairwise_usage_errors(tmp_path, servers, capsys):
    rows = pairs(4)
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    base = ["calibrate", str(data), "--out", str(tmp_path / "o"), "--llm", "openai:judge-1", "--base-url",
            servers["knows"].base_url, "--no-progress"]
    for extra, message in [
        ([], "pass --pairwise"),
        (["--pairwise", "--probes", "length"], "position"),
        (["--pairwise", "--judges", "exact"], "--judges"),
        (["--pairwise", "--preference-codes", "a=1"], "no code for"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(base + extra)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1, err
    numeric = write_jsonl(tmp_path / "num.jsonl", [{**r, "human": 1} for r in rows])
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(numeric), *base[2:], "--pairwise"])
    assert exc.value.code == 2 and "--preference-codes" in capsys.readouterr().err


def test_cli_pairwise_reads_files_as_they_come_and_reuses_its_cache(tmp_path, capsys):
    """--columns, --where, --limit on a pairwise file named its own way; a rerun (and --resume) asks nothing again."""
    rows = [{"qid": r["id"], "question": r["prompt"], "response_a": r["candidate_a"],
             "response_b": r["candidate_b"], "pref": r["human"], "split": "test" if i % 3 else "dev"}
            for i, r in enumerate(pairs(30))]
    data = write_jsonl(tmp_path / "arena.jsonl", rows)
    wanted = [r for r in rows if r["split"] == "test"][:12]
    with LoopbackServer(reply=knows) as server:
        out = tmp_path / "out"
        argv = ["calibrate", str(data), "--out", str(out), "--pairwise", "--llm", "openai:judge-1",
                "--base-url", server.base_url, "--columns",
                "id=qid,prompt=question,candidate_a=response_a,candidate_b=response_b,human=pref",
                "--where", "split == 'test'", "--allow-tie", "--n-boot", "0", "--no-progress"]
        assert main([*argv, "--limit", "5"]) == 0
        first = len(server.requests)
        assert first == 5 * 2  # both orders of the first five test pairs
        assert "rows: used 5 of 30" in capsys.readouterr().out
        assert main([*argv, "--limit", "12", "--resume"]) == 0
        assert len(server.requests) - first == 7 * 2  # only the pairs the cache did not hold
        printed = capsys.readouterr().out
        assert "10 replies reused" in printed and "rows: used 12 of 30" in printed
        assert main([*argv, "--limit", "12"]) == 0
        assert len(server.requests) - first == 7 * 2  # a repeated run pays nothing
    scores = pd.read_csv(out / "scores.csv")
    assert scores["id"].tolist() == [r["qid"] for r in wanted]
    assert scores["winner_human"].tolist() == [r["pref"] for r in wanted]
    assert scores["status_pairwise"].eq("scored").all()
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--wide", "candidate=response_{model}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--wide does not apply to pairwise data" in err and err.count("\n") == 1
