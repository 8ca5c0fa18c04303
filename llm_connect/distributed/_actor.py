"""What each actor of a :func:`~llm_connect.distributed.grade_dataset` pool is: :class:`GradingActor`.

Ray Data hands the actor its rows a chunk at a time (what Ray's ``map_batches`` calls a batch:
``batch_size`` rows, as a DataFrame); the actor runs the runner (:func:`~llm_connect.runner.run_plan`) on
the chunk's rows not already scored, through the cluster's rate limit (:mod:`._rate_limit`) or the
providers' Batch APIs (``batch=``), and records their judgments at once (:mod:`._resume`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..grading import judge_abilities
from ..grading._judge_many import judge_plan
from ..runner import LEDGER_ERROR, run_plan
from ._rate_limit import Permits, RateLimit, estimated_tokens, gated
from ._resume import RESUMED, ChunkRecorder, ItemKey, done_items, resumed_rows, row_keys

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GradingActor"]


class GradingActor:
    """One actor of the pool: its own judge, built once, and the runner run on each chunk of rows.

    Ray Data builds it with the keyword arguments :func:`~llm_connect.distributed.grade_dataset` passes
    (``fn_constructor_kwargs``) and calls it with each chunk; it returns the chunk's rows, judged (or read
    back from the ledger), in the chunk's order.
    """

    def __init__(
        self,
        judge_factory: Callable[[], Any],
        concurrency: int,
        ledger: Any,
        task_type: str | None,
        rate_limit: RateLimit | None,
        limiter: Any,
        run_config: Any,
        run_id: str,
        budget: Any = None,
        batch: Any = None,
    ) -> None:
        self.budget = budget  # a SharedBudget (charged besides run_config's), or None
        self.batch = batch  # BatchOptions (the providers' Batch APIs), or None
        self.judge = judge_factory()
        if not (isinstance(getattr(self.judge, "grader_id", None), str) and self.judge.grader_id.strip()):
            raise ValidationError(f"judge_factory() returned {type(self.judge).__name__}, which has no grader_id; "
                                  "it must return a judge (e.g. LLMJudge(...))")
        self.concurrency = concurrency
        self.ledger = ledger
        self.task_type = task_type
        self.rate_limit = rate_limit
        self.permits = Permits(limiter, rate_limit) if rate_limit is not None and limiter is not None else None
        self.run_config = run_config
        self.run_id = run_id
        self.done: dict[ItemKey, Any] = {}
        if ledger is not None:
            rubric = judge_abilities(self.judge).rubric_hash
            self.done = done_items(ledger, str(task_type), self.judge.grader_id, rubric)

    def __call__(self, chunk: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        chunk = chunk.reset_index(drop=True)
        if self.ledger is not None:
            keys = row_keys(chunk)
            resumed_mask = pd.Series([k in self.done for k in keys], index=chunk.index, dtype=bool)
        else:
            keys = []
            resumed_mask = pd.Series(False, index=chunk.index)
        todo = chunk[~resumed_mask]
        recorder = ChunkRecorder(self.run_id) if self.ledger is not None else None
        plan = judge_plan(self.judge, todo, run_config=self.run_config, ledger=recorder, task_type=self.task_type,
                          budget=self.budget, desc=f"ray: {self.judge.grader_id}")
        concurrency = self.concurrency
        if self.batch is not None and len(todo):
            from ..grading._batch_api import provider_batch_plan

            # the Batch APIs have no per-minute limit: the rows are not gated, they all wait for one round
            plan, concurrency = provider_batch_plan(plan, self._batch_options(chunk), concurrency=concurrency,
                                                    progress=False)  # no bars inside the actors
        elif self.permits is not None and self.rate_limit is not None:
            plan.work = gated(plan.work, self.permits, estimated_tokens(todo, self.rate_limit))
        out = run_plan(plan, concurrency=concurrency, progress=False)
        out.attrs = {}
        if recorder is not None:
            failed = recorder.flush(self.ledger)
            if failed is not None:
                recorded = out[LEDGER_ERROR].isna() & (out["status"] == "scored")
                out.loc[recorded, LEDGER_ERROR] = failed
            out[RESUMED] = False
            if resumed_mask.any():
                resumed = [k for k, done in zip(keys, resumed_mask, strict=True) if done]
                out = pd.concat([out, resumed_rows(self.judge, chunk[resumed_mask], resumed, self.done)])
        return out.sort_index().reset_index(drop=True)

    def _batch_options(self, chunk: pd.DataFrame) -> Any:
        """This chunk's Batch API options: its own state folder inside the job's, named by the grader and the
        keys of its rows, so the same job run again (same data, same ``batch_size``) finds the provider
        batches this chunk submitted and collects them instead of submitting again. Without a state folder
        (no ledger, none given) the state is temporary: no resume."""
        import hashlib
        import json

        options = self.batch
        if options.state_dir is None:
            return replace(options, progress=False)
        keys = sorted(json.dumps([str(part) for part in key]) for key in row_keys(chunk))
        digest = hashlib.sha256("\n".join([self.judge.grader_id, *keys]).encode("utf-8")).hexdigest()[:16]
        from pathlib import Path

        root = options.state_root if options.state_root is not None else options.state_dir
        return replace(options, progress=False, state_dir=Path(options.state_dir) / f"ray-{digest}",
                       state_root=Path(root))
