"""The judgment viewer: judgments.jsonl from a real calibration, the page's escaping, ``report.view()``,
``llm-connect view`` (written and served), and the page driven in a real headless Chromium.

The calibration runs the package's test doubles (a scripted LLM judge, a deterministic embedder,
exact match) over a few items, some of them hostile: markup in a candidate, ``</script>`` in an
answer and in an id, a judge reply holding a script, a refusal (unscored), U+2028 in a prompt.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.client
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import matplotlib
import pytest

matplotlib.use("Agg")

from llm_connect.calibration import calibrate
from llm_connect.cli import main
from llm_connect.errors import ValidationError
from llm_connect.grading import EmbeddingSimilarityJudge, ExactMatchJudge, LLMJudge
from llm_connect.testing import DeterministicEmbedder, ScriptedAdapter
from llm_connect.views.judgments import (
    JUDGMENTS_FILE,
    judgment_records,
    read_judgments,
    write_judgments,
)
from llm_connect.views.viewer import JudgmentViewer, viewer_html

HOSTILE_IMG = "<img src=x onerror=\"window.__pwned=1;alert(1)\">"
HOSTILE_ID = "q7</script><script>window.__pwned=2</script>"
REPLY_SCRIPT = "<script>window.__pwned=3</script>"

ROWS = [
    {"id": "q0", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Paris", "human": "yes",
     "topic": "geo"},
    {"id": "q1", "prompt": "Capital of France?", "baseline": "Paris", "candidate": HOSTILE_IMG, "human": "no",
     "topic": "geo"},
    {"id": "q2", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "It is </script> Rome, surely.",
     "human": "yes", "topic": "geo"},
    {"id": "q3", "prompt": "Please refuse: capital of Spain?", "baseline": "Madrid", "candidate": "Madrid",
     "human": "yes", "topic": "geo"},
    {"id": "q4", "prompt": "2 + 2?", "baseline": "4", "candidate": "five", "human": "no", "topic": "math"},
    {"id": "q5", "prompt": "3 + 3?", "baseline": "6", "candidate": "Six, I think Paris", "human": "yes",
     "topic": "math"},
    {"id": "q6", "prompt": "Largest planet?\u2028(one word)", "baseline": "Jupiter", "candidate": "Jupiter",
     "human": "yes", "topic": "space"},
    {"id": HOSTILE_ID, "prompt": "Smallest planet?", "baseline": "Mercury", "candidate": "Pluto", "human": "no",
     "topic": "space"},
]


def reply(prompt: str, run_config) -> str:
    """A judge that likes 'Paris' anywhere in the answer, refuses one item, and echoes markup."""
    candidate = prompt.split("Candidate answer:", 1)[1]
    if "Please refuse" in prompt:
        return "I cannot grade this."
    if "Pluto" in candidate:
        return json.dumps({"notes": REPLY_SCRIPT, "quality_score": 0.9})
    score = 0.9 if ("Paris" in candidate or "Jupiter" in candidate) else 0.2
    return json.dumps({"notes": "checked <b>bold</b>", "quality_score": score})


@pytest.fixture(scope="module")
def run():
    adapter = ScriptedAdapter(reply, model_id="scripted-judge")
    judges = [ExactMatchJudge(), EmbeddingSimilarityJudge(DeterministicEmbedder()), LLMJudge(adapter, seed=0)]
    report = calibrate(judges, ROWS, human="human", probes="length,injection", n_boot=50, progress=False)
    return report, adapter


@pytest.fixture(scope="module")
def records(run):
    return judgment_records(run[0])


def items_of(records):
    return [r for r in records if r["kind"] == "item"]


# -- the records ---------------------------------------------------------------------------------------


def test_records_hold_every_judgment(run, records):
    adapter = run[1]
    meta = records[0]
    assert meta["kind"] == "meta" and meta["format"] == "llm-connect-judgments" and meta["version"] == 1
    assert meta["judges"] == ["exact-match", "embedding-similarity", "llm-judge"]
    assert meta["labels"] == ["human"] and meta["people"] == "human" and meta["fields"] == ["topic"]
    assert meta["probes"] == ["length", "injection"] and meta["n_items"] == len(ROWS)
    items = items_of(records)
    assert [i["id"] for i in items] == [r["id"] for r in ROWS] and [i["row"] for i in items] == list(range(8))
    assert [i["candidate"] for i in items] == [r["candidate"] for r in ROWS]
    assert items[6]["prompt"] == "Largest planet?\u2028(one word)" and items[0]["fields"] == {"topic": "geo"}
    assert [i["labels"]["human"] for i in items] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    refused = items[3]["judges"]["llm-judge"]
    assert refused["status"] == "unscored" and refused["score"] is None and refused["disagrees"] is None
    assert refused["raw_reply"] == "I cannot grade this."  # what the judge said, kept for audit
    exact = items[0]["judges"]["exact-match"]
    assert exact["score"] == 1.0 and exact["raw_reply"] is None and exact["judge_prompt"] is None
    # every LLM judgment keeps the judge's exact prompt and raw reply: those the adapter really saw and gave
    seen = {c.prompt for c in adapter.calls}
    for item in items:
        llm = item["judges"]["llm-judge"]
        assert llm["judge_prompt"] in seen, item["id"]
        assert llm["raw_reply"] == reply(llm["judge_prompt"], None)
    # disagreement with people: the verdict at the threshold against the human label
    llm = [i["judges"]["llm-judge"] for i in items]
    assert [j["disagrees"] for j in llm] == [False, False, True, None, False, False, False, True]
    assert llm[7]["gap"] == pytest.approx(0.9) and llm[1]["gap"] == pytest.approx(0.2)


def test_the_prompt_sent_is_kept_for_pairwise_system_prompted_and_unscored_judgments():
    from llm_connect.calibration._runner import _judge_items as judge_items  # calibration's run of one judge
    from llm_connect.calibration._runner import items_table
    from llm_connect.grading import PairwiseJudge

    items = items_table(ROWS[:3])
    pair_adapter = ScriptedAdapter(['{"notes": "n", "winner": "A"}'], cycle=True)
    pair = judge_items(PairwiseJudge(pair_adapter), items, progress=False)
    sent = set(pair_adapter.prompts)
    for shown, candidate in zip(pair["judge_prompt"], items["candidate"], strict=True):
        m = re.fullmatch(r"\[baseline-first\]\n(.*)\n\n\[candidate-first\]\n(.*)", shown, re.S)
        assert m and {m[1], m[2]} <= sent and candidate in m[1] and candidate in m[2]
    # a yes-no judge sends a system message; a reply without logprobs is unscored, and its prompt is still kept
    local = ScriptedAdapter(["yes"], cycle=True)
    rows = judge_items(LLMJudge(local, scoring="yes-no"), items, progress=False)
    assert (rows["status"] == "unscored").all() and rows["raw_reply"].tolist() == ["yes"] * 3
    for call, shown in zip(local.calls, rows["judge_prompt"], strict=True):
        assert shown == f"[system]\n{call.run_config.system_prompt}\n\n[user]\n{call.prompt}"
    exact = judge_items(ExactMatchJudge(), items, progress=False)
    assert exact["judge_prompt"].isna().all() and exact["raw_reply"].isna().all()


def test_probe_records_point_at_their_items(records):
    items = items_of(records)
    probes = [r for r in records if r["kind"] == "probe"]
    assert {(p["probe"], p["judge"]) for p in probes} == {
        (p, j) for p in ("length", "injection") for j in ("exact-match", "embedding-similarity", "llm-judge")}
    for p in probes:
        item = items[p["row"]]
        assert p["id"] == item["id"]
        assert p["perturbed_candidate"].startswith(item["candidate"]) and p["perturbed_candidate"] != item["candidate"]
        assert p["original"] == item["judges"][p["judge"]]["score"]
    injected = [p for p in probes if p["probe"] == "injection" and p["judge"] == "llm-judge" and p["row"] == 4]
    assert len(injected) == 1 and injected[0]["flipped"] is False


def test_the_file_round_trips_in_ascii(run, records, tmp_path):
    path = write_judgments(run[0], tmp_path / JUDGMENTS_FILE)
    raw = path.read_bytes()
    assert raw.isascii() and raw.count(b"\n") == len(records)
    assert read_judgments(path) == json.loads(json.dumps(records))


def test_a_foreign_or_broken_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "judgments.jsonl"
    bad.write_text('{"kind": "item"}\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="not an llm-connect judgments file"):
        read_judgments(bad)
    bad.write_text('{"kind": "meta", "format": "llm-connect-judgments", "version": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="line 2 is not JSON"):
        read_judgments(bad)
    bad.write_text('{"kind": "meta", "format": "llm-connect-judgments", "version": 99}\n', encoding="utf-8")
    with pytest.raises(ValidationError, match="version 99"):
        read_judgments(bad)
    bad.write_text('{"kind": "meta", "format": "llm-connect-judgments", "version": 1}\n{"kind": "item"}\n',
                   encoding="utf-8")
    with pytest.raises(ValidationError, match="line 2: an item needs its 'row'"):
        read_judgments(bad)
    with pytest.raises(ValidationError, match=r"no judgments\.jsonl"):
        read_judgments(tmp_path / "none" / "judgments.jsonl")


# -- the page ------------------------------------------------------------------------------------------

DATA = re.compile(r"<script type='application/json' id='judgments-data'>(.*?)</script>", re.S)


def test_the_page_embeds_the_records_safely(records):
    page = viewer_html(records)
    data = DATA.findall(page)
    assert len(data) == 1
    embedded = data[0]
    assert not set(embedded) & set("<>&\u2028\u2029") and embedded.isascii()
    assert json.loads(embedded) == json.loads(json.dumps(records))
    # the only markup is the page's own: two script elements, no element from data
    assert page.count("<script") == 2 and page.lower().count("</script") == 2
    assert "<img" not in page and "\\u003cimg src=x onerror" in embedded


def test_the_policy_allows_only_the_pages_own_script(records):
    page = viewer_html(records)
    script = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(script) == 1
    digest = base64.b64encode(hashlib.sha256(script[0].encode()).digest()).decode()
    policy = html.unescape(re.search(r"http-equiv='Content-Security-Policy' content='([^']*)'", page)[1])
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]


def test_view_shows_the_page_in_a_sandboxed_iframe(run):
    viewer = run[0].view(title="Judgments <b>of the day</b>")
    assert isinstance(viewer, JudgmentViewer)
    shown = viewer._repr_html_()
    assert shown.startswith("<iframe") and "sandbox='allow-scripts'" in shown and "allow-same-origin" not in shown
    srcdoc = re.search(r"srcdoc='([^']*)'", shown)[1]
    assert "<" not in srcdoc and html.unescape(srcdoc) == viewer.html
    assert "<title>Judgments &lt;b&gt;of the day&lt;/b&gt;</title>" in viewer.html
    assert "8 items" in repr(viewer)


# -- the command line ------------------------------------------------------------------------------------


def test_view_without_judgments_names_the_command_that_writes_them(tmp_path, capsys):
    (tmp_path / "scores.csv").write_text("id\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["view", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "no judgments.jsonl" in err and "llm-connect calibrate" in err
    with pytest.raises(SystemExit) as info:
        main(["view", str(tmp_path / "missing")])
    assert info.value.code == 2


def test_calibrate_writes_judgments_and_view_writes_the_page(tmp_path, capsys):
    data = tmp_path / "items.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out = tmp_path / "out"
    code = main(["calibrate", str(data), "--out", str(out), "--judges", "exact", "--probes", "length",
                 "--n-boot", "50", "--no-progress"])
    assert code == 0
    records = read_judgments(out / JUDGMENTS_FILE)
    assert records[0]["judges"] == ["exact-match"] and len(items_of(records)) == len(ROWS)
    assert items_of(records)[1]["candidate"] == HOSTILE_IMG  # the file keeps the text; the page escapes it
    assert main(["view", str(out)]) == 0
    page = (out / "viewer.html").read_text(encoding="utf-8")
    assert DATA.search(page) and "<img" not in page
    assert main(["view", str(out), "--out", str(tmp_path / "elsewhere" / "v.html")]) == 0
    assert (tmp_path / "elsewhere" / "v.html").read_text(encoding="utf-8") == page
    assert "wrote" in capsys.readouterr().out


def test_view_serves_only_the_page_on_localhost(run, tmp_path):
    write_judgments(run[0], tmp_path / JUDGMENTS_FILE)
    proc = subprocess.Popen([sys.executable, "-m", "llm_connect.cli", "view", str(tmp_path), "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.match(r"serving (http://127\.0\.0\.1:\d+/)(\?token=[\w-]+) ", line)
        assert m, line + proc.stderr.read()
        with urllib.request.urlopen(m[1] + m[2], timeout=10) as response:
            body = response.read().decode("utf-8")
            assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert body == viewer_html(read_judgments(tmp_path / JUDGMENTS_FILE))
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(m[1] + JUDGMENTS_FILE + m[2], timeout=10)
        assert info.value.code == 404
        info.value.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


# -- in a real browser ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(open_chromium):
    """The session's Chromium (tests/views/conftest.py), 1400x900, its console log read away."""
    return open_chromium(1400, 900)


def visible_ids(driver):
    from selenium.webdriver.common.by import By

    return [tr.find_element(By.CSS_SELECTOR, "td.id").text for tr in driver.find_elements(By.CSS_SELECTOR,
                                                                                          "#items tbody tr.item")]


def choose(driver, select_id, value):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


@pytest.mark.slow
def test_the_page_in_chromium_filters_sorts_opens_and_runs_nothing_injected(run, records, browser, tmp_path):
    from selenium.webdriver.common.by import By

    page = JudgmentViewer.from_records(records).save(tmp_path / "viewer.html")
    browser.get(page.as_uri())  # from file://, as a user opens it
    items = items_of(records)
    ids = [i["id"] for i in items]
    assert visible_ids(browser) == ids
    assert browser.find_element(By.ID, "count").text == "showing 8 of 8 items"

    choose(browser, "filter-judge", "llm-judge")
    choose(browser, "filter-status", "unscored")
    assert visible_ids(browser) == ["q3"]
    choose(browser, "filter-status", "")
    choose(browser, "filter-people", "disagree")
    disagree = [i["id"] for i in items if i["judges"]["llm-judge"]["disagrees"]]
    assert visible_ids(browser) == disagree == ["q2", HOSTILE_ID]
    assert browser.find_element(By.ID, "count").text == "showing 2 of 8 items (2 match)"
    choose(browser, "filter-people", "")
    choose(browser, "sort", "disagreement")
    by_gap = sorted(items, key=lambda i: -(i["judges"]["llm-judge"]["gap"] if i["judges"]["llm-judge"]["gap"]
                                            is not None else -1))
    assert visible_ids(browser) == [i["id"] for i in by_gap]
    choose(browser, "sort", "row")
    choose(browser, "filter-probe", "probed:length")
    probed = sorted({p["row"] for p in records if p["kind"] == "probe" and p["probe"] == "length"})
    assert visible_ids(browser) == [ids[r] for r in probed]
    choose(browser, "filter-probe", "")
    choose(browser, "filter-judge", "")
    assert visible_ids(browser) == ids

    # open the hostile item: the detail pane shows the judge's prompt and raw reply as text
    row = browser.find_elements(By.CSS_SELECTOR, "#items tbody tr.item")[1]
    row.click()
    detail = browser.find_element(By.ID, "detail")
    assert detail.is_displayed()
    assert detail.find_element(By.CSS_SELECTOR, "pre.candidate").text == HOSTILE_IMG
    llm = detail.find_element(By.CSS_SELECTOR, "section.judge[data-judge='llm-judge']")
    expected = items[1]["judges"]["llm-judge"]
    shown_prompt = llm.find_element(By.CSS_SELECTOR, "pre.judge-prompt").get_attribute("textContent")
    assert shown_prompt == expected["judge_prompt"] and "Candidate answer:" in shown_prompt
    assert llm.find_element(By.CSS_SELECTOR, "pre.raw-reply").get_attribute("textContent") == expected["raw_reply"]
    assert detail.find_elements(By.CSS_SELECTOR, "section.probes pre.perturbed")

    browser.find_elements(By.CSS_SELECTOR, "#items tbody tr.item")[7].click()  # the id holding </script>
    llm = browser.find_element(By.CSS_SELECTOR, "#detail section.judge[data-judge='llm-judge']")
    assert llm.find_element(By.CSS_SELECTOR, "pre.raw-reply").get_attribute("textContent") == items[7]["judges"][
        "llm-judge"]["raw_reply"]
    assert REPLY_SCRIPT in browser.find_element(By.ID, "detail").text

    # nothing from the data became markup, and nothing ran
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.scripts.length") == 2
    assert browser.execute_script("return document.querySelectorAll('img, iframe, object, embed, b').length") == 0
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []  # no script error, no blocked resource (an injected element would try to load)


@pytest.mark.slow
def test_the_page_keeps_up_with_many_items(browser, tmp_path):
    """Two thousand items render and filter without the page stalling."""
    from selenium.webdriver.common.by import By

    meta = {"kind": "meta", "format": "llm-connect-judgments", "version": 1, "title": "many", "n_items": 3000,
            "judges": ["j"], "labels": ["human"], "people": "human", "thresholds": {"j": 0.5, "human": 0.5},
            "probes": [], "fields": []}
    items = [{"kind": "item", "row": i, "id": f"i{i}", "prompt": "p" * 200, "baseline": "b", "candidate": "c" * 300,
              "candidate_model": None, "fields": {}, "labels": {"human": float(i % 2)}, "people": float(i % 2),
              "judges": {"j": {"score": 0.9, "status": "scored", "notes": "", "raw_reply": "r", "judge_prompt": "q",
                               "verdict": True, "disagrees": i % 2 == 0, "gap": 0.9 - i % 2}}}
             for i in range(3000)]
    page = JudgmentViewer.from_records([meta, *items]).save(tmp_path / "many.html")
    browser.get(page.as_uri())
    assert browser.find_element(By.ID, "count").text == "showing 2000 of 3000 items"
    start = time.perf_counter()
    choose(browser, "filter-people", "disagree")
    assert browser.find_element(By.ID, "count").text == "showing 1500 of 3000 items (1500 match)"
    assert time.perf_counter() - start < 10


# -- conversations and agent runs ---------------------------------------------------------------------

RUN_SCRIPT = "<script>window.__pwned=4</script></details></template>"


def conversation_rows():
    """Two turns of a conversation (the second an agent run with a reference run and documents) and a plain item."""
    call = {"id": "call-1", "type": "function", "function": {"name": "search", "arguments": '{"q": "rain"}'}}
    run = [{"role": "assistant", "content": None, "tool_calls": [call]},
           {"role": "tool", "tool_call_id": "call-1", "content": RUN_SCRIPT},
           {"role": "assistant", "content": "It will rain."}]
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    return [
        {"id": "t0", "prompt": "Hi", "baseline": "Hello", "candidate": "Hello!", "messages": first,
         "conversation_id": "c1", "turn": 0, "human": "yes"},
        {"id": "t1", "prompt": "Rain?", "baseline": [*run[:2], {"role": "assistant", "content": "Rain."}],
         "candidate": run, "messages": [*first, {"role": "assistant", "content": "Hello!"},
                                        {"role": "user", "content": "Rain?"}],
         "context": [RUN_SCRIPT, "Rain is forecast."], "conversation_id": "c1", "turn": 1, "human": "no"},
        {"id": "p0", "prompt": "2+2?", "baseline": "4", "candidate": "4", "human": "yes"},
    ]


@pytest.fixture(scope="module")
def conversation_records():
    from llm_connect.grading import FunctionJudge

    report = calibrate([FunctionJudge(lambda b, c: 0.5, grader_id="half")], conversation_rows(), human="human",
                       n_boot=20, progress=False)
    return judgment_records(report)


def test_records_of_a_conversation_hold_its_messages_runs_and_documents(conversation_records, tmp_path):
    rows = conversation_rows()
    meta, items = conversation_records[0], items_of(conversation_records)
    assert "messages" not in meta["fields"] and "context" not in meta["fields"]
    assert {"conversation_id", "turn"} <= set(meta["fields"])
    first, run, plain = items
    assert first["messages"] == rows[0]["messages"] and first["candidate_run"] is None
    assert first["candidate"] == "Hello!" and first["context"] is None
    assert run["candidate_run"] == rows[1]["candidate"] and run["baseline_run"] == rows[1]["baseline"]
    assert run["candidate"] == "It will rain." and run["baseline"] == "Rain."  # the final answers, for the table
    assert run["context"] == rows[1]["context"] and run["fields"]["conversation_id"] == "c1"
    assert not {"messages", "context", "candidate_run", "baseline_run"} & set(plain)
    path = write_judgments(conversation_records, tmp_path / JUDGMENTS_FILE)
    assert read_judgments(path) == json.loads(json.dumps(conversation_records))


def test_the_page_draws_each_transcript_once_escaped_in_a_template(conversation_records):
    page = viewer_html(conversation_records)
    embedded = json.loads(DATA.findall(page)[0])
    items = [r for r in embedded if r["kind"] == "item"]
    assert [r.get("transcript") for r in items] == [True, True, None]
    assert not any(k in r for r in items for k in ("messages", "context", "candidate_run", "baseline_run"))
    templates = re.findall(r"<template id='transcript-(\d+)'>(.*?)</template>", page, re.S)
    assert [t[0] for t in templates] == ["0", "1"]
    drawn = templates[1][1]
    assert "class='llmc-transcript'" in drawn and "llmc-call" in drawn and "llmc-context" in drawn
    assert "<script" not in drawn and "</template" not in drawn  # the data's </template> cannot end it
    assert drawn.count("<details") == drawn.count("</details>")  # nor its </details> a block
    # the run's tool result, the reference run's and the document: each in its summary's preview and its body
    assert drawn.count("&lt;script&gt;window.__pwned=4") == 3 * 2
    assert page.count("<script") == 2  # still only the page's own two


# -- view --serve answers only localhost, with a token -------------------------------------------------------


def test_view_serve_refuses_other_hosts_and_requests_without_its_token(tmp_path):
    """``llm-connect view OUT --serve`` answered any Host header: a web page whose name resolves to 127.0.0.1
    (DNS rebinding) could read every judgment."""
    from llm_connect.calibration import calibrate
    from llm_connect.views.judgments import JUDGMENTS_FILE, write_judgments

    rows = [{"id": "q0", "prompt": "Capital of France?", "baseline": "Paris", "candidate": "Paris", "human": "yes"},
            {"id": "q1", "prompt": "Capital of Italy?", "baseline": "Rome", "candidate": "Milan", "human": "no"}]
    report = calibrate([ExactMatchJudge()], rows, human="human", probes=[], n_boot=50, progress=False)
    write_judgments(report, tmp_path / JUDGMENTS_FILE)
    proc = subprocess.Popen([sys.executable, "-m", "llm_connect.cli", "view", str(tmp_path), "--serve", "--port",
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.match(r"serving http://127\.0\.0\.1:(\d+)/\?token=([\w-]{32,}) ", line)
        if not m:  # the page cannot be built from this file: say why
            proc.terminate()
            pytest.fail(line + proc.stderr.read())
        port, token = int(m[1]), m[2]

        def get(path: str, host: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.putrequest("GET", path, skip_host=True)
                conn.putheader("Host", host)
                conn.endheaders()
                response = conn.getresponse()
                response.read()
                return response.status
            finally:
                conn.close()

        good = f"/?token={token}"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert get(good, host) == 200, host
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"localhost:{port + 1}",
                     ""):
            assert get(good, host) == 403, host
        for path in ("/", "/?token=", f"/?token={token[:-1]}", f"/{JUDGMENTS_FILE}"):
            assert get(path, f"127.0.0.1:{port}") == 403, path
        assert get(f"/{JUDGMENTS_FILE}?token={token}", f"127.0.0.1:{port}") == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()

