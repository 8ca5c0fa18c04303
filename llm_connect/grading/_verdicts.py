"""Pairwise verdicts and majority votes: one implementation, used by the judges and the pipeline units.

:class:`~llm_connect.grading.PairwiseJudge` (JSON ``{"winner": "A"}`` replies) and
:class:`~llm_connect.pipelines.PairwiseUnit` (``Verdict: A`` replies) read their
replies in their own format, then share everything after: the labels offered
(:func:`pairwise_labels`, :func:`offered_label`), which answer a label names in an
order (:func:`verdict_for`), what a verdict is worth (:data:`PAIRWISE_SCORES`) and
how two orders combine (:func:`combine_orders`).
:class:`~llm_connect.grading.PanelJudge` (``aggregate="majority"``) and
:class:`~llm_connect.pipelines.MajorityPool` count votes with :func:`majority_vote`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

__all__ = [
    "PAIRWISE_ORDERS",
    "PAIRWISE_SCORES",
    "TIE_BREAKS",
    "combine_orders",
    "majority_vote",
    "offered_label",
    "pairwise_labels",
    "verdict_for",
]

#: The two orders a pair is shown in: the baseline as answer A, or the candidate as A.
PAIRWISE_ORDERS = ("baseline-first", "candidate-first")
#: What a pairwise verdict is worth as a 0..1 quality score of the candidate.
PAIRWISE_SCORES = {"baseline": 0.0, "tie": 0.5, "candidate": 1.0}
#: How :func:`majority_vote` breaks a tie: the lowest-valued label, the highest, or the first voted.
TIE_BREAKS = ("lowest", "highest", "first")


def pairwise_labels(allow_tie: bool) -> tuple[str, ...]:
    """The labels a pairwise judge may answer: ``A``, ``B`` (and ``tie`` when allowed)."""
    return ("A", "B", "tie") if allow_tie else ("A", "B")


def offered_label(value: Any, allow_tie: bool) -> str | None:
    """The offered label ``value`` names (case and quotes ignored), or ``None`` when it names none."""
    if not isinstance(value, str):
        return None
    token = value.strip().strip("\"'").casefold()
    return {label.casefold(): label for label in pairwise_labels(allow_tie)}.get(token)


def verdict_for(label: str, order: str) -> str:
    """Which answer label ``A``/``B`` names when shown in ``order``: ``"baseline"``/``"candidate"`` (or ``"tie"``)."""
    if label == "tie":
        return "tie"
    first, second = ("baseline", "candidate") if order == PAIRWISE_ORDERS[0] else ("candidate", "baseline")
    return first if label == "A" else second


def combine_orders(verdicts: Sequence[str]) -> tuple[str, bool | None]:
    """``(verdict, consistent)`` of one pair judged in one or two orders.

    One order: its verdict, ``consistent`` ``None``. Two: the verdict when they
    agree, else ``"tie"`` (the disagreement is position bias, not a preference).
    """
    if len(verdicts) == 1:
        return verdicts[0], None
    consistent = verdicts[0] == verdicts[1]
    return (verdicts[0] if consistent else "tie"), consistent


def majority_vote(
    votes: Iterable[tuple[Hashable, Any]], *, value: Callable[[Any], float], tie_break: str = "lowest"
) -> tuple[Hashable, Any, dict[Hashable, int], bool]:
    """The majority of ``votes`` (``(label, what it stands for)`` pairs, in input order).

    Returns ``(label, what it stands for, votes per label, tied)``. A tie goes
    to the tied label whose ``value(...)`` is lowest (``tie_break="lowest"``: a
    tie never passes an item), highest (``"highest"``), or voted first (``"first"``).
    """
    counts: dict[Hashable, int] = {}
    stands_for: dict[Hashable, Any] = {}
    for label, meaning in votes:
        counts[label] = counts.get(label, 0) + 1
        stands_for.setdefault(label, meaning)
    if not counts:
        raise ValueError("a majority vote needs at least one vote")
    top = max(counts.values())
    tied = [label for label in counts if counts[label] == top]  # in first-voted order
    if tie_break == "first" or len(tied) == 1:
        winner = tied[0]
    elif tie_break == "lowest":
        winner = min(tied, key=lambda lab: value(stands_for[lab]))
    elif tie_break == "highest":
        winner = max(tied, key=lambda lab: value(stands_for[lab]))
    else:
        raise ValueError(f"tie_break must be one of {list(TIE_BREAKS)}, got {tie_break!r}")
    return winner, stands_for[winner], counts, len(tied) > 1
