"""The embedding judge over many items: each distinct text embedded once, ahead of the rows, in large calls.

The pre-pass (``EmbeddingSimilarityJudge.aprepare_run``, run by the runner before
the rows) must give the rows exactly what the row-by-row path gives them: the same scores,
notes, statuses and errors, with no row dropped when an embedder call fails.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from llm_connect import EmbeddingSimilarityJudge, ajudge_many, judge_many
from llm_connect.calibration import ScoredItems, score_items
from llm_connect.errors import ValidationError
from llm_connect.testing import DeterministicEmbedder

COMPARED = ["quality_score", "notes", "status", "error", "judge_tokens_in", "judge_tokens_out", "judge_cost_usd"]


class RowByRowJudge(EmbeddingSimilarityJudge):
    """The judge with the pre-pass switched off: one embedder call per row."""

    aprepare_run = None  # type: ignore[assignment]


def rows() -> list[dict[str, object]]:
    """Small QA rows written for this test: several references, texts repeated across rows, and rows
    that cannot be scored (blank reference, missing candidate, a text with no words: the zero vector)."""
    refs = ["Paris|the city of Paris", "Jupiter", "William Shakespeare|Shakespeare", "100 degrees|100"]
    answers = [
        ["Paris", "It is Paris, the capital.", "Lyon", "the city of Paris", "Paris is in France"],
        ["Jupiter", "Saturn is the largest", "jupiter, the gas giant", "Jupiter", "Mars"],
        ["Shakespeare", "Marlowe wrote it", "William Shakespeare", "Bacon", "Shakespeare"],
        ["100", "90 degrees", "one hundred degrees", "100 degrees", "boiling"],
    ]
    out: list[dict[str, object]] = []
    for q, (ref, cands) in enumerate(zip(refs, answers, strict=True)):
        for m, cand in enumerate(cands):
            out.append({"id": f"q{q}-m{m}", "prompt": f"question {q}", "baseline": ref, "candidate": cand,
                        "candidate_model": f"model-{m}"})
    out.append({"id": "blank", "prompt": "q", "baseline": "  ", "candidate": "Paris"})
    out.append({"id": "missing", "prompt": "q", "baseline": "Paris", "candidate": None})
    out.append({"id": "no-words", "prompt": "q", "baseline": "Paris", "candidate": "?!"})
    out.append({"id": "seps-only", "prompt": "q", "baseline": "|  |", "candidate": "Paris"})
    return out


def distinct_texts(judge: EmbeddingSimilarityJudge, items: list[dict[str, object]]) -> set[str]:
    return {t for r in items if isinstance(r["candidate"], str) and str(r["baseline"]).strip("| ")
            for t in judge.texts_for(str(r["baseline"]), r["candidate"])}


def test_the_prepass_gives_the_row_by_row_rows_and_embeds_each_distinct_text_once() -> None:
    items = rows()
    slow = judge_many(RowByRowJudge(DeterministicEmbedder(), reference_sep="|"), items, progress=False)
    embedder = DeterministicEmbedder()
    judge = EmbeddingSimilarityJudge(embedder, reference_sep="|", chunk_size=7)
    fast = judge_many(judge, items, progress=False)
    pd.testing.assert_frame_equal(fast[COMPARED], slow[COMPARED])
    assert list(fast["status"].value_counts().sort_index().items()) == [("error", 4), ("scored", 20)]
    assert "zero vector" in fast.set_index("id").loc["no-words", "error"]
    # each distinct text once, in calls of at most chunk_size texts, longest first; no per-row call
    sent = [t for call in embedder.calls for t in call]
    assert sorted(sent) == sorted(distinct_texts(judge, items))
    assert all(len(call) <= 7 for call in embedder.calls)
    assert [len(t) for t in sent] == sorted((len(t) for t in sent), reverse=True)
    assert len(embedder.calls) == math.ceil(len(sent) / 7)
    assert judge._vectors == {}  # the vectors belong to the run, not to the judge


def test_async_twin_gives_the_same_rows() -> None:
    items = rows()
    judge = EmbeddingSimilarityJudge(DeterministicEmbedder(), reference_sep="|")
    sync = judge_many(judge, items, progress=False)
    asynced = asyncio.run(ajudge_many(judge, items, progress=False))
    pd.testing.assert_frame_equal(asynced[COMPARED], sync[COMPARED])


class FlakyEmbedder:
    """An embedding service (an external adapter: a test double, not our code) that fails every call
    holding ``poison``, and answers calls of more than ``max_texts`` texts with one vector too few."""

    def __init__(self, poison: str, max_texts: int = 1000) -> None:
        self.inner = DeterministicEmbedder()
        self.poison = poison
        self.max_texts = max_texts
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        with self._lock:
            self.calls.append(texts)
        if self.poison in texts:
            raise ConnectionError("the embedding service is down")
        vectors = self.inner.embed(texts)
        return vectors[:-1] if len(texts) > self.max_texts else vectors


def test_a_failed_chunk_falls_back_to_row_by_row_with_the_same_rows_and_errors() -> None:
    items = rows()
    slow = judge_many(RowByRowJudge(FlakyEmbedder("Lyon"), reference_sep="|"), items, progress=False)
    embedder = FlakyEmbedder("Lyon")
    fast = judge_many(EmbeddingSimilarityJudge(embedder, reference_sep="|", chunk_size=4), items, progress=False)
    pd.testing.assert_frame_equal(fast[COMPARED], slow[COMPARED])
    lyon = fast.set_index("id").loc["q0-m2"]
    assert lyon["status"] == "error" and "the embedding service is down" in lyon["error"]
    assert len(fast) == len(items) and (fast["status"] == "scored").sum() == 19
    # the failed chunk's other rows were embedded one by one: the per-row calls are [references..., candidate]
    per_row = [c for c in embedder.calls if c[-1] in {"Paris", "Lyon", "the city of Paris"} and len(c) <= 3]
    assert per_row


def test_a_short_reply_to_a_large_call_is_not_kept() -> None:
    items = rows()
    slow = judge_many(RowByRowJudge(DeterministicEmbedder(), reference_sep="|"), items, progress=False)
    embedder = FlakyEmbedder("no such text", max_texts=3)  # large calls come back one vector short
    fast = judge_many(EmbeddingSimilarityJudge(embedder, reference_sep="|", chunk_size=100), items, progress=False)
    pd.testing.assert_frame_equal(fast[COMPARED], slow[COMPARED])


class DownEmbedder:
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise ConnectionError("no route to the embedding service")


def test_an_embedder_that_always_fails_gives_every_row_its_error() -> None:
    items = rows()
    slow = judge_many(RowByRowJudge(DownEmbedder()), items, progress=False)
    fast = judge_many(EmbeddingSimilarityJudge(DownEmbedder()), items, progress=False)
    pd.testing.assert_frame_equal(fast[COMPARED], slow[COMPARED])
    assert (fast["status"] == "error").all()
    assert fast["error"].str.contains("no route to the embedding service").sum() == 22  # all but blank, missing


class ArrayEmbedder:
    """An embedder with ``embed_array`` (one float32 array a call), as the local one has."""

    def __init__(self) -> None:
        self.inner = DeterministicEmbedder(dim=64)
        self.array_calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(v) for v in row] for row in self.embed_array(texts)]

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        self.array_calls += 1
        return np.asarray(self.inner.embed(texts), dtype=np.float32)


def test_an_embedder_with_embed_array_is_called_for_arrays_with_the_same_scores() -> None:
    items = rows()
    slow = judge_many(RowByRowJudge(ArrayEmbedder(), reference_sep="|"), items, progress=False)
    embedder = ArrayEmbedder()
    fast = judge_many(EmbeddingSimilarityJudge(embedder, reference_sep="|"), items, progress=False)
    pd.testing.assert_frame_equal(fast[COMPARED], slow[COMPARED])
    assert embedder.array_calls == 1


def test_calibration_scores_come_from_the_prepass(capsys: pytest.CaptureFixture[str]) -> None:
    items = [r for r in rows() if r["id"] not in ("blank", "missing", "seps-only")]
    embedder = DeterministicEmbedder()
    scored = ScoredItems.from_frame(score_items({"embedding": EmbeddingSimilarityJudge(embedder, reference_sep="|")},
                                                items, reference_sep="|", progress=True))
    slow = judge_many(RowByRowJudge(DeterministicEmbedder(), reference_sep="|"), items, progress=False)
    np.testing.assert_array_equal(scored.frame["score_embedding"].to_numpy(),
                                  np.where(slow["status"] == "scored", slow["quality_score"], np.nan))
    assert len(embedder.calls) == 1
    n = len({t for r in items for t in EmbeddingSimilarityJudge(embedder, reference_sep="|").texts_for(
        str(r["baseline"]), str(r["candidate"]))})
    err = capsys.readouterr().err
    assert f"grading: embedding-similarity: embedding {n} texts" in err  # the pre-pass has its own labelled bar


def test_chunk_size_must_be_a_positive_integer() -> None:
    with pytest.raises(ValidationError, match="chunk_size"):
        EmbeddingSimilarityJudge(DeterministicEmbedder(), chunk_size=0)


def test_the_local_minilm_scores_as_row_by_row(minilm) -> None:
    pytest.importorskip("sentence_transformers")

    items = [r for r in rows() if r["id"].startswith(("q0", "q2"))]  # type: ignore[union-attr]
    embedder = minilm  # the session's loaded all-MiniLM-L6-v2 (tests/conftest.py)
    array = embedder.embed_array(["Paris", "It is Paris, the capital."])
    assert array.shape == (2, 384) and array.dtype == np.float32
    assert array.tolist() == embedder.embed(["Paris", "It is Paris, the capital."])
    slow = judge_many(RowByRowJudge(embedder, reference_sep="|"), items, progress=False)
    fast = judge_many(EmbeddingSimilarityJudge(embedder, reference_sep="|"), items, progress=False)
    assert (fast["status"] == "scored").all() and (slow["status"] == "scored").all()
    # one text alone or among others of other lengths: padding moves float rounding, not the score
    np.testing.assert_allclose(fast["quality_score"], slow["quality_score"], rtol=0, atol=1e-5)
    assert fast.loc[0, "quality_score"] == pytest.approx(1.0, abs=1e-5)  # "Paris" against "Paris"
