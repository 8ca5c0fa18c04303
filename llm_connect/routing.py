"""Adaptive routing read from a quality ledger.

For a task type, :func:`route` picks the cheapest adapter whose quality meets a
threshold *with confidence*: the lower end of an interval of the mean of its
recent, non-stale observations (a percentile bootstrap; the Wilson interval
when every score is 0 or 1) must reach the threshold, over at least
``min_observations``. The decision carries the evidence table it was made
from, so a user can see why (each adapter: n, mean quality, interval, mean
cost, mean latency, stale or not).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import ValidationError
from .quality import QualityLedger, QualityObservation, is_stale

__all__ = ["EVIDENCE_COLUMNS", "RoutingDecision", "RoutingPolicy", "evidence_table", "route"]

EVIDENCE_COLUMNS = (
    "task_type",
    "adapter_id",
    "model_id",
    "n",
    "n_total",
    "n_stale",
    "mean_quality",
    "quality_low",
    "quality_high",
    "mean_cost_usd",
    "mean_latency_ms",
    "last_seen",
    "stale",
    "eligible",
    "reason",
)


@dataclass(frozen=True)
class RoutingPolicy:
    """What "good enough" means for routing.

    ``threshold``: the quality an adapter must reach, judged on the lower end of
    a ``confidence`` bootstrap interval of its mean quality. Only the ``recent``
    newest observations per adapter count (``None``: all), and none older than
    ``max_age`` (``None``: any age). An adapter needs ``min_observations``.
    """

    threshold: float = 0.8
    confidence: float = 0.95
    min_observations: int = 20
    max_age: timedelta | None = timedelta(days=30)
    recent: int | None = 200
    n_resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold, (int, float)) and 0.0 <= self.threshold <= 1.0):
            raise ValidationError(f"threshold must be in 0..1, got {self.threshold!r}")
        if not (isinstance(self.confidence, float) and 0.0 < self.confidence < 1.0):
            raise ValidationError(f"confidence must be a float in (0, 1), got {self.confidence!r}")
        if isinstance(self.min_observations, bool) or not isinstance(self.min_observations, int):
            raise ValidationError(f"min_observations must be a positive integer, got {self.min_observations!r}")
        if self.min_observations <= 0:
            raise ValidationError(f"min_observations must be > 0, got {self.min_observations}")
        if self.max_age is not None and (not isinstance(self.max_age, timedelta) or self.max_age < timedelta(0)):
            raise ValidationError(f"max_age must be a timedelta >= 0 or None, got {self.max_age!r}")
        if self.recent is not None and (
            isinstance(self.recent, bool) or not isinstance(self.recent, int) or self.recent <= 0
        ):
            raise ValidationError(f"recent must be a positive integer or None, got {self.recent!r}")
        if self.n_resamples < 100:
            raise ValidationError("n_resamples must be at least 100")


def _mean_interval(values: list[float], policy: RoutingPolicy) -> tuple[float, float]:
    """An interval for the mean quality.

    Pass/fail scores (all 0 or 1) get the Wilson score interval, which stays
    honest at the edges (95 passes out of 95 is not proof of a 100% pass rate;
    a bootstrap would say [1, 1]). Other scores get a seeded percentile
    bootstrap of the mean (``scipy.stats.bootstrap``).
    """
    import numpy as np

    if len(values) < 2:
        return (math.nan, math.nan)
    data = np.asarray(values, dtype=float)
    if np.all((data == 0.0) | (data == 1.0)):
        from scipy.stats import binomtest

        ci = binomtest(int(data.sum()), len(data)).proportion_ci(confidence_level=policy.confidence, method="wilson")
        return float(ci.low), float(ci.high)
    if np.all(data == data[0]):
        return (float(data[0]), float(data[0]))
    from scipy.stats import bootstrap

    res = bootstrap(
        (data,),
        np.mean,
        confidence_level=policy.confidence,
        n_resamples=policy.n_resamples,
        method="percentile",
        vectorized=True,
        random_state=policy.seed,
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _observations(source: QualityLedger | str | Any) -> Iterable[QualityObservation]:
    if isinstance(source, QualityLedger):
        return source.iter_observations()
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        return QualityLedger(source).iter_observations()
    return source  # an iterable of observations


def evidence_table(
    ledger: QualityLedger | str | Any,
    task_type: str | None = None,
    *,
    policy: RoutingPolicy | None = None,
    now: datetime | None = None,
) -> Any:
    """One row per (task type, adapter): the evidence :func:`route` decides on.

    ``ledger`` is a :class:`QualityLedger`, a path, or an iterable of observations.
    """
    import pandas as pd

    policy = policy or RoutingPolicy()
    current = now if now is not None else datetime.now(UTC)
    if current.tzinfo is None:
        current = current.replace(tzinfo=UTC)
    groups: dict[tuple[str, str], list[QualityObservation]] = {}
    for o in _observations(ledger):
        if task_type is None or o.task_type == task_type:
            groups.setdefault((o.task_type, o.adapter_id), []).append(o)

    rows = []
    for (task, adapter), obs in sorted(groups.items()):
        obs.sort(key=lambda o: o.recorded_at, reverse=True)
        fresh = [o for o in obs if policy.max_age is None or not is_stale(o, policy.max_age, now=current)]
        used = fresh[: policy.recent] if policy.recent else fresh
        n = len(used)
        scores = [o.quality_score for o in used]
        low, high = _mean_interval(scores, policy)
        mean_q = sum(scores) / n if n else math.nan
        stale = not fresh
        if stale:
            reason = f"stale: no observation newer than {policy.max_age}"
        elif n < policy.min_observations:
            reason = f"too few observations ({n} < {policy.min_observations})"
        elif not low >= policy.threshold:
            reason = f"quality lower bound {low:.3f} < threshold {policy.threshold:.3f}"
        else:
            reason = "meets the threshold"
        models = sorted({o.model_id for o in used or obs})
        rows.append(
            {
                "task_type": task,
                "adapter_id": adapter,
                "model_id": models[0] if len(models) == 1 else ",".join(models),
                "n": n,
                "n_total": len(obs),
                "n_stale": len(obs) - len(fresh),
                "mean_quality": mean_q,
                "quality_low": low,
                "quality_high": high,
                "mean_cost_usd": sum(o.cost_usd for o in used) / n if n else math.nan,
                "mean_latency_ms": sum(o.latency_ms for o in used) / n if n else math.nan,
                "last_seen": obs[0].recorded_at,
                "stale": stale,
                "eligible": reason == "meets the threshold",
                "reason": reason,
            }
        )
    frame = pd.DataFrame(rows, columns=list(EVIDENCE_COLUMNS))
    if len(frame):
        frame["last_seen"] = pd.to_datetime(frame["last_seen"], utc=True)
    return frame


@dataclass(frozen=True)
class RoutingDecision:
    """The adapter to use for a task type (or ``None``), why, and the evidence."""

    task_type: str
    adapter_id: str | None
    model_id: str | None
    reason: str
    policy: RoutingPolicy
    evidence: Any = field(repr=False)

    def __bool__(self) -> bool:
        return self.adapter_id is not None

    def __str__(self) -> str:
        head = f"route {self.task_type!r} -> {self.adapter_id or 'no adapter'}: {self.reason}"
        if self.evidence is None or not len(self.evidence):
            return head
        cols = [
            "adapter_id",
            "n",
            "mean_quality",
            "quality_low",
            "quality_high",
            "mean_cost_usd",
            "mean_latency_ms",
            "stale",
            "eligible",
        ]
        return head + "\n" + self.evidence[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}")

    def _repr_html_(self) -> str:
        chosen = html.escape(self.adapter_id or "no adapter")
        table = self.evidence.to_html(index=False, float_format=lambda v: f"{v:.4g}") if len(self.evidence) else ""
        return (
            f"<p><b>{html.escape(self.task_type)}</b> &rarr; <b>{chosen}</b>: {html.escape(self.reason)} "
            f"(threshold {self.policy.threshold:g} on the lower end of a {self.policy.confidence:.0%} interval, "
            f"n &ge; {self.policy.min_observations})</p>{table}"
        )


def route(
    ledger: QualityLedger | str | Any,
    task_type: str,
    *,
    threshold: float = 0.8,
    confidence: float = 0.95,
    min_observations: int = 20,
    max_age: timedelta | None = timedelta(days=30),
    recent: int | None = 200,
    seed: int = 0,
    now: datetime | None = None,
    policy: RoutingPolicy | None = None,
) -> RoutingDecision:
    """The cheapest adapter for ``task_type`` whose quality meets ``threshold`` with confidence.

    Eligible adapters have at least ``min_observations`` recent, non-stale
    observations whose mean quality's bootstrap interval (``confidence``) has
    its lower end at or above ``threshold``; among them the lowest mean cost
    wins (ties: the higher lower bound). With none eligible the decision's
    ``adapter_id`` is ``None`` and its reason says why.
    """
    if not isinstance(task_type, str) or not task_type.strip():
        raise ValidationError("task_type must be a non-empty string")
    policy = policy or RoutingPolicy(
        threshold=threshold,
        confidence=confidence,
        min_observations=min_observations,
        max_age=max_age,
        recent=recent,
        seed=seed,
    )
    evidence = evidence_table(ledger, task_type, policy=policy, now=now)
    eligible = evidence[evidence["eligible"]] if len(evidence) else evidence
    if len(eligible):
        best = eligible.sort_values(["mean_cost_usd", "quality_low"], ascending=[True, False], kind="stable").iloc[0]
        reason = (
            f"cheapest of {len(eligible)} adapter(s) meeting {policy.threshold:g}: mean cost "
            f"${best['mean_cost_usd']:.6f}, quality lower bound {best['quality_low']:.3f} over n={best['n']}"
        )
        return RoutingDecision(task_type, str(best["adapter_id"]), str(best["model_id"]), reason, policy, evidence)
    if not len(evidence):
        reason = f"no observations for task type {task_type!r}"
    else:
        reason = "no adapter meets the threshold with confidence: " + "; ".join(
            f"{r.adapter_id}: {r.reason}" for r in evidence.itertuples()
        )
    return RoutingDecision(task_type, None, None, reason, policy, evidence)
