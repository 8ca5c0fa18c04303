"""Leaderboards as calibration reads them: the judge's leaderboard beside people's (:func:`compare_leaderboards` ->
:class:`LeaderboardComparison`, prediction-powered when people labelled a subset), and a pairwise report's leaderboards
(:func:`report_leaderboards`, :func:`leaderboards_frame`).

The statistics live in :mod:`llm_connect.stats`: the Bradley-Terry fit, its bootstrap and rank intervals
(:func:`~llm_connect.stats.bradley_terry.leaderboard`), its style control
(:func:`~llm_connect.stats.bradley_terry.style_effects`), the PPI++ Bradley-Terry
(:func:`~llm_connect.stats.bradley_terry.ppi_bradley_terry`) and AlpacaEval 2's length-controlled win rate
(:func:`~llm_connect.stats.length_control.length_controlled_win_rate`); they are importable from here as before. The
pictures and pages (the report's section, a comparison's HTML) are in :mod:`llm_connect.views.leaderboard`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._display import view
from .._docstrings import share_parameters
from .._html import Markup
from ..errors import ValidationError
from ..stats.bradley_terry import (
    LEADERBOARD_COLUMNS,
    STYLE_COLUMNS,
    TEXT_COLUMNS,
    check_leaderboard_settings,
    leaderboard,
    ppi_board,
    ppi_bradley_terry,
    rating_correlation,
    read_comparisons,
    read_outcomes,
    style_effects,
    winner_agreement,
)
from ..stats.clusters import cluster_codes, cluster_column, cluster_sizes_text
from ..stats.length_control import LENGTH_CONTROLLED_COLUMNS, length_controlled_win_rate

__all__ = ["LEADERBOARD_COLUMNS", "LENGTH_CONTROLLED_COLUMNS", "STYLE_COLUMNS", "LeaderboardComparison",
           "compare_leaderboards", "leaderboard", "leaderboards_frame", "length_controlled_win_rate",
           "ppi_bradley_terry", "report_leaderboards", "report_style_effects", "report_style_leaderboards",
           "style_effects"]


@share_parameters
@dataclass
class LeaderboardComparison:
    """The judge's leaderboard beside people's, from :func:`compare_leaderboards`.

    Parameters
    ----------
    judge : pandas.DataFrame
        The judge's leaderboard (every comparison the judge decided).
    human : pandas.DataFrame or None
        People's (the comparisons they labelled); ``None`` when they labelled none or it cannot be fitted.
    anchored : pandas.DataFrame or None
        When people labelled only a subset, the human-anchored ratings by prediction-powered inference (PPI++
        Bradley-Terry); ``None`` when people labelled every comparison or none.
    correlation : pandas.DataFrame
        Kendall's tau and Spearman's rho (``scipy.stats``) between the judge's ratings and people's (and the anchored
        ones), over the models in both: ``a``, ``b``, ``n_models``, ``kendall_tau``, ``kendall_p``, ``spearman_rho``,
        ``spearman_p``.
    pairs : pandas.DataFrame
        Per pair of models, how often the judge agreed with people (three-way, a/b/tie) and each side's win rate of the
        first-named model.
    {confidence}
    lam : float, default NaN
        The PPI++ weight given to the judge (0: the judge is ignored, 1: trusted as much as people).
    notes : list of str, optional
        What to know when reading the boards (too few clusters, models never compared by people...).
    {cluster}
    {n_clusters}
    """

    judge: pd.DataFrame
    human: pd.DataFrame | None
    anchored: pd.DataFrame | None
    correlation: pd.DataFrame
    pairs: pd.DataFrame
    confidence: float = 0.95
    lam: float = math.nan
    notes: list[str] = field(default_factory=list)
    cluster: str | None = None
    n_clusters: int | None = None

    def _repr_html_(self) -> str:
        return str(self.html())

    def html(self) -> Markup:
        """The boards, their rank correlation, the pairs and the notes as HTML.

        Returns
        -------
        Markup
            An HTML fragment, drawn by :func:`llm_connect.views.leaderboard_comparison_html`.
        """
        return Markup(view("leaderboard_comparison_html")(self))


def compare_leaderboards(data: Any, *, model_a: str = "model_a", model_b: str = "model_b", judge_winner: str,
                         human_winner: str, confidence: float = 0.95, n_boot: int = 1000, seed: int | None = 0,
                         codes: str | Mapping[str, Any] | None = None,
                         cluster: str | None = "auto") -> LeaderboardComparison:
    """The judge's leaderboard beside people's on the same comparisons (see :class:`LeaderboardComparison`).

    Both leaderboards are :func:`leaderboard` fits. When people labelled only some of the comparisons the judge decided,
    the human-anchored ratings use prediction-powered inference for Bradley-Terry (Boyeau et al. 2024, "AutoEval Done
    Right", arXiv:2403.07008): the judge's winners on every comparison, corrected by the judge's errors on the labelled
    ones, weighted by the PPI++ ``lambda`` (Angelopoulos, Duchi & Zrnic 2023), with sandwich (Wald) intervals. Their
    rank correlation is Kendall's tau and Spearman's rho (``scipy.stats``).

    Parameters
    ----------
    data : DataFrame or iterable of mapping
        One row per comparison with the two model columns and the two winner columns.
    model_a, model_b : str
        The model columns.
    judge_winner, human_winner : str
        The judge's winner and people's (blank where people did not label the comparison), each ``"a"``, ``"b"`` or
        ``"tie"``, or the probability that answer A is preferred (e.g. the judge's, from its logprobs; fitted by
        expected counts, see :func:`leaderboard`; in ``pairs`` a probability agrees with a label by the chance that a
        draw from it gives that label, a tie counting as an even chance).
    confidence, n_boot, seed : float, int, int
        The intervals' level, bootstrap resamples and seed.
    codes : str or mapping, optional
        What the winner values mean (:func:`preference_codes`).
    cluster : str or None, default "auto"
        Comparisons made on the turns of one conversation are not independent. ``"auto"`` clusters them by the
        ``conversation_id`` column when ``data`` has one, a column name by that column, ``None`` not at all; the
        bootstraps then resample whole conversations (see :func:`leaderboard`) and the anchored intervals are
        cluster-robust (CR1 sandwich, ``t(G - 1)``); with too few conversations there are no intervals and ``notes`` say
        why. ``cluster`` and ``n_clusters`` of the result say which was used.

    Returns
    -------
    LeaderboardComparison
        Both leaderboards, their rank correlation and the comparisons.
    """
    conf, n_boot = check_leaderboard_settings(confidence, n_boot)
    frame, a, b, judge, _ = read_comparisons(data, model_a, model_b, judge_winner, codes, [human_winner])
    human = read_outcomes(frame[human_winner], human_winner, codes)
    notes: list[str] = []
    column = cluster_column(frame, cluster, what="the comparisons")
    ids = None if column is None else cluster_codes(frame[column].reset_index(drop=True))
    name = "cluster" if column in (None, "a", "b", "w") else str(column)  # the cluster column, named in notes
    by = None if ids is None else name
    grouped: dict[str, Any] = {} if ids is None else {name: ids}
    judge_board = leaderboard(pd.DataFrame({"a": a, "b": b, "w": judge, **grouped}), model_a="a", model_b="b",
                              winner="w", confidence=conf, n_boot=n_boot, seed=seed, progress=False, cluster=by)
    has_h = np.array([h is not None for h in human], dtype=bool)
    human_board = None
    if has_h.any():
        try:
            human_board = leaderboard(pd.DataFrame({"a": a[has_h], "b": b[has_h], "w": human[has_h],
                                                    **({} if ids is None else {name: ids[has_h]})}),
                                      model_a="a", model_b="b", winner="w", confidence=conf, n_boot=n_boot,
                                      seed=seed, progress=False, cluster=by)
        except ValidationError as exc:
            notes.append(f"people's leaderboard on the labelled comparisons alone cannot be fitted: {exc}")
    else:
        notes.append("people labelled none of the comparisons: there is no human leaderboard to compare with")
    has_j = np.array([j is not None for j in judge], dtype=bool)
    anchored = None
    lam = math.nan
    if (has_h & has_j).any() and (has_j & ~has_h).any():
        anchored, lam = ppi_board(a, b, human, judge, confidence=conf, clusters=ids, cluster=column)
    if (has_h & ~has_j).any():
        notes.append(f"{int((has_h & ~has_j).sum())} comparison(s) labelled by people but not decided by the judge "
                     "are in people's leaderboard, not in the anchored one")
    for name, board in (("judge's", judge_board), ("people's", human_board), ("anchored", anchored)):
        shown = [str(mm) for mm in (board.attrs.get("separated", []) if board is not None else [])]
        if shown:
            notes.append(f"on the {name} board {', '.join(shown)} won or lost every comparison: the rating is "
                         "not identified (only the ridge keeps it finite); read it as 'above (below) the rest'")
    if anchored is not None and anchored.attrs.get("judge_only"):
        notes.append(f"no person compared {', '.join(map(str, anchored.attrs['judge_only']))}: on the anchored "
                     "board they are rated by the judge alone (judge_only), without an interval")
    n_clusters = None
    if ids is not None:
        n_clusters = len(np.unique(ids))
        notes.append(f"comparisons {cluster_sizes_text(column, n_clusters)}: the bootstraps resample whole "
                     "clusters and the anchored intervals are cluster-robust")
        for name, board in (("judge's", judge_board), ("people's", human_board)):
            notes += [f"on the {name} board: {note}" for note in (board.attrs.get("cluster_notes", [])
                                                                   if board is not None else [])]
        if anchored is not None and anchored.attrs.get("cluster_note"):
            notes.append(f"on the anchored board: {anchored.attrs['cluster_note']}")
    rows = []
    if human_board is not None:
        rows.append(rating_correlation(judge_board, human_board, "judge", "human"))
    if anchored is not None:
        rows.append(rating_correlation(judge_board, anchored, "judge", "human (anchored)"))
    correlation = pd.DataFrame(rows, columns=["a", "b", "n_models", "kendall_tau", "kendall_p", "spearman_rho",
                                              "spearman_p"])
    return LeaderboardComparison(judge=judge_board, human=human_board, anchored=anchored, correlation=correlation,
                                 pairs=winner_agreement(a, b, judge, human), confidence=conf, lam=lam, notes=notes,
                                 cluster=column, n_clusters=n_clusters)


# -- the calibrate report's leaderboard section ----------------------------------------------------


def report_leaderboards(report: Any) -> dict[str, Any]:
    """For a pairwise report whose pairs name their models (``model_a``, ``model_b``): a :func:`leaderboard` per rater
    (``"human"`` first when people labelled pairs, then each judge), with the report's ``n_boot``, ``confidence`` and
    ``seed``; a rater whose comparisons cannot be rated (too few, or models never compared with each other) maps to the
    reason, as text. Empty when the pairs do not name their models."""
    scores = report.scores
    if not {"model_a", "model_b"} <= set(map(str, scores.columns)):
        return {}
    return _per_rater(report, lambda column: leaderboard(
        scores, model_a="model_a", model_b="model_b", winner=column, confidence=report.confidence,
        n_boot=report.n_boot, seed=report.seed, progress=False), (ValidationError,))


def _per_rater(report: Any, fit: Any, errors: tuple[type[BaseException], ...]) -> dict[str, Any]:
    """``fit(winner column)`` per rater of a pairwise report (``"human"`` first when people labelled pairs, then each
    judge with a winner column); a rater whose fit raises one of ``errors`` maps to its reason."""
    out: dict[str, Any] = {}
    for name in [*(["human"] if "human" in report.labels else []), *report.judges]:
        column = f"winner_{name}"
        if column not in report.scores.columns:
            continue
        try:
            out[name] = fit(column)
        except errors as exc:
            out[name] = str(exc)
    return out


def leaderboards_frame(boards: Mapping[str, Any]) -> pd.DataFrame:
    """What ``leaderboard.csv`` holds: the fitted boards stacked, a ``rater`` column first."""
    parts = [b.assign(rater=name)[["rater", *b.columns]] for name, b in boards.items() if isinstance(b, pd.DataFrame)]
    if not parts:
        return pd.DataFrame(columns=["rater", *LEADERBOARD_COLUMNS])
    return pd.concat(parts, ignore_index=True)


def _report_texts(scores: pd.DataFrame) -> tuple[str, str] | None:
    for first, second in TEXT_COLUMNS:
        if first in scores.columns and second in scores.columns:
            return first, second
    return None


def _quietly(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(...)`` with its warnings (features dropped, a separated fit) kept out of the way: a report says them in
    its notes (the boards' ``style_notes``) instead."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return func(*args, **kwargs)


def report_style_leaderboards(report: Any) -> dict[str, Any]:
    """For a pairwise report whose pairs name their models and hold both answers' texts: the style-controlled
    :func:`leaderboard` per rater (Chatbot Arena's four style features computed from ``candidate_a``/``candidate_b``),
    keyed as :func:`report_leaderboards`; a rater whose comparisons cannot be rated maps to the reason. Empty without
    model names or texts."""
    scores = report.scores
    texts = _report_texts(scores)
    if texts is None or not {"model_a", "model_b"} <= set(map(str, scores.columns)):
        return {}
    return _per_rater(report, lambda column: _quietly(
        leaderboard, scores, model_a="model_a", model_b="model_b", winner=column, confidence=report.confidence,
        n_boot=report.n_boot, seed=report.seed, progress=False, style=True, text_a=texts[0], text_b=texts[1]),
        (ValidationError, np.linalg.LinAlgError))


def report_style_effects(report: Any, boards: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What each rater of a pairwise report pays for style: the style coefficients (:func:`style_effects`: ``feature``,
    ``coefficient`` in Elo per unit, ``low``, ``high``) of its winners, people's first. With model names they come from
    the style-controlled boards (``boards``, from :func:`report_style_leaderboards`, or fitted here); without, from the
    style features alone. A rater whose preferences cannot be fitted maps to the reason. Empty without the answers'
    texts."""
    scores = report.scores
    texts = _report_texts(scores)
    if texts is None:
        return {}
    named = {"model_a", "model_b"} <= set(map(str, scores.columns))
    if named:
        boards = report_style_leaderboards(report) if boards is None else boards
        return {k: (b.attrs["style"] if isinstance(b, pd.DataFrame) else b) for k, b in boards.items()}
    out: dict[str, Any] = {}
    for name in [*(["human"] if "human" in report.labels else []), *report.judges]:
        column = f"winner_{name}"
        if column not in scores.columns:
            continue
        try:
            out[name] = _quietly(style_effects, scores, model_a=None, model_b=None, winner=column,
                                 text_a=texts[0], text_b=texts[1], confidence=report.confidence,
                                 n_boot=report.n_boot, seed=report.seed, progress=False)
        except (ValidationError, np.linalg.LinAlgError) as exc:
            out[name] = str(exc)
    return out
