"""Lexical judges that need no model: exact match, reference containment and SQuAD token F1.

:class:`ExactMatchJudge` compares the two contents as they are, or normalised (:data:`NORMALIZERS`).
:class:`ContainsJudge` and :class:`TokenF1Judge` both compare the candidate with each reference of the
baseline (several when ``reference_sep`` is set) and keep the best, as SQuAD's
``metric_max_over_ground_truths`` does. Both normalise with SQuAD's rule by default (lowercase, no
punctuation, no articles, whitespace collapsed), since that is how the QA literature reports them;
``normalizer`` takes the same names and callables as :class:`ExactMatchJudge` (``None``: as is).

References:

- Rajpurkar et al. (2016), "SQuAD: 100,000+ Questions for Machine Comprehension
  of Text", EMNLP; the official v1.1 evaluation script's ``normalize_answer``
  and ``f1_score``.
- Liu et al. (2024), "Lost in the Middle: How Language Models Use Long
  Contexts", TACL; Kamalloo et al. (2023), "Evaluating Open-Domain Question
  Answering in the Era of Large Language Models", ACL: a reference contained
  in a long free-form answer counts it correct.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..core import LLMResponse, RunConfig
from ..errors import ValidationError
from ._base import GradingResult, InlineJudge, validate_grader_id

__all__ = ["NORMALIZERS", "ContainsJudge", "ExactMatchJudge", "TokenF1Judge", "normalize_squad", "split_references",
           "token_f1"]


_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_squad(text: str) -> str:
    """SQuAD's answer normalisation: lowercase, drop punctuation and articles, collapse whitespace.

    Parameters
    ----------
    text : str
        An answer.

    Returns
    -------
    str
        The normalised answer.

    Examples
    --------
    >>> normalize_squad("The  Eiffel Tower!")
    'eiffel tower'
    """
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


NORMALIZERS: dict[str, Callable[[str], str]] = {
    "squad": normalize_squad,
    "lower": lambda s: s.lower(),
    "strip": lambda s: s.strip(),
    "whitespace": lambda s: " ".join(s.split()),
}


def split_references(text: str, sep: str | None) -> list[str]:
    """Split ``text`` into references on ``sep`` (stripped, empty ones dropped); no ``sep``: ``[text]``.

    Parameters
    ----------
    text : str
        A baseline holding one or several references.
    sep : str or None
        The separator.

    Returns
    -------
    list of str
        The references (``[text]`` when none is left).

    Examples
    --------
    >>> split_references("Paris | City of Paris |", "|")
    ['Paris', 'City of Paris']
    """
    if not sep:
        return [text]
    refs = [r.strip() for r in text.split(sep)]
    return [r for r in refs if r] or [text]


def _resolve_normalizer(normalizer: str | Callable[[str], str] | None) -> Callable[[str], str] | None:
    if normalizer is None or callable(normalizer):
        return normalizer
    if isinstance(normalizer, str) and normalizer in NORMALIZERS:
        return NORMALIZERS[normalizer]
    raise ValidationError(
        f"unknown normalizer {normalizer!r}; use one of {sorted(NORMALIZERS)} or a callable str -> str"
    )


@dataclass
class ExactMatchJudge(InlineJudge):
    """1.0 when the candidate's content matches the baseline's, else 0.0.

    Parameters
    ----------
    grader_id : str, default "exact-match"
        The judge's id.
    normalizer : str or callable, optional
        ``None`` (compare as is), a name from :data:`NORMALIZERS` (``"squad"``: lowercase, no punctuation or
        articles, whitespace collapsed) or a callable ``str -> str``.
    reference_sep : str, optional
        When set, the baseline holds several acceptable references separated by it, and matching any one is
        a match.

    Raises
    ------
    ValidationError
        An unknown normalizer name, or a blank ``grader_id``.

    See Also
    --------
    ContainsJudge : A reference found in a longer answer.
    TokenF1Judge : Partial credit for shared words.

    Examples
    --------
    >>> judge = ExactMatchJudge(normalizer="squad", reference_sep="|")
    >>> judge.matches("Paris|City of Paris", "paris.")
    True
    """

    grader_id: str = "exact-match"
    normalizer: str | Callable[[str], str] | None = None
    reference_sep: str | None = None

    splits_references = True
    #: What the bias probes do to it by definition (probe -> why), said as such on its judge card, not as a bias.
    by_definition: ClassVar[Mapping[str, str]] = {
        "length": "an answer padded with filler no longer equals the reference",
        "format": "an answer reformatted as markdown no longer equals the reference",
        "injection": "an answer with an instruction appended no longer equals the reference",
    }

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        self._normalize = _resolve_normalizer(self.normalizer)

    def matches(self, baseline: str, candidate: str) -> bool:
        """Whether ``candidate`` matches one of the references of ``baseline`` (after the normalizer).

        Parameters
        ----------
        baseline : str
            The baseline's text (several references with ``reference_sep``).
        candidate : str
            The candidate's text.

        Returns
        -------
        bool
            Whether any reference equals the candidate.
        """
        norm = self._normalize or (lambda s: s)
        target = norm(candidate)
        return any(norm(ref) == target for ref in split_references(baseline, self.reference_sep))

    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        matched = self.matches(baseline.content, candidate.content)
        return GradingResult(
            quality_score=1.0 if matched else 0.0,
            notes="exact match" if matched else "no match",
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
        )


def token_f1(candidate_tokens: list[str], reference_tokens: list[str]) -> float:
    """SQuAD v1.1's ``f1_score`` on two token lists.

    The harmonic mean of token precision and recall over the multiset of shared tokens; 0.0 when no
    token is shared (two empty lists included, as in v1.1).

    Parameters
    ----------
    candidate_tokens : list of str
        The candidate's tokens.
    reference_tokens : list of str
        The reference's tokens.

    Returns
    -------
    float
        The F1, in 0..1.

    Examples
    --------
    >>> token_f1(["eiffel", "tower"], ["tower"])
    0.6666666666666666
    """
    common = Counter(candidate_tokens) & Counter(reference_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(candidate_tokens)
    recall = same / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


@dataclass
class _LexicalJudge(InlineJudge):
    """What the two lexical judges share: a normaliser (SQuAD's by default), several references and
    a synchronous judge that the runner awaits without a thread."""

    grader_id: str = "lexical"
    normalizer: str | Callable[[str], str] | None = "squad"
    reference_sep: str | None = None

    splits_references = True

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        self._normalize = _resolve_normalizer(self.normalizer) or (lambda s: s)

    def _score(self, reference: str, candidate: str) -> float:  # pragma: no cover - each subclass defines it
        raise NotImplementedError

    def _notes(self, score: float, reference: str) -> str:  # pragma: no cover - each subclass defines it
        raise NotImplementedError

    def best(self, baseline: str, candidate: str) -> tuple[float, str]:
        """The best score over the baseline's references, and the (first) reference that gives it."""
        refs = split_references(baseline, self.reference_sep)
        scored = [(self._score(ref, candidate), ref) for ref in refs]
        return max(scored, key=lambda pair: pair[0])  # max keeps the first of equal scores

    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        score, ref = self.best(baseline.content, candidate.content)
        return GradingResult(
            quality_score=score,
            notes=self._notes(score, ref),
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
        )


@dataclass
class ContainsJudge(_LexicalJudge):
    """1.0 when a (normalised) reference occurs in the (normalised) candidate, else 0.0.

    The strongest non-LLM judge for long free-form answers to short-answer
    questions ("The capital is Paris, of course" contains "Paris"), where exact
    match says no. A reference that normalises to nothing (e.g. "The") matches only a candidate that
    does too.

    Parameters
    ----------
    grader_id : str, default "contains"
        The judge's id.
    normalizer : str or callable, default "squad"
        SQuAD's by default; a name from :data:`NORMALIZERS`, a callable ``str -> str``, or ``None``.
    reference_sep : str, optional
        Several references in the baseline, separated by it; any one may be contained.
    whole_words : bool, default True
        Count an occurrence only when it is not part of a longer word ("1" is not in "1990", "no" not in
        "not"); ``False`` is the plain substring test of Liu et al. (2024).

    Raises
    ------
    ValidationError
        An unknown normalizer name, or a blank ``grader_id``.

    Examples
    --------
    >>> judge = ContainsJudge()
    >>> judge.contains("Paris", "The capital is Paris, of course"), judge.contains("1", "in 1990")
    (True, False)
    """

    grader_id: str = "contains"
    whole_words: bool = True

    def contains(self, reference: str, candidate: str) -> bool:
        """Whether the (normalised) ``reference`` occurs in the (normalised) ``candidate``.

        Parameters
        ----------
        reference : str
            One reference.
        candidate : str
            The candidate's text.

        Returns
        -------
        bool
            Whether it occurs (as whole words with ``whole_words``).
        """
        ref, text = self._normalize(reference), self._normalize(candidate)
        if not ref.strip():
            return not text.strip()
        if not self.whole_words:
            return ref in text
        pattern = (r"(?<!\w)" if ref[0].isalnum() or ref[0] == "_" else "") + re.escape(ref)
        pattern += r"(?!\w)" if ref[-1].isalnum() or ref[-1] == "_" else ""
        return re.search(pattern, text) is not None

    def _score(self, reference: str, candidate: str) -> float:
        return 1.0 if self.contains(reference, candidate) else 0.0

    def _notes(self, score: float, reference: str) -> str:
        return "contains a reference" if score else "contains no reference"


@dataclass
class TokenF1Judge(_LexicalJudge):
    """SQuAD's token F1 of the candidate against the best reference, in 0..1.

    Both texts are normalised (SQuAD's rule by default) and split on
    whitespace; the score is the harmonic mean of the share of the candidate's
    tokens found in the reference (precision) and of the reference's tokens
    found in the candidate (recall), counted as multisets -- the official SQuAD
    v1.1 ``f1_score``, maximised over references. Two texts with no token in
    common (two empty ones included, as in v1.1) score 0.0. The verdict comes
    from the caller's threshold on this score (``calibrate(threshold=...)``).

    Parameters
    ----------
    grader_id : str, default "token-f1"
        The judge's id.
    normalizer : str or callable, default "squad"
        A name from :data:`NORMALIZERS`, a callable ``str -> str``, or ``None``.
    reference_sep : str, optional
        Several references in the baseline, separated by it; the best one counts.

    Raises
    ------
    ValidationError
        An unknown normalizer name, or a blank ``grader_id``.

    See Also
    --------
    token_f1 : The score of two token lists.

    Examples
    --------
    >>> TokenF1Judge().best("The Eiffel Tower", "the tower")
    (0.6666666666666666, 'The Eiffel Tower')
    """

    grader_id: str = "token-f1"
    #: What the bias probes do to it by definition (probe -> why), said as such on its judge card, not as a bias.
    by_definition: ClassVar[Mapping[str, str]] = {
        "length": "filler words lower its precision, so its F1",
        "injection": "the planted instruction's words lower its precision, so its F1",
    }

    def tokens(self, text: str) -> list[str]:
        """``text`` normalised and split on whitespace.

        Parameters
        ----------
        text : str
            A text.

        Returns
        -------
        list of str
            Its tokens.
        """
        return self._normalize(text).split()

    def _score(self, reference: str, candidate: str) -> float:
        return token_f1(self.tokens(candidate), self.tokens(reference))

    def _notes(self, score: float, reference: str) -> str:
        return f"token F1 {score:.4f}"
