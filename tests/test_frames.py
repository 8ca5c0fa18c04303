"""ledger_frame / results_frame / observations_from_frame, checked against the ledger's own reader."""

from __future__ import annotations

import functools
import json
import random

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import flat_tags, ledger_lines, line_of, nth_observation, observations

from llm_connect.core import LLMResponse
from llm_connect.frames import LEDGER_COLUMNS, ledger_frame, observations_from_frame, results_frame
from llm_connect.grading import GradingResult
from llm_connect.quality import QualityLedger, QualityObservation


def frame_observations(df: pd.DataFrame) -> list[QualityObservation]:
    return observations_from_frame(df)


# -- shape and types ------------------------------------------------------------------------


def test_columns_types_and_values(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    originals = [nth_observation(i) for i in range(6)]
    originals.append(nth_observation(6, baseline_adapter_id="local", adapter_id="local", tags={}))
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
    originals = [
        nth_observation(0, tags={"a": None, "b": [1, {"c": 2}]}),
        nth_observation(1, tags={}),
        nth_observation(2, tags={"a": 1}),
    ]
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
    originals = [nth_observation(i) for i in range(3)]
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


_line = functools.partial(line_of, compact=False, ensure_ascii=True)  # as json.dumps writes by default


def test_malformed_and_odd_lines_match_the_ledger(tmp_path):
    path = tmp_path / "l.jsonl"
    base = nth_observation(1)
    lines = [_line(nth_observation(0))]
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


@pytest.mark.slow  # 11 s measured on 2 busy cores: out of the fast loop
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
        chunks.append(line_of(nth_observation(i % 97, tags=tags)))
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
        d = nth_observation(i).to_dict()
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

_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow  # 5 s measured on 2 busy cores: out of the fast loop
@_settings
@given(st.lists(observations(tags=flat_tags()), min_size=1, max_size=12))
def test_roundtrip_expand(tmp_path_factory, originals):
    path = tmp_path_factory.mktemp("rt") / "l.jsonl"
    QualityLedger(path).extend(originals)
    assert frame_observations(ledger_frame(path)) == originals


@pytest.mark.slow  # 4 s measured on 2 busy cores: out of the fast loop
@_settings
@given(st.lists(observations(tags=flat_tags(nulls=True)), min_size=1, max_size=12))
def test_roundtrip_dict_with_null_tags(tmp_path_factory, originals):
    path = tmp_path_factory.mktemp("rt") / "l.jsonl"
    QualityLedger(path).extend(originals)
    assert frame_observations(ledger_frame(path, tags="dict")) == originals
    # expand mode: a null tag is shown as NA, like an absent one
    expected = [QualityObservation(**{**o.__dict__, "tags": {k: v for k, v in o.tags.items() if v is not None}})
                for o in originals]
    assert frame_observations(ledger_frame(path)) == expected


@pytest.mark.slow  # 5 s measured on 2 busy cores: out of the fast loop
@_settings
@given(st.lists(ledger_lines, min_size=1, max_size=60))
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
    df = ledger_frame([nth_observation(0), nth_observation(1)])
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
    assert df["judge_tokens_in"].tolist() == [0, 120] and df["judge_cost_usd"].tolist() == [0.0, 0.0004]
    assert "cost_usd" not in df.columns  # in a ledger frame cost_usd is the candidate's: never the judge's here
    from llm_connect.columns import RESULT_COLUMNS, RESULT_FRAME_COLUMNS
    judge_side = ("judge_tokens_in", "judge_tokens_out", "judge_cost_usd", "latency_ms")
    assert set(judge_side) <= set(RESULT_COLUMNS) and tuple(df.columns) == RESULT_FRAME_COLUMNS
    assert df["candidate_tokens_out"].tolist() == [1, 2]
    assert len(results_frame([])) == 0
    with pytest.raises(ValueError):
        results_frame([{"quality_score": 1.0}])
