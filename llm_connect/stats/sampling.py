"""Sampling designs for labelling: which items people label, in which order, and how likely each was to be.

The designs behind :class:`~llm_connect.labelling.Labeller`'s ``strategy=``, as statistics on
arrays: item keys, judge scores and labels in; orders, probabilities of being shown, inclusion
probabilities and calibrated scores out. Everything is pure and vectorised over many seeded runs at
once, so the simulation tests (``tests/calibration/test_labeller.py``) and ``benchmarks/labelling.py`` drive these
very functions. The estimates that use the inclusion probabilities (``weights=``) are in
:mod:`llm_connect.stats.estimates`. Bad input raises :class:`~llm_connect.errors.ValidationError`.

Seeded draws
------------
Each item gets three seeded uniforms from a keyed hash of its key (:func:`item_draws`: ``blake2b``
keyed with the seed; the Labeller's key is the item's id and adapter), so the plan depends neither
on the row order nor on other items.

Which items to show (``strategy``, :func:`make_plan`)
-----------------------------------------------------
``"random"``
    a uniform random order. The labelled items are a simple random sample, so the estimates
    need no weights.
``"stratified"``
    round-robin over the groups of ``group=`` (default the candidate model column), uniform
    within each. Within a group the labelled items are a simple random sample (per-group
    estimates need no weights); the pooled estimate weights each item by its group's share
    labelled (``inclusion_probability`` in :meth:`~llm_connect.labelling.Labeller.frame`).
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
    above zero. The plan is replayed from the labels so far (:func:`learned_plan`; a shown item
    keeps the ``π`` recorded with its label), so a restarted kernel resumes it. Since the
    annotator may stop at any time, the inclusion probability used in the estimate is
    ``π_i · K / N``: ``K`` of the ``N`` items were visited (a random prefix of the order, all items
    before the next one to be shown). The estimates
    (:meth:`~llm_connect.labelling.Labeller.estimate`) weight by it and use the judge calibrated
    on the labels with each item's own label left out (:func:`calibrated_scores`, the
    ``prediction`` column of :meth:`~llm_connect.labelling.Labeller.frame`) in place of its raw
    score: the inverse-probability-weighted estimator has no intercept, so a judge whose scores
    are off by a constant (a lexical judge scoring correct paraphrases 0) would otherwise pay for
    it in every weight.
    When it pays: only when the residual uncertainty is informative, i.e. the judge is right
    most of the time where it is sure and unsure elsewhere. In seeded simulations
    (``tests/calibration/test_labeller.py``) a calibrated judge sure on 85% of the items needs about 27%
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
    :meth:`~llm_connect.labelling.Labeller.agreement` gives percent agreement and
    Krippendorff's alpha over the items labelled by several annotators.
``"abstained"``
    the items a selective judge or a cascade abstained on (Jung, Brahman & Choi 2025, *Trust
    or Escalate*, arXiv:2407.18370: what no judge is sure enough of goes to people), and only
    them, most uncertain first: in increasing order of the judge's confidence (an item without
    one first), ties in seeded order (``priority=``, the confidences, to :func:`make_plan`).
    Every abstained item is shown (``π = 1``) and the judged ones never, so the labels describe
    the abstained items; the order is by confidence, not random, so read an estimate of their
    quality once all of them are labelled.

Inclusion probabilities
-----------------------
The same inclusion rule serves every strategy: each stratum (all items; a group; the overlap
share and the rest) is walked in its seeded order, and a labelled item's inclusion probability
is ``π_i · K_s / N_s`` (:meth:`SamplingPlan.inclusion`; :func:`walk_inclusion` for many runs of
one stratum). An item passed over because it was skipped, or shown to an annotator who has not
answered yet, counts as visited and unlabelled (skips are assumed unrelated to the label; skip
sparingly).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError

__all__ = [
    "STRATEGIES",
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

STRATEGIES: tuple[str, ...] = ("random", "stratified", "active", "overlap", "abstained")
_CLAIM_FLOOR = 0.02  # keeps a judge's claim of certainty (a score of 0 or 1) from zeroing an item's sd


# -- the sampling plan (pure, vectorised: the simulation tests drive these very functions) -------


def item_draws(keys: Sequence[str], seed: int) -> np.ndarray:
    """Three uniforms in [0, 1) per key, from ``blake2b`` keyed with ``seed``: shape (len(keys), 3).

    Column 0 orders the items, column 1 decides whether an ``"active"`` item is shown, column 2
    whether an item is in the ``"overlap"`` share. A key's draws depend only on it and the seed.

    Parameters
    ----------
    keys : sequence of str
        The items' keys.
    seed : int
        The seed.

    Returns
    -------
    ndarray
        ``(len(keys), 3)`` uniforms.
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

    Parameters
    ----------
    scores : array-like of float, optional
        Judge scores in 0..1.
    uncertainty : array-like of float, optional
        The uncertainty, as given (instead of the scores').
    floor : float, default 0.1
        The uniform share mixed in.

    Returns
    -------
    ndarray of float
        ``π`` per item.

    Examples
    --------
    >>> active_probabilities([0.5, 1.0, None]).tolist()
    [1.0, 0.1, 1.0]
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

    Parameters
    ----------
    strategy : str
        The strategy (``"random"``, ``"stratified"``, ``"active"``, ``"abstained"``...).
    stratum : ndarray
        Each item's stratum code.
    stratum_names : tuple of str
        The strata's names.
    rank : ndarray
        Each item's place in its stratum's seeded order.
    size : ndarray
        Each item's stratum's item count.
    prob : ndarray
        ``π_i``: shown once reached.
    selected : ndarray
        Whether its seeded draw fell below ``π_i``.
    order : ndarray
        The visiting order (indices).
    overlap : ndarray, optional
        Whether each item is in the share shown to everyone.
    prediction : ndarray, optional
        The calibrated judge at each item's visit (learned ``"active"`` rule only).
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
        """Indices of the items to show, in the order they are shown.

        Returns
        -------
        ndarray of int
            The indices.
        """
        return self.order[self.selected[self.order]]

    def inclusion(self, done: np.ndarray) -> np.ndarray:
        """Each item's inclusion probability ``π_i · K_s / N_s`` given the items ``done`` (bool per item).

        In each stratum ``K_s`` counts the items visited: every rank up to the furthest done
        item and the items passed over after it (not selected) before the next one to show.

        Parameters
        ----------
        done : ndarray of bool
            Whether each item was labelled.

        Returns
        -------
        ndarray of float
            Each item's inclusion probability.
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
    priority: Any = None,
) -> SamplingPlan:
    """The seeded plan for items named by ``keys`` (see the module docstring for each strategy).

    ``probabilities``: ``π_i`` for ``"active"`` (see :func:`active_probabilities`); ``groups``:
    one group label per item for ``"stratified"``; ``overlap``: the share shown to everyone;
    ``priority``: for ``"abstained"``, each item's confidence (shown lowest first; NaN first).

    Parameters
    ----------
    keys : sequence of str
        The items' keys.
    strategy : str, default "random"
        The strategy (see the module docstring).
    seed : int, default 0
        The seed.
    probabilities : array-like, optional
        ``π_i`` for ``"active"``.
    groups : array-like, optional
        One group label per item for ``"stratified"``.
    overlap : float, default 0.2
        The share shown to everyone.
    priority : array-like, optional
        For ``"abstained"``, each item's confidence.

    Returns
    -------
    SamplingPlan
        The plan.

    Examples
    --------
    >>> plan = make_plan(["a", "b", "c", "d"], seed=1)
    >>> sorted(plan.queue().tolist())
    [0, 1, 2, 3]
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
    elif strategy == "abstained":
        if priority is None:
            raise ValidationError("strategy='abstained' needs each item's confidence (priority=; NaN for none)")
        confidence = np.asarray(pd.to_numeric(pd.Series(list(priority), dtype=object), errors="coerce"),
                                dtype=float)
        if confidence.shape != (n,):
            raise ValidationError("strategy='abstained' needs one confidence per item")
        names = ("abstained",)
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
    if strategy == "abstained":  # the most uncertain first (no confidence before the lowest), ties seeded
        order = np.lexsort((r, np.where(np.isfinite(confidence), confidence, -np.inf)))
        rank[order] = np.arange(n)
    elif strategy == "stratified":
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

    Parameters
    ----------
    scores : array-like of float
        Judge scores.
    bins : int, default 5
        The bins.

    Returns
    -------
    ndarray of int
        Each score's bin.
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

    Parameters
    ----------
    prob : ndarray
        Each item's ``π``.
    selected : ndarray
        Shown when reached.
    prediction : ndarray
        The calibrated judge before the item was reached.
    used : ndarray
        The labels the walk used.
    n_used : ndarray
        How many, per run.
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

    Parameters
    ----------
    scores : array-like of float
        The judge's scores.
    draws : array-like of float
        Each item's uniform.
    order : array-like of int
        Runs × items: the visiting order.
    labels : array-like of float
        Each item's label (NaN: none).
    recorded : array-like of float, optional
        A ``π`` already used for an item.
    budget : int or array-like, optional
        Labels per run (default: no limit).
    floor : float, default 0.1
        The uniform share mixed in.
    burn_in : int, default 20
        Labels before the learned rule.
    bins : int, default 5
        Score bins.
    prior : float, default 2.0
        Pseudo-labels shrinking each bin toward the pooled figures.

    Returns
    -------
    ResidualWalk
        The walk.
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

    Parameters
    ----------
    keys : sequence of str
        The items' keys.
    scores : array-like of float
        The judge's scores.
    seed : int, default 0
        The seed.
    labels : array-like of float, optional
        Each item's label so far (NaN: none).
    recorded : array-like of float, optional
        The ``π`` each shown item was shown with.
    floor : float, default 0.1
        The uniform share mixed in.
    burn_in : int, default 20
        Labels before the learned rule.
    bins : int, default 5
        Score bins.

    Returns
    -------
    SamplingPlan
        The plan.
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

    Parameters
    ----------
    scores : array-like of float
        The judge's scores.
    labels : array-like of float
        The labels (NaN where none).
    bins : int, default 5
        Score bins.
    prior : float, default 2.0
        Pseudo-labels of the shrinkage.

    Returns
    -------
    ndarray of float
        The calibrated scores.
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
    ``done`` item and those passed over after it before the next one to show.

    Parameters
    ----------
    order : array-like of int
        Runs × items: the visiting order.
    prob : array-like of float
        ``π`` per item.
    selected : array-like of bool
        Shown when reached.
    done : array-like of bool
        Labelled.

    Returns
    -------
    ndarray of float
        Runs × items inclusion probabilities.
    """
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
