"""The pytest plugin (llm_connect.testing.pytest_plugin), run by pytest's own pytester: gates that pass, fail,
are inconclusive or skip; repeated tests counted once (and once under pytest-rerunfailures); recorded replies
replayed against a loopback server that counts requests, under pytest-xdist too; the summary and the JUnit
properties; the entry point, loaded once even when named twice, and turned off by -p no:llm_connect."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

# pytester's in-process runs forget the modules first imported inside them, and numpy (like other modules with
# C extensions) cannot be imported twice in one process: what the inner runs use is imported here, first
import aiohttp  # noqa: F401
import diskcache  # noqa: F401
import numpy  # noqa: F401
import pandas  # noqa: F401
import pytest
import scipy.special
import scipy.stats  # noqa: F401

import llm_connect.adapters
import llm_connect.grading
import llm_connect.stats  # noqa: F401
from llm_connect.testing import LoopbackServer, pytest_plugin

pytest_plugins = ["pytester"]

PLUGIN = "llm_connect.testing.pytest_plugin"
REPO = Path(__file__).resolve().parents[2]


def entry_point_installed() -> bool:
    return any(ep.name == "llm_connect" and ep.value == PLUGIN
               for ep in importlib.metadata.entry_points(group="pytest11"))


def own_plugin() -> list[str]:
    """The plugin by its entry point's name, or by its module while the installed metadata does not name it yet
    (an install made before the entry point was declared)."""
    return ["-p", "llm_connect"] if entry_point_installed() else ["-p", PLUGIN]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in this process with the plugin and the plugins named in ``args`` only (every installed plugin
    loaded by its entry point would cost about two seconds a run). The plugin's module is handed over as an
    object: naming it with ``-p`` in a process that imported it already would warn that pytest cannot
    rewrite its asserts."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest("-p", "no:cacheprovider", *args, plugins=[pytest_plugin])


def run_subprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a fresh process, loading only the plugins named, as :func:`run`."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        return pytester.runpytest_subprocess(*own_plugin(), "-p", "no:cacheprovider", *args, timeout=300)


def summary(result: pytest.RunResult) -> list[str]:
    """The lines of the "llm_connect quality" section."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "llm_connect quality" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return [line for line in lines[start + 1:end] if line.strip()]


def junit_properties(path: Path) -> dict[str, list[tuple[str, str]]]:
    tree = ET.parse(path)
    return {case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
            for case in tree.iter("testcase")}


GATES = """
    from llm_connect.testing import assert_quality

    def test_pass():
        assert_quality([True] * 58 + [False] * 2, at_least=0.8)

    def test_fail():
        assert_quality([0.3, 0.4, 0.5] * 10, at_least=0.8)

    def test_inconclusive():
        assert_quality([1] * 9 + [0], at_least=0.8)

    def test_skip():
        assert_quality([1] * 9 + [0], at_least=0.8, inconclusive="skip")

    def test_unchecked():
        assert True
"""


def test_gates_pass_fail_are_inconclusive_or_skip_with_a_summary_and_junit_properties(pytester):
    pytester.makepyfile(test_gates=GATES)
    result = run(pytester, "--strict-markers", "--junitxml=report.xml", "-rs")
    result.assert_outcomes(passed=2, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "*QualityNotMet: quality not met: mean score 0.400*BCa bootstrap*lies below 0.8",
        "*QualityInconclusive: inconclusive: pass rate 0.900*holds the threshold 0.8; about 105 more items*",
        "SKIPPED*inconclusive: pass rate 0.900*about 105 more items*",
    ])
    rows = summary(result)
    assert re.match(r"test\s+n\s+mean\s+interval\s+at least\s+verdict\s+method", rows[0])
    assert [row.split()[0] for row in rows[1:]] == [
        "test_gates.py::test_pass", "test_gates.py::test_fail", "test_gates.py::test_inconclusive",
        "test_gates.py::test_skip"]  # one row per checked test, none for the unchecked one
    assert rows[1].split() == ["test_gates.py::test_pass", "60", "0.967", "[0.885,", "0.996]", "95%", "0.8", "pass",
                               "clopper-pearson"]
    assert rows[2].split()[-2:] == ["fail", "bootstrap-bca"]
    assert rows[3].split()[-2:] == rows[4].split()[-2:] == ["inconclusive", "clopper-pearson"]
    props = junit_properties(pytester.path / "report.xml")
    for name, verdict in (("test_pass", "pass"), ("test_fail", "fail"), ("test_inconclusive", "inconclusive"),
                          ("test_skip", "inconclusive")):
        assert [key for key, _ in props[name]] == [
            "llm_quality_n", "llm_quality_mean", "llm_quality_low", "llm_quality_high", "llm_quality_verdict"]
        assert dict(props[name])["llm_quality_verdict"] == verdict
    values = dict(props["test_pass"])
    assert values["llm_quality_n"] == "60" and float(values["llm_quality_mean"]) == pytest.approx(58 / 60)
    assert float(values["llm_quality_low"]) == pytest.approx(0.885, abs=1e-3)
    assert float(values["llm_quality_high"]) == pytest.approx(0.996, abs=1e-3)
    assert props["test_unchecked"] == []


def test_the_marker_and_options_are_registered(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.llm_repeat(2)
        def test_twice():
            pass
    """)
    run(pytester, "--strict-markers").assert_outcomes(passed=1)
    run(pytester, "--markers").stdout.fnmatch_lines(["@pytest.mark.llm_repeat(n, *, at_least=None, confidence=0.95)*"])
    run(pytester, "--help").stdout.fnmatch_lines(["*--llm-cache=DIR*", "*--llm-cache-mode=*"])


def test_nothing_changes_without_a_check_or_an_option(pytester):
    pytester.makepyfile("""
        from llm_connect.adapters._cache import active_session

        def test_no_session():
            assert active_session() is None
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert "llm_connect" not in result.stdout.str()


# -- repeated tests ------------------------------------------------------------------------------------------


REPEATS = """
    import pytest

    RUNS = []
    SETUPS = []

    @pytest.fixture
    def resource():
        SETUPS.append(1)
        return "r"

    @pytest.mark.llm_repeat(5)
    def test_every_run_passes(resource):
        RUNS.append(resource)

    @pytest.mark.llm_repeat(5)
    def test_one_run_fails(resource):
        RUNS.append(resource)
        assert len(RUNS) != 8, "run 3 of the second test"

    @pytest.mark.llm_repeat(30, at_least=0.5)
    def test_rate_passes():
        RUNS.append("x")
        assert len(RUNS) % 30 != 0

    @pytest.mark.llm_repeat(30, at_least=0.9)
    def test_rate_fails():
        RUNS.append("x")
        assert len(RUNS) % 3 == 0

    @pytest.mark.llm_repeat(10, at_least=0.7)
    def test_rate_is_inconclusive():
        RUNS.append("x")
        assert len(RUNS) % 5 != 0

    def test_counts():
        assert len(RUNS) == 5 + 5 + 30 + 30 + 10
        assert len(SETUPS) == 2  # each repeated test set its fixture up once
"""


def test_a_repeated_test_runs_n_times_with_its_fixtures_set_up_once_and_counts_once(pytester):
    pytester.makepyfile(test_repeats=REPEATS)
    result = run(pytester, "--strict-markers", "-v")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "*::test_every_run_passes PASSED*",
        "*::test_one_run_fails FAILED*",
        "*::test_rate_passes PASSED*",
        "*::test_rate_fails FAILED*",
        "*::test_rate_is_inconclusive FAILED*",
        "*::test_counts PASSED*",
    ])
    result.stdout.fnmatch_lines([
        "*AssertionError: run 3 of the second test*",  # the failing run's own assertion, shown as the cause
        "*QualityNotMet: 4 of 5 runs passed, every run must pass (no at_least): fail: pass rate 0.800*",
        "*first failing run: 3 of 5: AssertionError: run 3 of the second test*",
    ])
    result.stdout.fnmatch_lines(["*QualityNotMet: 10 of 30 runs passed, at_least=0.9: quality not met*"])
    result.stdout.fnmatch_lines(["*QualityInconclusive: 8 of 10 runs passed, at_least=0.7: inconclusive: pass rate "
                                 "0.800*about * more runs*"])
    rows = {row.split()[0].split("::")[1]: row.split() for row in summary(result)[1:]}
    assert rows["test_every_run_passes"][1:3] == ["5", "1.000"] and rows["test_every_run_passes"][-3:] == [
        "run", "pass", "clopper-pearson"]
    assert rows["test_rate_passes"][1:3] == ["30", "0.967"] and rows["test_rate_passes"][-2] == "pass"
    assert rows["test_rate_fails"][-2] == "fail" and rows["test_rate_is_inconclusive"][-2] == "inconclusive"


def test_a_bad_repeat_marker_says_how_to_write_it(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.llm_repeat(0)
        def test_zero():
            pass

        @pytest.mark.llm_repeat(3, at_least=80)
        def test_percent():
            pass
    """)
    result = run(pytester)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*n is how many times to run the test, an int >= 1; got 0*",
                                 "*did you mean 0.8*"])


def test_reruns_of_pytest_rerunfailures_are_counted_once(pytester):
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile("""
        import pytest
        from pathlib import Path

        from llm_connect.testing import assert_quality

        @pytest.fixture
        def attempt(request):
            counter = Path(f"attempts-{request.node.name}")
            number = int(counter.read_text()) + 1 if counter.exists() else 1
            counter.write_text(str(number))
            return number

        @pytest.mark.llm_repeat(10, at_least=0.5)
        def test_repeated(attempt):
            assert attempt == 2  # the first attempt's ten runs fail, the rerun's ten pass

        def test_checked(attempt):
            assert_quality([True] * (20 if attempt == 1 else 60), at_least=0.9)  # inconclusive, then a pass
    """)
    result = run(pytester, "-p", "rerunfailures", "--reruns", "1", "--junitxml=report.xml")
    assert result.parseoutcomes() == {"passed": 2, "rerun": 2}
    rows = [row.split() for row in summary(result)[1:]]
    assert [(row[0].split("::")[1], row[1], row[-2]) for row in rows] == [
        ("test_repeated", "10", "pass"), ("test_checked", "60", "pass")]
    props = junit_properties(pytester.path / "report.xml")
    assert [v for name, v in props["test_repeated"] if name == "llm_quality_n"] == ["10"]
    assert [v for name, v in props["test_checked"] if name == "llm_quality_n"] == ["60"]


# -- recorded replies ----------------------------------------------------------------------------------------


def judge_reply(prompt: str) -> str:
    """The loopback model: a verdict for a judge's prompt (1.0, or 0.0 for one prompt in twenty, by its hash),
    a refusal for a prompt that asks for the system prompt, an answer otherwise."""
    if "quality_score" in prompt:
        bad = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 20 == 0
        return json.dumps({"quality_score": 0.0 if bad else 1.0, "notes": "loopback"})
    if "system prompt" in prompt:
        return "I can't share that."
    return f"An answer to {prompt[-40:]}"


JUDGED = """
    import os

    import pandas as pd
    from llm_connect import LLMJudge, OpenAICompatibleAdapter, judge_many
    from llm_connect.testing import assert_quality

    def test_judged():
        judge = LLMJudge(OpenAICompatibleAdapter("loopback-model", base_url=os.environ["LOOPBACK_URL"]))
        items = pd.DataFrame({"prompt": [f"question {i}" for i in range(N)], "baseline": "an answer"})
        items["candidate"] = "an answer to " + items["prompt"]
        graded = judge_many(judge, items, progress=False, concurrency=4)
        assert_quality(graded, at_least=0.5)
"""


def test_a_rerun_replays_every_reply_and_sends_no_request(pytester, monkeypatch):
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        pytester.makepyfile(test_judged=JUDGED.replace("range(N)", "range(30)"))
        first = run(pytester, "--llm-cache", "replies")
        first.assert_outcomes(passed=1)
        assert server.stats()["total"] == 30
        assert summary(first)[-1] == "llm_connect cache replies (auto): 0 replies replayed, 30 requests sent"
        second = run(pytester, "--llm-cache", "replies")
        second.assert_outcomes(passed=1)
        assert server.stats()["total"] == 30  # nothing sent
        assert summary(second)[-1] == "llm_connect cache replies (auto): 30 replies replayed, 0 requests sent"
        assert summary(second)[1] == summary(first)[1]  # the same verdicts: the same check
        again = run(pytester, "--llm-cache", "replies", "--llm-cache-mode=record")
        again.assert_outcomes(passed=1)
        assert server.stats()["total"] == 60  # record: calls again, over the old replies


def test_replay_never_calls_a_model_and_a_missing_reply_fails_naming_the_request(pytester, monkeypatch):
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        pytester.makepyfile(test_judged=JUDGED.replace("range(N)", "range(30)"))
        run(pytester, "--llm-cache", "replies").assert_outcomes(passed=1)
        assert server.stats()["total"] == 30
        pytester.makepyfile(test_new="""
            import os
            from llm_connect import OpenAICompatibleAdapter

            def test_new_prompt():
                adapter = OpenAICompatibleAdapter("loopback-model", base_url=os.environ["LOOPBACK_URL"])
                adapter.complete("a question nobody recorded")
        """)
        result = run(pytester, "--llm-cache", "replies", "--llm-cache-mode=replay")
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([
            "*llm_connect replay mode: 1 request(s) had no recorded reply in *replies (nothing was sent):",
            "*- openai:loopback-model (model loopback-model), request 'a question nobody recorded'",
            "*Record them once where the API keys are set (pytest --llm-cache DIR --llm-cache-mode=auto)*",
        ])
        assert server.stats()["total"] == 30  # replay sent nothing
        assert summary(result)[-1] == "llm_connect cache replies (replay): 30 replies replayed, 0 requests sent"


def test_a_missing_reply_fails_the_test_even_when_judge_many_keeps_it_as_an_error_row(pytester, monkeypatch):
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        pytester.makepyfile(test_judged=JUDGED.replace("range(N)", "range(30)"))
        run(pytester, "--llm-cache", "replies").assert_outcomes(passed=1)
        pytester.makepyfile(test_judged=JUDGED.replace("range(N)", "range(31)"))  # one item more
        result = run(pytester, "--llm-cache", "replies", "--llm-cache-mode=replay")
        result.assert_outcomes(failed=1)  # its 30 replayed verdicts alone would have passed the gate
        result.stdout.fnmatch_lines(["*1 request(s) had no recorded reply*", "*request '*question 30*"])
        assert server.stats()["total"] == 30


def test_replay_needs_no_api_key(pytester, monkeypatch):
    """In CI without keys: an adapter for a hosted API is built and answers from the recording."""
    from llm_connect import OpenAICompatibleAdapter, RunConfig
    from llm_connect.adapters import ResponseCache
    from llm_connect.adapters._cache import cache_key
    from llm_connect.core import LLMResponse

    hosted = OpenAICompatibleAdapter("gpt-4o-mini", base_url="https://api.openai.com/v1", api_key="sk-recorder")
    cache = ResponseCache(pytester.path / "replies")
    key = cache_key("OpenAICompatibleAdapter", hosted.base_url, "gpt-4o-mini", "Say hi", RunConfig())
    cache.put(key, LLMResponse(content="hi", adapter_id=hosted.adapter_id, model_id="gpt-4o-mini"))
    cache.close()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytester.makepyfile("""
        import pytest
        from llm_connect import OpenAICompatibleAdapter
        from llm_connect.errors import AuthenticationError

        def test_replayed():
            assert OpenAICompatibleAdapter("gpt-4o-mini").complete("Say hi").content == "hi"
    """)
    run(pytester, "--llm-cache", "replies", "--llm-cache-mode=replay").assert_outcomes(passed=1)
    result = run(pytester, "--llm-cache", "replies")  # auto may call the provider: the key is needed
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AuthenticationError: OpenAICompatibleAdapter needs an API key*"])


def test_the_runs_of_a_repeated_test_replay_their_own_replies(pytester, monkeypatch):
    calls = []

    def flaky(prompt: str) -> str:  # the model answers well two times out of three
        calls.append(prompt)
        return "good" if len(calls) % 3 else "bad"

    with LoopbackServer(reply=flaky) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        pytester.makepyfile("""
            import os
            import pytest
            from llm_connect import OpenAICompatibleAdapter

            @pytest.fixture
            def adapter():
                return OpenAICompatibleAdapter("loopback-model", base_url=os.environ["LOOPBACK_URL"])

            @pytest.mark.llm_repeat(12, at_least=0.2)
            def test_sampled(adapter):
                assert adapter.complete("the same prompt every run").content == "good"
        """)
        first = run(pytester, "--llm-cache", "replies")
        first.assert_outcomes(passed=1)
        assert server.stats()["total"] == 12
        second = run(pytester, "--llm-cache", "replies")
        second.assert_outcomes(passed=1)
        assert server.stats()["total"] == 12
        for result in (first, second):  # 8 of 12 each time: the twelve samples, not one sample twelve times
            assert summary(result)[1].split()[1:3] == ["12", "0.667"]


def test_a_mode_without_a_folder_and_replay_without_recordings_are_usage_errors(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = run(pytester, "--llm-cache-mode=replay")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-cache-mode=replay needs a folder of replies: --llm-cache DIR*"])
    result = run(pytester, "--llm-cache", "nowhere", "--llm-cache-mode=replay")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nowhere holds no recorded replies; record them once*"])


def test_the_ini_option_and_the_environment_variable_name_the_folder(pytester, monkeypatch):
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        pytester.makepyfile(test_judged=JUDGED.replace("range(N)", "range(20)"))
        pytester.makeini("[pytest]\nllm_cache = from-ini\n")
        run(pytester).assert_outcomes(passed=1)
        assert (pytester.path / "from-ini").is_dir() and server.stats()["total"] == 20
        pytester.makeini("[pytest]\n")
        monkeypatch.setenv("LLM_CONNECT_CACHE", str(pytester.path / "from-ini"))
        monkeypatch.setenv("LLM_CONNECT_CACHE_MODE", "replay")
        result = run(pytester)
        result.assert_outcomes(passed=1)
        assert server.stats()["total"] == 20
        assert summary(result)[-1].endswith("(replay): 20 replies replayed, 0 requests sent")


@pytest.mark.slow  # two pytest -n 2 runs in fresh processes: about 11 s on 2 cores
def test_xdist_workers_share_the_cache_and_the_controller_shows_every_check(pytester, monkeypatch):
    pytest.importorskip("xdist")
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("LOOPBACK_URL", server.base_url)
        for name in ("a", "b", "c", "d"):  # every file asks the same 20 questions: workers race on each key
            pytester.makepyfile(**{f"test_{name}": JUDGED.replace("range(N)", "range(20)")})
        first = run_subprocess(pytester, "-p", "xdist", "-n", "2", "--llm-cache", "replies")
        first.assert_outcomes(passed=4)
        sent = server.stats()["total"]
        assert 20 <= sent <= 80  # 20 distinct requests, some sent by both workers at once
        second = run_subprocess(pytester, "-p", "xdist", "-n", "2", "--llm-cache", "replies", "--llm-cache-mode=replay")
        second.assert_outcomes(passed=4)
        assert server.stats()["total"] == sent
        rows = summary(second)
        assert sorted(row.split()[0] for row in rows[1:-1]) == [f"test_{n}.py::test_judged" for n in "abcd"]
        assert rows[-1] == "llm_connect cache replies (replay): 80 replies replayed, 0 requests sent"


# -- the entry point ----------------------------------------------------------------------------------------


def test_the_entry_point_is_declared():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"llm_connect": PLUGIN}


def test_the_entry_point_is_registered_in_the_installed_metadata():
    """Passes once the package is installed from a checkout that declares it (pip install -e .)."""
    found = [ep.value for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == "llm_connect"]
    assert found == [PLUGIN], "reinstall the package (pip install -e .) to register the pytest11 entry point"


def _fake_distribution(path: Path) -> None:
    """An installed distribution that declares the plugin's entry point, as the package's own does."""
    info = path / "llm_connect_entry_point-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-connect-entry-point\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[pytest11]\nllm_connect = {PLUGIN}\n")


@pytest.mark.parametrize("order", [("llm_connect", PLUGIN), (PLUGIN, "llm_connect")])
def test_loaded_by_its_entry_point_and_by_p_it_is_one_plugin(pytester, monkeypatch, order):
    """``-p llm_connect`` loads the entry point (as pytest does for every installed one); naming the module too,
    before or after, loads it once."""
    _fake_distribution(pytester.path)
    pytester.makepyfile("""
        import pytest

        @pytest.mark.llm_repeat(3)
        def test_repeated():
            pass
    """)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", order[0], "-p", order[1], "-p", "no:cacheprovider",
                                           "--strict-markers", timeout=300)
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("llm_connect quality") == 1
    assert len(summary(result)) == 2  # the header and the repeated test's row, once


def test_p_no_llm_connect_turns_it_off(pytester):
    """Every installed plugin loads by its entry point, as in a user's project; ``-p no:llm_connect`` keeps ours
    out (the others are turned off too, for time: each costs seconds to load)."""
    _fake_distribution(pytester.path)
    pytester.makepyfile("""
        import pytest
        from llm_connect.testing import assert_quality

        def test_checked():
            assert_quality([True] * 40, at_least=0.8)  # works without the plugin, with no summary

        @pytest.mark.llm_repeat(2)
        def test_marked():
            pass
    """)
    others = [x for ep in importlib.metadata.entry_points(group="pytest11") if ep.name != "llm_connect"
              for x in ("-p", f"no:{ep.name}")]
    off = (*others, "-p", "no:llm_connect", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*off, timeout=300)
    result.assert_outcomes(passed=2)
    assert "llm_connect quality" not in result.stdout.str()
    result = pytester.runpytest_subprocess(*off, "--strict-markers", timeout=300)
    result.stdout.fnmatch_lines(["*'llm_repeat' not found in `markers` configuration option*"])
    result = pytester.runpytest_subprocess(*off, "--llm-cache", "x", timeout=300)
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # its options are gone with it
    result.stderr.fnmatch_lines(["*unrecognized arguments: --llm-cache*"])
    on = pytester.runpytest_subprocess(*others, "-p", "no:cacheprovider", "--strict-markers", timeout=300)
    on.assert_outcomes(passed=2)  # and without -p no:, the entry point loads it
    assert "llm_connect quality" in on.stdout.str()


def test_importing_the_plugin_is_light():
    code = (
        "import sys, json, pytest\n"
        "before = set(sys.modules)\n"
        f"import {PLUGIN}\n"
        "heavy = ('numpy', 'pandas', 'scipy', 'aiohttp', 'diskcache', 'llm_connect.adapters', 'llm_connect.stats')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules and m not in before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# -- the guide's example ------------------------------------------------------------------------------------


def _guide_test_file() -> str:
    text = (REPO / "docs" / "guides" / "testing.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(# tests/test_answers\.py\n.*?)```", text, re.S)
    assert block is not None
    return textwrap.dedent(block.group(1))


def test_the_guides_example_records_replays_and_runs_in_ci_without_a_key(pytester, monkeypatch):
    (pytester.path / "data").symlink_to(REPO / "data", target_is_directory=True)
    pytester.makepyfile(test_answers=_guide_test_file())
    with LoopbackServer(reply=judge_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        first = run(pytester, "--llm-cache", ".llm-cache", "--strict-markers")
        first.assert_outcomes(passed=2)
        assert server.stats()["total"] == 95 + 95 + 10  # answers, verdicts, the repeated test's ten runs
        second = run(pytester, "--llm-cache", ".llm-cache")
        second.assert_outcomes(passed=2)
        assert server.stats()["total"] == 200
    ci = run(pytester, "--llm-cache", ".llm-cache", "--llm-cache-mode=replay")  # the server is gone too
    ci.assert_outcomes(passed=2)
    guide = (REPO / "docs" / "guides" / "testing.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n=+ llm_connect quality =+\n(.*?)```", guide, re.S)
    assert shown is not None
    assert [line.split() for line in shown.group(1).splitlines()] == [line.split() for line in summary(ci)]


# -- in a notebook -------------------------------------------------------------------------------------------


@pytest.mark.slow  # starts a Jupyter kernel
def test_assert_quality_in_a_notebook_cell_under_nbval(pytester):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbval")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("from llm_connect.testing import assert_quality\n"
                                  "check = assert_quality([True] * 58 + [False] * 2, at_least=0.8)\n"
                                  "check.verdict"),
        nbformat.v4.new_code_cell("assert_quality([0.3, 0.4, 0.5] * 10, at_least=0.8)"),
    ]
    nbformat.write(notebook, str(pytester.path / "gate.ipynb"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        result = pytester.runpytest_subprocess(*own_plugin(), "-p", "nbval", "-p", "no:cacheprovider",
                                               "--nbval-lax", "gate.ipynb", timeout=300)
    result.assert_outcomes(passed=1, failed=1)  # the passing cell, and the failing one reported by nbval
    result.stdout.fnmatch_lines(["*QualityNotMet*quality not met: mean score 0.400*lies below 0.8*"])
