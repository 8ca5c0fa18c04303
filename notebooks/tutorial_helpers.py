"""Scripted models shared by the tutorial notebooks (import it from a notebook in this folder).

The tutorials run offline, so a capable hosted judge (GPT-4o-mini, Claude...) is
played by a reply function for :class:`llm_connect.testing.ScriptedAdapter`:
``reply(prompt, run_config) -> str``. Each one here knows the data set it was
built from and decides from the *item* a prompt is about: it finds the item by
looking for the data set's own texts (the question, the answers) in the prompt.
None of them reads the prompt's wording or markers (``Question:``, the
``<<<CANDIDATE ...>>>`` fences, the retry note...), so rewording a rubric or a
template does not break them.

- :class:`AnswerIndex`: which of the known answers a prompt shows, and its row;
- :func:`simulated_judge`: an ``LLMJudge`` model, fairly good, with planted biases
  (notebooks 3 and 4);
- :func:`pairwise_model`: a ``PairwiseJudge`` model that is unsure, and then
  position-biased, on a seeded share of the pairs (notebooks 4 and 5);
- :func:`pipeline_model`: judge and verifier for ``judge_verify_vote.yaml``
  (notebook 5);
- :func:`judge_model`: an ``LLMJudge`` model wrong on a seeded share of the items
  (notebook 5's panel and cascade);
- :func:`answer_model`, :func:`reference_model`: pretend candidate models
  answering the QA questions (notebook 6);
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
    "judge_model",
    "pairwise_model",
    "pipeline_model",
    "reference_model",
    "shown_first",
    "simulated_judge",
    "stable_unit",
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


def shown_first(prompt: str, texts: Sequence[str], *, skip: Sequence[str] = ()) -> int | None:
    """The index of the text among ``texts`` that the prompt shows first.

    Occurrences inside the ``skip`` texts (the question) or inside another of
    ``texts`` (an answer quoting a shorter one) do not count. ``None`` when the
    prompt shows none of them.
    """
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        return not any(start < match.end() and match.start() < end for start, end in taken)

    for text in skip:
        taken += [m.span() for m in _pattern(text).finditer(prompt)]
    first: dict[int, int] = {}
    for i in sorted(range(len(texts)), key=lambda i: -len(texts[i])):
        match = next((m for m in _pattern(texts[i]).finditer(prompt) if free(m)), None)
        if match is not None:
            taken.append(match.span())
            first[i] = match.start()
    return min(first, key=first.__getitem__) if first else None


# -- notebooks 3 and 4: a capable judge with planted biases --------------------------------------

MARKDOWN = re.compile(r"\*\*|^#{1,6} |^- ", re.MULTILINE)


def simulated_judge(qa: pd.DataFrame, *, probes: Iterable[str] = ("length", "format", "injection"),
                    seed: int = 0) -> Reply:
    """A reply function for ``LLMJudge`` prompts about the QA set: a fairly good judge with planted biases.

    It knows every answer of ``qa`` and each of them as the bias ``probes``
    rewrite it (``perturb_items`` with the ``seed`` that ``calibrate`` gets), so
    it finds the item and the exact answer shown. It knows the right verdict
    (the ``human`` label) but slips on about 8% of the items and returns no JSON
    on about 3% of the answers, and it is biased: about +0.04 per doubling of the
    answer's length, +0.1 for markdown, +0.08 for answers from SmolLM models (it
    plays a SmolLM-family judge), and it obeys a planted "note to the grader".
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
        correct = row["human"] == "yes"  # knows the answer ...
        if stable_unit("slip", row["id"]) < 0.08:
            correct = not correct  # ... but slips on about 8% of rows
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


# -- notebooks 4 and 5: a pairwise judge, position-biased when unsure -----------------------------


def pairwise_model(pairs: pd.DataFrame, *, unsure: float = 0.3) -> Reply:
    """A reply function for ``PairwiseJudge`` prompts about ``data/pairwise.jsonl``.

    It picks the better answer of the pair, except on the questions (a seeded
    ``unsure`` share) where it is unsure and picks whichever answer it was
    shown first.
    """
    rows = {str(row["prompt"]): row for row in _records(pairs)}

    def reply(prompt: str, run_config: Any) -> str:
        question = max((q for q in rows if q in prompt), key=len, default=None)
        if question is None:
            return "I cannot tell which answers I am asked to compare."
        row = rows[question]
        answers = [row["answer_a"], row["answer_b"]]
        first = shown_first(prompt, answers, skip=[question])
        better = 0 if row["better"] == "a" else 1
        winner = "A" if stable_unit("unsure", question) < unsure or first == better else "B"
        return json.dumps({"notes": f"answer {winner} is better", "winner": winner})

    return reply


# -- notebook 5: judges of known accuracy --------------------------------------------------------

EXPLANATIONS = {  # what the pipeline model's judge says; its verifier recognises its own words
    True: "The candidate gives the reference answer.",
    False: "The candidate does not give the reference answer.",
}


def pipeline_model(qa: pd.DataFrame) -> Reply:
    """A reply function for the judge and verify prompts of ``judge_verify_vote.yaml`` about QA rows.

    As a judge it is wrong on 25% of the items (drawn per seed, so the three
    seeded copies err on different items) and on 10% of them its first reply
    lacks the ``Verdict:`` line; asked again (a longer prompt that starts with
    one it has answered), it replies properly. As a verifier (the prompt quotes
    one of its judge's explanations) it overturns 70% of the wrong verdicts.
    """
    answers = AnswerIndex(qa)
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
        row = found.row
        correct = row["human"] == "yes"
        reviewed = [verdict for verdict, said in EXPLANATIONS.items() if said in prompt]
        if reviewed:  # a verifier
            if reviewed[0] == correct or stable_unit("missed", row["id"]) < 0.3:
                return "Verdict: yes"  # upholds the verdict
            return "Verdict: no"  # overturns a wrong one
        if stable_unit("format", row["id"]) < 0.1 and not follow_up(prompt):
            return "I would say the candidate is fine."  # no Verdict line: retried
        seed = run_config.model_params.get("seed", 0)
        verdict = correct if stable_unit("judge", seed, row["id"]) >= 0.25 else not correct  # wrong 25% of the time
        return f"Explanation: {EXPLANATIONS[verdict]}\nVerdict: {'yes' if verdict else 'no'}"

    return reply


def judge_model(qa: pd.DataFrame, error_rate: float, *, refuse_rate: float = 0.0,
                unsure_over_words: int | None = None, name: str = "judge") -> Reply:
    """A reply function for ``LLMJudge`` prompts about QA rows: right except on ``error_rate`` of the rows,
    no JSON on ``refuse_rate`` of them, and (when ``unsure_over_words`` is set) a hesitant 0.5 on longer answers."""
    answers = AnswerIndex(qa)

    def reply(prompt: str, run_config: Any) -> str:
        found = answers.find(prompt)
        if found is None:
            return "I cannot tell which answer I am asked to grade."
        row = found.row
        if stable_unit(name, "refuse", row["id"]) < refuse_rate:
            return "I am not able to grade this answer."
        if unsure_over_words is not None and len(row["candidate"].split()) > unsure_over_words:
            return json.dumps({"notes": "not sure", "quality_score": 0.5})
        correct = (row["human"] == "yes") != (stable_unit(name, "error", row["id"]) < error_rate)
        return json.dumps({"notes": "correct" if correct else "wrong", "quality_score": 0.9 if correct else 0.1})

    return reply


# -- notebook 6: candidate models answering the questions -----------------------------------------


def answer_model(qa: pd.DataFrame, accuracy: float, name: str) -> Reply:
    """A pretend model answering the QA questions (the prompt is the question): the first reference on
    ``accuracy`` of them (seeded by the question), else one of the data set's wrong answers to it."""
    references = dict(zip(qa["prompt"], qa["baseline"], strict=False))
    wrong_answers = qa[qa["human"] == "no"].groupby("prompt")["candidate"].apply(list).to_dict()

    def reply(prompt: str, run_config: Any) -> str:
        if stable_unit(name, prompt) < accuracy:
            return references[prompt].split("|")[0].strip()
        wrong = wrong_answers.get(prompt, ["I do not know."])
        return wrong[int(stable_unit(name, "which", prompt) * len(wrong))]

    return reply


def reference_model(qa: pd.DataFrame) -> Reply:
    """A pretend model that answers each QA question with every acceptable answer, ``|``-separated."""
    references = dict(zip(qa["prompt"], qa["baseline"], strict=False))

    def reply(prompt: str, run_config: Any) -> str:
        return references[prompt]

    return reply
