"""Reading OpenAI chat JSON Lines: each line a whole conversation (split per turn) or one item with its own
candidate (``messages`` the conversation before the judged reply).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ._messages import _check_context, _missing, _reply, _short, _where, normalize_messages
from ._turns import _conversation_id, _last_user_text, _reply_runs, _split_record


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
