"""Bias probes: change one thing about each answer, keep its correctness, and see the score move.

============  ==========================================================  ==============
probe         what changes                                                applies to
============  ==========================================================  ==============
``length``    neutral filler sentences appended to the candidate          every judge
``format``    the candidate reformatted as markdown (no word changed)     every judge
``injection`` an instruction to the grader appended to the candidate      every judge
``position``  baseline and candidate swapped (score read as 1 - score)    pairwise judges
============  ==========================================================  ==============

Each probe runs the judge through :func:`~llm_connect.grading.judge_many` on the
original and the perturbed items and reports, over the items scored both times,
the mean score shift with a seeded bootstrap interval, a paired Wilcoxon
signed-rank test (all-zero differences give p = 1.0), and the share of verdicts
that flipped at the threshold. A judge is *pairwise* when it is a
:class:`~llm_connect.grading.PairwiseJudge` or has a true ``pairwise``
attribute: its score says how likely the candidate beats the baseline, so
swapping the two should turn ``s`` into ``1 - s``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._display import view
from .._docstrings import share_parameters
from ..core import BudgetTracker, RunConfig, as_budget
from ..errors import ValidationError
from ..stats._validate import check_confidence
from ..stats.shift import ShiftStats, empty_shift, paired_shift
from ..testing import DEFAULT_INJECTION, pad_with_filler, plant_injection, to_markdown
from ._runner import ItemsLike, _judge_items, _named_judges, is_pairwise, items_table

if TYPE_CHECKING:
    from ..grading import Judge

__all__ = ["PROBES", "BiasReport", "ProbeResult", "ShiftStats", "is_pairwise", "paired_shift", "perturb_items",
           "probe_judge", "run_probes"]

PROBES: tuple[str, ...] = ("length", "format", "injection", "position")


@share_parameters
def perturb_items(items: pd.DataFrame, probe: str, *, seed: int = 0,
                  injection: str = DEFAULT_INJECTION) -> pd.DataFrame:
    """A copy of ``items`` with one probe's change applied.

    Parameters
    ----------
    items : pandas.DataFrame
        The items, with ``candidate`` (and ``baseline`` for ``position``) columns.
    {probe}
    seed : int, default 0
        Seeds the filler of the ``length`` probe (:func:`~llm_connect.testing.pad_with_filler`).
    {injection}

    Returns
    -------
    pandas.DataFrame
        The items, same index and columns: ``candidate`` padded, in markdown or injected (a missing one read as empty),
        or ``baseline`` and ``candidate`` swapped.

    Raises
    ------
    ValidationError
        When ``probe`` is unknown.
    """
    out = items.copy()
    cand = out["candidate"].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    if probe == "length":
        out["candidate"] = cand.map(lambda t: pad_with_filler(t, seed=seed))
    elif probe == "format":
        out["candidate"] = cand.map(to_markdown)
    elif probe == "injection":
        out["candidate"] = cand.map(lambda t: plant_injection(t, injection))
    elif probe == "position":
        out["candidate"], out["baseline"] = out["baseline"].copy(), cand
    else:
        raise ValidationError(f"unknown probe {probe!r}; choose from {', '.join(PROBES)}")
    return out


@share_parameters
@dataclass(frozen=True)
class ProbeResult:
    """What one probe did to one judge (:func:`probe_judge`).

    Parameters
    ----------
    judge : str
        The judge's name.
    {probe}
    stats : ShiftStats
        The mean shift with its interval, the signed-rank test and the flipped verdicts
        (:func:`~llm_connect.stats.paired_shift`).
    items : pandas.DataFrame
        One row per probed item: ``id``, ``candidate``, ``perturbed_candidate``, ``original``, ``perturbed`` (the two
        scores, NaN where unscored) and ``shift``; empty when the probe did not apply.
    threshold : float, default 0.5
        The pass threshold the flips are counted at.
    by_definition : str, default ""
        Why this probe lowers the judge's score by the judge's own definition (its ``by_definition`` for the probe:
        exact match gives 0 to a padded answer, which no longer equals the reference), or empty. A drop it explains is
        what the judge is, not a bias.
    """

    judge: str
    probe: str
    stats: ShiftStats
    items: pd.DataFrame = field(compare=False, repr=False)
    threshold: float = 0.5
    #: Why this probe lowers the judge's score by the judge's own definition (the judge's ``by_definition``
    #: for the probe: exact match gives 0 to a padded answer, which no longer equals the reference), or ``""``.
    #: A drop it explains is what the judge is, not a bias.
    by_definition: str = ""

    @property
    def expected(self) -> str:
        """:attr:`by_definition` when the score dropped (the direction the judge's definition explains), else ``""``."""
        shift = self.stats.mean_shift
        return self.by_definition if self.by_definition and math.isfinite(shift) and shift < 0 else ""

    def row(self) -> dict[str, Any]:
        """One flat row, as :attr:`BiasReport.frame` and ``bias.csv`` hold it.

        Returns
        -------
        dict of str to object
            ``judge``, ``probe``, the :class:`~llm_connect.stats.ShiftStats` figures (``n``, ``mean_original``,
            ``mean_perturbed``, ``mean_shift``, ``shift_low``, ``shift_high``, ``p_value``, ``flip_rate``, ``flips_up``,
            ``flips_down``, ``note``) and ``by_definition`` (:attr:`expected`).
        """
        s = self.stats
        return {"judge": self.judge, "probe": self.probe, "n": s.n, "mean_original": s.mean_original,
                "mean_perturbed": s.mean_perturbed, "mean_shift": s.mean_shift, "shift_low": s.shift_low,
                "shift_high": s.shift_high, "p_value": s.p_value, "flip_rate": s.flip_rate, "flips_up": s.flips_up,
                "flips_down": s.flips_down, "note": s.note, "by_definition": self.expected}

    @property
    def significant(self) -> bool:
        """The interval excludes 0."""
        s = self.stats
        return bool(s.n >= 2 and (s.shift_low > 0 or s.shift_high < 0))

    def _repr_html_(self) -> str:
        return str(view("probe_result_html")(self))


@dataclass
class BiasReport:
    """Every probe's result (:func:`run_probes`); ``frame`` has one row per judge and probe.

    Parameters
    ----------
    results : list of ProbeResult
        One per judge and probe, in the order they ran.
    threshold : float, default 0.5
        The pass threshold of a judge given none of its own.
    """

    results: list[ProbeResult]
    threshold: float = 0.5

    @property
    def frame(self) -> pd.DataFrame:
        rows = [r.row() for r in self.results]
        cols = ["judge", "probe", "n", "mean_original", "mean_perturbed", "mean_shift", "shift_low", "shift_high",
                "p_value", "flip_rate", "flips_up", "flips_down", "note", "by_definition"]
        return pd.DataFrame(rows, columns=cols)

    def result(self, judge: str, probe: str) -> ProbeResult:
        """One judge's result of one probe.

        Parameters
        ----------
        judge : str
            The judge's name.
        probe : str
            The probe's name.

        Returns
        -------
        ProbeResult
            The first result of that judge and probe.

        Raises
        ------
        KeyError
            When the report has none.
        """
        for r in self.results:
            if r.judge == judge and r.probe == probe:
                return r
        raise KeyError(f"no probe {probe!r} for judge {judge!r}")

    def _repr_html_(self) -> str:
        return str(view("bias_report_html")(self))


def _not_applicable(judge: str, probe: str, reason: str, threshold: float) -> ProbeResult:
    stats = empty_shift(reason)
    return ProbeResult(judge, probe, stats, pd.DataFrame(), threshold)


@share_parameters
def probe_judge(judge: Judge, items: ItemsLike, probe: str, *, name: str | None = None, original_scores: Any = None,
                threshold: float = 0.5, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0,
                reference_sep: str | None = None, injection: str = DEFAULT_INJECTION, concurrency: int = 16,
                progress: bool = True, run_config: RunConfig | None = None,
                budget: BudgetTracker | float | None = None) -> ProbeResult:
    """Run one probe on one judge: judge the items and their perturbed copies, and measure the shift.

    Parameters
    ----------
    judge : Judge
        The judge.
    items : DataFrame or iterable of mapping or str or os.PathLike
        The items (as :func:`score_items` reads them).
    {probe}
    name : str, optional
        The judge's name in the result; ``None``: its ``grader_id``.
    original_scores : array-like of float, optional
        The judge's scores of the unperturbed items, one per item (NaN where unscored), when already known (from
        :func:`score_items`, say); ``None``: they are judged too.
    threshold : float, default 0.5
        The pass threshold the flipped verdicts are counted at.
    {n_boot}
    {confidence}
    seed : int, default 0
        Seeds the perturbation and the bootstrap.
    {reference_sep}
    {injection}
    {concurrency}
    {progress}
    {run_config}
    {budget}

    Returns
    -------
    ProbeResult
        The shift over the items scored both times (``position`` reads the swapped score as ``1 - score``). An item not
        judged once the budget is spent has no pair and is left out. ``position`` on a judge that is not pairwise gives
        an empty result saying so.

    Raises
    ------
    ValidationError
        When ``probe`` is unknown, ``original_scores`` has not one score per item, or the items lack a column.

    See Also
    --------
    run_probes : Every probe on every judge.
    perturb_items : The perturbed items alone.

    Notes
    -----
    The paired test is Wilcoxon's signed-rank test (Wilcoxon 1945, "Individual comparisons by ranking methods"); the
    probes follow the biases of LLM judges that Zheng et al. 2023 ("Judging LLM-as-a-Judge with MT-Bench and Chatbot
    Arena": position, verbosity) and Wang et al. 2023 ("Large Language Models are not Fair Evaluators": position)
    describe.
    """
    name = name or str(getattr(judge, "grader_id", "judge"))
    check_confidence(confidence)
    if probe not in PROBES:
        raise ValidationError(f"unknown probe {probe!r}; choose from {', '.join(PROBES)}")
    if probe == "position" and not is_pairwise(judge):
        return _not_applicable(name, probe, "position applies only to pairwise judges", threshold)
    items = items_table(items)
    kwargs: dict[str, Any] = {"reference_sep": reference_sep, "concurrency": concurrency, "progress": progress,
                              "run_config": run_config, "budget": as_budget(budget)}
    if original_scores is None:
        original = _scores(_judge_items(judge, items, **kwargs))
    else:
        original = np.asarray(original_scores, dtype=float)
        if len(original) != len(items):
            raise ValidationError(f"original_scores has {len(original)} values for {len(items)} items")
    perturbed_items = perturb_items(items, probe, seed=seed, injection=injection)
    label = f"probe: {probe} \N{EM DASH} {name}"
    if probe == "position":
        # The references stay one text when swapped into the candidate's place.
        perturbed = 1.0 - _scores(_judge_items(judge, perturbed_items,
                                              **{**kwargs, "reference_sep": None, "desc": label}))
    else:
        perturbed = _scores(_judge_items(judge, perturbed_items, **kwargs, desc=label))
    stats = paired_shift(original, perturbed, threshold=threshold, n_boot=n_boot, confidence=confidence, seed=seed)
    detail = pd.DataFrame({"id": items["id"].tolist() if "id" in items.columns else list(range(len(items))),
                           "candidate": items["candidate"].tolist(),
                           "perturbed_candidate": perturbed_items["candidate"].tolist(), "original": original,
                           "perturbed": perturbed})
    detail["shift"] = detail["perturbed"] - detail["original"]
    return ProbeResult(name, probe, stats, detail, threshold, by_definition=by_definition_of(judge, probe))


def by_definition_of(judge: Any, probe: str) -> str:
    """Why ``probe`` lowers ``judge``'s score by the judge's own definition (its ``by_definition`` mapping, e.g.
    :class:`~llm_connect.grading.ExactMatchJudge`'s), or ``""``."""
    declared = getattr(judge, "by_definition", None)
    if not isinstance(declared, Mapping):
        return ""
    why = declared.get(probe)
    return why if isinstance(why, str) else ""


def _scores(batch: pd.DataFrame) -> np.ndarray:
    scores = pd.to_numeric(batch["quality_score"], errors="coerce").to_numpy(dtype=float)
    return np.where(batch["status"].to_numpy() == "scored", scores, np.nan)


def _resolve_probes(probes: str | Sequence[str] | None) -> tuple[list[str], bool]:
    """(probe names, whether they were chosen automatically)."""
    if probes is None or probes == "auto":
        return list(PROBES), True
    names = [p.strip() for p in (probes.split(",") if isinstance(probes, str) else probes) if p and p.strip()]
    unknown = [p for p in names if p not in PROBES]
    if unknown:
        raise ValidationError(f"unknown probe(s) {', '.join(unknown)}; choose from {', '.join(PROBES)}")
    return list(dict.fromkeys(names)), False


@share_parameters
def run_probes(judges: Judge | Mapping[str, Judge] | Sequence[Judge], items: ItemsLike, *,
               probes: str | Sequence[str] | None = "auto", original_scores: Mapping[str, Any] | None = None,
               threshold: float = 0.5, thresholds: Mapping[str, float] | None = None, n_boot: int = 1000,
               confidence: float = 0.95, seed: int = 0, reference_sep: str | None = None,
               injection: str = DEFAULT_INJECTION, concurrency: int = 16, progress: bool = True,
               run_config: RunConfig | None = None, on_result: Callable[[ProbeResult], None] | None = None,
               budget: BudgetTracker | float | None = None) -> BiasReport:
    """Every probe on every judge.

    ``probes="auto"`` runs those that apply to each judge (``position`` only for pairwise judges); naming ``position``
    for a judge that is not pairwise gives a row saying so.

    Parameters
    ----------
    judges : Judge or mapping of str to Judge or sequence of Judge
        A judge, ``{name: judge}`` or judges (named by ``grader_id``).
    items : DataFrame or iterable of mapping or str or os.PathLike
        The items the probes perturb (as :func:`score_items` reads them).
    probes : str or sequence of str, optional, default "auto"
        The probes: ``"auto"``, a list or comma-separated names; ``None`` for none.
    original_scores : mapping of str to array-like, optional
        Each judge's scores of the unperturbed items, when already known (else they are judged again).
    threshold : float, default 0.5
        The pass threshold of a judge not in ``thresholds``.
    thresholds : mapping of str to float, optional
        A pass threshold per judge.
    {n_boot}
    {confidence}
    seed : int, default 0
        Seeds the perturbations and the bootstrap.
    {reference_sep}
    {injection}
    {concurrency}
    {progress}
    {run_config}
    on_result : callable, optional
        Called with each :class:`ProbeResult` as soon as it is measured.
    {budget}

    Returns
    -------
    BiasReport
        One :class:`ProbeResult` per judge and probe. The budget covers every probe of every judge: once it is spent,
        the probes left have no pairs (``n`` 0).

    See Also
    --------
    calibrate : The probes beside the agreement.
    """
    names, auto = _resolve_probes(probes)
    check_confidence(confidence)
    named = dict(judges) if isinstance(judges, Mapping) else _named_judges(judges)
    items = items_table(items)  # read once (a path, mappings), for every probe
    tracker = as_budget(budget)  # one tracker for every probe (a limit in USD becomes one tracker)
    per = dict(thresholds or {})
    results = []
    for judge_name, judge in named.items():
        for probe in names:
            if auto and probe == "position" and not is_pairwise(judge):
                continue
            original = None if original_scores is None else original_scores.get(judge_name)
            result = probe_judge(judge, items, probe, name=judge_name, original_scores=original,
                                 threshold=per.get(judge_name, threshold), n_boot=n_boot, confidence=confidence,
                                 seed=seed, reference_sep=reference_sep, injection=injection, concurrency=concurrency,
                                 progress=progress, run_config=run_config, budget=tracker)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return BiasReport(results, threshold)
