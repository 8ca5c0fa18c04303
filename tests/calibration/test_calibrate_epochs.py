"""Run-to-run reliability in the judge card from a real run: calibrate(..., epochs=k, reducer=) and
``llm-connect calibrate --epochs K --reducer NAME`` judge every item k times, score with the reduced
score and put the epochs, percent agreement and Krippendorff's alpha (checked against the
``krippendorff`` package) in each judge card and in OUT/cards.csv."""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections import Counter

import krippendorff
import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect import ExactMatchJudge, LLMJudge, RunConfig, ValidationError, calibrate
from llm_connect.cards import CARD_COLUMNS, JudgeCardRegistry, cards_frame
from llm_connect.cli import main
from llm_connect.testing import LoopbackServer, ScriptedAdapter

N = 24
RNG = np.random.default_rng(7)
HUMAN = RNG.integers(0, 2, N)  # people's verdicts
# the judge's verdict on item i in epoch e: people's, flipped with probability 0.25 (seeded)
VERDICTS = np.where(RNG.random((3, N)) < 0.25, 1 - HUMAN, HUMAN)


def items() -> list[dict]:
    return [{"id": f"i{i}", "prompt": f"question {i}?", "baseline": f"answer {i}",
             "candidate": f"[c{i}] answer {i}" if HUMAN[i] else f"[c{i}] wrong", "human": bool(HUMAN[i])}
            for i in range(N)]


def seeded_reply(prompt: str, rc: RunConfig) -> str:
    i = int(re.search(r"\[c(\d+)\]", prompt).group(1))
    seed = rc.model_params.get("seed")
    epoch = 0 if seed is None else int(seed)
    return json.dumps({"quality_score": float(VERDICTS[epoch, i]), "notes": f"e{epoch}"})


def percent_agreement(matrix: np.ndarray) -> float:
    """Items x epochs: the share of agreeing pairs of epochs per item, averaged."""
    return float(np.mean([np.mean([a == b for a, b in itertools.combinations(row, 2)]) for row in matrix]))


def test_calibrate_in_epochs_fills_the_judge_cards_reliability():
    adapter = ScriptedAdapter(seeded_reply)
    report = calibrate({"exact": ExactMatchJudge(), "llm": LLMJudge(adapter)}, items(), human="human",
                       probes=None, n_boot=50, epochs=3, reducer="mode", progress=False)
    assert len(adapter.calls) == 3 * N  # every item, every epoch
    expected = [statistics.mode(VERDICTS[:, i]) for i in range(N)]
    assert report.scores["score_llm"].tolist() == expected  # the reduced score is what agreement reads
    assert report.meta.epochs == 3 and set(report.meta.reliability) == {"exact", "llm"}
    cards = {c.grader_id: c for c in report.judge_cards()}
    llm = cards["llm-judge"].reliability
    assert llm["epochs"] == 3 and llm["n_items"] == N and llm["reducer"] == "mode" and llm["level"] == "nominal"
    assert llm["agreement"] == pytest.approx(percent_agreement(VERDICTS.T))
    oracle = krippendorff.alpha(reliability_data=VERDICTS.astype(float), level_of_measurement="nominal")
    assert llm["alpha"] == pytest.approx(oracle)
    exact = cards["exact-match"].reliability  # a deterministic judge: full agreement, alpha undefined
    assert exact["agreement"] == 1.0 and exact["alpha"] is None
    frame = cards_frame(cards.values())
    assert list(frame.columns) == list(CARD_COLUMNS)
    row = frame.set_index("grader_id").loc["llm-judge"]
    assert row["epochs"] == 3 and row["epoch_agreement"] == pytest.approx(llm["agreement"])
    assert row["epoch_alpha"] == pytest.approx(oracle)
    assert math.isnan(frame.set_index("grader_id").loc["exact-match", "epoch_alpha"])
    assert "run-to-run reliability" in cards["llm-judge"]._repr_html_()


def test_a_single_run_leaves_the_reliability_blank_and_bad_epochs_are_refused():
    adapter = ScriptedAdapter(seeded_reply)
    report = calibrate({"llm": LLMJudge(adapter)}, items(), human="human", probes=None, n_boot=20, progress=False)
    (card,) = report.judge_cards()
    assert card.reliability is None and report.meta.reliability == {}
    row = card.row()
    assert row["epochs"] is None and math.isnan(row["epoch_agreement"]) and math.isnan(row["epoch_alpha"])
    calls = len(adapter.calls)
    with pytest.raises(ValidationError, match="epochs must be a positive integer"):
        calibrate({"llm": LLMJudge(adapter)}, items(), human="human", probes=None, epochs=0, progress=False)
    with pytest.raises(ValidationError, match="reducer must be one of"):
        calibrate({"llm": LLMJudge(adapter)}, items(), human="human", probes=None, epochs=2, reducer="avg",
                  progress=False)
    pairs = [{"prompt": "q", "candidate_a": "x", "candidate_b": "y", "human": "a"}]
    with pytest.raises(ValidationError, match="epochs= is not available for pairwise data"):
        calibrate({"llm": LLMJudge(adapter)}, pairs, human="human", epochs=2, progress=False)
    assert len(adapter.calls) == calls  # refused before any judge ran


@pytest.mark.slow  # 6 s measured on 2 busy cores: out of the fast loop
def test_cli_calibrate_epochs_writes_the_reliability_into_cards_csv(tmp_path, capsys):
    calls: Counter = Counter()

    def reply(prompt: str) -> str:  # the k-th call on an item is its epoch k (one call at a time)
        i = int(re.search(r"\[c(\d+)\]", prompt).group(1))
        epoch = calls[i]
        calls[i] += 1
        return json.dumps({"notes": "ok", "quality_score": float(VERDICTS[epoch % 3, i])})

    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps({**r, "human": "yes" if r["human"] else "no"}) + "\n" for r in items()),
                    encoding="utf-8")
    out = tmp_path / "out"
    ledger = tmp_path / "ledger.jsonl"
    with LoopbackServer(reply=reply) as server:
        args = ["calibrate", str(data), "--out", str(out), "--judges", "exact,llm", "--llm", "openai:judge-1",
                "--base-url", server.base_url, "--probes", "none", "--n-boot", "50", "--epochs", "3",
                "--reducer", "mean", "--concurrency", "1", "--no-progress", "--ledger", str(ledger)]
        assert main(args) == 0
        assert server.stats()["total"] == 3 * N  # the LLM judge, every epoch
        assert sorted(str(r.body.get("seed")) for r in server.requests) == sorted(["0", "1", "2"] * N)
        cards = pd.read_csv(out / "cards.csv")
        assert list(cards.columns) == list(CARD_COLUMNS)
        row = cards.set_index("grader_id").loc["llm-judge"]
        assert row["epochs"] == 3
        assert row["epoch_agreement"] == pytest.approx(percent_agreement(VERDICTS.T))
        assert row["epoch_alpha"] == pytest.approx(
            krippendorff.alpha(reliability_data=VERDICTS.astype(float), level_of_measurement="nominal"))
        scores = pd.read_csv(out / "scores.csv")
        assert scores["score_llm-judge"].tolist() == pytest.approx(VERDICTS.mean(axis=0).tolist())
        saved = JudgeCardRegistry.for_ledger(ledger).get("llm-judge")
        assert saved.reliability["epochs"] == 3  # the registry keeps it too
        capsys.readouterr()
        assert main(args) == 0  # a rerun: every epoch from OUT/cache
        assert server.stats()["total"] == 3 * N
    with pytest.raises(SystemExit) as exit_info:
        main([*args[:-2], "--epochs", "0"])
    assert exit_info.value.code == 2
    assert "--epochs must be from 1 to 100" in capsys.readouterr().err
