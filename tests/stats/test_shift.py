"""Paired differences of scores: the mean difference with its t interval (a judge card's mean bias)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from llm_connect.errors import ValidationError
from llm_connect.stats.shift import mean_difference


def test_mean_difference_matches_scipy_t_interval():
    rng = np.random.default_rng(3)
    human = rng.integers(0, 2, 120).astype(float)
    judge = np.clip(human + rng.normal(0.1, 0.3, 120), 0, 1)
    judge[:5] = np.nan
    mean, low, high, n = mean_difference(judge, human)
    d = (judge - human)[5:]
    ref = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
    assert n == 115
    assert mean == pytest.approx(d.mean())
    assert (low, high) == pytest.approx((ref.low, ref.high))


def test_mean_difference_at_the_edges():
    assert mean_difference([np.nan], [1.0])[3] == 0 and math.isnan(mean_difference([np.nan], [1.0])[0])
    mean, low, high, n = mean_difference([0.7], [0.2])
    assert (mean, n) == (pytest.approx(0.5), 1) and math.isnan(low) and math.isnan(high)
    assert mean_difference([0.6, 0.7], [0.1, 0.2])[:3] == pytest.approx((0.5, 0.5, 0.5))
    with pytest.raises(ValidationError, match="cluster has 1 ids for 2 scores"):
        mean_difference([0.6, 0.7], [0.1, 0.2], cluster=["c"])


@pytest.mark.parametrize("confidence", [0, 1, 95, -0.5, float("nan"), "0.95"])
def test_mean_difference_refuses_a_confidence_that_is_no_level(confidence):
    with pytest.raises(ValidationError, match="confidence"):
        mean_difference([0.9, 0.8, 0.4], [1.0, 0.5, 0.0], confidence=confidence)


def test_mean_difference_refuses_scores_of_different_items():
    """Two lists of different lengths are not the same items: refused, not broadcast or cut short."""
    with pytest.raises(ValidationError, match="3 judge scores, 2 human scores"):
        mean_difference([0.9, 0.8, 0.4], [1.0, 0.5])
