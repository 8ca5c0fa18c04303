"""Ordinary least squares with classical standard errors and Student-t intervals.

Checked against statsmodels' ``OLS`` in the tests. The observational
diagnostics (length effect, length-controlled scores, self-preference) fit it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._validate import check_confidence

__all__ = ["OLSResult", "ols"]


@dataclass(frozen=True)
class OLSResult:
    """An ordinary least squares fit: coefficients with standard errors and t-based intervals.

    ``result["name"]`` gives one term's ``coef``, ``se``, ``low``, ``high`` and ``p_value``.

    Parameters
    ----------
    names : list of str
        The terms.
    coef : ndarray
        Their coefficients.
    se : ndarray
        Standard errors.
    low : ndarray
        Intervals' lower ends.
    high : ndarray
        Upper ends.
    p : ndarray
        Two-sided p-values.
    n : int
        Observations.
    r2 : float
        R squared.
    df_resid : int
        Residual degrees of freedom.
    """

    names: list[str]
    coef: np.ndarray
    se: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    n: int
    r2: float
    df_resid: int

    def table(self) -> pd.DataFrame:
        """One row per term.

        Returns
        -------
        DataFrame
            ``term``, ``coef``, ``se``, ``low``, ``high``, ``p_value``.
        """
        return pd.DataFrame({"term": self.names, "coef": self.coef, "se": self.se, "low": self.low,
                             "high": self.high, "p_value": self.p})

    def __getitem__(self, name: str) -> dict[str, float]:
        i = self.names.index(name)
        return {"coef": float(self.coef[i]), "se": float(self.se[i]), "low": float(self.low[i]),
                "high": float(self.high[i]), "p_value": float(self.p[i])}


def ols(y: Any, X: Any, names: Sequence[str], *, confidence: float = 0.95) -> OLSResult:
    """Least squares of ``y`` on the columns of ``X`` (include a column of ones for an intercept).

    Standard errors are the classical ones; intervals and p-values use Student's t.
    Rank-deficient designs and ``n <= k`` give NaN errors, not an exception.

    Parameters
    ----------
    y : array-like
        The outcome.
    X : array-like
        The design, one column per term.
    names : sequence of str
        The terms' names.
    confidence : float, default 0.95
        The intervals' level.

    Returns
    -------
    OLSResult
        The fit.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(5.0)
    >>> fit = ols(1.0 + 2.0 * x, np.column_stack([np.ones(5), x]), ["intercept", "x"])
    >>> fit.coef.round(6).tolist()
    [1.0, 2.0]
    """
    from scipy import stats

    confidence = check_confidence(confidence)
    y = np.asarray(y, dtype=float)
    X = np.asarray(X, dtype=float)
    n, k = X.shape
    coef, _, rank, _ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    df = n - k
    nan = np.full(k, np.nan)
    ss_tot = float(((y - y.mean()) ** 2).sum()) if n else math.nan
    r2 = 1 - float((resid**2).sum()) / ss_tot if n and ss_tot > 0 else math.nan
    if df <= 0 or rank < k:
        return OLSResult(list(names), coef, nan, nan.copy(), nan.copy(), nan.copy(), n, r2, df)
    sigma2 = float((resid**2).sum()) / df
    cov = sigma2 * np.linalg.inv(X.T @ X)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    tcrit = stats.t.ppf(0.5 + confidence / 2, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, coef / se, np.nan)
    p = np.where(np.isfinite(t), 2 * stats.t.sf(np.abs(t), df), np.nan)
    return OLSResult(list(names), coef, se, coef - tcrit * se, coef + tcrit * se, p, n, r2, df)
