"""The leaderboard's pictures and pages: ratings with their intervals drawn
(:func:`plot_leaderboard`), a board as a page shows it (:func:`shown_board`), the leaderboard section of a
pairwise calibration report (:func:`leaderboard_section`), the raw and style-controlled boards side by side
(:func:`style_section`), and the judge's board beside people's (:func:`leaderboard_comparison_html`). The
ratings come from :func:`llm_connect.stats.bradley_terry.leaderboard`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._docstrings import PLOT_TEXTS, share_parameters
from .._html import Markup, fmt, frame_html, html_format, join, with_interval
from ..errors import ValidationError
from ..stats.bradley_terry import MEAN, need_columns, side_by_side
from ._figures import new_figure, png_data_uri
from .plots import _axes, _text

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["leaderboard_comparison_html", "leaderboard_section", "plot_leaderboard", "shown_board", "style_section"]


def shown_board(board: pd.DataFrame) -> pd.DataFrame:
    """A leaderboard as a page shows it.

    Parameters
    ----------
    board : pandas.DataFrame
        A :func:`~llm_connect.stats.leaderboard` frame (``rank``, ``model``, ``rating`` with
        ``rating_low``/``rating_high``, ``rank_low``/``rank_high``, ``n``, ``win_rate``).

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``model``, ``rating`` with its interval in one cell, ``rank range``, ``n``, ``win rate``.
    """
    return pd.DataFrame({
        "rank": board["rank"], "model": board["model"],
        "rating": [with_interval(r, lo, hi, 4) for r, lo, hi in
                   zip(board["rating"], board["rating_low"], board["rating_high"], strict=True)],
        "rank range": [f"{lo}–{hi}" if not pd.isna(lo) else "—" for lo, hi in
                       zip(board["rank_low"], board["rank_high"], strict=True)],
        "n": board["n"], "win rate": board["win_rate"],
    })


@share_parameters(texts=PLOT_TEXTS)
def plot_leaderboard(data: pd.DataFrame, *, ax: Any = None, **kwargs: Any) -> Axes:
    """Ratings with their intervals, best at the top (``data``: a
    :func:`~llm_connect.stats.leaderboard` frame, or any frame with ``model``, ``rating`` and
    optionally ``rating_low``/``rating_high``). With several groups (a ``by=`` frame) each model is
    labelled ``group / model``. ``**kwargs`` go to ``Axes.errorbar``. Returns the Axes.

    Parameters
    ----------
    data : pandas.DataFrame
        The board.
    {ax}
    **kwargs
        Go to ``Axes.errorbar``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    if data is None or not isinstance(data, pd.DataFrame):
        raise ValidationError("data is required: pass a leaderboard(...) frame")
    need_columns(data, ["model", "rating"])
    ax = _axes(ax)
    frame = data.sort_values("rating", ascending=True).reset_index(drop=True)
    by = [c for c in data.attrs.get("by", []) if c in frame.columns]
    labels = [_text(" / ".join([*(str(r[c]) for c in by), str(r["model"])]), 40) for r in frame.to_dict("records")]
    y = np.arange(len(frame))
    rating = frame["rating"].to_numpy(dtype=float)
    if {"rating_low", "rating_high"} <= set(frame.columns):
        low = frame["rating_low"].to_numpy(dtype=float)
        high = frame["rating_high"].to_numpy(dtype=float)
        xerr = np.vstack([np.where(np.isfinite(low), rating - low, 0.0),
                          np.where(np.isfinite(high), high - rating, 0.0)])
    else:
        xerr = None
    style = {"fmt": "o", "capsize": 3, "color": "C0"}
    style.update(kwargs)
    ax.errorbar(rating, y, xerr=xerr, **style)
    ax.axvline(MEAN, color="0.7", linewidth=0.8, linestyle=":", zorder=0)
    ax.set_yticks(y)
    ax.set_yticklabels(labels)
    level = data.attrs.get("confidence")
    ax.set_xlabel("rating (Elo scale, mean 1000)" + (f"; {level:.0%} intervals" if level else ""))
    ax.set_ylabel("")
    return ax


def leaderboard_section(boards: Mapping[str, Any], *, confidence: float, plots: bool,
                        style_boards: Mapping[str, Any] | None = None) -> Markup:
    """The report's section: each rater's board (rank, model, rating with its interval, rank range,
    comparisons, win rate) and, with ``plots``, the first board drawn by :func:`plot_leaderboard`;
    with ``style_boards`` (the style-controlled twins), :func:`style_section` after them.

    Parameters
    ----------
    boards : mapping of str to DataFrame
        Each rater's board.
    confidence : float
        The intervals' level (in the captions).
    plots : bool
        Draw the first board.
    style_boards : mapping of str to DataFrame, optional
        The style-controlled twins.

    Returns
    -------
    Markup
        The section's HTML.
    """
    if not boards:
        return Markup("")
    parts = [html_format("<h3>Leaderboards (Bradley-Terry)</h3><p>{}</p>",
                         "Ratings on the Elo scale (400 log10 odds, mean 1000) from each rater's winners, ties "
                         f"half; {confidence:.0%} bootstrap intervals over pairs; rank range: best and worst "
                         "plausible rank from the intervals, as Chatbot Arena ranks.")]
    drawn = False
    for name, board in boards.items():
        if not isinstance(board, pd.DataFrame):
            parts.append(html_format("<p>No leaderboard from {}: {}</p>", name, board))
            continue
        parts.append(frame_html(shown_board(board), caption=f"Leaderboard from {name}'s winners"))
        if plots and not drawn:
            fig, ax = new_figure(5.5, 0.9 + 0.35 * len(board))
            plot_leaderboard(board, ax=ax)
            ax.set_title(_text(name))
            parts.append(html_format("<figure style='display:inline-block;margin:4px'><img src='{}' alt='{}'>"
                                     "<figcaption>{}</figcaption></figure>", png_data_uri(fig),
                                     f"leaderboard ({name})", f"Leaderboard from {name}'s winners"))
            drawn = True
    if style_boards:
        parts.append(style_section(boards, style_boards, confidence=confidence))
    return join(parts)


def _rank_change(value: Any) -> str:
    if value is None or pd.isna(value):
        return "—"
    v = int(value)
    return f"+{v} \N{UPWARDS ARROW}" if v > 0 else (f"{v} \N{DOWNWARDS ARROW}".replace("-", "\N{MINUS SIGN}")
                                                   if v < 0 else "0")


def shown_side_by_side(frame: pd.DataFrame) -> pd.DataFrame:
    """A :func:`~llm_connect.stats.side_by_side` frame as a page shows it."""
    by = [c for c in frame.attrs.get("by", []) if c in frame.columns]
    return pd.DataFrame({
        **{c: frame[c] for c in by},
        "model": frame["model"],
        "raw rating": [with_interval(r, lo, hi, 4) for r, lo, hi in
                       zip(frame["rating"], frame["rating_low"], frame["rating_high"], strict=True)],
        "raw rank": frame["rank"],
        "style-controlled rating": [with_interval(r, lo, hi, 4) for r, lo, hi in
                                    zip(frame["style_rating"], frame["style_rating_low"],
                                        frame["style_rating_high"], strict=True)],
        "style-controlled rank": frame["style_rank"],
        "rank change": [_rank_change(v) for v in frame["rank_change"]],
    })


def style_section(boards: Mapping[str, Any], style_boards: Mapping[str, Any], *, confidence: float) -> Markup:
    """Each rater's raw board beside its style-controlled one (Chatbot Arena's style control: the
    ratings with the answers' length, headers, list items and bold text held equal), with each model's
    change in rank, and what the rater pays for style (Elo per unit of each feature).

    Parameters
    ----------
    boards : mapping of str to DataFrame
        Each rater's raw board.
    style_boards : mapping of str to DataFrame
        Its style-controlled one.
    confidence : float
        The intervals' level.

    Returns
    -------
    Markup
        The section's HTML.
    """
    parts = [html_format(
        "<h3>Style-controlled leaderboards</h3><p>{}</p>",
        "Chatbot Arena's style control: the Bradley-Terry fit with four style features of the two answers "
        "(length, markdown headers, list items, bold text; each the normalised difference (a - b) / (a + b + 1)) "
        "beside the models, the ratings read with style held equal. Rank change: raw rank minus "
        f"style-controlled rank (positive: the model climbs once style is discounted); {confidence:.0%} "
        "bootstrap intervals. Style coefficient: the rating points a comparison moves toward the answer that "
        "alone has the feature.")]
    for name, controlled in style_boards.items():
        raw = boards.get(name)
        if not isinstance(controlled, pd.DataFrame) or not isinstance(raw, pd.DataFrame):
            reason = controlled if not isinstance(controlled, pd.DataFrame) else raw
            parts.append(html_format("<p>No style-controlled leaderboard from {}: {}</p>", name, reason))
            continue
        parts.append(frame_html(shown_side_by_side(side_by_side(raw, controlled)),
                                caption=f"{name}: raw beside style-controlled"))
        effects = controlled.attrs.get("style")
        if isinstance(effects, pd.DataFrame) and len(effects):
            shown = pd.DataFrame({"feature": effects["feature"],
                                  "Elo per unit": [with_interval(c, lo, hi, 4) for c, lo, hi in
                                                   zip(effects["coefficient"], effects["low"], effects["high"],
                                                       strict=True)]})
            parts.append(frame_html(shown, caption=f"What {name} pays for style"))
        for note in controlled.attrs.get("style_notes", []):
            parts.append(html_format("<p class='llm-connect-note'>{}</p>", note))
        fit = controlled.attrs.get("style_fit")
        if fit not in (None, "mle", "none"):
            parts.append(html_format("<p class='llm-connect-note'>fit: {}</p>", fit))
    return join(parts)


def leaderboard_comparison_html(comparison: Any) -> Markup:
    """The judge's leaderboard beside people's (and the human-anchored one), their rank correlation, the
    judge against people per pair of models, and the notes: the HTML of a
    :class:`~llm_connect.calibration.LeaderboardComparison`.

    Parameters
    ----------
    comparison : LeaderboardComparison
        What :func:`~llm_connect.calibration.compare_leaderboards` returns.

    Returns
    -------
    Markup
    """
    level = f"{comparison.confidence:.0%}"

    def board(frame: pd.DataFrame | None, caption: str) -> Markup:
        if frame is None:
            return Markup("")
        return frame_html(shown_board(frame), caption=caption)

    parts = [html_format("<h3>{}</h3>", "Leaderboards: the judge beside people")]
    parts.append(board(comparison.judge, f"Judge ({level} bootstrap intervals)"))
    parts.append(board(comparison.human, f"People, labelled comparisons only ({level} bootstrap intervals)"))
    if comparison.anchored is not None:
        parts.append(board(comparison.anchored, f"People, anchored by the judge on the unlabelled comparisons "
                                                f"(PPI++, lambda = {fmt(comparison.lam)}; {level} intervals)"))
    if len(comparison.correlation):
        parts.append(frame_html(comparison.correlation, caption="Rank correlation of the ratings"))
    if len(comparison.pairs):
        parts.append(frame_html(comparison.pairs, caption="The judge against people, per pair of models"))
    for note in comparison.notes:
        parts.append(html_format("<p>{}</p>", note))
    return html_format("<div class='llm-connect-leaderboards'>{}</div>", join(parts))
