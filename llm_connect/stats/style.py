"""The style of an answer as numbers, and style control: Chatbot Arena's four style features, their normalised
differences between the two answers of a comparison, and the Bradley–Terry fit with the style held fixed.

Chatbot Arena's style control (LMSYS, August 2024, "Does style matter? Disentangling style and
substance in Chatbot Arena"; FastChat's ``fastchat/serve/monitor/rating_systems.py``,
``preprocess_for_style`` / ``compute_style_control``, and ``add_markdown_info.py``,
``count_markdown_elements``) describes each answer by four counts:

==============  ==================================================================================
feature         counted as
==============  ==================================================================================
``length``      tokens (Arena: ``sum_assistant_tokens``, a tokenizer's count); here words and
                punctuation marks, ``\\w+|[^\\w\\s]``, a tokenizer-free stand-in: the feature is a
                ratio of the two answers' counts, so the tokenizer's scale cancels
``headers``     markdown headers, lines starting with one to six ``#`` and a space (``header_count``)
``lists``       list items, ordered (``1.``) and unordered (``-``, ``*``, ``+``) (``list_count``)
``bold``        bold spans, ``**text**`` and ``__text__`` (``bold_count``)
==============  ==================================================================================

Headers, list items and bold spans are counted outside fenced code blocks (FastChat removes them
first). The comparison's feature is the normalised difference ``(a - b) / (a + b + 1)`` of answer
A's count and answer B's (FastChat's ``apply_ratio`` with ``add_one``: the ``+ 1`` keeps two answers
without a header at 0 instead of 0/0), a number in (-1, 1): 0 when the two answers are alike, near
1 when only A has the feature. :func:`~llm_connect.stats.bradley_terry.leaderboard` with ``style=``
appends these columns to the Bradley–Terry regression.

The names ``sum_assistant_tokens``/``tokens``, ``header_count``, ``list_count`` and ``bold_count``
are read as the four features too (:func:`style_feature`). An answer given as a conversation (a list of
turns, or one JSON-encoded as Arena's published preference data stores it) is its assistant turns joined
by newlines.

**Style control** (the second half of this module; :func:`~llm_connect.stats.bradley_terry.leaderboard` with
``style=`` and :func:`~llm_connect.stats.bradley_terry.style_effects` are its entry points) is Chatbot Arena's
(FastChat's ``rating_systems.py``, ``preprocess_for_style`` and ``fit_contextual_bt``, and ``elo_analysis.py``,
``construct_style_matrices``): the Bradley-Terry logistic regression with style covariates appended (by default
the normalised differences above), the ratings read as the model coefficients with the style held at 0. It cannot
use the per-pair aggregation of the plain fit (every comparison has its own covariates): it is fitted per
comparison by Newton's method, and the bootstrap resamples comparisons, every resample fitted at once by chord
steps. A feature constant on the comparisons, or a linear combination of the models and the other features, is
dropped (never fitted into a singular matrix); when the features separate the outcomes the fit is redone with an
L2 penalty (:data:`STYLE_SEPARATION_PENALTY`) and flagged.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._bt_fit import _ELO, RIDGE, _board, _board_frame, _ratings
from ._comparisons import _Pairs, _worth
from ._validate import need_columns

__all__ = [
    "STYLE_COLUMNS",
    "STYLE_FEATURES",
    "STYLE_SEPARATION_PENALTY",
    "TEXT_COLUMNS",
    "TEXT_FEATURE_COLUMNS",
    "StyleEffects",
    "normalised_difference",
    "style_counts",
    "style_differences",
    "style_feature",
    "text_features",
]

#: Chatbot Arena's four style features, in Arena's order.
STYLE_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold")
_ALIASES: dict[str, str] = {
    "length": "length", "tokens": "length", "sum_assistant_tokens": "length", "sum_assistant_token": "length",
    "headers": "headers", "header": "headers", "header_count": "headers",
    "lists": "lists", "list": "lists", "list_count": "lists",
    "bold": "bold", "bold_count": "bold",
}
#: What each feature counts, in words (for pages and notes).
FEATURE_WORDS: dict[str, str] = {"length": "length", "headers": "markdown headers", "lists": "list items",
                                 "bold": "bold text"}

_TOKEN = re.compile(r"\w+|[^\w\s]")
_CODE_BLOCK = re.compile(r"```([^`]*)```")  # FastChat's pattern (get_element_counts)
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)  # h1..h6, as FastChat's six patterns summed
_ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
_UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
_BOLD_STARS = re.compile(r"\*\*[^*\n]+\*\*")
_BOLD_UNDERSCORES = re.compile(r"__[^_\n]+__")


def style_feature(name: Any) -> str | None:
    """The Arena feature ``name`` stands for, or ``None`` when it is not one.

    Parameters
    ----------
    name : str
        ``"length"``, ``"headers"``, ``"lists"``, ``"bold"``; also FastChat's names such as
        ``"header_count"``.

    Returns
    -------
    str or None
        The feature.

    Examples
    --------
    >>> style_feature("header_count"), style_feature("politeness")
    ('headers', None)
    """
    if not isinstance(name, str):
        return None
    return _ALIASES.get(name.strip().casefold())


def _text(value: Any) -> str:
    """An answer as one text. A conversation is its assistant turns joined by newlines, as FastChat
    joins them: a list of strings (or of ``{"role", "content"}`` messages), also when it arrives
    JSON-encoded (``'["first turn", "second"]'``, as Arena's published preference data stores
    responses). Missing is empty."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, str):
        stripped = value.strip()
        if not (stripped.startswith("[") and stripped.endswith("]")):
            return value
        try:
            decoded = json.loads(stripped)
        except ValueError:
            return value
        if not isinstance(decoded, list) or not all(v is None or isinstance(v, (str, dict)) for v in decoded):
            return value
        value = decoded
    if isinstance(value, (list, tuple, np.ndarray)):
        turns = []
        for turn in value:
            if isinstance(turn, dict):
                if turn.get("role", "assistant") == "assistant" and turn.get("content") is not None:
                    turns.append(str(turn["content"]))
            elif turn is not None and not (isinstance(turn, float) and turn != turn):
                turns.append(str(turn))
        return "\n".join(turns)
    return str(value)


def _counts(text: str) -> tuple[int, int, int, int]:
    prose = _CODE_BLOCK.sub("", text)
    return (len(_TOKEN.findall(text)), len(_HEADER.findall(prose)),
            len(_ORDERED.findall(prose)) + len(_UNORDERED.findall(prose)),
            len(_BOLD_STARS.findall(prose)) + len(_BOLD_UNDERSCORES.findall(prose)))


def style_counts(texts: Iterable[Any]) -> pd.DataFrame:
    r"""Per text, Chatbot Arena's four style counts: ``length`` (words and punctuation marks),
    ``headers``, ``lists`` (list items) and ``bold`` (bold spans), the last three outside fenced code
    blocks (see the module docstring). A missing text (``None``, NaN) counts as empty; a conversation
    (a list of turns, or JSON-encoded) counts its assistant turns joined by newlines.

    Parameters
    ----------
    texts : iterable of str
        The answers.

    Returns
    -------
    DataFrame
        ``length``, ``headers``, ``lists``, ``bold``, one row per text.

    Examples
    --------
    >>> style_counts(["# Title\n- a\n- **b**"]).to_dict("records")
    [{'length': 10, 'headers': 1, 'lists': 2, 'bold': 1}]
    """
    rows = [_counts(_text(t)) for t in texts]
    arr = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(STYLE_FEATURES))
    return pd.DataFrame(arr, columns=list(STYLE_FEATURES))


#: The columns of :func:`text_features`, in order.
TEXT_FEATURE_COLUMNS: tuple[str, ...] = (
    "candidate_chars", "candidate_words", "baseline_chars", "baseline_words", "length_ratio", "has_header",
    "has_list", "has_bold", "has_code", "markdown_features",
)
_INLINE_CODE = re.compile(r"```|`[^`\n]+`")


def _plain_texts(values: Iterable[Any]) -> pd.Series:
    """Each value as its text; a missing one (``None``, NaN) as empty. A JSON-looking string stays as it is."""
    series = pd.Series(list(values), dtype=object)
    return series.map(lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))


def text_features(candidate: Iterable[Any], baseline: Iterable[Any] | None = None) -> pd.DataFrame:
    r"""Length and format features of each candidate answer, and the length of its baseline.

    The markdown flags are the Arena style counts (:func:`style_counts`, outside fenced code blocks) above 0,
    so a calibration run's features and a leaderboard's style control read an answer's format one way.

    Parameters
    ----------
    candidate : iterable of str
        The answers; a missing one (``None``, NaN) counts as empty.
    baseline : iterable of str, optional
        The reference answers, one per candidate. ``None``: the baseline columns are missing (``<NA>``) and
        ``length_ratio`` is NaN.

    Returns
    -------
    DataFrame
        One row per candidate, indexed 0..n-1, with the columns :data:`TEXT_FEATURE_COLUMNS`:
        ``candidate_chars`` and ``candidate_words`` (whitespace-separated), ``baseline_chars`` and
        ``baseline_words``, ``length_ratio`` (candidate words over baseline words; NaN when the baseline has
        none), the flags ``has_header``, ``has_list`` (ordered or unordered items), ``has_bold`` and
        ``has_code`` (a code fence or inline code), and their count ``markdown_features``.

    Raises
    ------
    ValidationError
        When ``baseline`` does not have one text per candidate.

    See Also
    --------
    style_counts : The Arena counts behind the markdown flags.
    llm_connect.calibration.score_items : Adds these columns to every scored item.

    Examples
    --------
    >>> f = text_features(["## Paris\n\n- **the capital**", "Paris"], ["Paris", "Paris"])
    >>> f["candidate_words"].tolist(), f["length_ratio"].tolist(), f["markdown_features"].tolist()
    ([5, 1], [5.0, 1.0], [3, 0])
    """
    cand = _plain_texts(candidate)
    out = pd.DataFrame(index=range(len(cand)))
    out["candidate_chars"] = cand.str.len().astype("int64")
    out["candidate_words"] = cand.map(lambda s: len(s.split())).astype("int64")
    if baseline is not None:
        base = _plain_texts(baseline)
        if len(base) != len(cand):
            raise ValidationError(f"candidate and baseline differ in length ({len(cand)} vs {len(base)})")
        out["baseline_chars"] = base.str.len().astype("int64")
        out["baseline_words"] = base.map(lambda s: len(s.split())).astype("int64")
        words = out["baseline_words"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["length_ratio"] = np.where(words > 0, out["candidate_words"].to_numpy(dtype=float) / words, np.nan)
    else:
        out["baseline_chars"] = pd.array([pd.NA] * len(cand), dtype="Int64")
        out["baseline_words"] = pd.array([pd.NA] * len(cand), dtype="Int64")
        out["length_ratio"] = np.nan
    counts = np.asarray([_counts(t)[1:] for t in cand], dtype=np.int64).reshape(len(cand), 3)
    for i, flag in enumerate(("has_header", "has_list", "has_bold")):
        out[flag] = counts[:, i] > 0
    out["has_code"] = cand.map(lambda s: bool(_INLINE_CODE.search(s))).astype(bool)
    out["markdown_features"] = out[["has_header", "has_list", "has_bold", "has_code"]].sum(axis=1).astype("int64")
    return out


def normalised_difference(a: Any, b: Any) -> np.ndarray:
    """``(a - b) / (a + b + 1)`` for non-negative counts ``a`` and ``b`` (FastChat's style ratio with
    ``add_one``): 0 when equal, toward 1 when only ``a`` has the feature, toward -1 when only ``b``.

    Parameters
    ----------
    a : array-like
        Counts of answer A.
    b : array-like
        Counts of answer B.

    Returns
    -------
    ndarray
        The differences.

    Examples
    --------
    >>> normalised_difference([3, 0], [1, 2]).round(3).tolist()
    [0.4, -0.667]
    """
    a_ = np.asarray(a, dtype=float)
    b_ = np.asarray(b, dtype=float)
    return (a_ - b_) / (a_ + b_ + 1.0)


def style_differences(text_a: Iterable[Any], text_b: Iterable[Any],
                      features: Sequence[str] = STYLE_FEATURES) -> pd.DataFrame:
    """Per comparison, the normalised differences ``(a - b) / (a + b + 1)`` of the two answers' style
    counts (:func:`style_counts`), one column per feature of ``features`` (Arena's four by default;
    FastChat's names are read too). Positive: answer A has more of it.

    Parameters
    ----------
    text_a : iterable of str
        Answer A of each comparison.
    text_b : iterable of str
        Answer B of each comparison.
    features : sequence of str, default ("length", "headers", "lists", "bold")
        The features.

    Returns
    -------
    DataFrame
        One column per feature, one row per comparison.
    """
    names = []
    for f in features:
        canon = style_feature(f)
        if canon is None:
            raise ValidationError(f"unknown style feature {f!r}; the Arena features are {', '.join(STYLE_FEATURES)}")
        if canon not in names:
            names.append(canon)
    ca, cb = style_counts(text_a), style_counts(text_b)
    if len(ca) != len(cb):
        raise ValidationError(f"the two answer columns differ in length ({len(ca)} vs {len(cb)})")
    return pd.DataFrame({f: normalised_difference(ca[f].to_numpy(), cb[f].to_numpy()) for f in names},
                        columns=names)


# -- style control (Chatbot Arena) -----------------------------------------------------------------

#: The L2 penalty of the fallback fit when the style features separate the outcomes (no maximum-likelihood
#: fit exists): on each style coefficient, in logits per root-mean-square unit of its feature.
STYLE_SEPARATION_PENALTY = 1.0
#: A style coefficient beyond this many logits per root-mean-square unit of its feature means the
#: likelihood was still rising: (quasi-)complete separation, not an estimate.
_SEPARATED_LOGIT = 15.0
#: Where the two answers' texts are looked for when ``text_a``/``text_b`` are not given.
TEXT_COLUMNS: tuple[tuple[str, str], ...] = (("response_a", "response_b"), ("candidate_a", "candidate_b"),
                                             ("answer_a", "answer_b"))
#: The columns of ``board.attrs["style"]`` and of :func:`style_effects` (after the ``by`` columns).
STYLE_COLUMNS: tuple[str, ...] = ("feature", "coefficient", "low", "high")
_ROWS_BUDGET = 2_000_000  # floats per (resamples x comparisons) array of the style bootstrap


@dataclass
class _Style:
    """The style covariates of every row of the data: ``x`` ``(rows, K)``, one column per feature;
    ``computed``: the Arena features computed from the texts (columns ``texts``); ``given``: the
    user's own covariates."""

    x: np.ndarray
    names: list[str]
    computed: list[str]
    given: list[str]
    texts: tuple[str, str] | None


def _text_columns(frame: pd.DataFrame, text_a: str | None, text_b: str | None) -> tuple[str, str]:
    if text_a is not None or text_b is not None:
        if text_a is None or text_b is None:
            raise ValidationError("name both answers' text columns: text_a= and text_b=")
        need_columns(frame, [text_a, text_b])
        return text_a, text_b
    for first, second in TEXT_COLUMNS:
        if first in frame.columns and second in frame.columns:
            return first, second
    tried = ", ".join(f"{x}/{y}" for x, y in TEXT_COLUMNS)
    raise ValidationError(f"style control computes the Arena style features from the two answers' texts, and the "
                          f"data has no text columns ({tried}): name them with text_a= and text_b=, or pass your "
                          "own covariates (style=[columns] or a DataFrame)")


def _numeric_columns(values: pd.DataFrame, names: Sequence[str]) -> np.ndarray:
    out = np.empty((len(values), len(names)))
    for k, name in enumerate(names):
        column = values.iloc[:, k]
        if pd.api.types.is_bool_dtype(column):
            column = column.astype(float)
        number = pd.to_numeric(column, errors="coerce")
        if column.notna().sum() != number.notna().sum():
            shown = ", ".join(repr(v) for v in column[column.notna() & number.isna()].unique()[:5])
            raise ValidationError(f"style covariate {name!r} holds values that are not numbers: {shown}")
        out[:, k] = number.to_numpy(dtype=float)
    return out


def _style_design(frame: pd.DataFrame, style: Any, text_a: str | None, text_b: str | None) -> _Style | None:
    """The covariates ``style=`` asks for, on every row of ``frame`` (``None``: no style control)."""
    if style is None or style is False:
        return None
    if isinstance(style, pd.DataFrame):
        if len(style) != len(frame):
            raise ValidationError(f"style covariates: the DataFrame has {len(style)} rows and the data {len(frame)}; "
                                  "give one row per comparison, in the data's order")
        names = [str(c) for c in style.columns]
        if not names or len(set(names)) != len(names):
            raise ValidationError("style covariates: give a DataFrame with at least one column, each named once")
        return _Style(_numeric_columns(style, names), names, [], names, None)
    if style is True:
        wanted: list[Any] = list(STYLE_FEATURES)
    elif isinstance(style, str):
        wanted = [style]
    elif isinstance(style, Sequence) and not isinstance(style, (bytes, bytearray)):
        wanted = list(style)
    else:
        raise ValidationError(f"style must be True (Chatbot Arena's four style features), a list of features or "
                              f"columns, or a DataFrame of covariates; got {type(style).__name__}")
    if not wanted:
        raise ValidationError("style=[] names no feature: pass style=True for the Arena features, or leave it out")
    computed: list[str] = []
    given: list[str] = []
    for name in wanted:
        canon = style_feature(name)
        if canon is not None:
            if canon not in computed:
                computed.append(canon)
        elif isinstance(name, str) and name in frame.columns:
            if name not in given:
                given.append(name)
        else:
            raise ValidationError(f"style feature {name!r} is neither an Arena style feature "
                                  f"({', '.join(STYLE_FEATURES)}) nor a column of the data; it has "
                                  f"{', '.join(map(str, frame.columns))}")
    parts = []
    texts = None
    if computed:
        texts = _text_columns(frame, text_a, text_b)
        parts.append(style_differences(frame[texts[0]].tolist(), frame[texts[1]].tolist(), computed).to_numpy())
    if given:
        parts.append(_numeric_columns(frame[given], given))
    return _Style(np.column_stack(parts) if len(parts) > 1 else parts[0], [*computed, *given], computed, given, texts)


def _style_hessian(ia: np.ndarray, ib: np.ndarray, x: np.ndarray, v: np.ndarray, m: int) -> np.ndarray:
    """``Z^T diag(v) Z`` for the rows ``z = [e_a - e_b, x]`` of the style-controlled Bradley–Terry model."""
    k = x.shape[1]
    h = np.zeros((m + k, m + k))
    flat = np.bincount(ia * m + ia, weights=v, minlength=m * m) + np.bincount(ib * m + ib, weights=v, minlength=m * m)
    flat -= np.bincount(ia * m + ib, weights=v, minlength=m * m) + np.bincount(ib * m + ia, weights=v, minlength=m * m)
    h[:m, :m] = flat.reshape(m, m)
    for c in range(k):
        vx = v * x[:, c]
        h[:m, m + c] = np.bincount(ia, weights=vx, minlength=m) - np.bincount(ib, weights=vx, minlength=m)
    h[m:, :m] = h[:m, m:].T
    h[m:, m:] = x.T @ (v[:, None] * x)
    return h


def _sigmoid(x: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(x)


def _style_penalty(m: int, k: int, penalty: float) -> np.ndarray:
    return np.concatenate([np.full(m, RIDGE), np.full(k, penalty)])


def _style_fit(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, m: int, *, w: np.ndarray | None = None,
               start: np.ndarray | None = None, penalty: float = 0.0, tol: float = 1e-9,
               max_iter: int = 100) -> tuple[np.ndarray, bool]:
    """Maximum likelihood of the style-controlled Bradley–Terry model on single comparisons, by Newton's method:
    ``logit P(A preferred) = theta_a - theta_b + x . beta`` with ``y`` the share won by A (1, 0, 0.5 for a
    tie, or a probability) and row weights ``w``; the ridge :data:`RIDGE` on ``theta`` (as :func:`_fit_bt`)
    and ``penalty`` on ``beta`` (0: unpenalised). Returns ``[theta (m), beta (k)]`` with ``theta`` of mean 0,
    and whether the steps settled below ``tol``."""
    k = x.shape[1]
    w = np.ones(len(y)) if w is None else w
    params = np.zeros(m + k) if start is None else np.array(start, dtype=float)
    params[:m] -= params[:m].mean()
    pen = _style_penalty(m, k, penalty)
    converged = False
    for _ in range(max_iter):
        eta = params[ia] - params[ib] + x @ params[m:]
        s = _sigmoid(eta)
        res = w * (y - s)
        grad = np.concatenate([np.bincount(ia, weights=res, minlength=m) - np.bincount(ib, weights=res, minlength=m),
                               x.T @ res]) - pen * params
        hess = _style_hessian(ia, ib, x, w * s * (1.0 - s), m) + np.diag(pen) + 1e-12 * np.eye(m + k)
        step = np.linalg.solve(hess, grad)
        step[:m] -= step[:m].mean()  # the likelihood ignores a common shift of theta: keep its mean at 0
        big = float(np.abs(step).max()) if len(step) else 0.0
        if big > 4.0:
            step *= 4.0 / big
        params += step
        if big <= tol:
            converged = True
            break
    params[:m] -= params[:m].mean()
    return params, converged


def _style_separated(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, params: np.ndarray, m: int,
                     converged: bool) -> str | None:
    """Why the maximum-likelihood style fit is not an estimate (``None`` when it is one)."""
    beta = params[m:]
    if beta.size and float(np.abs(beta).max()) > _SEPARATED_LOGIT:
        return "complete or quasi-complete separation: a style coefficient runs off to infinity"
    decided = (y == 0.0) | (y == 1.0)
    if decided.all() and float(np.abs(_sigmoid(params[ia] - params[ib] + x @ beta) - y).max()) < 1e-6:
        return "complete separation: the models and the style features predict every comparison exactly"
    if not converged:
        return "Newton's method did not converge"
    return None


def _style_bootstrap(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, m: int, params_hat: np.ndarray,
                     *, penalty: float, n_boot: int, seed: int | None, progress: bool | None, tol: float = 1e-9,
                     max_iter: int = 60, clusters: np.ndarray | None = None) -> np.ndarray:
    """``(n_boot, m + k)`` fits of resamples of the comparisons (rows drawn with replacement, as FastChat's
    ``compute_bootstrap_style_control``; with ``clusters``, one id per row, whole clusters drawn with
    replacement, each bringing all its rows), all at once by the chord method of :func:`_fit_bt_chord` (Newton
    steps with the Hessian held at the point estimate); a resample that does not settle is finished by
    :func:`_style_fit`."""
    from scipy.sparse import csr_matrix

    from ._progress import progress_bar

    r, k = x.shape
    pen = _style_penalty(m, k, penalty)
    s_hat = _sigmoid(params_hat[ia] - params_hat[ib] + x @ params_hat[m:])
    hess_inv = np.linalg.inv(_style_hessian(ia, ib, x, s_hat * (1.0 - s_hat), m) + np.diag(pen)
                             + 1e-12 * np.eye(m + k))
    # the design [e_a - e_b, x] as one sparse (r, m + k) matrix: eta = Z params, gradient = Z^T residuals
    rows = np.concatenate([np.arange(r), np.arange(r), np.repeat(np.arange(r), k)])
    cols = np.concatenate([ia, ib, np.tile(m + np.arange(k), r)])
    design = csr_matrix((np.concatenate([np.ones(r), -np.ones(r), x.ravel()]), (rows, cols)), shape=(r, m + k))
    design_t = design.T.tocsr()
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, _ROWS_BUDGET // max(r, 1)))
    codes = None
    if clusters is not None:
        codes = np.asarray(np.unique(np.asarray(clusters), return_inverse=True)[1], dtype=np.int64).reshape(-1)
    g = int(codes.max()) + 1 if codes is not None and len(codes) else 0
    out = np.empty((n_boot, m + k))
    show = (n_boot > chunk) if progress is None else bool(progress)
    with progress_bar(n_boot, desc="leaderboard: style bootstrap", unit="resample", show=show, leave=False) as bar:
        done = 0
        while done < n_boot:
            b = min(chunk, n_boot - done)
            if codes is None:
                draws = rng.integers(0, r, size=(b, r)) + (np.arange(b) * r)[:, None]  # rows drawn with replacement
                w = np.bincount(draws.ravel(), minlength=b * r).reshape(b, r).astype(float)
            else:  # clusters drawn with replacement: a row weighs as often as its cluster was drawn
                w = rng.multinomial(g, np.full(g, 1.0 / g), size=b).astype(float)[:, codes]
            params = np.tile(params_hat, (b, 1))
            active = np.arange(b)
            last = np.full(b, np.inf)
            for _ in range(max_iter):
                if not len(active):
                    break
                p = params[active]
                eta = np.asarray(design @ p.T).T
                res = w[active] * (y[None, :] - _sigmoid(eta))
                grad = np.asarray(design_t @ res.T).T - pen[None, :] * p
                step = grad @ hess_inv
                step[:, :m] -= step[:, :m].mean(axis=1, keepdims=True)  # no drift along a common shift of theta
                big = np.abs(step).max(axis=1)
                growing = big > 2.0 * last[active]
                params[active] = np.where(growing[:, None], p, p + step)
                last[active] = big
                active = active[(big > tol) & ~growing]
            for u in np.flatnonzero(last > tol):
                params[u] = _style_fit(ia, ib, y, x, m, w=w[u], start=params_hat, penalty=penalty, tol=tol)[0]
            params[:, :m] -= params[:, :m].mean(axis=1, keepdims=True)
            out[done:done + b] = params
            done += b
            bar.update(b)
    return out


def _usable_features(ia: np.ndarray, ib: np.ndarray, x: np.ndarray, names: Sequence[str], m: int,
                     where: str) -> tuple[list[int], list[str]]:
    """The features that can be fitted, and what was dropped and why: a feature constant on the
    comparisons, or one that is a linear combination of the models and the features before it
    (either would make the fit singular)."""
    keep: list[int] = []
    notes: list[str] = []
    scope = where.rstrip(": ") or "the data"
    for c, name in enumerate(names):
        col = x[:, c]
        if float(np.ptp(col)) <= 1e-12 * max(1.0, float(np.abs(col).max())):
            notes.append(f"style feature {name!r} is constant ({float(col[0]):g}) on the comparisons of {scope}: "
                         "dropped (a constant cannot be told apart from the ratings)")
            continue
        keep.append(c)
    if not keep:
        return keep, notes
    scaled = x[:, keep] / np.sqrt(np.mean(x[:, keep] ** 2, axis=0))
    gram = _style_hessian(ia, ib, scaled, np.ones(len(ia)), m)
    base = int(np.linalg.matrix_rank(gram[:m, :m], hermitian=True)) if m > 1 and np.abs(gram[:m, :m]).max() > 0 else 0
    chosen: list[int] = []
    for pos, c in enumerate(keep):
        idx = [*range(m), *(m + q for q in chosen), m + pos]
        if int(np.linalg.matrix_rank(gram[np.ix_(idx, idx)], hermitian=True)) < base + len(chosen) + 1:
            notes.append(f"style feature {names[c]!r} is a linear combination of the models and the other features "
                         f"on the comparisons of {scope}: dropped (the fit would be singular)")
            continue
        chosen.append(pos)
    return [keep[q] for q in chosen], notes


@dataclass
class _StyleFit:
    """A fitted style-controlled model: ``theta`` (mean 0) and ``coef`` (Elo per unit of each feature), their
    bootstrap intervals, the features fitted, what was dropped, and how it was fitted."""

    theta: np.ndarray
    coef: np.ndarray
    rating_low: np.ndarray
    rating_high: np.ndarray
    coef_low: np.ndarray
    coef_high: np.ndarray
    features: list[str]
    notes: list[str]
    fit: str


def _fit_style_rows(ia: np.ndarray, ib: np.ndarray, y: np.ndarray, x: np.ndarray, names: Sequence[str], m: int, *,
                    where: str, confidence: float, n_boot: int, seed: int | None,
                    progress: bool | None, clusters: np.ndarray | None = None) -> tuple[_StyleFit | None, list[str]]:
    """The style-controlled fit on single comparisons (``None`` when every feature had to be dropped)
    and what was said about it (features dropped, a separated fit), each also a warning. ``clusters``: one id
    per comparison; the bootstrap then resamples whole clusters."""
    import warnings

    finite = np.isfinite(x)
    if not finite.all():
        bad = [f"{names[c]!r} ({int((~finite[:, c]).sum())} row(s))" for c in range(x.shape[1])
               if not finite[:, c].all()]
        raise ValidationError(f"{where}style covariate(s) {', '.join(bad)} missing or not finite on comparisons with "
                              "a winner: give every compared pair a value")
    keep, notes = _usable_features(ia, ib, x, names, m, where)
    for note in notes:
        warnings.warn(f"leaderboard: {note}", UserWarning, stacklevel=5)
    if not keep:
        return None, notes
    xs = x[:, keep]
    scale = np.sqrt(np.mean(xs**2, axis=0))  # root mean square about 0: a conditioning, not a centring
    xs = xs / scale
    params, converged = _style_fit(ia, ib, y, xs, m)
    why = _style_separated(ia, ib, y, xs, params, m, converged)
    penalty = 0.0
    fit = "mle"
    if why is not None:
        penalty = STYLE_SEPARATION_PENALTY
        params, _ = _style_fit(ia, ib, y, xs, m, penalty=penalty)
        fit = f"l2 penalty {penalty:g} on the style coefficients ({why})"
        note = (f"{where}the style-controlled fit has no maximum-likelihood estimate ({why}; {len(y)} comparisons): "
                f"it is refitted with an L2 penalty of {penalty:g} on the style coefficients (logits per "
                "root-mean-square unit of each feature) and flagged; its ratings and coefficients rest on that "
                "penalty, not on the data alone")
        notes.append(note)
        warnings.warn(f"leaderboard: {note}", RuntimeWarning, stacklevel=5)
    theta, beta = params[:m], params[m:]
    coef = _ELO * beta / scale
    nan_m, nan_k = np.full(m, math.nan), np.full(len(keep), math.nan)
    r_low, r_high, c_low, c_high = nan_m, nan_m, nan_k, nan_k
    if n_boot > 0:
        boot = _style_bootstrap(ia, ib, y, xs, m, params, penalty=penalty, n_boot=n_boot, seed=seed,
                                progress=progress, clusters=clusters)
        tail = (1.0 - confidence) / 2.0
        r_low, r_high = np.quantile(_ratings(boot[:, :m]), [tail, 1.0 - tail], axis=0)
        c_low, c_high = np.quantile(_ELO * boot[:, m:] / scale, [tail, 1.0 - tail], axis=0)
    return _StyleFit(theta=theta, coef=coef, rating_low=r_low, rating_high=r_high, coef_low=c_low, coef_high=c_high,
                     features=[names[c] for c in keep], notes=notes, fit=fit), notes


class StyleEffects(pd.DataFrame):
    """The style coefficients, ``feature``, ``coefficient``, ``low``, ``high``: a DataFrame in every way but
    one. Two of them compare equal as wholes (``a == b`` is ``a.equals(b)``), because pandas compares
    the ``attrs`` of frames it concatenates and a board carries one in ``attrs["style"]``: with plain
    frames there, ``pd.concat([board_1, board_2])`` would fail. Any other comparison is elementwise.

    Parameters
    ----------
    data, index, columns, dtype, copy
        As :class:`pandas.DataFrame` takes them.
    """

    @property
    def _constructor(self) -> Any:
        return StyleEffects

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, StyleEffects):
            return bool(self.equals(other))
        return super().__eq__(other)

    def __ne__(self, other: Any) -> Any:
        if isinstance(other, StyleEffects):
            return not self.equals(other)
        return super().__ne__(other)


def _style_frame(fit: _StyleFit | None) -> StyleEffects:
    if fit is None:
        return StyleEffects({"feature": pd.Series([], dtype=object), "coefficient": pd.Series([], dtype=float),
                             "low": pd.Series([], dtype=float), "high": pd.Series([], dtype=float)})
    return StyleEffects({"feature": fit.features, "coefficient": fit.coef, "low": fit.coef_low,
                         "high": fit.coef_high}, columns=list(STYLE_COLUMNS))


def _style_board(pairs: _Pairs, a: np.ndarray, b: np.ndarray, outcome: np.ndarray, x: np.ndarray,
                 names: Sequence[str], *, where: str, confidence: float, n_boot: int, seed: int | None,
                 progress: bool | None, clusters: np.ndarray | None = None) -> pd.DataFrame:
    """The style-controlled board: ratings with the style features held at 0 (both answers alike); ``clusters``
    (one id per comparison): the bootstrap resamples whole clusters."""
    ia = pd.Categorical(a, categories=pairs.models).codes.astype(np.int64)
    ib = pd.Categorical(b, categories=pairs.models).codes.astype(np.int64)
    fit, notes = _fit_style_rows(ia, ib, _worth(outcome), x, names, pairs.m, where=where, confidence=confidence,
                                 n_boot=n_boot, seed=seed, progress=progress, clusters=clusters)
    if fit is None:
        out = _board(pairs, confidence=confidence, n_boot=n_boot, seed=seed, progress=progress, clusters=clusters)
        notes = [*notes, f"{where}no style feature left to control for: these are the raw ratings"]
        out.attrs.update(style=_style_frame(None), style_notes=notes, style_fit="none")
        return out
    out = _board_frame(pairs, _ratings(fit.theta), fit.rating_low, fit.rating_high, n_boot)
    out.attrs.update(style=_style_frame(fit), style_notes=fit.notes, style_fit=fit.fit)
    return out


def _style_settings(design: _Style | None) -> dict[str, Any]:
    if design is None:
        return {}
    return {"style_features": list(design.names), "style_computed": list(design.computed),
            "style_given": list(design.given), "style_texts": design.texts}
