"""The style of an answer as numbers: Chatbot Arena's four style features, and their normalised
differences between the two answers of a comparison.

Chatbot Arena's style control (LMSYS, August 2024, "Does style matter? Disentangling style and
substance in Chatbot Arena"; FastChat's ``fastchat/serve/monitor/rating_systems.py``,
``preprocess_for_style`` / ``compute_style_control``, and ``add_markdown_info.py``,
``count_markdown_elements``) describes each answer by four counts:

==============  ==================================================================================
feature         counted as
==============  ==================================================================================
``length``      tokens (Arena: ``sum_assistant_tokens``, a tokenizer's count); here words and
                punctuation marks, ``\\w+|[^\\w\\s]``, a tokenizer-free stand-in: the feature is a
                ratio of the two answers' counts, so the tokenizer's scale cancels
``headers``     markdown headers, lines starting with one to six ``#`` and a space (``header_count``)
``lists``       list items, ordered (``1.``) and unordered (``-``, ``*``, ``+``) (``list_count``)
``bold``        bold spans, ``**text**`` and ``__text__`` (``bold_count``)
==============  ==================================================================================

Headers, list items and bold spans are counted outside fenced code blocks (FastChat removes them
first). The comparison's feature is the normalised difference ``(a - b) / (a + b + 1)`` of answer
A's count and answer B's (FastChat's ``apply_ratio`` with ``add_one``: the ``+ 1`` keeps two answers
without a header at 0 instead of 0/0), a number in (-1, 1): 0 when the two answers are alike, near
1 when only A has the feature. :func:`~llm_connect.stats.bradley_terry.leaderboard` with ``style=``
appends these columns to the Bradley–Terry regression.

The names ``sum_assistant_tokens``/``tokens``, ``header_count``, ``list_count`` and ``bold_count``
are read as the four features too (:func:`style_feature`). An answer given as a conversation (a list of
turns, or one JSON-encoded as Arena's published preference data stores it) is its assistant turns joined
by newlines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = ["STYLE_FEATURES", "normalised_difference", "style_counts", "style_differences", "style_feature"]

#: Chatbot Arena's four style features, in Arena's order.
STYLE_FEATURES: tuple[str, ...] = ("length", "headers", "lists", "bold")
_ALIASES: dict[str, str] = {
    "length": "length", "tokens": "length", "sum_assistant_tokens": "length", "sum_assistant_token": "length",
    "headers": "headers", "header": "headers", "header_count": "headers",
    "lists": "lists", "list": "lists", "list_count": "lists",
    "bold": "bold", "bold_count": "bold",
}
#: What each feature counts, in words (for pages and notes).
FEATURE_WORDS: dict[str, str] = {"length": "length", "headers": "markdown headers", "lists": "list items",
                                 "bold": "bold text"}

_TOKEN = re.compile(r"\w+|[^\w\s]")
_CODE_BLOCK = re.compile(r"```([^`]*)```")  # FastChat's pattern (get_element_counts)
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)  # h1..h6, as FastChat's six patterns summed
_ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
_UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
_BOLD_STARS = re.compile(r"\*\*[^*\n]+\*\*")
_BOLD_UNDERSCORES = re.compile(r"__[^_\n]+__")


def style_feature(name: Any) -> str | None:
    """The Arena feature ``name`` stands for (``"length"``, ``"headers"``, ``"lists"``, ``"bold"``; also
    FastChat's names such as ``"header_count"``), or ``None`` when it is not one."""
    if not isinstance(name, str):
        return None
    return _ALIASES.get(name.strip().casefold())


def _text(value: Any) -> str:
    """An answer as one text. A conversation is its assistant turns joined by newlines, as FastChat
    joins them: a list of strings (or of ``{"role", "content"}`` messages), also when it arrives
    JSON-encoded (``'["first turn", "second"]'``, as Arena's published preference data stores
    responses). Missing is empty."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, str):
        stripped = value.strip()
        if not (stripped.startswith("[") and stripped.endswith("]")):
            return value
        try:
            decoded = json.loads(stripped)
        except ValueError:
            return value
        if not isinstance(decoded, list) or not all(v is None or isinstance(v, (str, dict)) for v in decoded):
            return value
        value = decoded
    if isinstance(value, (list, tuple, np.ndarray)):
        turns = []
        for turn in value:
            if isinstance(turn, dict):
                if turn.get("role", "assistant") == "assistant" and turn.get("content") is not None:
                    turns.append(str(turn["content"]))
            elif turn is not None and not (isinstance(turn, float) and turn != turn):
                turns.append(str(turn))
        return "\n".join(turns)
    return str(value)


def _counts(text: str) -> tuple[int, int, int, int]:
    prose = _CODE_BLOCK.sub("", text)
    return (len(_TOKEN.findall(text)), len(_HEADER.findall(prose)),
            len(_ORDERED.findall(prose)) + len(_UNORDERED.findall(prose)),
            len(_BOLD_STARS.findall(prose)) + len(_BOLD_UNDERSCORES.findall(prose)))


def style_counts(texts: Iterable[Any]) -> pd.DataFrame:
    """Per text, Chatbot Arena's four style counts: ``length`` (words and punctuation marks),
    ``headers``, ``lists`` (list items) and ``bold`` (bold spans), the last three outside fenced code
    blocks (see the module docstring). A missing text (``None``, NaN) counts as empty; a conversation
    (a list of turns, or JSON-encoded) counts its assistant turns joined by newlines."""
    rows = [_counts(_text(t)) for t in texts]
    arr = np.asarray(rows, dtype=np.int64).reshape(len(rows), len(STYLE_FEATURES))
    return pd.DataFrame(arr, columns=list(STYLE_FEATURES))


def normalised_difference(a: Any, b: Any) -> np.ndarray:
    """``(a - b) / (a + b + 1)`` for non-negative counts ``a`` and ``b`` (FastChat's style ratio with
    ``add_one``): 0 when equal, toward 1 when only ``a`` has the feature, toward -1 when only ``b``."""
    a_ = np.asarray(a, dtype=float)
    b_ = np.asarray(b, dtype=float)
    return (a_ - b_) / (a_ + b_ + 1.0)


def style_differences(text_a: Iterable[Any], text_b: Iterable[Any],
                      features: Sequence[str] = STYLE_FEATURES) -> pd.DataFrame:
    """Per comparison, the normalised differences ``(a - b) / (a + b + 1)`` of the two answers' style
    counts (:func:`style_counts`), one column per feature of ``features`` (Arena's four by default;
    FastChat's names are read too). Positive: answer A has more of it."""
    names = []
    for f in features:
        canon = style_feature(f)
        if canon is None:
            raise ValidationError(f"unknown style feature {f!r}; the Arena features are {', '.join(STYLE_FEATURES)}")
        if canon not in names:
            names.append(canon)
    ca, cb = style_counts(text_a), style_counts(text_b)
    if len(ca) != len(cb):
        raise ValidationError(f"the two answer columns differ in length ({len(ca)} vs {len(cb)})")
    return pd.DataFrame({f: normalised_difference(ca[f].to_numpy(), cb[f].to_numpy()) for f in names},
                        columns=names)
