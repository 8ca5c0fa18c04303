"""A file of conversations as items: :func:`read_conversations` tells the format (OpenAI chat JSON Lines, OTLP
JSON GenAI spans) and reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ValidationError
from ._messages import _short
from ._openai import _read_openai
from ._otlp import _read_otlp
from ._turns import _frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_conversations"]

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
