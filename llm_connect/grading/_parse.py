"""Defensive parsing of judge replies: JSON verdicts and logprob-weighted labels."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import TokenLogprob
from ..errors import JudgeReplyError, LogprobsUnavailableError

__all__ = ["expected_label_value", "find_json_objects", "parse_score_reply", "quote"]

_MAX_REPLY = 200_000  # characters scanned for JSON; longer replies are truncated for parsing


def quote(text: str, limit: int = 200) -> str:
    """``text`` shortened to ``limit`` characters, for error messages."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(text)


def find_json_objects(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Every JSON object in ``text`` as ``(start, end, object)``, in order of start.

    The objects may sit in prose or a code fence; nested objects are found too.
    """
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, dict[str, Any]]] = []
    text = text[:_MAX_REPLY]
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(obj, dict):
                found.append((pos, end, obj))
        pos = text.find("{", pos + 1)
    return found


def parse_score_reply(
    reply: str,
    *,
    key: str = "quality_score",
    ignore_texts: Iterable[str] = (),
) -> tuple[float, str, dict[str, Any]]:
    """Take ``(score, notes, object)`` from the last JSON object in ``reply`` holding ``key``.

    Objects whose exact text also appears in one of ``ignore_texts`` (the
    candidate, the reference: text the judge was shown, not its verdict) are
    disregarded, so a verdict planted in a candidate and echoed back is never
    taken as the judge's. Raises :class:`JudgeReplyError` (a ``ValueError``)
    naming what was wrong and quoting the reply.
    """
    if not isinstance(reply, str):
        raise JudgeReplyError(f"judge reply must be text, got {type(reply).__name__}", reply=None)
    ignore = [t for t in ignore_texts if t]
    objects = find_json_objects(reply)
    if not objects:
        raise JudgeReplyError(f"judge reply holds no JSON object with {key!r}: {quote(reply)}", reply=reply)
    with_key = [(s, e, o) for s, e, o in objects if key in o]
    if not with_key:
        raise JudgeReplyError(f"judge reply's JSON has no {key!r} field: {quote(reply)}", reply=reply)
    own = [(s, e, o) for s, e, o in with_key if not any(reply[s:e] in t for t in ignore)]
    if not own:
        raise JudgeReplyError(
            f"the only {key!r} verdicts in the judge reply were copied from the text it was judging "
            f"(a planted verdict is never taken as the judge's): {quote(reply)}",
            reply=reply,
        )
    _, _, obj = own[-1]
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeReplyError(
            f"{key} must be a JSON number, got {type(value).__name__} {value!r}: {quote(reply)}", reply=reply
        )
    score = float(value)
    if math.isnan(score):
        raise JudgeReplyError(f"{key} is NaN: {quote(reply)}", reply=reply)
    if not 0.0 <= score <= 1.0:
        raise JudgeReplyError(f"{key} {score!r} is outside 0.0..1.0 (not clamped): {quote(reply)}", reply=reply)
    notes = obj.get("notes", "")
    if notes is None:
        notes = ""
    elif not isinstance(notes, str):
        notes = json.dumps(notes, ensure_ascii=False)
    return score, notes, obj


def _norm_token(token: str) -> str:
    return token.strip().strip("\"'`*.").lower()


def expected_label_value(
    logprobs: Sequence[TokenLogprob] | None,
    label_values: Mapping[str, float],
    *,
    adapter_id: str = "the adapter",
) -> tuple[float, dict[str, float]]:
    """The probability-weighted mean of ``label_values`` at the first position that offers a label.

    ``label_values`` maps each label (e.g. ``"1"``..``"5"`` or ``"yes"``/``"no"``)
    to its value in 0..1. At the first generated token that is a label (or, if
    none is, the first whose top alternatives include one), the label
    probabilities are renormalised over the labels offered there. Raises
    :class:`LogprobsUnavailableError` when there are no logprobs and
    :class:`JudgeReplyError` when no position offers a label.
    """
    if not logprobs:
        raise LogprobsUnavailableError(
            f"logprob scoring needs token probabilities but {adapter_id} returned none; "
            "use an adapter that exposes top logprobs (OpenAI-compatible endpoints, LlamaCppAdapter) "
            "or scoring='json'"
        )
    wanted = {_norm_token(k): v for k, v in label_values.items()}
    # The rating is where the model actually wrote a label; only when it wrote
    # none do we fall back to the first position that offered one.
    chosen = [p for p in logprobs if _norm_token(p.token) in wanted]
    for position in chosen[:1] or logprobs:
        offered: list[tuple[str, float]] = []
        alternatives = list(position.top) or [(position.token, position.logprob)]
        for token, lp in alternatives:
            label = _norm_token(token)
            if label in wanted:
                if not isinstance(lp, (int, float)) or not math.isfinite(lp) or lp > 1e-6:
                    raise JudgeReplyError(
                        f"the adapter returned an invalid log-probability {lp!r} for label {label!r} "
                        "(a log-probability is a finite number <= 0)",
                        reply=position.token,
                    )
                offered.append((label, float(lp)))
        if offered:
            # shift by the largest log-probability so nothing under- or overflows;
            # the same label may appear as several tokens (" 3", "3"): add their mass
            top_lp = max(lp for _, lp in offered)
            mass: dict[str, float] = {}
            for label, lp in offered:
                mass[label] = mass.get(label, 0.0) + math.exp(lp - top_lp)
            total = sum(mass.values())
            probs = {k: p / total for k, p in mass.items()}
            value = sum(wanted[k] * p for k, p in probs.items())
            return min(1.0, max(0.0, value)), probs
    generated = "".join(p.token for p in logprobs)
    raise JudgeReplyError(
        f"no generated position offered one of the labels {sorted(label_values)} among its top tokens: "
        f"{quote(generated)}",
        reply=generated,
    )
