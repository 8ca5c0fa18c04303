"""The ``batch=`` switch of every judging entry point: a :class:`~llm_connect.runner.RunPlan` run through the
providers' Batch APIs (:mod:`llm_connect.adapters._batches`).

``judge_many``, ``ajudge_many``, ``Pipeline.run_many``, ``calibrate`` and ``grade_dataset`` build their
plan as usual and hand it to :func:`provider_batch_plan`: every row then runs at once inside a
:class:`~llm_connect.adapters._batches.BatchCollector`, whose rounds send the rows' adapter calls as
provider batches; the rows, statuses, columns and ledger records are those of the same run without
``batch``. ``df.attrs["batch"]`` says what was done at the provider (rounds, batch ids submitted and
collected, the state folder).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..adapters._batches import BatchCollector, batch_options
from ..runner import Row, RunPlan

__all__ = ["provider_batch_plan"]


def provider_batch_plan(plan: RunPlan, batch: Any, *, ledger: Any = None,
                        concurrency: int = 16, progress: bool = True) -> tuple[RunPlan, int]:
    """``(plan, concurrency)`` to run: unchanged when ``batch`` is off, else the plan whose rows' adapter
    calls go through the Batch APIs, run with every row at once (a round holds every row's calls).

    ``batch``: ``True`` (state beside ``ledger``: ``<ledger>.batches/``), a folder for the state, or
    :class:`~llm_connect.adapters.BatchOptions`. The same call with the same state resumes: submitted
    batches are collected, not submitted again. ``progress``: the run's own switch; ``False`` turns the
    batches' polling bar off too, whatever the options say (a quiet run is quiet).
    """
    options = batch_options(batch, ledger)
    if options is None:
        return plan, concurrency
    if not progress and options.progress:
        options = replace(options, progress=False)
    collector = BatchCollector(plan.n, options, desc=plan.desc)
    finish = plan.finish

    def finished(rows: list[Row], interrupted: bool) -> Any:
        out = finish(rows, interrupted)
        if not interrupted:
            collector.close()
        try:
            out.attrs["batch"] = collector.summary
        except AttributeError:  # a finish step that returns no frame
            pass
        return out

    return replace(plan, work=collector.wrap(plan.work), finish=finished), max(1, plan.n)
