"""Observational diagnostics: length effect, a length-controlled score, self-preference.

These read scores a judge has already given (no new judge calls). Each controls for correctness with a reference judge
or the human label, so that "longer answers score higher" is not mistaken for "longer answers are better".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._display import view
from .._docstrings import share_parameters
from ..errors import ValidationError
from ..stats.regression import OLSResult, ols

__all__ = ["LengthControlled", "LengthEffect", "SelfPreference", "disagreements", "length_controlled_scores",
           "length_effect", "ols", "reliability_table", "score_column", "self_preference"]


def score_column(scores: pd.DataFrame, judge: str) -> str:
    """The column of ``scores`` that holds ``judge``'s scores: ``judge`` itself, else ``score_<judge>``.

    Parameters
    ----------
    scores : pandas.DataFrame
        A scores frame (:func:`~llm_connect.calibration.score_items`) or any frame of score columns.
    judge : str
        A judge's or a label's name, or a column name.

    Returns
    -------
    str
        The column name.

    Raises
    ------
    ValidationError
        Neither column is there; the message names the judges the frame has.
    """
    for name in (judge, f"score_{judge}"):
        if name in scores.columns:
            return name
    have = [c[len("score_"):] for c in scores.columns if isinstance(c, str) and c.startswith("score_")]
    raise ValidationError(f"no scores for judge {judge!r}; judges here: {have}")


def _length_term(words: np.ndarray, transform: str) -> tuple[np.ndarray, str]:
    if transform == "log2":
        return np.log2(np.maximum(words, 0) + 1.0), "log2(words + 1)"
    if transform == "per100":
        return words / 100.0, "words / 100"
    raise ValidationError(f"transform must be 'log2' or 'per100', got {transform!r}")


@share_parameters
@dataclass(frozen=True)
class LengthEffect:
    """How a judge's score moves with answer length, holding the controls fixed (:func:`length_effect`).

    Parameters
    ----------
    judge : str
        The judge's name.
    controls : list of str
        The judges or labels held fixed.
    term : str
        The length term: ``"log2(words + 1)"`` or ``"words / 100"``.
    coef : float
        The length coefficient: the score change per unit of ``term`` (per doubling of the length, per 100 more words);
        NaN when it cannot be fitted.
    {low}
    {high}
    p_value : float
        The two-sided p-value of the coefficient (classical OLS errors).
    n : int
        The complete rows fitted.
    r2 : float
        The fit's R squared.
    fit : OLSResult
        The whole fit (every term's coefficient, interval and p-value).
    {note}
    """

    judge: str
    controls: list[str]
    term: str
    coef: float
    low: float
    high: float
    p_value: float
    n: int
    r2: float
    fit: OLSResult = field(repr=False)
    note: str = ""

    def _repr_html_(self) -> str:
        return str(view("length_effect_html")(self))


@share_parameters
def length_effect(scores: pd.DataFrame, judge: str, *, control: str | Sequence[str] | None = None,
                  length: str = "candidate_words", transform: str = "log2", confidence: float = 0.95) -> LengthEffect:
    """The length coefficient of ``score ~ 1 + length + controls`` (OLS), with its interval.

    Parameters
    ----------
    {scores}
    {judge}
    {control}
    length : str, default "candidate_words"
        The column of answer lengths in words (:func:`~llm_connect.stats.text_features`' columns are there).
    transform : {"log2", "per100"}, default "log2"
        ``"log2"``: the term is ``log2(words + 1)``, the coefficient the score change when the answer doubles in length;
        ``"per100"``: the change per 100 more words.
    {confidence}

    Returns
    -------
    LengthEffect
        The coefficient, its interval and p-value; a ``note`` says why it is missing (too few rows, a length collinear
        with the controls or constant).

    Raises
    ------
    ValidationError
        When a judge, a control or the length column is not in ``scores``, or ``transform`` is unknown.

    See Also
    --------
    length_controlled_scores : The scores with the length term removed.
    CalibrationReport.length_effect : The same on a report, controlling for its reference.

    Notes
    -----
    A judge that prefers longer answers at equal correctness shows verbosity bias (Zheng et al. 2023, "Judging
    LLM-as-a-Judge with MT-Bench and Chatbot Arena"). Ordinary least squares with classical errors
    (:func:`~llm_connect.stats.ols`); the controls stand in for correctness.
    """
    ycol = score_column(scores, judge)
    controls = [control] if isinstance(control, str) else list(control or [])
    ccols = [score_column(scores, c) for c in controls]
    if length not in scores.columns:
        raise ValidationError(f"no length column {length!r}; score the items with score_items() first")
    frame = scores[[ycol, length, *ccols]].apply(pd.to_numeric, errors="coerce").dropna()
    x_len, term = _length_term(frame[length].to_numpy(dtype=float), transform)
    X = np.column_stack([np.ones(len(frame)), x_len, *(frame[c].to_numpy(dtype=float) for c in ccols)])
    names = ["intercept", term, *controls]
    fit = ols(frame[ycol].to_numpy(dtype=float), X, names, confidence=confidence)
    note = ""
    if len(frame) <= X.shape[1]:
        note = f"too few complete rows ({len(frame)}) for {X.shape[1]} terms"
    elif not np.isfinite(fit.se[1]):
        note = "the length term is collinear with the controls or constant"
    res = fit[term]
    return LengthEffect(judge, controls, term, res["coef"], res["low"], res["high"], res["p_value"], fit.n,
                        fit.r2, fit, note)


@share_parameters
@dataclass(frozen=True)
class LengthControlled:
    """A length-controlled score (AlpacaEval 2's way): the fit's length term set to zero.

    Parameters
    ----------
    judge : str
        The judge's name.
    coef : float
        The coefficient of the bounded length term ``tanh(length difference / sd)``.
    {low}
    {high}
    scores : pandas.DataFrame
        One row per item: ``group``, ``score``, ``length_term`` and ``score_<judge>_lc`` (the score with the length term
        removed; NaN on rows not fitted).
    summary : pandas.DataFrame
        One row per group: ``group``, ``n``, ``raw_mean``, ``lc_mean``, ``mean_length_term`` and ``difference``
        (``lc_mean - raw_mean``).
    """

    judge: str
    coef: float
    low: float
    high: float
    scores: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)

    def _repr_html_(self) -> str:
        return str(view("length_controlled_html")(self))


@share_parameters
def length_controlled_scores(scores: pd.DataFrame, judge: str, *, control: str | Sequence[str] | None = None,
                             by: str | None = "model_family", confidence: float = 0.95) -> LengthControlled:
    """The judge's scores with the pull of answer length removed.

    Fits ``score ~ 1 + group + controls + tanh(length difference / sd)`` by OLS and predicts with the length term set to
    zero. The length difference is the candidate's words minus the baseline's (``candidate_words``, ``baseline_words``),
    divided by its standard deviation; ``tanh`` bounds its pull.

    Parameters
    ----------
    {scores}
    {judge}
    {control}
    by : str or None, default "model_family"
        The column grouping the rows (one dummy per group; a missing value is the group ``"(unknown)"``); ``None`` or a
        column the frame lacks: one group, ``"all"``.
    {confidence}

    Returns
    -------
    LengthControlled
        The length coefficient with its interval, the adjusted score per item and the raw and adjusted mean per group.

    Raises
    ------
    ValidationError
        When a judge or control is not in ``scores``, or the length columns are missing.

    See Also
    --------
    length_effect : The length coefficient alone.
    llm_connect.stats.length_controlled_win_rate : AlpacaEval 2's length-controlled win rate of pairs.

    Notes
    -----
    The length control of AlpacaEval 2 (Dubois et al. 2024, "Length-Controlled AlpacaEval: A Simple Way to Debias
    Automatic Evaluators"), applied to a judge's scores rather than to win rates.
    """
    ycol = score_column(scores, judge)
    controls = [control] if isinstance(control, str) else list(control or [])
    ccols = [score_column(scores, c) for c in controls]
    for c in ("candidate_words", "baseline_words"):
        if c not in scores.columns:
            raise ValidationError(f"no column {c!r}; score the items with score_items() first")
    frame = scores.copy()
    group = (frame[by].astype(object).where(frame[by].notna(), "(unknown)") if by and by in frame.columns
             else pd.Series(["all"] * len(frame), index=frame.index))
    diff = pd.to_numeric(frame["candidate_words"], errors="coerce") - pd.to_numeric(
        frame["baseline_words"], errors="coerce")
    keep = frame[[ycol, *ccols]].apply(pd.to_numeric, errors="coerce").notna().all(axis=1) & diff.notna()
    sd = float(diff[keep].std(ddof=0)) if keep.any() else math.nan
    x_len = np.tanh(diff / sd) if sd and np.isfinite(sd) and sd > 0 else diff * 0.0
    levels = sorted(group[keep].unique().tolist(), key=str)
    dummies = [(group == lv).astype(float) for lv in levels[1:]]
    X = np.column_stack([np.ones(int(keep.sum())), x_len[keep], *(d[keep] for d in dummies),
                         *(pd.to_numeric(frame.loc[keep, c]) for c in ccols)])
    names = ["intercept", "length", *[f"group={lv}" for lv in levels[1:]], *controls]
    fit = ols(pd.to_numeric(frame.loc[keep, ycol]).to_numpy(dtype=float), X, names, confidence=confidence)
    b = float(fit.coef[1]) if fit.n else math.nan
    adjusted = pd.to_numeric(frame[ycol], errors="coerce") - (b if np.isfinite(b) else 0.0) * x_len
    out = pd.DataFrame({"group": group, "score": pd.to_numeric(frame[ycol], errors="coerce"),
                        "length_term": x_len, f"score_{judge}_lc": adjusted.where(keep)})
    summary = out[keep].groupby("group", sort=True).agg(
        n=("score", "size"), raw_mean=("score", "mean"), lc_mean=(f"score_{judge}_lc", "mean"),
        mean_length_term=("length_term", "mean"),
    ).reset_index()
    summary["difference"] = summary["lc_mean"] - summary["raw_mean"]
    res = fit["length"] if fit.n else {"coef": math.nan, "low": math.nan, "high": math.nan}
    return LengthControlled(judge, res["coef"], res["low"], res["high"], out, summary)


@share_parameters
@dataclass(frozen=True)
class SelfPreference:
    """The judge's score for its own family's answers minus others', at equal correctness.

    Parameters
    ----------
    judge : str
        The judge's name.
    family : str or None
        The judge's model family (``None``: unknown, and nothing was measured).
    label : str
        What stood for correctness.
    difference : float
        The pooled own-minus-other mean score; positive: the judge favours its own family.
    {low}
    {high}
    strata : pandas.DataFrame
        One row per stratum (``incorrect``, ``correct``): ``n_own``, ``n_other``, ``mean_own``, ``mean_other``,
        ``difference`` and the Mann-Whitney ``p_value``.
    {note}
    """

    judge: str
    family: str | None
    label: str
    difference: float
    low: float
    high: float
    strata: pd.DataFrame = field(repr=False)
    note: str = ""

    def _repr_html_(self) -> str:
        return str(view("self_preference_html")(self))


@share_parameters
def self_preference(scores: pd.DataFrame, judge: str, *, family: str | None = None, label: str = "human",
                    threshold: float = 0.5, n_boot: int = 1000, confidence: float = 0.95,
                    seed: int | None = 0) -> SelfPreference:
    """Whether the judge scores answers of its own model family higher than others' at equal correctness.

    The items are split by ``label``'s verdict at ``threshold``; within each stratum the own-minus-other mean score is
    taken, and the strata are pooled with weights ``n_own * n_other / (n_own + n_other)``. The interval comes from a
    bootstrap that resamples within each stratum and family group. The answers' families are the ``model_family`` column
    (:func:`model_family` of ``candidate_model``).

    Parameters
    ----------
    {scores}
    {judge}
    family : str, optional
        The judge's model family; ``None``: ``scores.attrs["judge_families"][judge]``, as
        :func:`~llm_connect.calibration.score_items` records it.
    {label}
    threshold : float, default 0.5
        The label's pass threshold.
    {n_boot}
    {confidence}
    {seed}

    Returns
    -------
    SelfPreference
        The pooled difference with its interval and the strata; NaN with a ``note`` when the judge's or the
        answers' families are unknown, or no stratum has answers of both kinds.

    Raises
    ------
    ValidationError
        When ``judge`` or ``label`` is not in ``scores``.

    Notes
    -----
    Self-preference (Panickssery et al. 2024, "LLM Evaluators Recognize and Favor Their Own Generations"); each
    stratum's p-value is the Mann-Whitney U test (Mann & Whitney 1947, scipy's ``mannwhitneyu``).
    """
    from scipy.stats import mannwhitneyu

    ycol = score_column(scores, judge)
    lcol = score_column(scores, label)
    family = family or (scores.attrs.get("judge_families") or {}).get(judge)
    empty = pd.DataFrame(columns=["stratum", "n_own", "n_other", "mean_own", "mean_other", "difference", "p_value"])
    if not family:
        return SelfPreference(judge, None, label, math.nan, math.nan, math.nan, empty,
                              "no model family for this judge: pass family=")
    if "model_family" not in scores.columns or scores["model_family"].isna().all():
        return SelfPreference(judge, family, label, math.nan, math.nan, math.nan, empty,
                              "no candidate_model column: the answers' families are unknown")
    y = pd.to_numeric(scores[ycol], errors="coerce").to_numpy(dtype=float)
    lab = pd.to_numeric(scores[lcol], errors="coerce").to_numpy(dtype=float)
    fam = scores["model_family"].astype(object).to_numpy()
    ok = np.isfinite(y) & np.isfinite(lab) & pd.notna(fam)
    own = np.array([f == family for f in fam]) & ok
    other = ~np.array([f == family for f in fam]) & ok
    rows = []
    groups = []
    for stratum, mask in (("incorrect", lab < threshold), ("correct", lab >= threshold)):
        a, b = y[own & mask], y[other & mask]
        p = math.nan
        if len(a) and len(b) and np.ptp(np.r_[a, b]) > 0:
            p = float(mannwhitneyu(a, b).pvalue)
        rows.append({"stratum": stratum, "n_own": len(a), "n_other": len(b),
                     "mean_own": float(a.mean()) if len(a) else math.nan,
                     "mean_other": float(b.mean()) if len(b) else math.nan,
                     "difference": float(a.mean() - b.mean()) if len(a) and len(b) else math.nan, "p_value": p})
        if len(a) and len(b):
            groups.append((a, b))
    strata = pd.DataFrame(rows)
    if not groups:
        return SelfPreference(judge, family, label, math.nan, math.nan, math.nan, strata,
                              "no stratum has answers from both this family and others")
    weights = np.array([len(a) * len(b) / (len(a) + len(b)) for a, b in groups])
    diffs = np.array([a.mean() - b.mean() for a, b in groups])
    pooled = float((weights * diffs).sum() / weights.sum())
    rng = np.random.default_rng(seed)
    boot = np.zeros(n_boot)
    for a, b in groups:
        w = len(a) * len(b) / (len(a) + len(b))
        ma = a[rng.integers(0, len(a), size=(n_boot, len(a)))].mean(axis=1)
        mb = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1)
        boot += w * (ma - mb)
    boot /= weights.sum()
    tail = (1 - confidence) / 2 * 100
    low, high = (float(np.percentile(boot, tail)), float(np.percentile(boot, 100 - tail))) if n_boot else (
        math.nan, math.nan)
    return SelfPreference(judge, family, label, pooled, low, high, strata)


@share_parameters
def reliability_table(scores: pd.DataFrame, judge: str, *, label: str = "human", bins: int = 10, threshold: float = 0.5,
                      confidence: float = 0.95) -> pd.DataFrame:
    """The judge's scores in equal-width bins against how often ``label`` says "correct" in each.

    Parameters
    ----------
    {scores}
    {judge}
    {label}
    bins : int, default 10
        Equal-width bins of 0..1 (a score of 1 is in the last; a score outside 0..1 in the nearest).
    threshold : float, default 0.5
        The label's pass threshold.
    {confidence}

    Returns
    -------
    pandas.DataFrame
        One row per bin: ``bin_low``, ``bin_high``, ``n`` (items with both scores), ``mean_score``, ``correct_rate`` and
        its Wilson interval ``rate_low``, ``rate_high``; an empty bin has ``n = 0`` and NaN rates.

    Raises
    ------
    ValidationError
        When ``bins`` is below 1, or ``judge`` or ``label`` is not in ``scores``.

    Notes
    -----
    A reliability diagram (DeGroot & Fienberg 1983, "The comparison and evaluation of forecasters") with Wilson score
    intervals (Wilson 1927, "Probable inference, the law of succession, and statistical inference").
    """
    from scipy.stats import norm

    if bins < 1:
        raise ValidationError(f"bins must be >= 1, got {bins}")
    y = pd.to_numeric(scores[score_column(scores, judge)], errors="coerce").to_numpy(dtype=float)
    lab = pd.to_numeric(scores[score_column(scores, label)], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(y) & np.isfinite(lab)
    y, hit = y[ok], lab[ok] >= threshold
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, y, side="right") - 1, 0, bins - 1)
    z = float(norm.ppf(0.5 + confidence / 2))
    rows = []
    for i in range(bins):
        m = which == i
        n = int(m.sum())
        if n:
            p = float(hit[m].mean())
            centre = (p + z * z / (2 * n)) / (1 + z * z / n)
            half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
            rows.append((edges[i], edges[i + 1], n, float(y[m].mean()), p, max(0.0, centre - half),
                         min(1.0, centre + half)))
        else:
            rows.append((edges[i], edges[i + 1], 0, math.nan, math.nan, math.nan, math.nan))
    return pd.DataFrame(rows, columns=["bin_low", "bin_high", "n", "mean_score", "correct_rate", "rate_low",
                                       "rate_high"])


@share_parameters
def disagreements(scores: pd.DataFrame, judge_a: str, judge_b: str, *, top: int = 20) -> pd.DataFrame:
    """The items where two judges' scores differ most, largest gap first.

    Parameters
    ----------
    {scores}
    judge_a, judge_b : str
        The two judges, read like a judge's name (``score_<name>``) or a column.
    top : int, default 20
        How many items.

    Returns
    -------
    pandas.DataFrame
        The items both scored: ``id``, ``prompt``, ``baseline``, ``candidate`` (those the frame has), the two judges'
        scores under their names, and ``gap`` (the absolute difference), sorted by ``gap``.

    Raises
    ------
    ValidationError
        When a judge is not in ``scores``.
    """
    a = pd.to_numeric(scores[score_column(scores, judge_a)], errors="coerce")
    b = pd.to_numeric(scores[score_column(scores, judge_b)], errors="coerce")
    gap = (a - b).abs()
    cols = [c for c in ("id", "prompt", "baseline", "candidate") if c in scores.columns]
    out = scores[cols].copy()
    out[judge_a] = a
    out[judge_b] = b
    out["gap"] = gap
    return out[gap.notna()].sort_values("gap", ascending=False, kind="stable").head(top)

