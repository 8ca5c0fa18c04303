"""llm_connect.conversations: per_turn (one item per assistant reply, an agent's tool calls and final answer as one
trajectory), read_conversations (OpenAI chat JSON Lines; OTLP JSON GenAI spans in the current and the older
convention), and strict message checks whose errors say where."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_connect import TrajectoryMatchJudge, ValidationError, judge_many
from llm_connect.conversations import (
    CONVERSATION_KEY_PREFIX,
    TURN_COLUMNS,
    as_response,
    normalize_message,
    normalize_messages,
    per_turn,
    read_conversations,
)

SYSTEM = {"role": "system", "content": "You are helpful."}


def user(text):
    return {"role": "user", "content": text}


def said(text):
    return {"role": "assistant", "content": text}


def calls(*pairs):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in pairs]}


def result(call_id, text):
    return {"role": "tool", "tool_call_id": call_id, "content": text}


AGENT = [
    SYSTEM,
    user("Weather in Paris?"),
    calls(("c1", "weather", '{"city": "Paris"}')),
    result("c1", "rainy, 57F"),
    said("It is rainy in Paris."),
    user("And in Lyon?"),
    said("I can check: one moment."),
    calls(("c2", "weather", '{"city": "Lyon"}'), ("c3", "alerts", '{"city": "Lyon"}')),
    result("c2", "sunny"),
    result("c3", "none"),
    said("Sunny, no alerts."),
]


# -- per_turn ----------------------------------------------------------------------------------------------


def test_per_turn_gives_one_item_per_assistant_reply():
    chat = [SYSTEM, user("Hi"), said("Hello!"), user("2+2?"), said("4")]
    items = per_turn([{"id": "chat-1", "messages": chat, "label": "good"}])
    assert list(items.columns) == [*TURN_COLUMNS, "label"]
    assert items["candidate"].tolist() == ["Hello!", "4"]
    assert items["prompt"].tolist() == ["Hi", "2+2?"]
    assert items["turn"].tolist() == [0, 1] and items["turn"].dtype == "int64"
    assert items["conversation_id"].tolist() == ["chat-1", "chat-1"]
    assert items["label"].tolist() == ["good", "good"]
    assert items["messages"][0] == chat[:2] and items["messages"][1] == chat[:4]


def test_an_agent_turn_is_one_trajectory_up_to_the_next_user_message():
    items = per_turn([AGENT])
    assert len(items) == 2
    first, second = items["candidate"]
    assert [m["role"] for m in first] == ["assistant", "tool", "assistant"]
    assert first[0]["tool_calls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
    assert first[-1]["content"] == "It is rainy in Paris."
    assert [m["role"] for m in second] == ["assistant", "assistant", "tool", "tool", "assistant"]
    assert items["prompt"].tolist() == ["Weather in Paris?", "And in Lyon?"]
    assert len(items["messages"][1]) == 6  # everything before the second reply, the first trajectory included
    response = as_response(second)
    assert response.content == "Sunny, no alerts." and len(response.messages) == 5


def test_conversation_ids_come_from_the_data_else_from_the_messages():
    chat = [user("Hi"), said("Hello")]
    items = per_turn([{"conversation_id": "c9", "id": "x", "messages": chat}, {"id": 7, "messages": chat}, chat])
    assert items["conversation_id"][0] == "c9" and items["conversation_id"][1] == 7
    key = items["conversation_id"][2]
    assert key.startswith(CONVERSATION_KEY_PREFIX)
    # the key is the messages', never the position's: the same conversation elsewhere has the same key
    again = per_turn([[user("other"), said("x")], chat])
    assert again["conversation_id"][1] == key and again["conversation_id"][0] != key


def test_per_turn_takes_a_frame_and_carries_its_columns():
    frame = pd.DataFrame({"messages": [[user("a"), said("b")], [user("c"), said("d"), user("e"), said("f")]],
                          "context": [["doc 1"], ["doc 2", "doc 3"]], "annotator": ["ann", "bob"]})
    items = per_turn(frame)
    assert items["candidate"].tolist() == ["b", "d", "f"]
    assert items["context"].tolist() == [["doc 1"], ["doc 2", "doc 3"], ["doc 2", "doc 3"]]
    assert items["annotator"].tolist() == ["ann", "bob", "bob"]
    assert per_turn([]).columns.tolist() == list(TURN_COLUMNS)


def test_turns_judged_with_the_trajectory_judge():
    items = per_turn([AGENT])
    items["baseline"] = [items["candidate"][0], items["candidate"][0]]
    frame = judge_many(TrajectoryMatchJudge("superset"), items, progress=False)
    assert frame["quality_score"].tolist() == [1.0, 0.0]  # the second turn called weather for Lyon, not Paris


@pytest.mark.parametrize(("conversation", "where"), [
    ([user("a"), {"role": "bot", "content": "x"}], r"conversation 0: message 1: has the unknown role 'bot'"),
    ([user("a"), calls(("c", "f", "{}")), {"role": "tool", "content": "r"}],
     r"conversation 0: message 2: is a tool message without tool_call_id"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
     r"message 0: content part 0 has type 'image_url'; only text parts"),
    ([user("a"), result("c", "r")], r"message 1 is a tool result that follows no assistant message"),
    ([user("a"), {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                       "function": {"arguments": "{}"}}]}],
     r"message 1: tool call 0: has no function name"),
    ([user("a"), {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}],
     r"message 1: uses the legacy function_call"),
    ([{"role": "user", "content": "a", "tool_calls": [{"id": "c"}]}], r"message 0: is a user message with tool_calls"),
    ([{"role": "user"}], r"message 0: has no content"),
])
def test_malformed_messages_are_errors_that_say_where(conversation, where):
    with pytest.raises(ValidationError, match=where):
        per_turn([conversation])


def test_per_turn_refuses_what_it_cannot_split():
    with pytest.raises(ValidationError, match=r"one conversation .* wrap it: per_turn\(\[messages\]\)"):
        per_turn([user("a"), said("b")])
    with pytest.raises(ValidationError, match="conversation 0: has candidate"):
        per_turn([{"messages": [user("a"), said("b")], "candidate": "c"}])
    with pytest.raises(ValidationError, match="context must be a list of strings"):
        per_turn([{"messages": [user("a"), said("b")], "context": "one string"}])
    with pytest.raises(ValidationError, match="frame has no 'messages' column"):
        per_turn(pd.DataFrame({"text": ["x"]}))
    with pytest.raises(ValidationError, match="conversations must be a list"):
        per_turn({"messages": []})


def test_messages_are_normalized_to_one_shape():
    message = normalize_message({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text",
                                                                                           "text": "b"}],
                                 "name": "ann"})
    assert message == {"role": "user", "content": "a\nb", "name": "ann"}
    assistant = normalize_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}], "weight": 1})
    assert assistant["content"] == "" and assistant["weight"] == 1
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"x": 1}
    # arguments that are not JSON are kept (the judge makes such a row unscored)
    kept = normalize_messages([calls(("1", "f", "{not json"))])
    assert kept[0]["tool_calls"][0]["function"]["arguments"] == "{not json"
    assert normalize_messages(json.dumps([user("a")])) == [user("a")]
    with pytest.raises(ValidationError, match=r"\(f\) arguments must be a JSON string or an object"):
        normalize_messages([calls(("1", "f", 3))])


# -- read_conversations: OpenAI chat JSON Lines ------------------------------------------------------------


def write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_openai_lines_split_conversations_and_keep_items(tmp_path):
    path = write_lines(tmp_path / "chats.jsonl", [
        {"id": "conv-1", "messages": [SYSTEM, user("Hi"), said("Hello"), user("Bye"), said("Bye!")], "rating": 4},
        "",
        {"id": "item-9", "conversation_id": "conv-2", "messages": [user("Weather?")],
         "candidate": [calls(("c", "weather", "{}")), result("c", "rain"), said("Rain.")],
         "baseline": "It rains.", "context": ["Forecast: rain."], "human": 1},
        {"messages": [user("q"), said("a"), user("q2")], "candidate": "a2", "prompt": "Q2?"},
    ])
    items = read_conversations(path)
    assert items["conversation_id"].tolist()[:3] == ["conv-1", "conv-1", "conv-2"]
    assert items["turn"].tolist() == [0, 1, 0, 1]
    assert items["candidate"][0] == "Hello" and items["candidate"][1] == "Bye!"
    assert items["rating"].tolist()[:2] == [4, 4]
    agent = items.iloc[2]
    assert agent["prompt"] == "Weather?" and agent["baseline"] == "It rains."
    assert agent["context"] == ["Forecast: rain."]
    assert [m["role"] for m in agent["candidate"]] == ["assistant", "tool", "assistant"]
    assert agent["id"] == "item-9" and agent["human"] == 1
    assert items["prompt"][3] == "Q2?"  # a prompt the line gives is kept
    assert str(items["conversation_id"][3]).startswith(CONVERSATION_KEY_PREFIX)
    assert read_conversations(path, format="openai").equals(items)


@pytest.mark.parametrize(("line", "error"), [
    ("{not json", r"line 2: not JSON"),
    ('{"text": "hi"}', r"line 2: not a conversation: expected an object with 'messages'"),
    (json.dumps({"messages": [user("a"), {"role": "function", "content": "x"}]}),
     r"line 2: message 1: has the unknown role 'function'"),
    (json.dumps({"messages": [user("a")], "candidate": [{"role": "tool", "content": "x"}]}),
     r"line 2: candidate: message 0: is a tool message without tool_call_id"),
    (json.dumps({"messages": [user("a")], "candidate": 3}), r"line 2: candidate: must be a string or a list"),
    (json.dumps({"messages": [user("a"), said("b")], "baseline": "ref"}), r"line 2: has a baseline but no candidate"),
    (json.dumps({"messages": [user("a")], "candidate": "b", "context": [1]}), r"line 2: context\[0\] is a int"),
    (json.dumps({"messages": [user("a")], "candidate": "b", "turn": -1}), r"line 2: turn must be a whole number"),
])
def test_a_malformed_line_is_an_error_naming_it(tmp_path, line, error):
    path = write_lines(tmp_path / "bad.jsonl", [{"messages": [user("a"), said("b")]}, line,
                                                {"messages": [user("c"), said("d")]}])
    with pytest.raises(ValidationError, match=error):
        read_conversations(path, format="openai")


def test_read_conversations_refuses_unknown_formats(tmp_path):
    path = write_lines(tmp_path / "x.jsonl", [{"prompt": "p", "candidate": "c"}])
    with pytest.raises(ValidationError, match="pass format='openai' or format='otlp'"):
        read_conversations(path)
    with pytest.raises(ValidationError, match="unknown format 'csv'"):
        read_conversations(path, format="csv")


# -- read_conversations: OTLP JSON GenAI spans ----------------------------------------------------------------


def attr(key, value):
    """An OTLP JSON attribute; a list or dict value in structured form (arrayValue / kvlistValue)."""
    return {"key": key, "value": any_value(value)}


def any_value(value):
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if value is None:
        return {}
    return {"kvlistValue": {"values": [attr(k, v) for k, v in value.items()]}}


def span(span_id, start, inputs=None, outputs=None, *, trace="t1", conversation=None, model="gpt-test",
         operation="chat", structured=False, events=None, extra=()):
    attributes = [attr("gen_ai.operation.name", operation), attr("gen_ai.response.model", model)]
    if conversation is not None:
        attributes.append(attr("gen_ai.conversation.id", conversation))
    for key, value in (("gen_ai.input.messages", inputs), ("gen_ai.output.messages", outputs)):
        if value is not None:
            attributes.append(attr(key, value) if structured else attr(key, json.dumps(value)))
    return {"traceId": trace, "spanId": span_id, "name": f"{operation} {model}", "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 10), "attributes": attributes + list(extra), "events": events or []}


def export(*spans):
    return {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "app")]},
                               "scopeSpans": [{"scope": {"name": "genai"}, "spans": list(spans)}]}]}


def text(role, content):
    return {"role": role, "parts": [{"type": "text", "content": content}]}


U1 = text("user", "Weather in Paris?")
CALL = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather",
                                        "arguments": {"location": "Paris"}}], "finish_reason": "tool_call"}
TOOL = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "rainy, 57F"}]}
A1 = {**text("assistant", "Rainy, 57F."), "finish_reason": "stop"}
U2 = text("user", "Thanks!")
A2 = text("assistant", "You're welcome.")


def agent_spans(**options):
    return [
        span("s1", 100, [U1], [CALL], **options),
        span("tool", 150, operation="execute_tool", model="none", **options),  # no messages: not read
        span("s2", 200, [U1, CALL, TOOL], [A1], **options),
        span("s3", 300, [U1, CALL, TOOL, A1, U2], [A2], model="gpt-other", **options),
    ]


@pytest.mark.parametrize("structured", [False, True])
def test_otlp_spans_become_turns_of_their_conversation(tmp_path, structured):
    path = tmp_path / "trace.json"
    spans = agent_spans(conversation="conv-7", structured=structured)
    path.write_text(json.dumps(export(*reversed(spans))))  # out of order in the file: read by start time
    items = read_conversations(path)
    assert items["conversation_id"].tolist() == ["conv-7", "conv-7"] and items["turn"].tolist() == [0, 1]
    first = items["candidate"][0]
    assert [m["role"] for m in first] == ["assistant", "tool", "assistant"]
    assert first[0]["tool_calls"] == [{"id": "call_1", "type": "function",
                                       "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]
    assert first[1] == {"role": "tool", "tool_call_id": "call_1", "content": "rainy, 57F"}
    assert first[2]["content"] == "Rainy, 57F."
    assert items["candidate"][1] == "You're welcome."
    assert items["prompt"].tolist() == ["Weather in Paris?", "Thanks!"]
    assert items["candidate_model"].tolist() == ["gpt-test", "gpt-other"]
    assert read_conversations(path, format="otlp").equals(items)


def test_otlp_groups_by_trace_without_a_conversation_id_and_reads_json_lines(tmp_path):
    one = [span("a1", 10, [U1], [A1], trace="trace-A")]
    two = [span("b1", 5, [text("user", "Hi")], [text("assistant", "Hello")], trace="trace-B"),
           span("b2", 20, [text("user", "Hi"), text("assistant", "Hello"), U2], [A2], trace="trace-B")]
    path = tmp_path / "collector.jsonl"  # the collector's file exporter: one export request per line
    path.write_text(json.dumps(export(*one)) + "\n" + json.dumps(export(*two)) + "\n")
    items = read_conversations(path)
    assert items["conversation_id"].tolist() == ["trace-B", "trace-B", "trace-A"]  # by first start time
    assert items["candidate"].tolist() == ["Hello", "You're welcome.", "Rainy, 57F."]


def test_otlp_system_instructions_and_reasoning(tmp_path):
    instructions = attr("gen_ai.system_instructions", json.dumps([{"type": "text", "content": "Be brief."}]))
    thought = {"role": "assistant", "parts": [{"type": "reasoning", "content": "hmm"},
                                              {"type": "text", "content": "Four."}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(export(span("s", 1, [text("user", "2+2?")], [thought], extra=[instructions]))))
    items = read_conversations(path)
    assert items["messages"][0] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    assert items["candidate"][0] == "Four."


def old_event(name, body, *, as_attributes=False):
    if as_attributes:
        return {"name": name, "attributes": [attr(k, v) for k, v in body.items()]}
    return {"name": name,
            "attributes": [attr("gen_ai.system", "openai"), attr("gen_ai.event.content", json.dumps(body))]}


def test_otlp_older_per_message_events(tmp_path):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'}}
    s1 = span("e1", 1, events=[old_event("gen_ai.system.message", {"content": "Be brief."}),
                               old_event("gen_ai.user.message", {"content": "Weather in Paris?"}, as_attributes=True),
                               old_event("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls",
                                                           "message": {"role": "assistant", "tool_calls": [call]}})])
    s2 = span("e2", 2, events=[old_event("gen_ai.system.message", {"content": "Be brief."}),
                               old_event("gen_ai.user.message", {"content": "Weather in Paris?"}),
                               old_event("gen_ai.assistant.message", {"tool_calls": [call]}),
                               old_event("gen_ai.tool.message", {"id": "call_1", "content": "rainy"}),
                               old_event("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                           "message": {"content": "Rainy."}})])
    path = tmp_path / "old.json"
    path.write_text(json.dumps(export(s1, s2)))
    items = read_conversations(path)
    assert len(items) == 1 and items["prompt"][0] == "Weather in Paris?"
    assert [m["role"] for m in items["candidate"][0]] == ["assistant", "tool", "assistant"]
    assert items["candidate"][0][0]["tool_calls"][0]["function"]["arguments"] == '{"location":"Paris"}'
    assert items["candidate"][0][2]["content"] == "Rainy."


def test_otlp_items_go_to_the_trajectory_judge(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(export(*agent_spans(conversation="c"))))
    items = read_conversations(path).iloc[:1].copy()
    items["baseline"] = [[{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]}]]
    frame = judge_many(TrajectoryMatchJudge("superset"), items, progress=False)
    assert frame["status"].tolist() == ["scored"] and frame["quality_score"].tolist() == [1.0]


@pytest.mark.parametrize(("bad_span", "error"), [
    (span("bad1", 1, [{"role": "robot", "parts": []}], [A1]),
     r"span bad1: gen_ai.input.messages\[0\] has the unknown role 'robot'"),
    (span("bad2", 1, [U1], [{"role": "assistant", "parts": [{"type": "blob", "modality": "image", "content": "x"}]}]),
     r"span bad2: gen_ai.output.messages\[0\]: part 0 has type 'blob'"),
    (span("bad3", 1, [U1], [A1, A2]), r"span bad3: the span has 2 output choices"),
    (span("bad4", 1, [U1, {"role": "tool", "parts": [{"type": "tool_call_response", "response": "r"}]}], [A1]),
     r"span bad4: gen_ai.input.messages\[1\]: is a tool message without tool_call_id"),
    (span("bad5", 1, None, [A1]), r"span bad5 has output messages but no input messages"),
    ({**span("bad6", 1, [U1], [A1]), "attributes": [{"key": "gen_ai.input.messages", "value": {"weird": 1}}]},
     r"span bad6: attribute gen_ai.input.messages: unknown attribute value kind 'weird'"),
    (span("bad7", 1, None, None, extra=[attr("gen_ai.input.messages", "[{not json")]),
     r"span bad7: gen_ai.input.messages is not JSON"),
])
def test_a_malformed_span_is_an_error_naming_its_id(tmp_path, bad_span, error):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(export(span("good", 0, [U1], [A1], trace="other"), bad_span)))
    with pytest.raises(ValidationError, match=error):
        read_conversations(path)


def test_a_model_call_that_does_not_continue_its_conversation_is_an_error(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(export(span("s1", 1, [U1], [A1], conversation="c"),
                                      span("s2", 2, [text("user", "Something else"), A1], [A2], conversation="c"))))
    with pytest.raises(ValidationError, match=r"span s2's input messages do not continue conversation 'c' read from "
                                              r"the spans before it \(s1\): message 0 differs"):
        read_conversations(path)
    lines = tmp_path / "l.jsonl"
    lines.write_text(json.dumps(export(span("s1", 1, [U1], [A1]))) + "\n{oops\n")
    with pytest.raises(ValidationError, match="line 2: not JSON"):
        read_conversations(lines, format="otlp")


# -- properties: per_turn's items rebuild the conversation; OTLP spans of a conversation read back as it ------------

WORDS = st.text(alphabet="abc xyz", min_size=0, max_size=8)


@st.composite
def conversations(draw):
    """A valid conversation: optional system message, then user messages each followed (or not) by a reply: plain
    text, or tool calls with their results and maybe a final answer; sometimes two plain assistant messages."""
    messages = [SYSTEM] if draw(st.booleans()) else []
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        messages.append(user(draw(WORDS)))
        kind = draw(st.sampled_from(["none", "text", "agent", "agent-unfinished", "two"]))
        if kind == "text":
            messages.append(said(draw(WORDS)))
        elif kind == "two":
            messages += [said(draw(WORDS)), said(draw(WORDS))]
        elif kind.startswith("agent"):
            for _ in range(draw(st.integers(1, 2))):
                pairs = []
                for _ in range(draw(st.integers(1, 2))):
                    n += 1
                    pairs.append((f"call{n}", draw(st.sampled_from(["search", "fetch"])),
                                  json.dumps({"q": draw(WORDS)})))
                messages.append(calls(*pairs))
                messages += [result(i, draw(WORDS)) for i, _, _ in pairs]
            if kind == "agent":
                messages.append(said(draw(WORDS)))
    return messages


@settings(max_examples=150, deadline=None, derandomize=True)
@given(conversations())
def test_per_turn_items_rebuild_the_conversation(conversation):
    items = per_turn([{"conversation_id": "c", "messages": conversation}])
    normalized = normalize_messages(conversation)
    assert items["turn"].tolist() == list(range(len(items)))
    replies = 0
    for k, m in enumerate(normalized):  # one item per run of assistant/tool messages that starts with the assistant
        if m["role"] == "assistant" and (k == 0 or normalized[k - 1]["role"] not in ("assistant", "tool")):
            replies += 1
    assert len(items) == replies
    for row in items.itertuples():
        reply = [said(row.candidate)] if isinstance(row.candidate, str) else row.candidate
        reply = normalize_messages(reply)
        end = len(row.messages) + len(reply)
        assert row.messages + reply == normalized[:end]  # the context, then the reply, is the conversation so far
        assert end == len(normalized) or normalized[end]["role"] in ("user", "system")  # the reply is the whole run
        users = [m["content"] for m in row.messages if m["role"] == "user"]
        assert row.prompt == (users[-1] if users else None)


def to_otel(message):
    """An OpenAI chat message written as a GenAI semantic-conventions message (role + parts)."""
    if message["role"] == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message["tool_call_id"],
                                           "response": message["content"]}]}
    parts = [{"type": "text", "content": message["content"]}] if message.get("content") else []
    for c in message.get("tool_calls") or []:
        parts.append({"type": "tool_call", "id": c["id"], "name": c["function"]["name"],
                      "arguments": json.loads(c["function"]["arguments"])})
    return {"role": message["role"], "parts": parts}


def comparable(value):
    """Messages with their tool-call arguments parsed (a span records them as objects, a chat log as JSON text)."""
    if isinstance(value, str):
        return value
    out = []
    for m in normalize_messages(value):
        for c in m.get("tool_calls") or []:
            args = c["function"]["arguments"]
            c["function"]["arguments"] = json.loads(args) if isinstance(args, str) else args
        out.append(m)
    return out


@settings(max_examples=100, deadline=None, derandomize=True)
@given(conversations(), st.booleans())
def test_otlp_spans_of_a_conversation_read_back_as_its_turns(tmp_path_factory, conversation, structured):
    """One model-call span per assistant message (its input: the history so far), as an instrumented agent loop
    records them, reads back as per_turn reads the conversation itself."""
    normalized = normalize_messages(conversation)
    spans = [span(f"s{k}", 10 * k, [to_otel(m) for m in normalized[:k]], [to_otel(normalized[k])],
                  conversation="conv", structured=structured)
             for k, m in enumerate(normalized) if m["role"] == "assistant"]
    path = tmp_path_factory.mktemp("otlp") / "trace.json"
    path.write_text(json.dumps(export(*spans)))
    read = read_conversations(path)
    # a trace holds what the model calls were sent and gave: messages after the last assistant message (the results of
    # an unfinished run's last calls, a last question not yet answered) reached no model
    last = max((k for k, m in enumerate(normalized) if m["role"] == "assistant"), default=-1)
    expected = per_turn([{"conversation_id": "conv", "messages": conversation[: last + 1]}])
    if not spans:
        assert read.empty and expected.empty
        return
    assert read["turn"].tolist() == expected["turn"].tolist()
    assert read["prompt"].tolist() == expected["prompt"].tolist()
    assert [comparable(c) for c in read["candidate"]] == [comparable(c) for c in expected["candidate"]]
    # the history before a reply is what the spans sent (the messages after the last model call included)
    for got, want in zip(read["messages"], expected["messages"], strict=True):
        assert comparable(got) == comparable(want)
