"""The judge card: what is known about one judge under one rubric (:class:`JudgeCard`, one per
``(grader_id, rubric_hash)``): how many labelled items, percent agreement and kappa with their intervals, the
judge's mean bias (judge − human) with its interval, each bias probe's effect and p-value, position consistency
for pairwise judges, the unscored rate, and the verdict in words (:mod:`._verdicts`)."""

from __future__ import annotations

import math
import numbers
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



#: The card's fields by kind, checked when a card is made (read from a registry's JSON above all).
_STR_FIELDS = ("reference", "verdict", "weak", "created_at")
_COUNT_FIELDS = ("n_labelled", "n_items")
_NUMBER_FIELDS = ("percent_agreement", "agreement_low", "agreement_high", "kappa", "kappa_low", "kappa_high",
                  "mean_bias", "bias_low", "bias_high", "unscored_rate", "position_consistency", "confidence",
                  "threshold", "yes_rate")


def _whole(value: Any) -> bool:
    return math.isfinite(value) and float(value).is_integer()


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
        The card's verdict line (:func:`card_verdict`, with ``"; flagged weak: ..."`` added for a weak
        judge): what ``str(card)`` shows.
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
        Where the judge's rubric came from, when :func:`~llm_connect.alignment.align` made it:
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
        When ``grader_id`` is not a non-empty string, ``rubric_hash`` is not a string or ``None``, ``people``
        is not true or false, ``n_labelled`` or ``n_items`` is not a whole number >= 0, a figure is not a
        number (NaN where unknown) or a text field is not a string: a card of the wrong types would read as
        a verdict (NaN, or the text ``"false"``, is truthy), so it is refused, never guessed at.

    See Also
    --------
    JudgeCardRegistry : Where cards are kept.
    cards_frame : A table of cards.
    card_verdict : The verdict line.
    llm_connect.calibration.card_from_scores : Makes a card from a judge's and people's scores.

    Notes
    -----
    Agreement is Cohen's kappa (Cohen, J. (1960), "A coefficient of agreement for nominal scales",
    *Educational and Psychological Measurement* 20(1)), read in the bands of Landis & Koch (1977), "The
    measurement of observer agreement for categorical data", *Biometrics* 33(1) (:func:`agreement_band`).
    Cards compare equal on every field, ``created_at`` included, but the dict-valued ones (``by_group``,
    ``reliability``, ``style``, ``provenance``, ``selective``, ``cluster``).

    Examples
    --------
    A card is usually made by calibration; here one is written by hand:

    >>> from llm_connect.cards import JudgeCard, card_verdict
    >>> verdict = card_verdict("gpt-4o-judge", kappa=0.62, kappa_low=0.41, kappa_high=0.80, n=120)
    >>> card = JudgeCard(
    ...     grader_id="gpt-4o-judge", rubric_hash="3f2a9c", reference="human", people=True, n_labelled=120,
    ...     percent_agreement=0.84, agreement_low=0.77, agreement_high=0.90,
    ...     kappa=0.62, kappa_low=0.41, kappa_high=0.80, mean_bias=0.02, bias_low=-0.03, bias_high=0.07,
    ...     unscored_rate=0.0, n_items=120, verdict=verdict, yes_rate=0.55)
    >>> print(card)
    gpt-4o-judge: substantial agreement against people (kappa 0.62, 95% CI 0.41..0.80)
    >>> card.calibrated, card.meets(min_kappa=0.4), card.meets(min_kappa=0.5)
    (True, True, False)
    >>> JudgeCard.from_dict(card.to_dict()) == card
    True
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
        # A field of the wrong type would pass for a verdict: NaN (or a "false" string) is truthy, so a card read
        # with "people": null would be calibrated and route. Each field is checked, and numbers made plain.
        for name in _STR_FIELDS:
            if not isinstance(getattr(self, name), str):
                raise ValidationError(f"JudgeCard.{name} must be a string, got {getattr(self, name)!r}")
        people = self.people
        if not (isinstance(people, bool) or getattr(getattr(people, "dtype", None), "kind", "") == "b"):
            raise ValidationError(f"JudgeCard.people must be true or false (whether people labelled the items), "
                                  f"got {people!r}")
        object.__setattr__(self, "people", bool(people))
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not _whole(value) or value < 0:
                raise ValidationError(f"JudgeCard.{name} must be a count (a whole number >= 0), got {value!r}")
            object.__setattr__(self, name, int(float(value)))
        for name in _NUMBER_FIELDS:
            value = getattr(self, name)
            if value is None and name == "position_consistency":
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValidationError(f"JudgeCard.{name} must be a number (NaN where unknown), got {value!r}")
            object.__setattr__(self, name, float(value))
        object.__setattr__(self, "probes", tuple(self.probes))

    @property
    def key(self) -> tuple[str, str | None]:
        """``(grader_id, rubric_hash)``: what the card is kept under in a registry (one card per key)."""
        return (self.grader_id, self.rubric_hash)

    @property
    def calibrated(self) -> bool:
        """Checked against people, with enough items for a verdict."""
        return self.people and self.n_labelled >= MIN_LABELLED and _finite(self.kappa)

    def meets(self, *, min_kappa: float, on: str = "kappa_low") -> bool:
        """Whether the judge is calibrated and its kappa clears ``min_kappa``: what routing asks of a judge.

        Parameters
        ----------
        min_kappa : float
            The least kappa accepted (e.g. 0.6, the edge of "substantial"). A value equal to it clears it.
        on : {"kappa_low", "kappa"}, default "kappa_low"
            Which figure must clear it: the lower end of the kappa's interval (the judge is that good at the
            card's confidence) or the kappa itself (the point estimate).

        Returns
        -------
        bool
            ``True`` when the card is :attr:`calibrated` (checked against people on at least
            :data:`MIN_LABELLED` items, with a kappa) and the figure named by ``on`` is finite and at least
            ``min_kappa``; ``False`` otherwise.

        Raises
        ------
        ValidationError
            When ``on`` is neither ``"kappa_low"`` nor ``"kappa"``.
        """
        if on not in ("kappa", "kappa_low"):
            raise ValidationError(f"on must be 'kappa' or 'kappa_low', got {on!r}")
        value = _num(getattr(self, on))
        return self.calibrated and math.isfinite(value) and value >= min_kappa

    def to_dict(self) -> dict[str, Any]:
        """The card as a JSON-ready dict, as a registry saves it.

        Returns
        -------
        dict
            Every field by name (``probes`` a list of dicts of the :class:`ProbeEffect` fields); NaN and
            infinite numbers, here, in the probes and in the dict-valued fields, become ``None``, and tuples
            lists. :meth:`from_dict` reads it back.
        """

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
        """A card from the dict of :meth:`to_dict` (a registry's JSON).

        Parameters
        ----------
        data : mapping
            The card's fields by name. Keys that are not fields are ignored (as are a probe's); ``None``
            is read as NaN in the number fields (JSON has no NaN: :meth:`to_dict` writes it as ``null``) and
            kept in those that may be ``None`` (``rubric_hash``, ``position_consistency`` and the dict-valued
            ones); in any other field (``people``, ``n_labelled``, ``verdict``, ...) it is an error. An absent
            ``created_at`` is now, and the other fields with a default take it.

        Returns
        -------
        JudgeCard
            The card.

        Raises
        ------
        ValidationError
            When ``data`` is not a mapping, it or one of its probes lacks a field without a default, or a
            field is invalid (see the class's Raises).
        """
        if not isinstance(data, Mapping):
            raise ValidationError(f"a judge card must be a JSON object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in data.items() if k in known}
        for k, v in list(kw.items()):
            if v is None and k in _NUMBER_FIELDS and k != "position_consistency":
                kw[k] = math.nan  # JSON has no NaN: to_dict's NaN is written as null
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
        """The card as a flat row of a table (what :func:`cards_frame` and ``cards.csv`` show).

        Returns
        -------
        dict
            The :data:`CARD_COLUMNS` by name: the card's own fields (``agreement`` is
            ``percent_agreement``), ``epochs``, ``epoch_agreement`` and ``epoch_alpha`` from
            :attr:`reliability`, ``rewards`` the line of :attr:`style`, and ``selective_coverage`` and
            ``selective_cutoff`` from :attr:`selective`; ``None`` (``epochs``), ``""`` (``rewards``) or NaN
            where the card has no such entry.
        """
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
        """A copy of the card holding the judge's run-to-run reliability (its verdict is unchanged).

        Parameters
        ----------
        reliability : EpochReliability or pandas.DataFrame or mapping or None
            An :class:`~llm_connect.grading.EpochReliability`, the frame of ``judge_many(..., epochs=k)``
            (read by :func:`~llm_connect.grading.epoch_reliability`) or its ``card_entry()`` dict;
            ``None`` removes it (see :func:`reliability_entry`).

        Returns
        -------
        JudgeCard
            A new card whose :attr:`reliability` is the entry; the card itself is not changed.

        Raises
        ------
        ValidationError
            When ``reliability`` is none of these, or a mapping that lacks a field.
        """
        return replace(self, reliability=reliability_entry(reliability))

    def __str__(self) -> str:
        return self.verdict

    def _repr_html_(self) -> str:
        return str(view("judge_card_html")(self))



def reliability_entry(reliability: Any) -> dict[str, Any] | None:
    """What a card keeps of a judge's run-to-run reliability (:attr:`JudgeCard.reliability`).

    Parameters
    ----------
    reliability : EpochReliability or pandas.DataFrame or mapping or None
        An :class:`~llm_connect.grading.EpochReliability`; the frame of ``judge_many(..., epochs=k)``
        (read by :func:`~llm_connect.grading.epoch_reliability`); or a mapping with its fields (such as
        ``df.attrs["reliability"]`` or a card's entry; keys that are not fields are ignored, ``None`` is
        read as NaN except for ``reducer``); or ``None``.

    Returns
    -------
    dict or None
        The :meth:`~llm_connect.grading.EpochReliability.card_entry`: ``epochs``, ``n_items``,
        ``agreement``, ``unanimous``, ``alpha``, ``level``, ``alpha_nominal``, ``alpha_interval``,
        ``labels``, ``threshold``, ``reducer``, NaN as ``None``; ``None`` for ``None``.

    Raises
    ------
    ValidationError
        When ``reliability`` is none of these, a mapping lacks a field, or a frame has no
        ``epoch_scores`` column.

    See Also
    --------
    llm_connect.grading.epoch_reliability : Computes the reliability (Krippendorff's alpha).
    JudgeCard.with_reliability : A card with the entry.

    Examples
    --------
    >>> from llm_connect.cards import reliability_entry
    >>> from llm_connect.grading import epoch_reliability
    >>> entry = reliability_entry(epoch_reliability([[1, 1, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]]))
    >>> entry["epochs"], entry["n_items"], entry["level"], round(entry["alpha"], 3)
    (3, 4, 'nominal', 0.686)
    >>> reliability_entry(entry) == entry
    True
    >>> reliability_entry(None) is None
    True
    """
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
    """A table of judge cards: one row per card, in the order given.

    Parameters
    ----------
    cards : iterable of JudgeCard
        The cards (a :class:`JudgeCardRegistry`'s ``cards()``, a calibration report's ``judge_cards()``).

    Returns
    -------
    pandas.DataFrame
        One row per card (:meth:`JudgeCard.row`), the :data:`CARD_COLUMNS` in order: ``grader_id``,
        ``rubric_hash``, ``reference``, ``n_labelled``, ``agreement``, ``kappa``, ``kappa_low``, ``kappa_high``,
        ``mean_bias``, ``bias_low``, ``bias_high``, ``unscored_rate``, ``position_consistency``, ``yes_rate``,
        ``weak``, ``epochs``, ``epoch_agreement``, ``epoch_alpha``, ``verdict``, ``rewards``,
        ``selective_coverage``, ``selective_cutoff``. No cards: an empty frame with those columns.

    See Also
    --------
    JudgeCard.row : One card's row.

    Examples
    --------
    >>> from llm_connect.cards import JudgeCard, cards_frame
    >>> card = JudgeCard(
    ...     grader_id="gpt-4o-judge", rubric_hash="3f2a9c", reference="human", people=True, n_labelled=120,
    ...     percent_agreement=0.84, agreement_low=0.77, agreement_high=0.90,
    ...     kappa=0.62, kappa_low=0.41, kappa_high=0.80, mean_bias=0.02, bias_low=-0.03, bias_high=0.07,
    ...     unscored_rate=0.0, n_items=120, verdict="gpt-4o-judge: substantial agreement against people")
    >>> cards_frame([card])[["grader_id", "n_labelled", "kappa", "kappa_low"]]
          grader_id  n_labelled  kappa  kappa_low
    0  gpt-4o-judge         120   0.62       0.41
    >>> len(cards_frame([]).columns)
    22
    """
    return pd.DataFrame([c.row() for c in cards], columns=list(CARD_COLUMNS))

