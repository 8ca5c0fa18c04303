"""How fast ``paired_frame`` joins a judge's scores with human labels, against ``ledger_frame`` on the same file.

Writes a ledger of ``--lines`` observations (default 1,000,000): a judge's
scores on every (item, adapter) of one task type, and human labels (one or two
annotators each) on a ``--labelled`` share of them, as ``record_labels``
writes them, plus observations of other task types and graders that
``paired_frame`` must skip. Then times ``ledger_frame`` (the read) and
``paired_frame`` (read, filter, group, join) on it, best of ``--repeat`` runs,
and prints both and their ratio. The target (issue 13) is a ratio of at most 2.

    python benchmarks/paired.py [--lines N] [--labelled SHARE] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frames import best_of  # the same timing helper as the ledger_frame benchmark


def write_ledger(path: Path, lines: int, *, labelled: float, seed: int = 0) -> dict[str, int]:
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    adapters = [("openai", "gpt-4o-mini"), ("local", "smollm2-135m-instruct"), ("anthropic", "claude-3-haiku")]
    counts = {"judge": 0, "human": 0, "other": 0}
    with open(path, "w", encoding="utf-8") as f:
        i = 0
        item = 0
        while i < lines:
            adapter, model = adapters[item % len(adapters)]
            base = {"adapter_id": adapter, "model_id": model, "cost_usd": 0.0, "latency_ms": 0.0,
                    "tokens_in": 0, "tokens_out": 0, "baseline_adapter_id": None}
            if item % 10 == 9:  # another task type, graded by another judge: skipped by the filter
                records = [{**base, "task_type": "summarise", "quality_score": rng.random(),
                            "tags": {"grader_id": "exact-match", "item_id": str(item)}}]
                counts["other"] += 1
            else:
                truth = rng.random() < 0.7
                score = min(1.0, max(0.0, (0.8 if truth else 0.3) + rng.gauss(0, 0.15)))
                records = [{**base, "task_type": "qa", "quality_score": score, "cost_usd": rng.random() / 1000,
                            "tags": {"grader_id": "llm-judge", "rubric_hash": "abc123", "item_id": str(item)}}]
                counts["judge"] += 1
                if rng.random() < labelled:
                    for annotator in ("ann-1", "ann-2")[: rng.choice((1, 2))]:
                        label = float(truth if rng.random() < 0.9 else not truth)
                        records.append({**base, "task_type": "qa", "quality_score": label,
                                        "tags": {"grader_id": "human", "annotator": annotator,
                                                 "item_id": str(item)}})
                        counts["human"] += 1
            for record in records[: lines - i]:
                record["recorded_at"] = (start + timedelta(seconds=i)).isoformat()
                f.write(json.dumps(record, separators=(",", ":")) + "\n")
                i += 1
            item += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    from llm_connect.frames import ledger_frame, paired_frame

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--labelled", type=float, default=0.1, help="share of judged items with human labels")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        t = time.perf_counter()
        counts = write_ledger(path, args.lines, labelled=args.labelled)
        print(f"wrote {args.lines:,} lines ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f}s: "
              f"{counts['judge']:,} judge scores, {counts['human']:,} human labels, {counts['other']:,} others")
        t_ledger, df = best_of(args.repeat, lambda: ledger_frame(path))
        print(f"ledger_frame:               {t_ledger:7.2f}s  ({len(df):,} rows)")
        del df
        t_paired, paired = best_of(args.repeat, lambda: paired_frame(path, "qa", grader_id="llm-judge"))
        labelled = int(paired["human"].notna().sum())
        print(f"paired_frame(grader_id=llm-judge): {t_paired:7.2f}s  ({len(paired):,} rows, {labelled:,} labelled)")
        print(f"ratio paired_frame / ledger_frame: {t_paired / t_ledger:.2f}  (target <= 2)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
