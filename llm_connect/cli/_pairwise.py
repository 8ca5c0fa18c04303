"""``llm-connect calibrate --pairwise``: a pairwise LLM judge against people's a/b/tie preferences.

The pairwise branch of ``calibrate``: its options, the check that a pairwise file is run as one,
and the run itself (outputs, summary, cards, ``--require`` gates). No threshold is applied.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._common import (
    CALIBRATE_OUTPUTS,
    CALIBRATE_STATS,
    DEFAULT_JUDGES,
    UsageError,
    _check_requirements,
    _prepare_out,
    _requirements,
    _table,
)

PAIRWISE_HELP = """\
Pairwise data (--pairwise): one row per pair with prompt, candidate_a,
candidate_b (optionally id, model_a, model_b) and the people's preference
(--human, default 'human'; several --annotators allowed, their majority is the
reference when there is no human column) holding a, b or tie (model_a,
model_b, 'tie (bothbad)' are read too; numeric codes need --preference-codes
a=1,b=2,tie=0). The --llm model judges each pair in both orders (--one-order
halves the cost; --allow-tie lets it answer tie). No threshold is applied:
agreement is three-way (a/b/tie) with Cohen's kappa, accuracy on the pairs
people did not call a tie, the judge's tie rate beside people's, consistency
across orders and the position probe (how often the answer shown first wins,
binomial test). Writes scores.csv (winner_human, winner_<annotator>,
winner_pairwise, consistent_pairwise, winner_a_first_/winner_b_first_pairwise,
and winner: the people's, the column leaderboards read with model_a and
model_b), pairwise.csv (per judge against people), agreement.csv (every pair
of raters, three-way), bias.csv (position), report.html and, when the pairs
name their models (model_a, model_b), leaderboard.csv (Bradley-Terry ratings
with intervals from people's winners and the judge's, a rater column first).
"""


def add_pairwise_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a pairwise run."""
    p.add_argument("--pairwise", action="store_true",
                   help="DATA holds pairs (candidate_a, candidate_b) and a/b/tie preferences: judge them with a "
                   "pairwise LLM judge (--llm) and measure it three ways, without a threshold")
    p.add_argument("--one-order", action="store_true",
                   help="with --pairwise: show each pair once (A first) instead of in both orders (half the calls; "
                   "the position probe then re-judges up to --probe-limit pairs swapped)")
    p.add_argument("--allow-tie", action="store_true",
                   help="with --pairwise: the judge may answer 'tie' (else a tie is two orders disagreeing)")
    p.add_argument("--preference-codes", metavar="CODES",
                   help="with --pairwise: what the preference values mean, e.g. a=1,b=2,tie=0 (several codes "
                   "for one label joined by |; default: the words a, b, tie, model_a, model_b, 'tie (bothbad)')")


def looks_pairwise(path: Path) -> bool:
    """Whether the file's first row (JSON Lines) or header (CSV/TSV) has candidate_a and candidate_b."""
    from ..calibration._pairwise import PAIRWISE_COLUMNS

    try:
        with open(path, encoding="utf-8-sig") as f:
            first = ""
            for line in f:
                if line.strip():
                    first = line
                    break
    except (OSError, UnicodeDecodeError):
        return False  # the reader says what is wrong with the file
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        try:
            record = json.loads(first)
        except json.JSONDecodeError:
            return False
        keys = set(record) if isinstance(record, dict) else set()
    else:
        import csv

        sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
        keys = {c.strip() for row in csv.reader([first], delimiter=sep) for c in row}
    return all(c in keys for c in PAIRWISE_COLUMNS)


def _probes(text: str) -> str | None:
    value = text.strip().lower()
    if value in ("none", "", "off"):
        return None
    if value in ("auto", "position"):
        return "position"
    raise UsageError(f"--probes {text!r} does not apply to pairwise data; a pairwise run has the position probe "
                     "only: --probes position (the default, auto) or none")


_STATS = {"kappa": "cohen_kappa", "kappa_low": "kappa_low", "agreement": "percent_agreement",
          "alpha": "krippendorff_alpha_nominal"}


def run_pairwise(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``calibrate --pairwise``: exit 0 done, 1 when the judge scored no pair or a --require failed,
    2 for a user error (raised as :class:`UsageError`, before --out is made or any judge runs)."""
    from ..calibration import calibrate
    from ..calibration._pairwise import parse_preferences, preference_codes
    from ..errors import ValidationError
    from ._inputs import check_resume, close_run, open_run, prepare_items
    from ._judges import JudgeSpec, _build_llm, _check_judges, _split

    if not args.pairwise:
        raise UsageError(f"{args.data} holds pairs (candidate_a, candidate_b): pass --pairwise to judge them "
                         "with a pairwise judge and measure it three ways (a/b/tie)")
    if args.judges not in (DEFAULT_JUDGES, "llm"):
        raise UsageError("--judges does not apply with --pairwise: the judge is the pairwise LLM judge of --llm")
    if args.threshold != 0.5:
        raise UsageError("--threshold does not apply with --pairwise: pairs are a, b or tie, never thresholded")
    for option in ("by", "normalize", "reference_sep"):
        if getattr(args, option, None) is not None:
            raise UsageError(f"--{option.replace('_', '-')} does not apply with --pairwise")
    probes = _probes(args.probes)
    spec = JudgeSpec(judges="llm", llm=args.llm, base_url=args.base_url, seed=args.seed)
    _check_judges(spec)
    names = ["pairwise"]
    requirements = _requirements(args.require, CALIBRATE_STATS, names, "judge")
    try:
        codes = args.preference_codes
        preference_codes(codes)  # a malformed --preference-codes: exit 2 before reading DATA
        data = Path(args.data)
        check_resume(args, data)  # --resume: OUT holds a run on this DATA
        items, selection = prepare_items(args, data, pairs=True)  # --columns, --where, --limit / --sample
        human = args.human if args.human is not None else ("human" if "human" in items.columns else None)
        annotators = _split(args.annotators)
        for column in [c for c in [human, *annotators] if c is not None]:
            if column not in items.columns:
                raise UsageError(f"no column {column!r} in {args.data}; it has "
                                 f"{', '.join(map(str, items.columns))}")
            parse_preferences(items[column].tolist(), codes=codes, column=str(column))
    except ValidationError as exc:
        message = str(exc).replace("codes='a=1,b=2,tie=0' (--preference-codes a=1,b=2,tie=0)",
                                   "--preference-codes a=1,b=2,tie=0")
        raise UsageError(message) from None
    outputs = {**CALIBRATE_OUTPUTS, "pairwise": "pairwise.csv", "leaderboard": "leaderboard.csv"}
    outputs.pop("judgments", None)  # the judgment viewer reads scored runs, not pairs
    paths = _prepare_out(Path(args.out), outputs, inputs=[data])
    cache = open_run(args, Path(args.out), data, selection)  # run.json; the response cache (None: --no-cache)
    from ..grading import PairwiseJudge

    judge = PairwiseJudge(_build_llm(args.llm, args.base_url, cache), both_orders=not args.one_order,
                          allow_tie=args.allow_tie, seed=args.seed)
    report: Any = calibrate({"pairwise": judge}, items, human=human, annotators=annotators, pairwise=True,
                            preference_codes=args.preference_codes, probes=probes, probe_limit=args.probe_limit,
                            n_boot=args.n_boot, seed=args.seed, concurrency=args.concurrency,
                            progress=not args.no_progress)
    inputs_notes = [n for n in (selection.describe(), close_run(cache)) if n]
    cards = report.judge_cards()
    written: dict[str, Path] = {}
    from ..cards import cards_frame

    for key, table in (("scores", report.scores_table()), ("agreement", report.agreement_frame()),
                       ("pairwise", report.pairwise_frame()), ("bias", report.bias_frame()),
                       ("cards", cards_frame(cards))):
        csv_safe_frame(table).to_csv(paths[key], index=False)
        written[key] = paths[key]
    boards = report.leaderboards()  # per rater, when the pairs name their models (model_a, model_b)
    if any(not isinstance(b, str) for b in boards.values()):
        from ..calibration._leaderboard import leaderboards_frame

        csv_safe_frame(leaderboards_frame(boards)).to_csv(paths["leaderboard"], index=False)
        written["leaderboard"] = paths["leaderboard"]
    else:
        paths["leaderboard"].unlink(missing_ok=True)  # a previous run's, on pairs that named their models
    if "scores_parquet" in paths:
        written["scores_parquet"] = report.to_parquet(paths["scores_parquet"])
    written["report"] = report.to_html(paths["report"])
    out = sys.stdout
    if cards:
        print("verdicts:", file=out)
        for card in cards:
            print(f"  {safe_text(card.verdict, limit=600)}", file=out)
        print(file=out)
    for note in inputs_notes:  # pairs used of the file's; replies the cache saved
        print(safe_text(note, limit=400), file=out)
    print_pairwise_summary(report, written, out)
    if args.ledger is not None:
        from ..cards import JudgeCardRegistry

        registry = JudgeCardRegistry.for_ledger(args.ledger)
        registry.save(cards)
        print(f"saved {len(cards)} judge card(s) to {safe_text(registry.path)}", file=out)
    code = 0
    for name, u in report.meta.usage.items():
        if not u["scored"]:
            notes = report.scores[f"notes_{name}"].dropna().astype(str)
            first = notes.iloc[0] if len(notes) else "no reason recorded"
            print(f"{parser.prog}: error: judge {safe_text(name)} scored none of the {len(report.scores)} pairs; "
                  f"first error: {safe_text(first, limit=300)}", file=sys.stderr)
            code = 1

    def lookup(name: str, stat: str) -> float:
        return report.stat(name, _STATS[stat]) if stat in _STATS else math.nan

    return max(code, _check_requirements(parser, requirements, lookup, names))


def print_pairwise_summary(report: Any, paths: dict[str, Path], out: Any) -> None:
    """The pairs, each judge's runs, and its three-way agreement with people (no threshold)."""

    def f(x: Any, spec: str = ".3f") -> str:
        try:
            v = float(x)
        except (TypeError, ValueError):
            return "—"
        return "—" if math.isnan(v) else format(v, spec)

    print(f"{len(report.scores)} pairs", file=out)
    for name, u in report.meta.usage.items():
        cost = f", ${u['judge_cost_usd']:.4f}" if u["judge_cost_usd"] else ""
        print(f"  {safe_text(name)}: {u['scored']} scored, {u['unscored']} unscored, {u['error']} errors{cost}",
              file=out)
    rows: list[tuple[Any, ...]] = [("judge", "n", "agree (a/b/tie)", "kappa [95% CI]", "acc non-tie", "ties j/p",
                                    "consistent", "first shown wins", "p")]
    from .._html import format_p

    for r in report.pairwise.to_dict("records"):
        rows.append((
            r["judge"], str(r["n"]), f(r["percent_agreement"]),
            f"{f(r['cohen_kappa'])} [{f(r['kappa_low'])}, {f(r['kappa_high'])}]",
            f"{f(r['accuracy_non_tie'])} ({r['decided_non_tie']}/{r['n_non_tie']} decided)",
            f"{f(r['judge_tie_rate'], '.2f')}/{f(r['human_tie_rate'], '.2f')}",
            f(r["consistency"], ".0%"), f(r["first_shown_win_rate"], ".0%"), format_p(r["position_p_value"]),
        ))
    _table(rows, out, "three-way agreement with people (a, b, tie; no threshold)")
    print("wrote " + ", ".join(safe_text(p) for p in paths.values()), file=out)
