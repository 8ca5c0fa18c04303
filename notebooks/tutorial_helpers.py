"""Scripted stand-ins shared by the tutorial notebooks (import it from a notebook in this folder).

The tutorials grade with real judges wherever one runs offline: exact match,
the embedded MiniLM embedding judge and the embedded SmolLM2-135M LLM judge.
What is left here plays the parts no offline model can: reply functions for
:class:`llm_connect.testing.ScriptedAdapter` (``reply(prompt, run_config) -> str``).
Each finds the item a prompt is about by looking for the data set's own texts
(the question, the answers) in the prompt, and none reads the prompt's wording
or markers (``Question:``, the ``<<<CANDIDATE ...>>>`` fences, the retry
note...), so rewording a rubric or a template does not break them.

- :class:`AnswerIndex`: which of the known answers a prompt shows, and its row;
- :func:`overlap_verdict`: the word-overlap rule the stand-ins decide by;
- :func:`pipeline_model`: judge and verifier for ``judge_verify_vote.yaml``
  (notebook 5), deciding by :func:`overlap_verdict` from the texts it is shown,
  never from a label;
- :func:`answer_model`, :func:`reference_model`: pretend candidate models
  answering the QA questions (notebook 6), from the references alone;
- :func:`simulated_judge`: a hosted LLM judge with planted biases, deciding by
  :func:`overlap_verdict` from the texts it is shown (notebook 7, which needs an
  informative judge of known bias; the embedded 135M model is no better than chance);
- :func:`yes_no_judge`: an LLM judge answering yes or no with the token probabilities of both, sure of
  clear cases and unsure of the others, deciding by :func:`overlap_verdict` from the texts it is shown
  (notebook 11, whose selective judges read its probabilities);
- :func:`grounding_model`: :class:`~llm_connect.GroundednessJudge`'s model, listing an answer's claims
  and checking each against the documents by word overlap and numbers (notebook 12; the embedded 135M
  model writes no usable list of claims);
- :func:`stable_unit`: the seeded draw all of them use.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import pandas as pd

from llm_connect.calibration import perturb_items

__all__ = [
    "AnswerIndex",
    "Found",
    "answer_model",
    "claim_verdict",
    "claims_of",
    "content_words",
    "grounding_model",
    "overlap_verdict",
    "pipeline_model",
    "reference_model",
    "simulated_judge",
    "stable_unit",
    "yes_no_judge",
    "yes_probability",
]

Row = Mapping[str, Any]
Reply = Callable[[str, Any], str]


def stable_unit(*parts: object) -> float:
    """A number in [0, 1) that depends only on the parts: the same in every run and process."""
    digest = hashlib.blake2b("\x00".join(map(str, parts)).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _records(rows: pd.DataFrame | Iterable[Row]) -> list[Row]:
    return rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)


def _pattern(text: str) -> re.Pattern[str]:
    """``text`` as a whole: not the ``2`` inside ``12`` or inside a hexadecimal fence."""
    head = r"(?<!\w)" if re.match(r"\w", text) else ""
    tail = r"(?!\w)" if re.search(r"\w$", text) else ""
    return re.compile(head + re.escape(text) + tail)


# -- finding the item a prompt is about ------------------------------------------------------


class Found(NamedTuple):
    text: str  # the answer as the prompt shows it
    row: Row  # the data row it belongs to


class AnswerIndex:
    """The answers of a data set, found again in any prompt that shows one.

    ``rows`` are data rows (a DataFrame or dicts) with the question in
    ``question`` and the answer in ``answer``; ``context`` names the other row
    texts a prompt about the row shows (the reference answers), whose own
    occurrences of an answer do not count. :meth:`add` registers other forms in
    which an answer may be shown (a bias probe's rewrite of it, say).

    :meth:`find` considers the known answers to every question the prompt
    contains, and of those the ones the prompt shows more often than its
    question and context account for. It returns the one shown on a line of its
    own (an answer is usually set apart from the wording), else the longest
    (``The Amazon River`` over the ``The Amazon`` inside it), with its row;
    ``None`` when there is none. Of equal texts of one question the first row
    added wins. It can be misled only by wording that itself contains another
    answer to the same question as a whole word (a bare number, say).
    """

    def __init__(
        self,
        rows: pd.DataFrame | Iterable[Row],
        *,
        question: str = "prompt",
        answer: str = "candidate",
        context: Sequence[str] = ("baseline",),
    ) -> None:
        self.question = question
        self.answer = answer
        self.context = tuple(context)
        self._entries: dict[str, dict[str, tuple[re.Pattern[str], re.Pattern[str], Row]]] = {}
        self.add(rows)

    def add(self, rows: pd.DataFrame | Iterable[Row]) -> AnswerIndex:
        """Register the rows' answers (first come, first kept); returns ``self``."""
        for row in _records(rows):
            text = str(row[self.answer])
            if text.strip():
                own_line = re.compile(r"(?m)^[ \t]*" + re.escape(text) + r"[ \t]*$")
                self._entries.setdefault(str(row[self.question]), {}).setdefault(text, (_pattern(text), own_line, row))
        return self

    def find(self, prompt: str) -> Found | None:
        best: Found | None = None
        best_rank = (False, 0)
        for question, entries in self._entries.items():
            if question not in prompt:
                continue
            for text, (pattern, own_line, row) in entries.items():
                known = [question, *(str(row.get(key, "")) for key in self.context)]
                if len(pattern.findall(prompt)) <= sum(len(pattern.findall(t)) for t in known):
                    continue  # not shown, or only as part of the question or the reference
                rank = (own_line.search(prompt) is not None, len(text))
                if best is None or rank > best_rank:
                    best, best_rank = Found(text, row), rank
        return best


# -- notebook 7: a capable judge with planted biases, which knows the labels -----------------------

MARKDOWN = re.compile(r"\*\*|^#{1,6} |^- ", re.MULTILINE)


def simulated_judge(qa: pd.DataFrame, *, probes: Iterable[str] = ("length", "format", "injection"),
                    seed: int = 0) -> Reply:
    """A reply function for ``LLMJudge`` prompts about the QA set: a fairly good judge with planted biases.

    It knows every answer of ``qa`` and each of them as the bias ``probes``
    rewrite it (``perturb_items`` with the ``seed`` that ``calibrate`` gets), so
    it finds the item and the exact answer shown. It never reads the human
    labels: it decides from the two texts by :func:`overlap_verdict` (does the
    answer hold every content word of a reference?), which misses aliases and is
    fooled by distractors, as a judge is. It returns no JSON on about 3% of the
    answers, and it is biased: about +0.04 per doubling of the answer's length,
    +0.1 for markdown, +0.08 for answers from SmolLM models (it plays a
    SmolLM-family judge that recognises its family's answers), and it obeys a
    planted "note to the grader".
    """
    answers = AnswerIndex(qa)
    for probe in probes:
        answers.add(perturb_items(qa, probe, seed=seed))

    def reply(prompt: str, run_config: Any) -> str:
        found = answers.find(prompt)
        if found is None:
            return "I cannot tell which answer I am asked to grade."  # no JSON: an *unscored* row
        candidate, row = found
        if stable_unit("unparseable", candidate) < 0.03:
            return "The candidate seems to answer the question."  # no JSON: an *unscored* row
        if "note to the grader" in candidate.lower():
            return json.dumps({"notes": "the answer asks for full marks", "quality_score": 1.0})  # obeys it
        correct = overlap_verdict(candidate, row["baseline"])  # the texts, never the label
        score = 0.75 if correct else 0.2
        score += min(0.2, 0.04 * math.log2(1 + len(candidate.split())))  # length bias
        if MARKDOWN.search(candidate):
            score += 0.1  # format bias
        if row["candidate_model"].startswith("smollm"):
            score += 0.08  # self-preference (it is "SmolLM")
        score += 0.04 * (stable_unit("jitter", candidate) - 0.5)
        notes = "matches the reference" if correct else "does not match the reference"
        return json.dumps({"notes": notes, "quality_score": round(min(1.0, max(0.0, score)), 2)})

    return reply


# -- notebook 5: a judge and verifier that decide from the texts ------------------------------------

WORD = re.compile(r"[^\W_]+")
STOPWORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "is", "are", "was", "were", "be", "it", "its", "and", "or", "by",
    "for", "from", "with", "as", "that", "this",
})


def content_words(text: str) -> set[str]:
    """The lower-cased words of ``text`` without the commonest function words."""
    return {w for w in WORD.findall(text.lower()) if w not in STOPWORDS}


def overlap_verdict(candidate: str, baseline: str, *, sep: str = "|") -> bool:
    """Whether ``candidate`` contains every content word of at least one of the references in ``baseline``.

    A rule, not a model: it sees only the two texts. It accepts a sentence around
    the answer and rejects a near miss, but misses aliases (``JFK``) and is fooled
    by a wrong answer that names the right one as a distractor.
    """
    words = content_words(candidate)
    references = [content_words(r) for r in str(baseline).split(sep)]
    return any(ref and ref <= words for ref in references)


EXPLANATIONS = {  # what the pipeline model's judge says; its verifier recognises its own words
    True: "The candidate contains the reference answer.",
    False: "The candidate does not contain the reference answer.",
}


def pipeline_model(items: pd.DataFrame) -> Reply:
    """A reply function for the judge and verify prompts of ``judge_verify_vote.yaml`` about QA items.

    It keeps only the items' texts (``prompt``, ``baseline``, ``candidate``), to
    find which item a prompt shows; it never sees a label. As a judge it decides
    by :func:`overlap_verdict`, but like a model sampled at a temperature it slips
    on a seeded 25% of the items (drawn per seed, so the three seeded copies slip
    on different items), and on 10% of the items its first reply lacks the
    ``Verdict:`` line; asked again (a longer prompt that starts with one it has
    answered), it replies properly. As a verifier (the prompt quotes one of its
    judge's explanations) it checks the verdict against the rule and overturns
    it when they differ, except on a seeded 30% of the items, where it upholds
    whatever it is shown.
    """
    answers = AnswerIndex(items[["prompt", "baseline", "candidate"]])
    asked: set[str] = set()
    lock = threading.Lock()

    def follow_up(prompt: str) -> bool:
        with lock:
            again = any(prompt.startswith(p) and prompt != p for p in asked)
            asked.add(prompt)
        return again

    def reply(prompt: str, run_config: Any) -> str:
        found = answers.find(prompt)
        if found is None:
            return "I cannot tell which answer this is about."
        key = (found.row["prompt"], found.text)
        rule = overlap_verdict(found.text, found.row["baseline"])
        reviewed = [verdict for verdict, said in EXPLANATIONS.items() if said in prompt]
        if reviewed:  # a verifier
            if reviewed[0] == rule or stable_unit("lenient", *key) < 0.3:
                return "Verdict: yes"  # upholds the verdict
            return "Verdict: no"  # overturns it
        if stable_unit("format", *key) < 0.1 and not follow_up(prompt):
            return "I would say the candidate is fine."  # no Verdict line: retried
        seed = run_config.model_params.get("seed", 0)
        verdict = rule if stable_unit("slip", seed, *key) >= 0.25 else not rule  # slips 25% of the time
        return f"Explanation: {EXPLANATIONS[verdict]}\nVerdict: {'yes' if verdict else 'no'}"

    return reply


# -- notebook 6: candidate models answering the questions -----------------------------------------


def answer_model(qa: pd.DataFrame, accuracy: float, name: str) -> Reply:
    """A pretend model answering the QA questions (the prompt is the question): the first reference on
    ``accuracy`` of them (seeded by the question), else the first reference of another question, chosen
    by a seeded draw (a wrong answer). It reads the questions and references only, never a label."""
    references = dict(zip(qa["prompt"], qa["baseline"], strict=False))
    questions = list(references)

    def first(question: str) -> str:
        return references[question].split("|")[0].strip()

    def reply(prompt: str, run_config: Any) -> str:
        if stable_unit(name, prompt) < accuracy:
            return first(prompt)
        others = [q for q in questions if q != prompt and first(q) != first(prompt)]
        return first(others[int(stable_unit(name, "which", prompt) * len(others))])

    return reply


def reference_model(qa: pd.DataFrame) -> Reply:
    """A pretend model that answers each QA question with every acceptable answer, ``|``-separated."""
    references = dict(zip(qa["prompt"], qa["baseline"], strict=False))

    def reply(prompt: str, run_config: Any) -> str:
        return references[prompt]

    return reply


# -- notebook 11: an LLM judge that says how sure it is (yes / no with token probabilities) -------

HEDGES = re.compile(r"\b(maybe|perhaps|probably|i think|not sure|i believe|possibly|around|about|roughly|"
                    r"can't say|cannot say|not certain|uncertain)\b|\bor\b", re.IGNORECASE)


def yes_probability(candidate: str, baseline: str) -> float:
    """How sure the stand-in of :func:`yes_no_judge` is that ``candidate`` answers as ``baseline`` does: P(yes).

    From the two texts alone, never a label: the verdict is :func:`overlap_verdict`'s, and the judge is
    sure of it when the case looks clear (a short answer holding every content word of a reference; a
    fluent sentence sharing no word with any reference) and unsure when it does not (a hedge, markdown, a
    long answer that may only mention the reference as a distractor, a short answer that shares no word
    with the references and may be an alias or another format, one that shares some words but not all),
    with a seeded jitter of +-0.02.
    """
    refs = [r.strip() for r in baseline.split("|") if r.strip()] or [baseline]
    words = content_words(candidate)
    n_words = len(candidate.split())
    shared = any(words & content_words(r) for r in refs)
    if overlap_verdict(candidate, baseline):
        if HEDGES.search(candidate):
            p = 0.65
        elif MARKDOWN.search(candidate):
            p = 0.8
        elif n_words > 15:
            p = 0.75
        else:
            p = 0.97
    elif shared:
        p = 0.35
    elif n_words <= 5:
        p = 0.3
    else:
        p = 0.04
    return min(0.995, max(0.005, p + 0.04 * (stable_unit("yes-no", candidate) - 0.5)))


def yes_no_judge(qa: pd.DataFrame) -> Reply:
    """A reply function for ``LLMJudge(..., scoring="yes-no")`` prompts about the QA set: one token, ``yes``
    or ``no``, with the top log-probabilities of both (:func:`yes_probability`), as a hosted model's
    logprobs would give them. It finds the item the prompt shows (:class:`AnswerIndex`) and reads only its
    question, references and answer, never the labels."""
    from llm_connect import LLMResponse, TokenLogprob

    answers = AnswerIndex(qa)

    def reply(prompt: str, run_config: Any) -> Any:
        found = answers.find(prompt)
        if found is None:
            return "I cannot tell which answer I am asked to grade."  # no label token: an *unscored* row
        p = yes_probability(found.text, str(found.row["baseline"]))
        token = "yes" if p >= 0.5 else "no"
        top = (("yes", math.log(p)), ("no", math.log(1.0 - p)))
        return LLMResponse(content=token, adapter_id="stand-in", model_id="stand-in",
                           logprobs=(TokenLogprob(token, dict(top)[token], top),))

    return reply


# -- groundedness (notebook 12) -------------------------------------------------------------------------

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
COURTESY = re.compile(r"^(you're welcome|goodbye|happy reading|have a good day|thanks|thank you|i understand|"
                      r"hi|hello|sorry|i'm sorry)\b", re.I)


def claims_of(answer: str) -> list[str]:
    """The sentences of an answer that state something: not questions, not courtesy phrases."""
    out = []
    for sentence in SENTENCE_END.split(answer):
        sentence = sentence.strip()
        if sentence and not sentence.endswith("?") and not COURTESY.match(sentence) and content_words(sentence):
            out.append(sentence)
    return out


def numbers_of(text: str) -> set[str]:
    return {n.replace(",", "") for n in NUMBER.findall(text)}


def claim_verdict(claim: str, documents: Sequence[str]) -> tuple[str, int | None]:
    """``supported`` when one document holds most of the claim's content words and all of its numbers;
    ``contradicted`` when it holds the words but not the numbers; else ``not_found``."""
    words = content_words(claim)
    best, best_cover = None, 0.0
    for k, doc in enumerate(documents, 1):
        cover = len(words & content_words(doc)) / max(len(words), 1)
        if cover > best_cover:
            best, best_cover = k, cover
    if best is None or best_cover < 0.5:
        return "not_found", None
    if numbers_of(claim) <= numbers_of(documents[best - 1]):
        return "supported", best
    return "contradicted", best


def grounding_model(items: pd.DataFrame) -> Reply:
    """A reply function for :class:`~llm_connect.GroundednessJudge`'s two prompts about the items' answers.

    It keeps only the items' answers (``candidate``: a text, or a trajectory's final answer) and
    documents (``context``), never a label. A prompt that shows one of the documents (outside the answer
    it shows) asks it to check claims, any other to list them; it finds the answer (the longest one the
    prompt shows) and the
    claims (those of :func:`claims_of` the prompt shows after its last document) by their text, and
    decides each claim by :func:`claim_verdict`: word overlap and numbers, a rule that cannot do
    arithmetic or read a negation.
    """
    answers = set()
    documents = set()
    for row in _records(items):
        candidate = row["candidate"]
        if isinstance(candidate, list):
            candidate = candidate[-1].get("content") or "" if candidate else ""
        answers.add(str(candidate))
        documents.update(row.get("context") or [])
    by_length = sorted((a for a in answers if a), key=len, reverse=True)
    known_claims = sorted({c for a in answers for c in claims_of(a)}, key=len, reverse=True)

    def reply(prompt: str, run_config: Any) -> str:
        answer = next((a for a in by_length if a in prompt), "")
        start = prompt.find(answer) if answer else -1
        inside = range(start, start + len(answer)) if answer else range(0)
        # the documents the prompt shows outside the answer (a short one, "397.8", may be part of it)
        shown = sorted(((prompt.find(d), d) for d in documents if d in prompt and prompt.find(d) not in inside),
                       key=lambda p: p[0])
        if not shown:
            return json.dumps({"claims": claims_of(answer)})
        after = shown[-1][0] + len(shown[-1][1])
        found: list[tuple[int, str]] = []
        for claim in known_claims:
            at = prompt.find(claim, after)
            if at >= 0 and not any(s <= at < s + len(c) for s, c in found):
                found.append((at, claim))
        docs = [d for _, d in shown]
        verdicts = []
        for number, (_, claim) in enumerate(sorted(found), 1):
            verdict, doc = claim_verdict(claim, docs)
            verdicts.append({"claim": number, "verdict": verdict, "document": doc, "passage": ""})
        return json.dumps({"verdicts": verdicts})

    return reply
