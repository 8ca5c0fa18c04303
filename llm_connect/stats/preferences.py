"""Pairwise preferences as data: reading ``a`` / ``b`` / ``tie`` columns, their majority, and how
well two preference columns agree.

A preference says which of two answers is better: ``"a"``, ``"b"`` or ``"tie"`` (``None`` when
unlabelled). :func:`parse_preferences` reads a column of them (the words Chatbot Arena exports,
``model_a``/``model_b``/``tie (bothbad)``, are read too; numeric codes such as 1/2/0 need
``codes=``, see :func:`preference_codes`: a number is never guessed). Nothing is thresholded: a
tie is a third label, never a score of 0.5 read as a win.

Agreement of two preference columns (:func:`preference_agreement`):

- three-way agreement over ``{a, b, tie}``: percent agreement and Cohen's kappa (Cohen 1960,
  "A coefficient of agreement for nominal scales"; equal to scikit-learn's
  ``cohen_kappa_score``) with seeded percentile-bootstrap intervals, and Krippendorff's alpha at
  the nominal level (Krippendorff 2004, "Content Analysis"; the ``krippendorff`` package);
- accuracy on the pairs the reference did not call a tie (a judge's tie counts as not correct)
  and how many of those the judge decided at all, as MT-Bench reports agreement "without ties"
  (Zheng et al. 2023, "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena");
- the 3x3 confusion.

Position bias (:func:`position_bias`): of the order-judgments that picked an answer, the share
won by the answer shown first, its excess over 50% with an exact (Clopper-Pearson) interval and a
two-sided binomial test (``scipy.stats.binomtest``); with both orders every pair is shown both
ways, so answer quality cancels out and any excess is position alone (Wang et al. 2023, "Large
Language Models are not Fair Evaluators").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._validate import check_confidence
from .agreement import bootstrap_ci

__all__ = [
    "DEFAULT_CODES",
    "PREFERENCES",
    "majority_preference",
    "parse_preferences",
    "position_bias",
    "preference_agreement",
    "preference_codes",
]

#: The three labels of a pairwise preference.
PREFERENCES: tuple[str, ...] = ("a", "b", "tie")
#: What each label is read from by default (case and surrounding space ignored).
DEFAULT_CODES: dict[str, tuple[str, ...]] = {
    "a": ("a", "model_a"),
    "b": ("b", "model_b"),
    "tie": ("tie", "tie (bothbad)", "draw"),
}
_BLANK = {"", "na", "n/a", "nan", "none", "null"}


# -- reading preferences --------------------------------------------------------------------------


def _key(value: Any) -> str:
    """A code as compared: text stripped and case-folded; an integral number without ``.0``."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).casefold()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and math.isfinite(float(value)) and float(value).is_integer():
        return str(int(value))
    text = str(value).strip().casefold()
    try:
        f = float(text)
    except ValueError:
        return text
    return str(int(f)) if math.isfinite(f) and f.is_integer() else text


def preference_codes(codes: str | Mapping[str, Any] | None = None) -> dict[str, str]:
    """``{code: label}``: what each value of a preference column means.

    ``codes``: ``None`` for the default words (:data:`DEFAULT_CODES`), a mapping
    ``{"a": 1, "b": 2, "tie": 0}`` (a value may be a list of codes), or the same as text,
    ``"a=1,b=2,tie=0"`` (several codes for one label joined by ``|``: ``"tie=0|3"``). The labels
    given replace the default words entirely; every label must get at least one code.

    Parameters
    ----------
    codes : str or mapping, optional
        The codes (above).

    Returns
    -------
    dict of str to str
        Each code's label.

    Raises
    ------
    ValidationError
        Codes that cannot be read, or a label without a code.

    Examples
    --------
    >>> preference_codes("a=1,b=2,tie=0")
    {'1': 'a', '2': 'b', '0': 'tie'}
    """
    if codes is None:
        return {_key(c): label for label, cs in DEFAULT_CODES.items() for c in cs}
    if isinstance(codes, str):
        parsed: dict[str, list[str]] = {}
        for part in codes.split(","):
            if not part.strip():
                continue
            label, sep, values = part.partition("=")
            if not sep or not values.strip():
                raise ValidationError(f"preference codes {codes!r}: {part.strip()!r} is not LABEL=CODE; "
                                      "write them as a=1,b=2,tie=0")
            parsed.setdefault(label.strip().casefold(), []).extend(v for v in values.split("|") if v.strip())
        mapping: Mapping[str, Any] = parsed
    elif isinstance(codes, Mapping):
        mapping = {str(k).strip().casefold(): v for k, v in codes.items()}
    else:
        raise ValidationError(f"preference codes must be a mapping or text like 'a=1,b=2,tie=0', got {codes!r}")
    unknown = [k for k in mapping if k not in PREFERENCES]
    if unknown:
        raise ValidationError(f"preference codes name unknown label(s) {', '.join(map(repr, unknown))}; "
                              "use a, b and tie (e.g. a=1,b=2,tie=0)")
    missing = [k for k in PREFERENCES if k not in mapping]
    if missing:
        raise ValidationError(f"preference codes give no code for {', '.join(missing)}; "
                              "give all three, e.g. a=1,b=2,tie=0")
    out: dict[str, str] = {}
    for label, values in mapping.items():
        listed = [values] if isinstance(values, (str, int, float, np.integer, np.floating)) else list(values)
        for v in listed:
            k = _key(v)
            if k in _BLANK:
                raise ValidationError(f"preference code {v!r} for {label!r} is blank; blank means unlabelled")
            if k in out and out[k] != label:
                raise ValidationError(f"preference code {v!r} is given for both {out[k]!r} and {label!r}")
            out[k] = label
    return out


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    if isinstance(value, (float, np.floating)) and math.isnan(float(value)):
        return True
    return isinstance(value, str) and value.strip().casefold() in _BLANK


def parse_preferences(values: Iterable[Any], *, codes: str | Mapping[str, Any] | None = None,
                      column: str = "human") -> np.ndarray:
    """A preference column as an object array of ``"a"``, ``"b"``, ``"tie"`` or ``None`` (unlabelled).

    Blank, ``None`` and NaN are unlabelled. With the default ``codes`` a number is not a
    preference (1/2/0 and 0/1 are both in use): the error says to declare the codes. Any value
    that is not a code raises :class:`~llm_connect.errors.ValidationError` naming the column, a
    few of the values and the codes accepted.

    Parameters
    ----------
    values : iterable
        The column's values.
    codes : str or mapping, optional
        What the values mean (:func:`preference_codes`).
    column : str, default "human"
        The column's name, for the error.

    Returns
    -------
    ndarray of object
        ``"a"``, ``"b"``, ``"tie"`` or ``None`` per value.

    Examples
    --------
    >>> parse_preferences(["A", "tie", None, "b"]).tolist()
    ['a', 'tie', None, 'b']
    """
    table = preference_codes(codes)
    out: list[str | None] = []
    bad: list[Any] = []
    for v in values:
        if _missing(v):
            out.append(None)
            continue
        label = table.get(_key(v))
        if label is None:
            bad.append(v)
        out.append(label)
    if bad:
        shown = ", ".join(repr(b) for b in list(dict.fromkeys(map(str, bad)))[:5])
        numeric = all(_key(b).lstrip("-").isdigit() for b in bad)
        hint = ("numbers are not read as preferences unless you declare them: pass the codes, e.g. "
                "codes='a=1,b=2,tie=0' (--preference-codes a=1,b=2,tie=0)" if numeric and codes is None else
                "accepted: " + ", ".join(f"{label}={'|'.join(c for c, lab in table.items() if lab == label)}"
                                         for label in PREFERENCES))
        raise ValidationError(f"column {column!r} holds {len(bad)} value(s) that are not a preference: {shown}; "
                              f"{hint} (blank for unlabelled)")
    return np.asarray(out, dtype=object)


def majority_preference(rows: Sequence[Any]) -> np.ndarray:
    """Per pair, the label most annotators gave (``None`` when none labelled it).

    An even split between the top labels is ``"tie"``.

    Parameters
    ----------
    rows : sequence of ndarray
        One array of labels per annotator, aligned on the pairs.

    Returns
    -------
    ndarray of object
        The majority label per pair.
    """
    out: list[str | None] = []
    for labels in zip(*rows, strict=True):
        given = [lab for lab in labels if lab is not None]
        if not given:
            out.append(None)
            continue
        counts = {lab: given.count(lab) for lab in PREFERENCES if lab in given}
        top = max(counts.values())
        winners = [lab for lab, c in counts.items() if c == top]
        out.append(winners[0] if len(winners) == 1 else "tie")
    return np.asarray(out, dtype=object)


# -- agreement of two preference columns ---------------------------------------------------------

_CODE = {label: i for i, label in enumerate(PREFERENCES)}


def _encode(values: Iterable[Any]) -> np.ndarray:
    return np.asarray([_CODE.get(v, -1) if isinstance(v, str) else -1 for v in values], dtype=int)


def _agreement_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x == y).mean(axis=1)


def _kappa_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cohen's kappa over the three labels, per row of ``(k, n)`` label codes."""
    po = (x == y).mean(axis=1)
    pe = np.zeros(x.shape[0])
    for c in range(len(PREFERENCES)):
        pe += (x == c).mean(axis=1) * (y == c).mean(axis=1)
    den = 1.0 - pe
    out = np.full(x.shape[0], np.nan)
    ok = ~np.isclose(den, 0.0, atol=1e-12)
    out[ok] = (po[ok] - pe[ok]) / den[ok]
    return out


def _alpha_nominal(x: np.ndarray, y: np.ndarray) -> float:
    """Krippendorff's alpha at the nominal level of two raters (the ``krippendorff`` package); NaN
    when undefined (fewer than two items, or one label only)."""
    if len(x) < 2 or np.unique(np.concatenate([x, y])).size < 2:
        return math.nan
    import krippendorff

    return float(krippendorff.alpha(reliability_data=np.vstack([x, y]).astype(float),
                                    level_of_measurement="nominal"))


def preference_agreement(
    judge: Any,
    reference: Any,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Three-way agreement of two preference columns (``"a"``/``"b"``/``"tie"``/``None``) on the
    pairs both labelled: ``n``, ``percent_agreement`` and ``cohen_kappa`` with bootstrap intervals,
    ``krippendorff_alpha_nominal``, accuracy on the pairs ``reference`` did not call a tie
    (``n_non_tie``, ``accuracy_non_tie``: the judge's tie counts as not correct;
    ``decided_non_tie``: how many of them the judge decided), both tie rates, and the 3x3
    confusion as ``judge_<x>_human_<y>`` counts (the judge said x, the reference y).

    Parameters
    ----------
    judge : array-like
        The judge's preferences.
    reference : array-like
        The reference's (people's).
    n_boot : int, default 1000
        Bootstrap resamples.
    confidence : float, default 0.95
        The intervals' level.
    seed : int, optional
        The resampling seed (default 0).

    Returns
    -------
    dict
        The figures (above).
    """
    confidence = check_confidence(confidence)
    x_all, y_all = _encode(judge), _encode(reference)
    if len(x_all) != len(y_all):
        raise ValidationError(f"the two preference columns differ in length ({len(x_all)} vs {len(y_all)})")
    keep = (x_all >= 0) & (y_all >= 0)
    x, y = x_all[keep], y_all[keep]
    n = int(keep.sum())
    nan = math.nan
    row: dict[str, Any] = {"n": n}
    if n:
        pa = float(_agreement_rows(x[None], y[None])[0])
        kappa = float(_kappa_rows(x[None], y[None])[0])
    else:
        pa = kappa = nan
    (a_lo, k_lo), (a_hi, k_hi) = (nan, nan), (nan, nan)
    if n >= 2 and n_boot > 0:
        lo, hi = bootstrap_ci(lambda xs, ys: np.stack([_agreement_rows(xs, ys), _kappa_rows(xs, ys)], axis=1),
                              x, y, n_boot=n_boot, confidence=confidence, seed=seed)
        a_lo, k_lo = (float(v) for v in np.atleast_1d(lo))
        a_hi, k_hi = (float(v) for v in np.atleast_1d(hi))
    non_tie = y != _CODE["tie"]
    n_non_tie = int(non_tie.sum())
    row.update({
        "percent_agreement": pa, "agreement_low": a_lo, "agreement_high": a_hi,
        "cohen_kappa": kappa, "kappa_low": k_lo, "kappa_high": k_hi,
        "krippendorff_alpha_nominal": _alpha_nominal(x, y),
        "n_non_tie": n_non_tie,
        "accuracy_non_tie": float((x[non_tie] == y[non_tie]).mean()) if n_non_tie else nan,
        "decided_non_tie": int((x[non_tie] != _CODE["tie"]).sum()),
        "tie_rate_a": float((x == _CODE["tie"]).mean()) if n else nan,
        "tie_rate_b": float((y == _CODE["tie"]).mean()) if n else nan,
    })
    for j, jl in enumerate(PREFERENCES):
        for h, hl in enumerate(PREFERENCES):
            row[f"judge_{jl}_human_{hl}"] = int(((x == j) & (y == h)).sum())
    return row


def position_bias(first_wins: int, n: int, *, confidence: float = 0.95) -> dict[str, Any]:
    """How often the answer shown first won, of ``n`` order-judgments that picked an answer:
    ``first_shown_win_rate``, ``position_bias`` (the rate minus 0.5) with its exact
    Clopper-Pearson interval (``position_low``, ``position_high``), and the two-sided binomial
    test of a 50% rate (``position_p_value``, ``scipy.stats.binomtest``).

    Parameters
    ----------
    first_wins : int
        How often the first-shown answer won.
    n : int
        The order-judgments that picked an answer.
    confidence : float, default 0.95
        The interval's level.

    Returns
    -------
    dict
        ``n_position``, ``first_shown_win_rate``, ``position_bias``, ``position_low``, ``position_high``,
        ``position_p_value``.

    Examples
    --------
    >>> round(position_bias(30, 40)["position_bias"], 2)
    0.25
    """
    confidence = check_confidence(confidence)
    if n <= 0:
        return {"n_position": 0, "first_shown_win_rate": math.nan, "position_bias": math.nan,
                "position_low": math.nan, "position_high": math.nan, "position_p_value": math.nan}
    from scipy.stats import binomtest

    test = binomtest(int(first_wins), int(n), 0.5)
    ci = test.proportion_ci(confidence_level=confidence, method="exact")
    rate = first_wins / n
    return {"n_position": int(n), "first_shown_win_rate": rate, "position_bias": rate - 0.5,
            "position_low": float(ci.low) - 0.5, "position_high": float(ci.high) - 0.5,
            "position_p_value": float(test.pvalue)}
