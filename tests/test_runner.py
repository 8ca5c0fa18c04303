"""The runner (llm_connect.runner): judge_many and grade_many never drop a row, keep order, work in a running loop."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import textwrap
import time

import pandas as pd
import pytest
from interruptible import python_argv

from llm_connect import (
    ExactMatchJudge,
    FunctionJudge,
    LLMJudge,
    PairedGrader,
    QualityLedger,
    RunConfig,
    judge_many,
)
from llm_connect.errors import ServerError
from llm_connect.grading import LLM_JUDGE_RUBRIC_HASH, ajudge_many, grade_many
from llm_connect.items import content_item_id
from llm_connect.testing import ScriptedAdapter

RESULT = ["quality_score", "notes", "grader_id", "status", "error", "latency_ms", "judge_tokens_cached",
          "judge_tokens_in", "judge_tokens_out", "judge_cost_usd"]


def items(n: int, **extra):
    return [
        {"prompt": f"q{i}", "baseline": f"a{i}", "candidate": f"a{i}" if i % 2 == 0 else "x", "id": i, **extra}
        for i in range(n)
    ]


def test_one_row_per_item_in_input_order_with_result_columns():
    df = judge_many(ExactMatchJudge(), items(50), concurrency=7, progress=False)
    assert len(df) == 50
    assert list(df["id"]) == list(range(50))
    assert list(df.columns) == ["prompt", "baseline", "candidate", "id", *RESULT]
    assert list(df["quality_score"]) == [1.0 if i % 2 == 0 else 0.0 for i in range(50)]
    assert set(df["status"]) == {"scored"} and set(df["grader_id"]) == {"exact-match"}


def test_dataframe_input_keeps_index_and_extra_columns():
    frame = pd.DataFrame(items(5), index=list("abcde"))
    frame["topic"] = ["geo"] * 5
    df = judge_many(ExactMatchJudge(), frame, progress=False)
    assert list(df.index) == list("abcde")
    assert list(df["topic"]) == ["geo"] * 5


def test_unparseable_reply_is_unscored_with_reason_never_zero_and_failures_are_error_rows():
    def reply(prompt, rc):
        if "<<<CANDIDATE" in prompt and "bad-reply" in prompt:
            return "I refuse to use JSON"
        if "explode" in prompt:
            raise ServerError("upstream 500 after retries", status=500)
        return '{"quality_score": 0.7, "notes": "ok"}'

    data = [
        {"prompt": "q", "baseline": "b", "candidate": "fine"},
        {"prompt": "q", "baseline": "b", "candidate": "bad-reply"},
        {"prompt": "q", "baseline": "b", "candidate": "explode"},
        {"prompt": "q", "baseline": "b", "candidate": None},
    ]
    df = judge_many(LLMJudge(ScriptedAdapter(reply)), data, progress=False)
    assert list(df["status"]) == ["scored", "unscored", "error", "error"]
    assert df.loc[0, "quality_score"] == 0.7
    assert math.isnan(df.loc[1, "quality_score"]) and "no JSON object" in df.loc[1, "error"]
    assert "no JSON object" in df.loc[1, "notes"]
    assert df.loc[1, "judge_tokens_out"] > 0  # the unparseable call was made: its usage is reported
    assert "ServerError" in df.loc[2, "error"] and math.isnan(df.loc[2, "quality_score"])
    assert "candidate is missing" in df.loc[3, "error"]
    assert df.attrs["counts"] == {"scored": 1, "unscored": 1, "error": 2}


def test_missing_columns_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['candidate'\]"):
        judge_many(ExactMatchJudge(), [{"prompt": "q", "baseline": "b"}], progress=False)
    with pytest.raises(ValueError, match="mapping"):
        judge_many(ExactMatchJudge(), ["just a string"], progress=False)
    with pytest.raises(ValueError, match="concurrency"):
        judge_many(ExactMatchJudge(), items(2), concurrency=0, progress=False)


def test_empty_items_give_an_empty_frame_with_the_columns():
    df = judge_many(ExactMatchJudge(), [], progress=False)
    assert len(df) == 0 and set(RESULT) <= set(df.columns)


def test_input_columns_that_clash_with_results_are_kept_renamed():
    df = judge_many(
        ExactMatchJudge(), [{"prompt": "q", "baseline": "a", "candidate": "a", "notes": "mine"}], progress=False
    )
    assert df.loc[0, "notes_input"] == "mine" and df.loc[0, "notes"] == "exact match"


def test_concurrency_bounds_the_calls_in_flight():
    import threading

    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def reply(prompt, rc):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return '{"quality_score": 1}'

    df = judge_many(LLMJudge(ScriptedAdapter(reply)), items(48), concurrency=8, progress=False)
    assert (df["status"] == "scored").all()
    assert state["max"] == 8  # overlapped, and never more than asked


def test_judge_many_works_inside_a_running_event_loop():
    async def notebook_cell():
        # as in Jupyter: a loop is already running in this thread
        sync_df = judge_many(ExactMatchJudge(), items(10), progress=False)
        async_df = await ajudge_many(ExactMatchJudge(), items(10), progress=False)
        return sync_df, async_df

    sync_df, async_df = asyncio.run(notebook_cell())
    assert len(sync_df) == len(async_df) == 10
    pd.testing.assert_frame_equal(sync_df.drop(columns="latency_ms"), async_df.drop(columns="latency_ms"))


def test_progress_bar_is_shown(capsys):
    judge_many(ExactMatchJudge(), items(3), progress=True)
    assert "3/3" in capsys.readouterr().err


def test_judge_many_appends_scored_rows_to_a_ledger(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    data = items(4, candidate_model="gpt-4o-mini")
    data[3]["candidate"] = None  # an error row is not recorded
    df = judge_many(
        LLMJudge(ScriptedAdapter(['{"quality_score": 0.5}'], cycle=True)),
        data,
        ledger=ledger,
        task_type="qa",
        progress=False,
    )
    obs = ledger.read_all()
    assert len(obs) == 3 == (df["status"] == "scored").sum()
    assert {o.tags["item_id"] for o in obs} == {0, 1, 2}
    assert all(o.tags["rubric_hash"] == LLM_JUDGE_RUBRIC_HASH and o.tags["grader_id"] == "llm-judge" for o in obs)
    assert {o.model_id for o in obs} == {"gpt-4o-mini"}
    with pytest.raises(ValueError, match="task_type"):
        judge_many(ExactMatchJudge(), items(1), ledger=ledger, progress=False)


def test_grade_many_generates_grades_and_records(tmp_path):
    base = ScriptedAdapter(lambda p, rc: f"answer to {p}", adapter_id="base", model_id="big")
    cand = ScriptedAdapter(
        lambda p, rc: "wrong" if p == "q3" else f"answer to {p}",
        adapter_id="cand",
        model_id="small",
        cost_per_call=0.01,
    )
    ledger = QualityLedger(tmp_path / "l.jsonl")
    grader = PairedGrader(ExactMatchJudge(), ledger=ledger, task_type="qa")
    df = grader.grade_many(base, cand, [f"q{i}" for i in range(6)], progress=False, concurrency=3)
    assert list(df["prompt"]) == [f"q{i}" for i in range(6)]
    assert list(df["quality_score"]) == [1, 1, 1, 0, 1, 1]
    assert list(df["candidate"])[3] == "wrong" and list(df["baseline"])[3] == "answer to q3"
    assert (df["candidate_cost_usd"] == 0.01).all()
    obs = ledger.read_all()
    assert len(obs) == 6
    assert {o.adapter_id for o in obs} == {"cand"} and {o.baseline_adapter_id for o in obs} == {"base"}
    # no ids: each item is keyed by its texts (never by its row position, which would be another item's id)
    assert {o.tags["item_id"] for o in obs} == {content_item_id(p, b, c) for p, b, c in
                                                zip(df["prompt"], df["baseline"], df["candidate"], strict=True)}
    assert len({o.tags["item_id"] for o in obs}) == 6
    assert all(o.cost_usd == 0.01 and o.tags["grader_id"] == "exact-match" for o in obs)


def test_grade_many_failed_generation_is_an_error_row():
    base = ScriptedAdapter(["b1", ServerError("down", status=503), "b3"])
    cand = ScriptedAdapter(["c"], cycle=True)
    df = grade_many(ExactMatchJudge(), base, cand, ["p1", "p2", "p3"], concurrency=1, progress=False)
    assert list(df["status"]) == ["scored", "error", "scored"]
    assert "ServerError" in df.loc[1, "error"]


def test_run_config_reaches_the_judge():
    adapter = ScriptedAdapter(['{"quality_score": 1}'], cycle=True)
    judge_many(LLMJudge(adapter), items(2), run_config=RunConfig(max_tokens=33), progress=False)
    assert {c.run_config.max_tokens for c in adapter.calls} == {33}


def test_a_judge_raising_a_bad_score_is_unscored_or_error_not_dropped():
    judge = FunctionJudge(lambda b, c: 2.0 if c == "x" else 1.0)
    df = judge_many(judge, items(4), progress=False)
    assert len(df) == 4
    assert list(df["status"]) == ["scored", "error", "scored", "error"]
    assert "quality_score" in df.loc[1, "error"]


@pytest.mark.slow  # 3 s measured on 2 busy cores: out of the fast loop
def test_ctrl_c_stops_cleanly_keeping_what_finished(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from llm_connect import LLMJudge, QualityLedger, judge_many
        from llm_connect.testing import ScriptedAdapter

        adapter = ScriptedAdapter(lambda p, rc: '{"quality_score": 1}', latency_s=0.05)
        items = [{"prompt": f"q{i}", "baseline": "b", "candidate": "c", "id": i} for i in range(2000)]
        ledger = QualityLedger(sys.argv[1])
        print("started", flush=True)
        df = judge_many(LLMJudge(adapter), items, concurrency=4, progress=False, ledger=ledger, task_type="qa")
        print("rows", len(df), "scored", int((df.status == "scored").sum()),
              "interrupted", df.attrs["interrupted"], flush=True)
        """
    )
    ledger_path = tmp_path / "l.jsonl"
    proc = subprocess.Popen(
        python_argv("-c", script, str(ledger_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )  # python_argv: the child takes Ctrl-C even when this runner ignores SIGINT (nohup)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    words = out.split()
    rows, scored = int(words[words.index("rows") + 1]), int(words[words.index("scored") + 1])
    assert rows == 2000 and 0 < scored < 2000
    assert words[words.index("interrupted") + 1] == "True"
    assert len(QualityLedger(ledger_path).read_all()) >= scored - 4  # finished rows were recorded as they finished
    assert os.path.exists(ledger_path)


# -- a scored row keeps its score: item ids and ledger failures ------------------------------------


class _Opaque:
    def __str__(self) -> str:
        return "opaque-7"


def test_item_ids_of_any_kind_are_recorded_and_never_unscore_a_row(tmp_path):
    import numpy as np

    ledger = QualityLedger(tmp_path / "l.jsonl")
    ids = [math.nan, None, np.int64(5), "x", _Opaque(), pd.NA, np.float64(2.0), 3.5]
    data = [{"prompt": "q", "baseline": "a", "candidate": "a", "id": v} for v in ids]
    df = judge_many(ExactMatchJudge(), data, ledger=ledger, task_type="qa", progress=False)
    assert list(df["status"]) == ["scored"] * len(ids) and list(df["quality_score"]) == [1.0] * len(ids)
    assert df["ledger_error"].isna().all()
    recorded = [o.tags["item_id"] for o in ledger.read_all()]
    # a missing id is the key of the item's texts (never the row's position: NA at row 5 is not item 5);
    # numpy scalars are plain Python; other objects are their text
    # the three id-less rows have the same texts: one item, recorded once
    key = content_item_id("q", "a", "a")
    assert sorted(map(str, recorded)) == sorted(map(str, [key, 5, "x", "opaque-7", 2, 3.5]))
    assert df.attrs["ledger"] == {"recorded": 6, "already": 2, "failed": 0}
    assert {type(v) for v in recorded} <= {int, float, str}


def test_a_failing_ledger_is_reported_in_its_own_column_and_the_row_stays_scored(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the ledger's directory should be")
    ledger = QualityLedger(blocker / "l.jsonl")
    judge = LLMJudge(ScriptedAdapter(['{"quality_score": 0.5}'], cycle=True))
    df = judge_many(judge, items(3), ledger=ledger, task_type="qa", progress=False)
    assert list(df["status"]) == ["scored"] * 3 and list(df["quality_score"]) == [0.5] * 3
    assert df["error"].isna().all()
    assert df["ledger_error"].str.contains("ledger append failed").all()

    base = ScriptedAdapter(["b"], cycle=True)
    graded = grade_many(
        ExactMatchJudge(), base, base, [{"prompt": "p", "id": math.nan}], ledger=ledger, task_type="qa", progress=False
    )
    assert graded.loc[0, "status"] == "scored" and graded.loc[0, "quality_score"] == 1.0
    assert "ledger append failed" in graded.loc[0, "ledger_error"]


def test_grade_many_records_a_missing_id_as_the_key_of_its_texts(tmp_path):
    ledger = QualityLedger(tmp_path / "l.jsonl")
    base = ScriptedAdapter(["b"], cycle=True)
    frame = pd.DataFrame({"prompt": ["p0", "p1"], "id": [math.nan, 7.0]})
    graded = grade_many(ExactMatchJudge(), base, base, frame, ledger=ledger, task_type="qa", progress=False)
    assert list(graded["status"]) == ["scored", "scored"] and graded["ledger_error"].isna().all()
    assert sorted(map(str, (o.tags["item_id"] for o in ledger.read_all()))) == sorted(
        ["7", content_item_id("p0", "b", "b")])  # 7.0 is 7; the id-less row is keyed by its texts, not by 0


# -- missing text is not a match -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"prompt": "q", "baseline": "", "candidate": ""}, "baseline is blank"),
        ({"prompt": "q", "baseline": "  \n", "candidate": "  \n"}, "baseline is blank"),
        ({"prompt": "q", "baseline": math.nan, "candidate": "nan"}, "baseline is missing"),
        ({"prompt": "q", "baseline": None, "candidate": "None"}, "baseline is missing"),
        ({"prompt": "q", "baseline": "a", "candidate": pd.NA}, "candidate is missing"),
        ({"prompt": None, "baseline": "a", "candidate": "a"}, "prompt is missing"),
        ({"prompt": math.nan, "baseline": "a", "candidate": "a"}, "prompt is missing"),
    ],
)
@pytest.mark.parametrize("make_judge", ["exact", "squad", "llm"])
def test_missing_or_blank_text_is_an_error_row_naming_the_column(row, reason, make_judge):
    adapter = ScriptedAdapter(['{"quality_score": 1.0}'], cycle=True)
    judge = {"exact": ExactMatchJudge(), "squad": ExactMatchJudge(normalizer="squad"), "llm": LLMJudge(adapter)}[
        make_judge
    ]
    df = judge_many(judge, [row, {"prompt": "q", "baseline": "a", "candidate": "a"}], progress=False)
    assert df.loc[0, "status"] == "error" and reason in df.loc[0, "error"]
    assert math.isnan(df.loc[0, "quality_score"])
    assert df.loc[1, "status"] == "scored"
    assert df.attrs["counts"] == {"scored": 1, "unscored": 0, "error": 1}
    assert len(adapter.calls) == (1 if make_judge == "llm" else 0)  # no judge call for the bad row


def test_a_frame_with_nulls_as_calibrate_passes_it_gives_error_rows_and_counts():
    frame = pd.DataFrame(
        {
            "prompt": ["q1", "q2", "q3", "q4"],
            "baseline": ["Paris", None, "", "Rome"],
            "candidate": ["Paris", "x", "", ""],
        }
    )
    df = judge_many(ExactMatchJudge(), frame, progress=False)
    assert list(df["status"]) == ["scored", "error", "error", "scored"]
    scores = df["quality_score"].tolist()
    assert scores[0] == 1.0 and scores[3] == 0.0  # an empty answer is scored (wrong), not an error
    assert "baseline is missing" in df.loc[1, "error"] and "baseline is blank" in df.loc[2, "error"]
    assert df.attrs["counts"] == {"scored": 2, "unscored": 0, "error": 2}


def test_a_baseline_with_no_reference_after_splitting_is_an_error_row():
    judge = ExactMatchJudge(reference_sep="|")
    data = [
        {"prompt": "q", "baseline": " | |", "candidate": "|"},
        {"prompt": "q", "baseline": "Paris| |Lutetia", "candidate": "Lutetia"},
    ]
    df = judge_many(judge, data, progress=False)
    assert df.loc[0, "status"] == "error" and "no non-empty reference" in df.loc[0, "error"]
    assert df.loc[1, "status"] == "scored" and df.loc[1, "quality_score"] == 1.0


def test_grade_many_blank_generated_baseline_is_an_error_row_that_keeps_the_answers():
    base = ScriptedAdapter(["", "Paris"], cost_per_call=0.1)
    cand = ScriptedAdapter(["", "Paris"], cost_per_call=0.2)
    judge_adapter = ScriptedAdapter(['{"quality_score": 1.0}'], cycle=True)
    df = grade_many(LLMJudge(judge_adapter), base, cand, ["p1", "p2"], concurrency=1, progress=False)
    assert list(df["status"]) == ["error", "scored"]
    assert "baseline is blank" in df.loc[0, "error"]
    assert df.loc[0, "candidate_cost_usd"] == 0.2 and df.loc[0, "baseline_cost_usd"] == 0.1
    assert len(judge_adapter.calls) == 1  # the blank baseline was not judged


def test_pipeline_run_many_missing_field_is_an_error_row():
    from llm_connect.pipelines import BooleanScale, JudgeUnit, Pipeline

    adapter = ScriptedAdapter(["Verdict: yes"], cycle=True)
    pipeline = Pipeline(JudgeUnit("Is {candidate} right for {baseline}?", BooleanScale()), adapter=adapter)
    data = [
        {"candidate": "a", "baseline": "b"},
        {"candidate": None, "baseline": "b"},
        {"candidate": "a", "baseline": " "},
    ]
    df = pipeline.run_many(data, progress=False)
    assert list(df["status"]) == ["scored", "error", "error"]
    assert "candidate is missing" in df.loc[1, "error"] and "baseline is blank" in df.loc[2, "error"]
    assert len(adapter.calls) == 1


# -- declared abilities and the one engine -------------------------------------------------------


def test_judge_abilities_are_declared_with_defaults():
    from llm_connect.grading import JudgeBase, PairwiseJudge, judge_abilities, supports_async

    class Plain:  # a protocol judge that inherits nothing: the defaults apply
        grader_id = "plain"

        def judge(self, baseline, candidate, *, prompt, run_config):
            raise AssertionError("not called")

    plain = judge_abilities(Plain())
    assert (plain.is_async, plain.pairwise, plain.rubric_hash, plain.reference_sep) == (False, False, None, None)
    assert plain.extra_columns == () and plain.splits_references is False and plain.model_id is None
    exact = judge_abilities(ExactMatchJudge(reference_sep="|"))
    assert exact.is_async and exact.reference_sep == "|" and exact.splits_references
    llm = judge_abilities(LLMJudge(ScriptedAdapter(["{}"], model_id="gpt-4o-mini")))
    assert llm.rubric_hash == LLM_JUDGE_RUBRIC_HASH and llm.model_id == "gpt-4o-mini"
    pairwise = judge_abilities(PairwiseJudge(ScriptedAdapter(["{}"])))
    assert pairwise.pairwise and pairwise.extra_columns == ("verdict", "consistent", "details")
    assert not supports_async(FunctionJudge(lambda b, c: 1.0)) and supports_async(ExactMatchJudge())
    assert JudgeBase.pairwise is False and JudgeBase().rubric_hash is None and JudgeBase.reference_sep is None


def test_a_sync_only_judge_runs_in_threads_and_an_async_one_is_awaited():
    import threading

    from llm_connect.grading import GradingResult

    seen: list[str] = []

    class SyncOnly:
        grader_id = "sync-only"

        def judge(self, baseline, candidate, *, prompt, run_config):
            seen.append(threading.current_thread().name)
            return GradingResult(1.0, "", self.grader_id, baseline, candidate)

    df = judge_many(SyncOnly(), items(4), progress=False)
    assert (df["status"] == "scored").all() and all(name.startswith("llm_connect-worker") for name in seen)


def test_the_runner_is_below_grading_and_imports_none_of_it():
    import ast
    from pathlib import Path

    import llm_connect.columns as columns
    import llm_connect.items as items_module
    import llm_connect.runner as runner

    for module in (runner, items_module, columns):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not any(m.startswith(("grading", "pipelines", "calibration")) for m in imported), module.__name__
    assert columns.RESULT_COLUMNS[-1] == "judge_cost_usd"
    assert columns.GRADE_COLUMNS[2:2 + len(columns.RESULT_COLUMNS)] == columns.RESULT_COLUMNS


def test_ajudge_many_takes_the_path_of_judge_many():
    from llm_connect.grading import PairwiseJudge

    judge = PairwiseJudge(ScriptedAdapter(['{"winner": "B"}'], cycle=True, cost_per_call=0.01))
    sync = judge_many(judge, items(3), progress=False)
    awaited = asyncio.run(ajudge_many(judge, items(3), progress=False))
    assert list(awaited.columns) == list(sync.columns)
    assert [*RESULT, "verdict", "consistent", "details"] == list(sync.columns)[-(len(RESULT) + 3):]
    assert awaited["judge_cost_usd"].tolist() == sync["judge_cost_usd"].tolist() == pytest.approx([0.02] * 3)


# -- recording: rows that finish together are written together ------------------------------------------------


def _qa_items(n, *, long_id_at=None):
    rows = []
    for i in range(n):
        item_id = ("x" * 3000 + str(i)) if i == long_id_at else f"q{i}"
        rows.append({"id": item_id, "prompt": f"p{i}", "baseline": f"answer {i % 7}", "candidate": f"answer {i % 5}"})
    return pd.DataFrame(rows)


def test_rows_recorded_together_become_few_parquet_files_and_lose_none(tmp_path):
    """Group commit: a run writing to a ParquetLedger does not leave one file per row, and every scored
    row's observation is there exactly once."""
    from llm_connect import ExactMatchJudge, ParquetLedger, judge_many

    ledger = ParquetLedger(tmp_path / "pq")
    items = _qa_items(300)
    df = judge_many(ExactMatchJudge(), items, ledger=ledger, task_type="qa", concurrency=16, progress=False)
    assert (df["status"] == "scored").all() and df["ledger_error"].isna().all()
    got = ledger.read_all()
    assert sorted(o.tags["item_id"] for o in got) == sorted(items["id"])
    files = list((tmp_path / "pq").rglob("*.parquet"))
    assert 1 <= len(files) < 300 / 2, len(files)  # grouped, not one file per row


def test_a_refused_observation_fails_only_its_own_row_in_a_group(tmp_path):
    """One observation the ledger refuses (its line would pass max_line_bytes) is that row's ledger_error;
    the rows written in the same group are recorded once each."""
    from llm_connect import ExactMatchJudge, QualityLedger, judge_many

    ledger = QualityLedger(tmp_path / "l.jsonl", max_line_bytes=2000)
    items = _qa_items(120, long_id_at=37)
    df = judge_many(ExactMatchJudge(), items, ledger=ledger, task_type="qa", concurrency=16, progress=False)
    failed = df[df["ledger_error"].notna()]
    assert list(failed.index) == [37] and "max_line_bytes" in failed.loc[37, "ledger_error"]
    assert (df["status"] == "scored").all()  # the judgment stands
    ids = [o.tags["item_id"] for o in ledger.read_all()]
    assert sorted(ids) == sorted(i for k, i in enumerate(items["id"]) if k != 37)
    assert ledger.malformed_count() == 0


# -- recording once: a rerun adds nothing and says how many it found ------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_a_rerun_records_no_judgment_twice_and_says_how_many_it_found(tmp_path, caplog, kind):
    """Each judgment is recorded once per item, grader, rubric and candidate model, whichever path records it
    (the group commit of judge_many and grade_many, the reduced rows of epochs); ``attrs["ledger"]`` counts."""
    from llm_connect import ParquetLedger

    ledger = QualityLedger(tmp_path / "l.jsonl") if kind == "jsonl" else ParquetLedger(tmp_path / "pq")
    first = judge_many(ExactMatchJudge(), items(6), ledger=ledger, task_type="qa", progress=False)
    assert first.attrs["ledger"] == {"recorded": 6, "already": 0, "failed": 0}
    with caplog.at_level("WARNING", logger="llm_connect"):
        again = judge_many(ExactMatchJudge(), items(8), ledger=ledger, task_type="qa", progress=False, concurrency=3)
    assert again.attrs["ledger"] == {"recorded": 2, "already": 6, "failed": 0}
    assert again["ledger_error"].isna().all() and (again["status"] == "scored").all()  # the rows stand
    assert "exact-match: 6 judgment(s) already in the ledger, not recorded again" in caplog.text
    reduced = judge_many(ExactMatchJudge(), items(9), ledger=ledger, task_type="qa", progress=False, epochs=2)
    assert reduced.attrs["ledger"] == {"recorded": 1, "already": 8, "failed": 0}
    # another candidate model, another judge or another rubric is another judgment
    other = judge_many(ExactMatchJudge(), items(2, candidate_model="m2"), ledger=ledger, task_type="qa",
                       progress=False)
    llm = judge_many(LLMJudge(ScriptedAdapter(['{"quality_score": 1}'], cycle=True)), items(2), ledger=ledger,
                     task_type="qa", progress=False)
    assert other.attrs["ledger"]["recorded"] == llm.attrs["ledger"]["recorded"] == 2
    observations = ledger.read_all()
    assert len(observations) == 13
    assert sorted(o.tags["item_id"] for o in observations if o.tags["grader_id"] == "exact-match"
                  and o.model_id == "unknown") == list(range(9))
    # grade_many records through the same path
    base = ScriptedAdapter(lambda p, rc: f"answer to {p}", adapter_id="base", model_id="big")
    grader = PairedGrader(ExactMatchJudge(), ledger=ledger, task_type="qa")
    graded = [grader.grade_many(base, base, ["q1", "q2"], progress=False) for _ in range(2)]
    assert [g.attrs["ledger"]["recorded"] for g in graded] == [2, 0] and graded[1].attrs["ledger"]["already"] == 2
    assert len(ledger.read_all()) == 15
