"""The saved report and the judgment viewer read at a glance, checked in a real headless Chromium at 1280x900.

The agreement table (the widest) stays inside the page, no figure has its title twice or cut off, each
section of the report opens with a "how to read this" line, and the viewer says what its colours mean.
The report's screenshot is taken into the test's temporary directory; with ``LLM_CONNECT_SCREENSHOTS=1`` it
replaces docs/report.png (look at it when the page changes: a test run never changes a tracked file otherwise).
docs/viewer.png, the README's, is taken from the demo's output by docs/make_viewer_screenshot.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from llm_connect.calibration import calibrate
from llm_connect.grading import EmbeddingSimilarityJudge, ExactMatchJudge, FunctionJudge, LLMJudge
from llm_connect.testing import DeterministicEmbedder, ScriptedAdapter
from llm_connect.views.report import HOW_TO_READ, report_figures

DOCS = Path(__file__).resolve().parents[2] / "docs"

ANSWERS = [("Capital of France?", "Paris", "Paris"), ("Capital of Italy?", "Rome", "It is Rome, surely."),
           ("2 + 2?", "4", "five"), ("Largest planet?", "Jupiter", "Saturn, with its rings, is the largest."),
           ("Smallest planet?", "Mercury", "Mercury"), ("3 + 3?", "6", "Six"), ("Author of Hamlet?",
           "Shakespeare", "William Shakespeare"), ("Boiling point of water in C?", "100", "90 degrees")]


def reply(prompt: str, run_config) -> str:
    candidate = prompt.split("Candidate answer:", 1)[1]
    good = any(w in candidate for w in ("Paris", "Rome", "Mercury", "Shakespeare", "Six"))
    return json.dumps({"notes": "checked", "quality_score": 0.9 if good else 0.2})


@pytest.fixture(scope="module")
def report():
    rows = []
    for i in range(24):
        prompt, ref, cand = ANSWERS[i % len(ANSWERS)]
        right = cand.lower().startswith(ref.lower()[:3]) or ref.lower() in cand.lower() or ref == "6"
        rows.append({"id": f"item-{i:02d}-with-a-long-identifier", "prompt": prompt, "baseline": ref,
                     "candidate": cand + " " * (i % 3), "human": "yes" if right else "no",
                     "human_2": "yes" if right != (i % 7 == 0) else "no"})
    judges = [ExactMatchJudge(), EmbeddingSimilarityJudge(DeterministicEmbedder()),
              LLMJudge(ScriptedAdapter(reply, model_id="scripted-judge"), seed=0),
              FunctionJudge(lambda b, c: min(1.0, len(c) / 40), grader_id="likes-long-answers-a-lot")]
    return calibrate(judges, rows, human=None, annotators=["human", "human_2"], probes="length",
                     n_boot=50, progress=False)


def test_each_figure_has_one_title_that_fits_its_figure(report):
    figs = report_figures(report)
    assert figs
    for name, fig in figs.items():
        titled = [ax for ax in fig.axes if ax.get_title()]
        assert len(titled) <= 1 and fig._suptitle is None, name  # one title, set once
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in titled:
            box = ax.title.get_window_extent(renderer)
            assert box.width <= fig.bbox.width + 1, (name, ax.get_title())  # not wider than the figure


@pytest.fixture(scope="module")
def browser(open_chromium):
    """The session's Chromium (tests/views/conftest.py), 1280x900 with no scrollbars, as a reader's laptop."""
    return open_chromium(1280, 900, scrollbars=False)


@pytest.mark.slow
def test_the_report_reads_at_a_glance_in_chromium(report, browser, tmp_path):
    from selenium.webdriver.common.by import By

    page = report.to_html(tmp_path / "report.html")
    browser.get(page.as_uri())
    assert browser.execute_script("return window.innerWidth") >= 1200
    # nothing widens the page: wide tables scroll inside their own box
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), \
        browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    wide = browser.execute_script(
        "return Array.from(document.querySelectorAll('.llm-connect-report table')).filter("
        "t => t.scrollWidth > t.clientWidth + 1).map(t => getComputedStyle(t).overflowX)")
    assert all(o in ("auto", "scroll") for o in wide)
    # every figure title once
    captions = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "figcaption")]
    assert captions and len(captions) == len(set(captions))
    # each section opens with its "how to read this" line
    sections = browser.execute_script(
        "return Array.from(document.querySelectorAll('.llm-connect-report > h3')).map(h => [h.textContent,"
        " h.nextElementSibling ? h.nextElementSibling.className : '', h.nextElementSibling ?"
        " h.nextElementSibling.textContent : ''])")
    names = [s[0] for s in sections]
    assert {"Verdicts", "Summary", "Agreement", "Bias probes", "Figures"} <= set(names)
    for name, cls, text in sections:
        assert cls == "llm-connect-howto" and text.startswith("How to read this:"), name
        assert HOW_TO_READ[name] in text
    shot = DOCS / "report.png" if os.environ.get("LLM_CONNECT_SCREENSHOTS") == "1" else tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000


@pytest.mark.slow
def test_the_viewer_says_what_its_colours_mean_in_chromium(report, browser, tmp_path):
    from selenium.webdriver.common.by import By

    page = report.view().save(tmp_path / "viewer.html")
    browser.get(page.as_uri())
    legend = browser.find_element(By.ID, "legend")
    assert legend.is_displayed()
    for words in ("disagrees with people", "unscored", "abstained", "error"):
        assert words in legend.text
    # the legend's swatches use the very classes the table colours its cells with
    for cls in ("disagrees", "status-unscored", "status-abstained", "status-error"):
        assert legend.find_elements(By.CSS_SELECTOR, f".{cls}")
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    browser.save_screenshot(str(tmp_path / "viewer.png"))  # docs/viewer.png is docs/make_viewer_screenshot.py's


@pytest.mark.slow
def test_summary_and_agreement_fit_a_1400_pixel_window_and_no_cell_wraps_tall(report, browser, tmp_path):
    page = report.to_html(tmp_path / "report.html")
    browser.set_window_size(1400, 900)
    try:
        browser.get(page.as_uri())
        measured = browser.execute_script("""
            const out = {};
            for (const t of document.querySelectorAll('.llm-connect-report table')) {
              const cap = t.querySelector('caption');
              const name = cap ? cap.textContent.split(' ')[0] : '';
              if (name !== 'Summary' && name !== 'Agreement') continue;
              const heights = Array.from(t.querySelectorAll('tbody td')).map(c => c.getBoundingClientRect().height);
              out[name] = {scroll: t.scrollWidth, client: t.clientWidth, right: t.getBoundingClientRect().right,
                           window: window.innerWidth, tallest: Math.max(...heights), lowest: Math.min(...heights)};
            }
            return out;""")
    finally:
        browser.set_window_size(1280, 900)
    assert set(measured) == {"Summary", "Agreement"}, measured
    for name, m in measured.items():
        assert m["scroll"] <= m["client"] + 1, (name, m)  # no scrollbar: every column in view
        assert m["right"] <= m["window"], (name, m)
        assert m["tallest"] <= 2.5 * m["lowest"], (name, m)  # the "weak" reason wraps in two lines at most
    assert any(report.summary()["weak"].astype(bool))  # the fixture has a weak judge, so its reason was measured
