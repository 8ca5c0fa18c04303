"""Resuming a job from its ledger: which items are done, and recording a chunk's judgments at once.

A grading actor reads the ledger once, when it starts (:func:`done_items`: this grader and rubric's
observations by item key), skips the rows of a chunk already scored (:func:`row_keys`) and gives them back
read from the ledger (:func:`resumed_rows`, ``resumed=True``); the rows it judges are kept by a
:class:`ChunkRecorder` and written together when the chunk ends, once
(:func:`~llm_connect.runner.extend_once`). See "Resumable" in :mod:`llm_connect.distributed`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..columns import RESULT_COLUMNS
from ..grading import judge_abilities
from ..items import column_values, item_id_text, item_ids, item_key
from ..runner import LEDGER_ERROR, attach_rows, describe_error, extend_once

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RESUMED", "ChunkRecorder", "ItemKey", "done_items", "resumed_rows", "row_keys"]

logger = logging.getLogger("llm_connect.distributed")

#: The column :func:`~llm_connect.distributed.grade_dataset` adds when it records to a ledger: True for a row
#: read back from it.
RESUMED = "resumed"

ItemKey = tuple[str, str, str]  # (id text, adapter_id, model_id): items.item_key


def row_keys(chunk: pd.DataFrame) -> list[ItemKey]:
    """The key of each row of ``chunk``, as ``judge_many`` records it: its id (or, without one, the key of its
    texts; :func:`~llm_connect.items.item_ids`) and its candidate (``candidate_model``, ``candidate_adapter``)."""
    ids = item_ids(chunk)
    models, adapters = column_values(chunk, "candidate_model"), column_values(chunk, "candidate_adapter")
    return [item_key(i, m, a) for i, m, a in zip(ids, models, adapters, strict=True)]


def done_items(ledger: Any, task_type: str, grader_id: str, rubric_hash: str | None) -> dict[ItemKey, Any]:
    """The observations of ``ledger`` this grader and rubric already recorded for ``task_type``, by item key
    (:func:`~llm_connect.items.item_key`: the item id and the candidate's adapter and model, so one question
    answered by two models is two items)."""
    done: dict[ItemKey, Any] = {}
    for obs in ledger.by_task_type(task_type):
        tags = obs.tags
        if tags.get("grader_id") != grader_id or tags.get("rubric_hash") != rubric_hash:
            continue
        if item_id_text(tags.get("item_id")) is not None:
            done.setdefault(item_key(tags["item_id"], obs.model_id, obs.adapter_id), obs)
    return done


class ChunkRecorder:
    """A ledger stand-in for one chunk: ``append`` keeps the observation (tagged with the job's ``run_id``),
    :meth:`flush` records them all at once, as every entry point records: once
    (:func:`~llm_connect.runner.extend_once`; a judgment another actor, a retried chunk or an earlier job
    recorded meanwhile is not recorded again)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.pending: list[Any] = []

    def append(self, observation: Any) -> None:
        self.pending.append(replace(observation, tags={**observation.tags, "run_id": self.run_id}))

    def flush(self, ledger: Any) -> str | None:
        """Write what was kept; the error text when the write failed (the judgments stand)."""
        pending, self.pending = self.pending, []
        if not pending:
            return None
        try:
            written = extend_once(ledger, pending)
        except Exception as exc:
            return f"ledger append failed: {describe_error(exc)}"
        held = len(written) - sum(written)
        if held:
            logger.warning("llm_connect: %d judgment(s) already in the ledger, not recorded again", held)
        return None


def resumed_rows(judge: Any, items: pd.DataFrame, keys: list[ItemKey], done: Mapping[ItemKey, Any]) -> pd.DataFrame:
    """The rows of ``items`` that ``judge``'s grader and rubric already scored, read back from the ledger.

    ``keys``: each item's key (:func:`row_keys`); ``done``: the observations by key (:func:`done_items`). A row
    comes back ``scored`` with the recorded score and judge cost, ``resumed=True``; the judge's notes, latency
    and token counts are not in the ledger (``None``, NaN and 0)."""
    columns = (*RESULT_COLUMNS, *judge_abilities(judge).extra_columns, LEDGER_ERROR)
    rows = []
    for key in keys:
        obs = done[key]
        rows.append({
            "quality_score": float(obs.quality_score),
            "grader_id": judge.grader_id,
            "status": "scored",
            "judge_cost_usd": float(obs.tags.get("judge_cost_usd", 0.0) or 0.0),
        })
    out = attach_rows(items, rows, columns, False)
    out.attrs = {}
    out[RESUMED] = True
    return out
