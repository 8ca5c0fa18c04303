"""The :class:`Labeller`: label answers one at a time in Jupyter, every label to the ledger at once; a façade
over its items (:mod:`._items`), the ledger it writes and reads back (:mod:`._log`) and the plan that picks the
next item (:mod:`._queue`). What it does as a whole: :mod:`llm_connect.labelling`."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._display import view
from ..errors import ValidationError
from ..frames import HOLD_GRADER_ID, HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID
from ..items import item_id_text
from ..quality import BaseLedger
from ..stats._validate import check_confidence
from ..stats.estimates import estimate_quality, labels_needed
from ..stats.sampling import STRATEGIES, SamplingPlan, calibrated_scores
from ._items import UNITS, label_items, read_items
from ._log import LabelLog
from ._queue import LabelQueue

__all__ = ["Labeller"]

_log = logging.getLogger("llm_connect")
_MIN_LABELS_FOR_WIDTH = 10  # below this the progress text gives no width (the normal interval is not yet one)
_MAX_TAKES = 100  # items lost in a row to annotators who took them at the same moment before showing one anyway


class Labeller:
    """Label answers one at a time in Jupyter; every label goes to the ledger at once.

    One item is one (id, adapter): the same question answered by two models is two items. Items of a
    conversation or an agent run (columns ``messages``, ``context``, a ``candidate`` or reference that is a
    list of chat messages; see :mod:`llm_connect.conversations`) are shown as a transcript: roles, tool calls
    with their arguments, tool results and the documents, collapsible.

    The programmatic API (the widget's buttons call it): :attr:`current`, :meth:`label`, :meth:`skip`,
    :meth:`undo`, :meth:`progress`, :attr:`n_labelled`; and for the results :meth:`frame`,
    :meth:`estimate`, :meth:`agreement`.

    Parameters
    ----------
    items : DataFrame or iterable of mapping
        Rows with an item id (``id`` or ``item_id``), ``prompt``, ``candidate``, optionally reference(s)
        (``references`` list, ``reference`` or ``baseline``), ``candidate_model`` / ``candidate_adapter`` /
        ``adapter_id`` / ``model_id``, and the judge's score and reply (see
        :mod:`llm_connect.labelling._items`).
    ledger : QualityLedger
        The :class:`~llm_connect.quality.QualityLedger` the labels go to (and the judge's scores may come
        from).
    task_type : str
        The task type of the judge's observations.
    annotator : str
        Who labels (a name).
    grader_id : str, optional
        The judge's grader id: its scores drive ``"active"`` and the estimates; ``None``: human-only
        intervals.
    strategy : {"random", "stratified", "active", "overlap", "abstained"}, default "random"
        The order of the items; ``"abstained"``: the rows of a selective judge's or cascade's
        ``judge_many`` frame it abstained on, most uncertain first.
    seed : int, default 0
        The order's seed.
    group : str, optional
        The stratifying column; default ``candidate_model``.
    overlap : float, default 0.2
        The share every annotator labels.
    floor : float, default 0.1
        The uniform share of ``"active"``.
    uncertainty : str, optional
        ``"active"``'s fixed rule: ``"judge"`` for the judge's own ``sqrt(s(1 − s))``, for a judge known to
        be calibrated, or a column of uncertainty, e.g. several judges' disagreement; without it, the
        default, the rule is learned from the labels: safer when the judge may be confidently wrong, see
        :mod:`llm_connect.stats.sampling`.
    burn_in : int, default 20
        Labels taken uniformly before the rule is learned.
    bins : int, default 5
        Judge-score bins of the learned rule.
    reference_sep : str, optional
        Splits one reference text into several (e.g. ``"|"``).
    show_judge : bool, default False
        Reveal the judge's verdict from the start; default hidden, to avoid anchoring.
    target_width : float, default 0.05
        The interval width progress plans for.
    confidence : float, default 0.95
        The intervals' confidence level.
    hold_seconds : float, default 900.0
        How long an item shown to this annotator is held from the others, renewed while it is shown; 0
        takes no holds (see :mod:`llm_connect.labelling._log`).
    unit : {"turn", "conversation"}, default "turn"
        ``"turn"``: each row is an item; ``"conversation"``: the rows of one ``conversation_id`` (and
        candidate model) are one item, the whole conversation shown and labelled at once (see
        :mod:`llm_connect.labelling`).

    Raises
    ------
    ValidationError
        On bad input, saying what to change.

    See Also
    --------
    calibrate : Measures judges against the labels.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> import pandas as pd
    >>> from llm_connect import QualityLedger
    >>> from llm_connect.labelling import Labeller
    >>> items = pd.DataFrame({"id": [1, 2, 3],
    ...                       "prompt": ["2+2?", "Capital of France?", "H2O is?"],
    ...                       "candidate": ["4", "Paris", "salt"],
    ...                       "reference": ["4", "Paris", "water"]})
    >>> ledger = QualityLedger(pathlib.Path(tempfile.mkdtemp()) / "labels.jsonl")
    >>> labeller = Labeller(items, ledger=ledger, task_type="qa", annotator="ana")
    >>> labeller.current["prompt"]  # the seeded order's first item
    'Capital of France?'
    >>> label_id = labeller.label(1.0)  # correct: appended to the ledger at once
    >>> labeller.current["prompt"], labeller.n_labelled
    ('H2O is?', 1)
    >>> label_id = labeller.label(0.0)  # incorrect
    >>> labeller.progress()["text"]
    '2 labelled; interval width needs about 10 labels'
    >>> labeller  # in Jupyter, the widget  # doctest: +SKIP
    """

    def __init__(
        self,
        items: Any,
        *,
        ledger: BaseLedger,
        task_type: str,
        annotator: str,
        grader_id: str | None = None,
        strategy: str = "random",
        seed: int = 0,
        group: str | None = None,
        overlap: float = 0.2,
        floor: float = 0.1,
        uncertainty: str | None = None,
        burn_in: int = 20,
        bins: int = 5,
        reference_sep: str | None = None,
        show_judge: bool = False,
        target_width: float = 0.05,
        confidence: float = 0.95,
        hold_seconds: float = 900.0,
        unit: str = "turn",
    ) -> None:
        judge = grader_id
        if strategy not in STRATEGIES:
            raise ValidationError(f"unknown strategy {strategy!r}; choose from {list(STRATEGIES)}")
        if unit not in UNITS:
            raise ValidationError(f"unknown unit {unit!r}; choose 'turn' (each row is an item: one reply) or "
                                  "'conversation' (the rows of one conversation_id are one item)")
        if unit == "conversation" and strategy == "abstained":
            raise ValidationError("strategy='abstained' shows the turns a selective judge abstained on: use "
                                  "unit='turn' with it")
        self.unit = unit
        for name, value in (("task_type", task_type), ("annotator", annotator)):
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ValidationError(f"judge must be the judge's grader id (a string) or None, got {judge!r}")
        if judge in (HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID, HOLD_GRADER_ID):
            raise ValidationError(f"judge={judge!r} names the human labels; pass the machine judge's grader id")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValidationError(f"seed must be an integer, got {seed!r}")
        if not hasattr(ledger, "append"):
            raise ValidationError(f"ledger must be a QualityLedger (labels are appended to it), got "
                                  f"{type(ledger).__name__}")
        if not (isinstance(target_width, (int, float)) and not isinstance(target_width, bool)
                and 0 < target_width < 1):
            raise ValidationError(f"target_width must be a number in (0, 1), e.g. 0.05; got {target_width!r}")
        if (isinstance(hold_seconds, bool) or not isinstance(hold_seconds, (int, float))
                or not math.isfinite(hold_seconds) or hold_seconds < 0):
            raise ValidationError(f"hold_seconds must be a number of seconds >= 0 (0: take no holds), e.g. 900; "
                                  f"got {hold_seconds!r}")
        self.hold_seconds = float(hold_seconds)
        self.ledger = ledger
        self.task_type = task_type
        self.annotator = annotator
        self.judge = judge
        self.strategy = strategy
        self.seed = int(seed)
        self.show_judge = bool(show_judge)
        self.target_width = float(target_width)
        self.confidence = check_confidence(confidence)
        self._log = LabelLog(ledger, task_type=task_type, annotator=annotator)
        frame, priority = read_items(items, unit=unit, strategy=strategy, judge=judge, uncertainty=uncertainty)
        self._items = label_items(frame, strategy=strategy, group=group, reference_sep=reference_sep,
                                  uncertainty=uncertainty, judge=judge, ledger_rows=self._log.rows)
        self.group, self.judge_source = self._items.group, self._items.judge_source
        self.floor, self.burn_in, self.bins = floor, burn_in, bins
        self._queue = LabelQueue(self._items, strategy=strategy, seed=self.seed, group=group, overlap=overlap,
                                 floor=floor, uncertainty=uncertainty, burn_in=burn_in, bins=bins, unit=unit,
                                 priority=priority)
        self._refresh()

    # -- the plan and the ledger --------------------------------------------------------------------

    @property
    def plan(self) -> SamplingPlan:
        """The sampling plan of the items (:class:`~llm_connect.stats.sampling.SamplingPlan`); for the learned
        ``"active"`` rule, rebuilt from the labels as they come."""
        return self._queue.plan

    @property
    def plan_id(self) -> str:
        """The plan's id: every label given under it carries it (``tags["plan"]``)."""
        return self._queue.plan_id

    def _refresh(self) -> None:
        """Read the ledger again, replay a learned plan, and choose the item to show."""
        self._state, recorded = self._log.read(self._items, self.plan_id)
        self._queue.replay(self._items, self._state, recorded)
        self._queue.choose(self._state)

    def _take(self) -> None:
        """Hold the current item for this annotator (a ``human-hold`` marker), so other annotators pass it over.

        The hold is appended, then the ledger is read again: when another annotator held the item first (in
        the ledger's order: both took it at the same moment), this annotator moves on to the next free item
        and holds that. A hold is renewed once half of ``hold_seconds`` has passed while the item is shown.
        Items of the overlap share are never held; neither is an item brought back by undo that another
        annotator holds by now (it is shown, not contested)."""
        if self.hold_seconds <= 0:
            return
        for _ in range(_MAX_TAKES):
            i = self._queue.current
            if i is None or self._queue.shared(i):
                return
            key = self._items.keys[i]
            if key in self._state.held_by_others:
                return
            since = self._state.my_holds.get(key)
            if since is not None and time.time() - since < self.hold_seconds / 2:
                return
            self.ledger.append(self._log.observation(self._items, i, HOLD_GRADER_ID, 0.0, {
                "hold_id": uuid.uuid4().hex, "hold_seconds": self.hold_seconds, "plan": self.plan_id}))
            self._refresh()

    def _record(self, grader: str, score: float, note: str) -> str:
        if self._queue.current is None:
            raise ValidationError("every item is done: there is nothing to label (undo() brings the last one back)")
        if not isinstance(note, str):
            raise ValidationError(f"note must be text, got {type(note).__name__}")
        i = self._queue.current
        label_id = uuid.uuid4().hex
        tags: dict[str, Any] = {
            "label_id": label_id, "strategy": self.strategy, "seed": self.seed, "plan": self.plan_id,
            "sampling_probability": float(self.plan.prob[i]),
            "stratum": self.plan.stratum_names[int(self.plan.stratum[i])],
            "rank": int(self.plan.rank[i]), "stratum_size": int(self.plan.size[i]),
        }
        if note.strip():
            tags["note"] = note
        tags.update(LabelLog.unit_tags(self._items, i, self.unit))
        obs = self._log.observation(self._items, i, grader, score, tags)
        once = getattr(self.ledger, "extend_once", None)
        if callable(once):  # once per item and annotator: another session of this annotator may have labelled it
            recorded = once([obs])
            if not recorded.written[0]:
                what = "labelled" if grader == HUMAN_GRADER_ID else "skipped"
                _log.warning("llm_connect: %s has %s item %r (%s) already, e.g. in another session; not recorded "
                             "again (undo() takes the recorded one back)", self.annotator, what, self._items.ids[i],
                             self._items.keys[i][1])
                label_id = recorded.held_ids[0] or label_id
        else:
            self.ledger.append(obs)
        self._queue.pinned = None
        self._refresh()
        return label_id

    # -- the programmatic API ------------------------------------------------------------------

    @property
    def current(self) -> dict[str, Any] | None:
        """The item shown now, as a dict (``item_id``, ``adapter_id``, ``model_id``, ``prompt``,
        ``references``, ``candidate``, ``judge_score``, ``judge_reply``, ``sampling_probability``),
        or None when every item is done. ``item_id`` is the plain Python id (a numpy integer id is an int).

        Showing an item holds it for this annotator (a ``human-hold`` marker, renewed while it is shown):
        other annotators' labellers pass it over until it is labelled, skipped or the hold expires
        (``hold_seconds``); an item another annotator took at the same moment is left to them and the
        next free one is shown."""
        self._take()
        i = self._queue.current
        if i is None:
            return None
        row = self._items.frame.iloc[i]
        score = float(row["judge_score"])
        return {
            "item_id": self._items.ids[i], "adapter_id": row["adapter_id"], "model_id": row["model_id"],
            "prompt": row["prompt"], "references": list(row["references"]), "candidate": row["candidate"],
            "judge_score": None if math.isnan(score) else score, "judge_reply": row["judge_reply"],
            "sampling_probability": float(self.plan.prob[i]),
            "reply": row["reply"], "reference_run": row["reference_run"], "messages": row["messages"],
            "context": row["context"], "conversation_id": row["conversation_id"], "turn": row["turn"],
            "unit": self.unit,
        }

    def label(self, score: float, note: str = "") -> str:
        """Label the current item: 1.0 correct, 0.0 incorrect, anything between partial. Appends the
        label to the ledger at once and moves on.

        Parameters
        ----------
        score : float
            The label, in 0..1.
        note : str, default ""
            The annotator's note, kept with the label.

        Returns
        -------
        str
            The label's id.

        Raises
        ------
        ValidationError
            When ``score`` is not in 0..1, every item is done, or ``note`` is not text.
        """
        if isinstance(score, bool):
            score = float(score)
        if not isinstance(score, (int, float, np.number)) or not math.isfinite(float(score)) or not (
                0.0 <= float(score) <= 1.0):
            raise ValidationError(f"a label is a score in 0..1 (1 correct, 0 incorrect, between: partial), "
                                  f"got {score!r}")
        return self._record(HUMAN_GRADER_ID, float(score), note)

    def skip(self, note: str = "") -> str:
        """Skip the current item (recorded, so it is not shown to this annotator again; undo brings it back).

        Parameters
        ----------
        note : str, default ""
            Why, kept with the skip.

        Returns
        -------
        str
            The skip's id.

        Raises
        ------
        ValidationError
            When every item is done, or ``note`` is not text.
        """
        return self._record(SKIP_GRADER_ID, 0.0, note)

    def undo(self) -> dict[str, Any] | None:
        """Take back this annotator's last label or skip (an ``undoes`` marker is appended; nothing is
        deleted) and show that item again.

        Returns
        -------
        dict or None
            The item shown again (:attr:`current`), or ``None`` when there is nothing to undo.
        """
        self._refresh()
        last = self._state.last_action
        if last is None:
            return None
        label_id, key = last
        index = self._items.index[key]
        self.ledger.append(self._log.observation(self._items, index, UNDO_GRADER_ID, 0.0,
                                                 {"undoes": label_id, "plan": self.plan_id}))
        self._queue.pinned = index
        self._refresh()
        return self.current

    @property
    def n_labelled(self) -> int:
        """How many of these items this annotator has labelled (skips and undone labels not counted)."""
        return self._state.n_mine

    @property
    def n_total(self) -> int:
        """How many items this labeller shows in all (for ``"active"``: the ones its draws select; with the
        learned rule a projection from the labels so far, which moves as labels come in)."""
        return len(self._queue.queue)

    def progress(self) -> dict[str, Any]:
        """Where labelling stands: ``text`` (e.g. "41 labelled; interval width now 0.09; about 60 more
        for 0.05"), ``n_labelled`` (this annotator), ``n_plan_labels`` (everyone under this plan),
        ``n_total``, ``n_left`` (items of the plan still to show), ``width`` (the current interval's
        width, NaN before 2 labels), ``target_width``, ``more`` (labels still needed for it; None when
        unknown) and ``reachable`` (False when ``more`` exceeds the items left, None when unknown).

        The text gives a width only once it means something: with fewer than
        10 labels under the plan, or a width of 1 or more, the normal
        interval is not yet a statement about the mean, so it says "interval width needs about 10
        labels". When the labels needed exceed the items left, it says the target is out of reach and
        about how wide labelling all of them would leave the interval (the width scaled as
        ``1/sqrt(labels)``; for ``"random"`` with a judge, PPI++'s ``(1 − ρ²)/n + ρ²/M``).

        Returns
        -------
        dict
            The keys above.
        """
        n = self.n_labelled
        width, more = math.nan, None
        n_plan = int(self._state.labels["key"].nunique()) if len(self._state.labels) else 0
        if n_plan >= 2:
            est = self.estimate()
            row = est.iloc[0]
            width = float(row["ci_high"] - row["ci_low"])
            if math.isfinite(width) and width > 0:
                more = self._more_for(width, n_plan)
        left = self._queue.n_left(self._state)
        reachable = None if more is None else more <= left
        text = f"{n} labelled"
        target = f"{self.target_width:.2f}"
        if n_plan < _MIN_LABELS_FOR_WIDTH or not math.isfinite(width) or width >= 1:
            text += f"; interval width needs about {_MIN_LABELS_FOR_WIDTH} labels"
        else:
            text += f"; interval width now {width:.2f}"
            if more is not None and more > left:
                reach = self._width_with(width, n_plan, left)
                text += (f"; {target} is out of reach: all {left} items left would give about {reach:.2f}" if left
                         else f"; {target} is out of reach: no items left")
            elif more is not None:
                text += f"; about {more} more for {target}" if more > 0 else f"; narrower than {target}"
        if self._queue.current is None:
            text += "; all items done"
        return {"text": text, "n_labelled": n, "n_plan_labels": n_plan, "n_total": self.n_total, "n_left": left,
                "width": width, "target_width": self.target_width, "more": more, "reachable": reachable}

    def _width_with(self, width: float, n_plan: int, left: int) -> float:
        """About the width with ``left`` more labels: ``1/sqrt(labels)``, or PPI++'s
        ``var(Y)·((1 − ρ²)/n + ρ²/M)`` (:func:`~llm_connect.stats.labels_needed`) for ``"random"``
        and ``"overlap"`` with a judge, with ``ρ`` the judge–label correlation on the labels."""
        total = n_plan + left
        if self.judge is not None and self.strategy in ("random", "overlap"):
            frame = self.frame()
            lab = frame[frame["human"].notna() & frame["judge"].notna()]
            m = int(frame["judge"].notna().sum())
            rho2 = 0.0
            if len(lab) >= 3 and lab["judge"].std() > 0 and lab["human"].std() > 0:
                rho2 = float(np.corrcoef(lab["judge"], lab["human"])[0, 1] ** 2)
            if m > 0:
                now, then = (1 - rho2) / n_plan + rho2 / m, (1 - rho2) / total + rho2 / m
                return width * math.sqrt(then / now)
        return width * math.sqrt(n_plan / total)

    def _more_for(self, width: float, n_plan: int) -> int | None:
        if self.judge is not None and self.strategy in ("random", "overlap") and n_plan >= 2:
            frame = self.frame()
            plan = labels_needed(frame, judge="judge", human="human", width=self.target_width,
                                 confidence=self.confidence, pool="data")
            value = plan.loc[plan["method"] == "ppi++", "more_labels"]
            if len(value) and value.notna().all():
                return int(value.iloc[0])
            return None
        # weighted designs (and no judge): the width shrinks as 1/sqrt(labels)
        return max(math.ceil(n_plan * (width / self.target_width) ** 2) - n_plan, 0)

    # -- results -------------------------------------------------------------------------------

    def frame(self) -> pd.DataFrame:
        """One row per item: ``item_id``, ``adapter_id``, ``model_id``, ``group``, ``stratum``,
        ``judge`` (its score; 0 for every item when there is no judge), ``human`` (the mean label
        under this plan, NaN when unlabelled), ``prediction`` (what the estimates use as the judge: the
        score itself, or for the learned ``"active"`` rule the judge calibrated on the labels with each
        item's own label left out, :func:`calibrated_scores`), ``n_labels``, ``sampling_probability``
        (``π_i``: for a shown item the one it was shown with) and
        ``inclusion_probability`` (``π_i · K_s / N_s``, the ``weights=`` column of
        :func:`~llm_connect.stats.estimate_quality`; ``df.attrs["weights"]`` names it).

        Returns
        -------
        DataFrame
            One row per item, the columns above.
        """
        self._refresh()
        items = self._items.frame
        labels = self._state.labels
        human = np.full(len(items), np.nan)
        n_labels = np.zeros(len(items), dtype=np.int64)
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).agg(
                ["mean", "size"])
            for key, mean, size in zip(per.index, per["mean"], per["size"], strict=True):
                human[self._items.index[key]] = mean
                n_labels[self._items.index[key]] = size
        done = np.array([k in self._state.plan_done for k in self._items.keys], dtype=bool)
        judge = items["judge_score"].to_numpy(dtype=float) if self.judge is not None else np.zeros(len(items))
        prediction = calibrated_scores(judge, human, bins=self.bins)[0] if self._queue.learned else judge
        out = pd.DataFrame({
            "item_id": items["item_id"].map(item_id_text), "adapter_id": items["adapter_id"],
            "model_id": items["model_id"], "group": items["group"],
            "stratum": [self.plan.stratum_names[s] for s in self.plan.stratum],
            "judge": judge, "prediction": prediction, "human": human, "n_labels": n_labels,
            "sampling_probability": self.plan.prob, "inclusion_probability": self.plan.inclusion(done),
        })
        out.attrs["weights"] = "inclusion_probability"
        return out

    def _weighted(self) -> bool:
        return self.strategy != "random"

    def estimate(self, by: str | Sequence[str] | None = None, **kwargs: Any) -> pd.DataFrame:
        """:func:`~llm_connect.stats.estimate_quality` on :meth:`frame` with the right weights:
        none for ``"random"``; ``inclusion_probability`` otherwise. ``by`` names columns of the frame
        (e.g. ``"model_id"``). Without a judge only the human-only interval is given. Other keyword
        arguments (``methods``, ``confidence``) go through.

        Parameters
        ----------
        by : str or sequence of str, optional
            Columns of the frame to estimate per group of (e.g. ``"model_id"``).
        **kwargs
            Passed to :func:`~llm_connect.stats.estimate_quality` (``methods``, ``confidence``).

        Returns
        -------
        DataFrame
            The estimates, as :func:`~llm_connect.stats.estimate_quality` gives them.
        """
        frame = self.frame()
        kwargs.setdefault("confidence", self.confidence)
        if self.judge is None:
            kwargs["methods"] = ("human",)
        else:
            kwargs.setdefault("methods", ("ppi++", "human", "judge"))
        weights = "inclusion_probability" if self._weighted() else None
        if self.strategy == "stratified" and by is not None and (by == "group" or by == ["group"]):
            weights = None  # within a group the labels are a simple random sample
        methods = kwargs.pop("methods")
        methods = (methods,) if isinstance(methods, str) else tuple(methods)
        if not self._queue.learned or methods == ("judge",):
            return estimate_quality(frame, judge="judge", human="human", by=by, weights=weights, methods=methods,
                                    **kwargs)
        # the learned rule: label-based methods on the calibrated judge, the judge's own mean on its scores
        label_based = [m for m in methods if m != "judge"]
        parts = [estimate_quality(frame, judge="prediction", human="human", by=by, weights=weights,
                                  methods=label_based, **kwargs)]
        if "judge" in methods:
            parts.append(estimate_quality(frame, judge="judge", human="human", by=by, weights=weights,
                                          methods=("judge",), **kwargs))
        out = pd.concat(parts, ignore_index=True)
        rank = {m: i for i, m in enumerate(methods)}
        by_cols = [] if by is None else ([by] if isinstance(by, str) else list(by))
        key = out["method"].map(rank)
        out = out.assign(_m=key).sort_values([*by_cols, "_m"], kind="stable").drop(columns="_m")
        return out.reset_index(drop=True)

    def agreement(self, threshold: float = 0.5) -> dict[str, Any]:
        """Inter-annotator agreement over items labelled by two or more annotators under this plan:
        ``n_items``, ``n_annotators``, ``percent_agreement`` (share of agreeing annotator pairs, verdicts
        at ``threshold``) and ``alpha`` (Krippendorff's alpha, nominal; Krippendorff 2011,
        *Computing Krippendorff's Alpha-Reliability*). NaN when no item has two annotators.

        Parameters
        ----------
        threshold : float, default 0.5
            The score at or above which a label is a "yes".

        Returns
        -------
        dict
            ``n_items``, ``n_annotators``, ``percent_agreement`` and ``alpha``.
        """
        self._refresh()
        labels = self._state.labels
        per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().reset_index()
        multi = per[per.groupby("key")["annotator"].transform("size") > 1]
        result: dict[str, Any] = {"n_items": int(multi["key"].nunique()) if len(multi) else 0,
                                  "n_annotators": int(per["annotator"].nunique()) if len(per) else 0,
                                  "percent_agreement": math.nan, "alpha": math.nan}
        if not len(multi):
            return result
        yes = (multi["score"] >= threshold).astype(float)
        counts = pd.DataFrame({"key": multi["key"], "yes": yes}).groupby("key")["yes"].agg(["sum", "size"])
        n, k = counts["size"].to_numpy(float), counts["sum"].to_numpy(float)
        pairs = n * (n - 1) / 2
        agree = (k * (k - 1) + (n - k) * (n - k - 1)) / 2
        result["percent_agreement"] = float(agree.sum() / pairs.sum())
        matrix = pd.DataFrame({"key": multi["key"], "annotator": multi["annotator"], "yes": yes}).pivot_table(
            index="annotator", columns="key", values="yes", aggfunc="first")
        values = matrix.to_numpy(dtype=float)
        if np.unique(values[np.isfinite(values)]).size >= 2:
            import krippendorff

            result["alpha"] = float(krippendorff.alpha(reliability_data=values, level_of_measurement="nominal"))
        elif np.isfinite(values).any():
            result["alpha"] = 1.0 if result["percent_agreement"] == 1.0 else math.nan
        return result

    # -- display -------------------------------------------------------------------------------

    def item_html(self) -> str:
        """The current item as HTML (every text escaped); the done message when all are done. Drawn by
        :func:`llm_connect.views.labeller_item_html`.

        Returns
        -------
        str
            The HTML.
        """
        return str(view("labeller_item_html")(self))

    def _repr_html_(self) -> str:
        return str(view("labeller_html")(self))

    def __repr__(self) -> str:
        return (f"Labeller(annotator={self.annotator!r}, task_type={self.task_type!r}, strategy={self.strategy!r}, "
                f"labelled={self.n_labelled}/{self.n_total})")

    # -- the widget ----------------------------------------------------------------------------

    def widget(self) -> Any:
        """The labelling widget (ipywidgets): the item, buttons Correct / Incorrect / Partial (with the
        score slider) / Skip / Undo / Show judge, a note, the progress line. Keyboard shortcuts with
        ``ipyevents`` installed (hover over the item): ``c`` correct, ``x`` incorrect, ``p`` partial,
        ``s`` skip, ``u`` undo, ``j`` show/hide the judge. CSS classes for scripts and tests: root
        ``llmc-labeller``; ``llmc-correct``, ``llmc-incorrect``, ``llmc-partial``, ``llmc-skip``,
        ``llmc-undo``, ``llmc-reveal``, ``llmc-partial-score``, ``llmc-note``, ``llmc-item``,
        ``llmc-progress``. The returned box has a ``controls`` attribute naming them. Drawn by
        :func:`llm_connect.views.labeller_widget`; it needs the ``notebooks`` extra (ipywidgets).

        Returns
        -------
        ipywidgets.VBox
            The widget, with its ``controls``.

        Raises
        ------
        MissingDependencyError
            Without ipywidgets.
        """
        return view("labeller_widget")(self)
