"""Observational diagnostics: length effect, a length-controlled score, self-preference.

These read scores a judge has already given (no new judge calls). Each
controls for correctness with a reference judge or the human label, so that
"longer answers score higher" is not mistaken for "longer answers are better".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._display import view
from ..errors import ValidationError
from ..stats.regression import OLSResult, ols

__all__ = [
    "LengthControlled",
    "LengthEffect",
    "SelfPreference",
    "disagreements",
    "length_controlled_scores",
    "length_effect",
    "ols",
    "reliability_table",
    "score_column",
    "self_preference",
]


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


@dataclass(frozen=True)
class LengthEffect:
    """How a judge's score moves with answer length, holding the controls fixed."""

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


def length_effect(
    scores: pd.DataFrame,
    judge: str,
    *,
    control: str | Sequence[str] | None = None,
    length: str = "candidate_words",
    transform: str = "log2",
    confidence: float = 0.95,
) -> LengthEffect:
    """The length coefficient of ``score ~ 1 + length + controls`` (OLS), with its interval.

    ``control``: judges (e.g. ``"human"`` or ``"exact"``) whose scores stand in for
    correctness. ``transform="log2"`` reads the coefficient as the score change when
    the answer doubles in length; ``"per100"`` per 100 more words.
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


@dataclass(frozen=True)
class LengthControlled:
    """A length-controlled score (AlpacaEval-2 style): the fit's length term set to zero."""

    judge: str
    coef: float
    low: float
    high: float
    scores: pd.DataFrame = field(repr=False)
    summary: pd.DataFrame = field(repr=False)

    def _repr_html_(self) -> str:
        return str(view("length_controlled_html")(self))


def length_controlled_scores(
    scores: pd.DataFrame,
    judge: str,
    *,
    control: str | Sequence[str] | None = None,
    by: str | None = "model_family",
    confidence: float = 0.95,
) -> LengthControlled:
    """Fit ``score ~ 1 + group + controls + tanh(standardised length difference)`` and predict
    with the length term zeroed, as AlpacaEval 2's length-controlled win rate does.

    The length difference is the candidate's words minus the baseline's, divided by
    its standard deviation; ``tanh`` bounds its pull. ``by`` groups the rows (the
    candidate's model family by default) and ``summary`` compares each group's raw
    and length-controlled mean. ``scores`` gains ``score_<judge>_lc``.
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


@dataclass(frozen=True)
class SelfPreference:
    """The judge's score for its own family's answers minus others', at equal correctness."""

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


def self_preference(
    scores: pd.DataFrame,
    judge: str,
    *,
    family: str | None = None,
    label: str = "human",
    threshold: float = 0.5,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> SelfPreference:
    """Does the judge score answers from its own model family higher than others at equal
    correctness? Items are split by ``label``'s verdict (the human or exact-match label at
    ``threshold``); within each stratum the own-minus-other mean score is taken, and the
    strata are pooled with weights ``n_own * n_other / (n_own + n_other)``. The interval
    comes from a bootstrap that resamples within each stratum and family group.
    ``family`` defaults to the judge's own (``scores.attrs["judge_families"]``).
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


def reliability_table(
    scores: pd.DataFrame,
    judge: str,
    *,
    label: str = "human",
    bins: int = 10,
    threshold: float = 0.5,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """The judge's scores in ``bins`` equal-width bins against the rate of ``label`` saying
    "correct" (``label >= threshold``) in each, with a Wilson interval.

    Columns: ``bin_low``, ``bin_high``, ``n``, ``mean_score``, ``correct_rate``,
    ``rate_low``, ``rate_high``. Empty bins are kept with ``n = 0`` and NaN rates.
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


def disagreements(scores: pd.DataFrame, judge_a: str, judge_b: str, *, top: int = 20) -> pd.DataFrame:
    """The items where two judges' scores differ most (both scored), largest gap first."""
    a = pd.to_numeric(scores[score_column(scores, judge_a)], errors="coerce")
    b = pd.to_numeric(scores[score_column(scores, judge_b)], errors="coerce")
    gap = (a - b).abs()
    cols = [c for c in ("id", "prompt", "baseline", "candidate") if c in scores.columns]
    out = scores[cols].copy()
    out[judge_a] = a
    out[judge_b] = b
    out["gap"] = gap
    return out[gap.notna()].sort_values("gap", ascending=False, kind="stable").head(top)

