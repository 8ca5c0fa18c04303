"""Selective judging in a calibration run: ``calibrate(..., selective=(alpha, delta))``.

Every machine judge is run as a selective judge's scorer (:attr:`~llm_connect.grading.SelectiveJudge.scorer`: each item
judged, with its confidence, ``confidence_<judge>`` in the scores), and its cut-off is chosen on the labelled items by
fixed-sequence testing with exact binomial bounds (Jung, Brahman & Choi, ICLR 2025, *Trust or Escalate*,
arXiv:2407.18370; :mod:`llm_connect.stats.selective`). The report keeps the calibrated judges
(:attr:`~llm_connect.calibration.CalibrationReport.selective`, ready to judge fresh items), a selective row per judge in
``agreement.csv`` (:func:`selective_frame`), the verdict line on each judge card ("judges 62% of items with at least 90%
agreement with people, guaranteed at 90% confidence; abstains on 38%") and each judge's risk-coverage curve with its
cut-off in the report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..stats.selective import check_level, fixed_sequence_cutoff

__all__ = ["SELECTIVE_COLUMNS", "parse_selective", "selective_frame", "selective_judges", "selective_results"]

#: The columns of a selective row of ``agreement.csv`` (:func:`selective_frame`), beside the pair's own
#: ``judge_a`` (the judge) and ``judge_b`` (the people): ``selective`` (``alpha=...,delta=...``), ``n``
#: (labelled items the judge scored), ``n_judged`` (those above the cut-off), ``percent_agreement`` (its
#: agreement with people there), ``coverage`` (``n_judged / n``), ``abstained`` (``1 − coverage``),
#: ``cutoff`` (empty: abstains on every item), ``guaranteed_agreement`` (``1 − alpha``),
#: ``confidence_level`` (``1 − delta``), ``risk_upper`` (the exact upper bound on its disagreement above the
#: cut-off), ``confidence_source``, ``note`` and ``verdict``.
SELECTIVE_COLUMNS = ("judge_a", "judge_b", "selective", "n", "n_judged", "percent_agreement", "coverage", "abstained",
                     "cutoff", "guaranteed_agreement", "confidence_level", "risk_upper", "confidence_source", "note",
                     "verdict")


def parse_selective(value: Any) -> tuple[float, float] | None:
    """``selective=`` as ``(alpha, delta)``: ``None``/``False`` (off), ``True`` (0.1, 0.1), a pair, a mapping
    ``{"alpha": ..., "delta": ...}`` or the text ``"alpha=0.1,delta=0.1"`` (the CLI's ``--selective``)."""
    if value is None or value is False:
        return None
    if value is True:
        return 0.1, 0.1
    if isinstance(value, str):
        parts: dict[str, str] = {}
        for chunk in value.split(","):
            if not chunk.strip():
                continue
            key, sep, number = chunk.partition("=")
            if not sep or key.strip() not in ("alpha", "delta"):
                raise ValidationError(f"selective: {chunk.strip()!r} is not alpha=NUMBER or delta=NUMBER "
                                      "(e.g. alpha=0.1,delta=0.1)")
            parts[key.strip()] = number.strip()
        try:
            value = {k: float(v) for k, v in parts.items()}
        except ValueError:
            raise ValidationError(f"selective: {parts} holds a value that is not a number") from None
    if isinstance(value, Mapping):
        unknown = set(value) - {"alpha", "delta"}
        if unknown:
            raise ValidationError(f"selective takes alpha and delta, not {sorted(unknown)}")
        alpha, delta = value.get("alpha", 0.1), value.get("delta", 0.1)
    else:
        try:
            alpha, delta = value
        except (TypeError, ValueError):
            raise ValidationError(f"selective must be True, (alpha, delta), {{'alpha': ..., 'delta': ...}} or "
                                  f"'alpha=0.1,delta=0.1', got {value!r}") from None
    return check_level(alpha, "alpha"), check_level(delta, "delta")


def selective_judges(named: Mapping[str, Any], alpha: float, delta: float, *,
                     thresholds: Mapping[str, Any] | None = None, threshold: float = 0.5,
                     epochs: int = 1, seed: int = 0) -> dict[str, Any]:
    """Each judge as a :class:`~llm_connect.grading.SelectiveJudge` held to ``alpha`` and ``delta`` (one already
    selective keeps its confidence source); its threshold is the judge's number in ``thresholds``, else ``threshold`` (a
    threshold chosen by cross-validation, ``"best"``, is known only later: :func:`selective_results` then reads the
    confidence again there). With ``epochs > 1`` the run judges each item ``epochs`` times itself, so a judge that
    already judges several times is refused. A judge whose confidence is a ``"panel"`` of rubric versions gets them
    here, seeded by ``seed`` (:meth:`~llm_connect.grading.SelectiveJudge.with_panel`), as ``SelectiveJudge.calibrate``
    builds them."""
    from ..grading import SelectiveJudge

    out = {}
    for name, judge in named.items():
        t = (thresholds or {}).get(name, threshold)
        t = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else float(threshold)
        if isinstance(judge, SelectiveJudge):
            spec = judge.replace(alpha=alpha, delta=delta, cutoff=None, calibration=None)
        else:
            spec = SelectiveJudge(judge, alpha=alpha, delta=delta, threshold=t)
        spec = spec.with_panel(seed)  # a "panel" confidence from worked examples: its versions, as calibrate builds
        if epochs > 1 and spec.repeats > 1:
            raise ValidationError(f"selective judge {name!r} already judges each item {spec.repeats} times; with "
                                  f"epochs={epochs} each would be {epochs * spec.repeats}: drop epochs= here or "
                                  "its own epochs=")
        out[name] = spec
    return out


def selective_results(scores: pd.DataFrame, specs: Mapping[str, Any], *, reference: str, threshold_of: Any,
                      distributions: Mapping[str, Any] | None = None, chosen: Any = (), epochs: int = 1,
                      reducer: Any = "mean", cluster: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Each judge calibrated on the run's labelled items: ``{name: SelectiveJudge}`` with its cut-off.

    ``scores``: the run's frame (``score_<judge>``, ``confidence_<judge>``, ``score_<reference>``);
    ``threshold_of(name)``: the verdict threshold of a judge or of the people. A judge scored on too few labelled items
    abstains on everything, its ``note`` says why.

    The returned judge judges as it was calibrated: at the threshold its agreement was measured at (a threshold other
    than the one its confidence was read at, e.g. one chosen by cross-validation in ``chosen``, has the confidence read
    again there from ``distributions``, the scorer's ``pass_distribution`` per row), and with ``epochs > 1`` it judges
    each item ``epochs`` times, reduced by ``reducer`` and its confidence pooled, as the run did.

    ``cluster``: the column of ``scores`` holding each row's conversation, or ``None``. The exact binomial bound needs
    independent items, so with clusters each judge is calibrated on one labelled turn per conversation, drawn with
    ``seed`` (:func:`~llm_connect.grading.one_row_per_cluster`), and its ``note`` says so.
    """
    from ..grading import one_row_per_cluster

    out: dict[str, Any] = {}
    human = scores[f"score_{reference}"].to_numpy(dtype=float)
    t_ref = float(threshold_of(reference))
    for name, spec in specs.items():
        score = scores[f"score_{name}"].to_numpy(dtype=float)
        column = f"confidence_{name}"
        conf = scores[column].to_numpy(dtype=float) if column in scores.columns else np.full(len(scores), np.nan)
        t = float(threshold_of(name))
        changes: dict[str, Any] = {}
        note = ""
        if t != spec.threshold:  # the confidence was read at spec.threshold: read it again at t
            changes["threshold"] = t
            if spec.source in ("logprob", "panel", "epochs", "margin"):
                rows = list((distributions or {}).get(name) or [None] * len(score))
                conf = np.array([spec.confidence_at(s, d, t) if np.isfinite(s) else None
                                 for s, d in zip(score, rows, strict=True)], dtype=float)
        if name in set(chosen):
            note = (f"its threshold {t:.4g} was chosen on these labels (thresholds='best'); the guarantee takes it "
                    "as fixed beforehand: check the judge on fresh labelled items (evaluate_cutoff)")
        if epochs > 1 and spec.source is not None:
            changes.update(epochs=epochs, reducer=reducer)
            if not callable(spec.confidence):
                changes["confidence"] = spec.source  # "auto" would pick "epochs" once epochs= is given
        both = np.isfinite(score) & np.isfinite(human)
        agree = np.where(both, ((score >= t) == (human >= t_ref)).astype(float), np.nan)
        if cluster is not None:  # one labelled turn per conversation: the bound needs independent items
            labelled = np.flatnonzero(np.isfinite(human))
            kept = labelled[one_row_per_cluster(scores[cluster].to_numpy()[labelled], seed=seed)]
            if len(kept) < len(labelled):
                note = "; ".join(n for n in (
                    f"calibrated on one labelled turn per conversation ({cluster!r}: {len(kept)} of {len(labelled)} "
                    f"labelled turns, drawn with seed={seed}): the exact binomial bound needs independent items",
                    note) if n)
            drop = np.ones(len(agree), dtype=bool)
            drop[kept] = False
            agree = np.where(drop, np.nan, agree)
        if spec.source is None:
            cut = dataclasses.replace(fixed_sequence_cutoff([], [], alpha=spec.alpha, delta=spec.delta, strict=False),
                                      n=int(both.sum()), note=spec.note)
            cutoff = math.inf
        else:
            cut = fixed_sequence_cutoff(conf, agree, alpha=spec.alpha, delta=spec.delta, strict=False)
            if note:
                cut = dataclasses.replace(cut, note="; ".join(n for n in (cut.note, note) if n))
            cutoff = cut.cutoff
        done = spec.replace(cutoff=cutoff, calibration=cut, **changes)
        ids = scores["id"].to_numpy() if "id" in scores else np.arange(len(scores))
        done.calibration_frame = pd.DataFrame({"id": ids, "score": score, "confidence": conf, "label": human,
                                               "agree": agree})
        out[name] = done
    return out


def selective_frame(selective: Mapping[str, Any], reference: str | None) -> pd.DataFrame:
    """One row per selective judge (:data:`SELECTIVE_COLUMNS`), for ``agreement.csv`` and the report."""
    rows = []
    for name, judge in selective.items():
        cut = judge.calibration
        if cut is None:
            continue
        rows.append({"judge_a": name, "judge_b": reference, "selective": f"alpha={judge.alpha:g},delta={judge.delta:g}",
                     "n": cut.n, "n_judged": cut.n_judged, "percent_agreement": cut.agreement, "coverage": cut.coverage,
                     "abstained": 1.0 - cut.coverage if cut.n else math.nan,
                     "cutoff": cut.cutoff if math.isfinite(cut.cutoff) else math.nan,
                     "guaranteed_agreement": judge.guaranteed_agreement, "confidence_level": judge.confidence_level,
                     "risk_upper": cut.risk_upper, "confidence_source": judge.source or "none", "note": judge.note,
                     "verdict": judge.describe()})
    return pd.DataFrame(rows, columns=list(SELECTIVE_COLUMNS))
