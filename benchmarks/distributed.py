"""Ray's overhead: ``grade_dataset`` on a local Ray cluster vs ``judge_many`` in one process.

N judgments (``LLMJudge`` over ``OpenAICompatibleAdapter``) go to the loopback
server in its own process (its CPU is not counted), which answers each after a
fixed latency (200 ms). Both runs have the same number of judgments in flight:

- ``judge_many``: one process, ``concurrency=C``;
- ``grade_dataset``: ``ray.init(num_cpus=2)`` on this machine, ``A`` actors of
  ``C / A`` judgments in flight each (``batch_size`` rows per batch).

Printed for each: wall time, the floor ``N * latency / C`` and the ratio to it,
CPU per judgment (for ``judge_many`` this process's ``process_time``; for Ray
the CPU of every process of the Ray session -- the driver, GCS, raylet, the
workers and actors -- sampled from ``/proc`` every 0.2 s, so an actor that
exits less than 0.2 s after its last sample loses that much), and Ray's
overhead as ``wall(grade_dataset) / wall(judge_many)`` (target: within 1.3x).

With ``--ledger``, also the append and read rates of a ``ParquetLedger`` (when
``llm_connect.quality`` has one) and of a ``QualityLedger`` on the same
observations, written in batches of ``--batch-size`` as ``grade_dataset`` does.

Run: ``python benchmarks/distributed.py [--n 100000] [--latency 0.2] [--concurrency 256] [--actors 4]``
(``--n 5000`` for a quick look).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from llm_connect import LLMJudge, judge_many
from llm_connect.adapters import OpenAICompatibleAdapter
from llm_connect.testing import LoopbackServer


def make_items(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "id": range(n),
        "prompt": [f"Question {i}: what is {i} + {i}?" for i in range(n)],
        "baseline": [f"The answer is {2 * i}." for i in range(n)],
        "candidate": [f"{i} + {i} equals {2 * i}." for i in range(n)],
    })


def make_judge(base_url: str, max_concurrency: int) -> LLMJudge:
    adapter = OpenAICompatibleAdapter("loopback-model", base_url=base_url, max_concurrency=max_concurrency)
    return LLMJudge(adapter, seed=0)


_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far) of every process we can read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS)
    return table


class SessionCPU:
    """CPU seconds of this process's descendants (the Ray session), less the ones in ``exclude``."""

    def __init__(self, exclude: set[int]) -> None:
        self.exclude = exclude
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        table = _proc_table()
        ours = {os.getpid()}
        changed = True
        while changed:
            changed = False
            for pid, (ppid, _) in table.items():
                if ppid in ours and pid not in ours and pid not in self.exclude:
                    ours.add(pid)
                    changed = True
        ours.discard(os.getpid())
        for pid in ours:
            self.seen[pid] = max(self.seen.get(pid, 0.0), table[pid][1])

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            self._sample()

    def __enter__(self) -> SessionCPU:
        self._sample()
        self.start = dict(self.seen)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample()

    @property
    def cpu_s(self) -> float:
        return sum(v - self.start.get(pid, 0.0) for pid, v in self.seen.items())


def run_local(df: pd.DataFrame, url: str, concurrency: int) -> tuple[float, float, pd.DataFrame]:
    gc.collect()
    judge = make_judge(url, concurrency)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    out = judge_many(judge, df, concurrency=concurrency, progress=False)
    return time.perf_counter() - wall0, time.process_time() - cpu0, out


def run_ray(ray: Any, df: pd.DataFrame, url: str, concurrency: int, actors: int, batch_size: int,
            server_pid: int | None) -> tuple[float, float, pd.DataFrame]:
    from llm_connect.distributed import grade_dataset

    per_actor = max(1, concurrency // actors)
    ds = ray.data.from_pandas(df)
    factory = functools.partial(make_judge, url, per_actor)
    with SessionCPU(exclude={server_pid} if server_pid else set()) as cpu:
        cpu_driver0, wall0 = time.process_time(), time.perf_counter()
        out = grade_dataset(ds, factory, num_actors=actors, concurrency=per_actor, batch_size=batch_size).to_pandas()
        wall = time.perf_counter() - wall0
        driver = time.process_time() - cpu_driver0
    return wall, cpu.cpu_s + driver, out


def limiter_rate(ray: Any, calls: int = 2_000) -> None:
    """Round trips a second to the shared limiter from one caller, one at a time (what bounds the cluster's pace)."""
    from llm_connect.distributed import RateLimit
    from llm_connect.distributed._rate_limit import Schedule

    limiter = ray.remote(num_cpus=0)(Schedule).remote()
    ray.get(limiter.grant.remote(0.0))  # started
    t0 = time.perf_counter()
    for _ in range(calls):
        ray.get(limiter.grant.remote(0.0))
    per_s = calls / (time.perf_counter() - t0)
    block = RateLimit(requests_per_minute=1e9).block_requests()
    print(f"shared limiter: {per_s:,.0f} round trips/s from one caller ({1e6 / per_s:.0f} us each), "
          f"x {block} requests a block = {per_s * block:,.0f} requests/s")


def ledger_rates(n: int, batch: int) -> None:
    from llm_connect import QualityLedger, QualityObservation

    try:
        from llm_connect.quality import ParquetLedger  # type: ignore[attr-defined]
    except ImportError:
        ParquetLedger = None
    obs = [QualityObservation(task_type="qa", adapter_id="loopback", model_id="m", cost_usd=0.0,
                              quality_score=(i % 1000) / 1000, latency_ms=1.0, tokens_in=10, tokens_out=5,
                              tags={"grader_id": "llm-judge", "item_id": i, "run_id": "bench"})
           for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        ledgers: list[tuple[str, Any]] = [("QualityLedger", QualityLedger(Path(tmp) / "l.jsonl"))]
        if ParquetLedger is not None:
            ledgers.append(("ParquetLedger", ParquetLedger(Path(tmp) / "parquet")))
        else:
            print("ParquetLedger: not in llm_connect.quality yet; QualityLedger only")
        for name, ledger in ledgers:
            t0 = time.perf_counter()
            for k in range(0, n, batch):
                ledger.extend(obs[k:k + batch])
            append = time.perf_counter() - t0
            t0 = time.perf_counter()
            got = len(ledger.read_all())
            read = time.perf_counter() - t0
            print(f"{name:14s} extend in batches of {batch}: {n / append:10,.0f} obs/s   "
                  f"read_all: {got / read:10,.0f} obs/s ({got:,} read)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=256, help="judgments in flight, in total")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=2_000)
    parser.add_argument("--ledger", action="store_true", help="also measure the ledgers' append/read rates")
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()

    import ray
    import ray.data

    df = make_items(args.n)
    floor = args.n * args.latency / args.concurrency
    print(f"{args.n:,} judgments, latency {args.latency * 1000:.0f} ms, {args.concurrency} in flight "
          f"(floor {floor:.1f} s); Ray: {args.actors} actors x {args.concurrency // args.actors}, "
          f"batch_size {args.batch_size}, ray {ray.__version__}, {os.cpu_count()} CPUs")
    with LoopbackServer(mode="process", latency_s=args.latency) as server:
        server_pid = server._process.pid if server._process is not None else None
        local_wall = None
        if not args.skip_local:
            local_wall, local_cpu, local = run_local(df, server.base_url, args.concurrency)
            print(f"judge_many      wall {local_wall:7.1f} s  ratio to floor {local_wall / floor:5.2f}  "
                  f"CPU {local_cpu * 1000 / args.n:5.2f} ms/judgment  ({(local['status'] == 'scored').sum():,} scored)")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            ray_wall, ray_cpu, out = run_ray(ray, df, server.base_url, args.concurrency, args.actors,
                                             args.batch_size, server_pid)
            limiter_rate(ray)
        finally:
            ray.shutdown()
        print(f"grade_dataset   wall {ray_wall:7.1f} s  ratio to floor {ray_wall / floor:5.2f}  "
              f"CPU {ray_cpu * 1000 / args.n:5.2f} ms/judgment  ({(out['status'] == 'scored').sum():,} scored, "
              f"{len(out):,} rows, ids unique: {out['id'].is_unique})")
        if local_wall is not None:
            print(f"Ray overhead: grade_dataset / judge_many wall = {ray_wall / local_wall:.2f}x (target <= 1.3x)")
    if args.ledger:
        ledger_rates(min(args.n, 100_000), args.batch_size)


if __name__ == "__main__":
    main()
