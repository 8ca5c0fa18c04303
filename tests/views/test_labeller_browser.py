"""The labelling widget as a person uses it: a real JupyterLab server, driven in headless Chromium.

One test, end to end. It starts ``jupyter lab --no-browser`` on a free port of 127.0.0.1 with a
token, serving a temporary directory, with every Jupyter config, data, runtime and settings directory
isolated in it (the machinery is ``docs/make_labeller_screenshot.py``'s, which takes the docs'
screenshot the same way). There it writes a small labelling notebook (twelve items of the bundled QA
set, a ``Labeller`` writing to a ledger in the temporary directory, and ``labeller.widget()``), opens
it, runs its cells from JupyterLab's Run menu, clicks Correct / Incorrect on five items, restarts the
kernel from the Kernel menu (confirming the dialog), runs the cells again, then gives one label
and one undo by keyboard (ipyevents: hover the item, press ``x``, then ``u``), and checks that

- the widget really rendered (``llmc-labeller`` in the page, no "Loading widget..." or error);
- the ledger holds exactly the five human observations clicked, with their scores, the annotator,
  the item ids shown and the sampling probability;
- after the restart the widget shows the sixth item of the annotator's order (worked out here, in
  this process, by a ``Labeller`` on a copy of the items and a fresh ledger), not one of the five;
- the keyboard shortcuts work in the browser: ``x`` with the mouse over the item labels the sixth
  item incorrect (the widget moves on to the seventh), ``u`` appends a ``human-undo`` marker naming
  that label and shows the sixth again, and JupyterLab does not also take the keys as its own
  command-mode shortcuts (``x`` would cut the cell): the notebook keeps its cells.

Why a small notebook and not the tutorial: the tutorial (``notebooks/08_labelling.py``) judges the
whole QA set and has a stand-in annotator label part of it programmatically, which nbval runs; here
the person is the browser, so the notebook holds just what a person needs to start labelling. Every
wait is an explicit ``WebDriverWait`` on a state of the page, the server or the ledger file; the
server and its kernels are stopped in a ``finally``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "qa_calibration.jsonl"
N_ITEMS = 12
ANNOTATOR = "browser-annotator"
CLICKS = ["llmc-correct", "llmc-incorrect", "llmc-correct", "llmc-correct", "llmc-incorrect"]
SCORE = {"llmc-correct": 1.0, "llmc-incorrect": 0.0}
UNDO = "human-undo"


def _harness():
    spec = importlib.util.spec_from_file_location("_make_labeller_screenshot", REPO / "docs" /
                                                  "make_labeller_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lab_kit = _harness()


def _labelling_notebook(path: Path, items: Path, ledger: Path) -> Path:
    """A notebook a person would start labelling with: the items, the labeller, its widget."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Label a few answers"),
        nbformat.v4.new_code_cell(
            "import pandas as pd\n"
            "from llm_connect import QualityLedger\n"
            "from llm_connect.labelling import Labeller\n\n"
            f"items = pd.read_json({str(items)!r}, lines=True, dtype=False)\n"
            f"ledger = QualityLedger({str(ledger)!r})\n"
            f"labeller = Labeller(items, ledger=ledger, task_type='qa', annotator={ANNOTATOR!r}, seed=0,\n"
            "                    reference_sep='|')"
        ),
        nbformat.v4.new_code_cell("labeller.widget()"),
    ]
    nbformat.write(nb, path)
    return path


def _annotators_order(items: Path, tmp: Path, n: int) -> list[str]:
    """The first ``n`` item ids this annotator is shown, from a fresh ledger (labelling each as it comes)."""
    import pandas as pd

    from llm_connect import QualityLedger
    from llm_connect.labelling import Labeller

    frame = pd.read_json(items, lines=True, dtype=False)
    labeller = Labeller(frame, ledger=QualityLedger(tmp / "order.jsonl"), task_type="qa", annotator=ANNOTATOR,
                        seed=0, reference_sep="|")
    order = []
    for _ in range(n):
        order.append(str(labeller.current["item_id"]))
        labeller.label(1.0)
    return order


def _human_observations(ledger: Path) -> list:
    from llm_connect import QualityLedger

    if not ledger.exists():
        return []
    return [o for o in QualityLedger(ledger).read_all() if o.tags.get("grader_id") == "human"]


def _undos(ledger: Path) -> list:
    from llm_connect import QualityLedger

    if not ledger.exists():
        return []
    return [o for o in QualityLedger(ledger).read_all() if o.tags.get("grader_id") == UNDO]


def _hover(driver, selector: str) -> None:
    """Put the mouse over ``selector`` until ipyevents watches it for keys (it marks the element
    ``ipyevents-watched`` on ``mouseenter`` once its listeners are attached, which happens after the
    widget is drawn: a mouse already there before then is moved off and back)."""
    from selenium.webdriver.common.action_chains import ActionChains

    def watched(d) -> bool:
        element = lab_kit.css(selector)(d)
        if not element:
            return False
        if "ipyevents-watched" not in (element.get_attribute("class") or "").split():
            progress = lab_kit.css(".llmc-labeller .llmc-progress")(d)
            ActionChains(d).move_to_element(progress).move_to_element(element).perform()
        return "ipyevents-watched" in (element.get_attribute("class") or "").split()

    lab_kit.wait(driver, watched, 30, f"ipyevents does not watch {selector} for keys")


def _press(driver, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def _cells(driver) -> int:
    return driver.execute_script(
        "return document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length;")


def _progress(driver) -> str:
    return lab_kit.widget_text(driver, ".llmc-labeller .llmc-progress")


def _widget_state(driver) -> dict:
    """What the output area shows: the widget, or JupyterLab's placeholder or error for one."""
    return driver.execute_script(
        "const area = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');"
        "const text = area ? area.innerText : '';"
        "return {labeller: document.querySelectorAll('.llmc-labeller').length,"
        "        loading: text.includes('Loading widget'), error: text.includes('Error displaying widget')};"
    )


@pytest.fixture
def browser_prerequisites():
    if not (os.path.exists(lab_kit.CHROMIUM) and os.path.exists(lab_kit.CHROMEDRIVER)):
        message = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("selenium.webdriver")
    pytest.importorskip("jupyterlab")
    pytest.importorskip("ipywidgets")


@pytest.fixture
def browser(browser_prerequisites, open_chromium):
    """The session's Chromium (tests/views/conftest.py) as ``lab_kit.chromium`` makes one: 1400x1000, no scrollbars."""
    return open_chromium(1400, 1000, scrollbars=False)


@pytest.mark.slow
def test_five_labels_in_jupyterlab_survive_a_kernel_restart(browser, tmp_path):
    import pandas as pd

    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    items = root / "items.jsonl"
    pd.read_json(DATA, lines=True, dtype=False).head(N_ITEMS).to_json(items, orient="records", lines=True,
                                                                      force_ascii=False)
    ledger = root / "labels.jsonl"
    _labelling_notebook(root / "labelling.ipynb", items, ledger)
    order = _annotators_order(items, tmp_path, len(CLICKS) + 2)
    assert len(set(order)) == len(order)

    item_id = ".llmc-labeller .llmc-item .llmc-item-id"
    with lab_kit.JupyterLab(root, home) as lab:
        driver = browser
        try:
            lab_kit.open_notebook(driver, lab, "labelling.ipynb")
            lab_kit.run_all(driver, lab, timeout=90)
            lab_kit.wait(driver, lab_kit.css(item_id), 30, "the labelling widget did not render")
            state = _widget_state(driver)
            assert state == {"labeller": 1, "loading": False, "error": False}, state

            shown = []
            for i, button in enumerate(CLICKS):
                before = lab_kit.widget_text(driver, item_id)
                shown.append(before)
                lab_kit.click(driver, f".llmc-labeller .{button}")
                # the kernel has written the label and the widget moved on to the next item
                lab_kit.wait(driver, lambda d, b=before: lab_kit.widget_text(d, item_id) not in ("", b), 30,
                             f"the widget did not move on after click {i + 1}")
                lab_kit.wait(driver, lambda d, k=i + 1: _progress(d).startswith(f"{k} labelled"), 30,
                             f"the progress line did not count label {i + 1}")
                lab_kit.wait(driver, lambda d, k=i + 1: len(_human_observations(ledger)) == k, 30,
                             f"label {i + 1} is not in the ledger")
            assert shown == order[:5], "the widget shows the annotator's seeded order"
            assert lab_kit.widget_text(driver, item_id) == order[5]

            lab_kit.restart_kernel(driver, lab)
            lab_kit.run_all(driver, lab, timeout=90)
            lab_kit.wait(driver, lab_kit.css(item_id), 30, "the labelling widget did not render after the restart")
            lab_kit.wait(driver, lambda d: _progress(d) != "", 30, "no progress line after the restart")
            assert _widget_state(driver) == {"labeller": 1, "loading": False, "error": False}
            resumed = lab_kit.widget_text(driver, item_id)
            progress = _progress(driver)
            cells = _cells(driver)

            # keyboard: with the mouse over the item, "x" labels it incorrect and "u" takes that back
            _hover(driver, ".llmc-labeller .llmc-item")
            _press(driver, "x")
            lab_kit.wait(driver, lambda d: len(_human_observations(ledger)) == 6, 30, "the key x gave no label")
            lab_kit.wait(driver, lambda d: lab_kit.widget_text(d, item_id) == order[6], 30,
                         "the widget did not move on after the key x")
            # the item and the progress line are separate widget values, synced to the page one after the other
            lab_kit.wait(driver, lambda d: _progress(d).startswith("6 labelled"), 30,
                         "the progress line does not count the label the key x gave")
            after_key = _progress(driver)
            _press(driver, "u")
            lab_kit.wait(driver, lambda d: len(_undos(ledger)) == 1, 30, "the key u appended no undo marker")
            lab_kit.wait(driver, lambda d: lab_kit.widget_text(d, item_id) == order[5], 30,
                         "the widget did not show the undone item again after the key u")
            lab_kit.wait(driver, lambda d: _progress(d).startswith("5 labelled"), 30,
                         "the progress line still counts the undone label")
            cells_after_keys = _cells(driver)
        except BaseException:
            driver.save_screenshot(str(tmp_path / "failure.png"))
            (tmp_path / "jupyterlab.log").write_text("\n".join(lab.log), encoding="utf-8")
            raise
        finally:
            driver.get("about:blank")  # off JupyterLab's page before its server stops

    assert resumed == order[5] and resumed not in shown, (resumed, shown)
    assert progress.startswith("5 labelled"), progress
    assert after_key.startswith("6 labelled"), after_key
    assert cells_after_keys == cells == 3, "JupyterLab took a shortcut key for a notebook command"
    everything = _human_observations(ledger)
    assert len(everything) == 6
    labels, by_key = everything[:5], everything[5]
    assert [str(o.tags["item_id"]) for o in labels] == shown
    assert [o.quality_score for o in labels] == [SCORE[b] for b in CLICKS]
    assert str(by_key.tags["item_id"]) == order[5] and by_key.quality_score == 0.0
    assert by_key.tags["annotator"] == ANNOTATOR
    (undo,) = _undos(ledger)
    assert undo.tags["undoes"] == by_key.tags["label_id"] and str(undo.tags["item_id"]) == order[5]
    assert {o.tags["annotator"] for o in labels} == {ANNOTATOR}
    assert {o.task_type for o in labels} == {"qa"}
    assert all(float(o.tags["sampling_probability"]) == 1.0 for o in labels)  # "random": every item shown
    # nothing else was written: five clicked labels, the keyed label and its undo, and the holds of the items
    # shown (human-hold markers, so other annotators pass them over); no skips, no stray lines
    lines = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line.strip()]
    holds = [line for line in lines if line["tags"]["grader_id"] == "human-hold"]
    assert len(lines) - len(holds) == 7 and {h["tags"]["annotator"] for h in holds} == {ANNOTATOR}
