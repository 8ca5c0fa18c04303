"""What the embedded judges keep of a prompt's decoded prefix between calls: where a prompt's stable parts end in
tokens (:func:`stable_cuts`, from one tokenization; :func:`char_ends`) and the small store of saved prefixes
(:class:`PrefixStore`) both runtimes (llama.cpp and the converted ONNX model) reuse across the turns of a
conversation.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any


class PrefixStore:
    """A few decoded prompt prefixes (llama.cpp states, onnxruntime KV caches), the least recently used dropped first.

    An entry is a prefix's tokens, the segment ends (``cuts``) before its end, and what decoding it left. A
    prefix whose decoding started from a kept one of the same conversation replaces it, unless that one is a
    first segment (the instructions, shared by every conversation).

    Parameters
    ----------
    size
        How many prefixes are kept (0: none).
    """

    def __init__(self, size: int) -> None:
        self.size = max(0, int(size))
        self._kept: OrderedDict[tuple[int, ...], tuple[tuple[int, ...], Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        """Forget every prefix."""
        self._kept.clear()

    def find(self, tokens: Sequence[int], cuts: Sequence[int]) -> tuple[int, Any]:
        """``(end, value)`` of the longest kept prefix of ``tokens`` that ends at one of ``cuts`` and was cut at the
        same places before it; ``(0, None)`` when none is."""
        best: tuple[int, ...] = ()
        ends = set(cuts)
        for key, (before, _) in self._kept.items():
            end = len(key)
            if end > len(best) and end in ends and before == tuple(c for c in cuts if c < end) \
                    and tuple(tokens[:end]) == key:
                best = key
        if not best:
            return 0, None
        self._kept.move_to_end(best)
        return len(best), self._kept[best][1]

    def put(self, prefix: Sequence[int], cuts: Sequence[int], value: Any) -> None:
        """Keep ``value``, what decoding ``prefix`` cut at ``cuts`` (the segment ends before its end) left."""
        if not self.size:
            return
        key, before = tuple(prefix), tuple(cuts)
        for old, (old_before, _) in list(self._kept.items()):
            if old_before and len(old) in before and key[: len(old)] == old \
                    and old_before == tuple(c for c in before if c < len(old)):
                del self._kept[old]  # an earlier turn of the same conversation
        self._kept[key] = (before, value)
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


def stable_cuts(tokens: Sequence[int], text: str, offsets: Sequence[int], *, tokenize: Any,
                ends: Sequence[int] | None = None, after: int = 0) -> list[int]:
    """Where the stable parts of a prompt end, in tokens.

    Parameters
    ----------
    tokens
        The prompt's tokens.
    text
        The prompt as the model reads it (its chat template rendered), which ``tokens`` encode.
    offsets
        Where stable parts end in ``text`` (characters): the offsets of ``RunConfig.stable_prefix_chars``
        moved to where the user message starts.
    tokenize
        The tokenizer, a function of a text.
    ends
        Where each token ends in ``text`` (characters), when the tokenizer says; used when they add up to the
        text, else each ``text[:offset]`` is tokenized and compared with ``tokens``.
    after
        Cuts are made after this token.

    Returns
    -------
    list of int
        Increasing token counts, after ``after`` and before the end: for each offset, the tokens that end
        before it (a token that runs across the offset is left to the segment after).
    """
    import bisect
    import itertools

    usable = ends is not None and len(ends) == len(tokens) and bool(ends) and ends[-1] == len(text) \
        and all(a <= b for a, b in itertools.pairwise(ends))
    cuts: list[int] = []
    floor = after
    for offset in offsets:
        if usable:
            shared = bisect.bisect_right(ends, offset)  # type: ignore[arg-type]
        else:
            part = list(tokenize(text[:offset]))
            if list(tokens[: len(part)]) == part:
                shared = len(part)
            else:
                shared = next((i for i, (a, b) in enumerate(zip(part, tokens, strict=False)) if a != b),
                              min(len(part), len(tokens)))
        if floor < shared < len(tokens):
            cuts.append(shared)
            floor = shared
    return cuts


def char_ends(byte_ends: Sequence[int] | None, text: str) -> list[int] | None:
    """Byte offsets into the UTF-8 encoding of ``text`` as character offsets (one inside a character counts
    the characters before it)."""
    if byte_ends is None or text.isascii():
        return None if byte_ends is None else list(byte_ends)
    import bisect
    import itertools

    boundaries = list(itertools.accumulate(len(c.encode("utf-8")) for c in text))
    return [bisect.bisect_right(boundaries, b) for b in byte_ends]
