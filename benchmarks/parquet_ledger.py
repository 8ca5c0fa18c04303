"""ParquetLedger against QualityLedger, in one process: append rates and read rates, with ratios.

Everything runs in a temporary directory, removed at the end (``--keep`` keeps it).

    python benchmarks/parquet_ledger.py [--n 200000] [--appends 2000] [--batch 1000] [--json out.json] [--keep]

Figures (``ratio`` is ParquetLedger / QualityLedger; above 1 means Parquet is faster):

- ``append`` of one observation at a time (``--appends`` calls): a QualityLedger
  takes a file lock and writes one line; a ParquetLedger writes one new file;
- ``extend`` in batches of ``--batch`` up to ``--n`` observations (one Parquet
  file per task type and date in each batch);
- reading ``--n`` observations back (``read_all``) from the ledger those batches
  wrote, from the same ledger after ``compact()`` (one file per partition), and
  from a ledger of ``--appends`` single-observation files (what many tiny appends
  leave before a compaction), per observation;
- ``ledger_frame`` over each, ``mean_quality`` (a ParquetLedger reads one task
  type's partition only) and ``compact()`` itself.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from llm_connect import ParquetLedger, QualityLedger, QualityObservation
from llm_connect.frames import ledger_frame

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
        recorded_at=START + timedelta(seconds=i),  # about 2.3 days of observations per 200k
        tags={"item_id": f"item-{i}", "grader_id": "llm-judge", "rubric_hash": "r1", "run_id": "bench"},
    )


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--appends", type=int, default=2_000)
    p.add_argument("--batch", type=int, default=1_000)
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="pqledger-bench-"))
    rows: list[tuple[str, float, float]] = []  # (what, QualityLedger per second, ParquetLedger per second)
    try:
        obs = [observation(i) for i in range(args.n)]
        single = obs[: args.appends]

        def append_all(ledger: Any) -> None:
            for o in single:
                ledger.append(o)

        jl_one, pq_one = QualityLedger(tmp / "one.jsonl"), ParquetLedger(tmp / "one")
        t_jl, _ = timed(lambda: append_all(jl_one))
        t_pq, _ = timed(lambda: append_all(pq_one))
        rows.append((f"append, 1 observation per call ({args.appends} calls), obs/s", len(single) / t_jl,
                     len(single) / t_pq))

        def extend_all(ledger: Any) -> None:
            for k in range(0, len(obs), args.batch):
                ledger.extend(obs[k : k + args.batch])

        jl, pq = QualityLedger(tmp / "big.jsonl"), ParquetLedger(tmp / "big")
        t_jl, _ = timed(lambda: extend_all(jl))
        t_pq, _ = timed(lambda: extend_all(pq))
        rows.append((f"extend, batches of {args.batch} ({args.n} obs), obs/s", args.n / t_jl, args.n / t_pq))
        n_files = sum(1 for _ in (tmp / "big").rglob("*.parquet"))

        t_jl, got_jl = timed(jl.read_all)
        t_pq, got_pq = timed(pq.read_all)
        assert len(got_jl) == len(got_pq) == args.n
        rows.append((f"read_all, {args.n} obs ({n_files} Parquet files), obs/s", args.n / t_jl, args.n / t_pq))
        t_jl, _ = timed(lambda: ledger_frame(jl))
        t_pq, _ = timed(lambda: ledger_frame(pq))
        rows.append((f"ledger_frame, {args.n} obs ({n_files} files), obs/s", args.n / t_jl, args.n / t_pq))
        t_jl, m_jl = timed(lambda: jl.mean_quality("qa"))
        t_pq, m_pq = timed(lambda: pq.mean_quality("qa"))
        assert m_jl is not None and m_pq is not None and abs(m_jl - m_pq) < 1e-9
        rows.append((f"mean_quality of 1 of 4 task types, {args.n} obs, obs/s", args.n / t_jl, args.n / t_pq))

        t_compact, replaced = timed(pq.compact)
        n_after = sum(1 for _ in (tmp / "big").rglob("*.parquet"))
        t_pq, got = timed(pq.read_all)
        assert len(got) == args.n
        t_jl, _ = timed(jl.read_all)
        rows.append((f"read_all after compact() ({n_after} files), obs/s", args.n / t_jl, args.n / t_pq))

        t_jl, _ = timed(jl_one.read_all)
        t_pq, _ = timed(pq_one.read_all)
        rows.append((f"read_all of {args.appends} single-observation files, obs/s", len(single) / t_jl,
                     len(single) / t_pq))

        print(f"# ParquetLedger vs QualityLedger ({sys.platform}, one process)\n")
        print("| figure | QualityLedger | ParquetLedger | ratio (Parquet / JSONL) |")
        print("|---|---:|---:|---:|")
        for what, a, b in rows:
            print(f"| {what} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |")
        print(f"\ncompact(): {replaced} files -> {n_after} in {t_compact:.2f} s ({args.n / t_compact:,.0f} obs/s)")
        if args.json:
            Path(args.json).write_text(json.dumps({
                "rows": [{"figure": w, "quality_ledger_per_s": a, "parquet_ledger_per_s": b, "ratio": b / a}
                         for w, a, b in rows],
                "compact_s": t_compact, "files_before": n_files, "files_after": n_after,
            }, indent=2))
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
