"""README.md works as written and stays a README: it fits on a screen, its two commands are the ones CI runs,
its links resolve, and each of its code blocks runs on its own (its imports included), in its own test.

The grading snippet's embedded LLM judge must score its own examples as written (no extra arguments), not leave
them unscored, and the snippet must print what the README shows it printing. The machinery (how a block runs, how
an ``output`` block is compared, how a shell line is parsed) is ``tests/test_docs.py``'s.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_docs import REPO, SHELL, Block, block_params, check_cli_block, check_python_block, code_blocks

README = REPO / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = code_blocks(README)
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL_BLOCKS = [b for b in BLOCKS if b.language in SHELL]
GRADING = next((b for b in PYTHON if "LLMJudge(local_adapter()" in b.code), None)


def test_the_readme_fits_on_a_screen():
    assert len(TEXT.encode("utf-8")) <= 12 * 1024, "move the detail into docs/ and link to it"


def test_the_readme_says_what_it_is_and_links_into_the_docs():
    headings = re.findall(r"^## (.+)$", TEXT, flags=re.M)
    assert headings == ["Two commands", "Grading in five lines", "The quality ledger", "One picture", "Documentation"]
    assert re.search(r"!\[[^\]]*\]\(docs/\w[\w-]*\.png\)", TEXT), "one picture"
    docs_links = set(re.findall(r"\]\((docs/[^)#\s]+)", TEXT))
    for page in ("docs/index.md", "docs/getting-started.md", "docs/libraries.md", "docs/architecture.md",
                 "docs/reference/cli.md", "docs/reference/api/llm_connect.md", "docs/contributing.md"):
        assert page in docs_links, f"the README does not link to {page}"


def test_the_readme_links_resolve():
    targets = re.findall(r"\]\(([^)\s]+)\)", TEXT)
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local
    missing = [t for t in local if not (REPO / t).exists()]
    assert not missing, missing


def test_the_two_commands_are_the_ones_ci_runs():
    demo, tests = (b.code.strip() for b in SHELL_BLOCKS[:2])
    assert demo.endswith("&& llm-connect demo")
    assert tests.endswith("&& python -m pytest")
    setup, _, install_and_test = tests.partition(" && . .venv/bin/activate && ")
    assert setup == "python3 -m venv .venv" and install_and_test
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert "python3 -m venv .venv" in ci and ". .venv/bin/activate" in ci
    assert install_and_test in ci, ".ci/run must run the README's test command"
    assert demo.partition(" && . .venv/bin/activate && ")[0] == setup


def test_the_readme_has_examples():
    assert len(PYTHON) >= 2
    assert GRADING is not None, "the grading snippet uses the embedded judge, LLMJudge(local_adapter(), ...)"
    assert GRADING.expected, "the grading snippet shows what it prints"


@pytest.mark.parametrize("block", block_params(BLOCKS, "python"))
def test_readme_block_runs(block: Block, tmp_path: Path):
    proc = check_python_block(block, tmp_path)
    if block is GRADING:
        rows = [line.split() for line in proc.stdout.splitlines()]
        llm = [row for row in rows if row[0] == "llm-judge"]
        assert len(llm) == 2, proc.stdout  # one line per example
        for row in llm:  # grader, repr of the answer..., status, score
            assert row[-2] == "scored", f"the embedded judge left an example unscored: {row}"
            assert 0.0 <= float(row[-1]) <= 1.0
        lexical = [row for row in rows if row[0] != "llm-judge"]
        assert [float(row[-1]) for row in lexical] == [1.0, 0.0], "the lexical judge gets both examples right"


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.id) for b in SHELL_BLOCKS if re.search(r"(^|\s)llm-connect\s", b.code)]
)
def test_readme_commands_parse(block: Block):
    check_cli_block(block)
