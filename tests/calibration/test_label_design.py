"""The report's estimates use the same label design as the command line and estimates.csv (issue 28):
with a labelled sample, PPI++ is not the human-only estimate of every label."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd

from llm_connect.calibration import calibrate
from llm_connect.grading import FunctionJudge

matplotlib.use("Agg")


def _report():
    rng = np.random.default_rng(0)
    n = 60
    correct = rng.random(n) < 0.6
    noisy = np.clip(correct + rng.normal(0, 0.3, n), 0, 1)
    items = pd.DataFrame({  # the candidate's text carries the score the judge gives it
        "prompt": [f"q{i}" for i in range(n)], "baseline": ["a"] * n, "candidate": [f"{v:.4f}" for v in noisy],
        "candidate_model": np.where(np.arange(n) % 2 == 0, "m1", "m2"), "human": correct,
    })
    judge = FunctionJudge(lambda b, c: float(c), grader_id="noisy")
    return calibrate(judge, items, human="human", probes=None, n_boot=50, progress=False, concurrency=1)


def test_the_report_estimates_follow_its_label_design():
    report = _report()
    every = report.estimates()
    design = np.zeros(len(report.scores), dtype=bool)
    design[::3] = True
    report.label_design = design
    sampled = report.estimates()
    ppi = sampled[sampled["method"] == "ppi++"]
    assert ppi["n_labelled"].sum() == design.sum()  # only the sample's labels
    assert every[every["method"] == "ppi++"]["n_labelled"].sum() == len(design)
    assert not np.allclose(ppi["estimate"], sampled[sampled["method"] == "human"]["estimate"])
    html = report.html(plots=False)
    assert f"a random sample of {design.sum()} of the {len(design)} items" in html
