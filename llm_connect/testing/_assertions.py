"""``assert_quality``: a test of an LLM feature that passes or fails on evidence, not on a lucky mean.

A mean of ten judge scores above a threshold is not evidence that the feature is good enough: the
next ten may fall below it. :func:`assert_quality` passes only when the lower end of a confidence
interval for the mean clears the threshold, fails (:class:`~llm_connect.errors.QualityNotMet`) when the
upper end is below it, and otherwise says the evidence is *inconclusive*
(:class:`~llm_connect.errors.QualityInconclusive`, or a skip, or a pass with a warning) and about how
many more items would settle it. The intervals are :func:`llm_connect.stats.gate.score_interval`'s
(exact Clopper–Pearson for 0/1 scores, a BCa bootstrap for others, Hoeffding's bound for a few) or,
with people's labels on some items, :func:`~llm_connect.stats.estimate_quality`'s PPI++ interval.

Each check is a :class:`QualityCheck`; under the package's pytest plugin
(:mod:`llm_connect.testing.pytest_plugin`) the checks a test makes are shown in the terminal summary
and written to JUnit XML. Nothing here imports numpy, pandas or scipy until a check runs.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import QualityInconclusive, QualityNotMet, ValidationError

__all__ = ["INCONCLUSIVE_CHOICES", "QualityCheck", "QualityInconclusiveWarning", "assert_quality"]

#: What ``assert_quality(inconclusive=...)`` does with an unsettled check.
INCONCLUSIVE_CHOICES: tuple[str, ...] = ("fail", "skip", "pass")

_METHOD_TEXT = {
    "clopper-pearson": "exact Clopper–Pearson interval",
    "bootstrap-bca": "BCa bootstrap interval, seeded",
    "hoeffding": "Hoeffding's bound: too few or equal continuous scores for a bootstrap",
    "ppi++": "PPI++ interval: the judge's scores corrected by people's labels",
}


class QualityInconclusiveWarning(UserWarning):
    """An inconclusive quality gate was let pass (``assert_quality(..., inconclusive="pass")``); the message
    says how far the evidence is from settling it."""


def _num(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


@dataclass(frozen=True)
class QualityCheck:
    """The evidence behind one quality gate.

    Parameters
    ----------
    n : int
        The scored items the interval was made from (with ``human=``, the judged items).
    mean : float
        Their mean score (with ``human=``, the PPI++ estimate of the people's mean).
    low, high : float
        The interval's ends.
    at_least : float or None
        The threshold (``None`` for a repeated test that needs every run to pass).
    confidence : float
        The interval's level.
    method : str
        How the interval was made: ``"clopper-pearson"``, ``"bootstrap-bca"``, ``"hoeffding"`` or ``"ppi++"``.
    verdict : str
        ``"pass"``, ``"fail"`` or ``"inconclusive"``.
    n_unscored, n_error : int
        Items left out: no usable verdict (unscored or abstained), or a failed call.
    n_labelled : int or None
        With ``human=``, the items with a person's label.
    more_items : int or None
        When inconclusive, about how many more items (labels, with ``human=``) would settle it.
    first_error : str or None
        The first error among the items left out.
    what : str
        What the mean is of (``"mean score"``, ``"pass rate"``), for the message.
    unit : str
        What was counted (``"items"``; ``"runs"`` for a repeated test), for the message.
    """

    n: int
    mean: float
    low: float
    high: float
    at_least: float | None
    confidence: float
    method: str
    verdict: str
    n_unscored: int = 0
    n_error: int = 0
    n_labelled: int | None = None
    more_items: int | None = None
    first_error: str | None = None
    what: str = "mean score"
    unit: str = "items"

    @property
    def passed(self) -> bool:
        """Whether the verdict is ``"pass"``."""
        return self.verdict == "pass"

    def __bool__(self) -> bool:
        return self.passed

    @property
    def interval(self) -> str:
        """``"95% interval [0.712, 0.905]"``."""
        return f"{self.confidence:.0%} interval [{_num(self.low)}, {_num(self.high)}]"

    @property
    def method_text(self) -> str:
        """How the interval was made, in words (``"exact Clopper–Pearson interval"``); :attr:`method` itself when
        it has none."""
        return _METHOD_TEXT.get(self.method, self.method)

    @property
    def message(self) -> str:
        """One paragraph: the verdict, the figures behind it and the method; what would settle it."""
        how = self.method_text
        sample = f"n={self.n}" + (f", {self.n_labelled} labelled" if self.n_labelled is not None else "")
        figures = f"{self.what} {_num(self.mean)}, {self.interval} ({how}; {sample})"
        if self.at_least is None:
            text = f"{self.verdict}: {figures}"
        elif self.verdict == "pass":
            text = f"pass: {figures} lies at or above {self.at_least:g}"
        elif self.verdict == "fail":
            text = f"quality not met: {figures} lies below {self.at_least:g}"
        else:
            text = f"inconclusive: {figures} holds the threshold {self.at_least:g}"
            unit = "human labels" if self.method == "ppi++" else self.unit
            if self.more_items is not None:
                total = self.more_items + (self.n_labelled if self.n_labelled is not None else self.n)
                text += (f"; about {self.more_items} more {unit} ({total} in all) would likely settle it, if the "
                         f"mean stays near {_num(self.mean)}")
                if self.n_labelled is not None and total > self.n:
                    text += f" (more labels than the {self.n} items: judge more items too)"
            else:
                text += "; the mean sits on the threshold, so more items would not settle it"
        left_out = [f"{k} {name}" for k, name in ((self.n_unscored, "unscored"), (self.n_error, "error"))
                    if k]
        if left_out:
            text += f"; not counted: {', '.join(left_out)}"
            if self.first_error:
                text += f" (first: {self.first_error})"
        return text

    def __str__(self) -> str:
        return self.message

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-serialisable).

        Returns
        -------
        dict
            The fields by name.
        """
        return asdict(self)

    def _repr_html_(self) -> str:
        from .._display import view

        return view("quality_check_html")(self)


# -- the checks a test makes, for the pytest plugin's summary ------------------------------------------

_sinks: list[list[QualityCheck]] = []
_plugin_sessions = 0  # pytest runs in this process with the plugin configured (pytester nests them)


@contextlib.contextmanager
def recording() -> Iterator[list[QualityCheck]]:
    """Collect the checks made inside the block (the pytest plugin wraps each test phase in one)."""
    sink: list[QualityCheck] = []
    _sinks.append(sink)
    try:
        yield sink
    finally:
        _sinks.remove(sink)


def record(check: QualityCheck) -> None:
    """Hand ``check`` to the innermost :func:`recording` block, if any."""
    if _sinks:
        _sinks[-1].append(check)


def _in_pytest() -> bool:
    """Whether this process is running pytest (a notebook kernel run by nbval is not)."""
    return _plugin_sessions > 0 or ("_pytest.outcomes" in sys.modules and "PYTEST_CURRENT_TEST" in os.environ)


# -- reading the scores ----------------------------------------------------------------------------------


@dataclass
class _Read:
    scores: Any  # float array of the scored items
    labels: Any  # float array (NaN = unlabelled) or None
    n_unscored: int = 0
    n_error: int = 0
    first_error: str | None = None


def _numbers(values: Any, what: str) -> Any:
    """``values`` (a Series or a sequence) as floats: booleans as 0/1, None/NaN as NaN; text is an error."""
    import numpy as np

    if _is_series(values):
        import pandas as pd

        series = values.astype(object) if isinstance(values.dtype, pd.CategoricalDtype) else values
        kind = pd.api.types.infer_dtype(series, skipna=True)
        if kind not in ("boolean", "integer", "floating", "mixed-integer-float", "decimal", "empty"):
            example = next((v for v in series if isinstance(v, (str, bytes))), None)
            raise ValidationError(f"{what} must be numbers in 0..1 or booleans, got {kind} values"
                                  + (f" such as {example!r}" if example is not None else "")
                                  + "; map verdicts to 1/0 first, e.g. frame['human'].eq('yes')")
        items: Any = series.to_numpy(dtype=object) if series.dtype == object else None
        arr = series.to_numpy(dtype=float, na_value=np.nan) if items is None else None
    else:
        items = values.tolist() if isinstance(values, np.ndarray) else list(values)
        arr = None
    if arr is None:
        out = np.empty(len(items), dtype=float)
        for i, v in enumerate(items):
            if v is None or (isinstance(v, float) and v != v) or type(v).__name__ in ("NAType", "NaTType"):
                out[i] = np.nan
            elif isinstance(v, (numbers.Real, np.bool_)):
                out[i] = float(v)
            else:
                raise ValidationError(f"{what} must be numbers in 0..1 or booleans, got {v!r} at position {i}; "
                                      "map verdicts to 1/0 first")
        arr = out
    bad = np.flatnonzero(np.isfinite(arr) & ((arr < 0.0) | (arr > 1.0)))
    if bad.size:
        raise ValidationError(f"{what} must be in 0..1, got {float(arr[bad[0]])!r} at position {int(bad[0])}; "
                              "map a rating r on 1..5 to (r - 1) / 4")
    if np.isinf(arr).any():
        raise ValidationError(f"{what} hold an infinite value")
    return arr


def _is_series(value: Any) -> bool:
    """Whether ``value`` is a pandas Series (without importing pandas when it is not loaded)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.Series)


def _is_frame(value: Any) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.DataFrame)


def _labels(human: Any, frame: Any, n: int) -> Any:
    if human is None:
        return None
    if isinstance(human, str):
        if frame is None:
            raise ValidationError(f"human={human!r} names a column, but the scores are not a DataFrame; pass the "
                                  "labels themselves (a list with None where an item has no label)")
        if human not in frame.columns:
            raise ValidationError(f"no column {human!r} for human= in the scores; its columns are: "
                                  f"{', '.join(map(repr, list(frame.columns)[:20]))}")
        return _numbers(frame[human], "human labels")
    if isinstance(human, (bytes, dict)) or not hasattr(human, "__len__"):
        raise ValidationError("human must name a column of the scores' DataFrame or be a sequence of labels "
                              f"(one per item, None where unlabelled), got {type(human).__name__}")
    labels = _numbers(human, "human labels")
    if len(labels) != n:
        raise ValidationError(f"human has {len(labels)} labels for {n} items; give one per item, None where an "
                              "item has no label")
    return labels


def _read(scores: Any, human: Any) -> _Read:
    import numpy as np

    if not (_is_frame(scores) or _is_series(scores)) and callable(getattr(scores, "to_pandas", None)):
        scores = scores.to_pandas()  # a Ray Dataset from grade_dataset (a pyarrow table, a polars frame)
    if _is_frame(scores):
        import pandas as pd

        if "quality_score" not in scores.columns:
            raise ValidationError("a DataFrame of scores needs a quality_score column (a frame from judge_many or "
                                  f"grade_dataset); its columns are: {', '.join(map(repr, list(scores.columns)[:20]))}")
        values = _numbers(scores["quality_score"], "quality_score")
        labels = _labels(human, scores, len(scores))
        if "status" in scores.columns:
            status = scores["status"].astype(object).to_numpy()
            scored = (status == "scored") & np.isfinite(values)
            errors = status == "error"
        else:
            scored = np.isfinite(values)
            errors = np.zeros(len(values), dtype=bool)
        first_error = None
        if (~scored).any():
            reasons = scores["error"] if "error" in scores.columns else pd.Series([None] * len(scores))
            for flag in (errors, ~scored):
                found = [str(r) for r in reasons[flag] if isinstance(r, str) and r.strip()]
                if found:
                    first_error = found[0]
                    break
        from .._textsafe import one_line

        return _Read(values[scored], None if labels is None else labels[scored],
                     n_unscored=int((~scored & ~errors).sum()), n_error=int(errors.sum()),
                     first_error=None if first_error is None else one_line(first_error, limit=200))
    if isinstance(scores, (str, bytes, dict)) or not hasattr(scores, "__iter__"):
        raise ValidationError("scores must be a sequence of numbers in 0..1 or booleans, a Series, or a frame "
                              f"from judge_many / grade_dataset; got {type(scores).__name__}")
    values = _numbers(scores, "scores")
    labels = _labels(human, None, len(values))
    scored = np.isfinite(values)
    return _Read(values[scored], None if labels is None else labels[scored], n_unscored=int((~scored).sum()))


# -- the check -------------------------------------------------------------------------------------------


def _ppi(read: _Read, confidence: float) -> tuple[float, float, float, int]:
    """(estimate, low, high, n_labelled) of the people's mean: PPI++ on the judge's scores and the labels."""
    import pandas as pd

    from ..stats import estimate_quality

    frame = pd.DataFrame({"judge": read.scores, "human": read.labels})
    row = estimate_quality(frame, judge="judge", human="human", methods=("ppi++",), confidence=confidence).iloc[0]
    if isinstance(row["reason"], str):
        raise ValidationError(f"human=: no PPI++ interval can be made ({row['reason']}); label more of the scored "
                              "items, or drop human= to gate on the judge's scores alone")
    return float(row["estimate"]), float(row["ci_low"]), float(row["ci_high"]), int(row["n_labelled"])


def make_check(scores: Any, *, at_least: float | None, confidence: float, human: Any = None,
               what: str | None = None, unit: str = "items", read: _Read | None = None) -> QualityCheck:
    """The :class:`QualityCheck` of ``scores`` against ``at_least`` (``None``: every score must be 1)."""
    from ..stats.gate import ScoreInterval, check_threshold, gate_verdict, items_to_settle, score_interval

    threshold = None if at_least is None else check_threshold(at_least)
    read = read or _read(scores, human)
    n = len(read.scores)
    if n == 0:
        raise QualityNotMet(
            f"no scored item to check ({read.n_unscored} unscored, {read.n_error} error)"
            + (f"; the first: {read.first_error}" if read.first_error else ""),
            check=None,
        )
    n_labelled: int | None = None
    iv: ScoreInterval | None = None
    if read.labels is None:
        iv = score_interval(read.scores, confidence=confidence)
        mean, low, high, method = iv.mean, iv.low, iv.high, iv.method
    else:
        mean, low, high, n_labelled = _ppi(read, confidence)
        method = "ppi++"
    if threshold is None:  # pass^n: every run must pass
        verdict = "pass" if bool((read.scores == 1.0).all()) else "fail"
    else:
        verdict = gate_verdict(low, high, threshold)
    more = None
    if verdict == "inconclusive" and threshold is not None:
        if iv is None:  # PPI++: its half-width shrinks with the labels
            assert n_labelled is not None
            iv = ScoreInterval(n_labelled, mean, low, high, confidence, "ppi++")
        total = items_to_settle(iv, threshold)
        more = None if total is None else total - iv.n
    if what is None:
        what = {"clopper-pearson": "pass rate", "ppi++": "people's mean"}.get(method, "mean score")
    return QualityCheck(n=n, mean=mean, low=low, high=high, at_least=threshold, confidence=confidence,
                        method=method, verdict=verdict, n_unscored=read.n_unscored, n_error=read.n_error,
                        n_labelled=n_labelled, more_items=more, first_error=read.first_error, what=what,
                        unit=unit)


def assert_quality(scores: Any, *, at_least: float, confidence: float = 0.95, inconclusive: str = "fail",
                   human: Any = None) -> QualityCheck:
    """Pass when the evidence shows the mean score is at least ``at_least``; fail when it shows it is below.

    Parameters
    ----------
    scores : sequence, Series or DataFrame
        Scores in 0..1 or booleans (``None``/NaN items are counted as unscored, never as 0); or a frame from
        ``judge_many`` / ``grade_dataset`` (a Ray Dataset is read with ``to_pandas()``), whose ``scored`` rows
        count and whose ``unscored``, ``abstained`` and ``error`` rows are counted and shown.
    at_least : float
        The threshold in 0..1 the mean must clear.
    confidence : float, default 0.95
        The interval's level.
    inconclusive : {"fail", "skip", "pass"}, default "fail"
        When the interval holds the threshold: raise :class:`~llm_connect.errors.QualityInconclusive`, skip
        the test (``pytest.skip``; outside pytest, as ``"pass"``), or pass with a
        :class:`QualityInconclusiveWarning`. Each message says about how many more items
        would settle it.
    human : str or sequence, optional
        People's labels on some of the items (a column of the frame, or one value per item with ``None``
        where unlabelled): the interval is then the PPI++ interval of
        :func:`~llm_connect.stats.estimate_quality` for the people's mean, so a biased judge with a few
        labels gates on what people would say.

    Returns
    -------
    QualityCheck
        ``n``, ``mean``, ``low``, ``high``, ``at_least``, ``confidence``, ``method``, ``verdict`` (and the items
        left out). The interval is exact Clopper–Pearson for 0/1 scores, a seeded BCa bootstrap for other
        scores, Hoeffding's bound for fewer than 20 of them or equal ones, PPI++ with ``human=``; the
        message names it.

    Raises
    ------
    QualityNotMet
        The interval's upper end is below ``at_least``, or no item was scored (the message quotes the first
        error). An ``AssertionError``.
    QualityInconclusive
        The interval holds ``at_least`` and ``inconclusive="fail"``. An ``AssertionError``.
    ValidationError
        Scores outside 0..1 or not numbers, an empty input, a bad ``at_least``, ``confidence`` or
        ``inconclusive``, labels that do not line up with the items.

    Examples
    --------
    >>> from llm_connect.testing import assert_quality
    >>> assert_quality([True] * 58 + [False] * 2, at_least=0.8).verdict
    'pass'
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this function's source
    from ..stats._validate import check_confidence
    from ..stats.gate import check_threshold

    conf = check_confidence(confidence)
    if inconclusive not in INCONCLUSIVE_CHOICES:
        raise ValidationError(f"inconclusive must be one of {list(INCONCLUSIVE_CHOICES)}, got {inconclusive!r}")
    if at_least is None:
        raise ValidationError("at_least is the threshold the mean score must clear, e.g. at_least=0.8")
    threshold = check_threshold(at_least)
    read = _read(scores, human)
    if len(read.scores) + read.n_unscored + read.n_error == 0:
        raise ValidationError("no scores: assert_quality needs at least one item")
    try:
        check = make_check(scores, at_least=threshold, confidence=conf, human=human, read=read)
    except QualityNotMet as exc:  # nothing scored: shown in the summary as a failed check
        record(QualityCheck(n=0, mean=math.nan, low=math.nan, high=math.nan, at_least=threshold,
                            confidence=conf, method="", verdict="fail", n_unscored=read.n_unscored,
                            n_error=read.n_error, first_error=read.first_error))
        raise exc from None
    record(check)
    if check.verdict == "fail":
        raise QualityNotMet(check.message, check=check)
    if check.verdict == "inconclusive":
        if inconclusive == "fail":
            raise QualityInconclusive(check.message, check=check)
        if inconclusive == "skip" and _in_pytest():
            import pytest

            pytest.skip(check.message)
        warnings.warn(check.message, QualityInconclusiveWarning, stacklevel=2)
    return check
