"""Ledgers and grading results as tidy pandas DataFrames, and back.

- :func:`ledger_frame`: one row per valid observation of a quality ledger,
  typed columns (UTC ``recorded_at``, categorical ids, ``total_tokens``), tags
  expanded to ``tag.<key>`` columns; ``df.attrs["malformed_count"]`` counts the
  skipped lines exactly as :meth:`QualityLedger.malformed_count` does.
- :func:`results_frame`: one row per :class:`~llm_connect.grading.GradingResult`.
- :func:`observations_from_frame`: a ledger frame back to observations
  (``ledger_frame`` then ``observations_from_frame`` gives the originals).
- :func:`record_labels` / :func:`paired_frame`: human labels written to a
  ledger, and the judge's scores paired with them.

This module only shapes frames. Reading a ledger file -- splitting it into
lines, parsing them, pyarrow's columnar reader and what counts as malformed --
is the ledger's own I/O (``llm_connect.quality._ledger_io``, see its
docstring), so a frame holds exactly what the ledger's readers see: a line
longer than the ledger's ``max_line_bytes`` (a path is read with the default,
:data:`~llm_connect.quality.MAX_LINE_BYTES`) is malformed here too, and a
:class:`QualityLedger` is read at its :attr:`~QualityLedger.real_path`, as the
ledger reads it. With ``tags="expand"`` a null tag value reads as absent (NA);
``tags="dict"`` keeps every tag exactly.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .columns import RESULT_FRAME_COLUMNS
from .errors import ValidationError
from .items import CONVERSATION_COLUMNS, canonical_item_id, conversation_tags, item_id_text, item_ids
from .quality import MAX_LINE_BYTES, BaseLedger, ParquetLedger, QualityLedger, QualityObservation
from .quality._base import is_parquet_location
from .quality._ledger_io import (
    FLOAT_FIELDS,
    INT_FIELDS,
    TEXT_FIELDS,
    ColumnBlock,
    TagLayout,
    arrow_kind,
    observation_columns,
    read_columns,
)

_log = logging.getLogger("llm_connect")

__all__ = [
    "HOLD_GRADER_ID",
    "HUMAN_GRADER_ID",
    "LEDGER_COLUMNS",
    "PAIRED_COLUMNS",
    "RESULT_FRAME_COLUMNS",
    "SKIP_GRADER_ID",
    "UNDO_GRADER_ID",
    "ledger_frame",
    "observations_from_frame",
    "paired_frame",
    "record_labels",
    "results_frame",
]

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
TAG_PREFIX = "tag."
_CONVERSATION_TAGS = ("conversation_id", "turn")  # items.CONVERSATION_TAGS: columns paired_frame keeps

TagsMode = Literal["expand", "dict"]
_LAYOUT: dict[str, TagLayout] = {"expand": "columns", "dict": "dicts"}  # how each mode reads tags


# -- building frames -----------------------------------------------------------------------


def _py_kind(values: Iterable[Any]) -> str | None:
    """The arrow kind all non-null Python values fit without changing (None: they do not share one)."""
    kinds = set()
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int64" if -(2**63) <= v < 2**63 else "bigint")
        elif isinstance(v, float):
            kinds.add("double")
        elif isinstance(v, str):
            kinds.add("string")
        else:
            return None
    if not kinds:
        return "null"
    if kinds == {"int64", "double"}:
        return "double"
    return kinds.pop() if len(kinds) == 1 and "bigint" not in kinds else None


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {"bool": pa.bool_(), "int64": pa.int64(), "double": pa.float64(), "string": pa.string(), "null": pa.null()}[
        kind
    ]


def _concat(pieces: list[Any], lengths: list[int]) -> Any:
    """One column from per-part pieces (arrow arrays, Python lists, or None for absent):
    a typed arrow array when every piece fits one type, else a list of Python values."""
    import pyarrow as pa

    kinds = set()
    for piece in pieces:
        if piece is None:
            continue
        kinds.add(arrow_kind(piece.type) if isinstance(piece, pa.Array) else _py_kind(piece))
    kinds.discard("null")
    if kinds == {"int64", "double"}:
        kinds = {"double"}
    if len(kinds) <= 1 and None not in kinds and "complex" not in kinds:
        t = _arrow_type(kinds.pop() or "null" if kinds else "null")
        arrays = []
        for piece, n in zip(pieces, lengths, strict=True):
            if piece is None:
                arrays.append(pa.nulls(n, type=t))
            elif isinstance(piece, pa.Array):
                arrays.append(piece if piece.type == t else piece.cast(t))
            else:
                arrays.append(pa.array(piece, type=t))
        return pa.concat_arrays(arrays) if arrays else pa.nulls(0, type=t)
    values: list[Any] = []
    for piece, n in zip(pieces, lengths, strict=True):
        if piece is None:
            values.extend([None] * n)
        else:
            values.extend(piece.to_pylist() if isinstance(piece, pa.Array) else piece)
    return values


def _to_series(column: Any, name: str) -> pd.Series:
    import pyarrow as pa

    if isinstance(column, pa.Array):
        nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
        mapper = nullable.get if name.startswith(TAG_PREFIX) else None
        if pa.types.is_null(column.type):
            return pd.Series([None] * len(column), dtype=object, name=name)
        return column.to_pandas(types_mapper=mapper).rename(name)
    return pd.Series(column, dtype=object, name=name)


def _assemble(blocks: list[ColumnBlock], tags: TagsMode) -> pd.DataFrame:
    import pyarrow as pa

    if not blocks:
        return pd.DataFrame()
    lengths = [len(p.index) for p in blocks]
    data: dict[str, pd.Series] = {}
    types = {name: pa.string() for name in (*TEXT_FIELDS, "baseline_adapter_id")}
    types |= {name: pa.float64() for name in FLOAT_FIELDS} | {name: pa.int64() for name in INT_FIELDS}
    types["recorded_at"] = pa.timestamp("us", tz="UTC")
    for name, t in types.items():
        pieces = [p.columns[name] for p in blocks]
        try:
            arrays = [c if isinstance(c, pa.Array) else pa.array(c, type=t) for c in pieces]
            data[name] = pa.concat_arrays(arrays).to_pandas().rename(name)
        except (pa.ArrowInvalid, OverflowError):  # e.g. a token count beyond int64: keep the Python ints
            values = [v for c in pieces for v in (c.to_pylist() if isinstance(c, pa.Array) else c)]
            data[name] = pd.Series(values, dtype=object, name=name)
    if tags == "dict":
        data["tags"] = pd.Series([d for p in blocks for d in p.tags], dtype=object, name="tags")
    else:
        keys: dict[str, None] = {}
        for p in blocks:
            keys.update(dict.fromkeys(p.tags))  # type: ignore[arg-type]
        for key in keys:
            pieces = [p.tags.get(key) for p in blocks]  # type: ignore[union-attr]
            name = TAG_PREFIX + key
            data[name] = _to_series(_concat(pieces, lengths), name)
    frame = pd.DataFrame(data)
    index = np.concatenate([p.index for p in blocks])
    if len(index) > 1 and not np.all(index[1:] > index[:-1]):
        frame = frame.iloc[np.argsort(index, kind="stable")].reset_index(drop=True)
    return frame


def _tag_dtype(series: pd.Series) -> pd.Series:
    """A tag column of Python objects as the narrowest pandas dtype that keeps every value."""
    if series.dtype != object:
        return series
    kind = _py_kind(None if v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v for v in series.tolist())
    clean = series.map(lambda v: None if v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v)
    if kind == "bool":
        return clean.astype("boolean")
    if kind == "int64":
        return clean.astype("Int64")
    if kind == "double":
        return pd.to_numeric(clean, errors="coerce").astype(float)
    if kind == "string":
        try:
            return clean.astype(pd.StringDtype(na_value=np.nan))  # pandas >= 2.3: the "str" dtype
        except TypeError:  # pragma: no cover - older pandas
            return clean.astype("string")
    return clean.astype(object)


def _empty_frame(tags: TagsMode) -> pd.DataFrame:
    data: dict[str, Any] = {"recorded_at": pd.array([], dtype=pd.DatetimeTZDtype("us", "UTC"))}
    for name in (*TEXT_FIELDS, "baseline_adapter_id"):
        data[name] = pd.Series([], dtype=object)
    for name in FLOAT_FIELDS:
        data[name] = np.array([], dtype=float)
    for name in INT_FIELDS:
        data[name] = np.array([], dtype=np.int64)
    if tags == "dict":
        data["tags"] = pd.Series([], dtype=object)
    return pd.DataFrame(data)


def _finish(frame: pd.DataFrame, tags: TagsMode, malformed: int) -> pd.DataFrame:
    if frame.empty:
        frame = _empty_frame(tags)
    frame = frame.reset_index(drop=True)
    frame["recorded_at"] = frame["recorded_at"].astype(pd.DatetimeTZDtype("us", "UTC"))
    for name in ID_COLUMNS:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None).astype("category")
    for name in INT_FIELDS:
        try:
            frame[name] = frame[name].astype("int64")
        except OverflowError:  # a count beyond int64 is valid JSON and a valid observation: keep it exact
            frame[name] = frame[name].astype(object).map(int)
    for name in FLOAT_FIELDS:
        frame[name] = frame[name].astype("float64")
    frame["total_tokens"] = frame["tokens_in"] + frame["tokens_out"]
    tag_cols = [c for c in frame.columns if isinstance(c, str) and c.startswith(TAG_PREFIX)]
    for c in tag_cols:
        frame[c] = _tag_dtype(frame[c])
    extra = ["tags"] if tags == "dict" else tag_cols
    frame = frame[[*LEDGER_COLUMNS, *extra]]
    frame.attrs["malformed_count"] = int(malformed)
    return frame


def ledger_frame(
    ledger_or_path: BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation],
    *,
    tags: TagsMode = "expand",
) -> pd.DataFrame:
    """A quality ledger as a DataFrame: one row per valid observation, in file order.

    Parameters
    ----------
    ledger_or_path : BaseLedger or str or os.PathLike or iterable of QualityObservation
        A :class:`~llm_connect.quality.QualityLedger`, the path of its JSON Lines file (which must exist;
        a ledger whose file does not exist yet is empty), a :class:`~llm_connect.quality.ParquetLedger`
        (or its root: a directory or a URI such as ``s3://bucket/ledger``; rows in its read order,
        duplicates of retried writes read once), another ledger, or observations.
    tags : {"expand", "dict"}, default "expand"
        ``"expand"``: one ``tag.<key>`` column per tag key (a missing or null value is NA; integer tags are
        ``Int64``, booleans ``boolean``, text ``str``, mixed or nested values objects). ``"dict"``: one
        ``tags`` column holding each observation's dict, every tag kept exactly.

    Returns
    -------
    DataFrame
        Columns :data:`LEDGER_COLUMNS`: ``recorded_at`` (``datetime64[us, UTC]``), the ids ``task_type``,
        ``adapter_id``, ``model_id``, ``baseline_adapter_id`` (categoricals), ``quality_score``,
        ``cost_usd``, ``latency_ms``, ``tokens_in``, ``tokens_out``, ``total_tokens``; then the tags.
        ``df.attrs["malformed_count"]`` is the number of skipped malformed lines (blank lines are not
        counted), as :meth:`~llm_connect.quality.QualityLedger.malformed_count` says (for a
        ``ParquetLedger``: unreadable files and invalid rows).

    Raises
    ------
    FileNotFoundError
        When a path names no file (the message says when it is a link to a missing file).
    ValidationError
        When ``tags`` is neither mode, or an iterable holds something other than observations.

    See Also
    --------
    observations_from_frame : The way back, to observations.
    paired_frame : The judge's scores beside the human labels.

    Examples
    --------
    >>> from llm_connect import QualityObservation
    >>> seen = QualityObservation(task_type="qa", adapter_id="openai", model_id="gpt-4o-mini", cost_usd=0.002,
    ...                           quality_score=1.0, latency_ms=350.0, tokens_in=120, tokens_out=4,
    ...                           tags={"grader_id": "llm-judge", "item_id": 7})
    >>> ledger_frame([seen])[["model_id", "quality_score", "total_tokens", "tag.item_id"]]
          model_id  quality_score  total_tokens  tag.item_id
    0  gpt-4o-mini            1.0           124            7
    """
    if tags not in ("expand", "dict"):
        raise ValidationError(f"tags must be 'expand' or 'dict', got {tags!r}")
    cap = MAX_LINE_BYTES
    if isinstance(ledger_or_path, (str, os.PathLike)) and is_parquet_location(ledger_or_path):
        ledger_or_path = ParquetLedger(ledger_or_path)
    if isinstance(ledger_or_path, ParquetLedger):
        column_block, malformed = ledger_or_path.column_block(_LAYOUT[tags])
        if column_block is None:
            return _finish(pd.DataFrame(), tags, malformed)
        return _finish(_assemble([column_block], tags), tags, malformed)
    if isinstance(ledger_or_path, BaseLedger) and not isinstance(ledger_or_path, QualityLedger):
        observations, malformed = ledger_or_path.read_all(), ledger_or_path.malformed_count()
        if not observations:
            return _finish(pd.DataFrame(), tags, malformed)
        block = observation_columns(observations, np.arange(len(observations)), _LAYOUT[tags])
        return _finish(_assemble([block], tags), tags, malformed)
    if isinstance(ledger_or_path, QualityLedger):
        path = ledger_or_path.real_path  # the file the ledger itself reads
        cap = ledger_or_path.max_line_bytes
        if not path.exists():
            return _finish(pd.DataFrame(), tags, 0)
    elif isinstance(ledger_or_path, (str, os.PathLike)):
        path = Path(ledger_or_path)
        if not path.exists():
            if path.is_symlink():
                raise FileNotFoundError(
                    f"no ledger file at {str(path)!r}: it is a symbolic link to {os.path.realpath(path)!r}, "
                    "which does not exist"
                )
            raise FileNotFoundError(f"no ledger file at {str(path)!r}")
    else:
        observations = list(ledger_or_path)
        for o in observations:
            if not isinstance(o, QualityObservation):
                raise ValidationError(
                    f"ledger_frame takes a QualityLedger, a path or QualityObservations, got {type(o).__name__}"
                )
        if not observations:
            return _finish(pd.DataFrame(), tags, 0)
        block = observation_columns(observations, np.arange(len(observations)), _LAYOUT[tags])
        return _finish(_assemble([block], tags), tags, 0)

    blocks, malformed = read_columns(path, max_line_bytes=cap, tags=_LAYOUT[tags])
    return _finish(_assemble(blocks, tags), tags, malformed)


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

    ``ledger_frame`` then ``observations_from_frame`` gives the original observations back.

    Parameters
    ----------
    df : DataFrame
        A frame with the columns of :func:`ledger_frame` (``recorded_at`` may be left out: now). Tags come
        from the ``tags`` column (dicts) or the ``tag.<key>`` columns (NA values are left out).
    task_type : str, optional
        Fills a missing ``task_type`` column.

    Returns
    -------
    list of QualityObservation
        One per row, in order.

    Raises
    ------
    ValidationError
        When a column is missing, or a row is not a valid observation (the message names the row).

    See Also
    --------
    ledger_frame : The frame this reads.

    Examples
    --------
    >>> from llm_connect import QualityObservation
    >>> seen = QualityObservation(task_type="qa", adapter_id="openai", model_id="gpt-4o-mini", cost_usd=0.002,
    ...                           quality_score=1.0, latency_ms=350.0, tokens_in=120, tokens_out=4)
    >>> observations_from_frame(ledger_frame([seen])) == [seen]
    True
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
                    row_tags[c[len(TAG_PREFIX) :]] = v
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



def results_frame(results: Iterable[Any]) -> pd.DataFrame:
    """Grading results as a DataFrame, one row per :class:`~llm_connect.grading.GradingResult`.

    Parameters
    ----------
    results : iterable of GradingResult
        The results, e.g. of :meth:`~llm_connect.grading.PairedGrader.grade` or ``judge(...)`` calls.

    Returns
    -------
    DataFrame
        One row per result, in order. Columns (:data:`RESULT_FRAME_COLUMNS`): ``grader_id``,
        ``quality_score``, ``notes``, the ``baseline`` and ``candidate`` texts, each side's adapter and
        model ids (categoricals), the candidate's own usage (``candidate_tokens_in``,
        ``candidate_tokens_out``, ``candidate_cost_usd``, ``candidate_latency_ms``) and the judge's
        (``judge_tokens_cached`` (how many of the input tokens the provider read from its prompt cache, priced at the
        cached rate), ``judge_tokens_in``, ``judge_tokens_out``, ``judge_cost_usd``, ``latency_ms``): the same names
        as the judge's columns of :func:`~llm_connect.grading.judge_many`.

    Raises
    ------
    ValidationError
        When an element is not a grading result (the message names its position).

    See Also
    --------
    llm_connect.grading.judge_many : Judges many items into a frame of the same columns.

    Examples
    --------
    >>> from llm_connect import GradingResult, LLMResponse
    >>> result = GradingResult(quality_score=1.0, notes="exact match", grader_id="exact-match",
    ...                        baseline_response=LLMResponse("Paris", "reference", "answers"),
    ...                        candidate_response=LLMResponse("Paris", "openai", "gpt-4o-mini", tokens_out=2))
    >>> results_frame([result])[["grader_id", "quality_score", "candidate_model_id", "candidate_tokens_out"]]
         grader_id  quality_score candidate_model_id  candidate_tokens_out
    0  exact-match            1.0        gpt-4o-mini                     2
    """
    rows = []
    for k, r in enumerate(results):
        base = getattr(r, "baseline_response", None)
        cand = getattr(r, "candidate_response", None)
        if base is None or cand is None or not hasattr(r, "quality_score"):
            raise ValidationError(f"result {k} is a {type(r).__name__}, not a GradingResult")
        rows.append(
            (
                r.grader_id,
                float(r.quality_score),
                r.notes,
                base.content,
                cand.content,
                base.adapter_id,
                base.model_id,
                cand.adapter_id,
                cand.model_id,
                int(cand.tokens_in),
                int(cand.tokens_out),
                float(cand.cost_usd),
                float(cand.latency_ms),
                int(getattr(r, "tokens_cached", 0)),
                int(getattr(r, "tokens_in", 0)),
                int(getattr(r, "tokens_out", 0)),
                float(getattr(r, "cost_usd", 0.0)),
                float(getattr(r, "latency_ms", 0.0)),
            )
        )
    frame = pd.DataFrame.from_records(rows, columns=list(RESULT_FRAME_COLUMNS))
    for c in ("grader_id", "baseline_adapter_id", "baseline_model_id", "candidate_adapter_id", "candidate_model_id"):
        frame[c] = frame[c].astype(object).astype("category")
    for c in ("candidate_tokens_in", "candidate_tokens_out", "judge_tokens_cached", "judge_tokens_in",
              "judge_tokens_out"):
        frame[c] = frame[c].astype("int64")
    for c in ("quality_score", "candidate_cost_usd", "candidate_latency_ms", "judge_cost_usd", "latency_ms"):
        frame[c] = frame[c].astype("float64")
    return frame


# -- human labels and paired judge/human frames ------------------------------------------------

HUMAN_GRADER_ID = "human"
#: The grader id of a skip written by :class:`~llm_connect.labelling.Labeller` (never read as a label).
SKIP_GRADER_ID = "human-skip"
#: The grader id of an undo marker: tag ``undoes`` names the ``label_id`` of the label (or skip) taken back.
UNDO_GRADER_ID = "human-undo"
#: The grader id of a hold: an annotator of :class:`~llm_connect.labelling.Labeller` took the item (tags
#: ``item_id``, ``annotator``, ``hold_seconds``), so other annotators pass it over until the hold expires
#: (never read as a label or a judge's score).
HOLD_GRADER_ID = "human-hold"
PAIRED_COLUMNS = (
    "task_type",
    "item_id",
    "adapter_id",
    "model_id",
    "n_judge",
    "n_annotators",
    "annotator_agreement",
)


def _first_column(frame: pd.DataFrame, given: str | None, candidates: Sequence[str], what: str) -> str:
    if given is not None:
        if given not in frame.columns:
            raise ValidationError(f"the frame has no {what} column {given!r}; it has {list(frame.columns)}")
        return given
    for c in candidates:
        if c in frame.columns:
            return c
    raise ValidationError(
        f"the frame has no {what} column (looked for {', '.join(candidates)}); pass {what}=... naming one"
    )


def _label_value(value: Any, row: Any) -> float | None:
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0:
        return float(value)
    raise ValidationError(f"row {row!r}: a human label must be a number in 0..1 or a boolean, got {value!r}")


def record_labels(
    ledger: BaseLedger,
    frame: pd.DataFrame,
    *,
    task_type: str,
    label: str = "human",
    item_id: str | None = None,
    adapter_id: str | None = None,
    model_id: str | None = None,
    annotator: str | None = None,
    grader_id: str = HUMAN_GRADER_ID,
) -> int:
    """Write human labels to a ledger as observations that pair with the judged ones.

    Each row of ``frame`` whose ``label`` column holds a score in 0..1 (or a boolean) becomes one
    :class:`~llm_connect.quality.QualityObservation` with ``quality_score`` the label, zero cost and
    latency, and ``tags`` ``grader_id``, ``item_id`` and ``annotator``, with the same ``task_type``,
    ``item_id`` and adapter as the judge's observation of that answer, so :func:`paired_frame` can join
    them. Rows whose label is missing (NaN) are unlabelled and skipped. Ids are converted as
    ``judge_many`` records them (:func:`~llm_connect.items.canonical_item_id`: a whole float such as
    ``1.0`` is ``1``, numpy scalars are plain Python). Turns of a conversation (a frame with
    ``conversation_id`` / ``turn`` / ``messages`` columns, as :func:`~llm_connect.conversations.per_turn`
    gives) are keyed as ``judge_many`` keys them (:func:`~llm_connect.items.item_ids`: each turn its own
    item; without an ``item_id`` column), and their labels carry the tags ``conversation_id`` and
    ``turn``. Every row is validated before anything is written, and all are written under one lock.

    Each label is recorded once per item (id and candidate) and annotator under ``grader_id``: a label the
    ledger already holds is not recorded again, however often this runs: the first label stands (a warning
    says how many were found already, and how many of those differ from the label that stands; see
    :meth:`~llm_connect.quality.BaseLedger.extend_once`).

    Parameters
    ----------
    ledger : BaseLedger
        The ledger to write to (a :class:`~llm_connect.quality.QualityLedger` or a
        :class:`~llm_connect.quality.ParquetLedger`).
    frame : DataFrame
        One row per labelled answer.
    task_type : str
        The task the judge's observations were recorded under.
    label : str, default "human"
        The column of labels.
    item_id : str, optional
        The column of item ids (default: ``item_id`` or ``id``).
    adapter_id : str, optional
        The column of the candidates' adapters (default: ``adapter_id``, ``candidate_adapter`` or
        ``candidate_model``).
    model_id : str, optional
        The column of the candidates' models (default: ``model_id`` or ``candidate_model``, else the
        adapter's column).
    annotator : str, optional
        A column naming who labelled each row; without one the tag is ``"anonymous"``.
    grader_id : str, default "human"
        The grader id the labels are recorded under (:data:`HUMAN_GRADER_ID`).

    Returns
    -------
    int
        How many labels were written.

    Raises
    ------
    ValidationError
        When ``frame`` is not a DataFrame, ``ledger`` not a ledger, a named column is missing, a label is
        not a number in 0..1 or a boolean, or a labelled row has no item id.

    See Also
    --------
    paired_frame : Reads the labels back beside the judge's scores.
    llm_connect.labelling.Labeller : Labels items one by one, in a notebook.

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from llm_connect import QualityLedger
    >>> ledger = QualityLedger(os.path.join(tempfile.mkdtemp(), "ledger.jsonl"))
    >>> labels = pd.DataFrame({"id": [7, 8], "adapter_id": "openai", "model_id": "gpt-4o-mini",
    ...                        "label": [1.0, None]})
    >>> record_labels(ledger, labels, task_type="qa", label="label")  # item 8 is unlabelled
    1
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValidationError(f"record_labels takes a DataFrame, got {type(frame).__name__}")
    if not isinstance(ledger, BaseLedger):
        raise ValidationError(
            f"record_labels takes a QualityLedger or a ParquetLedger, got {type(ledger).__name__}"
        )
    if label not in frame.columns:
        raise ValidationError(f"the frame has no label column {label!r}; it has {list(frame.columns)}")
    conversational = any(c in frame.columns for c in CONVERSATION_COLUMNS)
    if conversational and item_id is None and "item_id" not in frame.columns:
        # a conversation's turns: their ids as judge_many records them (the turn is part of the item)
        item_col = "item_id"
        frame = frame.assign(item_id=item_ids(frame))
    else:
        item_col = _first_column(frame, item_id, ("item_id", "id"), "item_id")
    adapter_col = _first_column(frame, adapter_id, ("adapter_id", "candidate_adapter", "candidate_model"), "adapter_id")
    model_col = _first_column(frame, model_id, ("model_id", "candidate_model", adapter_col), "model_id")
    if annotator is not None and annotator not in frame.columns:
        raise ValidationError(f"the frame has no annotator column {annotator!r}; it has {list(frame.columns)}")
    observations = []
    labels = frame[label].tolist()
    items = frame[item_col].tolist()
    adapters = frame[adapter_col].tolist()
    models = frame[model_col].tolist()
    who = frame[annotator].tolist() if annotator is not None else ["anonymous"] * len(frame)
    extra = (frame[[c for c in ("conversation_id", "turn") if c in frame.columns]].to_dict("records")
             if conversational else [{}] * len(frame))
    for k, idx in enumerate(frame.index):
        value = _label_value(labels[k], idx)
        if value is None:
            continue
        item = canonical_item_id(items[k])  # the one conversion: 1.0 is 1, as judge_many records it
        if item is None:
            raise ValidationError(f"row {idx!r} has a label but no item id in column {item_col!r}")
        tags = {"grader_id": grader_id, "item_id": item,
                "annotator": str(_plain(who[k]) or "anonymous"), **conversation_tags(extra[k])}
        try:
            observations.append(QualityObservation(
                task_type=task_type, adapter_id=str(_plain(adapters[k])), model_id=str(_plain(models[k])),
                cost_usd=0.0, quality_score=value, latency_ms=0.0, tokens_in=0, tokens_out=0, tags=tags,
            ))
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"row {idx!r} cannot be recorded as a label: {exc}") from exc
    if not observations:
        return 0
    recorded = ledger.extend_once(observations)
    if recorded.n_held:
        differ = (f" ({recorded.differing} of them differ from the label recorded before, which stands: the "
                  "ledger keeps one label per item and annotator)" if recorded.differing else "")
        _log.warning("llm_connect: %d label(s) already in the ledger, not recorded again%s", recorded.n_held, differ)
    return recorded.n_written


def paired_frame(
    ledger: BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation],
    task_type: str,
    *,
    grader_id: str | None = None,
    human: str = HUMAN_GRADER_ID,
    rubric_hash: str | None = None,
    threshold: float = 0.5,
) -> pd.DataFrame:
    """One row per judged or labelled (item, adapter): the judge's score beside the human label, for
    ``estimate_quality``.

    Reads the ledger's observations of ``task_type`` whose ``tags["grader_id"]`` is ``grader_id`` (the
    judge's scores) or ``human`` (the labels written by :func:`record_labels`) and joins them on
    ``tags["item_id"]`` (matched on its text, :func:`~llm_connect.items.item_id_text`: ``1``, ``1.0`` and
    ``"1"`` are one item) and ``adapter_id``. A label taken back by an undo marker (grader
    ``f"{human}-undo"``, tag ``undoes`` naming the label's ``label_id``, as
    :meth:`~llm_connect.labelling.Labeller.undo` writes) is left out.

    Parameters
    ----------
    ledger : BaseLedger or str or os.PathLike or iterable of QualityObservation
        What to read, as :func:`ledger_frame` takes it.
    task_type : str
        The task whose observations are paired.
    grader_id : str
        The judge's grader id (e.g. ``"llm-judge"``); required.
    human : str, default "human"
        The grader id of the labels (:data:`HUMAN_GRADER_ID`).
    rubric_hash : str, optional
        The judge's rubric to read. Observations of one grader under several rubrics are never pooled:
        without it, a grader scored under several rubrics is an error naming them.
    threshold : float, default 0.5
        Where a label becomes a yes, for the annotators' agreement.

    Returns
    -------
    DataFrame
        Columns ``task_type``, ``item_id`` (text), ``adapter_id``, ``model_id`` (the candidate's model), a
        column named ``grader_id`` (the judge's score; the mean when it judged the item more than once)
        and one named ``human`` (the annotators' mean label, NaN where the item is unlabelled; a labelled item
        the judge did not score, e.g. a selective judge's abstention, has NaN in the judge's column:
        ``estimate_quality(..., judge_missing="stratify")`` estimates those from the labels alone), plus
        ``judge``/``human`` aliases under those literal names when the grader ids differ from them;
        ``n_judge``, ``n_annotators`` and ``annotator_agreement`` (the share of annotator pairs whose
        verdicts at ``threshold`` agree; NaN with fewer than two annotators); for conversation items
        (tags ``conversation_id`` / ``turn``) also ``conversation_id`` and ``turn``, so
        ``estimate_quality(..., cluster="auto")`` clusters by conversation.
        ``df.attrs["annotator_alpha"]``: Krippendorff's alpha (nominal, verdicts at ``threshold``) over
        items labelled by several annotators.

    Raises
    ------
    ValidationError
        When ``grader_id`` is missing or equals ``human``, the ledger holds no observation of the task
        with ``grader_id`` and ``item_id`` tags, none of that grader, or the grader's under several
        rubrics and no ``rubric_hash``.

    See Also
    --------
    record_labels : Writes the labels this reads.
    llm_connect.estimate_quality : The judge's quality with an interval, from this frame.

    Examples
    --------
    >>> import os, tempfile
    >>> import pandas as pd
    >>> from llm_connect import QualityLedger, QualityObservation
    >>> ledger = QualityLedger(os.path.join(tempfile.mkdtemp(), "ledger.jsonl"))
    >>> ledger.append(QualityObservation(task_type="qa", adapter_id="openai", model_id="gpt-4o-mini",
    ...                                  cost_usd=0.002, quality_score=1.0, latency_ms=350.0, tokens_in=120,
    ...                                  tokens_out=4, tags={"grader_id": "llm-judge", "item_id": 7}))
    >>> labels = pd.DataFrame({"id": [7], "adapter_id": ["openai"], "model_id": ["gpt-4o-mini"], "human": [0.0]})
    >>> record_labels(ledger, labels, task_type="qa")
    1
    >>> paired_frame(ledger, "qa", grader_id="llm-judge")[["item_id", "llm-judge", "human", "n_annotators"]]
      item_id  llm-judge  human  n_annotators
    0       7        1.0    0.0             1
    """
    judge = grader_id
    if judge is None:
        raise ValidationError("paired_frame() needs grader_id=: the grader id of the judge whose scores to pair "
                              "with the human labels (e.g. grader_id='llm-judge')")
    for name, value in (("grader_id", judge), ("human", human)):
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{name} must be a grader id (a non-empty string), got {value!r}")
    if judge == human:
        raise ValidationError(f"grader_id and human must be different grader ids, both are {judge!r}")
    df = ledger_frame(ledger, tags="expand")
    df = df[(df["task_type"] == task_type).to_numpy(dtype=bool)] if len(df) else df
    if "tag.grader_id" not in df.columns or "tag.item_id" not in df.columns or not len(df):
        raise ValidationError(
            f"the ledger has no observation of task type {task_type!r} with grader_id and item_id tags; "
            "record judgments with judge_many(..., ledger=...) and labels with record_labels(...)"
        )
    grader = df["tag.grader_id"]
    judged = df[(grader == judge).to_numpy(dtype=bool)]
    labelled = df[(grader == human).to_numpy(dtype=bool)]
    if "tag.undoes" in df.columns and "tag.label_id" in labelled.columns:  # labels taken back (Labeller.undo)
        undone = df.loc[(grader == f"{human}-undo").to_numpy(dtype=bool), "tag.undoes"].dropna()
        if len(undone):
            keep = ~labelled["tag.label_id"].astype(object).isin(set(undone.astype(object)))
            labelled = labelled[keep.to_numpy(dtype=bool)]
    if not len(judged):
        present = sorted({str(g) for g in grader.dropna().unique()})
        raise ValidationError(
            f"no observation of grader {judge!r} for task type {task_type!r}; graders present: {present}"
        )
    if "tag.rubric_hash" in judged.columns:
        hashes = judged["tag.rubric_hash"].astype(object)
        if rubric_hash is not None:
            judged = judged[hashes == rubric_hash]
            if not len(judged):
                raise ValidationError(f"grader {judge!r} has no observation under rubric {rubric_hash!r}")
        else:
            distinct = sorted({str(h) for h in hashes.dropna().unique()})
            if len(distinct) > 1:
                raise ValidationError(
                    f"grader {judge!r} scored task type {task_type!r} under {len(distinct)} rubrics {distinct}; "
                    "scores from different rubrics are not comparable: pass rubric_hash=... to choose one"
                )

    def keyed(part: pd.DataFrame) -> pd.DataFrame:
        ids = part["tag.item_id"].astype(object)
        present = ids.notna()
        text = pd.Series(None, index=part.index, dtype=object)
        text[present] = ids[present].map(item_id_text)  # one rule: 1, 1.0 and "1" are item "1"
        out = pd.DataFrame({
            "item_id": text,
            "adapter_id": part["adapter_id"].astype(object),
            "model_id": part["model_id"].astype(object),
            "score": part["quality_score"].to_numpy(dtype=float),
        }, index=part.index)
        for name in _CONVERSATION_TAGS:  # a conversation item's: they travel with its row
            out[name] = part[TAG_PREFIX + name].astype(object) if TAG_PREFIX + name in part.columns else None
        return out[out["item_id"].notna()]

    j = keyed(judged).groupby(["item_id", "adapter_id"], sort=False).agg(
        judge_score=("score", "mean"), n_judge=("score", "size"), model_id=("model_id", "last"),
        **{name: (name, "first") for name in _CONVERSATION_TAGS})
    h_rows = keyed(labelled)
    annot = labelled["tag.annotator"].astype(object) if "tag.annotator" in labelled.columns else None
    h_rows["annotator"] = (annot.loc[h_rows.index].fillna("anonymous").astype(str) if annot is not None
                           else "anonymous")
    # one label per annotator and item (an annotator's repeated labels are averaged first)
    per_annotator = h_rows.groupby(["item_id", "adapter_id", "annotator"], sort=False).agg(
        score=("score", "mean"), model_id=("model_id", "last"),
        **{name: (name, "first") for name in _CONVERSATION_TAGS}).reset_index()
    per_annotator["yes"] = (per_annotator["score"] >= threshold).astype(float)
    h = per_annotator.groupby(["item_id", "adapter_id"], sort=False).agg(
        human_score=("score", "mean"), n_annotators=("score", "size"), yes=("yes", "sum"),
        human_model_id=("model_id", "last"), **{f"human_{name}": (name, "first") for name in _CONVERSATION_TAGS})
    n, k = h["n_annotators"].to_numpy(dtype=float), h["yes"].to_numpy(dtype=float)
    pairs = n * (n - 1) / 2
    agree = (k * (k - 1) + (n - k) * (n - k - 1)) / 2
    h["annotator_agreement"] = np.where(pairs > 0, agree / np.where(pairs > 0, pairs, 1), np.nan)
    out = j.join(h, how="outer").reset_index()
    out["model_id"] = out["model_id"].fillna(out["human_model_id"])
    out.insert(0, "task_type", task_type)
    out["n_judge"] = out["n_judge"].fillna(0).astype("int64")
    out["n_annotators"] = out["n_annotators"].fillna(0).astype("int64")
    result = pd.DataFrame({
        "task_type": out["task_type"],
        "item_id": out["item_id"].astype(str),
        "adapter_id": out["adapter_id"].astype(str),
        "model_id": out["model_id"].astype(str),
        judge: out["judge_score"].astype(float),
        human: out["human_score"].astype(float),
        "n_judge": out["n_judge"],
        "n_annotators": out["n_annotators"],
        "annotator_agreement": out["annotator_agreement"].astype(float),
    })
    for name in _CONVERSATION_TAGS:  # conversation items: their conversation and turn (to cluster by)
        values = out[name].astype(object).where(out[name].notna(), out[f"human_{name}"].astype(object))
        if values.notna().any():
            result[name] = values.where(values.notna(), None).to_numpy(dtype=object)
    if judge != "judge" and "judge" not in result.columns:
        result["judge"] = result[judge]
    if human != "human" and "human" not in result.columns:
        result["human"] = result[human]
    result.attrs["annotator_alpha"] = _annotator_alpha(per_annotator)
    return result


def _annotator_alpha(per_annotator: pd.DataFrame) -> float:
    """Krippendorff's alpha (nominal) of the annotators' verdicts on items labelled more than once."""
    multi = per_annotator.groupby(["item_id", "adapter_id"])["yes"].transform("size") > 1
    data = per_annotator[multi]
    if data.empty or data["annotator"].nunique() < 2:
        return math.nan
    matrix = data.pivot_table(index="annotator", columns=["item_id", "adapter_id"], values="yes", aggfunc="first")
    values = matrix.to_numpy(dtype=float)
    if np.unique(values[np.isfinite(values)]).size < 2:
        return math.nan
    import krippendorff

    return float(krippendorff.alpha(reliability_data=values, level_of_measurement="nominal"))
