"""How fast ``ledger_frame`` loads a big ledger, against ``pandas.read_json(lines=True)``.

Writes a ledger of ``--lines`` observations (default 1,000,000) to a temporary
directory, then times both readers on the same file (best of ``--repeat`` runs)
and prints the times and their ratio. The target is a ratio of at most 2.

    python benchmarks/frames.py [--lines N] [--repeat R] [--malformed K] [--mixed-tags]

``--malformed K`` scatters K malformed lines through the file (they are skipped
and counted); ``--mixed-tags`` gives rows different tag keys, which sends the
``tags="dict"`` reader down its slow path.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


def write_ledger(path: Path, lines: int, *, malformed: int = 0, mixed_tags: bool = False, seed: int = 0) -> None:
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    bad_at = set(rng.sample(range(lines), malformed)) if malformed else set()
    tasks = ["qa", "summarise", "code", "extract"]
    adapters = [("openai", "gpt-4o-mini"), ("local", "smollm2-135m-instruct"), ("anthropic", "claude-3-haiku")]
    with open(path, "w", encoding="utf-8") as f:
        for i in range(lines):
            if i in bad_at:
                f.write('{"task_type": "qa", "quality_score": "high"}\n')
                continue
            adapter, model = adapters[i % len(adapters)]
            tags: dict[str, object] = {"grader_id": "llm-judge", "item_id": i, "run": f"run-{i % 7}"}
            if mixed_tags and i % 3 == 0:
                tags = {"grader_id": "exact-match", "flag": True}
            obs = {
                "task_type": tasks[i % len(tasks)],
                "adapter_id": adapter,
                "model_id": model,
                "cost_usd": round(rng.random() / 1000, 8),
                "quality_score": rng.random(),
                "latency_ms": rng.random() * 2000,
                "tokens_in": rng.randint(10, 2000),
                "tokens_out": rng.randint(1, 800),
                "baseline_adapter_id": "openai" if i % 2 else None,
                "recorded_at": (start + timedelta(seconds=i, microseconds=rng.randint(0, 999_999))).isoformat(),
                "tags": tags,
            }
            f.write(json.dumps(obs, separators=(",", ":")) + "\n")


def best_of(repeat: int, fn) -> tuple[float, object]:
    best = float("inf")
    result = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from llm_connect.frames import ledger_frame

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--malformed", type=int, default=0)
    parser.add_argument("--mixed-tags", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        t = time.perf_counter()
        write_ledger(path, args.lines, malformed=args.malformed, mixed_tags=args.mixed_tags)
        size_mb = path.stat().st_size / 1e6
        print(f"wrote {args.lines:,} lines ({size_mb:.0f} MB) in {time.perf_counter() - t:.1f}s")

        t_pandas, raw = best_of(args.repeat, lambda: pd.read_json(path, lines=True))
        print(f"pandas.read_json(lines=True):  {t_pandas:7.2f}s  ({len(raw):,} rows, no validation)")
        del raw
        t_expand, df = best_of(args.repeat, lambda: ledger_frame(path))
        print(f"ledger_frame(tags='expand'):   {t_expand:7.2f}s  ({len(df):,} rows, "
              f"{df.attrs['malformed_count']} malformed)")
        del df
        t_dict, df = best_of(args.repeat, lambda: ledger_frame(path, tags="dict"))
        print(f"ledger_frame(tags='dict'):     {t_dict:7.2f}s  ({len(df):,} rows)")
        del df
        print(f"ratio expand / read_json: {t_expand / t_pandas:.2f}  (target <= 2)")
        print(f"ratio dict   / read_json: {t_dict / t_pandas:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
