"""Write the tutorial notebooks (``NN_name.ipynb``) from their sources (``NN_name.py``), reproducibly.

    python notebooks/sync_notebooks.py                        # write every notebook from its .py
    python notebooks/sync_notebooks.py --execute [NAME ...]   # ... then run them, keep only the checked outputs
    python notebooks/sync_notebooks.py --check                # exit 1 when a notebook is out of step with its .py

The ``.py`` files are the source: jupytext percent format (``# %%`` starts a code
cell, ``# %% [markdown]`` a markdown one), paired with the notebooks
(``formats: ipynb,py:percent``), so JupyterLab with jupytext saves both. Edit a
``.py`` file, then run this script. A written notebook gets stable cell ids, and
keeps the stored outputs of its checked cells (first line ``# NBVAL_CHECK_OUTPUT``)
whose source is unchanged; every other output is stripped (``strip_outputs.py``).
A checked cell that changed has no output until ``--execute`` runs the notebook
(``jupyter nbconvert --execute --inplace``, cwd = this folder, as nbval uses).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
FORMATS = "ipynb,py:percent"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _strip_outputs():
    spec = importlib.util.spec_from_file_location("_notebooks_strip_outputs", HERE / "strip_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


strip = _strip_outputs()


def sources() -> list[Path]:
    """The notebook sources: ``NN_name.py`` in this folder."""
    return sorted(HERE.glob("[0-9][0-9]_*.py"))


def build(source: Path) -> nbformat.NotebookNode:
    """The notebook for ``source``, with the checked outputs its ``.ipynb`` already stores for unchanged cells."""
    nb = jupytext.read(source)
    target = source.with_suffix(".ipynb")
    stored = {}
    if target.exists():
        stored = {c.source: c for c in nbformat.read(target, as_version=4).cells if strip.is_checked(c)}
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.stem[:2]}-{i:02d}"  # stable ids: rebuilding gives the same file
        if cell.source in stored and strip.is_checked(cell):
            cell.outputs = stored[cell.source].outputs
            cell.execution_count = stored[cell.source].execution_count
    nb.metadata = {"jupytext": {"formats": FORMATS}, "kernelspec": nb.metadata.get("kernelspec", KERNELSPEC)}
    nb = strip.stripped(nb)
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def stale(source: Path) -> bool:
    """Whether the notebook differs from what :func:`write` would write (missing counts too)."""
    target = source.with_suffix(".ipynb")
    text = nbformat.writes(build(source))
    text += "" if text.endswith("\n") else "\n"  # as nbformat.write ends the file
    return not target.exists() or target.read_text(encoding="utf-8") != text


def write(source: Path) -> Path:
    target = source.with_suffix(".ipynb")
    nbformat.write(build(source), target)
    return target


def execute(notebook: Path) -> None:
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--ExecutePreprocessor.timeout=600", str(notebook)], check=True, cwd=HERE)
    subprocess.run([sys.executable, str(HERE / "strip_outputs.py"), str(notebook)], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebooks to write, as NN_name, .py or .ipynb (default: all)")
    parser.add_argument("--execute", action="store_true", help="run them and keep only the checked outputs")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook is out of step")
    args = parser.parse_args(argv)
    chosen = [HERE / f"{Path(name).stem}.py" for name in args.names] or sources()
    if args.check:
        out_of_step = [s for s in chosen if stale(s)]
        for s in out_of_step:
            print(f"{s.with_suffix('.ipynb').name} is out of step with {s.name}: run {Path(__file__).name}",
                  file=sys.stderr)
        return 1 if out_of_step else 0
    for source in chosen:
        notebook = write(source)
        print("wrote", notebook.relative_to(HERE.parent))
        if args.execute:
            execute(notebook)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
