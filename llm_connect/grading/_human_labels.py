"""People's labels as the selective judges read them: labelled calibration items, one turn per conversation,
and the labels people recorded in a ledger.

A :class:`~llm_connect.grading.SelectiveJudge` and a :class:`~llm_connect.grading.SelectiveCascade` calibrate
on labelled items (:func:`read_items`, the labels read by :func:`label_numbers`); the exact binomial bound behind
their guarantee needs independent items, so clustered items keep one row per cluster
(:func:`one_row_per_cluster`). A cascade's summary reads the labels people gave to the items left for them from
a ledger (:func:`ledger_labels`), as the :class:`~llm_connect.labelling.Labeller` records them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..items import ITEM_COLUMNS, item_id_text, item_ids, items_frame
from ..stats.labels import parse_labels

if TYPE_CHECKING:
    import pandas as pd

    from ..quality import BaseLedger

__all__ = ["HUMAN", "calibration_table", "label_numbers", "ledger_labels", "one_row_per_cluster", "read_items"]

#: The stand-in ``decided_by`` of an item every judge of a cascade abstained on.
HUMAN = "human"


def label_numbers(values: Sequence[Any], column: str) -> list[float]:
    """Human labels as numbers in 0..1 (NaN when blank): booleans, yes/no words or 0..1 numbers, read as
    everywhere else (:func:`llm_connect.stats.labels.parse_labels`)."""
    return [float(v) for v in parse_labels(values, column=column)]


def read_items(data: Any) -> pd.DataFrame:
    """Labelled items as a frame: a DataFrame, mappings, or the path of a JSON Lines / CSV / TSV file."""
    import pandas as pd

    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        if not os.path.isfile(path):
            raise ValidationError(f"cannot read {path!r}: no such file")
        lower = path.lower()
        if lower.endswith((".jsonl", ".ndjson", ".json")):
            frame = pd.read_json(path, lines=not lower.endswith(".json"), dtype=False)
        elif lower.endswith((".csv", ".tsv", ".tab")):
            frame = pd.read_csv(path, sep="\t" if lower.endswith((".tsv", ".tab")) else ",", dtype=str,
                                keep_default_na=False, na_values=[])
        else:
            raise ValidationError(f"cannot read {os.path.basename(path)}: use a .jsonl, .csv or .tsv file")
        data = frame
    return items_frame(data, ITEM_COLUMNS).reset_index(drop=True)


def one_row_per_cluster(clusters: Any, *, seed: int = 0) -> list[int]:
    """The positions of one row per cluster, drawn with ``seed`` (a row without a cluster id is its own).

    The exact binomial bound of a selective judge's guarantee needs independent items; the turns of one
    conversation are not, so a clustered calibration keeps one of each conversation's labelled turns
    (:meth:`~llm_connect.grading.SelectiveJudge.calibrate` and ``calibrate(..., selective=...)``).

    Parameters
    ----------
    clusters : array-like
        One cluster id per row (e.g. the ``conversation_id`` column); a missing id is a cluster of its own.
    seed : int, default 0
        Seeds which row of each cluster is kept.

    Returns
    -------
    list of int
        The kept rows' positions, in their original order.
    """
    import numpy as np

    from ..stats.clusters import cluster_codes

    codes = cluster_codes(clusters)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(codes))
    first: dict[int, int] = {}
    for position in order.tolist():
        first.setdefault(int(codes[position]), position)
    return sorted(first.values())


def calibration_table(items: pd.DataFrame, rows: pd.DataFrame, labels: Any, threshold: float) -> pd.DataFrame:
    """One row per calibration item: its id, the judge's score and confidence, people's label and whether
    they agree (NaN where the judge did not score)."""
    import numpy as np
    import pandas as pd

    scored = (rows["status"] == "scored").to_numpy()
    score = pd.to_numeric(rows["quality_score"], errors="coerce").to_numpy(dtype=float)
    conf = pd.to_numeric(rows["confidence"], errors="coerce").to_numpy(dtype=float) if "confidence" in rows \
        else np.full(len(rows), np.nan)
    label = np.asarray(labels, dtype=float)
    agree = np.where(scored & np.isfinite(score), ((score >= threshold) == (label >= threshold)).astype(float),
                     np.nan)
    return pd.DataFrame({"id": item_ids(items), "score": np.where(scored, score, np.nan),
                         "confidence": np.where(scored, conf, np.nan), "label": label, "agree": agree,
                         "status": rows["status"].to_numpy(),
                         "judge_cost_usd": pd.to_numeric(rows["judge_cost_usd"], errors="coerce").fillna(0.0)
                         .to_numpy(dtype=float)})


def ledger_labels(ledger: BaseLedger, task_type: str) -> dict[tuple[str, str], float]:
    """People's labels in a ledger (grader ``human``; those an undo took back left out), mean per (item, adapter)."""
    obs = [o for o in ledger.read_all() if o.task_type == task_type]
    undone = {o.tags.get("undoes") for o in obs if o.tags.get("grader_id") == "human-undo"}
    sums: dict[tuple[str, str], list[float]] = {}
    for o in obs:
        label_id = o.tags.get("label_id")
        if o.tags.get("grader_id") != HUMAN or (label_id is not None and label_id in undone):
            continue
        item = item_id_text(o.tags.get("item_id"))
        if item is None:
            continue
        sums.setdefault((item, str(o.adapter_id)), []).append(float(o.quality_score))
    return {k: math.fsum(v) / len(v) for k, v in sums.items()}
