"""How fast ``estimate_quality`` is on a million graded items, against per-group baselines.

Builds ``--rows`` items (default 1,000,000) in ``--groups`` groups (default 100),
``--labelled`` of them (default 5%) with a human label, and times, best of
``--repeat`` runs, in one process:

- ``estimate_quality`` with the four methods (PPI++, PPI, human-only, judge-only);
- the same with ``weights=`` (the active-inference estimator);
- a pandas ``groupby().apply`` computing the same four estimates per group with numpy;
- ppi-python (``ppi_mean_ci`` with ``lam=None`` and ``lam=1``, ``classical_mean_ci``)
  called once per group, when ``ppi_py`` is installed (``pip install ppi-python``).

It checks the PPI++ intervals agree with the baselines and prints the times and
ratios. The target is under 2 s for estimate_quality on the default size.

    python benchmarks/estimates.py [--rows N] [--groups G] [--labelled FRACTION] [--repeat R]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

Z95 = 1.959963984540054


def make_frame(rows: int, groups: int, labelled: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    group = rng.integers(0, groups, rows)
    quality = rng.beta(3, 2, rows)
    human = (rng.random(rows) < quality).astype(float)
    judge = np.clip(0.5 + 0.4 * human + rng.normal(0, 0.12, rows), 0, 1)
    judge[rng.random(rows) < 0.001] = np.nan  # a few unscored replies
    pi = np.full(rows, labelled)
    chosen = rng.random(rows) < pi
    return pd.DataFrame({
        "task": pd.Categorical.from_codes(group, categories=[f"task-{g:03d}" for g in range(groups)]),
        "judge": judge,
        "human": np.where(chosen, human, np.nan),
        "pi": pi,
    })


def best_of(repeat: int, fn):
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def _ppi_plus_plus(y: np.ndarray, f: np.ndarray, fu: np.ndarray) -> tuple[float, float]:
    """PPI++ for one group, written the plain way (as ppi-python does it, without its 2-D machinery)."""
    n, big_n = len(y), len(fu)
    lam = np.cov(y, f, bias=True)[0, 1] / ((1 + n / big_n) * np.var(np.concatenate([f, fu]), ddof=1))
    lam = float(np.clip(lam, 0, 1))
    est = lam * fu.mean() + (y - lam * f).mean()
    se = np.sqrt(lam**2 * fu.var() / big_n + (y - lam * f).var() / n)
    return est - Z95 * se, est + Z95 * se


def groupby_apply(df: pd.DataFrame) -> pd.DataFrame:
    def one(g: pd.DataFrame) -> pd.Series:
        g = g[g["judge"].notna()]
        lab = g["human"].notna().to_numpy()
        y, f, fu = g["human"].to_numpy()[lab], g["judge"].to_numpy()[lab], g["judge"].to_numpy()[~lab]
        low, high = _ppi_plus_plus(y, f, fu)
        p1 = fu.mean() + (y - f).mean()
        se1 = np.sqrt(fu.var() / len(fu) + (y - f).var() / len(y))
        allf = g["judge"].to_numpy()
        return pd.Series({
            "ppi++_low": low, "ppi++_high": high, "ppi_low": p1 - Z95 * se1, "ppi_high": p1 + Z95 * se1,
            "human": y.mean(), "human_se": y.std() / np.sqrt(len(y)),
            "judge": allf.mean(), "judge_se": allf.std() / np.sqrt(len(allf)),
        })

    return df.groupby("task", observed=True).apply(one, include_groups=False)


def ppi_python(df: pd.DataFrame, ppi_py, classical_mean_ci) -> pd.DataFrame:
    rows = {}
    for task, g in df.groupby("task", observed=True):
        g = g[g["judge"].notna()]
        lab = g["human"].notna().to_numpy()
        y, f, fu = g["human"].to_numpy()[lab], g["judge"].to_numpy()[lab], g["judge"].to_numpy()[~lab]
        low, high = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05)
        low1, high1 = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=1)
        hlow, hhigh = classical_mean_ci(y, alpha=0.05)
        rows[task] = {"ppi++_low": low[0], "ppi++_high": high[0], "ppi_low": low1[0], "ppi_high": high1[0],
                      "human_low": hlow, "human_high": hhigh}
    return pd.DataFrame.from_dict(rows, orient="index")


def main(argv: list[str] | None = None) -> int:
    from llm_connect.stats.estimates import estimate_quality

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--labelled", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    t = time.perf_counter()
    df = make_frame(args.rows, args.groups, args.labelled)
    print(f"built {len(df):,} rows in {df['task'].nunique()} groups, {int(df['human'].notna().sum()):,} labelled, "
          f"in {time.perf_counter() - t:.1f}s")
    methods = ("ppi++", "ppi", "human", "judge")

    def ours():
        return estimate_quality(df, judge="judge", human="human", by="task", methods=methods)

    t_ours, out = best_of(args.repeat, ours)
    print(f"estimate_quality (4 methods):           {t_ours:7.3f}s  (target < 2 s)")
    t_ipw, _ = best_of(args.repeat, lambda: estimate_quality(df, judge="judge", human="human", by="task",
                                                             methods=methods, weights="pi"))
    print(f"estimate_quality (weights=, IPW):        {t_ipw:7.3f}s")

    pp = out[out["method"] == "ppi++"].set_index("task")
    t_apply, applied = best_of(1, lambda: groupby_apply(df))
    diff = np.abs(applied["ppi++_low"] - pp["ci_low"]).max()
    print(f"pandas groupby().apply, numpy per group: {t_apply:7.3f}s  ratio {t_apply / t_ours:5.1f}x  "
          f"(max |Δ ci_low| = {diff:.1e})")

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import ppi_py
            from ppi_py.baselines import classical_mean_ci
    except ImportError:
        print("ppi-python is not installed; pip install ppi-python to time it too")
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ppi_python(df[df["task"] == df["task"].iloc[0]], ppi_py, classical_mean_ci)  # warm up (first-call costs)
        t_ref, ref = best_of(1, lambda: ppi_python(df, ppi_py, classical_mean_ci))
    diff = max(np.abs(ref["ppi++_low"] - pp["ci_low"]).max(), np.abs(ref["ppi++_high"] - pp["ci_high"]).max())
    print(f"ppi-python, once per group:              {t_ref:7.3f}s  ratio {t_ref / t_ours:5.1f}x  "
          f"(max |Δ PPI++ bound| = {diff:.1e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
