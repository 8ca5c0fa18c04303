"""Selective judging with a guaranteed agreement with people: exact bounds, fixed-sequence testing, cascades.

A judge that agrees with people 70% of the time overall is often right far more often on the
items it is sure of. Jung, Brahman & Choi (ICLR 2025, *Trust or Escalate: LLM Judges with
Provable Guarantees for Human Agreement*, arXiv:2407.18370) choose the confidence at which a
judge stops judging (it *abstains*, and the item goes to a stronger judge or to people) so that

    P( P(judge agrees with people | confidence >= λ̂) >= 1 − α ) >= 1 − δ,

the probability taken over the labelled calibration items from which ``λ̂`` is chosen, and the
agreement over fresh items from the same distribution. This module holds the statistics, on
arrays: each calibration item's confidence and whether the judge's verdict agreed with people's.

The procedure (the paper's, Section 2)
--------------------------------------
- **Selective risk.** For a cut-off ``λ`` the judge keeps (judges) the ``n(λ)`` calibration items
  with confidence ``>= λ``; ``k(λ)`` of them disagree with people. The empirical risk is
  ``R̂(λ) = k(λ)/n(λ)``; the risk ``R(λ)`` is the disagreement rate over fresh items the judge keeps.
- **Exact upper bound.** ``R̂⁺(λ) = sup{ R : P(Binomial(n(λ), R) <= k(λ)) >= δ }``, the exact
  binomial (Clopper–Pearson) one-sided upper confidence bound at level ``1 − δ``: the ``1 − δ``
  quantile of ``Beta(k + 1, n − k)`` (:func:`clopper_pearson_upper`; 1 when ``k = n``). It is the
  upper end of the two-sided Clopper–Pearson interval at level ``1 − 2δ``, which is how the tests
  check it against statsmodels' ``proportion_confint(k, n, alpha=2δ, method="beta")``.
  ``R̂⁺(λ) <= α`` is the exact binomial test of ``H0: R(λ) > α`` at level ``δ`` rejecting
  (``P(Binomial(n, α) <= k) <= δ``).
- **Fixed-sequence testing** (Bauer 1991, *Multiple testing in clinical trials*; the form of
  Angelopoulos et al. 2021, *Learn then Test*, arXiv:2110.01052, that the paper uses). The
  thresholds are tested one at a time from the most confident down, in an order fixed before
  the labels are seen, and testing stops at the first ``λ`` whose bound exceeds ``α``:
  ``λ̂ = inf{ λ : R̂⁺(λ') <= α for every tested λ' >= λ }``. Since every test but the first
  failure rejects, and the first true null in the order is rejected with probability at most
  ``δ``, no threshold with ``R(λ) > α`` is chosen except with probability at most ``δ``.
  When even the most confident tested threshold fails, ``λ̂ = +inf``: the judge abstains on
  every item (it never claims the level it has not shown).
- **The grid.** Thresholds from the most confident down, in steps of coverage: the confidences
  at which ``1/G, 2/G, ..., G/G`` of the calibration items are kept (``grid=G``, 50 by default:
  a step of 2% of the items), or every distinct confidence value (``grid="distinct"``, the
  finest: the paper's code tests a 5000-point grid of confidence values, which on a few hundred
  items is one threshold per item). The grid depends on the confidences only, never on the
  labels, so the sequence is fixed before the labels are read. A coarse grid is the stronger:
  every test is a chance to stop, and on a fine grid a single disagreement among the first few
  dozen items stops the sequence (in the simulations of ``tests/grading/test_selective.py``, 50 steps
  judge as many items as the finest grid on 134 and 300 items, and up to a fifth more on 1000,
  with the same guarantee). A threshold that keeps fewer than :func:`min_items` items is not
  tested: there even zero disagreements cannot pass the bound (``1 − δ^(1/n) > α``), so testing
  it would only stop the sequence before it starts (the paper's code likewise starts where at
  least 30 items are kept). :func:`min_items` is the smallest ``n`` with ``1 − δ^(1/n) <= α``:
  22 for ``α = δ = 0.1``, 45 for ``α = 0.05, δ = 0.1``, 59 for ``α = 0.05, δ = 0.05``; fewer
  labelled items than that is an error (:func:`fixed_sequence_cutoff` with ``strict=True``).

Cascades (the paper's Section 3, *Cascaded Selective Evaluation*)
-----------------------------------------------------------------
Judges ordered from cheap to strong; each is a selective judge whose cut-off is chosen, by the
procedure above at the same ``α`` and ``δ``, on the calibration items that every judge before it
abstained on (:func:`cascade_cutoffs`); what the last judge abstains on is left for people. Each
stage keeps the risk of the items it judges at most ``α`` (with its own ``1 − δ``), so the
disagreement over all judged items, a mixture of the stages' risks, is at most ``α`` too: the
cascade's guarantee is the paper's ``1 − α`` at level ``1 − δ``. (Read strictly, the stages'
failure events add up to at most ``k·δ`` for ``k`` judges; the simulation in
``tests/grading/test_selective.py`` shows the cascade's failure rate staying under ``δ``.)

Everything here is vectorised: the risk-coverage curve of ``n`` items is one sort and two
cumulative sums, so the guarantee is checked over thousands of simulated calibrations in a
second. Bad input raises :class:`~llm_connect.errors.ValidationError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = [
    "CURVE_COLUMNS",
    "DEFAULT_GRID",
    "Guarantee",
    "Guaranteed",
    "SelectiveCutoff",
    "cascade_cutoffs",
    "check_level",
    "clopper_pearson_upper",
    "critical_disagreements",
    "evaluate_cutoff",
    "fixed_sequence_cutoff",
    "fixed_sequence_cutoffs",
    "min_items",
    "risk_coverage",
]

#: The columns of a risk-coverage curve (:func:`risk_coverage`): one row per candidate cut-off,
#: most confident first. ``cutoff`` (judge the items with confidence >= it), ``n_judged``,
#: ``coverage`` (``n_judged`` / all items), ``disagreements``, ``risk`` (their share),
#: ``agreement`` (``1 − risk``), ``risk_upper`` (the exact upper bound at ``1 − δ``), ``tested``
#: (the threshold is on the grid and keeps at least :func:`min_items` items: it is in the fixed sequence) and
#: ``passed`` (tested, and every tested threshold down to it has ``risk_upper <= α``).
CURVE_COLUMNS = ("cutoff", "n_judged", "coverage", "disagreements", "risk", "agreement", "risk_upper", "tested",
                 "passed")


def check_level(value: Any, name: str) -> float:
    """``value`` as a float strictly between 0 and 1 (``alpha`` or ``delta``), else a ValidationError.

    Parameters
    ----------
    value : float
        The level.
    name : str
        Its name, for the error.

    Returns
    -------
    float
        The level.

    Raises
    ------
    ValidationError
        Not a number strictly between 0 and 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"{name} must be a number between 0 and 1 (e.g. 0.1), got {value!r}")
    v = float(value)
    if not 0.0 < v < 1.0:  # NaN fails too
        hint = f"; did you mean {v / 100:g}?" if 1 < v < 100 else ""
        raise ValidationError(f"{name} must be strictly between 0 and 1 (e.g. 0.1), got {value!r}{hint}")
    return v


@dataclass(frozen=True)
class Guarantee:
    """What a selective judge (or cascade) promises, as one frozen value: on the items it judges, agreement with
    people of at least ``1 − alpha``, with probability at least ``1 − delta`` over its calibration items; and,
    once calibrated, the ``cutoff`` it judges at and the share of the calibration items it judges there
    (``coverage``).

    The one definition of the guarantee: :class:`SelectiveCutoff`,
    :class:`~llm_connect.grading.SelectiveJudge`, :class:`~llm_connect.grading.SelectiveCascade` and its
    summary hold one and read their ``alpha``, ``delta``, ``cutoff``, ``coverage``, ``guaranteed_agreement``
    and ``confidence_level`` from it (:class:`Guaranteed`); nothing else computes them.

    Parameters
    ----------
    alpha, delta : float
        Strictly between 0 and 1 (:func:`check_level`).
    cutoff : float, optional
        The confidence at or above which the judge judges (``inf``: it abstains on every item); ``None`` before
        calibration, and for a cascade (each stage has its own).
    coverage : float, default NaN
        The share of the calibration items judged at ``cutoff`` (a cascade: by any stage); NaN before
        calibration, or for a cut-off set by hand.

    Raises
    ------
    ValidationError
        ``alpha`` or ``delta`` not strictly between 0 and 1, ``cutoff`` NaN, or ``coverage`` outside 0..1.
    """

    alpha: float
    delta: float
    cutoff: float | None = None
    coverage: float = math.nan

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_level(self.alpha, "alpha"))
        object.__setattr__(self, "delta", check_level(self.delta, "delta"))
        if self.cutoff is not None:
            if isinstance(self.cutoff, bool) or not isinstance(self.cutoff, (int, float, np.integer, np.floating)) \
                    or math.isnan(self.cutoff):
                raise ValidationError(f"cutoff must be a number (inf: abstain on every item) or None, got "
                                      f"{self.cutoff!r}")
            object.__setattr__(self, "cutoff", float(self.cutoff))
        coverage = float(self.coverage)
        if not (math.isnan(coverage) or 0.0 <= coverage <= 1.0 + 1e-9):
            raise ValidationError(f"coverage must be a share in 0..1 (NaN: unknown), got {self.coverage!r}")
        object.__setattr__(self, "coverage", coverage)

    @property
    def guaranteed_agreement(self) -> float:
        """``1 − alpha``: the agreement with people on the judged items that holds with probability ``1 − delta``."""
        return 1.0 - self.alpha

    @property
    def confidence_level(self) -> float:
        """``1 − delta``: the probability (over the calibration items) with which the guarantee holds."""
        return 1.0 - self.delta

    def describe(self) -> str:
        """``"at least 90% agreement with people, guaranteed at 90% confidence"``.

        Returns
        -------
        str
            The line.
        """
        return (f"at least {self.guaranteed_agreement:.0%} agreement with people, guaranteed at "
                f"{self.confidence_level:.0%} confidence")

    def to_dict(self) -> dict[str, Any]:
        """The guarantee as plain JSON.

        Returns
        -------
        dict
            ``alpha``, ``delta``, ``cutoff`` (``None`` when there is none or it is infinite: abstains on every
            item), ``coverage`` (``None`` when unknown), ``guaranteed_agreement`` and ``confidence_level``.
        """
        cutoff = self.cutoff if self.cutoff is not None and math.isfinite(self.cutoff) else None
        return {"alpha": self.alpha, "delta": self.delta, "cutoff": cutoff,
                "coverage": None if math.isnan(self.coverage) else self.coverage,
                "guaranteed_agreement": self.guaranteed_agreement, "confidence_level": self.confidence_level}


class Guaranteed:
    """A mixin for what holds a :class:`Guarantee` (its ``guarantee``: a field or a property): the two numbers
    read from it."""

    if TYPE_CHECKING:  # declared for the type checker only: a holder's field or property is the one at run time

        @property
        def guarantee(self) -> Guarantee: ...

    @property
    def guaranteed_agreement(self) -> float:
        """``1 − alpha``: the agreement with people on judged items, guaranteed with probability ``1 − delta``."""
        return self.guarantee.guaranteed_agreement

    @property
    def confidence_level(self) -> float:
        """``1 − delta``: the probability (over the calibration items) with which the guarantee holds."""
        return self.guarantee.confidence_level


def clopper_pearson_upper(k: Any, n: Any, delta: float) -> Any:
    """The exact one-sided upper confidence bound at level ``1 − δ`` on a binomial proportion.

    ``sup{ p : P(Binomial(n, p) <= k) >= δ }``, the ``1 − δ`` quantile of ``Beta(k + 1, n − k)``
    (Clopper & Pearson 1934); 1 when ``k = n``, NaN when ``n = 0``. ``k`` and ``n`` may be
    arrays (broadcast). It equals the upper end of statsmodels'
    ``proportion_confint(k, n, alpha=2 * delta, method="beta")``.

    Parameters
    ----------
    k : int or array-like
        Disagreements (failures).
    n : int or array-like
        Trials.
    delta : float
        One minus the confidence level.

    Returns
    -------
    float or ndarray
        The upper bound(s), broadcast.

    Examples
    --------
    >>> round(float(clopper_pearson_upper(0, 22, 0.1)), 4)
    0.0994
    """
    from scipy.stats import beta

    d = check_level(delta, "delta")
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    if np.any(k_arr < 0) or np.any(k_arr > n_arr) or np.any(n_arr < 0):
        raise ValidationError("clopper_pearson_upper needs 0 <= k <= n")
    k_b, n_b = np.broadcast_arrays(k_arr, n_arr)
    out = np.full(k_b.shape, np.nan)
    full = (k_b >= n_b) & (n_b > 0)
    inner = (k_b < n_b) & (n_b > 0)
    out[full] = 1.0
    if np.any(inner):
        out[inner] = beta.ppf(1.0 - d, k_b[inner] + 1.0, n_b[inner] - k_b[inner])
    return float(out) if out.ndim == 0 else out


def min_items(alpha: float, delta: float) -> int:
    """The fewest judged items for which the fixed-sequence test can pass at all.

    The smallest ``n`` whose bound with no disagreement, ``1 − δ^(1/n)``, is at most ``α``:
    ``ceil(log δ / log(1 − α))`` (checked against the exact bound, so rounding never makes it one
    too few). Fewer labelled items than this cannot support the guarantee whatever the judge.

    Parameters
    ----------
    alpha : float
        The most disagreement the guarantee allows.
    delta : float
        The chance that it fails.

    Returns
    -------
    int
        The fewest items.

    Examples
    --------
    >>> min_items(0.1, 0.1)
    22
    """
    return _min_items(check_level(alpha, "alpha"), check_level(delta, "delta"))


#: The default grid of thresholds: the confidences keeping 1/50, 2/50, ... of the items (see the module docstring).
DEFAULT_GRID = 50


def _check_grid(grid: Any) -> int | None:
    """``grid`` as a number of coverage steps, or ``None`` for every distinct confidence."""
    if grid == "distinct" or grid is None:
        return None
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 1:
        raise ValidationError(f"grid must be a positive number of coverage steps (e.g. 50) or 'distinct', got {grid!r}")
    return int(grid)


def _grid_ends(n: int, grid: int | None) -> np.ndarray:
    """The 0-based positions, in the most-confident-first order, of the items that close each coverage step."""
    if grid is None:
        return np.arange(n)
    return np.unique(np.ceil(np.arange(1, grid + 1) * n / grid).astype(np.int64) - 1)


@lru_cache(maxsize=256)
def _min_items(a: float, d: float) -> int:
    n = max(1, math.ceil(math.log(d) / math.log1p(-a)))
    while n > 1 and clopper_pearson_upper(0, n - 1, d) <= a:
        n -= 1
    while clopper_pearson_upper(0, n, d) > a:
        n += 1
    return n


def critical_disagreements(n: Any, alpha: float, delta: float) -> np.ndarray:
    """Per number of judged items ``n``: the most disagreements that still pass the exact test.

    The largest ``k`` with ``P(Binomial(n, α) <= k) <= δ`` (``-1`` when not even ``k = 0`` does),
    which is the largest ``k`` with :func:`clopper_pearson_upper` ``(k, n, δ) <= α``: the binomial
    tail is increasing in ``k`` and decreasing in the proportion. Comparing counts with it is how
    the fixed sequence decides (exactly, and without inverting a Beta function per threshold).

    Parameters
    ----------
    n : int or array-like
        Numbers of judged items.
    alpha : float
        The most disagreement the guarantee allows.
    delta : float
        The chance that it fails.

    Returns
    -------
    ndarray of int
        The largest passing count per ``n`` (``-1``: none passes).

    Examples
    --------
    >>> critical_disagreements([22, 50], 0.1, 0.1).tolist()
    [0, 1]
    """
    from scipy.stats import binom

    a, d = check_level(alpha, "alpha"), check_level(delta, "delta")
    n_arr = np.asarray(n, dtype=np.int64)
    q = np.asarray(binom.ppf(d, n_arr, a), dtype=float)  # the smallest k with P(Bin <= k) >= delta
    q = np.where(np.isfinite(q), q, -1.0).astype(np.int64)
    k = np.where(binom.cdf(q, n_arr, a) <= d, q, q - 1)
    k = np.where((k >= 0) & (binom.cdf(k, n_arr, a) > d), k - 1, k)  # guard against rounding in ppf
    return np.maximum(k, -1).astype(np.int64)


def _numbers(values: Any) -> np.ndarray:
    """``values`` as a flat float array (anything that is not a number becomes NaN)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "fiub":
        return arr.astype(float).ravel()
    return np.asarray(pd.to_numeric(pd.Series(arr.astype(object).ravel()), errors="coerce"), dtype=float)


def _agreements(agree: Any) -> np.ndarray:
    """Agreements as floats 1.0 / 0.0, NaN where missing; anything else is a ValidationError."""
    arr = np.asarray(agree)
    if arr.dtype.kind == "b":
        return arr.astype(float).ravel()
    if arr.dtype.kind in "fiu":
        a = arr.astype(float).ravel()
    else:
        raw = arr.astype(object).ravel()
        a = np.full(raw.shape, np.nan)
        for i, v in enumerate(raw):
            if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v)):
                continue
            if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)):
                a[i] = float(v)
            else:
                a[i] = -1.0  # reported below
    bad = np.isfinite(a) & (a != 0.0) & (a != 1.0)
    if bad.any():
        shown = np.asarray(agree, dtype=object).ravel()[np.flatnonzero(bad)[0]]
        raise ValidationError(f"agree must hold booleans (the judge's verdict agreed with people's), got {shown!r}")
    return a


def _clean(confidence: Any, agree: Any) -> tuple[np.ndarray, np.ndarray]:
    """Confidences and agreements as arrays, rows missing either dropped (an unscored or unlabelled item)."""
    c = _numbers(confidence)
    a = _agreements(agree)
    if c.shape != a.shape:
        raise ValidationError(f"confidence and agree differ in length ({c.size} vs {a.size})")
    keep = np.isfinite(c) & np.isfinite(a)
    return c[keep], a[keep].astype(bool)


def risk_coverage(confidence: Any, agree: Any, *, alpha: float = 0.1, delta: float = 0.1,
                  grid: int | str = DEFAULT_GRID) -> pd.DataFrame:
    """The risk-coverage curve of a judge on labelled items: one row per distinct confidence, most confident first.

    ``confidence``: the judge's confidence per item (higher = surer); ``agree``: whether its
    verdict agreed with people's (booleans). Items missing either (NaN / None) are left out.
    Columns: :data:`CURVE_COLUMNS`; ``tested`` and ``passed`` are the fixed-sequence test at
    ``alpha`` and ``delta`` on ``grid`` (see the module docstring).

    Parameters
    ----------
    confidence : array-like of float
        The judge's confidence per item.
    agree : array-like of bool
        Whether its verdict agreed with people's.
    alpha : float, default 0.1
        The most disagreement the guarantee allows.
    delta : float, default 0.1
        The chance that it fails.
    grid : int or "distinct", default 50
        The thresholds tested (coverage steps, or every distinct confidence).

    Returns
    -------
    DataFrame
        :data:`CURVE_COLUMNS`, one row per distinct confidence.
    """
    a_lvl, d_lvl = check_level(alpha, "alpha"), check_level(delta, "delta")
    steps = _check_grid(grid)
    c, ok = _clean(confidence, agree)
    total = c.size
    if not total:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    order = np.argsort(-c, kind="stable")
    cs, wrong = c[order], (~ok[order]).astype(np.int64)
    n_judged = np.arange(1, total + 1)
    k = np.cumsum(wrong)
    last = np.r_[cs[1:] != cs[:-1], True]  # the last item of each distinct value: all ties kept together
    ends = np.minimum.accumulate(np.where(last, np.arange(total), total)[::-1])[::-1]  # each item's tie group end
    on_grid = np.zeros(total, dtype=bool)
    on_grid[ends[_grid_ends(total, steps)]] = True
    cut, n_k, k_k = cs[last], n_judged[last], k[last]
    upper = clopper_pearson_upper(k_k, n_k, d_lvl)
    tested = on_grid[last] & (n_k >= min_items(a_lvl, d_lvl))
    rejects = k_k <= critical_disagreements(n_k, a_lvl, d_lvl)  # the exact test: risk_upper <= alpha
    ok_run = np.where(tested, rejects, True)  # an untested threshold neither passes nor stops the run
    passed = tested & (np.cumprod(ok_run) > 0)
    return pd.DataFrame({
        "cutoff": cut, "n_judged": n_k.astype(np.int64), "coverage": n_k / total,
        "disagreements": k_k.astype(np.int64), "risk": k_k / n_k, "agreement": 1.0 - k_k / n_k,
        "risk_upper": np.asarray(upper, dtype=float), "tested": tested, "passed": passed,
    }, columns=list(CURVE_COLUMNS))


@dataclass(frozen=True)
class SelectiveCutoff(Guaranteed):
    """The cut-off chosen by fixed-sequence testing (:func:`fixed_sequence_cutoff`) and what it keeps.

    Parameters
    ----------
    alpha : float
        The guarantee asked for: ``guaranteed_agreement = 1 − alpha``...
    delta : float
        ... at confidence ``1 − delta``.
    cutoff : float
        Judge an item when its confidence is ``>= cutoff`` (``inf``: abstain on every item).
    n : int
        Calibration items (scored and labelled).
    n_judged : int
        Those above the cut-off.
    coverage : float
        Their share.
    agreement : float
        The empirical agreement with people on those.
    risk_upper : float
        The exact upper bound on the risk there.
    n_min : int
        The fewest labelled items the guarantee can rest on (:func:`min_items`).
    tested : int
        Thresholds tested.
    curve : DataFrame
        The risk-coverage curve (:data:`CURVE_COLUMNS`).
    note : str, default ""
        Why the judge abstains on everything, or another remark (empty when there is none).
    """

    alpha: float
    delta: float
    cutoff: float
    n: int
    n_judged: int
    coverage: float
    agreement: float
    risk_upper: float
    n_min: int
    tested: int
    curve: pd.DataFrame = field(compare=False, repr=False)
    note: str = ""

    @property
    def guarantee(self) -> Guarantee:
        """The guarantee this cut-off gives: ``alpha``, ``delta``, ``cutoff`` and ``coverage`` as one frozen value."""
        return Guarantee(self.alpha, self.delta, self.cutoff, self.coverage)

    @property
    def abstains_on_all(self) -> bool:
        return not math.isfinite(self.cutoff)

    def judges(self, confidence: Any) -> np.ndarray:
        """Per item: whether its confidence reaches the cut-off (NaN never does).

        Parameters
        ----------
        confidence : array-like of float
            The confidences.

        Returns
        -------
        ndarray of bool
            Whether each item is judged.
        """
        c = _numbers(confidence)
        with np.errstate(invalid="ignore"):
            return np.isfinite(c) & (c >= self.cutoff)

    def describe(self) -> str:
        """One line: what it judges and with which guarantee (or why it abstains on everything).

        Returns
        -------
        str
            E.g. "judges 62% of items with at least 90% agreement with people, guaranteed at 90% confidence;
            abstains on 38%".
        """
        if self.abstains_on_all:
            return (f"abstains on every item: {self.note}" if self.note else "abstains on every item")
        return (f"judges {self.coverage:.0%} of items with {self.guarantee.describe()}; abstains on "
                f"{1 - self.coverage:.0%}")

    def to_dict(self) -> dict[str, Any]:
        """The numbers as plain JSON (``cutoff`` ``None`` when the judge abstains on everything).

        Returns
        -------
        dict
            The fields (the curve left out).
        """

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {**self.guarantee.to_dict(), "n": self.n, "n_judged": self.n_judged, "agreement": num(self.agreement),
                "risk_upper": num(self.risk_upper), "n_min": self.n_min, "tested": self.tested, "note": self.note}


def fixed_sequence_cutoff(confidence: Any, agree: Any, *, alpha: float = 0.1, delta: float = 0.1,
                          strict: bool = True, grid: int | str = DEFAULT_GRID) -> SelectiveCutoff:
    """The confidence cut-off with ``P(agreement on judged items >= 1 − α) >= 1 − δ`` (the module docstring).

    ``confidence``: per calibration item, the judge's confidence (higher = surer); ``agree``:
    whether the judge's verdict agreed with people's. Items missing either are left out.
    ``grid``: the thresholds tested (coverage steps, or ``"distinct"``; the module docstring).
    ``strict``: fewer usable items than :func:`min_items` is a
    :class:`~llm_connect.errors.ValidationError` naming how many are needed; with
    ``strict=False`` (a cascade's later stage) the judge abstains on everything instead, and
    ``note`` says why.

    Parameters
    ----------
    confidence : array-like of float
        Per calibration item, the judge's confidence (higher = surer).
    agree : array-like of bool
        Whether the judge's verdict agreed with people's.
    alpha : float, default 0.1
        The most disagreement allowed on the judged items.
    delta : float, default 0.1
        The chance that the guarantee fails.
    strict : bool, default True
        Too few items is an error (above); ``False``: abstain on everything.
    grid : int or "distinct", default 50
        The thresholds tested.

    Returns
    -------
    SelectiveCutoff
        The cut-off and what it keeps.

    Raises
    ------
    ValidationError
        With ``strict``, fewer usable items than :func:`min_items`; a bad ``alpha``, ``delta`` or ``grid``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> confidence = rng.random(200)
    >>> agree = rng.random(200) < 0.7 + 0.3 * confidence
    >>> fixed_sequence_cutoff(confidence, agree, alpha=0.2).describe()
    'judges 100% of items with at least 80% agreement with people, guaranteed at 90% confidence; abstains on 0%'
    """
    a_lvl, d_lvl = check_level(alpha, "alpha"), check_level(delta, "delta")
    need = min_items(a_lvl, d_lvl)
    curve = risk_coverage(confidence, agree, alpha=a_lvl, delta=d_lvl, grid=grid)
    n = int(curve["n_judged"].iloc[-1]) if len(curve) else 0
    if n < need:
        why = (f"{n} labelled item(s) with a confidence; the guarantee at alpha={a_lvl:g}, delta={d_lvl:g} needs at "
               f"least {need} (with fewer, even no disagreement at all cannot pass the exact binomial bound)")
        if strict:
            raise ValidationError(f"too few labelled items to calibrate: {why}; label more items or raise alpha "
                                  "or delta")
        return SelectiveCutoff(a_lvl, d_lvl, math.inf, n, 0, 0.0, math.nan, math.nan, need, 0, curve, note=why)
    tested = int(curve["tested"].sum())
    passed = curve[curve["passed"]]
    if not len(passed):
        first = curve[curve["tested"]].iloc[0]
        note = (f"even its {int(first['n_judged'])} most confident items (confidence >= {first['cutoff']:.4g}) have "
                f"{int(first['disagreements'])} disagreement(s): upper bound {first['risk_upper']:.3f} on the risk, "
                f"above alpha={a_lvl:g}")
        return SelectiveCutoff(a_lvl, d_lvl, math.inf, n, 0, 0.0, math.nan, math.nan, need, tested, curve, note=note)
    row = passed.iloc[-1]
    note = ""
    if curve["cutoff"].nunique() == 1:
        note = "the confidence took one value on every calibration item: the judge judges all items or none"
    return SelectiveCutoff(a_lvl, d_lvl, float(row["cutoff"]), n, int(row["n_judged"]), float(row["coverage"]),
                           float(row["agreement"]), float(row["risk_upper"]), need, tested, curve, note=note)


def fixed_sequence_cutoffs(confidence: Any, agree: Any, *, alpha: float = 0.1, delta: float = 0.1,
                           grid: int | str = DEFAULT_GRID) -> np.ndarray:
    """:func:`fixed_sequence_cutoff`'s cut-off for many calibration sets at once (one per row), vectorised.

    ``confidence`` and ``agree``: arrays of shape ``(runs, n)``, finite confidences and booleans
    (every item scored and labelled). Returns the ``runs`` cut-offs (``inf`` where the judge
    abstains on everything), equal to calling :func:`fixed_sequence_cutoff` on each row; for
    simulations of the guarantee (``tests/grading/test_selective.py``) and benchmarks.

    Parameters
    ----------
    confidence : ndarray
        ``(runs, n)`` finite confidences.
    agree : ndarray
        ``(runs, n)`` booleans.
    alpha : float, default 0.1
        The most disagreement allowed.
    delta : float, default 0.1
        The chance that the guarantee fails.
    grid : int or "distinct", default 50
        The thresholds tested.

    Returns
    -------
    ndarray
        The cut-offs.
    """
    a_lvl, d_lvl = check_level(alpha, "alpha"), check_level(delta, "delta")
    c = np.asarray(confidence, dtype=float)
    ok = np.asarray(agree, dtype=bool)
    if c.ndim != 2 or c.shape != ok.shape:
        raise ValidationError("fixed_sequence_cutoffs takes two arrays of the same shape (runs, items)")
    if not np.isfinite(c).all():
        raise ValidationError("fixed_sequence_cutoffs needs finite confidences (use fixed_sequence_cutoff for "
                              "data with missing values)")
    runs, n = c.shape
    steps = _check_grid(grid)
    if n < min_items(a_lvl, d_lvl):
        raise ValidationError(f"too few labelled items to calibrate: {n}; the guarantee at alpha={a_lvl:g}, "
                              f"delta={d_lvl:g} needs at least {min_items(a_lvl, d_lvl)}")
    order = np.argsort(-c, axis=1, kind="stable")
    cs = np.take_along_axis(c, order, axis=1)
    wrong = ~np.take_along_axis(ok, order, axis=1)
    k = np.cumsum(wrong, axis=1)
    n_k = np.broadcast_to(np.arange(1, n + 1), (runs, n))
    last = np.concatenate([cs[:, 1:] != cs[:, :-1], np.ones((runs, 1), dtype=bool)], axis=1)
    ends = np.minimum.accumulate(np.where(last, np.arange(n), n)[:, ::-1], axis=1)[:, ::-1]
    on_grid = np.zeros((runs, n), dtype=bool)
    np.put_along_axis(on_grid, ends[:, _grid_ends(n, steps)], True, axis=1)
    tested = last & on_grid & (n_k >= min_items(a_lvl, d_lvl))
    limit = critical_disagreements(np.arange(1, n + 1), a_lvl, d_lvl)  # per number of judged items
    ok_run = np.where(tested, k <= limit[np.newaxis, :], True)
    passed = tested & (np.cumprod(ok_run, axis=1) > 0)
    any_passed = passed.any(axis=1)
    last_passed = n - 1 - np.argmax(passed[:, ::-1], axis=1)
    return np.where(any_passed, cs[np.arange(runs), last_passed], np.inf)


def evaluate_cutoff(confidence: Any, agree: Any, cutoff: float) -> dict[str, float]:
    """How a cut-off does on other labelled items (for checking the guarantee on held-out data).

    Parameters
    ----------
    confidence : array-like of float
        The judge's confidences.
    agree : array-like of bool
        Whether its verdicts agreed with people's.
    cutoff : float
        The cut-off.

    Returns
    -------
    dict
        ``n``, ``n_judged``, ``coverage`` and ``agreement`` on the judged ones (NaN when none is judged).
    """
    c, ok = _clean(confidence, agree)
    keep = c >= cutoff
    judged = int(keep.sum())
    return {"n": int(c.size), "n_judged": judged, "coverage": judged / c.size if c.size else math.nan,
            "agreement": float(ok[keep].mean()) if judged else math.nan}


def cascade_cutoffs(confidences: Sequence[Any], agrees: Sequence[Any], *, alpha: float = 0.1,
                    delta: float = 0.1, grid: int | str = DEFAULT_GRID) -> list[SelectiveCutoff]:
    """The cut-off of each stage of a cascade (the module docstring, *Cascades*), cheapest judge first.

    ``confidences[j]``, ``agrees[j]``: stage ``j``'s confidence and agreement per calibration item
    (all stages aligned on the same items; NaN where the stage was not run or did not score).
    Stage 0 is calibrated on every item; stage ``j`` on the items every earlier stage abstained
    on (confidence below its cut-off, or none). The first stage needs :func:`min_items` usable
    items (a :class:`~llm_connect.errors.ValidationError` otherwise); a later stage reached by too
    few abstains on everything (its ``note`` says so).

    Parameters
    ----------
    confidences : sequence of array-like
        Per stage, the confidence per item.
    agrees : sequence of array-like
        Per stage, the agreement per item.
    alpha : float, default 0.1
        The most disagreement allowed.
    delta : float, default 0.1
        The chance that the guarantee fails.
    grid : int or "distinct", default 50
        The thresholds tested.

    Returns
    -------
    list of SelectiveCutoff
        One per stage.
    """
    if len(confidences) != len(agrees) or not len(confidences):
        raise ValidationError("cascade_cutoffs needs one confidence array and one agreement array per stage")
    conf = [_numbers(c) for c in confidences]
    n = conf[0].size
    if any(c.size != n for c in conf) or any(np.asarray(a, dtype=object).size != n for a in agrees):
        raise ValidationError("every stage's confidence and agreement must cover the same calibration items")
    remaining = np.ones(n, dtype=bool)
    out: list[SelectiveCutoff] = []
    for j, (c, a) in enumerate(zip(conf, agrees, strict=True)):
        c_here = np.where(remaining, c, np.nan)  # only the items every earlier stage abstained on
        cut = fixed_sequence_cutoff(c_here, a, alpha=alpha, delta=delta, strict=j == 0, grid=grid)
        out.append(cut)
        remaining &= ~cut.judges(c)
    return out
