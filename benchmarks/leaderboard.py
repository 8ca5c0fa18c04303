"""leaderboard() on 1,000,000 comparisons of 100 models with 1,000 bootstrap resamples (issue 17: under 30 s).

Baseline, in the same process: FastChat's way (``get_bootstrap_result`` with ``compute_elo_mle_with_tie``):
resample the battles with replacement, aggregate them per pair and fit scikit-learn's
``LogisticRegression(fit_intercept=False)`` once per resample, timed on a few resamples and
extrapolated to 1,000. Prints seconds and the ratio.

    python benchmarks/leaderboard.py [--comparisons 1000000] [--models 100] [--n-boot 1000] [--baseline-reps 5]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np
import pandas as pd

from llm_connect import leaderboard


def battles(n: int, m: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 1.0, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(n)
    winner = np.where(u < 0.1, "tie", np.where(rng.random(n) < p, "a", "b"))
    names = np.array([f"model-{i:03d}" for i in range(m)])
    return pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner})


def fastchat_one(a: np.ndarray, b: np.ndarray, w: np.ndarray, m: int) -> np.ndarray:
    """One resample fitted as FastChat does: win counts per ordered pair (ties half), one weighted
    logistic regression on ``x = e_a - e_b`` without intercept."""
    from sklearn.linear_model import LogisticRegression

    win = np.zeros((m, m))
    np.add.at(win, (a[w == 0], b[w == 0]), 2.0)
    np.add.at(win, (b[w == 1], a[w == 1]), 2.0)
    np.add.at(win, (a[w == 2], b[w == 2]), 1.0)
    np.add.at(win, (b[w == 2], a[w == 2]), 1.0)
    i, j = np.nonzero(np.triu(win + win.T, 1))
    x = np.zeros((2 * len(i), m))
    x[np.arange(len(i)) * 2, i] = math.log(10)
    x[np.arange(len(i)) * 2, j] = -math.log(10)
    x[np.arange(len(i)) * 2 + 1] = x[np.arange(len(i)) * 2]
    y = np.tile([1.0, 0.0], len(i))
    weight = np.empty(2 * len(i))
    weight[0::2] = win[i, j]
    weight[1::2] = win[j, i]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = LogisticRegression(fit_intercept=False, penalty=None, max_iter=1000).fit(x, y, sample_weight=weight)
    return 400 * fit.coef_[0] + 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--baseline-reps", type=int, default=5)
    args = parser.parse_args()

    df = battles(args.comparisons, args.models)
    print(f"{args.comparisons:,} comparisons of {args.models} models, {args.n_boot} bootstrap resamples")
    start = time.perf_counter()
    board = leaderboard(df, model_a="model_a", model_b="model_b", winner="winner", n_boot=args.n_boot, seed=0,
                        progress=False)
    ours = time.perf_counter() - start
    print(f"leaderboard(): {ours:.1f} s (limit 30 s); widest 95% interval "
          f"{(board['rating_high'] - board['rating_low']).max():.1f} Elo points")

    codes = {name: k for k, name in enumerate(sorted(set(df["model_a"]) | set(df["model_b"])))}
    a = df["model_a"].map(codes).to_numpy()
    b = df["model_b"].map(codes).to_numpy()
    w = df["winner"].map({"a": 0, "b": 1, "tie": 2}).to_numpy()
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(args.baseline_reps):
        idx = rng.integers(0, len(df), len(df))
        fastchat_one(a[idx], b[idx], w[idx], args.models)
    per = (time.perf_counter() - start) / args.baseline_reps
    baseline = per * (args.n_boot + 1)
    print(f"baseline (FastChat-style, one scikit-learn fit per resample): {per:.2f} s per resample, "
          f"{baseline:.0f} s extrapolated to {args.n_boot} resamples and the point fit")
    print(f"ratio baseline / leaderboard(): {baseline / ours:.1f}x")


if __name__ == "__main__":
    main()
