"""One message and a list of them checked strictly (OpenAI chat messages: roles, content parts, tool calls), a
reply as text or as an :class:`~llm_connect.core.LLMResponse`, and the ``context`` documents of an item. Every
error names where it is (``line 3: message 2: ...``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import LLMResponse
from ..errors import ValidationError
from ..items import is_missing

__all__ = ["ROLES", "as_response", "documents", "final_answer", "is_trajectory", "message_text", "normalize_message",
           "normalize_messages"]

#: The roles a chat message may have (``developer`` is OpenAI's newer name of ``system``).
ROLES = ("system", "developer", "user", "assistant", "tool")
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
    r"""The text of one (normalized or raw) message: its content, text parts joined by a newline.

    Parameters
    ----------
    message : mapping
        An OpenAI chat message.

    Returns
    -------
    str
        Its text (``""`` for none).

    Examples
    --------
    >>> message_text({"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]})
    'Hi\nthere'
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return _content_text(content, "", required=False)


def final_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """The final answer of a trajectory.

    Parameters
    ----------
    messages : sequence of mapping
        The trajectory's messages.

    Returns
    -------
    str
        The text of its last message when that is an assistant message, else ``""`` (a run that ended on a
        tool call or a tool result gave no answer).
    """
    if messages and messages[-1].get("role") == "assistant":
        return message_text(messages[-1])
    return ""


def is_trajectory(value: Any) -> bool:
    """True when an item's ``candidate`` / ``baseline`` is a list of messages (a trajectory), not a text.

    Parameters
    ----------
    value : object
        The item's value.

    Returns
    -------
    bool
        Whether it is a trajectory.
    """
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
