"""A conversation split into turns: one item per assistant reply (:func:`per_turn`). A turn is a maximal run of
``assistant`` and ``tool`` messages, which ends at the next ``user`` or ``system`` message (see
:mod:`llm_connect.conversations`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ._messages import _as_list, _check_context, _missing, _where, message_text, normalize_messages

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CONVERSATION_KEY_PREFIX", "TURN_COLUMNS", "conversation_key", "per_turn"]

#: The columns :func:`per_turn` and :func:`read_conversations` always give, in this order.
TURN_COLUMNS = ("messages", "prompt", "candidate", "conversation_id", "turn")
#: The prefix of the id of a conversation that has none: ``"conv:"`` and 24 hex digits of a SHA-256 of
#: its messages (never its position in the input, which is another conversation's).
CONVERSATION_KEY_PREFIX = "conv:"
_REPLY_ROLES = ("assistant", "tool")
# keys of a conversation that per_turn computes for each turn: a conversation may not bring its own
_PER_TURN_KEYS = ("candidate", "baseline", "prompt", "turn")


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
    """The id of a conversation without one: :data:`CONVERSATION_KEY_PREFIX` and 24 hex digits of a SHA-256.

    Of its messages: the same messages are the same conversation in every run and every order.

    Parameters
    ----------
    messages : sequence of mapping
        The conversation's messages.

    Returns
    -------
    str
        The key.
    """
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
