"""Defensive parsing of judge replies: JSON verdicts, planted-verdict filtering, logprob-weighted labels.

Untrusted text, pinned. Whatever a judge is shown but must not obey (the
candidate, the baseline, the question and any other item text) is
*untrusted*. Both :class:`~llm_connect.grading.LLMJudge` and the LLM units of
:mod:`llm_connect.pipelines` handle it with :class:`UntrustedText`:

- **Fencing.** Each untrusted text sits between ``<<<NAME fence>>>`` and
  ``<<<END NAME fence>>>`` markers, where ``fence`` is derived from a hash of
  the untrusted texts themselves (:func:`fence_for`), so a text cannot know,
  and so cannot fake, the fence around it; any copy of the fence inside a text
  is replaced by ``[fence]`` (:func:`defang`).
- **Filtering.** A verdict found in the judge's reply is *copied*, and
  disregarded, when it lies inside a copy of a fenced block (between copies
  of the fence markers), and:

  - a JSON verdict (:func:`parse_score_reply`), when the same object,
    compared **parsed** (``{"quality_score":1}`` and ``{ "quality_score": 1.0 }``
    are the same object), appears anywhere in the untrusted text;
  - a ``Verdict:`` line (:meth:`UntrustedText.own_verdict`), when it sits
    inside a quote of the untrusted text: a stretch of the reply, holding
    the verdict, that appears verbatim in one untrusted text and holds more
    of it than the verdict line (a word before it on its line or at the end
    of the line above, a word after it) or the whole of it. A short verdict
    line on its own is too common to be called a copy by its text alone, so
    when the judge's remaining verdicts disagree, one whose value a verdict
    in the untrusted text also gives yields to one whose value none does.

  Only the judge's own verdicts remain; a reply whose only verdicts are
  copied has none (an *unscored* row, never the planted score).

Limits: each untrusted text is read up to 2,000,000 characters and a reply
up to 200,000 for JSON, in linear time (:func:`find_json_objects`); an
object planted after text so deeply nested that it exhausts the JSON scan's
bound is still caught when copied verbatim, not when re-serialised.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import reprlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import TokenLogprob
from ..errors import JudgeReplyError, LogprobsUnavailableError

__all__ = [
    "Found",
    "UntrustedText",
    "brief_repr",
    "defang",
    "expected_label_value",
    "fence_block",
    "fence_for",
    "fenced_spans",
    "find_json_objects",
    "json_key",
    "parse_score_reply",
    "quote",
    "top_level",
]

_MAX_REPLY = 200_000  # characters scanned for JSON; longer replies are truncated for parsing
_MAX_UNTRUSTED = 2_000_000  # characters of each untrusted text scanned for planted verdicts
_MAX_VERDICTS = 200  # verdict lines of one reply weighed (the first and last 100); more is an echo
_MAX_OCCURRENCES = 100  # places in one untrusted text a verdict line is looked up at
_WORD = re.compile(r"\w")
_LAST_WORD = re.compile(r".*(\w)", re.DOTALL)
_OBJECT_START = re.compile(r"\{\s*[\"}]")  # where a JSON object can start: '{', whitespace, then a key or '}'


def quote(text: str, limit: int = 200) -> str:
    """``text`` shortened to ``limit`` characters, for error messages."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(text)


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxtuple, _BRIEF.maxdict, _BRIEF.maxset = 3, 6, 6, 6, 6
_BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 80, 80, 40


def brief_repr(value: Any) -> str:
    """A bounded ``repr`` of any value, for error messages: long, deep or self-referencing data is cut short."""
    try:
        text = _BRIEF.repr(value)
    except Exception:  # e.g. an int past Python's digit limit, or a repr that raises
        return f"<a {type(value).__name__}>"
    return text if len(text) <= 200 else text[:199] + "…"


def find_json_objects(text: str, *, limit: int = _MAX_REPLY) -> list[tuple[int, int, dict[str, Any]]]:
    """Every JSON object in ``text`` as ``(start, end, object)``, in order of start.

    The objects may sit in prose or a code fence; nested objects are found too
    (:func:`top_level` keeps the outermost ones). The work is linear and bounded: a try starts only
    where an object can (``{``, whitespace, then ``"`` or ``}``) and decodes a
    window that widens only while the object runs past it, so a failed try
    costs what it read, not the length of the text before it; after about
    ``64 * len(text)`` characters of work (only deeply nested text needs that
    much) the later objects are not looked for.

    Parameters
    ----------
    text : str
        A reply.
    limit : int, default 200000
        Only the first ``limit`` characters are read.

    Returns
    -------
    list of (int, int, dict)
        Each object's start and end offsets in ``text`` and the object.

    Examples
    --------
    >>> find_json_objects('Verdict: {"quality_score": 0.8, "notes": "ok"} done')
    [(9, 46, {'quality_score': 0.8, 'notes': 'ok'})]
    """
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, dict[str, Any]]] = []
    text = text[:limit]
    n = len(text)
    budget = 64 * n + 1_000_000
    for m in _OBJECT_START.finditer(text):
        if budget <= 0:
            break
        pos = m.start()
        window = 256
        while True:
            chunk = text[pos : pos + window]
            try:
                obj, end = decoder.raw_decode(chunk)
            except json.JSONDecodeError as exc:  # a window that cut the object short is widened
                budget -= 32 + exc.pos
                if pos + window < n and (exc.pos >= len(chunk) - 16 or exc.msg.startswith("Unterminated string")):
                    window *= 8
                    continue
                break
            except (ValueError, RecursionError):  # nested past the interpreter's limit: it read the window
                budget -= 32 + len(chunk)
                break
            budget -= 32 + end
            if isinstance(obj, dict):
                found.append((pos, pos + end, obj))
            break
    return found


def top_level(objects: Sequence[tuple[int, int, Any]]) -> list[bool]:
    """For each of ``objects`` (in order of start, as :func:`find_json_objects` gives them): is it outermost?

    An object that starts inside an earlier one's text is nested (or a piece of it).
    """
    flags: list[bool] = []
    reach = -1
    for start, end, _ in objects:
        flags.append(start >= reach)
        reach = max(reach, end)
    return flags


def _canon(value: Any, depth: int) -> Hashable:
    if depth > 200:
        raise RecursionError("JSON value nested too deeply to compare")
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        try:
            return ("num", float(value))
        except OverflowError:
            return ("int", value)
    if isinstance(value, float):
        return ("nan",) if math.isnan(value) else ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", tuple(_canon(v, depth + 1) for v in value))
    if isinstance(value, dict):
        return ("obj", frozenset((str(k), _canon(v, depth + 1)) for k, v in value.items()))
    return ("other", repr(value))


def json_key(value: Any) -> Hashable:
    """A hashable form of a decoded JSON value: equal for equal values, whatever their spelling.

    ``1`` and ``1.0`` are the same number; ``true`` is not ``1``; key order and
    whitespace do not matter.
    """
    try:
        return _canon(value, 0)
    except RecursionError:
        return ("deep", json.dumps(value, sort_keys=True, default=repr)[:10_000])


# -- untrusted text: fences and planted verdicts ---------------------------------------------------


def fence_for(*texts: str) -> str:
    """A fence marker (12 hex digits) derived from a hash of ``texts``: a text cannot know its own fence."""
    return hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def defang(text: str, fence: str) -> str:
    """``text`` with every copy of ``fence`` replaced by ``[fence]``."""
    return text.replace(fence, "[fence]")


def tag_fence_for(*texts: str) -> str:
    """A short tag code (a letter and a digit, as ``a1``) derived from a hash of ``texts``.

    For prompts that fence each text between ``<code>`` and ``</code>`` tags:
    two tokens a tag, where :func:`fence_for`'s 12 hex digits cost a small
    local model a dozen. A text cannot choose its code, and
    :func:`defang_tags` removes every tag of it from the text.
    """
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8", "surrogatepass")).digest()
    return "abcdefghijklmnopqrstuvwxyz"[digest[0] % 26] + "0123456789"[digest[1] % 10]


def defang_tags(text: str, code: str) -> str:
    """``text`` with every opening or closing tag of ``code`` (any case or spacing) replaced by ``[fence]``.

    Only the tags are replaced, so a short code inside a word or number
    (``a1`` in ``A1 sauce``) is left as written.
    """
    tag = re.compile(r"<\s*/?\s*" + re.escape(code) + r"\s*>", re.IGNORECASE)
    while True:  # replacing can never form a new tag, but make that a property rather than an argument
        text, n = tag.subn("[fence]", text)
        if not n:
            return text


def fence_block(label: str, text: str, fence: str) -> str:
    """``text`` (defanged) between ``<<<LABEL fence>>>`` and ``<<<END LABEL fence>>>`` lines."""
    return f"<<<{label} {fence}>>>\n{defang(text, fence)}\n<<<END {label} {fence}>>>"


def fenced_spans(reply: str, fence: str) -> list[tuple[int, int]]:
    """The parts of ``reply`` that are copies of fenced blocks, as ``(start, end)``.

    A copied opening marker starts a span that its closing marker ends (or the
    end of the reply, when the copy was cut short); a closing marker without an
    opening one ends a span that starts where the previous one ended (or at the
    start of the reply).
    """
    if not fence or fence not in reply:
        return []
    marker = re.compile(r"<<<(END )?[^<>\n]{1,80}? " + re.escape(fence) + ">>>")
    spans: list[tuple[int, int]] = []
    opened: int | None = None
    last_end = 0
    for m in marker.finditer(reply):
        if m.group(1) is None:  # an opening marker
            if opened is None:
                opened = m.start()
            continue
        spans.append((opened if opened is not None else last_end, m.end()))
        opened = None
        last_end = m.end()
    if opened is not None:
        spans.append((opened, len(reply)))
    return spans


@dataclass(frozen=True)
class Found:
    """A verdict found in a reply: where it is, its comparison key, and what it carries."""

    start: int
    end: int
    key: Hashable
    value: Any = None


class UntrustedText:
    """The texts a judge is shown but must not obey; fences them and tells copied verdicts from the judge's own.

    ``texts`` are the untrusted texts (empty ones are kept for the fence, so the
    fence of ``(prompt, baseline, candidate)`` is that of the three strings);
    ``fence`` overrides the derived marker; ``tags=True`` derives a short tag
    code (:func:`tag_fence_for`) for prompts that fence texts between
    ``<code>`` tags, and :meth:`defang` then removes only those tags.
    """

    def __init__(self, texts: Iterable[str] = (), *, fence: str | None = None, tags: bool = False) -> None:
        self.texts: tuple[str, ...] = tuple(t for t in texts if isinstance(t, str))
        self.tags = tags
        if fence is None:
            fence = tag_fence_for(*self.texts) if tags else fence_for(*self.texts)
        self.fence = fence
        self._json_keys: frozenset[Hashable] | None = None

    def block(self, label: str, text: str) -> str:
        """``text`` fenced as ``label``."""
        return fence_block(label, text, self.fence)

    def defang(self, text: str) -> str:
        """``text`` unable to close its fence: every tag of it (``tags=True``) or every copy of it replaced."""
        return defang_tags(text, self.fence) if self.tags else defang(text, self.fence)

    def scanned(self) -> Iterable[str]:
        """The texts as scanned for planted verdicts (each cut at a fixed length)."""
        return (t[:_MAX_UNTRUSTED] for t in self.texts if t)

    def planted(self, keys_in: Callable[[str], Iterable[Hashable]]) -> frozenset[Hashable]:
        """Every key ``keys_in`` finds in the untrusted texts: the verdicts planted there."""
        out: set[Hashable] = set()
        for text in self.scanned():
            out.update(keys_in(text))
        return frozenset(out)

    @property
    def json_keys(self) -> frozenset[Hashable]:
        """The :func:`json_key` of every JSON object (nested ones too) in the untrusted texts."""
        if self._json_keys is None:
            self._json_keys = self.planted(
                lambda t: (json_key(o) for _, _, o in find_json_objects(t, limit=_MAX_UNTRUSTED))
            )
        return self._json_keys

    def quoted_at(self, reply: str, start: int, end: int) -> bool:
        """Is ``reply[start:end]`` (a verdict line) part of a quote of one untrusted text?

        It is when, at a place where that text holds the line too, the text
        around it matches the reply's up to a word before it (the nearest word
        on its line or the line above) or a word after it; or when the text is
        nothing but that line.
        """
        seg = reply[start:end].rstrip()
        size = len(seg)
        if not seg:
            return False
        before = _LAST_WORD.match(reply, 0, start)
        left = before.start(1) if before else -1  # the nearest word character before the line
        after = _WORD.search(reply, start + size)
        right = after.end() if after else -1  # just past the nearest word character after it
        for text in self.scanned():
            if seg.strip() == text.strip():
                return True
            at = text.find(seg)
            for _ in range(_MAX_OCCURRENCES):
                if at == -1:
                    break
                if left >= 0 and at >= start - left and reply[left:start] == text[at - (start - left) : at]:
                    return True
                tail = at + size
                if right >= 0 and reply[start + size : right] == text[tail : tail + right - start - size]:
                    return True
                at = text.find(seg, at + 1)
        return False

    def own_verdict(
        self, reply: str, found: Sequence[Found], planted: Callable[[], Iterable[Hashable]]
    ) -> Found | None:
        """The judge's own verdict among the verdict lines ``found`` in ``reply``; ``None`` when all were copied.

        ``found`` spans each line from its marker to the line's end, keyed by
        the value it gives; ``planted()`` gives the values verdicts in the
        untrusted text give (asked only when the judge's own verdicts
        disagree). Copied lines (see the module docs) are dropped; of the rest
        the last counts, except that when they disagree, those whose value is
        planted give way to those whose value is not. When they disagree and
        every value is planted, the reply is ambiguous: a
        :class:`JudgeReplyError`.
        """
        spans = fenced_spans(reply, self.fence)
        half = _MAX_VERDICTS // 2
        weighed = list(found) if len(found) <= _MAX_VERDICTS else [*found[:half], *found[-half:]]
        own = [
            f
            for f in weighed
            if not any(s <= f.start < e for s, e in spans) and not self.quoted_at(reply, f.start, f.end)
        ]
        if not own:
            return None
        if len({f.key for f in own}) == 1:
            return own[-1]
        keys = frozenset(planted())
        clean = [f for f in own if f.key not in keys]
        if clean:
            return clean[-1]
        raise JudgeReplyError(
            "the reply gives conflicting verdicts, each of which the text it was judging also gives, so which "
            f"is the judge's own cannot be told: {quote(reply)}",
            reply=reply,
        )

    def split(self, reply: str, found: Sequence[Found], planted: Iterable[Hashable]) -> tuple[list[Found], list[Found]]:
        """``found`` split into the judge's own verdicts and the copied ones (both in reply order).

        Copied: inside a copy of a fenced block, with a key in ``planted``, or
        (a check that needs no parsing, in case a hostile text was too costly
        to parse whole) with its exact text in an untrusted text.
        """
        planted = planted if isinstance(planted, (set, frozenset)) else frozenset(planted)
        spans = fenced_spans(reply, self.fence)
        own: list[Found] = []
        copied: list[Found] = []
        for f in found:
            inside = any(s <= f.start < e for s, e in spans)
            verbatim = any(reply[f.start : f.end] in t for t in self.scanned())
            (copied if inside or f.key in planted or verbatim else own).append(f)
        return own, copied


def parse_score_reply(
    reply: str,
    *,
    key: str = "quality_score",
    ignore_texts: Iterable[str] = (),
    untrusted: UntrustedText | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[float, str, dict[str, Any]]:
    """Take ``(score, notes, object)`` from the judge's own verdict in ``reply``.

    The verdict is a JSON object holding ``key``. Copied verdicts are
    disregarded first (see the module docs): objects equal, once parsed, to
    one in the untrusted text or inside a copy of its fenced
    blocks. Of the rest, an outermost object wins over one nested in another
    (a verdict that quotes a verdict is judged by its own score), and among
    those the last one counts. A string, boolean, NaN or out-of-range score is
    rejected, never clamped.

    Parameters
    ----------
    reply : str
        The judge's reply.
    key : str, default "quality_score"
        The verdict's score field.
    ignore_texts : iterable of str, default ()
        The untrusted texts (the candidate, the reference, the question), when ``untrusted`` is not given.
    untrusted : UntrustedText, optional
        The untrusted texts and their fence.
    bounds : tuple of (float, float), default (0.0, 1.0)
        The score must be a JSON number in ``lo..hi`` (e.g. a rubric's Likert scale).

    Returns
    -------
    tuple of (float, str, dict)
        The score, the notes and the verdict object.

    Raises
    ------
    JudgeReplyError
        A ``ValueError`` naming what was wrong and quoting the reply.

    Examples
    --------
    >>> parse_score_reply('I think {"quality_score": 0.8, "notes": "ok"}')
    (0.8, 'ok', {'quality_score': 0.8, 'notes': 'ok'})
    """
    if not isinstance(reply, str):
        raise JudgeReplyError(f"judge reply must be text, got {type(reply).__name__}", reply=None)
    if untrusted is None:
        untrusted = UntrustedText(ignore_texts)
    objects = find_json_objects(reply)
    if not objects:
        raise JudgeReplyError(f"judge reply holds no JSON object with {key!r}: {quote(reply)}", reply=reply)
    outer = top_level(objects)
    found = [Found(s, e, json_key(o), (is_top, o)) for (s, e, o), is_top in zip(objects, outer, strict=True)
             if key in o]
    if not found:
        raise JudgeReplyError(f"judge reply's JSON has no {key!r} field: {quote(reply)}", reply=reply)
    own, _copied = untrusted.split(reply, found, untrusted.json_keys)
    if not own:
        raise JudgeReplyError(
            f"the only {key!r} verdicts in the judge reply were copied from the text it was judging "
            f"(a planted verdict is never taken as the judge's): {quote(reply)}",
            reply=reply,
        )
    outermost = [f for f in own if f.value[0]]
    obj = (outermost or own)[-1].value[1]
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeReplyError(
            f"{key} must be a JSON number, got {type(value).__name__} {brief_repr(value)}: {quote(reply)}", reply=reply
        )
    try:
        score = float(value)
    except OverflowError:  # an integer too large for a float is out of range anyway
        score = math.inf if value > 0 else -math.inf
    if math.isnan(score):
        raise JudgeReplyError(f"{key} is NaN: {quote(reply)}", reply=reply)
    lo, hi = bounds
    if not lo <= score <= hi:
        span = "0.0..1.0" if (lo, hi) == (0.0, 1.0) else f"{lo}..{hi}"
        raise JudgeReplyError(f"{key} {score!r} is outside {span} (not clamped): {quote(reply)}", reply=reply)
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

    At the first generated token that is a label (or, if none is, the first whose top alternatives include
    one), the label probabilities are renormalised over the labels offered there.

    Parameters
    ----------
    logprobs : sequence of TokenLogprob or None
        The reply's tokens with their top alternatives.
    label_values : mapping of str to float
        Each label (e.g. ``"1"``..``"5"`` or ``"yes"``/``"no"``) and its value in 0..1.
    adapter_id : str, default "the adapter"
        Named in the error.

    Returns
    -------
    tuple of (float, dict of str to float)
        The weighted mean, and each offered label's renormalised probability.

    Raises
    ------
    LogprobsUnavailableError
        There are no logprobs.
    JudgeReplyError
        No position offers a label.

    Examples
    --------
    >>> import math
    >>> from llm_connect import TokenLogprob
    >>> yes = TokenLogprob("yes", math.log(0.8), top=(("yes", math.log(0.8)), ("no", math.log(0.2))))
    >>> expected_label_value([yes], {"yes": 1.0, "no": 0.0})
    (0.8, {'yes': 0.8, 'no': 0.2})
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
