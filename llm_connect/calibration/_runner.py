"""Run several judges over one dataset into one tidy frame.

One row per item, in input order: the item's texts and id, the input's other columns (carried through), a
``score_<judge>`` column per judge (NaN when the judge's reply could not be scored or the call failed; never 0),
``status_<judge>``, ``notes_<judge>``, ``reply_<judge>`` (its raw reply) and ``judge_prompt_<judge>`` (the exact prompt
it sent), the human labels as ``score_human`` (and ``score_<annotator>``), answer length and format features, and the
candidate's model family.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import pandas as pd

from .._docstrings import share_parameters
from ..core import BudgetTracker, RunConfig, as_budget
from ..errors import ValidationError
from ..items import CONVERSATION_COLUMNS, ITEM_COLUMNS, items_frame, load_items
from ..runner import is_judge, run_budget
from ..stats.agreement import parse_scale
from ..stats.labels import parse_labels
from ..stats.style import text_features
from ._features import model_family

if TYPE_CHECKING:
    from ..grading import Judge
    from ..quality import BaseLedger

__all__ = ["REQUIRED_COLUMNS", "ItemsLike", "ScoredItems", "items_table", "judge_family", "lacks_text",
           "needs_reference", "parse_labels", "parse_scale", "score_items"]

REQUIRED_COLUMNS = ITEM_COLUMNS

#: What a calibration entry point takes as its items: a DataFrame, a path to a JSON Lines / CSV / TSV file
#: (:func:`~llm_connect.items.load_items`), or mappings (one per item).
ItemsLike: TypeAlias = "pd.DataFrame | str | os.PathLike[str] | Iterable[Mapping[str, Any]]"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

#: A judge named ``N`` has one column per prefix: ``score_N`` (NaN unless scored), ``status_N``
#: (``scored``/``unscored``/``error``, or ``abstained`` for a selective judge), ``notes_N`` (the judge's
#: notes, or why the row is not scored), ``reply_N`` (the judge's raw reply; empty for a judge that makes
#: no LLM call) and ``judge_prompt_N`` (the exact prompt it sent; empty likewise; not written to
#: scores.csv); a judge that reports a confidence (a selective judge's scorer, ``calibrate(...,
#: selective=...)``) also ``confidence_N``.
JUDGE_COLUMN_PREFIXES = ("score_", "status_", "notes_", "reply_", "judge_prompt_", "confidence_")
#: The item columns a calibration run reads itself; the input's other columns are carried through.
ITEM_FRAME_COLUMNS = ("id", *ITEM_COLUMNS, "candidate_model")


def judge_name(name: str) -> str:
    """A judge's name as it appears everywhere: its ``grader_id`` (or the name given), verbatim.

    The one rule for columns: a judge named ``N`` has the columns ``score_N``, ``status_N``, ``notes_N`` and ``reply_N``
    (``score_exact-match`` for ``ExactMatchJudge()``); see :data:`JUDGE_COLUMN_PREFIXES`. A name must be non-empty text
    without control characters.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"a judge name must be a non-empty string, got {name!r}")
    if _CONTROL.search(name):
        raise ValidationError(f"judge name {name!r} holds control characters")
    return name


def is_pairwise(judge: Any) -> bool:
    """A :class:`~llm_connect.grading.PairwiseJudge`, or any judge with a true ``pairwise`` attribute."""
    from ..grading import judge_abilities

    return judge_abilities(judge).pairwise


def judge_family(judge: Any) -> str | None:
    """The model family of an LLM judge (from its adapter's ``model_id``), else ``None``."""
    from ..grading import judge_abilities

    model = judge_abilities(judge).model_id
    return model_family(model) if model else None


def _missing(value: Any) -> bool:
    """True for a value that is not there: ``None``, NaN or ``pd.NA`` (a JSON null, a missing key)."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _text_or_none(value: Any) -> str | None:
    """The text a judge sees, or ``None`` when it is missing (the runner makes that row an error)."""
    return None if _missing(value) else str(value)


def _reply_or_none(value: Any) -> Any:
    """:func:`_text_or_none`, but a trajectory (a list of messages) stays a list."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return list(value)
    return _text_or_none(value)


def lacks_text(items: pd.DataFrame) -> pd.Series:
    """Per row: True when it cannot be judged for want of text.

    That is a missing (``None``/NaN: a JSON null or a missing key) ``prompt``, ``baseline`` or ``candidate``, or a blank
    ``baseline`` (no reference to compare with). Every judge reports such a row as an ``error`` with the reason; it is
    never scored (an empty answer against an empty reference is not a match). A blank *candidate* against a real
    reference is an (empty) answer and is judged.
    """
    mask = pd.Series(False, index=items.index)
    for c in REQUIRED_COLUMNS:
        if c not in items.columns:
            return pd.Series(True, index=items.index)
        mask |= items[c].map(_missing).astype(bool)
    blank = items["baseline"].map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
    return mask | blank


#: Other names the calibration inputs accept for an item column: a ``reference`` column is the
#: ``baseline`` when there is no ``baseline`` (the explicit rename of :func:`items_table`).
COLUMN_ALIASES = {"reference": "baseline"}


def items_table(items: ItemsLike, *, baseline: bool = True) -> pd.DataFrame:
    """The items of a calibration run as a frame indexed 0..n-1, ``reference`` taken as ``baseline``.

    The runner's item-frame builder (:func:`llm_connect.items.items_frame`) with :data:`COLUMN_ALIASES`; a missing
    ``prompt``, ``baseline`` or ``candidate`` column is a :class:`~llm_connect.errors.ValidationError` naming it. A path
    (``str`` or ``os.PathLike``) is read with :func:`~llm_connect.items.load_items`. ``baseline=False`` (every judge of
    the run is shown no reference, such as an ``LLMJudge`` whose rubric has ``reference=False``): the items need no
    ``baseline`` column; without one it is added, empty (``None``).
    """
    if isinstance(items, (str, os.PathLike)):
        items = load_items(items, items=False)
    frame = items_frame(items, ("candidate",), aliases=COLUMN_ALIASES)
    # conversation items: the question may be the last user message; a reference-free run needs no baseline
    required = tuple(c for c in REQUIRED_COLUMNS if (c != "baseline" or baseline)
                     and (c != "prompt" or "messages" not in frame.columns))
    frame = items_frame(frame, required).reset_index(drop=True)
    if "baseline" not in frame.columns:
        frame["baseline"] = None
    return frame


def needs_reference(judges: Iterable[Any]) -> bool:
    """Whether any of ``judges`` compares with a reference (the items then need a ``baseline`` column)."""
    from ..grading import judge_abilities

    return any(judge_abilities(j).needs_reference for j in judges)


def _passthrough_names(columns: Sequence[Any]) -> dict[Any, str]:
    """The input's other columns -> their names in the scored frame: as they are, unless the name is one the frame uses
    itself (an item column, a feature) or looks like a judge's column, which gets an ``input_`` prefix (so a column
    ``score_x`` in the data is never mistaken for a judge)."""
    reserved = {*ITEM_FRAME_COLUMNS, "model_family", *text_features([], []).columns}
    out: dict[Any, str] = {}
    for column in columns:
        name = str(column)
        while name in reserved or name.startswith(JUDGE_COLUMN_PREFIXES) or name in out.values():
            name = "input_" + name
        out[column] = name
    return out


def _human_targets(human: str | Sequence[str] | None) -> list[tuple[str, str]]:
    """The human label columns as ``(column, name)``: one column is named ``human``; several (rating dimensions) keep
    their own names."""
    if human is None:
        return []
    columns = [human] if isinstance(human, str) else list(human)
    if len(columns) == 1:
        return [(columns[0], "human")]
    return [(c, judge_name(str(c))) for c in columns]


def _baseline_for(judge: Any, baselines: pd.Series, reference_sep: str | None) -> pd.Series:
    """The baseline text a judge sees. Judges that split references themselves (they declare ``splits_references``; see
    :func:`~llm_connect.grading.judge_abilities`) get it as is; others get one reference per line."""
    from ..grading import judge_abilities, split_references

    if not reference_sep or judge_abilities(judge).splits_references:
        return baselines

    return baselines.map(lambda b: None if _missing(b) else "\n".join(split_references(str(b), reference_sep)))


def _judge_items(judge: Judge, items: pd.DataFrame, *, reference_sep: str | None = None, concurrency: int = 16,
                 progress: bool = True, run_config: RunConfig | None = None,
                 ledger: BaseLedger | str | os.PathLike[str] | None = None, task_type: str | None = None,
                 desc: str | None = None, epochs: int = 1, reducer: Any = "mean",
                 budget: BudgetTracker | float | None = None, batch: Any = False,
                 warn_failure: bool = True) -> pd.DataFrame:
    """Calibration's one run of a judge: ``judge_many`` over ``items`` (with the baseline prepared for this judge; users
    call :func:`~llm_connect.grading.judge_many` or :func:`score_items`); its result frame, with the judge's raw reply
    in ``raw_reply`` (see :func:`~llm_connect.grading._judge_many.judge_plan`). Its progress bar says ``desc`` (default
    ``"grading: <grader_id>"``). ``epochs``/``reducer``: repeated judging as ``judge_many`` does it (the reduced score
    per row; the run-to-run reliability in ``attrs["reliability"]``).

    With ``ledger`` and ``task_type`` every scored row is recorded as ``judge_many(..., ledger=...)`` records it (grader
    id, rubric hash, item id, cost).

    ``budget``: the run budget, as ``judge_many(..., budget=...)`` takes it (a :class:`~llm_connect.BudgetTracker`, or a
    limit in USD; by default ``run_config.budget_tracker``): every paid call of the judge is reserved on it, and once it
    is spent the rows not attempted are ``error`` rows saying "budget exhausted". Pass one tracker to several calls to
    share one limit.

    ``batch``: the providers' Batch APIs, as ``judge_many(..., batch=...)`` takes it (see
    :func:`~llm_connect.grading.judge_many`): ``True``, a state folder or :class:`~llm_connect.adapters.BatchOptions`.

    ``warn_failure``: log a warning when no row was scored (as ``judge_many`` does); a caller that refuses such a run
    itself turns it off.

    A missing (``None``/NaN) ``prompt``, ``baseline`` or ``candidate`` is passed on as ``None``, never as ``""``: the
    runner makes that row an ``error`` row saying which text is missing, as it does for a blank baseline (an empty
    answer against an empty reference is not a match). See :func:`lacks_text`.
    """
    from ..grading._batch_api import provider_batch_plan
    from ..grading._judge_many import judge_plan
    from ..runner import run_plan

    # the texts, and what a conversation item adds (its messages, documents, conversation and turn)
    columns = [c for c in ("prompt", "baseline", "candidate", "candidate_model", "id", *CONVERSATION_COLUMNS,
                           "context") if c in items.columns]
    frame = items[columns].copy()
    if "baseline" in frame.columns:
        frame["baseline"] = _baseline_for(judge, frame["baseline"], reference_sep)
    for c in ("prompt", "baseline", "candidate"):
        if c in frame.columns:
            frame[c] = frame[c].map(_reply_or_none).astype(object)
    label = desc or f"grading: {getattr(judge, 'grader_id', 'judge')}"
    plan = judge_plan(judge, frame, run_config=run_config, ledger=open_ledger_of(ledger), task_type=task_type,
                      replies=True, desc=label, epochs=epochs, reducer=reducer, budget=budget,
                      warn_failure=warn_failure)
    plan, concurrency = provider_batch_plan(plan, batch, ledger=open_ledger_of(ledger),
                                            concurrency=concurrency, progress=progress)
    return run_plan(plan, concurrency=concurrency, progress=progress)


def judge_batch_state(batch: Any, ledger: BaseLedger | None, name: str) -> Any:
    """One judge's ``batch=`` within a run of several judges: each judge keeps its own state folder (``<state>/<slug of
    its name>-<hash of its name>``, see :func:`~llm_connect.adapters._batches.state_subfolder`: always inside
    ``<state>``, whatever the name), so a killed run resumes every judge's submitted batches, none twice."""
    from ..adapters._batches import BatchOptions, batch_options, state_subfolder

    options = batch_options(batch, ledger)
    if options is None or options.state_dir is None:
        return options if options is not None else False
    root = options.state_root if options.state_root is not None else options.state_dir
    return BatchOptions(**{**options.__dict__, "state_dir": state_subfolder(options.state_dir, name),
                           "state_root": Path(root)})


def open_ledger_of(ledger: BaseLedger | str | os.PathLike[str] | None) -> BaseLedger | None:
    """``ledger`` as a ledger: a path (``str`` or ``os.PathLike``) opened with :func:`~llm_connect.quality.open_ledger`
    (a JSON Lines file, or a Parquet directory / URI), a ledger (or ``None``) as it is."""
    if isinstance(ledger, (str, os.PathLike)):
        from ..quality import open_ledger

        return open_ledger(ledger)
    return ledger


def _rubric_hash(judge: Any) -> str | None:
    from ..grading import judge_abilities

    return judge_abilities(judge).rubric_hash


def _named_judges(judges: Judge | Mapping[str, Judge] | Sequence[Judge]) -> dict[str, Any]:
    """``{name: judge}`` from one judge, a mapping or a sequence of judges (named by ``grader_id``).

    Items where the judges belong (a DataFrame, a path, or mappings) are a :class:`ValidationError` saying the order:
    the judges come first, as in ``judge_many(judge, items)``.
    """
    if isinstance(judges, (str, os.PathLike, pd.DataFrame)) or (
            isinstance(judges, (list, tuple)) and judges and all(isinstance(j, Mapping) for j in judges)):
        raise ValidationError(f"got items ({type(judges).__name__}) where the judges go: pass the judges first, "
                              "then the items, as in calibrate(judges, items) and judge_many(judge, items)")
    if isinstance(judges, Mapping):
        named = {judge_name(k): j for k, j in judges.items()}
    elif is_judge(judges):  # one judge
        return _named_judges([cast("Judge", judges)])
    else:
        judges = cast("Sequence[Judge]", judges)
        named = {}
        for j in judges:
            gid = getattr(j, "grader_id", None)
            if not gid:
                raise ValidationError(f"{j!r} is not a judge (no grader_id); pass judges as {{name: judge}}")
            named[judge_name(gid)] = j
        if len(named) != len(list(judges)):
            raise ValidationError("two judges share a grader_id; pass them as a mapping {name: judge}")
    for name, j in named.items():
        if not callable(getattr(j, "judge", None)):
            raise ValidationError(f"judge {name!r} has no judge(baseline, candidate, ...) method")
    return named


@dataclass
class ScoredItems:
    """What scoring hands to the next stages (agreement, probes, cards, report): the frame of :func:`score_items` and
    what the frame cannot hold, as fields, never in ``DataFrame.attrs`` (which many pandas operations drop).
    ``ScoredItems.from_frame(score_items(judges, items))`` builds it from a scored frame.

    Parameters
    ----------
    frame : pandas.DataFrame
        The scores frame, one row per item (see :func:`score_items`).
    judges : list of str, optional
        The machine judges' names.
    labels : list of str, optional
        The label columns scored as judges (``human`` and the annotators).
    passthrough : list of str, optional
        The input's other columns, carried into the frame (a name that would clash with a column of the frame gets an
        ``input_`` prefix).
    human : str, optional
        The people's label column, if any.
    annotators : list of str, optional
        The independent annotators' columns.
    grader_ids, rubric_hashes, judge_families, pairwise : dict, optional
        Per judge name: its ``grader_id``, its rubric's hash, its model family and whether it is pairwise.
    usage : dict of str to dict, optional
        Per judge: rows scored / unscored / error, ``judge_cost_usd``, tokens and, with a ledger, ``ledger_recorded``
        and ``ledger_already`` (judgments recorded, and judgments the ledger held already).
    reference_sep : str, optional
        The separator of several references in ``baseline``.
    epochs : int, default 1
        How many times each item was judged.
    reliability : dict of str to dict, optional
        For a run in epochs (``epochs > 1``), each judge's run-to-run reliability
        (:meth:`~llm_connect.grading.EpochReliability.to_dict`), which its judge card carries.
    budget : dict, optional
        The run budget's state once every judge had run (``limit_usd``, ``spent_usd``, ``calls``...:
        :meth:`~llm_connect.BudgetTracker.snapshot`); ``None`` when the run had no budget.
    pass_distributions : dict of str to list, optional
        Per selective judge's scorer (``calibrate(..., selective=...)``), each row's verdict distribution, from which
        the confidence is read again at a threshold chosen later (``"best"``).
    by_definition : dict of str to dict, optional
        Per judge, the probe effects it has by its own definition (probe -> why, e.g. exact match's), which its card
        says as such.
    """

    frame: pd.DataFrame
    judges: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    passthrough: list[str] = field(default_factory=list)
    human: str | None = None
    annotators: list[str] = field(default_factory=list)
    grader_ids: dict[str, str] = field(default_factory=dict)
    rubric_hashes: dict[str, str | None] = field(default_factory=dict)
    judge_families: dict[str, str | None] = field(default_factory=dict)
    pairwise: dict[str, bool] = field(default_factory=dict)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference_sep: str | None = None
    epochs: int = 1
    reliability: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget: dict[str, Any] | None = None
    pass_distributions: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    by_definition: dict[str, dict[str, str]] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """Every field but the frame and the per-row ``pass_distributions``.

        Returns
        -------
        dict of str to object
            By field name: what :func:`score_items` also mirrors in the frame's ``attrs``.
        """
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("frame", "pass_distributions")}

    def to_frame(self) -> pd.DataFrame:
        """The frame, with the metadata mirrored in its ``attrs`` for users who read them there.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`frame`, its ``attrs`` updated with :meth:`metadata`.
        """
        out = self.frame.copy()
        out.attrs.update(self.metadata())
        return out

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> ScoredItems:
        """A scored frame from :func:`score_items` (or built by hand) as :class:`ScoredItems`.

        The one reader of the ``attrs`` mirror, at the edge.

        Parameters
        ----------
        frame : pandas.DataFrame
            The frame; its ``attrs`` give the fields (``None`` values dropped but for ``human``, ``reference_sep`` and
            ``budget``).

        Returns
        -------
        ScoredItems
            With the frame itself; the judges default to the ``score_<name>`` columns that are not labels.
        """
        meta = {f.name: frame.attrs[f.name] for f in fields(cls)
                if f.name not in ("frame", "pass_distributions") and f.name in frame.attrs}
        if "judges" not in meta:
            labels = set(meta.get("labels") or ())
            meta["judges"] = [c[len("score_"):] for c in frame.columns
                              if isinstance(c, str) and c.startswith("score_") and c[len("score_"):] not in labels]
        optional = ("human", "reference_sep", "budget")  # the fields that may be None
        return cls(frame=frame, **{k: v for k, v in meta.items() if v is not None or k in optional})


@share_parameters
def score_items(judges: Judge | Mapping[str, Judge] | Sequence[Judge], items: ItemsLike, *,
                human: str | Sequence[str] | None = None, annotators: Sequence[str] = (),
                reference_sep: str | None = None, concurrency: int = 16, progress: bool = True,
                run_config: RunConfig | None = None, ledger: BaseLedger | str | os.PathLike[str] | None = None,
                task_type: str | None = None, scale: Any = None, epochs: int = 1, reducer: Any = "mean",
                budget: BudgetTracker | float | None = None, batch: Any = False) -> pd.DataFrame:
    """Every judge's score for every item, with labels and features, one row per item in order.

    Several judges into one wide frame (a ``score_<judge>`` column each), what calibration's stages read. To run one
    judge over items call :func:`~llm_connect.grading.judge_many` (one row per item, the judge's result columns); to
    generate the answers first, :func:`~llm_connect.grading.grade_many`. With ``ledger`` and ``task_type``, every scored
    judgment is recorded through :func:`~llm_connect.grading.judge_many` (the candidate's model as its adapter, the
    item's ``id`` as ``tags["item_id"]``). With ``batch``, each judge keeps its own state folder, so the same call
    resumes a killed run without submitting anything twice.

    Parameters
    ----------
    judges : Judge or mapping of str to Judge or sequence of Judge
        A judge, a mapping ``{name: judge}`` or judges (named by ``grader_id``).
    items : DataFrame or iterable of mapping or str or os.PathLike
        A DataFrame, mappings, or the path of a JSON Lines / CSV / TSV file (:func:`~llm_connect.items.load_items`) with
        ``prompt``, ``baseline`` (the reference; several separated by ``reference_sep``; a ``reference`` column is taken
        when there is no ``baseline``) and ``candidate``; optional ``id``, ``candidate_model`` and label columns.
    human : str or sequence of str, optional
        The column holding the human verdict (booleans, yes/no or 0..1), scored as judge ``human``. It may name several
        columns (rating dimensions such as ``["coherence", "relevance"]``): each is a label scored under its own name, a
        separate target (not an annotator); one column is scored as ``human``.
    annotators : sequence of str, default ()
        Columns of individual annotators, scored as judges of the same name, whose agreement with each other is the
        ceiling.
    reference_sep : str, optional
        The separator of several references in ``baseline``.
    {concurrency}
    {progress}
    {run_config}
    {ledger}
    {task_type}
    scale : tuple of (float, float), optional
        ``(low, high)``: the label columns hold ratings on that scale (:func:`parse_labels`).
    {epochs}
    {reducer}
    {budget}
    {batch}

    Returns
    -------
    DataFrame
        Columns ``id``, ``prompt``, ``baseline``, ``candidate``, ``candidate_model``, ``model_family``, the input's
        other columns (e.g. a group such as ``topic``; not the label columns, which become ``score_<name>``; one whose
        name the frame uses itself, or that starts with ``score_``, ``status_``, ``notes_`` or ``reply_``, is carried as
        ``input_<name>``), ``score_<judge>`` / ``status_<judge>`` / ``notes_<judge>`` / ``reply_<judge>`` /
        ``judge_prompt_<judge>`` (the exact prompt it sent) per judge (the rule of :func:`judge_name`), ``score_human``
        and ``score_<annotator>``, and the features of :func:`~llm_connect.stats.text_features`. ``attrs`` mirrors, for
        reading by hand, the judge names, each judge's ``grader_id``, rubric hash and model family, and each judge's
        usage; :meth:`ScoredItems.from_frame` reads them back as a :class:`ScoredItems` (what
        :func:`~llm_connect.calibration.calibrate` hands to its stages). With ``epochs=k``, each ``score_<judge>`` is
        the reduced score and ``attrs["reliability"]`` holds each judge's run-to-run reliability (percent agreement and
        Krippendorff's alpha across the epochs). Rows not attempted for lack of budget are ``error`` rows
        (``status_<judge>``) saying "budget exhausted", their scores NaN; ``attrs["budget"]`` holds the budget's state
        at the end (as ``judge_many``'s).

    See Also
    --------
    calibrate : Scores, agreement and bias probes in one call.
    llm_connect.grading.judge_many : One judge over items.
    """
    return _score_items(judges, items, human=human, annotators=annotators, reference_sep=reference_sep,
                        concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                        task_type=task_type, scale=scale, epochs=epochs, reducer=reducer, budget=budget,
                        batch=batch).to_frame()


def _score_items(judges: Judge | Mapping[str, Judge] | Sequence[Judge], items: ItemsLike, *,
                 human: str | Sequence[str] | None = None, annotators: Sequence[str] = (),
                 reference_sep: str | None = None, concurrency: int = 16, progress: bool = True,
                 run_config: RunConfig | None = None, ledger: BaseLedger | str | os.PathLike[str] | None = None,
                 task_type: str | None = None, scale: Any = None, epochs: int = 1, reducer: Any = "mean",
                 budget: BudgetTracker | float | None = None, batch: Any = False,
                 refuse_failure: bool = False) -> ScoredItems:
    """:func:`score_items` as :class:`ScoredItems`: the frame and its metadata as fields (what
    :func:`~llm_connect.calibration.calibrate` passes on); the one implementation behind both. ``reliability`` holds
    each judge's run-to-run reliability (``epochs > 1``). ``refuse_failure`` (``calibrate``'s): a judge that scored no
    item for a reason of its own raises :class:`~llm_connect.errors.JudgeFailedError` with its first error, before the
    next judge runs."""
    from .._options import check_run_options
    from ..grading._judge_many import refuse_total_failure

    check_run_options(epochs=epochs, reducer=reducer)  # a bad value: an error before any judge runs
    k = epochs
    named = _named_judges(judges)
    frame = items_table(items, baseline=needs_reference(named.values()))
    n = len(frame)
    out = pd.DataFrame(index=range(n))
    out["id"] = frame["id"].tolist() if "id" in frame.columns else list(range(n))
    for c in REQUIRED_COLUMNS:
        if c in frame.columns:
            out[c] = frame[c].tolist()
        elif c == "prompt":  # a conversation item's question: its last user message
            from ..grading._judge_many import item_messages, item_prompt

            out[c] = [item_prompt(r, item_messages(r)) for r in frame.to_dict("records")]
        else:  # no baseline: for judges that need no reference
            out[c] = [None] * n
    out["candidate_model"] = frame["candidate_model"].tolist() if "candidate_model" in frame.columns else [None] * n
    out["model_family"] = [model_family(m) for m in out["candidate_model"]]
    targets = _human_targets(human)
    label_columns = {c for c, _ in targets} | set(annotators)
    passthrough = _passthrough_names([
        c for c in frame.columns if c not in ITEM_FRAME_COLUMNS and c not in label_columns])
    for source, name in passthrough.items():
        out[name] = frame[source].tolist()

    label_names: list[str] = []
    labels: dict[str, np.ndarray] = {}
    for column, name in [*targets, *[(a, judge_name(a)) for a in annotators]]:
        if column is None:
            continue
        if column not in frame.columns:
            raise ValidationError(
                f"no label column {column!r} in the data; it has {', '.join(map(str, frame.columns))}")
        if name in named or name in labels:
            raise ValidationError(f"the name {name!r} is used twice (a judge and a label column)")
        labels[name] = parse_labels(frame[column].tolist(), column=str(column), scale=scale)
        label_names.append(name)

    usage: dict[str, dict[str, Any]] = {}
    reliability: dict[str, dict[str, Any]] = {}
    distributions: dict[str, list[Any]] = {}
    tracker = as_budget(budget)  # one budget for every judge (a limit in USD becomes one tracker)
    ledger = open_ledger_of(ledger)  # a path: opened once, for every judge
    provider = batch  # the Batch API switch (the loop below names each judge's frame ``batch``)
    for name, judge in named.items():
        batch = _judge_items(judge, frame, reference_sep=reference_sep, concurrency=concurrency,
                            progress=progress, run_config=run_config, ledger=ledger, task_type=task_type,
                            epochs=k, reducer=reducer, budget=tracker,
                            batch=judge_batch_state(provider, ledger, name), warn_failure=not refuse_failure)
        if refuse_failure:
            refuse_total_failure(batch, name, what="calibrate")
        if k > 1:
            reliability[name] = dict(batch.attrs["reliability"])
        scores = pd.to_numeric(batch["quality_score"], errors="coerce").to_numpy(dtype=float)
        status = batch["status"].tolist()
        scores = np.where(np.asarray(status) == "scored", scores, np.nan)
        out[f"score_{name}"] = scores
        out[f"status_{name}"] = status
        out[f"notes_{name}"] = [
            (e if s != "scored" else nt) for s, e, nt in zip(status, batch["error"], batch["notes"], strict=True)
        ]
        out[f"reply_{name}"] = batch["raw_reply"].tolist()
        out[f"judge_prompt_{name}"] = batch["judge_prompt"].tolist()  # the exact prompt it sent (the viewer's)
        if "confidence" in batch.columns:  # a selective judge's confidence (calibrate(..., selective=...))
            out[f"confidence_{name}"] = pd.to_numeric(batch["confidence"], errors="coerce").to_numpy(dtype=float)
        if "pass_distribution" in batch.columns:  # ...and what it is read from at another threshold
            distributions[name] = batch["pass_distribution"].tolist()
        usage[name] = {
            "scored": int((np.asarray(status) == "scored").sum()),
            "unscored": int((np.asarray(status) == "unscored").sum()),
            "abstained": int((np.asarray(status) == "abstained").sum()),
            "error": int((np.asarray(status) == "error").sum()),
            "judge_cost_usd": float(pd.to_numeric(batch["judge_cost_usd"], errors="coerce").fillna(0).sum()),
            "judge_tokens_in": int(batch["judge_tokens_in"].sum()),
            "judge_tokens_out": int(batch["judge_tokens_out"].sum()),
        }
        if "ledger" in batch.attrs:  # recorded once: judgments the ledger held already were not recorded again
            usage[name]["ledger_recorded"] = int(batch.attrs["ledger"]["recorded"])
            usage[name]["ledger_already"] = int(batch.attrs["ledger"]["already"])
    for name in label_names:
        out[f"score_{name}"] = labels[name]
    spent = run_budget(tracker, run_config)  # the budget every judge's batch ran on, if any

    features = text_features(out["candidate"], out["baseline"])
    out = pd.concat([out, features], axis=1)
    return ScoredItems(
        frame=out,
        judges=list(named),
        labels=label_names,
        passthrough=list(passthrough.values()),
        human=targets[0][1] if targets else None,
        annotators=[judge_name(a) for a in annotators],
        grader_ids={k: str(j.grader_id) for k, j in named.items()},
        rubric_hashes={k: _rubric_hash(j) for k, j in named.items()},
        judge_families={k: judge_family(j) for k, j in named.items()},
        pairwise={k: is_pairwise(j) for k, j in named.items()},
        usage=usage,
        reference_sep=reference_sep,
        epochs=k,
        reliability=reliability,
        budget=spent.snapshot() if spent is not None else None,
        pass_distributions=distributions,
        by_definition={k: {str(p): str(w) for p, w in (getattr(j, "by_definition", None) or {}).items()}
                       for k, j in named.items() if getattr(j, "by_definition", None)},
    )
