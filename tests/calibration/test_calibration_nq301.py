"""Exact match against people on NQ301 (Kamalloo et al., ACL 2023), through the CLI.

The human file (verdicts, annotators) is joined row by row with the gold answers
of the BEM file into a temporary JSONL; the data stays in ../shared. The SQuAD
normaliser and the agreement statistics are computed again here, independently
of the package, and must equal what ``agreement.csv`` says.
"""

from __future__ import annotations

import csv
import json
import re
import string
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect.cli import main

NQ301 = Path(__file__).resolve().parents[3] / "shared/data/nq301"
pytestmark = pytest.mark.skipif(
    not (NQ301 / "NQ301_human.tsv").is_file() or not (NQ301 / "NQ301_BEM.tsv").is_file(),
    reason=f"NQ301 data not found at {NQ301} (expected ../shared/data/nq301 beside the repository)",
)


def read_tsv(name: str) -> list[dict[str, str]]:
    with open(NQ301 / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="module")
def nq301_jsonl(tmp_path_factory) -> Path:
    human = read_tsv("NQ301_human.tsv")
    bem = read_tsv("NQ301_BEM.tsv")
    assert len(human) == len(bem) == 1490
    path = tmp_path_factory.mktemp("nq301") / "nq301.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, (h, b) in enumerate(zip(human, bem, strict=True)):
            assert h["Question"] == b["Question"], i  # the two files are row-aligned
            f.write(json.dumps({
                "id": i,
                "prompt": h["Question"],
                "baseline": b["Gold answers"],
                "candidate": h["Model answer"],
                "human": h["Acceptable?"],
                "annotator1": h["annotator1"],
                "annotator2": h["annotator2"],
            }) + "\n")
    return path


# -- an independent implementation of what the CLI should compute ------------------------------


def squad_normalize(s: str) -> str:
    """The SQuAD v1.1 evaluation script's normalize_answer, written out again."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def expected_exact_vs_human(path: Path) -> dict[str, float]:
    exact, human = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        golds = [g.strip() for g in row["baseline"].split("|") if g.strip()]
        cand = squad_normalize(row["candidate"])
        exact.append(any(squad_normalize(g) == cand for g in golds))
        human.append(row["human"].strip().lower() == "yes")
    n = len(exact)
    agree = sum(e == h for e, h in zip(exact, human, strict=True)) / n
    pe_yes = (sum(exact) / n) * (sum(human) / n)
    pe_no = (1 - sum(exact) / n) * (1 - sum(human) / n)
    kappa = (agree - (pe_yes + pe_no)) / (1 - (pe_yes + pe_no))
    return {"n": n, "percent_agreement": agree, "cohen_kappa": kappa, "exact_rate": sum(exact) / n}


def exact_args(data: Path, out: Path) -> list[str]:
    return ["calibrate", str(data), "--out", str(out), "--judges", "exact", "--normalize", "squad",
            "--reference-sep", "|", "--human", "human", "--annotators", "annotator1,annotator2",
            "--probes", "length,format", "--n-boot", "300", "--no-progress"]


def exact_human_row(out: Path) -> pd.Series:
    agreement = pd.read_csv(out / "agreement.csv")
    return agreement[(agreement["judge_a"] == "exact-match") & (agreement["judge_b"] == "human")].iloc[0]


@pytest.mark.slow  # 7 s measured on 2 busy cores: out of the fast loop
def test_exact_match_against_humans_in_process(nq301_jsonl, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(exact_args(nq301_jsonl, out)) == 0
    want = expected_exact_vs_human(nq301_jsonl)
    row = exact_human_row(out)
    assert row["n"] == want["n"] == 1490
    assert row["percent_agreement"] == pytest.approx(want["percent_agreement"], abs=1e-12)
    assert row["cohen_kappa"] == pytest.approx(want["cohen_kappa"], abs=1e-12)
    assert row["kappa_low"] < row["cohen_kappa"] < row["kappa_high"]
    # As the paper reports, exact match misses many answers people accept.
    assert want["exact_rate"] < 816 / 1490
    assert row["percent_agreement"] < 0.8
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 1490 and scores["id"].tolist() == list(range(1490))
    assert scores["score_exact-match"].mean() == pytest.approx(want["exact_rate"])
    assert scores["score_human"].sum() == 816
    agreement = pd.read_csv(out / "agreement.csv")
    ceiling = agreement[agreement["ceiling"]]
    assert ceiling[["judge_a", "judge_b"]].values.tolist() == [["annotator1", "annotator2"]]
    assert ceiling["cohen_kappa"].iloc[0] > row["cohen_kappa"]  # people agree with each other more
    bias = pd.read_csv(out / "bias.csv").set_index("probe")
    assert bias.loc["length", "mean_shift"] < 0 and bias.loc["length", "shift_high"] < 0  # padding breaks EM
    assert bias.loc["format", "mean_shift"] == 0 and bias.loc["format", "p_value"] == 1.0
    assert "exact-match" in capsys.readouterr().out


@pytest.mark.slow  # 11 s measured on 2 busy cores: out of the fast loop
def test_exact_match_against_humans_as_a_subprocess(nq301_jsonl, tmp_path):
    out = tmp_path / "sub"
    exe = Path(sys.executable).with_name("llm-connect")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "llm_connect.cli"]
    result = subprocess.run([*command, *exact_args(nq301_jsonl, out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    want = expected_exact_vs_human(nq301_jsonl)
    row = exact_human_row(out)
    assert row["percent_agreement"] == pytest.approx(want["percent_agreement"], abs=1e-12)
    assert row["cohen_kappa"] == pytest.approx(want["cohen_kappa"], abs=1e-12)
    assert "agreement:" in result.stdout and (out / "report.html").is_file()


@pytest.mark.local_models
def test_embedding_judge_with_the_embedded_model(nq301_jsonl, tmp_path):
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(nq301_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:120]),
                      encoding="utf-8")
    out = tmp_path / "emb"
    code = main(["calibrate", str(subset), "--out", str(out), "--judges", "exact,embedding", "--embedder", "local",
                 "--normalize", "squad", "--reference-sep", "|", "--probes", "length", "--probe-limit", "30",
                 "--n-boot", "200", "--no-progress"])
    assert code == 0
    scores = pd.read_csv(out / "scores.csv")
    assert len(scores) == 120 and scores["score_embedding-similarity"].notna().all()
    assert scores["score_embedding-similarity"].between(0, 1).all()
    # an exact match is also a near-identical embedding
    assert (scores.loc[scores["score_exact-match"] == 1, "score_embedding-similarity"] > 0.8).all()
    agreement = pd.read_csv(out / "agreement.csv").set_index(["judge_a", "judge_b"])
    assert agreement.loc[("embedding-similarity", "human"), "spearman"] > 0.1
    bias = pd.read_csv(out / "bias.csv")
    assert bias[["judge", "probe"]].values.tolist() == [["exact-match", "length"], ["embedding-similarity", "length"]]
    assert bias.set_index("judge").loc["embedding-similarity", "n"] == 30


@pytest.mark.local_models
@pytest.mark.slow
def test_default_judges_with_the_embedded_models(nq301_jsonl, tmp_path, capsys):
    """No --judges, --llm or --embedder: exact, embedding and the local SmolLM2 judge all run."""
    subset = tmp_path / "two.jsonl"
    subset.write_text("".join(nq301_jsonl.read_text(encoding="utf-8").splitlines(keepends=True)[:2]),
                      encoding="utf-8")
    out = tmp_path / "default"
    assert main(["calibrate", str(subset), "--out", str(out), "--probes", "none", "--n-boot", "50",
                 "--normalize", "squad", "--reference-sep", "|", "--no-progress"]) == 0
    scores = pd.read_csv(out / "scores.csv")
    judges = ("exact-match", "embedding-similarity", "llm-judge")
    assert list(scores.columns) == [
        "id", "prompt", "baseline", "candidate", "annotator1", "annotator2",  # not labels here: carried through
        *(f"score_{j}" for j in judges), "score_human",
        *(f"{kind}_{j}" for j in judges for kind in ("status", "notes", "reply")),
    ]
    answered = scores["status_llm-judge"] != "error"  # scored or unscored: the model replied, and it is kept
    assert scores.loc[answered, "reply_llm-judge"].notna().all() and scores["reply_exact-match"].isna().all()
    llm = scores["score_llm-judge"].dropna()
    assert llm.between(0, 1).all()  # a reply the tiny model botched is blank, never 0
    assert "llm-judge:" in capsys.readouterr().out
