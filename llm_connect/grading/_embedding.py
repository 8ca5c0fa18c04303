"""The embedding-similarity judge: the cosine similarity of the two answers' embeddings, clamped to 0..1, with
every distinct text of a batch embedded once.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._docstrings import JUDGE_TEXTS, share_parameters
from .._runtime import acall_embed, to_thread
from ..core import EmbeddingAdapter, LLMResponse, RunConfig
from ..errors import EmbeddingShapeError, ValidationError
from ._base import GradingResult, JudgeBase, validate_grader_id
from ._lexical import split_references

__all__ = ["EmbeddingSimilarityJudge"]


log = logging.getLogger("llm_connect")


def _as_vector(vec: Any, index: int) -> list[float]:
    try:
        out = [float(x) for x in vec]
    except (TypeError, ValueError):
        raise EmbeddingShapeError(f"embedding {index} is not a sequence of numbers") from None
    if not out:
        raise EmbeddingShapeError(f"embedding {index} is empty")
    if not all(math.isfinite(x) for x in out):
        raise EmbeddingShapeError(f"embedding {index} holds NaN or infinite values")
    return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; a zero vector or a length mismatch is a ``ValueError``."""
    if len(a) != len(b):
        raise EmbeddingShapeError(f"embeddings have different lengths ({len(a)} and {len(b)})")
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        raise EmbeddingShapeError("an embedding is the zero vector; cosine similarity is undefined for it")
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


#: Texts an :class:`EmbeddingSimilarityJudge` sends in one embedder call when it embeds a
#: batch's distinct texts ahead of its rows (see :meth:`EmbeddingSimilarityJudge.aprepare_run`).
EMBED_CHUNK = 2048


@dataclass
class EmbeddingSimilarityJudge(JudgeBase):
    """Cosine similarity of baseline and candidate embeddings, clamped into 0..1.

    Makes one ``embed([baseline, candidate])`` call. With ``reference_sep`` the
    baseline's references and the candidate are embedded in one batch and the
    best-matching reference counts.

    In a batch (``judge_many``, ``calibrate``) the judge first embeds every
    distinct text its rows need (each reference after splitting, each candidate)
    once, longest first, ``chunk_size`` texts an embedder call, and then scores
    the rows from those vectors without calling the embedder again (see
    :meth:`aprepare_run`): the same scores, statuses and errors as row by row.

    Parameters
    ----------
    embedder : EmbeddingAdapter
        The embedding model (a method ``embed(texts)``; ``aembed``, ``embed_array``/``aembed_array`` are
        used when it has them).
    grader_id : str, default "embedding-similarity"
        The judge's id.
    reference_sep : str, optional
        Several references in the baseline, separated by it; the best-matching one counts.
    chunk_size : int, default 2048
        Texts per embedder call when a batch embeds its texts first (:meth:`aprepare_run`).

    Raises
    ------
    ValidationError
        An embedder without ``embed``, a ``chunk_size`` that is not a positive integer, or a blank
        ``grader_id``.

    Examples
    --------
    >>> from llm_connect import LLMResponse, RunConfig
    >>> from llm_connect.testing import DeterministicEmbedder
    >>> judge = EmbeddingSimilarityJudge(DeterministicEmbedder())
    >>> same = LLMResponse("Paris", "ref", "m")
    >>> judge.judge(same, same, prompt="?", run_config=RunConfig()).quality_score
    1.0
    """

    embedder: EmbeddingAdapter
    grader_id: str = "embedding-similarity"
    reference_sep: str | None = None
    chunk_size: int = EMBED_CHUNK

    splits_references = True

    def __post_init__(self) -> None:
        validate_grader_id(self.grader_id)
        if not callable(getattr(self.embedder, "embed", None)):
            raise ValidationError("EmbeddingSimilarityJudge needs an embedder with an embed(texts) method")
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValidationError(f"chunk_size must be a positive integer, got {self.chunk_size!r}")
        self._vectors: dict[str, Any] = {}  # text -> vector, filled by aprepare_run on a copy

    def texts_for(self, baseline: str, candidate: str) -> list[str]:
        """The texts the judge embeds for one row: the baseline's references, then the candidate.

        Parameters
        ----------
        baseline : str
            The baseline's text (split on ``reference_sep``).
        candidate : str
            The candidate's text.

        Returns
        -------
        list of str
            The references, then the candidate.
        """
        return [*split_references(baseline, self.reference_sep), candidate]

    def _texts(self, baseline: LLMResponse, candidate: LLMResponse) -> list[str]:
        return self.texts_for(baseline.content, candidate.content)

    def _result(self, texts: list[str], vectors: Any, baseline: LLMResponse, candidate: LLMResponse) -> GradingResult:
        try:
            vectors = list(vectors)
        except TypeError:
            raise EmbeddingShapeError("the embedding adapter did not return a sequence of vectors") from None
        if len(vectors) != len(texts):
            raise EmbeddingShapeError(
                f"the embedding adapter returned {len(vectors)} vectors for {len(texts)} texts; "
                f"expected exactly {len(texts)}"
            )
        vecs = [_as_vector(v, i) for i, v in enumerate(vectors)]
        cand = vecs[-1]
        sims = [cosine(ref, cand) for ref in vecs[:-1]]
        raw = max(sims)
        score = min(1.0, max(0.0, raw))
        return GradingResult(
            quality_score=score,
            notes=f"cosine similarity {raw:.4f}",
            grader_id=self.grader_id,
            baseline_response=baseline,
            candidate_response=candidate,
            details={"cosine": raw},
        )

    def _cached(self, texts: list[str]) -> Sequence[Sequence[float]] | None:
        """The prepared vectors of ``texts`` (as the Python floats ``embed`` would give), or ``None``
        unless every one was prepared (the row is then embedded on its own, as without preparation)."""
        if not self._vectors:
            return None
        try:
            return [self._vectors[t].tolist() for t in texts]
        except KeyError:
            return None

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """The cosine similarity of the candidate and the best reference, clamped into 0..1: one embedder call.

        Parameters
        ----------
        baseline : LLMResponse
            The reference answer (several with ``reference_sep``).
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            The similarity.

        Raises
        ------
        ValueError
            A zero vector, or two vectors of different lengths (:class:`~llm_connect.errors.EmbeddingShapeError`).
        """
        texts = self._texts(baseline, candidate)
        vectors = self._cached(texts)
        if vectors is None:
            vectors = self.embedder.embed(texts)
        return self._result(texts, vectors, baseline, candidate)

    @share_parameters(texts=JUDGE_TEXTS)
    async def ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """The awaitable twin of :meth:`judge` (the embedder's ``aembed`` when it has one).

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            What :meth:`judge` returns.
        """
        texts = self._texts(baseline, candidate)
        vectors = self._cached(texts)
        if vectors is None:
            vectors = await acall_embed(self.embedder, texts)
        return self._result(texts, vectors, baseline, candidate)

    async def aprepare_run(
        self, pairs: Iterable[tuple[str, str]], *, progress: Callable[[int], Any] | None = None
    ) -> EmbeddingSimilarityJudge:
        """A copy of this judge holding the vectors of every distinct text of ``pairs``, for one batch run.

        ``pairs``: each row's ``(baseline, candidate)`` texts. The texts the rows will embed
        (:meth:`texts_for`: each reference after splitting on ``reference_sep``, each candidate)
        are deduplicated across references and rows, sorted longest first (so each call's
        texts are of similar length) and embedded ``chunk_size`` at a time: through the
        embedder's ``aembed_array``/``embed_array`` when it has them (one numpy array a call,
        e.g. :class:`~llm_connect.adapters.SentenceTransformerEmbedder`), else its
        ``aembed``/``embed`` (an HTTP embedder splits a call into its own requests). The batch
        engine calls this once before the rows (``judge_many``, ``calibrate``), outside any
        per-row lock; the copy then scores each row from the vectors, with no embedder call.

        Scores, statuses and errors are those of the row-by-row path: a row is scored by
        the same code from the same vectors, and a chunk whose call fails (or whose reply is
        not one vector of numbers per text) is not kept, so its rows are embedded on their
        own, as without preparation, failing or not as they would have. An embedder that
        gives a text different numbers alone than in a large batch (a local model's padding
        changes its float rounding, in the 7th digit or so) gives scores that differ by that
        much. ``progress``: called with the number of distinct texts, returns a tqdm-like bar
        (``update(n)`` per chunk, ``close()``), or ``None``.

        Memory: the vectors stay as the embedder's arrays (float32 from sentence-transformers:
        15,000 rows with 3 references each, about 40,000 distinct texts x 384 dimensions, take
        about 60 MB), for the run only: the copy is dropped when the run ends.

        Parameters
        ----------
        pairs : iterable of (str, str)
            Each row's ``(baseline, candidate)`` texts.
        progress : callable, optional
            Called with the number of distinct texts, returns a tqdm-like bar (``update(n)`` per chunk,
            ``close()``), or ``None``.

        Returns
        -------
        EmbeddingSimilarityJudge
            The copy, which scores each row from the vectors with no embedder call.
        """
        distinct: dict[str, None] = {}
        for baseline, candidate in pairs:
            for text in self.texts_for(baseline, candidate):
                distinct.setdefault(text, None)
        texts = sorted(distinct, key=len, reverse=True)  # stable: ties keep first-seen order
        prepared = copy.copy(self)
        prepared._vectors = {}
        bar = progress(len(texts)) if progress is not None and texts else None
        try:
            for start in range(0, len(texts), self.chunk_size):
                chunk = texts[start : start + self.chunk_size]
                try:
                    matrix = await self._embed_chunk(chunk)
                except Exception as exc:  # the rows of these texts are embedded on their own, as before
                    log.info("llm_connect: %s: embedding %d texts at once failed (%s); their rows are embedded "
                             "one by one", self.grader_id, len(chunk), exc)
                else:
                    for text, vector in zip(chunk, matrix, strict=True):
                        prepared._vectors[text] = vector
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        return prepared

    async def _embed_chunk(self, chunk: list[str]) -> Any:
        """The vectors of ``chunk`` as one float array (a row per text), or an exception."""
        import numpy as np

        aembed_array = getattr(self.embedder, "aembed_array", None)
        embed_array = getattr(self.embedder, "embed_array", None)
        if aembed_array is not None and inspect.iscoroutinefunction(aembed_array):
            matrix = np.asarray(await aembed_array(chunk))
        elif callable(embed_array):
            matrix = np.asarray(await to_thread(embed_array, chunk))
        else:
            matrix = np.asarray(list(await acall_embed(self.embedder, chunk)), dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] != len(chunk) or matrix.dtype.kind not in "fiub":
            raise EmbeddingShapeError(f"expected {len(chunk)} vectors of numbers, got an array of shape {matrix.shape}")
        return matrix if matrix.dtype.kind == "f" else matrix.astype(float)
