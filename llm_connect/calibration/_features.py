"""The model family of an answer, which self-preference reads (length and format: ``stats.text_features``)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["model_family"]

# Checked in order; the first family whose pattern matches the (lower-cased)
# model name wins. Patterns match at a word start so "gpt" in "chatgpt" counts
# but an organisation prefix ("meta-llama/", "openai/") does not get in the way.
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpt", r"(?:^|[/_\-\s:.])(?:chat)?gpt|(?:^|[/_\-\s:])o[1345](?:$|[-_])|text-davinci|davinci|babbage"),
    ("claude", r"claude"),
    ("llama", r"llama"),
    ("smollm", r"smollm"),
    ("mixtral", r"mixtral"),
    ("mistral", r"mistral|ministral|codestral"),
    ("gemini", r"gemini"),
    ("gemma", r"gemma"),
    ("qwen", r"qwen|qwq"),
    ("phi", r"(?:^|[/_\-\s:])phi"),
    ("deepseek", r"deepseek"),
    ("command", r"command|cohere"),
    ("falcon", r"falcon"),
    ("olmo", r"olmo"),
    ("granite", r"granite"),
)
_FAMILY_RES = tuple((name, re.compile(pattern)) for name, pattern in _FAMILIES)
_LEADING_WORD = re.compile(r"[a-z]+")


def model_family(model: Any) -> str | None:
    """The family of a model name, as self-preference compares a judge's family with an answer's.

    Parameters
    ----------
    model : str or None
        A model name, with or without an ``org/`` prefix. Known families are recognised anywhere in the name
        (``"meta-llama/Llama-3-8B"``: ``"llama"``); otherwise the leading run of letters after any ``org/`` prefix is
        the family.

    Returns
    -------
    str or None
        The family, lower-cased; ``None`` for ``None``, NaN or a blank name.
    """
    if model is None or (isinstance(model, float) and np.isnan(model)):
        return None
    name = str(model).strip().lower()
    if not name:
        return None
    for family, pattern in _FAMILY_RES:
        if pattern.search(name):
            return family
    tail = name.rsplit("/", 1)[-1]
    match = _LEADING_WORD.search(tail)
    return match.group(0) if match else tail
