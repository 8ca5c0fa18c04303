"""The rows of a :class:`~llm_connect.quality.ParquetLedger`: the file schema and its format marker,
observations to an Arrow table and back (every row validated as :meth:`QualityObservation.from_dict` would, in
read order, deduplicated by :func:`dedupe_key`), a file of another writer conformed to the schema, and a task
type as a safe directory name (:func:`encode_segment`). The layout, the writing and the compaction are in
:mod:`llm_connect.quality._parquet`.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from ._ledger_io import FLOAT_FIELDS, INT_FIELDS, TEXT_FIELDS, _strip_ok, _valid_numbers
from ._observation import TAGS_MAX_DEPTH, QualityObservation, has_lone_surrogate, tags_depth

__all__ = ["DEDUPE_TAGS", "dedupe_key", "encode_segment", "unstorable"]

#: The tags that key an observation for deduplication (with its ids; ``rubric_hash`` may be absent; see the
#: module docstring).
DEDUPE_TAGS = ("item_id", "grader_id", "rubric_hash", "run_id")

_FORMAT_KEY = b"llm_connect.ledger"
_FORMAT = b"quality-observations/1"
_INT64_MAX = 2**63 - 1
_MAX_SEGMENT = 120  # longest encoded task type kept whole in a directory name
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_encode_tags = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_COLUMNS = (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS, "recorded_at", "tags")


def _schema() -> Any:
    import pyarrow as pa

    fields = [pa.field(name, pa.string()) for name in TEXT_FIELDS]
    fields.append(pa.field("baseline_adapter_id", pa.string()))
    fields += [pa.field(name, pa.float64()) for name in FLOAT_FIELDS]
    fields += [pa.field(name, pa.int64()) for name in INT_FIELDS]
    fields.append(pa.field("recorded_at", pa.timestamp("us", tz="UTC")))
    fields.append(pa.field("tags", pa.string()))
    return pa.schema(fields, metadata={_FORMAT_KEY: _FORMAT})


def encode_segment(text: str) -> str:
    """``text`` as one safe directory-name segment: percent-encoded UTF-8 (only ``A-Za-z0-9-_`` kept),
    cut and suffixed with a digest when long. Never ``.``/``..``, never holds a separator."""
    encoded = quote(text, safe="-_").replace(".", "%2E").replace("~", "%7E")
    if len(encoded) > _MAX_SEGMENT:
        cut = encoded[: _MAX_SEGMENT - 20]
        tail = cut.rfind("%", len(cut) - 2)
        if tail >= 0:  # do not split a %XX escape
            cut = cut[:tail]
        encoded = f"{cut}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"
    return encoded


_SCALARS = (str, int, float, bool)


def dedupe_key(o: QualityObservation) -> tuple[Any, ...] | None:
    """The key under which copies of ``o`` are one observation, or ``None`` when it is never deduplicated.

    Tag values are compared as JSON values of one type (``1``, ``1.0``, ``true`` and ``"1"`` differ)."""
    tags = o.tags
    if not tags:
        return None
    item, grader, rubric, run = tags.get("item_id"), tags.get("grader_id"), tags.get("rubric_hash"), tags.get("run_id")
    if type(item) is str and type(grader) is str and type(rubric) is str and type(run) is str:
        # the common case, as plain text (never equal to the (type, value) pairs below)
        return (o.task_type, o.adapter_id, o.model_id, o.baseline_adapter_id, item, grader, rubric, run)
    values: list[Any] = [o.task_type, o.adapter_id, o.model_id, o.baseline_adapter_id]
    for name in DEDUPE_TAGS:
        value = tags.get(name)
        if value is None and name == "rubric_hash":  # a judge without a rubric (exact match, embeddings)
            values.append(("absent", None))
            continue
        if value is None:
            return None
        kind = type(value)
        values.append((kind.__name__, value) if kind in _SCALARS else ("json", _encode_tags(value)))
    return tuple(values)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # 1e999 reads as inf
        raise ValueError(f"{text} is not a finite number")
    return value


# Tags as the ledger reads them: NaN, Infinity and numbers beyond float range are invalid (as from_dict says).
_load_tags = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float).decode


@dataclass
class _Snapshot:
    """What one reading of the ledger saw."""

    observations: list[QualityObservation] = field(default_factory=list)
    malformed: int = 0
    files: list[str] = field(default_factory=list)  # ledger files read (not replaced), in file-ordinal order
    replaced: set[str] = field(default_factory=set)  # listed files that a compacted file replaces
    table: Any = None  # every row of the files read, conformed, with _file and _row columns
    valid: Any = None  # per table row: a valid observation
    kept: Any = None  # per table row: read (valid and not a duplicate copy)
    rows: list[int] = field(default_factory=list)  # table row of each observation


def unstorable(o: QualityObservation) -> str | None:
    """Why a ParquetLedger cannot store the valid observation ``o`` (a token count beyond 64-bit integers),
    or ``None`` when it can."""
    for name in INT_FIELDS:
        if getattr(o, name) > _INT64_MAX:
            return (f"{name}={getattr(o, name)}, beyond the 64-bit integers a ParquetLedger stores "
                    f"(at most {_INT64_MAX})")
    return None


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _table(observations: Sequence[QualityObservation]) -> Any:
    import pyarrow as pa

    columns: dict[str, Any] = {name: [getattr(o, name) for o in observations]
                               for name in (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS)}
    columns["recorded_at"] = [_micros(o.recorded_at) for o in observations]
    columns["tags"] = [_encode_tags(o.tags) if o.tags else None for o in observations]
    schema = _schema()
    arrays = []
    for f in schema:
        if f.name == "recorded_at":
            arrays.append(pa.array(columns["recorded_at"], pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(columns[f.name], f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _conform(table: Any) -> Any | None:
    """``table`` with exactly the ledger's columns and types, or ``None`` when it cannot have them."""
    import pyarrow as pa

    schema = _schema()
    arrays = []
    n = table.num_rows
    names = table.column_names
    if any(names.count(f.name) > 1 for f in schema):  # a ledger column twice: which one is meant is unknown
        return None
    for f in schema:
        if f.name not in names:
            if f.name in ("baseline_adapter_id", "tags"):
                arrays.append(pa.nulls(n, f.type))
                continue
            return None
        col = table.column(f.name)
        try:
            if f.name == "recorded_at":
                if not pa.types.is_timestamp(col.type):
                    return None
                if col.type.tz is None:
                    col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))
                col = col.cast(f.type)  # safe: refuses to lose sub-microsecond precision
            elif col.type != f.type:
                t = pa.types
                kind_ok = (
                    (t.is_string(f.type) and (t.is_string(col.type) or t.is_large_string(col.type)))
                    or (t.is_string(f.type) and t.is_null(col.type))
                    or (t.is_floating(f.type) and (t.is_floating(col.type) or t.is_integer(col.type)))
                    or (t.is_integer(f.type) and t.is_integer(col.type))
                )
                if not kind_ok:
                    return None
                col = col.cast(f.type)
        except (pa.ArrowException, ValueError):
            return None
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_string(f.type):
            try:
                col.validate(full=True)  # invalid UTF-8 (another writer's bytes) makes the file unreadable
            except pa.ArrowInvalid:
                return None
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def _table_observations(table: Any) -> list[QualityObservation]:
    """The valid observations of one conformed file, as readers see them."""
    import numpy as np
    import pyarrow as pa

    n = table.num_rows
    snap = _Snapshot()
    _observations(table.append_column("_file", pa.array(np.zeros(n, dtype=np.int32)))
                  .append_column("_row", pa.array(np.arange(n, dtype=np.int64))), snap, None)
    return snap.observations


def _observations(table: Any, snap: _Snapshot, task_type: str | None) -> None:
    """Fill ``snap`` with the valid, deduplicated observations of ``table`` (and the per-row masks)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    ok = _valid_numbers(table)
    for name in TEXT_FIELDS:
        ok &= _strip_ok(table.column(name), nullable=False)
    ok &= _strip_ok(table.column("baseline_adapter_id"), nullable=True)
    stamps = table.column("recorded_at")
    ok &= ~stamps.is_null().to_numpy(zero_copy_only=False)
    micros = pc.cast(stamps, pa.int64()).fill_null(0).to_numpy()
    # datetime's range (years 1..9999) in microseconds since the epoch
    ok &= (micros >= -62_135_596_800_000_000) & (micros <= 253_402_300_799_999_999)
    order = pc.sort_indices(table, [("recorded_at", "ascending"), ("_file", "ascending"), ("_row", "ascending")])
    order = order.to_numpy()
    order = order[ok[order]]
    taken = pa.array(order)
    cols = [table.column(name).take(taken).to_pylist()
            for name in (*TEXT_FIELDS, "baseline_adapter_id", *FLOAT_FIELDS, *INT_FIELDS, "tags")]
    kept = np.zeros(n, dtype=bool)
    out = snap.observations
    rows = snap.rows
    collecting = gc.isenabled()
    gc.disable()  # many small objects at once: the cyclic collector would walk the whole heap again and again
    try:
        _build(order, cols, micros, ok, kept, task_type, out, rows)
    finally:
        if collecting:
            gc.enable()
    snap.malformed += int((~ok).sum())
    snap.valid = ok
    snap.kept = kept


def _build(order: Any, cols: list[list[Any]], micros: Any, ok: Any, kept: Any, task_type: str | None,
           out: list[QualityObservation], rows: list[int]) -> None:
    """The observations of the rows ``order`` (valid so far): parse tags, dedupe, append to ``out``/``rows``."""
    seen: set[tuple[Any, ...]] = set()
    new = object.__new__
    loads = _load_tags
    epoch = _EPOCH
    micro = timedelta(microseconds=1)
    for row, task, adapter, model, base, quality, cost, latency, t_in, t_out, raw in zip(
        order.tolist(), *cols, strict=True
    ):
        if raw is None:
            tags: Any = {}
        else:
            try:
                tags = loads(raw)
            except (ValueError, RecursionError):
                ok[row] = False
                continue
            if type(tags) is not dict:
                ok[row] = False
                continue
            if raw.count("{") + raw.count("[") > TAGS_MAX_DEPTH and tags_depth(tags) > TAGS_MAX_DEPTH:
                ok[row] = False  # nested deeper than QualityObservation accepts
                continue
        o = new(QualityObservation)
        o.__dict__.update(
            task_type=task, adapter_id=adapter, model_id=model, cost_usd=cost, quality_score=quality,
            latency_ms=latency, tokens_in=t_in, tokens_out=t_out, baseline_adapter_id=base,
            recorded_at=epoch + micro * int(micros[row]), tags=tags,
        )
        if raw is not None and "\\u" in raw and has_lone_surrogate(o):
            ok[row] = False
            continue
        if task_type is not None and task != task_type:
            continue  # a file outside the partitions holding other task types: read, not ours to show
        key = dedupe_key(o)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        kept[row] = True
        out.append(o)
        rows.append(row)
