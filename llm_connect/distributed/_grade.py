"""The entry point: :func:`grade_dataset`, a Ray Dataset judged on a pool of Ray actors, and the pool's sizing.

How a job runs, its rate limit, its budget and how it resumes are told in :mod:`llm_connect.distributed`.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._docstrings import share_parameters
from .._options import check_run_options
from ..core import BudgetTracker
from ..errors import ValidationError
from ..grading import Judge
from ..items import ITEM_COLUMNS
from ..quality import BaseLedger
from ..runner import as_ledger
from ._actor import GradingActor
from ._budget import SharedBudget, shared_budget
from ._extra import need_ray
from ._rate_limit import RateLimit, Schedule

__all__ = ["ACTOR_CPUS", "UPSTREAM_CPUS", "actor_cpus", "grade_dataset"]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    return value


#: The CPUs each grading actor reserves unless told otherwise (an HTTP judge mostly waits).
ACTOR_CPUS = 0.25
#: The CPUs the tasks in front of the actors (reading the dataset, splitting it into chunks) need free: Ray
#: Data runs each with one CPU, and an actor pool holds its CPUs for the whole job.
UPSTREAM_CPUS = 1.0


def _cluster_cpus(ray: Any) -> float | None:
    """The CPUs of the running cluster (``None`` when Ray cannot say)."""
    try:
        cpus = ray.cluster_resources().get("CPU")
    except Exception:  # a cluster that does not answer: leave the sizing to Ray
        return None
    return float(cpus) if isinstance(cpus, (int, float)) else None


def actor_cpus(num_cpus: float | None, num_actors: int, cluster_cpus: float | None) -> float:
    """The CPUs each of ``num_actors`` grading actors reserves on a cluster of ``cluster_cpus`` CPUs.

    Parameters
    ----------
    num_cpus : float or None
        What the caller asked for per actor; ``None``: :data:`ACTOR_CPUS`, or less so the actors leave
        :data:`UPSTREAM_CPUS` free (down to 0).
    num_actors : int
        The actors in the pool.
    cluster_cpus : float or None
        The cluster's CPUs (``None``: unknown, nothing is checked).

    Returns
    -------
    float
        The CPUs per actor.

    Raises
    ------
    ValidationError
        When ``num_cpus`` was given and ``num_actors`` actors of that size leave less than
        :data:`UPSTREAM_CPUS` of the cluster for the tasks that feed them: the job would wait forever.
    """
    if cluster_cpus is None:
        return ACTOR_CPUS if num_cpus is None else float(num_cpus)
    spare = max(0.0, cluster_cpus - UPSTREAM_CPUS)
    if num_cpus is None:
        return min(ACTOR_CPUS, math.floor(100 * spare / num_actors) / 100)
    if num_actors * num_cpus > spare + 1e-9:
        fits = math.floor(100 * spare / num_actors) / 100
        raise ValidationError(
            f"grade_dataset: {num_actors} actor(s) x num_cpus={num_cpus:g} hold {num_actors * num_cpus:g} of the "
            f"cluster's {cluster_cpus:g} CPU(s) for the whole job, leaving less than the {UPSTREAM_CPUS:g} the "
            "tasks that read and split the dataset need, so the job would wait forever; pass num_cpus="
            f"{fits:g} or less (0 suits a judge that calls an HTTP endpoint), fewer actors, or start Ray with "
            "more CPUs (ray.init(num_cpus=N))")
    return float(num_cpus)


@share_parameters
def grade_dataset(
    ds: Any,
    judge_factory: Callable[[], Judge],
    *,
    concurrency: int = 16,
    num_actors: int = 2,
    batch_size: int = 512,
    ledger: BaseLedger | str | os.PathLike[str] | None = None,
    task_type: str | None = None,
    rate_limit: RateLimit | Mapping[str, Any] | None = None,
    run_config: Any = None,
    budget: BudgetTracker | float | None = None,
    num_cpus: float | None = None,
    ray_remote_args: Mapping[str, Any] | None = None,
    batch: Any = False,
) -> Any:
    """Judge every row of a Ray Dataset on a pool of Ray actors; a Ray Dataset of ``judge_many``'s rows.

    Each actor builds its own judge (``judge_factory()``, once) and runs ``judge_many``'s runner on each
    chunk of ``batch_size`` rows Ray Data hands it, ``concurrency`` judgments in flight, so
    ``num_actors * concurrency`` at once; a failed item is an ``error`` row, never a dropped one.

    Parameters
    ----------
    ds : ray.data.Dataset
        Items with ``prompt``, ``baseline`` and ``candidate`` texts (other columns are carried through,
        ``id`` names the item).
    judge_factory : callable
        A zero-argument callable returning the judge (e.g. ``functools.partial(make_judge, url)``); each
        actor calls it once, so every actor builds its own adapters and models. It is pickled to the
        workers (cloudpickle): define it in an importable module or build it from library callables.
    concurrency : int, default 16
        Judgments each actor keeps in flight (``judge_many``'s ``concurrency``).
    num_actors : int, default 2
        Actors in the pool (Ray Data's ``ActorPoolStrategy(size=...)``).
    batch_size : int, default 512
        Rows handed to an actor at a time (Ray Data's ``map_batches(batch_size=)``: a chunk).
    {ledger}
        On a rerun, the items the same grader and rubric already scored are skipped (needs an ``id``
        column; adds the ``ledger_error`` and ``resumed`` columns). A ``ParquetLedger`` takes appends from
        every host without a lock; a path is made absolute first, so every actor opens the same file.
    {task_type}
    rate_limit : RateLimit or dict, optional
        Requests and tokens per minute enforced across all actors by one shared limiter (see
        :class:`RateLimit` and the module docs).
    {run_config}
        Passed to the judge as in ``judge_many``; a tracker in its ``budget_tracker`` becomes a
        :class:`SharedBudget` (below).
    {budget}
        For the whole job: kept by a Ray actor as the rate limit is, so every actor's paid calls count
        against it (a :class:`SharedBudget` too). A ``BudgetTracker`` lives in one process, so its limit and
        spend so far become a ``SharedBudget`` and the tracker itself is not charged: pass a
        ``SharedBudget`` to read the job's spend (``.spent_usd``) afterwards.
    num_cpus : float, optional
        CPUs reserved per actor (an HTTP judge needs little; a local model wants 1 or more). Default
        :data:`ACTOR_CPUS`, or less when the cluster cannot spare it: the pool's actors hold their CPUs for
        the whole job and the tasks that read and split the dataset in front of them need
        :data:`UPSTREAM_CPUS` more (see :func:`actor_cpus`). An autoscaling cluster that will grow can pass
        ``num_cpus=0``.
    ray_remote_args : dict, optional
        More of Ray's actor options (``num_gpus``, ``resources``, ``runtime_env``...); not
        ``max_restarts`` / ``max_task_retries``, which Ray Data sets so a dead actor's chunk is run again.
    {batch}
        Each chunk is one provider batch per round. The state lives beside the ledger
        (``<ledger>.batches/ray-<key>/``, one folder per chunk, named by its rows) or in the folder given,
        so the same job run again after a crash collects the submitted batches instead of submitting them
        again; without a ledger or a folder nothing is resumed (a warning says so). ``rate_limit`` does
        not apply to batched calls (the Batch APIs have no per-minute limit).

    Returns
    -------
    ray.data.Dataset
        Lazy (``.to_pandas()``, ``.write_parquet(...)``, ...): the input columns plus ``quality_score``,
        ``notes``, ``grader_id``, ``status``, ``error``, ``latency_ms``, ``judge_tokens_in``, ``judge_tokens_out``,
        ``judge_cost_usd`` and the judge's own columns; one row per input row (not in input order unless
        the dataset's ``preserve_order`` execution option is set).

    Raises
    ------
    MissingDependencyError
        Ray is not installed (``pip install -e '.[ray]'``).
    ValidationError
        A bad argument, a ledger without ``task_type`` or an ``id`` column, items lacking a text column,
        or a ``num_cpus`` that leaves the cluster no CPU for the tasks feeding the actors (the message
        says what would fit).

    See Also
    --------
    llm_connect.grading.judge_many : the same rows on one machine.
    RateLimit, SharedBudget : one rate limit and one budget for the cluster.
    """
    ray = need_ray()
    if not isinstance(ds, ray.data.Dataset):
        raise ValidationError(f"ds must be a ray.data.Dataset (e.g. ray.data.from_pandas(df)), got "
                              f"{type(ds).__name__}; for a DataFrame in one process use judge_many")
    if hasattr(judge_factory, "judge") and hasattr(judge_factory, "grader_id"):
        raise ValidationError("judge_factory must build the judge (each actor calls it once), not be one: "
                              "pass e.g. lambda: LLMJudge(OpenAICompatibleAdapter(...))")
    if not callable(judge_factory):
        raise ValidationError("judge_factory must be a zero-argument callable returning a judge, "
                              f"got {type(judge_factory).__name__}")
    check_run_options(concurrency=concurrency, run_config=run_config, ledger=ledger, task_type=task_type,
                      budget=budget, batch=batch)
    _positive_int("num_actors", num_actors)
    _positive_int("batch_size", batch_size)
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float))
                                 or not num_cpus >= 0):
        raise ValidationError(f"num_cpus must be a number >= 0, got {num_cpus!r}")
    if isinstance(ledger, (str, os.PathLike)) and "://" not in str(ledger):
        ledger = Path(ledger).resolve()  # the actors' working directory need not be this one
    ledger = as_ledger(ledger)  # a path: opened once, here (the actors get the ledger, pickled)
    limit = RateLimit.of(rate_limit)
    from ..adapters._batches import batch_options

    batch_api = batch_options(batch, ledger)
    if batch_api is not None and batch_api.state_dir is not None:
        batch_api = replace(batch_api, state_dir=Path(batch_api.state_dir).resolve())
    elif batch_api is not None:
        import warnings

        warnings.warn("grade_dataset(batch=...): the batches' state has no folder (no ledger, or a ledger at a URI), "
                      "so a job stopped while it polls submits its batches again; pass "
                      "batch=BatchOptions(state_dir=FOLDER), a folder every node sees, to resume them",
                      UserWarning, stacklevel=2)
    # Money: a tracker cannot travel to the actors (it holds a lock) and would be one copy per actor: the job
    # gets one shared budget instead, kept by an actor
    shared = shared_budget(budget)
    config_tracker = getattr(run_config, "budget_tracker", None)
    if config_tracker is not None:
        if config_tracker is budget:
            run_config, shared = replace(run_config, budget_tracker=shared), None
        else:
            run_config = replace(run_config, budget_tracker=shared_budget(config_tracker))
    for tracker in (shared, getattr(run_config, "budget_tracker", None)):
        if isinstance(tracker, SharedBudget):
            tracker._actor()  # started here, before the actors that share it
    schema = ds.schema(fetch_if_missing=False)
    names = list(schema.names) if schema is not None else None
    if names is not None:
        missing = [c for c in ITEM_COLUMNS if c not in names]
        if missing:
            raise ValidationError(f"the dataset lacks the column(s) {missing}; it has {names}. Rename them "
                                  "(ds.rename_columns({'question': 'prompt'}))")
        if ledger is not None and "id" not in names and not {"conversation_id", "turn"} <= set(names):
            raise ValidationError("a ledger needs an 'id' column (unique per item), or the 'conversation_id' and "
                                  "'turn' of conversation items: resuming skips items by their key")
    limiter = None
    if limit is not None:
        limiter = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(Schedule).remote()
    # Ray Data starts a pool's actors with max_restarts=-1 and max_task_retries=-1 (restart a dead actor,
    # run its chunk again); ray_remote_args may not turn that off
    options: dict[str, Any] = {**(ray_remote_args or {})}
    for key in ("max_restarts", "max_task_retries"):
        if key in options:
            raise ValidationError(f"ray_remote_args: {key} is set by Ray Data to -1 (a dead actor's chunk is run "
                                  "again, so no row is lost); leave it out")
    given = options.pop("num_cpus", num_cpus)  # ray_remote_args' own num_cpus, else the argument
    options["num_cpus"] = actor_cpus(given, num_actors, _cluster_cpus(ray))
    # blocks of batch_size rows (a streaming split, no shuffle): a block is one task, so a dataset read
    # as one big block would otherwise go to one actor while the others idle
    ds = ds.repartition(target_num_rows_per_block=batch_size)
    return ds.map_batches(
        GradingActor,
        fn_constructor_kwargs={
            "judge_factory": judge_factory,
            "concurrency": concurrency,
            "ledger": ledger,
            "task_type": task_type,
            "rate_limit": limit,
            "limiter": limiter,
            "run_config": run_config,
            "run_id": uuid.uuid4().hex,
            "budget": shared,
            "batch": batch_api,
        },
        compute=ray.data.ActorPoolStrategy(size=num_actors),
        batch_size=batch_size,
        batch_format="pandas",
        **options,
    )
