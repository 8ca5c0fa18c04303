"""Agreement of judges with each other and with people: the result objects and their tables.

The statistics themselves (kappa, alpha, correlations, bootstrap intervals, threshold cross-validation) are pure
functions in :mod:`llm_connect.stats.agreement`; this module runs them over the judges of a scores frame and keeps the
results as :class:`PairAgreement` and :class:`AgreementTable` (rows, matrices, ``_repr_html_``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .._display import view
from .._docstrings import share_parameters
from .._html import fmt
from ..stats._validate import check_confidence
from ..stats.agreement import (
    BEST,
    COUNT_COLUMNS,
    CV_FOLDS,
    GRADED_STATISTICS,
    HUMAN_COUNT_COLUMNS,
    STATISTIC_FUNCTIONS,
    STATISTICS,
    Estimate,
    GroupedCorrelation,
    ThresholdChoice,
    as_float_array,
    bootstrap_ci,
    choose_threshold,
    finite_or_nan,
    graded_estimates,
    grouped_correlation,
    paired,
    parse_scale,
    threshold_sweep,
    to_scale,
    undefined_reasons,
)
from ..stats.clusters import MIN_CLUSTERS, cluster_codes, cluster_column, few_clusters_reason

__all__ = ["COUNT_COLUMNS", "GRADED_STATISTICS", "HUMAN_COUNT_COLUMNS", "STATISTICS", "AgreementTable", "Estimate",
           "GroupedCorrelation", "PairAgreement", "ThresholdChoice", "agreement_table", "bootstrap_ci",
           "choose_threshold", "grouped_correlation", "pair_agreement", "threshold_sweep", "to_scale"]

# Column names of the interval bounds in a table row.
_BOUND_PREFIX = {"percent_agreement": "agreement", "cohen_kappa": "kappa", "alpha_interval": "alpha_interval",
                 "alpha_nominal": "alpha_nominal", "spearman": "spearman", "kendall": "kendall", "mean_abs_diff": "mad"}


@share_parameters
@dataclass(frozen=True)
class PairAgreement:
    """How well two judges agree on the items both scored (:func:`pair_agreement`); ``pair["cohen_kappa"]`` is one
    statistic's :class:`~llm_connect.stats.Estimate`.

    Parameters
    ----------
    judge_a, judge_b : str
        The two raters, read from ``judge_a``'s side: ``judge_b`` is the reference (people, on a row of a judge against
        labels).
    n : int
        The items both scored.
    n_missing : int
        The items either left unscored.
    threshold, threshold_b : float
        The pass thresholds of ``judge_a`` and ``judge_b``.
    estimates : mapping of str to Estimate
        Each statistic's value, interval and ``reason`` when undefined, by name (:data:`STATISTICS`, then any
        :data:`GRADED_STATISTICS`).
    confusion : pandas.DataFrame
        The 2x2 counts of verdicts, ``judge_a``'s in the rows, ``judge_b``'s in the columns.
    ceiling : bool, default False
        Whether the pair is two independent annotators: what a judge can hope to reach.
    {confidence}
    {n_boot}
    human_b : bool, default False
        Whether ``judge_b`` is a human label column (the counts are then named ``judge_yes_human_no``...).
    scale : tuple of (int, int), optional
        The rating scale of the graded statistics; ``None``: none declared.
    extra : mapping of str to object, optional
        Further columns of the row (threshold selection, grouped correlations), in order.
    {cluster}
    {n_clusters}
    """

    judge_a: str
    judge_b: str
    n: int
    n_missing: int
    threshold: float
    threshold_b: float
    estimates: Mapping[str, Estimate]
    confusion: pd.DataFrame = field(compare=False, repr=False)
    ceiling: bool = False
    confidence: float = 0.95
    n_boot: int = 1000

    human_b: bool = False
    #: The rating scale of the graded statistics (``None``: no scale declared).
    scale: tuple[int, int] | None = None
    #: Further columns of the row (threshold selection, grouped correlations), in order.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The column the items were clustered by (the bootstrap resampled whole clusters), or ``None``.
    cluster: str | None = None
    #: The clusters among the paired items (``None`` without clusters).
    n_clusters: int | None = None

    def __getitem__(self, statistic: str) -> Estimate:
        return self.estimates[statistic]

    def counts(self) -> dict[str, int | None]:
        """The verdict counts read from ``judge_a``'s side against ``judge_b``, the reference rater.

        Returns
        -------
        dict of str to int or None
            :data:`COUNT_COLUMNS` (``judge_yes_ref_no``: the items ``judge_a`` said yes to and ``judge_b`` no), then the
            same counts as ``judge_yes_human_yes`` ... ``judge_no_human_no`` when ``judge_b`` is a human label column
            (``human_b``), else ``None`` there (blank in a CSV).
        """
        cm = self.confusion.to_numpy()
        yy, yn, ny, nn = int(cm[1, 1]), int(cm[1, 0]), int(cm[0, 1]), int(cm[0, 0])
        out: dict[str, int | None] = {"judge_yes_ref_yes": yy, "judge_yes_ref_no": yn,
                                      "judge_no_ref_yes": ny, "judge_no_ref_no": nn}
        human = dict(zip(HUMAN_COUNT_COLUMNS, (yy, yn, ny, nn), strict=True))
        out.update({k: (v if self.human_b else None) for k, v in human.items()})
        return out

    def row(self) -> dict[str, Any]:
        """One flat row, as :attr:`AgreementTable.frame` and ``agreement.csv`` hold it.

        Returns
        -------
        dict of str to object
            ``judge_a``, ``judge_b``, ``n``, ``n_missing``, ``threshold``; each statistic and its bounds (``kappa_low``,
            ``kappa_high``, ...); ``scale``, ``cluster`` and ``n_clusters`` when set; the :meth:`counts`; the ``extra``
            columns; ``ceiling``; and ``note`` (why a statistic is undefined).
        """
        row: dict[str, Any] = {
            "judge_a": self.judge_a,
            "judge_b": self.judge_b,
            "n": self.n,
            "n_missing": self.n_missing,
            "threshold": self.threshold,
        }
        for stat in self.statistics():
            est = self.estimates[stat]
            row[stat] = est.value
            prefix = _BOUND_PREFIX.get(stat, stat)
            row[f"{prefix}_low"] = est.low
            row[f"{prefix}_high"] = est.high
        if self.scale is not None:
            row["scale"] = f"{self.scale[0]}-{self.scale[1]}"
        if self.cluster is not None:
            row["cluster"] = self.cluster
            row["n_clusters"] = self.n_clusters
        row.update(self.counts())
        row.update(self.extra)
        row["ceiling"] = self.ceiling
        notes: dict[str, list[str]] = {}
        for stat in self.statistics():
            reason = self.estimates[stat].reason
            if reason:
                notes.setdefault(reason, []).append(stat)
        row["note"] = "; ".join(f"{', '.join(stats)}: {reason}" for reason, stats in notes.items())
        return row

    def statistics(self) -> list[str]:
        """The statistics this pair holds.

        Returns
        -------
        list of str
            :data:`STATISTICS`, then the :data:`GRADED_STATISTICS` it has, in order.
        """
        return [*STATISTICS, *(g for g in GRADED_STATISTICS if g in self.estimates)]

    def _repr_html_(self) -> str:
        return str(view("pair_agreement_html")(self))


@share_parameters
def pair_agreement(a: Any, b: Any, *, judge_a: str = "a", judge_b: str = "b", threshold: float = 0.5,
                   threshold_b: float | None = None, n_boot: int = 1000, confidence: float = 0.95, seed: int | None = 0,
                   ceiling: bool = False, statistics: Sequence[str] = STATISTICS, human_b: bool = False,
                   scale: Any = None, verdicts_a: Any = None, cluster: Any = None) -> PairAgreement:
    """Every agreement statistic between two score arrays, with seeded bootstrap intervals.

    Read from ``judge_a``'s side: ``judge_b`` is the reference rater (the human labels on a judge-versus-people row),
    and the verdict counts are named so (``judge_yes_ref_no``: ``judge_a`` yes, ``judge_b`` no; see
    :meth:`PairAgreement.counts`). Items with a missing score on either side are dropped.

    Parameters
    ----------
    a, b : array-like of float
        The two raters' scores, one per item, NaN where missing.
    judge_a, judge_b : str, default "a", "b"
        Their names in the result.
    threshold : float, default 0.5
        ``a``'s pass threshold: a score at or above it is a yes.
    threshold_b : float, optional
        ``b``'s; ``None``: ``threshold``.
    {n_boot}
    {confidence}
    {seed}
    ceiling : bool, default False
        Flag the pair as two independent annotators.
    statistics : sequence of str, default STATISTICS
        The statistics whose intervals are bootstrapped (the others still get point estimates; Kendall's interval is the
        slowest).
    human_b : bool, default False
        ``judge_b`` is a human label column: the counts are also given as ``judge_yes_human_no`` and so on.
    scale : tuple of (int, int) or str, optional
        ``(low, high)`` or ``"1-5"``: adds :data:`GRADED_STATISTICS`, both sides put on the rating scale by
        :func:`to_scale`, then quadratic-weighted kappa and Krippendorff's alpha at the ordinal and interval levels on
        the ratings.
    verdicts_a : array-like of bool, optional
        ``judge_a``'s verdicts, one per item, in place of ``a >= threshold`` (the out-of-fold verdicts of a threshold
        chosen by cross-validation; see :func:`choose_threshold`).
    cluster : array-like, optional
        One cluster id per item (the conversation of each turn; a Series' name names the column in the result, else
        ``"cluster"``): every bootstrap resamples whole clusters (:func:`~llm_connect.stats.agreement.bootstrap_ci`),
        and with fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` clusters among the paired items no interval
        is given (each statistic's ``reason`` says why). ``None``: independent items.

    Returns
    -------
    PairAgreement
        The statistics with their intervals, the confusion counts and the settings used.

    Raises
    ------
    ValueError
        When ``statistics`` names an unknown statistic, or ``cluster`` or ``verdicts_a`` has not one value per item;
        ``ValidationError`` for a bad ``confidence`` or ``scale``.

    See Also
    --------
    agreement_table : Every pair of a scores frame.

    Notes
    -----
    Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal scales"), Krippendorff's alpha (Krippendorff
    2011, "Computing Krippendorff's alpha-reliability"), Spearman's rho and Kendall's tau; the intervals are percentile
    bootstraps (Efron & Tibshirani 1993, "An Introduction to the Bootstrap").

    Examples
    --------
    >>> pair = pair_agreement([0.9, 0.2, 0.8, 0.1, 0.7, 0.3], [1, 0, 1, 0, 0, 0], judge_b="human", n_boot=200)
    >>> pair.n, round(pair["percent_agreement"].value, 3), round(pair["cohen_kappa"].value, 3)
    (6, 0.833, 0.667)
    """
    confidence = check_confidence(confidence)
    unknown = set(statistics) - set(STATISTICS)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}; choose from {list(STATISTICS)}")
    tb = threshold if threshold_b is None else threshold_b
    bounds = parse_scale(scale)
    x, y, missing = paired(a, b)
    vx, vy = x >= threshold, y >= tb
    groups, cluster_name, n_clusters, few = None, None, None, None
    if cluster is not None:
        ids = cluster_codes(cluster)
        both = np.isfinite(as_float_array(a, "a")) & np.isfinite(as_float_array(b, "b"))
        if ids.shape != both.shape:
            raise ValueError(f"cluster has {ids.size} ids for {both.size} scores")
        groups = ids[both]
        cluster_name = str(getattr(cluster, "name", None) or "cluster")
        n_clusters = len(np.unique(groups))
        if n_clusters < MIN_CLUSTERS:
            few = few_clusters_reason(n_clusters, column=cluster_name, what="paired")
    if verdicts_a is not None:
        given = np.asarray(verdicts_a, dtype=bool)
        keep = np.isfinite(as_float_array(a, "a")) & np.isfinite(as_float_array(b, "b"))
        if given.shape != keep.shape:
            raise ValueError(f"verdicts_a has {given.size} values for {keep.size} scores")
        vx = given[keep]
    n = len(x)
    reasons = undefined_reasons(x, y, vx, vy, (judge_a, judge_b))
    estimates: dict[str, Estimate] = {}
    x2, y2, vx2, vy2 = x[None, :], y[None, :], vx[None, :], vy[None, :]
    for stat in STATISTICS:
        reason = reasons.get(stat)
        if reason:
            estimates[stat] = Estimate(math.nan, reason=reason)
            continue
        if n == 0:
            estimates[stat] = Estimate(math.nan, reason="no paired scores")
            continue
        value = finite_or_nan(STATISTIC_FUNCTIONS[stat](x2, y2, vx2, vy2)[0])
        if math.isnan(value):
            estimates[stat] = Estimate(math.nan, reason="undefined on this data")
            continue
        low = high = math.nan
        if few is not None and stat in statistics:
            estimates[stat] = Estimate(value, reason=f"no interval: {few}")
            continue
        if n >= 2 and stat in statistics:
            lo, hi = bootstrap_ci(lambda p, q, vp, vq, f=STATISTIC_FUNCTIONS[stat]: f(p, q, vp, vq), x, y, vx, vy,
                                  n_boot=n_boot, confidence=confidence, seed=seed, cluster=groups)
            low, high = finite_or_nan(float(lo)), finite_or_nan(float(hi))
        estimates[stat] = Estimate(value, low, high)
    if bounds is not None:
        graded = graded_estimates(x, y, bounds, n_boot=n_boot, confidence=confidence, seed=seed, cluster=groups)
        if few is not None:
            graded = {k: Estimate(e.value, reason=e.reason or f"no interval: {few}") for k, e in graded.items()}
        estimates.update(graded)
    confusion = pd.DataFrame(
        [[int((~vx & ~vy).sum()), int((~vx & vy).sum())], [int((vx & ~vy).sum()), int((vx & vy).sum())]],
        index=pd.Index([False, True], name=f"{judge_a} verdict"),
        columns=pd.Index([False, True], name=f"{judge_b} verdict"))
    return PairAgreement(judge_a=judge_a, judge_b=judge_b, n=n, n_missing=missing, threshold=float(threshold),
                         threshold_b=float(tb), estimates=estimates, confusion=confusion, ceiling=ceiling,
                         confidence=confidence, n_boot=n_boot, human_b=human_b, scale=bounds, cluster=cluster_name,
                         n_clusters=n_clusters)


def _judge_columns(scores: pd.DataFrame) -> list[str]:
    return [c[len("score_"):] for c in scores.columns if isinstance(c, str) and c.startswith("score_")]


@share_parameters
@dataclass
class AgreementTable:
    """Agreement of every pair of judges (:func:`agreement_table`); ``frame`` has one row per pair.

    Parameters
    ----------
    pairs : list of PairAgreement
        One per pair of judges and labels.
    threshold : float
        The pass threshold of a judge not in ``thresholds``.
    confidence : float
        The intervals' confidence level.
    chosen : dict of str to ThresholdChoice, optional
        The thresholds chosen by cross-validation (``thresholds={judge: "best"}``), by judge.
    thresholds : dict of str to float, optional
        Every threshold given or chosen, by judge (the others use ``threshold``).
    {cluster}
    {n_clusters}
    """

    pairs: list[PairAgreement]
    threshold: float
    confidence: float
    #: The thresholds chosen by cross-validation (``thresholds={judge: "best"}``), by judge.
    chosen: dict[str, ThresholdChoice] = field(default_factory=dict)
    #: Every threshold given or chosen, by judge (the others use ``threshold``).
    thresholds: dict[str, float] = field(default_factory=dict)
    #: The column the items were clustered by (each bootstrap resampled whole clusters), or ``None``.
    cluster: str | None = None
    #: The clusters among the items (``None`` without clusters).
    n_clusters: int | None = None

    @property
    def frame(self) -> pd.DataFrame:
        rows = [p.row() for p in self.pairs]
        if not rows:
            return pd.DataFrame(columns=["judge_a", "judge_b", "n", *STATISTICS])
        return pd.DataFrame(rows)

    def pair(self, judge_a: str, judge_b: str) -> PairAgreement:
        """The pair of two judges, in either order.

        Parameters
        ----------
        judge_a, judge_b : str
            The two judges or labels.

        Returns
        -------
        PairAgreement
            As the table holds it (read from its own ``judge_a``'s side).

        Raises
        ------
        KeyError
            When the table has no such pair; the message lists its pairs.
        """
        for p in self.pairs:
            if (p.judge_a, p.judge_b) in ((judge_a, judge_b), (judge_b, judge_a)):
                return p
        raise KeyError(f"no pair {judge_a!r} / {judge_b!r}; pairs: {[(p.judge_a, p.judge_b) for p in self.pairs]}")

    def matrix(self, statistic: str = "cohen_kappa") -> pd.DataFrame:
        """One statistic for every pair, as a symmetric judge-by-judge frame.

        Parameters
        ----------
        statistic : str, default "cohen_kappa"
            One of :data:`STATISTICS`.

        Returns
        -------
        pandas.DataFrame
            The judges in the table's order on both axes, NaN on the diagonal.

        Raises
        ------
        ValueError
            When ``statistic`` is unknown.
        """
        if statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {statistic!r}; choose from {list(STATISTICS)}")
        names: list[str] = []
        for p in self.pairs:
            for name in (p.judge_a, p.judge_b):
                if name not in names:
                    names.append(name)
        out = pd.DataFrame(np.nan, index=pd.Index(names, name="judge"), columns=pd.Index(names, name="judge"))
        for p in self.pairs:
            out.loc[p.judge_a, p.judge_b] = out.loc[p.judge_b, p.judge_a] = p.estimates[statistic].value
        return out

    def _repr_html_(self) -> str:
        return str(view("agreement_table_html")(self))


def agreement_table(scores: pd.DataFrame | Mapping[str, Any], judges: Sequence[str] | None = None, *,
                    threshold: float = 0.5, thresholds: Mapping[str, float | str] | None = None,
                    annotators: Sequence[str] = (), n_boot: int = 1000, confidence: float = 0.95, seed: int | None = 0,
                    statistics: Sequence[str] = STATISTICS, labels: Sequence[str] | None = None, scale: Any = None,
                    groups: Mapping[str, str] | None = None, reference: str | None = None, folds: int = CV_FOLDS,
                    cluster: Any = "auto") -> AgreementTable:
    """Agreement of every pair of judges.

    Each row is read from ``judge_a``'s side against ``judge_b``: on a row of a machine judge and a human label column,
    ``judge_b`` is always the label column, and the verdict counts are named ``judge_yes_human_no`` and so on (see
    :meth:`PairAgreement.counts`). Pairs of two ``annotators`` (independent human labels) are flagged ``ceiling``: their
    agreement is what a judge can hope to reach; other label columns (several rating dimensions) are separate targets,
    never a ceiling.

    Parameters
    ----------
    scores : DataFrame or mapping of str to array-like
        A frame with a ``score_<judge>`` column per judge (as :func:`~llm_connect.calibration.score_items` makes) or a
        mapping of judge name to scores.
    judges : sequence of str, optional
        The judges to compare; ``None``: all of them.
    threshold : float, default 0.5
        The pass threshold of a judge not in ``thresholds``.
    thresholds : mapping of str to float or "best", optional
        Per judge, a number, or ``"best"`` (:data:`BEST`) for the threshold with the best kappa against ``reference``,
        chosen by ``folds``-fold cross-validation (:func:`choose_threshold`): the row against the reference then holds
        out-of-fold verdict statistics, ``threshold`` the value chosen on all labelled rows, and ``threshold_selection``
        / ``fold_thresholds`` say how (:attr:`AgreementTable.chosen`).
    annotators : sequence of str, default ()
        Independent human label columns.
    n_boot : int, default 1000
        Bootstrap resamples of the intervals.
    confidence : float, default 0.95
        The intervals' confidence level.
    seed : int, optional, default 0
        Seeds the bootstrap and the folds.
    statistics : sequence of str, default STATISTICS
        The statistics of each row.
    labels : sequence of str, optional
        The human label columns; default ``human`` and the ``annotators``.
    scale : tuple of (float, float), optional
        ``(low, high)``: the labels are ratings on that scale; rows against a label gain :data:`GRADED_STATISTICS`.
    groups : mapping of str to str, optional
        ``{"system": column, "document": column}`` of a frame; rows against a label gain :func:`grouped_correlation` at
        that level (``system_kendall``, ``system_spearman``, ``n_systems``; ``document_kendall``, ...).
    reference : str, optional
        The label a ``"best"`` threshold is chosen against; default ``human``, else the first label column.
    folds : int, default CV_FOLDS
        Cross-validation folds of a ``"best"`` threshold.
    cluster : str or sequence, optional, default "auto"
        Which items are not independent. ``"auto"``: the ``conversation_id`` column of a ``scores`` frame when it has
        one (turns of one conversation), else independent items; a column name of the frame; ``None``: independent
        items; or one id per item (with a mapping of scores). With clusters every bootstrap resamples whole
        conversations and the ``"best"`` threshold's folds are made of whole conversations (see :func:`pair_agreement`
        and :func:`choose_threshold`); the rows gain ``cluster`` and ``n_clusters``, :attr:`AgreementTable.cluster`
        names the column and the HTML caption says so.

    Returns
    -------
    AgreementTable
        One row per pair of judges.

    Raises
    ------
    ValueError
        When a judge has no scores, or ``cluster`` has not one id per item.
    """
    if isinstance(scores, pd.DataFrame):
        available = _judge_columns(scores)
        columns = {name: scores[f"score_{name}"] for name in available}
    else:
        columns = dict(scores)
        available = list(columns)
    names = list(judges) if judges is not None else available
    missing = [j for j in names if j not in columns]
    if missing:
        raise ValueError(f"no scores for judge(s) {missing}; have {available}")
    people = set(annotators) | {"human"} if labels is None else set(labels)
    cluster_ids: Any = None
    cluster_name: str | None = None
    if cluster is not None and not isinstance(cluster, str):  # one id per item
        cluster_ids = pd.Series(list(cluster), dtype=object, name=str(getattr(cluster, "name", None) or "cluster"))
        cluster_name = str(cluster_ids.name)
    else:
        cluster_name = cluster_column(scores.columns if isinstance(scores, pd.DataFrame) else [], cluster,
                                      what="the scores")
        if cluster_name is not None and isinstance(scores, pd.DataFrame):
            cluster_ids = scores[cluster_name].reset_index(drop=True)
    if cluster_ids is not None:
        lengths = {len(v) for v in columns.values()}
        if lengths and lengths != {len(cluster_ids)}:
            raise ValueError(f"cluster has {len(cluster_ids)} ids for {sorted(lengths)[0]} items")
    per: dict[str, float] = {}
    wanted_best: list[str] = []
    for name, value in (thresholds or {}).items():
        if isinstance(value, str) and value.strip().lower() == BEST:
            wanted_best.append(name)
        else:
            try:
                per[name] = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"the threshold of {name!r} must be a number or 'best', got {value!r}") from None
    ref = reference
    if ref is None:
        present = [n for n in names if n in people]
        ref = "human" if "human" in present else (present[0] if present else None)
    chosen: dict[str, ThresholdChoice] = {}
    for name in wanted_best:
        if name not in columns:
            raise ValueError(f"threshold 'best' for {name!r}, which has no scores; have {available}")
        if ref is None or ref not in columns:
            raise ValueError(f"threshold 'best' for {name!r} needs human labels to choose against; the data has none")
        if name in people:
            raise ValueError(f"threshold 'best' is for a judge, not for the label column {name!r}")
        picked_here = choose_threshold(columns[name], columns[ref], judge_name=name, reference_name=ref,
                                       reference_threshold=per.get(ref, threshold), folds=folds, seed=seed,
                                       fallback=threshold, cluster=cluster_ids)
        chosen[name] = picked_here
        per[name] = picked_here.value
    if groups and not isinstance(scores, pd.DataFrame):
        raise ValueError("groups= needs scores as a frame holding the group columns")
    pairs = []
    for ja, jb in itertools.combinations(names, 2):
        if ja in people and jb not in people:  # a judge is read against people, never people against a judge
            ja, jb = jb, ja
        choice = chosen.get(ja)
        against_ref = choice is not None and jb == ref and choice.verdicts is not None
        pair = pair_agreement(columns[ja], columns[jb], judge_a=ja, judge_b=jb, threshold=per.get(ja, threshold),
                              threshold_b=per.get(jb, threshold), n_boot=n_boot, confidence=confidence, seed=seed,
                              ceiling=ja in annotators and jb in annotators, statistics=statistics,
                              human_b=jb in people, scale=scale if jb in people else None,
                              verdicts_a=choice.verdicts if against_ref and choice else None, cluster=cluster_ids)
        extra: dict[str, Any] = {}
        if chosen:
            picked = [c for c in (chosen.get(ja), chosen.get(jb)) if c is not None]
            extra["threshold_selection"] = "; ".join(
                f"{c.judge}: {c.describe()}" if not against_ref else c.describe() for c in picked) or "fixed"
            extra["fold_thresholds"] = " ".join(fmt(t) for t in choice.fold_thresholds) if against_ref and choice \
                else ""
        if groups and jb in people and isinstance(scores, pd.DataFrame):
            for level, column in groups.items():
                plural = "systems" if level == "system" else "documents"
                corr: GroupedCorrelation | None = None
                for method in ("kendall", "spearman"):
                    corr = grouped_correlation(scores, f"score_{ja}", f"score_{jb}", group=column, level=level,
                                               method=method)
                    extra[f"{level}_{method}"] = corr.value
                extra[f"n_{plural}"] = corr.n_used if corr is not None else 0
        if extra:
            pair = replace(pair, extra=extra)
        pairs.append(pair)
    n_clusters = len(np.unique(cluster_codes(cluster_ids))) if cluster_ids is not None else None
    return AgreementTable(pairs=pairs, threshold=threshold, confidence=confidence, chosen=chosen,
                          thresholds=per, cluster=cluster_name, n_clusters=n_clusters)
