"""Calibrating a :class:`~llm_connect.grading.SelectiveJudge`: its cut-off chosen on labelled items.

:meth:`SelectiveJudge.calibrate <llm_connect.grading.SelectiveJudge.calibrate>` is
:func:`calibrate_selective`: read the labelled rows (one labelled turn per conversation when the rows are
clustered), judge them with the judge's :attr:`~llm_connect.grading.SelectiveJudge.scorer`, mark each verdict
as agreeing with people's or not, and choose the cut-off by fixed-sequence testing with exact binomial bounds
(:func:`llm_connect.stats.selective.fixed_sequence_cutoff`). See :mod:`llm_connect.grading._selective` for the
guarantee.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..core import BudgetTracker, RunConfig
from ..errors import ValidationError
from ..stats.clusters import cluster_column
from ..stats.selective import fixed_sequence_cutoff, min_items
from ._human_labels import calibration_table, label_numbers, one_row_per_cluster, read_items
from ._judge_many import judge_many

__all__ = ["calibrate_selective"]


def calibrate_selective(selective: Any, data: Any, *, human: str, seed: int = 0, concurrency: int = 16,
                        progress: bool = True, run_config: RunConfig | None = None,
                        budget: BudgetTracker | float | None = None, cluster: str | None = "auto") -> Any:
    """``selective`` calibrated on the labelled rows of ``data``: what :meth:`SelectiveJudge.calibrate` returns.

    Parameters
    ----------
    selective : SelectiveJudge
        The judge to calibrate.
    data : DataFrame or iterable of mappings or str or os.PathLike
        The items with the label column ``human``.
    human : str
        The label column.
    seed : int, default 0
        Seeds a ``"panel"``'s rubric versions and the turn kept of each conversation.
    concurrency : int, default 16
        Items judged at once (checked by the caller).
    progress : bool, default True
        Show a progress bar.
    run_config : RunConfig, optional
        How each call is made.
    budget : BudgetTracker or float, optional
        The run budget.
    cluster : str or None, default "auto"
        Which rows are not independent (see :meth:`SelectiveJudge.calibrate`).

    Returns
    -------
    SelectiveJudge
        The calibrated copy, with its :attr:`~SelectiveJudge.calibration_frame`.

    Raises
    ------
    ValidationError
        No label column ``human``, a ``cluster`` column the data lacks, or too few labelled items.
    """
    frame = read_items(data)
    if not isinstance(human, str) or human not in frame.columns:
        raise ValidationError(f"no label column {human!r} in the data; it has {', '.join(map(str, frame.columns))}")
    column = cluster_column(frame, cluster, what="the calibration data")
    labels = np.asarray(label_numbers(frame[human].tolist(), human), dtype=float)
    labelled = frame[np.isfinite(labels)].reset_index(drop=True)
    labels = labels[np.isfinite(labels)]
    clustered_note = ""
    if column is not None:
        keep = one_row_per_cluster(labelled[column], seed=seed)
        if len(keep) < len(labelled):
            clustered_note = (f"calibrated on one labelled turn per conversation ({column!r}: {len(keep)} of "
                              f"{len(labelled)} labelled turns, drawn with seed={seed}): the exact binomial bound "
                              "needs independent items, and turns of one conversation are not")
        labelled = labelled.iloc[keep].reset_index(drop=True)
        labels = labels[keep]
    need = min_items(selective.alpha, selective.delta)
    if len(labelled) < need:
        unit = "conversations" if clustered_note else "items"
        raise ValidationError(
            f"too few labelled {unit} to calibrate {selective.grader_id!r}: {len(labelled)}; the guarantee at "
            f"alpha={selective.alpha:g}, delta={selective.delta:g} needs at least {need} (with fewer, even no "
            f"disagreement at all cannot pass the exact binomial bound); label more {unit} or raise alpha or delta")
    judge = selective.with_panel(seed)
    if judge.source is None:  # no usable signal: nothing to run
        empty = fixed_sequence_cutoff([], [], alpha=selective.alpha, delta=selective.delta, strict=False)
        cut = dataclasses.replace(empty, n=len(labelled), note=judge.note)
        out = judge.replace(cutoff=math.inf, calibration=cut, seed=seed)
        out.calibration_frame = None
        return out
    rows = judge_many(judge.scorer, labelled, concurrency=concurrency, progress=progress, run_config=run_config,
                      budget=budget)
    table = calibration_table(labelled, rows, labels, judge.threshold)
    cut = fixed_sequence_cutoff(table["confidence"], table["agree"], alpha=selective.alpha, delta=selective.delta)
    if clustered_note:
        cut = dataclasses.replace(cut, note="; ".join(n for n in (clustered_note, cut.note) if n))
    out = judge.replace(cutoff=cut.cutoff, calibration=cut, seed=seed)
    out.calibration_frame = table
    return out
