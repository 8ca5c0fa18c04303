"""``llm-connect calibrate``: reading a file as it comes, and big runs that restart.

Input preparation, in this order (each step optional):

1. ``--columns NEW=OLD,...`` renames the file's columns to the ones calibrate reads;
2. ``--wide NAME=PATTERN,...`` turns a row holding several models' answers into one row per
   model (``candidate=answer_{model}``: the columns ``answer_gpt4``, ``answer_llama`` give the
   models ``gpt4`` and ``llama``);
3. ``--where EXPR`` keeps the rows for which the user's own pandas expression holds;
4. ``--limit N`` keeps the first N rows, or ``--sample N`` a seeded sample of N (``--seed``),
   kept in input order.

A run writes ``run.json`` (what it read, and how) and keeps the LLM judge's replies in a response
cache, ``OUT/cache`` (on by default; ``--no-cache``), so a repeated or interrupted run pays for
no reply twice; ``--resume`` checks that OUT holds a run on the same data before continuing it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._textsafe import safe_text
from ._common import UsageError

#: The file in OUT that records a run, and the response cache's directory there.
RUN_RECORD = "run.json"
CACHE_DIR = "cache"
_PLACEHOLDER = "{model}"

INPUT_HELP = """\
Reading a file as it comes (applied in this order: --columns, --wide,
--where, then --limit or --sample; the summary says how many rows were used):
  --columns prompt=question,baseline=golden_answer,id=qid
                 rename the file's columns (NEW=OLD) to those calibrate reads
  --wide candidate=answer_{model},human=label_{model}
                 a row holding several models' answers becomes one row per
                 model: the columns answer_gpt4 and answer_llama give the
                 models gpt4 and llama (the candidate pattern finds them; every
                 other pattern must have a column for each); candidate_model
                 is the model, id becomes <id>:<model> (<row>:<model> without
                 an id column; row counts from 0) and source_id keeps the
                 original id; the other columns are copied to each model's row
  --where "improper == False"
                 keep the rows for which this pandas expression holds
                 (DataFrame.eval, python engine; column names with spaces in
                 backticks). It is your own expression run on your own file:
                 '@' and '__' are refused. CSV cells that all read as numbers
                 or true/false are compared as such
  --limit N / --sample N
                 the first N rows / a seeded sample of N rows (--seed), in
                 input order

Big runs: the LLM judge's replies, and an endpoint's embeddings (--embedder
openai:MODEL, text by text), are kept in OUT/cache (a response cache on disk;
keyed on everything that changes a reply; replies only, never an API key), so
running again into the same OUT, after an interruption or with more rows, pays
only for replies not yet received; --no-cache turns it off.
--resume continues the run recorded in OUT/run.json: it refuses an OUT that
holds no run, or a DATA whose contents differ from that run's, and writes
complete outputs.
"""


def add_input_options(p: argparse.ArgumentParser) -> None:
    """The options of :data:`INPUT_HELP` on ``calibrate``'s parser."""
    g = p.add_argument_group("reading the input (in this order: --columns, --wide, --where, --limit/--sample)")
    g.add_argument(
        "--columns",
        metavar="NEW=OLD,...",
        help="rename the file's columns to those calibrate reads, e.g. prompt=question,baseline=golden_answer,id=qid",
    )
    g.add_argument(
        "--wide",
        metavar="NAME=PATTERN,...",
        help="one row per model from a row holding several models' answers, e.g. "
        "candidate=answer_{model},human=label_{model} (candidate_model = the model, id = <id>:<model>)",
    )
    g.add_argument(
        "--where",
        metavar="EXPR",
        help="keep the rows where this pandas expression (your own, on your file) holds, e.g. \"improper == False\"",
    )
    g.add_argument("--limit", metavar="N", help="use only the first N rows (after --where)")
    g.add_argument("--sample", metavar="N", help="use a seeded random sample of N rows (--seed), kept in input order")
    c = p.add_argument_group("big runs")
    c.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the LLM judge's replies in OUT/cache, so a repeated or interrupted run pays for none twice "
        "(default: on; --no-cache turns it off)",
    )
    c.add_argument(
        "--resume",
        action="store_true",
        help="continue the run recorded in OUT (same DATA), reusing its cache; writes complete outputs",
    )


# -- --columns --------------------------------------------------------------------------------------


def _columns_list(frame: Any) -> str:
    return ", ".join(safe_text(c, limit=60) for c in frame.columns)


def _pairs(text: str, option: str, example: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        new, sep, old = part.partition("=")
        if not sep or not new.strip() or not old.strip():
            raise UsageError(f"{option} {part.strip()!r} is not NAME=VALUE; write e.g. {option} {example}")
        pairs.append((new.strip(), old.strip()))
    if not pairs:
        raise UsageError(f"{option} is empty; write e.g. {option} {example}")
    news = [n for n, _ in pairs]
    twice = sorted({n for n in news if news.count(n) > 1})
    if twice:
        raise UsageError(f"{option} names {', '.join(map(repr, twice))} more than once")
    return pairs


def rename_columns(frame: Any, text: str) -> Any:
    """``--columns NEW=OLD,...``: the frame with each OLD column renamed NEW."""
    pairs = _pairs(text, "--columns", "prompt=question,baseline=golden_answer")
    missing = [old for _, old in pairs if old not in frame.columns]
    if missing:
        raise UsageError(
            f"--columns: no column {', '.join(map(repr, missing))} in the file; it has {_columns_list(frame)}"
        )
    renamed = {old for _, old in pairs}
    clash = [new for new, old in pairs if new in frame.columns and new not in renamed and new != old]
    if clash:
        raise UsageError(
            f"--columns: the file already has a column {', '.join(map(repr, clash))}; rename that one too "
            f"(e.g. --columns {clash[0]}=..., original_{clash[0]}={clash[0]}) or pick another source"
        )
    return frame.rename(columns={old: new for new, old in pairs})


# -- --wide ------------------------------------------------------------------------------------------


def _pattern(target: str, pattern: str) -> re.Pattern[str]:
    if pattern.count(_PLACEHOLDER) != 1:
        raise UsageError(
            f"--wide {target}={pattern}: the pattern must hold {_PLACEHOLDER} once, where the model's name is "
            "(e.g. candidate=answer_{model})"
        )
    before, after = pattern.split(_PLACEHOLDER)
    return re.compile(re.escape(before) + "(?P<model>.+)" + re.escape(after))


def wide_to_long(frame: Any, text: str) -> Any:
    """``--wide NAME=PATTERN,...``: one row per input row and model, in input order (a row's models
    in the order of their columns).

    The ``candidate`` pattern finds the models; every other pattern must name a column for each
    model. ``candidate_model`` is the model, ``id`` ``<id>:<model>`` (``<row>:<model>`` without an
    id column) and ``source_id`` the original id; the columns no pattern names are copied.
    """
    import numpy as np
    import pandas as pd

    specs = _pairs(text, "--wide", "candidate=answer_{model},human=label_{model}")
    targets = dict(specs)
    if "candidate" not in targets:
        raise UsageError("--wide needs a candidate pattern, e.g. --wide candidate=answer_{model}")
    found = _pattern("candidate", targets["candidate"])
    models: list[str] = []
    for column in frame.columns:
        m = found.fullmatch(str(column))
        if m and m["model"] not in models:
            models.append(m["model"])
    if not models:
        raise UsageError(
            f"--wide candidate={targets['candidate']}: no column matches; the file has {_columns_list(frame)}"
        )
    sources: dict[str, list[Any]] = {}
    for target, pattern in specs:
        _pattern(target, pattern)
        names = [pattern.replace(_PLACEHOLDER, model) for model in models]
        absent = [n for n in names if n not in frame.columns]
        if absent:
            raise UsageError(
                f"--wide {target}={pattern}: no column {', '.join(map(repr, absent))} for the model(s) the candidate "
                f"pattern found ({', '.join(models)}); the file has {_columns_list(frame)}"
            )
        sources[target] = names
    used = {name for names in sources.values() for name in names}
    kept = [c for c in frame.columns if c not in used]
    made = [*targets, "candidate_model", "source_id"]
    clash = [c for c in made if c in kept and c != "id"]
    if clash:
        raise UsageError(
            f"--wide makes the column(s) {', '.join(map(repr, clash))}, which the file already has; "
            "rename them with --columns (e.g. --columns original_candidate=candidate)"
        )
    base = frame[kept].reset_index(drop=True)
    ids = base["id"] if "id" in base.columns else pd.Series(range(len(base)))
    parts = []
    for k, model in enumerate(models):
        part = base.copy()
        for target, names in sources.items():
            part[target] = frame[names[k]].to_numpy()
        part["candidate_model"] = model
        part["source_id"] = ids.to_numpy()
        part["id"] = [f"{i}:{model}" for i in ids]
        parts.append(part)
    long = pd.concat(parts, ignore_index=True)
    rows = np.tile(np.arange(len(base)), len(models))
    order = np.lexsort((np.repeat(np.arange(len(models)), len(base)), rows))
    long = long.iloc[order].reset_index(drop=True)
    first = ["id", *[c for c in long.columns if c != "id"]]
    return long[first]


# -- --where ------------------------------------------------------------------------------------------


def _typed(frame: Any) -> Any:
    """A copy of a CSV-read frame (all text) where a column whose non-blank cells all read as numbers,
    or all as true/false, holds numbers / booleans (blank cells: missing), for ``--where`` to compare."""
    import pandas as pd

    out = frame.copy()
    for column in frame.columns:
        values = frame[column]
        if not all(isinstance(v, str) for v in values):
            continue
        text = values.str.strip()
        filled = text[text != ""]
        if not len(filled):
            continue
        lower = filled.str.lower()
        if lower.isin(["true", "false"]).all():
            out[column] = text.str.lower().map({"true": True, "false": False})
            continue
        numbers = pd.to_numeric(filled, errors="coerce")
        if numbers.notna().all():
            out[column] = pd.to_numeric(text.where(text != ""), errors="coerce")
    return out


_WHERE_ERRORS = (NameError, SyntaxError, TypeError, ValueError, KeyError, AttributeError, ArithmeticError)


def where_rows(frame: Any, expr: str, *, text_file: bool) -> Any:
    """``--where EXPR``: the rows of ``frame`` for which the expression is true.

    The user's own pandas expression on their own file, evaluated by ``DataFrame.eval`` with the
    python engine; ``@`` (a local variable) and ``__`` (dunder access) are refused. ``text_file``:
    the frame was read from CSV (all text), so numbers and true/false are compared as such.
    """
    import pandas as pd

    if not expr.strip():
        raise UsageError('--where is empty; give a condition on the columns, e.g. --where "improper == False"')
    if "@" in expr or "__" in expr:
        raise UsageError("--where: '@' and '__' are not allowed; write a condition on the columns only")
    view = _typed(frame) if text_file else frame
    try:
        mask = view.eval(expr, engine="python")
    except _WHERE_ERRORS as exc:
        raise UsageError(
            f"--where {expr!r} could not be evaluated ({type(exc).__name__}: {exc}); "
            f"the columns are {_columns_list(frame)} (put a name with spaces in backticks)"
        ) from None
    if not isinstance(mask, pd.Series) or len(mask) != len(frame) or not pd.api.types.is_bool_dtype(mask):
        raise UsageError(
            f"--where {expr!r} is not a true/false condition on each row (e.g. \"improper == False\", "
            "\"candidate_model != 'gpt4'\")"
        )
    return frame[mask.to_numpy()]


# -- --limit / --sample -----------------------------------------------------------------------------


def _count(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{option} must be a whole number of rows, got {text!r}") from None
    if value < 1:
        raise UsageError(f"{option} must be at least 1, got {value}")
    return value


@dataclass
class Selection:
    """How many rows of the file a run used, and why: what the summary says."""

    read: int = 0
    rows: int = 0  # after --wide: one per row of the file and model
    steps: list[str] = field(default_factory=list)
    used: int = 0

    def describe(self) -> str | None:
        """One line, or None when every row of the file was used as it is."""
        if not self.steps:
            return None
        return f"rows: used {self.used} of {self.rows} ({'; '.join(self.steps)})"


def prepare_items(args: argparse.Namespace, data: Path, *, pairs: bool = False) -> tuple[Any, Selection]:
    """Read DATA and apply ``--columns``, ``--wide``, ``--where`` and ``--limit`` / ``--sample``; the item
    frame calibrate reads (indexed 0..n-1) and what was done. ``pairs``: DATA holds pairs
    (``candidate_a``, ``candidate_b``), read as :func:`~llm_connect.calibration._pairwise.pairwise_table`
    reads them (``--wide`` does not apply: a pair already holds two models' answers)."""
    import numpy as np

    from ..calibration import load_items
    from ..calibration._runner import items_table

    if pairs:
        from ..calibration._pairwise import pairwise_table

        if args.wide is not None:
            raise UsageError("--wide does not apply to pairwise data: each row already holds a pair "
                             "(candidate_a, candidate_b); use --columns to name them")
        table: Any = pairwise_table
    else:
        table = items_table
    limit, sample = _count(args.limit, "--limit"), _count(args.sample, "--sample")
    if limit is not None and sample is not None:
        raise UsageError("give --limit or --sample, not both")
    for option in ("columns", "wide", "where"):
        if getattr(args, option) is not None and not str(getattr(args, option)).strip():
            raise UsageError(f"--{option} is empty")
    if not any(getattr(args, o) is not None for o in ("columns", "wide", "where")) and limit is sample is None:
        items = table(load_items(data, items=False)) if pairs else load_items(data)
        return items, Selection(read=len(items), rows=len(items), used=len(items))
    frame = load_items(data, items=False)
    selection = Selection(read=len(frame), rows=len(frame))
    if args.columns is not None:
        frame = rename_columns(frame, args.columns)
    if args.wide is not None:
        frame = wide_to_long(frame, args.wide)
        models = frame["candidate_model"].nunique()
        selection.rows = len(frame)
        selection.steps.append(f"--wide: the file's {selection.read} rows x {models} models")
    if args.where is not None:
        text_file = data.suffix.lower() in (".csv", ".tsv", ".tab", ".txt")
        frame = where_rows(frame, args.where, text_file=text_file)
        selection.steps.append(f"--where: {len(frame)} rows match")
        if not len(frame):
            raise UsageError(f"--where {args.where!r} matches no row; nothing to judge")
    if limit is not None:
        selection.steps.append(f"--limit {limit}: the first {min(limit, len(frame))}")
        frame = frame.iloc[:limit]
    elif sample is not None:
        if sample >= len(frame):
            selection.steps.append(f"--sample {sample}: all {len(frame)}")
        else:
            keep = np.sort(np.random.default_rng(args.seed).choice(len(frame), size=sample, replace=False))
            frame = frame.iloc[keep]
            selection.steps.append(f"--sample {sample} --seed {args.seed}: a random {sample}, in input order")
    items = table(frame.reset_index(drop=True))
    selection.used = len(items)
    return items, selection


# -- the response cache, run.json and --resume -------------------------------------------------------


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_resume(args: argparse.Namespace, data: Path) -> None:
    """With ``--resume``, before anything is written: OUT holds a run (``run.json``) that read the same
    DATA (by content), and the cache is on."""
    if not args.resume:
        return
    if not args.cache:
        raise UsageError("--resume continues a run from its response cache; drop --no-cache")
    record_path = Path(args.out) / RUN_RECORD
    if not record_path.is_file():
        raise UsageError(
            f"--resume: {str(args.out)!r} holds no calibrate run to continue (no {RUN_RECORD}); run without --resume"
        )
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--resume: cannot read {str(record_path)!r} ({exc}); run without --resume") from None
    if not isinstance(record, dict) or record.get("data_sha256") != _digest(data):
        raise UsageError(
            f"--resume: {str(data)!r} is not the file the run in {str(args.out)!r} read (its contents differ); "
            "give that file, or run without --resume (into a new --out to keep the old outputs)"
        )


def open_run(args: argparse.Namespace, out: Path, data: Path, selection: Selection) -> Any:
    """Once OUT is checked: write ``run.json`` and open the response cache (``None`` with ``--no-cache``)."""
    record = {
        "command": "calibrate",
        "data": str(data),
        "data_sha256": _digest(data),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "judges": args.judges,
        "llm": args.llm,
        "rows_used": selection.used,
        "rows_read": selection.read,
        "selection": {o: getattr(args, o) for o in ("columns", "wide", "where", "limit", "sample", "seed")},
        "resumed": bool(args.resume),
        "cache": bool(args.cache),
    }
    path = out / RUN_RECORD
    tmp = out / f".{RUN_RECORD}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    judges = [j.strip() for j in args.judges.split(",")]
    remote_embedder = "embedding" in judges and str(getattr(args, "embedder", "local")).startswith("openai:")
    if not args.cache or ("llm" not in judges and not remote_embedder):
        return None  # the LLM judge's replies and an endpoint's embeddings are cached; local vectors cost nothing
    from ..adapters import ResponseCache

    directory = out / CACHE_DIR
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"cannot open the response cache {str(directory)!r}: it is a file; move it or pass --no-cache")
    try:
        return ResponseCache(directory)
    except (OSError, ValueError, sqlite3.Error) as exc:  # an unwritable directory, a damaged database
        raise UsageError(f"cannot open the response cache {str(directory)!r}: {exc}; pass --no-cache") from None


def close_run(cache: Any) -> str | None:
    """Close the cache; one line on what it saved, or None without a cache or LLM calls."""
    if cache is None:
        return None
    hits, misses = cache.hits, cache.misses
    cache.close()
    if not hits and not misses:
        return None
    # a reply is an LLM judge's answer or an endpoint's embedding of one text
    return f"response cache: {hits} repl{'y' if hits == 1 else 'ies'} reused, {misses} requested ({cache.directory})"
