"""The public surface: curated __all__ lists, light imports, layering, py.typed, ruff."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
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


# -- the curated public surface (as httpx's tests/test_exported_members.py guards its own) ----------------

#: The public packages and modules: each exports, in ``__all__``, what it defines and nothing else.
PUBLIC = (
    "llm_connect",
    "llm_connect.grading",
    "llm_connect.cards",
    "llm_connect.labelling",
    "llm_connect.calibration",
    "llm_connect.alignment",
    "llm_connect.stats",
    "llm_connect.views",
    "llm_connect.quality",
    "llm_connect.adapters",
    "llm_connect.pipelines",
    "llm_connect.testing",
    "llm_connect.conversations",
)
#: Where every floor may take an exported name from besides itself: the one exception tree.
SHARED = ("llm_connect.errors",)


def _loaded(name: str) -> types.ModuleType:
    module = importlib.import_module(name)
    for exported in module.__all__:  # names load on first access (PEP 562): resolve them all first
        getattr(module, exported)
    return module


def _inside(module: str, home: str) -> bool:
    return module == home or module.startswith(home + ".")


def _import_sources(module: types.ModuleType) -> dict[str, str]:
    """Each name the module's source imports (at any depth, ``TYPE_CHECKING`` blocks too) -> the absolute
    name of the module it comes from."""
    path = Path(module.__file__)
    package = module.__name__ if path.name == "__init__.py" else module.__name__.rpartition(".")[0]
    sources: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                sources[alias.asname or alias.name] = source
    return sources


@pytest.mark.parametrize("name", PUBLIC)
def test_every_exported_name_exists_and_is_defined_by_its_package(name):
    """``__all__`` names each public name once, none private, each defined in the package that exports it
    (a class's or function's ``__module__``; a constant's import in the source): calibration exports no
    plot of views nor statistic of stats, the top level nothing from outside llm_connect."""
    module = _loaded(name)
    exported = list(module.__all__)
    assert len(set(exported)) == len(exported)
    assert [n for n in exported if n.startswith("_")] == []
    assert [n for n in exported if not hasattr(module, n)] == []
    home = "llm_connect" if name == "llm_connect" else name
    sources = _import_sources(module)
    foreign = []
    for exported_name in exported:
        value = getattr(module, exported_name)
        if isinstance(value, types.ModuleType):
            where = value.__name__
        elif inspect.isclass(value) or inspect.isroutine(value):
            where = value.__module__
        else:  # a constant: where the package's source takes it from (defined here when not imported)
            where = sources.get(exported_name, name)
        if not (_inside(where, home) or where in SHARED):
            foreign.append(f"{exported_name} (from {where})")
    assert foreign == []


@pytest.mark.parametrize("name", PUBLIC)
def test_no_public_name_is_left_out_of_all(name):
    """What a package holds under a public name is in its ``__all__`` (helpers it imports are private:
    ``_TYPE_CHECKING``, ``_Any``); a module's own classes and functions are."""
    module = _loaded(name)
    is_package = hasattr(module, "__path__")
    missing = [
        key
        for key, value in vars(module).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key not in module.__all__
        and (is_package or ((inspect.isclass(value) or inspect.isroutine(value)) and value.__module__ == name))
    ]
    assert missing == []


def test_dir_of_the_package_is_its_public_names_and_dunders():
    extra = set(dir(llm_connect)) - set(llm_connect.__all__)
    assert set(llm_connect.__all__) <= set(dir(llm_connect))
    assert sorted(n for n in extra if not (n.startswith("__") and n.endswith("__"))) == []
    assert "__version__" in extra


def test_calibration_exports_nothing_of_the_floors_beside_it():
    """Plots are imported from llm_connect.views, statistics from llm_connect.stats, judge cards from
    llm_connect.cards, the Labeller from llm_connect.labelling and align() from llm_connect.alignment: not from
    calibration, not even by attribute (no lazy forwarding)."""
    import llm_connect.alignment as alignment
    import llm_connect.calibration as calibration
    import llm_connect.cards as cards
    import llm_connect.labelling as labelling
    import llm_connect.stats as stats
    import llm_connect.views as views

    beside = (*stats.__all__, *views.__all__, *cards.__all__, *labelling.__all__, *alignment.__all__)
    borrowed = [n for n in beside if hasattr(calibration, n)]
    assert borrowed == []


def test_removed_names_are_gone():
    """Issue 35: an unreleased package carries no compatibility layer and no near-synonym."""
    import llm_connect.calibration as calibration
    import llm_connect.grading as grading
    from llm_connect.pipelines import Pipeline

    assert importlib.util.find_spec("llm_connect.loopback") is None  # python -m llm_connect.testing.loopback
    gone = {
        llm_connect: ("from_config", "is_stale", "CascadeJudge"),
        calibration: ("score_judges", "judge_items", "battles", "judge_verdict", "plot_leaderboard", "leaderboard"),
        grading: ("CascadeJudge", "CascadeSummary", "run_rows"),
    }
    assert [f"{m.__name__}.{n}" for m, names in gone.items() for n in names if hasattr(m, n)] == []
    assert not hasattr(Pipeline, "draw") and callable(Pipeline.plot)


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
    "_docstrings",  # the shared run-option texts, spliced into docstrings (imports nothing of the package)
    "stats",  # statistics on arrays and frames: imports errors only (test_stats_imports_only_errors)
    "_textsafe",
    "_html",  # the one HTML/escaping helper
    "_display",  # the seam through which a lower floor reaches a view by name, at call time
    "core",
    "_runtime",
    "items",  # what an item holds and which item a row is (ids, keys, the turn in the key); imports errors only
    "columns",  # the column tuples of every result frame; imports nothing
    "quality",
    "adapters",
    "_options",  # the one check of the shared run options (concurrency, budget, batch, ...)
    "testing",  # the test doubles' package, loopback server included
    "runner",  # items in, one row per item out (RunPlan): grading, pipelines and calibration run on it
    "conversations",  # chat messages and agent trajectories as items (OpenAI JSON Lines, OTLP GenAI spans)
    "grading",
    "plugins",  # adapters, embedders and judges by name (built-ins, entry points): the CLI and from_config read it
    "pipelines",
    "frames",
    "cards",  # judge cards, their verdicts in words and the registry beside a ledger (calibration makes them)
    "labelling",  # people label answers in the notebook (the Labeller); calibration checks judges against them
    "calibration",
    "alignment",  # align(): a judge improved from people's labels, proven on held-out ones (runs calibration's cards)
    "views",  # every picture and page; matplotlib, ipywidgets and ipyevents only here
    "routing",
    "distributed",  # grading a Ray Dataset (the ray extra)
    "cli",
]


def test_readme_what_is_inside_lists_the_layers_in_order():
    """The architecture page's "What is inside" table names the layering test's modules, in its order."""
    readme = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = readme.split("## What is inside", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `llm_connect\.(\w+)` \|", table, flags=re.M)
    assert listed == LAYERS


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


def _floor(module: str) -> str:
    """The floor of a module: its subpackage or top-level module (``stats``, ``batch``, ``_runtime``), or ``""``
    for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_private_name_is_imported_across_subpackages():
    """A floor reaches another only through public names: no ``from X import _name`` (a private function, class,
    constant or module) where X sits in another subpackage or top-level module than the importer. Within one
    subpackage private names are shared freely; ``__dunder__`` names are not private."""
    problems = []
    for name, path in MODULES.items():
        here = name.split(".")
        package = here if path.name == "__init__.py" else here[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = ".".join([*package[: len(package) - (node.level - 1)], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            if base != "llm_connect" and not base.startswith("llm_connect."):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not (alias.name.startswith("__") and alias.name.endswith("__"))
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                if private and _floor(target) != _floor(name):
                    problems.append(f"{name} (line {node.lineno}) imports {alias.name} from {base}")
    assert problems == []


MAX_MODULE_LINES = 1000
MAX_CALIBRATION_LINES = 6000


def test_rooms_of_one_idea_are_small():
    """No module of the package is over 1,000 lines (a larger one holds more than one idea: split it by idea into
    private modules beside it), and the calibration floor stays under 6,000 lines in all."""
    sizes = {path.relative_to(PKG).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PKG.rglob("*.py")}
    assert sorted(f"{name}: {n} lines" for name, n in sizes.items() if n > MAX_MODULE_LINES) == []
    calibration = sum(n for name, n in sizes.items() if name.startswith("calibration/"))
    assert calibration <= MAX_CALIBRATION_LINES, f"calibration/ holds {calibration} lines"


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


def test_align_and_the_labeller_are_facades():
    """align() reads as its named steps (llm_connect.alignment: _align_steps.py), and the Labeller is a façade over
    its rooms (llm_connect.labelling: items, the ledger it writes, the queue)."""
    from llm_connect.alignment import align
    from llm_connect.labelling import Labeller

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
