"""Transcripts as a person sees them: the viewer, the report and the Labeller's item, in a real headless Chromium.

Each page holds a conversation and an agent run whose messages, tool name, call id, tool arguments, tool
result and documents carry markup meant to run (``<script>``, an ``onerror`` handler, ``</details>`` to break
out of a block, ``</template>`` to break out of the viewer's template). The checks: the transcript renders
(roles, the tool call with its arguments, the result linked to its call), its blocks open and close on a
click, the link to a call goes to it, and no injected script ran (``window.__pwned`` stays unset). The
Labeller's item and the transcript alone are loaded as plain pages without any Content-Security-Policy, so
only the escaping stands between the data and the browser.
"""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from llm_connect import QualityLedger
from llm_connect.calibration import calibrate
from llm_connect.grading import FunctionJudge
from llm_connect.labelling import Labeller
from llm_connect.views._transcript import TRANSCRIPT_CSS, transcript_html

pytestmark = pytest.mark.slow

INJECT = ("<script>window.__pwned='script'</script></details></template>"
          "<img src=x onerror=\"window.__pwned='img'\">'\"")


def hostile_rows(n: int = 6) -> list[dict]:
    rows = []
    for i in range(n):
        call = {"id": f"call-{i}{INJECT}", "type": "function",
                "function": {"name": f"search{INJECT}", "arguments": {f"q{INJECT}": INJECT, "n": i}}}
        run = [{"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": call["id"], "content": f"result {i} {INJECT}"},
               {"role": "assistant", "content": f"answer {i} {INJECT}"}]
        rows.append({"id": f"run-{i}", "prompt": f"question {i}", "baseline": f"answer {i}", "candidate": run,
                     "messages": [{"role": "system", "content": f"system {INJECT}"},
                                  {"role": "user", "content": f"question {i} {INJECT}"}],
                     "context": [f"document {INJECT}", "Rain is forecast."], "conversation_id": f"conv-{i // 2}",
                     "turn": i % 2, "human": "yes" if i % 2 else "no", "candidate_model": "m"})
    return rows


@pytest.fixture(scope="module")
def browser(open_chromium):
    """The session's Chromium (tests/views/conftest.py), 1400x900."""
    return open_chromium(1400, 900)


def plain_page(path, body: str) -> str:
    """A page with no Content-Security-Policy: only the escaping keeps the data inert."""
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                    encoding="utf-8")
    return path.as_uri()


def nothing_ran(driver) -> None:
    assert driver.execute_script("return window.__pwned === undefined"), driver.execute_script(
        "return window.__pwned")
    # no element came from the data (the report's own figures are data: images)
    assert driver.execute_script("return Array.from(document.images).filter(i => !i.src.startsWith('data:'))"
                                 ".length") == 0


def check_transcript(driver, root: str) -> None:
    """Roles, the call and its arguments, the result linked to its call, blocks that open and close on a click."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.CSS_SELECTOR, root)
    transcript = box.find_element(By.CSS_SELECTOR, ".llmc-transcript")
    roles = [e.get_attribute("textContent") for e in transcript.find_elements(By.CSS_SELECTOR, "summary .llmc-role")]
    assert roles[:5] == ["system", "user", "assistant", "tool", "assistant"], roles
    assert "context" in roles and "document 1" in roles
    tool = transcript.find_element(By.CSS_SELECTOR, ".llmc-call .llmc-tool").get_attribute("textContent")
    assert tool == f"search{INJECT}"  # the name is text, whole
    args = transcript.find_element(By.CSS_SELECTOR, ".llmc-call .llmc-args").get_attribute("textContent")
    assert '"n": ' in args and "window.__pwned" in args
    # every block parsed as drawn: the data's </details> closed none of them
    n_open = driver.execute_script(
        "return arguments[0].querySelectorAll('details').length", transcript)
    assert n_open == transcript.get_attribute("innerHTML").count("<details")
    # the user's message is open; a click on its summary closes it, another opens it
    user = transcript.find_element(By.CSS_SELECTOR, "details.llmc-role-user")
    assert user.get_attribute("open") is not None
    user.find_element(By.TAG_NAME, "summary").click()
    assert user.get_attribute("open") is None
    user.find_element(By.TAG_NAME, "summary").click()
    assert user.get_attribute("open") is not None
    # the context is collapsed: its documents are not shown until it is opened
    context = transcript.find_element(By.CSS_SELECTOR, "details.llmc-context")
    doc = context.find_element(By.CSS_SELECTOR, "details.llmc-doc pre")
    assert context.get_attribute("open") is None and not doc.is_displayed()
    context.find_element(By.TAG_NAME, "summary").click()
    assert context.get_attribute("open") is not None
    # the tool result names its call and links to it
    link = transcript.find_element(By.CSS_SELECTOR, "details.llmc-role-tool a.llmc-call-link")
    target = link.get_attribute("href").split("#", 1)[1]
    call = transcript.find_element(By.CSS_SELECTOR, ".llmc-call")
    assert call.get_attribute("id") == target and link.get_attribute("textContent") == tool
    nothing_ran(driver)


def test_a_transcript_alone_renders_collapses_and_runs_nothing(browser, tmp_path):
    row = hostile_rows(1)[0]
    body = f"<style>{TRANSCRIPT_CSS}</style><div id='box'>" + str(transcript_html(
        row["messages"], reply=row["candidate"], reference=row["baseline"], context=row["context"],
        style=False)) + "</div>"
    browser.get(plain_page(tmp_path / "t.html", body))
    check_transcript(browser, "#box")


def test_the_viewer_shows_a_run_as_a_transcript(browser, tmp_path):
    from selenium.webdriver.common.by import By

    judge = FunctionJudge(lambda b, c: 0.5, grader_id="half")
    report = calibrate([judge], hostile_rows(), human="human", n_boot=20, progress=False)
    page = report.view().save(tmp_path / "viewer.html")
    browser.get(page.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#items tbody tr.item")
    assert len(rows) == 6
    rows[1].click()
    check_transcript(browser, "#detail-body")
    assert browser.find_element(By.CSS_SELECTOR, "#detail-body .llmc-reply").is_displayed()
    rows[2].click()  # another item: its own transcript replaces the first
    assert len(browser.find_elements(By.CSS_SELECTOR, "#detail-body .llmc-transcript")) == 1
    nothing_ran(browser)


def test_the_report_shows_transcripts(browser, tmp_path):
    from selenium.webdriver.common.by import By

    judge = FunctionJudge(lambda b, c: 0.9 if c.startswith("answer 2") else 0.1, grader_id="likes-2")
    report = calibrate([judge], hostile_rows(), human="human", n_boot=20, progress=False)
    browser.get(report.to_html(tmp_path / "report.html").as_uri())
    items = browser.find_elements(By.CSS_SELECTOR, "details.llmc-item")
    assert items and items[0].get_attribute("open") is None
    items[0].find_element(By.TAG_NAME, "summary").click()
    browser.execute_script("arguments[0].id = 'first-item'", items[0])
    check_transcript(browser, "#first-item")
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


def test_the_labeller_shows_a_turn_and_a_whole_conversation(browser, tmp_path):
    from selenium.webdriver.common.by import By

    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    turn = Labeller(hostile_rows(), ledger=ledger, task_type="runs", annotator="a", seed=0, hold_seconds=0)
    browser.get(plain_page(tmp_path / "turn.html", turn.item_html()))
    check_transcript(browser, ".llmc-conversation")
    whole = Labeller(hostile_rows(), ledger=ledger, task_type="runs", annotator="a", seed=0, hold_seconds=0,
                     unit="conversation")
    browser.get(plain_page(tmp_path / "whole.html", whole.item_html()))
    text = browser.find_element(By.CSS_SELECTOR, ".llmc-unit").text
    assert text.startswith("Label the whole conversation (conv-")
    roles = [e.get_attribute("textContent") for e in browser.find_elements(By.CSS_SELECTOR,
                                                                           ".llmc-transcript summary .llmc-role")]
    assert roles.count("tool") == 2 and roles.count("user") == 2  # both turns, each message once
    nothing_ran(browser)
