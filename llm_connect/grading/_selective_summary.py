"""A cascade's batch, summarised: who decided what, what it cost against always asking the last judge, and the
guarantee; with people's labels of the items left for them, the agreement of the combined labels.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._display import view
from ..errors import ValidationError
from ..items import candidate_names, item_id_text, item_ids
from ..stats.selective import Guarantee, Guaranteed
from ._human_labels import HUMAN, label_numbers, ledger_labels

if TYPE_CHECKING:
    import pandas as pd

    from ..quality import BaseLedger

__all__ = ["SelectiveCascadeSummary", "cascade_summary"]


@dataclass(frozen=True)
class SelectiveCascadeSummary(Guaranteed):
    """A cascade's batch: who decided what, what it cost, and the guarantee.

    See :meth:`~llm_connect.grading.SelectiveCascade.summary`.

    Parameters
    ----------
    n : int
        The rows.
    stages : tuple of dict
        Per stage ``grader_id``, ``decided`` (items), ``coverage`` (their share of all items), ``reached``
        (items asked), ``cost_usd``.
    human : int
        Items left for people.
    human_share : float
        Their share.
    unscored : int
        Rows no stage could score.
    errors : int
        Rows that failed.
    cost_usd : float
        The judges' cost.
    cost_per_item_usd : float
        The judges' cost per item.
    last_judge_cost_per_item_usd : float
        The last judge's cost per item where it was asked.
    always_last_cost_usd : float
        That times the items.
    saved_usd : float
        What the cascade saved against it (NaN when the last judge was never asked).
    saved_share : float
        The same, as a share.
    guarantee : Guarantee
        The cascade's own (:attr:`SelectiveCascade.guarantee`), which ``alpha``, ``delta``,
        ``guaranteed_agreement`` and ``confidence_level`` are read from.
    judged : int
        Items the judges decided.
    labelled_by_people : int, default 0
        Abstained items people have labelled.
    combined_agreement : float, default NaN
        The share of the decided items (judges' and people's) that agree with people.
    observed_agreement : float, default NaN
        The judges' agreement on the judged items that people labelled too (NaN when none).
    labels : array-like, optional
        People's labels per row when known (else ``None``).
    """

    n: int
    stages: tuple[dict[str, Any], ...]
    human: int
    human_share: float
    unscored: int
    errors: int
    cost_usd: float
    cost_per_item_usd: float
    last_judge_cost_per_item_usd: float
    always_last_cost_usd: float
    saved_usd: float
    saved_share: float
    guarantee: Guarantee
    judged: int
    labelled_by_people: int = 0
    combined_agreement: float = math.nan
    observed_agreement: float = math.nan
    labels: Any = field(default=None, repr=False, compare=False)

    @property
    def alpha(self) -> float:
        """The cascade's ``alpha`` (read from :attr:`guarantee`)."""
        return self.guarantee.alpha

    @property
    def delta(self) -> float:
        """The cascade's ``delta`` (read from :attr:`guarantee`)."""
        return self.guarantee.delta

    def describe(self) -> str:
        """One line: who decided what, the guarantee and the cost against always using the last judge.

        E.g. "judges decided 81% (token-f1 55%, llm-judge 26%) with at least 90% agreement with
        people, guaranteed at 90% confidence; 19% left for people; $0.0021 an item against $0.0100 always
        using llm-judge (79% saved)".

        Returns
        -------
        str
            The line.
        """
        share = self.judged / self.n if self.n else math.nan
        parts = ", ".join(f"{s['grader_id']} {float(s['coverage']):.0%}" for s in self.stages)
        line = (f"judges decided {share:.0%} ({parts}) with {self.guarantee.describe()}; {self.human_share:.0%} left "
                "for people")
        last = self.stages[-1]["grader_id"] if self.stages else "the last judge"
        if math.isfinite(self.always_last_cost_usd) and self.always_last_cost_usd > 0:
            line += (f"; ${self.cost_per_item_usd:.4f} an item against ${self.last_judge_cost_per_item_usd:.4f} "
                     f"always using {last}")
            if math.isfinite(self.saved_share):
                line += f" ({self.saved_share:.0%} saved)"
        if self.labelled_by_people:
            line += (f"; with people's {self.labelled_by_people} label(s), at least {self.combined_agreement:.1%} of "
                     "the decided items agree with people")
        return line

    def to_frame(self) -> pd.DataFrame:
        """One row per stage and one for people.

        Returns
        -------
        DataFrame
            ``decided_by``, ``decided``, ``coverage``, ``reached``, ``cost_usd``.
        """
        import pandas as pd

        rows = [{"decided_by": s["grader_id"], "decided": s["decided"], "coverage": s["coverage"],
                 "reached": s["reached"], "cost_usd": s["cost_usd"]} for s in self.stages]
        rows.append({"decided_by": HUMAN, "decided": self.human, "coverage": self.human_share, "reached": self.human,
                     "cost_usd": 0.0})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain values (``labels`` left out).

        With the guarantee's ``alpha``, ``delta``, ``guaranteed_agreement`` and ``confidence_level`` and the
        :meth:`describe` line (``verdict``).

        Returns
        -------
        dict
            The fields by name.
        """
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("labels", "guarantee")}
        out["stages"] = [dict(s) for s in self.stages]
        g = self.guarantee
        out.update(alpha=g.alpha, delta=g.delta, guaranteed_agreement=g.guaranteed_agreement,
                   confidence_level=g.confidence_level)
        out["verdict"] = self.describe()
        return out

    def _repr_html_(self) -> str:
        return str(view("selective_cascade_summary_html")(self))


def cascade_summary(cascade: Any, frame: pd.DataFrame, *, labels: Any = None,
                    ledger: BaseLedger | None = None, task_type: str | None = None) -> SelectiveCascadeSummary:
    """:meth:`~llm_connect.grading.SelectiveCascade.summary`: ``cascade`` (a calibrated
    :class:`~llm_connect.grading.SelectiveCascade`, not imported here: it imports this module) gives the stages
    and the guarantee."""
    import numpy as np
    import pandas as pd

    n = len(frame)
    status = frame["status"].astype(object).to_numpy() if "status" in frame else np.full(n, "scored", dtype=object)
    decided_by = frame["decided_by"].astype(object).to_numpy() if "decided_by" in frame else np.full(n, None)
    details = frame["details"].tolist() if "details" in frame else [None] * n
    costs = pd.to_numeric(frame["judge_cost_usd"], errors="coerce").fillna(0.0).to_numpy(dtype=float) \
        if "judge_cost_usd" in frame else np.zeros(n)
    stages = cascade.stages
    stage_cost = [0.0] * len(stages)
    reached = [0] * len(stages)
    for d in details:
        if not isinstance(d, Mapping):
            continue
        for i, c in enumerate(d.get("stage_costs") or ()):
            if i < len(stages):
                stage_cost[i] += float(c or 0.0)
                reached[i] += 1
    rows: list[dict[str, Any]] = []
    for i, s in enumerate(stages):
        decided = int(((decided_by == s.grader_id) & (status == "scored")).sum())
        rows.append({"grader_id": s.grader_id, "decided": decided, "coverage": decided / n if n else math.nan,
                     "reached": reached[i], "cost_usd": stage_cost[i], "cutoff": s.cutoff})
    human = int(((decided_by == HUMAN) & (status == "abstained")).sum())
    judged = int(sum(r["decided"] for r in rows))
    total_cost = float(costs.sum())
    last_per_item = stage_cost[-1] / reached[-1] if stages and reached[-1] else math.nan
    always = last_per_item * n if math.isfinite(last_per_item) else math.nan
    saved = always - total_cost if math.isfinite(always) else math.nan
    per_label: Any = None
    if labels is not None:
        if isinstance(labels, str):
            if labels not in frame.columns:
                raise ValidationError(f"no label column {labels!r} in the frame")
            per_label = np.asarray(label_numbers(frame[labels].tolist(), labels), dtype=float)
        else:
            per_label = np.asarray(label_numbers(list(labels), "labels"), dtype=float)
            if per_label.size != n:
                raise ValidationError(f"labels has {per_label.size} values for {n} rows")
    elif ledger is not None and task_type is not None:
        found = ledger_labels(ledger, task_type)
        ids = item_ids(frame)
        models = frame["candidate_model"].tolist() if "candidate_model" in frame else [None] * n
        adapters = frame["candidate_adapter"].tolist() if "candidate_adapter" in frame else [None] * n
        per_label = np.array([found.get((str(item_id_text(i)), candidate_names(m, a)[0]), math.nan)
                              for i, m, a in zip(ids, models, adapters, strict=True)], dtype=float)
    combined = observed = math.nan
    n_labelled = 0
    if per_label is not None:
        people = (decided_by == HUMAN) & (status == "abstained") & np.isfinite(per_label)
        n_labelled = int(people.sum())
        done = judged + n_labelled
        combined = (judged * cascade.guaranteed_agreement + n_labelled) / done if done else math.nan
        t = {s.grader_id: s.threshold for s in stages}
        scores = pd.to_numeric(frame["quality_score"], errors="coerce").to_numpy(dtype=float)
        judged_rows = (status == "scored") & np.isfinite(per_label) & np.isin(decided_by, list(t))
        if judged_rows.any():
            thr = np.array([t.get(d, 0.5) for d in decided_by[judged_rows]])
            observed = float(((scores[judged_rows] >= thr) == (per_label[judged_rows] >= thr)).mean())
    return SelectiveCascadeSummary(
        n=n, stages=tuple(rows), human=human, human_share=human / n if n else math.nan,
        unscored=int((status == "unscored").sum()), errors=int((status == "error").sum()), cost_usd=total_cost,
        cost_per_item_usd=total_cost / n if n else math.nan, last_judge_cost_per_item_usd=last_per_item,
        always_last_cost_usd=always, saved_usd=saved,
        saved_share=saved / always if math.isfinite(saved) and always > 0 else math.nan,
        guarantee=cascade.guarantee, judged=judged, labelled_by_people=n_labelled,
        combined_agreement=combined, observed_agreement=observed, labels=per_label)
