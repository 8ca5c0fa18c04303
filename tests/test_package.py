"""The public surface: __all__ in step, light imports, layering, py.typed, ruff."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import llm_connect

PKG = Path(llm_connect.__file__).resolve().parent


def test_all_is_in_step_with_the_public_names():
    public = {
        name
        for name, value in vars(llm_connect).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(llm_connect.__all__) == sorted(public)
    assert len(set(llm_connect.__all__)) == len(llm_connect.__all__)
    for name in llm_connect.__all__:
        assert getattr(llm_connect, name) is not None


def test_import_is_light():
    code = (
        "import sys, json, llm_connect, llm_connect.grading, llm_connect.quality, llm_connect.testing;"
        "heavy = ['matplotlib', 'ipywidgets', 'torch', 'llama_cpp', 'sentence_transformers',"
        " 'aiohttp', 'scipy', 'sklearn', 'ray', 'duckdb'];"
        "print(json.dumps([m for m in heavy if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_import_creates_no_files(tmp_path):
    subprocess.run([sys.executable, "-c", "import llm_connect"], cwd=tmp_path, check=True)
    assert list(tmp_path.iterdir()) == []


# DESIGN.md: a module imports only from those above it in this list.
LAYERS = [
    "errors",
    "_textsafe",
    "core",
    "_runtime",
    "quality",
    "adapters",
    "testing",  # the test doubles' package, loopback server included
    "loopback",  # a shim re-exporting testing.loopback
    "batch",  # the one batch engine: grading, pipelines and calibration run on it
    "grading",
    "pipelines",
    "frames",
    "calibration",
    "routing",
    "distributed",  # grading a Ray Dataset (the ray extra)
    "cli",
]


def test_readme_what_is_inside_lists_the_layers_in_order():
    """README's "What is inside" table names the layering test's modules, in its order (the shim aside)."""
    readme = (PKG.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("## What is inside", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `llm_connect\.(\w+)` \|", table, flags=re.M)
    assert listed == [layer for layer in LAYERS if layer != "loopback"]
    assert "`llm_connect.loopback`" in table  # the shim is named in the testing row


def _layer_of(module_path: Path) -> str:
    rel = module_path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    depth = len(path.relative_to(PKG).parts) - 1
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.startswith("llm_connect."):
                found.add(node.module.split(".")[1])
            elif node.level > depth and node.module:
                found.add(node.module.split(".")[0])
            elif node.level > depth and not node.module:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("llm_connect."):
                    found.add(alias.name.split(".")[1])
    return found


def test_modules_import_only_from_layers_above_them():
    problems = []
    for path in PKG.rglob("*.py"):
        if path.name == "__init__.py" and path.parent == PKG:
            continue
        layer = _layer_of(path)
        if layer not in LAYERS:
            problems.append(f"{path.relative_to(PKG)}: layer {layer!r} is not in the list")
            continue
        rank = LAYERS.index(layer)
        for dep in _imported_layers(path):
            if dep in LAYERS and LAYERS.index(dep) > rank:
                problems.append(f"{path.relative_to(PKG)} ({layer}) imports {dep}, which sits below it")
    assert problems == []


def test_py_typed_is_shipped():
    assert (PKG / "py.typed").exists()


def test_mypy_passes():
    """The package type-checks (configuration in pyproject.toml's [tool.mypy])."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install 'llm-connect[dev]')")
    repo = PKG.parent
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(repo / ".mypy_cache")],
        cwd=repo, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install 'llm-connect[dev]')")
    repo = PKG.parent
    out = subprocess.run(
        [ruff, "check", "llm_connect", "tests", "benchmarks"], cwd=repo, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
