"""The shared run options are checked once (``llm_connect._options.check_run_options``), with messages that say
what each must be, and only the options passed are checked."""

from __future__ import annotations

import math

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


def test_the_reducer_names_are_those_judge_many_takes():
    """Until the grading floor takes its reducers from llm_connect._options (issue #35 wave B), both tables agree."""
    from llm_connect.grading import REDUCERS as GRADING_REDUCERS

    assert list(REDUCERS) == list(GRADING_REDUCERS)
