"""How the quality ledger scales: appends (per process, many processes, fsync), reads, queries, prune, frames.

Everything runs in a temporary directory, which is removed at the end (``--keep``
keeps it). Prints one markdown table of figures and ratios; ``--json PATH``
also writes them as JSON.

    python benchmarks/ledger.py [--n 1000000] [--appends 50000] [--procs 4] [--fsync-appends 2000]
                                [--memory-n 200000] [--json out.json] [--keep]

Figures (targets in brackets):

- the cost of one ``filelock.FileLock`` acquire + release, which every append pays
  (the contract's per-call lock), and the append rate it alone would allow;
- ``append`` throughput in one process, without fsync [>= 20,000 obs/s], and per
  process while ``--procs`` processes append to the same ledger at once;
- ``extend`` (one lock for a batch of 1,000);
- ``append`` with ``fsync=True``, and its cost relative to no fsync;
- on a ledger of ``--n`` observations: a full read (``iter_observations``,
  ``read_all``), filtered queries (``by_task_type``, ``mean_quality``,
  ``recent``), ``prune_before`` (removing the oldest 10%), and
  ``llm_connect.frames.ledger_frame`` against ``pandas.read_json(lines=True)`` on
  the same file [ratio <= 2];
- peak memory (tracemalloc) of ``iter_observations`` against ``read_all`` on
  ``--memory-n`` lines: streaming stays flat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llm_connect import QualityLedger, QualityObservation

START = datetime(2025, 1, 1, tzinfo=UTC)
TASKS = ("qa", "summarise", "code", "extract")
ADAPTERS = (("openai:gpt-4o-mini", "gpt-4o-mini"), ("local:smollm2", "smollm2-135m"), ("anthropic:haiku", "haiku"))


def observation(i: int) -> QualityObservation:
    adapter, model = ADAPTERS[i % len(ADAPTERS)]
    return QualityObservation(
        task_type=TASKS[i % len(TASKS)],
        adapter_id=adapter,
        model_id=model,
        cost_usd=(i % 997) * 1e-6,
        quality_score=(i * 7919 % 1000) / 999,
        latency_ms=100.0 + i % 1500,
        tokens_in=50 + i % 2000,
        tokens_out=1 + i % 800,
        baseline_adapter_id="openai:gpt-4o" if i % 2 else None,
        recorded_at=START + timedelta(seconds=i),
        tags={"grader_id": "llm-judge", "item_id": i, "rubric_hash": "3f2a9c0d1e4b5a67"},
    )


_cpu = [0.0]


def timed(fn: Any) -> tuple[float, Any]:
    """Wall seconds of ``fn()`` and its result; the CPU seconds are left in ``cpu()``."""
    t, c = time.perf_counter(), time.process_time()
    result = fn()
    _cpu[0] = time.process_time() - c
    return time.perf_counter() - t, result


def cpu() -> float:
    """CPU seconds of the last ``timed`` call (steadier than wall time on a shared machine)."""
    return _cpu[0]


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []
        self.data: dict[str, float] = {}

    def add(self, key: str, what: str, value: float, unit: str, note: str = "") -> None:
        self.data[key] = value
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"
        self.rows.append((what, f"{shown} {unit}", note))
        print(f"  {what}: {shown} {unit} {note}".rstrip(), flush=True)

    def markdown(self) -> str:
        lines = ["| measure | figure | note |", "|---|---:|---|"]
        lines += [f"| {w} | {v} | {n} |" for w, v, n in self.rows]
        return "\n".join(lines)


# -- appends ------------------------------------------------------------------------------------------


def lock_cost(directory: Path, iterations: int = 20_000) -> tuple[float, float]:
    """Seconds per FileLock acquire+release, and per raw ``fcntl.flock`` on the same file (for scale)."""
    import fcntl

    from filelock import FileLock

    path = directory / "probe.lock"
    lock = FileLock(str(path), thread_local=False)
    lock.acquire()
    lock.release()
    t = time.process_time()
    for _ in range(iterations):
        lock.acquire()
        lock.release()
    filelock_s = (time.process_time() - t) / iterations
    fd = os.open(path, os.O_RDWR)
    try:
        t = time.process_time()
        for _ in range(iterations):
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
        flock_s = (time.process_time() - t) / iterations
    finally:
        os.close(fd)
    return filelock_s, flock_s


def append_rate(path: Path, n: int, *, fsync: bool = False) -> tuple[float, float]:
    """Appends per wall second and per CPU second."""
    batch = [observation(i) for i in range(n)]  # built first: the figure is the append alone
    ledger = QualityLedger(path, fsync=fsync)
    ledger.append(batch[0])
    wall, _ = timed(lambda: [ledger.append(o) for o in batch[1:]])
    return (n - 1) / wall, (n - 1) / cpu()


WORKER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[4])
    from ledger import observation
    from llm_connect import QualityLedger
    path, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = [observation(w * n + i) for i in range(n)]
    ledger = QualityLedger(path)
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    t, c = time.perf_counter(), time.process_time()
    for o in batch:
        ledger.append(o)
    print(n / (time.perf_counter() - t), n / (time.process_time() - c), flush=True)
    """
)


def multi_process_rates(path: Path, procs: int, n_each: int) -> list[tuple[float, ...]]:
    """(appends per wall second, per CPU second) of each of ``procs`` processes appending at once."""
    here = str(Path(__file__).resolve().parent)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(w), str(n_each), here],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(procs)
    ]
    for p in workers:  # start them together
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in workers:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    rates = []
    for p in workers:
        out, _ = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"append worker failed with exit code {p.returncode}")
        rates.append(tuple(map(float, out.strip().splitlines()[-1].split())))
    return rates


def build(path: Path, n: int, batch: int = 10_000) -> float:
    """Write ``n`` observations with ``extend`` in batches; returns observations per second."""
    ledger = QualityLedger(path)
    t = time.perf_counter()
    for start in range(0, n, batch):
        ledger.extend([observation(i) for i in range(start, min(n, start + batch))])
    return n / (time.perf_counter() - t)


# -- memory ----------------------------------------------------------------------------------------


def memory_peaks(path: Path) -> tuple[int, int]:
    ledger = QualityLedger(path)
    tracemalloc.start()
    try:
        sum(1 for _ in ledger.iter_observations())
        _, iter_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        everything = ledger.read_all()
        _, all_peak = tracemalloc.get_traced_memory()
        del everything
    finally:
        tracemalloc.stop()
    return iter_peak, all_peak


# -- main ------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="observations in the big ledger (default 1,000,000)")
    parser.add_argument("--appends", type=int, default=50_000, help="appends timed in one process (default 50,000)")
    parser.add_argument("--procs", type=int, default=4, help="processes appending at once (default 4)")
    parser.add_argument("--fsync-appends", type=int, default=2_000, help="appends timed with fsync=True")
    parser.add_argument("--memory-n", type=int, default=200_000, help="lines for the memory comparison")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    import filelock

    table = Table()
    tmp = Path(tempfile.mkdtemp(prefix="llm-connect-ledger-bench-"))
    print(
        f"# ledger benchmark: n={args.n:,}, python {sys.version.split()[0]}, filelock {filelock.__version__}, "
        f"{os.cpu_count()} CPUs, in {tmp}",
        flush=True,
    )
    try:
        print("appends", flush=True)
        filelock_s, flock_s = lock_cost(tmp)
        table.add(
            "filelock_us",
            "FileLock acquire + release (CPU)",
            filelock_s * 1e6,
            "µs",
            f"alone allows {1 / filelock_s:,.0f} appends per CPU-second",
        )
        table.add(
            "flock_us", "raw fcntl.flock on the same file (CPU)", flock_s * 1e6, "µs", "for scale"
        )
        rate, rate_cpu = append_rate(tmp / "append.jsonl", args.appends)
        table.add(
            "append_per_s",
            f"append, 1 process, {args.appends:,} obs",
            rate,
            "obs/s",
            f"{rate_cpu:,.0f} per CPU-second; target >= 20,000",
        )
        table.data["append_per_cpu_s"] = rate_cpu
        n_each = max(1, args.appends // args.procs)
        rates = multi_process_rates(tmp / "multi.jsonl", args.procs, n_each)
        multi = QualityLedger(tmp / "multi.jsonl")
        lost = args.procs * n_each - len(multi.read_all())
        slowest = min(r[0] for r in rates)
        table.add(
            "append_per_s_per_proc_contended",
            f"append, per process, {args.procs} processes at once",
            slowest,
            "obs/s",
            f"slowest; aggregate {sum(r[0] for r in rates):,.0f} obs/s; "
            f"lost {lost}, malformed {multi.malformed_count()}",
        )
        ext = QualityLedger(tmp / "extend2.jsonl")
        batches = [[observation(k * 1000 + i) for i in range(1000)] for k in range(20)]
        t, _ = timed(lambda: [ext.extend(b) for b in batches])
        table.add("extend_per_s", "extend, batches of 1,000", 20_000 / t, "obs/s", f"{20_000 / cpu():,.0f} per CPU-s")
        fsync_rate, _ = append_rate(tmp / "fsync.jsonl", args.fsync_appends, fsync=True)
        table.add(
            "append_fsync_per_s",
            f"append with fsync=True, {args.fsync_appends:,} obs",
            fsync_rate,
            "obs/s",
            f"{1000 / fsync_rate:.2f} ms each; {rate / fsync_rate:,.1f}x slower than without",
        )

        print(f"a ledger of {args.n:,} observations", flush=True)
        big = tmp / "big.jsonl"
        table.add(
            "build_per_s",
            f"write {args.n:,} obs (built and extended in batches of 10,000)",
            build(big, args.n),
            "obs/s",
            f"{big.stat().st_size / 1e6:,.0f} MB",
        )
        ledger = QualityLedger(big)
        t, count = timed(lambda: sum(1 for _ in ledger.iter_observations()))
        assert count == args.n
        table.add(
            "iter_s",
            "full read, iter_observations()",
            t,
            "s",
            f"{args.n / t:,.0f} obs/s; {args.n / cpu():,.0f} per CPU-s",
        )
        t, everything = timed(ledger.read_all)
        table.add("read_all_s", "full read, read_all()", t, "s", f"cpu {cpu():.1f} s")
        del everything
        t, qa = timed(lambda: ledger.by_task_type("qa"))
        table.add(
            "by_task_type_s", "filtered query, by_task_type('qa')", t, "s", f"{len(qa):,} rows; cpu {cpu():.1f} s"
        )
        del qa
        t, mean = timed(lambda: ledger.mean_quality("qa", adapter_id=ADAPTERS[0][0], min_observations=10))
        table.add(
            "mean_quality_s",
            "filtered query, mean_quality('qa', adapter_id=...)",
            t,
            "s",
            f"mean {mean:.3f}; cpu {cpu():.1f} s",
        )
        t, recent = timed(lambda: ledger.recent(10, task_type="code"))
        table.add(
            "recent_s", "filtered query, recent(10, task_type='code')", t, "s", f"{len(recent)} rows; cpu {cpu():.1f} s"
        )
        t, bad = timed(ledger.malformed_count)
        table.add("malformed_count_s", "malformed_count()", t, "s", f"{bad} malformed; cpu {cpu():.1f} s")

        frame_path = tmp / "frame.jsonl"
        shutil.copyfile(big, frame_path)  # before the prune, so the frame and pandas read the full file
        cutoff = START + timedelta(seconds=args.n // 10)
        t, removed = timed(lambda: ledger.prune_before(cutoff))
        table.add("prune_s", "prune_before (removes the oldest 10%)", t, "s", f"removed {removed:,}; cpu {cpu():.1f} s")
        big.unlink()

        import pandas as pd

        t_pd, df_pd = timed(lambda: pd.read_json(frame_path, lines=True))
        cpu_pd = cpu()
        table.add(
            "read_json_s",
            "pandas.read_json(lines=True), same file",
            t_pd,
            "s",
            f"{len(df_pd):,} rows; cpu {cpu_pd:.1f} s",
        )
        del df_pd
        try:
            from llm_connect.frames import ledger_frame
        except ImportError:
            print("  ledger_frame: llm_connect.frames.ledger_frame is not available; not measured", flush=True)
        else:
            t_lf, df_lf = timed(lambda: ledger_frame(frame_path))
            cpu_lf = cpu()
            assert len(df_lf) == args.n
            table.add("ledger_frame_s", "ledger_frame(path)", t_lf, "s", f"{len(df_lf):,} rows; cpu {cpu_lf:.1f} s")
            del df_lf
            table.add(
                "ledger_frame_ratio",
                "ledger_frame / read_json",
                t_lf / t_pd,
                "x",
                f"CPU-time ratio {cpu_lf / cpu_pd:.2f}; target <= 2",
            )
        frame_path.unlink()

        m = min(args.n, args.memory_n)
        mem_path = tmp / "memory.jsonl"
        build(mem_path, m)
        iter_peak, all_peak = memory_peaks(mem_path)
        table.add("iter_peak_kb", f"peak memory, iter_observations(), {m:,} lines", iter_peak / 1024, "KiB")
        table.add(
            "read_all_peak_mb",
            f"peak memory, read_all(), {m:,} lines",
            all_peak / 1024**2,
            "MiB",
            f"{all_peak / iter_peak:,.0f}x the streaming peak",
        )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(table.markdown())
    if args.json:
        Path(args.json).write_text(json.dumps(table.data, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
