"""The documentation works as written: the site builds strictly, and every code block in docs/ does what it shows.

- ``mkdocs build --strict`` (the site of ``mkdocs.yml``, into a temporary directory) passes with no warning, and
  its generated parts are there: a CLI reference section for every subcommand of ``llm-connect``, a page per
  API module, a page per tutorial notebook.
- Every ``python`` block of every page under ``docs/`` runs on its own (its imports included) in a fresh
  interpreter, each block its own test (ids name the file and the block's number among the file's code blocks).
  The working directory is a scratch directory that holds the repository's ``data/`` and ``notebooks/``, as a
  reader in a clone has them. A block fenced ``output`` after a python block is what that block must print.
  Using a deprecated keyword or function from a block is an error. Blocks that load the embedded models are
  marked ``local_models`` (and ``slow``).
- Every ``llm-connect ...`` command of a ``bash`` block is parsed by the command's own parser (not run: the
  commands call models and servers), so an example with an option that no longer exists fails. Other shell
  lines, and ``text`` blocks, are shown, not run.

README.md's blocks run the same way in ``tests/test_readme.py``, which imports the helpers below.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
LOCAL_MODELS = re.compile(r"\b(LlamaCppAdapter|SentenceTransformerEmbedder)\(")
SHELL = {"bash", "sh", "shell", "console"}
OUTPUT = "output"


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it is, its language, its text, and (python) the output block after it."""

    path: str  # relative to the repository, with forward slashes
    number: int  # 1-based, among the file's code blocks (``output`` blocks are not counted)
    language: str
    code: str
    expected: str | None = None

    @property
    def id(self) -> str:
        return f"{self.path}#{self.number}"


def code_blocks(path: Path) -> list[Block]:
    """The code blocks of a Markdown file, in order; an ``output`` block is attached to the python block before it."""
    rel = path.relative_to(REPO).as_posix()
    blocks: list[Block] = []
    for match in FENCE.finditer(path.read_text(encoding="utf-8")):
        language = (match.group("info").split() or [""])[0].lower()
        code = textwrap.dedent(match.group("body"))
        if language == OUTPUT:
            previous = blocks[-1] if blocks else None
            if previous is None or previous.language != "python" or previous.expected is not None:
                raise AssertionError(f"{rel}: an `output` block must follow a python block (after {previous})")
            blocks[-1] = Block(previous.path, previous.number, previous.language, previous.code, code)
            continue
        blocks.append(Block(rel, len(blocks) + 1, language, code))
    return blocks


def block_params(blocks: list[Block], language: str) -> list:
    params = []
    for block in blocks:
        if block.language != language:
            continue
        marks = [pytest.mark.local_models, pytest.mark.slow] if LOCAL_MODELS.search(block.code) else []
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


def run_python_block(block: Block, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Runs the block alone in a fresh interpreter, in ``workdir`` (which gets ``data/`` and ``notebooks/``)."""
    for name in ("data", "notebooks"):
        link = workdir / name
        if not link.exists():
            link.symlink_to(REPO / name, target_is_directory=True)
    env = {**os.environ, "MPLBACKEND": "Agg", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:__main__", "-c", block.code],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
    )


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def check_python_block(block: Block, workdir: Path) -> subprocess.CompletedProcess[str]:
    proc = run_python_block(block, workdir)
    assert proc.returncode == 0, f"{block.id} failed, as written:\n{block.code}\n{proc.stderr[-4000:]}"
    if block.expected is not None:
        assert _lines(proc.stdout) == _lines(block.expected), (
            f"{block.id} printed\n{proc.stdout}\nwhere its output block shows\n{block.expected}"
        )
    return proc


def cli_commands(block: Block) -> list[list[str]]:
    """The ``llm-connect`` commands of a shell block, as argument lists (continuations joined, comments dropped)."""
    commands: list[list[str]] = []
    for line in block.code.replace("\\\n", " ").splitlines():
        # quotes kept while splitting, so a quoted '|' is an argument, not a pipe; removed after
        lexer = shlex.shlex(line, posix=False, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        command: list[str] = []
        for token in [*lexer, "&&"]:
            if token in {"&&", "||", ";", "|", "&"}:
                while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", command[0]):  # VAR=value llm-connect ...
                    command.pop(0)
                if command and command[0] == "llm-connect":
                    commands.append(command[1:])
                command = []
            else:
                command.append("".join(shlex.split(token)))
    return commands


def check_cli_block(block: Block) -> None:
    from llm_connect.cli import build_parser

    commands = cli_commands(block)
    assert commands, f"{block.id} names no llm-connect command"
    for argv in commands:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(argv)
        except SystemExit as exc:
            command = f"llm-connect {shlex.join(argv)}"
            raise AssertionError(f"{block.id}: `{command}` does not parse: {err.getvalue()}") from exc


# -- the pages under docs/ ---------------------------------------------------------------------------

PAGES = sorted(DOCS.rglob("*.md"))
DOC_BLOCKS = [block for page in PAGES for block in code_blocks(page)]
CLI_BLOCKS = [b for b in DOC_BLOCKS if b.language in SHELL and re.search(r"(^|\s)llm-connect\s", b.code)]


def test_the_docs_have_examples():
    assert len([b for b in DOC_BLOCKS if b.language == "python"]) >= 8
    assert len(CLI_BLOCKS) >= 8


def test_every_block_names_its_language():
    unnamed = [b.id for b in DOC_BLOCKS if not b.language]
    assert not unnamed, f"fence these blocks with their language (python, bash, text, ...): {unnamed}"


@pytest.mark.parametrize("block", block_params(DOC_BLOCKS, "python"))
def test_python_block_runs(block: Block, tmp_path: Path):
    check_python_block(block, tmp_path)


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id) for b in CLI_BLOCKS])
def test_shell_block_commands_parse(block: Block):
    check_cli_block(block)


def test_cli_commands_are_split_as_a_shell_would():
    block = Block("x.md", 1, "bash", "python -m venv v && . v/bin/activate && llm-connect demo   # the job\n"
                  "llm-connect calibrate a.csv --out o \\\n    --reference-sep '|' | head\nllm-connect --help\n")
    assert cli_commands(block) == [["demo"], ["calibrate", "a.csv", "--out", "o", "--reference-sep", "|"], ["--help"]]


# -- the site ------------------------------------------------------------------------------------------


def _nav_entries() -> list[str]:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.(?:md|ipynb))\s*$", nav, flags=re.M)


def test_every_page_and_notebook_is_in_the_nav():
    entries = set(_nav_entries())
    pages = {p.relative_to(DOCS).as_posix() for p in PAGES}
    notebooks = {f"tutorials/{p.name}" for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert pages | notebooks == entries, {"not in the nav": sorted(pages | notebooks - entries),
                                          "in the nav, missing": sorted(entries - pages - notebooks)}


def _subcommand_progs() -> list[str]:
    import argparse

    from llm_connect.cli import build_parser

    progs: list[str] = []

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    progs.append(sub.prog)
                    walk(sub)

    walk(build_parser())
    return progs


@pytest.mark.slow  # 15-40 s on 2 cores: mkdocstrings reads the package, nbconvert renders nine notebooks
def test_the_site_builds_strictly(tmp_path: Path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)

    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    progs = _subcommand_progs()
    assert {"llm-connect demo", "llm-connect calibrate", "llm-connect ledger stats"} <= set(progs)
    for prog in progs:
        assert f"<code>{prog}</code>" in cli, f"the CLI reference has no section for {prog}"
    assert "usage: llm-connect calibrate" in cli

    api = site / "reference" / "api"
    for module in ("grading", "quality", "frames", "stats", "cards", "labelling", "calibration", "views", "routing",
                   "pipelines", "adapters", "testing", "errors", "distributed"):
        page = (api / f"{module}.html").read_text(encoding="utf-8")
        assert f'id="llm_connect.{module}' in page, f"no API entries on the {module} page"
    # the docstrings' numpydoc sections are read as such: parameters in a table, See Also entries as links
    frames = (api / "frames.html").read_text(encoding="utf-8")
    ledger_frame = frames.split('id="llm_connect.frames.ledger_frame"', 1)[1].split('id="llm_connect.frames.', 1)[0]
    assert "Parameters:" in ledger_frame and "<code>ledger_or_path</code>" in ledger_frame
    assert 'class="see-also"' in ledger_frame and 'href="#llm_connect.frames.observations_from_frame"' in ledger_frame
    assert "Parameters\n----------" not in frames  # no section left as plain text
    index = (api / "llm_connect.html").read_text(encoding="utf-8")
    assert 'href="grading.html#llm_connect.grading.judge_many"' in index
    # the names that moved out of calibration are indexed where they are defined
    assert 'href="cards.html#llm_connect.cards.JudgeCard"' in index
    assert 'href="labelling.html#llm_connect.labelling.Labeller"' in index

    for notebook in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"):
        assert (site / "tutorials" / notebook.with_suffix(".html").name).exists(), notebook.name
