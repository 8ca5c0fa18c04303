"""Selective judges and cascades with a guaranteed agreement with people (Jung, Brahman & Choi, ICLR 2025).

A :class:`SelectiveJudge` wraps a judge with a *confidence* in each of its verdicts and a cut-off
chosen on labelled items so that, on fresh items from the same distribution, the judge agrees with
people on the items it judges at least ``1 − alpha`` of the time, with probability at least
``1 − delta`` (Jung, Brahman & Choi, *Trust or Escalate: LLM Judges with Provable Guarantees for
Human Agreement*, ICLR 2025, arXiv:2407.18370). Below the cut-off it *abstains*: the item gets no
score (``status="abstained"`` in a batch, never 0), and a cascade (:func:`cascade`) passes it to
the next, stronger judge, or to people. The statistics (the exact binomial bound, fixed-sequence
testing, the risk-coverage curve) are :mod:`llm_connect.stats.selective`'s; this module runs the
judges.

Confidence (``confidence=``)
----------------------------
``"logprob"``
    the judge's own probability of its verdict, from the token probabilities of a yes/no or
    Likert rating (``LLMJudge(scoring="yes-no")`` or ``scoring="logprob"``): the probability mass
    of the labels on the verdict's side of ``threshold`` (``P(yes)`` for a "yes" verdict).
``"panel"``
    agreement across several versions of the judge, the paper's *Simulated Annotators*: each
    version's probability of a pass (its ``logprob`` probability, else 1 or 0 by its verdict)
    averaged, and the confidence is that average's mass on the side of the verdict (the verdict of
    a :class:`~llm_connect.grading.PanelJudge`'s own score, by its ``aggregate``: a majority panel
    scores 0 or 1; of the members' mean otherwise). The versions are
    the members of a :class:`~llm_connect.grading.PanelJudge`, the judges given as ``panel=``
    (with the judge itself), or, for an ``LLMJudge`` whose :class:`~llm_connect.grading.Rubric`
    has worked examples, ``panel_size`` copies of it each shown a seeded half of the examples
    (the paper's annotators differ in the few-shot examples they are shown; built at
    :meth:`SelectiveJudge.calibrate`, seeded by its ``seed``).
``"epochs"``
    agreement across ``epochs=K`` repeated judgments (epoch ``e`` reseeded as
    ``judge_many(..., epochs=K)`` does, :func:`~llm_connect.grading.reseed`): the share of them
    whose verdict is the item's (the verdict of their reduced score; their probabilities of a pass
    averaged when they have them). A judge at temperature 0 that never varies gives every item the
    same confidence, so it judges all items or none. ``epochs=K`` with another source judges K
    times too, and that source reads the pooled judgment (the reduced score's margin; the
    probabilities averaged over epochs, and over members for a panel).
``"margin"``
    how far the score is from ``threshold``: ``0.5 + |score − threshold| / (2·max(threshold,
    1 − threshold))``, for judges with graded scores (token F1, embedding similarity, a JSON LLM
    judge).
a callable ``GradingResult -> float``
    your own (higher = surer); ``None`` or NaN for an item means no confidence there: it abstains.
``"auto"`` (the default)
    the first the judge supports, in this order: ``"logprob"`` (a judge scoring from token
    probabilities), ``"panel"`` (a panel judge, ``panel=`` given, or an ``LLMJudge`` whose rubric
    has at least two worked examples), ``"epochs"`` (only when ``epochs=`` is given: it costs
    ``K`` calls an item), ``"margin"`` (any judge but the 0/1 ones: exact match, contains, a
    pairwise judge). :attr:`SelectiveJudge.source` says which it picked. A judge with none
    (exact match) has no usable signal: it abstains on every item and says so, rather than claim
    the level.

Calibration and the guarantee
-----------------------------
:meth:`SelectiveJudge.calibrate` judges the labelled rows (``human=`` names the label column:
booleans, yes/no or 0..1), marks each verdict (score ``>= threshold``) as agreeing with people's
(label ``>= threshold``) or not, and chooses the cut-off by fixed-sequence testing with exact
binomial bounds (:func:`llm_connect.stats.selective.fixed_sequence_cutoff`). It returns a copy
with ``cutoff``, ``coverage`` (share of calibration items it judges), ``agreement`` (its empirical
agreement there), ``guaranteed_agreement`` (``1 − alpha``) and ``delta``. Too few labelled items
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
:attr:`SelectiveCascade.rubric_hash`, whichever stage decided. A selective judge or cascade is
never judged ``k`` times by ``judge_many(..., epochs=k)`` (an error: calibrate one with
``epochs=k`` instead).

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

import asyncio
import copy
import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from .._html import fmt, frame_html, html_format, join, kv_table
from ..batch import ITEM_COLUMNS, candidate_names, item_id_text, item_ids, items_frame
from ..core import LLMResponse, RunConfig, as_budget
from ..errors import JudgeAbstained, JudgeReplyError, UncalibratedJudgeError, ValidationError
from ..quality import BaseLedger
from ..stats.labels import parse_labels
from ..stats.selective import Guaranteed, SelectiveCutoff, check_level, fixed_sequence_cutoff, min_items
from ._base import (
    GradingResult,
    Judge,
    _declared,
    acall_judge,
    judge_result_columns,
    validate_grader_id,
    validate_score,
)
from ._batch import judge_many, raw_reply_of
from ._compound import PanelJudge, WrapperJudge, _bound, _spent, _sum_usage
from ._epochs import epoch_run_config, reduce_scores, reducer_of, reseed

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONFIDENCE_SOURCES",
    "ConfidenceJudge",
    "SelectiveCascade",
    "SelectiveCascadeSummary",
    "SelectiveJudge",
    "cascade",
    "confidence_sources",
]

#: The named confidence sources, in the order ``confidence="auto"`` tries them.
CONFIDENCE_SOURCES = ("logprob", "panel", "epochs", "margin")
#: The stand-in ``decided_by`` of an item every judge of a cascade abstained on.
HUMAN = "human"
_DEFAULT_LABEL_VALUES = {"yes": 1.0, "no": 0.0, "1": 0.0, "2": 0.25, "3": 0.5, "4": 0.75, "5": 1.0}
_BINARY_JUDGES = ("ExactMatchJudge", "ContainsJudge")


# -- which confidence a judge has ------------------------------------------------------------


#: The key of a judgment's ``details`` (and the scorer's column) holding its verdict distribution.
PASS_DISTRIBUTION = "pass_distribution"


def _scores_from_logprobs(judge: Any) -> bool:
    return getattr(judge, "scoring", None) in ("yes-no", "logprob")


def _rubric_examples(judge: Any) -> int:
    rubric = getattr(judge, "rubric", None)
    examples = getattr(rubric, "examples", None)
    return len(examples) if examples is not None and callable(getattr(judge, "with_rubric", None)) else 0


def _binary(judge: Any) -> bool:
    return type(judge).__name__ in _BINARY_JUDGES or bool(_declared(judge, "pairwise", False))


def confidence_sources(judge: Judge, *, panel: Sequence[Judge] = (), epochs: int | None = None) -> list[str]:
    """The named confidence sources ``judge`` supports, in the order ``confidence="auto"`` tries them
    (see the module docstring); ``[]`` for a judge with no usable signal (exact match)."""
    out = []
    if _scores_from_logprobs(judge):
        out.append("logprob")
    if isinstance(judge, PanelJudge) or panel or _rubric_examples(judge) >= 2:
        out.append("panel")
    if epochs is not None:
        out.append("epochs")
    if not _binary(judge):
        out.append("margin")
    return out


def _label_values(judge: Any) -> dict[str, float]:
    rubric = getattr(judge, "current_rubric", None)
    labels = getattr(rubric, "labels", None)
    if callable(labels):
        try:
            return {str(k).strip().lower(): float(v) for k, v in labels().items()}
        except Exception:  # a rubric that cannot say: the built-in labels
            pass
    return dict(_DEFAULT_LABEL_VALUES)


#: A verdict distribution: ``(label value, weight)`` pairs whose weights sum to 1 (see :func:`pass_distribution`).
Distribution = list[tuple[float, float]]


def pass_distribution(result: GradingResult, values: Mapping[str, float] | None = None) -> Distribution | None:
    """The judgment's distribution over label values from its ``label_probs`` (normalised; labels with no
    value left out); ``None`` when it has none (a judge that does not score from token probabilities).

    The probability of a pass at any threshold ``t`` is the weight on values ``>= t``
    (:func:`pass_mass`), so a confidence can be read again at another threshold without judging again.
    """
    probs = result.details.get("label_probs") if isinstance(result.details, Mapping) else None
    if not isinstance(probs, Mapping) or not probs:
        return None
    values = values or _DEFAULT_LABEL_VALUES
    pairs: Distribution = []
    for label, p in probs.items():
        value = values.get(str(label).strip().lower())
        if value is None:
            try:
                value = float(label)
            except (TypeError, ValueError):
                continue
        pairs.append((float(value), float(p)))
    total = math.fsum(p for _, p in pairs)
    if not total > 0:
        return None
    return [(v, p / total) for v, p in pairs]


def pass_mass(distribution: Sequence[Sequence[float]], threshold: float) -> float:
    """The weight of ``distribution`` on values ``>= threshold``: the probability of a pass there."""
    return math.fsum(float(w) for v, w in distribution if float(v) >= threshold)


def pass_probability(result: GradingResult, threshold: float,
                     values: Mapping[str, float] | None = None) -> float | None:
    """The judgment's probability of a pass (a label valued ``>= threshold``) from its ``label_probs``;
    ``None`` when it has none (a judge that does not score from token probabilities)."""
    dist = pass_distribution(result, values)
    return None if dist is None else pass_mass(dist, threshold)


def _member_distribution(result: GradingResult, values: Mapping[str, float]) -> Distribution:
    """A pooled member's distribution: its own (a panel's pooled one, else from its label probabilities), else
    all its weight on its score (its verdict at any threshold)."""
    dist = result.details.get(PASS_DISTRIBUTION) if isinstance(result.details, Mapping) else None
    if dist:
        return [(float(v), float(w)) for v, w in dist]
    return pass_distribution(result, values) or [(float(result.quality_score), 1.0)]


def _mixture(distributions: Sequence[Distribution]) -> Distribution:
    """The equal-weight mixture of several distributions (the members' or the epochs' pooled)."""
    n = len(distributions)
    return [(v, w / n) for d in distributions for v, w in d]


def _on_verdict(p_pass: float, score: float, threshold: float) -> float:
    """The weight on the verdict's side: ``P(pass)`` for a pass (``score >= threshold``), else ``1 − P(pass)``."""
    return p_pass if score >= threshold else 1.0 - p_pass


def _margin(score: float, threshold: float) -> float:
    return 0.5 + abs(score - threshold) / (2.0 * max(threshold, 1.0 - threshold))


def _digest(identity: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over ``identity`` as canonical JSON (as :attr:`Rubric.hash` is made)."""
    canon = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def _judge_identity(judge: Any) -> list[Any]:
    """``[grader_id, rubric_hash]`` of a judge (its identity in a ledger)."""
    value = _declared(judge, "rubric_hash", None)
    return [str(judge.grader_id), value if isinstance(value, str) and value else None]


def _usage_response(parts: Sequence[Any], adapter_id: str, reply: str | None) -> LLMResponse:
    """A stand-in response with the summed usage (and the raw reply, for audit) of an abstained or unscored row."""
    return LLMResponse(content=reply or "", adapter_id=adapter_id, model_id="selective",
                       **_sum_usage([p for p in parts if p is not None]))


# -- labels ------------------------------------------------------------------------------------


def _labels(values: Sequence[Any], column: str) -> list[float]:
    """Human labels as numbers in 0..1 (NaN when blank): booleans, yes/no words or 0..1 numbers, read as
    everywhere else (:func:`llm_connect.stats.labels.parse_labels`)."""
    return [float(v) for v in parse_labels(values, column=column)]


def _read_items(data: Any) -> pd.DataFrame:
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

    Its identity in a ledger is its own, never its inner judge's: the same ``grader_id`` (by
    default), but a :attr:`rubric_hash` covering the inner judge's, the confidence, the threshold,
    ``alpha``, ``delta`` and the cut-off. So a rerun of ``grade_dataset`` resumes only the items
    this very judge scored (an item it abstains on is never read back from the plain judge's
    records), and its records, a confident subset, are never pooled with the plain judge's.
    """

    #: The wrapped judge (the ``judge`` argument; not named ``judge``, which is the method every judge has).
    inner: Judge
    confidence: str | Callable[[GradingResult], float | None] = "auto"
    alpha: float = 0.1
    delta: float = 0.1
    threshold: float = 0.5
    grader_id: str = ""
    epochs: int | None = None
    panel: Sequence[Judge] = ()
    panel_size: int = 5
    cutoff: float | None = None
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
        self.alpha, self.delta, self.threshold = alpha, delta, threshold
        self.grader_id = grader_id
        self.epochs, self.panel, self.panel_size = epochs, panel, panel_size
        self.cutoff, self.calibration, self.seed = cutoff, calibration, seed
        self.reducer = reducer
        self.source = None
        self.calibration_frame = None
        self.__post_init__()

    def replace(self, **changes: Any) -> SelectiveJudge:
        """A copy with ``changes`` (the keyword arguments of the constructor; ``judge=`` the wrapped judge)."""
        kwargs: dict[str, Any] = {"judge": self.inner, "confidence": self.confidence, "alpha": self.alpha,
                                  "delta": self.delta, "threshold": self.threshold, "grader_id": self.grader_id,
                                  "epochs": self.epochs, "panel": self.panel, "panel_size": self.panel_size,
                                  "cutoff": self.cutoff, "calibration": self.calibration, "seed": self.seed,
                                  "reducer": self.reducer}
        unknown = set(changes) - set(kwargs)
        if unknown:
            raise ValidationError(f"SelectiveJudge.replace takes {sorted(kwargs)}, not {sorted(unknown)}")
        kwargs.update(changes)
        return SelectiveJudge(kwargs.pop("judge"), **kwargs)

    def __post_init__(self) -> None:
        if not callable(getattr(self.inner, "judge", None)):
            raise ValidationError(f"SelectiveJudge needs a judge with a judge(...) method, got {self.inner!r}")
        if isinstance(self.inner, (SelectiveJudge, SelectiveCascade)):
            raise ValidationError("SelectiveJudge wraps a plain judge, not another selective judge or cascade")
        self.grader_id = validate_grader_id(self.grader_id or str(self.inner.grader_id))
        self.alpha = check_level(self.alpha, "alpha")
        self.delta = check_level(self.delta, "delta")
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
        if self.cutoff is not None:
            c = float(self.cutoff)
            if math.isnan(c):
                raise ValidationError("cutoff must be a number (inf: abstain on every item) or None")
            self.cutoff = c
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
        """What the score of a judgment depends on: the inner judge's identity, and how several judgments
        (a panel's members, the epochs) are pooled."""
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

    def with_item(self, *, messages: Any = None, context: Any = None) -> SelectiveJudge:
        """The selective judge of one conversation item: its judge (and panel) bound to the item's messages
        and documents when they read them, with the same cut-off and calibration; this judge itself when
        none does."""
        inner = _bound(self.inner, messages, context)
        panel = [_bound(j, messages, context) for j in self.panel]
        if inner is self.inner and all(a is b for a, b in zip(panel, self.panel, strict=True)):
            return self
        bound = copy.copy(self)
        bound.inner, bound.panel = inner, tuple(panel)
        return bound

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

    async def aprepare_batch(self, pairs: Any, *, progress: Any = None) -> SelectiveJudge:
        """The inner judge's batch pre-pass (an embedding judge embeds every distinct text once), when it has one."""
        prepare = _declared(self.inner, "aprepare_batch", None)
        if not callable(prepare) or self.source == "panel":
            return self
        prepared = await prepare(pairs, progress=progress)
        copy = self.replace(judge=prepared)
        return copy

    def with_seed_offset(self, offset: int) -> SelectiveJudge:
        """The judge of repeated judging's epoch ``offset`` (:func:`~llm_connect.grading.reseed`): the inner
        judge reseeded, the cut-off kept."""
        return self.replace(judge=reseed(self.inner, offset), panel=[reseed(j, offset) for j in self.panel])

    # -- the state of calibration ---------------------------------------------------------------

    @property
    def calibrated(self) -> bool:
        """Whether the judge has a cut-off (from :meth:`calibrate`, or given)."""
        return self.cutoff is not None

    @property
    def coverage(self) -> float:
        """The share of the calibration items the judge judges (NaN before calibration)."""
        return self.calibration.coverage if self.calibration is not None else math.nan

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
        """The verdict line: e.g. "judges 62% of items with at least 90% agreement with people, guaranteed
        at 90% confidence; abstains on 38%"."""
        if not self.calibrated:
            return f"{self.grader_id}: not calibrated (call .calibrate(data, human=COLUMN))"
        if self.calibration is None:
            return f"{self.grader_id}: cut-off {self.cutoff:.4g} set by hand (no guarantee claimed)"
        return f"{self.grader_id}: {self.calibration.describe()}" if self.source is not None else (
            f"{self.grader_id}: abstains on every item: {self.note}")

    def summary(self) -> dict[str, Any]:
        """The calibration as plain values: grader id, confidence source, cut-off, coverage, agreement, the
        guarantee (``alpha``, ``delta``, ``guaranteed_agreement``, ``confidence_level``) and the note."""
        base = self.calibration.to_dict() if self.calibration is not None else {
            "alpha": self.alpha, "delta": self.delta, "cutoff": self.cutoff, "n": 0, "n_judged": 0,
            "coverage": None, "agreement": None, "risk_upper": None, "guaranteed_agreement": self.guaranteed_agreement,
            "confidence_level": self.confidence_level, "n_min": min_items(self.alpha, self.delta), "tested": 0,
            "note": self.note}
        return {"grader_id": self.grader_id, "source": self.source, **base, "note": self.note or base.get("note", ""),
                "verdict": self.describe()}

    @property
    def curve(self) -> pd.DataFrame | None:
        """The risk-coverage curve of the calibration (:data:`~llm_connect.stats.selective.CURVE_COLUMNS`)."""
        return self.calibration.curve if self.calibration is not None else None

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """The risk-coverage curve with the chosen cut-off (:func:`llm_connect.views.plot_risk_coverage`).

        Raises
        ------
        UncalibratedJudgeError
            The judge has no calibration to draw (not calibrated yet, or its cut-off was set by hand).
        """
        from .._display import view

        if self.calibration is None:
            raise UncalibratedJudgeError(
                f"selective judge {self.grader_id!r} has no calibration to plot: call .calibrate(data, human=COLUMN) "
                "first" + (" (its cut-off was set by hand)" if self.cutoff is not None else ""))

        return view("plot_risk_coverage")(self, ax=ax, **kwargs)

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [("judge", self.grader_id), ("confidence", s["source"] or "none (no usable signal)"),
                ("cut-off", fmt(s["cutoff"]) if s["cutoff"] is not None else "∞ (abstains on every item)"),
                ("coverage (calibration items judged)", fmt(s["coverage"])),
                ("agreement on judged items", fmt(s["agreement"])),
                ("guarantee", f"agreement ≥ {self.guaranteed_agreement:.0%} with probability ≥ "
                              f"{self.confidence_level:.0%} (alpha={self.alpha:g}, delta={self.delta:g})"),
                ("labelled items", f"{s['n']} (at least {s['n_min']} needed)")]
        if s["note"]:
            rows.append(("note", s["note"]))
        return str(html_format("<div class='llm-connect-selective'><p><b>{}</b></p>{}</div>", self.describe(),
                               kv_table(rows, caption="selective judge", attrs={"class_": "llm-connect"})))

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
        """The versions of the judge whose agreement is the ``"panel"`` confidence."""
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
        """The judgment and its confidence (``None``: no confidence), never abstaining. An unusable reply
        raises :class:`~llm_connect.errors.JudgeReplyError` as the judge does."""
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

    def calibrate(self, data: Any, *, human: str, seed: int = 0, concurrency: int = 16, progress: bool = True,
                  run_config: RunConfig | None = None, budget: Any = None,
                  cluster: str | None = "auto") -> SelectiveJudge:
        """The calibrated judge: the cut-off chosen on the labelled rows of ``data`` (see the module docstring).

        Parameters
        ----------
        data
            A DataFrame, mappings or a .jsonl / .csv path with ``prompt``, ``baseline``, ``candidate`` and
            the label column ``human`` (booleans, yes/no or 0..1; blank rows are unlabelled and left out).
        human
            The label column.
        seed
            Seeds the rubric versions of a ``"panel"`` built from worked examples, and the turn kept of each
            conversation (see ``cluster``).
        concurrency, progress, run_config, budget
            Passed to :func:`~llm_connect.grading.judge_many`.
        cluster
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
            No label column ``human``, a ``cluster`` column the data lacks, or fewer labelled items (or
            conversations) than the guarantee needs (:func:`~llm_connect.stats.selective.min_items`).
        """
        import numpy as np

        from ..stats.clusters import cluster_column

        frame = _read_items(data)
        if not isinstance(human, str) or human not in frame.columns:
            raise ValidationError(f"no label column {human!r} in the data; it has {', '.join(map(str, frame.columns))}")
        column = cluster_column(frame, cluster, what="the calibration data")
        labels = np.asarray(_labels(frame[human].tolist(), human), dtype=float)
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
        need = min_items(self.alpha, self.delta)
        if len(labelled) < need:
            unit = "conversations" if clustered_note else "items"
            raise ValidationError(
                f"too few labelled {unit} to calibrate {self.grader_id!r}: {len(labelled)}; the guarantee at "
                f"alpha={self.alpha:g}, delta={self.delta:g} needs at least {need} (with fewer, even no disagreement "
                f"at all cannot pass the exact binomial bound); label more {unit} or raise alpha or delta")
        judge = self.with_panel(seed)
        if judge.source is None:  # no usable signal: nothing to run
            empty = fixed_sequence_cutoff([], [], alpha=self.alpha, delta=self.delta, strict=False)
            cut = dataclasses.replace(empty, n=len(labelled), note=judge.note)
            out = judge.replace(cutoff=math.inf, calibration=cut, seed=seed)
            out.calibration_frame = None
            return out
        rows = judge_many(judge.scorer, labelled, concurrency=concurrency, progress=progress, run_config=run_config,
                          budget=budget)
        table = _calibration_table(labelled, rows, labels, judge.threshold)
        cut = fixed_sequence_cutoff(table["confidence"], table["agree"], alpha=self.alpha, delta=self.delta)
        if clustered_note:
            cut = dataclasses.replace(cut, note="; ".join(n for n in (clustered_note, cut.note) if n))
        out = judge.replace(cutoff=cut.cutoff, calibration=cut, seed=seed)
        out.calibration_frame = table
        return out



def one_row_per_cluster(clusters: Any, *, seed: int = 0) -> list[int]:
    """The positions of one row per cluster, drawn with ``seed`` (a row without a cluster id is its own).

    The exact binomial bound of a selective judge's guarantee needs independent items; the turns of one
    conversation are not, so a clustered calibration keeps one of each conversation's labelled turns.
    Positions are returned in their original order.
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


def _calibration_table(items: pd.DataFrame, rows: pd.DataFrame, labels: Any, threshold: float) -> pd.DataFrame:
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


@dataclass
class ConfidenceJudge(WrapperJudge):
    """A :class:`SelectiveJudge` without its cut-off: every item judged, with its confidence.

    Its results are the selective judge's (``details["confidence"]``), never an abstention; its
    batches have a ``confidence`` column and a ``pass_distribution`` one (each judgment's verdict
    distribution, from which :meth:`SelectiveJudge.confidence_at` reads the confidence at another
    threshold). ``SelectiveJudge.scorer`` builds it; :meth:`SelectiveJudge.calibrate` and
    ``calibrate(..., selective=...)`` run it. Judged ``K`` times (``judge_many(scorer, epochs=K)``),
    an item's row has the confidence of the ``K`` judgments pooled, as the selective judge with
    ``epochs=K`` pools its own (:meth:`pool_epochs`).
    """

    selective: SelectiveJudge

    @property
    def grader_id(self) -> str:  # type: ignore[override]
        return self.selective.grader_id

    @property
    def rubric_hash(self) -> str | None:
        """The inner judge's when the scores are its own (one judgment, not pooled); else a hash of what the
        score pools (the panel's members and aggregate, the epochs and reducer), so pooled scores are never
        recorded as the inner judge's."""
        sel = self.selective
        if sel._passthrough:
            return _judge_identity(sel.inner)[1]
        return _digest({"kind": "selective-scorer", **sel.scoring_identity()})

    @property
    def judge_model_id(self) -> str | None:  # type: ignore[override]
        return self.selective.judge_model_id

    @property
    def reference_sep(self) -> str | None:  # type: ignore[override]
        return self.selective.reference_sep

    @property
    def splits_references(self) -> bool:  # type: ignore[override]
        return self.selective.splits_references

    @property
    def needs_reference(self) -> bool:
        return self.selective.needs_reference

    uses_item = True

    def with_item(self, *, messages: Any = None, context: Any = None) -> ConfidenceJudge:
        """The scorer of one conversation item (:meth:`SelectiveJudge.with_item`)."""
        bound = self.selective.with_item(messages=messages, context=context)
        return self if bound is self.selective else dataclasses.replace(self, selective=bound)

    @property
    def pairwise(self) -> bool:  # type: ignore[override]
        return bool(_declared(self.selective.inner, "pairwise", False))

    @property
    def extra_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        own = self.selective.extra_columns
        return (own[0], PASS_DISTRIBUTION, *[c for c in own[1:] if c != PASS_DISTRIBUTION])

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        cols = self.selective.result_columns(result)
        dist = result.details.get(PASS_DISTRIBUTION)
        cols[PASS_DISTRIBUTION] = [[float(v), float(w)] for v, w in dist] if dist else None
        return cols

    def pool_epochs(self, results: Sequence[GradingResult], reducer: Any) -> dict[str, Any]:
        """The columns of an item's row judged ``K`` times (``judge_many(scorer, epochs=K)``; ``results``: its
        scored epochs) that pooling sets: ``confidence`` and ``pass_distribution`` of the ``K`` judgments
        pooled as the selective judge with ``epochs=K`` pools its own (:meth:`SelectiveJudge.pooled_epochs`),
        not the first epoch's."""
        result, conf = self.selective.pooled_epochs(results, reducer)
        dist = result.details.get(PASS_DISTRIBUTION)
        return {"confidence": conf, PASS_DISTRIBUTION: [[float(v), float(w)] for v, w in dist] if dist else None}

    async def aprepare_batch(self, pairs: Any, *, progress: Any = None) -> ConfidenceJudge:
        return ConfidenceJudge(await self.selective.aprepare_batch(pairs, progress=progress))

    def with_seed_offset(self, offset: int) -> ConfidenceJudge:
        return ConfidenceJudge(self.selective.with_seed_offset(offset))

    async def _ajudge(self, baseline: LLMResponse, candidate: LLMResponse, prompt: str,
                      run_config: RunConfig | None) -> GradingResult:
        result, _ = await self.selective.aconfident(baseline, candidate, prompt=prompt, run_config=run_config)
        return result


# -- cascades --------------------------------------------------------------------------------------


@dataclass
class SelectiveCascade(WrapperJudge, Guaranteed):
    """Judges from cheap to strong, each selective; what the last abstains on is left for people.

    Built by :func:`cascade`; see the module docstring and Jung, Brahman & Choi (ICLR 2025,
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
    """

    judges: Sequence[Judge]
    _: KW_ONLY
    alpha: float = 0.1
    delta: float = 0.1
    grader_id: str = "selective-cascade"
    #: Per stage, what calibration saw (``grader_id``, ``reached``: items it was asked about, ``judged``,
    #: ``coverage``: share of all calibration items it decided, ``cutoff``, ``agreement``, ``cost_usd``, ``note``).
    calibration: tuple[dict[str, Any], ...] | None = field(default=None, repr=False, compare=False)

    extra_columns = ("decided_by", "stage", "confidence", "details")

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        self.alpha = check_level(self.alpha, "alpha")
        self.delta = check_level(self.delta, "delta")
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

    @property
    def stages(self) -> list[SelectiveJudge]:
        """The selective judges, cheapest first."""
        return list(self.judges)  # type: ignore[arg-type]

    @property
    def calibrated(self) -> bool:
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
        """The share of the calibration items some stage decided (NaN before calibration)."""
        if not self.calibration:
            return math.nan
        return math.fsum(float(s["coverage"]) for s in self.calibration)

    @property
    def needs_reference(self) -> bool:
        return any(s.needs_reference for s in self.stages)

    uses_item = True

    def with_item(self, *, messages: Any = None, context: Any = None) -> SelectiveCascade:
        """The cascade of one conversation item: each stage bound to the item (:meth:`SelectiveJudge.with_item`)."""
        stages = [s.with_item(messages=messages, context=context) for s in self.stages]
        if all(a is b for a, b in zip(stages, self.stages, strict=True)):
            return self
        bound = copy.copy(self)
        bound.judges = stages
        return bound

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        d = result.details
        return {"decided_by": d.get("decided_by"), "stage": d.get("stage"), "confidence": d.get("confidence"),
                "details": dict(d)}

    async def aprepare_batch(self, pairs: Any, *, progress: Any = None) -> SelectiveCascade:
        pairs = list(pairs)
        stages = [await s.aprepare_batch(pairs, progress=progress) for s in self.stages]
        return dataclasses.replace(self, judges=stages, calibration=self.calibration)

    def with_seed_offset(self, offset: int) -> SelectiveCascade:
        return dataclasses.replace(self, judges=[s.with_seed_offset(offset) for s in self.stages],
                                   calibration=self.calibration)

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

    def calibrate(self, data: Any, *, human: str, seed: int = 0, concurrency: int = 16, progress: bool = True,
                  run_config: RunConfig | None = None, budget: Any = None) -> SelectiveCascade:
        """The calibrated cascade: stage by stage, each cut-off chosen on the labelled items every earlier
        stage abstained on (or could not score). The first stage needs at least
        :func:`~llm_connect.stats.selective.min_items` labelled items (an error names how many); a later
        stage reached by fewer abstains on everything (its ``note`` says so). Each stage judges only the
        items that reach it. Arguments as :meth:`SelectiveJudge.calibrate`; ``budget`` (a
        :class:`~llm_connect.BudgetTracker` or a limit in USD) is one budget for the whole calibration,
        every stage charged to it (items a spent budget left unjudged are passed on, and left out of
        every stage's calibration).
        """
        import numpy as np

        frame = _read_items(data)
        if not isinstance(human, str) or human not in frame.columns:
            raise ValidationError(f"no label column {human!r} in the data; it has {', '.join(map(str, frame.columns))}")
        labels = np.asarray(_labels(frame[human].tolist(), human), dtype=float)
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
            table = _calibration_table(remaining, rows, labels, stage.threshold)
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
        return dataclasses.replace(self, judges=stages, calibration=tuple(report))

    def describe(self) -> str:
        """One line: what each stage decides and the guarantee."""
        if not self.calibration:
            return f"{self.grader_id}: not calibrated (call .calibrate(data, human=COLUMN))"
        parts = [f"{s['grader_id']} {float(s['coverage']):.0%}" for s in self.calibration]
        left = max(0.0, 1.0 - self.coverage)
        return (f"{self.grader_id}: judges {self.coverage:.0%} of items ({', '.join(parts)}) with "
                f"{self.guarantee.describe()}; leaves {left:.0%} for people")

    def _repr_html_(self) -> str:
        import pandas as pd

        parts = [html_format("<p><b>{}</b></p>", self.describe())]
        if self.calibration:
            parts.append(frame_html(pd.DataFrame(list(self.calibration)), caption="stages (calibration)"))
        return str(html_format("<div class='llm-connect-selective'>{}</div>", join(parts)))

    def summary(self, frame: pd.DataFrame, *, labels: Any = None, ledger: BaseLedger | None = None,
                task_type: str | None = None) -> SelectiveCascadeSummary:
        """How the cascade did over a batch (the frame of ``judge_many(cascade, items)``).

        Per stage the items it decided and their share (``coverage``), the share left for people,
        the judges' cost per item against always using the last judge (its cost per item measured
        on the items that reached it), and the guarantee. People's labels (``labels``: a column
        of ``frame`` or one value per row; or ``ledger`` and ``task_type``: the ``human`` labels
        recorded there, e.g. by the :class:`~llm_connect.calibration.Labeller`, matched on item id
        and candidate) give ``labelled_by_people`` (abstained items people have labelled) and
        ``combined_agreement``: the share of the decided items (judges' and people's) that agree
        with people, at least ``(judged·(1 − alpha) + labelled_by_people) / (judged +
        labelled_by_people)`` with probability ``1 − delta``; ``observed_agreement`` is the judges'
        agreement on the judged items that people labelled too (NaN when none).
        """
        return cascade_summary(self, frame, labels=labels, ledger=ledger, task_type=task_type)

    def judge_many(self, items: Any, *, concurrency: int = 16, progress: bool = True,
                   run_config: RunConfig | None = None, ledger: BaseLedger | None = None,
                   task_type: str | None = None, epochs: int = 1, reducer: Any = "mean") -> pd.DataFrame:
        """:func:`llm_connect.grading.judge_many` of the cascade, with ``attrs["cascade"]`` its
        :meth:`summary` (as a dict). With ``ledger`` and ``task_type`` the judged rows are recorded, and
        people's labels already there (of the items left for them) give the combined agreement and a
        ``human_label`` column."""
        out = judge_many(self, items, concurrency=concurrency, progress=progress, run_config=run_config,
                         ledger=ledger, task_type=task_type, epochs=epochs, reducer=reducer)
        summary = self.summary(out, ledger=ledger, task_type=task_type)
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
    """
    return SelectiveCascade(list(judges), alpha=alpha, delta=delta, grader_id=grader_id)


# -- a cascade's batch, summarised ---------------------------------------------------------------


@dataclass(frozen=True)
class SelectiveCascadeSummary(Guaranteed):
    """A cascade's batch: who decided what, what it cost, and the guarantee (see :meth:`SelectiveCascade.summary`).

    ``stages``: per stage ``grader_id``, ``decided`` (items), ``coverage`` (their share of all
    items), ``reached`` (items asked), ``cost_usd``; ``human``: items left for people
    (``human_share``); ``unscored``/``errors``: rows no stage could score or that failed.
    ``cost_per_item_usd``: the judges' cost per item; ``last_judge_cost_per_item_usd``: the last
    judge's cost per item where it was asked; ``always_last_cost_usd``: that times the items;
    ``saved_usd``/``saved_share``: what the cascade saved against it (NaN when the last judge was
    never asked). ``labels``: people's labels per row when known (else ``None``).
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
    alpha: float
    delta: float
    judged: int
    labelled_by_people: int = 0
    combined_agreement: float = math.nan
    observed_agreement: float = math.nan
    labels: Any = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        """One line, e.g. "judges decided 81% (token-f1 55%, llm-judge 26%) with at least 90% agreement with
        people, guaranteed at 90% confidence; 19% left for people; $0.0021 an item against $0.0100 always
        using llm-judge (79% saved)"."""
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
        """One row per stage and one for people: ``decided_by``, ``decided``, ``coverage``, ``reached``,
        ``cost_usd``."""
        import pandas as pd

        rows = [{"decided_by": s["grader_id"], "decided": s["decided"], "coverage": s["coverage"],
                 "reached": s["reached"], "cost_usd": s["cost_usd"]} for s in self.stages]
        rows.append({"decided_by": HUMAN, "decided": self.human, "coverage": self.human_share, "reached": self.human,
                     "cost_usd": 0.0})
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "labels"}
        out["stages"] = [dict(s) for s in self.stages]
        out["guaranteed_agreement"] = self.guaranteed_agreement
        out["confidence_level"] = self.confidence_level
        out["verdict"] = self.describe()
        return out

    def _repr_html_(self) -> str:
        share = self.judged / self.n if self.n else math.nan
        rows = [("items", self.n), ("decided by judges", f"{self.judged} ({fmt(share)})"),
                ("left for people", f"{self.human} ({fmt(self.human_share)})"),
                ("guarantee", f"agreement ≥ {self.guaranteed_agreement:.0%} with probability ≥ "
                              f"{self.confidence_level:.0%}"),
                ("judges' cost per item (USD)", fmt(self.cost_per_item_usd)),
                ("always the last judge (USD)", fmt(self.always_last_cost_usd)),
                ("saved", fmt(self.saved_share))]
        if self.labelled_by_people:
            rows += [("labelled by people", self.labelled_by_people),
                     ("combined agreement (at least)", fmt(self.combined_agreement))]
        return str(html_format("<div class='llm-connect-selective'><p><b>{}</b></p>{}{}</div>", self.describe(),
                               kv_table(rows, caption="cascade", attrs={"class_": "llm-connect"}),
                               frame_html(self.to_frame(), caption="who decided")))


def _ledger_labels(ledger: BaseLedger, task_type: str) -> dict[tuple[str, str], float]:
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


def cascade_summary(cascade: SelectiveCascade, frame: pd.DataFrame, *, labels: Any = None,
                    ledger: BaseLedger | None = None, task_type: str | None = None) -> SelectiveCascadeSummary:
    """:meth:`SelectiveCascade.summary` (the cascade gives the stages and the guarantee)."""
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
            per_label = np.asarray(_labels(frame[labels].tolist(), labels), dtype=float)
        else:
            per_label = np.asarray(_labels(list(labels), "labels"), dtype=float)
            if per_label.size != n:
                raise ValidationError(f"labels has {per_label.size} values for {n} rows")
    elif ledger is not None and task_type is not None:
        found = _ledger_labels(ledger, task_type)
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
        combined = (judged * (1.0 - cascade.alpha) + n_labelled) / done if done else math.nan
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
        alpha=cascade.alpha, delta=cascade.delta, judged=judged, labelled_by_people=n_labelled,
        combined_agreement=combined, observed_agreement=observed, labels=per_label)
