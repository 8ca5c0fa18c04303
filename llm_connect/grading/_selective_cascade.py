"""Cascades of selective judges: cheap judges first, people last, with the guarantee held throughout (Jung,
Brahman & Choi, ICLR 2025, arXiv:2407.18370, *Cascaded Selective Evaluation*).

Cascades
--------
``cascade([cheap, strong], alpha=0.1, delta=0.1)`` (:class:`SelectiveCascade`): each judge is a
selective judge, calibrated on the calibration items every judge before it abstained on; an item
goes down the list until a judge is sure enough, and what the last one abstains on is left for
people (``decided_by="human"``, ``status="abstained"``). Rows say which judge decided
(``decided_by``: its grader id, or ``"human"``); :meth:`SelectiveCascade.summary` gives the
coverage of each stage, the cost per item against always using the last judge, the guaranteed
agreement, and, once people's labels of the abstained items are in a ledger (or a column),
the agreement of the combined labels.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._display import view
from .._docstrings import JUDGE_TEXTS, share_parameters
from .._options import check_run_options
from ..core import BudgetTracker, LLMResponse, RunConfig, as_budget
from ..errors import JudgeAbstained, JudgeReplyError, UncalibratedJudgeError, ValidationError
from ..runner import as_ledger
from ..stats.selective import Guarantee, Guaranteed, fixed_sequence_cutoff, min_items
from ._base import GradingResult, Judge, validate_grader_id
from ._human_labels import HUMAN, calibration_table, label_numbers, read_items
from ._judge_many import judge_many
from ._selective import SelectiveJudge, _digest, _usage_response
from ._selective_summary import SelectiveCascadeSummary, cascade_summary
from ._wrapper import WrapperJudge, _holding, _spent, _sum_usage

if TYPE_CHECKING:
    import pandas as pd

    from ..quality import BaseLedger

__all__ = ["SelectiveCascade", "cascade"]


@dataclass(init=False)
class SelectiveCascade(WrapperJudge, Guaranteed):
    """Judges from cheap to strong, each selective; what the last abstains on is left for people.

    Built by :func:`cascade` (``SelectiveCascade(judges, *, alpha=0.1, delta=0.1,
    grader_id="selective-cascade")``); see the module docstring and Jung, Brahman & Choi (ICLR 2025,
    arXiv:2407.18370), Section 3. Each stage is a :class:`SelectiveJudge` (a plain judge is
    wrapped with ``confidence="auto"``) held to the cascade's ``alpha`` and ``delta``.
    :meth:`calibrate` chooses each stage's cut-off on the calibration items the stages before
    it abstained on. A calibrated cascade asks the stages in order: the first whose confidence
    reaches its cut-off decides (an unusable reply also passes the item on); after the last, the
    item is ``abstained`` with ``decided_by="human"``. Every stage keeps the items it judges at least
    ``1 − alpha`` in agreement with people, so all judged items together do too (the paper's
    guarantee; read strictly, the stages' ``delta`` add up, see :mod:`llm_connect.stats.selective`).
    Calls per item: each stage asked, until one decides. Batch columns: ``decided_by``, ``stage``
    (its index; the number of stages for people), ``confidence`` (the deciding stage's, or the last
    stage's) and ``details`` (``stage_costs``, ``stage_confidences``). :meth:`summary` reads a batch.
    ``alpha``, ``delta`` and ``coverage`` are read from one frozen :attr:`guarantee`.

    Parameters
    ----------
    judges : sequence of Judge
        The stages, cheapest first: judges or :class:`SelectiveJudge` (one held to another ``alpha`` or
        ``delta`` is reset to the cascade's, to be calibrated again); not another cascade; distinct
        ``grader_id`` and none ``"human"``.
    alpha : float, default 0.1
        The most disagreement with people the guarantee allows on the judged items.
    delta : float, default 0.1
        The chance that the guarantee fails, over the calibration items.
    grader_id : str, default "selective-cascade"
        The cascade's grader id.
    calibration : tuple of dict, optional
        Per stage, what calibration saw (set by :meth:`calibrate`; ``None``: not calibrated).

    Attributes
    ----------
    guarantee : Guarantee
        What the cascade promises, as one frozen value: ``alpha``, ``delta`` and, once calibrated,
        ``coverage``.
    stages : list of SelectiveJudge
        The selective judges, cheapest first.

    Raises
    ------
    ValidationError
        No judges, a cascade as a stage, repeated grader ids, or a stage named ``"human"``.

    See Also
    --------
    cascade : Build one.
    SelectiveJudge : One stage.

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge, TokenF1Judge
    >>> c = cascade([ExactMatchJudge(), TokenF1Judge()], alpha=0.2)
    >>> [s.grader_id for s in c.stages], c.calibrated
    (['exact-match', 'token-f1'], False)
    """

    judges: Sequence[Judge]
    grader_id: str = "selective-cascade"
    #: What the cascade promises, as one frozen value: ``alpha``, ``delta`` and, once calibrated, ``coverage``
    #: (the share of the calibration items some stage decided; a cascade has no one ``cutoff``).
    guarantee: Guarantee = field(default_factory=lambda: Guarantee(0.1, 0.1))
    #: Per stage, what calibration saw (``grader_id``, ``reached``: items it was asked about, ``judged``,
    #: ``coverage``: share of all calibration items it decided, ``cutoff``, ``agreement``, ``cost_usd``, ``note``).
    calibration: tuple[dict[str, Any], ...] | None = field(default=None, repr=False, compare=False)

    extra_columns = ("decided_by", "stage", "confidence", "details")

    def __init__(self, judges: Sequence[Judge], *, alpha: float = 0.1, delta: float = 0.1,
                 grader_id: str = "selective-cascade", calibration: tuple[dict[str, Any], ...] | None = None) -> None:
        self.judges, self.grader_id, self.calibration = judges, grader_id, calibration
        validate_grader_id(self.grader_id)
        coverage = math.nan if not calibration else math.fsum(float(s["coverage"]) for s in calibration)
        self.guarantee = Guarantee(alpha, delta, coverage=min(coverage, 1.0))
        if isinstance(self.judges, (str, bytes)) or not isinstance(self.judges, Sequence) or not self.judges:
            raise ValidationError("a cascade needs a non-empty list of judges, cheapest first")
        stages = []
        for j in self.judges:
            if isinstance(j, SelectiveCascade):
                raise ValidationError("a cascade's stage must be a judge or a SelectiveJudge, not another cascade")
            if isinstance(j, SelectiveJudge):
                if j.alpha != self.alpha or j.delta != self.delta:  # held to the cascade's level: calibrate again
                    j = j.replace(alpha=self.alpha, delta=self.delta, cutoff=None, calibration=None)
                stages.append(j)
            else:
                stages.append(SelectiveJudge(j, alpha=self.alpha, delta=self.delta))
        ids = [s.grader_id for s in stages]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValidationError(f"a cascade's judges need distinct grader_ids (decided_by names them); repeated: "
                                  f"{twice}")
        if HUMAN in ids:
            raise ValidationError(f"{HUMAN!r} is the decided_by of the items left for people; rename that judge")
        self.judges = stages

    def _replace(self, judges: Sequence[Judge], calibration: tuple[dict[str, Any], ...] | None) -> SelectiveCascade:
        return SelectiveCascade(judges, alpha=self.alpha, delta=self.delta, grader_id=self.grader_id,
                                calibration=calibration)

    @property
    def alpha(self) -> float:
        """The most disagreement with people the guarantee allows on judged items (read from :attr:`guarantee`)."""
        return self.guarantee.alpha

    @property
    def delta(self) -> float:
        """The chance that the guarantee fails, over the calibration items (read from :attr:`guarantee`)."""
        return self.guarantee.delta

    @property
    def stages(self) -> list[SelectiveJudge]:
        """The selective judges, cheapest first."""
        return list(self.judges)  # type: ignore[arg-type]

    @property
    def calibrated(self) -> bool:
        """Whether every stage has its cut-off (see :meth:`calibrate`)."""
        return all(s.calibrated for s in self.stages)

    @property
    def rubric_hash(self) -> str:
        """The cascade's identity in a ledger: a hash of ``alpha``, ``delta`` and each stage's grader id and
        :attr:`SelectiveJudge.rubric_hash` (its cut-off included). Every row it records carries it, whichever
        stage decided (``decided_by`` says which), and ``grade_dataset`` resumes by it."""
        return _digest({"kind": "selective-cascade", "alpha": repr(self.alpha), "delta": repr(self.delta),
                        "stages": [[s.grader_id, s.rubric_hash] for s in self.stages]})

    @property
    def abstains(self) -> bool:
        return True

    @property
    def coverage(self) -> float:
        """The share of the calibration items some stage decided (NaN before calibration), read from
        :attr:`guarantee`."""
        return self.guarantee.coverage

    @property
    def needs_reference(self) -> bool:
        return any(s.needs_reference for s in self.stages)

    uses_item = True

    @share_parameters(texts=JUDGE_TEXTS)
    def with_item(self, *, messages: Any = None, context: Any = None) -> SelectiveCascade:
        """The cascade of one conversation item: each stage bound to the item (:meth:`SelectiveJudge.with_item`).

        Parameters
        ----------
        {messages}
        {context}

        Returns
        -------
        SelectiveCascade
            The bound copy; this cascade when no stage reads items.
        """
        return _holding(self, judges=[s.with_item(messages=messages, context=context) for s in self.stages])

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        d = result.details
        return {"decided_by": d.get("decided_by"), "stage": d.get("stage"), "confidence": d.get("confidence"),
                "details": dict(d)}

    async def aprepare_run(self, pairs: Any, *, progress: Any = None) -> SelectiveCascade:
        """Each stage's pre-pass over a run (:meth:`SelectiveJudge.aprepare_run`).

        Parameters
        ----------
        pairs : iterable of (str, str)
            Each row's ``(baseline, candidate)`` texts.
        progress : callable, optional
            Makes a progress bar.

        Returns
        -------
        SelectiveCascade
            A copy of the prepared stages, with the same calibration.
        """
        pairs = list(pairs)
        stages = [await s.aprepare_run(pairs, progress=progress) for s in self.stages]
        return self._replace(stages, self.calibration)

    def with_seed_offset(self, offset: int) -> SelectiveCascade:
        """The cascade of epoch ``offset``: each stage reseeded (:meth:`SelectiveJudge.with_seed_offset`), the
        calibration kept.

        Parameters
        ----------
        offset : int
            The epoch.

        Returns
        -------
        SelectiveCascade
            The copy.
        """
        return self._replace([s.with_seed_offset(offset) for s in self.stages], self.calibration)

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        stages = self.stages
        if not self.calibrated:
            raise UncalibratedJudgeError(f"cascade {self.grader_id!r} is not calibrated: call "
                                         ".calibrate(data, human=COLUMN) first")
        spent: list[Any] = []
        costs: list[float] = []
        confidences: list[float | None] = []
        reasons: list[str] = []
        last_conf: float | None = None
        last_reply: str | None = None
        for i, stage in enumerate(stages):
            try:
                result = await stage._ajudge(baseline, candidate, prompt, run_config)
            except JudgeAbstained as exc:
                paid = _spent(exc)
                spent.append(paid)
                costs.append(float(paid.cost_usd) if paid is not None else 0.0)
                confidences.append(exc.confidence)
                last_conf = exc.confidence
                last_reply = paid.content if paid is not None and paid.content else last_reply
                reasons.append(f"{stage.grader_id}: {exc}")
                continue
            except JudgeReplyError as exc:  # an unusable reply: the item goes on, as with an abstention
                paid = _spent(exc)
                spent.append(paid)
                costs.append(float(paid.cost_usd) if paid is not None else 0.0)
                confidences.append(None)
                last_conf = None
                reasons.append(f"{stage.grader_id}: unscored: {exc}")
                continue
            spent.append(result)
            costs.append(float(result.cost_usd))
            conf = result.details.get("confidence")
            confidences.append(conf)
            details = {"kind": "selective-cascade", "decided_by": stage.grader_id, "stage": i, "confidence": conf,
                       "stage_costs": costs, "stage_confidences": confidences, "passed_on": reasons,
                       "decided": dict(result.details), "rubric_hash": self.rubric_hash,
                       "decided_rubric_hash": stage.rubric_hash}
            notes = (f"{stage.grader_id} decided" + (f" (after {i} judge(s) abstained)" if i else "")
                     + f": {result.notes}")
            return GradingResult(quality_score=result.quality_score, notes=notes, grader_id=self.grader_id,
                                 baseline_response=baseline, candidate_response=candidate, details=details,
                                 **_sum_usage(spent))
        details = {"kind": "selective-cascade", "decided_by": HUMAN, "stage": len(stages), "confidence": last_conf,
                   "stage_costs": costs, "stage_confidences": confidences, "passed_on": reasons}
        left = JudgeAbstained(f"every judge abstained ({'; '.join(reasons)}): left for people", confidence=last_conf,
                              columns={"decided_by": HUMAN, "stage": len(stages), "confidence": last_conf,
                                       "details": details})
        left.response = _usage_response(spent, self.grader_id, last_reply)
        raise left

    @share_parameters
    def calibrate(self, data: Any, *, human: str, seed: int = 0, concurrency: int = 16, progress: bool = True,
                  run_config: RunConfig | None = None, budget: BudgetTracker | float | None = None,
                  ) -> SelectiveCascade:
        """The calibrated cascade: stage by stage, each cut-off chosen on the labelled items every earlier
        stage abstained on (or could not score).

        The first stage needs at least :func:`~llm_connect.stats.selective.min_items` labelled items (an
        error names how many); a later stage reached by fewer abstains on everything (its ``note`` says
        so). Each stage judges only the items that reach it.

        Parameters
        ----------
        data : DataFrame or iterable of mappings or str or os.PathLike
            The calibration items with the label column ``human``, as :meth:`SelectiveJudge.calibrate`
            takes them.
        human : str
            The label column.
        seed : int, default 0
            Seeds the rubric versions of a stage's ``"panel"``.
        {concurrency}
        {progress}
        {run_config}
        {budget}
            One budget for the whole calibration, every stage charged to it (items a spent budget left
            unjudged are passed on, and left out of every stage's calibration).

        Returns
        -------
        SelectiveCascade
            A copy with each stage's cut-off and :attr:`calibration` (per stage: ``grader_id``,
            ``reached``, ``judged``, ``coverage``, ``cutoff``, ``agreement``, ``cost_usd``, ``note``).

        Raises
        ------
        ValidationError
            No label column ``human``, too few labelled items for the guarantee, or a bad run option.

        See Also
        --------
        SelectiveJudge.calibrate : One stage's calibration.
        """
        check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, budget=budget)
        import numpy as np

        frame = read_items(data)
        if not isinstance(human, str) or human not in frame.columns:
            raise ValidationError(f"no label column {human!r} in the data; it has {', '.join(map(str, frame.columns))}")
        labels = np.asarray(label_numbers(frame[human].tolist(), human), dtype=float)
        keep = np.isfinite(labels)
        remaining = frame[keep].reset_index(drop=True)
        labels = labels[keep]
        total = len(remaining)
        need = min_items(self.alpha, self.delta)
        if total < need:
            raise ValidationError(
                f"too few labelled items to calibrate the cascade: {total}; the guarantee at alpha={self.alpha:g}, "
                f"delta={self.delta:g} needs at least {need}; label more items or raise alpha or delta")
        tracker = as_budget(budget)  # one budget for every stage (a limit in USD becomes one tracker)
        stages: list[SelectiveJudge] = []
        report: list[dict[str, Any]] = []
        for i, stage in enumerate(self.stages):
            reached = len(remaining)
            stage = stage.with_panel(seed)
            if reached == 0 or stage.source is None:
                cut = fixed_sequence_cutoff([], [], alpha=self.alpha, delta=self.delta, strict=False)
                if stage.source is None:
                    cut = dataclasses.replace(cut, n=reached, note=stage.note)
                else:
                    cut = dataclasses.replace(cut, note="no calibration item reached this judge")
                stages.append(stage.replace(cutoff=math.inf, calibration=cut, seed=seed))
                report.append({"grader_id": stage.grader_id, "source": stage.source, "reached": reached, "judged": 0,
                               "coverage": 0.0, "cutoff": math.inf, "agreement": math.nan, "cost_usd": 0.0,
                               "note": cut.note})
                continue
            rows = judge_many(stage.scorer, remaining, concurrency=concurrency, progress=progress,
                              run_config=run_config, budget=tracker)
            table = calibration_table(remaining, rows, labels, stage.threshold)
            cut = fixed_sequence_cutoff(table["confidence"], table["agree"], alpha=self.alpha, delta=self.delta,
                                        strict=i == 0)
            done = stage.replace(cutoff=cut.cutoff, calibration=cut, seed=seed)
            done.calibration_frame = table
            stages.append(done)
            judged = cut.judges(table["confidence"].to_numpy())
            report.append({"grader_id": stage.grader_id, "source": stage.source, "reached": reached,
                           "judged": int(judged.sum()), "coverage": float(judged.sum()) / total,
                           "cutoff": cut.cutoff, "agreement": cut.agreement,
                           "cost_usd": float(table["judge_cost_usd"].sum()), "note": cut.note})
            remaining = remaining[~judged].reset_index(drop=True)
            labels = labels[~judged]
        return self._replace(stages, tuple(report))

    def describe(self) -> str:
        """One line: what each stage decides and the guarantee.

        Returns
        -------
        str
            E.g. "selective-cascade: judges 81% of items (token-f1 55%, llm-judge 26%) with ...; leaves 19% for
            people", or that it is not calibrated.
        """
        if not self.calibration:
            return f"{self.grader_id}: not calibrated (call .calibrate(data, human=COLUMN))"
        parts = [f"{s['grader_id']} {float(s['coverage']):.0%}" for s in self.calibration]
        left = max(0.0, 1.0 - self.coverage)
        return (f"{self.grader_id}: judges {self.coverage:.0%} of items ({', '.join(parts)}) with "
                f"{self.guarantee.describe()}; leaves {left:.0%} for people")

    def _repr_html_(self) -> str:
        return str(view("selective_cascade_html")(self))

    def summary(self, frame: pd.DataFrame, *, labels: Any = None, ledger: BaseLedger | None = None,
                task_type: str | None = None) -> SelectiveCascadeSummary:
        """How the cascade did over a batch (the frame of ``judge_many(cascade, items)``).

        Per stage the items it decided and their share (``coverage``), the share left for people,
        the judges' cost per item against always using the last judge (its cost per item measured
        on the items that reached it), and the guarantee. People's labels (``labels``: a column
        of ``frame`` or one value per row; or ``ledger`` and ``task_type``: the ``human`` labels
        recorded there, e.g. by the :class:`~llm_connect.labelling.Labeller`, matched on item id
        and candidate) give ``labelled_by_people`` (abstained items people have labelled) and
        ``combined_agreement``: the share of the decided items (judges' and people's) that agree
        with people, at least ``(judged·(1 − alpha) + labelled_by_people) / (judged +
        labelled_by_people)`` with probability ``1 − delta``; ``observed_agreement`` is the judges'
        agreement on the judged items that people labelled too (NaN when none).

        Parameters
        ----------
        frame : DataFrame
            The frame of ``judge_many(cascade, items)``.
        labels : str or array-like, optional
            People's labels: a column of ``frame`` or one value per row.
        ledger : BaseLedger, optional
            A ledger holding people's ``human`` labels (with ``task_type``).
        task_type : str, optional
            The task the labels are recorded under.

        Returns
        -------
        SelectiveCascadeSummary
            The summary.
        """
        return cascade_summary(self, frame, labels=labels, ledger=ledger, task_type=task_type)

    @share_parameters
    def judge_many(self, items: Any, *, concurrency: int = 16, progress: bool = True,
                   run_config: RunConfig | None = None, ledger: BaseLedger | str | os.PathLike[str] | None = None,
                   task_type: str | None = None, budget: BudgetTracker | float | None = None, epochs: int = 1,
                   reducer: Any = "mean", batch: Any = False) -> pd.DataFrame:
        """:func:`llm_connect.grading.judge_many` of the cascade, with ``attrs["cascade"]`` its :meth:`summary`.

        Parameters
        ----------
        items : DataFrame or iterable of mappings
            The items, as :func:`~llm_connect.grading.judge_many` takes them.
        {concurrency}
        {progress}
        {run_config}
        {ledger}
            The judged rows are recorded, and people's labels already there (of the items left for them)
            give the combined agreement and a ``human_label`` column.
        {task_type}
        {budget}
        {epochs}
            A cascade may abstain, so only ``1`` is taken (see :func:`~llm_connect.grading.judge_many`).
        {reducer}
        {batch}

        Returns
        -------
        DataFrame
            ``judge_many(self, items, ...)``, with ``attrs["cascade"]`` the :meth:`summary` as a dict, and a
            ``human_label`` column when the ledger holds people's labels.

        See Also
        --------
        summary : The same summary of any frame the cascade judged.
        """
        check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                          task_type=task_type, budget=budget, epochs=epochs, reducer=reducer, batch=batch)
        sink = as_ledger(ledger)  # a path: opened once, for the rows and the summary
        out = judge_many(self, items, concurrency=concurrency, progress=progress, run_config=run_config,
                         ledger=sink, task_type=task_type, budget=budget, epochs=epochs, reducer=reducer,
                         batch=batch)
        summary = self.summary(out, ledger=sink, task_type=task_type)
        if summary.labels is not None:
            out["human_label"] = summary.labels
        out.attrs["cascade"] = summary.to_dict()
        return out


def cascade(judges: Sequence[Judge], *, alpha: float = 0.1, delta: float = 0.1,
            grader_id: str = "selective-cascade") -> SelectiveCascade:
    """A cascade of selective judges, cheapest first: ``cascade([cheap, strong], alpha=0.1, delta=0.1)``.

    Each judge (or :class:`SelectiveJudge`) becomes a stage held to ``alpha`` and ``delta``;
    calibrate it with ``.calibrate(data, human=COLUMN)``, then judge with it as with any judge
    (``judge_many``, ``grade_dataset``). See :class:`SelectiveCascade` and Jung, Brahman & Choi
    (ICLR 2025, arXiv:2407.18370), *Cascaded Selective Evaluation*.

    Parameters
    ----------
    judges : sequence of Judge
        The stages, cheapest first.
    alpha : float, default 0.1
        The most disagreement with people the guarantee allows on the judged items.
    delta : float, default 0.1
        The chance that the guarantee fails.
    grader_id : str, default "selective-cascade"
        The cascade's id.

    Returns
    -------
    SelectiveCascade
        The cascade, not calibrated yet.

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge, TokenF1Judge
    >>> cascade([ExactMatchJudge(), TokenF1Judge()]).describe()
    'selective-cascade: not calibrated (call .calibrate(data, human=COLUMN))'
    """
    return SelectiveCascade(list(judges), alpha=alpha, delta=delta, grader_id=grader_id)
