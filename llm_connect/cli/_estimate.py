"""``llm-connect estimate``: prediction-powered estimates of quality per group, with gates."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._common import (
    ESTIMATE_STATS,
    UsageError,
    _add_require,
    _check_requirements,
    _prepare_out,
    _requirements,
    _table,
    confidence_option,
    parse_requirement,
    read_labels,
)
from ._judges import _split

# -- estimate -----------------------------------------------------------------------------------------

_ESTIMATE_HELP = """\
Estimate mean quality from judge scores on every item and human labels on a
few, with intervals that stay valid however biased the judge is
(prediction-powered inference, PPI++). DATA (.jsonl/.csv/.tsv) has one row per
graded item: a column of judge scores in 0..1, a column of human labels
(booleans, yes/no or 0..1; blank where unlabelled) and optionally group columns
(e.g. the candidate model). Prints one row per group and method and writes
estimates.csv into --out.

Gates for CI: --require "GROUP:estimate_low>=0.8" (repeatable; GROUP is a
value of --by, several --by columns joined by '/', 'all' without --by, or '*'
for every group) checks the lower end of the PPI++ interval (or of the first
--method given); estimate and estimate_high check the point and upper end.
Exit status 1 when a requirement fails.
"""
ESTIMATE_OUTPUTS = {"estimates": "estimates.csv"}


def _add_estimate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "estimate",
        help="quality per model from judge scores and a few human labels (PPI++), with valid intervals",
        description=_ESTIMATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file, one row per graded item")
    p.add_argument("--judge", metavar="COLUMN", required=True, help="column of the judge's scores (0..1)")
    p.add_argument("--human", metavar="COLUMN", required=True, help="column of human labels (blank = unlabelled)")
    p.add_argument("--by", metavar="COLUMNS", help="comma-separated group columns (e.g. candidate_model)")
    p.add_argument(
        "--method",
        metavar="LIST",
        default="ppi++,human,judge",
        help="comma-separated methods from ppi++, ppi, human, judge (default: ppi++,human,judge)",
    )
    p.add_argument("--weights", metavar="COLUMN", help="column of each labelled row's selection probability (active)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: 0.95)")
    p.add_argument("--out", metavar="DIR", default=".", help="directory for estimates.csv (default: .)")
    _add_require(p, "gpt-4o-mini:estimate_low>=0.8", ESTIMATE_STATS)
    p.set_defaults(func=_run_estimate, _parser=p)


def _group_name(row: Any, by: Sequence[str]) -> str:
    return "/".join(str(row[c]) for c in by) if by else "all"


def _run_estimate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import pandas as pd

    from ..items import load_items
    from ..stats import ESTIMATE_METHODS, estimate_quality

    methods = _split(args.method)
    unknown = [m for m in methods if m not in ESTIMATE_METHODS]
    if not methods or unknown:
        raise UsageError(f"--method: unknown {', '.join(unknown) or '(none given)'}; choose from "
                         f"{', '.join(ESTIMATE_METHODS)}")
    confidence_option(args.confidence)
    for text in args.require:
        parse_requirement(text, ESTIMATE_STATS)  # syntax first, before reading anything
    data = Path(args.data)
    items = load_items(data, items=False)
    by = _split(args.by)
    needed = [args.judge, args.human, *by, *([args.weights] if args.weights else [])]
    missing = [c for c in needed if c not in items.columns]
    if missing:
        raise UsageError(
            f"no column {', '.join(map(repr, missing))} in {args.data}; it has {', '.join(map(str, items.columns))}"
        )
    paths = _prepare_out(Path(args.out), ESTIMATE_OUTPUTS, inputs=[data])
    frame = items.copy()
    frame[args.human] = read_labels(frame[args.human].tolist(), args.human, scale_option=False)
    judge = frame[args.judge]
    if not (pd.api.types.is_numeric_dtype(judge) or pd.api.types.is_bool_dtype(judge)):  # text read from a CSV
        frame[args.judge] = read_labels(judge.tolist(), args.judge, scale_option=False)
    table = estimate_quality(frame, judge=args.judge, human=args.human, by=by or None, methods=tuple(methods),
                             confidence=args.confidence, weights=args.weights)
    csv_safe_frame(table).to_csv(paths["estimates"], index=False)
    _print_estimates(table, by, args.confidence, sys.stdout)
    print(f"wrote {safe_text(paths['estimates'])}")
    groups = sorted({_group_name(r, by) for r in table.to_dict("records")})
    requirements = _requirements(args.require, ESTIMATE_STATS, groups, "group")
    gate_method = "ppi++" if "ppi++" in methods else methods[0]
    rows = {(_group_name(r, by), r["method"]): r for r in table.to_dict("records")}
    column = {"estimate": "estimate", "estimate_low": "ci_low", "estimate_high": "ci_high"}

    def lookup(group: str, stat: str) -> float:
        row = rows.get((group, gate_method))
        return math.nan if row is None else float(row[column[stat]])

    return _check_requirements(parser, requirements, lookup, groups)


def _print_estimates(table: Any, by: Sequence[str], confidence: float, out: Any) -> None:
    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"

    head = (*by, "method", "estimate", f"{confidence:.0%} CI", "labelled", "items", "note")
    rows: list[tuple[Any, ...]] = [head]
    for r in table.to_dict("records"):
        note = r.get("reason") if isinstance(r.get("reason"), str) else ""
        if r["method"] == "judge" and not note:
            note = "trusts the judge: not a valid interval"
        rows.append((*(r[c] for c in by), r["method"], f(r["estimate"]), f"{f(r['ci_low'])}..{f(r['ci_high'])}",
                     str(r["n_labelled"]), str(r["n_total"]), note))
    _table(rows, out, "estimates")
    judge_rows = {tuple(r[c] for c in by): r for r in table.to_dict("records") if r["method"] == "judge"}
    for r in table.to_dict("records"):
        if r["method"] != "ppi++" or not math.isfinite(r["estimate"]):
            continue
        key = tuple(r[c] for c in by)
        naive = judge_rows.get(key)
        name = "/".join(map(str, key)) or "all items"
        if naive is not None and math.isfinite(naive["estimate"]):
            print(f"  {safe_text(name)}: the judge alone would claim {naive['estimate']:.3f}; corrected with "
                  f"{r['n_labelled']} human labels it is {r['estimate']:.3f} ({f(r['ci_low'])}..{f(r['ci_high'])})",
                  file=out)
