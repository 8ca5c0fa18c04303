"""The embedded LLM judge on its two runtimes: transformers + PyTorch (the ``local`` extra, nothing to compile)
against llama.cpp (the ``llama`` extra, the baseline), in the same process.

Each runtime runs ``LLMJudge(adapter, seed=0)`` (the local rubric: instructions decoded once, a one-token verdict
read from its logprobs) on the first N items of ``data/qa_calibration.jsonl``. Reported per runtime: the load
(the model read, plus the first judgment), the median and mean seconds per judgment after it, whether a second
pass gives bit-for-bit the same scores, and Cohen's kappa of its verdicts (P(yes) > 0.5) with the first
annotator (scikit-learn). Then the ratios transformers / llama.cpp.

Run: ``python benchmarks/local_runtimes.py [--n 80]`` (needs both extras: ``local`` and ``llama``).
Target: median <= 0.35 s per judgment on an idle 2-core machine, for each runtime.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from sklearn.metrics import cohen_kappa_score

from llm_connect import LLMJudge, LLMResponse, RunConfig
from llm_connect.adapters import LlamaCppAdapter, TransformersAdapter

DATA = Path(__file__).resolve().parents[1] / "data" / "qa_calibration.jsonl"
TARGET_S = 0.35


def run(adapter: Any, items: list[dict[str, Any]]) -> dict[str, Any]:
    judge = LLMJudge(adapter, seed=0)
    rc = RunConfig()

    def one(item: dict[str, Any]) -> float:
        result = judge.judge(LLMResponse(item["baseline"], "b", "ref"), LLMResponse(item["candidate"], "c", "cand"),
                             prompt=item["prompt"], run_config=rc)
        return float(result.quality_score) if result.quality_score is not None else float("nan")

    start = time.perf_counter()
    scores = [one(items[0])]
    load = time.perf_counter() - start
    times = []
    for item in items[1:]:
        t0 = time.perf_counter()
        scores.append(one(item))
        times.append(time.perf_counter() - t0)
    again = [one(item) for item in items]
    human = [str(i["human"]).lower() in ("yes", "true", "1") for i in items]
    kappa = cohen_kappa_score(human, [s > 0.5 for s in scores])
    return {"load_s": load, "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
            "repeatable": scores == again, "kappa": kappa}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=80)
    args = parser.parse_args()
    items = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()][: args.n]
    results = {}
    for name, adapter in (("llama.cpp", LlamaCppAdapter()), ("transformers", TransformersAdapter())):
        results[name] = run(adapter, items)
        r = results[name]
        print(f"{name:<13} load+first {r['load_s']:5.1f} s   median {r['median_s']:.3f} s/judgment   "
              f"mean {r['mean_s']:.3f}   repeatable {r['repeatable']}   kappa vs people {r['kappa']:+.3f}   "
              f"{'meets' if r['median_s'] <= TARGET_S else 'MISSES'} the {TARGET_S} s target")
    a, b = results["transformers"], results["llama.cpp"]
    print(f"transformers / llama.cpp: median x{a['median_s'] / b['median_s']:.2f}, "
          f"load x{a['load_s'] / b['load_s']:.1f} ({len(items)} items)")


if __name__ == "__main__":
    main()
