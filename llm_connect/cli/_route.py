"""``llm-connect route``: the adapter :func:`~llm_connect.routing.route` picks for a task type, with its evidence
(per adapter: the method behind the figures -- ppi++, wilson or bootstrap --, n, n_labelled, the interval)."""

from __future__ import annotations

import argparse
import math
from datetime import timedelta
from typing import Any

from .._textsafe import safe_text
from ..stats._format import fmt
from ._common import MAX_AGE_DAYS_MAX, UsageError, confidence_option
from ._judges import _limit

_ROUTE_HELP = """\
Decide which adapter (candidate model) to use for TASK: the cheapest whose
mean quality in LEDGER meets --threshold on the lower end of its interval
(--confidence), over at least --min-observations recent observations of one
judge (scores of several judges are never pooled: --grader-id chooses).

Where TASK holds human labels (grader id human, e.g. from llm-connect grade
--human COLUMN), the interval is PPI++ from the judge's scores and the labels
(method ppi++), valid however biased the judge is; otherwise it trusts the
judge's raw scores: Wilson (all scores 0 or 1) or a bootstrap of the mean.
Every interval of a 0..1 quality is shown within 0..1.

Observations that are turns of one conversation (tag conversation_id, as
grade --per-turn records them) are not independent: the interval then
resamples whole conversations or is cluster-robust (--cluster TAG chooses
another tag, --cluster none takes them as independent); the output says which.

Prints the decision, then one row per adapter: method, n (judgments used),
n_labelled (human labels used), n_unjudged (labelled items the judge did not
score, e.g. a selective judge's abstentions: estimated from the labels alone),
mean quality and its interval, the clusters it rests on, mean cost and
latency, eligible, and why.

Exit status: 0 the decision was made (with or without an adapter; --require-
adapter makes no adapter exit 1); 1 refused (--require-calibrated and the
judge's card is missing or weak); 2 a user error.
"""


def _add_route(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "route",
        help="the adapter routing picks for a task type, and the evidence behind it",
        description=_ROUTE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("ledger", metavar="LEDGER",
                   help="a JSON Lines quality ledger file, or a Parquet ledger's root (a directory or a URI)")
    p.add_argument("task", metavar="TASK", help="the task type to route")
    p.add_argument("--threshold", type=float, required=True, metavar="X", help="the quality to meet, in 0..1")
    p.add_argument("--confidence", type=confidence_option, default=0.95, help="interval level (default: 0.95)")
    p.add_argument("--min-observations", type=int, default=20, metavar="N", help="fewest observations (default: 20)")
    p.add_argument("--max-age-days", type=float, default=30.0, metavar="DAYS",
                   help="ignore older observations; 0 or less: any age (default: 30)")
    p.add_argument("--recent", type=_limit, default=200, metavar="N",
                   help="use the N newest observations per adapter, or 'all' (default: 200)")
    p.add_argument("--grader-id", metavar="ID", help="the judge whose scores to use (needed when TASK holds several)")
    p.add_argument("--rubric-hash", metavar="HASH", help="the judge's rubric, when it was used with several")
    p.add_argument("--human", metavar="ID", default=None,
                   help="grader id of human labels (default: human, when TASK holds some)")
    p.add_argument("--no-human", action="store_true", help="decide on the judge's raw scores, ignoring human labels")
    p.add_argument("--require-calibrated", action="store_true",
                   help="refuse (exit 1) a judge whose card (LEDGER.cards.json, from calibrate --ledger) is missing "
                   "or weak")
    p.add_argument("--min-kappa", type=float, default=0.4, help="kappa lower bound a card needs (default: 0.4)")
    p.add_argument("--require-adapter", action="store_true", help="exit 1 when no adapter meets the threshold")
    p.add_argument("--cluster", metavar="TAG", default="auto",
                   help="the tag naming each observation's conversation: its turns are resampled together; 'none': "
                        "independent observations (default: auto, conversation_id when the ledger has it)")
    p.set_defaults(func=_run_route, _parser=p)


def _interval(low: Any, high: Any) -> str:
    """``[0.62, 0.91]`` at the precision of the other figures, clipped to 0..1 (a quality's range)."""
    try:
        lo, hi = float(low), float(high)
    except (TypeError, ValueError):
        return "—"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "—"
    lo, hi = min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)
    return f"[{lo:.3f}, {hi:.3f}]"


def evidence_lines(evidence: Any, confidence: float) -> list[tuple[Any, ...]]:
    """The evidence table as text rows (a header first), every field from the ledger made safe."""
    rows: list[tuple[Any, ...]] = [("adapter", "method", "n", "n_labelled", "n_unjudged", "mean",
                                    f"{confidence:.0%} interval", "clusters", "mean cost", "mean latency", "eligible",
                                    "reason")]
    for r in evidence.itertuples(index=False):
        mean = float(r.mean_quality) if r.mean_quality is not None else math.nan
        rows.append((
            safe_text(r.adapter_id, limit=60),
            safe_text(r.method or "—"),
            int(r.n),
            int(r.n_labelled),
            int(r.n_unjudged),
            "—" if not math.isfinite(mean) else f"{min(max(mean, 0.0), 1.0):.3f}",
            _interval(r.quality_low, r.quality_high),
            _clusters(r.cluster, r.n_clusters),
            "—" if not math.isfinite(float(r.mean_cost_usd)) else f"${float(r.mean_cost_usd):.6f}",
            "—" if not math.isfinite(float(r.mean_latency_ms)) else f"{fmt(float(r.mean_latency_ms))} ms",
            "yes" if r.eligible else "no",
            safe_text(r.reason, limit=200),
        ))
    return rows


def _clusters(tag: Any, n_clusters: Any) -> str:
    """How many clusters (conversations) an interval rests on: ``30`` or ``—`` (independent observations)."""
    import pandas as pd

    if not isinstance(tag, str) or n_clusters is None or bool(pd.isna(n_clusters)):
        return "—"
    return str(int(n_clusters))


def _print_table(rows: list[tuple[Any, ...]]) -> None:
    cells = [tuple(str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for r in cells:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _run_route(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..errors import UncalibratedJudgeError, ValidationError
    from ..frames import HUMAN_GRADER_ID
    from ..routing import RoutingPolicy, grader_key, label_grader_ids, route
    from ._ledger import _open_for_reading, _read

    if not math.isfinite(args.threshold) or not 0.0 <= args.threshold <= 1.0:
        raise UsageError(f"--threshold must be a quality in 0..1, got {args.threshold}")
    days = args.max_age_days
    if not math.isfinite(days) or days > MAX_AGE_DAYS_MAX:
        raise UsageError(f"--max-age-days must be a number of days up to {MAX_AGE_DAYS_MAX}, got {days}")
    if args.min_observations < 1:
        raise UsageError(f"--min-observations must be >= 1, got {args.min_observations}")
    if not args.task.strip():
        raise UsageError("TASK is empty; name a task type the ledger holds")
    ledger = _open_for_reading(args.ledger)
    observations, _ = _read(ledger, args.ledger)
    mine = [o for o in observations if o.task_type == args.task]
    if not mine:
        tasks = sorted({o.task_type for o in observations})
        shown = ", ".join(repr(safe_text(t, limit=40)) for t in tasks[:20]) or "none"
        raise UsageError(f"no observations for task type {safe_text(args.task)!r} in {safe_text(args.ledger)}; "
                         f"its task types: {shown}")
    labels_id = args.human or HUMAN_GRADER_ID
    n_labels = _distinct_labels(mine, labels_id)
    human = None if args.no_human or not (n_labels or args.human) else labels_id
    if human is None:  # labels (and the Labeller's markers) are never a judge's scores
        people = label_grader_ids(labels_id)
        mine = [o for o in mine if grader_key(o)[0] not in people]
    if not args.cluster.strip():
        raise UsageError("--cluster is empty; name the tag of each observation's conversation, or 'none'")
    policy = RoutingPolicy(threshold=args.threshold, confidence=args.confidence,
                           min_observations=args.min_observations,
                           max_age=timedelta(days=days) if days > 0 else None, recent=args.recent,
                           cluster=None if args.cluster == "none" else args.cluster)
    try:
        decision = route(mine, args.task, policy=policy, grader_id=args.grader_id, rubric_hash=args.rubric_hash,
                         human=human, require_calibrated=args.require_calibrated, min_kappa=args.min_kappa,
                         cards=_cards(ledger) if args.require_calibrated else None)
    except UncalibratedJudgeError as exc:
        print(f"route {safe_text(args.task)!r}: refused: {safe_text(str(exc), limit=600)}")
        return 1
    except ValidationError as exc:  # several judges: name the options, not the keywords
        raise UsageError(str(exc).replace("grader_id=...", "--grader-id ID").replace("rubric_hash=...",
                                                                                     "--rubric-hash HASH")) from None
    judge = f" [judge {safe_text(decision.grader_id)}]" if decision.grader_id else ""
    print(f"route {safe_text(args.task)!r}{judge} -> {safe_text(decision.adapter_id or 'no adapter')}: "
          f"{safe_text(decision.reason, limit=2000)}")
    basis = (f"PPI++ with {n_labels} human label(s) (grader id {safe_text(labels_id)})" if human is not None
             else "the judge's raw scores (Wilson for 0/1 scores, else a bootstrap of the mean)"
             + (f"; {n_labels} human label(s) not used (--no-human)" if n_labels and args.no_human else ""))
    print(f"decided on the lower end of each adapter's {args.confidence:.0%} interval against "
          f"{args.threshold:g}, n >= {args.min_observations}; intervals from {basis}")
    if decision.evidence is not None and len(decision.evidence):
        print(_clustering(decision.evidence))
        unjudged = int(decision.evidence["n_unjudged"].sum())
        if unjudged:
            print(f"{unjudged} labelled item(s) the judge did not score (n_unjudged) are estimated from people's "
                  "labels alone, a stratum of their own")
        _print_table(evidence_lines(decision.evidence, args.confidence))
    if args.require_adapter and not decision:
        return 1
    return 0


def _clustering(evidence: Any) -> str:
    """Which clustering the intervals used, in words."""
    tags = sorted({t for t in evidence["cluster"] if isinstance(t, str)})
    if not tags:
        return "observations taken as independent (no conversation tag; --cluster TAG names one)"
    return (f"clustered by tag {', '.join(repr(safe_text(t, limit=60)) for t in tags)}: the turns of one "
            "conversation count together (column clusters: the conversations each interval rests on)")


def _distinct_labels(observations: list[Any], labels_id: str) -> int:
    """How many labels of grader ``labels_id`` stand: one per item, candidate and annotator (a copy recorded
    twice counts once; a label an undo marker took back not at all), as the ledger records them once."""
    from ..quality._once import record_key
    from ..routing import standing_labels

    keys = {record_key(o) or id(o) for o in standing_labels(observations, labels_id)}
    return len(keys)


def _cards(ledger: Any) -> Any:
    from ..cards import JudgeCardRegistry

    return JudgeCardRegistry.for_ledger(ledger)
