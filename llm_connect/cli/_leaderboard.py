"""``llm-connect leaderboard``: Bradley-Terry ratings of the models compared in a file, with intervals."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._common import N_BOOT_MAX, UsageError, _prepare_out, _table

_HELP = """\
Rate the models compared in DATA (.jsonl/.csv/.tsv, one row per comparison:
two model columns and a winner column holding a, b or tie; model_a, model_b
and 'tie (bothbad)' are read too) with a Bradley-Terry fit as Chatbot Arena
does: ratings on the Elo scale (400 log10 odds, mean 1000), percentile
bootstrap intervals over comparisons, and each model's rank with its best and
worst plausible rank from the intervals. A tie counts half to each side; rows
without a winner are left out. Prints the table and writes leaderboard.csv
into --out. Exit status 2 for a bad file, column or winner value, a model
never compared, or models in groups never compared with each other.
"""
OUTPUTS = {"leaderboard": "leaderboard.csv"}


def _add_leaderboard(subparsers: Any) -> None:
    p = subparsers.add_parser("leaderboard", help="Bradley-Terry ratings with intervals from pairwise comparisons",
                              description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file, one row per comparison")
    p.add_argument("--model-a", metavar="COL", default="model_a", help="column naming model A (default: model_a)")
    p.add_argument("--model-b", metavar="COL", default="model_b", help="column naming model B (default: model_b)")
    p.add_argument("--winner", metavar="COL", default="winner", help="column of a/b/tie (default: winner)")
    p.add_argument("--by", metavar="COLS", help="comma-separated group columns: one leaderboard per group")
    p.add_argument("--preference-codes", metavar="CODES",
                   help="what the winner values mean when they are codes, e.g. a=1,b=2,tie=0")
    p.add_argument("--n-boot", type=int, default=1000, metavar="N", help="bootstrap resamples (default: 1000)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: 0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--out", metavar="DIR", default=".", help="directory for leaderboard.csv (default: .)")
    p.set_defaults(func=_run_leaderboard, _parser=p)


def _run_leaderboard(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..calibration import leaderboard, load_items
    from ..calibration._pairwise import preference_codes
    from ..errors import ValidationError

    if not 0 <= args.n_boot <= N_BOOT_MAX:
        raise UsageError(f"--n-boot must be from 0 to {N_BOOT_MAX}, got {args.n_boot}")
    if not 0.0 < args.confidence < 1.0:
        raise UsageError(f"--confidence must be between 0 and 1 (e.g. 0.95), got {args.confidence}")
    by = [c.strip() for c in (args.by or "").split(",") if c.strip()]
    data = Path(args.data)
    try:
        preference_codes(args.preference_codes)
        items = load_items(data, items=False)
        missing = [c for c in (args.model_a, args.model_b, args.winner, *by) if c not in items.columns]
        if missing:
            raise UsageError(f"no column {', '.join(map(repr, missing))} in {args.data}; it has "
                             f"{', '.join(map(str, items.columns))}")
        paths = _prepare_out(Path(args.out), OUTPUTS, inputs=[data])
        board = leaderboard(items, model_a=args.model_a, model_b=args.model_b, winner=args.winner, by=by or None,
                            confidence=args.confidence, n_boot=args.n_boot, seed=args.seed,
                            codes=args.preference_codes)
    except ValidationError as exc:
        message = str(exc).replace("codes='a=1,b=2,tie=0' (--preference-codes a=1,b=2,tie=0)",
                                   "--preference-codes a=1,b=2,tie=0")
        raise UsageError(message) from None
    csv_safe_frame(board).to_csv(paths["leaderboard"], index=False)
    _print_board(board, by, args.confidence, sys.stdout)
    print(f"wrote {safe_text(paths['leaderboard'])}")
    return 0


def _print_board(board: Any, by: list[str], confidence: float, out: Any) -> None:
    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}"

    head = (*by, "rank", "model", "rating", f"{confidence:.0%} CI", "rank range", "n", "win rate")
    rows: list[tuple[Any, ...]] = [head]
    for r in board.to_dict("records"):
        low, high = r["rank_low"], r["rank_high"]
        ranks = "—" if low is None or low != low else f"{low}-{high}"  # NA compares unequal to itself
        rows.append((*(r[c] for c in by), str(r["rank"]), r["model"], f(r["rating"]),
                     f"{f(r['rating_low'])}..{f(r['rating_high'])}", ranks, str(r["n"]), f"{r['win_rate']:.3f}"))
    attrs = board.attrs
    _table(rows, out, f"leaderboard (Bradley-Terry, Elo scale; {attrs.get('n_comparisons', '?')} comparisons, "
                      f"{attrs.get('n_boot', '?')} bootstrap resamples)")
    skipped = [f"{attrs[k]} {what}" for k, what in (("n_unlabelled", "without a winner"),
                                                     ("n_self", "of a model with itself")) if attrs.get(k)]
    if skipped:
        print(f"  left out: {', '.join(skipped)}", file=out)
