"""Shared fixtures, and the markers that split the fast loop from the full suite.

Tests use real fakes from ``llm_connect.testing``, never mocks of our own code. Fixtures only:
builders and Hypothesis strategies live in ``strategies.py`` (``from strategies import ...``) and
the child processes a test stops with Ctrl-C in ``interruptible.py``, never imported from here. Both stay at
the top of ``tests/``, the directory of this file, which pytest puts on ``sys.path``, so a test in any
subdirectory imports them by name; ``tests/`` mirrors the package (``tests/<subpackage>/``, see
``tests/test_layout.py``).

The fast loop is ``python -m pytest -m "not slow"``; the full suite is ``python -m pytest``.
:func:`pytest_collection_modifyitems` marks, at collection, so that nobody has to remember to:

- ``ray``: every test of ``distributed/test_distributed.py``, and any test whose code or fixtures import or
  start Ray (``import ray``, ``ray.init(``, ``importorskip("ray")``);
- ``browser``: every test of ``views/test_labeller_browser.py``, and any test whose code or fixtures
  drive a browser (``selenium``, ``webdriver``);
- ``local_models``: any test whose code or fixtures build a bundled model (``LlamaCppAdapter()``,
  ``SentenceTransformerEmbedder()``, keywords allowed, no path), beside those marked by hand;
- ``notebooks``: every cell nbval runs from ``notebooks/``;

and adds ``slow`` to all of these. Run in one process (``-n0``), the Ray tests run last, together, on one
cluster for the session (:func:`ray_session`). Code is read as tokens, without strings, docstrings and
comments, so a test that only names Ray or a model in a message is not caught. A test that takes more
than about five seconds for another reason carries ``@pytest.mark.slow`` itself.

The embedded LLM's converted-model cache (``LLM_CONNECT_CACHE_DIR``) points, for the whole session and the
processes its tests start, at a temporary directory removed when the session ends, never at the user's cache
directory: the model is converted once per session there (once per pytest-xdist worker that needs it). Tests of
the cache itself give each process a directory of their own.
"""

from __future__ import annotations

import inspect
import io
import os
import re
import textwrap
import tokenize
from pathlib import Path

import pytest

# Nothing in the tests may reach a hub or the internet.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# A local Ray started on a busy machine waits for its agents instead of failing at its default 30 s timeouts.
os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
NQ301 = SHARED / "data" / "nq301"


def pytest_configure(config: pytest.Config) -> None:
    """Keep the converted-model cache out of the user's cache directory (see the module docstring)."""
    import atexit
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="llm-connect-models-")
    atexit.register(shutil.rmtree, where, True)
    os.environ["LLM_CONNECT_CACHE_DIR"] = where


@pytest.fixture(autouse=True)
def _names_registered_in_a_test_stay_in_it():
    """A judge, adapter or embedder a test (or an Example run as a doctest) registers by name in
    :mod:`llm_connect.plugins` is forgotten after it: the registry is the process's, and a test file shares its
    process with others (pytest-xdist runs several files in each worker, in no fixed order)."""
    from llm_connect.plugins import _registry

    before = {kind: dict(table) for kind, table in _registry._registered.items()}
    yield
    with _registry._lock:
        for kind, table in _registry._registered.items():
            table.clear()
            table.update(before[kind])


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.fixture
def make_obs():
    """:func:`strategies.make_observation`: a valid observation with fixed defaults; keywords replace fields."""
    from strategies import make_observation  # here, not at the top: llm_connect loads after the settings above

    return make_observation


# -- the fast loop: markers added at collection ------------------------------------------------------

TESTS = Path(__file__).resolve().parent
NOTEBOOKS = REPO / "notebooks"
# Whole modules of one kind, by their path under tests/: test_distributed.py is Ray's (its Ray-free test runs a
# fresh interpreter, a few seconds too); test_labeller_browser.py drives JupyterLab in Chromium through helpers.
KIND_OF_MODULE = {"distributed/test_distributed.py": "ray", "views/test_labeller_browser.py": "browser"}
# What the code of a test or of one of its fixtures says (read as tokens: strings, docstrings and
# comments left out, but for the module named to importorskip) when it starts Ray, drives a browser
# or loads an embedded model.
KIND_OF_CODE = {
    "ray": re.compile(r"\bimport ray\b|\bfrom ray\b|\bray \. init \(|\bimportorskip \( ['\"]ray['\"]"),
    "browser": re.compile(r"\bselenium\b|\bwebdriver\b"),
    # the bundled model: no path given (LlamaCppAdapter(), LlamaCppAdapter(logits_all=True)); a made-up path is fast
    "local_models": re.compile(
        r"\b(LlamaCppAdapter|TransformersAdapter|SentenceTransformerEmbedder|local_adapter) \( (\)|\w+ =)"),
}
SLOW_KINDS = ("local_models", "ray", "browser", "notebooks")
_code_cache: dict[int, str] = {}


def _code(source: str) -> str:
    """``source`` as its tokens joined by spaces, without comments and strings (but importorskip's)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(textwrap.dedent(source)).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    kept: list[str] = []
    for tok in tokens:
        if tok.type == tokenize.STRING and kept[-2:] != ["importorskip", "("]:
            continue
        if tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
            kept.append(tok.string)
    return " ".join(kept)


def _code_of_function(func) -> str:
    """The code of a test or fixture function defined under ``tests/`` ('' for pytest's own)."""
    func = inspect.unwrap(getattr(func, "_get_wrapped_function", lambda: func)())
    key = id(func)
    if key not in _code_cache:
        try:
            in_tests = Path(inspect.getsourcefile(func) or "").resolve().is_relative_to(TESTS)
            _code_cache[key] = _code(inspect.getsource(func)) if in_tests else ""
        except (OSError, TypeError):
            _code_cache[key] = ""
    return _code_cache[key]


def _code_of(item: pytest.Item) -> str:
    """The code of the test function and of every fixture it uses, directly or not."""
    parts = [_code_of_function(item.obj)] if isinstance(item, pytest.Function) else []
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        parts.extend(_code_of_function(d.func) for d in defs)
    return "\n".join(parts)


def _kinds(item: pytest.Item) -> set[str]:
    path = Path(item.path).resolve()
    if path.is_relative_to(NOTEBOOKS):
        return {"notebooks"}
    where = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""
    kinds = {KIND_OF_MODULE[where]} if where in KIND_OF_MODULE else set()
    code = _code_of(item)
    kinds.update(kind for kind, pattern in KIND_OF_CODE.items() if pattern.search(code))
    kinds.update(kind for kind in SLOW_KINDS if item.get_closest_marker(kind) is not None)
    return kinds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark Ray, browser, local-model and notebook tests as such, and each of them ``slow``; run the Ray tests last."""
    ray_tests = set()
    for item in items:
        kinds = _kinds(item)
        for kind in sorted(kinds):
            if item.get_closest_marker(kind) is None:
                item.add_marker(kind)
        if kinds and item.get_closest_marker("slow") is None:
            item.add_marker("slow")
        if "ray" in kinds:
            ray_tests.add(item)
    # together, in their order, after the rest: the session's one Ray cluster (ray_session) is up only while they run
    items[:] = [i for i in items if i not in ray_tests] + [i for i in items if i in ray_tests]


# -- the embedded models, loaded once for the session ---------------------------------------------------


@pytest.fixture(scope="session")
def smol():
    """The bundled SmolLM2 through llama.cpp, loaded once (a test that needs a fresh model builds its own)."""
    from llm_connect.adapters import LlamaCppAdapter

    adapter = LlamaCppAdapter()
    yield adapter
    adapter.close()


@pytest.fixture(scope="session")
def minilm():
    """The bundled all-MiniLM-L6-v2 embedder, loaded once, offline."""
    from llm_connect.adapters import SentenceTransformerEmbedder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield SentenceTransformerEmbedder().load()


# -- one local Ray cluster for the session ------------------------------------------------------------


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray cluster (``ray.init(num_cpus=2)``) shared by every test that needs one.

    Starting one takes about 20 s on two busy cores, so the test modules share it: each module's own
    ``ray_cluster`` fixture takes this one and registers its factories to be pickled by value. The Ray tests
    run last in one process (:func:`pytest_collection_modifyitems`), so there the cluster never runs beside the
    other tests; under pytest-xdist (``--dist loadfile``) each worker that runs a Ray test file starts its own.
    """
    ray = pytest.importorskip("ray", reason="ray is not installed: pip install 'llm-connect[ray]'")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
