"""Plots, checked by inspecting their artists (Agg backend, no image comparison)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from llm_connect.calibration import agreement_table, reliability_table
from llm_connect.stats import threshold_sweep
from llm_connect.views import (
    length_profile,
    plot_agreement_heatmap,
    plot_bias_forest,
    plot_judge_scatter,
    plot_reliability,
    plot_score_vs_length,
    plot_threshold_sweep,
)


@pytest.fixture
def ax():
    fig = Figure()
    return fig.add_subplot()


@pytest.fixture
def scores():
    rng = np.random.default_rng(0)
    n = 80
    human = (rng.random(n) < 0.5).astype(float)
    return pd.DataFrame({
        "score_llm": np.clip(0.3 + 0.5 * human + rng.normal(0, 0.15, n), 0, 1),
        "score_exact": human * (rng.random(n) < 0.7),
        "score_human": human,
        "candidate_words": rng.integers(1, 100, n),
    })


def test_modules_do_not_touch_rcparams_or_import_matplotlib():
    code = ("import sys, llm_connect.calibration, llm_connect.frames, llm_connect.cli;"
            "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'scipy', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_scatter_with_identity_line(ax, scores):
    before = dict(matplotlib.rcParams)
    scores.loc[0, "score_llm"] = np.nan
    out = plot_judge_scatter(scores, x="exact", y="score_llm", ax=ax)
    assert out is ax
    points = ax.collections[0].get_offsets()
    assert len(points) == 79
    np.testing.assert_allclose(points[:, 1], scores["score_llm"].dropna().to_numpy())
    identity = [line for line in ax.lines if line.get_label() == "identity"]
    assert identity and list(identity[0].get_xdata()) == [0, 1] and list(identity[0].get_ydata()) == [0, 1]
    assert ax.get_xlabel() == "exact score" and "n=79" in ax.get_title()
    assert dict(matplotlib.rcParams) == before
    jittered = plot_judge_scatter(scores, x="exact", y="llm", jitter=0.05, ax=Figure().add_subplot())
    offsets = jittered.collections[0].get_offsets()
    assert not np.allclose(offsets[:, 0], scores["score_exact"].to_numpy()[1:])
    with pytest.raises(TypeError, match="data"):  # data is a required argument, not a false None default
        plot_judge_scatter(x="a", y="b")
    with pytest.raises(ValueError, match="data is required"):
        plot_judge_scatter(None, x="a", y="b")


def test_uses_current_axes_when_none_given(scores):
    fig = plt.figure()
    try:
        ax = plot_judge_scatter(scores, x="human", y="llm")
        assert ax is plt.gca() and ax.figure is fig
    finally:
        plt.close(fig)


def test_agreement_heatmap(ax, scores):
    table = agreement_table(scores[["score_llm", "score_exact", "score_human"]], n_boot=0)
    plot_agreement_heatmap(table, statistic="cohen_kappa", ax=ax)
    image = ax.images[0]
    matrix = table.matrix("cohen_kappa").to_numpy()
    np.testing.assert_allclose(np.ma.filled(image.get_array(), np.nan), matrix)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and f"{matrix[0, 1]:.2f}" in texts
    assert [t.get_text() for t in ax.get_xticklabels()] == ["llm", "exact", "human"]
    with pytest.raises(ValueError):
        plot_agreement_heatmap(table, statistic="vibes", ax=Figure().add_subplot())


def test_reliability_diagram(ax, scores):
    plot_reliability(scores, judge="llm", label="human", bins=5, ax=ax)
    table = reliability_table(scores, "llm", label="human", bins=5)
    shown = table[table["n"] > 0]
    container = ax.containers[0]
    assert container.get_label() == "llm"
    data_line = container.lines[0]
    np.testing.assert_allclose(data_line.get_xdata(), shown["mean_score"])
    np.testing.assert_allclose(data_line.get_ydata(), shown["correct_rate"])
    diagonal = next(line for line in ax.lines if line.get_label() == "perfect calibration")
    assert list(diagonal.get_xdata()) == [0, 1]


def test_threshold_sweep_plot(ax, scores):
    sweep = threshold_sweep(scores["score_llm"], scores["score_human"])
    plot_threshold_sweep(sweep, ax=ax)
    kappa = next(line for line in ax.lines if line.get_label() == "cohen kappa")
    np.testing.assert_allclose(kappa.get_xdata(), sweep["threshold"])
    np.testing.assert_allclose(kappa.get_ydata(), sweep["cohen_kappa"])
    best = next(line for line in ax.lines if line.get_label().startswith("best kappa"))
    assert best.get_xdata()[0] == pytest.approx(sweep.loc[sweep["cohen_kappa"].idxmax(), "threshold"])
    again = plot_threshold_sweep(scores, judge="llm", reference="human", statistics=["cohen_kappa"],
                                 ax=Figure().add_subplot())
    np.testing.assert_allclose(again.lines[0].get_ydata(), sweep["cohen_kappa"])


def test_bias_forest(ax):
    frame = pd.DataFrame({
        "judge": ["llm", "llm", "exact", "exact"],
        "probe": ["length", "format", "length", "position"],
        "mean_shift": [0.2, -0.05, -0.3, np.nan],
        "shift_low": [0.1, -0.1, -0.4, np.nan],
        "shift_high": [0.3, 0.0, -0.2, np.nan],
    })
    plot_bias_forest(frame, ax=ax)
    container = ax.containers[0]
    xs, ys = container.lines[0].get_data()
    np.testing.assert_allclose(xs, [0.2, -0.05, -0.3])
    assert list(ys) == [2, 1, 0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["llm · length", "llm · format", "exact · length"]
    zero = [line for line in ax.lines if list(line.get_xdata()) == [0, 0]]
    assert zero


def test_score_vs_length(ax, scores):
    plot_score_vs_length(scores, judge="llm", hue="human", bins=4, ax=ax)
    profile = length_profile(scores, judge="llm", hue="human", bins=4)
    assert set(profile["group"]) == {"human: yes", "human: no"}
    drawn = {line.get_label(): line for line in ax.lines}
    yes = profile[profile["group"] == "human: yes"]
    np.testing.assert_allclose(drawn["human: yes"].get_ydata(), yes["mean_score"])
    assert ax.get_xscale() == "log"
    assert len(ax.collections[0].get_offsets()) == len(scores)
    plain = length_profile(scores, judge="llm", bins=3)
    assert plain["group"].unique().tolist() == ["all"] and plain["n"].sum() == len(scores)


def test_plots_of_a_judge_that_scored_nothing_draw_without_warnings(scores):
    empty = scores.assign(score_llm=np.nan)
    for draw in (
        lambda ax: plot_reliability(empty, judge="llm", ax=ax),
        lambda ax: plot_score_vs_length(empty, judge="llm", hue="human", ax=ax),
        lambda ax: plot_judge_scatter(empty, x="human", y="llm", ax=ax),
        lambda ax: plot_threshold_sweep(empty, judge="llm", reference="human", ax=ax),
        lambda ax: plot_agreement_heatmap(agreement_table(empty, n_boot=0), ax=ax),
        lambda ax: plot_bias_forest(pd.DataFrame(columns=["judge", "probe", "mean_shift", "shift_low",
                                                          "shift_high"]), ax=ax),
    ):
        fig = Figure()
        draw(fig.add_subplot())
        fig.savefig(__import__("io").BytesIO(), format="png")


# -- plot labels carry no control characters -----------------------------------------------------------------


ESC, BEL = "\x1b", "\x07"


def test_plot_labels_render_control_characters_as_escapes_and_warn_about_none(tmp_path):
    """A judge named ``"evil\\x1b[2J\\x07"``: matplotlib's "Glyph 27 missing" warning carried the raw ESC and
    BEL from the data to stderr."""
    import matplotlib.pyplot as plt

    from llm_connect.views import plot_judge_scatter

    name = f"evil{ESC}[2J{BEL}\u202e"
    data = pd.DataFrame({f"score_{name}": [0.0, 1.0, 1.0], "score_b": [0.0, 1.0, 0.0]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ax = plot_judge_scatter(data, x=name, y="b")
        ax.figure.savefig(tmp_path / "p.png")
    plt.close(ax.figure)
    texts = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    assert all(c not in t for t in texts for c in (ESC, BEL, "\u202e")), texts
    assert "\\x1b[2J" in ax.get_xlabel()
    assert not [w for w in caught if any(c in str(w.message) for c in (ESC, BEL, "\u202e"))]

