"""The judge card: what is known about one judge under one rubric (:class:`JudgeCard`, one per
``(grader_id, rubric_hash)``): how many labelled items, percent agreement and kappa with their intervals, the
judge's mean bias (judge − human) with its interval, each bias probe's effect and p-value, position consistency
for pairwise judges, the unscored rate, and the verdict in words (:mod:`._verdicts`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from .._display import view
from ..errors import ValidationError
from ._verdicts import MIN_LABELLED, ProbeEffect, _finite, _num

__all__ = ["CARD_COLUMNS", "JudgeCard", "cards_frame", "reliability_entry"]

CARD_COLUMNS = (
    "grader_id",
    "rubric_hash",
    "reference",
    "n_labelled",
    "agreement",
    "kappa",
    "kappa_low",
    "kappa_high",
    "mean_bias",
    "bias_low",
    "bias_high",
    "unscored_rate",
    "position_consistency",
    "yes_rate",
    "weak",
    "epochs",
    "epoch_agreement",
    "epoch_alpha",
    "verdict",
    "rewards",
    "selective_coverage",
    "selective_cutoff",
)
"""The columns of a table of judge cards (:meth:`JudgeCard.row`, :func:`cards_frame`, ``cards.csv`` of
``llm-connect calibrate``). ``epochs``, ``epoch_agreement``, ``epoch_alpha``: the run-to-run reliability
of repeated judging (``calibrate(..., epochs=k)``; :attr:`JudgeCard.reliability`): the epochs, their
percent agreement and Krippendorff's alpha (nominal for verdicts, interval for continuous scores);
blank when the judge was run once. ``rewards``: for a pairwise judge, what it pays for style beside
what people pay (:attr:`JudgeCard.style`'s line); blank otherwise. ``selective_coverage``,
``selective_cutoff``: with ``calibrate(..., selective=...)`` (:attr:`JudgeCard.selective`), the share of
the labelled items the judge judges as a selective judge and its confidence cut-off (blank: it abstains
on every item, or was not calibrated so)."""



def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class JudgeCard:
    """What is known about one judge (``grader_id``) under one rubric (``rubric_hash``).

    Built by :func:`~llm_connect.calibration.card_from_scores` (or ``CalibrationReport.judge_cards()``),
    saved in a :class:`JudgeCardRegistry`, read by routing.

    Parameters
    ----------
    grader_id : str
        The judge's identity; a non-empty string.
    rubric_hash : str or None
        The hash of the rubric it judged under.
    reference : str
        What it was checked against (``human``, an annotator, or another judge).
    people : bool
        Whether the reference is people's labels.
    n_labelled : int
        Items with both a score and a reference label.
    percent_agreement, agreement_low, agreement_high : float
        Percent agreement with the reference and its interval.
    kappa, kappa_low, kappa_high : float
        Cohen's kappa with the reference and its interval.
    mean_bias, bias_low, bias_high : float
        The mean score minus people's, and its interval (NaN when the reference is not people).
    unscored_rate : float
        The share of the items it did not score.
    n_items : int
        The items it was run on.
    verdict : str
        The card's verdict text.
    probes : tuple of ProbeEffect, default ()
        The bias probes' effects.
    position_consistency : float, optional
        A pairwise judge's consistency across the two orders.
    confidence : float, default 0.95
        The intervals' confidence level.
    threshold : float, default 0.5
        The score at or above which it says "yes".
    yes_rate : float, default nan
        The share of the items it scored that the judge said "yes" to (at ``threshold``).
    weak : str, default ""
        Why the judge is flagged weak (:func:`weak_judge_reasons`), or ``""``.
    created_at : str, optional
        When the card was made (ISO 8601); default now.
    by_group : dict, optional
        Kappa per group (``calibrate(..., by=COLUMN)``): ``{"by": COLUMN, "groups": [{"group", "n", "kappa",
        "kappa_low", "kappa_high", "note"}, ...]}`` from ``GroupBreakdown.card_entry``; ``None`` without groups.
    reliability : dict, optional
        Run-to-run reliability from repeated judging (``judge_many(..., epochs=k)``): the
        :meth:`~llm_connect.grading.EpochReliability.card_entry` of
        :func:`~llm_connect.grading.epoch_reliability` (``epochs``, ``n_items``, ``agreement``,
        ``unanimous``, ``alpha`` with its ``level``, ``alpha_nominal``, ``alpha_interval``, ``labels``,
        ``threshold``, ``reducer``); ``None`` when the judge was run once. See :meth:`with_reliability`.
    style : dict, optional
        What a pairwise judge rewards besides quality (:func:`style_entry`): ``{"line": "this judge pays
        +40 Elo for bold text (...); people pay +5 (...)", "features": [{"feature", "coefficient", "low",
        "high", "people", "people_low", "people_high"}, ...], "models": whether model strength was held
        fixed, "confidence"}``, the style coefficients (Chatbot Arena's style control) of the judge's own
        preferences beside people's; ``None`` for other judges or without the answers' texts.
    provenance : dict, optional
        Where the judge's rubric came from, when :func:`~llm_connect.calibration.align` made it:
        ``{"kind": "align", "parent_rubric_hash", "labels": {"n", "pass", "fail"}, "split": {"selection",
        "heldout", "folds", ...}, "heldout": {"original": {...}, "aligned": {...}}, "difference", "candidate",
        "examples", "accepted", ...}``; ``None`` otherwise. The parent's card stays in the registry beside it.
    selective : dict, optional
        The judge as a selective judge (``calibrate(..., selective=(alpha, delta))``; Jung, Brahman & Choi,
        ICLR 2025): :meth:`~llm_connect.grading.SelectiveJudge.summary` (``source``, ``alpha``, ``delta``,
        ``cutoff``, ``coverage``, ``agreement``, ``guaranteed_agreement``, ``confidence_level``, ``note``,
        ``verdict``); its line is also a clause of :attr:`verdict`. ``None`` otherwise.
    cluster : dict, optional
        The items' clusters (``calibrate(..., cluster=...)``, turns of conversations): ``{"column": the
        column, "n_clusters": how many among the labelled items}``; the intervals resampled whole clusters.
        ``None`` for independent items.

    Raises
    ------
    ValidationError
        When ``grader_id`` is not a non-empty string or ``rubric_hash`` is not a string or ``None``.

    See Also
    --------
    JudgeCardRegistry : Where cards are kept.
    """

    grader_id: str
    rubric_hash: str | None
    reference: str
    people: bool
    n_labelled: int
    percent_agreement: float
    agreement_low: float
    agreement_high: float
    kappa: float
    kappa_low: float
    kappa_high: float
    mean_bias: float
    bias_low: float
    bias_high: float
    unscored_rate: float
    n_items: int
    verdict: str
    probes: tuple[ProbeEffect, ...] = ()
    position_consistency: float | None = None
    confidence: float = 0.95
    threshold: float = 0.5
    yes_rate: float = math.nan
    weak: str = ""
    created_at: str = field(default_factory=_now_iso)
    by_group: dict[str, Any] | None = field(default=None, compare=False)
    reliability: dict[str, Any] | None = field(default=None, compare=False)
    style: dict[str, Any] | None = field(default=None, compare=False)
    provenance: dict[str, Any] | None = field(default=None, compare=False)
    selective: dict[str, Any] | None = field(default=None, compare=False)
    cluster: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.grader_id, str) or not self.grader_id.strip():
            raise ValidationError(f"JudgeCard.grader_id must be a non-empty string, got {self.grader_id!r}")
        if self.rubric_hash is not None and not isinstance(self.rubric_hash, str):
            raise ValidationError("JudgeCard.rubric_hash must be a string or None")
        object.__setattr__(self, "probes", tuple(self.probes))

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.grader_id, self.rubric_hash)

    @property
    def calibrated(self) -> bool:
        """Checked against people, with enough items for a verdict."""
        return self.people and self.n_labelled >= MIN_LABELLED and _finite(self.kappa)

    def meets(self, *, min_kappa: float, on: str = "kappa_low") -> bool:
        """Whether the card clears ``min_kappa`` on ``on`` (``kappa_low``, the default, or ``kappa``)."""
        if on not in ("kappa", "kappa_low"):
            raise ValidationError(f"on must be 'kappa' or 'kappa_low', got {on!r}")
        value = _num(getattr(self, on))
        return self.calibrated and math.isfinite(value) and value >= min_kappa

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: NaN (here and in the probes) becomes ``None``."""

        def clean(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            return value

        data = asdict(self)
        data["probes"] = [asdict(p) for p in self.probes]
        return clean(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeCard:
        if not isinstance(data, Mapping):
            raise ValidationError(f"a judge card must be a JSON object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in data.items() if k in known}
        for k, v in list(kw.items()):
            if v is None and k not in ("rubric_hash", "position_consistency", "by_group", "reliability", "style",
                                       "provenance", "selective", "cluster"):
                kw[k] = math.nan
        probes = []
        for p in data.get("probes") or ():
            if isinstance(p, Mapping):
                fields: dict[str, Any] = {k: (math.nan if v is None else v) for k, v in p.items()
                                          if k in ProbeEffect.__dataclass_fields__}
                try:
                    probes.append(ProbeEffect(**fields))
                except TypeError as exc:
                    raise ValidationError(f"a judge card's probe lacks a field: {exc}") from exc
        kw["probes"] = tuple(probes)
        try:
            return cls(**kw)
        except TypeError as exc:
            raise ValidationError(f"a judge card lacks a field: {exc}") from exc

    def row(self) -> dict[str, Any]:
        """A flat row for a table (:data:`CARD_COLUMNS`)."""
        r = self.reliability or {}
        return {
            "grader_id": self.grader_id,
            "rubric_hash": self.rubric_hash,
            "reference": self.reference,
            "n_labelled": self.n_labelled,
            "agreement": self.percent_agreement,
            "kappa": self.kappa,
            "kappa_low": self.kappa_low,
            "kappa_high": self.kappa_high,
            "mean_bias": self.mean_bias,
            "bias_low": self.bias_low,
            "bias_high": self.bias_high,
            "unscored_rate": self.unscored_rate,
            "position_consistency": self.position_consistency,
            "yes_rate": self.yes_rate,
            "weak": self.weak,
            "epochs": r.get("epochs"),
            "epoch_agreement": _num(r.get("agreement")),
            "epoch_alpha": _num(r.get("alpha")),
            "verdict": self.verdict,
            "rewards": (self.style or {}).get("line", ""),
            "selective_coverage": _num((self.selective or {}).get("coverage")),
            "selective_cutoff": _num((self.selective or {}).get("cutoff")),
        }

    def with_reliability(self, reliability: Any) -> JudgeCard:
        """A copy holding the judge's run-to-run reliability: an
        :class:`~llm_connect.grading.EpochReliability`, the frame of ``judge_many(..., epochs=k)``
        (read by :func:`~llm_connect.grading.epoch_reliability`) or its ``card_entry()`` dict."""
        return replace(self, reliability=reliability_entry(reliability))

    def __str__(self) -> str:
        return self.verdict

    def _repr_html_(self) -> str:
        return str(view("judge_card_html")(self))



def reliability_entry(reliability: Any) -> dict[str, Any] | None:
    """What a card keeps of a judge's run-to-run reliability (``JudgeCard.reliability``): ``None`` for
    ``None``; the ``card_entry()`` of an :class:`~llm_connect.grading.EpochReliability`, of the one
    :func:`~llm_connect.grading.epoch_reliability` reads from a ``judge_many(..., epochs=k)`` frame,
    or of a mapping with the same fields (such as ``df.attrs["reliability"]``)."""
    from ..grading import EpochReliability, epoch_reliability

    if reliability is None:
        return None
    if isinstance(reliability, pd.DataFrame):
        reliability = epoch_reliability(reliability)
    elif isinstance(reliability, Mapping):
        known: dict[str, Any] = {f: reliability[f] for f in EpochReliability.__dataclass_fields__ if f in reliability}
        try:
            fields: dict[str, Any] = {k: (math.nan if v is None and k != "reducer" else v) for k, v in known.items()}
            reliability = EpochReliability(**fields)
        except TypeError as exc:
            raise ValidationError(f"a reliability entry lacks a field: {exc}") from exc
    if not isinstance(reliability, EpochReliability):
        raise ValidationError("reliability must be an EpochReliability (epoch_reliability(df)), the frame of "
                              f"judge_many(..., epochs=k) or its card entry, got {type(reliability).__name__}")
    return reliability.card_entry()



def cards_frame(cards: Iterable[JudgeCard]) -> pd.DataFrame:
    """A table of judge cards: one row per card (:meth:`JudgeCard.row`), the :data:`CARD_COLUMNS`."""
    return pd.DataFrame([c.row() for c in cards], columns=list(CARD_COLUMNS))

