"""Verdicts in words: the one rule that turns a judge's agreement with people into a line a user can act on.

A calibration run measures; this module decides. :func:`agreement_verdict` words every verdict (the
cards, the command line's verdict lines, the demo and the report all print what it says), and
:func:`card_verdict` adds the judge's biases to it. With ``k`` the judge's Cohen's kappa against the
reference, ``[lo, hi]`` its bootstrap interval (``confidence``, 95% by default) on ``n`` paired items,
and the share of its scored items it said "yes" to:

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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .._html import p_text
from ..errors import ValidationError

__all__ = [
    "BIAS_ALPHA",
    "MAX_UNSCORED_RATE",
    "MAX_YES_RATE",
    "MIN_LABELLED",
    "MIN_MEAN_BIAS",
    "SHOWN_DIGITS",
    "UNDECIDED_FROM",
    "ProbeEffect",
    "agreement_band",
    "agreement_verdict",
    "card_verdict",
    "labels_to_settle",
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
    """The Landis & Koch band of a kappa: ``slight``, ``fair``, ``moderate``, ``substantial``, ``almost perfect``.

    Parameters
    ----------
    kappa : float
        A Cohen's kappa (any finite number; a negative kappa, worse than chance, is ``slight`` too). It is
        taken as given, not rounded to :data:`SHOWN_DIGITS`.

    Returns
    -------
    str
        ``"slight"`` below 0.2, ``"fair"`` below 0.4, ``"moderate"`` below 0.6, ``"substantial"`` below 0.8,
        ``"almost perfect"`` from 0.8 (each band includes its lower edge).

    Raises
    ------
    ValidationError
        When ``kappa`` is not a finite number (NaN, infinite, ``None``, a string or a bool).

    See Also
    --------
    agreement_verdict : The verdict line that names the band.

    Notes
    -----
    The bands are those of Landis, J. R. & Koch, G. G. (1977), "The measurement of observer agreement for
    categorical data", *Biometrics* 33(1), 159-174. Landis & Koch name kappas below 0 "poor"; here they are
    ``slight`` (the verdict rule has already said "no better than chance" of a judge whose interval reaches 0).

    Examples
    --------
    >>> from llm_connect.cards import agreement_band
    >>> agreement_band(0.45)
    'moderate'
    >>> agreement_band(0.8)
    'almost perfect'
    >>> agreement_band(-0.1)
    'slight'
    """
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
    """One bias probe's (or the length regression's) effect on a judge's score.

    A card keeps one per probe run on the judge (:attr:`JudgeCard.probes`); :func:`card_verdict` words each
    significant one as a clause of the verdict (:meth:`words`).

    Parameters
    ----------
    probe : str
        The probe: ``"length"``, ``"format"``, ``"injection"`` or ``"position"`` (what the verdict names as
        "longer answers", "markdown formatting", "instructions planted in the answer", "the answer shown
        first"); another name is shown as given.
    effect : float
        For a probe (``source="probe"``), the mean change of the judge's score when the answer is perturbed
        (perturbed minus original; a pairwise judge's position bias for ``"position"``); for the length
        regression (``source="regression"``), the length coefficient of ``score ~ 1 + length + controls``
        (:func:`~llm_connect.calibration.length_effect`). Positive: the judge scores the perturbed (longer)
        answer higher.
    low, high : float, default nan
        The interval on ``effect`` (a seeded bootstrap interval for a probe, the OLS interval for the
        regression); NaN when unknown.
    p_value : float, default nan
        The effect's p-value (the paired Wilcoxon signed-rank test for a probe, the OLS t-test for the
        regression); NaN when unknown, and then the effect is never significant.
    n : int, default 0
        The pairs (or rows) the effect was measured on.
    source : {"probe", "regression"}, default "probe"
        ``"probe"``: measured by perturbing the answers and judging them again; ``"regression"``: observed
        (OLS over the answers as they are), used when no length probe ran.
    by_definition : str, default ""
        Why the judge scores this way by its own definition (the judge's ``by_definition`` entry for the
        probe: exact match gives 0 to a padded answer), or ``""``. A drop it explains is worded as such
        (:attr:`expected`), never as a bias.

    See Also
    --------
    JudgeCard : The card that keeps the effects.
    card_verdict : Words the significant effects as clauses of the verdict.

    Examples
    --------
    >>> from llm_connect.cards import ProbeEffect
    >>> effect = ProbeEffect("length", 0.30, low=0.08, high=0.52, p_value=0.014, n=40)
    >>> effect.significant
    True
    >>> effect.words()
    'biased toward longer answers (+0.30, p=0.014)'
    >>> drop = ProbeEffect("length", -0.8, p_value=0.001, n=40,
    ...                    by_definition="a padded answer no longer equals the reference")
    >>> print(drop.words())  # doctest: +NORMALIZE_WHITESPACE
    scores longer answers lower (-0.80, p=0.001) by definition, not as a bias:
    a padded answer no longer equals the reference
    """

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
        """The p-value is below :data:`BIAS_ALPHA` and the effect is finite and not 0: the verdict words it."""
        return _finite(self.p_value) and self.p_value < BIAS_ALPHA and _finite(self.effect) and self.effect != 0

    @property
    def expected(self) -> bool:
        """The effect is a drop the judge's own definition explains (:attr:`by_definition`): not a bias."""
        return bool(self.by_definition) and _finite(self.effect) and self.effect < 0

    def words(self) -> str:
        """The effect as the verdict's clause says it, whether or not it is significant.

        Returns
        -------
        str
            ``"biased toward <target> (+0.30, p=0.014)"`` for a positive effect, ``"biased against <target>
            (...)"`` for a negative (or zero) one, or, for a drop the judge's definition explains
            (:attr:`expected`), ``"scores <target> lower (...) by definition, not as a bias: <why>"``. The
            effect is shown with two decimals and its sign, the p-value as ``p=0.014`` or ``p < 0.001``.
        """
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

    Parameters
    ----------
    kappa : float
        Cohen's kappa against people, measured on ``n`` items.
    kappa_low : float
        The lower end of its interval (at whatever confidence it was computed).
    n : int
        The paired (labelled) items the kappa and its interval were measured on.

    Returns
    -------
    int or None
        The labelled items needed in all (not the ones still to label: subtract ``n``), at least ``n + 1``;
        ``None`` when it cannot be said: ``kappa <= 0`` (no number of labels would lift the interval above 0),
        a missing (NaN) kappa or bound, or ``n <= 0``.

    See Also
    --------
    agreement_verdict : Says this figure in its *cannot tell yet* verdict.

    Notes
    -----
    An interval's half-width shrinks as ``1/sqrt(n)``: the lower half ``kappa - kappa_low`` measured on ``n``
    items is ``kappa`` (just enough to exclude 0) on ``n * ((kappa - kappa_low) / kappa) ** 2`` items, rounded
    up. It is a rough plan, not a guarantee: the kappa measured on more items will move.

    Examples
    --------
    >>> from llm_connect.cards import labels_to_settle
    >>> labels_to_settle(0.30, -0.05, 40)  # about 15 more labels
    55
    >>> labels_to_settle(0.0, -0.20, 40) is None  # no number of labels lifts a kappa of 0 above chance
    True
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
    yes_rate : float, default nan
        The share of the items it scored that the judge said "yes" to (NaN when unknown). Exactly 0 or 1
        gives the *one verdict* clause whatever the kappa.
    against : str, default "against people"
        What it was checked against, as the line says it.
    confidence : float, default 0.95
        The interval's level, as the line prints it ("95% CI"); it changes no decision.

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

    See Also
    --------
    card_verdict : The whole verdict line of a card: this clause, then the biases.
    agreement_band : The Landis & Koch band.
    weak_judge_reasons : Why a judge is flagged weak.

    Notes
    -----
    The bands are those of Landis, J. R. & Koch, G. G. (1977), "The measurement of observer agreement for
    categorical data", *Biometrics* 33(1), 159-174.

    Examples
    --------
    >>> from llm_connect.cards import agreement_verdict
    >>> agreement_verdict(0.62, 0.41, 0.80, 120)
    'substantial agreement against people (kappa 0.62, 95% CI 0.41..0.80)'
    >>> print(agreement_verdict(0.30, -0.05, 0.62, 40))  # doctest: +NORMALIZE_WHITESPACE
    cannot tell yet against people: kappa 0.30 (fair), but its 95% CI -0.05..0.62 on 40 items reaches
    chance, too wide to decide; about 15 more labelled items (55 in all) would settle it if its kappa
    holds; until then use its scores only with human correction (estimate_quality)
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
    """The verdict on a judge: the one line of its card (:attr:`~llm_connect.cards.JudgeCard.verdict`), by the
    rule in this module's docstring.

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
    reference : str, default "human"
        What the judge was checked against (``"human"``, or another judge's name).
    people : bool, default True
        Whether ``reference`` is human labels (the verdict then says "against people"; otherwise
        "against <reference> (no human labels)", and the mean bias is not worded).
    confidence : float, default 0.95
        The interval's level, as the line prints it.
    biases : iterable of ProbeEffect, default ()
        The bias probes' effects; the significant ones (:attr:`ProbeEffect.significant`) get a clause each.
    mean_bias, bias_low, bias_high : float, default nan
        The judge's mean difference from people and its interval (NaN: unknown). Worded when, as printed at
        :data:`SHOWN_DIGITS` places, the interval excludes 0 and the mean is at least :data:`MIN_MEAN_BIAS`
        in size.
    unscored_rate : float, default nan
        The share of items the judge left unscored (NaN: unknown); worded above :data:`MAX_UNSCORED_RATE`.
    yes_rate : float, default nan
        The share of its scored items the judge said "yes" to (NaN: unknown).

    Returns
    -------
    str
        The agreement clause of :func:`agreement_verdict`, then the biases, the mean bias and the
        unscored rate.

    See Also
    --------
    agreement_verdict : the agreement clause alone, the one wording every verdict line shares.
    JudgeCard : Keeps the line as its ``verdict``.

    Examples
    --------
    >>> from llm_connect.cards import ProbeEffect, card_verdict
    >>> line = card_verdict("gpt-4o-judge", kappa=0.62, kappa_low=0.41, kappa_high=0.80, n=120,
    ...                     biases=[ProbeEffect("length", 0.30, p_value=0.014, n=40)],
    ...                     mean_bias=0.12, bias_low=0.06, bias_high=0.18, unscored_rate=0.15)
    >>> for clause in line.split("; "):
    ...     print(clause)
    gpt-4o-judge: substantial agreement against people (kappa 0.62, 95% CI 0.41..0.80)
    biased toward longer answers (+0.30, p=0.014)
    scores 0.12 higher than people on average (+0.06..+0.18)
    leaves 15% of items unscored
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
    to almost every item.

    Parameters
    ----------
    kappa_low, kappa_high : float
        The judge's kappa interval against the reference. It is taken as printed, at :data:`SHOWN_DIGITS`
        places: a bound of ``9.84e-17`` is ``0.00``, so it includes 0. A NaN bound gives no reason.
    yes_rate : float
        The share of the items it scored that the judge said "yes" to; NaN when unknown (no reason then).
    people : bool, default True
        Whether the reference is people's labels. The interval reason is given only against people;
        against another judge only the one-verdict reason can be.
    confidence : float, default 0.95
        The interval's level, as the reason prints it ("95% CI"); it changes no decision.

    Returns
    -------
    str
        The reasons joined by ``"; "``: "its kappa interval against people includes 0 (95% CI -0.05..0.60)"
        when ``kappa_low <= 0 <= kappa_high``, and "it says yes to 97% of the items it scored (more than
        95%)" when "yes" (or "no") is more than :data:`MAX_YES_RATE` of them; ``""`` when the judge is not
        weak.

    See Also
    --------
    JudgeCard : Keeps the reasons in its ``weak`` field.
    agreement_verdict : The verdict line, which words the same cases its own way.

    Examples
    --------
    >>> from llm_connect.cards import weak_judge_reasons
    >>> print(weak_judge_reasons(kappa_low=-0.05, kappa_high=0.60, yes_rate=0.97))  # doctest: +NORMALIZE_WHITESPACE
    its kappa interval against people includes 0 (95% CI -0.05..0.60);
    it says yes to 97% of the items it scored (more than 95%)
    >>> weak_judge_reasons(kappa_low=0.41, kappa_high=0.80, yes_rate=0.60)
    ''
    """
    reasons = []
    lo, hi = _shown(kappa_low), _shown(kappa_high)  # decided on the figures printed
    if people and math.isfinite(lo) and math.isfinite(hi) and lo <= 0 <= hi:
        reasons.append(f"its kappa interval against people includes 0 ({confidence:.0%} CI {lo:.2f}..{hi:.2f})")
    rate = _num(yes_rate)
    if math.isfinite(rate) and max(rate, 1.0 - rate) > MAX_YES_RATE:  # one verdict on almost every item, either one
        word, share = ("yes", rate) if rate >= 0.5 else ("no", 1.0 - rate)
        reasons.append(f"it says {word} to {share:.0%} of the items it scored (more than {MAX_YES_RATE:.0%})")
    return "; ".join(reasons)


def selective_line(entry: Mapping[str, Any]) -> str:
    """A selective judge's verdict clause, from its summary (:attr:`JudgeCard.selective`).

    Parameters
    ----------
    entry : mapping
        The summary of :meth:`~llm_connect.grading.SelectiveJudge.summary` (as a card keeps it): this reads
        ``cutoff`` (``None``: no cut-off passed the guarantee), ``coverage`` (the share of items it judges),
        ``guaranteed_agreement``, ``confidence_level`` and ``note`` (why it abstains on every item). A
        missing key counts as ``None``.

    Returns
    -------
    str
        "judges 62% of items with at least 90% agreement with people, guaranteed at 90% confidence;
        abstains on 38%", or, when there is no cut-off or the coverage is 0 or unknown, "abstains on every
        item (<note>)" (the note defaults to "no cut-off passed the guarantee").

    See Also
    --------
    llm_connect.grading.SelectiveJudge : The selective judge whose summary this words.

    Notes
    -----
    The guarantee is that of Jung, J., Brahman, F. & Choi, Y. (2025), "Trust or Escalate: LLM Judges with
    Provable Guarantees for Human Agreement", ICLR 2025 (see :mod:`llm_connect.stats.selective`).

    Examples
    --------
    >>> from llm_connect.cards import selective_line
    >>> selective_line({"cutoff": 0.8, "coverage": 0.62, "guaranteed_agreement": 0.9,
    ...                 "confidence_level": 0.9})
    'judges 62% of items with at least 90% agreement with people, guaranteed at 90% confidence; abstains on 38%'
    >>> selective_line({"cutoff": None, "coverage": 0.0, "note": "too few labels"})
    'abstains on every item (too few labels)'
    """
    coverage = _num(entry.get("coverage"))
    if entry.get("cutoff") is None or not math.isfinite(coverage) or coverage <= 0:
        note = entry.get("note") or "no cut-off passed the guarantee"
        return f"abstains on every item ({note})"
    level, conf = _num(entry.get("guaranteed_agreement")), _num(entry.get("confidence_level"))
    return (f"judges {coverage:.0%} of items with at least {level:.0%} agreement with people, guaranteed at "
            f"{conf:.0%} confidence; abstains on {1 - coverage:.0%}")


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
    """A judge card's :attr:`JudgeCard.style`: what a pairwise judge pays for style, beside what people pay.

    Parameters
    ----------
    judge : pandas.DataFrame
        The style coefficients of the judge's own preferences: a
        :func:`~llm_connect.stats.style_effects` frame (columns ``feature``, ``coefficient``, ``low``,
        ``high``; Elo per unit of each feature: for the Arena features, from both answers alike to only one
        answer having it). Anything else, or an empty frame, gives ``None``.
    people : pandas.DataFrame, optional
        The same for people's preferences, on the pairs they labelled. Anything that is not a non-empty
        frame (``None``, or a text saying why there are none) counts as none: the line then says "no
        people's preferences to compare" (the text itself is not shown).
    models : bool, default True
        Whether the coefficients held model strength fixed (the pairs named their models); ``False`` adds
        "(model strength not held fixed: the pairs do not name their models)" to the line.
    confidence : float, default 0.95
        The level of the intervals in ``judge`` and ``people``, recorded in the entry (nothing is computed
        from it here).

    Returns
    -------
    dict or None
        ``{"line", "features", "models", "confidence"}``: ``line`` the card's one line, e.g. ``"this judge
        pays +40 Elo for bold text (+10 to +70); people pay +5 Elo for bold text (-20 to +30)"``;
        ``features`` one dict per feature of ``judge``, largest coefficient (in absolute value) first, with
        ``feature``, ``coefficient``, ``low``, ``high`` and people's ``people``, ``people_low``,
        ``people_high`` (NaN where people's frame has no such feature). ``None`` when the judge's
        preferences gave no coefficient.

    See Also
    --------
    llm_connect.stats.style_effects : Computes the coefficients.
    JudgeCard : Keeps the entry as its ``style``.

    Notes
    -----
    Style control is Chatbot Arena's (LMSYS, August 2024, "Does style matter? Disentangling style and
    substance in Chatbot Arena"): the Bradley-Terry model of the preferences with the style features'
    differences as extra terms (see :mod:`llm_connect.stats.style`).

    Examples
    --------
    >>> import pandas as pd
    >>> from llm_connect.cards import style_entry
    >>> judge = pd.DataFrame({"feature": ["bold", "length"], "coefficient": [40.0, 12.0],
    ...                       "low": [10.0, -5.0], "high": [70.0, 30.0]})
    >>> people = pd.DataFrame({"feature": ["bold"], "coefficient": [5.0], "low": [-20.0], "high": [30.0]})
    >>> entry = style_entry(judge, people)
    >>> print(entry["line"])  # doctest: +NORMALIZE_WHITESPACE
    this judge pays +40 Elo for bold text (+10 to +70), +12 Elo for length (-5 to +30);
    people pay +5 Elo for bold text (-20 to +30)
    >>> [f["feature"] for f in entry["features"]]
    ['bold', 'length']
    """
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
