"""Adaptive routing read from a quality ledger, on one calibrated judge at a time.

For a task type, :func:`route` picks the cheapest adapter whose quality meets a
threshold *with confidence*: the lower end of an interval of its mean quality
must reach the threshold, over at least ``min_observations`` recent, non-stale
observations. The decision carries the evidence table it was made from, so a
user can see why (each adapter: n, mean quality, interval and the method
behind it, mean cost, mean latency, stale or not).

Routing never pools scores of different judges: observations are grouped by
``tags["grader_id"]`` and ``tags["rubric_hash"]``, and with more than one such
grader for the task type :func:`route` raises, naming them, unless
``grader_id=`` (and ``rubric_hash=``) chooses one. The interval is

- ``"ppi++"`` with ``human="human"``: prediction-powered inference from the
  judge's scores and the human labels recorded for the same items and adapter
  (:func:`~llm_connect.frames.record_labels`), valid however biased the judge
  is (:func:`~llm_connect.stats.estimate_quality`; Angelopoulos, Duchi &
  Zrnic 2023, *PPI++*, arXiv:2311.01453). Labels of items the judge did not
  score (a selective judge's abstentions, labelled with
  ``Labeller(..., strategy="abstained")``) count too: those items are a stratum
  of their own, estimated from people's labels alone, and the interval is the
  stratified one (PPI++ on the judged items, the human mean on the others,
  weighted by their shares, variances added: ``estimate_quality(...,
  judge_missing="stratify")``). The judge scored the items it was sure of, so
  PPI++ over those alone would estimate their quality, not the adapter's; a
  stratum without labels gets no interval and the reason says which;
- otherwise the judge's raw scores: ``"wilson"`` (every score 0 or 1) or a
  seeded percentile ``"bootstrap"`` of the mean. These trust the judge.

``require_calibrated=True`` refuses (:class:`~llm_connect.errors.UncalibratedJudgeError`)
a grader whose judge card (:class:`~llm_connect.cards.JudgeCard`, saved by
``llm-connect calibrate --ledger``) is missing or whose kappa against people
is below ``min_kappa`` on the lower end of its interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._display import view
from ._html import fmt
from ._options import check_run_options
from .errors import UncalibratedJudgeError, ValidationError
from .frames import HOLD_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID
from .items import item_id_text
from .quality import BaseLedger, QualityObservation, is_stale, open_ledger
from .stats._validate import check_confidence

if TYPE_CHECKING:
    import pandas as pd

    from .cards import JudgeCard, JudgeCardRegistry

__all__ = [
    "EVIDENCE_COLUMNS",
    "RoutingDecision",
    "RoutingPolicy",
    "evidence_table",
    "grader_key",
    "grader_keys",
    "label_grader_ids",
    "route",
    "standing_labels",
]

EVIDENCE_COLUMNS = (
    "task_type",
    "grader_id",
    "rubric_hash",
    "adapter_id",
    "model_id",
    "method",
    "n",
    "n_labelled",
    "n_unjudged",
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
    "cluster",
    "n_clusters",
)


@dataclass(frozen=True)
class RoutingPolicy:
    """What "good enough" means for routing.

    Parameters
    ----------
    threshold : float, default 0.8
        The quality an adapter must reach (0..1), judged on the lower end of a ``confidence`` interval of its
        mean quality.
    confidence : float, default 0.95
        The interval's confidence level.
    min_observations : int, default 20
        The observations an adapter needs.
    max_age : timedelta, optional
        None older counts (default 30 days; ``None``: any age).
    recent : int, optional
        Only the newest observations per adapter count (default 200; ``None``: all).
    n_resamples : int, default 2000
        Bootstrap resamples of the judge-only interval (at least 100).
    seed : int, default 0
        Seeds the bootstrap.
    human : str, optional
        The grader id of human labels; when set, the interval is PPI++ from the judge's scores and those labels.
    require_calibrated : bool, default False
        Refuse a judge whose card is missing or whose kappa's lower bound against people is below ``min_kappa``.
    min_kappa : float, default 0.4
        The lowest acceptable lower bound of the judge's kappa against people.
    cluster : str or None, default "auto"
        Which observations are not independent (the turns of one conversation): ``"auto"`` clusters by the
        ``conversation_id`` tag when the observations carry it, a tag name by that tag, ``None`` treats them as
        independent (see :func:`evidence_table`).

    Raises
    ------
    ValidationError
        A setting out of its range (the message names it).
    """

    threshold: float = 0.8
    confidence: float = 0.95
    min_observations: int = 20
    max_age: timedelta | None = timedelta(days=30)
    recent: int | None = 200
    n_resamples: int = 2000
    seed: int = 0
    human: str | None = None
    require_calibrated: bool = False
    min_kappa: float = 0.4
    cluster: str | None = "auto"

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold, (int, float)) and 0.0 <= self.threshold <= 1.0):
            raise ValidationError(f"threshold must be in 0..1, got {self.threshold!r}")
        check_confidence(self.confidence)
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
        if self.human is not None and (not isinstance(self.human, str) or not self.human.strip()):
            raise ValidationError(f"human must be the grader id of human labels (e.g. 'human'), got {self.human!r}")
        if not isinstance(self.min_kappa, (int, float)) or isinstance(self.min_kappa, bool) or not (
            -1.0 <= self.min_kappa <= 1.0
        ):
            raise ValidationError(f"min_kappa must be a number in -1..1, got {self.min_kappa!r}")
        if self.cluster is not None and (not isinstance(self.cluster, str) or not self.cluster.strip()):
            raise ValidationError(f"cluster must be 'auto', None or the name of a tag, got {self.cluster!r}")


def _equal_scores_interval(value: float, n: int, confidence: float) -> tuple[float, float]:
    """An exact interval for the mean of scores in 0..1 when ``n`` of them all equal ``value``.

    Let ``p`` be the probability of a score equal to ``value``. ``n`` draws all equal to it bound ``p`` below by
    the one-sided Clopper–Pearson bound ``q = (α/2)^(1/n)`` (Clopper & Pearson 1934); the rest of the mass lies
    anywhere in 0..1, so the mean lies in ``[value·q, value + (1 − value)(1 − q)]``. For ``value`` 1 or 0 this
    is the Clopper–Pearson interval of ``n`` successes (or failures) of ``n``; a bootstrap would say
    ``[value, value]``.
    """
    q = ((1.0 - confidence) / 2.0) ** (1.0 / n)
    return value * q, value + (1.0 - value) * (1.0 - q)


def _mean_interval(values: list[float], policy: RoutingPolicy,
                   clusters: list[Any] | None = None) -> tuple[float, float, str]:
    """An interval for the mean quality.

    Pass/fail scores (all 0 or 1) get the Wilson score interval, which stays
    honest at the edges (95 passes out of 95 is not proof of a 100% pass rate;
    a bootstrap would say [1, 1]). Other scores get a seeded percentile
    bootstrap of the mean (``scipy.stats.bootstrap``); scores all equal (not 0 or 1), whose every resample
    has the same mean, get :func:`_equal_scores_interval` instead (``"exact (equal scores)"``). With
    ``clusters`` (the
    conversation of each observation) a seeded percentile bootstrap that
    resamples whole conversations (``"cluster bootstrap"``; no interval with
    fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` of them); scores all
    equal then get :func:`~llm_connect.stats.estimates.equal_labels_interval` with one
    unit per conversation (``"exact by conversation"``).
    """
    import numpy as np

    if len(values) < 2:
        return (math.nan, math.nan, "")
    data = np.asarray(values, dtype=float)
    if clusters is not None:
        from .stats.agreement import bootstrap_ci
        from .stats.clusters import MIN_CLUSTERS, cluster_codes

        codes = cluster_codes(clusters)
        if len(np.unique(codes)) < MIN_CLUSTERS:
            return (math.nan, math.nan, "cluster bootstrap")
        if np.all(data == data[0]):  # every resample has the same mean: bound it on the conversations instead
            from .stats.estimates import equal_labels_interval

            lo_eq, hi_eq, _ = equal_labels_interval(float(data[0]), len(np.unique(codes)), policy.confidence)
            return lo_eq, hi_eq, "exact by conversation"
        lo, hi = bootstrap_ci(lambda x: x.mean(axis=1), data, n_boot=policy.n_resamples,
                              confidence=policy.confidence, seed=policy.seed, cluster=codes)
        return float(lo), float(hi), "cluster bootstrap"
    if np.all((data == 0.0) | (data == 1.0)):
        from scipy.stats import binomtest

        ci = binomtest(int(data.sum()), len(data)).proportion_ci(confidence_level=policy.confidence, method="wilson")
        return float(ci.low), float(ci.high), "wilson"
    if np.all(data == data[0]):  # every resample has the same mean: a bootstrap would say [x, x]
        lo_eq, hi_eq = _equal_scores_interval(float(data[0]), len(data), policy.confidence)
        return lo_eq, hi_eq, "exact (equal scores)"
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
    return float(res.confidence_interval.low), float(res.confidence_interval.high), "bootstrap"


# -- which grader -----------------------------------------------------------------------------------

GraderKey = tuple[str | None, str | None]


def grader_key(observation: QualityObservation) -> GraderKey:
    """Whose score an observation is: its ``(grader_id, rubric_hash)`` tags.

    Routing never pools scores of different judges; this is the key it groups them by.

    Parameters
    ----------
    observation : QualityObservation
        A ledger record.

    Returns
    -------
    tuple of (str or None, str or None)
        ``(grader_id, rubric_hash)``; ``None`` stands for a tag that is absent or not a string.

    See Also
    --------
    grader_keys : The distinct keys of many observations, people's labels left out.
    """
    g = observation.tags.get("grader_id")
    r = observation.tags.get("rubric_hash")
    return (g if isinstance(g, str) else None, r if isinstance(r, str) else None)


_MARKERS = frozenset({SKIP_GRADER_ID, UNDO_GRADER_ID, HOLD_GRADER_ID})  # the Labeller's skip, undo and hold markers


def label_grader_ids(human: str | None = None) -> frozenset[str]:
    """The grader ids that are never a judge: people's labels and the Labeller's markers.

    Parameters
    ----------
    human : str, optional
        The grader id of human labels (e.g. ``"human"``).

    Returns
    -------
    frozenset of str
        The :class:`~llm_connect.labelling.Labeller`'s skip, undo and hold markers (``human-skip``,
        ``human-undo``, ``human-hold``) always; with ``human`` given, that grader's labels and markers too
        (``human``, ``human-skip``, ``human-undo``, ``human-hold``).

    See Also
    --------
    standing_labels : The labels of ``human`` that still count.
    """
    return _MARKERS if human is None else _MARKERS | {human, f"{human}-skip", f"{human}-undo", f"{human}-hold"}


def _undone(observations: Iterable[QualityObservation], human: str | None) -> set[Any]:
    """The ``label_id`` of every label an undo marker took back (they no longer count)."""
    if human is None:
        return set()
    marker = f"{human}-undo"
    return {
        value for o in observations
        if o.tags.get("grader_id") == marker and isinstance(value := o.tags.get("undoes"), _LABEL_ID_TYPES)
    }


_LABEL_ID_TYPES = (str, int, float)  # a label_id / undoes tag of another JSON type (a list...) names no label


def _taken_back(label_id: Any, undone: set[Any]) -> bool:
    """Whether a label whose ``label_id`` tag is ``label_id`` was taken back by an undo marker (see :func:`_undone`)."""
    return isinstance(label_id, _LABEL_ID_TYPES) and label_id in undone


def standing_labels(observations: Iterable[QualityObservation], human: str) -> list[QualityObservation]:
    """People's labels that still count: those of grader ``human`` that no undo marker took back.

    The :class:`~llm_connect.labelling.Labeller` takes a label back by recording a ``{human}-undo`` marker
    whose ``undoes`` tag names the label's ``label_id``; such a label no longer counts, here as in
    :func:`route` and :func:`evidence_table`.

    Parameters
    ----------
    observations : iterable of QualityObservation
        Ledger records (of any graders; the undo markers must be among them).
    human : str
        The grader id of human labels (e.g. ``"human"``).

    Returns
    -------
    list of QualityObservation
        The labels of ``human``, in the order given, without those taken back.

    See Also
    --------
    label_grader_ids : Every grader id of people's labels and markers.
    """
    observations = list(observations)
    undone = _undone(observations, human)
    return [o for o in observations
            if grader_key(o)[0] == human and not _taken_back(o.tags.get("label_id"), undone)]


def _describe_grader(key: GraderKey) -> str:
    g, r = key
    name = g if g is not None else "(no grader_id tag)"
    return f"{name} (rubric {r})" if r else name


def grader_keys(
    observations: Iterable[QualityObservation], task_type: str | None = None, *, human: str | None = None
) -> list[GraderKey]:
    """The distinct ``(grader_id, rubric_hash)`` of ``observations`` (of ``task_type``), sorted.

    Human labels (grader id ``human``, when given) and the labeller's skip and undo markers
    (``human-skip``, ``human-undo``) are left out. ``None`` stands for an absent tag.

    Parameters
    ----------
    observations : iterable of QualityObservation
        The observations.
    task_type : str, optional
        Keep one task type.
    human : str, optional
        The grader id of human labels, left out.

    Returns
    -------
    list of tuple of (str or None, str or None)
        The keys.
    """
    people = label_grader_ids(human)
    keys = {
        grader_key(o)
        for o in observations
        if (task_type is None or o.task_type == task_type) and grader_key(o)[0] not in people
    }
    return sorted(keys, key=lambda k: (k[0] or "", k[1] or ""))


def _choose_grader(
    keys: Iterable[GraderKey], task_type: str, grader_id: str | None, rubric_hash: str | None
) -> GraderKey | None:
    """The one (grader, rubric) whose scores are routed on; several without a choice is an error."""
    found = sorted(set(keys), key=lambda k: (k[0] or "", k[1] or ""))
    if grader_id is not None:
        found = [k for k in found if k[0] == grader_id]
    if rubric_hash is not None:
        found = [k for k in found if k[1] == rubric_hash]
    if grader_id is not None and not found:
        return (grader_id, rubric_hash)  # nothing recorded under it: the evidence is empty and says so
    if len(found) > 1:
        what = "rubrics" if grader_id is not None else "graders or rubrics"
        hint = "rubric_hash=..." if grader_id is not None else "grader_id=... (and rubric_hash=... if it has several)"
        raise ValidationError(
            f"task type {task_type!r} holds scores from {len(found)} {what}: "
            f"{', '.join(_describe_grader(k) for k in found)}; scores of different judges or rubrics are not "
            f"comparable and are never pooled: pass {hint}"
        )
    return found[0] if found else None


def _cards_for(ledger: Any, cards: Any) -> list[Any]:
    from .cards import JudgeCard, JudgeCardRegistry

    if cards is None:
        if isinstance(ledger, (BaseLedger, str, bytes)) or hasattr(ledger, "__fspath__"):
            return JudgeCardRegistry.for_ledger(ledger).cards()
        raise ValidationError(
            "require_calibrated=True needs judge cards: pass cards=JudgeCardRegistry(...) when routing from "
            "observations rather than a ledger"
        )
    if isinstance(cards, JudgeCardRegistry):
        return cards.cards()
    if isinstance(cards, (str, bytes)) or hasattr(cards, "__fspath__"):
        return JudgeCardRegistry(cards).cards()
    out = list(cards)
    for c in out:
        if not isinstance(c, JudgeCard):
            raise ValidationError(f"cards must be JudgeCard objects or a registry, got {type(c).__name__}")
    return out


def _check_calibrated(key: GraderKey, ledger: Any, cards: Any, min_kappa: float) -> None:
    grader, rubric = key
    if grader is None:
        raise UncalibratedJudgeError(
            "require_calibrated=True but these observations carry no grader_id tag, so no judge card can vouch "
            "for them; record them with judge_many(..., ledger=...)"
        )
    mine = [c for c in _cards_for(ledger, cards) if c.grader_id == grader and c.rubric_hash == rubric]
    name = _describe_grader(key)
    if not mine:
        raise UncalibratedJudgeError(
            f"judge {name} has no judge card, so it is not known to agree with people: label a sample and run "
            "llm-connect calibrate DATA --human COLUMN --ledger LEDGER "
            "(or JudgeCardRegistry.for_ledger(ledger).save(report.judge_cards()))"
        )
    card = max(mine, key=lambda c: c.created_at)
    if not card.meets(min_kappa=min_kappa):
        raise UncalibratedJudgeError(
            f"judge {name} is below the bar: its kappa against people is {card.kappa:.2f} "
            f"(lower bound {card.kappa_low:.2f}, n={card.n_labelled}) and routing requires a lower bound of at "
            f"least {min_kappa:.2f}. {card.verdict}"
        )


def _cluster_tag(policy: RoutingPolicy, observations: Iterable[QualityObservation]) -> str | None:
    """The tag observations are clustered by: ``policy.cluster`` read as :func:`evidence_table` says
    (``"auto"``: ``conversation_id`` when some observation carries it)."""
    from .stats.clusters import AUTO_CLUSTER_COLUMN

    if policy.cluster is None:
        return None
    if policy.cluster != "auto":
        return policy.cluster
    return AUTO_CLUSTER_COLUMN if any(o.tags.get(AUTO_CLUSTER_COLUMN) is not None for o in observations) else None


def _cluster_of(o: QualityObservation, tag: str | None) -> Any:
    """An observation's cluster id (its tag's value as text; ``None``: a cluster of its own)."""
    value = o.tags.get(tag) if tag is not None else None
    return None if value is None else str(value)


def _ppi_interval(
    judged: list[QualityObservation], unjudged: list[tuple[list[float], Any]],
    labels: Mapping[tuple[str, str], list[float]], adapter: str, policy: RoutingPolicy, tag: str | None = None,
    label_clusters: Mapping[str, Any] | None = None,
) -> tuple[float, float, float, int, str, int | None]:
    """PPI++ over one adapter's judged items, stratified with the labelled items the judge did not score
    (``unjudged``: each such item's labels and cluster): (estimate, low, high, n_labelled, why-not, n_clusters).
    With ``tag`` the items are clustered by that tag of their observations (or labels, ``label_clusters``)."""
    import numpy as np
    import pandas as pd

    from .stats import estimate_quality

    per_item: dict[str, list[float]] = {}
    item_cluster: dict[str, Any] = {}
    unkeyed, unkeyed_cluster = [], []
    for o in judged:
        item = o.tags.get("item_id")
        if item is None:
            unkeyed.append(o.quality_score)
            unkeyed_cluster.append(_cluster_of(o, tag))
        else:
            key = str(item_id_text(item))  # 1.0 is item 1
            per_item.setdefault(key, []).append(o.quality_score)
            if item_cluster.get(key) is None:
                item_cluster[key] = _cluster_of(o, tag)
    rows_judge, rows_human, rows_cluster = [], [], []
    for item, scores in per_item.items():
        rows_judge.append(sum(scores) / len(scores))
        got = labels.get((item, adapter))
        rows_human.append(sum(got) / len(got) if got else math.nan)
        rows_cluster.append(item_cluster.get(item) if item_cluster.get(item) is not None
                            else (label_clusters or {}).get(item))
    rows_judge.extend(unkeyed)
    rows_human.extend([math.nan] * len(unkeyed))
    rows_cluster.extend(unkeyed_cluster)
    for got, cid in unjudged:  # people's labels alone: the stratum the judge left to them
        rows_judge.append(math.nan)
        rows_human.append(sum(got) / len(got))
        rows_cluster.append(cid)
    frame = pd.DataFrame({"judge": np.asarray(rows_judge, float), "human": np.asarray(rows_human, float),
                          "conversation": pd.Series(rows_cluster, dtype=object)})
    est = estimate_quality(frame, judge="judge", human="human", methods=("ppi++",), confidence=policy.confidence,
                           judge_missing="stratify", cluster="conversation" if tag is not None else None)
    row = est.iloc[0]
    reason = row["reason"] if isinstance(row["reason"], str) else ""
    n_clusters = int(row["n_clusters"]) if tag is not None else None
    return (float(row["estimate"]), float(row["ci_low"]), float(row["ci_high"]), int(row["n_labelled"]), reason,
            n_clusters)


def _unjudged_items(
    judged: list[QualityObservation], labels: Mapping[tuple[str, str, str], list[QualityObservation]], task: str,
    adapter: str, policy: RoutingPolicy, now: datetime, tag: str | None = None,
) -> list[tuple[datetime, list[float], Any]]:
    """The adapter's labelled items that the grader never scored (at any age), each as (its newest label's time,
    its labels, its cluster by ``tag``), those whose newest label is stale left out: the stratum people labelled
    alone."""
    seen = {str(item_id_text(item)) for o in judged if (item := o.tags.get("item_id")) is not None}
    out = []
    for (t, item, ad), got in labels.items():
        if t != task or ad != adapter or item in seen:
            continue
        newest = max(got, key=lambda o: o.recorded_at)
        if policy.max_age is None or not is_stale(newest, policy.max_age, now=now):
            cid = next((c for o in got if (c := _cluster_of(o, tag)) is not None), None)
            out.append((newest.recorded_at, [o.quality_score for o in got], cid))
    return out


def _min_clusters() -> int:
    from .stats.clusters import MIN_CLUSTERS

    return MIN_CLUSTERS


def _observations(source: BaseLedger | str | Any) -> Iterable[QualityObservation]:
    if isinstance(source, BaseLedger):
        return source.iter_observations()
    if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
        return open_ledger(source).iter_observations()  # a directory or a URI is a ParquetLedger
    return source  # an iterable of observations


def evidence_table(
    ledger: BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation],
    task_type: str | None = None,
    *,
    policy: RoutingPolicy | None = None,
    now: datetime | None = None,
    grader_id: str | None = None,
    rubric_hash: str | None = None,
    human: str | None = None,
) -> pd.DataFrame:
    """One row per (task type, grader, rubric, adapter): the evidence :func:`route` decides on.

    ``ledger`` is a :class:`QualityLedger` or a :class:`~llm_connect.quality.ParquetLedger`, a path
    (a directory or a URI is a Parquet ledger's root), or an iterable of observations.
    Scores of different graders or rubrics sit on separate rows,
    never pooled. ``grader_id`` / ``rubric_hash`` keep one grader; ``human``
    (or ``policy.human``) names the grader id of human labels: those rows are
    then not evidence of their own but correct the judge's through PPI++
    (``method`` says which interval each row's figures come from: ``ppi++``,
    ``wilson`` or ``bootstrap``; ``n_labelled`` how many human labels it used).
    Labelled items of the adapter that the grader never scored (a selective
    judge's abstentions) are a stratum of their own in the PPI++ estimate (see
    the module docstring); ``n_unjudged`` counts them, and ``n`` counts them
    with the judge's observations (the items the estimate covers). They are
    fresh by their newest label's time, and ``recent`` keeps the newest of
    both together. Without ``human`` they are not read and ``n_unjudged`` is 0.

    ``policy.cluster`` (``"auto"`` by default): observations that are turns of one conversation
    are not independent. ``"auto"`` clusters by the ``conversation_id`` tag when the observations
    (or labels) carry one, a tag name by that tag, ``None`` not at all. With clusters the PPI++
    interval is cluster-robust (``estimate_quality(..., cluster=...)``, an item's conversation read
    from its observations or its labels) and the judge-only interval is a seeded bootstrap that
    resamples whole conversations (``method`` ``"cluster bootstrap"``); with fewer than
    :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` conversations there is no interval and the
    reason says so. ``cluster`` names the tag used (``None``: independent) and ``n_clusters`` the
    conversations the interval rests on.

    Parameters
    ----------
    ledger : BaseLedger or str or os.PathLike or iterable of QualityObservation
        The observations (above).
    task_type : str, optional
        Keep one task type; ``None``: every task type.
    policy : RoutingPolicy, optional
        The policy (default ``RoutingPolicy()``).
    now : datetime, optional
        The time staleness is judged at (default: now, UTC).
    grader_id : str, optional
        Keep one grader.
    rubric_hash : str, optional
        Keep one rubric.
    human : str, optional
        The grader id of human labels (else ``policy.human``).

    Returns
    -------
    DataFrame
        :data:`EVIDENCE_COLUMNS`: ``task_type``, ``grader_id``, ``rubric_hash``, ``adapter_id``, ``model_id``,
        ``method``, ``n``, ``n_labelled``, ``n_unjudged``, ``n_total``, ``n_stale``, ``mean_quality``,
        ``quality_low``, ``quality_high``, ``mean_cost_usd``, ``mean_latency_ms``, ``last_seen``, ``stale``,
        ``eligible``, ``reason``, ``cluster``, ``n_clusters``.

    See Also
    --------
    route : Decide on it.
    """
    import pandas as pd

    policy = policy or RoutingPolicy()
    human = human if human is not None else policy.human
    current = now if now is not None else datetime.now(UTC)
    if current.tzinfo is None:
        current = current.replace(tzinfo=UTC)
    groups: dict[tuple[str, GraderKey, str], list[QualityObservation]] = {}
    labels: dict[tuple[str, str, str], list[QualityObservation]] = {}  # (task, item, adapter) -> human labels
    observations = [o for o in _observations(ledger) if task_type is None or o.task_type == task_type]
    people, undone = label_grader_ids(human), _undone(observations, human)
    tag = _cluster_tag(policy, observations)
    for o in observations:
        key = grader_key(o)
        if key[0] in people:  # a label (unless taken back), or a skip / undo marker: never a judge's score
            item = o.tags.get("item_id")
            if key[0] == human and item is not None and not _taken_back(o.tags.get("label_id"), undone):
                labels.setdefault((o.task_type, str(item_id_text(item)), o.adapter_id), []).append(o)
            continue
        if grader_id is not None and key[0] != grader_id:
            continue
        if rubric_hash is not None and key[1] != rubric_hash:
            continue
        groups.setdefault((o.task_type, key, o.adapter_id), []).append(o)

    rows = []
    for (task, (grader, rubric), adapter), obs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1][0] or "", kv[0][1][1] or "", kv[0][2])
    ):
        obs.sort(key=lambda o: o.recorded_at, reverse=True)
        fresh = [o for o in obs if policy.max_age is None or not is_stale(o, policy.max_age, now=current)]
        extra = _unjudged_items(obs, labels, task, adapter, policy, current, tag) if human is not None else []
        if policy.recent and extra:  # the newest items, judged or left to people, keep their shares
            newest = sorted([(o.recorded_at, o, None) for o in fresh] + [(t, None, (v, c)) for t, v, c in extra],
                            key=lambda u: u[0], reverse=True)[: policy.recent]
            used = [o for _, o, _ in newest if o is not None]
            unjudged = [v for _, o, v in newest if o is None and v is not None]
        else:
            used = fresh[: policy.recent] if policy.recent else fresh
            unjudged = [(v, c) for _, v, c in extra]
        n = len(used) + len(unjudged)
        scores = [o.quality_score for o in used]
        n_labelled = 0
        n_clusters: int | None = None
        why_not = ""
        if human is not None and (used or unjudged):
            task_labels = {(item, ad): [x.quality_score for x in v] for (t, item, ad), v in labels.items()
                           if t == task and ad == adapter}
            label_clusters = {item: c for (t, item, ad), v in labels.items() if t == task and ad == adapter
                              and (c := next((c for o in v if (c := _cluster_of(o, tag)) is not None), None))
                              is not None} if tag is not None else None
            mean_q, low, high, n_labelled, why_not, n_clusters = _ppi_interval(
                used, unjudged, task_labels, adapter, policy, tag, label_clusters)
            method = "ppi++"
        else:
            ids = [_cluster_of(o, tag) for o in used] if tag is not None else None
            low, high, method = _mean_interval(scores, policy, ids)
            mean_q = sum(scores) / n if n else math.nan
            if ids is not None:
                from .stats.clusters import cluster_codes

                n_clusters = len(set(cluster_codes(ids).tolist()))
        stale = not fresh
        if stale:
            reason = f"stale: no observation newer than {policy.max_age}"
        elif n < policy.min_observations:
            reason = f"too few observations ({n} < {policy.min_observations})"
        elif method == "ppi++" and not math.isfinite(low) and unjudged and why_not:
            reason = f"no honest interval: {why_not}"
        elif not math.isfinite(low) and n_clusters is not None and n_clusters < _min_clusters() and (
                method != "ppi++" or n_labelled >= 2):
            reason = (f"no honest interval: {why_not}" if why_not else
                      f"no honest interval: only {n_clusters} conversation(s) (tag {tag!r}); observations of one "
                      f"conversation are not independent and an interval needs at least {_min_clusters()}: "
                      "observe more conversations, or pass cluster=None only if they really are independent")
        elif method == "ppi++" and not math.isfinite(low):
            reason = (
                f"too few human labels for this adapter ({n_labelled}): record some with record_labels"
                + (f" ({why_not})" if why_not else "")
            )
        elif not low >= policy.threshold:
            reason = f"quality lower bound {low:.3f} < threshold {policy.threshold:.3f}"
        else:
            reason = "meets the threshold"
        models = sorted({o.model_id for o in used or obs})
        rows.append(
            {
                "task_type": task,
                "grader_id": grader,
                "rubric_hash": rubric,
                "adapter_id": adapter,
                "model_id": models[0] if len(models) == 1 else ",".join(models),
                "method": method,
                "n": n,
                "n_labelled": n_labelled,
                "n_unjudged": len(unjudged),
                "n_total": len(obs),
                "n_stale": len(obs) - len(fresh),
                "mean_quality": mean_q,
                "quality_low": low,
                "quality_high": high,
                "mean_cost_usd": sum(o.cost_usd for o in used) / len(used) if used else math.nan,
                "mean_latency_ms": sum(o.latency_ms for o in used) / len(used) if used else math.nan,
                "last_seen": obs[0].recorded_at,
                "stale": stale,
                "eligible": reason == "meets the threshold",
                "reason": reason,
                "cluster": tag,
                "n_clusters": n_clusters,
            }
        )
    frame = pd.DataFrame(rows, columns=list(EVIDENCE_COLUMNS))
    frame["n_clusters"] = frame["n_clusters"].astype("Int64")
    frame["cluster"] = frame["cluster"].astype(object)
    if len(frame):
        frame["last_seen"] = pd.to_datetime(frame["last_seen"], utc=True)
    return frame


@dataclass(frozen=True)
class RoutingDecision:
    """The adapter to use for a task type (or ``None``), why, the evidence, and whose scores it rests on.

    It is true when an adapter was chosen; ``str()`` shows the decision and the evidence table.

    Parameters
    ----------
    task_type : str
        The task type routed.
    adapter_id : str or None
        The adapter chosen; ``None`` when none is eligible.
    model_id : str or None
        Its model.
    reason : str
        Why (``"meets the threshold"``, or why no adapter is eligible).
    policy : RoutingPolicy
        The policy decided under.
    evidence : DataFrame
        The :func:`evidence_table` rows of the task type.
    grader_id : str, optional
        The grader whose scores it rests on.
    rubric_hash : str, optional
        Its rubric.
    """

    task_type: str
    adapter_id: str | None
    model_id: str | None
    reason: str
    policy: RoutingPolicy
    evidence: Any = field(repr=False)
    grader_id: str | None = None
    rubric_hash: str | None = None

    def __bool__(self) -> bool:
        return self.adapter_id is not None

    def __str__(self) -> str:
        judge = ""
        if self.grader_id is not None:
            judge = f" [judge {self.grader_id}" + (f", rubric {self.rubric_hash}" if self.rubric_hash else "") + "]"
        head = f"route {self.task_type!r}{judge} -> {self.adapter_id or 'no adapter'}: {self.reason}"
        if self.evidence is None or not len(self.evidence):
            return head
        cols = [
            "adapter_id",
            "method",
            "n",
            "n_labelled",
            "n_unjudged",
            "mean_quality",
            "quality_low",
            "quality_high",
            "cluster",
            "n_clusters",
            "mean_cost_usd",
            "mean_latency_ms",
            "stale",
            "eligible",
        ]
        return head + "\n" + self.evidence[cols].to_string(index=False, float_format=lambda v: fmt(v, 4))

    def _repr_html_(self) -> str:
        return view("routing_decision_html")(self)


def route(
    ledger: BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation],
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
    grader_id: str | None = None,
    rubric_hash: str | None = None,
    human: str | None = None,
    require_calibrated: bool | None = None,
    min_kappa: float | None = None,
    cards: JudgeCardRegistry | str | os.PathLike[str] | Iterable[JudgeCard] | None = None,
    cluster: str | None = "auto",
) -> RoutingDecision:
    """The cheapest adapter for ``task_type`` whose quality meets ``threshold`` with confidence.

    Eligible adapters have at least ``min_observations`` recent, non-stale
    observations whose mean quality's interval (``confidence``) has its lower
    end at or above ``threshold``; among them the lowest mean cost wins (ties:
    the higher lower bound). With none eligible the decision's ``adapter_id``
    is ``None`` and its reason says why.

    Only one judge's scores are used: with observations of several graders or
    rubrics for ``task_type``, pass ``grader_id=`` (and ``rubric_hash=``) or
    this raises :class:`ValidationError` naming them. ``human="human"``
    decides on the lower end of each adapter's PPI++ interval, using the human
    labels recorded for that adapter (an adapter without labels is not
    eligible); labels of items the judge did not score (a selective judge's
    abstentions) are a stratum of their own, so the interval is of the
    adapter's quality on all its items, not on those the judge was sure of
    (see the module docstring; without labels on the judged items there is no
    interval, and the reason says what to label). ``require_calibrated=True`` raises
    :class:`~llm_connect.errors.UncalibratedJudgeError` when the grader's judge
    card is missing or its kappa's lower bound is below ``min_kappa``
    (default 0.4); ``cards`` is a :class:`~llm_connect.cards.JudgeCardRegistry`,
    its path or cards (default: the registry beside the ledger).

    ``cluster``: observations that are turns of one conversation are not independent:
    ``"auto"`` (the default) clusters them by their ``conversation_id`` tag when they carry one, a
    tag name by that tag, ``None`` not at all; the intervals are then cluster-robust or resample
    whole conversations (see :func:`evidence_table`; the evidence's ``cluster`` and ``n_clusters``
    say which). With a ``policy``, a ``cluster`` other than ``"auto"`` replaces the policy's.

    Parameters
    ----------
    ledger : BaseLedger or str or os.PathLike or iterable of QualityObservation
        The observations: a ledger, its path (a directory or a URI is a Parquet ledger's root), or the
        observations themselves.
    task_type : str
        The task type to route.
    threshold : float, default 0.8
        The quality the lower end of an adapter's interval must reach.
    confidence : float, default 0.95
        The interval's confidence level.
    min_observations : int, default 20
        The recent, non-stale observations an adapter needs.
    max_age : timedelta, optional
        Older observations are stale (default 30 days; ``None``: any age).
    recent : int, optional
        Only the newest observations per adapter count (default 200; ``None``: all).
    seed : int, default 0
        Seeds the bootstrap.
    now : datetime, optional
        The time staleness is judged at (default: now, UTC).
    policy : RoutingPolicy, optional
        All of the settings above at once (they are then not read).
    grader_id : str, optional
        Whose scores to use, when the task type holds several graders'.
    rubric_hash : str, optional
        Which rubric's, with ``grader_id``.
    human : str, optional
        The grader id of human labels (above).
    require_calibrated : bool, optional
        Require the grader's judge card (above).
    min_kappa : float, optional
        The card's lowest acceptable kappa lower bound (default 0.4).
    cards : JudgeCardRegistry or str or os.PathLike or iterable of JudgeCard, optional
        The judge cards (default: the registry beside the ledger).
    cluster : str or None, default "auto"
        Which observations are not independent (above).

    Returns
    -------
    RoutingDecision
        The adapter (or ``None``), the reason, the evidence and the grader it rests on.

    Raises
    ------
    ValidationError
        A blank ``task_type``, several graders or rubrics without ``grader_id``, or a bad setting.
    UncalibratedJudgeError
        With ``require_calibrated``, a judge card missing or below ``min_kappa``.

    See Also
    --------
    evidence_table : The evidence, one row per adapter.
    RoutingPolicy : The settings as one value.

    Examples
    --------
    >>> from llm_connect import QualityObservation
    >>> obs = [QualityObservation("qa", a, a, cost_usd=c, quality_score=1.0, latency_ms=10.0, tokens_in=9,
    ...                           tokens_out=1, tags={"grader_id": "exact-match"})
    ...        for a, c in [("small", 0.001), ("large", 0.01)] for _ in range(30)]
    >>> route(obs, "qa", threshold=0.8).adapter_id
    'small'
    """
    check_run_options(task_type=task_type)
    if task_type is None:  # the one option route needs
        raise ValidationError("route needs a task_type: the task type whose observations to route on")
    if policy is None:
        policy = RoutingPolicy(
            threshold=threshold,
            confidence=confidence,
            min_observations=min_observations,
            max_age=max_age,
            recent=recent,
            seed=seed,
            human=human,
            require_calibrated=bool(require_calibrated),
            min_kappa=0.4 if min_kappa is None else min_kappa,
            cluster=cluster,
        )
    else:
        changes: dict[str, Any] = {}
        if human is not None:
            changes["human"] = human
        if require_calibrated is not None:
            changes["require_calibrated"] = require_calibrated
        if min_kappa is not None:
            changes["min_kappa"] = min_kappa
        if cluster != "auto":
            changes["cluster"] = cluster
        if changes:
            from dataclasses import replace

            policy = replace(policy, **changes)
    observations = list(_observations(ledger))
    keys = (
        grader_key(o)
        for o in observations
        if o.task_type == task_type and grader_key(o)[0] not in label_grader_ids(policy.human)
    )
    chosen = _choose_grader(keys, task_type, grader_id, rubric_hash)
    if chosen is not None and policy.require_calibrated:
        _check_calibrated(chosen, ledger, cards, policy.min_kappa)
    if chosen is not None:
        evidence = evidence_table(observations, task_type, policy=policy, now=now, grader_id=chosen[0],
                                  rubric_hash=chosen[1])
        if chosen[0] is None or chosen[1] is None:  # keep only the rows of exactly this grader
            keep = [
                (g if isinstance(g, str) else None, r if isinstance(r, str) else None) == chosen
                for g, r in zip(evidence["grader_id"], evidence["rubric_hash"], strict=True)
            ]
            evidence = evidence[keep].reset_index(drop=True)
    else:
        evidence = evidence_table([], task_type, policy=policy, now=now)
    judged_by = f" (judge {_describe_grader(chosen)})" if chosen is not None and chosen[0] is not None else ""
    eligible = evidence[evidence["eligible"]] if len(evidence) else evidence
    if len(eligible):
        best = eligible.sort_values(["mean_cost_usd", "quality_low"], ascending=[True, False], kind="stable").iloc[0]
        reason = (
            f"cheapest of {len(eligible)} adapter(s) meeting {policy.threshold:g}: mean cost "
            f"${best['mean_cost_usd']:.6f}, quality lower bound {best['quality_low']:.3f} ({best['method']}) "
            f"over n={best['n']}{judged_by}"
        )
        return RoutingDecision(task_type, str(best["adapter_id"]), str(best["model_id"]), reason, policy, evidence,
                               *(chosen or (None, None)))
    if not len(evidence):
        reason = f"no observations for task type {task_type!r}" + (
            f" from grader {grader_id!r}" if grader_id is not None else ""
        )
    else:
        reason = "no adapter meets the threshold with confidence: " + "; ".join(
            f"{r.adapter_id}: {r.reason}" for r in evidence.itertuples()
        )
    return RoutingDecision(task_type, None, None, reason, policy, evidence, *(chosen or (None, None)))
