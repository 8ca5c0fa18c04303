"""``llm-connect calibrate``: grade a CSV or JSONL file with several judges and measure them.

The options and their help are in ``_calibrate_options``, what is printed in ``_summary``; here the run: the
checks on the data before any judge runs, the judging, the files written, the ledger and the gates."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._textsafe import csv_safe_frame, safe_text
from ._calibrate_options import (
    CALIBRATE_HELP,
    COMMON_REFERENCE_SEPS,
    MAX_EPOCHS,
    _parse_thresholds,
    _reference_sep,
    _selective_option,
    add_calibrate_arguments,
)
from ._common import (
    CALIBRATE_GROUP_OUTPUTS,
    CALIBRATE_OUTPUTS,
    CALIBRATE_STATS,
    N_BOOT_MAX,
    UsageError,
    _alias_requirement,
    _check_requirements,
    _prepare_out,
    _requirements,
    _warn,
    read_labels,
)
from ._inputs import (
    INPUT_HELP,
    apply_candidate_model,
    check_resume,
    close_run,
    open_run,
    prepare_items,
    warn_no_human,
)
from ._judges import JudgeSpec, _build_judges, _check_judges, _split, grader_id, judges_option, needs_reference
from ._pairwise import PAIRWISE_HELP, looks_pairwise, run_pairwise
from ._summary import _no_row_scored, _print_summary, _print_verdicts


def _add_calibrate(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="compare judges with each other and with human labels; probe them for bias",
        description=CALIBRATE_HELP + "\n" + INPUT_HELP + "\n" + PAIRWISE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_calibrate_arguments(p)
    p.set_defaults(func=_run_calibrate, _parser=p)


def _check_selective(items: Any, humans: Sequence[str], levels: tuple[float, float]) -> None:
    """--selective needs a human label column and enough labelled items for alpha and delta."""
    from ..stats.labels import parse_labels
    from ..stats.selective import min_items

    if not humans:
        raise UsageError("--selective needs human labels to calibrate against: --human COLUMN")
    labelled = int(sum(1 for v in parse_labels(items[humans[0]].tolist(), column=humans[0]) if v == v))
    need = min_items(*levels)
    if labelled < need:
        raise UsageError(f"--selective alpha={levels[0]:g},delta={levels[1]:g} needs at least {need} labelled items "
                         f"(with fewer, even no disagreement at all cannot pass the exact binomial bound); "
                         f"{humans[0]!r} labels {labelled}; label more items or raise alpha or delta")


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
        [grader_id(j) for j in _split(args.judges)],
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
    unknown_judges = [j for j in thresholds if j not in {grader_id(n) for n in _split(args.judges)}]
    if unknown_judges:
        raise UsageError(f"--threshold names judge(s) {', '.join(unknown_judges)} that do not run; judges: "
                         f"{', '.join(grader_id(n) for n in _split(args.judges))}")
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
        from ..cards import JudgeCardRegistry
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
