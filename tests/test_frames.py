"""ledger_frame / results_frame / observations_from_frame, checked against the ledger's own reader."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_connect.core import LLMResponse
from llm_connect.frames import LEDGER_COLUMNS, ledger_frame, observations_from_frame, results_frame
from llm_connect.grading import GradingResult
from llm_connect.quality import QualityLedger, QualityObservation

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def obs(i: int = 0, **changes) -> QualityObservation:
    fields = {
        "task_type": "qa",
        "adapter_id": "openai",
        "model_id": "gpt-4o-mini",
        "cost_usd": 0.001 * i,
        "quality_score": (i % 11) / 10,
        "latency_ms": 12.5 + i,
        "tokens_in": 10 + i,
        "tokens_out": 3 * i,
        "baseline_adapter_id": None,
        "recorded_at": T0 + timedelta(seconds=i, microseconds=7 * i),
        "tags": {"run": f"r{i % 3}", "item_id": i},
    }
    fields.update(changes)
    return QualityObservation(**fields)


def frame_observations(df: pd.DataFrame) -> list[QualityObservation]:
    return observations_from_frame(df)


# -- shape and types ------------------------------------------------------------------------


def test_columns_types_and_values(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    originals = [obs(i) for i in range(6)] + [obs(6, baseline_adapter_id="local", adapter_id="local", tags={})]
    ledger.extend(originals)
    df = ledger_frame(ledger)
    assert list(df.columns[: len(LEDGER_COLUMNS)]) == list(LEDGER_COLUMNS)
    assert str(df["recorded_at"].dtype) == "datetime64[us, UTC]"
    for c in ("task_type", "adapter_id", "model_id", "baseline_adapter_id"):
        assert isinstance(df[c].dtype, pd.CategoricalDtype), c
    assert df["tokens_in"].dtype == "int64"
    assert (df["total_tokens"] == df["tokens_in"] + df["tokens_out"]).all()
    assert df["recorded_at"].iloc[3] == pd.Timestamp(originals[3].recorded_at)
    assert df["baseline_adapter_id"].isna().sum() == 6 and df["baseline_adapter_id"].iloc[6] == "local"
    assert df["tag.item_id"].dtype == "Int64"
    assert df["tag.item_id"].tolist()[:6] == list(range(6)) and pd.isna(df["tag.item_id"].iloc[6])
    assert df.attrs["malformed_count"] == 0
    assert frame_observations(df) == originals


def test_tags_dict_mode_keeps_one_column(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    originals = [obs(0, tags={"a": None, "b": [1, {"c": 2}]}), obs(1, tags={}), obs(2, tags={"a": 1})]
    ledger.extend(originals)
    df = ledger_frame(ledger, tags="dict")
    assert "tags" in df.columns and not any(c.startswith("tag.") for c in df.columns)
    assert df["tags"].tolist() == [{"a": None, "b": [1, {"c": 2}]}, {}, {"a": 1}]
    assert frame_observations(df) == originals


def test_bad_tags_mode_and_missing_file(tmp_path):
    with pytest.raises(ValueError):
        ledger_frame(tmp_path / "x.jsonl", tags="wide")
    with pytest.raises(FileNotFoundError):
        ledger_frame(tmp_path / "nope.jsonl")
    empty = ledger_frame(QualityLedger(tmp_path / "not-yet.jsonl"))
    assert len(empty) == 0 and list(empty.columns) == list(LEDGER_COLUMNS)
    assert empty.attrs["malformed_count"] == 0
    assert str(empty["recorded_at"].dtype) == "datetime64[us, UTC]"


def test_accepts_observations_directly():
    originals = [obs(i) for i in range(3)]
    df = ledger_frame(originals)
    assert frame_observations(df) == originals
    with pytest.raises(ValueError):
        ledger_frame([{"task_type": "qa"}])


# -- malformed lines, counted exactly as the ledger counts them ---------------------------------

MALFORMED_LINES = [
    b"not json",
    b'{"task_type": "qa"}',  # missing fields
    b"[1, 2, 3]",
    b"42",
    b"\xff\xfe\xfd garbage",  # invalid UTF-8
    b'{"task_type": "qa", "adapter_id": "a", "model_id": "m", "cost_usd": 0, "quality_score": 1.5, '
    b'"latency_ms": 0, "tokens_in": 0, "tokens_out": 0, "recorded_at": "2025-01-01T00:00:00+00:00"}',
]


def _line(o: QualityObservation, **changes) -> bytes:
    d = o.to_dict()
    d.update(changes)
    return json.dumps(d).encode()


def test_malformed_and_odd_lines_match_the_ledger(tmp_path):
    path = tmp_path / "l.jsonl"
    base = obs(1)
    lines = [_line(obs(0))]
    lines += MALFORMED_LINES
    lines += [
        b"",
        b"   \t ",
        _line(base, quality_score=float("nan")).replace(b"NaN", b"NaN"),  # json NaN literal: invalid score
        _line(base, tokens_in=3.0),  # a float token count is invalid
        _line(base, cost_usd=True),  # a boolean is not a number
        _line(base, task_type="   "),  # blank id
        _line(base, recorded_at="2025-02-30T00:00:00+00:00"),  # no such day
        _line(base, recorded_at="2025-01-01T00:00:00Z"),  # valid, not canonical: the ledger's parser reads it
        _line(base, recorded_at="2025-01-01 10:00:00"),  # naive: UTC
        _line(base, recorded_at="2025-01-01T10:00:00+02:00"),  # converted to UTC
        _line(base, tokens_in=2**70),  # a huge int is still an int
        _line(base, extra_field={"x": float("inf")}),  # unknown keys are ignored
        _line(base, tags=None),  # null tags are {}
        _line(base, tags={"t": "2025-01-01"}),  # a date-like tag stays a string
        b"\xef\xbb\xbf" + _line(base),  # a UTF-8 BOM: json.loads accepts it, so does the ledger
        _line(base).replace(b'"task_type": "qa"', b'"task_type": "x", "task_type": "qa"'),  # duplicate key
        _line(base) + b" " + _line(base),  # two objects on one line
        _line(base, quality_score=1),  # an int score is fine
        _line(base, tags={"big": 1e308, "neg": -0.0}),
        _line(base, cost_usd=-0.0),
        _line(base, tags={"x": float("inf")}),  # invalid: tags must be finite JSON
    ]
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    ledger = QualityLedger(path)
    expected = ledger.read_all()
    for mode in ("expand", "dict"):
        df = ledger_frame(path, tags=mode)
        assert df.attrs["malformed_count"] == ledger.malformed_count(), mode
        assert frame_observations(df) == expected, mode
    # NaN score, 3.0 tokens, boolean cost, blank id, 30 February, two objects, infinite tag
    assert ledger.malformed_count() == len(MALFORMED_LINES) + 7


def test_big_ledger_with_scattered_malformed_lines(tmp_path):
    """More lines than one block, malformed lines in several blocks, heterogeneous tags."""
    path = tmp_path / "big.jsonl"
    rng = random.Random(3)
    n = 40_000
    bad = set(rng.sample(range(n), 25))
    chunks = []
    for i in range(n):
        if i in bad:
            chunks.append(rng.choice(MALFORMED_LINES))
            continue
        tags = {"run": f"r{i % 5}", "item_id": i} if i % 4 else {"flag": bool(i % 8), "score": i / 7}
        if i == 39_000:
            tags = {"item_id": "late-string"}  # a type change far from the start
        chunks.append(json.dumps(obs(i % 97, tags=tags).to_dict(), separators=(",", ":")).encode())
    path.write_bytes(b"\n".join(chunks) + b"\n")
    ledger = QualityLedger(path)
    expected = ledger.read_all()
    df = ledger_frame(path)
    assert len(df) == n - len(bad) == len(expected)
    assert df.attrs["malformed_count"] == ledger.malformed_count() == len(bad)
    assert frame_observations(df) == expected
    assert df["tag.item_id"].iloc[-1] == expected[-1].tags.get("item_id", None) or pd.isna(df["tag.item_id"].iloc[-1])
    dict_df = ledger_frame(path, tags="dict")
    assert frame_observations(dict_df) == expected


@pytest.mark.parametrize("mode", ["expand", "dict"])
def test_tags_and_unknown_keys_that_change_type_between_rows(tmp_path, mode):
    """Valid rows whose tag (or unknown key) types differ: arrow cannot make one column of them."""
    path = tmp_path / "l.jsonl"
    lines = []
    for i in range(300):
        d = obs(i).to_dict()
        d["tags"] = {"x": i if i % 2 else f"s{i}", "nested": {"a": [i]} if i % 3 else None}
        if i % 5 == 0:
            d["future_field"] = "text" if i % 10 else 1.5
        if i == 150:
            d["tags"] = {"x": float("nan")}  # invalid: NaN tag
        if i == 151:
            d["tokens_in"] = "3"  # invalid: a string count
        lines.append(json.dumps(d).encode())
    path.write_bytes(b"\n".join(lines))
    ledger = QualityLedger(path)
    df = ledger_frame(path, tags=mode)
    assert df.attrs["malformed_count"] == ledger.malformed_count() == 2
    expected = ledger.read_all()
    if mode == "expand":  # null tags read as absent
        expected = [QualityObservation(**{**o.__dict__, "tags": {k: v for k, v in o.tags.items() if v is not None}})
                    for o in expected]
        assert df["tag.x"].tolist()[:3] == ["s0", 1, "s2"]
    assert frame_observations(df) == expected


# -- Hypothesis: round trips and arbitrary lines ---------------------------------------------------

_ids = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda s: s.strip()
)
_tag_values = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
_tag_keys = st.text(min_size=1, max_size=8)


@st.composite
def observations(draw, *, null_tags: bool = False):
    values = st.one_of(_tag_values, st.none()) if null_tags else _tag_values
    return QualityObservation(
        task_type=draw(_ids),
        adapter_id=draw(_ids),
        model_id=draw(_ids),
        cost_usd=draw(st.floats(0, 1e6)),
        quality_score=draw(st.floats(0, 1)),
        latency_ms=draw(st.floats(0, 1e9)),
        tokens_in=draw(st.integers(0, 2**62)),
        tokens_out=draw(st.integers(0, 2**62)),
        baseline_adapter_id=draw(st.one_of(st.none(), _ids)),
        recorded_at=draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                                      timezones=st.just(UTC))),
        tags=draw(st.dictionaries(_tag_keys, values, max_size=4)),
    )


_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_settings
@given(st.lists(observations(), min_size=1, max_size=12))
def test_roundtrip_expand(tmp_path_factory, originals):
    path = tmp_path_factory.mktemp("rt") / "l.jsonl"
    QualityLedger(path).extend(originals)
    assert frame_observations(ledger_frame(path)) == originals


@_settings
@given(st.lists(observations(null_tags=True), min_size=1, max_size=12))
def test_roundtrip_dict_with_null_tags(tmp_path_factory, originals):
    path = tmp_path_factory.mktemp("rt") / "l.jsonl"
    QualityLedger(path).extend(originals)
    assert frame_observations(ledger_frame(path, tags="dict")) == originals
    # expand mode: a null tag is shown as NA, like an absent one
    expected = [QualityObservation(**{**o.__dict__, "tags": {k: v for k, v in o.tags.items() if v is not None}})
                for o in originals]
    assert frame_observations(ledger_frame(path)) == expected


_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**64), st.floats(allow_nan=True), st.text(max_size=6)
)
_FIELDS = ["task_type", "adapter_id", "model_id", "cost_usd", "quality_score", "latency_ms", "tokens_in",
           "tokens_out", "baseline_adapter_id", "recorded_at", "tags"]


@st.composite
def ledger_lines(draw):
    kind = draw(st.sampled_from(["valid", "field", "drop", "bytes", "blank", "ts"]))
    o = draw(observations(null_tags=True))
    d = o.to_dict()
    if kind == "valid":
        return json.dumps(d).encode()
    if kind == "field":
        d[draw(st.sampled_from(_FIELDS))] = draw(_json_scalars | st.dictionaries(_tag_keys, _json_scalars, max_size=2))
        return json.dumps(d).encode()
    if kind == "drop":
        d.pop(draw(st.sampled_from(_FIELDS)))
        return json.dumps(d).encode()
    if kind == "ts":
        d["recorded_at"] = draw(st.sampled_from(["2025-01-01", "2025-01-01T00:00:00Z", "2025-13-01T00:00:00+00:00",
                                                 "2025-01-01T25:00:00+00:00", "20250101T000000", "yesterday"]))
        return json.dumps(d).encode()
    if kind == "blank":
        return draw(st.sampled_from([b"", b"  ", b"\t", b"\r"]))
    raw = json.dumps(d).encode()
    cut = draw(st.integers(0, len(raw)))
    return raw[:cut] + draw(st.binary(max_size=4)).replace(b"\n", b"")


@_settings
@given(st.lists(ledger_lines(), min_size=1, max_size=60))
def test_arbitrary_lines_match_the_ledger(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fuzz") / "l.jsonl"
    path.write_bytes(b"\n".join(lines))
    ledger = QualityLedger(path)
    df = ledger_frame(path, tags="dict")
    assert df.attrs["malformed_count"] == ledger.malformed_count()
    assert frame_observations(df) == ledger.read_all()
    assert ledger_frame(path).attrs["malformed_count"] == ledger.malformed_count()


# -- observations_from_frame and results_frame -------------------------------------------------------


def test_observations_from_frame_validates_rows():
    df = ledger_frame([obs(0), obs(1)])
    df.loc[1, "quality_score"] = 2.0
    with pytest.raises(ValueError, match="row 1"):
        observations_from_frame(df)
    with pytest.raises(ValueError, match="lacks"):
        observations_from_frame(df.drop(columns="model_id"))
    filled = observations_from_frame(df.drop(columns="task_type").iloc[:1], task_type="summarise")
    assert filled[0].task_type == "summarise"


def test_results_frame():
    base = LLMResponse("Paris", "baseline", "reference")
    results = [
        GradingResult(1.0, "exact match", "exact-match", base,
                      LLMResponse("Paris", "openai", "gpt-4o-mini", 5, 1, 0.002, 80.0)),
        GradingResult(0.25, "close", "llm-judge", base,
                      LLMResponse("Lyon", "local", "smollm2", 6, 2, 0.0, 30.0),
                      tokens_in=120, tokens_out=20, cost_usd=0.0004, latency_ms=410.0),
    ]
    df = results_frame(results)
    assert len(df) == 2
    assert df["quality_score"].tolist() == [1.0, 0.25]
    assert df["candidate"].tolist() == ["Paris", "Lyon"] and df["baseline"].tolist() == ["Paris", "Paris"]
    assert df["candidate_model_id"].tolist() == ["gpt-4o-mini", "smollm2"]
    assert isinstance(df["grader_id"].dtype, pd.CategoricalDtype)
    assert df["candidate_cost_usd"].tolist() == [0.002, 0.0]
    assert df["tokens_in"].tolist() == [0, 120] and df["cost_usd"].tolist() == [0.0, 0.0004]
    assert df["candidate_tokens_out"].tolist() == [1, 2]
    assert len(results_frame([])) == 0
    with pytest.raises(ValueError):
        results_frame([{"quality_score": 1.0}])
