"""``llm-connect calibrate``: outputs, defaults and one-line errors (exit status 2).

The LLM judge talks to a real OpenAI-compatible HTTP server started here on
127.0.0.1, which refuses to grade some items, so their rows must come out blank.
"""

from __future__ import annotations

import json

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from strategies import paris_judge

from llm_connect.cli import build_parser, main
from llm_connect.testing import LoopbackServer


@pytest.fixture(scope="module")
def judge_server():
    with LoopbackServer(reply=paris_judge()) as server:
        yield server.base_url


ROWS = [
    {"id": "a", "prompt": "Capital of France?", "baseline": "Paris|paris, france", "candidate": "paris",
     "human": "yes"},
    {"id": "b", "prompt": "Capital of France?", "baseline": "Paris|paris, france", "candidate": "Lyon", "human": "no"},
    {"id": "c", "prompt": "refuse: capital?", "baseline": "Paris", "candidate": "Paris!", "human": "yes"},
    {"id": "d", "prompt": "Capital of France?", "baseline": "Paris|paris, france",
     "candidate": "It is Paris, France.", "human": "yes"},
    {"id": "e", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Milan", "human": "no"},
    {"id": "f", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "The Rome", "human": "yes"},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_calibrate_writes_the_four_files(tmp_path, judge_server, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ROWS)
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact,llm", "--llm", "openai:judge-1",
                 "--base-url", judge_server, "--normalize", "squad", "--reference-sep", "|", "--probes", "length",
                 "--n-boot", "200", "--no-progress"])
    assert code == 0
    scores = pd.read_csv(out / "scores.csv")
    assert list(scores.columns) == [
        "id", "prompt", "baseline", "candidate", "score_exact-match", "score_llm-judge", "score_human",
        "status_exact-match", "notes_exact-match", "reply_exact-match",
        "status_llm-judge", "notes_llm-judge", "reply_llm-judge",
    ]
    assert scores["id"].tolist() == list("abcdef")
    assert scores["candidate"].tolist() == [r["candidate"] for r in ROWS]
    assert scores["score_exact-match"].tolist() == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]  # squad: articles dropped, any ref
    assert scores["score_llm-judge"].isna().tolist() == [False, False, True, False, False, False]  # refused: blank
    assert (out / "scores.csv").read_text().splitlines()[3].startswith("c,refuse: capital?,Paris,Paris!,1.0,,1.0,")
    assert scores["status_llm-judge"].tolist() == ["scored", "scored", "unscored", "scored", "scored", "scored"]
    assert scores.loc[2, "reply_llm-judge"] == "Sorry, I cannot grade that."  # what the judge said instead
    assert json.loads(scores.loc[3, "reply_llm-judge"]) == {"notes": "ok", "quality_score": 1.0}  # "Paris"
    assert json.loads(scores.loc[0, "reply_llm-judge"]) == {"notes": "ok", "quality_score": 0.0}  # "paris"
    assert scores.loc[0, "notes_llm-judge"] == "ok" and scores["reply_exact-match"].isna().all()
    parquet = pd.read_parquet(out / "scores.parquet")
    assert list(parquet.columns) == list(scores.columns) and parquet["score_llm-judge"].dtype == "float64"
    assert parquet["id"].tolist() == list("abcdef") and parquet["score_human"].tolist() == [1, 0, 1, 1, 0, 1]
    agreement = pd.read_csv(out / "agreement.csv")
    assert list(agreement.columns[:9]) == ["judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa",
                                           "kappa_low", "kappa_high", "alpha_interval", "spearman"]
    pairs = agreement[["judge_a", "judge_b"]].values.tolist()
    assert pairs == [["exact-match", "llm-judge"], ["exact-match", "human"], ["llm-judge", "human"]]
    assert agreement.set_index(["judge_a", "judge_b"]).loc[("llm-judge", "human"), "n"] == 5
    bias = pd.read_csv(out / "bias.csv")
    assert list(bias.columns[:8]) == ["judge", "probe", "n", "mean_shift", "shift_low", "shift_high", "p_value",
                                      "flip_rate"]
    assert bias[["judge", "probe"]].values.tolist() == [["exact-match", "length"], ["llm-judge", "length"]]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in html
    captured = capsys.readouterr()
    printed = captured.out
    assert "agreement:" in printed and "bias probes:" in printed and "llm-judge: 5 scored, 1 unscored" in printed
    assert "scores.parquet" in printed and "warning" not in captured.err  # --reference-sep was given


def test_csv_input_with_score_labels_and_defaults(tmp_path):
    frame = pd.DataFrame(ROWS).drop(columns="human")
    frame["rating"] = [1.0, 0.0, 0.9, 0.8, 0.1, ""]
    frame.to_csv(tmp_path / "items.csv", index=False)
    code = main(["calibrate", str(tmp_path / "items.csv"), "--out", str(tmp_path / "o"), "--judges", "exact",
                 "--human", "rating", "--probes", "none", "--n-boot", "50", "--no-progress"])
    assert code == 0
    scores = pd.read_csv(tmp_path / "o" / "scores.csv")
    assert scores["score_human"].tolist()[:5] == [1.0, 0.0, 0.9, 0.8, 0.1] and pd.isna(scores["score_human"][5])
    assert scores["score_exact-match"].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # no normalisation by default
    bias = pd.read_csv(tmp_path / "o" / "bias.csv")
    assert bias.empty and list(bias.columns[:3]) == ["judge", "probe", "n"]
    tsv = tmp_path / "items.tsv"
    frame.drop(columns="id").to_csv(tsv, sep="\t", index=False)
    assert main(["calibrate", str(tsv), "--out", str(tmp_path / "t"), "--judges", "exact", "--probes", "none",
                 "--n-boot", "0", "--no-progress"]) == 0
    assert pd.read_csv(tmp_path / "t" / "scores.csv")["id"].tolist() == list(range(6))


def test_help_documents_the_defaults(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "exact,embedding,llm" in text and "local" in text and "position" in text
    assert "calibrate" in build_parser().format_help()


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda d, o: ["calibrate", str(d / "missing.jsonl"), "--out", str(o)], "no such file"),
        (lambda d, o: ["calibrate", str(d / "bad.jsonl"), "--out", str(o), "--judges", "exact"], "not JSON"),
        (lambda d, o: ["calibrate", str(d / "nocand.jsonl"), "--out", str(o), "--judges", "exact"], "candidate"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--out", str(o), "--judges", "exact,vibes"], "vibes"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--out", str(o), "--judges", "exact", "--human", "label"],
         "label"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--out", str(o), "--judges", "exact",
                       "--normalize", "fancy"], "fancy"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--out", str(o), "--judges", "llm", "--llm", "gpt-4"],
         "model spec"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--out", str(o), "--judges", "exact",
                       "--probes", "size"], "size"),
        (lambda d, o: ["calibrate", str(d / "ok.txt2"), "--out", str(o), "--judges", "exact"], ".jsonl"),
        (lambda d, o: ["calibrate", str(d / "badlabel.jsonl"), "--out", str(o), "--judges", "exact"], "maybe"),
        (lambda d, o: ["calibrate", str(d / "ok.jsonl"), "--judges", "exact"], "--out"),
    ],
)
def test_user_errors_exit_2_with_one_line(tmp_path, capsys, make_args, message):
    write_jsonl(tmp_path / "ok.jsonl", ROWS)
    (tmp_path / "ok.txt2").write_text("x")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "p"}\nnot json\n')
    write_jsonl(tmp_path / "nocand.jsonl", [{"prompt": "p", "baseline": "b"}])
    write_jsonl(tmp_path / "badlabel.jsonl", [{**ROWS[0], "human": "maybe"}])
    with pytest.raises(SystemExit) as exc:
        main(make_args(tmp_path, tmp_path / "out"))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("llm-connect calibrate: error:") and message in last
    assert "Traceback" not in err
    if message != "--out":  # argparse's own errors print the usage first, ours only the error line
        assert len(err.strip().splitlines()) == 1


# -- outputs a user can read back; the reference separator ----------------------------------------


def test_scores_carry_group_columns_and_parquet_keeps_types_unneutralised(tmp_path):
    rows = [{**r, "topic": "=1+1" if i % 2 else "capitals", "candidate_model": "m1"} for i, r in enumerate(ROWS)]
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    out = tmp_path / "o"
    assert main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--reference-sep", "|",
                 "--probes", "none", "--n-boot", "0", "--no-progress"]) == 0
    scores = pd.read_csv(out / "scores.csv", keep_default_na=False)
    assert list(scores.columns[:6]) == ["id", "prompt", "baseline", "candidate", "candidate_model", "topic"]
    assert scores["topic"].tolist()[:2] == ["capitals", "'=1+1"]  # neutralised for a spreadsheet
    parquet = pd.read_parquet(out / "scores.parquet")
    assert parquet["topic"].tolist()[:2] == ["capitals", "=1+1"]  # as in the data: Parquet is read by code
    assert parquet["score_exact-match"].dtype == "float64" and parquet["score_human"].dtype == "float64"


def test_a_directory_in_place_of_scores_parquet_is_refused_before_judging(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", ROWS)
    (tmp_path / "o" / "scores.parquet").mkdir(parents=True)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--reference-sep", "|",
              "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "scores.parquet" in err and "directory" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "scores.csv").exists()


def _calibrate_exact(tmp_path, *extra):
    data = write_jsonl(tmp_path / "items.jsonl", ROWS)
    return main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--normalize", "squad",
                 "--probes", "none", "--n-boot", "0", "--no-progress", *extra])


def test_a_pipe_in_baselines_without_reference_sep_warns_once(tmp_path, capsys):
    assert _calibrate_exact(tmp_path) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    line = err[0]
    assert line.startswith("llm-connect calibrate: warning: 3 of 6 baseline(s) contain '|'")
    assert "--reference-sep '|'" in line and "--reference-sep none" in line
    scores = pd.read_csv(tmp_path / "o" / "scores.csv")
    assert scores["score_exact-match"].tolist()[:2] == [0.0, 0.0]  # "Paris|paris, france" compared whole


@pytest.mark.parametrize(("sep", "first"), [("|", 1.0), ("none", 0.0), ("NONE", 0.0)])
def test_reference_sep_given_or_none_silences_the_warning(tmp_path, capsys, sep, first):
    assert _calibrate_exact(tmp_path, "--reference-sep", sep) == 0
    assert capsys.readouterr().err == ""
    assert pd.read_csv(tmp_path / "o" / "scores.csv")["score_exact-match"][0] == first


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
def test_no_warning_without_a_separator_in_the_baselines(tmp_path, capsys):
    data = write_jsonl(tmp_path / "items.jsonl", [{**r, "baseline": r["baseline"].split("|")[0]} for r in ROWS])
    assert main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--probes", "none",
                 "--n-boot", "0", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_an_empty_reference_sep_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _calibrate_exact(tmp_path, "--reference-sep", "")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reference-sep is empty" in err[0]


def test_printed_bias_p_values_below_a_thousandth(tmp_path, capsys):
    rows = [{"id": f"r{i}", "prompt": f"Q{i}?", "baseline": f"answer {i}", "candidate": f"answer {i}"}
            for i in range(30)]  # every answer matches; padded for the length probe, none does
    data = write_jsonl(tmp_path / "items.jsonl", rows)
    assert main(["calibrate", str(data), "--out", str(tmp_path / "o"), "--judges", "exact", "--probes", "length",
                 "--n-boot", "50", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    table = printed.split("bias probes:", 1)[1]
    row = next(line for line in table.splitlines() if "exact-match" in line and "length" in line)
    assert "< 0.001" in row and "e-" not in row
    assert pd.read_csv(tmp_path / "o" / "bias.csv")["p_value"][0] < 0.001  # the file keeps the number
