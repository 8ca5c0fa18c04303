"""Conversations and agent runs as items to judge: OpenAI chat messages in, one item per assistant reply out.

An item may carry ``messages``, the conversation before the judged reply, as OpenAI chat messages:
``role`` (``system``, ``user``, ``assistant``, ``tool``; ``developer`` is taken as OpenAI's newer
name of ``system``), ``content`` (a string, or content parts of type ``text``), ``tool_calls``
(``[{"id", "type": "function", "function": {"name", "arguments"}}]``, ``arguments`` a JSON string
or an object) and ``tool_call_id`` on tool messages. Its ``candidate`` and ``baseline`` are each a
string (a reply) or a list of messages (a *trajectory*: assistant messages with tool calls, the tool
results, the final answer); ``context`` is a list of strings (the documents a grounded answer may use).

=================================  ==========================================================
what                               functions
=================================  ==========================================================
a conversation -> one item per     :func:`per_turn`
assistant reply
a file -> items                    :func:`read_conversations` (OpenAI chat JSON Lines, OTLP JSON
                                   GenAI spans)
one message / a list checked       :func:`normalize_message`, :func:`normalize_messages`
a reply as an ``LLMResponse``      :func:`as_response`, :func:`final_answer`, :func:`message_text`
=================================  ==========================================================

**What one turn is.** A turn is one assistant reply: a maximal run of consecutive ``assistant`` and
``tool`` messages (so an agent's tool-call message, the tool results and its final answer are one
turn, not three), which ends at the next ``user`` or ``system`` message. Its candidate is the
assistant message's text when the run is a single assistant message without tool calls, else the
run itself as a list of messages (a trajectory). ``turn`` counts the replies of a conversation
from 0. A ``tool`` message that does not follow an assistant message is an error.

Every message is validated strictly, and an error names where it is (``line 3: message 2: ...``,
``span 00f067aa0ba902b7: ...``): an unknown role, a tool message without ``tool_call_id``, a
content part that is not text, a tool call without a function name... Nothing is half-read: a
malformed line or span stops the reading with an error. Tool-call arguments that are not valid
JSON are kept as they are (they are the agent's mistake to judge: a trajectory judge marks such a
row *unscored* with the reason).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core import LLMResponse
from .errors import ValidationError
from .items import is_missing

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CONVERSATION_KEY_PREFIX",
    "ROLES",
    "TURN_COLUMNS",
    "as_response",
    "conversation_key",
    "documents",
    "final_answer",
    "is_trajectory",
    "message_text",
    "normalize_message",
    "normalize_messages",
    "per_turn",
    "read_conversations",
]

#: The roles a chat message may have (``developer`` is OpenAI's newer name of ``system``).
ROLES = ("system", "developer", "user", "assistant", "tool")
#: The columns :func:`per_turn` and :func:`read_conversations` always give, in this order.
TURN_COLUMNS = ("messages", "prompt", "candidate", "conversation_id", "turn")
#: The prefix of the id of a conversation that has none: ``"conv:"`` and 24 hex digits of a SHA-256 of
#: its messages (never its position in the input, which is another conversation's).
CONVERSATION_KEY_PREFIX = "conv:"
_REPLY_ROLES = ("assistant", "tool")
# keys of a conversation that per_turn computes for each turn: a conversation may not bring its own
_PER_TURN_KEYS = ("candidate", "baseline", "prompt", "turn")
_TEXT_JOIN = "\n"  # between the text parts of one message


def _missing(value: Any) -> bool:
    """None/NaN/NA; a list, a dict or an array (a value, however empty) is not missing."""
    if isinstance(value, (list, tuple, Mapping)) or type(value).__name__ == "ndarray":
        return False
    return is_missing(value)


def _where(where: str, more: str) -> str:
    return f"{where}: {more}" if where else more


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- messages ------------------------------------------------------------------------------------


def _content_text(content: Any, where: str, *, required: bool) -> str:
    """A message's ``content`` as text: a string as is, text parts joined by a newline, None as ""."""
    if content is None:
        if required:
            raise ValidationError(_where(where, "has no content; give a string (it may be empty)"))
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping) or not isinstance(content, Sequence):
        raise ValidationError(_where(where, f"content must be a string or a list of text parts, "
                                            f"got {type(content).__name__}"))
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise ValidationError(_where(where, f"content part {j} is a {type(part).__name__}, not "
                                                '{"type": "text", "text": ...}'))
        kind = part.get("type")
        if kind != "text":
            raise ValidationError(_where(where, f"content part {j} has type {_short(kind)}; only text parts can be "
                                                "judged (describe images, audio and files in text)"))
        text = part.get("text")
        if not isinstance(text, str):
            raise ValidationError(_where(where, f"content part {j} (text) has no string 'text'"))
        texts.append(text)
    return _TEXT_JOIN.join(texts)


def _tool_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise ValidationError(_where(where, f"is a {type(call).__name__}, not "
                                            '{"id", "type": "function", "function": {"name", "arguments"}}'))
    kind = call.get("type", "function")
    if kind != "function":
        raise ValidationError(_where(where, f"has type {_short(kind)}; only function calls can be judged"))
    call_id = call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ValidationError(_where(where, f"id must be a string, got {type(call_id).__name__}"))
    function = call.get("function")
    if not isinstance(function, Mapping):
        raise ValidationError(_where(where, 'has no "function": {"name", "arguments"}'))
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(_where(where, "has no function name"))
    if "arguments" not in function:
        raise ValidationError(_where(where, f"({name}) has no arguments; give a JSON string or an object "
                                            "('{}' for none)"))
    arguments = function["arguments"]
    if isinstance(arguments, Mapping):
        arguments = copy.deepcopy(dict(arguments))
    elif not isinstance(arguments, str):
        raise ValidationError(_where(where, f"({name}) arguments must be a JSON string or an object, "
                                            f"got {type(arguments).__name__}"))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def normalize_message(message: Any, *, where: str = "") -> dict[str, Any]:
    """One chat message checked and in one shape: ``role``, ``content`` as text, ``tool_calls`` when it has any.

    Parameters
    ----------
    message : Mapping
        An OpenAI chat message.
    where : str
        Where it is, for the error (``"line 3: message 2"``).

    Returns
    -------
    dict
        A new dict: ``role``; ``content`` (a string: text parts joined by a newline, ``""`` for an
        assistant message without content); ``tool_calls`` (only when non-empty; each
        ``{"id", "type": "function", "function": {"name", "arguments"}}``, the arguments as given:
        a string, or a dict); ``tool_call_id`` on tool messages; any other key (``name``,
        ``weight``...) as it was.

    Raises
    ------
    ValidationError
        Not a mapping; an unknown role; content that is not a string or text parts; tool calls on a
        message that is not the assistant's; a malformed tool call; a tool message without
        ``tool_call_id``. The message says ``where``.
    """
    if not isinstance(message, Mapping):
        raise ValidationError(_where(where, f"is a {type(message).__name__}, not a chat message "
                                            '{"role": ..., "content": ...}'))
    role = message.get("role")
    if role not in ROLES:
        raise ValidationError(_where(where, f"has the unknown role {_short(role)}; use system, user, assistant or "
                                            "tool"))
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in message.items()
                           if k not in ("role", "content", "tool_calls", "tool_call_id", "function_call")}
    out["role"] = role
    if message.get("function_call") is not None:
        raise ValidationError(_where(where, "uses the legacy function_call; write it as tool_calls "
                                            '[{"id", "type": "function", "function": {"name", "arguments"}}]'))
    calls = message.get("tool_calls")
    if calls and role != "assistant":
        raise ValidationError(_where(where, f"is a {role} message with tool_calls; only assistant messages call "
                                            "tools"))
    out["content"] = _content_text(message.get("content"), where, required=role != "assistant")
    if calls is not None:
        if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
            raise ValidationError(_where(where, f"tool_calls must be a list, got {type(calls).__name__}"))
        if calls:
            out["tool_calls"] = [_tool_call(c, _where(where, f"tool call {j}")) for j, c in enumerate(calls)]
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id.strip():
            raise ValidationError(_where(where, "is a tool message without tool_call_id; give the id of the "
                                                "assistant's tool call it answers"))
        out["tool_call_id"] = call_id
    elif message.get("tool_call_id") is not None:
        raise ValidationError(_where(where, f"is a {role} message with a tool_call_id; only tool messages answer "
                                            "a tool call"))
    return out


def _as_list(value: Any) -> Any:
    """A numpy array (a list column read from Parquet) as a list; anything else as it is."""
    if type(value).__name__ == "ndarray" and hasattr(value, "tolist"):
        return value.tolist()
    return value


def normalize_messages(messages: Any, *, where: str = "messages") -> list[dict[str, Any]]:
    """A list of chat messages, each checked by :func:`normalize_message`.

    Parameters
    ----------
    messages : sequence of Mapping
        OpenAI chat messages (a JSON string of such a list is read too, as a CSV cell holds it).
    where : str
        Where the list is, for the error.

    Returns
    -------
    list of dict

    Raises
    ------
    ValidationError
        Not a list of messages, or a message is malformed (the error names its index).
    """
    messages = _as_list(messages)
    if isinstance(messages, str):
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError as exc:
            raise ValidationError(_where(where, f"is a string that is not a JSON list of messages ({exc})")) from None
    if isinstance(messages, (bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ValidationError(_where(where, f"must be a list of chat messages, got {type(messages).__name__}"))
    return [normalize_message(m, where=_where(where, f"message {k}")) for k, m in enumerate(messages)]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one (normalized or raw) message: its content, text parts joined by a newline."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return _content_text(content, "", required=False)


def final_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """The final answer of a trajectory: the text of its last message when that is an assistant message, else ``""``
    (a run that ended on a tool call or a tool result gave no answer)."""
    if messages and messages[-1].get("role") == "assistant":
        return message_text(messages[-1])
    return ""


def is_trajectory(value: Any) -> bool:
    """True when an item's ``candidate`` / ``baseline`` is a list of messages (a trajectory), not a text."""
    value = _as_list(value)
    return isinstance(value, (list, tuple))


def _reply(value: Any, where: str) -> str | list[dict[str, Any]]:
    """An item's candidate / baseline: a string as is, a list of messages normalized."""
    if isinstance(value, str):
        return value
    if is_trajectory(value):
        return normalize_messages(value, where=where)
    raise ValidationError(_where(where, f"must be a string or a list of messages, got {type(value).__name__}"))


def as_response(reply: Any, *, adapter_id: str = "candidate", model_id: str = "unknown",
                text: str | None = None) -> LLMResponse:
    """A reply as an :class:`~llm_connect.core.LLMResponse`: a trajectory in ``messages``, its final answer in
    ``content``.

    Parameters
    ----------
    reply : str or sequence of Mapping
        A text reply, or a trajectory (a list of chat messages, checked by :func:`normalize_messages`).
    adapter_id, model_id : str
        The response's ids.
    text : str, optional
        The content of a reply that is not a trajectory when ``reply`` is not a string (the batch
        engine passes the item's text); by default ``reply`` itself.

    Returns
    -------
    LLMResponse
        ``messages=None`` for a text reply.

    Raises
    ------
    ValidationError
        A malformed trajectory, or a reply that is neither text nor a list of messages.
    """
    if is_trajectory(reply):
        messages = normalize_messages(reply, where="the trajectory")
        return LLMResponse(content=final_answer(messages), adapter_id=adapter_id, model_id=model_id,
                           messages=tuple(messages))
    if text is None:
        if not isinstance(reply, str):
            raise ValidationError(f"a reply must be a string or a list of messages, got {type(reply).__name__}")
        text = reply
    return LLMResponse(content=text, adapter_id=adapter_id, model_id=model_id)


def _check_context(value: Any, where: str) -> list[str]:
    return list(documents(value, where=where) or ())


def documents(value: Any, *, where: str = "") -> tuple[str, ...] | None:
    """An item's ``context`` as a tuple of documents, checked: the one reading every judge and view uses.

    Parameters
    ----------
    value
        A list (or tuple, or numpy array) of strings; ``None`` or NaN for an item without documents.
    where
        Where the value is, for an error (``"line 3"``).

    Returns
    -------
    tuple of str or None
        The documents; ``None`` when the item has none.

    Raises
    ------
    ValidationError
        A string, a mapping or another non-list, or a document that is not a string.
    """
    if value is None or (isinstance(value, float) and value != value):  # NaN: a row without documents
        return None
    value = _as_list(value)
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ValidationError(_where(where, f"context must be a list of strings (the documents), got "
                                            f"{type(value).__name__}"))
    for j, doc in enumerate(value):
        if not isinstance(doc, str):
            raise ValidationError(_where(where, f"context[{j}] is a {type(doc).__name__}, not a string"))
    return tuple(value)


# -- turns ---------------------------------------------------------------------------------------


def _reply_runs(messages: Sequence[Mapping[str, Any]], where: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each reply: a maximal run of assistant and tool messages that starts with an assistant's."""
    runs = []
    i, n = 0, len(messages)
    while i < n:
        role = messages[i]["role"]
        if role == "tool":
            raise ValidationError(_where(where, f"message {i} is a tool result that follows no assistant message; "
                                                "a tool message answers the assistant's tool call before it"))
        if role != "assistant":
            i += 1
            continue
        j = i + 1
        while j < n and messages[j]["role"] in _REPLY_ROLES:
            j += 1
        runs.append((i, j))
        i = j
    return runs


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message["role"] == "user":
            return message_text(message)
    return None


def _run_reply(run: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if len(run) == 1 and "tool_calls" not in run[0]:
        return run[0]["content"]
    return run


def conversation_key(messages: Any) -> str:
    """The id of a conversation without one: :data:`CONVERSATION_KEY_PREFIX` and 24 hex digits of a SHA-256 of its
    messages (the same messages are the same conversation in every run and every order)."""
    payload = json.dumps(messages, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return CONVERSATION_KEY_PREFIX + hashlib.sha256(payload.encode("ascii")).hexdigest()[:24]


def _conversation_id(record: Mapping[str, Any], messages: list[dict[str, Any]]) -> Any:
    for key in ("conversation_id", "id"):
        value = record.get(key)
        if not _missing(value):
            return value
    return conversation_key(messages)


def _turn_rows(messages: list[dict[str, Any]], conversation_id: Any, carried: Mapping[str, Any],
               where: str, models: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    rows = []
    for turn, (start, end) in enumerate(_reply_runs(messages, where)):
        before = copy.deepcopy(messages[:start])
        row: dict[str, Any] = {
            "messages": before,
            "prompt": _last_user_text(before),
            "candidate": _run_reply(copy.deepcopy(messages[start:end])),
            "conversation_id": conversation_id,
            "turn": turn,
        }
        if models is not None:
            row["candidate_model"] = next((models[k] for k in range(end - 1, start - 1, -1)
                                           if messages[k]["role"] == "assistant" and models[k]), None)
        for key, value in carried.items():
            row[key] = copy.deepcopy(value)
        rows.append(row)
    return rows


def _split_record(record: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """The rows of one conversation (a mapping with ``messages``)."""
    reserved = [k for k in _PER_TURN_KEYS if k in record and not _missing(record[k])]
    if reserved:
        raise ValidationError(_where(where, f"has {', '.join(reserved)}: a conversation split per turn gets each "
                                            "turn's candidate and prompt from its messages; an item with its own "
                                            "candidate (and baseline) goes in a line of its own with the messages "
                                            "before it (read_conversations), or add the column to the frame "
                                            "per_turn returns"))
    messages = normalize_messages(record["messages"], where=where)
    carried = {k: v for k, v in record.items() if k not in ("messages", "id", "conversation_id", *_PER_TURN_KEYS)}
    if "context" in carried and not _missing(carried["context"]):
        carried["context"] = _check_context(carried["context"], where)
    return _turn_rows(messages, _conversation_id(record, messages), carried, where)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    import pandas as pd

    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c == "turn" else object) for c in TURN_COLUMNS})
    frame = pd.DataFrame.from_records(rows)
    first = [c for c in TURN_COLUMNS if c in frame.columns]
    frame = frame[first + [c for c in frame.columns if c not in first]]
    frame["turn"] = frame["turn"].astype("int64")
    return frame


def per_turn(conversations: Any) -> pd.DataFrame:
    """One item per assistant reply of each conversation, to judge every turn.

    A turn is a maximal run of ``assistant`` and ``tool`` messages (see the module's docstring): an
    agent's tool-call message, the tool results and its final answer are one turn, whose candidate
    is that list of messages (a trajectory); a turn of one plain assistant message has its text as
    candidate.

    Parameters
    ----------
    conversations : iterable or DataFrame
        Conversations, each a list of OpenAI chat messages, or a mapping with ``messages`` and
        optionally ``id`` / ``conversation_id`` and other fields (labels, ``context``...), which
        every turn of the conversation carries; or a DataFrame with a ``messages`` column (each row a
        conversation, its other columns carried likewise).

    Returns
    -------
    pandas.DataFrame
        One row per assistant reply, in input order: ``messages`` (the conversation before the
        reply), ``prompt`` (the text of the last user message before it; None when there is none),
        ``candidate`` (the reply: a string, or a list of messages), ``conversation_id`` (the
        conversation's ``conversation_id`` or ``id``; else :data:`CONVERSATION_KEY_PREFIX` and a
        hash of its messages), ``turn`` (0, 1, ... within the conversation), then the carried fields.

    Raises
    ------
    ValidationError
        A conversation that is not a list of messages or a mapping with ``messages``; a malformed
        message (the error names the conversation and the message index); a conversation that
        already has ``candidate``, ``baseline``, ``prompt`` or ``turn`` (those are per turn).

    Examples
    --------
    >>> from llm_connect.conversations import per_turn
    >>> items = per_turn([[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
    ...                    {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]])
    >>> items[["prompt", "candidate", "turn"]].values.tolist()
    [['Hi', 'Hello!', 0], ['2+2?', '4', 1]]
    """
    import pandas as pd

    if isinstance(conversations, pd.DataFrame):
        if "messages" not in conversations.columns:
            raise ValidationError(f"the frame has no 'messages' column; it has {list(conversations.columns)}")
        records: list[Any] = conversations.to_dict("records")
    elif isinstance(conversations, (str, bytes, Mapping)) or not isinstance(conversations, Iterable):
        raise ValidationError("conversations must be a list of conversations (each a list of messages or a mapping "
                              f"with 'messages'), or a DataFrame with a 'messages' column; got "
                              f"{type(conversations).__name__}")
    else:
        records = list(conversations)
        if records and isinstance(records[0], Mapping) and "role" in records[0] and "messages" not in records[0]:
            raise ValidationError("conversations is one conversation (a list of messages), not a list of them; "
                                  "wrap it: per_turn([messages])")
    rows: list[dict[str, Any]] = []
    for k, record in enumerate(records):
        where = f"conversation {k}"
        record = _as_list(record)
        if isinstance(record, Mapping):
            if "messages" not in record:
                raise ValidationError(f"{where} has no 'messages'; it has {sorted(map(str, record))}")
            rows.extend(_split_record(record, where))
        elif isinstance(record, (list, tuple)):
            rows.extend(_split_record({"messages": record}, where))
        else:
            raise ValidationError(f"{where} is a {type(record).__name__}, not a list of messages or a mapping with "
                                  "'messages'")
    return _frame(rows)


# -- files: OpenAI chat JSON Lines -----------------------------------------------------------------


def _item_row(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One line that holds its own candidate: an item as it is."""
    messages = normalize_messages(record["messages"], where=where)
    row: dict[str, Any] = {"messages": messages}
    prompt = record.get("prompt")
    if _missing(prompt):
        prompt = _last_user_text(messages)
    elif not isinstance(prompt, str):
        raise ValidationError(_where(where, f"prompt must be a string, got {type(prompt).__name__}"))
    row["prompt"] = prompt
    row["candidate"] = _reply(record["candidate"], _where(where, "candidate"))
    if not _missing(record.get("baseline")):
        row["baseline"] = _reply(record["baseline"], _where(where, "baseline"))
    if not _missing(record.get("context")):
        row["context"] = _check_context(record["context"], where)
    row["conversation_id"] = _conversation_id(record, messages)
    turn = record.get("turn")
    if _missing(turn):
        turn = len(_reply_runs(messages, where))
    elif isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
        raise ValidationError(_where(where, f"turn must be a whole number >= 0, got {_short(turn)}"))
    row["turn"] = turn
    for key, value in record.items():
        if key not in row and key not in ("messages", "prompt", "candidate", "baseline", "context", "turn"):
            row[key] = value
    return row


def _read_openai(text: str, path: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {n}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict) or "messages" not in record:
            raise ValidationError(f"{where}: not a conversation: expected an object with 'messages' (OpenAI chat "
                                  "format)")
        if _missing(record.get("candidate")):
            if not _missing(record.get("baseline")):
                raise ValidationError(f"{where}: has a baseline but no candidate; give the judged reply as "
                                      "'candidate' (and the messages before it as 'messages')")
            rows.extend(_split_record({k: v for k, v in record.items() if k != "candidate"}, where))
        else:
            rows.append(_item_row(record, where))
    return rows


# -- files: OTLP JSON GenAI spans ---------------------------------------------------------------------

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


# -- files -------------------------------------------------------------------------------------------

_FORMATS = ("auto", "openai", "otlp")


def _sniff(text: str, path: str) -> str:
    """``"otlp"`` or ``"openai"`` from the first JSON value of the file."""
    stripped = text.strip()
    if not stripped:
        return "openai"
    try:
        first = json.loads(stripped)
    except json.JSONDecodeError:
        line = stripped.splitlines()[0]
        try:
            first = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{path}: line 1: not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(first, Mapping) and "resourceSpans" in first:
        return "otlp"
    if isinstance(first, Mapping) and "messages" in first:
        return "openai"
    raise ValidationError(f"{path}: neither OpenAI chat JSON Lines (objects with 'messages') nor an OTLP JSON trace "
                          "export (an object with 'resourceSpans'); pass format='openai' or format='otlp'")


def read_conversations(path: str | os.PathLike[str], *, format: str = "auto") -> pd.DataFrame:
    """Items from a file of conversations: OpenAI chat JSON Lines, or GenAI spans exported as OTLP JSON.

    Parameters
    ----------
    path : str or path-like
        The file.
    format : {"auto", "openai", "otlp"}
        ``"openai"``: JSON Lines of ``{"messages": [...]}`` (the OpenAI chat and fine-tuning format),
        with optional ``id`` / ``conversation_id``, ``candidate``, ``baseline``, ``context`` and
        label fields. A line without ``candidate`` is a whole conversation, split into one item per
        assistant reply (:func:`per_turn`); a line with ``candidate`` is one item: ``messages`` are the
        conversation before the judged reply, ``prompt`` (when absent) the last user message and
        ``turn`` (when absent) the number of replies in ``messages``.

        ``"otlp"``: an OTLP JSON trace export (one object with ``resourceSpans``, or one per line as
        the collector's file exporter writes) of spans that follow the OpenTelemetry GenAI semantic
        conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (and
        ``gen_ai.system_instructions``) as span attributes, JSON strings or structured, or on a
        ``gen_ai.client.inference.operation.details`` span event; or the older per-message span
        events ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
        ``gen_ai.tool.message`` and ``gen_ai.choice`` (their body in ``body``, in the attribute
        ``gen_ai.event.content``, or as attributes). Spans are grouped into conversations by
        ``gen_ai.conversation.id``, else by trace id; the model calls of a conversation
        (``gen_ai.operation.name`` chat, text_completion or generate_content; the other spans only
        when it has none) are read in start-time order, each one's input continuing the history so
        far and its output the next reply, and the conversation is split per turn (messages after
        a conversation's last model call, such as the results of its last tool calls, reached no
        model and are in no span, so in no item). The items get
        ``candidate_model`` (``gen_ai.response.model``, else ``gen_ai.request.model``) when the
        spans name it. Reasoning parts are left out.

        ``"auto"``: told from the first JSON value of the file.

    Returns
    -------
    pandas.DataFrame
        Items: ``messages``, ``prompt``, ``candidate``, (``baseline``, ``context``),
        ``conversation_id``, ``turn``, then the other fields.

    Raises
    ------
    ValidationError
        An unknown ``format``; a line or span that is not JSON or not of the format; a malformed
        message (the error names the line or span id and the message index); several output choices
        in one span; a model call whose input does not continue its conversation.
    OSError
        The file cannot be read.
    """
    if format not in _FORMATS:
        raise ValidationError(f"unknown format {_short(format)}; choose from {', '.join(_FORMATS)}")
    shown = str(path)
    text = Path(path).read_text(encoding="utf-8-sig")
    kind = _sniff(text, shown) if format == "auto" else format
    rows = _read_otlp(text, shown) if kind == "otlp" else _read_openai(text, shown)
    return _frame(rows)
