"""``llm-connect leaderboard``: Bradley-Terry ratings of the models compared in a file, with intervals."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._common import N_BOOT_MAX, UsageError, _prepare_out, _table, confidence_option

_HELP = """\
Rate the models compared in DATA (.jsonl/.csv/.tsv, one row per comparison:
two model columns and a winner column holding a, b or tie; model_a, model_b
and 'tie (bothbad)' are read too) with a Bradley-Terry fit as Chatbot Arena
does: ratings on the Elo scale (400 log10 odds, mean 1000), percentile
bootstrap intervals over comparisons, and each model's rank with its best and
worst plausible rank from the intervals. A tie counts half to each side; rows
without a winner are left out. A winner may also be the probability that
answer A is preferred (0..1, e.g. from a judge's logprobs; --preference-codes
probability when they are all 0, 0.5 or 1): a comparison then counts p of a
win to A and 1 - p to B. Prints the table and writes leaderboard.csv into
--out.

--style controls for style as Chatbot Arena does: the fit gets the normalised
differences (a - b) / (a + b + 1) of the two answers' length, markdown
headers, list items and bold text (computed from the text columns,
response_a/response_b, candidate_a/candidate_b or answer_a/answer_b, or
--text-a/--text-b), and the ratings are read with style held equal.
--style length,bold picks features; other names are columns of DATA holding
your own covariates (one number per comparison, A minus B). The raw and
style-controlled boards are printed side by side with each model's change
in rank, then what style is worth (Elo per unit of each feature); written to
leaderboard_style.csv and style.csv.

Exit status 2 for a bad file, column or winner value, a model never
compared, or models in groups never compared with each other.
"""
OUTPUTS = {"leaderboard": "leaderboard.csv"}
STYLE_OUTPUTS = {"leaderboard_style": "leaderboard_style.csv", "style": "style.csv"}


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
    p.add_argument("--style", metavar="FEATURES", nargs="?", const="all", default=None,
                   help="control for style (Chatbot Arena): all four features (length, headers, lists, bold), or a "
                        "comma-separated choice of them and of DATA's covariate columns")
    p.add_argument("--text-a", metavar="COL", help="column of answer A's text for --style (default: response_a, "
                                                   "candidate_a or answer_a)")
    p.add_argument("--text-b", metavar="COL", help="column of answer B's text for --style")
    p.add_argument("--cluster", metavar="COL", default="auto",
                   help="column of the conversation each comparison belongs to: the bootstrap resamples whole "
                        "conversations; 'none': independent comparisons (default: auto, conversation_id when DATA "
                        "has it)")
    p.add_argument("--out", metavar="DIR", default=".", help="directory for leaderboard.csv (default: .)")
    p.set_defaults(func=_run_leaderboard, _parser=p)


def _run_leaderboard(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..calibration._pairwise import preference_codes
    from ..errors import ValidationError
    from ..items import load_items
    from ..stats import leaderboard
    from ..stats.bradley_terry import is_probability_codes, side_by_side

    if not 0 <= args.n_boot <= N_BOOT_MAX:
        raise UsageError(f"--n-boot must be from 0 to {N_BOOT_MAX}, got {args.n_boot}")
    confidence_option(args.confidence)
    by = [c.strip() for c in (args.by or "").split(",") if c.strip()]
    style = _style_option(args.style)
    if style is None and (args.text_a or args.text_b):
        raise UsageError("--text-a/--text-b name the answers' texts for --style; add --style")
    data = Path(args.data)
    try:
        if not is_probability_codes(args.preference_codes):
            preference_codes(args.preference_codes)
        items = load_items(data, items=False)
        missing = [c for c in (args.model_a, args.model_b, args.winner, *by) if c not in items.columns]
        if missing:
            raise UsageError(f"no column {', '.join(map(repr, missing))} in {args.data}; it has "
                             f"{', '.join(map(str, items.columns))}")
        paths = _prepare_out(Path(args.out), {**OUTPUTS, **(STYLE_OUTPUTS if style is not None else {})},
                             inputs=[data])
        common = {"model_a": args.model_a, "model_b": args.model_b, "winner": args.winner, "by": by or None,
                  "confidence": args.confidence, "n_boot": args.n_boot, "seed": args.seed,
                  "codes": args.preference_codes, "cluster": None if args.cluster == "none" else args.cluster}
        board = leaderboard(items, **common)
        controlled = None
        if style is not None:
            with warnings.catch_warnings():  # what is dropped or flagged is printed below, as notes
                warnings.simplefilter("ignore")
                controlled = leaderboard(items, **common, style=style, text_a=args.text_a, text_b=args.text_b)
    except ValidationError as exc:
        message = str(exc).replace("codes='a=1,b=2,tie=0' (--preference-codes a=1,b=2,tie=0)",
                                   "--preference-codes a=1,b=2,tie=0").replace(
            "codes='probability'", "--preference-codes probability").replace(
            "text_a= and text_b=", "--text-a and --text-b").replace("cluster=None", "--cluster none")
        raise UsageError(message) from None
    csv_safe_frame(board).to_csv(paths["leaderboard"], index=False)
    _print_board(board, by, args.confidence, sys.stdout)
    written = [paths["leaderboard"]]
    if controlled is not None:
        both = side_by_side(board, controlled)
        csv_safe_frame(both).to_csv(paths["leaderboard_style"], index=False)
        csv_safe_frame(controlled.attrs["style"]).to_csv(paths["style"], index=False)
        _print_side_by_side(both, by, args.confidence, sys.stdout)
        _print_style(controlled, by, args.confidence, sys.stdout)
        written += [paths["leaderboard_style"], paths["style"]]
    for path in written:
        print(f"wrote {safe_text(path)}")
    return 0


def _style_option(value: str | None) -> Any:
    """``--style``: ``None`` (not given), ``True`` (all four Arena features) or a list of names."""
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise UsageError("--style takes nothing (all four features) or comma-separated features or columns")
    return True if names == ["all"] else names


def _f(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}"


def _print_side_by_side(both: Any, by: list[str], confidence: float, out: Any) -> None:
    head = (*by, "model", "raw rating", f"{confidence:.0%} CI", "raw rank", "style-controlled", f"{confidence:.0%} CI",
            "rank", "change")
    rows: list[tuple[Any, ...]] = [head]
    for r in both.to_dict("records"):
        change = r["rank_change"]
        shown = "—" if change is None or change != change else (f"+{int(change)}" if change > 0 else str(int(change)))
        rows.append((*(r[c] for c in by), r["model"], _f(r["rating"]), f"{_f(r['rating_low'])}..{_f(r['rating_high'])}",
                     str(r["rank"]), _f(r["style_rating"]),
                     f"{_f(r['style_rating_low'])}..{_f(r['style_rating_high'])}", str(r["style_rank"]), shown))
    _table(rows, out, "raw beside style-controlled (style held equal; change = raw rank - style-controlled rank)")


def _print_style(controlled: Any, by: list[str], confidence: float, out: Any) -> None:
    effects = controlled.attrs.get("style")
    if effects is not None and len(effects):
        rows: list[tuple[Any, ...]] = [(*by, "feature", "Elo per unit", f"{confidence:.0%} CI")]
        for r in effects.to_dict("records"):
            rows.append((*(r[c] for c in by), r["feature"], f"{r['coefficient']:+.0f}",
                         f"{_f(r['low'])}..{_f(r['high'])}"))
        _table(rows, out, "what style is worth (Elo a comparison moves toward the answer that alone has the feature)")
    for note in controlled.attrs.get("style_notes", []):
        print(f"  note: {safe_text(note, limit=400)}", file=out)


def _print_board(board: Any, by: list[str], confidence: float, out: Any) -> None:
    import pandas as pd

    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0f}"

    head = (*by, "rank", "model", "rating", f"{confidence:.0%} CI", "rank range", "n", "win rate")
    rows: list[tuple[Any, ...]] = [head]
    for r in board.to_dict("records"):
        low, high = r["rank_low"], r["rank_high"]
        ranks = "—" if low is None or bool(pd.isna(low)) else f"{low}-{high}"  # no interval, no rank range
        rows.append((*(r[c] for c in by), str(r["rank"]), r["model"], f(r["rating"]),
                     f"{f(r['rating_low'])}..{f(r['rating_high'])}", ranks, str(r["n"]), f"{r['win_rate']:.3f}"))
    attrs = board.attrs
    _table(rows, out, f"leaderboard (Bradley-Terry, Elo scale; {attrs.get('n_comparisons', '?')} comparisons, "
                      f"{attrs.get('n_boot', '?')} bootstrap resamples)")
    skipped = [f"{attrs[k]} {what}" for k, what in (("n_unlabelled", "without a winner"),
                                                     ("n_self", "of a model with itself")) if attrs.get(k)]
    if skipped:
        print(f"  left out: {', '.join(skipped)}", file=out)
    if attrs.get("cluster"):  # comparisons on the turns of one conversation: resampled together
        print(f"  intervals: bootstrap over whole clusters, clustered by {safe_text(attrs['cluster'], limit=80)!r} "
              f"({attrs.get('n_clusters')} clusters)", file=out)
    elif attrs.get("n_boot"):
        print("  intervals: bootstrap over single comparisons, taken as independent (no clusters)", file=out)
    for note in attrs.get("cluster_notes", []):
        print(f"  note: {safe_text(note.replace('cluster=None', '--cluster none'), limit=400)}", file=out)
