"""Leaderboards from pairwise comparisons: Bradley-Terry ratings with bootstrap intervals, style-controlled
ratings (Chatbot Arena's style control), continuous preferences, and the judge's leaderboard beside
people's (prediction-powered when people labelled a subset).

Bradley-Terry (Bradley & Terry 1952, "Rank analysis of incomplete block designs: I. The method of
paired comparisons") gives model ``i`` a strength ``theta_i`` with
``P(i beats j) = 1 / (1 + exp(-(theta_i - theta_j)))``. :func:`leaderboard` fits it by maximum
likelihood as Chatbot Arena does (Chiang et al. 2024, "Chatbot Arena: An Open Platform for
Evaluating LLMs by Human Preference", arXiv:2403.04132; FastChat's ``elo_analysis.py``,
``compute_elo_mle_with_tie``): a logistic regression on ``x = e_a - e_b`` without intercept, a tie
counted as half a win to each side (FastChat duplicates every battle and splits ties; the
likelihood is the same up to a factor 2). The comparisons are first aggregated into counts per
pair of models, so a million comparisons of ``M`` models cost at most ``M(M-1)/2`` terms, and the
likelihood is maximised by Newton's method (the log-likelihood is concave, Hunter 2004, "MM
algorithms for generalized Bradley-Terry models", Ann. Statist. 32(1); a ridge of ``1e-6`` keeps a
model that won or lost every comparison finite, as ``choix.opt_pairwise`` does).

Ratings are on the Elo scale, ``400 * log10`` odds, anchored so their mean is 1000. Intervals come
from a percentile bootstrap over comparisons, as FastChat's ``get_bootstrap_result`` (resample the
battles with replacement, refit, take quantiles): here a resample is drawn as multinomial counts
over the (pair, outcome) cells -- the same distribution -- and all resamples are fitted at once,
warm-started from the point estimate. Ranks follow Chatbot Arena: a model's best plausible rank
(``rank_low``) is one plus the number of models whose lower bound is above its upper bound (the
"rank (UB)" of the Arena leaderboard); its worst plausible rank (``rank_high``) is the number of
models whose upper bound is not below its lower bound.

Continuous preferences: a winner may be the probability that answer A is preferred (a judge's
logprob-weighted verdict; AlpacaEval's annotations carry it as ``preference - 1``, Dubois et al.
2024, arXiv:2404.04475). It is fitted by expected counts -- a comparison with probability ``p``
adds ``p`` to A's wins and ``1 - p`` to B's, the likelihood ``p log s + (1 - p) log(1 - s)`` -- and
the bootstrap draws over the distinct (pair, share won) outcomes.

Style control (:func:`leaderboard` with ``style=``, :func:`style_effects`) is Chatbot Arena's (LMSYS,
August 2024, "Does style matter? Disentangling style and substance in Chatbot Arena"): the Bradley-Terry
logistic regression with style covariates appended, the ratings read as the model coefficients with the
style held at 0; the features and the fit are in :mod:`llm_connect.stats.style`.

The judge's leaderboard anchored to people's labels (:func:`ppi_bradley_terry`) is prediction-powered
inference for Bradley-Terry (Boyeau et al. 2024, "AutoEval Done Right", arXiv:2403.07008), with the
PPI++ weight of Angelopoulos, Duchi & Zrnic (2023), "PPI++: Efficient Prediction-Powered Inference",
arXiv:2311.01453.

This module holds the entry points; the pieces live beside it: reading and counting comparisons
(``stats/_comparisons.py``), the fit and its bootstrap (``stats/_bt_fit.py``), style control
(:mod:`llm_connect.stats.style`), prediction-powered Bradley–Terry (``stats/_ppi_bt.py``) and two boards
compared (``stats/_compare_boards.py``). The names :mod:`llm_connect.calibration` builds on are public here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ._bt_fit import MEAN, SCALE, _board
from ._compare_boards import SIDE_BY_SIDE_COLUMNS, rating_correlation, side_by_side, winner_agreement
from ._comparisons import (
    PROBABILITY_CODES,
    _aggregate,
    _check_graph,
    _frame,
    _worth,
    is_probability_codes,
    is_probability_column,
    read_comparisons,
    read_outcomes,
    real_number,
)
from ._ppi_bt import ppi_board, ppi_bradley_terry
from ._validate import by_columns, check_confidence, need_columns
from .clusters import MIN_CLUSTERS, cluster_codes, cluster_column, few_clusters_reason
from .style import (
    STYLE_COLUMNS,
    STYLE_SEPARATION_PENALTY,
    TEXT_COLUMNS,
    StyleEffects,
    _fit_style_rows,
    _style_board,
    _style_design,
    _style_frame,
    _style_settings,
)

__all__ = [
    "LEADERBOARD_COLUMNS",
    "MEAN",
    "METHODS",
    "N_BOOT_MAX",
    "PROBABILITY_CODES",
    "SCALE",
    "SIDE_BY_SIDE_COLUMNS",
    "STYLE_COLUMNS",
    "STYLE_SEPARATION_PENALTY",
    "TEXT_COLUMNS",
    "StyleEffects",
    "check_leaderboard_settings",
    "is_probability_codes",
    "is_probability_column",
    "leaderboard",
    "need_columns",
    "ppi_board",
    "ppi_bradley_terry",
    "rating_correlation",
    "read_comparisons",
    "read_outcomes",
    "real_number",
    "side_by_side",
    "style_effects",
    "winner_agreement",
]

#: The columns of :func:`leaderboard`'s frame (after the ``by`` columns).
LEADERBOARD_COLUMNS: tuple[str, ...] = (
    "model", "rating", "rating_low", "rating_high", "rank", "rank_low", "rank_high", "n", "win_rate",
)
#: The fitting methods :func:`leaderboard` knows.
METHODS: tuple[str, ...] = ("bradley-terry",)
#: The most bootstrap resamples a leaderboard draws.
N_BOOT_MAX = 100_000


def check_leaderboard_settings(confidence: Any, n_boot: Any, method: str = "bradley-terry") -> tuple[float, int]:
    """Check the settings every leaderboard takes, the one check :func:`leaderboard`, :func:`style_effects` and
    :func:`~llm_connect.calibration.compare_leaderboards` share.

    Parameters
    ----------
    confidence : float
        The interval level, strictly between 0 and 1.
    n_boot : int
        Bootstrap resamples, a whole number from 0 (no intervals) to :data:`N_BOOT_MAX`.
    method : str, default "bradley-terry"
        The fitting method, one of :data:`METHODS`.

    Returns
    -------
    tuple of (float, int)
        The confidence level and the number of resamples, as a float and an int.

    Raises
    ------
    ValidationError
        When any of the three is out of range, saying what is allowed.
    """
    conf = check_confidence(confidence)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 0 <= n_boot <= N_BOOT_MAX:
        raise ValidationError(f"n_boot must be a whole number from 0 to {N_BOOT_MAX}, got {n_boot!r}")
    if method not in METHODS:
        raise ValidationError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return conf, int(n_boot)


def _one_board(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, *, where: str, confidence: float, n_boot: int,
               seed: int | None, progress: bool | None, style_x: np.ndarray | None = None,
               style_names: Sequence[str] = (), clusters: np.ndarray | None = None,
               cluster: str | None = None) -> pd.DataFrame:
    keep = pd.notna(outcome).astype(bool) & np.asarray(a != b, dtype=bool)
    all_models = pd.unique(np.concatenate([a, b])).tolist()
    if not keep.any():
        raise ValidationError(f"{where}no comparison with a winner between two different models")
    pairs = _aggregate(a[keep], b[keep], outcome[keep], all_models)
    _check_graph(pairs, pd.unique(np.concatenate([a[keep], b[keep]])).tolist(), where)
    kept = None if clusters is None else clusters[keep]
    n_clusters = None if kept is None else len(np.unique(kept))
    note = None
    if n_clusters is not None and n_clusters < MIN_CLUSTERS and n_boot > 0:
        # too few clusters for a bootstrap over them to mean what it says: no interval, and the reason
        note = where + few_clusters_reason(n_clusters, column=cluster, what="compared")
        n_boot = 0
    if style_x is None:
        out = _board(pairs, confidence=confidence, n_boot=n_boot, seed=seed, progress=progress, clusters=kept)
    else:
        out = _style_board(pairs, a[keep], b[keep], outcome[keep], style_x[keep], style_names, where=where,
                           confidence=confidence, n_boot=n_boot, seed=seed, progress=progress, clusters=kept)
    out.attrs.update(n_clusters=n_clusters, cluster_note=note)
    return out


def _clusters_of(frame: pd.DataFrame, cluster: Any) -> tuple[str | None, np.ndarray | None]:
    """The column the comparisons are clustered by (``cluster`` read by
    :func:`~llm_connect.stats.clusters.cluster_column`) and each row's cluster number (``None``: independent)."""
    column = cluster_column(frame, cluster, what="the comparisons")
    if column is None:
        return None, None
    return column, cluster_codes(frame[column].reset_index(drop=True))


def _with_groups(frame: pd.DataFrame, by_cols: Sequence[str], values: Sequence[Any]) -> pd.DataFrame:
    for c, v in reversed(list(zip(by_cols, values, strict=True))):
        frame.insert(0, c, v)
    return frame


def leaderboard(
    data: Any,
    *,
    model_a: str = "model_a",
    model_b: str = "model_b",
    winner: str = "winner",
    by: str | Sequence[str] | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int | None = 0,
    method: str = "bradley-terry",
    codes: str | Mapping[str, Any] | None = None,
    progress: bool | None = None,
    style: Any = None,
    text_a: str | None = None,
    text_b: str | None = None,
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """Bradley-Terry ratings of the models compared in ``data``, with bootstrap intervals and ranks.

    ``data``: a DataFrame (or mappings), one row per comparison; ``model_a``/``model_b``: the columns
    naming the two models; ``winner``: the column saying which won, ``"a"``, ``"b"`` or ``"tie"``
    (a tie counts half to each side; the Chatbot Arena words ``model_a``, ``model_b``,
    ``tie (bothbad)`` are read too, numeric codes need ``codes=``, e.g. ``"a=1,b=2,tie=0"``), or
    the probability that answer A is preferred (continuous preferences, below). A
    blank winner (an unlabelled or unscored pair) and a model compared with itself are left out
    and counted in ``attrs``. ``by``: column(s) giving one leaderboard per group, the group
    columns first. ``confidence``: the interval level; ``n_boot``: bootstrap resamples (0: no
    intervals); ``seed``: the resampling seed; ``method``: ``"bradley-terry"`` (the only one);
    ``progress``: a ``tqdm`` bar over the resamples (default: when they take several chunks).

    Returns a DataFrame sorted best first, one row per model: ``model``, ``rating`` (Elo scale,
    ``400 * log10`` odds, mean 1000), ``rating_low``/``rating_high`` (percentile bootstrap over
    comparisons), ``rank`` (1 = best), ``rank_low``/``rank_high`` (best and worst plausible rank
    from the intervals, as Chatbot Arena ranks), ``n`` (comparisons of the model), ``win_rate``
    (ties half). ``attrs`` holds the settings and counts (``method``, ``confidence``, ``n_boot``,
    ``seed``, ``n_comparisons``, ``n_unlabelled``, ``n_self``, and the clustering: ``cluster``,
    ``n_clusters``, ``cluster_notes``).

    **Comparisons in clusters.** Comparisons made on the turns of one conversation (or the steps of one
    agent run) share its topic, user and difficulty: they are not independent, and a bootstrap that
    resamples single comparisons gives intervals that are too narrow. ``cluster``: ``"auto"`` (the
    default) clusters the comparisons by the ``conversation_id`` column when ``data`` has one, a column
    name by that column, ``None`` treats them as independent (the numbers of earlier releases). With
    clusters the bootstrap resamples whole clusters -- ``G`` clusters drawn with replacement from the
    ``G`` observed, each bringing all its comparisons, the ratings refitted -- (the cluster bootstrap:
    Davison & Hinkley 1997, *Bootstrap Methods and their Application*, section 3.8; Field & Welsh 2007,
    "Bootstrapping clustered data", JRSS B 69(3); Cameron, Gelbach & Miller 2008, "Bootstrap-based
    improvements for inference with clustered errors", Review of Economics and Statistics 90(3)); a row
    whose cluster id is missing is a cluster of its own. ``attrs["cluster"]`` names the column used
    (``None``: independent comparisons) and ``attrs["n_clusters"]`` counts the clusters of the
    comparisons fitted. With fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` clusters (in a
    ``by`` group) there is no interval (NaN, no rank range) and ``attrs["cluster_notes"]`` says why and
    what to do. The point ratings do not depend on the clustering.

    **Continuous preferences.** A winner column of probabilities that A is preferred (numbers from 0
    to 1, e.g. from a judge's logprobs; read as such when they are not all 0, 0.5 and 1, or always
    with ``codes="probability"``; the words a/b/tie may stand beside them) is fitted by expected
    counts: a comparison with probability ``p`` adds ``p`` to A's wins and ``1 - p`` to B's (the
    likelihood ``p log s + (1 - p) log(1 - s)``, as AlpacaEval's continuous preferences count
    ``preference - 1`` of a win; Dubois et al. 2024, arXiv:2404.04475, ``alpaca_eval`` ``get_winrate``).
    ``win_rate`` is then the expected share won; the bootstrap resamples comparisons as before.

    **Style control** (Chatbot Arena's, LMSYS 2024, "Does style matter? Disentangling style and
    substance in Chatbot Arena"; FastChat's ``compute_style_control``). ``style=True`` appends
    Arena's four style features (``length``, ``headers``, ``lists``, ``bold``; see
    :mod:`llm_connect.stats.style`) to the regression, each the normalised difference
    ``(a - b) / (a + b + 1)`` of the two answers' counts, computed from the texts in ``text_a`` /
    ``text_b`` (default: the first of the column pairs ``response_a``/``response_b``,
    ``candidate_a``/``candidate_b``, ``answer_a``/``answer_b``); ``style=["length", "bold"]``
    picks among them; other names in the list are columns of ``data`` holding the user's own
    covariates, and a DataFrame (one row per row of ``data``, in order) supplies covariates
    directly; a covariate is a number per comparison, oriented A minus B (positive: A has more).
    The model is ``logit P(A preferred) = theta_a - theta_b + x . beta``, fitted by maximum
    likelihood on the single comparisons (Newton's method; the ridge on ``theta`` as above, none
    on ``beta``), and the board's ratings are the ``theta`` — the ratings with the style
    features held at 0, i.e. for two answers of the same style. Unlike FastChat we do not centre
    the features (Arena standardises them, so its 0 is the data's mean style difference) and
    report each coefficient per unit of the feature itself. Intervals: percentile bootstrap over
    comparisons, every resample fitted at once (chord steps with the Hessian of the point
    estimate). ``board.attrs["style"]``: a DataFrame ``feature``, ``coefficient`` (Elo per unit
    of the feature: the rating points a comparison moves toward A when the feature goes from 0 to
    1), ``low``, ``high``; ``attrs["style_notes"]``: what was dropped or flagged;
    ``attrs["style_fit"]``: ``"mle"`` or the penalised fallback. A feature constant on the
    comparisons (or a linear combination of the models and the other features) is dropped, said
    in ``style_notes`` and with a ``UserWarning``, never fitted into a singular matrix; with no
    feature left the board is the raw one. When the style features separate the outcomes (no
    maximum-likelihood fit exists) the fit is redone with an L2 penalty
    (:data:`STYLE_SEPARATION_PENALTY`), flagged in ``style_fit`` and ``style_notes``, with a
    ``RuntimeWarning``: never a silent huge number. ``style=None`` (the default) is the
    aggregated fit above, unchanged.

    Raises :class:`~llm_connect.errors.ValidationError` for a missing column, a winner that is
    not a preference (listing the values), a row without a model name, a model never compared,
    or comparisons that fall into groups never compared with each other (naming the groups).

    References: Bradley & Terry (1952); Hunter (2004), "MM algorithms for generalized
    Bradley-Terry models"; Chiang et al. (2024), "Chatbot Arena", arXiv:2403.04132, and FastChat's
    ``elo_analysis.py`` (see the module docstring); for style control, FastChat's
    ``rating_systems.py`` (``preprocess_for_style``, ``fit_contextual_bt``) and ``add_markdown_info.py``.

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        One row per comparison.
    model_a : str, default "model_a"
        The column naming model A.
    model_b : str, default "model_b"
        The column naming model B.
    winner : str, default "winner"
        The column saying which won, or the probability that A is preferred (above).
    by : str or sequence of str, optional
        Column(s) giving one leaderboard per group.
    confidence : float, default 0.95
        The intervals' level.
    n_boot : int, default 1000
        Bootstrap resamples (0: no intervals).
    seed : int, optional
        The resampling seed (default 0).
    method : {"bradley-terry"}, default "bradley-terry"
        The model (the only one).
    codes : str or mapping, optional
        What the winner column's values mean (``"a=1,b=2,tie=0"``, ``"probability"``).
    progress : bool, optional
        A bar over the resamples (default: when they take several chunks).
    style : bool or list of str or DataFrame, optional
        Style control (above); ``None``: none.
    text_a : str, optional
        The column of answer A's text, for the style features.
    text_b : str, optional
        The column of answer B's text.
    cluster : str or None, default "auto"
        Which comparisons are not independent (above).

    Returns
    -------
    DataFrame
        One row per model, best first: ``model``, ``rating``, ``rating_low``, ``rating_high``, ``rank``,
        ``rank_low``, ``rank_high``, ``n``, ``win_rate`` (above); ``attrs`` the settings and counts.

    See Also
    --------
    style_effects : The style coefficients alone.
    llm_connect.grading.tournament : Battles judged by a pairwise judge.

    Examples
    --------
    >>> import pandas as pd
    >>> battles = pd.DataFrame({"model_a": ["x", "x", "y", "x"], "model_b": ["y", "z", "z", "z"],
    ...                         "winner": ["a", "a", "b", "tie"]})
    >>> leaderboard(battles, n_boot=0)[["model", "rank", "n"]]
      model  rank  n
    0     x     1  3
    1     z     2  3
    2     y     3  2
    """
    conf, n_boot = check_leaderboard_settings(confidence, n_boot, method)
    by_cols = by_columns(by, reserved=LEADERBOARD_COLUMNS, what="leaderboard")
    frame, a, b, outcome, notes = read_comparisons(data, model_a, model_b, winner, codes, by_cols)
    column, clusters = _clusters_of(frame, cluster)
    design = _style_design(frame.reset_index(drop=True), style, text_a, text_b)
    settings = {"method": method, "confidence": conf, "n_boot": n_boot, "seed": seed, **notes,
                **_style_settings(design), "cluster": column}
    if clusters is not None:
        used = pd.notna(outcome).astype(bool) & np.asarray(a != b, dtype=bool)
        settings["n_clusters"] = len(np.unique(clusters[used]))
    else:
        settings["n_clusters"] = None
    style_kw: dict[str, Any] = {} if design is None else {"style_names": design.names}
    if not by_cols:
        out = _one_board(a, b, outcome, where="", confidence=conf, n_boot=n_boot, seed=seed, progress=progress,
                         style_x=None if design is None else design.x, clusters=clusters, cluster=column,
                         **style_kw)
        note = out.attrs.pop("cluster_note")
        out.attrs.update(settings, n_comparisons=int(out["n"].sum() // 2), cluster_notes=[note] if note else [])
        return out
    parts = []
    styles: list[pd.DataFrame] = []
    style_notes: list[str] = []
    cluster_notes: list[str] = []
    fits: list[str] = []
    grouped = frame.reset_index(drop=True).groupby(by_cols, sort=True, dropna=False, observed=True)
    for key, rows in grouped.indices.items():
        values = key if isinstance(key, tuple) else (key,)
        where = "group " + ", ".join(f"{c}={v!r}" for c, v in zip(by_cols, values, strict=True)) + ": "
        part = _one_board(a[rows], b[rows], outcome[rows], where=where, confidence=conf, n_boot=n_boot, seed=seed,
                          progress=progress, style_x=None if design is None else design.x[rows],
                          clusters=None if clusters is None else clusters[rows], cluster=column, **style_kw)
        note = part.attrs.pop("cluster_note")
        part.attrs.pop("n_clusters")
        if note:
            cluster_notes.append(note)
        if design is not None:  # a frame in attrs cannot be compared when the parts are concatenated
            styles.append(_with_groups(part.attrs.pop("style").copy(), by_cols, values))
            style_notes += part.attrs.pop("style_notes")
            fits.append(f"{where}{part.attrs.pop('style_fit')}")
        parts.append(_with_groups(part, by_cols, values))
    out = pd.concat(parts, ignore_index=True)
    out.attrs.update(settings, by=by_cols, n_comparisons=int(out["n"].sum() // 2), cluster_notes=cluster_notes)
    if design is not None:
        out.attrs.update(style=pd.concat(styles, ignore_index=True), style_notes=style_notes,
                         style_fit="; ".join(fits))
    return out


def style_effects(
    data: Any,
    style: Any = True,
    *,
    model_a: str | None = "model_a",
    model_b: str | None = "model_b",
    winner: str = "winner",
    by: str | Sequence[str] | None = None,
    text_a: str | None = None,
    text_b: str | None = None,
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int | None = 0,
    codes: str | Mapping[str, Any] | None = None,
    progress: bool | None = None,
    cluster: str | None = "auto",
) -> pd.DataFrame:
    """What style is worth in the preferences of ``data``: the style coefficients of the
    style-controlled Bradley–Terry fit (Chatbot Arena's style control; see :func:`leaderboard`,
    whose ``attrs["style"]`` this is, for the same arguments).

    Returns a DataFrame (after the ``by`` columns) ``feature``, ``coefficient`` — in Elo per unit
    of the feature: how many rating points the preference moves toward answer A when the feature
    goes from 0 (both answers alike) to 1 (for the Arena features, the normalised difference
    ``(a - b) / (a + b + 1)``: only A has it) — and ``low``/``high``, its percentile-bootstrap
    interval. ``attrs``: ``notes`` (features dropped, a separated fit), ``fit``, ``n``.

    ``model_a=None`` and ``model_b=None``: comparisons whose models are not named (or not
    wanted): the regression is on the style features alone, ``logit P(A preferred) = x . beta``,
    without ratings (what a judge pays for style, quality not held fixed).

    Parameters
    ----------
    data : DataFrame or iterable of mappings
        One row per comparison.
    style : bool or list of str or DataFrame, default True
        The features (as :func:`leaderboard` takes them).
    model_a : str or None, default "model_a"
        The column naming model A (``None``: the style features alone).
    model_b : str or None, default "model_b"
        The column naming model B.
    winner : str, default "winner"
        The column saying which won.
    by : str or sequence of str, optional
        Column(s) giving one fit per group.
    text_a : str, optional
        The column of answer A's text.
    text_b : str, optional
        The column of answer B's text.
    confidence : float, default 0.95
        The intervals' level.
    n_boot : int, default 1000
        Bootstrap resamples.
    seed : int, optional
        The resampling seed (default 0).
    codes : str or mapping, optional
        What the winner column's values mean.
    progress : bool, optional
        A bar over the resamples.
    cluster : str or None, default "auto"
        As :func:`leaderboard` reads it (``"auto"``: by ``conversation_id`` when ``data`` has it); the
        bootstrap then resamples whole clusters, and with fewer than
        :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` of them there is no interval (``attrs["notes"]``
        says why). ``attrs["cluster"]`` names the column used.

    Returns
    -------
    DataFrame
        ``feature``, ``coefficient``, ``low``, ``high`` (after the ``by`` columns; above).
    """
    if (model_a is None) != (model_b is None):
        raise ValidationError("give both model columns (model_a=, model_b=) or neither (None: style alone)")
    if model_a is not None and model_b is not None:
        board = leaderboard(data, model_a=model_a, model_b=model_b, winner=winner, by=by, confidence=confidence,
                            n_boot=n_boot, seed=seed, codes=codes, progress=progress,
                            style=True if style is None else style, text_a=text_a, text_b=text_b, cluster=cluster)
        out = board.attrs["style"].copy()
        out.attrs.update(notes=[*board.attrs.get("style_notes", []), *board.attrs.get("cluster_notes", [])],
                         fit=board.attrs.get("style_fit"), n=board.attrs.get("n_comparisons"),
                         cluster=board.attrs.get("cluster"))
        return out
    conf, n_boot = check_leaderboard_settings(confidence, n_boot)
    by_cols = by_columns(by, reserved=STYLE_COLUMNS, what="style_effects")
    frame = _frame(data).reset_index(drop=True)
    need_columns(frame, [winner, *by_cols])
    outcome = read_outcomes(frame[winner], winner, codes)
    column, clusters = _clusters_of(frame, cluster)
    design = _style_design(frame, True if style is None else style, text_a, text_b)
    assert design is not None
    labelled = pd.notna(outcome).astype(bool)
    groups: dict[Any, Any] = dict(frame.groupby(by_cols, sort=True, dropna=False, observed=True).indices) \
        if by_cols else {(): np.arange(len(frame))}
    parts, notes, fits = [], [], []
    for key, rows in groups.items():
        values = key if isinstance(key, tuple) else (key,)
        where = ("group " + ", ".join(f"{c}={v!r}" for c, v in zip(by_cols, values, strict=True)) + ": ") \
            if by_cols else ""
        used = np.asarray(rows)[labelled[rows]]
        if not len(used):
            raise ValidationError(f"{where}no comparison with a winner")
        zero = np.zeros(len(used), dtype=np.int64)
        kept = None if clusters is None else clusters[used]
        boots = n_boot
        if kept is not None and n_boot > 0 and (g := len(np.unique(kept))) < MIN_CLUSTERS:
            notes.append(where + few_clusters_reason(g, column=column, what="compared"))
            boots = 0
        fit, said = _fit_style_rows(zero, zero, _worth(outcome[used]), design.x[used], design.names, 1, where=where,
                                    confidence=conf, n_boot=boots, seed=seed, progress=progress, clusters=kept)
        notes += said
        fits.append(f"{where}{'none' if fit is None else fit.fit}")
        parts.append(_with_groups(_style_frame(fit), by_cols, values))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    out.attrs.update(notes=notes, fit="; ".join(fits), n=int(labelled.sum()), cluster=column)
    return out
