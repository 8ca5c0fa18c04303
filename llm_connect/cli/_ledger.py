"""``llm-connect ledger stats``: what a quality ledger holds, and what routing would decide;
``llm-connect ledger convert``: move a ledger between JSON Lines and Parquet.

A LEDGER argument is a Parquet ledger's root when it is a URI (``s3://bucket/ledger``,
``file:///abs/dir``) or an existing directory, and a JSON Lines file otherwise; for
``convert``'s TARGET that does not exist yet, a name ending in ``.jsonl``/``.ndjson``/``.json``
is a JSON Lines file and any other a Parquet root.
"""

from __future__ import annotations

import argparse
import math
import os
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
    s.add_argument(
        "ledger", metavar="LEDGER",
        help="a JSON Lines quality ledger file, or a Parquet ledger's root (a directory or a URI such as s3://b/l)",
    )
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
        help="grader id of human labels (default: human). Labels are counted as labels, never as a judge; "
        "where a task type holds some, each adapter's decision rests on its PPI++ interval from them",
    )
    s.add_argument(
        "--no-human",
        action="store_true",
        help="decide on each judge's raw scores alone, ignoring the human labels (they are still no judge)",
    )
    s.add_argument(
        "--require-calibrated",
        action="store_true",
        help="refuse (exit 1) a judge whose card (LEDGER.cards.json, from calibrate --ledger) is missing or weak",
    )
    s.add_argument("--min-kappa", type=float, default=0.4, help="kappa lower bound a card needs (default: 0.4)")
    s.set_defaults(func=_run_ledger_stats, _parser=s)
    c = sub.add_parser(
        "convert",
        help="copy a ledger's observations between JSON Lines and Parquet (either way)",
        description="Copy every valid observation of SOURCE into TARGET: a JSON Lines file into a Parquet "
        "ledger root (a directory or a URI), or back. A directory or URI is a Parquet root; a file a JSON Lines "
        "ledger; a TARGET that does not exist is a JSON Lines file when its name ends in .jsonl, .ndjson or .json "
        "and a Parquet root otherwise. Malformed records are counted and not copied; a Parquet SOURCE is read "
        "with its duplicate (retried) writes once. TARGET must be empty unless --append.",
    )
    c.add_argument("source", metavar="SOURCE", help="the ledger to read")
    c.add_argument("target", metavar="TARGET", help="the ledger to write (created if missing)")
    c.add_argument("--append", action="store_true", help="add to a TARGET that already holds observations")
    c.add_argument(
        "--skip", type=int, default=0, metavar="N",
        help="leave out the first N observations of SOURCE (to go on, with --append, after a conversion that "
        "stopped: it prints the command)",
    )
    c.set_defaults(func=_run_ledger_convert, _parser=c)


def _safe_decision(decision: Any) -> str:
    """``str(decision)`` with every field from the ledger (task type, grader id, rubric hash, adapter and
    model ids, reasons, every text cell of the evidence) rendered without control characters, so no value
    can start a line of its own (a forged decision) or drive the terminal."""
    from dataclasses import replace

    evidence = decision.evidence
    if evidence is not None and len(evidence):
        evidence = evidence.copy()
        for column in evidence.columns:
            if evidence[column].dtype == object or str(evidence[column].dtype) in ("string", "str", "category"):
                evidence[column] = evidence[column].astype(object).map(
                    lambda v: v if v is None or not isinstance(v, str) else safe_text(v, limit=80)
                )

    def shown(value: Any, limit: int = 200) -> Any:
        return None if value is None else safe_text(value, limit=limit)

    safe = replace(
        decision,
        task_type=shown(decision.task_type),
        adapter_id=shown(decision.adapter_id),
        model_id=shown(decision.model_id),
        grader_id=shown(decision.grader_id),
        rubric_hash=shown(decision.rubric_hash),
        reason=safe_text(decision.reason, limit=2000),
        evidence=evidence,
    )
    # every field is one line now; escape anything left per line (the table's own newlines stay)
    return "\n".join(safe_text(line) for line in str(safe).split("\n"))


def _run_ledger_stats(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from datetime import timedelta

    from ..frames import HUMAN_GRADER_ID
    from ..quality import QualityLedger
    from ..routing import RoutingPolicy, grader_key, label_grader_ids, route, standing_labels

    days = args.max_age_days
    if not math.isfinite(days) or days > MAX_AGE_DAYS_MAX:
        raise UsageError(
            f"--max-age-days must be a number of days up to {MAX_AGE_DAYS_MAX} (0 or less: any age), got {days}"
        )
    if args.human is not None and not args.human.strip():
        raise UsageError("--human must name the grader id of human labels (e.g. human)")
    ledger = _open_for_reading(args.ledger)
    path = args.ledger
    policy = RoutingPolicy(
        threshold=args.threshold,
        confidence=args.confidence,
        min_observations=args.min_observations,
        max_age=timedelta(days=days) if days > 0 else None,
        recent=args.recent,
    )
    observations, malformed = _read(ledger, path)
    tasks = [args.task_type] if args.task_type else sorted({o.task_type for o in observations})
    unit = "lines" if isinstance(ledger, QualityLedger) else "files or rows"
    print(f"{safe_text(_shown(ledger, path))}: {len(observations)} observations, {malformed} malformed {unit} skipped")
    if not tasks:
        print("no observations")
    from ..cards import JudgeCardRegistry
    from ..errors import UncalibratedJudgeError

    # Human labels (and the Labeller's skip and undo markers) are never a judge: they are counted as labels
    # and, where a task type holds some, correct each judge's scores (PPI++) unless --no-human.
    labels_id = args.human or HUMAN_GRADER_ID
    people = label_grader_ids(labels_id)
    cards = JudgeCardRegistry.for_ledger(ledger) if args.require_calibrated else None
    refused = 0
    for task in tasks:
        mine = [o for o in observations if o.task_type == task]
        by_key: dict[Any, list[Any]] = {}
        of_people = []
        for o in mine:
            key = grader_key(o)
            if key[0] in people:
                of_people.append(o)
            else:
                by_key.setdefault(key, []).append(o)
        n_labels = len(standing_labels(of_people, labels_id))  # not those the Labeller's undo took back
        human = None if args.no_human or not (n_labels or args.human) else labels_id
        if n_labels:
            use = "not used (--no-human)" if human is None else "each judge's interval is PPI++ from them"
            print(f"\ntask type {safe_text(task)!r}: {n_labels} human labels (grader id {safe_text(labels_id)}), "
                  f"counted as labels, not as a judge; {use}")
        keys = sorted(by_key, key=lambda k: (k[0] or "", k[1] or ""))
        if args.grader_id is not None:
            keys = [k for k in keys if k[0] == args.grader_id]
            if not keys:
                what = " (the grader id of human labels, not a judge)" if args.grader_id in people else ""
                print(f"\nno observations of grader {safe_text(args.grader_id)}{what} for task type {safe_text(task)}")
        for key in keys:  # one decision per judge: scores of different judges are never pooled
            chosen = by_key[key] + (of_people if human is not None else [])
            print()
            try:
                decision = route(chosen, task, policy=policy, human=human,
                                 require_calibrated=args.require_calibrated, min_kappa=args.min_kappa, cards=cards)
            except UncalibratedJudgeError as exc:
                refused += 1
                print(f"route {safe_text(task)!r}: refused: {safe_text(str(exc), limit=600)}")
                continue
            print(_safe_decision(decision))
    return 1 if refused else 0


# -- opening ledgers ---------------------------------------------------------------------------------


def _shown(ledger: Any, given: str) -> str:
    """How a ledger is named in output: as given, or a URI's root with its credentials redacted."""
    return ledger.root if hasattr(ledger, "root") else given


def _open_for_reading(location: str) -> Any:
    """The existing ledger at ``location`` (a Parquet root: a URI or a directory; else a JSON Lines file)."""
    from ..quality import ParquetLedger, QualityLedger
    from ..quality._base import is_parquet_location

    if "://" not in location and Path(location).is_dir() and location.lower().endswith(_JSONL_SUFFIXES):
        raise UsageError(
            f"cannot read the ledger {location!r}: it is a directory (a JSON Lines ledger is a file; a Parquet "
            "ledger's root is a directory of .parquet files, named without .jsonl)"
        )
    if is_parquet_location(location):
        ledger = ParquetLedger(location)
        if "://" not in location:
            return ledger
        try:
            exists = ledger._check_root(*ledger._fs()[:2])
        except NotADirectoryError:
            raise UsageError(f"cannot read the ledger {safe_text(ledger.root)}: it is a file, not a Parquet ledger "
                             "root") from None
        if not exists:
            raise UsageError(f"no ledger at {safe_text(ledger.root)}")
        return ledger
    path = Path(location)
    if not path.exists():
        raise UsageError(f"no ledger at {str(path)!r}")
    if not path.is_file():
        raise UsageError(f"cannot read the ledger {str(path)!r}: not a regular file")
    return QualityLedger(path)


def _read(ledger: Any, given: str) -> tuple[list[Any], int]:
    from ..quality import ParquetLedger

    try:
        if isinstance(ledger, ParquetLedger):
            return ledger.read_with_malformed()
        return list(ledger.iter_observations()), ledger.malformed_count()
    except OSError as exc:
        raise UsageError(f"cannot read the ledger {safe_text(_shown(ledger, given))}: {exc.strerror or exc}") from None


_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_CONVERT_BATCH = 100_000  # observations per extend(): one Parquet file per task type and date in each


def _open_target(location: str) -> Any:
    from ..quality import ParquetLedger, QualityLedger
    from ..quality._base import is_parquet_location

    path = Path(location)
    if is_parquet_location(location) or (not path.exists() and not location.lower().endswith(_JSONL_SUFFIXES)):
        return ParquetLedger(location)
    if path.exists() and not path.is_file():
        raise UsageError(f"cannot write the ledger {str(path)!r}: not a regular file")
    return QualityLedger(path)


def _holds_anything(ledger: Any) -> bool:
    from ..quality import ParquetLedger

    if isinstance(ledger, ParquetLedger):
        try:
            return bool(ledger._list(None))
        except NotADirectoryError:
            raise UsageError(
                f"cannot write the ledger {safe_text(ledger.root)}: it is a file, not a directory"
            ) from None
    try:
        return ledger.real_path.stat().st_size > 0
    except FileNotFoundError:
        return False


def _kind(ledger: Any) -> str:
    from ..quality import ParquetLedger

    return "Parquet" if isinstance(ledger, ParquetLedger) else "JSON Lines"


def _run_ledger_convert(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.skip < 0:
        raise UsageError(f"--skip must be >= 0, got {args.skip}")
    source = _open_for_reading(args.source)
    target = _open_target(args.target)
    src_name, dst_name = _shown(source, args.source), _shown(target, args.target)
    if _same_place(args.source, args.target):
        raise UsageError(f"SOURCE and TARGET are the same ledger ({safe_text(src_name)}); give another TARGET")
    # a Parquet ledger reads every .parquet file under its root: a copy inside it would be read as part of it
    for inner, outer, names in ((args.target, args.source, ("TARGET", dst_name, "SOURCE", src_name)),
                                (args.source, args.target, ("SOURCE", src_name, "TARGET", dst_name))):
        if _inside(inner, outer):
            raise UsageError(
                f"{names[0]} {safe_text(names[1])} is inside {names[2]} {safe_text(names[3])}: a Parquet ledger "
                "reads every file under its root, so it would hold the other's observations as well; give a "
                f"{names[0]} outside {names[2]}"
            )
    if not args.append and _holds_anything(target):
        raise UsageError(
            f"the target ledger {safe_text(dst_name)} already holds observations; pass --append to add to it, "
            "or give a new or empty TARGET"
        )
    from itertools import islice

    from ..errors import LLMConnectError
    from ..quality import ParquetLedger

    if isinstance(source, ParquetLedger):  # one snapshot
        observations, malformed = _read(source, args.source)
        stream = iter(observations)
    else:  # a JSON Lines file streams, a batch at a time
        stream, malformed = source.iter_observations(), None
    if args.skip:
        stream = islice(stream, args.skip, None)
    done = args.skip  # observations of SOURCE (in its order) that are in TARGET or were skipped
    converted = 0
    batch: list[Any] = []
    try:
        while batch := list(islice(stream, _CONVERT_BATCH)):
            target.extend(batch)
            converted += len(batch)
            done += len(batch)
        if malformed is None:
            malformed = source.malformed_count()
    except (LLMConnectError, OSError, ValueError) as exc:
        raise UsageError(_stopped(args, source, target, exc, batch, converted, done)) from None
    print(
        f"converted {converted} observations from {safe_text(src_name)} ({_kind(source)}) "
        f"to {safe_text(dst_name)} ({_kind(target)}); {malformed} malformed "
        f"{'lines' if _kind(source) == 'JSON Lines' else 'files or rows'} skipped"
        + (f"; the first {args.skip} observations of the source were left out (--skip)" if args.skip else "")
    )
    return 0


def _stopped(args: argparse.Namespace, source: Any, target: Any, exc: BaseException, batch: list[Any],
             converted: int, done: int) -> str:
    """What a conversion that failed part-way wrote, why it stopped, and the command that goes on."""
    from ..errors import ValidationError
    from ..quality import ParquetLedger
    from ..quality._parquet import unstorable

    src, dst = safe_text(_shown(source, args.source)), safe_text(_shown(target, args.target))
    wrote = (f"wrote {converted} observations to {dst}: those numbered {args.skip + 1} to {done} of {src} "
             "(in its order)" if converted else f"wrote nothing to {dst}")
    span = f"{done + 1} to {done + len(batch)}" if batch else f"after {done}"
    if isinstance(exc, ValidationError):  # refused before any of the batch was written
        why = _describe(exc)
        if isinstance(target, ParquetLedger):
            for k, o in enumerate(batch):
                reason = unstorable(o)
                if reason is not None:
                    why = f"observation {done + k + 1} of {src} has {reason}"
                    break
        again = f"llm-connect ledger convert {_quoted(args.source)} {_quoted(args.target)} --append --skip {done}"
        return (f"{wrote}, then stopped: none of observations {span} was written, because {why}. To go on, fix "
                f"or remove that observation in the source, then run: {again}" + (
                    " (or remove the target and convert again)" if converted else ""))
    return (f"{wrote}, then failed at observations {span} (reading the source or writing the target; some of "
            f"them may be in the target too): {_describe(exc)}. To go on, remove the target and convert again")


def _describe(exc: BaseException) -> str:
    from ._common import _describe_error

    return safe_text(_describe_error(exc), limit=600)


def _quoted(location: str) -> str:
    """A location as a shell word for a command we print (credentials redacted, no control characters)."""
    import shlex

    return shlex.quote(safe_text(location))


def _same_place(a: str, b: str) -> bool:
    if "://" in a or "://" in b:
        return _local_or_uri(a) == _local_or_uri(b)
    return os.path.realpath(a) == os.path.realpath(b)


def _local_or_uri(location: str) -> str:
    """A ``file://`` URI as its absolute path (resolved), a local path resolved, any other URI as given
    (without a trailing ``/``)."""
    if location.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return os.path.realpath(unquote(urlsplit(location).path))
    if "://" in location:
        return location.rstrip("/")
    return os.path.realpath(location)


def _inside(inner: str, outer: str) -> bool:
    """Whether ``inner`` lies strictly under ``outer`` (paths resolved; URIs compared as text)."""
    a, b = _local_or_uri(inner), _local_or_uri(outer)
    if ("://" in a) != ("://" in b):
        return False
    sep = "/" if "://" in a else os.sep
    return a.startswith(b.rstrip(sep) + sep)
