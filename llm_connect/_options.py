"""The one check of the shared run options, and the named reducers of ``reducer=``.

The entry points that run judges over many items (``judge_many``, ``calibrate``, ``score_items``,
``grade_dataset``, ``tournament``, ``Pipeline.run_many``, ...) take the same run options:
``concurrency``, ``progress``, ``run_config``, ``ledger``, ``task_type``, ``budget``, ``batch``,
``epochs`` and ``reducer``. Each means one thing wherever it is taken (its text is written once, in
:data:`llm_connect._docstrings.RUN_OPTIONS`) and is checked once, here, by :func:`check_run_options`,
before any judge runs: a bad value is a :class:`~llm_connect.errors.ValidationError` that names the
option, what it must be and what was given.

The entry points call :func:`check_run_options` with every run option they take, then convert what
they were given: :func:`~llm_connect.runner.as_ledger` opens a ledger's path, ``grading``'s ``reducer_of``
looks a reducer up in :data:`REDUCERS`. Each rule is written once: here, except the two that live with the
value they make, which this module applies (the floors below it never import it): ``budget`` is
:func:`~llm_connect.core.as_budget`'s rule (a number becomes a tracker) and ``batch`` is ``adapters``'
``batch_options``' (the value becomes the Batch API options).

The command line checks its flags itself (``--concurrency must be >= 1``, ``--epochs must be from 1 to
...``), as a usage error in the flags' words.
"""

from __future__ import annotations

import math
import os
import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from .errors import ValidationError

__all__ = ["REDUCERS", "Reducer", "check_run_options"]

Reducer = Callable[[list[float]], float]


def _mode(scores: list[float]) -> float:
    """The most frequent score; a tie between modes is their median (a 1-1 split of 0 and 1 is 0.5)."""
    counts = Counter(scores)
    top = max(counts.values())
    return float(statistics.median(sorted(v for v, c in counts.items() if c == top)))


#: The named reducers of ``reducer=``: how an item's scored epochs become its score.
REDUCERS: dict[str, Reducer] = {
    "mean": lambda s: math.fsum(s) / len(s),
    "median": lambda s: float(statistics.median(s)),
    "mode": _mode,
    "max": lambda s: float(max(s)),
    "min": lambda s: float(min(s)),
}


class _Unset:
    def __repr__(self) -> str:
        return "<not given>"


_UNSET: Any = _Unset()


def _is_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


def _is_bool(value: Any) -> bool:
    """``True`` or ``False``, a numpy bool included (``df["flag"].any()`` is one); not 0 or 1."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"))


def _kind(value: Any) -> str:
    return type(value).__name__


def check_run_options(
    *,
    concurrency: Any = _UNSET,
    progress: Any = _UNSET,
    run_config: Any = _UNSET,
    ledger: Any = _UNSET,
    task_type: Any = _UNSET,
    budget: Any = _UNSET,
    batch: Any = _UNSET,
    epochs: Any = _UNSET,
    reducer: Any = _UNSET,
) -> None:
    """Check the run options an entry point was given, before any judge runs.

    Only the options passed are checked, so each entry point passes those it takes. Each value is
    checked as its shared text (:data:`llm_connect._docstrings.RUN_OPTIONS`) describes it; nothing is
    converted (a number stays a number: :func:`~llm_connect.core.as_budget` makes the tracker).

    Parameters
    ----------
    concurrency : int, optional
        A positive integer.
    progress : bool, optional
        ``True`` or ``False`` (a numpy bool too; not ``0`` or ``1``).
    run_config : RunConfig or None, optional
        A :class:`~llm_connect.RunConfig` whose ``budget_tracker`` is a
        :class:`~llm_connect.BudgetTracker` or ``None``; or ``None``.
    ledger : BaseLedger or str or os.PathLike or None, optional
        A ledger (any object with an ``append(observation)`` method), the path or URI of one, or
        ``None``. A ledger needs ``task_type``.
    task_type : str or None, optional
        A non-empty string, or ``None`` (then ``ledger`` must be ``None``).
    budget : BudgetTracker or float or None, optional
        A :class:`~llm_connect.BudgetTracker`, a limit in USD (a number >= 0, not NaN) or ``None``.
    batch : bool or str or os.PathLike or BatchOptions or None, optional
        ``True``, ``False`` (or ``None``), a state folder or a
        :class:`~llm_connect.adapters.BatchOptions`.
    epochs : int, optional
        A positive integer.
    reducer : str or callable, optional
        One of :data:`REDUCERS` by name, or a callable taking a list of scores and returning one.

    Raises
    ------
    ValidationError
        For the first option whose value is not one of those above, naming the option, what it must be
        and the value given.

    Examples
    --------
    >>> check_run_options(concurrency=8, epochs=3, reducer="median")
    >>> check_run_options(concurrency=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    llm_connect.errors.ValidationError: concurrency must be a positive integer (...), got 0
    """
    if concurrency is not _UNSET and not (_is_int(concurrency) and concurrency >= 1):
        raise ValidationError(
            f"concurrency must be a positive integer (how many items are judged at once), got {concurrency!r}")
    if progress is not _UNSET and not _is_bool(progress):
        raise ValidationError(f"progress must be True or False (show a progress bar), got {progress!r}")
    if run_config is not _UNSET and run_config is not None:
        from .core import BudgetTracker, RunConfig

        if not isinstance(run_config, RunConfig):
            raise ValidationError(f"run_config must be a RunConfig or None, got {_kind(run_config)}")
        tracker = run_config.budget_tracker
        if tracker is not None and not isinstance(tracker, BudgetTracker):
            raise ValidationError("run_config.budget_tracker must be a BudgetTracker or None (a limit in USD goes "
                                  f"in budget=), got {_kind(tracker)}")
    if ledger is not _UNSET and ledger is not None and not isinstance(ledger, (str, os.PathLike)) \
            and not callable(getattr(ledger, "append", None)):
        raise ValidationError("ledger must be a ledger (e.g. QualityLedger('ledger.jsonl')), the path or URI of "
                              f"one, or None, got {_kind(ledger)}")
    if task_type is not _UNSET and task_type is not None and not (isinstance(task_type, str) and task_type.strip()):
        raise ValidationError(f"task_type must be a non-empty string (the task the judgments are recorded and routed "
                              f"under), got {task_type!r}")
    if ledger is not _UNSET and ledger is not None and (task_type is _UNSET or task_type is None):
        raise ValidationError("a ledger needs task_type='...' so its observations can be routed on")
    if budget is not _UNSET:
        from .core import as_budget

        as_budget(budget)  # the rule of a budget lives with the tracker it becomes
    if batch is not _UNSET:
        from .adapters._batches import batch_options

        batch_options(batch)  # the rule of batch= lives with the options it becomes
    if epochs is not _UNSET and not (_is_int(epochs) and epochs >= 1):
        raise ValidationError(
            f"epochs must be a positive integer (how many times each item is judged), got {epochs!r}")
    if reducer is not _UNSET:
        if isinstance(reducer, str):
            if reducer not in REDUCERS:
                raise ValidationError(f"reducer must be one of {list(REDUCERS)} or a callable taking a list of "
                                      f"scores and returning one, got {reducer!r}")
        elif not callable(reducer):
            raise ValidationError(f"reducer must be one of {list(REDUCERS)} or a callable, got {_kind(reducer)}")
