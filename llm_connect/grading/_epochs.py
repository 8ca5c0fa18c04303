"""Repeated judging ("epochs"): each item judged ``k`` times, the scores reduced, their agreement measured.

Judges are stochastic even at temperature 0 on many providers, so one judgment of an item can
flip on a re-run. ``judge_many(judge, items, epochs=k, reducer="mean")`` judges each item ``k``
times and reduces the epochs' scores to one (as Inspect AI's ``epochs`` and reducers do); this
module holds the pieces:

- :data:`REDUCERS` and :func:`reduce_scores`: ``mean``, ``median``, ``mode``, ``max``, ``min``
  or a callable ``list[float] -> float`` over the *scored* epochs only (an unscored epoch is NaN,
  never 0, and never reaches the reducer). ``mode``: the most frequent score; a tie between
  modes is their median, so a 1-1 split of pass (1) and fail (0) is 0.5, the pairwise tie.
- :func:`reseed`: the judge of epoch ``e``. The response cache is keyed on everything that
  reaches the provider, ``model_params["seed"]`` included, so each epoch varies the seed and the
  cache never serves a repeat: epoch 0 is the judge and run config as given (a single run and
  epoch 0 are the same calls); epoch ``e > 0`` runs with ``model_params["seed"] = base + e``
  (``base``: the run config's own seed, else 0), and a judge with its own ``seed`` field
  (:class:`~llm_connect.grading.LLMJudge`, :class:`~llm_connect.grading.PairwiseJudge`, which
  put it over the run config's) is copied with ``seed + e``; the members of a panel and the two
  judges of a cascade are reseeded the same way. A judge may define ``with_seed_offset(e)``
  to say how itself: a :class:`~llm_connect.pipelines.PipelineJudge` does, and moves every
  seeded unit's seed by ``e`` times the unit's copies in the graph (so no call of one epoch
  shares a seed with one of another); its unseeded units take the epoch's run config seed.
- :func:`epoch_reliability`: run-to-run reliability with the epochs as coders (Krippendorff
  2004, *Content Analysis*, ch. 11; Hayes & Krippendorff 2007, "Answering the call for a
  standard reliability measure for coding data"): percent agreement and Krippendorff's alpha,
  computed by the ``krippendorff`` package.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .._display import view
from .._options import REDUCERS, Reducer, check_run_options
from ..core import RunConfig
from ..errors import ValidationError
from ._base import Judge, validate_score

__all__ = [
    "EPOCH_COLUMNS",
    "REDUCERS",
    "EpochReliability",
    "Reducer",
    "epoch_reliability",
    "epoch_run_config",
    "reduce_scores",
    "reducer_of",
    "reseed",
]

#: The columns ``judge_many(..., epochs=k)`` adds after the judge's result columns (``k > 1`` only):
#: ``epoch_scores`` (a list of ``k`` floats, NaN for an epoch that did not score),
#: ``epochs_scored`` (how many did), ``score_spread`` (max − min of the scored epochs; 0.0 with one,
#: NaN with none) and ``score_std`` (their sample standard deviation, ``ddof=1``; NaN with fewer than two).
EPOCH_COLUMNS = ("epoch_scores", "epochs_scored", "score_spread", "score_std")

def reducer_of(reducer: str | Reducer) -> tuple[str, Reducer]:
    """``(name, function)`` of a reducer: one of :data:`REDUCERS` by name, or a callable
    ``list[float] -> float`` (named after its ``__name__``); checked as every ``reducer=`` is
    (:func:`llm_connect._options.check_run_options`)."""
    check_run_options(reducer=reducer)
    if isinstance(reducer, str):
        return reducer, REDUCERS[reducer]
    return str(getattr(reducer, "__name__", None) or type(reducer).__name__), reducer


def reduce_scores(scores: Iterable[float], reducer: str | Reducer = "mean") -> float:
    """The reduced score of one item's epoch scores: NaN entries (unscored epochs) are left out;
    NaN when none is left. A callable's result must be a finite number in 0..1
    (else a :class:`ValidationError` naming it)."""
    name, fn = reducer_of(reducer)
    kept = [float(s) for s in scores if s is not None and not math.isnan(float(s))]
    if not kept:
        return math.nan
    value = fn(list(kept))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) \
            or not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"reducer {name!r} returned {value!r} for the scores {kept}; "
                              "a reducer must return a number in 0.0..1.0")
    return float(value)


# -- a judge per epoch ---------------------------------------------------------------------------

JudgeT = TypeVar("JudgeT", bound=Judge)  # reseed returns a judge of the type it was given


def _is_judge(value: Any) -> bool:
    return not isinstance(value, type) and callable(getattr(value, "judge", None)) and hasattr(value, "grader_id")


def reseed(judge: JudgeT, offset: int) -> JudgeT:
    """The judge of epoch ``offset`` (see the module docstring).

    The judge itself for 0; else a copy whose ``seed`` (when set) is ``seed + offset``, with its member
    judges reseeded likewise. A judge with a ``with_seed_offset(offset)`` method is asked; one with
    nothing to reseed is returned as is (the epoch's run config carries the seed to it).

    Parameters
    ----------
    judge : Judge
        Any judge.
    offset : int
        The epoch.

    Returns
    -------
    Judge
        The judge of that epoch, of the type given.

    Examples
    --------
    >>> from llm_connect.grading import LLMJudge
    >>> from llm_connect.testing import ScriptedAdapter
    >>> reseed(LLMJudge(ScriptedAdapter(["x"]), seed=5), 2).seed
    7
    """
    if offset == 0:
        return judge
    hook = getattr(judge, "with_seed_offset", None)
    if callable(hook):
        return hook(offset)
    if not dataclasses.is_dataclass(judge) or isinstance(judge, type):
        return judge
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(judge):
        if not f.init:
            continue
        value = getattr(judge, f.name)
        if f.name == "seed":
            if isinstance(value, int) and not isinstance(value, bool):
                changes["seed"] = value + offset
        elif _is_judge(value):
            copy = reseed(value, offset)
            if copy is not value:
                changes[f.name] = copy
        elif isinstance(value, (list, tuple)) and value and all(_is_judge(v) for v in value):
            copies = [reseed(v, offset) for v in value]
            if any(c is not v for c, v in zip(copies, value, strict=True)):
                changes[f.name] = type(value)(copies)
    return dataclasses.replace(judge, **changes) if changes else judge


def epoch_run_config(run_config: RunConfig, offset: int) -> RunConfig:
    """The run config of epoch ``offset``.

    As given for 0, else ``model_params["seed"] = base + offset`` (``base``: the config's own integer seed,
    else 0).

    Parameters
    ----------
    run_config : RunConfig
        The run's.
    offset : int
        The epoch.

    Returns
    -------
    RunConfig
        The epoch's.
    """
    if offset == 0:
        return run_config
    base = run_config.model_params.get("seed")
    base = base if isinstance(base, int) and not isinstance(base, bool) else 0
    return run_config.replace(model_params={**run_config.model_params, "seed": base + offset})


# -- reliability across epochs ---------------------------------------------------------------------

Labels = Literal["auto", "exact", "threshold"]
_VERDICT_VALUES = frozenset({0.0, 0.5, 1.0})


@dataclass(frozen=True)
class EpochReliability:
    """How much a judge agrees with itself across epochs (the epochs are the coders, the items the units).

    ``labels``: what two epochs must share to agree: ``"exact"`` the same score (verdict-valued
    judges: every score 0, 0.5 or 1, e.g. pairwise verdicts, exact match) or ``"threshold"`` the
    same verdict at ``threshold`` (score >= threshold; continuous scores). ``agreement``: the
    percent agreement, the share of agreeing pairs of epochs per item, averaged over the items
    with at least two scored epochs (``n_items``); ``unanimous``: the share of those items on
    which every scored epoch agreed. ``alpha_nominal``: Krippendorff's alpha on those labels;
    ``alpha_interval``: on the raw scores. ``alpha`` is the one to read: nominal for verdicts
    (``labels="exact"``), interval for continuous scores; ``level`` says which. Alpha is NaN
    when undefined (no item with two scored epochs, or a single value in all the data: a
    judge that never varies and never disagrees has nothing to measure against chance).

    Parameters
    ----------
    epochs : int
        The epochs (``k``).
    n_items : int
        The items with at least two scored epochs.
    agreement : float
        The percent agreement.
    unanimous : float
        The share of items on which every scored epoch agreed.
    alpha : float
        The alpha to read (nominal or interval, as ``level`` says).
    level : {"nominal", "interval"}
        Which alpha ``alpha`` is.
    alpha_nominal : float
        Krippendorff's alpha on the labels.
    alpha_interval : float
        Krippendorff's alpha on the raw scores.
    labels : {"exact", "threshold"}
        What two epochs must share to agree.
    threshold : float, default 0.5
        The verdict's threshold with ``labels="threshold"``.
    reducer : str, optional
        The reducer the scores were reduced with (recorded beside the figures).

    See Also
    --------
    epoch_reliability : Compute it.
    """

    epochs: int
    n_items: int
    agreement: float
    unanimous: float
    alpha: float
    level: str
    alpha_nominal: float
    alpha_interval: float
    labels: str
    threshold: float = 0.5
    reducer: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (NaN kept as NaN; see :meth:`card_entry` for JSON).

        Returns
        -------
        dict
            The fields by name.
        """
        return dataclasses.asdict(self)

    def card_entry(self) -> dict[str, Any]:
        """What a :class:`~llm_connect.cards.JudgeCard` keeps (``reliability``): JSON-ready, NaN as ``None``.

        Returns
        -------
        dict
            The fields by name.
        """
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.to_dict().items()}

    def __str__(self) -> str:
        return (f"run-to-run reliability over {self.epochs} epochs, {self.n_items} items: "
                f"agreement {_fmt(self.agreement)}, Krippendorff's alpha ({self.level}) {_fmt(self.alpha)}")

    def _repr_html_(self) -> str:
        return view("epoch_reliability_html")(self)


def _fmt(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:.3f}"


def _epoch_matrix(data: Any) -> list[list[float]]:
    """Items x epochs, NaN where an epoch did not score: from a frame's ``epoch_scores`` or nested lists."""
    try:
        import pandas as pd

        if isinstance(data, pd.DataFrame):
            if "epoch_scores" not in data.columns:
                raise ValidationError("epoch_reliability needs an 'epoch_scores' column: pass the frame of "
                                      "judge_many(..., epochs=k) with k >= 2, or a list of per-item score lists")
            data = list(data["epoch_scores"])
    except ImportError:  # pragma: no cover - pandas is a core dependency
        pass
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
        raise ValidationError("epoch_reliability takes the frame of judge_many(..., epochs=k) or a list of "
                              "per-item lists of epoch scores")
    rows: list[list[float]] = []
    width: int | None = None
    for k, item in enumerate(data):
        if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
            raise ValidationError(f"item {k}'s epoch scores are a {type(item).__name__}, not a list of scores")
        row = []
        for s in item:
            if s is None:
                row.append(math.nan)
                continue
            if isinstance(s, bool) or not isinstance(s, (int, float)):
                raise ValidationError(f"item {k} has an epoch score {s!r} that is not a number (NaN for unscored)")
            row.append(float(s))
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ValidationError(f"item {k} has {len(row)} epoch scores, item 0 has {width}: every item needs one "
                                  "per epoch (NaN for an epoch that did not score)")
        rows.append(row)
    return rows


def _alpha(matrix: list[list[float]], level: Literal["nominal", "interval"]) -> float:
    """Krippendorff's alpha, NaN when it is undefined (no pairable values, or a single value in the data).

    Shared by :func:`epoch_reliability` (the epochs as coders) and ``PanelJudge.agreement`` (the members as
    coders); computed by the ``krippendorff`` package (Krippendorff 2004, *Content Analysis*, ch. 11)."""
    import numpy as np

    data = np.array(matrix, dtype=float)
    if data.size == 0:
        return math.nan
    pairable = np.sum(~np.isnan(data), axis=0) >= 2
    values = data[:, pairable]
    finite = values[~np.isnan(values)]
    if finite.size == 0 or np.unique(finite).size < 2:
        return math.nan
    import krippendorff

    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def epoch_reliability(
    data: Any, *, labels: Labels = "auto", threshold: float = 0.5, reducer: str | None = None
) -> EpochReliability:
    """Run-to-run reliability of a judge from its epoch scores (see :class:`EpochReliability`).

    Krippendorff's alpha comes from the ``krippendorff`` package, the epochs as coders (rows) and the items
    as units (columns).

    Parameters
    ----------
    data : DataFrame or list of list of float
        The frame of ``judge_many(..., epochs=k)`` (its ``epoch_scores`` column) or a list of per-item lists
        of ``k`` scores (NaN/None where an epoch did not score).
    labels : {"auto", "exact", "threshold"}, default "auto"
        ``"auto"`` (``"exact"`` when every score is 0, 0.5 or 1, else ``"threshold"``), ``"exact"`` or
        ``"threshold"`` (verdicts at ``threshold``).
    threshold : float, default 0.5
        The verdict's threshold.
    reducer : str, optional
        Recorded beside the figures (default: the frame's ``attrs["epochs"]["reducer"]``).

    Returns
    -------
    EpochReliability
        The figures.

    Examples
    --------
    >>> r = epoch_reliability([[1, 1, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0]])
    >>> r.labels, round(r.agreement, 3), round(r.alpha, 3)
    ('exact', 0.833, 0.686)
    """
    if labels not in ("auto", "exact", "threshold"):
        raise ValidationError(f"labels must be 'auto', 'exact' or 'threshold', got {labels!r}")
    threshold = validate_score(threshold, what="threshold")
    if reducer is None and hasattr(data, "attrs") and isinstance(data.attrs.get("epochs"), Mapping):
        reducer = data.attrs["epochs"].get("reducer")
    matrix = _epoch_matrix(data)
    epochs = len(matrix[0]) if matrix else 0
    values = [s for row in matrix for s in row if not math.isnan(s)]
    if labels == "auto":
        labels = "exact" if all(v in _VERDICT_VALUES for v in values) else "threshold"

    def label(s: float) -> float:
        if math.isnan(s):
            return math.nan
        return s if labels == "exact" else float(s >= threshold)

    labelled = [[label(s) for s in row] for row in matrix]
    shares: list[float] = []
    unanimous = 0
    for row in labelled:
        seen = [s for s in row if not math.isnan(s)]
        m = len(seen)
        if m < 2:
            continue
        same = sum(1 for a in range(m) for b in range(a + 1, m) if seen[a] == seen[b])
        shares.append(same / (m * (m - 1) / 2))
        unanimous += len(set(seen)) == 1
    n = len(shares)
    by_epoch_labels = [list(col) for col in zip(*labelled, strict=True)] if labelled else []
    by_epoch_scores = [list(col) for col in zip(*matrix, strict=True)] if matrix else []
    nominal = _alpha(by_epoch_labels, "nominal")
    interval = _alpha(by_epoch_scores, "interval")
    level = "nominal" if labels == "exact" else "interval"
    return EpochReliability(
        epochs=epochs, n_items=n, agreement=math.fsum(shares) / n if n else math.nan,
        unanimous=unanimous / n if n else math.nan, alpha=nominal if level == "nominal" else interval,
        level=level, alpha_nominal=nominal, alpha_interval=interval, labels=labels, threshold=threshold,
        reducer=reducer,
    )


def position_consistency_by_epoch(consistent: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Per epoch, of the pairwise judgments made in both orders, how many agreed across the orders:
    ``[{"epoch", "n", "consistent", "rate"}, ...]`` (``rate`` NaN when none)."""
    out = []
    for e, flags in enumerate(consistent):
        both = [bool(f) for f in flags if f is not None and not (isinstance(f, float) and math.isnan(f))]
        out.append({"epoch": e, "n": len(both), "consistent": sum(both),
                    "rate": sum(both) / len(both) if both else math.nan})
    return out
