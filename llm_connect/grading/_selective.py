"""Selective judges: a verdict only when the judge is sure enough, with a guaranteed agreement with people
(Jung, Brahman & Choi, ICLR 2025).

A :class:`SelectiveJudge` wraps a judge with a *confidence* in each of its verdicts and a cut-off
chosen on labelled items so that, on fresh items from the same distribution, the judge agrees with
people on the items it judges at least ``1 − alpha`` of the time, with probability at least
``1 − delta`` (Jung, Brahman & Choi, *Trust or Escalate: LLM Judges with Provable Guarantees for
Human Agreement*, ICLR 2025, arXiv:2407.18370). Below the cut-off it *abstains*: the item gets no
score (``status="abstained"`` in a batch, never 0), and a cascade (:func:`~llm_connect.grading.cascade`) passes it to
the next, stronger judge, or to people. The statistics (the exact binomial bound, fixed-sequence
testing, the risk-coverage curve) are :mod:`llm_connect.stats.selective`'s; this module runs the
judges.

How sure the judge is (``confidence=``: ``"logprob"``, ``"panel"``, ``"epochs"``, ``"margin"``, a
callable or ``"auto"``) is :mod:`llm_connect.grading._confidence`'s; cascades of selective judges are
:mod:`llm_connect.grading._selective_cascade`'s.

Calibration and the guarantee
-----------------------------
:meth:`SelectiveJudge.calibrate` judges the labelled rows (``human=`` names the label column:
booleans, yes/no or 0..1), marks each verdict (score ``>= threshold``) as agreeing with people's
(label ``>= threshold``) or not, and chooses the cut-off by fixed-sequence testing with exact
binomial bounds (:func:`llm_connect.stats.selective.fixed_sequence_cutoff`). It returns a copy
with ``cutoff``, ``coverage`` (share of calibration items it judges), ``agreement`` (its empirical
agreement there), ``guaranteed_agreement`` (``1 − alpha``) and ``delta``: ``alpha``, ``delta``, ``cutoff`` and
``coverage`` are one frozen :class:`~llm_connect.stats.selective.Guarantee` (:attr:`SelectiveJudge.guarantee`,
the calibration's own), which every other number of the guarantee is read from. Too few labelled items
for ``alpha`` and ``delta`` is an error naming how many are needed. The rows the judge could not
score (unscored, errors) and unlabelled rows are left out of the calibration; on fresh data an
unscored row stays *unscored*, so the guarantee is about the rows the judge scores and keeps.

Abstentions and the ledger
--------------------------
An abstention raises :class:`~llm_connect.errors.JudgeAbstained` from ``judge()`` (a
:class:`~llm_connect.errors.JudgeReplyError`, so a panel member that abstains is left out and the
fixed-band :class:`~llm_connect.grading.EscalationJudge` escalates). In ``judge_many`` (and
``grade_dataset``) the row is ``abstained``: ``quality_score`` NaN, ``confidence`` set, ``notes``
saying why, its cost counted, and ``df.attrs["counts"]["abstained"]``. An abstained row is **not
recorded in a ledger**: the ledger holds quality observations, and an abstention observes none;
so nothing the ledger feeds (mean quality, routing, estimates, ``ledger stats``) ever reads one.
The abstained rows are the ones to give people: ``Labeller(frame, ..., strategy="abstained")``.

A scored row is recorded under the selective judge's own identity: its ``grader_id`` (the inner
judge's by default) and its own :attr:`SelectiveJudge.rubric_hash` (a hash of the inner judge's
identity, the confidence, the threshold, ``alpha``, ``delta`` and the cut-off). ``grade_dataset``
resumes by grader id and rubric hash, so it never reads an item back from the plain judge's records
(nor from a judge with another cut-off), and the ledger never pools the selective judge's confident
subset with the plain judge's observations. A cascade records every row under its own
:attr:`~llm_connect.grading.SelectiveCascade.rubric_hash`, whichever stage decided. A selective judge or cascade is
never judged ``k`` times by ``judge_many(..., epochs=k)`` (an error: calibrate one with
``epochs=k`` instead).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._display import view
from .._docstrings import JUDGE_TEXTS, share_parameters
from .._options import check_run_options
from ..core import BudgetTracker, LLMResponse, RunConfig
from ..errors import JudgeAbstained, JudgeReplyError, UncalibratedJudgeError, ValidationError
from ..stats.selective import Guarantee, Guaranteed, SelectiveCutoff, check_level, min_items
from ._base import (
    GradingResult,
    Judge,
    _declared,
    acall_judge,
    judge_result_columns,
    validate_grader_id,
    validate_score,
)
from ._confidence import (
    CONFIDENCE_SOURCES,
    PASS_DISTRIBUTION,
    _label_values,
    _margin,
    _member_distribution,
    _mixture,
    _on_verdict,
    confidence_sources,
    pass_distribution,
    pass_mass,
)
from ._confidence_judge import ConfidenceJudge, _digest, _judge_identity
from ._epochs import epoch_run_config, reduce_scores, reducer_of, reseed
from ._judge_many import raw_reply_of
from ._panel import PanelJudge
from ._selective_calibration import calibrate_selective
from ._wrapper import WrapperJudge, _bound, _holding, _spent, _sum_usage

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SelectiveJudge"]


def _usage_response(parts: Sequence[Any], adapter_id: str, reply: str | None) -> LLMResponse:
    """A stand-in response with the summed usage (and the raw reply, for audit) of an abstained or unscored row."""
    return LLMResponse(content=reply or "", adapter_id=adapter_id, model_id="selective",
                       **_sum_usage([p for p in parts if p is not None]))


def _guarantee_of(alpha: float, delta: float, cutoff: float | None,
                  calibration: SelectiveCutoff | None) -> Guarantee:
    """The one guarantee of a selective judge: its calibration's (which must be at ``alpha``, ``delta`` and, when
    given, ``cutoff``), else ``alpha``, ``delta`` and a cut-off set by hand (or none yet)."""
    if calibration is None:
        return Guarantee(alpha, delta, cutoff)
    if not isinstance(calibration, SelectiveCutoff):
        raise ValidationError(f"calibration must be a SelectiveCutoff (from calibrate()), got {calibration!r}")
    made = calibration.guarantee
    a, d = check_level(alpha, "alpha"), check_level(delta, "delta")
    if (a, d) != (made.alpha, made.delta) or (cutoff is not None and float(cutoff) != made.cutoff):
        asked = f"alpha={a:g}, delta={d:g}" + (f", cutoff={float(cutoff):.4g}" if cutoff is not None else "")
        raise ValidationError(f"calibration= was made at alpha={made.alpha:g}, delta={made.delta:g} with the cut-off "
                              f"{made.cutoff:.4g}, not at {asked}: calibrate again at the new level (or drop "
                              "calibration= to set a cut-off by hand, with no guarantee claimed)")
    return made


# -- the selective judge ---------------------------------------------------------------------------


@dataclass(init=False)
class SelectiveJudge(WrapperJudge, Guaranteed):
    """A judge that gives a verdict only when it is sure enough, with a guaranteed agreement with people.

    ``SelectiveJudge(judge, *, confidence="auto", alpha=0.1, delta=0.1, threshold=0.5)``; see the
    module docstring for ``confidence`` and the guarantee (Jung, Brahman & Choi, ICLR 2025,
    arXiv:2407.18370). ``calibrate(data, human=COLUMN)`` returns the calibrated judge; before
    that, ``judge()`` raises :class:`~llm_connect.errors.UncalibratedJudgeError` (use
    :attr:`scorer` to see confidences without a cut-off). A calibrated judge returns the inner
    judge's result (its ``details`` gain ``confidence``) when the confidence reaches ``cutoff``
    and raises :class:`~llm_connect.errors.JudgeAbstained` otherwise: an ``abstained`` row in
    ``judge_many`` and ``grade_dataset``, which take it unchanged.

    Keyword options: ``grader_id`` (default: the judge's), ``epochs`` (``K``: each item is judged
    ``K`` times, reseeded as ``judge_many(..., epochs=K)`` does, and ``reducer`` — ``"mean"`` by
    default, or any of :data:`~llm_connect.grading.REDUCERS` — reduces their scores to the verdict's;
    the confidence is read from the ``K`` judgments pooled: ``"epochs"`` and ``"logprob"`` the weight
    of their verdict distributions on the verdict, ``"panel"`` the same over every member's,
    ``"margin"`` the reduced score's margin, a callable the pooled result; ``"epochs"`` without
    ``epochs=`` judges 5 times), ``panel`` (judges for ``"panel"``, beside the judge itself),
    ``panel_size`` (rubric versions for ``"panel"`` from an ``LLMJudge``'s worked examples, default 5);
    ``cutoff`` restores a judge calibrated before (no guarantee is claimed for a cut-off set by
    hand: :attr:`calibration` is then ``None``). The wrapped judge is :attr:`inner`;
    :meth:`replace` makes a changed copy.

    ``alpha``, ``delta``, ``cutoff``, ``coverage``, ``guaranteed_agreement`` and ``confidence_level``
    are read from one frozen value, :attr:`guarantee` (a
    :class:`~llm_connect.stats.selective.Guarantee`; once calibrated, its :attr:`calibration`'s
    own), never kept twice.

    Its identity in a ledger is its own, never its inner judge's: the same ``grader_id`` (by
    default), but a :attr:`rubric_hash` covering the inner judge's, the confidence, the threshold,
    ``alpha``, ``delta`` and the cut-off. So a rerun of ``grade_dataset`` resumes only the items
    this very judge scored (an item it abstains on is never read back from the plain judge's
    records), and its records, a confident subset, are never pooled with the plain judge's.

    Parameters
    ----------
    judge : Judge
        The plain judge wrapped (not another selective judge or cascade): :attr:`inner`.
    confidence : {"auto", "logprob", "panel", "epochs", "margin"} or callable, default "auto"
        Where the confidence comes from (see the module docstring); a callable takes the
        :class:`GradingResult` and returns a number or ``None``.
    alpha : float, default 0.1
        The most disagreement with people the guarantee allows on the judged items.
    delta : float, default 0.1
        The chance that the guarantee fails, over the calibration items.
    threshold : float, default 0.5
        The score at or above which a verdict is a pass.
    grader_id : str, default ""
        The judge's id; ``""``: the judge's.
    epochs : int, optional
        ``K >= 2`` judgments per item (above).
    panel : sequence of Judge, default ()
        Judges for ``"panel"``, beside the judge itself.
    panel_size : int, default 5
        Rubric versions for ``"panel"`` from an ``LLMJudge``'s worked examples (>= 2).
    cutoff : float, optional
        Restores a judge calibrated before (no guarantee is claimed for a cut-off set by hand).
    calibration : SelectiveCutoff, optional
        What calibration chose (set by :meth:`calibrate`).
    seed : int, default 0
        Seeds the rubric versions of a ``"panel"`` (set by :meth:`calibrate`).
    reducer : str or callable, default "mean"
        How the ``epochs`` judgments' scores reduce to one (:data:`~llm_connect.grading.REDUCERS`).

    Attributes
    ----------
    guarantee : Guarantee
        ``alpha``, ``delta``, ``cutoff``, ``coverage``, ``guaranteed_agreement`` and ``confidence_level``.
    inner : Judge
        The wrapped judge.
    scorer : ConfidenceJudge
        The judge without its cut-off: every item judged, with its confidence.

    Raises
    ------
    ValidationError
        A wrapped object that is not a plain judge, ``epochs`` or ``panel_size`` below 2, a panel of
        non-judges, or a ``confidence`` the judge cannot give (the message says which it can).

    See Also
    --------
    cascade : Selective judges in turn, cheapest first.
    EscalationJudge : A dear judge when a cheap one is unsure, with no guarantee.
    llm_connect.stats.selective : The guarantee's statistics.

    Examples
    --------
    >>> from llm_connect.grading import TokenF1Judge
    >>> selective = SelectiveJudge(TokenF1Judge(), alpha=0.2)
    >>> selective.calibrated, selective.alpha
    (False, 0.2)
    """

    #: The wrapped judge (the ``judge`` argument; not named ``judge``, which is the method every judge has).
    inner: Judge
    confidence: str | Callable[[GradingResult], float | None] = "auto"
    threshold: float = 0.5
    grader_id: str = ""
    epochs: int | None = None
    panel: Sequence[Judge] = ()
    panel_size: int = 5
    #: What the judge promises, as one frozen value: ``alpha``, ``delta``, ``cutoff`` and ``coverage`` (once
    #: calibrated, its calibration's own guarantee); the judge's numbers of the guarantee are read from it.
    guarantee: Guarantee = field(default_factory=lambda: Guarantee(0.1, 0.1))
    calibration: SelectiveCutoff | None = field(default=None, repr=False, compare=False)
    seed: int = 0
    #: How the ``epochs`` judgments' scores reduce to one (a name of :data:`~llm_connect.grading.REDUCERS`, or a
    #: callable ``list[float] -> float``).
    reducer: Any = "mean"
    #: The confidence source in use (``"auto"`` resolved); ``None``: the judge has no usable signal.
    source: str | None = field(default=None, compare=False)
    #: The calibration rows of :meth:`calibrate` (``id``, ``score``, ``confidence``, ``label``, ``agree``,
    #: ``status``, ``judge_cost_usd``), or ``None``.
    calibration_frame: Any = field(default=None, repr=False, compare=False)

    def __init__(self, judge: Judge, *, confidence: str | Callable[[GradingResult], float | None] = "auto",
                 alpha: float = 0.1, delta: float = 0.1, threshold: float = 0.5, grader_id: str = "",
                 epochs: int | None = None, panel: Sequence[Judge] = (), panel_size: int = 5,
                 cutoff: float | None = None, calibration: SelectiveCutoff | None = None, seed: int = 0,
                 reducer: Any = "mean") -> None:
        self.inner = judge
        self.confidence = confidence
        self.threshold = threshold
        self.grader_id = grader_id
        self.epochs, self.panel, self.panel_size = epochs, panel, panel_size
        self.calibration, self.seed = calibration, seed
        self.reducer = reducer
        self.source = None
        self.calibration_frame = None
        self._check(alpha, delta, cutoff)

    def replace(self, **changes: Any) -> SelectiveJudge:
        """A copy with ``changes`` (the keyword arguments of the constructor; ``judge=`` the wrapped judge).

        A changed ``alpha``, ``delta`` or ``cutoff`` is no longer what was calibrated: unless ``calibration=`` is
        given too, the copy has none (a cut-off kept or set by hand, with no guarantee claimed).

        Parameters
        ----------
        **changes
            New values of the constructor's arguments.

        Returns
        -------
        SelectiveJudge
            The copy.

        Raises
        ------
        ValidationError
            An unknown keyword, or a ``calibration`` made at another ``alpha``, ``delta`` or cut-off.
        """
        kwargs: dict[str, Any] = {"judge": self.inner, "confidence": self.confidence, "alpha": self.alpha,
                                  "delta": self.delta, "threshold": self.threshold, "grader_id": self.grader_id,
                                  "epochs": self.epochs, "panel": self.panel, "panel_size": self.panel_size,
                                  "cutoff": self.cutoff, "calibration": self.calibration, "seed": self.seed,
                                  "reducer": self.reducer}
        unknown = set(changes) - set(kwargs)
        if unknown:
            raise ValidationError(f"SelectiveJudge.replace takes {sorted(kwargs)}, not {sorted(unknown)}")
        moved = [k for k in ("alpha", "delta", "cutoff") if k in changes and changes[k] != kwargs[k]]
        if moved and "calibration" not in changes:  # no longer the calibrated guarantee: none is claimed
            kwargs["calibration"] = None
        kwargs.update(changes)
        return SelectiveJudge(kwargs.pop("judge"), **kwargs)

    def _check(self, alpha: float, delta: float, cutoff: float | None) -> None:
        if not callable(getattr(self.inner, "judge", None)):
            raise ValidationError(f"SelectiveJudge needs a judge with a judge(...) method, got {self.inner!r}")
        if isinstance(self.inner, Guaranteed):  # a selective judge or a cascade: it already abstains
            raise ValidationError("SelectiveJudge wraps a plain judge, not another selective judge or cascade")
        self.grader_id = validate_grader_id(self.grader_id or str(self.inner.grader_id))
        self.guarantee = _guarantee_of(alpha, delta, cutoff, self.calibration)
        self.threshold = validate_score(self.threshold, what="threshold")
        if self.epochs is not None and (isinstance(self.epochs, bool) or not isinstance(self.epochs, int)
                                        or self.epochs < 2):
            raise ValidationError(f"epochs must be an integer >= 2 (judgments per item), got {self.epochs!r}")
        reducer_of(self.reducer)  # a bad reducer: an error now, not at the first item
        if isinstance(self.panel, (str, bytes)) or not isinstance(self.panel, Sequence):
            raise ValidationError("panel must be a list of judges")
        self.panel = list(self.panel)
        for j in self.panel:
            if not callable(getattr(j, "judge", None)):
                raise ValidationError(f"panel member {j!r} is not a judge")
        if isinstance(self.panel_size, bool) or not isinstance(self.panel_size, int) or self.panel_size < 2:
            raise ValidationError(f"panel_size must be an integer >= 2, got {self.panel_size!r}")
        supported = confidence_sources(self.inner, panel=self.panel, epochs=self.epochs)
        if callable(self.confidence) and not isinstance(self.confidence, str):
            self.source = "callable"
        elif self.confidence == "auto":
            self.source = supported[0] if supported else None
        elif self.confidence in CONFIDENCE_SOURCES:
            if self.confidence not in supported and self.confidence != "epochs":  # any judge can be asked K times
                raise ValidationError(self._unsupported(self.confidence))
            self.source = str(self.confidence)
        else:
            raise ValidationError(f"confidence must be 'auto', one of {list(CONFIDENCE_SOURCES)} or a callable "
                                  f"GradingResult -> float, got {self.confidence!r}")
        self._values = _label_values(self.inner)

    def _unsupported(self, name: str) -> str:
        gid = getattr(self.inner, "grader_id", "the judge")
        return {
            "logprob": f"confidence='logprob' needs a judge that scores from token probabilities "
                       f"(LLMJudge(scoring='yes-no') or scoring='logprob'); {gid!r} does not",
            "panel": f"confidence='panel' needs versions of the judge: a PanelJudge, panel=[other judges], or an "
                     f"LLMJudge whose Rubric has at least two worked examples; {gid!r} has none",
            "margin": f"confidence='margin' needs graded scores; {gid!r} gives 0/1 verdicts (no margin to read)",
        }.get(name, f"{gid!r} does not support confidence={name!r}")

    # -- declared abilities (the inner judge's, so ledgers and cards see the judge that judges) -----

    @property
    def repeats(self) -> int:
        """Judgments per item: ``epochs``, else 5 for ``confidence="epochs"``, else 1."""
        return int(self.epochs or (5 if self.source == "epochs" else 1))

    def scoring_identity(self) -> dict[str, Any]:
        """What the score of a judgment depends on.

        The inner judge's identity, and how several judgments (a panel's members, the epochs) are pooled.

        Returns
        -------
        dict
            The parts, as plain values (hashed into :attr:`rubric_hash`).
        """
        out: dict[str, Any] = {"judge": _judge_identity(self.inner)}
        if self.source == "panel":
            out["members"] = [_judge_identity(j) for j in self.members()]
            panel = self._panel_judge()
            if panel is not None:
                out["aggregate"] = [panel.aggregate, panel.threshold]
        if self.repeats > 1:
            out["epochs"] = self.repeats
            out["reducer"] = reducer_of(self.reducer)[0]
        return out

    @property
    def rubric_hash(self) -> str:
        """This selective judge's identity in a ledger: a hash of the inner judge's grader id and rubric hash,
        the confidence source (and what it pools), the threshold, ``alpha``, ``delta`` and the cut-off.

        Distinct from the inner judge's, so resuming (``grade_dataset``) and the ledger's records tell the two
        apart: the selective judge's records are the items it was sure of, its abstentions none of them.
        """
        fn = self.confidence
        identity = {"kind": "selective", **self.scoring_identity(), "source": self.source,
                    "threshold": repr(float(self.threshold)), "alpha": repr(self.alpha), "delta": repr(self.delta),
                    "cutoff": None if self.cutoff is None else repr(float(self.cutoff))}
        if self.source == "callable":
            identity["confidence"] = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
        return _digest(identity)

    @property
    def judge_model_id(self) -> str | None:  # type: ignore[override]
        model = _declared(self.inner, "judge_model_id", None) or _declared(
            _declared(self.inner, "adapter", None), "model_id", None)
        return model if isinstance(model, str) and model else None

    @property
    def reference_sep(self) -> str | None:  # type: ignore[override]
        return _declared(self.inner, "reference_sep", None)

    @property
    def splits_references(self) -> bool:  # type: ignore[override]
        from ._base import judge_abilities

        return judge_abilities(self.inner).splits_references

    @property
    def needs_reference(self) -> bool:
        return _declared(self.inner, "needs_reference", True) is not False

    #: judge_many hands a judge that reads an item's messages and documents the item (see :meth:`with_item`)
    uses_item = True

    @share_parameters(texts=JUDGE_TEXTS)
    def with_item(self, *, messages: Any = None, context: Any = None) -> SelectiveJudge:
        """The selective judge of one conversation item.

        Its judge (and panel) bound to the item's messages and documents when they read them, with the same
        cut-off and calibration.

        Parameters
        ----------
        {messages}
        {context}

        Returns
        -------
        SelectiveJudge
            The bound copy; this judge itself when none reads items.
        """
        return _holding(self, inner=_bound(self.inner, messages, context),
                        panel=tuple(_bound(j, messages, context) for j in self.panel))

    @property
    def pairwise(self) -> bool:  # type: ignore[override]
        return bool(_declared(self.inner, "pairwise", False))

    @property
    def abstains(self) -> bool:
        """A selective judge may abstain: its batches count ``abstained`` rows (0 included)."""
        return True

    @property
    def _passthrough(self) -> bool:
        """Whether a judgment is the inner judge's own result (its own batch columns then pass through)."""
        return self.source in ("logprob", "margin", "callable") and self.repeats == 1

    @property
    def extra_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        inner = tuple(_declared(self.inner, "extra_columns", ())) if self._passthrough else ()
        return ("confidence", *[c for c in inner if c != "confidence"])

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        cols = judge_result_columns(self.inner, result) if self._passthrough else {}
        cols["confidence"] = result.details.get("confidence")
        return cols

    async def aprepare_run(self, pairs: Any, *, progress: Any = None) -> SelectiveJudge:
        """The inner judge's pre-pass over a run (an embedding judge embeds each distinct text once), if it has one.

        Parameters
        ----------
        pairs : iterable of (str, str)
            Each row's ``(baseline, candidate)`` texts.
        progress : callable, optional
            Makes a progress bar (see :meth:`EmbeddingSimilarityJudge.aprepare_run`).

        Returns
        -------
        SelectiveJudge
            A copy whose inner judge holds what the pre-pass made; this judge when it has none.
        """
        prepare = _declared(self.inner, "aprepare_run", None)
        if not callable(prepare) or self.source == "panel":
            return self
        prepared = await prepare(pairs, progress=progress)
        copy = self.replace(judge=prepared)
        return copy

    def with_seed_offset(self, offset: int) -> SelectiveJudge:
        """The judge of repeated judging's epoch ``offset`` (:func:`~llm_connect.grading.reseed`).

        The inner judge reseeded, the cut-off kept.

        Parameters
        ----------
        offset : int
            The epoch.

        Returns
        -------
        SelectiveJudge
            The copy.
        """
        return self.replace(judge=reseed(self.inner, offset), panel=[reseed(j, offset) for j in self.panel])

    # -- the state of calibration ---------------------------------------------------------------

    @property
    def alpha(self) -> float:
        """The most disagreement with people the guarantee allows on judged items (read from :attr:`guarantee`)."""
        return self.guarantee.alpha

    @property
    def delta(self) -> float:
        """The chance that the guarantee fails, over the calibration items (read from :attr:`guarantee`)."""
        return self.guarantee.delta

    @property
    def cutoff(self) -> float | None:
        """The confidence at or above which the judge judges (``inf``: it abstains on every item; ``None`` before
        calibration), read from :attr:`guarantee`."""
        return self.guarantee.cutoff

    @property
    def calibrated(self) -> bool:
        """Whether the judge has a cut-off (from :meth:`calibrate`, or given)."""
        return self.cutoff is not None

    @property
    def coverage(self) -> float:
        """The share of the calibration items the judge judges (NaN before calibration, or for a cut-off set by
        hand), read from :attr:`guarantee`."""
        return self.guarantee.coverage

    @property
    def agreement(self) -> float:
        """The judge's empirical agreement with people on the calibration items it judges."""
        return self.calibration.agreement if self.calibration is not None else math.nan

    @property
    def note(self) -> str:
        """Why the judge abstains on everything (or another remark of its calibration); empty otherwise."""
        if self.source is None:
            return (f"no usable confidence signal: {type(self.inner).__name__} gives 0/1 verdicts and no "
                    "probabilities; pass confidence= a callable, panel= or epochs=")
        return self.calibration.note if self.calibration is not None else ""

    def describe(self) -> str:
        """The verdict line.

        Returns
        -------
        str
            E.g. "judges 62% of items with at least 90% agreement with people, guaranteed at 90% confidence;
            abstains on 38%".
        """
        if not self.calibrated:
            return f"{self.grader_id}: not calibrated (call .calibrate(data, human=COLUMN))"
        if self.calibration is None:
            return f"{self.grader_id}: cut-off {self.cutoff:.4g} set by hand (no guarantee claimed)"
        return f"{self.grader_id}: {self.calibration.describe()}" if self.source is not None else (
            f"{self.grader_id}: abstains on every item: {self.note}")

    def summary(self) -> dict[str, Any]:
        """The calibration as plain values.

        Returns
        -------
        dict
            Grader id, confidence source, cut-off, coverage, agreement, the guarantee (``alpha``, ``delta``,
            ``guaranteed_agreement``, ``confidence_level``) and the note.
        """
        base = self.calibration.to_dict() if self.calibration is not None else {
            **self.guarantee.to_dict(), "n": 0, "n_judged": 0, "agreement": None, "risk_upper": None,
            "n_min": min_items(self.alpha, self.delta), "tested": 0, "note": self.note}
        return {"grader_id": self.grader_id, "source": self.source, **base, "note": self.note or base.get("note", ""),
                "verdict": self.describe()}

    @property
    def curve(self) -> pd.DataFrame | None:
        """The risk-coverage curve of the calibration (:data:`~llm_connect.stats.selective.CURVE_COLUMNS`)."""
        return self.calibration.curve if self.calibration is not None else None

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """The risk-coverage curve with the chosen cut-off (:func:`llm_connect.views.plot_risk_coverage`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; ``None``: a new figure.
        **kwargs
            Passed to :func:`~llm_connect.views.plot_risk_coverage`.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.

        Raises
        ------
        UncalibratedJudgeError
            The judge has no calibration to draw (not calibrated yet, or its cut-off was set by hand).
        """
        if self.calibration is None:
            raise UncalibratedJudgeError(
                f"selective judge {self.grader_id!r} has no calibration to plot: call .calibrate(data, human=COLUMN) "
                "first" + (" (its cut-off was set by hand)" if self.cutoff is not None else ""))

        return view("plot_risk_coverage")(self, ax=ax, **kwargs)

    def _repr_html_(self) -> str:
        return str(view("selective_judge_html")(self))

    # -- judging -------------------------------------------------------------------------------

    @property
    def scorer(self) -> ConfidenceJudge:
        """This judge without a cut-off: every item judged, its confidence in ``details`` and a ``confidence``
        column (what :meth:`calibrate` and ``calibrate(..., selective=...)`` run)."""
        return ConfidenceJudge(self)

    def _panel_judge(self) -> PanelJudge | None:
        """The inner :class:`~llm_connect.grading.PanelJudge` whose members are the ``"panel"`` versions."""
        return self.inner if isinstance(self.inner, PanelJudge) and not self.panel else None

    def members(self) -> list[Judge]:
        """The versions of the judge whose agreement is the ``"panel"`` confidence.

        Returns
        -------
        list of Judge
            The judge itself, then the panel (or its rubric versions).
        """
        panel = self._panel_judge()
        if panel is not None:
            return list(panel.judges)
        return [self.inner, *self.panel]

    async def _one(self, judge: Judge, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                   rc: RunConfig) -> GradingResult:
        return await acall_judge(judge, baseline, candidate, prompt=prompt, run_config=rc)

    async def _run(self, offset: int, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                   rc: RunConfig) -> GradingResult:
        """One judgment of the item (epoch ``offset``: the judges reseeded and the run config's seed moved, as
        ``judge_many(..., epochs=K)`` does): the panel pooled for ``"panel"``, else the inner judge's own, with
        its verdict distribution in ``details["pass_distribution"]`` (``None`` without one)."""
        config = epoch_run_config(rc, offset)
        if self.source == "panel":
            members = [reseed(j, offset) for j in self.members()]
            names: list[str] = []
            for j in members:
                name = str(j.grader_id)
                names.append(name if name not in names else f"{name}#{len(names)}")
            done = await asyncio.gather(*(self._one(j, baseline, candidate, prompt, config) for j in members),
                                        return_exceptions=True)
            return self._pooled(done, names, baseline, candidate, "panel")
        result = await self._one(reseed(self.inner, offset), baseline, candidate, prompt, config)
        dist = pass_distribution(result, self._values)
        if dist is None:
            return result
        return dataclasses.replace(result, details={**result.details, PASS_DISTRIBUTION: dist})

    def confidence_of(self, result: GradingResult, threshold: float | None = None) -> float | None:
        """The confidence of a judgment of this judge (its pooled one with ``epochs``).

        Parameters
        ----------
        result : GradingResult
            A judgment made by this judge (its ``details`` hold its ``pass_distribution``).
        threshold : float, optional
            The verdict threshold to read it at (default: :attr:`threshold`); a callable's does not depend on it.

        Returns
        -------
        float or None
            ``None``: no confidence (the judge abstains on the item).
        """
        t = self.threshold if threshold is None else float(threshold)
        if self.source == "callable":
            return self._call_confidence(result)
        if self.source == "margin":
            return _margin(result.quality_score, t)
        dist = result.details.get(PASS_DISTRIBUTION)
        if not dist:
            return None
        return _on_verdict(pass_mass(dist, t), result.quality_score, t)

    def confidence_at(self, score: float, distribution: Any, threshold: float) -> float | None:
        """The confidence of a judgment read again at another threshold, without judging again.

        Parameters
        ----------
        score : float
            The judgment's score.
        distribution : list of (value, weight) pairs, or None
            Its verdict distribution (the scorer's ``pass_distribution`` column).
        threshold : float
            The verdict threshold to read the confidence at.

        Returns
        -------
        float or None
            ``None`` when it cannot be read from these (a callable confidence, or no distribution where one
            is needed).
        """
        if self.source == "margin":
            return _margin(float(score), float(threshold))
        if self.source in (None, "callable") or not isinstance(distribution, Sequence) or not distribution:
            return None
        return _on_verdict(pass_mass(distribution, float(threshold)), float(score), float(threshold))

    async def aconfident(self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str,
                         run_config: RunConfig | None = None) -> tuple[GradingResult, float | None]:
        """The judgment and its confidence, never abstaining.

        Parameters
        ----------
        baseline : LLMResponse
            The reference answer.
        candidate : LLMResponse
            The answer judged.
        prompt : str
            The question.
        run_config : RunConfig, optional
            The caller's call configuration.

        Returns
        -------
        tuple of (GradingResult, float or None)
            The judgment and its confidence (``None``: no confidence).

        Raises
        ------
        JudgeReplyError
            An unusable reply, as the judge raises it.
        """
        rc = run_config or RunConfig()
        k = self.repeats
        if k == 1:
            result = await self._run(0, baseline, candidate, prompt, rc)
        else:
            done = await asyncio.gather(*(self._run(e, baseline, candidate, prompt, rc) for e in range(k)),
                                        return_exceptions=True)
            result = self._pooled(done, [f"epoch {e}" for e in range(k)], baseline, candidate, "epochs")
        return self._with_confidence(result)

    def _with_confidence(self, result: GradingResult) -> tuple[GradingResult, float | None]:
        conf = self.confidence_of(result)
        details = dict(result.details)
        details.update(confidence=conf, confidence_source=self.source)
        changes: dict[str, Any] = {"details": details}
        if result.grader_id != self.grader_id:
            changes["grader_id"] = self.grader_id
        return dataclasses.replace(result, **changes), conf

    def pooled_epochs(self, results: Sequence[GradingResult],
                      reducer: Any = None) -> tuple[GradingResult, float | None]:
        """The judgments of one item by this judge's epochs pooled as this judge with ``epochs=K`` pools its own.

        Parameters
        ----------
        results : sequence of GradingResult
            The item's scored judgments, each a judgment of :attr:`scorer` (as ``judge_many(scorer,
            epochs=K)`` makes them).
        reducer : str or callable, optional
            How the scores reduce to one (default: :attr:`reducer`).

        Returns
        -------
        (GradingResult, float or None)
            The pooled judgment and its confidence.

        Raises
        ------
        ValidationError
            No judgment to pool.
        """
        clean = []
        for r in results:
            details = {k: v for k, v in r.details.items() if k not in ("confidence", "confidence_source")}
            clean.append(dataclasses.replace(r, details=details))
        if not clean:
            raise ValidationError("pooled_epochs needs at least one judgment")
        pooled = self._pooled(clean, [f"epoch {e}" for e in range(len(clean))], clean[0].baseline_response,
                              clean[0].candidate_response, "epochs", reducer=reducer)
        return self._with_confidence(pooled)

    def _call_confidence(self, result: GradingResult) -> float | None:
        fn = self.confidence
        assert callable(fn)
        value = fn(result)
        if value is None:
            return None
        if isinstance(value, bool) or (not isinstance(value, (int, float)) and not hasattr(value, "__float__")):
            raise ValidationError(f"the confidence callable returned {value!r}; it must return a number "
                                  "(higher = surer) or None")
        v = float(value)
        return v if math.isfinite(v) else None

    def _pooled(self, done: Sequence[Any], names: Sequence[str], baseline: LLMResponse, candidate: LLMResponse,
                kind: str, *, reducer: Any = None) -> GradingResult:
        """Several judgments of one item as one (see the module docstring): the panel's score (its own aggregate
        for a :class:`~llm_connect.grading.PanelJudge`, else the members' mean) or the epochs' reduced score,
        and the mixture of their verdict distributions (``details["pass_distribution"]``)."""
        t = self.threshold
        results: dict[str, GradingResult] = {}
        errors: dict[str, str] = {}
        spent: list[Any] = []
        for name, d in zip(names, done, strict=True):
            if isinstance(d, JudgeReplyError):
                errors[name] = str(d)
                spent.append(_spent(d))
            elif isinstance(d, BaseException):
                raise d
            else:
                results[name] = d
                spent.append(d)
        if not results:
            exc = JudgeReplyError(f"no {'epoch' if kind == 'epochs' else 'panel member'} gave a usable verdict: "
                                  + "; ".join(f"{k}: {v}" for k, v in errors.items()))
            exc.response = _usage_response(spent, self.grader_id, None)
            raise exc
        scores = {k: r.quality_score for k, r in results.items()}
        panel = self._panel_judge() if kind == "panel" else None
        votes = None
        if kind == "epochs":
            reducer = self.reducer if reducer is None else reducer
            how = reducer_of(reducer)[0]
            score = reduce_scores(list(scores.values()), reducer)
        elif panel is not None:
            how = panel.aggregate
            score, votes = panel.combine(list(scores.values()))
        else:
            how = "mean"
            score = math.fsum(scores.values()) / len(scores)
        score = min(1.0, max(0.0, score))
        members = {k: _member_distribution(r, self._values) for k, r in results.items()}
        mixture = _mixture(list(members.values()))
        passing = {k: pass_mass(d, t) for k, d in members.items()}
        on_verdict = _on_verdict(pass_mass(mixture, t), score, t)
        shown = ", ".join(f"{k}={v:.3g}" for k, v in scores.items())
        what = "judgments" if kind == "epochs" else "versions"
        notes = (f"{how} of {len(results)}/{len(names)} {what}: {score:.3g}; {on_verdict:.0%} of their weight on the "
                 f"verdict ({shown})")
        details = {"kind": f"selective-{kind}", "aggregate": how, "member_scores": scores,
                   "member_pass_probability": passing, "member_errors": errors,
                   "members": {k: {"notes": r.notes, **dict(r.details)} for k, r in results.items()},
                   PASS_DISTRIBUTION: mixture}
        if votes is not None:
            details["votes"] = votes
        return GradingResult(quality_score=score, notes=notes, grader_id=self.grader_id,
                             baseline_response=baseline, candidate_response=candidate, details=details,
                             **_sum_usage(spent))

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        if self.cutoff is None:
            raise UncalibratedJudgeError(
                f"selective judge {self.grader_id!r} has no cut-off yet: call .calibrate(data, human=COLUMN) "
                "first (its .scorer judges every item with its confidence, without a cut-off)")
        if self.source is None or not math.isfinite(self.cutoff):
            reason = self.note or "no cut-off passed the guarantee"
            raise JudgeAbstained(f"abstained: {reason}", confidence=None, cutoff=self.cutoff,
                                 columns={"confidence": None})
        result, conf = await self.aconfident(baseline, candidate, prompt=prompt, run_config=run_config)
        if conf is None or conf < self.cutoff:
            shown = "no confidence" if conf is None else f"confidence {conf:.3g}"
            exc = JudgeAbstained(f"abstained: {shown} below the cut-off {self.cutoff:.4g} (withheld verdict: "
                                 f"{result.quality_score:.3g})", confidence=conf, cutoff=self.cutoff, result=result,
                                 columns={"confidence": conf})
            exc.response = _usage_response([result], self.grader_id, raw_reply_of(result.details))
            raise exc
        return result

    # -- calibration -----------------------------------------------------------------------------

    def with_panel(self, seed: int = 0) -> SelectiveJudge:
        """The judge as it calibrates and judges: with a ``"panel"`` confidence and no panel yet (an ``LLMJudge``
        whose rubric has worked examples), a copy holding its panel of rubric versions, each shown a seeded half
        of the examples (see the module docstring); this judge itself otherwise. A panel of one judge would give
        every verdict a confidence of 0 or 1, not the agreement across annotators the source stands for.

        Parameters
        ----------
        seed
            Seeds which worked examples each version is shown.

        Returns
        -------
        SelectiveJudge
        """
        if self.source == "panel" and not self.panel and not isinstance(self.inner, PanelJudge):
            return self.replace(panel=self._variants(seed), seed=seed)
        return self

    def _variants(self, seed: int) -> list[Judge]:
        """``panel_size`` versions of an LLMJudge whose rubric has worked examples, each shown a seeded half of
        them in a seeded order (the paper's simulated annotators differ in their few-shot examples)."""
        import numpy as np

        inner: Any = self.inner
        rubric: Any = getattr(inner, "rubric", None)
        examples = list(getattr(rubric, "examples", ()) or ())
        if len(examples) < 2:
            return []
        rng = np.random.default_rng(seed)
        size = max(1, math.ceil(len(examples) / 2))
        out = []
        for _ in range(self.panel_size - 1):
            pick = rng.permutation(len(examples))[:size]
            out.append(inner.with_rubric(rubric.replace(examples=tuple(examples[i] for i in pick))))
        return out

    @share_parameters
    def calibrate(self, data: Any, *, human: str, seed: int = 0, concurrency: int = 16, progress: bool = True,
                  run_config: RunConfig | None = None, budget: BudgetTracker | float | None = None,
                  cluster: str | None = "auto") -> SelectiveJudge:
        """The calibrated judge: the cut-off chosen on the labelled rows of ``data`` (see the module docstring).

        Parameters
        ----------
        data : DataFrame or iterable of mappings or str or os.PathLike
            A DataFrame, mappings or a .jsonl / .csv path with ``prompt``, ``baseline``, ``candidate`` and
            the label column ``human`` (booleans, yes/no or 0..1; blank rows are unlabelled and left out).
        human : str
            The label column.
        seed : int, default 0
            Seeds the rubric versions of a ``"panel"`` built from worked examples, and the turn kept of each
            conversation (see ``cluster``).
        {concurrency}
        {progress}
        {run_config}
        {budget}
        cluster : str or None, default "auto"
            Which rows are not independent: ``"auto"`` (the default) the ``conversation_id`` column when the
            data has one; a column name; ``None`` for independent rows. The exact binomial bound behind the
            guarantee holds for independent items only, so with clusters the judge calibrates on **one
            labelled turn per conversation**, drawn with ``seed``; its ``note`` (and :meth:`summary`) says so
            and how many conversations it used. The guarantee is then about a fresh conversation's turn.

        Returns
        -------
        SelectiveJudge
            A copy with ``cutoff``, ``coverage``, ``guaranteed_agreement`` and ``delta``; the calibration frame
            (each row's score, confidence, label and agreement) is its :attr:`calibration_frame`.

        Raises
        ------
        ValidationError
            No label column ``human``, a ``cluster`` column the data lacks, fewer labelled items (or
            conversations) than the guarantee needs (:func:`~llm_connect.stats.selective.min_items`), or a
            bad run option.

        Notes
        -----
        The labelled rows are judged by :func:`~llm_connect.grading.judge_many` with the run options.
        """
        check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, budget=budget)
        return calibrate_selective(self, data, human=human, seed=seed, concurrency=concurrency, progress=progress,
                                   run_config=run_config, budget=budget, cluster=cluster)
