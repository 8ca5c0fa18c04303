"""How many labels to collect: :func:`labels_needed` plans an interval of a target width from a labelled pilot
(the estimators of :mod:`llm_connect.stats.estimates`; with clusters, each variance times its design effect).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._clustered import _clustered, _Pairs
from ._estimators import _check_frame, _div, _finite0, _label_reasons, _Moments, _moments, _scores, _Sums, _sums, _z
from ._validate import by_columns, check_confidence, group_codes
from .clusters import MIN_CLUSTERS, cluster_codes, cluster_column, few_clusters_reason

__all__ = ["PLANNING_COLUMNS", "labels_needed"]

#: The columns of :func:`labels_needed`'s frame (after the ``by`` columns).
PLANNING_COLUMNS: tuple[str, ...] = (
    "method", "width", "labels_needed", "more_labels", "n_labelled_pilot", "n_total", "achievable", "reason",
    "cluster", "n_clusters_pilot", "clusters_needed",
)


def labels_needed(
    data: pd.DataFrame,
    *,
    judge: str,
    human: str,
    width: float | Sequence[float],
    by: str | Sequence[str] | None = None,
    confidence: float = 0.95,
    pool: str = "data",
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """How many human labels give an interval of a target full ``width`` (``ci_high - ci_low``).

    Plans from a labelled pilot: the labelled rows give ``var(Y)``, ``cov(Y, f)``,
    and all judged rows give ``var(f)`` (``ρ`` is the judge–human correlation). With
    ``t = (width / (2 z))²`` the target variance and ``M`` the judged rows in a group:

    - ``"human"``: ``se² = var(Y)/n``, so ``n = var(Y) / t``.
    - ``"ppi++"`` with ``pool="data"`` (the M items are what there is; labelling n
      of them leaves ``N = M − n`` unlabelled): with PPI++'s λ
      ``se² = min_λ [var(Y − λ f)/n + λ² var(f)/(M − n)]``, which for an unclipped λ is
      ``var(Y)·((1 − ρ²)/n + ρ²/M)``; the smallest such n is found by bisection
      (λ clipped to 0..1 as the estimator does). Labelling all M items gives
      ``var(Y)/M``, so a narrower target is not achievable (``achievable`` False;
      ``labels_needed`` then holds the infinite-pool number: that many labels would
      do with many more judged items).
    - ``"ppi++"`` with ``pool="infinite"`` (N large): ``n = var(Y − λ f)/t`` with
      ``λ = cov(Y, f)/var(f)`` clipped to 0..1, i.e. ``var(Y)(1 − ρ²)/t``.

    With clusters (the turns of one conversation) each variance above is multiplied by its
    design effect read off the pilot (Kish 1965: the cluster-robust variance of
    :func:`estimate_quality` over the variance of independent rows; for PPI++ one for the
    labelled residual ``Y − λ f`` and one for the judge's scores), so the plan assumes further
    labels come as the pilot's did: whole conversations of about the pilot's number of labelled
    turns. ``clusters_needed`` is ``labels_needed`` in such conversations.

    Parameters
    ----------
    data
        The pilot: one row per judged item, the labelled ones with a ``human`` score.
    judge, human
        Columns of scores in 0..1.
    width
        The target full width, one number or several (a row each).
    by
        A column name or a list of them.
    confidence
        The intervals' level.
    pool
        ``"data"`` (the judged items are what there is) or ``"infinite"``.
    cluster
        ``"auto"`` (the default: ``conversation_id`` when present), a column name, or ``None``
        (independent rows), as :func:`estimate_quality` reads it. A pilot whose labels come from
        fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` conversations gives no plan
        (a reason says so): its design effect is too uncertain.

    Returns
    -------
    pandas.DataFrame
        Columns ``[*by], method, width, labels_needed`` (total labels including the pilot),
        ``more_labels`` (beyond the pilot), ``n_labelled_pilot, n_total, achievable, reason,
        cluster, n_clusters_pilot, clusters_needed`` (the last two ``<NA>`` without clusters;
        ``attrs["cluster"]`` names the column). ``achievable`` is False when more labels are needed
        than the group has items (with ``pool="data"``). The pilot's variances are estimates: plan
        with a pilot of 30 or more labels and round up; below ~30 labels the normal interval
        itself is unreliable.

    Raises
    ------
    ValidationError
        A column is missing, a width is not positive, or ``pool`` is unknown.
    """
    by_cols = by_columns(by, reserved=PLANNING_COLUMNS, what="labels_needed")
    _check_frame(data, {"judge": judge, "human": human, **{f"by[{i}]": c for i, c in enumerate(by_cols)}})
    conf = check_confidence(confidence)
    widths = [width] if isinstance(width, (int, float, np.number)) else list(width)
    if not widths or any(isinstance(w, bool) or not isinstance(w, (int, float, np.number)) or not (
            math.isfinite(w) and w > 0) for w in widths):
        raise ValidationError(f"width must be a positive number (or a list of them), e.g. 0.1; got {width!r}")
    if pool not in ("data", "infinite"):
        raise ValidationError(f"pool must be 'data' or 'infinite', got {pool!r}")
    z = _z(conf)
    f = _scores(data, judge, "judge")
    y = _scores(data, human, "human")
    codes, keys = group_codes(data, by_cols)
    s = _sums(codes, len(keys), y, f, None)
    mo = _moments(s)
    m = (s.n + s.N).astype(float)
    base = _label_reasons(s)
    flat = (base == None) & s.labels_equal  # noqa: E711 (exact: min == max, not a variance of 1e-17)
    base[flat] = ("all human labels in the pilot are equal, so their variance cannot be estimated; "
                  "label a larger pilot (at least ~30 items)")
    vy, c, vf = mo.vy, mo.cyf, mo.vf_all0
    beta = np.where(vf > 0, _div(c, vf), 0.0)
    cluster_col = cluster_column(data, cluster)
    ones = np.ones(len(keys))
    deff_h, deff_r, deff_f, g_pilot = ones, ones, ones, np.zeros(len(keys), dtype=np.int64)
    if cluster_col is not None:
        pairs = _Pairs(codes, len(keys), cluster_codes(data[cluster_col]))
        deff_h, deff_r, deff_f, g_pilot = _design_effects(s, mo, pairs, y, f, np.clip(beta, 0.0, 1.0))
        few = (base == None) & (g_pilot < MIN_CLUSTERS)  # noqa: E711 (elementwise on an object array)
        for i in np.flatnonzero(few):
            base[i] = ("a plan for correlated rows reads the design effect off the pilot: "
                       + few_clusters_reason(int(g_pilot[i]), column=cluster_col))
    turns_per_cluster = _div(s.n, g_pilot)

    rows: list[dict[str, Any]] = []
    for wd in widths:
        t = (float(wd) / (2 * z)) ** 2
        n_human = np.ceil(deff_h * vy / t - 1e-9)
        lam_inf = np.clip(beta, 0.0, 1.0)
        n_inf = np.ceil(deff_r * np.maximum(vy - 2 * lam_inf * c + lam_inf**2 * vf, 0.0) / t - 1e-9)
        if pool == "data":
            n_ppi, reach = _bisect_pool(vy, c, vf, beta, m, t, deff_r, deff_f)
            n_ppi = np.where(reach, n_ppi, n_inf)
            ok_ppi, ok_human = reach, n_human <= m
        else:
            n_ppi, ok_ppi, ok_human = n_inf, np.ones(len(m), bool), np.ones(len(m), bool)
        for g in range(len(keys)):
            for method, need, ok in (("ppi++", n_ppi[g], ok_ppi[g]), ("human", n_human[g], ok_human[g])):
                reason = base[g]
                value: Any = pd.NA
                if reason is None:
                    value = int(max(need, 2.0))
                    if not ok:
                        reason = (f"needs more labels than the {int(m[g])} judged items in this group; collect more "
                                  "items or accept a wider interval")
                        if method == "ppi++":
                            reason += " (labels_needed assumes a much larger pool of judged items)"
                rows.append({
                    **{col: keys.iloc[g][col] for col in by_cols},
                    "method": method, "width": float(wd), "labels_needed": value,
                    "more_labels": pd.NA if value is pd.NA else max(value - int(s.n[g]), 0),
                    "n_labelled_pilot": int(s.n[g]), "n_total": int(m[g]),
                    "achievable": bool(ok) and reason is None, "reason": reason,
                    "cluster": cluster_col,
                    "n_clusters_pilot": int(g_pilot[g]) if cluster_col is not None else pd.NA,
                    "clusters_needed": (math.ceil(value / turns_per_cluster[g] - 1e-9)
                                        if cluster_col is not None and value is not pd.NA else pd.NA),
                })
    out = pd.DataFrame(rows, columns=[*by_cols, *PLANNING_COLUMNS])
    out["reason"] = out["reason"].astype(object).where(out["reason"].notna(), None)
    for col in ("labels_needed", "more_labels", "n_clusters_pilot", "clusters_needed"):
        out[col] = out[col].astype("Int64")
    out["cluster"] = out["cluster"].astype(object).where(out["cluster"].notna(), None)
    out.attrs["cluster"] = cluster_col
    if by_cols and len(out):
        for col in by_cols:  # keep the key columns' dtypes (e.g. categoricals)
            out[col] = out[col].astype(keys[col].dtype)
    return out


def _design_effects(s: _Sums, mo: _Moments, pairs: _Pairs, y: np.ndarray, f: np.ndarray,
                    lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group, from the pilot: the design effects (Kish 1965, *Survey Sampling*: the cluster-robust variance
    over the variance of independent rows) of the human mean, of the PPI++ residual mean ``mean(Y − λ f)``
    and of the judge's mean over all judged rows, and the pilot's labelled clusters. A design effect is 1
    where the independent-rows variance is 0 (nothing to inflate)."""
    codes = pairs.codes
    has_y, has_f = ~np.isnan(y), ~np.isnan(f)
    lab = has_y & has_f
    n, m = s.n.astype(float), (s.n + s.N).astype(float)
    human = _clustered(s, mo, pairs, "human", y, f, None)
    r = y - lam[codes] * f
    r_bar = _div(np.bincount(codes, weights=np.where(lab, r, 0.0), minlength=pairs.n_groups), n)
    r_var = np.maximum(_div(np.bincount(codes, weights=np.where(lab, r * r, 0.0), minlength=pairs.n_groups), n)
                       - r_bar**2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        part_r = pairs.scale(lab) * pairs.sums(_finite0(np.where(lab, (r - r_bar[codes]) / n[codes], 0.0)))
        part_f = pairs.scale(has_f) * pairs.sums(_finite0(np.where(has_f, (f - mo.fbar_all[codes]) / m[codes],
                                                                            0.0)))

    def ratio(clustered: np.ndarray, independent: np.ndarray) -> np.ndarray:
        out = _div(clustered, independent)
        return np.where((independent > 0) & np.isfinite(out), np.maximum(out, 0.0), 1.0)

    return (ratio(human.var, _div(mo.vy, n)), ratio(pairs.total(part_r**2), _div(r_var, n)),
            ratio(pairs.total(part_f**2), _div(mo.vf_all0, m)), human.n_clusters)


def _pool_variance(vy: np.ndarray, c: np.ndarray, vf: np.ndarray, beta: np.ndarray, m: np.ndarray,
                   n: np.ndarray, deff_r: Any = 1.0, deff_f: Any = 1.0) -> np.ndarray:
    """PPI++'s variance with n labelled of m judged rows, λ = clip(β (m − n)/m, 0, 1); with clusters the
    labelled part is inflated by its design effect ``deff_r`` and the unlabelled part by ``deff_f``."""
    lam = np.clip(beta * (m - n) / m, 0.0, 1.0)
    rest = np.where(m > n, lam**2 * _div(vf, m - n), 0.0)
    return deff_r * np.maximum(vy - 2 * lam * c + lam**2 * vf, 0.0) / n + deff_f * rest


def _bisect_pool(vy: np.ndarray, c: np.ndarray, vf: np.ndarray, beta: np.ndarray, m: np.ndarray,
                 t: float, deff_r: Any = 1.0, deff_f: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Smallest n in 1..m with variance <= t, per group, and whether labelling all m reaches t."""
    with np.errstate(all="ignore"):
        hi = np.maximum(m, 1.0)
        reach = _pool_variance(vy, c, vf, beta, m, hi, deff_r, deff_f) <= t * (1 + 1e-12)
        lo = np.zeros_like(hi)  # invariant: V(lo) > t (n = 0 never works), V(hi) <= t
        for _ in range(64):
            active = hi - lo > 1
            if not active.any():
                break
            mid = np.floor((lo + hi) / 2)
            good = _pool_variance(vy, c, vf, beta, m, np.maximum(mid, 1.0), deff_r, deff_f) <= t * (1 + 1e-12)
            hi = np.where(active & good, mid, hi)
            lo = np.where(active & ~good, mid, lo)
    return hi, reach
