"""MkDocs hooks (``hooks:`` in ``mkdocs.yml``): the parts of the site generated from the code.

- **Tutorials.** Each ``notebooks/NN_*.ipynb`` joins the site as ``tutorials/NN_*.ipynb``, read in place
  (no copy in ``docs/``) and rendered by mkdocs-jupyter from its stored outputs, never executed.
- **CLI reference.** ``docs/reference/cli.md`` holds the line ``<!-- cli-reference -->``; it is replaced by
  the ``--help`` of ``llm-connect`` and of every subcommand, walked from
  :func:`llm_connect.cli.build_parser` (argparse's own ``format_help()``, 80 columns wide), so a new
  subcommand or option appears without anyone copying it.
- **Public names.** ``docs/reference/api/llm_connect.md`` holds ``<!-- api-index -->``; it is replaced by a
  table of ``llm_connect.__all__``, each name linked to the module page that documents it (read from
  the modules' ``__all__`` in their source). A public name that no module page documents is a warning,
  so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import argparse
import ast
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "llm_connect"
NOTEBOOKS = REPO / "notebooks"
CLI_MARK = "<!-- cli-reference -->"
API_MARK = "<!-- api-index -->"
HELP_WIDTH = "80"
# the modules with a page under reference/api/, in the order the index prefers them
API_MODULES = (
    "core", "grading", "quality", "frames", "stats", "cards", "labelling", "calibration", "alignment", "views",
    "routing", "pipelines", "adapters", "testing", "errors", "distributed",
)

log = logging.getLogger("mkdocs.hooks.llm_connect")


@event_priority(100)  # before mkdocs-jupyter's on_files turns .ipynb files into pages
def on_files(files: Files, config) -> Files:
    for notebook in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        files.append(File.generated(config, f"tutorials/{notebook.name}", abs_src_path=str(notebook)))
    return files


def on_nav(nav, config, files: Files):
    # mkdocs-jupyter wraps each notebook's File in its own NotebookFile, which forwards attributes to the file
    # it wraps except those File itself defines: abs_src_path is one, and a generated file's lives on the wrapped
    # one only. Hand it over before the pages are read (on_nav runs after on_files, before reading).
    for file in files:
        inner = getattr(file, "file", None)
        if isinstance(inner, File) and file.abs_src_path is None and inner.abs_src_path is not None:
            file.abs_src_path = inner.abs_src_path
    return nav


def on_page_markdown(markdown: str, page, config, files) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_index())
    return markdown


# -- the CLI reference -----------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def _sections(parser: argparse.ArgumentParser, level: int) -> Iterator[str]:
    for _name, help_text, sub in _subcommands(parser):
        yield f"{'#' * level} `{sub.prog}`\n"
        if help_text:
            yield f"{help_text[:1].upper()}{help_text[1:]}.\n"
        yield f"```text\n{sub.format_help().rstrip()}\n```\n"
        yield from _sections(sub, level + 1)


def cli_reference() -> str:
    from llm_connect.cli import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH  # argparse wraps at the terminal's width: fix it
    try:
        parser = build_parser()
        parts = [f"```text\n{parser.format_help().rstrip()}\n```\n", *_sections(parser, 2)]
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(parts)


# -- the index of public names ---------------------------------------------------------------------


def _source(module: str) -> Path:
    package = PKG / module / "__init__.py"
    return package if package.exists() else PKG / f"{module}.py"


def _all_and_bound(path: Path) -> tuple[list[str], set[str]]:
    """A module's ``__all__`` (a literal list) and the names its top level binds (defs, imports, assignments)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported: list[str] = []
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    bound.add(target.id)
                    if target.id == "__all__" and node.value is not None:
                        exported = [str(v) for v in ast.literal_eval(node.value)]
    return exported, bound


def api_index() -> str:
    names, _ = _all_and_bound(PKG / "__init__.py")
    documented: dict[str, str] = {}
    for module in API_MODULES:
        exported, bound = _all_and_bound(_source(module))
        for name in exported:
            if name in bound:  # a lazily provided name is documented where it is defined
                documented.setdefault(name, module)
    by_module: dict[str, list[str]] = {}
    for name in names:
        module = documented.get(name)
        if module is None:
            log.warning("llm_connect.%s is public but no page of reference/api/ documents it", name)
            continue
        by_module.setdefault(module, []).append(name)
    rows = ["| module | names |", "|---|---|"]
    for module in API_MODULES:
        if module in by_module:
            links = ", ".join(f"[`{n}`][llm_connect.{module}.{n}]" for n in by_module[module])
            rows.append(f"| [`llm_connect.{module}`](./{module}.md) | {links} |")
    return "\n".join(rows) + "\n"
