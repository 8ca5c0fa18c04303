"""Ledgers and grading results as tidy pandas DataFrames, and back.

- :func:`ledger_frame`: one row per valid observation of a quality ledger,
  typed columns (UTC ``recorded_at``, categorical ids, ``total_tokens``), tags
  expanded to ``tag.<key>`` columns; ``df.attrs["malformed_count"]`` counts the
  skipped lines exactly as :meth:`QualityLedger.malformed_count` does.
- :func:`results_frame`: one row per :class:`~llm_connect.grading.GradingResult`.
- :func:`observations_from_frame`: a ledger frame back to observations
  (``ledger_frame`` then ``observations_from_frame`` gives the originals).

How :func:`ledger_frame` stays fast and exact
---------------------------------------------
The file is read in blocks of lines. Each block is parsed by pyarrow's JSON
reader against the observation schema and validated column-wise with rules at
least as strict as :meth:`QualityObservation.from_dict`. A row those rules do
not clear (an odd timestamp, an unusual tag) — or a whole block pyarrow cannot
read (invalid JSON or UTF-8, a type that changes between rows) — goes through
the ledger's own line parser, so what counts as malformed is decided by the
ledger's code, not re-implemented here.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .errors import ValidationError
from .quality import _MALFORMED, QualityLedger, QualityObservation, _parse_line

__all__ = ["LEDGER_COLUMNS", "RESULT_FRAME_COLUMNS", "ledger_frame", "observations_from_frame", "results_frame"]

ID_COLUMNS = ("task_type", "adapter_id", "model_id", "baseline_adapter_id")
LEDGER_COLUMNS = (
    "recorded_at",
    "task_type",
    "adapter_id",
    "model_id",
    "baseline_adapter_id",
    "quality_score",
    "cost_usd",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "total_tokens",
)
_FLOATS = ("quality_score", "cost_usd", "latency_ms")
_INTS = ("tokens_in", "tokens_out")
_STRINGS = ("task_type", "adapter_id", "model_id")
TAG_PREFIX = "tag."

# What ``QualityObservation.to_dict`` writes: UTC, seconds, optional microseconds.
_CANONICAL_TS = (
    r"^(?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{6})?\+00:00$"
)
_BLOCK_LINES = 1 << 14
_MIN_BISECT = 1 << 6
_READ_BYTES = 64 << 20

TagsMode = Literal["expand", "dict"]


# -- reading lines -------------------------------------------------------------------------


def _line_blocks(path: Path, block_lines: int = _BLOCK_LINES) -> Iterator[list[bytes]]:
    """Non-blank lines of the file, in blocks, split exactly as the ledger splits them (on ``\\n``)."""
    with open(path, "rb") as handle:
        rest = b""
        block: list[bytes] = []
        while True:
            chunk = handle.read(_READ_BYTES)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1 :]
            for line in data[: cut + 1].split(b"\n"):
                if line.strip():
                    block.append(line)
                    if len(block) >= block_lines:
                        yield block
                        block = []
        if rest.strip():
            block.append(rest)
        if block:
            yield block


# -- the fast path: pyarrow + column-wise validation ----------------------------------------


def _arrow_schema() -> Any:
    import pyarrow as pa

    fields = [(name, pa.string()) for name in (*_STRINGS, "baseline_adapter_id", "recorded_at")]
    fields += [(name, pa.float64()) for name in _FLOATS]
    fields += [(name, pa.int64()) for name in _INTS]
    return pa.schema(fields)


_PRIMITIVE = ("bool", "int64", "double", "string", "null")


def _type_kind(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_int64(t):
        return "int64"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_null(t):
        return "null"
    return "complex"


def _strip_ok(column: Any, *, nullable: bool) -> np.ndarray:
    """Rows whose string is non-blank by Python's own ``str.strip`` (checked on the distinct values)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column).combine_chunks() if isinstance(column, pa.ChunkedArray) else (
        pc.dictionary_encode(column)
    )
    good = np.array([bool(v.strip()) for v in encoded.dictionary.to_pylist()] + [nullable], dtype=bool)
    idx = encoded.indices.to_numpy(zero_copy_only=False)
    idx = np.where(encoded.indices.is_null().to_numpy(zero_copy_only=False), len(good) - 1, idx).astype(np.int64)
    return good[idx]


def _valid_numbers(table: Any) -> np.ndarray:
    ok = np.ones(table.num_rows, dtype=bool)
    for name in _FLOATS:
        col = table.column(name).to_numpy()  # nulls become NaN
        with np.errstate(invalid="ignore"):
            good = np.isfinite(col) & (col >= 0)
            if name == "quality_score":
                good &= col <= 1.0
        ok &= good
    for name in _INTS:
        col = table.column(name)
        ok &= ~col.is_null().to_numpy(zero_copy_only=False)
        ok &= col.fill_null(-1).to_numpy() >= 0
    return ok


def _timestamps(column: Any) -> tuple[np.ndarray, Any]:
    """(rows with a canonical, valid timestamp; the parsed timestamp[us, UTC] array, null elsewhere)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
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


def _tag_children(table: Any) -> tuple[list[tuple[str, Any, str]], np.ndarray, np.ndarray]:
    """The ``tags`` struct's children ``(key, array, kind)``; rows a complex tag value sends to the
    slow path; rows with a null child (absent or null: exact only through the slow path)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    slow = np.zeros(n, dtype=bool)
    has_null = np.zeros(n, dtype=bool)
    if "tags" not in table.column_names:
        return [], slow, has_null
    tags = table.column("tags").combine_chunks()
    if pa.types.is_null(tags.type):
        return [], slow, has_null
    if not pa.types.is_struct(tags.type):  # only happens if every row's tags is one non-object type
        return [], ~tags.is_null().to_numpy(zero_copy_only=False), has_null
    present = ~tags.is_null().to_numpy(zero_copy_only=False)
    children = []
    for i in range(tags.type.num_fields):
        key = tags.type.field(i).name
        child = pc.struct_field(tags, [i])
        kind = _type_kind(child.type)
        nulls = child.is_null().to_numpy(zero_copy_only=False)
        has_null |= present & nulls
        if kind == "complex":
            slow |= ~nulls
        elif kind == "double":
            values = child.to_numpy(zero_copy_only=False)
            with np.errstate(invalid="ignore"):
                slow |= ~nulls & ~np.isfinite(values)
        children.append((key, child, kind))
    return children, slow, has_null


def _block_frame(lines: list[bytes], tags: TagsMode) -> tuple[pd.DataFrame, list[tuple[int, QualityObservation]], int]:
    """One block: (frame of the fast-path rows with their ``_line``, slow-path observations, malformed)."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            io.BytesIO(b"\n".join(lines)),
            read_options=pj.ReadOptions(block_size=8 << 20),
            parse_options=pj.ParseOptions(explicit_schema=_arrow_schema(), unexpected_field_behavior="infer"),
        )
    except (pa.ArrowException, UnicodeDecodeError, ValueError):
        table = None
    if table is None or table.num_rows != len(lines):
        if len(lines) <= _MIN_BISECT:
            obs, bad = _slow_lines(lines, range(len(lines)))
            return pd.DataFrame(), obs, bad
        # Somewhere in this block is a line arrow cannot read: halve it, so that the
        # ledger's own (slower) parser only sees a small block around that line.
        mid = len(lines) // 2
        f1, o1, b1 = _block_frame(lines[:mid], tags)
        f2, o2, b2 = _block_frame(lines[mid:], tags)
        if not f2.empty:
            f2["_line"] += mid
        frames = [f for f in (f1, f2) if not f.empty]
        frame = frames[0] if len(frames) == 1 else (
            pd.concat(_align_tag_dtypes(frames), ignore_index=True, sort=False) if frames else pd.DataFrame()
        )
        return frame, o1 + [(i + mid, o) for i, o in o2], b1 + b2

    ok = _valid_numbers(table)
    for name in _STRINGS:
        ok &= _strip_ok(table.column(name), nullable=False)
    ok &= _strip_ok(table.column("baseline_adapter_id"), nullable=True)
    ts_ok, ts = _timestamps(table.column("recorded_at"))
    ok &= ts_ok
    children, slow_tags, null_tags = _tag_children(table)
    ok &= ~slow_tags
    fast = np.flatnonzero(ok)
    obs, bad = _slow_lines(lines, np.flatnonzero(~ok))
    if len(fast) == 0:
        return pd.DataFrame(), obs, bad

    idx = pa.array(fast)
    taken = table.take(idx)
    data: dict[str, Any] = {"_line": fast}
    data["recorded_at"] = ts.take(idx).to_pandas()
    for name in (*_STRINGS, "baseline_adapter_id"):
        data[name] = taken.column(name).to_pandas()
    for name in _FLOATS:
        data[name] = taken.column(name).to_numpy()
    for name in _INTS:
        data[name] = taken.column(name).to_numpy()
    if tags == "dict":
        data["tags"] = _tag_dicts(lines, fast, children, null_tags, table)
    else:
        for key, child, kind in children:
            if kind == "null":
                continue
            values = child.take(idx)
            if kind == "int64":
                data[TAG_PREFIX + key] = values.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
            elif kind == "bool":
                data[TAG_PREFIX + key] = values.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype()}.get)
            else:
                data[TAG_PREFIX + key] = values.to_pandas()
    return pd.DataFrame(data), obs, bad


def _tag_dicts(
    lines: Sequence[bytes], fast: np.ndarray, children: list[tuple[str, Any, str]], null_tags: np.ndarray, table: Any
) -> list[dict[str, Any]]:
    """Each fast row's tags as the exact dict the ledger would build.

    Arrow shows an absent key and a ``null`` value alike. A row with such a gap
    whose line holds no ``null`` at all can only have absent keys, so they are
    dropped; otherwise the row's tags are read back from its line.
    """
    import json

    import pyarrow as pa

    if not children:
        return [{} for _ in range(len(fast))]
    idx = pa.array(fast)
    struct = pa.StructArray.from_arrays([c.take(idx) for _, c, _ in children], [k for k, _, _ in children])
    present = ~table.column("tags").combine_chunks().take(idx).is_null().to_numpy(zero_copy_only=False)
    out = struct.to_pylist()
    gaps = null_tags[fast]
    for j in range(len(fast)):
        if not present[j]:
            out[j] = {}
        elif gaps[j]:
            line = lines[fast[j]]
            if b"null" in line:
                out[j] = json.loads(line).get("tags") or {}
            else:
                out[j] = {k: v for k, v in out[j].items() if v is not None}
    return out


def _slow_lines(lines: Sequence[bytes], indices: Iterable[int]) -> tuple[list[tuple[int, QualityObservation]], int]:
    """Parse lines with the ledger's own parser; returns the valid ones and the malformed count."""
    out = []
    bad = 0
    for i in indices:
        try:
            out.append((int(i), _parse_line(lines[i])))
        except _MALFORMED:
            bad += 1
    return out, bad


# -- building frames -----------------------------------------------------------------------


def _observation_records(observations: Iterable[QualityObservation], tags: TagsMode) -> pd.DataFrame:
    obs = list(observations)
    data: dict[str, Any] = {
        "recorded_at": pd.array([o.recorded_at for o in obs], dtype=pd.DatetimeTZDtype("us", "UTC"))
        if obs else pd.array([], dtype=pd.DatetimeTZDtype("us", "UTC")),
    }
    for name in (*_STRINGS, "baseline_adapter_id"):
        data[name] = [getattr(o, name) for o in obs]
    for name in _FLOATS:
        data[name] = np.array([getattr(o, name) for o in obs], dtype=float)
    for name in _INTS:
        data[name] = [getattr(o, name) for o in obs]
    if tags == "dict":
        data["tags"] = [dict(o.tags) for o in obs]
        return pd.DataFrame(data)
    frame = pd.DataFrame(data)
    keys: dict[str, None] = {}
    for o in obs:
        for k in o.tags:
            keys.setdefault(k, None)
    for k in keys:
        frame[TAG_PREFIX + k] = pd.Series([o.tags.get(k) for o in obs], dtype=object, index=frame.index)
    return frame


def _tag_dtype(series: pd.Series) -> pd.Series:
    """A tag column of Python objects as the narrowest pandas dtype that keeps every value."""
    if series.dtype != object:
        return series
    present = [v for v in series.tolist() if v is not None and not (isinstance(v, float) and math.isnan(v))
               and v is not pd.NA]
    if not present:
        return series.astype(object).where(series.notna(), None)
    if all(isinstance(v, bool) for v in present):
        return series.astype("boolean")
    if all(isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in present):
        return series.astype("Int64")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.to_numeric(series, errors="coerce").astype(float)
    if all(isinstance(v, str) for v in present):
        return series.astype(pd.StringDtype(na_value=np.nan))
    return series.map(lambda v: None if v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v).astype(object)


def _finish(frame: pd.DataFrame, tags: TagsMode, malformed: int) -> pd.DataFrame:
    if "recorded_at" not in frame.columns or frame.empty:
        frame = _observation_records([], tags) if frame.empty else frame
    frame = frame.reset_index(drop=True)
    frame["recorded_at"] = frame["recorded_at"].astype(pd.DatetimeTZDtype("us", "UTC"))
    for name in ID_COLUMNS:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None).astype("category")
    for name in _INTS:
        try:
            frame[name] = frame[name].astype("int64")
        except OverflowError:  # a count beyond int64 is valid JSON and a valid observation: keep it exact
            frame[name] = frame[name].astype(object).map(int)
    for name in _FLOATS:
        frame[name] = frame[name].astype("float64")
    frame["total_tokens"] = frame["tokens_in"] + frame["tokens_out"]
    tag_cols = [c for c in frame.columns if isinstance(c, str) and c.startswith(TAG_PREFIX)]
    for c in tag_cols:
        frame[c] = _tag_dtype(frame[c])
    extra = ["tags"] if tags == "dict" else tag_cols
    frame = frame[[*LEDGER_COLUMNS, *extra]]
    frame.attrs["malformed_count"] = int(malformed)
    return frame


def _align_tag_dtypes(frames: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """Tag columns whose dtype differs between blocks (or that some block lacks) become objects,
    so that :func:`_tag_dtype` picks one dtype from all the values."""
    dtypes: dict[str, set[str]] = {}
    for f in frames:
        for c in f.columns:
            if c.startswith(TAG_PREFIX):
                dtypes.setdefault(c, set()).add(str(f[c].dtype))
    mixed = {c for c, kinds in dtypes.items() if len(kinds) > 1 or any(c not in f.columns for f in frames)}
    if not mixed:
        return frames
    return [f.astype({c: object for c in f.columns if c in mixed}) for f in frames]


def ledger_frame(
    ledger_or_path: QualityLedger | str | os.PathLike[str] | Iterable[QualityObservation],
    *,
    tags: TagsMode = "expand",
) -> pd.DataFrame:
    """A quality ledger as a DataFrame: one row per valid observation, in file order.

    ``ledger_or_path``: a :class:`QualityLedger`, the path of its JSON Lines file
    (which must exist; a ledger whose file does not exist yet is empty), or
    observations. Columns: ``recorded_at`` (``datetime64[us, UTC]``), the ids
    ``task_type``, ``adapter_id``, ``model_id``, ``baseline_adapter_id``
    (categoricals), ``quality_score``, ``cost_usd``, ``latency_ms``, ``tokens_in``,
    ``tokens_out``, ``total_tokens``, then ``tags="expand"``: one ``tag.<key>``
    column per tag key (missing or null values are NA), or ``tags="dict"``: one
    ``tags`` column holding each observation's dict. ``df.attrs["malformed_count"]``
    is the number of skipped malformed lines (blank lines are not counted).
    """
    if tags not in ("expand", "dict"):
        raise ValidationError(f"tags must be 'expand' or 'dict', got {tags!r}")
    if isinstance(ledger_or_path, QualityLedger):
        path = ledger_or_path.path
        if not path.exists():
            return _finish(pd.DataFrame(), tags, 0)
    elif isinstance(ledger_or_path, (str, os.PathLike)):
        path = Path(ledger_or_path)
        if not path.exists():
            raise FileNotFoundError(f"no ledger file at {str(path)!r}")
    else:
        observations = list(ledger_or_path)
        for o in observations:
            if not isinstance(o, QualityObservation):
                raise ValidationError(
                    f"ledger_frame takes a QualityLedger, a path or QualityObservations, got {type(o).__name__}"
                )
        return _finish(_observation_records(observations, tags), tags, 0)

    frames: list[pd.DataFrame] = []
    slow: list[tuple[int, QualityObservation]] = []
    malformed = 0
    offset = 0
    for block in _line_blocks(path):
        frame, obs, bad = _block_frame(block, tags)
        malformed += bad
        if not frame.empty:
            frame["_line"] += offset
            frames.append(frame)
        slow.extend((i + offset, o) for i, o in obs)
        offset += len(block)
    if slow:
        extra = _observation_records([o for _, o in slow], tags)
        extra["_line"] = np.array([i for i, _ in slow], dtype=np.int64)
        frames.append(extra)
    if not frames:
        return _finish(pd.DataFrame(), tags, malformed)
    if len(frames) == 1:
        combined = frames[0]
    else:
        frames = _align_tag_dtypes(frames)
        combined = pd.concat(frames, ignore_index=True, sort=False)
        if slow:
            combined = combined.sort_values("_line", kind="stable")
    return _finish(combined.drop(columns="_line"), tags, malformed)


# -- frames back to observations -------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A pandas / numpy scalar as the plain Python value (NA -> None)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def observations_from_frame(df: pd.DataFrame, *, task_type: str | None = None) -> list[QualityObservation]:
    """The observations of a :func:`ledger_frame`-shaped frame, one per row, validated.

    Tags come from the ``tags`` column (dicts) or the ``tag.<key>`` columns (NA
    values are left out). ``task_type`` fills a missing ``task_type`` column.
    A row that is not a valid observation raises ``ValueError`` naming the row.
    """
    required = ["adapter_id", "model_id", "cost_usd", "quality_score", "latency_ms", "tokens_in", "tokens_out"]
    if "task_type" not in df.columns and task_type is None:
        required.insert(0, "task_type")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValidationError(f"the frame lacks the column(s) {missing}; it has {list(df.columns)}")
    tag_cols = [c for c in df.columns if isinstance(c, str) and c.startswith(TAG_PREFIX)]
    out: list[QualityObservation] = []
    columns = {c: df[c].tolist() for c in df.columns if c in (*LEDGER_COLUMNS, "tags") or c in tag_cols}
    for i in range(len(df)):
        def get(name: str, default: Any = None, _i: int = i) -> Any:
            return _plain(columns[name][_i]) if name in columns else default

        if "tags" in columns and isinstance(columns["tags"][i], Mapping):
            row_tags = dict(columns["tags"][i])
        else:
            row_tags = {}
            for c in tag_cols:
                v = _plain(columns[c][i])
                if v is not None:
                    row_tags[c[len(TAG_PREFIX):]] = v
        ts = get("recorded_at")
        if isinstance(ts, pd.Timestamp):
            ts = ts.to_pydatetime()
        kwargs: dict[str, Any] = {
            "task_type": get("task_type", task_type),
            "adapter_id": get("adapter_id"),
            "model_id": get("model_id"),
            "cost_usd": get("cost_usd"),
            "quality_score": get("quality_score"),
            "latency_ms": get("latency_ms"),
            "tokens_in": get("tokens_in"),
            "tokens_out": get("tokens_out"),
            "baseline_adapter_id": get("baseline_adapter_id"),
            "tags": row_tags,
        }
        if ts is not None:
            kwargs["recorded_at"] = ts
        try:
            out.append(QualityObservation(**kwargs))
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"row {df.index[i]!r} is not a valid observation: {exc}") from exc
    return out


# -- grading results -----------------------------------------------------------------------------

RESULT_FRAME_COLUMNS = (
    "grader_id",
    "quality_score",
    "notes",
    "baseline",
    "candidate",
    "baseline_adapter_id",
    "baseline_model_id",
    "candidate_adapter_id",
    "candidate_model_id",
    "candidate_tokens_in",
    "candidate_tokens_out",
    "candidate_cost_usd",
    "candidate_latency_ms",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "latency_ms",
)


def results_frame(results: Iterable[Any]) -> pd.DataFrame:
    """Grading results as a DataFrame, one row per :class:`~llm_connect.grading.GradingResult`.

    Columns: ``grader_id``, ``quality_score``, ``notes``, the ``baseline`` and
    ``candidate`` texts, each side's adapter and model ids (categoricals), the
    candidate's own usage (``candidate_tokens_in``, ``candidate_tokens_out``,
    ``candidate_cost_usd``, ``candidate_latency_ms``) and the judge's
    (``tokens_in``, ``tokens_out``, ``cost_usd``, ``latency_ms``).
    """
    rows = []
    for k, r in enumerate(results):
        base = getattr(r, "baseline_response", None)
        cand = getattr(r, "candidate_response", None)
        if base is None or cand is None or not hasattr(r, "quality_score"):
            raise ValidationError(f"result {k} is a {type(r).__name__}, not a GradingResult")
        rows.append((
            r.grader_id, float(r.quality_score), r.notes, base.content, cand.content,
            base.adapter_id, base.model_id, cand.adapter_id, cand.model_id,
            int(cand.tokens_in), int(cand.tokens_out), float(cand.cost_usd), float(cand.latency_ms),
            int(getattr(r, "tokens_in", 0)), int(getattr(r, "tokens_out", 0)),
            float(getattr(r, "cost_usd", 0.0)), float(getattr(r, "latency_ms", 0.0)),
        ))
    frame = pd.DataFrame.from_records(rows, columns=list(RESULT_FRAME_COLUMNS))
    for c in ("grader_id", "baseline_adapter_id", "baseline_model_id", "candidate_adapter_id", "candidate_model_id"):
        frame[c] = frame[c].astype(object).astype("category")
    for c in ("candidate_tokens_in", "candidate_tokens_out", "tokens_in", "tokens_out"):
        frame[c] = frame[c].astype("int64")
    for c in ("quality_score", "candidate_cost_usd", "candidate_latency_ms", "cost_usd", "latency_ms"):
        frame[c] = frame[c].astype("float64")
    return frame
