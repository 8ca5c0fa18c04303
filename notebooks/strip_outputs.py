"""Strip notebook outputs, except those nbval checks.

    python notebooks/strip_outputs.py [NOTEBOOK ...]          # strip in place (default: every notebook here)
    python notebooks/strip_outputs.py --check [NOTEBOOK ...]  # exit 1 if one is not stripped

A code cell whose first line is ``# NBVAL_CHECK_OUTPUT`` keeps its outputs
(``pytest --nbval-lax`` compares them with a fresh run); every other cell loses
them (and their execution counts). Widget state and run-time metadata go too,
so a committed notebook changes only when its cells or checked outputs do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

CHECK = "# NBVAL_CHECK_OUTPUT"
HERE = Path(__file__).resolve().parent
KEEP_NOTEBOOK_METADATA = ("jupytext", "kernelspec")  # jupytext: the pairing with the .py source
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def is_checked(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and cell.source.splitlines()[:1] == [CHECK]


def stripped(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` with unchecked outputs, execution counts and run-time metadata removed."""
    nb = nbformat.from_dict(nb)
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in KEEP_NOTEBOOK_METADATA}
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    for cell in nb.cells:
        cell.metadata = {}
        if cell.cell_type != "code":
            continue
        if not is_checked(cell):
            cell.outputs = []
            cell.execution_count = None
        # a checked cell keeps its count: nbval refuses stored outputs of a cell that never ran
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="only report notebooks that are not stripped")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(HERE.glob("*.ipynb"))
    dirty = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        clean = stripped(nb)
        if args.check:
            if nbformat.writes(clean) != nbformat.writes(nb):
                dirty.append(path)
            continue
        nbformat.write(clean, path)
    for path in dirty:
        print(f"{path}: has outputs outside '{CHECK}' cells; run notebooks/strip_outputs.py", file=sys.stderr)
    return 1 if dirty else 0


if __name__ == "__main__":
    raise SystemExit(main())
