"""The one transcript renderer (views/_transcript.py): structure and escaping, read back with an HTML parser.

What a browser makes of it (collapsing, no injected script running) is tests/views/test_transcript_browser.py's.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pytest

from llm_connect.views._transcript import has_transcript, transcript_html

EVIL = "<script>window.__pwned=1</script></details><img src=x onerror=\"window.__pwned=2\">'\"&amp;"


class Tree(HTMLParser):
    """Every element with its attributes and the text directly inside it; the tags seen."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self.stack: list[dict] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": "", "parent": self.stack[-1] if self.stack else None}
        self.elements.append(element)
        if tag not in ("img", "br", "input", "meta"):
            self.stack.append(element)

    def handle_endtag(self, tag):
        opened = self.stack[-1]["tag"] if self.stack else None
        assert opened == tag, f"</{tag}> closes <{opened}>"
        self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.stack[-1]["text"] += data

    def find(self, tag=None, cls=None):
        return [e for e in self.elements if (tag is None or e["tag"] == tag)
                and (cls is None or cls in e["attrs"].get("class", "").split())]

    def texts(self):
        return "".join(e["text"] for e in self.elements)


def agent_run(payload: str = "Paris"):
    messages = [{"role": "system", "content": "You answer with tools."},
                {"role": "user", "content": f"Weather in {payload}?"}]
    reply = [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather",
                                                               "arguments": json.dumps({"city": payload, "days": 2})}},
            {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": {"q": payload}}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": f"found {payload}"},
        {"role": "tool", "tool_call_id": "call_1", "content": f"rain in {payload}"},
        {"role": "assistant", "content": f"It rains in {payload}."},
    ]
    return messages, reply


def test_roles_calls_results_and_documents_are_drawn():
    messages, reply = agent_run()
    tree = Tree(transcript_html(messages, reply=reply, reference="Rain.", context=["doc one", "doc two"]))
    roles = [e["text"] for e in tree.find("span", "llmc-role")]
    assert roles[:6] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert roles[-3:] == ["context", "document 1", "document 2"]
    # every message a collapsible block with a summary
    blocks = tree.find("details", "llmc-msg")
    assert len(blocks) == 7  # 2 before, 4 in the reply, 1 reference
    assert all(any(e["tag"] == "summary" and e["parent"] is b for e in tree.elements) for b in blocks)
    # the tool calls with their names, ids and pretty-printed arguments
    calls = tree.find("div", "llmc-call")
    assert [c["attrs"]["id"] for c in calls] and len({c["attrs"]["id"] for c in calls}) == 2
    assert [e["text"] for e in tree.find("span", "llmc-tool")] == ["weather", "search"]
    assert [e["text"] for e in tree.find("span", "llmc-call-id")] == ["call_1", "call_2"]
    args = [json.loads(e["text"]) for e in tree.find("pre", "llmc-args")]
    assert args == [{"city": "Paris", "days": 2}, {"q": "Paris"}]
    assert "\n  \"city\": \"Paris\"" in tree.find("pre", "llmc-args")[0]["text"]  # indented, one key a line
    # each result links to the call it answers, by tool_call_id (not by position)
    links = tree.find("a", "llmc-call-link")
    by_id = {c["attrs"]["id"]: c for c in calls}
    assert [(by_id[a["attrs"]["href"][1:]] is calls[k], a["text"]) for a, k in zip(links, (1, 0), strict=True)] \
        == [(True, "search"), (True, "weather")]
    # the reply and the reference in their own blocks, the context collapsed
    assert tree.find("div", "llmc-reply") and tree.find("div", "llmc-reference")
    context = tree.find("details", "llmc-context")
    assert len(context) == 1 and "open" not in context[0]["attrs"]
    assert [d["attrs"].get("open") for d in tree.find("details", "llmc-doc")] == [None, None]
    # the messages before the reply: a tool result there is collapsed, the others open
    assert all("open" in b["attrs"] for b in blocks[:2])


@pytest.mark.parametrize("where", ["content", "tool name", "call id", "argument key", "argument value",
                                   "tool result", "document", "reply", "reference", "role"])
def test_every_untrusted_string_is_escaped(where):
    messages = [{"role": "user", "content": EVIL if where == "content" else "hi"}]
    call = {"id": EVIL if where == "call id" else "c1", "type": "function",
            "function": {"name": EVIL if where == "tool name" else "search",
                         "arguments": {EVIL if where == "argument key" else "q": EVIL if where == "argument value"
                                       else "x"}}}
    reply = [{"role": "assistant", "content": None, "tool_calls": [call]},
             {"role": "tool", "tool_call_id": call["id"], "content": EVIL if where == "tool result" else "ok"},
             {"role": "assistant", "content": EVIL if where == "reply" else "done"}]
    if where == "role":
        messages = [{"role": EVIL, "content": "hi"}]
    markup = transcript_html(messages, reply=reply, reference=EVIL if where == "reference" else "ref",
                             context=[EVIL if where == "document" else "doc"])
    tree = Tree(markup)  # parses with every tag closed where it was opened: no </details> from data
    assert not tree.find("script") and not tree.find("img")
    assert not any(k.startswith("on") for e in tree.elements for k in e["attrs"])
    assert EVIL in tree.texts() or json.dumps(EVIL)[1:-1] in tree.texts()  # shown as text, whole
    assert "<script>" not in markup.replace("&lt;script&gt;", "")
    n_details = markup.count("<details")
    assert n_details == len(tree.find("details"))


def test_bad_arguments_and_an_orphan_result_are_shown_and_marked():
    reply = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "calc", "arguments": "{'x': 1"}}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "42"}]
    tree = Tree(transcript_html(None, reply=reply))
    bad = tree.find("div", "llmc-bad-args")
    assert len(bad) == 1 and tree.find("pre", "llmc-args")[0]["text"] == "{'x': 1"
    assert "not valid JSON" in tree.texts()
    orphan = tree.find("details", "llmc-orphan")
    assert len(orphan) == 1 and "unknown call" in tree.texts() and "zzz" in tree.texts()


def test_messages_that_are_not_chat_messages_are_drawn_with_the_reason():
    tree = Tree(transcript_html([{"role": "robot", "content": "beep"}, "plain"]))
    assert "unknown role" in tree.find("div", "llmc-note")[0]["text"]
    assert "beep" in tree.texts() and "plain" in tree.texts()


def test_arrays_and_json_cells_are_read_and_a_text_reply_stays_text():
    messages, _reply = agent_run()
    from_array = Tree(transcript_html(np.array(messages, dtype=object), context=np.array(["d"], dtype=object)))
    from_json = Tree(transcript_html(json.dumps(messages), context=json.dumps(["d"])))
    assert [e["text"] for e in from_array.find("span", "llmc-role")] == ["system", "user", "context", "document 1"]
    assert [e["text"] for e in from_json.find("span", "llmc-role")] == ["system", "user", "context", "document 1"]
    text = Tree(transcript_html(None, reply="[1, 2] is the answer"))
    assert [e["text"] for e in text.find("pre", "llmc-content")] == ["[1, 2] is the answer"]


def test_ids_differ_between_transcripts_and_come_from_no_data():
    messages, reply = agent_run('"><x id=evil')
    ids = [e["attrs"]["id"] for e in Tree(transcript_html(messages, reply=reply) + transcript_html(
        messages, reply=reply)).elements if "id" in e["attrs"]]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert all(i.startswith("llmc-") and all(ch.isalnum() or ch == "-" for ch in i) for i in ids)


def test_has_transcript():
    assert not has_transcript(messages=None, reply="text", reference="ref", context=None)
    assert not has_transcript(messages=float("nan"), reply="text", context=[])
    assert has_transcript(messages=[{"role": "user", "content": "x"}])
    assert has_transcript(reply=[{"role": "assistant", "content": "x"}])
    assert has_transcript(reference=np.array([{"role": "assistant", "content": "x"}], dtype=object))
    assert has_transcript(context=["doc"])
