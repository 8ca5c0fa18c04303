"""The pytest plugin of ``llm_connect``: LLM tests that gate on evidence, repeats counted once, recorded replies.

Registered through the package's ``pytest11`` entry point (name ``llm_connect``), so every project that
installs the package has it; ``-p no:llm_connect`` turns it off. It adds:

- ``@pytest.mark.llm_repeat(n, *, at_least=None, confidence=0.95)``: the test body runs ``n`` times (its
  fixtures are set up once) and is reported as one test. With ``at_least`` it passes when the lower end of
  the pass rate's exact (Clopper–Pearson) interval is at least ``at_least``, fails when the upper end is
  below, and is inconclusive otherwise (a failure that says about how many more runs would settle it);
  without, it passes only if every run passed (pass^n). The message says k of n and the interval.
- ``--llm-cache DIR`` (the ini option ``llm_cache``, the environment variable ``LLM_CONNECT_CACHE``):
  every adapter call of the session goes through one response cache in ``DIR``
  (:class:`~llm_connect.adapters._cache.ReplySession`), so a rerun replays the replies and sends nothing.
  ``--llm-cache-mode`` (``llm_cache_mode``, ``LLM_CONNECT_CACHE_MODE``): ``auto`` (replay, record what is
  missing), ``record`` (always call, record) or ``replay`` (never call: a request with no recorded reply
  fails its test, naming the request). The runs of a repeated test each keep their own replies. The
  cache is SQLite, shared safely by ``pytest -n`` workers.
- A terminal section "llm_connect quality": one row per checked test (one that called
  :func:`~llm_connect.testing.assert_quality`, or a repeated test): node id, n, mean, interval, threshold,
  verdict, method of its last check (the one that decided it); and the same check's JUnit XML properties
  ``llm_quality_n``, ``llm_quality_mean``, ``llm_quality_low``, ``llm_quality_high``,
  ``llm_quality_verdict``. A test rerun by pytest-rerunfailures shows its last attempt only.

Nothing changes for a test that neither uses the marker nor calls ``assert_quality`` unless
``--llm-cache`` (or its ini option or variable) is given. This module is imported by pytest at startup in
every project that installs ``llm_connect``, so it imports nothing heavy: numpy, pandas and scipy load
when a check runs, the response cache when a session starts.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import _assertions

if TYPE_CHECKING:
    from ..adapters._cache import ReplySession

__all__: list[str] = []  # hooks only

MODES = ("auto", "record", "replay")
#: The names this module may be registered under: its ``pytest11`` entry point and its module path (``-p``).
_NAMES = ("llm_connect", __name__)
_PROPERTIES = ("llm_quality_n", "llm_quality_mean", "llm_quality_low", "llm_quality_high", "llm_quality_verdict")
_REPEAT_HELP = ("llm_repeat(n, *, at_least=None, confidence=0.95): run the test body n times (fixtures set up "
                "once) and report one test: with at_least, pass when the pass rate's lower confidence bound is at "
                "least at_least; without, pass only if every run passed")


class _State:
    """What the plugin keeps for one pytest run (``config.stash``)."""

    def __init__(self) -> None:
        self.session: ReplySession | None = None  # with --llm-cache
        self.previous: ReplySession | None = None  # the session it replaced (a pytest run inside a pytest run)
        self.rows: dict[str, list[dict[str, Any]]] = {}  # node id -> its checks (last attempt)
        self.sent = 0
        self.replayed = 0


_STATE = pytest.StashKey[_State]()
_PHASE = pytest.StashKey[dict[str, Any]]()


# -- options and markers ------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llm_connect", "llm_connect: LLM tests that gate on evidence")
    group.addoption(
        "--llm-cache", action="store", dest="llm_cache", metavar="DIR", default=None,
        help="record every LLM adapter's replies in DIR and replay them on the next run, so a rerun sends "
             "no request (also the ini option llm_cache and the LLM_CONNECT_CACHE environment variable)",
    )
    group.addoption(
        "--llm-cache-mode", action="store", dest="llm_cache_mode", choices=MODES, default=None,
        help="auto (default): replay recorded replies, record the others; record: always call the models and "
             "record; replay: never call a model, a reply not recorded fails its test (CI without keys)",
    )
    parser.addini("llm_cache", "folder of recorded LLM replies, as --llm-cache (relative to the ini file)",
                  default="")
    parser.addini("llm_cache_mode", "auto, record or replay, as --llm-cache-mode", default="")


class _OtherName:
    """Holds the plugin's other name (:data:`_NAMES`) in the plugin manager, so that pytest, finding a plugin
    registered under it, does not import and register the module a second time (pluggy refuses one module
    under two names: ``ValueError: Plugin already registered under a different name``)."""


def pytest_plugin_registered(plugin: Any, plugin_name: str, manager: Any) -> None:
    """Registered under one of its names, take the other: the entry point and ``-p`` naming it are one plugin."""
    if getattr(plugin, "pytest_plugin_registered", None) is not pytest_plugin_registered:  # not this module
        return
    for name in _NAMES:
        if name != plugin_name and manager.get_plugin(name) is None and not manager.is_blocked(name):
            manager.register(_OtherName(), name)


def _cache_settings(config: pytest.Config) -> tuple[Path | None, str | None]:
    directory: Path | None = None
    if config.getoption("llm_cache"):
        directory = config.invocation_params.dir / config.getoption("llm_cache")
    elif config.getini("llm_cache"):
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        directory = base / str(config.getini("llm_cache"))
    elif os.environ.get("LLM_CONNECT_CACHE"):
        directory = Path(os.environ["LLM_CONNECT_CACHE"]).absolute()
    mode = config.getoption("llm_cache_mode") or config.getini("llm_cache_mode") or \
        os.environ.get("LLM_CONNECT_CACHE_MODE") or None
    if mode is not None and mode not in MODES:
        raise pytest.UsageError(f"llm_connect: the cache mode must be one of {', '.join(MODES)}, got {mode!r}")
    return directory, mode


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _REPEAT_HELP)
    directory, mode = _cache_settings(config)
    if directory is None and mode is not None:
        raise pytest.UsageError(f"llm_connect: --llm-cache-mode={mode} needs a folder of replies: "
                                "--llm-cache DIR (or the ini option llm_cache, or LLM_CONNECT_CACHE)")
    if directory is not None and mode == "replay" and not directory.is_dir():
        raise pytest.UsageError(f"llm_connect: --llm-cache-mode=replay, but {directory} holds no recorded "
                                "replies; record them once where the API keys are set (--llm-cache-mode=auto) "
                                "and keep the folder with the tests")
    state = _State()
    config.stash[_STATE] = state
    config.pluginmanager.register(_Summary(state, config.invocation_params.dir), f"{__name__}.summary")
    _assertions._plugin_sessions += 1
    if directory is not None:
        from ..adapters._cache import start_session

        state.session, state.previous = start_session(directory, mode=mode or "auto")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    _assertions._plugin_sessions -= 1
    summary = config.pluginmanager.get_plugin(f"{__name__}.summary")
    if summary is not None:
        config.pluginmanager.unregister(summary)
    if state.session is not None:
        from ..adapters._cache import stop_session

        stop_session(state.session, state.previous)
        state.session = None
    del config.stash[_STATE]


# -- each phase of a test: its checks, its replay misses ------------------------------------------------


def _passes_through(exc: BaseException) -> bool:
    """Exceptions a missed reply must not replace: the run is being stopped."""
    return isinstance(exc, (KeyboardInterrupt, SystemExit, pytest.exit.Exception))


def _phase(item: pytest.Item, when: str) -> Generator[None, Any, Any]:
    """Around one phase: collect its checks and cache counts; a replay miss during it fails it, naming them."""
    __tracebackhide__ = True
    state = item.config.stash.get(_STATE, None)
    session = state.session if state is not None else None
    if when == "setup":  # a new attempt (pytest-rerunfailures reruns from setup): forget the last one's
        item.user_properties[:] = [p for p in item.user_properties if p[0] not in _PROPERTIES]
    missed = len(session.missed) if session is not None else 0
    counts = (session.sent, session.replayed) if session is not None else (0, 0)
    error: BaseException | None = None
    with _assertions.recording() as checks:
        try:
            return (yield)
        except BaseException as exc:
            error = exc
            raise
        finally:
            misses = session.missed[missed:] if session is not None else []
            item.stash[_PHASE] = {
                "when": when,
                "checks": [c.as_dict() for c in checks],
                "sent": (session.sent - counts[0]) if session is not None else 0,
                "replayed": (session.replayed - counts[1]) if session is not None else 0,
            }
            if checks:  # the test's last check, one set of properties per test
                last = checks[-1]
                item.user_properties[:] = [p for p in item.user_properties if p[0] not in _PROPERTIES]
                item.user_properties.extend(zip(_PROPERTIES, (last.n, last.mean, last.low, last.high, last.verdict),
                                                strict=True))
            if misses and session is not None and not (error is not None and _passes_through(error)):
                listed = "\n".join(f"  - {m}" for m in misses)
                own = f"\n(the test's own outcome: {type(error).__name__}: {error})" if error is not None else ""
                pytest.fail(f"llm_connect replay mode: {len(misses)} request(s) had no recorded reply in "
                            f"{session.directory} (nothing was sent):\n{listed}\nRecord them once where the API "
                            f"keys are set (pytest --llm-cache DIR --llm-cache-mode=auto) and keep the folder "
                            f"with the tests{own}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    return (yield from _phase(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    return (yield from _phase(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    return (yield from _phase(item, "teardown"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    phase = item.stash.get(_PHASE, None)
    if phase is not None and phase["when"] == call.when:
        # plain data, so pytest-xdist carries it from a worker to the controller's summary
        report.llm_quality = phase["checks"]
        report.llm_cache = {"sent": phase["sent"], "replayed": phase["replayed"]}
    return report


# -- repeated tests ------------------------------------------------------------------------------------------


def _repeat_args(marker: pytest.Mark) -> tuple[int, float | None, float]:
    from ..errors import ValidationError

    if len(marker.args) != 1 or set(marker.kwargs) - {"at_least", "confidence"}:
        raise ValidationError("write @pytest.mark.llm_repeat(n, at_least=None, confidence=0.95), e.g. "
                              f"llm_repeat(10, at_least=0.8); got args {marker.args!r} and {marker.kwargs!r}")
    n = marker.args[0]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationError(f"llm_repeat(n): n is how many times to run the test, an int >= 1; got {n!r}")
    return n, marker.kwargs.get("at_least"), marker.kwargs.get("confidence", 0.95)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run a test marked ``llm_repeat(n)`` n times with the same fixtures and judge the runs as one test."""
    __tracebackhide__ = True
    marker = pyfuncitem.get_closest_marker("llm_repeat")
    if marker is None:
        return None
    from ..errors import QualityInconclusive, QualityNotMet
    from ..stats._validate import check_confidence
    from ..stats.gate import check_threshold

    n, at_least, confidence = _repeat_args(marker)
    threshold = None if at_least is None else check_threshold(at_least)
    conf = check_confidence(confidence)
    function = pyfuncitem.obj
    if inspect.iscoroutinefunction(function):
        pytest.fail("llm_repeat runs plain test functions; run the coroutine with asyncio.run() inside the test",
                    pytrace=False)
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    state = pyfuncitem.config.stash.get(_STATE, None)
    session = state.session if state is not None else None
    passed: list[bool] = []
    first: tuple[int, BaseException] | None = None
    for run in range(n):
        if session is not None:
            session.run_index = run
        try:
            function(**args)
        except (pytest.skip.Exception, pytest.xfail.Exception, pytest.exit.Exception, KeyboardInterrupt,
                SystemExit):
            raise  # a run that skips or xfails decides the test; a stop stops it
        except BaseException as exc:  # an assert, an error or pytest.fail in one run: that run failed
            passed.append(False)
            if first is None:
                first = (run, exc)
        else:
            passed.append(True)
        finally:
            if session is not None:
                session.run_index = 0
    check = _assertions.make_check(passed, at_least=threshold, confidence=conf, what="pass rate", unit="runs")
    _assertions.record(check)
    if check.verdict == "pass":
        return True
    k = sum(passed)
    rule = "every run must pass (no at_least)" if threshold is None else f"at_least={threshold:g}"
    text = f"{k} of {n} runs passed, {rule}: {check.message}"
    if first is not None:
        text += f"\nfirst failing run: {first[0] + 1} of {n}: {type(first[1]).__name__}: {first[1]}"
    cause = first[1] if first is not None else None
    if check.verdict == "fail":
        raise QualityNotMet(text, check=check) from cause
    raise QualityInconclusive(text, check=check) from cause


# -- the summary ------------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if number != number else f"{number:.3f}"


class _Summary:
    """The run's checks and cache counts, from the reports (of this process or of pytest-xdist's workers).

    One per pytest run, registered as a plugin of its own (a pytest run inside a pytest run, as
    ``pytester`` makes, has its own).
    """

    def __init__(self, state: _State, invocation_dir: Path) -> None:
        self.state = state
        self.invocation_dir = invocation_dir

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each test's checks from its last attempt: a rerun starts again from its setup report."""
        state = self.state
        if report.when == "setup":
            state.rows.pop(report.nodeid, None)
        checks = getattr(report, "llm_quality", None)
        if checks:
            state.rows.setdefault(report.nodeid, []).extend(checks)
        cache = getattr(report, "llm_cache", None)
        if isinstance(cache, dict):
            state.sent += int(cache.get("sent", 0))
            state.replayed += int(cache.get("replayed", 0))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .._textsafe import safe_text

        state = self.state
        # one row per checked test: its last check (a check that raised ended the test, so it decided it)
        rows = [(node if len(checks) == 1 else f"{node} (last of {len(checks)} checks)", checks[-1])
                for node, checks in state.rows.items() if checks]
        if not rows and state.session is None:
            return
        terminalreporter.section("llm_connect quality")
        if rows:
            header = ("test", "n", "mean", "interval", "at least", "verdict", "method")
            table = [header]
            for node, c in rows:
                interval = f"[{_cell(c.get('low'))}, {_cell(c.get('high'))}]"
                if isinstance(c.get("confidence"), (int, float)):
                    interval += f" {c['confidence']:.0%}"
                at_least = "every run" if c.get("at_least") is None else f"{c['at_least']:g}"
                table.append((safe_text(node, limit=100), str(c.get("n")), _cell(c.get("mean")), interval,
                              at_least, str(c.get("verdict")), str(c.get("method") or "")))
            widths = [max(len(row[i]) for row in table) for i in range(len(header))]
            for i, row in enumerate(table):
                line = "  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip()
                colour = {} if i == 0 else {"green": row[5] == "pass", "red": row[5] == "fail",
                                            "yellow": row[5] == "inconclusive"}
                terminalreporter.write_line(line, **colour)
        else:
            terminalreporter.write_line("no quality checks ran")
        if state.session is not None:
            shown: Path = state.session.directory
            with contextlib.suppress(ValueError):  # a folder outside the invocation directory: its full path
                shown = shown.relative_to(self.invocation_dir)
            terminalreporter.write_line(
                f"llm_connect cache {safe_text(shown)} ({state.session.mode}): "
                f"{state.replayed} replies replayed, {state.sent} requests sent"
            )
