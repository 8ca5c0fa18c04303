"""Agreement and bias per group (``calibrate(..., by="candidate_model")``, ``--by COLUMN``).

A pooled figure can hide what matters: exact match may agree with people well on an extractive QA model's answers and
not at all on a chat model's, and the pooled kappa sits in between, describing neither. :func:`agreement_by_group`
recomputes every agreement statistic (:func:`~llm_connect.calibration.agreement_table`) on each group's rows, and
:func:`bias_by_group` breaks each bias probe's per-item shifts down by the group of each probed item
(:func:`~llm_connect.stats.paired_shift`: mean shift, bootstrap interval, Wilcoxon p-value, flip rate). Each table has a
row ``group = "(all)"`` holding the pooled figure beside the groups' (the same numbers as ``agreement.csv`` and
``bias.csv``).

Groups are the distinct values of the column, compared as text; a row whose value is missing belongs to the group
``"(missing)"`` (no row is dropped). A group with fewer than :data:`MIN_GROUP_N` paired items keeps its figures, with a
``group_note`` saying they rest on few items (their intervals are wide, and a kappa on a handful of items is mostly
noise).

Per-group agreement is the stratified analysis of Landis & Koch (1977), "The measurement of observer agreement for
categorical data", Biometrics 33; Cohen's kappa is Cohen (1960), "A coefficient of agreement for nominal scales",
Educational and Psychological Measurement 20.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._display import view
from .._html import Markup, fmt
from ..errors import ValidationError

if TYPE_CHECKING:
    from ._agreement import AgreementTable
    from ._bias import BiasReport

__all__ = ["ALL", "MIN_GROUP_N", "MISSING", "GroupBreakdown", "agreement_by_group", "bias_by_group", "group_column",
           "group_kappa", "group_labels"]

ALL = "(all)"
"""The ``group`` of the pooled row (every item, as ``agreement.csv`` / ``bias.csv`` report it)."""
MISSING = "(missing)"
"""The group of the rows whose group value is missing (None, NaN, an empty cell)."""
MIN_GROUP_N = 10
"""A group with fewer paired items than this keeps its figures, with a note that they say little."""


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def group_labels(values: Any) -> pd.Series:
    """The group of each row as text: the value as written, :data:`MISSING` where there is none.

    A group literally named :data:`ALL` would be confused with the pooled row: it is a
    :class:`~llm_connect.errors.ValidationError`.
    """
    labels = pd.Series([MISSING if _is_missing(v) else str(v) for v in list(values)], dtype=object)
    if (labels == ALL).any():
        raise ValidationError(f"a group is named {ALL!r}, the name of the pooled row; rename it in the data")
    return labels


def group_column(columns: Iterable[Any], by: str, *, labels: Sequence[str] = (),
                 passthrough: Mapping[Any, str] | None = None) -> str:
    """The column of the scored frame that holds ``by``, an input column.

    ``columns``: the input's columns; ``labels``: its label columns (``human``, annotators), which are scores, not
    groups; ``passthrough``: input column -> its name in the scored frame (see ``_passthrough_names``: a column whose
    name the frame uses itself is carried as ``input_<name>``). ``candidate_model`` and ``model_family`` (derived from
    it) are groups too. A column the data lacks is a :class:`~llm_connect.errors.ValidationError` naming the columns it
    has.
    """
    from ._runner import ITEM_FRAME_COLUMNS, _passthrough_names

    cols = list(columns)
    if not isinstance(by, str) or not by:
        raise ValidationError(f"by must be a column name, got {by!r}")
    if by in labels:
        raise ValidationError(f"by={by!r} names a label column (scored as a judge), not a group; "
                              "choose another column")
    if by in ITEM_FRAME_COLUMNS:
        if by != "candidate_model" and by not in cols:
            raise ValidationError(f"no column {by!r} to group by; the data has {', '.join(map(str, cols))}")
        return by
    if by not in cols:
        if by == "model_family":
            return by
        raise ValidationError(f"no column {by!r} to group by; the data has {', '.join(map(str, cols))}")
    mapping = dict(passthrough) if passthrough is not None else _passthrough_names(
        [c for c in cols if c not in ITEM_FRAME_COLUMNS and c not in labels])
    return mapping.get(by, by)


def _with_group(frame: pd.DataFrame, group: str, n_items: int, min_n: int, what: str) -> pd.DataFrame:
    out = frame.copy()
    out.insert(0, "n_items", n_items)
    out.insert(0, "group", group)
    if group == ALL or "n" not in out.columns:
        out["group_note"] = ""
        return out
    n = pd.to_numeric(out["n"], errors="coerce").fillna(0).astype(int)
    out["group_note"] = [
        f"only {k} {what} in this group (fewer than {min_n}): its figures rest on few items" if k < min_n else ""
        for k in n
    ]
    return out


def agreement_by_group(scores: pd.DataFrame, column: str, *, pooled: AgreementTable | None = None,
                       min_n: int = MIN_GROUP_N, **table_kwargs: Any) -> pd.DataFrame:
    """Every agreement statistic per group of ``scores[column]``, with the pooled row first.

    ``scores``: one row per item with its ``score_<judge>`` columns (the report's ``scores``); ``table_kwargs`` go to
    :func:`~llm_connect.calibration.agreement_table` (``threshold``, ``thresholds``, ``annotators``, ``n_boot``,
    ``confidence``, ``seed``), called on each group's rows; ``pooled``: the table already computed on every row (else
    computed). Columns: ``group``, ``n_items`` (rows in the group), then those of ``AgreementTable.frame`` (``judge_a``,
    ``judge_b``, ``n`` paired items, ``cohen_kappa`` ...), then ``group_note``.
    """
    from ._agreement import agreement_table

    if column not in scores.columns:
        raise ValidationError(f"no column {column!r} to group by in the scores")
    labels = group_labels(scores[column])
    parts = [_with_group((pooled or agreement_table(scores, **table_kwargs)).frame, ALL, len(scores), min_n,
                         "paired items")]
    for group in sorted(labels.unique(), key=str):
        mask = (labels == group).to_numpy()
        sub = scores.loc[mask].reset_index(drop=True)
        parts.append(_with_group(agreement_table(sub, **table_kwargs).frame, group, int(mask.sum()), min_n,
                                 "paired items"))
    kept = [p for p in parts if len(p)]
    return pd.concat(kept, ignore_index=True) if kept else parts[0]


def bias_by_group(bias: BiasReport, groups: Sequence[Any], *, n_boot: int = 1000, confidence: float = 0.95,
                  seed: int = 0, min_n: int = MIN_GROUP_N) -> pd.DataFrame:
    """Each probe's score shift per group of the probed items, with the pooled row first.

    ``groups``: the group of each probed item, in the order the probes saw them (the rows of each
    :class:`~llm_connect.calibration.ProbeResult`'s ``items``). Per group the shifts are summarised by
    :func:`~llm_connect.stats.paired_shift` (mean shift, bootstrap interval, Wilcoxon signed-rank p-value, flips at the
    judge's threshold); the pooled row is the probe's own result. A probe that did not apply (no items) has only its
    pooled row, with its note. Columns: ``group``, ``n_items`` (probed items in the group), then those of
    ``BiasReport.frame``, then ``group_note``.
    """
    from ._bias import BiasReport, ProbeResult, paired_shift

    labels = group_labels(groups)
    names = sorted(labels.unique(), key=str)
    parts = []
    for r in bias.results:
        parts.append(_with_group(BiasReport([r]).frame, ALL, len(r.items), min_n, "probed items"))
        if not len(r.items):
            continue
        if len(r.items) != len(labels):
            raise ValidationError(f"{len(labels)} groups for the {len(r.items)} items probe {r.probe!r} scored")
        original = r.items["original"].to_numpy(dtype=float)
        perturbed = r.items["perturbed"].to_numpy(dtype=float)
        for group in names:
            mask = (labels == group).to_numpy()
            stats = paired_shift(original[mask], perturbed[mask], threshold=r.threshold, n_boot=n_boot,
                                 confidence=confidence, seed=seed)
            row = BiasReport([ProbeResult(r.judge, r.probe, stats, pd.DataFrame(), r.threshold,
                                          by_definition=r.by_definition)]).frame
            parts.append(_with_group(row, group, int(mask.sum()), min_n, "probed items"))
    if not parts:
        return _with_group(BiasReport([]).frame, ALL, 0, min_n, "probed items").iloc[0:0]
    return pd.concat(parts, ignore_index=True)


def group_kappa(agreement: pd.DataFrame, judge: str, reference: str) -> pd.DataFrame:
    """Cohen's kappa of ``judge`` against ``reference`` per group (pooled first), from :func:`agreement_by_group`'s
    table: ``group``, ``n``, ``kappa``, ``kappa_low``, ``kappa_high``, ``group_note``. Empty when the pair is not in the
    table."""
    a, b = agreement["judge_a"], agreement["judge_b"]
    rows = agreement[((a == judge) & (b == reference)) | ((a == reference) & (b == judge))]
    out = pd.DataFrame({
        "group": rows["group"].astype(str), "n": pd.to_numeric(rows["n"], errors="coerce"),
        "kappa": pd.to_numeric(rows.get("cohen_kappa", pd.Series(np.nan, index=rows.index)), errors="coerce"),
        "kappa_low": pd.to_numeric(rows.get("kappa_low", pd.Series(np.nan, index=rows.index)), errors="coerce"),
        "kappa_high": pd.to_numeric(rows.get("kappa_high", pd.Series(np.nan, index=rows.index)), errors="coerce"),
        "group_note": rows["group_note"].astype(str)})
    return out.reset_index(drop=True)


@dataclass
class GroupBreakdown:
    """Agreement and bias per group of one column (``CalibrationReport.by_group``).

    ``by``: the input column; ``column``: its name in the scored frame (``input_<by>`` when the frame uses ``by``
    itself); ``agreement``: :func:`agreement_by_group`'s table; ``bias``: :func:`bias_by_group`'s (empty without
    probes); ``judges``/``reference``: the machine judges and what they are checked against (people when labelled), for
    the summary and the plot.
    """

    by: str
    column: str
    agreement: pd.DataFrame
    bias: pd.DataFrame = field(default_factory=pd.DataFrame)
    judges: list[str] = field(default_factory=list)
    reference: str | None = None
    min_n: int = MIN_GROUP_N

    @property
    def groups(self) -> list[str]:
        """The groups, pooled excluded, in the tables' order."""
        return [g for g in dict.fromkeys(self.agreement["group"].astype(str)) if g != ALL]

    def agreement_frame(self) -> pd.DataFrame:
        """What ``agreement_by_group.csv`` holds (the group column is named ``group``)."""
        return self.agreement.copy()

    def bias_frame(self) -> pd.DataFrame:
        """What ``bias_by_group.csv`` holds."""
        return self.bias.copy()

    def kappa(self, judge: str, reference: str | None = None) -> pd.DataFrame:
        """:func:`group_kappa` of ``judge`` against ``reference`` (default: :attr:`reference`)."""
        ref = reference or self.reference
        if ref is None:
            raise ValidationError("no reference to compare with: pass reference=")
        return group_kappa(self.agreement, judge, ref)

    def card_entry(self, judge: str, reference: str | None = None) -> dict[str, Any] | None:
        """The per-group kappa a judge card carries: ``{"by": ..., "groups": [{group, n, kappa, kappa_low, kappa_high,
        note}, ...]}`` (the pooled row left out: the card has it); ``None`` when the judge has no pair with the
        reference."""
        ref = reference or self.reference
        if ref is None or ref == judge:
            return None
        k = group_kappa(self.agreement, judge, ref)
        k = k[k["group"] != ALL]
        if k.empty:
            return None

        def num(v: Any) -> float | None:
            return float(v) if v is not None and math.isfinite(float(v)) else None

        return {"by": self.by, "groups": [
            {"group": str(r["group"]), "n": int(num(r["n"]) or 0), "kappa": num(r["kappa"]),
             "kappa_low": num(r["kappa_low"]), "kappa_high": num(r["kappa_high"]), "note": str(r["group_note"])}
            for r in k.to_dict("records")]}

    def summary(self) -> pd.DataFrame:
        """Per judge and group: n, kappa and its interval against :attr:`reference`, pooled first."""
        if self.reference is None:
            return pd.DataFrame(columns=["judge", "group", "n", "kappa", "kappa_low", "kappa_high", "group_note"])
        parts = [self.kappa(j).assign(judge=j) for j in self.judges if j != self.reference]
        if not parts:
            return pd.DataFrame(columns=["judge", "group", "n", "kappa", "kappa_low", "kappa_high", "group_note"])
        out = pd.concat(parts, ignore_index=True)
        return out[["judge", "group", "n", "kappa", "kappa_low", "kappa_high", "group_note"]]

    def figure(self) -> Any:
        """The per-group plot (:func:`~llm_connect.views.plot_group_kappa`) on a new figure, or ``None`` without a
        reference."""
        return view("group_breakdown_figure")(self)

    def html(self, *, plots: bool = True) -> Markup:
        """The report's per-group section: kappa per group (pooled beside), the plot, and the full tables."""
        return Markup(view("group_breakdown_html")(self, plots=plots))

    def _repr_html_(self) -> str:
        return self.html(plots=True)

    def __str__(self) -> str:
        s = self.summary()
        lines = [f"by {self.by}: {len(self.groups)} groups"]
        for r in s.itertuples(index=False):
            lines.append(f"  {r.judge} {r.group}: n={r.n} kappa {fmt(r.kappa)}")
        return "\n".join(lines)


def group_breakdown(scores: pd.DataFrame, by: str, column: str, *, agreement: AgreementTable | None = None,
                    bias: BiasReport | None = None, probe_rows: Sequence[int] | None = None, judges: Sequence[str] = (),
                    reference: str | None = None, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0,
                    min_n: int = MIN_GROUP_N, **table_kwargs: Any) -> GroupBreakdown:
    """Both tables for one column: :func:`agreement_by_group` on ``scores`` and, when ``bias`` ran on the rows
    ``probe_rows`` of ``scores`` (default: every row), :func:`bias_by_group`."""
    table = agreement_by_group(scores, column, pooled=agreement, min_n=min_n, n_boot=n_boot,
                               confidence=confidence, seed=seed, **table_kwargs)
    bias_table = pd.DataFrame()
    if bias is not None:
        rows = np.arange(len(scores)) if probe_rows is None else np.asarray(probe_rows, dtype=int)
        bias_table = bias_by_group(bias, scores[column].to_numpy(dtype=object)[rows], n_boot=n_boot,
                                   confidence=confidence, seed=seed, min_n=min_n)
    return GroupBreakdown(by=by, column=column, agreement=table, bias=bias_table, judges=list(judges),
                          reference=reference, min_n=min_n)
