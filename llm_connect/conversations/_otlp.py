"""Reading OTLP JSON traces of OpenTelemetry GenAI spans: the messages of each model call (span attributes, or
the older per-message span events), grouped into conversations by ``gen_ai.conversation.id`` (else the trace),
read in time order, each call's input continuing the history so far, then split per turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ._messages import _TEXT_JOIN, ROLES, _short, normalize_message
from ._turns import _turn_rows

# the operations of a model call (gen_ai.operation.name); spans of other operations (invoke_agent,
# execute_tool...) are read only when a conversation has no model-call span with messages
_MODEL_CALLS = ("chat", "text_completion", "generate_content")
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"


def _any_value(value: Any, where: str) -> Any:
    """An OTLP JSON ``AnyValue`` (``{"stringValue": ...}``, ``{"arrayValue": {"values": [...]}}``...) as Python."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where}: an attribute value must be an object such as {{\"stringValue\": ...}}, got "
                              f"{type(value).__name__}")
    if not value:
        return None
    if len(value) != 1:
        raise ValidationError(f"{where}: an attribute value has several kinds ({sorted(value)})")
    ((kind, inner),) = value.items()
    if kind in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        return inner
    if kind == "intValue":
        try:
            return int(inner)
        except (TypeError, ValueError):
            raise ValidationError(f"{where}: intValue {_short(inner)} is not a whole number") from None
    if kind == "arrayValue":
        values = (inner or {}).get("values") or [] if isinstance(inner, Mapping) else None
        if not isinstance(values, list):
            raise ValidationError(f"{where}: arrayValue must be {{\"values\": [...]}}")
        return [_any_value(v, where) for v in values]
    if kind == "kvlistValue":
        values = (inner or {}).get("values") or [] if isinstance(inner, Mapping) else None
        if not isinstance(values, list):
            raise ValidationError(f"{where}: kvlistValue must be {{\"values\": [...]}}")
        return _attributes(values, where)
    raise ValidationError(f"{where}: unknown attribute value kind {_short(kind)}")


def _attributes(items: Any, where: str) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValidationError(f"{where}: attributes must be a list of {{\"key\", \"value\"}}")
    out = {}
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise ValidationError(f"{where}: an attribute is not {{\"key\": ..., \"value\": {{...}}}}: {_short(item)}")
        out[item["key"]] = _any_value(item.get("value", {}), f"{where}: attribute {item['key']}")
    return out


def _structured(value: Any, where: str, what: str) -> Any:
    """An attribute recorded as a JSON string or in structured form, as Python."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{where}: {what} is not JSON ({exc.msg} at column {exc.colno})") from None
    return value


def _otel_arguments(arguments: Any) -> Any:
    if arguments is None:
        return {}
    if isinstance(arguments, (str, Mapping)):
        return arguments
    return json.dumps(arguments)  # a list or a number: kept as its JSON text


def _otel_message(message: Any, at: str) -> list[dict[str, Any]]:
    """One GenAI message (role + parts) as one or more OpenAI chat messages (see :func:`_otel_messages`)."""
    if not isinstance(message, Mapping):
        raise ValidationError(f"{at} is a {type(message).__name__}, not {{\"role\", \"parts\"}}")
    role = message.get("role")
    if role not in ROLES:
        raise ValidationError(f"{at} has the unknown role {_short(role)}; use system, user, assistant or tool")
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ValidationError(f"{at} has no list of parts")
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, part in enumerate([*parts, None]):  # None: the end, where the texts and calls gathered are written
        kind = part.get("type") if isinstance(part, Mapping) else None
        if part is None or kind == "tool_call_response":
            if texts or calls:
                written: dict[str, Any] = {"role": role, "content": _TEXT_JOIN.join(texts)}
                if calls:
                    written["tool_calls"] = calls
                out.append(written)
                texts, calls = [], []
            if part is None:
                break
            response = part.get("response", part.get("result"))
            out.append({"role": "tool", "tool_call_id": part.get("id"),
                        "content": response if isinstance(response, str) else json.dumps(response)})
        elif not isinstance(part, Mapping):
            raise ValidationError(f"{at}: part {j} is a {type(part).__name__}, not an object with a type")
        elif kind == "text":
            if not isinstance(part.get("content"), str):
                raise ValidationError(f"{at}: part {j} (text) has no string content")
            texts.append(part["content"])
        elif kind == "tool_call":
            if role != "assistant":
                raise ValidationError(f"{at}: part {j} is a tool call in a {role} message")
            arguments = _otel_arguments(part.get("arguments"))
            calls.append({"id": part.get("id"), "type": "function",
                          "function": {"name": part.get("name"), "arguments": arguments}})
        elif kind != "reasoning":
            raise ValidationError(f"{at}: part {j} has type {_short(kind)}; only text, tool_call and "
                                  "tool_call_response parts can be read (reasoning parts are left out)")
    if not out:  # no parts, or reasoning only: an empty message of its role
        out.append({"role": role, "content": ""})
    return [normalize_message(m, where=at) for m in out]


def _otel_messages(value: Any, where: str, what: str) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (role + parts) as OpenAI chat messages.

    Text parts become the content; ``tool_call`` parts the assistant's ``tool_calls``; each
    ``tool_call_response`` part a ``tool`` message (wherever it was: some providers put tool results in
    a user message); ``reasoning`` parts are left out (the reasoning is not the reply). Any other part
    (blob, uri, file, server tool calls) is an error.
    """
    value = _structured(value, where, what)
    if not isinstance(value, list):
        raise ValidationError(f"{where}: {what} must be a list of messages, got {type(value).__name__}")
    return [m for k, message in enumerate(value) for m in _otel_message(message, f"{where}: {what}[{k}]")]


def _instructions(value: Any, where: str) -> list[dict[str, Any]]:
    """``gen_ai.system_instructions`` (a list of text parts) as one system message."""
    value = _structured(value, where, "gen_ai.system_instructions")
    if isinstance(value, str):
        return [{"role": "system", "content": value}]
    if not isinstance(value, list):
        raise ValidationError(f"{where}: gen_ai.system_instructions must be a list of text parts")
    texts = []
    for j, part in enumerate(value):
        if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("content"), str):
            raise ValidationError(f"{where}: gen_ai.system_instructions part {j} is not a text part "
                                  '{"type": "text", "content": ...}')
        texts.append(part["content"])
    return [{"role": "system", "content": _TEXT_JOIN.join(texts)}] if texts else []


def _event_body(event: Mapping[str, Any], where: str) -> dict[str, Any]:
    """An older GenAI event's body: its ``body``, else the JSON in ``gen_ai.event.content``, else its attributes."""
    attributes = _attributes(event.get("attributes"), where)
    if "body" in event:
        body = _any_value(event["body"], f"{where}: body")
    elif "gen_ai.event.content" in attributes:
        body = _structured(attributes["gen_ai.event.content"], where, "gen_ai.event.content")
    else:
        body = {k: v for k, v in attributes.items() if not k.startswith("gen_ai.")}
    if not isinstance(body, Mapping):
        raise ValidationError(f"{where}: the event's body must be an object, got {type(body).__name__}")
    return dict(body)


def _event_message(role: str, body: Mapping[str, Any], where: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": body.get("content")}
    if role == "assistant" and body.get("tool_calls") is not None:
        calls = _structured(body["tool_calls"], where, "tool_calls")
        message["tool_calls"] = [
            {**c, "function": {**c["function"], "arguments": _otel_arguments(c["function"].get("arguments"))}}
            if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping) else c
            for c in (calls if isinstance(calls, list) else [calls])
        ]
    if role == "tool":
        message["tool_call_id"] = body.get("id", body.get("tool_call_id"))
    if role == "assistant" and message["content"] is None:
        message["content"] = ""
    return normalize_message(message, where=where)


@dataclass(frozen=True)
class _Span:
    """What one GenAI span holds: its ids, times, model and messages (input: the history sent; output: the reply)."""

    conversation: str | None
    trace_id: str
    span_id: str
    start: int
    end: int
    operation: Any
    model: str | None
    input: list[dict[str, Any]]
    output: list[dict[str, Any]]


def _nanos(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _read_span(span: Any, where: str) -> _Span | None:
    if not isinstance(span, Mapping):
        raise ValidationError(f"{where}: a span must be an object, got {type(span).__name__}")
    span_id = span.get("spanId") or "?"
    trace_id = span.get("traceId") or "?"
    where = f"{where}: span {span_id}"
    attributes = _attributes(span.get("attributes"), where)
    inputs: list[dict[str, Any]] | None = None
    outputs: list[dict[str, Any]] | None = None
    events = span.get("events") or []
    if not isinstance(events, list):
        raise ValidationError(f"{where}: events must be a list")
    sources = [attributes]
    for event in events:
        if isinstance(event, Mapping) and event.get("name") == _DETAILS_EVENT:
            sources.append(_attributes(event.get("attributes"), f"{where}: event {_DETAILS_EVENT}"))
    for attrs in sources:
        if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
            inputs = _instructions(attrs["gen_ai.system_instructions"], where) \
                if "gen_ai.system_instructions" in attrs else []
            if "gen_ai.input.messages" in attrs:
                inputs += _otel_messages(attrs["gen_ai.input.messages"], where, "gen_ai.input.messages")
            if "gen_ai.output.messages" in attrs:
                outputs = _otel_messages(attrs["gen_ai.output.messages"], where, "gen_ai.output.messages")
            break
    else:  # the older convention: one span event per message, gen_ai.choice for the reply
        choices: dict[Any, dict[str, Any]] = {}
        for e, event in enumerate(events):
            name = event.get("name") if isinstance(event, Mapping) else None
            at = f"{where}: event {e} ({name})"
            if name in _EVENT_ROLES:
                inputs = (inputs or []) + [_event_message(_EVENT_ROLES[name], _event_body(event, at), at)]
            elif name == "gen_ai.choice":
                body = _event_body(event, at)
                message = _structured(body.get("message"), at, "message")
                if message is None:  # some instrumentations put the message's fields in the body itself
                    message = body
                if not isinstance(message, Mapping):
                    raise ValidationError(f"{at}: the choice's message must be an object")
                choices[body.get("index", 0)] = _event_message("assistant", message, at)
        if choices:
            outputs = list(choices.values())
    if inputs is None and outputs is None:
        return None  # not a span with GenAI messages
    if outputs is not None and len(outputs) > 1:
        if any(m["role"] == "tool" for m in outputs) or len({m["role"] for m in outputs}) > 1:
            raise ValidationError(f"{where}: gen_ai.output.messages holds {len(outputs)} messages that are not one "
                                  "assistant reply")
        raise ValidationError(f"{where}: the span has {len(outputs)} output choices; read_conversations reads one "
                              "reply per model call (ask for one choice, n=1)")
    conversation = attributes.get("gen_ai.conversation.id")
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    return _Span(conversation=str(conversation) if conversation not in (None, "") else None, trace_id=str(trace_id),
                 span_id=str(span_id), start=_nanos(span.get("startTimeUnixNano")),
                 end=_nanos(span.get("endTimeUnixNano")), operation=attributes.get("gen_ai.operation.name"),
                 model=model if isinstance(model, str) and model else None, input=inputs or [], output=outputs or [])


def _spans_of(document: Any, where: str) -> list[_Span]:
    if not isinstance(document, Mapping) or not isinstance(document.get("resourceSpans"), list):
        raise ValidationError(f"{where}: not an OTLP JSON trace export: expected an object with 'resourceSpans'")
    spans = []
    for r, resource in enumerate(document["resourceSpans"]):
        if not isinstance(resource, Mapping):
            raise ValidationError(f"{where}: resourceSpans[{r}] is not an object")
        scopes = resource.get("scopeSpans", resource.get("instrumentationLibrarySpans")) or []
        if not isinstance(scopes, list):
            raise ValidationError(f"{where}: resourceSpans[{r}].scopeSpans is not a list")
        for s, scope in enumerate(scopes):
            items = scope.get("spans") if isinstance(scope, Mapping) else None
            if not isinstance(items, list):
                raise ValidationError(f"{where}: resourceSpans[{r}].scopeSpans[{s}] has no list of spans")
            for span in items:
                read = _read_span(span, where)
                if read is not None:
                    spans.append(read)
    return spans


def _message_key(message: Mapping[str, Any]) -> str:
    """What two records of one message must share (extras such as finish_reason and the form of the arguments aside)."""
    calls = []
    for call in message.get("tool_calls") or ():
        arguments = call["function"]["arguments"]
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        calls.append([call.get("id"), call["function"]["name"], arguments])
    return json.dumps([message["role"], message.get("content") or "", calls, message.get("tool_call_id")],
                      sort_keys=True, default=str)


def _conversation_from_spans(spans: list[_Span], name: str, where: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The conversation the model calls of one group saw, in time order: each call's input continues the messages
    read so far (the history an application sends again with each call), then its output is the next reply."""
    calls = [s for s in spans if s.operation in (None, *_MODEL_CALLS)] or spans
    calls.sort(key=lambda s: (s.start, s.end, s.span_id))
    messages: list[dict[str, Any]] = []
    models: list[Any] = []
    keys: list[str] = []
    seen: list[str] = []
    for span in calls:
        if not span.input and span.output:
            raise ValidationError(f"{where}: span {span.span_id} has output messages but no input messages; "
                                  "record gen_ai.input.messages too (content capture on)")
        new = [_message_key(m) for m in span.input]
        if new[: len(keys)] != keys:
            k = next((i for i, (a, b) in enumerate(zip(keys, new, strict=False)) if a != b), len(new))
            raise ValidationError(
                f"{where}: span {span.span_id}'s input messages do not continue conversation {name!r} read from the "
                f"spans before it ({', '.join(seen)}): message {k} differs. Each model call must send the whole "
                "history so far; give each conversation its own gen_ai.conversation.id")
        extra = span.input[len(keys):]
        messages += extra
        models += [None] * len(extra)
        keys += new[len(keys):]
        for message in span.output:
            messages.append(message)
            models.append(span.model)
            keys.append(_message_key(message))
        seen.append(span.span_id)
    return messages, models


def _read_otlp(text: str, path: str) -> list[dict[str, Any]]:
    try:
        documents = [(f"{path}", json.loads(text))]
    except json.JSONDecodeError:  # JSON Lines: one export request per line (the collector's file exporter)
        documents = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append((f"{path}: line {n}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{path}: line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
    groups: dict[str, list[_Span]] = {}
    for where, document in documents:
        for span in _spans_of(document, where):
            groups.setdefault(span.conversation or span.trace_id, []).append(span)
    ordered = sorted(groups.items(), key=lambda kv: min(s.start for s in kv[1]))
    rows: list[dict[str, Any]] = []
    for name, spans in ordered:
        messages, models = _conversation_from_spans(spans, name, path)
        rows += _turn_rows(messages, name, {}, f"{path}: conversation {name}", models)
    if rows and all(r.get("candidate_model") is None for r in rows):
        for r in rows:
            del r["candidate_model"]
    return rows
