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
    for name in llm_connect.__all__:  # names load on first access (PEP 562): resolve them all first
        getattr(llm_connect, name)
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


def test_import_loads_only_the_core_until_a_name_is_used():
    """``import llm_connect`` loads the exception tree and the core types; pandas, the judges and the
    calibration floor load when a name that needs them is first used (benchmarks/import_time.py times it)."""
    code = (
        "import sys, json, llm_connect;"
        "before = sorted(m for m in ('pandas', 'numpy', 'llm_connect.grading', 'llm_connect.calibration',"
        " 'llm_connect.stats', 'llm_connect.views') if m in sys.modules);"
        "llm_connect.ExactMatchJudge;"
        "after = 'llm_connect.grading' in sys.modules and 'llm_connect.views' not in sys.modules;"
        "print(json.dumps([before, after, sorted(dir(llm_connect)) == sorted(set(dir(llm_connect)))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], True, True]


def test_import_creates_no_files(tmp_path):
    subprocess.run([sys.executable, "-c", "import llm_connect"], cwd=tmp_path, check=True)
    assert list(tmp_path.iterdir()) == []


# DESIGN.md: a module imports only from those above it in this list.
LAYERS = [
    "errors",
    "stats",  # statistics on arrays and frames: imports errors only (test_stats_imports_only_errors)
    "_textsafe",
    "_html",  # the one HTML/escaping helper
    "_display",  # the seam through which a lower floor reaches a view by name, at call time
    "core",
    "_runtime",
    "quality",
    "adapters",
    "testing",  # the test doubles' package, loopback server included
    "loopback",  # a shim re-exporting testing.loopback
    "batch",  # the one batch engine: grading, pipelines and calibration run on it
    "conversations",  # chat messages and agent trajectories as items (OpenAI JSON Lines, OTLP GenAI spans)
    "grading",
    "pipelines",
    "frames",
    "cards",  # judge cards, their verdicts in words and the registry beside a ledger (calibration makes them)
    "labelling",  # people label answers in the notebook (the Labeller); calibration checks judges against them
    "calibration",
    "views",  # every picture and page; matplotlib, ipywidgets and ipyevents only here
    "routing",
    "distributed",  # grading a Ray Dataset (the ray extra)
    "cli",
]


def test_readme_what_is_inside_lists_the_layers_in_order():
    """The architecture page's "What is inside" table names the layering test's modules, in its order (the
    shim aside)."""
    readme = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_ALL_MODULES = {_module_name(p) for p in PKG.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every module of the package or outside it that ``path`` imports, at any depth (functions too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            for alias in node.names:  # ``from pkg import submodule`` depends on the submodule, not on pkg
                sub = f"{name}.{alias.name}"
                found.add(sub if sub in _ALL_MODULES else name)
    return found


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}  # name -> path


def test_stats_imports_only_errors_and_no_drawing():
    """stats/ is statistics on arrays and frames: from the package it imports only errors (and itself)."""
    problems = []
    for name, path in MODULES.items():
        if not name.startswith("llm_connect.stats"):
            continue
        for dep in _imports(path):
            top = dep.split(".")[0]
            if top in ("matplotlib", "ipywidgets", "ipyevents", "IPython"):
                problems.append(f"{name} imports {dep}")
            if top == "llm_connect" and dep in MODULES and not (
                dep.startswith("llm_connect.stats") or dep == "llm_connect.errors"
            ):
                problems.append(f"{name} imports {dep}")
    assert problems == []


def test_drawing_libraries_are_imported_only_in_views():
    problems = [
        f"{name} imports {dep}"
        for name, path in MODULES.items()
        if not name.startswith("llm_connect.views")
        for dep in _imports(path)
        if dep.split(".")[0] in ("matplotlib", "ipywidgets", "ipyevents")
    ]
    assert problems == []


def test_no_import_cycles():
    """No cycle between the package's modules, counting imports inside functions and a package's
    ``__init__`` (which imports its submodules: a submodule that imports its own package closes a cycle)."""
    graph = {name: {d for d in _imports(path) if d in MODULES and d != name} for name, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_views_floor_is_reached_only_through_the_display_seam():
    """Below views, a convenience method (report.widget(), Pipeline.plot()) looks its view up by name
    through llm_connect._display at call time; every name so looked up exists in llm_connect.views."""
    import llm_connect.views as views

    wanted = set()
    for path in MODULES.values():
        text = path.read_text(encoding="utf-8")
        wanted.update(re.findall(r"\bview\(\"(\w+)\"\)", text))
    assert wanted, "no view is looked up through the seam"
    assert sorted(n for n in wanted if not hasattr(views, n)) == []
    assert set(views.__all__) >= wanted


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_calibration_is_rooms_of_one_idea():
    """calibration/ at most 6,000 lines and no module of it (or of the floors it was split into, or of views)
    over 1,000; align() reads as its named steps, and the Labeller is a façade over its rooms."""
    import inspect

    from llm_connect.calibration import align
    from llm_connect.labelling import Labeller

    assert sum(_lines(p) for p in (PKG / "calibration").rglob("*.py")) <= 6000
    big = {str(p.relative_to(PKG)): _lines(p) for floor in ("calibration", "cards", "labelling", "views")
           for p in (PKG / floor).rglob("*.py") if _lines(p) > 1000}
    assert big == {}
    assert len(inspect.getsource(align).splitlines()) <= 80
    assert len([m for m in vars(Labeller) if callable(getattr(Labeller, m))]) <= 25


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


def test_the_project_names_no_placeholder_address():
    """There is no public address for the docs yet: pyproject.toml names none rather than a placeholder."""
    import tomllib

    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    urls = meta["project"].get("urls", {})
    assert not any("example." in str(u) or "invalid" in str(u) for u in urls.values())
