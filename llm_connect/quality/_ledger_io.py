"""The ledger's I/O: what a line of a quality ledger is, and every way of reading one.

The quality ledger is a JSON Lines file; each line is one
``QualityObservation.to_dict()``. This module is the one place that writes
such a line, splits a file into lines and reads lines back, for the ledger
itself and for :func:`llm_connect.frames.ledger_frame`:

- :func:`encode_line`: an observation as its line (``json.dumps`` of
  ``to_dict()``, compact and UTF-8, built without the intermediate dict).
- :func:`parse_line`: the observation on one line, or one of
  :data:`MALFORMED`. A fast path accepts only lines the full
  :meth:`QualityObservation.from_dict` would accept, with an equal result,
  and hands every other line to ``from_dict`` itself.
- :func:`scan_lines`: the lines of an open file, streamed with bounded reads
  (the ledger's readers and ``prune_before``), and :func:`line_blocks`: the
  same lines in big blocks (the columnar reader). Both split on ``\\n`` only,
  skip blank lines, and count a line longer than ``max_line_bytes`` (newline
  not counted; default :data:`MAX_LINE_BYTES`) as malformed without ever
  holding it whole.
- :func:`read_columns`: the valid observations of a file as columns.

How the columnar reader stays fast and exact
--------------------------------------------
The file is split into lines by :func:`line_blocks` and read in blocks. Each
block is parsed by pyarrow's JSON reader against the observation schema and
validated column-wise with rules at least as strict as
:meth:`QualityObservation.from_dict`. A row those rules do not clear (an odd
timestamp, a nested tag), and a line pyarrow cannot read (invalid JSON or
UTF-8, a wrong type: pyarrow names the row and reading resumes after it), go
through :func:`parse_line` -- so what counts as malformed is decided by the
same code for every reader. Tags whose type changes from row to row are read
with ``json.loads``, as :func:`parse_line` reads them. A JSON escape of a lone
surrogate (``"\\ud800"``) fails pyarrow's reader, so its line goes to
:func:`parse_line`, which counts it as malformed. With the ``"columns"`` tag
layout a null tag value reads as absent (arrow shows them alike); ``"dicts"``
keeps every tag exactly.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ._observation import TAGS_MAX_DEPTH, QualityObservation, has_lone_surrogate

__all__ = [
    "FLOAT_FIELDS",
    "INT_FIELDS",
    "MALFORMED",
    "MAX_LINE_BYTES",
    "TEXT_FIELDS",
    "ColumnBlock",
    "TagLayout",
    "arrow_kind",
    "encode_line",
    "line_blocks",
    "observation_columns",
    "parse_line",
    "read_columns",
    "scan_lines",
    "temp_file_beside",
]

@contextlib.contextmanager
def temp_file_beside(directory: str | os.PathLike[str], prefix: str) -> Iterator[tuple[int, str]]:
    """A new temporary file ``<prefix>XXXXXXXX.tmp`` in ``directory`` (its descriptor and name), removed
    again when the block raises: the first half of every atomic replace (write it, ``os.replace`` it
    over the target inside the block). Used by the ledger's prune and by the judge-card registry."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    try:
        yield fd, name
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


#: The longest ledger line (in bytes, newline not counted) readers parse; longer lines are malformed.
MAX_LINE_BYTES = 1 << 20

# What a malformed line may raise while being parsed; anything else is a bug.
MALFORMED = (ValueError, TypeError, UnicodeDecodeError, RecursionError, OverflowError)

#: The observation's fields by kind: non-blank text, finite non-negative floats, non-negative ints.
TEXT_FIELDS = ("task_type", "adapter_id", "model_id")
FLOAT_FIELDS = ("quality_score", "cost_usd", "latency_ms")
INT_FIELDS = ("tokens_in", "tokens_out")


# -- one line: writing and parsing ------------------------------------------------

_encode_str = getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
_encode_tags = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_float_repr = float.__repr__


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Flush a directory's entries (a rename or a new file in it) to disk; best effort (some file systems
    cannot open or sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def encode_line(o: QualityObservation) -> str:
    """``json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False)``, byte for byte, without the dict."""
    if type(o) is not QualityObservation:  # a subclass may have its own to_dict
        return json.dumps(o.to_dict(), separators=(",", ":"), ensure_ascii=False)
    base = o.baseline_adapter_id
    return (
        f'{{"task_type":{_encode_str(o.task_type)},"adapter_id":{_encode_str(o.adapter_id)},'
        f'"model_id":{_encode_str(o.model_id)},"cost_usd":{_float_repr(o.cost_usd)},'
        f'"quality_score":{_float_repr(o.quality_score)},"latency_ms":{_float_repr(o.latency_ms)},'
        f'"tokens_in":{int.__repr__(o.tokens_in)},"tokens_out":{int.__repr__(o.tokens_out)},'
        f'"baseline_adapter_id":{"null" if base is None else _encode_str(base)},'
        f'"recorded_at":"{o.recorded_at.isoformat()}","tags":{_encode_tags(o.tags) if o.tags else "{}"}}}'
    )


_raw_decode = json.JSONDecoder().raw_decode
_new = object.__new__


def _finite_json(value: Any, level: int = 1) -> bool:
    """True when no float inside ``value`` (parsed JSON, at nesting ``level``) is NaN or infinite and no
    object or list nests deeper than :data:`TAGS_MAX_DEPTH` (which ``from_dict`` refuses)."""
    t = type(value)
    if t is float:
        return value - value == 0.0
    if t is dict:
        return level <= TAGS_MAX_DEPTH and all(_finite_json(v, level + 1) for v in value.values())
    if t is list:
        return level <= TAGS_MAX_DEPTH and all(_finite_json(v, level + 1) for v in value)
    return True


def _fast_observation(data: Any) -> QualityObservation | None:
    """The observation ``from_dict(data)`` gives, for the common shape of a ledger line; else ``None``.

    Accepts only what ``from_dict`` accepts, with an equal result: anything
    unusual (ints where floats are written, a non-UTC offset, NaN in the tags,
    a missing field...) returns ``None`` and the caller asks ``from_dict``.
    """
    if type(data) is not dict:
        return None
    get = data.get
    task_type, adapter_id, model_id = get("task_type"), get("adapter_id"), get("model_id")
    cost, quality, latency = get("cost_usd"), get("quality_score"), get("latency_ms")
    tokens_in, tokens_out = get("tokens_in"), get("tokens_out")
    base, stamp, tags = get("baseline_adapter_id"), get("recorded_at"), get("tags", _MISSING)
    if not (
        type(task_type) is str
        and type(adapter_id) is str
        and type(model_id) is str
        and type(cost) is float
        and type(quality) is float
        and type(latency) is float
        and type(tokens_in) is int
        and type(tokens_out) is int
        and type(stamp) is str
        and task_type.strip()
        and adapter_id.strip()
        and model_id.strip()
        and 0.0 <= quality <= 1.0
        and 0.0 <= cost < math.inf
        and 0.0 <= latency < math.inf
        and tokens_in >= 0
        and tokens_out >= 0
        and (base is None or (type(base) is str and base.strip()))
    ):
        return None
    if tags is _MISSING or tags is None:
        tags = {}
    elif type(tags) is not dict or not _finite_json(tags):
        return None
    try:
        recorded_at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    tz = recorded_at.tzinfo
    if tz is None:
        recorded_at = recorded_at.replace(tzinfo=UTC)
    elif tz is not UTC:
        return None
    obs = _new(QualityObservation)
    obs.__dict__.update(
        task_type=task_type,
        adapter_id=adapter_id,
        model_id=model_id,
        cost_usd=cost,
        quality_score=quality,
        latency_ms=latency,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        baseline_adapter_id=base,
        recorded_at=recorded_at,
        tags=tags,
    )
    return obs


_MISSING: Any = object()
_JSON_WS = " \t\n\r"


def parse_line(raw: bytes) -> QualityObservation:
    """The observation on one ledger line; raises one of ``MALFORMED`` when it holds none."""
    try:
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):  # json.loads(bytes) drops a leading UTF-8 BOM
            text = text[1:]
        text = text.strip(_JSON_WS)
        data, end = _raw_decode(text)
        if end == len(text):
            obs = _fast_observation(data)
            # Only a \u escape can put a lone surrogate in a decoded string (strict UTF-8 refuses the raw bytes).
            if obs is not None and (b"\\u" not in raw or not has_lone_surrogate(obs)):
                return obs
    except (ValueError, RecursionError):
        pass
    # Everything else goes the full way, with its exact errors.
    return QualityObservation.from_dict(json.loads(raw))


# -- splitting a file into lines ----------------------------------------------------

_SKIP_BYTES = 1 << 16  # the chunk an over-long line is read (and, by prune, copied) in


def _skip_long_line(readline: Any, head: bytes, spill: Any) -> bool:
    """Consume the rest of an over-long line whose first ``head`` bytes were read, in bounded chunks.

    Every chunk goes to ``spill`` (when given) as it is read. Returns whether
    the whole line was blank.
    """
    blank = head.isspace()
    if spill is not None:
        spill(head)
    while True:
        chunk = readline(_SKIP_BYTES)
        if not chunk:
            return blank
        if spill is not None:
            spill(chunk)
        if blank and not chunk.isspace():
            blank = False
        if chunk[-1] == 10:  # b"\n"
            return blank


def scan_lines(
    handle: Any, max_line_bytes: int = MAX_LINE_BYTES, spill: Any = None
) -> Iterator[tuple[QualityObservation | None, bytes | None]]:
    """``(observation or None if malformed, raw line)`` for every non-blank line of an open binary file.

    Streams with ``readline(max_line_bytes + 1)``, in constant memory; ``raw``
    keeps its newline. An over-long line yields ``(None, None)``: it is read in
    bounded chunks, never held whole, and its bytes go to ``spill`` (when
    given) as they are read, so ``prune_before`` can copy it unchanged.
    """
    readline = handle.readline
    limit = max_line_bytes + 1
    while True:
        raw = readline(limit)
        if not raw:
            return
        if len(raw) == limit and raw[-1] != 10:  # no newline within the cap: an over-long line
            if not _skip_long_line(readline, raw, spill):
                yield None, None
            continue
        if raw.isspace():
            continue
        try:
            yield parse_line(raw), raw
        except MALFORMED:
            yield None, raw


_BLOCK_LINES = 1 << 14  # lines handed to arrow at once
_READ_BYTES = 64 << 20
_NON_SPACE = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.isspace() / bytes.strip() do not count as blank


def line_blocks(
    path: str | Path,
    max_line_bytes: int = MAX_LINE_BYTES,
    block_lines: int = _BLOCK_LINES,
    read_bytes: int = _READ_BYTES,
) -> Iterator[tuple[list[bytes], int]]:
    """``(lines, over)``: the non-blank lines of the file in blocks, split exactly as :func:`scan_lines`
    splits them (on ``\\n``), and how many non-blank lines up to the block's end were longer than
    ``max_line_bytes`` (newline not counted): those are malformed. An over-long line is skipped
    without ever being copied, so memory stays near ``2 * read_bytes`` however long a line is."""
    cap = max_line_bytes
    with open(path, "rb") as handle:
        rest = b""  # the start of a line that continues in the next read, at most ``cap`` bytes
        skipping = False  # inside an over-long line whose start was dropped
        skip_blank = True  # ... and all of it seen so far is whitespace
        block: list[bytes] = []
        over = 0
        while True:
            chunk = handle.read(read_bytes)
            if not chunk:
                break
            start = 0
            if skipping:  # rest is empty
                nl = chunk.find(b"\n")
                if skip_blank and _NON_SPACE.search(chunk, 0, len(chunk) if nl < 0 else nl):
                    skip_blank = False
                if nl < 0:
                    continue
                over += not skip_blank
                skipping = False
                start = nl + 1
            data = rest + chunk if rest else chunk
            del chunk
            cut = data.rfind(b"\n", start)
            if cut < 0:
                lines: list[bytes] = []
                tail = start
            elif len(data) - cut - 1 > cap:
                lines = data[start:cut].split(b"\n")
                tail = cut + 1
            else:
                lines = (data[start:] if start else data).split(b"\n")
                rest = lines.pop()
                tail = -1
            if tail >= 0:
                if len(data) - tail > cap:  # an over-long line starts here: skip to its end, never copy it
                    skipping, skip_blank, rest = True, not _NON_SPACE.search(data, tail), b""
                else:
                    rest = data[tail:] if tail else data
            del data
            for line in lines:
                if not line or line.isspace():
                    continue
                if len(line) > cap:
                    over += 1
                    continue
                block.append(line)
                if len(block) >= block_lines:
                    yield block, over
                    block, over = [], 0
        if skipping:
            over += not skip_blank
        elif rest and not rest.isspace():
            block.append(rest)  # the last line, without a newline (at most ``cap`` bytes)
        if block or over:
            yield block, over


# -- many lines as columns: pyarrow + column-wise validation ---------------------------------

# What ``QualityObservation.to_dict`` writes: UTC, seconds, optional microseconds.
_CANONICAL_TS = (
    r"^(?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{6})?\+00:00$"
)
_MIN_ARROW = 16  # smaller ranges go straight to parse_line
_MAX_RESTARTS = 64  # arrow failures tolerated in one block before the rest of it goes to parse_line
_MAX_SINGLE_BLOCK = 1 << 30  # arrow reports error rows relative to its internal block: keep one block

#: How a :class:`ColumnBlock` holds tags: one column per key (a null value reads as absent), or one dict per row.
TagLayout = Literal["columns", "dicts"]


def _arrow_schema() -> Any:
    import pyarrow as pa

    fields = [(name, pa.string()) for name in (*TEXT_FIELDS, "baseline_adapter_id", "recorded_at")]
    fields += [(name, pa.float64()) for name in FLOAT_FIELDS]
    fields += [(name, pa.int64()) for name in INT_FIELDS]
    return pa.schema(fields)


def arrow_kind(t: Any) -> str:
    """An arrow type as the kind a column of tags may have: bool, int64, double, string, null or complex."""
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_int64(t):
        return "int64"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_null(t):
        return "null"
    return "complex"


_ERROR_ROW = re.compile(r"\bin row (\d+)\b")
_ERROR_FIELD = re.compile(r"Column\(/([^/)]*)")


def _try_arrow(lines: Sequence[bytes], *, with_tags: bool = True) -> tuple[Any, int | None, str | None]:
    """``(table, None, None)``, or ``(None, row, field)`` of the first error where arrow names them.

    ``with_tags=False`` reads only the observation's own fields (other keys are
    skipped), for blocks whose tags change type from row to row.
    """
    import pyarrow as pa
    import pyarrow.json as pj

    payload = b"\n".join(lines)
    single = len(payload) < _MAX_SINGLE_BLOCK
    try:
        table = pj.read_json(
            io.BytesIO(payload),
            read_options=pj.ReadOptions(use_threads=True, block_size=len(payload) + 1 if single else 8 << 20),
            parse_options=pj.ParseOptions(
                explicit_schema=_arrow_schema(), unexpected_field_behavior="infer" if with_tags else "ignore"
            ),
        )
    except (pa.ArrowException, UnicodeDecodeError, ValueError) as exc:
        text = str(exc)
        row = _ERROR_ROW.search(text) if single else None
        field = _ERROR_FIELD.search(text)
        return None, int(row.group(1)) if row else None, field.group(1) if field else None
    if table.num_rows != len(lines):  # e.g. two objects on one line
        return None, None, None
    return table, None, None


def _json_tags(lines: Sequence[bytes], rows: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Each row's tags read with ``json.loads``, as the ledger reads them; and which rows have valid ones."""
    out: list[dict[str, Any]] = []
    ok = np.ones(len(rows), dtype=bool)
    for j, row in enumerate(rows):
        try:
            tags = json.loads(lines[row]).get("tags")
        except MALFORMED:  # let parse_line decide about this line
            tags = "unreadable"
        if tags is None:
            tags = {}
        if not isinstance(tags, dict) or not _finite_json(tags):
            ok[j] = False
            tags = {}
        out.append(tags)
    return out, ok


def _strip_ok(column: Any, *, nullable: bool) -> np.ndarray:
    """Rows whose string is non-blank by Python's own ``str.strip`` (checked on the distinct values)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks())
    good = np.array([bool(v.strip()) for v in encoded.dictionary.to_pylist()] + [nullable], dtype=bool)
    idx = encoded.indices.fill_null(len(good) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
    return good[idx]


def _valid_numbers(table: Any) -> np.ndarray:
    ok = np.ones(table.num_rows, dtype=bool)
    for name in FLOAT_FIELDS:
        col = table.column(name).to_numpy()  # nulls become NaN
        with np.errstate(invalid="ignore"):
            good = np.isfinite(col) & (col >= 0)
            if name == "quality_score":
                good &= col <= 1.0
        ok &= good
    for name in INT_FIELDS:
        col = table.column(name)
        ok &= ~col.is_null().to_numpy(zero_copy_only=False)
        ok &= col.fill_null(-1).to_numpy() >= 0
    return ok


def _timestamps(column: Any) -> tuple[np.ndarray, Any]:
    """(rows with a canonical, valid timestamp; the parsed timestamp[us, UTC] array, null elsewhere)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = column.combine_chunks()
    canonical = pc.fill_null(pc.match_substring_regex(col, _CANONICAL_TS), False)
    ok = canonical.to_numpy(zero_copy_only=False)
    kept = pc.if_else(canonical, col, pa.scalar(None, pa.string()))
    target = pa.timestamp("us", tz="UTC")
    try:
        parsed = pc.cast(kept, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # e.g. 2024-02-30: parse one by one
        values = []
        for s in kept.to_pylist():
            try:
                values.append(None if s is None else datetime.fromisoformat(s).astimezone(UTC))
            except ValueError:
                values.append(None)
        parsed = pa.array(values, type=target)
        ok &= ~parsed.is_null().to_numpy(zero_copy_only=False)
    return ok, parsed


def _tag_children(table: Any) -> tuple[list[tuple[str, Any, str]], np.ndarray, np.ndarray, np.ndarray]:
    """The ``tags`` struct's children ``(key, array, kind)``; rows a complex or non-finite tag value
    sends to parse_line; rows with a null child (an absent key or a null value: arrow
    shows them alike); rows whose ``tags`` is present."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    slow = np.zeros(n, dtype=bool)
    has_null = np.zeros(n, dtype=bool)
    if "tags" not in table.column_names:
        return [], slow, has_null, np.zeros(n, dtype=bool)
    tags = table.column("tags").combine_chunks()
    present = ~tags.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_null(tags.type):
        return [], slow, has_null, present
    if not pa.types.is_struct(tags.type):  # only when every row's tags is one non-object type
        return [], present.copy(), has_null, present
    children = []
    for i in range(tags.type.num_fields):
        key = tags.type.field(i).name
        child = pc.struct_field(tags, [i])
        kind = arrow_kind(child.type)
        nulls = child.is_null().to_numpy(zero_copy_only=False)
        has_null |= present & nulls
        if kind == "complex":
            slow |= ~nulls
        elif kind == "double":
            with np.errstate(invalid="ignore"):
                slow |= ~nulls & ~np.isfinite(child.to_numpy(zero_copy_only=False))
        children.append((key, child, kind))
    return children, slow, has_null, present


@dataclass
class ColumnBlock:
    """Valid observations as columns: their ordinals among the file's lines (``index``, for ordering),
    ``columns`` (field name -> arrow array or list of Python values: every field but ``tags``, with
    ``recorded_at`` a UTC timestamp) and the tags (``key -> arrow array or list`` in the ``"columns"``
    layout, one dict per row in ``"dicts"``)."""

    index: np.ndarray
    columns: dict[str, Any]
    tags: dict[str, Any] | list[dict[str, Any]]


def _arrow_block(
    lines: Sequence[bytes], table: Any, tags: TagLayout, base: int, *, with_tags: bool = True
) -> tuple[ColumnBlock | None, np.ndarray]:
    """Validate ``table`` column-wise; returns the rows that pass and the row numbers that do not."""
    import pyarrow as pa

    ok = _valid_numbers(table)
    for name in TEXT_FIELDS:
        ok &= _strip_ok(table.column(name), nullable=False)
    ok &= _strip_ok(table.column("baseline_adapter_id"), nullable=True)
    ts_ok, ts = _timestamps(table.column("recorded_at"))
    ok &= ts_ok
    parsed: list[dict[str, Any]] | None = None
    if with_tags:
        children, slow_tags, null_tags, present = _tag_children(table)
        ok &= ~slow_tags
    else:  # arrow skipped the tags: read them from the lines of the rows that passed so far
        candidates = np.flatnonzero(ok)
        parsed_all, tags_ok = _json_tags(lines, candidates)
        ok[candidates[~tags_ok]] = False
        parsed = [t for t, good in zip(parsed_all, tags_ok, strict=True) if good]
    fast = np.flatnonzero(ok)
    rejected = np.flatnonzero(~ok)
    if len(fast) == 0:
        return None, rejected
    idx = pa.array(fast)
    columns: dict[str, Any] = {"recorded_at": ts.take(idx)}
    for name in (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS):
        columns[name] = table.column(name).combine_chunks().take(idx)
    part_tags: dict[str, Any] | list[dict[str, Any]]
    if parsed is not None:
        if tags == "dicts":
            part_tags = parsed
        else:
            keys: dict[str, None] = {}
            for t in parsed:
                keys.update(dict.fromkeys(t))
            part_tags = {k: [t.get(k) for t in parsed] for k in keys}
    elif tags == "dicts":
        part_tags = _tag_dicts(lines, fast, children, null_tags, present)
    else:
        part_tags = {key: child.take(idx) for key, child, kind in children if kind != "null"}
    return ColumnBlock(fast + base, columns, part_tags), rejected


def _tag_dicts(
    lines: Sequence[bytes],
    fast: np.ndarray,
    children: list[tuple[str, Any, str]],
    null_tags: np.ndarray,
    present: np.ndarray,
) -> list[dict[str, Any]]:
    """Each fast row's tags as the exact dict the ledger would build.

    Arrow shows an absent key and a ``null`` value alike. A row with such a gap
    whose line holds no ``null`` at all can only have absent keys, so they are
    dropped; otherwise the row's tags are read back from its line.
    """
    import pyarrow as pa

    if not children:
        return [{} for _ in range(len(fast))]
    idx = pa.array(fast)
    struct = pa.StructArray.from_arrays([c.take(idx) for _, c, _ in children], [k for k, _, _ in children])
    out = struct.to_pylist()
    for j, row in enumerate(fast):
        if not present[row]:
            out[j] = {}
        elif null_tags[row]:
            line = lines[row]
            if b"null" in line:
                out[j] = json.loads(line).get("tags") or {}
            else:
                out[j] = {k: v for k, v in out[j].items() if v is not None}
    return out


def _parsed_block(
    lines: Sequence[bytes], indices: Iterable[int], base: int, tags: TagLayout
) -> tuple[ColumnBlock | None, int]:
    """Parse lines with :func:`parse_line`; returns the valid ones as a block, and the malformed count."""
    found: list[tuple[int, QualityObservation]] = []
    bad = 0
    for i in indices:
        try:
            found.append((base + int(i), parse_line(lines[i])))
        except MALFORMED:
            bad += 1
    if not found:
        return None, bad
    return observation_columns([o for _, o in found], np.array([i for i, _ in found], dtype=np.int64), tags), bad


def observation_columns(obs: Sequence[QualityObservation], index: np.ndarray, tags: TagLayout) -> ColumnBlock:
    """Observations as a :class:`ColumnBlock` of Python lists, at ordinals ``index``."""
    names = (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS)
    columns: dict[str, Any] = {name: [getattr(o, name) for o in obs] for name in names}
    columns["recorded_at"] = [o.recorded_at for o in obs]
    if tags == "dicts":
        return ColumnBlock(index, columns, [dict(o.tags) for o in obs])
    keys: dict[str, None] = {}
    for o in obs:
        keys.update(dict.fromkeys(o.tags))
    return ColumnBlock(index, columns, {k: [o.tags.get(k) for o in obs] for k in keys})


def _scan_block(lines: list[bytes], base: int, tags: TagLayout, parts: list[ColumnBlock]) -> int:
    """Turn one block of lines into column blocks; returns how many lines were malformed.

    Arrow reads the block; where it stops at a line it cannot read, that line
    goes to :func:`parse_line` and arrow carries on around it (or, without a
    row number in its error, reads each half). Past ``_MAX_RESTARTS`` failures
    the rest of the block goes to :func:`parse_line`.
    """
    bad = 0
    restarts = 0
    fields = set(_arrow_schema().names)
    stack = [(0, len(lines), True)]
    while stack:
        lo, hi, with_tags = stack.pop()
        if hi <= lo:
            continue
        if hi - lo <= _MIN_ARROW or restarts > _MAX_RESTARTS:
            part, b = _parsed_block(lines, range(lo, hi), base, tags)
            bad += b
            if part is not None:
                parts.append(part)
            continue
        table, row, field = _try_arrow(lines[lo:hi], with_tags=with_tags)
        if table is not None:
            part, rejected = _arrow_block(lines[lo:hi], table, tags, base + lo, with_tags=with_tags)
            if part is not None:
                parts.append(part)
            if len(rejected):
                slow, b = _parsed_block(lines, rejected + lo, base, tags)
                bad += b
                if slow is not None:
                    parts.append(slow)
            continue
        if with_tags and field is not None and field not in fields:
            # A tag (or an unknown key) changes type between rows: valid, but not one arrow column.
            stack.append((lo, hi, False))
            continue
        restarts += 1
        if row is not None and 0 <= row < hi - lo:
            stack += [(lo + row + 1, hi, with_tags), (lo + row, lo + row + 1, with_tags), (lo, lo + row, with_tags)]
        else:
            mid = (lo + hi) // 2
            stack += [(mid, hi, with_tags), (lo, mid, with_tags)]
    return bad


def read_columns(
    path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES, tags: TagLayout = "columns"
) -> tuple[list[ColumnBlock], int]:
    """The valid observations of the ledger file at ``path`` as column blocks, and how many lines are malformed.

    The blocks hold every valid line once; their ``index`` gives the file order.
    The malformed count is what the ledger's own readers count (blank lines are
    neither). Memory stays near two read blocks however long a line is.
    """
    blocks: list[ColumnBlock] = []
    malformed = 0
    offset = 0
    for lines, over in line_blocks(path, max_line_bytes):
        malformed += over + _scan_block(lines, offset, tags, blocks)
        offset += len(lines)
    return blocks, malformed
