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
    g.add_argument("--sep", metavar="SEP", default=None,
                   help="the column separator of a CSV file (default: sniffed from the file: , ; tab or |)")
    g.add_argument("--sample", metavar="N", help="use a seeded random sample of N rows (--seed), kept in input order")
    add_per_turn_option(g)
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


def prepare_items(args: argparse.Namespace, data: Path, *, pairs: bool = False,
                  reference: bool = True) -> tuple[Any, Selection]:
    """Read DATA and apply ``--columns``, ``--wide``, ``--where`` and ``--limit`` / ``--sample``; the item
    frame calibrate reads (indexed 0..n-1) and what was done. ``pairs``: DATA holds pairs
    (``candidate_a``, ``candidate_b``), read as :func:`~llm_connect.calibration._pairwise.pairwise_table`
    reads them (``--wide`` does not apply: a pair already holds two models' answers)."""
    import numpy as np

    from ..calibration._runner import items_table

    if pairs:
        from ..calibration._pairwise import pairwise_table

        if args.wide is not None:
            raise UsageError("--wide does not apply to pairwise data: each row already holds a pair "
                             "(candidate_a, candidate_b); use --columns to name them")
        table: Any = pairwise_table
    else:  # reference=False: no judge of the command compares with a reference (no baseline column needed)
        def table(frame: Any) -> Any:
            return items_table(frame, baseline=reference)
    limit, sample = _count(args.limit, "--limit"), _count(args.sample, "--sample")
    if limit is not None and sample is not None:
        raise UsageError("give --limit or --sample, not both")
    for option in ("columns", "wide", "where"):
        if getattr(args, option) is not None and not str(getattr(args, option)).strip():
            raise UsageError(f"--{option} is empty")
    if not any(getattr(args, o) is not None for o in ("columns", "wide", "where")) and limit is sample is None:
        frame = per_turn_items(args, read_frame(data, getattr(args, "sep", None)), data)
        if not pairs:
            check_item_columns(frame, data)
        items = table(frame)
        return items, Selection(read=len(items), rows=len(items), used=len(items))
    frame = read_frame(data, getattr(args, "sep", None))
    selection = Selection(read=len(frame), rows=len(frame))
    if args.columns is not None:
        frame = rename_columns(frame, args.columns)
    if getattr(args, "per_turn", False):
        frame = per_turn_items(args, frame, data)
        selection.rows = len(frame)
        selection.steps.append(f"--per-turn: {len(frame)} assistant replies of {selection.read} conversations")
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
    if not pairs:
        check_item_columns(frame, data, renamed=args.columns is not None)
    items = table(frame.reset_index(drop=True))
    selection.used = len(items)
    return items, selection


def add_per_turn_option(p: Any) -> None:
    """``--per-turn``: DATA holds conversations, one item per assistant reply."""
    p.add_argument("--per-turn", action="store_true",
                   help="DATA holds conversations (JSON Lines with a 'messages' list of OpenAI chat messages): judge "
                        "every assistant reply as its own item, with the messages before it, its conversation_id and "
                        "its turn (0, 1, ...)")


def per_turn_items(args: argparse.Namespace, frame: Any, data: Path) -> Any:
    """``frame`` split into one item per assistant reply with ``--per-turn``
    (:func:`~llm_connect.conversations.per_turn`); as it is without. A file without a ``messages`` column is a
    :class:`UsageError`."""
    if not getattr(args, "per_turn", False):
        return frame
    from ..conversations import per_turn
    from ..errors import ValidationError

    if "messages" not in frame.columns:
        raise UsageError(f"--per-turn reads conversations, but {data.name} has no 'messages' column (it has: "
                         f"{_columns_list(frame)}); give JSON Lines of {{\"messages\": [...]}} objects, or drop "
                         "--per-turn")
    try:
        items = per_turn(frame)
    except ValidationError as exc:
        raise UsageError(f"--per-turn: {data.name}: {exc}") from None
    if not len(items):
        raise UsageError(f"--per-turn: {data.name} holds no assistant reply to judge")
    return items


# -- reading the file: its separator, its columns, its human labels -------------------------------------

_TEXT_SUFFIXES = (".csv", ".tsv", ".tab", ".txt")
_SEPARATORS = ",;\t|"
_SEP_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}


def _sep_option(sep: str) -> str:
    named = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|"}
    sep = named.get(sep.strip().lower(), sep) if sep.strip() else sep
    if len(sep) != 1 or sep in "\"\n\r":
        raise UsageError(f"--sep {sep!r} is not one separator character; give e.g. --sep ';' or --sep tab")
    return sep


def read_frame(data: Path, sep: str | None = None) -> Any:
    """DATA as a table, as :func:`~llm_connect.items.load_items` reads it (``items=False``), but a
    CSV file's separator is ``sep`` (``--sep``) or sniffed (:class:`csv.Sniffer`, among ``, ; tab |``):
    a semicolon- or tab-separated ``.csv`` is read as such. A file that still reads as one column whose
    name holds a separator is a :class:`UsageError` naming ``--sep``."""
    import csv

    import pandas as pd

    from ..items import load_items

    suffix = data.suffix.lower()
    default = "\t" if suffix in (".tsv", ".tab") else ","
    if suffix not in _TEXT_SUFFIXES or not data.is_file():
        return load_items(data, items=False)
    if sep is None:
        try:
            with open(data, encoding="utf-8-sig", newline="") as f:
                sample = f.read(64 * 1024)
            sep = csv.Sniffer().sniff(sample.split("\n", 1)[0] or sample, delimiters=_SEPARATORS).delimiter
        except (csv.Error, OSError, UnicodeDecodeError):
            sep = default
    else:
        sep = _sep_option(sep)
    if sep == default:
        frame = load_items(data, items=False)
    else:
        options: dict[str, Any] = {"sep": sep, "dtype": str, "keep_default_na": False, "na_values": [],
                                   "encoding": "utf-8-sig"}
        try:
            header = pd.read_csv(data, header=None, nrows=1, **options)
            names = [str(c) for c in header.iloc[0].tolist()] if len(header) else []
            twice = sorted({c for c in names if names.count(c) > 1})
            if twice:
                raise UsageError(f"{data.name}: the header names the column(s) {', '.join(map(repr, twice))} more "
                                 "than once; rename them so each column has its own name")
            frame = pd.read_csv(data, **options)
        except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError) as exc:
            if isinstance(exc, UsageError):
                raise
            raise UsageError(f"cannot read {data.name} with --sep {sep!r}: {exc}") from None
        if not len(frame):
            raise UsageError(f"{data.name} has no items (no rows after the header)")
    if len(frame.columns) == 1:
        name = str(frame.columns[0])
        held = [s for s in _SEPARATORS if s in name and s != sep]
        if held:
            raise UsageError(
                f"{data.name} reads as one column {safe_text(name, limit=60)!r}: its separator looks like a "
                f"{_SEP_NAMES[held[0]]}; pass --sep {held[0]!r}" + (" (or --sep tab)" if held[0] == "\t" else "")
            )
    return frame


#: Names people give the columns calibrate and grade read, for the ``--columns`` hint.
_COLUMN_SYNONYMS = {
    "prompt": ("question", "query", "input", "instruction", "prompt_text", "q", "context"),
    "baseline": ("reference", "golden_answer", "gold_answer", "answer", "answers", "expected", "expected_answer",
                 "target", "ground_truth", "gold", "reference_answer", "label_text"),
    "candidate": ("response", "output", "prediction", "predicted", "model_answer", "generated", "completion",
                  "model_output", "candidate_answer", "pred"),
}


def check_item_columns(frame: Any, data: Path, *, renamed: bool = False) -> None:
    """A :class:`UsageError` when ``frame`` lacks the prompt, baseline or candidate column, suggesting
    the ``--columns prompt=question,...`` that would name them (from common names, else a placeholder)."""
    import difflib

    from ..calibration._runner import COLUMN_ALIASES, REQUIRED_COLUMNS

    present = [str(c) for c in frame.columns]
    have = set(present) | {new for old, new in COLUMN_ALIASES.items() if old in present}
    # a conversation item's question is its last user message, and a reference-free judge needs no baseline
    required = ("candidate",) if "messages" in have else REQUIRED_COLUMNS
    missing = [c for c in required if c not in have]
    if not missing:
        return
    used = set(REQUIRED_COLUMNS) | {"id", "human", "candidate_model"}
    pairs = []
    for column in missing:
        lower = {c.lower(): c for c in present if c not in used}
        guess = next((lower[s] for s in _COLUMN_SYNONYMS[column] if s in lower), None)
        if guess is None:
            close = difflib.get_close_matches(column, [c for c in present if c not in used], n=1, cutoff=0.6)
            guess = close[0] if close else None
        if guess is not None:
            used.add(guess)
        pairs.append(f"{column}={guess if guess is not None else 'YOUR_COLUMN'}")
    shown = ", ".join(safe_text(c, limit=40) for c in present[:20]) + (", ..." if len(present) > 20 else "")
    after = " after --columns" if renamed else ""
    raise UsageError(
        f"{data.name} has no {', '.join(missing)} column{'s' if len(missing) > 1 else ''}{after} (it has: {shown}); "
        f"name the file's columns with --columns {safe_text(','.join(pairs), limit=200)}"
    )


def apply_candidate_model(parser: argparse.ArgumentParser, items: Any, name: str | None, data: Path, *,
                          recorded: bool = True) -> Any:
    """``--candidate-model NAME``: the model that wrote the candidates, set as ``candidate_model`` on every
    row that names none (a missing or blank cell, or every row when DATA has no such column); rows that name
    their model keep it. Without the option, one warning line when rows name no model (``recorded``: their
    judgments go to a ledger, where they are recorded under model ``unknown``, which routing cannot tell
    from another model's)."""
    import sys

    from ..items import candidate_names

    column = items["candidate_model"].tolist() if "candidate_model" in items.columns else [None] * len(items)
    unnamed = [i for i, m in enumerate(column) if candidate_names(m)[1] == "unknown"]
    if name is not None:
        if not name.strip():
            raise UsageError("--candidate-model is empty; name the model that wrote the candidates, e.g. gpt-4o-mini")
        if not unnamed:
            raise UsageError(f"every row of {data.name} names its model in candidate_model; drop --candidate-model "
                             "(or rename that column with --columns to set one model for all)")
        items, blank = items.copy(), set(unnamed)
        items["candidate_model"] = [name.strip() if i in blank else m for i, m in enumerate(column)]
        return items
    if unnamed and recorded:
        which = "has no candidate_model column" if "candidate_model" not in items.columns else (
            f"names no candidate_model on {len(unnamed)} of its {len(items)} rows")
        print(f"{parser.prog}: warning: {data.name} {which}: those judgments are recorded under model 'unknown', "
              "so routing cannot tell the models that wrote the answers apart; pass --candidate-model NAME (or add "
              "the column)", file=sys.stderr)
    return items


#: Column names that often hold the human verdict.
HUMAN_CANDIDATES = ("label", "labels", "gold_label", "human_label", "human_labels", "gold", "correct", "is_correct",
                    "iscorrect", "correctness", "verdict", "judgment", "judgement", "annotation", "rating", "score",
                    "accepted", "is_accepted", "acceptable", "y", "target")


def human_candidates(items: Any) -> list[str]:
    """The columns of ``items`` named like a human verdict (:data:`HUMAN_CANDIDATES`, any case) whose
    values read as labels (booleans, yes/no, 0..1)."""
    from ..stats.labels import parse_labels

    out = []
    for column in items.columns:
        if str(column).strip().lower() not in HUMAN_CANDIDATES:
            continue
        try:
            parse_labels(items[column].tolist(), column=str(column))
        except (ValueError, TypeError):
            continue
        out.append(str(column))
    return out


def find_human(parser: argparse.ArgumentParser, items: Any, given: str | None, data: Path) -> str | None:
    """The human label column: ``given`` (``--human``; a missing one is a :class:`UsageError`), else
    ``human`` when the file has it, else None -- and then, when columns look like labels, a warning that
    names them (``--human label``), so a label column is never silently ignored."""
    if given is not None:
        if given not in items.columns:
            raise UsageError(f"--human: no column {given!r} in {data.name}; it has "
                             f"{', '.join(safe_text(c, limit=40) for c in items.columns)}")
        return given
    if "human" in items.columns:
        return "human"
    warn_no_human(parser, items)
    return None


def warn_no_human(parser: argparse.ArgumentParser, items: Any) -> None:
    """One warning line when no human column was named or found but some column looks like one."""
    import sys

    found = human_candidates(items)
    if found:
        print(
            f"{parser.prog}: warning: no human label column found (looked for 'human'); "
            f"{', '.join(repr(c) for c in found)} look{'s' if len(found) == 1 else ''} like labels: pass "
            f"--human {found[0]} to compare with them",
            file=sys.stderr,
        )


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
