"""Per-answer features used by the calibration diagnostics: length, format, model family."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["FEATURE_COLUMNS", "model_family", "text_features"]

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
    """The family of a model name: ``"gpt-4o-mini"`` -> ``"gpt"``, ``"claude-3-haiku"`` -> ``"claude"``,
    ``"llama-3-8b"`` -> ``"llama"``, ``"smollm2-135m-instruct"`` -> ``"smollm"``.

    Known families are recognised anywhere in the name (``"meta-llama/Llama-3-8B"`` -> ``"llama"``);
    otherwise the leading run of letters after any ``org/`` prefix is used. ``None`` or a blank
    name gives ``None``.
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


_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
_CODE = re.compile(r"```|`[^`\n]+`")

FEATURE_COLUMNS = (
    "candidate_chars",
    "candidate_words",
    "baseline_chars",
    "baseline_words",
    "length_ratio",
    "has_header",
    "has_list",
    "has_bold",
    "has_code",
    "markdown_features",
)


def _as_text(values: Iterable[Any]) -> pd.Series:
    series = pd.Series(list(values), dtype=object)
    return series.map(lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v))


def text_features(candidate: Iterable[Any], baseline: Iterable[Any] | None = None) -> pd.DataFrame:
    """Length and format features of each candidate answer (and the baseline's length).

    Columns: ``candidate_chars``, ``candidate_words`` (whitespace-separated), ``baseline_chars``,
    ``baseline_words``, ``length_ratio`` (candidate words over baseline words, NaN without a
    baseline), and the markdown flags ``has_header``, ``has_list``, ``has_bold``, ``has_code``
    with their count ``markdown_features``.
    """
    cand = _as_text(candidate)
    out = pd.DataFrame(index=range(len(cand)))
    out["candidate_chars"] = cand.str.len().astype("int64")
    out["candidate_words"] = cand.map(lambda s: len(s.split())).astype("int64")
    if baseline is not None:
        base = _as_text(baseline)
        if len(base) != len(cand):
            raise ValueError(f"candidate and baseline differ in length ({len(cand)} vs {len(base)})")
        out["baseline_chars"] = base.str.len().astype("int64")
        out["baseline_words"] = base.map(lambda s: len(s.split())).astype("int64")
        words = out["baseline_words"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["length_ratio"] = np.where(words > 0, out["candidate_words"].to_numpy(dtype=float) / words, np.nan)
    else:
        out["baseline_chars"] = pd.array([pd.NA] * len(cand), dtype="Int64")
        out["baseline_words"] = pd.array([pd.NA] * len(cand), dtype="Int64")
        out["length_ratio"] = np.nan
    out["has_header"] = cand.map(lambda s: bool(_HEADER.search(s))).astype(bool)
    out["has_list"] = cand.map(lambda s: bool(_LIST.search(s))).astype(bool)
    out["has_bold"] = cand.map(lambda s: bool(_BOLD.search(s))).astype(bool)
    out["has_code"] = cand.map(lambda s: bool(_CODE.search(s))).astype(bool)
    out["markdown_features"] = out[["has_header", "has_list", "has_bold", "has_code"]].sum(axis=1).astype("int64")
    return out
