"""Verdicts in words, judge cards, and the card registry kept beside a ledger.

A calibration run measures; this module decides. Every judge gets

- a **verdict**: one line a user can act on, derived by :func:`card_verdict`
  from the judge's Cohen's kappa interval against people (or, without human
  labels, against the best non-LLM judge) and from its significant biases;
- a **card** (:class:`JudgeCard`), one per ``(grader_id, rubric_hash)``: how
  many labelled items, percent agreement and kappa with their intervals, the
  judge's mean bias (judge − human) with its interval, each bias probe's
  effect and p-value, position consistency for pairwise judges, the unscored
  rate, and the verdict;
- a place in a **registry** (:class:`JudgeCardRegistry`): a small JSON file
  beside the ledger (``<ledger>.cards.json``), rewritten atomically under
  ``filelock.FileLock(<registry>.lock)``, which routing reads to refuse
  uncalibrated judges.

The verdict rule
----------------
One function words every verdict, :func:`agreement_verdict` (the cards, the command line's
verdict lines, the demo and the report all print what it says). With ``k`` the judge's Cohen's
kappa against the reference, ``[lo, hi]`` its bootstrap interval (``confidence``, 95% by
default) on ``n`` paired items, and the share of its scored items it said "yes" to:

1. it said the same on every item it scored (0% or 100% "yes"): *one verdict* — kappa is 0 by
   construction, it cannot tell good answers from bad; do not use its scores;
2. fewer than :data:`MIN_LABELLED` paired items, or no kappa: *not enough
   evidence* — label more items before trusting it;
3. ``lo <= 0`` (the interval does not exclude chance) and ``k`` below :data:`UNDECIDED_FROM`
   (slight at best): *no better than chance* — do not use its scores;
4. ``lo <= 0`` but ``k`` fair or better: *cannot tell yet* — the interval is too wide to decide,
   and about how many labelled items in all would settle it, were the kappa to hold
   (:func:`labels_to_settle`: the interval's half-width shrinks as ``1/sqrt(n)``); until then use
   its scores only with human correction;
5. otherwise the agreement band of ``k`` (Landis & Koch 1977, "The
   measurement of observer agreement for categorical data", Biometrics 33):
   slight (< 0.2), fair (< 0.4), moderate (< 0.6), substantial (< 0.8), almost
   perfect; slight and fair add "use its scores only with human correction".

Then, each on its own clause: every bias probe whose Wilcoxon p-value is below
:data:`BIAS_ALPHA` (e.g. "biased toward longer answers (+0.30, p=0.014)"),
the length regression when no length probe ran and its p-value is below
:data:`BIAS_ALPHA`, a mean bias against people whose interval excludes 0 and
whose size is at least :data:`MIN_MEAN_BIAS`, and an unscored rate above
:data:`MAX_UNSCORED_RATE`.

Weak judges
-----------
A judge is flagged *weak* (the card's ``weak`` field, a clause of its verdict, the printed
summary and the report), with the reason, when its kappa interval against people includes 0
(``lo <= 0 <= hi``: it cannot be told from chance), or when it gives one verdict, "yes" or "no", to
more than :data:`MAX_YES_RATE` of the items it scored (its verdicts say little whatever its kappa):
see :func:`weak_judge_reasons`.

Effects a judge has by definition
---------------------------------
A probe that moves a judge's score the way the judge is defined to move is not a bias: exact match
gives 0 to an answer padded with filler or carrying a planted instruction, because that answer no
longer equals the reference. A judge declares such effects (``by_definition``, probe -> why; see
:class:`~llm_connect.grading.ExactMatchJudge`); the card then says "as exact match does by
definition" instead of "biased", and the effect is no defect in the verdict.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._html import Markup, fmt, frame_html, html_format, join, kv_table, p_text, with_interval
from ..errors import ValidationError
from ..quality import BaseLedger
from ..quality._ledger_io import temp_file_beside

__all__ = [
    "BIAS_ALPHA",
    "CARD_COLUMNS",
    "MAX_UNSCORED_RATE",
    "MAX_YES_RATE",
    "MIN_LABELLED",
    "MIN_MEAN_BIAS",
    "UNDECIDED_FROM",
    "JudgeCard",
    "JudgeCardRegistry",
    "ProbeEffect",
    "agreement_band",
    "agreement_verdict",
    "card_from_scores",
    "card_reference",
    "card_verdict",
    "cards_frame",
    "cards_from_report",
    "labels_to_settle",
    "mean_difference",
    "registry_path",
    "reliability_entry",
    "report_estimates",
    "selective_line",
    "style_entry",
    "weak_judge_reasons",
]

MIN_LABELLED = 20
"""Fewer paired items than this and no verdict beyond "not enough evidence" is given."""
BIAS_ALPHA = 0.05
"""A probe (or the length regression) is reported as a bias when its p-value is below this."""
MIN_MEAN_BIAS = 0.05
"""A mean bias against people is reported when its interval excludes 0 and it is at least this large."""
MAX_UNSCORED_RATE = 0.10
"""An unscored rate above this is reported."""
MAX_YES_RATE = 0.95
"""A judge that gives one verdict ("yes", or "no") to more than this share of the items it scored is flagged as
weak."""

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

_BANDS = ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial"), (math.inf, "almost perfect"))
_PROBE_WORDS = {
    "length": "longer answers",
    "format": "markdown formatting",
    "injection": "instructions planted in the answer",
    "position": "the answer shown first",
}


def _num(value: Any) -> float:
    """A float, NaN for None/NA/non-numbers."""
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


#: The places kappas, biases and their bounds are shown at in verdicts and weak-judge reasons. The
#: rules decide on the figure so rounded -- the one the user reads -- so a bound of ``9.84e-17`` (floating
#: point's zero) is ``0.00`` and decides as 0 does, never otherwise than its printed value suggests.
SHOWN_DIGITS = 2


def _shown(value: Any) -> float:
    """:func:`_num` rounded to :data:`SHOWN_DIGITS` places (no negative zero): the figure a verdict prints."""
    x = _num(value)
    return round(x, SHOWN_DIGITS) + 0.0 if math.isfinite(x) else x


def _finite(value: Any) -> bool:
    return math.isfinite(_num(value))


def agreement_band(kappa: float) -> str:
    """The Landis & Koch band of a kappa: ``slight``, ``fair``, ``moderate``, ``substantial``, ``almost perfect``."""
    k = _num(kappa)
    if not math.isfinite(k):
        raise ValidationError(f"kappa must be a finite number, got {kappa!r}")
    for upper, name in _BANDS:
        if k < upper:
            return name
    return _BANDS[-1][1]  # pragma: no cover - the last band is unbounded


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def _p(value: float) -> str:
    return p_text(value)  # the one p-value format: p=0.014, p < 0.001


@dataclass(frozen=True)
class ProbeEffect:
    """One bias probe's (or the length regression's) effect on a judge's score."""

    probe: str
    effect: float
    low: float = math.nan
    high: float = math.nan
    p_value: float = math.nan
    n: int = 0
    source: str = "probe"  # "probe" (perturb and re-judge) or "regression" (observational, OLS)
    #: Why the judge scores this way by its own definition (its ``by_definition`` for the probe: exact match
    #: gives 0 to a padded answer), or ``""``; a drop it explains is said as such, never as a bias.
    by_definition: str = ""

    @property
    def significant(self) -> bool:
        return _finite(self.p_value) and self.p_value < BIAS_ALPHA and _finite(self.effect) and self.effect != 0

    @property
    def expected(self) -> bool:
        """The effect is a drop the judge's own definition explains (:attr:`by_definition`): not a bias."""
        return bool(self.by_definition) and _finite(self.effect) and self.effect < 0

    def words(self) -> str:
        target = _PROBE_WORDS.get(self.probe, self.probe)
        if self.expected:
            return (f"scores {target} lower ({_signed(self.effect)}, {_p(self.p_value)}) by definition, not as a "
                    f"bias: {self.by_definition}")
        direction = "toward" if self.effect > 0 else "against"
        return f"biased {direction} {target} ({_signed(self.effect)}, {_p(self.p_value)})"


#: The kappa from which a judge whose interval still reaches chance is *undecided* rather than *no better than
#: chance*: the lower edge of the "fair" band. A point estimate below it is slight agreement at best.
UNDECIDED_FROM = 0.2


def labels_to_settle(kappa: float, kappa_low: float, n: int) -> int | None:
    """About how many labelled items in all would lift a kappa interval's lower end above 0, if the kappa held.

    An interval's half-width shrinks as ``1/sqrt(n)``: the lower half ``kappa - kappa_low`` measured on ``n``
    items is ``kappa`` (just enough to exclude 0) on ``n * ((kappa - kappa_low) / kappa) ** 2`` items.
    ``None`` when it cannot be said (``kappa <= 0``: no number of labels would; or a bound is missing).
    """
    k, lo = _num(kappa), _num(kappa_low)
    if not (math.isfinite(k) and math.isfinite(lo)) or k <= 0 or n <= 0:
        return None
    return max(int(n) + 1, math.ceil(n * ((k - lo) / k) ** 2))


def agreement_verdict(kappa: float, kappa_low: float, kappa_high: float, n: int, *, yes_rate: float = math.nan,
                      against: str = "against people", confidence: float = 0.95) -> str:
    """What a judge's agreement means, in words: the one wording of every verdict (cards, the command line, the
    demo, the report all come through here).

    Parameters
    ----------
    kappa, kappa_low, kappa_high : float
        Cohen's kappa against the reference and its interval (decided as printed, at :data:`SHOWN_DIGITS`).
    n : int
        The paired (labelled) items it was measured on.
    yes_rate : float, optional
        The share of the items it scored that the judge said "yes" to (NaN when unknown).
    against : str
        What it was checked against, as the line says it (``"against people"``).
    confidence : float
        The interval's level.

    Returns
    -------
    str
        One clause, by the rule in this module's docstring: *not enough evidence* (fewer than
        :data:`MIN_LABELLED` items, or no kappa); *one verdict* (it said the same on every item it scored:
        kappa is 0 by construction); *no better than chance* (the interval reaches 0 and kappa is below
        :data:`UNDECIDED_FROM`); *cannot tell yet* (the interval reaches 0 but kappa is fair or better: too
        wide to decide, and about how many labelled items in all would settle it,
        :func:`labels_to_settle`); else the Landis & Koch band, with "use its scores only with human
        correction" for slight and fair.
    """
    ci = f"{confidence:.0%} CI"
    k, lo, hi = _shown(kappa), _shown(kappa_low), _shown(kappa_high)  # decided as printed
    rate = _num(yes_rate)
    interval = f"{lo:.2f}..{hi:.2f}" if math.isfinite(lo) and math.isfinite(hi) else "no interval"
    if math.isfinite(rate) and rate in (0.0, 1.0):
        word = "yes" if rate == 1.0 else "no"
        return (f"one verdict {against}: it says {word} to every item it scored, so it cannot tell good answers "
                f"from bad (kappa {k:.2f} by construction); do not use its scores" if math.isfinite(k) else
                f"one verdict {against}: it says {word} to every item it scored, so it cannot tell good answers "
                "from bad; do not use its scores")
    if n < MIN_LABELLED or not math.isfinite(k):
        return (f"not enough evidence {against} (n={n}; at least {MIN_LABELLED} paired items needed); "
                "label more items before trusting it")
    if not math.isfinite(lo) or lo <= 0:
        if k < UNDECIDED_FROM or not math.isfinite(lo):
            return f"no better than chance {against} (kappa {k:.2f}, {ci} {interval}); do not use its scores"
        settle = labels_to_settle(k, lo, n)
        more = (f"; about {settle - n} more labelled items ({settle} in all) would settle it if its kappa holds"
                if settle is not None else "")
        return (f"cannot tell yet {against}: kappa {k:.2f} ({agreement_band(k)}), but its {ci} {interval} on {n} "
                f"items reaches chance, too wide to decide{more}; until then use its scores only with human "
                "correction (estimate_quality)")
    band = agreement_band(k)
    head = f"{band} agreement {against} (kappa {k:.2f}, {ci} {interval})"
    if band in ("slight", "fair"):
        head += "; use its scores only with human correction (estimate_quality)"
    return head


def card_verdict(
    name: str,
    *,
    kappa: float,
    kappa_low: float,
    kappa_high: float,
    n: int,
    reference: str = "human",
    people: bool = True,
    confidence: float = 0.95,
    biases: Iterable[ProbeEffect] = (),
    mean_bias: float = math.nan,
    bias_low: float = math.nan,
    bias_high: float = math.nan,
    unscored_rate: float = math.nan,
    yes_rate: float = math.nan,
) -> str:
    """The verdict on a judge: the one line of its card (:attr:`JudgeCard.verdict`), by the rule in this
    module's docstring.

    Not to be confused with a judge's verdict on an item (the ``verdict`` column of a pipeline's or a
    pairwise judge's rows): this is calibration's verdict on the judge itself.

    Parameters
    ----------
    name : str
        The judge's name, the line's first word.
    kappa, kappa_low, kappa_high : float
        Cohen's kappa against ``reference`` and its interval.
    n : int
        The paired (labelled) items it was measured on.
    reference : str
        What the judge was checked against (``"human"``, or another judge's name).
    people : bool
        Whether ``reference`` is human labels (the verdict then says "against people"; otherwise
        "against <reference>").
    confidence : float
        The interval's level.
    biases : iterable of ProbeEffect
        The bias probes' effects; the significant ones get a clause each.
    mean_bias, bias_low, bias_high : float
        The judge's mean difference from the reference and its interval (NaN: unknown).
    unscored_rate : float
        The share of items the judge left unscored (NaN: unknown).
    yes_rate : float
        The share of its scored items the judge said "yes" to (NaN: unknown).

    Returns
    -------
    str
        The agreement clause of :func:`agreement_verdict`, then the biases, the mean bias and the
        unscored rate.

    See Also
    --------
    agreement_verdict : the agreement clause alone, the one wording every verdict line shares.
    """
    against = "against people" if people else f"against {reference} (no human labels)"
    parts: list[str] = [agreement_verdict(kappa, kappa_low, kappa_high, n, yes_rate=yes_rate, against=against,
                                          confidence=confidence)]
    for b in biases:
        if b.significant:
            parts.append(b.words())
    mb, ml, mh = _shown(mean_bias), _shown(bias_low), _shown(bias_high)
    significant = math.isfinite(ml) and math.isfinite(mh) and (ml > 0 or mh < 0)
    if people and math.isfinite(mb) and abs(mb) >= MIN_MEAN_BIAS and significant:
        side = "higher" if mb > 0 else "lower"
        parts.append(f"scores {abs(mb):.2f} {side} than people on average ({ml:+.2f}..{mh:+.2f})")
    ur = _num(unscored_rate)
    if math.isfinite(ur) and ur > MAX_UNSCORED_RATE:
        parts.append(f"leaves {ur:.0%} of items unscored")
    return f"{name}: " + "; ".join(parts)


def weak_judge_reasons(*, kappa_low: float, kappa_high: float, yes_rate: float, people: bool = True,
                       confidence: float = 0.95) -> str:
    """Why a judge is weak, or ``""``: its kappa interval against people includes 0, or it gives one verdict
    to more than :data:`MAX_YES_RATE` of the items it scored, "yes" or "no" (see the module docstring). The
    interval is taken as printed, at :data:`SHOWN_DIGITS` places: a bound of ``9.84e-17`` is ``0.00``, so it
    includes 0."""
    reasons = []
    lo, hi = _shown(kappa_low), _shown(kappa_high)  # decided on the figures printed
    if people and math.isfinite(lo) and math.isfinite(hi) and lo <= 0 <= hi:
        reasons.append(f"its kappa interval against people includes 0 ({confidence:.0%} CI {lo:.2f}..{hi:.2f})")
    rate = _num(yes_rate)
    if math.isfinite(rate) and max(rate, 1.0 - rate) > MAX_YES_RATE:  # one verdict on almost every item, either one
        word, share = ("yes", rate) if rate >= 0.5 else ("no", 1.0 - rate)
        reasons.append(f"it says {word} to {share:.0%} of the items it scored (more than {MAX_YES_RATE:.0%})")
    return "; ".join(reasons)


def mean_difference(
    judge: Iterable[float | None], human: Iterable[float | None], *, confidence: float = 0.95, cluster: Any = None
) -> tuple[float, float, float, int]:
    """Mean of ``judge - human`` over the pairs where both are present, with a t interval.

    Returns ``(mean, low, high, n)``; NaN bounds when fewer than two pairs. ``cluster`` (one id per
    pair, e.g. its conversation; ``None``: independent pairs): the standard error is cluster-robust
    (:func:`~llm_connect.stats.clusters.cluster_mean_se`) with ``t(G − 1)``, and NaN bounds with fewer
    than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` clusters.
    """
    from scipy import stats

    from ..stats.clusters import MIN_CLUSTERS, cluster_mean_se

    a = np.asarray(pd.to_numeric(pd.Series(judge), errors="coerce"), dtype=float)
    b = np.asarray(pd.to_numeric(pd.Series(human), errors="coerce"), dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    n = int(d.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(d.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    if cluster is not None:
        ids = pd.Series(list(cluster), dtype=object)
        if len(ids) != keep.size:
            raise ValidationError(f"cluster has {len(ids)} ids for {keep.size} scores")
        se, g = cluster_mean_se(d, ids[keep].to_numpy())
        if g < MIN_CLUSTERS:
            return mean, math.nan, math.nan, n
        if se == 0:
            return mean, mean, mean, n
        half = float(stats.t.ppf(0.5 + confidence / 2, g - 1)) * se
        return mean, mean - half, mean + half, n
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return mean, mean, mean, n
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    return mean, mean - half, mean + half, n


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class JudgeCard:
    """What is known about one judge (``grader_id``) under one rubric (``rubric_hash``).

    Built by :func:`card_from_scores` (or ``CalibrationReport.judge_cards()``),
    saved in a :class:`JudgeCardRegistry`, read by routing.
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
    #: The share of the items it scored that the judge said "yes" to (at ``threshold``).
    yes_rate: float = math.nan
    #: Why the judge is flagged weak (:func:`weak_judge_reasons`), or ``""``.
    weak: str = ""
    created_at: str = field(default_factory=_now_iso)
    #: Kappa per group (``calibrate(..., by=COLUMN)``): ``{"by": COLUMN, "groups": [{"group", "n", "kappa",
    #: "kappa_low", "kappa_high", "note"}, ...]}`` from ``GroupBreakdown.card_entry``; ``None`` without groups.
    by_group: dict[str, Any] | None = field(default=None, compare=False)
    #: Run-to-run reliability from repeated judging (``judge_many(..., epochs=k)``): the
    #: :meth:`~llm_connect.grading.EpochReliability.card_entry` of
    #: :func:`~llm_connect.grading.epoch_reliability` (``epochs``, ``n_items``, ``agreement``,
    #: ``unanimous``, ``alpha`` with its ``level``, ``alpha_nominal``, ``alpha_interval``, ``labels``,
    #: ``threshold``, ``reducer``); ``None`` when the judge was run once. See :meth:`with_reliability`.
    reliability: dict[str, Any] | None = field(default=None, compare=False)
    #: What a pairwise judge rewards besides quality (:func:`style_entry`): ``{"line": "this judge pays
    #: +40 Elo for bold text (...); people pay +5 (...)", "features": [{"feature", "coefficient", "low",
    #: "high", "people", "people_low", "people_high"}, ...], "models": whether model strength was held
    #: fixed, "confidence"}``, the style coefficients (Chatbot Arena's style control) of the judge's own
    #: preferences beside people's; ``None`` for other judges or without the answers' texts.
    style: dict[str, Any] | None = field(default=None, compare=False)
    #: Where the judge's rubric came from, when :func:`~llm_connect.calibration.align` made it:
    #: ``{"kind": "align", "parent_rubric_hash", "labels": {"n", "pass", "fail"}, "split": {"selection",
    #: "heldout", "folds", ...}, "heldout": {"original": {...}, "aligned": {...}}, "difference", "candidate",
    #: "examples", "accepted", ...}``; ``None`` otherwise. The parent's card stays in the registry beside it.
    provenance: dict[str, Any] | None = field(default=None, compare=False)
    #: The judge as a selective judge (``calibrate(..., selective=(alpha, delta))``; Jung, Brahman & Choi,
    #: ICLR 2025): :meth:`~llm_connect.grading.SelectiveJudge.summary` (``source``, ``alpha``, ``delta``,
    #: ``cutoff``, ``coverage``, ``agreement``, ``guaranteed_agreement``, ``confidence_level``, ``note``,
    #: ``verdict``); its line is also a clause of :attr:`verdict`. ``None`` otherwise.
    selective: dict[str, Any] | None = field(default=None, compare=False)
    #: The items' clusters (``calibrate(..., cluster=...)``, turns of conversations): ``{"column": the
    #: column, "n_clusters": how many among the labelled items}``; the intervals resampled whole clusters.
    #: ``None`` for independent items.
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
        rows = [
            ("rubric", self.rubric_hash or "—"),
            ("checked against", self.reference + ("" if self.people else " (no human labels)")),
            ("labelled items", self.n_labelled if not self.cluster else
             f"{self.n_labelled} in {self.cluster.get('n_clusters')} clusters of {self.cluster.get('column')!r} "
             "(intervals resample whole clusters)"),
            ("percent agreement", _interval(self.percent_agreement, self.agreement_low, self.agreement_high)),
            ("Cohen's kappa", _interval(self.kappa, self.kappa_low, self.kappa_high)),
            ("mean bias (judge − human)", _interval(self.mean_bias, self.bias_low, self.bias_high)),
            ("unscored rate", fmt(self.unscored_rate)),
            ("says yes to", fmt(self.yes_rate)),
        ]
        if self.weak:
            rows.append(("flagged weak", self.weak))
        if self.position_consistency is not None:
            rows.append(("position consistency", fmt(self.position_consistency)))
        if self.reliability:
            r = self.reliability
            rows.append(("run-to-run reliability", f"{r.get('epochs')} epochs, {r.get('n_items')} items: agreement "
                         f"{fmt(_num(r.get('agreement')))}, Krippendorff's alpha ({r.get('level')}) "
                         f"{fmt(_num(r.get('alpha')))}"))
        if self.style and self.style.get("line"):
            rows.append(("rewards besides quality", self.style["line"]))
        if self.selective:
            rows.append((f"selective (alpha={self.selective.get('alpha')}, delta={self.selective.get('delta')})",
                         selective_line(self.selective)))
        if self.provenance and self.provenance.get("parent_rubric_hash"):
            p = self.provenance
            split = p.get("split") or {}
            rows.append(("aligned from", f"rubric {p.get('parent_rubric_hash')} ({p.get('candidate')}; "
                         f"{split.get('selection')} selection / {split.get('heldout')} held-out labels)"))
        if self.by_group:
            rows.append((f"Cohen's kappa by {self.by_group.get('by')}", "; ".join(
                f"{g.get('group')}: {_interval(*(_num(g.get(k)) for k in ('kappa', 'kappa_low', 'kappa_high')))}"
                f" (n={g.get('n')})" for g in self.by_group.get("groups") or ())))
        probes = Markup("")
        if self.probes:
            probes = frame_html(
                pd.DataFrame([{"probe": p.probe, "source": p.source, "effect": p.effect, "low": p.low,
                               "high": p.high, "p": p.p_value, "n": p.n,
                               "note": f"by definition: {p.by_definition}" if p.expected else ""}
                              for p in self.probes]),
                caption="bias probes",
            )
        return html_format(
            "<div class='llm-connect-card' style='border:1px solid #ccc;padding:6px;margin:6px 0'>"
            "<b>{}</b><p>{}</p>{}{}</div>",
            self.grader_id, self.verdict, kv_table(rows, attrs={"class_": "llm-connect"}), probes,
        )


def selective_line(entry: Mapping[str, Any]) -> str:
    """A selective judge's verdict clause from its summary (:attr:`JudgeCard.selective`): "judges 62% of items
    with at least 90% agreement with people, guaranteed at 90% confidence; abstains on 38%", or why it
    abstains on every item."""
    coverage = _num(entry.get("coverage"))
    if entry.get("cutoff") is None or not math.isfinite(coverage) or coverage <= 0:
        note = entry.get("note") or "no cut-off passed the guarantee"
        return f"abstains on every item ({note})"
    level, conf = _num(entry.get("guaranteed_agreement")), _num(entry.get("confidence_level"))
    return (f"judges {coverage:.0%} of items with at least {level:.0%} agreement with people, guaranteed at "
            f"{conf:.0%} confidence; abstains on {1 - coverage:.0%}")


def _interval(value: float, low: float, high: float) -> str:
    return with_interval(value, low, high)  # no-break spaces: an interval never wraps


# -- what a pairwise judge rewards besides quality (style control) -----------------------------------


def _elo(value: Any) -> str:
    v = _num(value)
    return "—" if not math.isfinite(v) else f"{v:+.0f}"


def _paid(feature: Any, coef: Any, low: Any, high: Any) -> str:
    from ..stats.style import FEATURE_WORDS

    words = FEATURE_WORDS.get(str(feature), str(feature))
    span = f" ({_elo(low)} to {_elo(high)})" if _finite(low) and _finite(high) else ""
    return f"{_elo(coef)} Elo for {words}{span}"


def style_entry(judge: Any, people: Any = None, *, models: bool = True,
                confidence: float = 0.95) -> dict[str, Any] | None:
    """A judge card's :attr:`JudgeCard.style`: the style coefficients of the judge's own preferences
    (``judge``: a :func:`~llm_connect.stats.style_effects` frame) beside people's (``people``: the
    same for people's preferences, on the pairs they labelled; ``None`` or a reason when there are
    none), and the card's one line, e.g. ``"this judge pays +40 Elo for bold text (+10 to +70); people pay
    +5 Elo for bold text (-20 to +30)"``: Elo per unit of each feature (for the Arena features, from
    both answers alike to only one answer having it), with the intervals. ``None`` when the judge's
    preferences gave no coefficient."""
    if not isinstance(judge, pd.DataFrame) or not len(judge):
        return None
    own = judge.set_index("feature")
    theirs = people.set_index("feature") if isinstance(people, pd.DataFrame) and len(people) else None
    order = own["coefficient"].abs().sort_values(ascending=False).index
    features = []
    for f in order:
        row: dict[str, Any] = {"feature": f, "coefficient": _num(own.at[f, "coefficient"]),
                               "low": _num(own.at[f, "low"]), "high": _num(own.at[f, "high"])}
        if theirs is not None and f in theirs.index:
            row.update(people=_num(theirs.at[f, "coefficient"]), people_low=_num(theirs.at[f, "low"]),
                       people_high=_num(theirs.at[f, "high"]))
        else:
            row.update(people=math.nan, people_low=math.nan, people_high=math.nan)
        features.append(row)
    line = "this judge pays " + ", ".join(_paid(r["feature"], r["coefficient"], r["low"], r["high"])
                                          for r in features)
    with_people = [r for r in features if _finite(r["people"])]
    if with_people:
        line += "; people pay " + ", ".join(_paid(r["feature"], r["people"], r["people_low"], r["people_high"])
                                            for r in with_people)
    elif theirs is None:
        line += "; no people's preferences to compare"
    if not models:
        line += " (model strength not held fixed: the pairs do not name their models)"
    return {"line": line, "features": features, "models": models, "confidence": confidence}


def card_from_scores(
    judge: Iterable[float | None],
    reference: Iterable[float | None],
    *,
    grader_id: str,
    rubric_hash: str | None = None,
    reference_name: str = "human",
    people: bool = True,
    threshold: float = 0.5,
    reference_threshold: float | None = None,
    probes: Iterable[ProbeEffect] = (),
    position_consistency: float | None = None,
    unscored_rate: float | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    verdicts: Any = None,
    reliability: Any = None,
    cluster: Any = None,
) -> JudgeCard:
    """A :class:`JudgeCard` from a judge's scores and reference scores (human labels) on the same items.

    ``judge``, ``reference``: equal-length score arrays in 0..1, NaN where
    missing (unscored, unlabelled). Kappa and percent agreement come from
    :func:`~llm_connect.calibration.pair_agreement` (seeded bootstrap
    intervals); the mean bias from :func:`mean_difference`. ``unscored_rate``
    defaults to the share of NaN in ``judge``. ``verdicts``: the judge's verdicts when they are not
    ``judge >= threshold`` (the out-of-fold verdicts of a threshold chosen by cross-validation,
    so that the card's kappa is never measured on the rows that chose it). A weak judge is
    flagged (``weak``; :func:`weak_judge_reasons`). ``reliability``: the judge's run-to-run
    reliability from repeated judging (an :class:`~llm_connect.grading.EpochReliability`, the frame
    of ``judge_many(..., epochs=k)`` or its card entry; see :func:`reliability_entry`). ``cluster``: one
    cluster id per item (a Series' name names the column; ``None``: independent items): the kappa and
    agreement bootstraps resample whole clusters and the mean bias's interval is cluster-robust (see
    :func:`~llm_connect.calibration.pair_agreement`); the card's ``cluster`` says which.
    """
    from ._agreement import pair_agreement

    a = np.asarray(pd.to_numeric(pd.Series(list(judge)), errors="coerce"), dtype=float)
    b = np.asarray(pd.to_numeric(pd.Series(list(reference)), errors="coerce"), dtype=float)
    if a.shape != b.shape:
        raise ValidationError(f"judge and reference scores differ in length ({a.size} vs {b.size})")
    pair = pair_agreement(a, b, judge_a=grader_id, judge_b=reference_name, threshold=threshold,
                          threshold_b=reference_threshold, n_boot=n_boot, confidence=confidence, seed=seed,
                          statistics=("percent_agreement", "cohen_kappa"), verdicts_a=verdicts, cluster=cluster)
    pa, kap = pair["percent_agreement"], pair["cohen_kappa"]
    mb, ml, mh, _ = (mean_difference(a, b, confidence=confidence, cluster=cluster) if people
                     else (math.nan,) * 3 + (0,))
    rate = float(np.isnan(a).mean()) if unscored_rate is None and a.size else _num(unscored_rate)
    probes = tuple(probes)
    scored = np.isfinite(a)
    said_yes = (a >= threshold)[scored]  # every item it scored, labelled or not
    yes_rate = float(said_yes.mean()) if said_yes.size else math.nan
    weak = weak_judge_reasons(kappa_low=kap.low, kappa_high=kap.high, yes_rate=yes_rate, people=people,
                              confidence=confidence)
    verdict = card_verdict(grader_id, kappa=kap.value, kappa_low=kap.low, kappa_high=kap.high, n=pair.n,
                            reference=reference_name, people=people, confidence=confidence, biases=probes,
                            mean_bias=mb, bias_low=ml, bias_high=mh, unscored_rate=rate, yes_rate=yes_rate)
    if weak:
        verdict += f"; flagged weak: {weak}"
    return JudgeCard(
        grader_id=grader_id, rubric_hash=rubric_hash, reference=reference_name, people=people, n_labelled=pair.n,
        percent_agreement=_num(pa.value), agreement_low=_num(pa.low), agreement_high=_num(pa.high),
        kappa=_num(kap.value), kappa_low=_num(kap.low), kappa_high=_num(kap.high),
        mean_bias=_num(mb), bias_low=_num(ml), bias_high=_num(mh), unscored_rate=rate, n_items=int(a.size),
        verdict=verdict, probes=probes, position_consistency=position_consistency, confidence=confidence,
        threshold=threshold, yes_rate=yes_rate, weak=weak, reliability=reliability_entry(reliability),
        cluster=({"column": pair.cluster, "n_clusters": pair.n_clusters} if pair.cluster is not None else None),
    )


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


# -- the registry -----------------------------------------------------------------------------


def registry_path(ledger: BaseLedger | str | os.PathLike[str]) -> Path:
    """Where the card registry of a ledger lives: ``<ledger path>.cards.json``."""
    path = getattr(ledger, "path", ledger)
    if not isinstance(path, (str, os.PathLike)):
        raise ValidationError(f"expected a ledger or a path, got {type(ledger).__name__}")
    return Path(os.fspath(path) + ".cards.json")


class JudgeCardRegistry:
    """A small JSON file of judge cards, one per ``(grader_id, rubric_hash)``.

    Saving rewrites the file atomically (a temporary file and ``os.replace``)
    under ``filelock.FileLock(<path>.lock)``, so several processes may save at
    once. ``JudgeCardRegistry.for_ledger(ledger)`` opens the one beside a ledger.
    """

    VERSION = 1

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @classmethod
    def for_ledger(cls, ledger: BaseLedger | str | os.PathLike[str]) -> JudgeCardRegistry:
        return cls(registry_path(ledger))

    @property
    def path(self) -> Path:
        return self._path

    def _lock(self) -> Any:
        from filelock import FileLock

        return FileLock(os.fspath(self._path) + ".lock")

    def _read(self) -> list[JudgeCard]:
        try:
            raw = self._path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ValidationError(f"cannot read the judge-card registry {self._path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValidationError(
                f"the judge-card registry {self._path} is not valid JSON ({exc}); "
                "delete it and re-run llm-connect calibrate --ledger to rebuild it"
            ) from exc
        cards = data.get("cards") if isinstance(data, Mapping) else None
        if not isinstance(cards, list):
            raise ValidationError(f"the judge-card registry {self._path} has no 'cards' list; delete and rebuild it")
        return [JudgeCard.from_dict(c) for c in cards]

    def cards(self) -> list[JudgeCard]:
        """Every card, in the order saved."""
        return self._read()

    def __iter__(self) -> Iterator[JudgeCard]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def get(self, grader_id: str, rubric_hash: str | None = None) -> JudgeCard | None:
        """The card of ``grader_id`` under ``rubric_hash``; with ``rubric_hash=None``, its newest card."""
        found = [c for c in self._read() if c.grader_id == grader_id
                 and (rubric_hash is None or c.rubric_hash == rubric_hash)]
        if not found:
            return None
        return max(found, key=lambda c: c.created_at)

    def versions(self, grader_id: str) -> list[JudgeCard]:
        """Every card of ``grader_id``, one per rubric, oldest first (an aligned rubric's card names its
        parent in ``provenance["parent_rubric_hash"]``)."""
        return sorted((c for c in self._read() if c.grader_id == grader_id), key=lambda c: c.created_at)

    def save(self, cards: JudgeCard | Sequence[JudgeCard]) -> None:
        """Add or replace cards (matched on ``(grader_id, rubric_hash)``)."""
        new = [cards] if isinstance(cards, JudgeCard) else list(cards)
        for c in new:
            if not isinstance(c, JudgeCard):
                raise ValidationError(f"expected JudgeCard objects, got {type(c).__name__}")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock():
                kept = {c.key: c for c in self._read()}
                for c in new:
                    kept[c.key] = c
                payload = json.dumps({"version": self.VERSION, "cards": [c.to_dict() for c in kept.values()]},
                                     indent=1, ensure_ascii=False, allow_nan=False)
                with temp_file_beside(self._path.parent, self._path.name + ".") as (fd, tmp):
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        fh.write(payload)
                        fh.flush()
                        os.fsync(fh.fileno())
                    os.replace(tmp, self._path)
        except OSError as exc:
            raise ValidationError(
                f"cannot write the judge-card registry {self._path}: {exc.strerror or exc}; "
                "check that its directory exists and is writable"
            ) from exc

    def frame(self) -> pd.DataFrame:
        """One row per card (:data:`CARD_COLUMNS`)."""
        return cards_frame(self._read())

    def _repr_html_(self) -> str:
        cards = self._read()
        if not cards:
            return html_format("<p>no judge cards in {}</p>", self._path)
        return join(c._repr_html_() for c in cards)

    def __repr__(self) -> str:
        return f"JudgeCardRegistry({os.fspath(self._path)!r})"


# -- from a calibration report -------------------------------------------------------------------


def cards_frame(cards: Iterable[JudgeCard]) -> pd.DataFrame:
    """A table of judge cards: one row per card (:meth:`JudgeCard.row`), the :data:`CARD_COLUMNS`."""
    return pd.DataFrame([c.row() for c in cards], columns=list(CARD_COLUMNS))


def card_reference(report: Any) -> tuple[str | None, bool]:
    """What a report's judges are checked against, and whether that is people.

    People when the report has human labels (``human``, else the first annotator
    column); otherwise the best non-LLM judge: exact match, else another judge
    without a model (embedding similarity); ``(None, False)`` when there is none.
    """
    labels = list(report.labels)
    if "human" in labels:
        return "human", True
    if labels:
        return labels[0], True
    families = report.meta.judge_families
    grader_ids = report.meta.grader_ids
    plain = [j for j in report.judges if families.get(j) is None]
    exact = [j for j in plain if str(grader_ids.get(j, j)).startswith("exact")]
    chosen = (exact or plain or [None])[0]
    return chosen, False


def _probe_effects(report: Any, judge: str) -> tuple[list[ProbeEffect], float | None]:
    effects: list[ProbeEffect] = []
    consistency: float | None = None
    if report.bias is not None:
        for r in report.bias.results:
            if r.judge != judge or not r.stats.n:
                continue
            s = r.stats
            effects.append(ProbeEffect(r.probe, _num(s.mean_shift), _num(s.shift_low), _num(s.shift_high),
                                       _num(s.p_value), int(s.n), by_definition=getattr(r, "by_definition", "")))
            if r.probe == "position" and _finite(s.flip_rate):
                consistency = 1.0 - float(s.flip_rate)
    if not any(e.probe == "length" for e in effects):
        try:
            eff = report.length_effect(judge)
        except (ValueError, KeyError, np.linalg.LinAlgError):
            eff = None
        if eff is not None and _finite(eff.coef):
            declared = (getattr(report.meta, "by_definition", None) or {}).get(judge) or {}
            effects.append(ProbeEffect("length", float(eff.coef), _num(eff.low), _num(eff.high), _num(eff.p_value),
                                       int(eff.n), source="regression", by_definition=declared.get("length", "")))
    return effects, consistency


def cards_from_report(report: Any) -> list[JudgeCard]:
    """A :class:`JudgeCard` for every machine judge of a :class:`~llm_connect.calibration.CalibrationReport`.

    Each judge is checked against :func:`card_reference` (people when labelled);
    its probes (and, where no length probe ran, the length regression) become
    the card's bias effects; a pairwise judge's position consistency is one
    minus the position probe's flip rate; a judge run in epochs (``calibrate(..., epochs=k)``)
    has its run-to-run reliability in ``reliability``. The verdict line names the judge as
    the report does; the card is keyed by its ``grader_id`` and rubric hash.
    """
    ref, people = card_reference(report)
    scores = report.scores
    grader_ids = report.meta.grader_ids
    rubric_hashes = report.meta.rubric_hashes
    usage = report.meta.usage
    cards = []
    n = len(scores)
    for judge in report.judges:
        if judge == ref:
            continue
        column = scores[f"score_{judge}"].to_numpy(dtype=float)
        reference = (scores[f"score_{ref}"].to_numpy(dtype=float) if ref is not None
                     else np.full(n, math.nan))
        u = usage.get(judge) or {}
        unscored = (u.get("unscored", 0) + u.get("error", 0)) / n if n else math.nan
        probes, consistency = _probe_effects(report, judge)
        reliability = (getattr(report.meta, "reliability", None) or {}).get(judge)  # calibrate(..., epochs=k)
        choice = getattr(report.agreement, "chosen", {}).get(judge)
        cv = choice.verdicts if choice is not None and choice.reference == ref else None
        card = card_from_scores(
            column, reference, grader_id=str(grader_ids.get(judge, judge)), rubric_hash=rubric_hashes.get(judge),
            reference_name=ref or "nothing", people=people, threshold=report.threshold_of(judge),
            reference_threshold=report.threshold_of(ref) if ref is not None else None, probes=probes,
            position_consistency=consistency, unscored_rate=unscored, n_boot=report.n_boot,
            confidence=report.confidence, seed=report.seed, verdicts=cv, reliability=reliability,
            cluster=getattr(report, "cluster_ids", None),
        )
        if card.grader_id != judge:  # the verdict names the judge as the report does
            card = replace(card, verdict=judge + card.verdict[len(card.grader_id):])
        chosen = (getattr(report, "selective", None) or {}).get(judge)
        if chosen is not None and chosen.calibration is not None:  # calibrate(..., selective=...)
            entry = chosen.summary()
            card = replace(card, selective=entry, verdict=f"{card.verdict}; selective: {selective_line(entry)}")
        if getattr(report, "by_group", None) is not None and ref is not None:  # kappa per group
            card = replace(card, by_group=report.by_group.card_entry(judge, ref))
        cards.append(card)
    return cards


def report_estimates(
    report: Any, *, judge: str | None = None, by: str | None = "candidate_model", labelled: Any = None
) -> pd.DataFrame | None:
    """PPI++ / human-only / judge-only estimates of the candidates' quality from a calibration report.

    ``judge``: the machine judge whose scores are corrected (default: the one
    with the highest kappa against people); the human labels are the report's
    reference label column (``human``, else the first annotator). ``labelled``:
    an optional boolean mask of the rows whose label may be used (e.g. a random
    sample, to show what a few labels buy); the others count as unlabelled.
    Grouped ``by`` the candidate's model when the data names one. ``None`` when
    there are no human labels or no machine judge.
    """
    from ..stats.estimates import estimate_quality

    ref, people = card_reference(report)
    if not people or ref is None or not report.judges:
        return None
    scores = report.scores
    if judge is None:
        best, best_kappa = None, -math.inf
        for j in report.judges:
            try:
                k = report.agreement.pair(j, ref)["cohen_kappa"].value
            except KeyError:
                continue
            if _finite(k) and k > best_kappa:
                best, best_kappa = j, float(k)
        judge = best or report.judges[0]
    human = scores[f"score_{ref}"].to_numpy(dtype=float).copy()
    if labelled is not None:
        mask = np.asarray(labelled, dtype=bool)
        human[~mask] = math.nan
    frame = pd.DataFrame({"judge": scores[f"score_{judge}"].to_numpy(dtype=float), "human": human})
    group = None
    if by is not None and by in scores.columns and scores[by].notna().any():
        frame[by] = scores[by].astype(object).where(scores[by].notna(), "unknown").astype(str).to_numpy()
        group = by
    clusters = getattr(report, "cluster_ids", None)  # the conversations the report clustered by
    key = None
    if clusters is not None:
        key = str(clusters.name) if clusters.name not in frame.columns else f"{clusters.name}_cluster"
        frame[key] = clusters.to_numpy()
    out = estimate_quality(frame, judge="judge", human="human", by=group, cluster=key)
    out.insert(0, "judge", judge)
    return out
