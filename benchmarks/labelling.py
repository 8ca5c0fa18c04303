"""Labels needed for the same interval width: ``Labeller(strategy="active")`` against ``"random"``.

On the bundled ``data/qa_calibration.jsonl`` (269 answers with people's yes/no labels), with
offline judges only (no network, no model):

- ``token-f1``: SQuAD token F1 against the references (``TokenF1Judge``);
- ``panel``: the mean of exact match, contains and token F1.

Both are confidently wrong in places (aliases and paraphrases scored 0). For each judge, budget and
design, ``--runs`` seeded runs (random visiting orders and draws) label the first ``n`` items shown
(an annotator who stops after ``n``) and give the 95% interval the labeller gives:

- ``random``: plain PPI++ on the judge's score (what ``Labeller(strategy="random").estimate()`` gives);
- ``random+cal``: a uniform walk (``floor=1``: every item shown) with the labeller's calibrated judge
  (``calibrated_scores``) and weights: random labelling with the same estimator as ``active``, so
  ``active`` against it is the gain of the sampling alone;
- ``active``: the labeller's learned residual rule (``residual_walk``, ``walk_inclusion``,
  ``calibrated_scores``: exactly what ``Labeller(strategy="active")`` does);
- ``active-judge``: the fixed rule on the judge's own ``sqrt(s(1 - s))`` (``active_probabilities``,
  ``walk_inclusion``, raw scores: ``Labeller(strategy="active", uncertainty="judge")``).

First, on the tests' synthetic calibrated judge (informative uncertainty), the labels each active
rule needs per label of ``random`` at the same width (the issue's target: 30% fewer).

It prints the mean width and the coverage of the 269 labels' mean per label count, then the labels
``random`` (and ``random+cal``) need for the width ``active`` reaches (interpolated on their width
curves) and the ratio. Last, the time the real ``Labeller`` takes per label (append + re-read of
the ledger + replay of the walk + next item), on a ledger holding the 269 judge observations.

    python benchmarks/labelling.py [--runs R] [--budgets 40,60,80,100] [--floor 0.1] [--burn-in 20]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from llm_connect import ContainsJudge, ExactMatchJudge, QualityLedger, TokenF1Judge, judge_many
from llm_connect.labelling import Labeller
from llm_connect.stats import estimate_quality
from llm_connect.stats.sampling import (
    active_probabilities,
    calibrated_scores,
    residual_walk,
    walk_inclusion,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "qa_calibration.jsonl"


def judges(df: pd.DataFrame) -> dict[str, np.ndarray]:
    f1 = TokenF1Judge(reference_sep="|")
    contains = ContainsJudge(reference_sep="|")
    em = ExactMatchJudge(normalizer="squad", reference_sep="|")
    s_f1 = np.array([f1.best(b, c)[0] for b, c in zip(df.baseline, df.candidate, strict=True)])
    s_in = np.array([contains.best(b, c)[0] for b, c in zip(df.baseline, df.candidate, strict=True)])
    s_em = np.array([float(em.matches(b, c)) for b, c in zip(df.baseline, df.candidate, strict=True)])
    return {"token-f1": s_f1, "panel": (s_f1 + s_in + s_em) / 3}


def simulate(f: np.ndarray, y: np.ndarray, design: str, budget: int, runs: int, seed: int, floor: float = 0.1,
             burn_in: int = 20, truth: float | None = None) -> pd.DataFrame:
    n = f.shape[-1]
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((runs, n)), axis=1)
    run = np.repeat(np.arange(runs), n)
    if design == "random":
        position = np.empty_like(order)
        position[np.arange(runs)[:, None], order] = np.arange(n)
        human = np.where(position < budget, y, np.nan)
        data = pd.DataFrame({"run": run, "judge": np.broadcast_to(f, (runs, n)).ravel(), "human": human.ravel()})
        est = estimate_quality(data, judge="judge", human="human", by="run", methods="ppi++")
    elif design == "active-judge":  # Labeller(strategy="active", uncertainty="judge"): pi from sqrt(s(1 - s))
        pi = np.tile(active_probabilities(f, floor=floor), (runs, 1)) if f.ndim == 1 else np.stack(
            [active_probabilities(row, floor=floor) for row in f])
        selected = rng.random((runs, n)) < pi
        rows = np.arange(runs)[:, None]
        shown = selected[rows, order]
        used = np.zeros_like(selected)
        used[rows, order] = shown & (np.cumsum(shown, axis=1) <= budget)
        human = np.where(used, y, np.nan)
        data = pd.DataFrame({"run": run, "judge": np.broadcast_to(f, (runs, n)).ravel(), "human": human.ravel(),
                             "w": walk_inclusion(order, pi, selected, used).ravel()})
        est = estimate_quality(data, judge="judge", human="human", by="run", methods="ppi++", weights="w")
    else:
        walk = residual_walk(f, rng.random((runs, n)), order, y, budget=np.full(runs, budget),
                             floor=1.0 if design == "random+cal" else floor, burn_in=burn_in)
        human = np.where(walk.used, y, np.nan)
        data = pd.DataFrame({"run": run, "judge": calibrated_scores(f, human).ravel(), "human": human.ravel(),
                             "w": walk_inclusion(order, walk.prob, walk.selected, walk.used).ravel()})
        est = estimate_quality(data, judge="judge", human="human", by="run", methods="ppi++", weights="w")
        est["labels"] = walk.n_used
    truth = float(y.mean()) if truth is None else truth
    est["width"] = est["ci_high"] - est["ci_low"]
    est["covered"] = (est["ci_low"] <= truth) & (truth <= est["ci_high"])
    return est


def calibrated_judge(runs: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The tests' synthetic judge with informative uncertainty, fresh items per run: sure on 85% of the
    items (scores in [0, 0.02] or [0.98, 1]), unsure on the rest (0.2..0.8), labels y ~ Bernoulli(s)."""
    rng = np.random.default_rng(seed)
    sure = rng.random((runs, n)) < 0.85
    hi = rng.random((runs, n)) < 0.6
    s = np.where(sure, np.where(hi, rng.uniform(0.98, 1.0, (runs, n)), rng.uniform(0.0, 0.02, (runs, n))),
                 rng.uniform(0.2, 0.8, (runs, n)))
    return s, (rng.random((runs, n)) < s).astype(float), 0.85 * (0.6 * 0.99 + 0.4 * 0.01) + 0.15 * 0.5


def synthetic_ratios(runs: int, floor: float, burn_in: int) -> None:
    """Labels each active rule needs per label of ``random`` at the same width, on the calibrated judge."""
    n, budgets = 4000, (100, 200)
    print(f"synthetic calibrated judge (y ~ Bernoulli(s), 85% sure), {n} items, {runs} runs per cell")
    widths: dict[str, np.ndarray] = {}
    for d in ("random", "active", "active-judge"):
        cells = []
        for b in budgets:
            s, y, truth = calibrated_judge(runs, n, seed=31 + b)
            est = simulate(s, y, d, b, runs, seed=7 + b, floor=floor, burn_in=burn_in, truth=truth)
            cells.append((float(est["width"].mean()), float(est["covered"].mean())))
        widths[d] = np.array([w for w, _ in cells])
        print(f"  {d:12s} " + " | ".join(f"{b} labels: width {w:.4f} coverage {c:.3f}"
                                         for b, (w, c) in zip(budgets, cells, strict=True)))
    for d in ("active", "active-judge"):
        ratio = float(np.mean((widths[d] / widths["random"]) ** 2))
        rule = "learned residual (default)" if d == "active" else "uncertainty='judge'"
        change = f"{1 - ratio:.0%} fewer" if ratio <= 1 else f"{ratio - 1:.0%} more"
        print(f"  labels for random's width, {rule}: ratio {ratio:.2f} ({change})")
    print()


def per_label_seconds(df: pd.DataFrame, n_labels: int = 30) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        led = QualityLedger(Path(tmp) / "ledger.jsonl")
        judge_many(TokenF1Judge(reference_sep="|"), df, ledger=led, task_type="qa", progress=False)
        lab = Labeller(df, ledger=led, task_type="qa", annotator="bench", grader_id="token-f1", strategy="active")
        start = time.perf_counter()
        for k in range(n_labels):
            lab.label(float(k % 2))
        return (time.perf_counter() - start) / n_labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--budgets", default="40,60,80,100")
    parser.add_argument("--floor", type=float, default=0.1, help="the uniform share of active's probabilities")
    parser.add_argument("--burn-in", type=int, default=20, help="labels taken uniformly before the rule learns")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    df = pd.read_json(DATA, lines=True, dtype=False)
    y = (df["human"] == "yes").to_numpy(dtype=float)
    synthetic_ratios(min(args.runs, 300), args.floor, args.burn_in)
    print(f"{len(df)} items, human mean {y.mean():.3f}; {args.runs} seeded runs per cell\n")
    designs = ("random", "random+cal", "active", "active-judge")
    for name, f in judges(df).items():
        print(f"judge {name}: corr with people {float(np.corrcoef(f, y)[0, 1]):.2f}")
        widths: dict[str, list[float]] = {d: [] for d in designs}
        for b in budgets:
            cells = []
            for d in designs:
                est = simulate(f, y, d, b, args.runs, seed=1000 * b + designs.index(d), floor=args.floor,
                               burn_in=args.burn_in)
                widths[d].append(float(est["width"].mean()))
                cells.append(f"{d} width {est['width'].mean():.4f} coverage {est['covered'].mean():.3f}")
            print(f"  {b:4d} labels: " + " | ".join(cells))
        for act, base in (("active", "random"), ("active", "random+cal"), ("active-judge", "random")):
            wr = np.array(widths[base])
            order = np.argsort(wr)
            for b, wa in zip(budgets, widths[act], strict=True):
                if not wr.min() <= wa <= wr.max():
                    side = "narrower" if wa < wr.min() else "wider"
                    print(f"  {act} at {b} labels: width {wa:.4f}, {side} than {base} over {budgets}")
                    continue
                need = float(np.interp(wa, wr[order], np.array(budgets, dtype=float)[order]))
                change = f"{1 - b / need:.0%} fewer" if b <= need else f"{b / need - 1:.0%} more"
                print(f"  same width {wa:.4f}: {act} {b} labels, {base} {need:.0f}; ratio {b / need:.2f} ({change})")
        print()
    print(f"Labeller.label() on a 269-item ledger: {per_label_seconds(df) * 1000:.1f} ms per label "
          "(append, re-read the ledger, replay the walk, choose the next item)")


if __name__ == "__main__":
    main()
