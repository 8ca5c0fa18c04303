"""Provider Batch APIs: N judgments through the loopback Batch API beside the same run without ``batch``.

The loopback server runs in a separate process (its CPU is not counted) and speaks OpenAI's Batch API
(``/v1/files``, ``/v1/batches``; :mod:`llm_connect.testing._batch_api`). We report, for
``judge_many(LLMJudge(OpenAICompatibleAdapter("gpt-4o-mini", ...)), items)`` with and without
``batch=True``: wall time, the client's CPU per judgment (``time.process_time()``, all threads) and the
judge's cost at list prices (``gpt-4o-mini``; the batch run at the 50% batch discount).

Run: ``python benchmarks/batch.py [--n 10000] [--concurrency 64]``.
"""

from __future__ import annotations

import argparse
import time

from llm_connect import LLMJudge, judge_many
from llm_connect.adapters import BatchOptions, OpenAICompatibleAdapter
from llm_connect.testing import LoopbackServer


def items(n: int) -> list[dict]:
    return [{"prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"reply {i}", "id": i}
            for i in range(n)]


def measure(label: str, run) -> dict:
    cpu, wall = time.process_time(), time.perf_counter()
    rows = run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    n = len(rows)
    out = {"run": label, "n": n, "scored": int((rows["status"] == "scored").sum()), "wall_s": round(wall, 2),
           "cpu_ms_per_judgment": round(1000 * cpu / max(1, n), 3), "cost_usd": float(rows["judge_cost_usd"].sum())}
    print(out, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    data = items(args.n)
    with LoopbackServer(mode="process", batch={"polls": 2}) as server:
        judge = LLMJudge(OpenAICompatibleAdapter("gpt-4o-mini", base_url=server.base_url, max_concurrency=128))
        direct = measure("direct", lambda: judge_many(judge, data, concurrency=args.concurrency, progress=False))
        batched = measure("batch", lambda: judge_many(judge, data, progress=False, batch=BatchOptions(
            poll_interval_s=0.05, poll_max_interval_s=0.5, progress=False)))
    print(f"cost at list prices: direct ${direct['cost_usd']:.4f}, batch ${batched['cost_usd']:.4f} "
          f"({batched['cost_usd'] / direct['cost_usd']:.0%} of direct)" if direct["cost_usd"] else "")


if __name__ == "__main__":
    main()
