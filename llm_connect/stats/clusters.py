"""Rows that are not independent: clusters (the turns of one conversation), read once for every interval.

Turns of one conversation (or steps of one agent run) share the conversation's topic, user and
difficulty, so they are correlated; an interval that treats them as independent rows is too narrow
(with 80 conversations of 6 turns and 25 of them labelled, a 95% interval that ignores the
conversations covers the true mean about 70% of the time). Every interval-producing function of the
package takes ``cluster=`` and reads it with :func:`cluster_column`:

- ``"auto"`` (the default): the ``conversation_id`` column (:data:`AUTO_CLUSTER_COLUMN`) when the data
  has one, else independent rows;
- a column name: that column (an error when the data lacks it);
- ``None``: independent rows (the numbers of earlier releases).

A row whose cluster id is missing is a cluster of its own. What the clusters change:

- **normal (CLT) intervals** use cluster-robust ("sandwich") variances: the estimator is written as a
  sum of per-row influence terms, the terms are summed within each cluster, and the variance is the sum
  of the squared cluster sums times the small-sample factor ``G / (G − 1)`` (CR1; ``G`` the number of
  clusters), with ``t(G − 1)`` critical values instead of normal ones (Cameron & Miller 2015, *A
  Practitioner's Guide to Cluster-Robust Inference*, Journal of Human Resources 50(2):317–372, sections
  II–III and VI). For a plain mean this is exactly the standard error of
  ``statsmodels.OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": g})`` (the tests check it);
- **bootstraps** resample whole clusters (Davison & Hinkley 1997, *Bootstrap Methods and their
  Application*, section 3.8), never single rows of one.

With fewer than :data:`MIN_CLUSTERS` clusters a cluster-robust variance is itself too uncertain for an
interval to mean what it says (Cameron & Miller, section VI): the interval is then not given (NaN), and
the reason says how many clusters there were and what to do (:func:`few_clusters_reason`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = [
    "AUTO_CLUSTER_COLUMN",
    "MIN_CLUSTERS",
    "cluster_codes",
    "cluster_column",
    "cluster_mean_se",
    "cluster_sizes_text",
    "cr1_factor",
    "few_clusters_reason",
    "t_critical",
]

#: The column ``cluster="auto"`` clusters by when the data has it.
AUTO_CLUSTER_COLUMN = "conversation_id"
#: Fewer clusters than this give no interval (NaN and a reason): the cluster-robust variance (or a cluster
#: bootstrap) estimated from so few clusters is too uncertain (Cameron & Miller 2015, section VI).
MIN_CLUSTERS = 10


def cluster_column(columns: Any, cluster: Any, *, what: str = "the data") -> str | None:
    """The column to cluster by: ``cluster`` read against ``columns`` (a frame's columns, or the frame).

    ``"auto"``: :data:`AUTO_CLUSTER_COLUMN` when present, else ``None``; ``None``: ``None``; another string:
    that column, which must be present (a :class:`~llm_connect.errors.ValidationError` names the columns
    otherwise).

    Parameters
    ----------
    columns
        The columns of the data (or a DataFrame, whose columns are read).
    cluster
        ``"auto"``, ``None`` or a column name.
    what
        How to name the data in an error.

    Returns
    -------
    str or None
        The column name, or ``None`` for independent rows.

    Raises
    ------
    ValidationError
        ``cluster`` is not ``"auto"``, ``None`` or a string, or names a column that is missing.
    """
    names = list(getattr(columns, "columns", columns))
    if cluster is None:
        return None
    if not isinstance(cluster, str) or not cluster:
        raise ValidationError(f"cluster must be 'auto', None or a column name, got {cluster!r}")
    if cluster == "auto":
        return AUTO_CLUSTER_COLUMN if AUTO_CLUSTER_COLUMN in names else None
    if cluster not in names:
        have = ", ".join(map(repr, names[:20]))
        raise ValidationError(f"cluster={cluster!r} names no column of {what}; its columns are: {have}. Pass the "
                              "column holding each row's conversation (or agent run), or cluster=None for "
                              "independent rows")
    return cluster


def cluster_codes(values: Any) -> np.ndarray:
    """Cluster numbers 0..G-1 per row, in order of first appearance; a missing id is a cluster of its own.

    Parameters
    ----------
    values
        One cluster id per row (a Series, an array or a list).

    Returns
    -------
    numpy.ndarray
        Integer codes (``intp``), one per row.
    """
    import pandas as pd

    series = pd.Series(values, dtype=object) if not isinstance(values, pd.Series) else values
    codes, uniques = pd.factorize(series, sort=False, use_na_sentinel=True)
    codes = np.asarray(codes, dtype=np.intp).copy()
    missing = codes < 0
    if missing.any():  # each row without an id is a conversation of its own
        codes[missing] = len(uniques) + np.arange(int(missing.sum()))
    return codes


def cr1_factor(n_clusters: Any) -> np.ndarray:
    """The CR1 small-sample factor ``G / (G − 1)`` (NaN for fewer than 2 clusters).

    Parameters
    ----------
    n_clusters
        ``G``, a number or an array of them.

    Returns
    -------
    numpy.ndarray
        The factor, elementwise.
    """
    g = np.asarray(n_clusters, dtype=float)
    out = np.full(g.shape, np.nan)
    np.divide(g, g - 1.0, out=out, where=g >= 2)
    return out


def t_critical(confidence: float, df: Any) -> np.ndarray:
    """The two-sided ``t(df)`` critical value of a ``confidence`` interval (NaN where ``df < 1``).

    Parameters
    ----------
    confidence
        The interval's level, e.g. 0.95.
    df
        Degrees of freedom (``G − 1`` for a cluster-robust interval), a number or an array.

    Returns
    -------
    numpy.ndarray
        The critical values, elementwise.
    """
    from scipy import stats

    d = np.asarray(df, dtype=float)
    out = np.full(d.shape, np.nan)
    ok = d >= 1
    out[ok] = stats.t.ppf(0.5 + confidence / 2.0, d[ok])
    return out


def cluster_mean_se(values: Any, clusters: Any) -> tuple[float, int]:
    """The cluster-robust (CR1) standard error of the mean of ``values``, and the number of clusters.

    ``se² = G/(G − 1) · Σ_g (Σ_{i∈g} (x_i − x̄))² / n²`` (Cameron & Miller 2015, eq. 11 with one
    regressor, the constant), equal to the standard error of
    ``statsmodels.OLS(x, ones).fit(cov_type="cluster", cov_kwds={"groups": clusters})``. Rows with a
    missing value are left out. NaN with fewer than 2 clusters.

    Parameters
    ----------
    values
        The numbers (NaN: missing).
    clusters
        One cluster id per value (a missing id is a cluster of its own).

    Returns
    -------
    tuple of (float, int)
        The standard error and the number of clusters among the rows with a value.
    """
    x = np.asarray(values, dtype=float)
    codes = cluster_codes(clusters)
    if len(codes) != len(x):
        raise ValidationError(f"values and clusters differ in length ({len(x)} vs {len(codes)})")
    keep = np.isfinite(x)
    x, codes = x[keep], codes[keep]
    if not len(x):
        return math.nan, 0
    _, codes = np.unique(codes, return_inverse=True)
    g = int(codes.max()) + 1
    sums = np.bincount(codes, weights=x - x.mean(), minlength=g)
    if g < 2:
        return math.nan, g
    var = g / (g - 1) * float((sums**2).sum()) / len(x) ** 2
    return math.sqrt(var), g


def few_clusters_reason(n_clusters: int, *, column: str | None, what: str = "labelled") -> str:
    """Why no interval is given with ``n_clusters`` < :data:`MIN_CLUSTERS` clusters (and what to do).

    Parameters
    ----------
    n_clusters
        How many clusters there were.
    column
        The cluster column (named in the message).
    what
        What the clusters hold (``"labelled"``: they hold the labelled rows).

    Returns
    -------
    str
        The reason, for a ``reason`` column or an :class:`~llm_connect.stats.agreement.Estimate`.
    """
    name = f"{column!r}" if column else "the cluster column"
    return (f"only {n_clusters} {what} conversation(s) (clusters of {name}): rows of one conversation are not "
            f"independent, and an interval needs at least {MIN_CLUSTERS} conversations; label turns of more "
            "conversations, or pass cluster=None only if the rows really are independent")


def cluster_sizes_text(column: str | None, n_clusters: int | None) -> str:
    """A short phrase for a caption or a repr: ``"clustered by 'conversation_id' (25 clusters)"``, or ``""``.

    Parameters
    ----------
    column : str or None
        The column (or tag) clustered by; ``None``: not clustered.
    n_clusters : int or None
        How many clusters.

    Returns
    -------
    str
        The phrase.

    Examples
    --------
    >>> cluster_sizes_text("conversation_id", 25)
    "clustered by 'conversation_id' (25 clusters)"
    """
    if not column:
        return ""
    tail = f" ({n_clusters} clusters)" if n_clusters is not None else ""
    return f"clustered by {column!r}{tail}"
