"""The shared run options are checked once (``llm_connect._options.check_run_options``), with messages that say
what each must be, and only the options passed are checked."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from llm_connect import BudgetTracker, QualityLedger, RunConfig, ValidationError
from llm_connect._options import REDUCERS, check_run_options
from llm_connect.adapters import BatchOptions


def test_good_values_pass(tmp_path):
    check_run_options(concurrency=1, progress=False, run_config=RunConfig(), ledger=QualityLedger(tmp_path / "l.jsonl"),
                      task_type="qa", budget=BudgetTracker(1.0), batch=BatchOptions(), epochs=3, reducer="median")
    check_run_options(run_config=None, ledger=None, task_type=None, budget=None, batch=None)
    check_run_options(budget=0, batch=True, reducer=max)
    check_run_options(batch=tmp_path / "state", ledger=str(tmp_path / "l.jsonl"), task_type="qa")
    check_run_options()


class _Sink:
    """Any object with append(observation) is a ledger to record to."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def append(self, observation: object) -> None:
        self.seen.append(observation)


def test_a_ledger_may_be_any_sink_with_append():
    check_run_options(ledger=_Sink(), task_type="qa")


@pytest.mark.parametrize(("options", "message"), [
    ({"concurrency": 0}, r"concurrency must be a positive integer \(how many items are judged at once\), got 0"),
    ({"concurrency": True}, r"concurrency must be a positive integer .*got True"),
    ({"concurrency": 2.0}, r"concurrency must be a positive integer .*got 2.0"),
    ({"concurrency": None}, r"concurrency must be a positive integer .*got None"),
    ({"progress": "yes"}, r"progress must be True or False .*got 'yes'"),
    ({"run_config": {"temperature": 0}}, r"run_config must be a RunConfig or None, got dict"),
    ({"ledger": 3, "task_type": "qa"}, r"ledger must be a ledger .*the path or URI of one, or None, got int"),
    ({"ledger": _Sink()}, r"a ledger needs task_type='...'"),
    ({"ledger": _Sink(), "task_type": None}, r"a ledger needs task_type='...'"),
    ({"task_type": "  "}, r"task_type must be a non-empty string .*got '  '"),
    ({"task_type": 7}, r"task_type must be a non-empty string .*got 7"),
    ({"budget": "5"}, r"budget must be a BudgetTracker or a limit in USD \(a number\), got str"),
    ({"budget": True}, r"budget must be a BudgetTracker or a limit in USD"),
    ({"budget": -1.0}, r"budget must be >= 0 USD, got -1.0"),
    ({"budget": math.nan}, r"budget must be >= 0 USD, got nan"),
    ({"batch": 1}, r"batch must be True, False, a folder or BatchOptions, got 1"),
    ({"batch": {"poll_interval_s": 1}}, r"batch must be True, False, a folder or BatchOptions"),
    ({"epochs": 0}, r"epochs must be a positive integer \(how many times each item is judged\), got 0"),
    ({"epochs": 2.5}, r"epochs must be a positive integer"),
    ({"reducer": "average"}, r"reducer must be one of \['mean', 'median', 'mode', 'max', 'min'\] or a callable "
                             r"taking a list of scores and returning one, got 'average'"),
    ({"reducer": 3}, r"reducer must be one of .* or a callable, got int"),
])
def test_a_bad_value_is_refused_saying_what_it_must_be(options, message):
    with pytest.raises(ValidationError, match=message) as info:
        check_run_options(**options)
    assert isinstance(info.value, ValueError)


def test_the_named_reducers_reduce_as_documented():
    scores = [0.0, 1.0, 1.0, 0.5]
    assert {name: fn(scores) for name, fn in REDUCERS.items()} == {
        "mean": 0.625, "median": 0.75, "mode": 1.0, "max": 1.0, "min": 0.0}
    assert REDUCERS["mode"]([0.0, 1.0]) == 0.5  # a tie between modes is their median


def test_the_reducers_judge_many_takes_are_the_one_table():
    from llm_connect.grading import REDUCERS as GRADING_REDUCERS

    assert GRADING_REDUCERS is REDUCERS


def test_progress_is_true_or_false_a_numpy_bool_included_but_not_a_number():
    check_run_options(progress=np.bool_(True))
    check_run_options(progress=pd.Series([1, 2]).gt(1).any())  # what a frame's test gives
    for bad in (0, 1, None, "False"):
        with pytest.raises(ValidationError, match=r"progress must be True or False"):
            check_run_options(progress=bad)


def test_a_run_config_whose_tracker_is_a_number_is_refused():
    with pytest.raises(ValidationError, match=r"run_config.budget_tracker must be a BudgetTracker or None \(a "
                                              r"limit in USD goes in budget=\), got float"):
        check_run_options(run_config=RunConfig(budget_tracker=5.0))  # type: ignore[arg-type]


# -- every entry point checks its options through the one check, before any judge runs ----------------------------

ITEMS = [{"id": 1, "prompt": "2+2?", "baseline": "4", "candidate": "4"}]


def _pipeline(adapter):
    from llm_connect import Pipeline
    from llm_connect.pipelines import BooleanScale, JudgeUnit

    return Pipeline(JudgeUnit("{prompt} {baseline} {candidate}", BooleanScale()), adapter=adapter, name="p")


def _entry_points(adapter):
    """Each entry point taking run options, called with ``options`` (a judge calling ``adapter``)."""
    import asyncio

    from llm_connect import LLMJudge, PanelJudge, SelectiveJudge, ajudge_many, cascade, grade_many, judge_many
    from llm_connect.grading import PairedGrader, PairwiseJudge, tournament

    judge = LLMJudge(adapter)
    panel = PanelJudge([judge, LLMJudge(adapter, grader_id="second")])
    answers = [{"prompt": "2+2?", "model": m, "answer": a} for m, a in (("x", "4"), ("y", "5"))]
    labelled = [{**ITEMS[0], "human": True}]
    return {
        "judge_many": lambda **o: judge_many(judge, ITEMS, **o),
        "ajudge_many": lambda **o: asyncio.run(ajudge_many(judge, ITEMS, **o)),
        "grade_many": lambda **o: grade_many(judge, adapter, adapter, ["2+2?"], **o),
        "PairedGrader.grade_many": lambda **o: PairedGrader(judge).grade_many(adapter, adapter, ["2+2?"], **o),
        "tournament": lambda **o: tournament(PairwiseJudge(adapter), answers, **o),
        "PanelJudge.judge_many": lambda **o: panel.judge_many(ITEMS, **o),
        "SelectiveCascade.judge_many": lambda **o: cascade([judge]).judge_many(ITEMS, **o),
        "SelectiveJudge.calibrate": lambda **o: SelectiveJudge(judge).calibrate(labelled, human="human", **o),
        "SelectiveCascade.calibrate": lambda **o: cascade([judge]).calibrate(labelled, human="human", **o),
        "Pipeline.run_many": lambda **o: _pipeline(adapter).run_many(ITEMS, **o),
        "Pipeline.arun_many": lambda **o: asyncio.run(_pipeline(adapter).arun_many(ITEMS, **o)),
    }


ENTRY_POINTS = ["judge_many", "ajudge_many", "grade_many", "PairedGrader.grade_many", "tournament",
                "PanelJudge.judge_many", "SelectiveCascade.judge_many", "SelectiveJudge.calibrate",
                "SelectiveCascade.calibrate", "Pipeline.run_many", "Pipeline.arun_many"]


def test_the_entry_points_listed_are_those_built():
    from llm_connect.testing import ScriptedAdapter

    assert list(_entry_points(ScriptedAdapter(["x"]))) == ENTRY_POINTS


@pytest.mark.parametrize("name", ENTRY_POINTS)
@pytest.mark.parametrize(("option", "value", "message"), [
    ("concurrency", 0, r"concurrency must be a positive integer \(how many items are judged at once\), got 0"),
    ("progress", "yes", r"progress must be True or False \(show a progress bar\), got 'yes'"),
    ("budget", -1.0, r"budget must be >= 0 USD, got -1.0"),
    ("run_config", {"temperature": 0}, r"run_config must be a RunConfig or None, got dict"),
])
def test_every_entry_point_refuses_a_bad_option_before_any_call(name, option, value, message):
    from llm_connect.testing import ScriptedAdapter

    adapter = ScriptedAdapter(['{"score": 1, "winner": "A"}'], cycle=True)
    with pytest.raises(ValidationError, match=message):
        _entry_points(adapter)[name](**{option: value})
    assert adapter.calls == []


@pytest.mark.parametrize("name", ["judge_many", "ajudge_many", "grade_many", "tournament", "PanelJudge.judge_many",
                                  "SelectiveCascade.judge_many"])
def test_a_ledger_without_a_task_type_is_refused_by_every_entry_point_that_records(name, tmp_path):
    from llm_connect.testing import ScriptedAdapter

    adapter = ScriptedAdapter(['{"score": 1, "winner": "A"}'], cycle=True)
    with pytest.raises(ValidationError, match=r"a ledger needs task_type='...'"):
        _entry_points(adapter)[name](ledger=tmp_path / "l.jsonl", progress=False)
    assert adapter.calls == [] and not (tmp_path / "l.jsonl").exists()


# -- a ledger's path is opened (open_ledger): judge_many, ajudge_many, grade_many ----------------------------------


@pytest.mark.parametrize("kind", ["str", "Path"])
def test_judge_many_records_to_a_ledger_given_by_its_path(tmp_path, kind):
    from llm_connect import judge_many
    from llm_connect.grading import ExactMatchJudge

    path = tmp_path / "ledger.jsonl"
    out = judge_many(ExactMatchJudge(), ITEMS * 2, ledger=str(path) if kind == "str" else path, task_type="qa",
                     progress=False)
    assert out.attrs["ledger"] == {"recorded": 1, "already": 1, "failed": 0}  # the same item twice: once
    assert [(o.task_type, o.tags["item_id"], o.quality_score) for o in QualityLedger(path).read_all()] == [
        ("qa", 1, 1.0)]
    again = judge_many(ExactMatchJudge(), ITEMS, ledger=str(path), task_type="qa", progress=False)
    assert again.attrs["ledger"]["already"] == 1 and len(QualityLedger(path).read_all()) == 1


def test_ajudge_many_records_to_a_ledger_given_by_its_path(tmp_path):
    import asyncio

    from llm_connect import ajudge_many
    from llm_connect.grading import ExactMatchJudge

    path = tmp_path / "nested" / "ledger.jsonl"
    out = asyncio.run(ajudge_many(ExactMatchJudge(), ITEMS, ledger=str(path), task_type="qa", progress=False))
    assert out.attrs["ledger"]["recorded"] == 1
    assert [o.tags["item_id"] for o in QualityLedger(path).read_all()] == [1]


def test_a_ledger_directory_path_is_a_parquet_ledger(tmp_path):
    pytest.importorskip("pyarrow")
    from llm_connect import judge_many
    from llm_connect.grading import ExactMatchJudge
    from llm_connect.quality import ParquetLedger

    folder = tmp_path / "ledger"
    folder.mkdir()
    judge_many(ExactMatchJudge(), ITEMS, ledger=folder, task_type="qa", progress=False)
    assert [o.quality_score for o in ParquetLedger(folder).read_all()] == [1.0]


def test_grade_many_records_to_a_ledger_given_by_its_path(tmp_path):
    from llm_connect import grade_many
    from llm_connect.grading import ExactMatchJudge
    from llm_connect.testing import ScriptedAdapter

    path = tmp_path / "ledger.jsonl"
    out = grade_many(ExactMatchJudge(), ScriptedAdapter(["4"]), ScriptedAdapter(["4"]), ["2+2?"], ledger=str(path),
                     task_type="qa", progress=False)
    assert out["status"].tolist() == ["scored"] and out["ledger_error"].isna().all()
    assert [o.quality_score for o in QualityLedger(path).read_all()] == [1.0]
