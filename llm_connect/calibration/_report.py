"""The :class:`CalibrationReport` that ``calibrate()`` returns (HTML, widget, CSV files), and what it shares with a
pairwise report (:class:`_Report`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._display import view
from .._html import Markup
from ._agreement import AgreementTable, pair_agreement, threshold_sweep
from ._bias import BiasReport
from ._diagnostics import (
    LengthControlled,
    LengthEffect,
    SelfPreference,
    disagreements,
    length_controlled_scores,
    length_effect,
    score_column,
    self_preference,
)
from ._runner import ScoredItems

__all__ = ["AGREEMENT_CSV_COLUMNS", "BIAS_CSV_COLUMNS", "PLOTS_BY_KIND", "CalibrationReport", "parquet_ready",
           "score_kind"]

AGREEMENT_CSV_COLUMNS = ("judge_a", "judge_b", "n", "percent_agreement", "cohen_kappa", "kappa_low", "kappa_high",
                         "alpha_interval", "spearman")
BIAS_CSV_COLUMNS = ("judge", "probe", "n", "mean_shift", "shift_low", "shift_high", "p_value", "flip_rate")

#: The per-judge plots of the report, by the kind of scores the judge gives (:func:`score_kind`).
#: ``scatter`` (the judge against the reference), ``reliability`` (how often the reference says
#: yes at each score), ``threshold sweep`` (agreement at each threshold) and ``length`` (score
#: against answer length). A 0/1 judge has no threshold between its two scores to sweep, and its
#: scatter against the labels only shows the counts its agreement table already gives.
PLOTS_BY_KIND: dict[str, tuple[str, ...]] = {
    "graded": ("scatter", "reliability", "threshold sweep", "length"),
    "binary": ("reliability", "length"),
    "none": (),
}


def score_kind(scores: Any) -> str:
    """``"binary"`` when the scores (NaN ignored) are all 0 or 1, ``"graded"`` when some are not, ``"none"`` when there
    is none."""
    values = pd.to_numeric(pd.Series(scores), errors="coerce").dropna().to_numpy(dtype=float)
    if not len(values):
        return "none"
    return "binary" if bool(np.isin(values, (0.0, 1.0)).all()) else "graded"


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as Parquet can hold it: a text column stays text, a column of numbers stays numbers; an object column
    mixing kinds Arrow cannot put in one type (numbers and text, say) becomes text (nulls stay null)."""
    import pyarrow as pa

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        try:
            pa.array(out[column].tolist(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
            out[column] = out[column].map(lambda v: None if _is_null(v) else str(v)).astype(object)
    return out


@dataclass
class _Report(ABC):
    """What a calibration report and a pairwise report share: one run of judges over one dataset.

    ``scores``: one row per item (or pair); ``agreement``: the agreement table; ``bias``: the probes' results (``None``
    if none ran); ``n_boot``, ``confidence``, ``seed``: the intervals' settings; ``scored``: the judges' metadata
    (names, grader ids, rubric hashes, families, usage) as :class:`~llm_connect.calibration.ScoredItems`, passed
    explicitly by :func:`calibrate` (read from ``scores.attrs`` only for a report built by hand). Each kind of report
    says what its cards, its tables and its page are.
    """

    scores: pd.DataFrame
    agreement: AgreementTable
    bias: BiasReport | None = None
    n_boot: int = 1000
    confidence: float = 0.95
    seed: int = 0
    scored: ScoredItems | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.scored is None:
            self.scored = ScoredItems.from_frame(self.scores)

    @property
    def meta(self) -> ScoredItems:
        """The judges' metadata (see :class:`~llm_connect.calibration.ScoredItems`)."""
        assert self.scored is not None  # set in __post_init__
        return self.scored

    @property
    def judges(self) -> list[str]:
        """The machine judges (those that were run)."""
        return list(self.meta.judges)

    @property
    def labels(self) -> list[str]:
        """The human label columns scored as judges (``human`` and annotators)."""
        return list(self.meta.labels)

    @abstractmethod
    def judge_cards(self) -> list[Any]:
        """A :class:`~llm_connect.cards.JudgeCard` per machine judge."""

    @abstractmethod
    def scores_table(self) -> pd.DataFrame:
        """What ``scores.csv`` and ``scores.parquet`` hold: one row per item, in input order."""

    @abstractmethod
    def html(self, *, plots: bool = True, title: str = "Calibration report") -> Markup:
        """The report as an HTML fragment."""

    def verdicts(self) -> list[str]:
        """One line per machine judge saying what to conclude (the rule: ``llm_connect.cards._verdicts``)."""
        return [c.verdict for c in self.judge_cards()]

    def save_cards(self, ledger_or_registry: Any) -> list[Any]:
        """Save the judge cards in a registry (or the one beside a ledger); returns the cards."""
        from ..cards import JudgeCardRegistry

        registry = (ledger_or_registry if isinstance(ledger_or_registry, JudgeCardRegistry)
                    else JudgeCardRegistry.for_ledger(ledger_or_registry))
        cards = self.judge_cards()
        registry.save(cards)
        return cards

    def bias_frame(self) -> pd.DataFrame:
        """What ``bias.csv`` holds: one row per judge and probe (:data:`BIAS_CSV_COLUMNS` first)."""
        if self.bias is None:
            return pd.DataFrame(columns=list(BIAS_CSV_COLUMNS))
        frame = self.bias.frame
        first = list(BIAS_CSV_COLUMNS)
        return frame[first + [c for c in frame.columns if c not in first]]

    def to_parquet(self, path: str | Path) -> Path:
        """Write :meth:`scores_table` to a Parquet file (numbers stay numbers, blanks stay null) and return its path.
        Text is written as it is, not neutralised as in ``scores.csv``: Parquet is read by code (pandas, DuckDB, Spark),
        not opened by a spreadsheet. A column holding values of several kinds (numbers and text, say) is written as
        text."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        parquet_ready(self.scores_table()).to_parquet(p, index=False)
        return p

    def to_html(self, path: str | Path, *, title: str = "Calibration report") -> Path:
        """Write one self-contained HTML file (figures embedded) and return its path."""
        return Path(view("save_report_html")(self, path, title=title))


@dataclass
class CalibrationReport(_Report):
    """Scores of several judges on one dataset, their agreement, and their biases.

    Methods compute further diagnostics on demand; ``_repr_html_``, :meth:`to_html`, :meth:`view` and :meth:`widget`
    show it all.

    Parameters
    ----------
    scores : DataFrame
        One row per item (see :func:`score_items`).
    agreement : AgreementTable
        Every pair of judges and labels.
    bias : BiasReport, optional
        The probes' results (``None`` if none ran).
    n_boot, confidence, seed : int, float, int
        The intervals' settings.
    scored : ScoredItems, optional
        The judges' metadata (see :class:`_Report`).
    threshold : float, default 0.5
        The score at or above which a judge says "yes".
    thresholds : mapping of str to float, optional
        That score per judge.
    by_group, label_design, selective : optional
        The attributes below.

    Attributes
    ----------
    by_group : GroupBreakdown or None
        A :class:`~llm_connect.calibration._groups.GroupBreakdown`: agreement and bias per group (``calibrate(...,
        by=COLUMN)``), or ``None`` without ``by``.
    label_design : array of bool or None
        The label design of the estimates: a boolean mask of the rows whose human labels the quality estimates may use
        (e.g. the random sample the demo pretends people labelled), so the report's estimates, the command line's and
        ``estimates.csv`` are the same figures; ``None``: every label.
    selective : dict of str to SelectiveJudge
        The judges calibrated as selective judges (``calibrate(..., selective=(alpha, delta))``), by name:
        :class:`~llm_connect.grading.SelectiveJudge` objects with their cut-offs, ready to judge fresh items (see
        :mod:`llm_connect.calibration._selective`); empty without ``selective``.

    See Also
    --------
    calibrate : Makes one.
    """

    threshold: float = 0.5
    thresholds: Mapping[str, float] = field(default_factory=dict)
    by_group: Any = field(default=None, repr=False)
    label_design: Any = field(default=None, repr=False)
    selective: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- who is who ----------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Every judge with a ``score_<name>`` column, machine judges first."""
        have = [c[len("score_"):] for c in self.scores.columns if isinstance(c, str) and c.startswith("score_")]
        ordered = [n for n in [*self.judges, *self.labels] if n in have]
        return ordered + [n for n in have if n not in ordered]

    @property
    def reference(self) -> str | None:
        """What the judges are checked against: human labels (``human``, else the first annotator),
        else the exact-match judge (or another judge without a model), else none."""
        from ._cards import card_reference

        return card_reference(self)[0]

    def threshold_of(self, judge: str) -> float:
        """A judge's pass threshold.

        Parameters
        ----------
        judge : str
            The judge's or label's name.

        Returns
        -------
        float
            Its threshold in :attr:`thresholds`, else :attr:`threshold`.
        """
        return float(self.thresholds.get(judge, self.threshold))

    # -- diagnostics on demand -------------------------------------------------------------

    def pair(self, judge_a: str, judge_b: str, *, threshold: float | None = None, n_boot: int | None = None) -> Any:
        """Agreement of two judges, recomputed (at another threshold, say) with the report's settings.

        Parameters
        ----------
        judge_a, judge_b : str
            The two judges or labels (``judge_b`` the reference).
        threshold : float, optional
            One pass threshold for both; ``None``: each one's own (:meth:`threshold_of`).
        n_boot : int, optional
            Bootstrap resamples; ``None``: the report's.

        Returns
        -------
        PairAgreement
            As :func:`pair_agreement` gives it, clustered as the report's table was.
        """
        t = self.threshold_of(judge_a) if threshold is None else threshold
        tb = self.threshold_of(judge_b) if threshold is None else threshold
        return pair_agreement(self.scores[score_column(self.scores, judge_a)],
                              self.scores[score_column(self.scores, judge_b)], judge_a=judge_a, judge_b=judge_b,
                              threshold=t, threshold_b=tb, n_boot=self.n_boot if n_boot is None else n_boot,
                              confidence=self.confidence, seed=self.seed, cluster=self.cluster_ids)

    @property
    def cluster_ids(self) -> pd.Series | None:
        """The cluster (conversation) of each row of :attr:`scores`, as the agreement table clustered them
        (``calibrate(..., cluster=...)``), or ``None`` for independent rows."""
        column = getattr(self.agreement, "cluster", None)
        if column is None or column not in self.scores.columns:
            return None
        return self.scores[column].reset_index(drop=True)

    def sweep(self, judge: str, reference: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Agreement of a judge with a reference at every threshold (:func:`~llm_connect.stats.threshold_sweep`).

        Parameters
        ----------
        judge : str
            The judge's name.
        reference : str, optional
            What it is checked against; ``None``: :attr:`reference`.
        **kwargs
            Passed to :func:`~llm_connect.stats.threshold_sweep` (``reference_threshold`` defaults to the reference's
            own).

        Returns
        -------
        pandas.DataFrame
            One row per threshold.

        Raises
        ------
        ValueError
            When there is no reference.
        """
        ref = reference or self.reference
        if ref is None:
            raise ValueError("no reference judge: pass reference=")
        kwargs.setdefault("reference_threshold", self.threshold_of(ref))
        return threshold_sweep(self.scores[score_column(self.scores, judge)],
                               self.scores[score_column(self.scores, ref)], **kwargs)

    def length_effect(self, judge: str, *, control: str | Sequence[str] | None = "auto", **kwargs: Any) -> LengthEffect:
        """:func:`length_effect` on the report's scores, controlling for :attr:`reference` by default.

        Parameters
        ----------
        judge : str
            The judge's name.
        control : str or sequence of str or None, default "auto"
            Judges or labels held fixed; ``"auto"``: :attr:`reference` (unless it is ``judge``), ``None``: none.
        **kwargs
            Passed to :func:`length_effect` (``length``, ``transform``, ``confidence``).

        Returns
        -------
        LengthEffect
            The length coefficient with its interval.
        """
        if control == "auto":
            control = self.reference if self.reference not in (None, judge) else None
        return length_effect(self.scores, judge, control=control, **kwargs)

    def length_controlled(self, judge: str, *, control: str | Sequence[str] | None = "auto",
                          **kwargs: Any) -> LengthControlled:
        """:func:`length_controlled_scores` on the report's scores, controlling for :attr:`reference` by default.

        Parameters
        ----------
        judge : str
            The judge's name.
        control : str or sequence of str or None, default "auto"
            Judges or labels held fixed; ``"auto"``: :attr:`reference` (unless it is ``judge``), ``None``: none.
        **kwargs
            Passed to :func:`length_controlled_scores` (``by``, ``confidence``).

        Returns
        -------
        LengthControlled
            The length-controlled scores.
        """
        if control == "auto":
            control = self.reference if self.reference not in (None, judge) else None
        return length_controlled_scores(self.scores, judge, control=control, **kwargs)

    def self_preference(self, judge: str, *, family: str | None = None, label: str | None = None,
                        **kwargs: Any) -> SelfPreference:
        """:func:`self_preference` on the report's scores, with the report's interval settings.

        Parameters
        ----------
        judge : str
            The judge's name.
        family : str, optional
            Its model family; ``None``: the one the run recorded.
        label : str, optional
            What stands for correctness; ``None``: :attr:`reference`, else the judge itself.
        **kwargs
            Passed to :func:`self_preference` (``threshold``, default the label's own).

        Returns
        -------
        SelfPreference
            The own-minus-other difference with its interval.
        """
        ref = label or self.reference or judge
        kwargs.setdefault("threshold", self.threshold_of(ref))
        family = family or self.meta.judge_families.get(judge)
        return self_preference(self.scores, judge, family=family, label=ref, n_boot=self.n_boot,
                               confidence=self.confidence, seed=self.seed, **kwargs)

    # -- decisions --------------------------------------------------------------------------

    def judge_cards(self) -> list[Any]:
        """A judge card per machine judge, against :attr:`reference`.

        Returns
        -------
        list of JudgeCard
            In the order of :attr:`judges`, with the probes, groups, reliability and selective figures the run measured;
            a machine judge that is itself the reference (exact match, without people's labels) gets none.
        """
        from ._cards import cards_from_report

        return cards_from_report(self)

    def estimates(self, *, judge: str | None = None, by: str | None = "candidate_model") -> pd.DataFrame | None:
        """Quality of the candidates from a judge and the human labels (PPI++, human-only and judge-only).

        Parameters
        ----------
        judge : str, optional
            The machine judge whose scores are corrected; ``None``: the one with the highest kappa against the
            people's labels (else the first machine judge).
        by : str or None, default "candidate_model"
            One estimate per value of this column (when the data has it); ``None``: one overall.

        Returns
        -------
        pandas.DataFrame or None
            :func:`~llm_connect.stats.estimate_quality`'s rows after a ``judge`` column, on the labels
            :attr:`label_design` allows (the others count as unlabelled), clustered as :attr:`cluster_ids`; ``None``
            without human labels or without a machine judge.
        """
        from ._cards import report_estimates

        return report_estimates(self, judge=judge, by=by, labelled=self.label_design)

    def disagreements(self, judge_a: str, judge_b: str, *, top: int = 20) -> pd.DataFrame:
        """:func:`disagreements` on the report's scores: the items where two judges differ most.

        Parameters
        ----------
        judge_a, judge_b : str
            The two judges.
        top : int, default 20
            How many items.

        Returns
        -------
        pandas.DataFrame
            The items with both scores and their ``gap``, largest first.
        """
        return disagreements(self.scores, judge_a, judge_b, top=top)

    # -- tables for files ------------------------------------------------------------------

    def scores_table(self) -> pd.DataFrame:
        """What ``scores.csv`` and ``scores.parquet`` hold.

        Returns
        -------
        pandas.DataFrame
            One row per item, in input order. Columns: ``id``, ``prompt``, ``baseline``, ``candidate``,
            ``candidate_model`` (when the data names any), the input's other columns (groups such as ``topic``), one
            ``score_<name>`` per judge and label (NaN where the judge could not score the row, never 0), then for each
            machine judge ``status_<judge>`` (``scored``/``unscored``/``error``), ``notes_<judge>`` (its notes, or why
            the row is not scored), ``reply_<judge>`` (its raw reply; empty for a judge that makes no LLM call) and,
            for a selective judge (``calibrate(..., selective=...)``), ``confidence_<judge>``.
            Values are as the run saw them (not neutralised: the CLI passes the table through
            :func:`~llm_connect._textsafe.csv_safe_frame` for the CSV).
        """
        s = self.scores
        cols = ["id", *[c for c in ("prompt", "baseline", "candidate") if c in s.columns]]
        if "candidate_model" in s.columns and s["candidate_model"].notna().any():
            cols.append("candidate_model")
        cols += [c for c in self.meta.passthrough if c in s.columns]
        cols += [f"score_{n}" for n in self.names]
        for j in self.judges:
            cols += [c for c in (f"status_{j}", f"notes_{j}", f"reply_{j}", f"confidence_{j}") if c in s.columns]
        return s[list(dict.fromkeys(cols))].copy()

    def agreement_frame(self) -> pd.DataFrame:
        """What ``agreement.csv`` holds.

        Returns
        -------
        pandas.DataFrame
            One row per pair of judges (the headline columns first); with :attr:`selective`, a selective row per judge
            after them (its ``selective`` column says ``alpha=...,delta=...``).
        """
        frame = self.agreement.frame
        first = [c for c in AGREEMENT_CSV_COLUMNS if c in frame.columns]
        frame = frame[first + [c for c in frame.columns if c not in first]]
        rows = self.selective_frame()
        if len(rows):
            frame = pd.concat([frame.assign(selective=""), rows], ignore_index=True)
        return frame

    def selective_frame(self) -> pd.DataFrame:
        """The selective row of each judge (``calibrate(..., selective=...)``).

        Returns
        -------
        pandas.DataFrame
            Per judge: coverage, agreement on the judged items, cut-off and the guarantee; empty without ``selective``.
        """
        from ._selective import selective_frame

        return selective_frame(self.selective, self.reference)

    def to_csv(self, directory: str | Path) -> dict[str, Path]:
        """Write the report's tables as CSV files, text cells neutralised against spreadsheet formulas.

        Parameters
        ----------
        directory : str or os.PathLike
            The folder, created when missing; files of the same names are replaced.

        Returns
        -------
        dict of str to Path
            ``scores``, ``agreement``, ``bias`` and, with :attr:`by_group`, ``agreement_by_group`` and
            ``bias_by_group``: each file's path.
        """
        from .._textsafe import csv_safe_frame

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"scores": out / "scores.csv", "agreement": out / "agreement.csv", "bias": out / "bias.csv"}
        csv_safe_frame(self.scores_table()).to_csv(paths["scores"], index=False)
        csv_safe_frame(self.agreement_frame()).to_csv(paths["agreement"], index=False)
        csv_safe_frame(self.bias_frame()).to_csv(paths["bias"], index=False)
        if self.by_group is not None:  # calibrate(..., by=COLUMN): agreement_by_group.csv, bias_by_group.csv
            for key, table in (("agreement_by_group", self.by_group.agreement_frame()),
                               ("bias_by_group", self.by_group.bias_frame())):
                paths[key] = out / f"{key}.csv"
                csv_safe_frame(table).to_csv(paths[key], index=False)
        return paths

    def summary(self) -> pd.DataFrame:
        """The judges at a glance.

        Returns
        -------
        pandas.DataFrame
            One row per machine judge: ``judge``, ``scored``, ``mean_score``, ``threshold`` (and how it was chosen:
            ``threshold_selection``), ``yes_rate`` (the share of its scored items it said yes to), ``abstained``,
            agreement with the reference (``reference``, ``n``, ``agreement``, ``kappa`` and its interval), ``weak``
            (why it is flagged weak, or empty; see :func:`~llm_connect.cards.weak_judge_reasons`) and its largest bias
            (``largest_bias``, ``shift``, ``p_value``), the columns that apply.
        """
        from ..cards import weak_judge_reasons
        from ._cards import card_reference

        ref, people = card_reference(self)
        chosen = getattr(self.agreement, "chosen", {})
        rows = []
        for j in self.judges:
            score = self.scores[f"score_{j}"]
            said = score.dropna() >= self.threshold_of(j)
            row: dict[str, Any] = {"judge": j, "scored": int(score.notna().sum()),
                                   "mean_score": float(score.mean()), "threshold": self.threshold_of(j),
                                   "yes_rate": float(said.mean()) if len(said) else float("nan")}
            abstained = (self.meta.usage.get(j) or {}).get("abstained", 0)
            if abstained:  # a selective judge run as itself: the items it abstained on have no score
                row["abstained"] = int(abstained)
            if j in chosen:
                row["threshold_selection"] = chosen[j].describe()
            kappa_low = kappa_high = float("nan")
            if ref and ref != j:
                p = self.agreement.pair(j, ref)
                kappa_low, kappa_high = p["cohen_kappa"].low, p["cohen_kappa"].high
                row.update({"reference": ref, "n": p.n, "agreement": p["percent_agreement"].value,
                            "kappa": p["cohen_kappa"].value, "kappa_low": kappa_low, "kappa_high": kappa_high})
            row["weak"] = weak_judge_reasons(kappa_low=kappa_low, kappa_high=kappa_high, yes_rate=row["yes_rate"],
                                             people=people, confidence=self.confidence)
            if self.bias is not None:
                mine = [r for r in self.bias.results if r.judge == j and r.stats.n]
                if mine:
                    worst = max(mine, key=lambda r: abs(r.stats.mean_shift))
                    row.update({"largest_bias": worst.probe, "shift": worst.stats.mean_shift,
                                "p_value": worst.stats.p_value})
            rows.append(row)
        return pd.DataFrame(rows)

    # -- figures ----------------------------------------------------------------------------

    def score_kind(self, judge: str) -> str:
        """The kind of scores a judge gave, which decides its plots.

        Parameters
        ----------
        judge : str
            The judge's name.

        Returns
        -------
        {"binary", "graded", "none"}
            ``"binary"`` when every score is 0 or 1 (exact match, a yes/no verdict), ``"graded"`` when some are not,
            ``"none"`` when it scored no row.
        """
        return score_kind(self.scores[score_column(self.scores, judge)])

    def plots_for(self, judge: str) -> tuple[str, ...]:
        """The per-judge plots the report draws for a judge.

        Parameters
        ----------
        judge : str
            The judge's name.

        Returns
        -------
        tuple of str
            :data:`PLOTS_BY_KIND` of its :meth:`score_kind`; those against the reference only when there is one other
            than itself.
        """
        ref = self.reference
        return tuple(p for p in PLOTS_BY_KIND[self.score_kind(judge)]
                     if p == "length" or (ref is not None and ref != judge))

    def figures(self) -> dict[str, Any]:
        """The report's figures, drawn by :func:`llm_connect.views.report_figures`.

        Each judge gets the plots that carry information for its kind of scores (:meth:`plots_for`): a 0/1 judge has no
        threshold to sweep and its scatter against the labels is a jittered 2x2 table, so it gets neither.

        Returns
        -------
        dict of str to matplotlib.figure.Figure
            By name; made outside pyplot.
        """
        return dict(view("report_figures")(self))

    # -- HTML -------------------------------------------------------------------------------

    def html(self, *, plots: bool = True, title: str = "Calibration report") -> Markup:
        """The report as an HTML fragment, drawn by :func:`llm_connect.views.report_html`.

        Parameters
        ----------
        plots : bool, default True
            Embed the figures as PNGs.
        title : str, default "Calibration report"
            The heading.

        Returns
        -------
        Markup
            The tables (and figures).
        """
        return Markup(view("report_html")(self, plots=plots, title=title))

    def _repr_html_(self) -> str:
        return self.html(plots=True)

    # -- widget -------------------------------------------------------------------------------

    def view(self, *, title: str = "Judgments", height: int = 760) -> Any:
        """Every judgment in one page: a row per item (prompt, reference, candidate, each judge's score and status, the
        human labels), filters by judge, status, disagreement with people and probe, sorting by disagreement, and per
        item the exact prompt each judge saw and its raw reply.

        ``llm-connect view OUT_DIR`` shows the same page from the ``judgments.jsonl`` that ``calibrate`` writes.

        Parameters
        ----------
        title : str, default "Judgments"
            The page's title.
        height : int, default 760
            The iframe's height in a notebook, in pixels.

        Returns
        -------
        JudgmentViewer
            A notebook shows it in a sandboxed iframe; ``.save(path)`` writes the self-contained page.
        """
        return view("judgment_viewer")(self, title=title, height=height)

    def widget(self) -> Any:
        """An ipywidgets explorer: pick two judges, move the threshold, read the bias tabs, and browse the items where
        the two judges disagree most. The controls only call this report's pure functions and the plot functions. The
        returned box has a ``controls`` attribute naming its parts (``judge_a``, ``judge_b``, ``threshold``,
        ``summary``, ``scatter``, ``sweep``, ``disagreements``, ``bias_tabs``, ``top``).

        Returns
        -------
        ipywidgets.VBox
            The explorer, built by :func:`llm_connect.views.report_widget`.
        """
        return view("report_widget")(self)
