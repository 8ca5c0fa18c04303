"""Judge cards from scores and from a calibration report: a judge's scores against people's labels made into a
:class:`~llm_connect.cards.JudgeCard` (:func:`card_from_scores`), every machine judge of a report
(:func:`cards_from_report`), and the quality estimates a report's labels support (:func:`report_estimates`). The card
itself, its verdict in words and the registry beside a ledger are :mod:`llm_connect.cards`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from .._docstrings import share_parameters
from ..cards import JudgeCard, ProbeEffect, card_verdict, reliability_entry, selective_line, weak_judge_reasons
from ..errors import ValidationError
from ..stats.shift import mean_difference

__all__ = ["card_from_scores", "card_reference", "cards_from_report", "report_estimates"]


def _num(value: Any) -> float:
    """A float, NaN for None/NA/non-numbers."""
    try:
        return math.nan if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return math.nan


def _finite(value: Any) -> bool:
    return math.isfinite(_num(value))


@share_parameters
def card_from_scores(judge: Iterable[float | None], reference: Iterable[float | None], *, grader_id: str,
                     rubric_hash: str | None = None, reference_name: str = "human", people: bool = True,
                     threshold: float = 0.5, reference_threshold: float | None = None,
                     probes: Iterable[ProbeEffect] = (), position_consistency: float | None = None,
                     unscored_rate: float | None = None, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0,
                     verdicts: Any = None, reliability: Any = None, cluster: Any = None) -> JudgeCard:
    """A :class:`~llm_connect.cards.JudgeCard` from a judge's scores and reference scores on the same items.

    Parameters
    ----------
    judge, reference : array-like of float
        The judge's scores and the reference's (people's labels), one per item in 0..1, NaN where missing (unscored,
        unlabelled).
    grader_id : str
        The judge's ``grader_id``, the card's key.
    rubric_hash : str, optional
        Its rubric's hash, the card's other key.
    reference_name : str, default "human"
        What the reference is called on the card.
    people : bool, default True
        Whether the reference is people's labels (a mean bias is then measured, and the verdict says so).
    threshold : float, default 0.5
        The judge's pass threshold.
    reference_threshold : float, optional
        The reference's; ``None``: ``threshold``.
    probes : iterable of ProbeEffect, default ()
        The judge's bias probes, which the verdict weighs.
    position_consistency : float, optional
        A pairwise judge's share of pairs judged alike in both orders.
    unscored_rate : float, optional
        The share of items the judge could not score; ``None``: the share of NaN in ``judge``.
    {n_boot}
    {confidence}
    seed : int, default 0
        Seeds the bootstrap.
    verdicts : array-like of bool, optional
        The judge's verdicts when they are not ``judge >= threshold`` (the out-of-fold verdicts of a threshold chosen by
        cross-validation, so that the card's kappa is never measured on the rows that chose it).
    reliability : optional
        The judge's run-to-run reliability from repeated judging (an :class:`~llm_connect.grading.EpochReliability`, the
        frame of ``judge_many(..., epochs=k)`` or its card entry; see :func:`~llm_connect.cards.reliability_entry`).
    cluster : array-like, optional
        One cluster id per item (a Series' name names the column): the kappa and agreement bootstraps resample whole
        clusters and the mean bias's interval is cluster-robust (see :func:`pair_agreement`); the card's ``cluster``
        says which. ``None``: independent items.

    Returns
    -------
    JudgeCard
        Kappa and percent agreement with their intervals (:func:`pair_agreement`), the mean bias
        (:func:`~llm_connect.stats.shift.mean_difference`), the yes rate, the verdict in words by the cards' rule
        (:func:`~llm_connect.cards.card_verdict`) and, for a weak judge, why
        (:func:`~llm_connect.cards.weak_judge_reasons`).

    Raises
    ------
    ValidationError
        When ``judge`` and ``reference`` differ in length.
    """
    from ._agreement import pair_agreement

    a = np.asarray(pd.to_numeric(pd.Series(list(judge)), errors="coerce"), dtype=float)
    b = np.asarray(pd.to_numeric(pd.Series(list(reference)), errors="coerce"), dtype=float)
    if a.shape != b.shape:
        raise ValidationError(f"judge and reference scores differ in length ({a.size} vs {b.size})")
    pair = pair_agreement(a, b, judge_a=grader_id, judge_b=reference_name, threshold=threshold,
                          threshold_b=reference_threshold, n_boot=n_boot, confidence=confidence, seed=seed,
                          statistics=("percent_agreement", "cohen_kappa"), verdicts_a=verdicts, cluster=cluster)
    pa, kap = pair["percent_agreement"], pair["cohen_kappa"]
    mb, ml, mh, _ = (mean_difference(a, b, confidence=confidence, cluster=cluster) if people
                     else (math.nan,) * 3 + (0,))
    rate = float(np.isnan(a).mean()) if unscored_rate is None and a.size else _num(unscored_rate)
    probes = tuple(probes)
    scored = np.isfinite(a)
    said_yes = (a >= threshold)[scored]  # every item it scored, labelled or not
    yes_rate = float(said_yes.mean()) if said_yes.size else math.nan
    weak = weak_judge_reasons(kappa_low=kap.low, kappa_high=kap.high, yes_rate=yes_rate, people=people,
                              confidence=confidence)
    verdict = card_verdict(grader_id, kappa=kap.value, kappa_low=kap.low, kappa_high=kap.high, n=pair.n,
                            reference=reference_name, people=people, confidence=confidence, biases=probes,
                            mean_bias=mb, bias_low=ml, bias_high=mh, unscored_rate=rate, yes_rate=yes_rate)
    if weak:
        verdict += f"; flagged weak: {weak}"
    return JudgeCard(
        grader_id=grader_id, rubric_hash=rubric_hash, reference=reference_name, people=people, n_labelled=pair.n,
        percent_agreement=_num(pa.value), agreement_low=_num(pa.low), agreement_high=_num(pa.high),
        kappa=_num(kap.value), kappa_low=_num(kap.low), kappa_high=_num(kap.high), mean_bias=_num(mb),
        bias_low=_num(ml), bias_high=_num(mh), unscored_rate=rate, n_items=int(a.size), verdict=verdict, probes=probes,
        position_consistency=position_consistency, confidence=confidence, threshold=threshold, yes_rate=yes_rate,
        weak=weak, reliability=reliability_entry(reliability),
        cluster=({"column": pair.cluster, "n_clusters": pair.n_clusters} if pair.cluster is not None else None))


# -- from a calibration report -------------------------------------------------------------------


def card_reference(report: Any) -> tuple[str | None, bool]:
    """What a report's judges are checked against, and whether that is people.

    People when the report has human labels (``human``, else the first annotator column); otherwise the best non-LLM
    judge: exact match, else another judge without a model (embedding similarity); ``(None, False)`` when there is none.
    """
    labels = list(report.labels)
    if "human" in labels:
        return "human", True
    if labels:
        return labels[0], True
    families = report.meta.judge_families
    grader_ids = report.meta.grader_ids
    plain = [j for j in report.judges if families.get(j) is None]
    exact = [j for j in plain if str(grader_ids.get(j, j)).startswith("exact")]
    chosen = (exact or plain or [None])[0]
    return chosen, False


def _probe_effects(report: Any, judge: str) -> tuple[list[ProbeEffect], float | None]:
    effects: list[ProbeEffect] = []
    consistency: float | None = None
    if report.bias is not None:
        for r in report.bias.results:
            if r.judge != judge or not r.stats.n:
                continue
            s = r.stats
            effects.append(ProbeEffect(r.probe, _num(s.mean_shift), _num(s.shift_low), _num(s.shift_high),
                                       _num(s.p_value), int(s.n), by_definition=getattr(r, "by_definition", "")))
            if r.probe == "position" and _finite(s.flip_rate):
                consistency = 1.0 - float(s.flip_rate)
    if not any(e.probe == "length" for e in effects):
        try:
            eff = report.length_effect(judge)
        except (ValueError, KeyError, np.linalg.LinAlgError):
            eff = None
        if eff is not None and _finite(eff.coef):
            declared = (getattr(report.meta, "by_definition", None) or {}).get(judge) or {}
            effects.append(ProbeEffect("length", float(eff.coef), _num(eff.low), _num(eff.high), _num(eff.p_value),
                                       int(eff.n), source="regression", by_definition=declared.get("length", "")))
    return effects, consistency


def cards_from_report(report: Any) -> list[JudgeCard]:
    """A :class:`JudgeCard` for every machine judge of a :class:`~llm_connect.calibration.CalibrationReport`.

    Each judge is checked against :func:`card_reference` (people when labelled); its probes (and, where no length probe
    ran, the length regression) become the card's bias effects; a pairwise judge's position consistency is one minus the
    position probe's flip rate; a judge run in epochs (``calibrate(..., epochs=k)``) has its run-to-run reliability in
    ``reliability``. The verdict line names the judge as the report does; the card is keyed by its ``grader_id`` and
    rubric hash.
    """
    ref, people = card_reference(report)
    scores = report.scores
    grader_ids = report.meta.grader_ids
    rubric_hashes = report.meta.rubric_hashes
    usage = report.meta.usage
    cards = []
    n = len(scores)
    for judge in report.judges:
        if judge == ref:
            continue
        column = scores[f"score_{judge}"].to_numpy(dtype=float)
        reference = (scores[f"score_{ref}"].to_numpy(dtype=float) if ref is not None else np.full(n, math.nan))
        u = usage.get(judge) or {}
        unscored = (u.get("unscored", 0) + u.get("error", 0)) / n if n else math.nan
        probes, consistency = _probe_effects(report, judge)
        reliability = (getattr(report.meta, "reliability", None) or {}).get(judge)  # calibrate(..., epochs=k)
        choice = getattr(report.agreement, "chosen", {}).get(judge)
        cv = choice.verdicts if choice is not None and choice.reference == ref else None
        card = card_from_scores(column, reference, grader_id=str(grader_ids.get(judge, judge)),
                                rubric_hash=rubric_hashes.get(judge), reference_name=ref or "nothing", people=people,
                                threshold=report.threshold_of(judge),
                                reference_threshold=report.threshold_of(ref) if ref is not None else None,
                                probes=probes, position_consistency=consistency, unscored_rate=unscored,
                                n_boot=report.n_boot, confidence=report.confidence, seed=report.seed, verdicts=cv,
                                reliability=reliability, cluster=getattr(report, "cluster_ids", None))
        if card.grader_id != judge:  # the verdict names the judge as the report does
            card = replace(card, verdict=judge + card.verdict[len(card.grader_id):])
        chosen = (getattr(report, "selective", None) or {}).get(judge)
        if chosen is not None and chosen.calibration is not None:  # calibrate(..., selective=...)
            entry = chosen.summary()
            card = replace(card, selective=entry, verdict=f"{card.verdict}; selective: {selective_line(entry)}")
        if getattr(report, "by_group", None) is not None and ref is not None:  # kappa per group
            card = replace(card, by_group=report.by_group.card_entry(judge, ref))
        cards.append(card)
    return cards


def report_estimates(report: Any, *, judge: str | None = None, by: str | None = "candidate_model",
                     labelled: Any = None) -> pd.DataFrame | None:
    """PPI++ / human-only / judge-only estimates of the candidates' quality from a calibration report.

    ``judge``: the machine judge whose scores are corrected (default: the one with the highest kappa against people);
    the human labels are the report's reference label column (``human``, else the first annotator). ``labelled``: an
    optional boolean mask of the rows whose label may be used (e.g. a random sample, to show what a few labels buy); the
    others count as unlabelled. Grouped ``by`` the candidate's model when the data names one. ``None`` when there are no
    human labels or no machine judge.
    """
    from ..stats.estimates import estimate_quality

    ref, people = card_reference(report)
    if not people or ref is None or not report.judges:
        return None
    scores = report.scores
    if judge is None:
        best, best_kappa = None, -math.inf
        for j in report.judges:
            try:
                k = report.agreement.pair(j, ref)["cohen_kappa"].value
            except KeyError:
                continue
            if _finite(k) and k > best_kappa:
                best, best_kappa = j, float(k)
        judge = best or report.judges[0]
    human = scores[f"score_{ref}"].to_numpy(dtype=float).copy()
    if labelled is not None:
        mask = np.asarray(labelled, dtype=bool)
        human[~mask] = math.nan
    frame = pd.DataFrame({"judge": scores[f"score_{judge}"].to_numpy(dtype=float), "human": human})
    group = None
    if by is not None and by in scores.columns and scores[by].notna().any():
        frame[by] = scores[by].astype(object).where(scores[by].notna(), "unknown").astype(str).to_numpy()
        group = by
    clusters = getattr(report, "cluster_ids", None)  # the conversations the report clustered by
    key = None
    if clusters is not None:
        key = str(clusters.name) if clusters.name not in frame.columns else f"{clusters.name}_cluster"
        frame[key] = clusters.to_numpy()
    out = estimate_quality(frame, judge="judge", human="human", by=group, cluster=key)
    out.insert(0, "judge", judge)
    return out
