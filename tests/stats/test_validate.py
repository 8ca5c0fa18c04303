"""The checks every statistic shares (``llm_connect.stats._validate``): one check of ``confidence`` for every entry
point that takes it, one reading of ``by`` (a group column a function would overwrite is refused; many
high-cardinality group columns never crash), and ``ValidationError`` as the only error stats raise.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import llm_connect
from llm_connect import ExactMatchJudge
from llm_connect.calibration import calibrate
from llm_connect.errors import ValidationError
from llm_connect.routing import RoutingPolicy
from llm_connect.stats import estimate_quality, labels_needed, leaderboard
from llm_connect.stats.agreement import bootstrap_ci, grouped_correlation
from llm_connect.stats.gate import score_interval
from llm_connect.stats.regression import ols
from llm_connect.stats.shift import paired_shift
from llm_connect.testing import assert_quality


def items(n: int) -> list[dict]:
    return [{"id": i, "prompt": f"question {i}", "baseline": f"answer {i}",
             "candidate": f"answer {i}" if i % 3 else f"reply {i}", "human": bool(i % 3)} for i in range(n)]


# -- one check of confidence, one reading of by ------------------------------------------------------------


def test_every_confidence_is_checked_the_same_way():
    frame = pd.DataFrame({"judge": [0.1, 0.9, 0.5, 0.7], "human": [0.0, 1.0, None, 1.0]})
    calls = [
        lambda c: estimate_quality(frame, judge="judge", human="human", confidence=c),
        lambda c: labels_needed(frame, judge="judge", human="human", width=0.1, confidence=c),
        lambda c: leaderboard([{"model_a": "x", "model_b": "y", "winner": "a"}], confidence=c, n_boot=0),
        lambda c: ols([1.0, 2.0, 3.0], np.ones((3, 1)), ["intercept"], confidence=c),
        lambda c: paired_shift([0.1, 0.2], [0.2, 0.3], confidence=c),
        lambda c: bootstrap_ci(lambda x: x.mean(axis=1), np.arange(3.0), confidence=c),
        lambda c: calibrate([ExactMatchJudge()], items(3), confidence=c, probes=None, progress=False),
        lambda c: RoutingPolicy(confidence=c),
        lambda c: score_interval([0.5, 1.0], confidence=c),
        lambda c: assert_quality([True] * 3, at_least=0.5, confidence=c),
    ]
    for call in calls:
        with pytest.raises(ValidationError, match=r"confidence must be between 0 and 1 .*did you mean 0.95"):
            call(95)
        with pytest.raises(ValidationError, match="confidence must be a number between 0 and 1"):
            call("0.95")


@pytest.mark.parametrize("column", ["method", "estimate", "se", "reason", "ci_low", "n_total"])
def test_estimate_quality_refuses_a_group_column_it_would_overwrite(column):
    """Before: by="method" came back holding "ppi++" / "human" / "judge", the user's groups gone."""
    data = pd.DataFrame({"judge": [0.2, 0.8, 0.6, 0.9] * 5, "human": [0, 1, None, 1] * 5,
                         column: ["g1", "g2"] * 10})
    with pytest.raises(ValidationError, match=rf"by names the column '{column}', which estimate_quality adds "
                                              r"itself .*Rename that column first"):
        estimate_quality(data, judge="judge", human="human", by=column)
    renamed = data.rename(columns={column: f"{column}_group"})
    out = estimate_quality(renamed, judge="judge", human="human", by=f"{column}_group")
    assert sorted(set(out[f"{column}_group"])) == ["g1", "g2"]  # the groups survive under the new name


def test_labels_needed_and_leaderboard_refuse_a_group_column_they_would_overwrite():
    data = pd.DataFrame({"judge": [0.2, 0.8] * 10, "human": [0, 1] * 10, "width": ["a", "b"] * 10})
    with pytest.raises(ValidationError, match="by names the column 'width', which labels_needed adds itself"):
        labels_needed(data, judge="judge", human="human", width=0.2, by="width")
    battles = pd.DataFrame({"model_a": ["x", "y"] * 5, "model_b": ["y", "x"] * 5, "winner": ["a", "b"] * 5,
                            "rating": ["easy", "hard"] * 5})
    with pytest.raises(ValidationError, match="by names the column 'rating', which leaderboard adds itself"):
        leaderboard(battles, by="rating", n_boot=0)


def test_many_high_cardinality_group_columns_are_numbered_by_the_groups_present():
    """Before: eight columns of 2,000 distinct values each crashed in numpy ("invalid dims")."""
    n = 2000  # groups, of two rows each
    rng = np.random.default_rng(0)
    key = np.arange(2 * n) // 2
    data = pd.DataFrame({f"g{k}": key * (k + 1) for k in range(8)})
    data["judge"] = rng.random(2 * n)
    data["human"] = (rng.random(2 * n) < 0.6).astype(float)
    by = [f"g{k}" for k in range(8)]
    out = estimate_quality(data, judge="judge", human="human", by=by, methods="judge")
    assert len(out) == n and out["g0"].tolist() == list(range(n)) and out["g7"].tolist() == list(range(0, 8 * n, 8))
    assert np.allclose(out["estimate"], data.groupby(key)["judge"].mean())  # each group's own mean
    planned = labels_needed(data, judge="judge", human="human", width=0.5, by=by)
    assert len(planned) == 2 * n  # ppi++ and human per group


# -- errors from stats ------------------------------------------------------------------------------------


def test_stats_raise_validation_errors_only():
    stats = Path(llm_connect.__file__).parent / "stats"
    for path in stats.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        raised = {node.exc.func.id for node in ast.walk(tree) if isinstance(node, ast.Raise)
                  and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)}
        assert raised <= {"ValidationError"}, (path.name, raised)
    with pytest.raises(ValidationError, match="no group column 'topic'"):
        grouped_correlation(pd.DataFrame({"score_a": [0.1], "score_b": [0.2]}), "a", "b", group="topic")
