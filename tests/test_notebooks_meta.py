"""The tutorial notebooks as files: in step with their generator, stripped, and checkable.

Running them is nbval's job (``pytest --nbval-lax notebooks/``); these checks are
fast and catch what nbval cannot: a notebook edited by hand instead of in
``notebooks/build_notebooks.py``, outputs committed by mistake, a checked cell
without a stored output (which nbval would compare with nothing), a notebook that
does not end with an assertion, or one that reaches for the network.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHECK = "# NBVAL_CHECK_OUTPUT"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_notebooks_{name}", NOTEBOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


build = _load("build_notebooks")
strip = _load("strip_outputs")
NAMES = list(build.NOTEBOOKS)


def _read(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def test_every_notebook_is_generated():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)
    assert NAMES[:6] == [
        "01_quickstart.ipynb",
        "02_ledger_and_frames.ipynb",
        "03_calibration_report.ipynb",
        "04_bias_diagnostics.ipynb",
        "05_compound_judges.ipynb",
        "06_routing.ipynb",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_cells_match_the_generator(name):
    committed = _read(name)
    built = build.build(name)
    got = [(c.cell_type, c.source) for c in committed.cells]
    want = [(c.cell_type, c.source) for c in built.cells]
    assert got == want, f"{name} differs from build_notebooks.py: run python notebooks/build_notebooks.py --execute"


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_stripped_except_checked_cells(name):
    nb = _read(name)
    assert nbformat.writes(strip.stripped(nb)) == nbformat.writes(nb), "run python notebooks/strip_outputs.py"
    checked = [c for c in nb.cells if strip.is_checked(c)]
    assert checked, f"{name} has no '{CHECK}' cell"
    for cell in checked:
        assert cell.outputs, f"checked cell without a stored output: {cell.source.splitlines()[1]!r}"
        assert cell.execution_count is not None
        for out in cell.outputs:
            assert out["output_type"] == "stream" and out["name"] == "stdout", "check printed text only"
            text = out["text"]
            assert not re.search(r"0x[0-9a-f]{6,}|\d+(\.\d+)?\s*(ms|s)\b.*elapsed|it/s", text), text


@pytest.mark.parametrize("name", NAMES)
def test_ends_with_an_assertion_and_stays_offline(name):
    nb = _read(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[-1].source.lstrip().startswith("assert") or "\nassert " in code[-1].source
    source = "\n".join(c.source for c in code)
    assert not re.search(r"https?://", source), "notebooks must not reach the network"
    for match in re.finditer(r"""["']([^"'\n]*\.(?:jsonl|csv|yaml))["']""", source):
        path = match.group(1)
        assert not path.startswith("/"), f"use a path relative to the notebook, not {path!r}"
    if "qa_calibration.jsonl" in source:
        assert (NOTEBOOKS / "../data/qa_calibration.jsonl").is_file()
