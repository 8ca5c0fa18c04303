"""``llm-connect grade``: judge a file with one judge and record every judgment (and the human labels) in a
ledger, through the path :func:`~llm_connect.grading.judge_many` (``ledger=``) and
:func:`~llm_connect.frames.record_labels` take, so ``llm-connect route`` and ``ledger stats`` read them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._textsafe import safe_text
from ._common import UsageError, _warn, read_labels
from ._inputs import add_per_turn_option, apply_candidate_model, find_human, prepare_items
from ._judges import (
    JudgeSpec,
    _build_judges,
    _check_judges,
    add_model_options,
    judge_word,
    judges_help,
    needs_reference,
)

_GRADE_HELP = """\
Judge every row of DATA (a .jsonl or .csv/.tsv file with the columns prompt,
baseline -- the reference answer -- and candidate; optionally id,
candidate_model -- or --candidate-model NAME for the rows that name none; a
warning says when judgments would be recorded under model 'unknown' -- and a
human label column, 0-1 or ratings on --scale LOW-HIGH) with one judge, and append each
scored judgment to LEDGER under --task-type, as judge_many(..., ledger=)
records it (grader id, rubric hash, item id). With --human COLUMN the labels
in that column are recorded too (grader id "human", paired with the
judgments by item id and candidate_model), as record_labels does; routing
then corrects the judge with them (PPI++).

Prints one line: how many rows were scored, unscored, errors (and abstained),
and how many judgments and labels were recorded. Each judgment is recorded
once per item, grader, rubric and candidate model, each label once per item
and annotator: running the command again records nothing new and says how
many it found in the ledger already. A run that scored no row records no
label. Next: llm-connect route LEDGER TASK --threshold X.

With --batch the judge's calls go through the provider's Batch API (half the
price); the state of the submitted batches is kept in LEDGER.batches (or
--batch-state DIR), so running the same command again after a stop collects
them instead of paying twice.

Exit status: 0 done; 1 the judge scored no row (stderr names its first
error); 2 a user error (one line on stderr).
"""


def _add_grade(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "grade",
        help="judge a file with one judge and record every judgment (and human labels) in a ledger",
        description=_GRADE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("data", metavar="DATA", help="a .jsonl or .csv/.tsv file of items")
    p.add_argument(
        "--judge", required=True, metavar="GRADER_ID",
        help=f"the judge, by its name or grader id: {judges_help()}",
    )
    p.add_argument("--ledger", required=True, metavar="LEDGER",
                   help="the quality ledger to append to: a JSON Lines file, or a Parquet ledger's root "
                   "(a directory or a URI); created if missing")
    p.add_argument("--task-type", required=True, metavar="T", help="the task type the judgments are recorded under")
    p.add_argument("--human", metavar="COLUMN",
                   help="column with the human verdict (booleans, yes/no or a 0-1 score), recorded as labels "
                   "(default: a column named 'human', if any)")
    p.add_argument("--scale", metavar="LOW-HIGH", default=None,
                   help="with --human: the labels are ratings on this scale (e.g. 1-5), recorded as "
                   "(rating - LOW) / (HIGH - LOW) so they sit on the judges' 0..1")
    p.add_argument("--candidate-model", metavar="NAME", default=None,
                   help="the model that wrote the candidates, when DATA has no candidate_model column; the "
                   "judgments and labels are recorded under it (without either, under 'unknown')")
    add_model_options(p)  # --llm, --rubric, --embedder, --base-url
    p.add_argument("--normalize", metavar="NAME", default=None,
                   help="normalisation for the exact judge: squad, lower, strip, whitespace (default: none)")
    p.add_argument("--reference-sep", metavar="SEP", default=None,
                   help="separator of several acceptable references in baseline (e.g. '|')")
    p.add_argument("--columns", metavar="NEW=OLD,...",
                   help="rename the file's columns to those grade reads, e.g. prompt=question,baseline=golden_answer")
    p.add_argument("--sep", metavar="SEP", default=None,
                   help="the column separator of a CSV file (default: sniffed from the file: , ; tab or |)")
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="judge calls at once (default: 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the LLM judge (default: 0)")
    p.add_argument(
        "--batch", action="store_true",
        help="send the judge's calls through the provider's Batch API (OpenAI-compatible /v1/batches, Anthropic "
        "message batches): half the price, no per-minute limits, replies within the provider's window. The "
        "batches' state lives beside the ledger (LEDGER.batches), so the same command resumes a stopped run: "
        "submitted batches are collected, never submitted again")
    p.add_argument("--batch-state", metavar="DIR",
                   help="with --batch: the folder for the batches' state (needed when LEDGER is a URI)")
    p.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
    add_per_turn_option(p)
    p.set_defaults(func=_run_grade, _parser=p, wide=None, where=None, limit=None, sample=None)


def record_item_labels(ledger: Any, items: Any, column: str, *, task_type: str, scale: Any = None) -> tuple[int, int]:
    """Record the labels of ``items[column]`` in ``ledger`` as :func:`~llm_connect.frames.record_labels`
    does, keyed as :func:`~llm_connect.grading.judge_many` keys the judgments of the same rows (item id:
    the row's ``id`` or its texts' key; adapter and model from ``candidate_model``/``candidate_adapter``).
    Returns ``(written, already)``: how many labels were written, and how many the ledger held already
    (once per item and annotator: not recorded again). Blank labels are unlabelled rows."""
    import pandas as pd

    from ..frames import record_labels
    from ..items import candidate_names, item_ids
    from ..stats.labels import parse_labels

    models = items["candidate_model"].tolist() if "candidate_model" in items.columns else [None] * len(items)
    adapters = items["candidate_adapter"].tolist() if "candidate_adapter" in items.columns else [None] * len(items)
    names = [candidate_names(m, a) for m, a in zip(models, adapters, strict=True)]
    frame = pd.DataFrame({
        "item_id": item_ids(items),
        "adapter_id": [a for a, _ in names],
        "model_id": [m for _, m in names],
        "label": parse_labels(items[column].tolist(), column=str(column), scale=scale),
        # a conversation item's conversation and turn travel to its label's tags
        **{c: items[c].tolist() for c in ("conversation_id", "turn") if c in items.columns},
    })
    written = record_labels(ledger, frame, task_type=task_type, label="label", item_id="item_id",
                            adapter_id="adapter_id", model_id="model_id")
    return written, int(frame["label"].notna().sum()) - written


def already_note(judgments: int, labels: int) -> str:
    """``"; N judgment(s) and M label(s) already in the ledger, not recorded again"`` (empty when both are 0)."""
    parts = [f"{judgments} judgment(s)" if judgments else "", f"{labels} label(s)" if labels else ""]
    found = " and ".join(p for p in parts if p)
    return f"; {found} already in the ledger, not recorded again" if found else ""


def _scale_option(value: str | None, human: str | None) -> Any:
    """``--scale LOW-HIGH`` as ``(low, high)`` (``None`` without it); it needs a --human column to apply to."""
    if value is None:
        return None
    if human is None:
        raise UsageError("--scale says what scale the human labels are on; add --human COLUMN (or drop --scale)")
    from ..errors import ValidationError
    from ..stats.agreement import parse_scale

    try:
        return parse_scale(value)
    except ValidationError as exc:
        raise UsageError(f"--scale: {exc}") from None


def _counts(frame: Any) -> dict[str, int]:
    counts = {status: int((frame["status"] == status).sum()) for status in ("scored", "unscored", "error")}
    abstained = int((frame["status"] == "abstained").sum())
    if abstained or "abstained" in (frame.attrs.get("counts") or {}):
        counts["abstained"] = abstained
    return counts


def _batch_options(args: argparse.Namespace) -> Any:
    """``--batch``: the Batch APIs, their state beside a ledger file (``LEDGER.batches``) or in
    ``--batch-state DIR``; ``None`` without ``--batch``."""
    if args.batch_state is not None and not args.batch:
        raise UsageError("--batch-state names the folder of --batch's state; add --batch (or drop --batch-state)")
    if not args.batch:
        return None
    from ..adapters import BatchOptions

    if args.batch_state is not None:
        if not str(args.batch_state).strip():
            raise UsageError("--batch-state is empty; give a folder such as runs/batches")
        folder = Path(args.batch_state)
    elif "://" in str(args.ledger):
        raise UsageError(f"--batch keeps its state beside the ledger, but {safe_text(args.ledger)} is a URI; "
                         "add --batch-state DIR (a local folder) so a stopped run can be resumed")
    else:
        folder = Path(f"{args.ledger}.batches")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"the batch state folder {safe_text(folder)} is a file; give --batch-state DIR")
    return BatchOptions(state_dir=folder, progress=not args.no_progress)


def _run_grade(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..grading import judge_many
    from ..quality import open_ledger

    if not args.task_type.strip():
        raise UsageError("--task-type is empty; name the task the judgments are for (e.g. qa)")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be >= 1, got {args.concurrency}")
    word = judge_word(args.judge, option="--judge")
    spec = JudgeSpec(judges=word, llm=args.llm, embedder=args.embedder, base_url=args.base_url,
                     normalize=args.normalize,
                     reference_sep=None if args.reference_sep in (None, "none") else args.reference_sep,
                     seed=args.seed, rubric=args.rubric)
    _check_judges(spec)  # a missing extra, a bad spec or URL: before reading anything
    data = Path(args.data)
    items, _ = prepare_items(args, data, reference=needs_reference(spec))
    human = find_human(parser, items, args.human, data)
    scale = _scale_option(args.scale, human)
    if human is not None:  # a label that is not one: exit 2 now, before any judge runs or anything is written
        read_labels(items[human].tolist(), str(human), scale=scale)
    items = apply_candidate_model(parser, items, args.candidate_model, data)
    if not str(args.ledger).strip():
        raise UsageError("--ledger is empty; give a ledger file such as ledger.jsonl")
    batch = _batch_options(args)
    ledger = open_ledger(args.ledger)
    (judge,) = _build_judges(spec).values()
    frame = judge_many(judge, items, ledger=ledger, task_type=args.task_type, concurrency=args.concurrency,
                       progress=not args.no_progress, batch=batch)
    counts = _counts(frame)
    # labels only for a run that judged something: a run that judged nothing (endpoint down, stopped) records none
    labels, labels_held = (record_item_labels(ledger, items, human, task_type=args.task_type, scale=scale)
                           if human is not None and counts["scored"] else (0, 0))
    not_recorded = int(frame["ledger_error"].notna().sum()) if "ledger_error" in frame.columns else 0
    ledger_note = frame.attrs.get("ledger") or {}
    recorded = int(ledger_note.get("recorded", counts["scored"] - not_recorded))
    parts = ", ".join(f"{n} {'errors' if status == 'error' else status}" for status, n in counts.items())
    extra = already_note(int(ledger_note.get("already", 0)), labels_held)
    extra += f"; {not_recorded} not recorded (see ledger_error)" if not_recorded else ""
    done = frame.attrs.get("batch") or {}
    if batch is not None and (done.get("submitted") or done.get("collected")):
        extra += (f"; {len(done.get('submitted') or [])} provider batch(es) submitted, "
                  f"{len(done.get('collected') or [])} collected (the batch price)")
    elif batch is not None and counts["scored"]:
        _warn(parser, f"--batch: nothing went through a Batch API: {safe_text(judge.grader_id)} made no call to an "
              "OpenAI-compatible or Anthropic adapter (or every reply came from its cache); its rows were judged "
              "as usual")
    print(
        f"{safe_text(judge.grader_id)}: {len(frame)} rows, {parts}; recorded {recorded} "
        f"judgment(s) and {labels} human label(s) in {safe_text(args.ledger)} under task type "
        f"{safe_text(args.task_type)!r}{extra}"
    )
    if not counts["scored"]:
        errors = frame.loc[frame["status"] != "scored", "error"].dropna().astype(str)
        notes = frame.loc[frame["status"] != "scored", "notes"].dropna().astype(str)
        first = errors.iloc[0] if len(errors) else (notes.iloc[0] if len(notes) else "no reason given")
        unlabelled = "; no label was recorded" if human is not None else ""
        print(f"{parser.prog}: {safe_text(judge.grader_id)} scored no row; first error: {safe_text(first, limit=300)}"
              f"{unlabelled}", file=sys.stderr)
        return 1
    if not_recorded:
        _warn(parser, f"{not_recorded} scored row(s) were not recorded in the ledger: "
              f"{safe_text(frame['ledger_error'].dropna().iloc[0], limit=300)}")
        return 1
    return 0
