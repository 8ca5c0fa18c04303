"""Estimate mean quality from many judge scores and a few human labels, with valid intervals.

An LLM judge grades every item; people label a few. The judge alone is cheap but
biased, people alone are unbiased but few. Prediction-powered inference combines
them: the judge's mean over all items, corrected by the judge's error measured on
the labelled items. The interval stays valid however bad the judge is, and it is
narrower than the human-only one when the judge tracks the people.

Methods (``method`` column of :func:`estimate_quality`), with ``Y`` the human
label, ``f`` the judge score, ``n`` labelled and ``N`` unlabelled rows:

``"ppi++"``
    ``λ·mean_unlabelled(f) + mean_labelled(Y − λ f)`` with the power-tuning
    parameter ``λ`` estimated from the data and clipped to 0..1 (Angelopoulos,
    Duchi & Zrnic 2023, *PPI++: Efficient Prediction-Powered Inference*,
    arXiv:2311.01453). ``λ = 0`` is the human-only estimate, ``λ = 1`` is PPI.
    With a useless judge ``λ`` goes to 0 and the interval is (almost) the
    human-only one; it is never much wider.
``"ppi"``
    the same with ``λ = 1`` (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023,
    *Prediction-powered inference*, Science 382:669).
``"human"``
    the classical CLT interval on the labelled rows alone.
``"judge"``
    the naive mean of the judge's scores over all rows; its interval ignores the
    judge's bias and is **not** a valid interval for the human mean (it is there
    to show how far off the judge alone would be).

The point estimates and intervals equal those of ``ppi_py.ppi_mean_ci`` (``lam=None``
and ``lam=1``) and ``ppi_py.classical_mean_ci`` on the same data (the tests check
this): normal intervals ``estimate ± z·se`` with ``se² = λ²·var(f_unlabelled)/N +
var(Y − λ f)/n`` (variances with divisor n, as numpy's ``std``) and
``λ = cov(Y, f) / ((1 + n/N)·var(f over all rows))`` (the last with divisor n+N−1).

With ``weights=`` the labelled rows were chosen with known, possibly unequal
probabilities ``π_i`` (e.g. more labels where the judge is unsure) and the
inverse-probability-weighted estimator of active inference is used instead
(Zrnic & Candès 2024, *Active Statistical Inference*, ICML, arXiv:2403.03208).
With ``ξ_i = 1`` for a labelled row and 0 otherwise, over all M rows with a
judge score::

    θ̂_λ = (1/M) Σ_i [ λ f_i + (Y_i − λ f_i) ξ_i / π_i ]

which is unbiased for every λ because ``E[ξ_i/π_i] = 1``. The per-row terms
``Z_i = A_i − λ B_i`` with ``A_i = Y_i ξ_i/π_i`` and ``B_i = f_i (ξ_i/π_i − 1)``
are independent when rows are drawn independently and each is labelled
independently with probability ``π_i`` (Poisson sampling), so ``se² = var(Z)/M``.
The variance-minimising ``λ = cov(A, B)/var(B)`` is used for ``"ppi++"`` (clipped
to 0..1), ``λ = 1`` for ``"ppi"``; ``"human"`` is then the Hájek estimator
``Σ ξ Y/π / Σ ξ/π`` with its linearised variance ``Σ ξ (Y − θ̂)²/π² / (Σ ξ/π)²``.
(Note the parametrisation: ``f + λ (Y − f) ξ/π`` would be biased for ``λ ≠ 1``.)

With ``judge_missing="stratify"`` the rows without a judge score are a stratum of their own
instead of being left out. A selective judge scores only the items it is sure of and abstains on the
others, which go to people (``Labeller(strategy="abstained")``): the two kinds of item differ, so
PPI++ over the judged rows alone estimates the quality of the items the judge was sure of, not of all
items. The stratified estimate combines PPI++ (Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453) on
the ``M_J`` judged rows with the human mean on the ``M_A`` rows without a judge score, weighted by the
strata's shares ``w_J = M_J / M`` and ``w_A = M_A / M`` (``M = M_J + M_A``), as stratified PPI does
(Fisch et al. 2024, *Stratified Prediction-Powered Inference for Hybrid Language Model Evaluation*,
NeurIPS, arXiv:2406.04291; there the shares are known, here they are estimated)::

    θ̂ = w_J θ̂_J + w_A ȳ_A
    se² = w_J² se_J² + w_A² var(Y_A)/n_A + w_J w_A (θ̂_J − ȳ_A)² / M

The last term is the variance of the estimated shares (the items are a sample, so which stratum an
item falls in is random too); the strata's estimates are independent, so their variances add. It
assumes the labels within each stratum are a random sample of it (every row of a stratum labelled
is the simplest case). A stratum with rows but too few labels is refused (NaN and a reason): the
other stratum's labels cannot stand in for it.

With ``cluster=`` (``"auto"``: the ``conversation_id`` column when present) the rows are turns of
conversations and not independent (:mod:`llm_connect.stats.clusters`). Each estimator above is a sum
of per-row influence terms (for PPI++: ``(Y_i − λ f_i − ȳ + λ f̄_l)/n`` on a labelled row and
``λ (f_j − f̄_u)/N`` on an unlabelled one; their squares add up to the ``se²`` above); with clusters
the terms are summed within each conversation first, and ``se²`` is the sum of the squared
conversation sums, each part (labelled, unlabelled, each stratum, the shares) times its CR1 factor
``G/(G − 1)`` (Cameron & Miller 2015, *A Practitioner's Guide to Cluster-Robust Inference*, J. Human
Resources 50:317). PPI++'s ``λ`` is the one minimising that variance, ``Σ a_g b_g / Σ b_g²`` over the
conversation sums of the two terms (the power tuning of Angelopoulos, Duchi & Zrnic 2023 with
cluster-level covariances), and the interval is ``estimate ± t(G − 1)·se``.

Everything is computed from per-group sums (counts, sums of ``Y``, ``f``, ``Y²``,
``f²``, ``Y·f`` over labelled rows and of ``f``, ``f²`` over unlabelled rows) in one
pass, so a million rows in a hundred groups take well under a second.

This module holds :func:`estimate_quality`; its pieces live beside it, one idea each: the closed forms and
the honest bounds of equal labels (``stats/_estimators.py``), rows in clusters (``stats/_clustered.py``),
the two strata of ``judge_missing="stratify"`` (``stats/_strata.py``) and the planning of
:func:`labels_needed` (``stats/_planning.py``).
"""


from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._clustered import _Clustered, _clustered, _Pairs
from ._estimators import (
    CLUSTER_ROBUST,
    NORMAL,
    STRATIFIED,
    _check_frame,
    _div,
    _estimate,
    _hajek,
    _honest_bounds,
    _moments,
    _probabilities,
    _scores,
    _sums,
    _z,
    equal_labels_interval,
)
from ._planning import labels_needed
from ._strata import _stratified, _stratified_clustered, _unjudged
from ._validate import by_columns, check_confidence, group_codes
from .clusters import MIN_CLUSTERS, cluster_codes, cluster_column, few_clusters_reason, t_critical

__all__ = ["ESTIMATE_METHODS", "RESULT_COLUMNS", "equal_labels_interval", "estimate_quality", "labels_needed"]

ESTIMATE_METHODS: tuple[str, ...] = ("ppi++", "ppi", "human", "judge")
_DEFAULT_METHODS: tuple[str, ...] = ("ppi++", "human", "judge")
# columns of estimate_quality's frame after the group columns
RESULT_COLUMNS: tuple[str, ...] = (
    "method", "estimate", "ci_low", "ci_high", "se", "n_labelled", "n_total", "n_judge_missing",
    "lambda", "ess_gain", "confidence", "reason", "interval", "cluster", "n_clusters",
)


def _check_methods(methods: str | Sequence[str]) -> tuple[str, ...]:
    chosen = (methods,) if isinstance(methods, str) else tuple(methods)
    if not chosen:
        raise ValidationError(f"methods is empty; choose from {list(ESTIMATE_METHODS)}")
    unknown = [m for m in chosen if m not in ESTIMATE_METHODS]
    if unknown:
        raise ValidationError(f"unknown method {unknown[0]!r}; choose from {list(ESTIMATE_METHODS)}")
    return tuple(dict.fromkeys(chosen))


def _ess(human_var: np.ndarray, var: np.ndarray) -> np.ndarray:
    gain = _div(human_var, var)
    gain = np.where((var == 0) & (human_var > 0), np.inf, gain)
    return gain


# --- public API ----------------------------------------------------------------------------


def estimate_quality(
    data: pd.DataFrame,
    *,
    judge: str,
    human: str,
    by: str | Sequence[str] | None = None,
    methods: str | Sequence[str] = _DEFAULT_METHODS,
    confidence: float = 0.95,
    weights: str | None = None,
    judge_missing: str = "exclude",
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """Mean quality per group from judge scores and a few human labels, with confidence intervals.

    ``methods`` are explained in the module docstring: PPI++ (Angelopoulos, Duchi & Zrnic 2023,
    arXiv:2311.01453), PPI (Angelopoulos et al., *Science* 2023), the human-only CLT interval, and the
    judge's naive mean, whose interval ignores its bias.

    Parameters
    ----------
    data
        One row per graded item.
    judge, human
        Columns of scores in 0..1 (booleans are fine). A row whose ``human`` score is missing
        (NaN/None) is unlabelled. A row whose ``judge`` score is missing (an unscored reply) is
        excluded from every method — never read as 0 — and counted in ``n_judge_missing``.
    by
        A column name or a list of them; rows with a missing key form their own group.
    methods
        Any of ``"ppi++"``, ``"ppi"``, ``"human"``, ``"judge"``.
    confidence
        The intervals' level.
    weights
        A column holding, on each labelled row, the probability with which that row was chosen
        for labelling (values on unlabelled rows are ignored). With it the
        inverse-probability-weighted estimator of active inference (Zrnic & Candès 2024,
        arXiv:2403.03208) is used, which stays valid when labels were drawn unevenly (e.g. more
        where the judge is unsure); ``"human"`` is then the Hájek (weighted) mean. It assumes each
        row was labelled independently with its probability (Poisson sampling); for a fixed-size
        sample drawn without replacement the interval is typically slightly conservative.
    judge_missing
        What the rows without a judge score are. ``"exclude"`` (the default): left out of every
        method, as if the judge's failures were at random. ``"stratify"``: a stratum of their own, as
        a selective judge's abstentions are (it scores the items it is sure of, which differ from
        the others): the label-based methods combine their estimate on the judged rows with the
        human mean of the rows without a judge score, weighted by the strata's shares, with the
        variances added (see the module docstring; Fisch et al. 2024, arXiv:2406.04291). A group
        with rows in a stratum but too few labels there gets NaN and a reason. ``n_labelled`` and
        ``n_total`` then count the rows of both strata, and ``interval`` says ``"stratified"`` for
        the groups that have rows without a judge score. Not combined with ``weights``.
    cluster
        Which rows are not independent (:mod:`llm_connect.stats.clusters`). ``"auto"`` (the
        default): the ``conversation_id`` column when the data has one (the turns of one
        conversation), else independent rows; a column name: that column; ``None``: independent
        rows. With clusters every variance is cluster-robust: the estimator's per-row influence
        terms are summed within each (group, cluster) and the variance is the sum of the squared
        cluster sums times ``G/(G − 1)`` (CR1; Cameron & Miller 2015, *A Practitioner's Guide to
        Cluster-Robust Inference*), PPI++'s ``λ`` minimises that variance (cluster-level
        covariances), and the interval uses the ``t(G − 1)`` critical value, ``G`` the clusters
        holding the labelled rows (for ``"judge"``: the judged rows). With
        ``judge_missing="stratify"`` the strata's terms are summed within each conversation
        before squaring (a conversation with turns in both strata is one unit). Fewer than
        :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` (10) such clusters in a group: NaN and a
        reason. The clustered numbers are not those of independent rows even when every cluster
        holds one row (the factor ``G/(G − 1)`` and ``t``); ``cluster=None`` gives those.

    Returns
    -------
    pandas.DataFrame
        One row per group and method, with columns ``[*by], method, estimate, ci_low, ci_high, se,
        n_labelled, n_total, n_judge_missing, lambda, ess_gain, confidence, reason, interval,
        cluster, n_clusters`` (``attrs["cluster"]``: the cluster column, or ``None``):

        - ``n_labelled``: the group's labelled rows with a judge score (the ones the label-based
          methods use); ``n_total``: all its rows with a judge score (with
          ``judge_missing="stratify"``: its labelled rows and all its rows, judge score or not);
        - ``lambda``: the power-tuning parameter (1 for ``"ppi"``, NaN for ``"human"`` and
          ``"judge"``);
        - ``ess_gain``: ``var(human-only) / var(method)``, the factor by which the method
          multiplies the effective number of labels (NaN for ``"judge"``, whose interval is not
          valid);
        - ``reason``: None, or why the estimate is NaN (e.g. a group with no labels, or too few
          conversations);
        - ``interval``: how ``ci_low``/``ci_high`` were made: ``"normal"`` (CLT),
          ``"cluster-robust"`` (with clusters), or, for a label-based method in a group whose
          labels are all equal (where the normal interval has width 0), ``"exact: all labels
          equal"`` (Clopper–Pearson for 0/1 labels) or ``"hoeffding: all labels equal"`` (see
          :func:`equal_labels_interval`; with clusters its ``n`` is the labelled conversations),
          or ``"stratified"`` (``judge_missing="stratify"`` in a group with rows without a judge
          score: normal, each stratum's standard error widened as above when its labels are all
          equal);
        - ``cluster``: the column clustered by (``None``: independent rows); ``n_clusters``: the
          clusters the interval rests on (holding labelled rows; for ``"judge"``, judged rows),
          ``<NA>`` without clusters.

        Intervals are clipped to 0..1 (the scores' range); with fewer than ~30 labels in a group
        read them with care.

    Raises
    ------
    ValidationError
        A column is missing, scores are outside 0..1 or not numbers, or an option is unknown.

    Examples
    --------
    >>> df = pd.DataFrame({"judge": [0.9, 0.8, 0.4, 1.0, 0.7], "human": [1, 1, 0, None, None]})
    >>> estimate_quality(df, judge="judge", human="human")[["method", "estimate", "n_labelled"]]
      method  estimate  n_labelled
    0  ppi++  0.779874           3
    1  human  0.666667           3
    2  judge  0.760000           3
    """
    by_cols = by_columns(by, reserved=RESULT_COLUMNS, what="estimate_quality")
    needed = {"judge": judge, "human": human, **{f"by[{i}]": c for i, c in enumerate(by_cols)}}
    if weights is not None:
        needed["weights"] = weights
    _check_frame(data, needed)
    if judge == human:
        raise ValidationError(f"judge and human name the same column {judge!r}; pass two different columns")
    chosen = _check_methods(methods)
    conf = check_confidence(confidence)
    if judge_missing not in ("exclude", "stratify"):
        raise ValidationError(f"judge_missing must be 'exclude' or 'stratify', got {judge_missing!r}")
    if judge_missing == "stratify" and weights is not None:
        raise ValidationError("judge_missing='stratify' does not combine with weights=: estimate the rows without a "
                              "judge score apart, or pass judge_missing='exclude'")
    z = _z(conf)
    f = _scores(data, judge, "judge")
    y = _scores(data, human, "human")
    pi = _probabilities(data, weights, ~np.isnan(y)) if weights is not None else None
    codes, keys = group_codes(data, by_cols)
    s = _sums(codes, len(keys), y, f, pi)
    n_groups = len(keys)
    unjudged = _unjudged(codes, n_groups, y, f) if judge_missing == "stratify" else None
    strata = unjudged.M > 0 if unjudged is not None else np.zeros(n_groups, dtype=bool)

    cluster_col = cluster_column(data, cluster)
    pairs = _Pairs(codes, n_groups, cluster_codes(data[cluster_col])) if cluster_col is not None else None
    mo = _moments(s)

    def clustered(method: str) -> _Clustered:
        assert pairs is not None
        fig = _clustered(s, mo, pairs, method, y, f, pi)
        if unjudged is not None and method != "judge" and strata.any():
            labelled = pairs.count(~np.isnan(y))
            t_strata = t_critical(conf, np.where(strata, labelled, fig.n_clusters) - 1)
            fig = _stratified_clustered(s, unjudged, pairs, method, fig, y, f, conf, t_strata)
        return fig

    if pairs is not None:
        human_var = clustered("human").var
    else:
        human_var = _hajek(s)[1] if pi is not None else _div(mo.vy, s.n)
        if unjudged is not None and strata.any():  # the human-only estimate is stratified too
            h_est, h_var, _, h_reason = _estimate(s, "human", weighted=False)
            _, h_se, _ = _stratified(s, unjudged, "human", h_est, h_var, h_reason, conf, z)
            human_var = np.where(strata, h_se**2, human_var)
    columns: dict[str, list[np.ndarray]] = {c: [] for c in RESULT_COLUMNS}
    for method in chosen:
        n_clusters = np.zeros(n_groups, dtype=np.int64)
        crit = np.full(n_groups, z)
        if pairs is not None:
            fig = clustered(method)
            est, var, lam, reason, n_clusters = fig.est, fig.var, fig.lam, fig.reason, fig.n_clusters
            few = (n_clusters < MIN_CLUSTERS) & (reason == None)  # noqa: E711 (elementwise on an object array)
            for g in np.flatnonzero(few):
                reason[g] = few_clusters_reason(int(n_clusters[g]), column=cluster_col,
                                                what="judged" if method == "judge" else "labelled")
            crit = t_critical(conf, n_clusters - 1)
        else:
            est, var, lam, reason = _estimate(s, method, weighted=pi is not None)
            if unjudged is not None and method != "judge" and strata.any():
                est, se_strat, reason = _stratified(s, unjudged, method, est, var, reason, conf, z)
                var = se_strat**2
        invalid = reason != None  # noqa: E711 (elementwise on an object array)
        est = np.where(invalid, np.nan, est)
        se = np.where(invalid, np.nan, np.sqrt(np.maximum(var, 0.0)))
        gain = np.full(n_groups, np.nan) if method == "judge" else _ess(human_var, var)
        columns["method"].append(np.full(n_groups, method, dtype=object))
        columns["estimate"].append(est)
        columns["ci_low"].append(est - crit * se)
        columns["ci_high"].append(est + crit * se)
        columns["se"].append(se)
        if unjudged is not None:
            columns["n_labelled"].append(s.n + unjudged.n.astype(np.int64))
            columns["n_total"].append(s.n + s.N + unjudged.M.astype(np.int64))
        else:
            columns["n_labelled"].append(s.n)
            columns["n_total"].append(s.n + s.N)
        columns["n_judge_missing"].append(s.judge_missing)
        columns["lambda"].append(np.where(invalid, np.nan, lam))
        columns["ess_gain"].append(np.where(invalid, np.nan, gain))
        columns["confidence"].append(np.full(n_groups, conf))
        columns["reason"].append(reason)
        low, high, how = _honest_bounds(s, method, est - crit * se, est + crit * se, conf, skip=strata,
                                        n_eff=n_clusters if pairs is not None else None)
        if pairs is not None:
            how[how == NORMAL] = CLUSTER_ROBUST
        if method != "judge":
            how[strata] = STRATIFIED
        columns["ci_low"][-1], columns["ci_high"][-1] = low, high
        columns["interval"].append(how)
        columns["cluster"].append(np.full(n_groups, cluster_col, dtype=object))
        columns["n_clusters"].append(n_clusters)
    # group-major order: all methods of group 0, then group 1, ...
    k = len(chosen)
    order = np.arange(n_groups * k).reshape(k, n_groups).T.ravel()
    out = keys.iloc[np.repeat(np.arange(n_groups), k)].reset_index(drop=True)
    for name, parts in columns.items():
        values = np.concatenate(parts)[order]
        out[name] = pd.Series(values, dtype=object) if name in ("reason", "interval", "cluster") else values
    out["n_clusters"] = (out["n_clusters"].astype("Int64") if pairs is not None
                         else pd.Series([pd.NA] * len(out), dtype="Int64"))
    out.attrs["cluster"] = cluster_col
    return out
