"""``calibrate()``: every judge over one dataset, against each other and against people, in one call.

It runs the judges (:mod:`._runner`), the agreement tables (:mod:`._agreement`), the bias probes (:mod:`._bias`) and the
per-group breakdown (:mod:`._groups`), and returns a :class:`~llm_connect.calibration.CalibrationReport` (or a
:class:`~llm_connect.calibration.PairwiseReport` for a / b / tie data). It sits above both report classes, so neither
imports the other's module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docstrings import share_parameters
from ..core import BudgetTracker, RunConfig, as_budget
from ..errors import ValidationError
from ..items import load_items
from ..stats._validate import by_columns, check_confidence
from ..stats.clusters import cluster_column
from ._agreement import agreement_table
from ._bias import run_probes
from ._cards import card_reference
from ._groups import group_breakdown, group_column
from ._pairwise import PairwiseReport, calibrate_pairwise, is_pairwise_input
from ._report import CalibrationReport
from ._runner import (
    ItemsLike,
    _named_judges,
    _score_items,
    items_table,
    needs_reference,
    parse_labels,
)
from ._selective import parse_selective, selective_judges, selective_results

if TYPE_CHECKING:
    from ..grading import Judge
    from ..quality import BaseLedger

__all__ = ["calibrate", "default_groups"]


def default_groups(scores: pd.DataFrame) -> dict[str, str]:
    """The group columns of graded agreement when none are given: ``candidate_model`` as the system when it names two or
    more models, ``prompt`` as the document when some prompt has several rows."""
    out: dict[str, str] = {}
    if "candidate_model" in scores.columns and scores["candidate_model"].dropna().nunique() >= 2:
        out["system"] = "candidate_model"
    if "prompt" in scores.columns and scores["prompt"].dropna().duplicated().any():
        out["document"] = "prompt"
    return out


def _selective_specs(named: dict[str, Any], items: Any, human: Any, annotators: Sequence[str],
                     levels: tuple[float, float], thresholds: Mapping[str, Any] | None,
                     threshold: float, epochs: int = 1, seed: int = 0) -> dict[str, Any]:
    """The selective judges of ``calibrate(..., selective=...)``, after checking there are enough human labels (before
    any judge runs)."""
    from ..stats.selective import min_items

    alpha, delta = levels
    columns = [human] if isinstance(human, str) else list(human or [])
    columns = columns or list(annotators)
    if not columns:
        raise ValidationError("selective= needs human labels to calibrate against: pass human=COLUMN")
    frame = items_table(items, baseline=needs_reference(named.values()))
    if columns[0] not in frame.columns:
        raise ValidationError(f"no label column {columns[0]!r} in the data")
    labelled = int(np.isfinite(parse_labels(frame[columns[0]].tolist(), column=str(columns[0]))).sum())
    need = min_items(alpha, delta)
    if labelled < need:
        raise ValidationError(f"selective: too few labelled items: {labelled}; the guarantee at alpha={alpha:g}, "
                              f"delta={delta:g} needs at least {need} (with fewer, even no disagreement at all cannot "
                              "pass the exact binomial bound); label more items or raise alpha or delta")
    return selective_judges(named, alpha, delta, thresholds=thresholds, threshold=threshold, epochs=epochs, seed=seed)


@share_parameters
def calibrate(judges: Judge | Mapping[str, Judge] | Sequence[Judge], items: ItemsLike, *,
              human: str | Sequence[str] | None = None, annotators: Sequence[str] = (),
              reference_sep: str | None = None, probes: str | Sequence[str] | None = "auto",
              probe_limit: int | None = None, threshold: float = 0.5,
              thresholds: Mapping[str, float | str] | None = None, n_boot: int = 1000, confidence: float = 0.95,
              seed: int = 0, concurrency: int = 16, progress: bool = True, run_config: RunConfig | None = None,
              ledger: BaseLedger | str | os.PathLike[str] | None = None, task_type: str | None = None,
              by: str | None = None, pairwise: bool | None = None,
              preference_codes: str | Mapping[str, Any] | None = None, scale: Any = None,
              groups: Mapping[str, str] | None = None, epochs: int = 1, reducer: Any = "mean",
              budget: BudgetTracker | float | None = None, selective: Any = None, batch: Any = False,
              cluster: str | None = "auto") -> CalibrationReport | PairwiseReport:
    """Score ``items`` with every judge, measure their agreement with each other and with the human labels, and run the
    bias probes.

    Pairwise data (columns ``candidate_a`` and ``candidate_b``, or ``pairwise=True``) is judged by pairwise judges and
    measured without any threshold: three-way (a/b/tie) agreement, accuracy on people's non-tie pairs, tie rates,
    consistency across orders and position bias (see :func:`~llm_connect.calibration.calibrate_pairwise`). Every scored
    judgment goes to ``ledger`` as ``judge_many(..., ledger=...)`` records it, and with ``batch`` the calls are sent as
    :func:`score_items` sends them. Unscored replies are NaN, dropped pair by pair.

    Parameters
    ----------
    judges : Judge or mapping of str to Judge or sequence of Judge
        A judge, ``{name: judge}`` or judges (named by ``grader_id``).
    items : DataFrame or iterable of mapping or str or os.PathLike
        A DataFrame, mappings or the path of a JSON Lines / CSV / TSV file (see :func:`score_items`).
    human : str or sequence of str, optional
        A label column, or several (rating dimensions such as ``["coherence", "relevance"]``), each a separate target
        with its own agreement rows.
    annotators : sequence of str, default ()
        Columns of individual people's labels (see :func:`score_items`).
    reference_sep : str, optional
        The separator of several reference answers in ``baseline`` (see :func:`score_items`).
    probes : str or sequence of str, optional, default "auto"
        ``"auto"`` (those that apply to each judge), a list or comma-separated names, or ``None``/``[]`` for none.
    probe_limit : int, optional
        Probe a seeded sample of at most that many items (each probe costs one more judge call per item).
    threshold : float, default 0.5
        The score at or above which a judgment is a pass.
    thresholds : mapping of str to float or "best", optional
        Per judge, a number or ``"best"`` (chosen by 5-fold cross-validation against the people, its verdict statistics
        out of fold; see :func:`~llm_connect.calibration._agreement.choose_threshold`).
    n_boot : int, default 1000
        Bootstrap resamples of the intervals.
    confidence : float, default 0.95
        The intervals' confidence level.
    seed : int, default 0
        Seeds the bootstrap, the probe sample and the selective calibration.
    {concurrency}
    {progress}
    {run_config}
    {ledger}
    {task_type}
    by : str, optional
        An input column (e.g. ``"candidate_model"``); every agreement and bias figure is also computed per group of its
        values, the pooled figure beside (:attr:`CalibrationReport.by_group`, see
        :mod:`llm_connect.calibration._groups`). A column the data lacks is an error before any judge runs.
    pairwise : bool, optional
        Whether the data is pairwise; ``None``: read from the columns.
    preference_codes : str or mapping, optional
        What the preference column's values mean on pairwise data, e.g. ``"a=1,b=2,tie=0"``.
    scale : tuple of (float, float) or str, optional
        ``(low, high)`` (or ``"1-5"``): the labels are ratings on that scale; rows against them gain quadratic-weighted
        kappa and ordinal/interval alpha on the scale, and correlations per ``groups``.
    groups : mapping of str to str, optional
        ``{"system": column, "document": column}``; by default, with a scale, ``candidate_model`` as system and
        ``prompt`` as document where they repeat (see :func:`~llm_connect.calibration._agreement.grouped_correlation`).
    {epochs}
    {reducer}
    {budget}
    selective : tuple of (float, float) or bool or mapping or str, optional
        ``(alpha, delta)`` (or ``True`` for 0.1 and 0.1, ``{"alpha": ..., "delta": ...}``, or
        ``"alpha=0.1,delta=0.1"``): every judge is also calibrated as a selective judge (see Notes).
    {batch}
    cluster : str, optional, default "auto"
        Which items are not independent. ``"auto"``: the ``conversation_id`` column when the items have one (the turns
        of one conversation), else independent items; a column name of the items; ``None``: independent items. With
        clusters the agreement intervals (and those per group, and the judge cards' and estimates' intervals) resample
        or vary whole conversations, not turns (:func:`~llm_connect.calibration.agreement_table`); the agreement table's
        caption and rows say which column and how many conversations. A column the items lack is an error before any
        judge runs. The bias probes' intervals still treat items as independent.

    Returns
    -------
    CalibrationReport or PairwiseReport
        The scores, agreement table, bias probes and judge cards; a :class:`~llm_connect.calibration.PairwiseReport` for
        pairwise data.

    Raises
    ------
    JudgeFailedError
        Naming the judge and its first error, when a judge scores none of the items for a reason of its own (every row
        an error, or a reply with no verdict; not the budget running out): a judge that judged nothing gets no
        agreement, card or verdict.
    ValidationError
        For ``epochs > 1`` or ``selective`` on pairwise data, too few human labels for ``selective``, or a ``by`` or
        ``cluster`` column the data lacks.

    See Also
    --------
    score_items : Only the scores.
    agreement_table : Only the agreement.
    run_probes : Only the bias probes.

    Notes
    -----
    With ``epochs=k`` each judge's card carries its run-to-run reliability (epochs, percent agreement, Krippendorff's
    alpha: :attr:`~llm_connect.cards.JudgeCard.reliability`); the bias probes judge the perturbed items once. The budget
    covers every judge, every epoch and every probe; rows not attempted have NaN scores, left out of agreement, and
    probes on them have no pairs.

    With ``selective`` (Jung, Brahman & Choi, ICLR 2025, arXiv:2407.18370; :class:`~llm_connect.grading.SelectiveJudge`,
    its confidence ``"auto"``), a judge's confidence per item is ``confidence_<judge>`` in the scores, its cut-off is
    chosen on the labelled items so that it agrees with people on at least ``1 − alpha`` of the items it judges, with
    probability ``1 − delta``; :attr:`CalibrationReport.selective` holds the calibrated judges (ready for fresh items),
    and the agreement table, the judge cards (their verdict lines) and the report (each judge's risk-coverage curve)
    show them. Needs human labels, at least :func:`~llm_connect.stats.selective.min_items` of them (an error names how
    many). Each returned judge judges as it was calibrated: at its threshold in ``thresholds`` (a ``"best"`` one too:
    the confidence is read again at the threshold chosen, and the judge's ``note`` says the threshold was chosen on the
    same labels), and with ``epochs=k`` it judges each item ``k`` times, reduced by ``reducer``, its confidence that of
    the ``k`` judgments pooled.
    """
    check_confidence(confidence)
    if isinstance(items, (str, os.PathLike)):  # read once: graded or pairwise, the columns say which
        items = load_items(items, items=False)
    tracker = as_budget(budget)  # one tracker for every stage (a limit in USD becomes one tracker)

    if pairwise or (pairwise is None and is_pairwise_input(items)):
        if parse_selective(selective) is not None:
            raise ValidationError("selective= calibrates a cut-off on graded data (a score per answer, a verdict "
                                  "against people's labels); pairwise data (a / b / tie) has no selective judge "
                                  "yet: drop selective=, or judge the answers one at a time against graded labels")
        if by is not None or reference_sep is not None or thresholds:
            raise ValidationError("by=, reference_sep= and thresholds= do not apply to pairwise data (no threshold, "
                                  "no reference answer); drop them")
        if epochs != 1:
            raise ValidationError("epochs= is not available for pairwise data in calibrate yet; run "
                                  "judge_many(judge, items, epochs=k) or tournament(..., epochs=k) for the "
                                  "run-to-run reliability, and JudgeCard.with_reliability(df) to keep it")
        if human is not None and not isinstance(human, str):
            if len(list(human)) != 1:
                    raise ValidationError("pairwise data takes one human preference column, not several")
            human = next(iter(human))
        return calibrate_pairwise(judges, items, human=human, annotators=annotators, codes=preference_codes,
                                  probes=probes, probe_limit=probe_limit, n_boot=n_boot, confidence=confidence,
                                  seed=seed, concurrency=concurrency, progress=progress, run_config=run_config,
                                  ledger=ledger, task_type=task_type, budget=tracker)
    named = _named_judges(judges)
    if cluster is not None and cluster != "auto":  # checked before any judge runs
        items = items_table(items)
        cluster_column(items.columns, cluster, what="the items")
    levels = parse_selective(selective)
    specs: dict[str, Any] = {}
    if levels is not None:  # each judge run as a selective judge's scorer: its confidence beside its score
        specs = _selective_specs(named, items, human, annotators, levels, thresholds, threshold,
                                 epochs=epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else 1,
                                 seed=seed)
        named = {name: spec.scorer for name, spec in specs.items()}
    group_col = None
    if by is not None:  # checked before any judge runs
        (by_one, *more) = by_columns(by) or [""]  # the package's one reading of by=
        if more:
            raise ValidationError(f"calibrate groups by one column, got {by!r}; pass by='COLUMN'")
        items = items_table(items, baseline=needs_reference(named.values()))
        humans = [human] if isinstance(human, str) else list(human or [])
        group_col = group_column(items.columns, by_one, labels=[*humans, *annotators])
        by = by_one
    scored = _score_items(named, items, human=human, annotators=annotators, reference_sep=reference_sep,
                          concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                          task_type=task_type, scale=scale, epochs=epochs, reducer=reducer, budget=tracker,
                          batch=batch, refuse_failure=True)
    scores = scored.to_frame()  # users read the attrs mirror; the stages below get ``scored``
    ann = scored.annotators
    if groups is None and scale is not None:
        groups = default_groups(scores)
    table = agreement_table(scores, threshold=threshold, thresholds=thresholds, annotators=ann, n_boot=n_boot,
                            confidence=confidence, seed=seed, labels=scored.labels, scale=scale, groups=groups,
                            cluster=cluster)
    thresholds = table.thresholds  # "best" resolved to the threshold chosen on all labelled rows
    bias = None
    probe_rows: Any = None
    if probes and named:
        probe_rows = np.arange(len(scores))
        if probe_limit is not None and probe_limit < len(scores):
            rng = np.random.default_rng(seed)
            probe_rows = np.sort(rng.choice(len(scores), size=max(0, int(probe_limit)), replace=False))
        sample = scores.iloc[probe_rows].reset_index(drop=True)
        items_frame = sample[[c for c in ("id", "prompt", "baseline", "candidate", "candidate_model")
                              if c in sample.columns]]
        bias = run_probes(named, items_frame, probes=probes,
                          original_scores={k: sample[f"score_{k}"].to_numpy(dtype=float) for k in named},
                          threshold=threshold, thresholds=thresholds, n_boot=n_boot, confidence=confidence, seed=seed,
                          reference_sep=reference_sep, concurrency=concurrency, progress=progress,
                          run_config=run_config, budget=tracker)
    report = CalibrationReport(scores=scores, agreement=table, bias=bias, threshold=threshold,
                               thresholds=dict(thresholds or {}), n_boot=n_boot, confidence=confidence, seed=seed,
                               scored=replace(scored, frame=scores))
    if specs:
        ref, people = card_reference(report)
        if people and ref is not None:
            chosen = [name for name, choice in table.chosen.items() if not choice.reason]
            report.selective = selective_results(scores, specs, reference=ref, threshold_of=report.threshold_of,
                                                 distributions=scored.pass_distributions, chosen=chosen,
                                                 epochs=scored.epochs, reducer=reducer,
                                                 cluster=cluster_column(scores.columns, cluster, what="the items"),
                                                 seed=seed)
            for name, judge in report.selective.items():  # the confidence it was calibrated on (read again at "best")
                if f"confidence_{name}" in scores.columns and judge.calibration_frame is not None:
                    scores[f"confidence_{name}"] = judge.calibration_frame["confidence"].to_numpy(dtype=float)
    if by is not None and group_col is not None:
        report.by_group = group_breakdown(scores, by, group_col, agreement=table, bias=bias, probe_rows=probe_rows,
                                          judges=report.judges, reference=report.reference, n_boot=n_boot,
                                          confidence=confidence, seed=seed, threshold=threshold, thresholds=thresholds,
                                          annotators=ann, labels=scored.labels, scale=scale, cluster=cluster)
    return report


