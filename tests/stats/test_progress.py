"""Progress bars: quiet when asked (``progress=False`` turns every bar off, a provider batch's polling bar
included), a live bar on a terminal, and a few plain lines -- never carriage-return redraws -- in a log."""

from __future__ import annotations

import io

import pytest

from llm_connect import ExactMatchJudge, LLMJudge, judge_many
from llm_connect.adapters import BatchOptions, OpenAICompatibleAdapter
from llm_connect.calibration import calibrate
from llm_connect.stats._progress import LOG_STEPS, progress_bar
from llm_connect.testing import LoopbackServer, ScriptedAdapter

POLL_FAST = {"poll_interval_s": 0.0, "poll_max_interval_s": 0.01}  # the default progress=True left as it is


def items(n: int) -> list[dict]:
    return [{"id": i, "prompt": f"question {i}?", "baseline": f"answer {i}", "candidate": f"answer {i % 3}"}
            for i in range(n)]


def test_progress_false_silences_the_provider_batch_bar_too(capfd):
    with LoopbackServer(batch={"polls": 3}) as server:
        judge = LLMJudge(OpenAICompatibleAdapter("gpt-4o-mini", base_url=server.base_url, max_retries=0))
        quiet = judge_many(judge, items(12), progress=False, batch=BatchOptions(**POLL_FAST))
        assert quiet.attrs["batch"]["rounds"] == 1 and (quiet["status"] == "scored").all()
        assert capfd.readouterr().err == ""
        report = calibrate(judge, items(12), progress=False, probes=None, n_boot=0,
                           batch=BatchOptions(**POLL_FAST))
        assert report.meta.usage["llm-judge"]["scored"] == 12
        assert capfd.readouterr().err == ""
        judge_many(judge, items(12), progress=True, batch=BatchOptions(**POLL_FAST))  # asked for: shown
        assert "batch round 1" in capfd.readouterr().err


def test_in_a_log_a_bar_writes_a_few_plain_lines_not_a_redraw_per_tick(capfd):
    slow = LLMJudge(ScriptedAdapter(['{"quality_score": 1}'], cycle=True, latency_s=0.003))
    df = judge_many(slow, items(300), concurrency=1, progress=True)
    assert (df["status"] == "scored").all()
    err = capfd.readouterr().err  # stderr is a pipe here, as in CI or a redirected job
    assert "\r" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert 2 <= len(lines) <= LOG_STEPS + 2, lines
    assert "300/300" in lines[-1]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_bar_is_live_and_show_false_writes_nothing():
    terminal = _Terminal()
    with progress_bar(50, desc="judging", file=terminal) as bar:
        for _ in range(50):
            bar.update(1)
    assert "\r" in terminal.getvalue() and "50/50" in terminal.getvalue()
    log = io.StringIO()
    with progress_bar(1000, desc="judging", file=log) as bar:
        for _ in range(1000):
            bar.update(1)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) <= LOG_STEPS + 2 and "1000/1000" in lines[-1]
    off = io.StringIO()
    with progress_bar(10, desc="judging", show=False, file=off) as bar:
        bar.update(10)
    assert off.getvalue() == ""


@pytest.mark.parametrize("progress", [False, True])
def test_a_batch_of_exact_match_follows_the_switch(capfd, progress):
    judge_many(ExactMatchJudge(), items(40), progress=progress)
    err = capfd.readouterr().err
    assert ("40/40" in err) is progress and "\r" not in err
