"""Labels needed for the same interval width: ``Labeller(strategy="active")`` against ``"random"``.

On the bundled ``data/qa_calibration.jsonl`` (269 answers with people's yes/no labels), with
offline judges only (no network, no model):

- ``token-f1``: SQuAD token F1 against the references (``TokenF1Judge``);
- ``panel``: the mean of exact match, contains and token F1 (their disagreement is the
  uncertainty: all three agreeing gives a score of 0 or 1).

For each judge and strategy, ``--runs`` seeded plans are drawn with the labeller's own code
(``make_plan``, ``SamplingPlan.queue`` / ``inclusion``, ``active_probabilities``): the first ``n``
items of the queue get their human label (an annotator who stops after ``n``) and
``estimate_quality`` gives the PPI++ interval, with the labeller's inclusion probabilities as
weights for ``"active"`` (all runs in one ``by="run"`` call). It prints, per label budget, the mean
interval width and coverage of the full-data mean of the labels, then the labels ``"random"``
needs to reach the width ``"active"`` reaches (interpolated on random's width curve) and their
ratio. Last, the time the real ``Labeller`` takes per label (append + re-read of the ledger +
next item), on a ledger holding the 269 judge observations.

    python benchmarks/labelling.py [--runs R] [--budgets 40,60,80,100] [--floor 0.1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from llm_connect import ContainsJudge, ExactMatchJudge, QualityLedger, TokenF1Judge, judge_many
from llm_connect.calibration import Labeller, estimate_quality
from llm_connect.calibration._labeller import active_probabilities, make_plan

DATA = Path(__file__).resolve().parent.parent / "data" / "qa_calibration.jsonl"


def judges(df: pd.DataFrame) -> dict[str, np.ndarray]:
    f1 = TokenF1Judge(reference_sep="|")
    contains = ContainsJudge(reference_sep="|")
    em = ExactMatchJudge(normalizer="squad", reference_sep="|")
    s_f1 = np.array([f1.best(b, c)[0] for b, c in zip(df.baseline, df.candidate, strict=True)])
    s_in = np.array([contains.best(b, c)[0] for b, c in zip(df.baseline, df.candidate, strict=True)])
    s_em = np.array([float(em.matches(b, c)) for b, c in zip(df.baseline, df.candidate, strict=True)])
    return {"token-f1": s_f1, "panel": (s_f1 + s_in + s_em) / 3}


def simulate(keys: list[str], f: np.ndarray, y: np.ndarray, strategy: str, budget: int, runs: int,
             seed: int, floor: float = 0.1) -> pd.DataFrame:
    n = len(keys)
    probs = active_probabilities(f, floor=floor) if strategy == "active" else None
    human = np.full((runs, n), np.nan)
    weight = np.ones((runs, n))
    for r in range(runs):
        plan = make_plan(keys, strategy=strategy, seed=seed + r, probabilities=probs)
        shown = plan.queue()[:budget]
        done = np.zeros(n, dtype=bool)
        done[shown] = True
        human[r, shown] = y[shown]
        weight[r] = plan.inclusion(done)
    data = pd.DataFrame({"run": np.repeat(np.arange(runs), n), "judge": np.tile(f, runs),
                         "human": human.ravel(), "w": weight.ravel()})
    est = estimate_quality(data, judge="judge", human="human", by="run", methods="ppi++",
                           weights="w" if strategy == "active" else None)
    truth = float(y.mean())
    est["width"] = est["ci_high"] - est["ci_low"]
    est["covered"] = (est["ci_low"] <= truth) & (truth <= est["ci_high"])
    return est


def per_label_seconds(df: pd.DataFrame, n_labels: int = 30) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        led = QualityLedger(Path(tmp) / "ledger.jsonl")
        judge_many(TokenF1Judge(reference_sep="|"), df, ledger=led, task_type="qa", progress=False)
        lab = Labeller(df, ledger=led, task_type="qa", annotator="bench", judge="token-f1", strategy="active")
        start = time.perf_counter()
        for k in range(n_labels):
            lab.label(float(k % 2))
        return (time.perf_counter() - start) / n_labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--budgets", default="40,60,80,100")
    parser.add_argument("--floor", type=float, default=0.1, help="the uniform share of active's probabilities")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    df = pd.read_json(DATA, lines=True, dtype=False)
    y = (df["human"] == "yes").to_numpy(dtype=float)
    keys = [f"{i}\x1f{m}" for i, m in zip(df["id"], df["candidate_model"], strict=True)]
    print(f"{len(df)} items, human mean {y.mean():.3f}; {args.runs} seeded runs per cell\n")
    for name, f in judges(df).items():
        corr = float(np.corrcoef(f, y)[0, 1])
        pi = active_probabilities(f, floor=args.floor)
        print(f"judge {name}: corr with people {corr:.2f}; active shows {pi.mean():.2f} of visited items on average")
        widths: dict[str, list[float]] = {}
        for strategy in ("random", "active"):
            widths[strategy] = []
            for b in budgets:
                est = simulate(keys, f, y, strategy, b, args.runs, seed=1000 * b, floor=args.floor)
                widths[strategy].append(float(est["width"].mean()))
                print(f"  {strategy:6s} {b:4d} labels: width {est['width'].mean():.4f}, "
                      f"coverage {est['covered'].mean():.3f}")
        wr = np.array(widths["random"])
        order = np.argsort(wr)
        for b, wa in zip(budgets, widths["active"], strict=True):
            if wa < wr.min():
                print(f"  active at {b} labels: width {wa:.4f}, narrower than random at {budgets[-1]} labels "
                      f"(ratio <= {b / budgets[-1]:.2f})")
                continue
            if wa > wr.max():
                print(f"  active at {b} labels: width {wa:.4f}, wider than random at {budgets[0]} labels")
                continue
            need = float(np.interp(wa, wr[order], np.array(budgets, dtype=float)[order]))
            print(f"  same width {wa:.4f}: active {b} labels, random {need:.0f}; ratio {b / need:.2f} "
                  f"({1 - b / need:.0%} fewer)")
        print()
    print(f"Labeller.label() on a 269-item ledger: {per_label_seconds(df) * 1000:.1f} ms per label "
          "(append, re-read the ledger, choose the next item)")


if __name__ == "__main__":
    main()
