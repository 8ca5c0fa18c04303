"""Throughput and client CPU of LLM judgments against a slow endpoint.

N judgments go to an OpenAI-compatible loopback server running in a separate
process (so its CPU is not counted) that answers every request after a fixed
latency. The ideal wall time is ``N * latency / concurrency``; we report how
close a run gets (ratio) and the client's CPU time per judgment
(``time.process_time()``: all threads of this process), for

- ``llm_connect``: ``judge_many(LLMJudge(OpenAICompatibleAdapter(...)), items, concurrency=C)``;
- a reference: a plain asyncio loop over the official ``openai.AsyncOpenAI``
  client under a semaphore (same server, same number of calls).

Run: ``python benchmarks/throughput.py [--n 512] [--latency 0.2] [--concurrency 64]``.
Targets for llm_connect: ratio <= 1.10 and <= 2 ms CPU per judgment.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from llm_connect import LLMJudge, judge_many
from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.testing.loopback import LoopbackServer


def make_items(n: int) -> list[dict[str, str]]:
    return [
        {
            "prompt": f"Question {i}: what is {i} + {i}?",
            "baseline": f"The answer is {2 * i}.",
            "candidate": f"{i} + {i} equals {2 * i}.",
        }
        for i in range(n)
    ]


def measure(label: str, run: Callable[[], Any], n: int, floor_s: float) -> dict[str, float]:
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    result = {"wall_s": wall, "floor_s": floor_s, "ratio": wall / floor_s, "cpu_ms": cpu * 1000 / n}
    print(
        f"{label:<30} wall {wall:6.3f} s  floor {floor_s:6.3f} s  ratio {result['ratio']:5.3f}  "
        f"CPU {result['cpu_ms']:6.3f} ms/judgment"
    )
    return result


def llm_connect_run(base_url: str, items: list[dict[str, str]], concurrency: int) -> Callable[[], None]:
    adapter = OpenAICompatibleAdapter("loopback-model", base_url=base_url, max_concurrency=max(128, concurrency))
    judge = LLMJudge(adapter)

    def run() -> None:
        frame = judge_many(judge, items, concurrency=concurrency, progress=False)
        bad = frame[frame["status"] != "scored"]
        if len(bad):
            raise SystemExit(f"llm_connect: {len(bad)} rows not scored, e.g. {bad['error'].iloc[0]}")

    judge_many(judge, items[:concurrency], concurrency=concurrency, progress=False)  # warm up
    return run


def openai_run(base_url: str, items: list[dict[str, str]], concurrency: int) -> Callable[[], None]:
    from openai import AsyncOpenAI

    prompts = [f"Grade.\nQ: {d['prompt']}\nA: {d['baseline']}\nB: {d['candidate']}" for d in items]

    async def main(batch: list[str]) -> None:
        client = AsyncOpenAI(base_url=base_url, api_key="sk-loopback", max_retries=0)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(prompt: str) -> str:
            async with semaphore:
                reply = await client.chat.completions.create(
                    model="loopback-model", messages=[{"role": "user", "content": prompt}], temperature=0.0
                )
                return reply.choices[0].message.content or ""

        try:
            await asyncio.gather(*(one(p) for p in batch))
        finally:
            await client.close()

    asyncio.run(main(prompts[:concurrency]))  # warm up
    return lambda: asyncio.run(main(prompts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Throughput and client CPU of LLM judgments.")
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--skip-openai", action="store_true", help="do not run the openai reference")
    args = parser.parse_args(argv)
    n, latency, concurrency = args.n, args.latency, args.concurrency
    floor = n * latency / concurrency
    items = make_items(n)
    with LoopbackServer(mode="process", latency_s=latency) as server:
        print(f"N={n} judgments, server latency {latency * 1000:.0f} ms (in a subprocess), concurrency {concurrency}")
        ours = measure("llm_connect judge_many", llm_connect_run(server.base_url, items, concurrency), n, floor)
        if not args.skip_openai:
            measure("asyncio + openai.AsyncOpenAI", openai_run(server.base_url, items, concurrency), n, floor)
        stats = server.stats()
    print(f"server: {stats['total']} requests, at most {stats['max_in_flight']} in flight")
    met = ours["ratio"] <= 1.10 and ours["cpu_ms"] <= 2.0
    print("targets for llm_connect (ratio <= 1.10, CPU <= 2 ms/judgment):", "met" if met else "NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
