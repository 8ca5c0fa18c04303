"""The tests mirror the package: each test file lives where its subject's code lives (docs/contributing.md).

- a test of a subpackage ``llm_connect/<pkg>/`` is ``tests/<pkg>/test_*.py``;
- a test of a top-level module ``llm_connect/<module>.py`` (or ``_<module>.py``) is ``tests/test_<module>.py`` or
  ``tests/test_<module>_<aspect>.py``;
- the checks of the whole package (its public surface, docs, README, vocabulary, docstrings, types, notebooks, this
  layout) are the few files of :data:`PACKAGE_WIDE`, at the top of ``tests/``;
- a file is named after its subject, never after the review round or issue that brought its tests;
- no test file is over 1,200 lines (split it by sub-subject: ``test_selective.py``, ``test_selective_paths.py``);
- basenames are unique across ``tests/`` and no test directory is a package: pytest imports each test module under
  its basename, with its directory on ``sys.path`` (how ``from strategies import ...`` and
  ``from test_pipelines import ...`` work).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import llm_connect

TESTS = Path(__file__).resolve().parent
PKG = Path(llm_connect.__file__).resolve().parent
MAX_LINES = 1200
PACKAGE_WIDE = {
    "test_package.py",
    "test_layout.py",
    "test_docs.py",
    "test_readme.py",
    "test_vocabulary.py",
    "test_docstrings.py",
    "test_typing.py",
    "test_notebooks_meta.py",
}
# what names a review round rather than a subject: test_reliability_round2.py, test_issue25.py, ...
ROUND = re.compile(r"(^|_)(round\d*|reliability|issue\d*|hardening|review|followups?|fixes)(_|\.py$)")
# the helpers beside the tests (imported by name, never collected)
HELPERS = {"conftest.py", "strategies.py", "interruptible.py"}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _subpackages() -> set[str]:
    return {p.parent.name for p in PKG.glob("*/__init__.py")}


def _top_level_modules() -> set[str]:
    return {p.stem.lstrip("_") for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__")}


def _misplaced(path: Path) -> str | None:
    """Why ``path`` is not where the layout puts it (None when it is)."""
    rel = path.relative_to(TESTS)
    if len(rel.parts) > 2:
        return f"{rel}: one directory per subpackage, no deeper (tests/<pkg>/test_*.py)"
    if len(rel.parts) == 2:
        if rel.parts[0] not in _subpackages():
            return f"{rel}: tests/{rel.parts[0]}/ mirrors no subpackage llm_connect/{rel.parts[0]}/"
        return None
    if rel.name in PACKAGE_WIDE:
        return None
    subject = rel.stem.removeprefix("test_")
    if any(subject == m or subject.startswith(f"{m}_") for m in _top_level_modules()):
        return None
    owner = next((p for p in sorted(_subpackages()) if subject == p or subject.startswith(f"{p}_")), None)
    where = f"tests/{owner}/" if owner else "tests/<subpackage>/ of the code it tests"
    return (f"{rel}: at the top of tests/ only a top-level module's tests (test_<module>[_<aspect>].py) and the "
            f"package-wide checks; move it to {where}")


def test_every_test_file_lives_in_the_directory_of_its_subject():
    misplaced = [why for path in _test_files() if (why := _misplaced(path))]
    assert not misplaced, "\n".join(misplaced)


def test_the_rule_places_a_file_by_its_subject():
    assert _misplaced(TESTS / "grading" / "test_selective.py") is None
    assert _misplaced(TESTS / "test_runner.py") is None and _misplaced(TESTS / "test_core_budget.py") is None
    assert _misplaced(TESTS / "test_options.py") is None  # llm_connect/_options.py
    assert "move it to tests/grading/" in _misplaced(TESTS / "test_grading_contract.py")
    assert "mirrors no subpackage" in _misplaced(TESTS / "widgets" / "test_x.py")
    assert "no deeper" in _misplaced(TESTS / "stats" / "bt" / "test_x.py")
    assert "tests/<subpackage>/" in _misplaced(TESTS / "test_misc.py")


def test_no_file_is_named_after_a_review_round():
    named = [str(p.relative_to(TESTS)) for p in _test_files() if ROUND.search(p.name)]
    assert not named, f"name these after their subject and put their tests in its files: {named}"
    assert ROUND.search("test_reliability_round2.py") and ROUND.search("test_issue25.py")
    assert not ROUND.search("test_regression.py") and not ROUND.search("test_calibration_report.py")


def test_no_test_file_is_over_1200_lines():
    long = {str(p.relative_to(TESTS)): n for p in TESTS.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these by sub-subject (at most {MAX_LINES} lines a file): {long}"


def test_test_modules_have_unique_names_and_no_package():
    names = Counter(p.name for p in _test_files())
    assert not [n for n, k in names.items() if k > 1], "pytest imports a test module by its basename"
    assert not list(TESTS.rglob("__init__.py")), "tests/ is no package (ppi-python installs a package named tests)"
    helpers = {p.name for p in TESTS.rglob("*.py") if not p.name.startswith("test_")}
    assert helpers <= HELPERS, f"helpers live at the top of tests/ (on sys.path): {helpers - HELPERS}"
    nested = [str(p.relative_to(TESTS)) for p in TESTS.glob("*/*.py")
              if not p.name.startswith("test_") and p.name != "conftest.py"]
    assert not nested, f"a subdirectory holds tests and its conftest.py only: {nested}"


def test_every_test_file_named_in_the_code_and_docs_exists():
    """A docstring, guide or notebook that sends a reader to ``tests/<...>.py`` for the evidence names a file that
    is there (files moved when the tests came to mirror the package; the references moved with them)."""
    repo = TESTS.parent
    texts = [*PKG.rglob("*.py"), *(repo / "docs").glob("*.md"), *(repo / "notebooks").glob("*.py"),
             repo / "README.md", *(repo / "benchmarks").glob("*.py")]
    named = {(path.relative_to(repo).as_posix(), ref)
             for path in texts for ref in re.findall(r"\btests/[\w/]+\.py\b", path.read_text(encoding="utf-8"))}
    assert named, "no test file is named anywhere: the pattern is wrong"
    assert sorted(f"{where}: {ref}" for where, ref in named if not (repo / ref).is_file()) == []
