"""``llm-connect ledger stats``: what a quality ledger holds, and what routing would decide."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from .._textsafe import safe_text
from ._common import MAX_AGE_DAYS_MAX, UsageError
from ._judges import _limit

# -- ledger stats ------------------------------------------------------------------------------------


def _add_ledger(subparsers: Any) -> None:
    p = subparsers.add_parser("ledger", help="inspect a quality ledger")
    sub = p.add_subparsers(dest="ledger_command", metavar="COMMAND", required=True)
    s = sub.add_parser(
        "stats",
        help="per task type: the routing evidence of every adapter and the adapter routing would pick",
        description="Print, for each task type in LEDGER (or --task-type), the evidence routing decides on "
        "(each adapter: n, mean quality with its bootstrap interval, mean cost and latency, stale or not) "
        "and the cheapest adapter whose quality meets --threshold with confidence.",
    )
    s.add_argument("ledger", metavar="LEDGER", help="a JSON Lines quality ledger")
    s.add_argument("--task-type", metavar="NAME", help="only this task type")
    s.add_argument("--threshold", type=float, default=0.8, help="quality to meet (default: 0.8)")
    s.add_argument("--confidence", type=float, default=0.95, help="bootstrap interval level (default: 0.95)")
    s.add_argument("--min-observations", type=int, default=20, metavar="N", help="fewest observations (default: 20)")
    s.add_argument(
        "--max-age-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="ignore older observations; 0 or less: any age (default: 30)",
    )
    s.add_argument(
        "--recent",
        type=_limit,
        default=200,
        metavar="N",
        help="use the N newest observations per adapter, or 'all' (default: 200)",
    )
    s.add_argument("--grader-id", metavar="ID", help="only this judge (default: each judge in turn, never pooled)")
    s.add_argument(
        "--human",
        metavar="ID",
        help="grader id of human labels (e.g. human): decide on each adapter's PPI++ interval from them",
    )
    s.add_argument(
        "--require-calibrated",
        action="store_true",
        help="refuse (exit 1) a judge whose card (LEDGER.cards.json, from calibrate --ledger) is missing or weak",
    )
    s.add_argument("--min-kappa", type=float, default=0.4, help="kappa lower bound a card needs (default: 0.4)")
    s.set_defaults(func=_run_ledger_stats, _parser=s)


def _safe_decision(decision: Any) -> str:
    """``str(decision)`` with every id and reason from the ledger rendered without control characters."""
    from dataclasses import replace

    evidence = decision.evidence
    if evidence is not None and len(evidence):
        evidence = evidence.copy()
        for column in ("adapter_id", "model_id", "reason"):
            if column in evidence.columns:
                evidence[column] = evidence[column].map(lambda v: safe_text(v, limit=80))
    shown = replace(
        decision,
        adapter_id=None if decision.adapter_id is None else safe_text(decision.adapter_id),
        reason=safe_text(decision.reason, limit=2000),
        evidence=evidence,
    )
    # every field is one line now; escape anything left per line (the table's own newlines stay)
    return "\n".join(safe_text(line) for line in str(shown).split("\n"))


def _run_ledger_stats(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from datetime import timedelta

    from ..quality import QualityLedger
    from ..routing import RoutingPolicy, route

    days = args.max_age_days
    if not math.isfinite(days) or days > MAX_AGE_DAYS_MAX:
        raise UsageError(
            f"--max-age-days must be a number of days up to {MAX_AGE_DAYS_MAX} (0 or less: any age), got {days}"
        )
    path = Path(args.ledger)
    if not path.exists():
        raise UsageError(f"no ledger at {str(path)!r}")
    if path.is_dir():
        raise UsageError(f"cannot read the ledger {str(path)!r}: it is a directory")
    if not path.is_file():
        raise UsageError(f"cannot read the ledger {str(path)!r}: not a regular file")
    policy = RoutingPolicy(
        threshold=args.threshold,
        confidence=args.confidence,
        min_observations=args.min_observations,
        max_age=timedelta(days=days) if days > 0 else None,
        recent=args.recent,
    )
    ledger = QualityLedger(path)
    try:
        observations = list(ledger.iter_observations())
        malformed = ledger.malformed_count()
    except OSError as exc:
        raise UsageError(f"cannot read the ledger {str(path)!r}: {exc.strerror or exc}") from None
    tasks = [args.task_type] if args.task_type else sorted({o.task_type for o in observations})
    print(f"{safe_text(path)}: {len(observations)} observations, {malformed} malformed lines skipped")
    if not tasks:
        print("no observations")
    from ..calibration import JudgeCardRegistry
    from ..errors import UncalibratedJudgeError
    from ..routing import grader_keys

    cards = JudgeCardRegistry.for_ledger(path) if args.require_calibrated else None
    refused = 0
    for task in tasks:
        keys = grader_keys(observations, task, human=args.human)
        if args.grader_id is not None:
            keys = [k for k in keys if k[0] == args.grader_id]
            if not keys:
                print(f"\nno observations of grader {safe_text(args.grader_id)} for task type {safe_text(task)}")
        for key in keys:  # one decision per judge: scores of different judges are never pooled
            chosen = [o for o in observations if o.task_type == task
                      and (grader_keys([o], task)[0] == key or (args.human and o.tags.get("grader_id") == args.human))]
            print()
            try:
                decision = route(chosen, task, policy=policy, human=args.human,
                                 require_calibrated=args.require_calibrated, min_kappa=args.min_kappa, cards=cards)
            except UncalibratedJudgeError as exc:
                refused += 1
                print(f"route {safe_text(task)!r}: refused: {safe_text(str(exc), limit=600)}")
                continue
            print(_safe_decision(decision))
    return 1 if refused else 0
