"""Label answers in the notebook: a :class:`Labeller` that feeds the ledger and the estimates.

One item at a time (prompt, reference(s), candidate; the judge's score and reply only on
request, so they do not anchor the annotator), each label appended to the quality ledger the
moment it is given, and progress told in the terms that matter: how wide the interval on the
mean quality is now, and about how many more labels would make it as narrow as wanted.

What goes in the ledger
-----------------------
Every action is one appended :class:`~llm_connect.quality.QualityObservation` of the
labeller's ``task_type``, with the candidate's ``adapter_id`` / ``model_id`` chosen exactly as
:func:`~llm_connect.grading.judge_many` chooses them (``adapter_id`` or ``candidate_adapter``
column, else ``candidate_model``, else ``"unknown"``), so :func:`~llm_connect.frames.paired_frame`
joins labels with the judge's observations on (``item_id``, ``adapter_id``):

- a **label**: grader ``human`` (``quality_score`` the label in 0..1), tags ``grader_id``,
  ``item_id``, ``annotator`` (as :func:`~llm_connect.frames.record_labels` writes them), plus
  ``label_id`` (unique), ``strategy``, ``seed``, ``plan`` (an id of the sampling plan),
  ``sampling_probability`` (the probability with which the item is shown once the walk through
  the seeded order reaches it: 1 except for ``"active"``), ``stratum``, ``rank`` (the item's
  place in its stratum's seeded order), ``stratum_size`` and ``note`` when one was written;
- a **skip**: grader ``human-skip`` (score 0, never read as a label), the same tags;
- an **undo**: grader ``human-undo`` (score 0) with tag ``undoes=<label_id>``. The ledger stays
  append-only; :func:`~llm_connect.frames.paired_frame` and the labeller leave an undone label
  (or skip) out.

A restarted kernel (a new ``Labeller`` with the same items, ledger, task type, annotator,
strategy and seed) rebuilds the same seeded order and shows the first item that annotator has
neither labelled nor skipped: an item is never shown twice to one annotator unless its label was
undone. Several annotators may label at once from separate processes: each action is one
``append`` under the ledger's file lock, and before choosing the next item the labeller re-reads
the ledger, so an item another annotator has already labelled is passed over (except the
``"overlap"`` share, which everyone labels).

Which items to show (``strategy``)
----------------------------------
Each item gets three seeded uniforms from a keyed hash of its id and adapter (``blake2b`` keyed
with the seed), so the plan depends neither on the row order nor on other items:

``"random"``
    a uniform random order. The labelled items are a simple random sample, so the estimates
    need no weights.
``"stratified"``
    round-robin over the groups of ``group=`` (default the candidate model column), uniform
    within each. Within a group the labelled items are a simple random sample (per-group
    estimates need no weights); the pooled estimate weights each item by its group's share
    labelled (``inclusion_probability`` in :meth:`Labeller.frame`).
``"active"``
    active statistical inference (Zrnic & Candès 2024, *Active Statistical Inference*, ICML,
    arXiv:2403.03208), sequential and learned as in the paper: the walk visits every item in a
    seeded random order and shows item ``i`` with probability ``π_i`` (Poisson sampling), fixed
    *before* its label is seen. The first ``burn_in`` labels (default 20) are a uniform sample
    (``π = 1``); from then on ``π_i = floor + (1 − floor)·σ(s_i) / max σ``, with ``σ(s)²`` the
    residual ``E[(y − p̂(s))² | s]`` of the judge calibrated on the labels so far
    (:func:`residual_walk`: an offset per judge-score bin, shrunk toward the pooled one; the
    residual per bin, shrunk toward the pooled residual and the judge's own ``s(1 − s)``, and
    spread within a bin by that claim). The uniform ``floor`` (default 0.1) keeps every ``π_i``
    above zero. The plan is replayed from the ledger (a shown item keeps the ``π`` recorded with
    its label), so a restarted kernel resumes it. Since the annotator may stop at any time, the
    inclusion probability used in the estimate is ``π_i · K / N``: ``K`` of the ``N`` items were
    visited (a random prefix of the order, all items before the next one to be shown). The
    estimates (:meth:`Labeller.estimate`) weight by it and use the judge calibrated on the labels
    with each item's own label left out (:func:`calibrated_scores`, the ``prediction`` column of
    :meth:`Labeller.frame`) in place of its raw score: the inverse-probability-weighted estimator
    has no intercept, so a judge whose scores are off by a constant (a lexical judge scoring
    correct paraphrases 0) would otherwise pay for it in every weight.
    When it pays: only when the residual uncertainty is informative, i.e. the judge is right
    most of the time where it is sure and unsure elsewhere. In seeded simulations
    (``tests/test_labeller.py``) a calibrated judge sure on 85% of the items needs about 27%
    fewer labels than ``"random"`` for the same width; a confidently wrong lexical judge about 8%
    fewer; on the bundled QA set with the lexical judges (``benchmarks/labelling.py``) about 16%
    fewer than ``"random"``'s plain PPI++, nearly all of it from the calibrated judge: their
    residuals are about equally large on every score but 1, so the sampling itself gains little.
    With ``uncertainty="judge"`` the fixed rule ``π = floor + (1 − floor)·u / max(u)``
    (:func:`active_probabilities`) uses the judge's own uncertainty ``u = sqrt(s(1 − s))`` of its
    score ``s``, the paper's rule when the model's uncertainty is informative, with the raw scores
    in the estimates; ``uncertainty="COLUMN"`` uses that column as ``u`` instead (e.g. several
    judges' disagreement).
    Which to pick: ``uncertainty="judge"`` when the judge is calibrated (``P(correct | s) ≈ s``:
    sure where it is right, unsure elsewhere); in the seeded simulations it then needs about 38%
    fewer labels than ``"random"`` for the same width (the learned rule about 27% fewer), with
    95% coverage. It trusts the judge's claims of certainty, so it is costly when they are wrong:
    on the confidently wrong lexical judge (30% of its 0s correct) it needs about 2.9 times
    ``"random"``'s labels and its intervals cover only 80–91% at 30–240 labels (the few labels
    drawn where the judge is sure carry huge weights); on the bundled QA set with the lexical judges
    (``benchmarks/labelling.py``) about 1.7 times ``"random"``'s labels. The learned rule (the default, no
    ``uncertainty``) learns the residual from the labels and never trusts a claim it has not
    checked, so it is the safe choice when the judge has not been shown to be calibrated (e.g.
    any lexical or verdict-only judge, or a new task); there is no ``"auto"`` because the labels
    that would tell the two apart are the ones being planned.
``"overlap"``
    a seeded share (``overlap=0.2``) of the items, the same set for every annotator, shown to
    every annotator first, then the rest in random order, each to one annotator.
    :meth:`Labeller.agreement` gives percent agreement and Krippendorff's alpha over the items
    labelled by several annotators.

The same inclusion rule serves every strategy: each stratum (all items; a group; the overlap
share and the rest) is walked in its seeded order, and a labelled item's inclusion probability
is ``π_i · K_s / N_s``. An item passed over because it was skipped, or shown to an annotator who
has not answered yet, counts as visited and unlabelled (skips are assumed unrelated to the label;
skip sparingly). Only labels given under the labeller's own plan (``tags["plan"]``) enter
:meth:`Labeller.frame` and the estimates; labels from elsewhere still keep their items from
being shown again.

Judge scores and replies in ``items``
-------------------------------------
With ``judge="NAME"``, the score is read from the items' column ``NAME``, else ``score_NAME``
(as ``calibrate``'s ``scores.csv`` writes it), else from the ledger's observations of the task
type with ``tags["grader_id"] == NAME`` (mean per item and adapter). The reply shown on request
is the column ``reply_NAME``, ``notes_NAME``, ``reply`` or ``notes``, the first present.
"""

from __future__ import annotations

import hashlib
import html
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..frames import HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID, ledger_frame
from ..quality import QualityObservation

__all__ = [
    "STRATEGIES",
    "Labeller",
    "ResidualWalk",
    "SamplingPlan",
    "active_probabilities",
    "calibrated_scores",
    "item_draws",
    "learned_plan",
    "make_plan",
    "residual_walk",
    "score_bins",
    "walk_inclusion",
]

STRATEGIES: tuple[str, ...] = ("random", "stratified", "active", "overlap")
_ID_COLUMNS = ("item_id", "id")
_REFERENCE_COLUMNS = ("references", "reference", "baseline")


# -- the sampling plan (pure, vectorised: the simulation tests drive these very functions) -------


def item_draws(keys: Sequence[str], seed: int) -> np.ndarray:
    """Three uniforms in [0, 1) per key, from ``blake2b`` keyed with ``seed``: shape (len(keys), 3).

    Column 0 orders the items, column 1 decides whether an ``"active"`` item is shown, column 2
    whether an item is in the ``"overlap"`` share. A key's draws depend only on it and the seed.
    """
    salt = int(seed).to_bytes(16, "little", signed=True)
    raw = b"".join(hashlib.blake2b(k.encode("utf-8"), digest_size=24, key=salt).digest() for k in keys)
    words = np.frombuffer(raw, dtype="<u8").reshape(len(keys), 3)
    return (words >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def active_probabilities(
    scores: Any = None, *, uncertainty: Any = None, floor: float = 0.1
) -> np.ndarray:
    """Active inference's probabilities of showing each item (Zrnic & Candès 2024, arXiv:2403.03208).

    ``u = sqrt(s (1 − s))`` for judge scores ``s`` in 0..1 (or ``uncertainty`` as given), then
    ``π = floor + (1 − floor) · u / max(u)``: proportional to the uncertainty (the paper's
    variance-optimal rule for a label with that standard deviation), mixed with a uniform
    ``floor`` so no item has probability zero. A missing score or uncertainty gets ``π = 1``
    (nothing is known about it). All ``u`` zero gives ``π = 1`` everywhere.
    """
    if not (isinstance(floor, (int, float)) and not isinstance(floor, bool) and 0.0 < floor <= 1.0):
        raise ValidationError(f"floor must be a probability in (0, 1], e.g. 0.1; got {floor!r}")
    if uncertainty is not None:
        u = np.asarray(uncertainty, dtype=float)
        if np.any(u[~np.isnan(u)] < 0):
            raise ValidationError("uncertainty must be >= 0 (e.g. a standard deviation or a disagreement)")
    elif scores is not None:
        s = np.asarray(scores, dtype=float)
        u = np.sqrt(np.clip(s, 0.0, 1.0) * (1.0 - np.clip(s, 0.0, 1.0)))
    else:
        raise ValidationError("active_probabilities needs judge scores or an uncertainty")
    finite = ~np.isnan(u)
    top = float(u[finite].max()) if finite.any() else 0.0
    if top <= 0:
        return np.ones(len(u))
    pi = floor + (1.0 - floor) * np.where(finite, u, top) / top
    return np.clip(pi, floor, 1.0)


@dataclass(frozen=True)
class SamplingPlan:
    """Which items to show and in which order, and how likely each was to be shown.

    Arrays are aligned with the items: ``stratum`` (code), ``rank`` (place in the stratum's
    seeded order), ``size`` (the stratum's item count), ``prob`` (``π_i``: shown once reached),
    ``selected`` (its seeded draw fell below ``π_i``); ``order`` is the visiting order (indices)
    and :meth:`queue` the items shown, in order. ``prediction``: for the learned ``"active"``
    rule (:func:`learned_plan`), the calibrated judge at each item's visit, else None.
    """

    strategy: str
    stratum: np.ndarray
    stratum_names: tuple[str, ...]
    rank: np.ndarray
    size: np.ndarray
    prob: np.ndarray
    selected: np.ndarray
    order: np.ndarray
    overlap: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    prediction: np.ndarray | None = None

    def queue(self) -> np.ndarray:
        """Indices of the items to show, in the order they are shown."""
        return self.order[self.selected[self.order]]

    def inclusion(self, done: np.ndarray) -> np.ndarray:
        """Each item's inclusion probability ``π_i · K_s / N_s`` given the items ``done`` (bool per item).

        In each stratum ``K_s`` counts the items visited: every rank up to the furthest done
        item and the items passed over after it (not selected) before the next one to show.
        """
        done = np.asarray(done, dtype=bool)
        out = np.zeros(len(self.prob))
        for s in range(len(self.stratum_names)):
            members = np.flatnonzero(self.stratum == s)
            if not len(members):
                continue
            ranks = self.rank[members]
            by_rank = members[np.argsort(ranks)]
            hit = np.flatnonzero(done[by_rank])
            last = int(hit[-1]) if len(hit) else -1
            later = np.flatnonzero(self.selected[by_rank][last + 1:])
            visited = last + 1 + int(later[0]) if len(later) else len(members)
            out[members] = self.prob[members] * visited / len(members)
        return out


def make_plan(
    keys: Sequence[str],
    *,
    strategy: str = "random",
    seed: int = 0,
    probabilities: Any = None,
    groups: Any = None,
    overlap: float = 0.2,
) -> SamplingPlan:
    """The seeded plan for items named by ``keys`` (see the module docstring for each strategy).

    ``probabilities``: ``π_i`` for ``"active"`` (see :func:`active_probabilities`); ``groups``:
    one group label per item for ``"stratified"``; ``overlap``: the share shown to everyone.
    """
    if strategy not in STRATEGIES:
        raise ValidationError(f"unknown strategy {strategy!r}; choose from {list(STRATEGIES)}")
    n = len(keys)
    draws = item_draws(keys, seed)
    r, u, v = draws[:, 0], draws[:, 1], draws[:, 2]
    prob = np.ones(n)
    in_overlap = np.zeros(n, dtype=bool)
    names: tuple[str, ...] = ("all",)
    stratum = np.zeros(n, dtype=np.intp)
    if strategy == "active":
        if probabilities is None:
            raise ValidationError("strategy='active' needs probabilities (see active_probabilities)")
        prob = np.asarray(probabilities, dtype=float)
        if prob.shape != (n,) or np.any(~((prob > 0) & (prob <= 1))):
            raise ValidationError("active probabilities must be one number in (0, 1] per item")
    elif strategy == "stratified":
        if groups is None:
            raise ValidationError("strategy='stratified' needs a group per item")
        codes, uniques = pd.factorize(pd.Series(list(groups), dtype=object).astype(str), sort=True)
        stratum = codes.astype(np.intp)
        names = tuple(str(g) for g in uniques)
    elif strategy == "overlap":
        if not (isinstance(overlap, (int, float)) and not isinstance(overlap, bool) and 0.0 < overlap <= 1.0):
            raise ValidationError(f"overlap must be the share of items every annotator labels, in (0, 1]; got "
                                  f"{overlap!r}")
        in_overlap = v < overlap
        stratum = np.where(in_overlap, 0, 1).astype(np.intp)
        names = ("overlap", "rest")
    # rank of each item within its stratum by its ordering uniform
    by = np.lexsort((r, stratum))
    rank = np.empty(n, dtype=np.intp)
    counts = np.bincount(stratum, minlength=len(names))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank[by] = np.arange(n) - starts[stratum[by]]
    size = counts[stratum]
    if strategy == "stratified":
        order = np.lexsort((stratum, rank))  # round-robin: every group's first, then every group's second...
    elif strategy == "overlap":
        order = by  # the overlap share first, then the rest
    else:
        order = np.argsort(r, kind="stable")
    selected = u < prob
    return SamplingPlan(strategy=strategy, stratum=stratum, stratum_names=names, rank=rank, size=size,
                        prob=prob, selected=selected, order=order.astype(np.intp), overlap=in_overlap)


# -- the learned residual rule of "active" (sequential active inference) -------------------------


def score_bins(scores: Any, bins: int = 5) -> np.ndarray:
    """Bin codes 0..B-1 of judge scores, in increasing score order (NaN gets -1); never reads labels.

    A score value held by at least ``1/(2·bins)`` of the items (the 0s and 1s of lexical judges and
    verdicts) is a bin of its own; the other values are cut into quantile bins (``bins`` in all, at
    least one for them), ties never split.
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValidationError(f"bins must be a whole number >= 1, e.g. 5; got {bins!r}")
    s = np.asarray(scores, dtype=float)
    out = np.full(s.shape, -1, dtype=np.intp)
    finite = np.isfinite(s)
    if not finite.any():
        return out
    values, inverse, counts = np.unique(s[finite], return_inverse=True, return_counts=True)
    atom = counts * 2 * bins >= finite.sum()
    k = max(bins - int(atom.sum()), 1)
    rest = ~atom
    # each non-atom value: its quantile group among the non-atom items (ties share a value, hence a group)
    below = np.cumsum(np.where(rest, counts, 0)) - np.where(rest, counts, 0)
    group = np.minimum((below * k / max(int(counts[rest].sum()), 1) + 1e-9).astype(np.intp), k - 1)
    # bins in score order: an atom is a bin, so is each run of neighbouring non-atom values of one group
    starts = np.ones(len(values), dtype=bool)
    starts[1:] = atom[1:] | atom[:-1] | (group[1:] != group[:-1])
    codes = np.cumsum(starts) - 1
    out[finite] = codes[inverse.reshape(-1)]
    return out


@dataclass(frozen=True)
class ResidualWalk:
    """The result of :func:`residual_walk`, arrays of shape (runs, items).

    ``prob``: each item's ``π`` (for a visited item the one used at its visit; for the others the
    one the current model would use); ``selected``: shown when reached; ``prediction``: the
    calibrated judge ``p̂(s)`` of the model as it stood before the item was reached (NaN for a
    missing score); ``used``: the labels the walk used (shown, labelled, within the budget);
    ``n_used`` (runs,).
    """

    prob: np.ndarray
    selected: np.ndarray
    prediction: np.ndarray
    used: np.ndarray
    n_used: np.ndarray


def residual_walk(
    scores: Any,
    draws: Any,
    order: Any,
    labels: Any,
    *,
    recorded: Any = None,
    budget: Any = None,
    floor: float = 0.1,
    burn_in: int = 20,
    bins: int = 5,
    prior: float = 2.0,
) -> ResidualWalk:
    """Sequential active inference with a learned residual (Zrnic & Candès 2024, arXiv:2403.03208).

    Walks the items of each run in ``order`` (runs × items: item indices) and shows item ``i``
    when its uniform ``draws[i]`` falls below ``π_i``, computed *before* its label is seen, from
    the labels used so far:

    - the judge scores ``s`` are cut into ``bins`` bins (:func:`score_bins`); in bin ``b`` the
      judge is calibrated by an offset, ``p̂(s) = s + δ_b`` with ``δ_b`` the mean of ``y − s``
      over the bin's labels, shrunk toward the pooled offset by ``prior`` pseudo-labels, and the
      residual's second moment ``σ²_b`` is the mean of ``(y − p̂(s))²`` over the bin's labels,
      shrunk toward the pooled one (itself shrunk toward 1/4), so a bin with few labels is never
      taken for certain;
    - ``π = floor + (1 − floor) · σ_b / max σ``: proportional to the residual's standard
      deviation, the paper's variance-optimal rule ``π(x) ∝ sqrt(E[(y − f(x))² | x])`` with the
      uncertainty learned from the labels (their Section 6), mixed with the uniform ``floor``;
      ``π = 1`` during the burn-in (until ``burn_in`` labels: a uniform sample) and for an item
      without a score.

    ``labels``: each item's label (NaN: none); a label is used when its item is shown, in order,
    until ``budget`` labels per run (default: no limit). ``recorded``: a ``π`` already used for
    an item (the ledger's ``sampling_probability``); the item then counts as shown with it.
    Since each ``π`` depends only on labels of items visited before, the inverse-probability
    weights stay valid under the adaptivity (the paper's sequential active inference, a
    martingale), and :func:`walk_inclusion` makes them valid when the annotator stops early.
    """
    if not (isinstance(floor, (int, float)) and not isinstance(floor, bool) and 0.0 < floor <= 1.0):
        raise ValidationError(f"floor must be a probability in (0, 1], e.g. 0.1; got {floor!r}")
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
        raise ValidationError(f"burn_in must be a whole number of labels >= 0, e.g. 20; got {burn_in!r}")
    u = np.atleast_2d(np.asarray(draws, dtype=float))
    runs, n = u.shape
    idx = np.broadcast_to(np.atleast_2d(np.asarray(order, dtype=np.intp)), (runs, n))
    y = np.broadcast_to(np.atleast_2d(np.asarray(labels, dtype=float)), (runs, n))
    rec = (np.full((runs, n), np.nan) if recorded is None
           else np.broadcast_to(np.atleast_2d(np.asarray(recorded, dtype=float)), (runs, n)))
    cap = np.full(runs, np.inf) if budget is None else np.broadcast_to(np.asarray(budget, dtype=float), (runs,))
    s, codes = _binned(scores, runs, n, bins)
    rows = np.arange(runs)
    model = _ResidualModel(s, codes, floor=floor, prior=prior)
    n_used = np.zeros(runs)
    prob = np.empty((runs, n))
    selected = np.zeros((runs, n), dtype=bool)
    pred = np.empty((runs, n))
    used = np.zeros((runs, n), dtype=bool)
    for t in range(n):
        it = idx[:, t]
        c = codes[rows, it]
        score = s[rows, it]
        pi = np.where(n_used < burn_in, 1.0, model.probability(c, model.factor[rows, it]))
        r_pi = rec[rows, it]
        forced = np.isfinite(r_pi)
        pi = np.where(forced, r_pi, pi)
        sel = forced | (u[rows, it] < pi)
        lab = y[rows, it]
        use = sel & np.isfinite(lab) & (n_used < cap)
        prob[rows, it] = pi
        selected[rows, it] = sel
        pred[rows, it] = model.prediction(c, score)
        used[rows, it] = use
        if use.any():
            n_used += use
            model.add(use, c, score, lab)
    return ResidualWalk(prob=prob, selected=selected, prediction=pred, used=used, n_used=n_used)


def _binned(scores: Any, runs: int, n: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores and their bin codes (:func:`score_bins`), both (runs, n)."""
    s = np.asarray(scores, dtype=float)
    if s.ndim == 1:  # one population for every run: bin it once
        return np.broadcast_to(s, (runs, n)), np.broadcast_to(score_bins(s, bins), (runs, n))
    s = np.broadcast_to(s, (runs, n))
    return s, np.stack([score_bins(row, bins) for row in s])


class _ResidualModel:
    """The learned residual model of :func:`residual_walk`, for several runs at once (see there).

    Per run and score bin it holds, over the labels so far, the count and the sums of
    ``e = y − s`` and ``e²``; from them the offset ``δ_b`` (the calibrated judge is
    ``g = s + δ_b``) and the residual's standard deviation ``σ_b``, each shrunk by ``prior``
    pseudo-labels: ``δ_b`` toward the pooled offset, ``σ²_b`` toward the mean of the pooled
    residual second moment and the judge's own claim ``s(1 − s)`` averaged over the bin.
    """

    def __init__(self, s: np.ndarray, codes: np.ndarray, *, floor: float, prior: float) -> None:
        runs, _ = codes.shape
        self.nb = int(codes.max()) + 1 if (codes >= 0).any() else 1
        self.rows = np.arange(runs)
        self.floor, self.prior = floor, prior
        ok = codes >= 0
        flat = (codes + self.nb * self.rows[:, None])[ok]
        sc = np.clip(s[ok], 0.0, 1.0)
        size = np.bincount(flat, minlength=runs * self.nb).reshape(runs, self.nb).astype(float)
        claim = np.bincount(flat, weights=sc * (1.0 - sc), minlength=runs * self.nb).reshape(runs, self.nb)
        self.has = size > 0
        self.claimed = np.divide(claim, size, out=np.zeros_like(claim), where=self.has)
        # within a bin the sd follows the judge's own claim: σ_i = σ_b · sqrt((s_i(1 − s_i) + c) / mean_b(...))
        w2 = np.clip(s, 0.0, 1.0) * (1.0 - np.clip(s, 0.0, 1.0)) + _CLAIM_FLOOR
        cc = np.where(codes >= 0, codes, 0)
        mean_w2 = self.claimed + _CLAIM_FLOOR
        self.factor = np.where(codes >= 0, np.sqrt(w2 / mean_w2[self.rows[:, None], cc]), 1.0)
        top = np.zeros(runs * self.nb)
        np.maximum.at(top, flat, self.factor[ok])
        self.top_factor = top.reshape(runs, self.nb)
        self.sums = np.zeros((3, runs, self.nb))  # over the labels: count, Σe, Σe²
        self._refresh()

    def add(self, use: np.ndarray, c: np.ndarray, score: np.ndarray, label: np.ndarray) -> None:
        upd = use & (c >= 0)
        if upd.any():
            r, b = self.rows[upd], c[upd]
            e = label[upd] - score[upd]
            for k, v in enumerate((np.ones(len(r)), e, e * e)):
                np.add.at(self.sums[k], (r, b), v)
            self._refresh()

    def _refresh(self) -> None:
        cnt, se, see = self.sums
        prior = self.prior
        pooled = se.sum(axis=1, keepdims=True) / (cnt.sum(axis=1, keepdims=True) + prior)
        d = (se + prior * pooled) / (cnt + prior)
        q = np.maximum(see - 2.0 * d * se + cnt * d * d, 0.0)  # Σ (y − s − δ)² over the labels
        v = (q.sum(axis=1, keepdims=True) + 0.25) / (cnt.sum(axis=1, keepdims=True) + 1.0)
        target = (v + self.claimed) / 2.0
        sd = np.where(self.has, np.sqrt((q + prior * target) / (cnt + prior)), 0.0)
        self.delta = d
        self.sd = sd
        self.top = (sd * self.top_factor).max(axis=1)  # the largest σ_i of the run

    def prediction(self, c: np.ndarray, score: np.ndarray) -> np.ndarray:
        cc = np.where(c >= 0, c, 0)
        return np.where(c >= 0, np.clip(score + self.delta[self.rows, cc], 0.0, 1.0), np.nan)

    def probability(self, c: np.ndarray, factor: np.ndarray) -> np.ndarray:
        sd = self.sd[self.rows, np.where(c >= 0, c, 0)] * factor
        ratio = np.divide(sd, self.top, out=np.ones_like(sd), where=self.top > 0)
        return np.where(c >= 0, np.clip(self.floor + (1.0 - self.floor) * ratio, self.floor, 1.0), 1.0)


_MIN_LABELS_FOR_WIDTH = 10  # below this the progress text gives no width (the normal interval is not yet one)
_CLAIM_FLOOR = 0.02  # keeps a judge's claim of certainty (a score of 0 or 1) from zeroing an item's sd


def learned_plan(
    keys: Sequence[str],
    scores: Any,
    *,
    seed: int = 0,
    labels: Any = None,
    recorded: Any = None,
    floor: float = 0.1,
    burn_in: int = 20,
    bins: int = 5,
) -> SamplingPlan:
    """The ``"active"`` plan with the learned residual rule, replayed from the labels given so far.

    The items are walked in the seeded order of :func:`make_plan` (the same draws from
    :func:`item_draws`) and each ``π`` comes from :func:`residual_walk` on ``labels`` (one per
    item, NaN where none) and ``recorded`` (the ``π`` each already shown item was shown with):
    the same ledger gives the same plan, so a restarted kernel resumes it. Beyond the last label
    the plan is the current model's projection (it changes as labels come in).
    """
    n = len(keys)
    draws = item_draws(keys, seed)
    order = np.argsort(draws[:, 0], kind="stable").astype(np.intp)
    walk = residual_walk(np.asarray(scores, dtype=float), draws[:, 1][None, :], order[None, :],
                         np.full(n, np.nan) if labels is None else labels, recorded=recorded, floor=floor,
                         burn_in=burn_in, bins=bins)
    rank = np.empty(n, dtype=np.intp)
    rank[order] = np.arange(n)
    return SamplingPlan(strategy="active", stratum=np.zeros(n, dtype=np.intp), stratum_names=("all",), rank=rank,
                        size=np.full(n, n), prob=walk.prob[0], selected=walk.selected[0], order=order,
                        prediction=walk.prediction[0])


def calibrated_scores(scores: Any, labels: Any, *, bins: int = 5, prior: float = 2.0) -> np.ndarray:
    """The judge calibrated on the labels, each labelled item's own label left out (runs × items).

    ``p̂(s) = clip(s + δ_b, 0, 1)`` with ``δ_b`` as in :func:`residual_walk` (the bin's mean
    ``y − s``, shrunk toward the pooled offset) from all labels (``labels``: NaN where none),
    except that a labelled item's ``δ`` leaves its own label out (leave-one-out cross-fitting, as
    in cross-prediction-powered inference, Zrnic & Candès 2024, PNAS, arXiv:2309.16598), so the
    prediction never uses the label it is compared with. NaN where the score is missing.
    """
    y = np.atleast_2d(np.asarray(labels, dtype=float))
    runs, n = y.shape
    s, codes = _binned(scores, runs, n, bins)
    nb = int(codes.max()) + 1 if (codes >= 0).any() else 1
    lab = np.isfinite(y) & (codes >= 0)
    e = np.where(lab, y - s, 0.0)
    flat = codes + nb * np.arange(runs)[:, None]
    cnt = np.bincount(flat[lab], minlength=runs * nb).reshape(runs, nb).astype(float)
    sr = np.bincount(flat[lab], weights=e[lab], minlength=runs * nb).reshape(runs, nb)
    rows = np.arange(runs)[:, None]
    cc = np.where(codes >= 0, codes, 0)
    # leave-one-out sums: the bin's and the pooled ones without the item's own label
    c_bin = cnt[rows, cc] - lab
    s_bin = sr[rows, cc] - e
    c_all = cnt.sum(axis=1, keepdims=True) - lab
    s_all = sr.sum(axis=1, keepdims=True) - e
    pooled = s_all / (c_all + prior)
    delta = (s_bin + prior * pooled) / (c_bin + prior)
    return np.where(codes >= 0, np.clip(s + delta, 0.0, 1.0), np.nan)


def walk_inclusion(order: Any, prob: Any, selected: Any, done: Any) -> np.ndarray:
    """Inclusion probabilities ``π_i · K / N`` per run (runs × items), as :meth:`SamplingPlan.inclusion`
    computes them for one stratum: ``K`` counts the items visited, every position up to the last
    ``done`` item and those passed over after it before the next one to show."""
    idx = np.atleast_2d(np.asarray(order, dtype=np.intp))
    pr = np.atleast_2d(np.asarray(prob, dtype=float))
    sel = np.atleast_2d(np.asarray(selected, dtype=bool))
    dn = np.atleast_2d(np.asarray(done, dtype=bool))
    runs, n = idx.shape
    rows = np.arange(runs)[:, None]
    done_pos = dn[rows, idx]
    sel_pos = sel[rows, idx]
    last = np.where(done_pos.any(axis=1), n - 1 - np.argmax(done_pos[:, ::-1], axis=1), -1)
    after = sel_pos & (np.arange(n)[None, :] > last[:, None])
    visited = np.where(after.any(axis=1), np.argmax(after, axis=1), n)
    return pr * (visited / n)[:, None]


# -- items ---------------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value if isinstance(value, str) else str(value)


def _plain_id(value: Any) -> str | int:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return str(value)
    return value


def _items_frame(items: Any) -> pd.DataFrame:
    if isinstance(items, pd.DataFrame):
        frame = items.reset_index(drop=True)
    elif isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        raise ValidationError(
            f"items must be a DataFrame or an iterable of mappings (one per answer to label), got "
            f"{type(items).__name__}"
        )
    else:
        rows = list(items)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, Mapping)]
        if bad:
            raise ValidationError(f"items must be mappings; item {bad[0]} is a {type(rows[bad[0]]).__name__}")
        frame = pd.DataFrame(rows)
    if not len(frame):
        raise ValidationError("items is empty: pass the answers to label (a DataFrame or a list of dicts)")
    return frame


def _column(frame: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    return next((c for c in candidates if c in frame.columns), None)


def _references(value: Any, sep: str | None) -> list[str]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [t for t in (_text(v) for v in value) if t is not None]
    text = _text(value)
    if text is None:
        return []
    if sep:
        parts = [p.strip() for p in text.split(sep)]
        return [p for p in parts if p] or [text]
    return [text]


# -- the labeller --------------------------------------------------------------------------------


@dataclass
class _State:
    mine: set[tuple[str, str]]  # done (labelled or skipped) by this annotator, not undone
    labelled_by_others: set[tuple[str, str]]
    plan_done: set[tuple[str, str]]  # done by anyone under this plan
    last_action: tuple[str, tuple[str, str]] | None  # (label_id, key) of this annotator's last action
    labels: pd.DataFrame  # this plan's labels, not undone: key, annotator, score
    n_mine: int


class Labeller:
    """Label answers one at a time in Jupyter; every label goes to the ledger at once.

    ``items``: a DataFrame or an iterable of mappings with an item id (``id`` or ``item_id``),
    ``prompt``, ``candidate``, optionally reference(s) (``references`` list, ``reference`` or
    ``baseline``; ``reference_sep="|"`` splits one text into several), ``candidate_model`` /
    ``candidate_adapter`` / ``adapter_id`` / ``model_id``, and the judge's score and reply (see
    the module docstring). One item is one (id, adapter): the same question answered by two
    models is two items.

    ``ledger``: the :class:`~llm_connect.quality.QualityLedger` the labels go to (and the judge's
    scores may come from); ``task_type``: the task type of the judge's observations;
    ``annotator``: who labels (a name); ``judge``: the judge's grader id (its scores drive
    ``"active"`` and the estimates; ``None``: human-only intervals); ``strategy``: ``"random"``,
    ``"stratified"``, ``"active"`` or ``"overlap"``; ``seed``: the order's seed.

    Keyword options: ``group`` (the stratifying column; default ``candidate_model``),
    ``overlap`` (share every annotator labels, default 0.2), ``floor`` (the uniform share of
    ``"active"``, default 0.1), ``uncertainty`` (``"active"``'s fixed rule: ``"judge"`` for the
    judge's own ``sqrt(s(1 − s))``, for a judge known to be calibrated, or a column of uncertainty,
    e.g. several judges' disagreement; without it, the default, the rule is learned from the
    labels: safer when the judge may be confidently wrong, see the module docstring), ``burn_in``
    (labels taken uniformly before it learns, default 20), ``bins``
    (judge-score bins of the learned rule, default 5), ``reference_sep``, ``show_judge`` (reveal
    the judge's verdict from the start; default hidden, to avoid anchoring), ``target_width``
    (the interval width progress plans for, default 0.05), ``confidence`` (0.95).

    The programmatic API (the widget's buttons call it): :attr:`current`, :meth:`label`,
    :meth:`skip`, :meth:`undo`, :meth:`progress`, :attr:`n_labelled`; and for the results
    :meth:`frame`, :meth:`estimate`, :meth:`agreement`. Bad input raises
    :class:`~llm_connect.errors.ValidationError` saying what to change.
    """

    def __init__(
        self,
        items: Any,
        *,
        ledger: Any,
        task_type: str,
        annotator: str,
        judge: str | None = None,
        strategy: str = "random",
        seed: int = 0,
        group: str | None = None,
        overlap: float = 0.2,
        floor: float = 0.1,
        uncertainty: str | None = None,
        burn_in: int = 20,
        bins: int = 5,
        reference_sep: str | None = None,
        show_judge: bool = False,
        target_width: float = 0.05,
        confidence: float = 0.95,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValidationError(f"unknown strategy {strategy!r}; choose from {list(STRATEGIES)}")
        for name, value in (("task_type", task_type), ("annotator", annotator)):
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"{name} must be a non-empty string, got {value!r}")
        if judge is not None and (not isinstance(judge, str) or not judge.strip()):
            raise ValidationError(f"judge must be the judge's grader id (a string) or None, got {judge!r}")
        if judge in (HUMAN_GRADER_ID, SKIP_GRADER_ID, UNDO_GRADER_ID):
            raise ValidationError(f"judge={judge!r} names the human labels; pass the machine judge's grader id")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValidationError(f"seed must be an integer, got {seed!r}")
        if not hasattr(ledger, "append"):
            raise ValidationError(f"ledger must be a QualityLedger (labels are appended to it), got "
                                  f"{type(ledger).__name__}")
        if not (isinstance(target_width, (int, float)) and not isinstance(target_width, bool)
                and 0 < target_width < 1):
            raise ValidationError(f"target_width must be a number in (0, 1), e.g. 0.05; got {target_width!r}")
        self.group: str | None = None
        self.judge_source: str | None = None
        self.ledger = ledger
        self.task_type = task_type
        self.annotator = annotator
        self.judge = judge
        self.strategy = strategy
        self.seed = int(seed)
        self.show_judge = bool(show_judge)
        self.target_width = float(target_width)
        self.confidence = float(confidence)
        self._build_items(_items_frame(items), group=group, reference_sep=reference_sep, uncertainty=uncertainty)
        probs = None
        self.floor, self.burn_in, self.bins = floor, burn_in, bins
        self._learned = strategy == "active" and uncertainty is None
        if strategy == "active":
            u = self._items["uncertainty"] if uncertainty not in (None, "judge") else None
            if u is None and self._items["judge_score"].isna().all():
                raise ValidationError(
                    "strategy='active' needs the judge's scores: pass judge='GRADER_ID' with a score column "
                    "(GRADER_ID or score_GRADER_ID) in items or its observations in the ledger, or uncertainty="
                    "'COLUMN'"
                )
            if self._learned:  # checked now, replayed from the ledger in _refresh
                residual_walk(np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1), dtype=np.intp), np.full(1, np.nan),
                              floor=floor, burn_in=burn_in, bins=bins)
            else:  # the fixed rule: the judge's own sqrt(s(1 - s)) (uncertainty="judge") or the column
                probs = active_probabilities(self._items["judge_score"].to_numpy(dtype=float),
                                             uncertainty=None if u is None else u.to_numpy(dtype=float), floor=floor)
        self.plan = make_plan(list(self._items["key_text"]), strategy=strategy, seed=self.seed,
                              probabilities=probs if not self._learned else np.ones(len(self._items)),
                              groups=self._items["group"] if strategy == "stratified" else None,
                              overlap=overlap)
        plan_key: tuple[Any, ...] = (strategy, self.seed, overlap if strategy == "overlap" else None,
                                     floor if strategy == "active" else None, group)
        if strategy == "active":
            plan_key += (("learned", burn_in, bins) if self._learned else ("uncertainty", uncertainty),)
        digest = hashlib.blake2b(repr(plan_key).encode(), digest_size=6).hexdigest()
        self.plan_id = f"{strategy}-{self.seed}-{digest}"
        self._queue = self.plan.queue()
        self._pinned: int | None = None  # an item brought back by undo
        self._current: int | None = None
        self._refresh()

    # -- items ----------------------------------------------------------------------------------

    def _build_items(self, frame: pd.DataFrame, *, group: str | None, reference_sep: str | None,
                     uncertainty: str | None) -> None:
        id_col = _column(frame, _ID_COLUMNS)
        missing = [name for name, ok in (("an item id ('id' or 'item_id')", id_col is not None),
                                         ("'prompt'", "prompt" in frame.columns),
                                         ("'candidate'", "candidate" in frame.columns)) if not ok]
        if missing:
            raise ValidationError(f"items lack {', '.join(missing)}; their columns are {list(frame.columns)[:20]}")
        assert id_col is not None
        ids = [_plain_id(v) for v in frame[id_col].tolist()]
        if any(_text(v) is None for v in frame[id_col].tolist()):
            raise ValidationError(f"every item needs an id; column {id_col!r} has missing values")
        adapter_col = _column(frame, ("adapter_id", "candidate_adapter", "candidate_model"))
        model_col = _column(frame, ("model_id", "candidate_model"))

        def names(col: str | None) -> list[str | None]:
            if col is None:
                return [None] * len(frame)
            return [t if t is not None and t.strip() else None for t in map(_text, frame[col].tolist())]

        models = [m or "unknown" for m in names(model_col)]
        adapters = [a or m for a, m in zip(names(adapter_col), models, strict=True)]
        keys = [(str(i), a) for i, a in zip(ids, adapters, strict=True)]
        seen: dict[tuple[str, str], int] = {}
        for k in keys:
            seen[k] = seen.get(k, 0) + 1
        dup = [k for k, c in seen.items() if c > 1]
        if dup:
            raise ValidationError(
                f"{len(dup)} item(s) appear more than once, e.g. id {dup[0][0]!r} for adapter {dup[0][1]!r}; each "
                "(id, candidate model) must be one row: drop the duplicates (df.drop_duplicates) or give them "
                "distinct ids"
            )
        ref_col = _column(frame, _REFERENCE_COLUMNS)
        refs = [_references(v, reference_sep) for v in frame[ref_col].tolist()] if ref_col else [[]] * len(frame)
        data = pd.DataFrame({
            "item_id": ids,
            "key_text": [f"{i}\x1f{a}" for i, a in keys],
            "adapter_id": adapters,
            "model_id": models,
            "prompt": [_text(v) or "" for v in frame["prompt"].tolist()],
            "candidate": [_text(v) or "" for v in frame["candidate"].tolist()],
            "references": refs,
        })
        self._keys = keys
        self._index = {k: i for i, k in enumerate(keys)}
        if self.strategy == "stratified" or group is not None:
            gcol = group if group is not None else _column(frame, ("candidate_model", "model_id", "adapter_id"))
            if gcol is None or gcol not in frame.columns:
                raise ValidationError(
                    f"strategy='stratified' needs a group column: group={gcol!r} is not among the items' columns "
                    f"{list(frame.columns)[:20]}; pass group='COLUMN' (e.g. the candidate model)"
                )
            data["group"] = [_text(v) or "(missing)" for v in frame[gcol].tolist()]
            self.group = gcol
        else:
            data["group"] = "all"
            self.group = None
        data["judge_score"] = np.nan
        data["judge_reply"] = None
        if uncertainty is not None and uncertainty != "judge":
            if not isinstance(uncertainty, str) or uncertainty not in frame.columns:
                raise ValidationError(f"uncertainty={uncertainty!r} is not a column of the items; pass a column "
                                      "name, 'judge' (the judge's own sqrt(s(1 - s))) or None (learned)")
            data["uncertainty"] = pd.to_numeric(frame[uncertainty], errors="coerce").to_numpy(dtype=float)
        if self.judge is not None:
            score_col = _column(frame, (self.judge, f"score_{self.judge}"))
            if score_col is not None:
                scores = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(dtype=float)
                if np.any((scores < 0) | (scores > 1)):
                    raise ValidationError(f"the judge's scores in column {score_col!r} must be in 0..1; rescale first")
                data["judge_score"] = scores
                self.judge_source = f"items[{score_col!r}]"
            else:
                data["judge_score"] = self._judge_from_ledger(keys)
                self.judge_source = "ledger"
            reply_col = _column(frame, (f"reply_{self.judge}", f"notes_{self.judge}", "reply", "notes"))
            if reply_col is not None:
                data["judge_reply"] = [_text(v) for v in frame[reply_col].tolist()]
        self._items = data

    def _judge_from_ledger(self, keys: list[tuple[str, str]]) -> np.ndarray:
        df = self._ledger_rows()
        out = np.full(len(keys), np.nan)
        if not len(df) or "tag.grader_id" not in df.columns or "tag.item_id" not in df.columns:
            return out
        mine = df[(df["tag.grader_id"] == self.judge).to_numpy(dtype=bool) & df["tag.item_id"].notna().to_numpy()]
        if not len(mine):
            return out
        means = pd.DataFrame({
            "item": mine["tag.item_id"].astype(object).map(str).to_numpy(),
            "adapter": mine["adapter_id"].astype(str).to_numpy(),
            "score": mine["quality_score"].to_numpy(dtype=float),
        }).groupby(["item", "adapter"])["score"].mean()
        lookup = means.to_dict()
        return np.array([lookup.get(k, np.nan) for k in keys], dtype=float)

    # -- the ledger ----------------------------------------------------------------------------

    def _ledger_rows(self) -> pd.DataFrame:
        path = getattr(self.ledger, "real_path", None)
        if path is not None and not path.exists():
            return pd.DataFrame()
        df = ledger_frame(self.ledger)
        if not len(df):
            return df
        return df[(df["task_type"] == self.task_type).to_numpy(dtype=bool)]

    def _refresh(self) -> None:
        df = self._ledger_rows()
        empty = pd.DataFrame(columns=["key", "annotator", "score"])
        if not len(df) or "tag.grader_id" not in df.columns:
            self._state = _State(set(), set(), set(), None, empty, 0)
            self._replay({})
            self._choose()
            return
        grader = df["tag.grader_id"].astype(object)
        human = df[grader.isin([HUMAN_GRADER_ID, SKIP_GRADER_ID]).to_numpy(dtype=bool)]
        undo = df[(grader == UNDO_GRADER_ID).to_numpy(dtype=bool)]

        def col(part: pd.DataFrame, name: str) -> list[Any]:
            return part[name].astype(object).tolist() if name in part.columns else [None] * len(part)

        undone = {v for v in col(undo, "tag.undoes") if v is not None and v is not pd.NA}
        mine: set[tuple[str, str]] = set()
        others: set[tuple[str, str]] = set()
        plan_done: set[tuple[str, str]] = set()
        rows: list[tuple[tuple[str, str], str, float]] = []
        last: tuple[str, tuple[str, str]] | None = None
        n_mine = 0
        recorded: dict[tuple[str, str], float] = {}
        for item, adapter, who, lid, g, plan, score, prob in zip(
            col(human, "tag.item_id"), human["adapter_id"].astype(str).tolist(), col(human, "tag.annotator"),
            col(human, "tag.label_id"), human["tag.grader_id"].tolist(), col(human, "tag.plan"),
            human["quality_score"].tolist(), col(human, "tag.sampling_probability"), strict=True,
        ):
            if item is None or item is pd.NA or (lid is not None and lid is not pd.NA and lid in undone):
                continue
            key = (str(item), adapter)
            if key not in self._index:
                continue
            who_s = str(who) if who is not None and who is not pd.NA else "anonymous"
            is_label = g == HUMAN_GRADER_ID
            if who_s == self.annotator:
                mine.add(key)
                n_mine += int(is_label)
                if lid is not None and lid is not pd.NA:
                    last = (str(lid), key)
            elif is_label:
                others.add(key)
            if plan == self.plan_id:
                plan_done.add(key)
                if prob is not None and prob is not pd.NA and key not in recorded:
                    recorded[key] = float(prob)
                if is_label:
                    rows.append((key, who_s, float(score)))
        labels = pd.DataFrame(rows, columns=["key", "annotator", "score"]) if rows else empty
        self._state = _State(mine, others, plan_done, last, labels, n_mine)
        self._replay(recorded)
        self._choose()

    def _replay(self, recorded: Mapping[tuple[str, str], float]) -> None:
        """Rebuild the learned ``"active"`` plan from this plan's labels and recorded probabilities."""
        if not self._learned:
            return
        n = len(self._keys)
        y = np.full(n, np.nan)
        labels = self._state.labels
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).mean()
            for key, value in zip(per.index, per.to_numpy(dtype=float), strict=True):
                y[self._index[key]] = value
        rec = np.full(n, np.nan)
        for key, value in recorded.items():
            if math.isfinite(value) and 0 < value <= 1:
                rec[self._index[key]] = value
        self.plan = learned_plan(list(self._items["key_text"]), self._items["judge_score"].to_numpy(dtype=float),
                                 seed=self.seed, labels=y, recorded=rec, floor=self.floor, burn_in=self.burn_in,
                                 bins=self.bins)
        self._queue = self.plan.queue()

    def _choose(self) -> None:
        st = self._state
        if self._pinned is not None and self._keys[self._pinned] not in st.mine:
            self._current = self._pinned
            return
        self._pinned = None
        overlap = self.plan.overlap
        for i in self._queue:
            key = self._keys[i]
            if key in st.mine:
                continue
            if key in st.labelled_by_others and not (len(overlap) and overlap[i]):
                continue
            self._current = int(i)
            return
        self._current = None

    def _observation(self, index: int, grader: str, score: float, tags: dict[str, Any]) -> QualityObservation:
        row = self._items.iloc[index]
        return QualityObservation(
            task_type=self.task_type, adapter_id=str(row["adapter_id"]), model_id=str(row["model_id"]),
            cost_usd=0.0, quality_score=float(score), latency_ms=0.0, tokens_in=0, tokens_out=0,
            tags={"grader_id": grader, "item_id": row["item_id"], "annotator": self.annotator, **tags},
        )

    def _record(self, grader: str, score: float, note: str) -> str:
        if self._current is None:
            raise ValidationError("every item is done: there is nothing to label (undo() brings the last one back)")
        if not isinstance(note, str):
            raise ValidationError(f"note must be text, got {type(note).__name__}")
        i = self._current
        label_id = uuid.uuid4().hex
        tags: dict[str, Any] = {
            "label_id": label_id, "strategy": self.strategy, "seed": self.seed, "plan": self.plan_id,
            "sampling_probability": float(self.plan.prob[i]),
            "stratum": self.plan.stratum_names[int(self.plan.stratum[i])],
            "rank": int(self.plan.rank[i]), "stratum_size": int(self.plan.size[i]),
        }
        if note.strip():
            tags["note"] = note
        self.ledger.append(self._observation(i, grader, score, tags))
        self._pinned = None
        self._refresh()
        return label_id

    # -- the programmatic API ------------------------------------------------------------------

    @property
    def current(self) -> dict[str, Any] | None:
        """The item shown now, as a dict (``item_id``, ``adapter_id``, ``model_id``, ``prompt``,
        ``references``, ``candidate``, ``judge_score``, ``judge_reply``, ``sampling_probability``),
        or None when every item is done."""
        if self._current is None:
            return None
        row = self._items.iloc[self._current]
        score = float(row["judge_score"])
        return {
            "item_id": row["item_id"], "adapter_id": row["adapter_id"], "model_id": row["model_id"],
            "prompt": row["prompt"], "references": list(row["references"]), "candidate": row["candidate"],
            "judge_score": None if math.isnan(score) else score, "judge_reply": row["judge_reply"],
            "sampling_probability": float(self.plan.prob[self._current]),
        }

    def label(self, score: float, note: str = "") -> str:
        """Label the current item: 1.0 correct, 0.0 incorrect, anything between partial. Appends the
        label to the ledger at once, moves on, and returns the label's id."""
        if isinstance(score, bool):
            score = float(score)
        if not isinstance(score, (int, float, np.number)) or not math.isfinite(float(score)) or not (
                0.0 <= float(score) <= 1.0):
            raise ValidationError(f"a label is a score in 0..1 (1 correct, 0 incorrect, between: partial), "
                                  f"got {score!r}")
        return self._record(HUMAN_GRADER_ID, float(score), note)

    def skip(self, note: str = "") -> str:
        """Skip the current item (recorded, so it is not shown to this annotator again; undo brings it back)."""
        return self._record(SKIP_GRADER_ID, 0.0, note)

    def undo(self) -> dict[str, Any] | None:
        """Take back this annotator's last label or skip (an ``undoes`` marker is appended; nothing is
        deleted) and show that item again. Returns it, or None when there is nothing to undo."""
        self._refresh()
        last = self._state.last_action
        if last is None:
            return None
        label_id, key = last
        index = self._index[key]
        self.ledger.append(self._observation(index, UNDO_GRADER_ID, 0.0, {"undoes": label_id, "plan": self.plan_id}))
        self._pinned = index
        self._refresh()
        return self.current

    @property
    def n_labelled(self) -> int:
        """How many of these items this annotator has labelled (skips and undone labels not counted)."""
        return self._state.n_mine

    @property
    def n_total(self) -> int:
        """How many items this labeller shows in all (for ``"active"``: the ones its draws select; with the
        learned rule a projection from the labels so far, which moves as labels come in)."""
        return len(self._queue)

    def progress(self) -> dict[str, Any]:
        """Where labelling stands: ``text`` (e.g. "41 labelled; interval width now 0.09; about 60 more
        for 0.05"), ``n_labelled`` (this annotator), ``n_plan_labels`` (everyone under this plan),
        ``n_total``, ``n_left`` (items of the plan still to show), ``width`` (the current interval's
        width, NaN before 2 labels), ``target_width``, ``more`` (labels still needed for it; None when
        unknown) and ``reachable`` (False when ``more`` exceeds the items left, None when unknown).

        The text gives a width only once it means something: with fewer than
        10 labels under the plan, or a width of 1 or more, the normal
        interval is not yet a statement about the mean, so it says "interval width needs about 10
        labels". When the labels needed exceed the items left, it says the target is out of reach and
        about how wide labelling all of them would leave the interval (the width scaled as
        ``1/sqrt(labels)``; for ``"random"`` with a judge, PPI++'s ``(1 − ρ²)/n + ρ²/M``)."""
        n = self.n_labelled
        width, more = math.nan, None
        n_plan = int(self._state.labels["key"].nunique()) if len(self._state.labels) else 0
        if n_plan >= 2:
            est = self.estimate()
            row = est.iloc[0]
            width = float(row["ci_high"] - row["ci_low"])
            if math.isfinite(width) and width > 0:
                more = self._more_for(width, n_plan)
        left = self._n_left()
        reachable = None if more is None else more <= left
        text = f"{n} labelled"
        target = f"{self.target_width:.2f}"
        if n_plan < _MIN_LABELS_FOR_WIDTH or not math.isfinite(width) or width >= 1:
            text += f"; interval width needs about {_MIN_LABELS_FOR_WIDTH} labels"
        else:
            text += f"; interval width now {width:.2f}"
            if more is not None and more > left:
                reach = self._width_with(width, n_plan, left)
                text += (f"; {target} is out of reach: all {left} items left would give about {reach:.2f}" if left
                         else f"; {target} is out of reach: no items left")
            elif more is not None:
                text += f"; about {more} more for {target}" if more > 0 else f"; narrower than {target}"
        if self._current is None:
            text += "; all items done"
        return {"text": text, "n_labelled": n, "n_plan_labels": n_plan, "n_total": self.n_total, "n_left": left,
                "width": width, "target_width": self.target_width, "more": more, "reachable": reachable}

    def _n_left(self) -> int:
        """Items of the plan still to show to anyone: queued, not yet labelled or skipped under the plan
        (nor labelled elsewhere, outside the overlap share)."""
        st = self._state
        overlap = self.plan.overlap
        return sum(1 for i in self._queue if self._keys[i] not in st.plan_done and self._keys[i] not in st.mine
                   and (self._keys[i] not in st.labelled_by_others or (len(overlap) and overlap[i])))

    def _width_with(self, width: float, n_plan: int, left: int) -> float:
        """About the width with ``left`` more labels: ``1/sqrt(labels)``, or PPI++'s
        ``var(Y)·((1 − ρ²)/n + ρ²/M)`` (:func:`~llm_connect.calibration.labels_needed`) for ``"random"``
        and ``"overlap"`` with a judge, with ``ρ`` the judge–label correlation on the labels."""
        total = n_plan + left
        if self.judge is not None and self.strategy in ("random", "overlap"):
            frame = self.frame()
            lab = frame[frame["human"].notna() & frame["judge"].notna()]
            m = int(frame["judge"].notna().sum())
            rho2 = 0.0
            if len(lab) >= 3 and lab["judge"].std() > 0 and lab["human"].std() > 0:
                rho2 = float(np.corrcoef(lab["judge"], lab["human"])[0, 1] ** 2)
            if m > 0:
                now, then = (1 - rho2) / n_plan + rho2 / m, (1 - rho2) / total + rho2 / m
                return width * math.sqrt(then / now)
        return width * math.sqrt(n_plan / total)

    def _more_for(self, width: float, n_plan: int) -> int | None:
        if self.judge is not None and self.strategy in ("random", "overlap") and n_plan >= 2:
            from ..stats.estimates import labels_needed

            frame = self.frame()
            plan = labels_needed(frame, judge="judge", human="human", width=self.target_width,
                                 confidence=self.confidence, pool="data")
            value = plan.loc[plan["method"] == "ppi++", "more_labels"]
            if len(value) and value.notna().all():
                return int(value.iloc[0])
            return None
        # weighted designs (and no judge): the width shrinks as 1/sqrt(labels)
        return max(math.ceil(n_plan * (width / self.target_width) ** 2) - n_plan, 0)

    # -- results -------------------------------------------------------------------------------

    def frame(self) -> pd.DataFrame:
        """One row per item: ``item_id``, ``adapter_id``, ``model_id``, ``group``, ``stratum``,
        ``judge`` (its score; 0 for every item when there is no judge), ``human`` (the mean label
        under this plan, NaN when unlabelled), ``prediction`` (what the estimates use as the judge: the
        score itself, or for the learned ``"active"`` rule the judge calibrated on the labels with each
        item's own label left out, :func:`calibrated_scores`), ``n_labels``, ``sampling_probability``
        (``π_i``: for a shown item the one it was shown with) and
        ``inclusion_probability`` (``π_i · K_s / N_s``, the ``weights=`` column of
        :func:`~llm_connect.calibration.estimate_quality`; ``df.attrs["weights"]`` names it)."""
        self._refresh()
        items = self._items
        labels = self._state.labels
        human = np.full(len(items), np.nan)
        n_labels = np.zeros(len(items), dtype=np.int64)
        if len(labels):
            per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().groupby(level=0).agg(
                ["mean", "size"])
            for key, mean, size in zip(per.index, per["mean"], per["size"], strict=True):
                human[self._index[key]] = mean
                n_labels[self._index[key]] = size
        done = np.array([k in self._state.plan_done for k in self._keys], dtype=bool)
        judge = items["judge_score"].to_numpy(dtype=float) if self.judge is not None else np.zeros(len(items))
        prediction = calibrated_scores(judge, human, bins=self.bins)[0] if self._learned else judge
        out = pd.DataFrame({
            "item_id": items["item_id"].map(str), "adapter_id": items["adapter_id"],
            "model_id": items["model_id"], "group": items["group"],
            "stratum": [self.plan.stratum_names[s] for s in self.plan.stratum],
            "judge": judge, "prediction": prediction, "human": human, "n_labels": n_labels,
            "sampling_probability": self.plan.prob, "inclusion_probability": self.plan.inclusion(done),
        })
        out.attrs["weights"] = "inclusion_probability"
        return out

    def _weighted(self) -> bool:
        return self.strategy != "random"

    def estimate(self, by: str | Sequence[str] | None = None, **kwargs: Any) -> pd.DataFrame:
        """:func:`~llm_connect.calibration.estimate_quality` on :meth:`frame` with the right weights:
        none for ``"random"``; ``inclusion_probability`` otherwise. ``by`` names columns of the frame
        (e.g. ``"model_id"``). Without a judge only the human-only interval is given. Other keyword
        arguments (``methods``, ``confidence``) go through."""
        from ..stats.estimates import estimate_quality

        frame = self.frame()
        kwargs.setdefault("confidence", self.confidence)
        if self.judge is None:
            kwargs["methods"] = ("human",)
        else:
            kwargs.setdefault("methods", ("ppi++", "human", "judge"))
        weights = "inclusion_probability" if self._weighted() else None
        if self.strategy == "stratified" and by is not None and (by == "group" or by == ["group"]):
            weights = None  # within a group the labels are a simple random sample
        methods = kwargs.pop("methods")
        methods = (methods,) if isinstance(methods, str) else tuple(methods)
        if not self._learned or methods == ("judge",):
            return estimate_quality(frame, judge="judge", human="human", by=by, weights=weights, methods=methods,
                                    **kwargs)
        # the learned rule: label-based methods on the calibrated judge, the judge's own mean on its scores
        label_based = [m for m in methods if m != "judge"]
        parts = [estimate_quality(frame, judge="prediction", human="human", by=by, weights=weights,
                                  methods=label_based, **kwargs)]
        if "judge" in methods:
            parts.append(estimate_quality(frame, judge="judge", human="human", by=by, weights=weights,
                                          methods=("judge",), **kwargs))
        out = pd.concat(parts, ignore_index=True)
        rank = {m: i for i, m in enumerate(methods)}
        by_cols = [] if by is None else ([by] if isinstance(by, str) else list(by))
        key = out["method"].map(rank)
        out = out.assign(_m=key).sort_values([*by_cols, "_m"], kind="stable").drop(columns="_m")
        return out.reset_index(drop=True)

    def agreement(self, threshold: float = 0.5) -> dict[str, Any]:
        """Inter-annotator agreement over items labelled by two or more annotators under this plan:
        ``n_items``, ``n_annotators``, ``percent_agreement`` (share of agreeing annotator pairs, verdicts
        at ``threshold``) and ``alpha`` (Krippendorff's alpha, nominal; Krippendorff 2011,
        *Computing Krippendorff's Alpha-Reliability*). NaN when no item has two annotators."""
        self._refresh()
        labels = self._state.labels
        per = labels.groupby(["key", "annotator"], sort=False)["score"].mean().reset_index()
        multi = per[per.groupby("key")["annotator"].transform("size") > 1]
        result: dict[str, Any] = {"n_items": int(multi["key"].nunique()) if len(multi) else 0,
                                  "n_annotators": int(per["annotator"].nunique()) if len(per) else 0,
                                  "percent_agreement": math.nan, "alpha": math.nan}
        if not len(multi):
            return result
        yes = (multi["score"] >= threshold).astype(float)
        counts = pd.DataFrame({"key": multi["key"], "yes": yes}).groupby("key")["yes"].agg(["sum", "size"])
        n, k = counts["size"].to_numpy(float), counts["sum"].to_numpy(float)
        pairs = n * (n - 1) / 2
        agree = (k * (k - 1) + (n - k) * (n - k - 1)) / 2
        result["percent_agreement"] = float(agree.sum() / pairs.sum())
        matrix = pd.DataFrame({"key": multi["key"], "annotator": multi["annotator"], "yes": yes}).pivot_table(
            index="annotator", columns="key", values="yes", aggfunc="first")
        values = matrix.to_numpy(dtype=float)
        if np.unique(values[np.isfinite(values)]).size >= 2:
            import krippendorff

            result["alpha"] = float(krippendorff.alpha(reliability_data=values, level_of_measurement="nominal"))
        elif np.isfinite(values).any():
            result["alpha"] = 1.0 if result["percent_agreement"] == 1.0 else math.nan
        return result

    # -- display -------------------------------------------------------------------------------

    def item_html(self) -> str:
        """The current item as HTML (every text escaped); the done message when all are done."""
        item = self.current
        if item is None:
            return ('<div class="llmc-done"><b>All done.</b> Every item of this labeller is labelled or skipped '
                    f"({self.n_labelled} labelled by {html.escape(self.annotator)}).</div>")
        e = html.escape
        refs = "".join(f"<li>{e(r)}</li>" for r in item["references"]) or "<li><i>(none)</i></li>"
        parts = [
            f'<div class="llmc-item-head">item <span class="llmc-item-id">{e(str(item["item_id"]))}</span>'
            f' · model <span class="llmc-model">{e(item["model_id"])}</span></div>',
            f'<div><b>Prompt</b><pre class="llmc-prompt" style="white-space:pre-wrap">{e(item["prompt"])}</pre></div>',
            f'<div><b>Reference(s)</b><ul class="llmc-references">{refs}</ul></div>',
            f'<div><b>Candidate</b><pre class="llmc-candidate" style="white-space:pre-wrap">'
            f'{e(item["candidate"])}</pre></div>',
        ]
        if self.show_judge:
            score = item["judge_score"]
            shown = "not scored" if score is None else f"{score:.3g}"
            reply = item["judge_reply"]
            parts.append(
                f'<div class="llmc-judge"><b>Judge {e(self.judge or "(none)")}</b>: {e(shown)}'
                + (f'<pre style="white-space:pre-wrap">{e(reply)}</pre>' if reply else "") + "</div>"
            )
        return "".join(parts)

    def _repr_html_(self) -> str:
        from .._html import kv_table, with_interval

        prog = self.progress()
        estimate = "—"
        if prog["n_plan_labels"] >= 2:
            row = self.estimate().iloc[0]
            estimate = f"{row['method']}: " + with_interval(row["estimate"], row["ci_low"], row["ci_high"])
        return str(kv_table([
            ("annotator", self.annotator), ("task type", self.task_type), ("strategy", self.strategy),
            ("judge", self.judge or "(none: human-only intervals)"),
            ("labelled", f"{prog['n_labelled']} / {prog['n_total']}"),
            ("estimate", estimate), ("progress", prog["text"]),
        ], caption="Labeller", attrs={"class_": "llm-connect"}))

    def __repr__(self) -> str:
        return (f"Labeller(annotator={self.annotator!r}, task_type={self.task_type!r}, strategy={self.strategy!r}, "
                f"labelled={self.n_labelled}/{self.n_total})")

    # -- the widget ----------------------------------------------------------------------------

    def widget(self) -> Any:
        """The labelling widget (ipywidgets): the item, buttons Correct / Incorrect / Partial (with the
        score slider) / Skip / Undo / Show judge, a note, the progress line. Keyboard shortcuts with
        ``ipyevents`` installed (hover over the item): ``c`` correct, ``x`` incorrect, ``p`` partial,
        ``s`` skip, ``u`` undo, ``j`` show/hide the judge. CSS classes for scripts and tests: root
        ``llmc-labeller``; ``llmc-correct``, ``llmc-incorrect``, ``llmc-partial``, ``llmc-skip``,
        ``llmc-undo``, ``llmc-reveal``, ``llmc-partial-score``, ``llmc-note``, ``llmc-item``,
        ``llmc-progress``. The returned box has a ``controls`` attribute naming them."""
        try:
            import ipywidgets as w
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from ..errors import MissingDependencyError

            raise MissingDependencyError("ipywidgets", "notebooks", "Labeller.widget()") from exc
        from types import SimpleNamespace

        item = w.HTML()
        item.add_class("llmc-item")
        progress = w.HTML()
        progress.add_class("llmc-progress")
        message = w.HTML()
        message.add_class("llmc-message")
        note = w.Text(placeholder="note (optional)", description="note")
        note.add_class("llmc-note")
        slider = w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="partial", readout_format=".2f",
                               continuous_update=False)
        slider.add_class("llmc-partial-score")

        def button(text: str, css: str, tip: str, style: str = "") -> Any:
            b = w.Button(description=text, tooltip=tip, button_style=style)
            b.add_class(css)
            return b

        correct = button("Correct (c)", "llmc-correct", "1.0", "success")
        incorrect = button("Incorrect (x)", "llmc-incorrect", "0.0", "danger")
        partial = button("Partial (p)", "llmc-partial", "the slider's score", "warning")
        skip = button("Skip (s)", "llmc-skip", "not sure: skip this item")
        undo = button("Undo (u)", "llmc-undo", "take back the last label")
        reveal = button("Show judge (j)", "llmc-reveal", "show or hide the judge's score and reply")

        def render() -> None:
            item.value = self.item_html()
            progress.value = f"<span>{html.escape(self.progress()['text'])}</span>"
            reveal.description = "Hide judge (j)" if self.show_judge else "Show judge (j)"
            done = self.current is None
            for b in (correct, incorrect, partial, skip):
                b.disabled = done

        def act(do: Any) -> Any:
            def handler(_: Any = None) -> None:
                try:
                    do()
                    message.value = ""
                except Exception as exc:  # shown in the widget: a callback's exception would be lost
                    message.value = f'<span style="color:#b00">{html.escape(str(exc))}</span>'
                render()
            return handler

        def give(score: Any) -> None:
            text = note.value
            self.label(float(score() if callable(score) else score), note=text)
            note.value = ""

        def toggle() -> None:
            self.show_judge = not self.show_judge

        def pass_over() -> None:
            self.skip(note=note.value)
            note.value = ""

        def take_back() -> None:
            if self.undo() is None:
                raise ValidationError("nothing to undo")

        handlers = {
            "c": act(lambda: give(1.0)), "x": act(lambda: give(0.0)), "p": act(lambda: give(lambda: slider.value)),
            "s": act(pass_over),
            "u": act(take_back), "j": act(toggle),
        }
        for b, k in ((correct, "c"), (incorrect, "x"), (partial, "p"), (skip, "s"), (undo, "u"), (reveal, "j")):
            b.on_click(handlers[k])
        root = w.VBox([
            item,
            w.HBox([correct, incorrect, partial, slider]),
            w.HBox([skip, undo, reveal]),
            note, progress, message,
        ])
        root.add_class("llmc-labeller")
        events = None
        try:
            from ipyevents import Event
        except ImportError:
            pass
        else:
            events = Event(source=item, watched_events=["keydown"])

            def on_key(event: Mapping[str, Any]) -> None:
                handler = handlers.get(str(event.get("key", "")).lower())
                if handler is not None:
                    handler()

            events.on_dom_event(on_key)
        render()
        root.controls = SimpleNamespace(item=item, progress=progress, message=message, note=note, slider=slider,
                                        correct=correct, incorrect=incorrect, partial=partial, skip=skip, undo=undo,
                                        reveal=reveal, events=events, render=render)
        return root
