"""Pairwise calibration: which of two answers is better, judged by a pairwise judge and by people.

A *pairwise* dataset has one row per pair: ``prompt``, ``candidate_a``, ``candidate_b`` (optionally ``id``, ``model_a``,
``model_b``) and a people's preference column (``human`` by default; several annotators allowed) holding ``a``, ``b`` or
``tie`` (the words Chatbot Arena exports use, ``model_a``/``model_b``/``tie (bothbad)``, are read too; numeric codes
such as 1/2/0 need ``codes=``, see :func:`preference_codes`: a number is never guessed).

Each judge (a :class:`~llm_connect.grading.PairwiseJudge`) is run through the runner with answer A as its ``baseline``
and answer B as its ``candidate``; its verdict is read as ``a``, ``b`` or ``tie``. What the report gives against people,
and the papers: :class:`PairwiseReport`.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .._display import view
from .._docstrings import share_parameters
from .._html import Markup, fmt
from ..core import BudgetTracker, RunConfig, as_budget
from ..errors import ValidationError
from ..items import CONVERSATION_TAGS, load_items
from ..stats._validate import check_confidence
from ..stats.bradley_terry import is_probability_column, real_number
from ..stats.preferences import (
    PREFERENCES,
    majority_preference,
    parse_preferences,
    position_bias,
    preference_agreement,
    preference_codes,
)
from ._agreement import AgreementTable
from ._bias import BiasReport, ProbeResult, is_pairwise, paired_shift
from ._report import _Report
from ._runner import (
    ItemsLike,
    ScoredItems,
    _judge_items,
    _named_judges,
    _passthrough_names,
    judge_name,
    open_ledger_of,
)

if TYPE_CHECKING:
    from ..grading import Judge
    from ..quality import BaseLedger

__all__ = ["PAIRWISE_AGREEMENT_COLUMNS", "PAIRWISE_COLUMNS", "PAIRWISE_CSV_COLUMNS", "PREFERENCES", "VERDICT_WINNERS",
           "PairwiseReport", "battle_outcomes", "calibrate_pairwise", "is_pairwise_input", "parse_preferences",
           "position_bias", "preference_agreement", "preference_codes"]

#: The columns that make a dataset pairwise.
PAIRWISE_COLUMNS: tuple[str, ...] = ("candidate_a", "candidate_b")
#: Columns of ``pairwise.csv``: one row per judge, against the people's preference.
PAIRWISE_CSV_COLUMNS: tuple[str, ...] = (
    "judge", "reference", "n", "percent_agreement", "agreement_low", "agreement_high", "cohen_kappa",
    "kappa_low", "kappa_high", "krippendorff_alpha_nominal", "n_non_tie", "accuracy_non_tie", "decided_non_tie",
    "judge_tie_rate",
    "human_tie_rate", "n_both_orders", "consistency", "n_position", "first_shown_win_rate", "position_bias",
    "position_low", "position_high", "position_p_value",
    *(f"judge_{j}_human_{h}" for j in PREFERENCES for h in PREFERENCES),
)
#: Columns of the pairwise ``agreement.csv``: one row per pair of raters (judges and people).
PAIRWISE_AGREEMENT_COLUMNS: tuple[str, ...] = (
    "judge_a", "judge_b", "n", "percent_agreement", "agreement_low", "agreement_high", "cohen_kappa",
    "kappa_low", "kappa_high", "krippendorff_alpha_nominal", "n_non_tie", "accuracy_non_tie", "decided_non_tie",
    "tie_rate_a", "tie_rate_b", "ceiling",
)


# -- reading preferences --------------------------------------------------------------------------


def is_pairwise_input(items: Any) -> bool:
    """True when ``items`` (a frame or mappings) has the columns ``candidate_a`` and ``candidate_b``."""
    if isinstance(items, pd.DataFrame):
        columns = set(map(str, items.columns))
    elif isinstance(items, Sequence) and not isinstance(items, (str, bytes)) and items and \
            isinstance(items[0], Mapping):
        columns = set(map(str, items[0]))
    else:
        return False
    return all(c in columns for c in PAIRWISE_COLUMNS)


def pairwise_table(items: ItemsLike) -> pd.DataFrame:
    """The pairs as a frame indexed 0..n-1; a missing ``prompt``, ``candidate_a`` or ``candidate_b`` column is a
    :class:`~llm_connect.errors.ValidationError` naming it. A path is read with
    :func:`~llm_connect.items.load_items`."""
    if isinstance(items, (str, os.PathLike)):
        items = load_items(items, items=False)
    if isinstance(items, pd.DataFrame):
        frame = items.reset_index(drop=True).copy()
    else:
        try:
            frame = pd.DataFrame.from_records(list(items))
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"pairwise items must be a DataFrame or mappings: {exc}") from None
    frame.columns = [str(c) for c in frame.columns]
    # a conversation item's prompt may be left out: it is its last user message
    needed = PAIRWISE_COLUMNS if "messages" in frame.columns else ("prompt", *PAIRWISE_COLUMNS)
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValidationError(f"pairwise data needs the column(s) {', '.join(missing)}; "
                              f"it has {', '.join(map(str, frame.columns))}")
    if not len(frame):
        raise ValidationError("pairwise data has no rows")
    return frame


# -- running the judges ----------------------------------------------------------------------------

_VERDICT_LABEL = {"baseline": "a", "candidate": "b", "tie": "tie"}  # A is shown to the judge as its baseline


def _order_labels(details: Any, *, swapped: bool) -> dict[str, str | None]:
    """From a PairwiseJudge's details: the answer (``a``/``b``/``tie``) each order picked, keyed ``a_first`` /
    ``b_first``. ``swapped``: the judge was given B as its baseline."""
    out: dict[str, str | None] = {"a_first": None, "b_first": None}
    if not isinstance(details, Mapping):
        return out
    for o in details.get("orders", ()):
        verdict = o.get("verdict")
        label = _VERDICT_LABEL.get(str(verdict))
        if label is None:
            continue
        baseline_first = o.get("order") == "baseline-first"
        if swapped:
            label = {"a": "b", "b": "a"}.get(label, label)
        out["b_first" if baseline_first == swapped else "a_first"] = label
    return out


def _judge_pairs(judge: Any, pairs: pd.DataFrame, *, swapped: bool = False, **kwargs: Any) -> pd.DataFrame:
    """The batch frame of ``judge`` on the pairs (A as the judge's baseline, B as its candidate, or the other way round
    when ``swapped``), through the runner."""
    first, second = ("candidate_b", "candidate_a") if swapped else ("candidate_a", "candidate_b")
    items = pd.DataFrame({"id": pairs["id"].tolist(), "baseline": pairs[first].tolist(),
                          "candidate": pairs[second].tolist()})
    for c in ("prompt", "messages", "context", *CONVERSATION_TAGS):  # a conversation item's: the judge reads them
        if c in pairs.columns:
            items[c] = pairs[c].tolist()
    return _judge_items(judge, items, **kwargs)


@share_parameters
@dataclass
class PairwiseReport(_Report):
    """A pairwise calibration run: judges and people saying which of two answers is better.

    No threshold is applied anywhere: a tie is a third label, never a score of 0.5 read as a win. It shares with
    :class:`~llm_connect.calibration.CalibrationReport` the run (``scores``, ``bias``, the judges and labels, cards,
    ``to_html``, ``to_parquet``) but has no threshold: no widget and no judgment viewer, which compare scored judges at
    a threshold; read :meth:`scores_table` for each pair's winners, orders and replies.

    Parameters
    ----------
    scores : pandas.DataFrame
        One row per pair: ``id``, ``prompt``, ``candidate_a``, ``candidate_b``, ``model_a``, ``model_b`` when given, the
        input's other columns, ``winner_human`` and ``winner_<annotator>``, per judge ``winner_<judge>`` in
        ``a``/``b``/``tie``, ``consistent_<judge>``, ``winner_a_first_<judge>`` / ``winner_b_first_<judge>`` (what each
        order picked), ``status_<judge>``, ``notes_<judge>``, ``reply_<judge>``, and ``winner``: the people's preference
        when labelled, else the only judge's (see :func:`battle_outcomes`).
    agreement : AgreementTable
        Empty for a pairwise run: the three-way figures are in ``pairwise`` and ``pair_agreement``.
    bias : BiasReport, optional
        The ``position`` probe when it ran.
    {n_boot}
    {confidence}
    seed : int, default 0
        Seeds the bootstrap.
    scored : ScoredItems, optional
        The judges' metadata; ``None``: read from ``scores.attrs``.
    pairwise : pandas.DataFrame, optional
        One row per judge against people (:data:`PAIRWISE_CSV_COLUMNS`).
    pair_agreement : pandas.DataFrame, optional
        One row per pair of raters (:data:`PAIRWISE_AGREEMENT_COLUMNS`).

    Notes
    -----
    Against people the report gives, per judge:

    - three-way agreement over ``{a, b, tie}``: percent agreement and Cohen's kappa (Cohen 1960, "A coefficient of
      agreement for nominal scales"; equal to scikit-learn's ``cohen_kappa_score``) with seeded percentile-bootstrap
      intervals;
    - accuracy on the pairs people did not call a tie (a judge's tie counts as not correct) and, of those, how many the
      judge decided at all (``decided_non_tie``), as MT-Bench reports agreement "without ties" (Zheng et al. 2023,
      "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena");
    - the judge's tie rate beside the people's tie rate;
    - consistency across orders: the share of pairs judged in both orders whose two orders picked the same answer;
    - position bias: of the order-judgments that picked an answer, the share won by the answer shown first, its excess
      over 50% with an exact (Clopper-Pearson) interval and a two-sided binomial test (``scipy.stats.binomtest``); with
      both orders every pair is shown both ways, so answer quality cancels out and any excess is position alone (Wang et
      al. 2023, "Large Language Models are not Fair Evaluators");
    - the 3x3 confusion, each count named from the judge's side against people (``judge_a_human_b``: the judge said
      ``a`` where people said ``b``).

    With several annotators and no ``human`` column, the people's preference is the annotators' majority (an even split
    between labels is a ``tie``: people did not agree that one answer is better); pairs of annotators are the ceiling.
    """

    pairwise: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PAIRWISE_CSV_COLUMNS)))
    pair_agreement: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PAIRWISE_AGREEMENT_COLUMNS)))

    @property
    def names(self) -> list[str]:
        return [*self.judges, *self.labels]

    @property
    def reference(self) -> str | None:
        return "human" if "human" in self.labels else None

    def stat(self, judge: str, statistic: str) -> float:
        """One number of :attr:`pairwise` for one judge.

        Parameters
        ----------
        judge : str
            The judge's name.
        statistic : str
            A column of :attr:`pairwise` (``cohen_kappa``, ``kappa_low``, ``percent_agreement``, ``accuracy_non_tie``,
            ``consistency``, ...).

        Returns
        -------
        float
            The number; NaN when there is none.
        """
        rows = self.pairwise[self.pairwise["judge"] == judge]
        if not len(rows) or statistic not in rows.columns:
            return math.nan
        value = rows.iloc[0][statistic]
        try:
            return float(value)
        except (TypeError, ValueError):
            return math.nan

    def summary(self) -> pd.DataFrame:
        """One row per judge against people: the headline columns of :attr:`pairwise`.

        Returns
        -------
        pandas.DataFrame
            ``judge``, ``reference``, ``n``, ``percent_agreement``, ``cohen_kappa`` and its interval, the non-tie
            accuracy, the tie rates, ``consistency`` and the position bias (those present).
        """
        cols = ["judge", "reference", "n", "percent_agreement", "cohen_kappa", "kappa_low", "kappa_high",
                "accuracy_non_tie", "n_non_tie", "decided_non_tie", "judge_tie_rate", "human_tie_rate",
                "consistency", "first_shown_win_rate", "position_p_value"]
        return self.pairwise[[c for c in cols if c in self.pairwise.columns]].copy()

    def scores_table(self) -> pd.DataFrame:
        """What ``scores.csv`` holds.

        Returns
        -------
        pandas.DataFrame
            One row per pair, in input order: the item and model columns, the passthrough columns, the winners and each
            judge's orders, status, notes and reply (see the class docstring).
        """
        s = self.scores
        cols = ["id", "prompt", *PAIRWISE_COLUMNS, *[c for c in ("model_a", "model_b") if c in s.columns]]
        cols += [c for c in self.meta.passthrough if c in s.columns]
        cols += [f"winner_{n}" for n in self.labels]
        cols += [c for c in ("winner",) if c in s.columns]
        for j in self.judges:
            cols += [c for c in (f"winner_{j}", f"consistent_{j}", f"winner_a_first_{j}", f"winner_b_first_{j}",
                                 f"status_{j}", f"notes_{j}", f"reply_{j}") if c in s.columns]
        return s[list(dict.fromkeys(cols))].copy()

    def agreement_frame(self) -> pd.DataFrame:
        """What the pairwise ``agreement.csv`` holds.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`pair_agreement`: three-way agreement of every pair of raters.
        """
        return self.pair_agreement.copy()

    def pairwise_frame(self) -> pd.DataFrame:
        """What ``pairwise.csv`` holds.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`pairwise`: one row per judge against people (:data:`PAIRWISE_CSV_COLUMNS`).
        """
        return self.pairwise.copy()

    def to_csv(self, directory: str | Path) -> dict[str, Path]:
        """Write the report's tables as CSV files, text cells neutralised against spreadsheet formulas.

        Parameters
        ----------
        directory : str or os.PathLike
            The folder, created when missing; files of the same names are replaced.

        Returns
        -------
        dict of str to Path
            ``scores``, ``agreement`` (three-way, every pair of raters), ``pairwise`` (per judge against people),
            ``bias`` and, when the pairs name their models, ``leaderboard``: each file's path.
        """
        from .._textsafe import csv_safe_frame

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"scores": out / "scores.csv", "agreement": out / "agreement.csv",
                 "pairwise": out / "pairwise.csv", "bias": out / "bias.csv"}
        csv_safe_frame(self.scores_table()).to_csv(paths["scores"], index=False)
        csv_safe_frame(self.agreement_frame()).to_csv(paths["agreement"], index=False)
        csv_safe_frame(self.pairwise_frame()).to_csv(paths["pairwise"], index=False)
        csv_safe_frame(self.bias_frame()).to_csv(paths["bias"], index=False)
        boards = self.leaderboards()
        if any(isinstance(b, pd.DataFrame) for b in boards.values()):
            from ._leaderboard import leaderboards_frame

            paths["leaderboard"] = out / "leaderboard.csv"
            csv_safe_frame(leaderboards_frame(boards)).to_csv(paths["leaderboard"], index=False)
        return paths

    def leaderboards(self) -> dict[str, Any]:
        """A Bradley-Terry leaderboard per rater, when the pairs name their models (``model_a``, ``model_b``).

        Returns
        -------
        dict of str to DataFrame or str
            A :func:`~llm_connect.stats.leaderboard` per rater, people's first, then each judge's; a rater whose
            comparisons cannot be rated maps to the reason; empty when the pairs name no models. ``to_csv`` writes them
            to ``leaderboard.csv`` (a ``rater`` column first).
        """
        from ._leaderboard import report_leaderboards

        return report_leaderboards(self)

    def _cached(self, key: str, make: Any) -> Any:
        cache = self.__dict__.setdefault("_style_cache", {})
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def style_leaderboards(self) -> dict[str, Any]:
        """The style-controlled twins of :meth:`leaderboards`, computed once per report.

        Returns
        -------
        dict of str to DataFrame or str
            Per rater, when the pairs name their models, the leaderboard with Chatbot Arena's four style features of
            ``candidate_a``/``candidate_b`` held equal (:func:`~llm_connect.stats.leaderboard` with ``style=True``;
            ``attrs["style"]`` holds what the rater pays for style); a rater whose comparisons cannot be rated maps to
            the reason; else empty.
        """
        from ._leaderboard import report_style_leaderboards

        return self._cached("boards", lambda: report_style_leaderboards(self))

    def style_effects(self) -> dict[str, Any]:
        """What each rater pays for style, computed once per report.

        Returns
        -------
        dict of str to DataFrame or str
            Per rater (people first, then each judge): ``feature``, ``coefficient`` (Elo per unit of the feature),
            ``low``, ``high``, from the style-controlled boards when the pairs name their models, else from the style
            features alone (:func:`~llm_connect.stats.style_effects`); a rater that cannot be fitted maps to the reason.
        """
        from ._leaderboard import report_style_effects

        return self._cached("effects", lambda: report_style_effects(self, self.style_leaderboards()))

    def judge_cards(self) -> list[Any]:
        """A judge card per judge.

        Returns
        -------
        list of JudgeCard
            Per judge: three-way kappa against people, position consistency, the position bias as its probe, the verdict
            by the cards' rule, and what the judge rewards besides quality (``card.style``: the style coefficients of
            its own preferences beside people's, :meth:`style_effects`).
        """
        from ..cards import JudgeCard, ProbeEffect, card_verdict, style_entry

        effects = self.style_effects()  # what each judge (and people) pays for style, when the pairs have texts
        named = {"model_a", "model_b"} <= set(map(str, self.scores.columns))
        cards = []
        for j in self.judges:
            row = self.pairwise[self.pairwise["judge"] == j]
            r: dict[str, Any] = {str(k): v for k, v in row.iloc[0].to_dict().items()} if len(row) else {}
            people = self.reference is not None

            def num(key: str, r: dict[str, Any] = r) -> float:
                v = r.get(key)
                return math.nan if v is None else float(v)

            probes = []
            if r.get("n_position"):
                probes.append(ProbeEffect("position", num("position_bias"), num("position_low"),
                                          num("position_high"), num("position_p_value"), int(r["n_position"])))
            usage = self.meta.usage.get(j, {})
            total = sum(int(usage.get(k, 0)) for k in ("scored", "unscored", "error"))
            unscored = usage.get("unscored", 0) / total if total else math.nan
            n = int(r.get("n") or 0)
            verdict = card_verdict(j, kappa=num("cohen_kappa"), kappa_low=num("kappa_low"),
                                    kappa_high=num("kappa_high"), n=n, reference="human", people=people,
                                    confidence=self.confidence, biases=probes, unscored_rate=unscored)
            verdict += (f"; three-way agreement (a/b/tie) {fmt(num('percent_agreement'))}, accuracy on people's "
                        f"non-tie pairs {fmt(num('accuracy_non_tie'))} (decided {r.get('decided_non_tie', 0)}"
                        f"/{r.get('n_non_tie', 0)}), ties {fmt(num('judge_tie_rate'))} vs people's "
                        f"{fmt(num('human_tie_rate'))}")
            consistency = num("consistency")
            if math.isfinite(consistency):
                verdict += f", consistent across orders {consistency:.0%}"
            cards.append(JudgeCard(
                grader_id=self.meta.grader_ids.get(j, j), rubric_hash=self.meta.rubric_hashes.get(j),
                reference="human" if people else "none", people=people, n_labelled=n,
                percent_agreement=num("percent_agreement"), agreement_low=num("agreement_low"),
                agreement_high=num("agreement_high"), kappa=num("cohen_kappa"), kappa_low=num("kappa_low"),
                kappa_high=num("kappa_high"), mean_bias=math.nan, bias_low=math.nan, bias_high=math.nan,
                unscored_rate=unscored, n_items=len(self.scores), verdict=verdict, probes=tuple(probes),
                position_consistency=consistency if math.isfinite(consistency) else None,
                confidence=self.confidence, threshold=math.nan,
                style=style_entry(effects.get(j), effects.get("human") if people else None, models=named,
                                  confidence=self.confidence),
            ))
        return cards

    def figures(self) -> dict[str, Any]:
        """The report's figures: a pairwise report draws none of its own.

        Returns
        -------
        dict
            Empty.
        """
        return {}

    def _repr_html_(self) -> str:
        return self.html(plots=False)

    def html(self, *, plots: bool = True, title: str = "Calibration report") -> Markup:
        """The pairwise report as an HTML fragment.

        Parameters
        ----------
        plots : bool, default True
            Embed the figures.
        title : str, default "Calibration report"
            The heading.

        Returns
        -------
        Markup
            Drawn by :func:`llm_connect.views.pairwise_report_html`.
        """
        return Markup(view("pairwise_report_html")(self, plots=plots, title=title))


#: A pairwise judge's verdict (``judge_many`` of a ``PairwiseJudge``, a pipeline's pairwise unit) as a
#: battle's winner: the baseline is answer A (``model_a``), the candidate answer B (``model_b``).
VERDICT_WINNERS: dict[str, str] = {"baseline": "a", "candidate": "b", "tie": "tie"}


def battle_outcomes(report_or_frame: Any, *, winner: str | None = None, baseline_model: str = "baseline_model",
                    candidate_model: str = "candidate_model", texts: bool = False) -> pd.DataFrame:
    """The pairs as leaderboards read them: one row per pair with a winner.

    Parameters
    ----------
    report_or_frame : PairwiseReport or pandas.DataFrame
        A :class:`PairwiseReport` or its ``scores`` frame, or a :func:`~llm_connect.grading.tournament`'s frame: their
        ``model_a``, ``model_b`` and ``winner`` columns are read without reshaping. Or the frame of
        :func:`~llm_connect.grading.judge_many` with a pairwise judge (:class:`~llm_connect.grading.PairwiseJudge`, both
        orders or one, any ``epochs``; or a pipeline whose final unit is pairwise, its ``verdict`` column), on items
        naming the models in ``baseline_model`` and ``candidate_model`` columns: ``model_a`` is the baseline's model,
        ``model_b`` the candidate's, and the verdict ``baseline``/``candidate``/``tie`` is the winner
        ``a``/``b``/``tie`` (:data:`VERDICT_WINNERS`).
    winner : str, optional
        Whose preference: ``"human"``, an annotator or a judge's name (the ``winner_<name>`` column); ``None``: the
        frame's ``winner`` column (people's when labelled).
    baseline_model, candidate_model : str, default "baseline_model", "candidate_model"
        The model columns of a ``judge_many`` frame.
    texts : bool, default False
        Add the two answers' texts as ``response_a``/``response_b`` (from ``candidate_a``/``candidate_b``,
        ``answer_a``/``answer_b`` or a judge_many frame's ``baseline``/``candidate``), for ``leaderboard(...,
        style=True)``.

    Returns
    -------
    pandas.DataFrame
        ``model_a``, ``model_b``, ``winner`` (``a``/``b``/``tie``; a column of probabilities that A is preferred,
        numbers from 0 to 1 not all 0, 0.5 and 1, is kept as it is and :func:`~llm_connect.stats.leaderboard` fits it by
        expected counts), the texts with ``texts=True``, and the ``conversation_id`` and ``turn`` of a conversation item
        (so ``cluster="auto"`` resamples whole conversations). Rows without a winner (unscored or error judgments,
        unlabelled pairs) are dropped and counted in ``attrs["dropped"]``.

    Raises
    ------
    ValidationError
        When a column is missing, a verdict is not pairwise, or ``report_or_frame`` is neither a report nor a frame.
    """
    frame = report_or_frame.scores if isinstance(report_or_frame, _Report) else report_or_frame
    if not isinstance(frame, pd.DataFrame):
        raise ValidationError(f"battle_outcomes takes a pairwise report or a DataFrame, got {type(frame).__name__}")
    column = "winner" if winner is None else f"winner_{winner}"
    named = all(c in frame.columns for c in ("model_a", "model_b", column))
    judged = winner is None and not named and "verdict" in frame.columns
    if judged:
        missing = [c for c in (baseline_model, candidate_model) if c not in frame.columns]
        if missing:
            raise ValidationError(
                f"a judge_many frame needs the models of both answers to make battles: the column(s) "
                f"{', '.join(missing)} (put them in the items; or pass baseline_model=/candidate_model= naming "
                f"yours); it has {', '.join(map(str, frame.columns))}")
        scored = frame["status"] == "scored" if "status" in frame.columns else frame["verdict"].notna()
        verdicts = frame["verdict"].where(scored)
        odd = sorted({str(v) for v in verdicts.dropna() if v not in VERDICT_WINNERS})
        if odd:
            raise ValidationError(f"the verdict column holds {odd[:5]}, not pairwise verdicts "
                                  f"({', '.join(VERDICT_WINNERS)}): battles need a pairwise judge's frame")
        out = pd.DataFrame({"model_a": frame[baseline_model], "model_b": frame[candidate_model],
                            "winner": verdicts.map(VERDICT_WINNERS)})
    else:
        missing = [c for c in ("model_a", "model_b", column) if c not in frame.columns]
        if missing:
            raise ValidationError(f"battles need the column(s) {', '.join(missing)} (or, for a judge_many frame, "
                                  f"verdict, {baseline_model} and {candidate_model}); "
                                  f"it has {', '.join(map(str, frame.columns))}")
        out = pd.DataFrame({"model_a": frame["model_a"], "model_b": frame["model_b"], "winner": frame[column]})
    if texts:
        sources = [("response_a", "response_b"), ("candidate_a", "candidate_b"), ("answer_a", "answer_b"),
                   *([("baseline", "candidate")] if judged else [])]
        found = next(((x, y) for x, y in sources if x in frame.columns and y in frame.columns), None)
        if found is None:
            raise ValidationError("texts=True needs the two answers' texts: columns candidate_a/candidate_b, "
                                  "answer_a/answer_b or response_a/response_b; it has "
                                  f"{', '.join(map(str, frame.columns))}")
        out["response_a"], out["response_b"] = frame[found[0]].to_numpy(), frame[found[1]].to_numpy()
    for c in CONVERSATION_TAGS:  # comparisons on the turns of one conversation are clustered by it
        if c in frame.columns:
            out[c] = frame[c].to_numpy()
    winners = out["winner"]
    decided = winners.isin(PREFERENCES)
    if is_probability_column(pd.unique(winners.dropna().to_numpy(dtype=object)).tolist()):
        decided |= winners.map(lambda v: (f := real_number(v)) is not None and 0.0 <= f <= 1.0).astype(bool)
    keep = decided & out["model_a"].notna() & out["model_b"].notna()
    result = out[keep.to_numpy(dtype=bool)].reset_index(drop=True)
    result.attrs["dropped"] = int((~keep).sum())
    return result


@share_parameters
def calibrate_pairwise(judges: Judge | Mapping[str, Judge] | Sequence[Judge], items: ItemsLike, *,
                       human: str | None = None, annotators: Sequence[str] = (),
                       codes: str | Mapping[str, Any] | None = None, probes: str | Sequence[str] | None = "auto",
                       probe_limit: int | None = None, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0,
                       concurrency: int = 16, progress: bool = True, run_config: RunConfig | None = None,
                       ledger: BaseLedger | str | os.PathLike[str] | None = None, task_type: str | None = None,
                       budget: BudgetTracker | float | None = None) -> PairwiseReport:
    """Run pairwise judges over pairs and measure them against people (see :class:`PairwiseReport`).

    Parameters
    ----------
    judges : Judge or mapping of str to Judge or sequence of Judge
        Pairwise judges (``PairwiseJudge``), a mapping or a list named by ``grader_id``.
    items : DataFrame or iterable of mapping or str or os.PathLike
        Rows with ``prompt``, ``candidate_a``, ``candidate_b`` (optional ``id``, ``model_a``, ``model_b``).
    human : str, optional
        The people's preference column (default ``human`` when there is one).
    annotators : sequence of str, default ()
        Several annotators' columns (their majority is the people's preference when there is no ``human``).
    codes : str or mapping, optional
        What the values mean (:func:`preference_codes`).
    probes : str or sequence of str, optional, default "auto"
        ``"auto"``/``"position"`` measure the position bias (free with both orders; a one-order judge is run once more
        with the answers swapped, on a seeded sample of ``probe_limit`` pairs), ``None`` for none; other probes do not
        apply to pairs.
    probe_limit : int, optional
        The size of the position probe's seeded sample.
    n_boot : int, default 1000
        Bootstrap resamples of the intervals.
    confidence : float, default 0.95
        The intervals' confidence level.
    seed : int, default 0
        Seeds the bootstrap and the probe sample.
    {concurrency}
    {progress}
    {run_config}
    {ledger}
    {task_type}
    {budget}

    Returns
    -------
    PairwiseReport
        The judges' winners and their agreement with people. The budget covers the position probe too; pairs not
        attempted are ``error`` rows (``status_<judge>``) saying "budget exhausted", without a winner.

    Raises
    ------
    ValidationError
        When a judge is not pairwise, or a preference column is not in the data.

    See Also
    --------
    calibrate : Sends pairwise data here.
    """
    check_confidence(confidence)
    named = _named_judges(judges)
    pairs = pairwise_table(items)
    not_pairwise = [k for k, j in named.items() if not is_pairwise(j)]
    if not_pairwise:
        raise ValidationError(f"judge(s) {', '.join(not_pairwise)} are not pairwise; pairwise data (candidate_a, "
                              "candidate_b) needs pairwise judges such as PairwiseJudge(adapter)")
    probe_names = _pairwise_probes(probes)
    if human is None and "human" in pairs.columns:
        human = "human"
    annotators = list(annotators)
    for column in [human, *annotators]:
        if column is not None and column not in pairs.columns:
            raise ValidationError(f"no preference column {column!r} in the data; it has "
                                  f"{', '.join(map(str, pairs.columns))}")
    n = len(pairs)
    if "id" not in pairs.columns:
        pairs["id"] = list(range(n))
    out = pd.DataFrame(index=range(n))
    out["id"] = pairs["id"].tolist()
    for c in ("prompt", *PAIRWISE_COLUMNS, "model_a", "model_b"):
        if c in pairs.columns:
            out[c] = pairs[c].tolist()
    label_columns = {c for c in [human, *annotators] if c is not None}
    reserved = {"id", "prompt", *PAIRWISE_COLUMNS, "model_a", "model_b", "winner"}
    passthrough = {src: name for src, name in _passthrough_names(
        [c for c in pairs.columns if c not in reserved and c not in label_columns]).items()}
    for src, name in passthrough.items():
        while name in reserved or name.startswith(("winner_", "consistent_")):
            name = "input_" + name
        passthrough[src] = name
        out[name] = pairs[src].tolist()

    labels: dict[str, np.ndarray] = {}
    for column in annotators:
        name = judge_name(column)
        if name in named or name in labels or name == "human":
            raise ValidationError(f"the name {name!r} is used twice (a judge and a preference column)")
        labels[name] = parse_preferences(pairs[column].tolist(), codes=codes, column=str(column))
    if human is not None:
        people = parse_preferences(pairs[human].tolist(), codes=codes, column=str(human))
        labels = {"human": people, **labels}
    elif annotators:
        labels = {"human": majority_preference([labels[judge_name(a)] for a in annotators]), **labels}
    for name, values in labels.items():
        out[f"winner_{name}"] = values

    from ..grading._judge_many import refuse_total_failure

    kwargs: dict[str, Any] = {"concurrency": concurrency, "progress": progress, "run_config": run_config,
                              "budget": as_budget(budget)}  # one tracker for every judge and the probe
    ledger = open_ledger_of(ledger)  # a path: opened once, for every judge
    usage: dict[str, dict[str, Any]] = {}
    for name, judge in named.items():
        batch = _judge_pairs(judge, pairs, ledger=ledger, task_type=task_type, warn_failure=False, **kwargs)
        refuse_total_failure(batch, name, what="calibrate")  # a judge that judged nothing has nothing to measure
        status = batch["status"].tolist()
        scored = np.asarray(status) == "scored"
        verdicts = batch["verdict"].tolist() if "verdict" in batch.columns else [None] * n
        out[f"winner_{name}"] = [(_VERDICT_LABEL.get(str(v)) if ok else None)
                                 for v, ok in zip(verdicts, scored, strict=True)]
        consistent = batch["consistent"].tolist() if "consistent" in batch.columns else [None] * n
        out[f"consistent_{name}"] = [(None if not ok or c is None or c is pd.NA else bool(c))
                                     for c, ok in zip(consistent, scored, strict=True)]
        details = batch["details"].tolist() if "details" in batch.columns else [None] * n
        orders = [_order_labels(d, swapped=False) if ok else {"a_first": None, "b_first": None}
                  for d, ok in zip(details, scored, strict=True)]
        out[f"winner_a_first_{name}"] = [o["a_first"] for o in orders]
        out[f"winner_b_first_{name}"] = [o["b_first"] for o in orders]
        out[f"status_{name}"] = status
        out[f"notes_{name}"] = [(e if s != "scored" else nt)
                                for s, e, nt in zip(status, batch["error"], batch["notes"], strict=True)]
        out[f"reply_{name}"] = batch["raw_reply"].tolist()
        out[f"judge_prompt_{name}"] = batch["judge_prompt"].tolist()
        usage[name] = {
            "scored": int(scored.sum()), "unscored": int((np.asarray(status) == "unscored").sum()),
            "error": int((np.asarray(status) == "error").sum()),
            "judge_cost_usd": float(pd.to_numeric(batch["judge_cost_usd"], errors="coerce").fillna(0).sum()),
            "judge_tokens_in": int(batch["judge_tokens_in"].sum()),
            "judge_tokens_out": int(batch["judge_tokens_out"].sum()),
        }
    if "human" in labels:
        out["winner"] = out["winner_human"]
    elif len(named) == 1:
        out["winner"] = out[f"winner_{next(iter(named))}"]

    bias_results = []
    if "position" in probe_names:
        for name, judge in named.items():
            if not bool(getattr(judge, "both_orders", True)):
                rows = np.arange(n)
                if probe_limit is not None and probe_limit < n:
                    rows = np.sort(np.random.default_rng(seed).choice(n, size=max(0, int(probe_limit)), replace=False))
                sample = pairs.iloc[rows].reset_index(drop=True)
                swapped = _judge_pairs(judge, sample, swapped=True,
                                       desc=f"probe: position \N{EM DASH} {name}", **kwargs)
                b_first = [(_order_labels(d, swapped=True)["b_first"] if s == "scored" else None)
                           for d, s in zip(swapped["details"], swapped["status"], strict=True)]
                b_column = out[f"winner_b_first_{name}"].tolist()
                for i, label in zip(rows, b_first, strict=True):
                    b_column[int(i)] = label
                out[f"winner_b_first_{name}"] = b_column
                a_column, b_labels = _labels(out[f"winner_a_first_{name}"]), _labels(b_column)
                out[f"consistent_{name}"] = [
                    (a == b) if a is not None and b is not None else c
                    for a, b, c in zip(a_column, b_labels, out[f"consistent_{name}"], strict=True)]
            bias_results.append(_position_probe(name, out, n_boot=n_boot, confidence=confidence, seed=seed))

    rows_out = []
    people_labels = out["winner_human"].tolist() if "human" in labels else [None] * n
    for name in named:
        row: dict[str, Any] = {"judge": name, "reference": "human" if "human" in labels else None}
        agree = preference_agreement(out[f"winner_{name}"].tolist(), people_labels, n_boot=n_boot,
                                     confidence=confidence, seed=seed)
        agree["judge_tie_rate"] = agree.pop("tie_rate_a")
        agree["human_tie_rate"] = agree.pop("tie_rate_b")
        row.update(agree)
        row.update(_order_stats(out, name, confidence=confidence))
        rows_out.append(row)
    pairwise = pd.DataFrame(rows_out, columns=list(PAIRWISE_CSV_COLUMNS))

    raters = [*named, *labels]
    ann = {judge_name(a) for a in annotators}
    agreement_rows = []
    for ra, rb in itertools.combinations(raters, 2):
        pair_row: dict[str, Any] = {"judge_a": ra, "judge_b": rb}
        stats = preference_agreement(out[f"winner_{ra}"].tolist(), out[f"winner_{rb}"].tolist(), n_boot=n_boot,
                                     confidence=confidence, seed=seed)
        pair_row.update({k: stats[k] for k in PAIRWISE_AGREEMENT_COLUMNS if k in stats})
        pair_row["ceiling"] = ra in ann and rb in ann
        agreement_rows.append(pair_row)
    pair_agreement = pd.DataFrame(agreement_rows, columns=list(PAIRWISE_AGREEMENT_COLUMNS))

    scored_items = ScoredItems(frame=out, judges=list(named), labels=list(labels),
                               passthrough=list(passthrough.values()), human="human" if "human" in labels else None,
                               annotators=[judge_name(a) for a in annotators],
                               grader_ids={k: str(j.grader_id) for k, j in named.items()},
                               rubric_hashes={k: _rubric_hash(j) for k, j in named.items()},
                               judge_families={k: None for k in named}, pairwise={k: True for k in named}, usage=usage)
    bias = BiasReport(bias_results, math.nan) if probe_names else None
    return PairwiseReport(scores=out, agreement=AgreementTable(pairs=[], threshold=math.nan, confidence=confidence),
                          bias=bias, n_boot=n_boot, confidence=confidence, seed=seed,
                          scored=replace(scored_items, frame=out), pairwise=pairwise, pair_agreement=pair_agreement)


def _rubric_hash(judge: Any) -> str | None:
    from ..grading import judge_abilities

    return judge_abilities(judge).rubric_hash


def _pairwise_probes(probes: str | Sequence[str] | None) -> list[str]:
    if probes is None:
        return []
    if isinstance(probes, str):
        if probes.strip().lower() in ("auto", "position"):
            return ["position"]
        names = [p.strip().lower() for p in probes.split(",") if p.strip()]
    else:
        names = [str(p).strip().lower() for p in probes if str(p).strip()]
    names = [p for p in names if p != "none"]
    other = [p for p in names if p not in ("auto", "position")]
    if other:
        raise ValidationError(f"probe(s) {', '.join(other)} do not apply to pairwise data (they change one answer "
                              "of a graded item); a pairwise run has the position probe only: probes='position'")
    return ["position"] if names else []


def _labels(column: Any) -> list[str | None]:
    """A column's values as preference labels, ``None`` for anything else (NaN, None)."""
    return [v if isinstance(v, str) and v in PREFERENCES else None for v in column]


def _order_stats(out: pd.DataFrame, name: str, *, confidence: float) -> dict[str, Any]:
    """Consistency across orders and the first-shown win rate of one judge, from its per-order winners."""
    a_first = _labels(out[f"winner_a_first_{name}"])
    b_first = _labels(out[f"winner_b_first_{name}"])
    both = [(a, b) for a, b in zip(a_first, b_first, strict=True) if a is not None and b is not None]
    consistency = sum(a == b for a, b in both) / len(both) if both else math.nan
    first_wins = sum(a == "a" for a in a_first) + sum(b == "b" for b in b_first)
    decided = sum(a in ("a", "b") for a in a_first) + sum(b in ("a", "b") for b in b_first)
    return {"n_both_orders": len(both), "consistency": consistency,
            **position_bias(first_wins, decided, confidence=confidence)}


def _position_probe(name: str, out: pd.DataFrame, *, n_boot: int, confidence: float, seed: int) -> ProbeResult:
    """The ``position`` probe of a pairwise run, for ``bias.csv``: answer B's score (1 won, 0 lost, 0.5 tie) when shown
    second (``original``) and when shown first (``perturbed``), over the pairs judged both ways; ``flip_rate``: the
    share whose two orders disagreed (1 - consistency)."""
    worth = {"a": 0.0, "tie": 0.5, "b": 1.0}
    a_first = _labels(out[f"winner_a_first_{name}"])
    b_first = _labels(out[f"winner_b_first_{name}"])
    both = [(a, b) if a is not None and b is not None else (None, None) for a, b in zip(a_first, b_first, strict=True)]
    original: np.ndarray = np.array([math.nan if a is None else worth[a] for a, _ in both], dtype=np.float64)
    perturbed: np.ndarray = np.array([math.nan if b is None else worth[b] for _, b in both], dtype=np.float64)
    stats = paired_shift(original, perturbed, threshold=0.5, n_boot=n_boot, confidence=confidence, seed=seed)
    keep = np.isfinite(original) & np.isfinite(perturbed)
    if keep.any():
        flips = original[keep] != perturbed[keep]
        stats = replace(stats, flip_rate=float(flips.mean()), flips_up=int((perturbed[keep] > original[keep]).sum()),
                        flips_down=int((perturbed[keep] < original[keep]).sum()))
    else:
        stats = replace(stats, note="no pair was judged in both orders")
    detail = pd.DataFrame({"id": out["id"].tolist(), "candidate": out["candidate_b"].tolist(),
                           "perturbed_candidate": out["candidate_b"].tolist(), "original": original,
                           "perturbed": perturbed})
    detail["shift"] = detail["perturbed"] - detail["original"]
    return ProbeResult(name, "position", stats, detail, 0.5)
