"""What ``calibrate`` and ``demo`` print: the verdicts, the summary of usage, agreement and bias, the groups
(``--by``), the selective judges (``--selective``), and the judge that scored nothing."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._textsafe import one_line, safe_text
from ._common import _table


def _print_verdicts(cards: Sequence[Any], out: Any) -> None:
    """The verdicts in words, one line per judge: what to conclude, printed before any table."""
    if not cards:
        return
    print("verdicts:", file=out)
    for card in cards:  # whole: a verdict's last clause (a bias, the weak flag) is often the one to act on
        print(f"  {safe_text(card.verdict)}", file=out)
    print(file=out)


def _print_summary(report: Any, paths: dict[str, Path], out: Any, *, lacking: int = 0) -> None:
    from .._html import format_p

    def f(x: Any, spec: str = ".3f") -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    usage = report.meta.usage
    print(f"{len(report.scores)} items", file=out)
    if lacking:
        print(
            f"  {lacking} row(s) lack text (a missing prompt, baseline or candidate, or a blank baseline): "
            "error rows in every judge, blank in scores.csv",
            file=out,
        )
    for name, u in usage.items():
        cost = f", ${u['judge_cost_usd']:.4f}" if u["judge_cost_usd"] else ""
        abstained = f", {u['abstained']} abstained" if u.get("abstained") else ""
        print(
            f"  {safe_text(name)}: {u['scored']} scored, {u['unscored']} unscored, {u['error']} errors{abstained}"
            f"{cost}", file=out
        )
        if u["error"] or u["unscored"]:
            status = report.scores[f"status_{name}"]
            notes = report.scores.loc[status != "scored", f"notes_{name}"].dropna().astype(str)
            if len(notes):
                common = notes.value_counts().index[0]
                print(f"    most common: {safe_text(common, limit=160)}", file=out)
    graded = any(p.scale is not None for p in report.agreement.pairs)
    head: tuple[Any, ...] = ("judge_a", "judge_b", "n", "threshold", "agree", "kappa [95% CI]", "alpha_interval",
                             "spearman")
    rows: list[tuple[Any, ...]] = [head + (("qw-kappa", "alpha_ordinal") if graded else ())]
    for p in report.agreement.pairs:
        k = p["cohen_kappa"]
        row: tuple[Any, ...] = (
            p.judge_a,
            p.judge_b + (" (ceiling)" if p.ceiling else ""),
            str(p.n),
            f(p.threshold, ".2f"),
            f(p["percent_agreement"].value),
            f"{f(k.value)} [{f(k.low)}, {f(k.high)}]",
            f(p["alpha_interval"].value),
            f(p["spearman"].value),
        )
        if graded:
            row += tuple(f(p[s].value) if s in p.estimates else "" for s in ("scale_kappa_quadratic",
                                                                             "scale_alpha_ordinal"))
        rows.append(row)
    _table(rows, out, "agreement")  # each row read from judge_a's side against judge_b, the reference
    for name, choice in getattr(report.agreement, "chosen", {}).items():
        folds = ", ".join(f"{t:.2f}" for t in choice.fold_thresholds)
        print(f"  threshold of {safe_text(name)}: {choice.value:.2f} ({safe_text(choice.describe(), limit=300)}"
              + (f"; per fold {folds}" if folds else "") + ")", file=out)
    summary = report.summary()
    if "weak" in summary.columns:
        for _, r in summary[summary["weak"].astype(bool)].iterrows():
            print(f"  WEAK JUDGE {safe_text(r['judge'])}: {safe_text(r['weak'])}", file=out)
    if report.bias is not None and report.bias.results:
        rows = [("judge", "probe", "n", "shift [95% CI]", "p", "flipped")]
        for r in report.bias.results:
            s = r.stats
            if not s.n:
                rows.append((r.judge, r.probe, "0", s.note, "", ""))
                continue
            rows.append(
                (
                    r.judge,
                    r.probe + (" (by definition)" if getattr(r, "expected", "") else ""),
                    str(s.n),
                    f"{f(s.mean_shift, '+.3f')} [{f(s.shift_low, '+.3f')}, {f(s.shift_high, '+.3f')}]",
                    format_p(s.p_value),
                    f(s.flip_rate, ".1%"),
                )
            )
        _table(rows, out, "bias probes")
    _print_groups(report, out)
    _print_selective(report, out)
    print("wrote " + ", ".join(safe_text(p) for p in paths.values()), file=out)


def _print_groups(report: Any, out: Any) -> None:
    """With --by: each judge's kappa against the reference per group, the pooled one first."""
    groups = getattr(report, "by_group", None)
    if groups is None or groups.reference is None:
        return
    summary = groups.summary()
    if summary.empty:
        return

    def f(x: Any) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, ".3f")

    rows: list[tuple[Any, ...]] = [("judge", groups.by, "n", f"kappa vs {groups.reference} [95% CI]", "note")]
    for r in summary.to_dict("records"):
        rows.append((r["judge"], r["group"], str(int(r["n"])) if not math.isnan(r["n"]) else "0",
                     f"{f(r['kappa'])} [{f(r['kappa_low'])}, {f(r['kappa_high'])}]",
                     "few items" if r["group_note"] else ""))
    _table(rows, out, f"agreement by {groups.by}")


def _print_selective(report: Any, out: Any) -> None:
    """With --selective: per judge its confidence, cut-off, coverage and agreement above the cut-off."""
    frame = report.selective_frame() if getattr(report, "selective", None) else None
    if frame is None or frame.empty:
        return

    def f(x: Any, spec: str = ".3f") -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    rows: list[tuple[Any, ...]] = [("judge", "confidence", "cutoff", "judges", "agree", "guaranteed", "abstains")]
    for r in frame.to_dict("records"):
        rows.append((r["judge_a"], r["confidence_source"], f(r["cutoff"], ".4g"),
                     f"{int(r['n_judged'])}/{int(r['n'])}", f(r["percent_agreement"]),
                     f">= {r['guaranteed_agreement']:.0%} at {r['confidence_level']:.0%}", f(r["abstained"], ".0%")))
    _table(rows, out, f"selective judges ({frame['selective'].iloc[0]})")
    for r in frame.to_dict("records"):
        if r["note"]:
            print(f"  {safe_text(r['judge_a'])}: {safe_text(r['note'], limit=300)}", file=out)


def _no_row_scored(parser: argparse.ArgumentParser, report: Any) -> int:
    """1 (after saying which judge and its first error on stderr) when a judge scored no item; else 0."""
    code = 0
    usage = report.meta.usage
    for name, u in usage.items():
        if u["scored"] or not len(report.scores):
            continue
        notes = report.scores[f"notes_{name}"].dropna().astype(str)
        first = notes.iloc[0] if len(notes) else "no reason recorded"
        print(
            f"{parser.prog}: error: judge {safe_text(name)} scored none of the {len(report.scores)} items; "
            f"first error: {one_line(first, limit=300)}",
            file=sys.stderr,
        )
        code = 1
    return code
