"""``calibrate()`` and the :class:`CalibrationReport` it returns (HTML, widget, CSV files)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core import RunConfig
from ._agreement import AgreementTable, agreement_table, pair_agreement, threshold_sweep
from ._bias import BiasReport, run_probes
from ._diagnostics import (
    LengthControlled,
    LengthEffect,
    SelfPreference,
    _score_column,
    disagreements,
    length_controlled_scores,
    length_effect,
    self_preference,
)
from .._html import Markup, fmt, frame_html, html_format, join, new_figure, png_bytes, png_data_uri
from ._runner import ScoredItems, _named_judges, score_judges

__all__ = ["AGREEMENT_CSV_COLUMNS", "BIAS_CSV_COLUMNS", "PLOTS_BY_KIND", "CalibrationReport", "calibrate",
           "parquet_ready", "score_kind"]

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
    """``"binary"`` when the scores (NaN ignored) are all 0 or 1, ``"graded"`` when some are not,
    ``"none"`` when there is none."""
    values = pd.to_numeric(pd.Series(scores), errors="coerce").dropna().to_numpy(dtype=float)
    if not len(values):
        return "none"
    return "binary" if bool(np.isin(values, (0.0, 1.0)).all()) else "graded"


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def parquet_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as Parquet can hold it: a text column stays text, a column of numbers stays numbers;
    an object column mixing kinds Arrow cannot put in one type (numbers and text, say) becomes text
    (nulls stay null)."""
    import pyarrow as pa

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype != object:
            continue
        try:
            pa.array(out[column].tolist(), from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
                OverflowError):
            out[column] = out[column].map(lambda v: None if _is_null(v) else str(v)).astype(object)
    return out


@dataclass
class CalibrationReport:
    """Scores of several judges on one dataset, their agreement, and their biases.

    ``scores``: one row per item (see :func:`score_items`); ``agreement``: every
    pair of judges and labels; ``bias``: the probes' results (``None`` if none ran);
    ``scored``: the judges' metadata (names, grader ids, rubric hashes, families,
    usage) as :class:`~llm_connect.calibration.ScoredItems`, passed explicitly by
    :func:`calibrate` (read from ``scores.attrs`` only for a report built by hand).
    Methods compute further diagnostics on demand; ``_repr_html_``,
    :meth:`to_html` and :meth:`widget` show it all.
    """

    scores: pd.DataFrame
    agreement: AgreementTable
    bias: BiasReport | None = None
    threshold: float = 0.5
    thresholds: Mapping[str, float] = field(default_factory=dict)
    n_boot: int = 1000
    confidence: float = 0.95
    seed: int = 0
    scored: ScoredItems | None = field(default=None, repr=False)
    #: Agreement and bias per group (``calibrate(..., by=COLUMN)``): a
    #: :class:`~llm_connect.calibration._groups.GroupBreakdown`, or ``None`` without ``by``.
    by_group: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.scored is None:
            self.scored = ScoredItems.from_frame(self.scores)

    @property
    def meta(self) -> ScoredItems:
        """The judges' metadata (see :class:`~llm_connect.calibration.ScoredItems`)."""
        assert self.scored is not None  # set in __post_init__
        return self.scored

    # -- who is who ----------------------------------------------------------------------

    @property
    def judges(self) -> list[str]:
        """The machine judges (those that were run)."""
        return list(self.meta.judges)

    @property
    def labels(self) -> list[str]:
        """The human label columns scored as judges (``human`` and annotators)."""
        return list(self.meta.labels)

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
        return float(self.thresholds.get(judge, self.threshold))

    # -- diagnostics on demand -------------------------------------------------------------

    def pair(self, judge_a: str, judge_b: str, *, threshold: float | None = None, n_boot: int | None = None) -> Any:
        """Agreement of two judges, recomputed (e.g. at another threshold)."""
        t = self.threshold_of(judge_a) if threshold is None else threshold
        tb = self.threshold_of(judge_b) if threshold is None else threshold
        return pair_agreement(self.scores[_score_column(self.scores, judge_a)],
                              self.scores[_score_column(self.scores, judge_b)], judge_a=judge_a, judge_b=judge_b,
                              threshold=t, threshold_b=tb, n_boot=self.n_boot if n_boot is None else n_boot,
                              confidence=self.confidence, seed=self.seed)

    def sweep(self, judge: str, reference: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """:func:`threshold_sweep` of ``judge`` against ``reference`` (default :attr:`reference`)."""
        ref = reference or self.reference
        if ref is None:
            raise ValueError("no reference judge: pass reference=")
        kwargs.setdefault("reference_threshold", self.threshold_of(ref))
        return threshold_sweep(self.scores[_score_column(self.scores, judge)],
                               self.scores[_score_column(self.scores, ref)], **kwargs)

    def length_effect(self, judge: str, *, control: str | Sequence[str] | None = "auto", **kwargs: Any) -> LengthEffect:
        """:func:`length_effect`, controlling for :attr:`reference` by default."""
        if control == "auto":
            control = self.reference if self.reference not in (None, judge) else None
        return length_effect(self.scores, judge, control=control, **kwargs)

    def length_controlled(self, judge: str, *, control: str | Sequence[str] | None = "auto",
                          **kwargs: Any) -> LengthControlled:
        """:func:`length_controlled_scores`, controlling for :attr:`reference` by default."""
        if control == "auto":
            control = self.reference if self.reference not in (None, judge) else None
        return length_controlled_scores(self.scores, judge, control=control, **kwargs)

    def self_preference(self, judge: str, *, family: str | None = None, label: str | None = None,
                        **kwargs: Any) -> SelfPreference:
        """:func:`self_preference`, stratified by :attr:`reference` by default."""
        ref = label or self.reference or judge
        kwargs.setdefault("threshold", self.threshold_of(ref))
        family = family or self.meta.judge_families.get(judge)
        return self_preference(self.scores, judge, family=family, label=ref, n_boot=self.n_boot,
                               confidence=self.confidence, seed=self.seed, **kwargs)

    # -- decisions --------------------------------------------------------------------------

    def judge_cards(self) -> list[Any]:
        """A :class:`~llm_connect.calibration.JudgeCard` per machine judge (see ``cards_from_report``)."""
        from ._cards import cards_from_report

        return cards_from_report(self)

    def verdicts(self) -> list[str]:
        """One line per machine judge saying what to conclude (the rule: ``llm_connect.calibration._cards``)."""
        return [c.verdict for c in self.judge_cards()]

    def save_cards(self, ledger_or_registry: Any) -> list[Any]:
        """Save the judge cards in a registry (or the one beside a ledger); returns the cards."""
        from ._cards import JudgeCardRegistry

        registry = (ledger_or_registry if isinstance(ledger_or_registry, JudgeCardRegistry)
                    else JudgeCardRegistry.for_ledger(ledger_or_registry))
        cards = self.judge_cards()
        registry.save(cards)
        return cards

    def estimates(self, *, judge: str | None = None, by: str | None = "candidate_model") -> pd.DataFrame | None:
        """Quality of the candidates (per model) from a judge and the human labels: PPI++, human-only and
        judge-only estimates (``estimate_quality``); ``None`` without human labels."""
        from ._cards import report_estimates

        return report_estimates(self, judge=judge, by=by)

    def disagreements(self, judge_a: str, judge_b: str, *, top: int = 20) -> pd.DataFrame:
        return disagreements(self.scores, judge_a, judge_b, top=top)

    # -- tables for files ------------------------------------------------------------------

    def scores_table(self) -> pd.DataFrame:
        """What ``scores.csv`` and ``scores.parquet`` hold: one row per item, in input order.

        Columns: ``id``, ``prompt``, ``baseline``, ``candidate``, ``candidate_model`` (when the data
        names any), the input's other columns (groups such as ``topic``), one ``score_<name>`` per
        judge and label (NaN where the judge could not score the row, never 0), then for each
        machine judge ``status_<judge>`` (``scored``/``unscored``/``error``), ``notes_<judge>``
        (its notes, or why the row is not scored) and ``reply_<judge>`` (its raw reply; empty for a
        judge that makes no LLM call). Values are as the run saw them (not neutralised: the CLI
        passes the table through :func:`~llm_connect._textsafe.csv_safe_frame` for the CSV).
        """
        s = self.scores
        cols = ["id", *[c for c in ("prompt", "baseline", "candidate") if c in s.columns]]
        if "candidate_model" in s.columns and s["candidate_model"].notna().any():
            cols.append("candidate_model")
        cols += [c for c in self.meta.passthrough if c in s.columns]
        cols += [f"score_{n}" for n in self.names]
        for j in self.judges:
            cols += [c for c in (f"status_{j}", f"notes_{j}", f"reply_{j}") if c in s.columns]
        return s[list(dict.fromkeys(cols))].copy()

    def agreement_frame(self) -> pd.DataFrame:
        frame = self.agreement.frame
        first = [c for c in AGREEMENT_CSV_COLUMNS if c in frame.columns]
        return frame[first + [c for c in frame.columns if c not in first]]

    def bias_frame(self) -> pd.DataFrame:
        if self.bias is None:
            return pd.DataFrame(columns=list(BIAS_CSV_COLUMNS))
        frame = self.bias.frame
        first = list(BIAS_CSV_COLUMNS)
        return frame[first + [c for c in frame.columns if c not in first]]

    def to_csv(self, directory: str | Path) -> dict[str, Path]:
        """Write ``scores.csv``, ``agreement.csv`` and ``bias.csv`` into ``directory`` (text cells that a
        spreadsheet would run as a formula are neutralised)."""
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

    def to_parquet(self, path: str | Path) -> Path:
        """Write :meth:`scores_table` to a Parquet file (numbers stay numbers, blanks stay null) and
        return its path. Text is written as it is, not neutralised as in ``scores.csv``: Parquet is
        read by code (pandas, DuckDB, Spark), not opened by a spreadsheet. A column holding values
        of several kinds (numbers and text, say) is written as text."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        parquet_ready(self.scores_table()).to_parquet(p, index=False)
        return p

    def summary(self) -> pd.DataFrame:
        """One row per machine judge: agreement with the reference, its threshold (and how it was
        chosen: ``threshold_selection``), ``yes_rate`` (share of its scored items it said yes to),
        ``weak`` (why it is flagged weak, or empty; see
        :func:`~llm_connect.calibration._cards.weak_judge_reasons`) and its largest bias shift."""
        from ._cards import card_reference, weak_judge_reasons

        ref, people = card_reference(self)
        chosen = getattr(self.agreement, "chosen", {})
        rows = []
        for j in self.judges:
            score = self.scores[f"score_{j}"]
            said = score.dropna() >= self.threshold_of(j)
            row: dict[str, Any] = {"judge": j, "scored": int(score.notna().sum()),
                                   "mean_score": float(score.mean()), "threshold": self.threshold_of(j),
                                   "yes_rate": float(said.mean()) if len(said) else float("nan")}
            if j in chosen:
                row["threshold_selection"] = chosen[j].describe()
            kappa_low = kappa_high = float("nan")
            if ref and ref != j:
                p = self.agreement.pair(j, ref)
                kappa_low, kappa_high = p["cohen_kappa"].low, p["cohen_kappa"].high
                row.update({"reference": ref, "n": p.n, "agreement": p["percent_agreement"].value,
                            "kappa": p["cohen_kappa"].value, "kappa_low": kappa_low,
                            "kappa_high": kappa_high})
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
        """``"binary"`` when every score ``judge`` gave is 0 or 1 (exact match, a yes/no verdict),
        ``"graded"`` when it gave others, ``"none"`` when it scored no row."""
        return score_kind(self.scores[_score_column(self.scores, judge)])

    def plots_for(self, judge: str) -> tuple[str, ...]:
        """The per-judge plots the report draws for ``judge`` (the rule: :data:`PLOTS_BY_KIND` of its
        :meth:`score_kind`; those against the reference only when there is one other than itself)."""
        ref = self.reference
        return tuple(p for p in PLOTS_BY_KIND[self.score_kind(judge)]
                     if p == "length" or (ref is not None and ref != judge))

    def figures(self) -> dict[str, Any]:
        """The report's figures (``matplotlib.figure.Figure``, outside pyplot), by name.

        Each judge gets the plots that carry information for its kind of scores
        (:meth:`plots_for`): a 0/1 judge has no threshold to sweep and its scatter against
        the labels is a jittered 2x2 table, so it gets neither.
        """
        from . import _plots

        figs: dict[str, Any] = {}
        if self.agreement.pairs:
            fig, ax = new_figure(1.2 + 0.9 * len(self.names), 0.8 + 0.8 * len(self.names))
            _plots.plot_agreement_heatmap(self.agreement, statistic="cohen_kappa", ax=ax)
            figs["agreement heatmap (Cohen's kappa)"] = fig
        ref = self.reference
        for j in self.judges:
            plots = self.plots_for(j)
            if "scatter" in plots and ref is not None:
                fig, ax = new_figure()
                _plots.plot_judge_scatter(self.scores, x=ref, y=j, jitter=0.02, seed=self.seed, ax=ax)
                figs[f"{j} vs {ref}"] = fig
            if "reliability" in plots and ref is not None:
                fig, ax = new_figure()
                _plots.plot_reliability(self.scores, judge=j, label=ref, threshold=self.threshold_of(ref), ax=ax)
                figs[f"reliability of {j} against {ref}"] = fig
            if "threshold sweep" in plots and ref is not None:
                fig, ax = new_figure()
                _plots.plot_threshold_sweep(self.sweep(j, ref), ax=ax)
                ax.set_title(_plots._text(f"{j} threshold vs {ref}"))
                figs[f"threshold sweep of {j}"] = fig
            if "length" in plots:
                fig, ax = new_figure()
                hue = ref if ref and ref != j else None
                _plots.plot_score_vs_length(self.scores, judge=j, hue=hue, ax=ax)
                figs[f"{j} score vs length"] = fig
        if self.bias is not None and self.bias.results:
            fig, ax = new_figure(6, 1.2 + 0.35 * len(self.bias.results))
            _plots.plot_bias_forest(self.bias, ax=ax)
            figs["bias probes"] = fig
        return figs

    # -- HTML -------------------------------------------------------------------------------

    def _diagnostics_html(self) -> Markup:
        parts: list[str] = []  # markup only: each a Markup from frame_html or a _repr_html_
        rows = []
        for j in self.judges:
            eff = self.length_effect(j)
            rows.append({"judge": j, "controls": ", ".join(eff.controls) or "—", "term": eff.term,
                         "length coef": eff.coef, "low": eff.low, "high": eff.high, "p": eff.p_value, "n": eff.n,
                         "note": eff.note})
        if rows:
            parts.append(frame_html(pd.DataFrame(rows), caption="Length effect (OLS; score change per unit)"))
        for j in self.judges:
            fam = self.meta.judge_families.get(j)
            if fam and self.scores["model_family"].notna().any():
                parts.append(self.self_preference(j)._repr_html_())
        return join(parts)

    def html(self, *, plots: bool = True, title: str = "Calibration report") -> Markup:
        """The report as an HTML fragment (tables, and figures as embedded PNGs)."""
        usage = self.meta.usage
        head = [html_format("<h2>{}</h2>", title),
                html_format("<p>{} items; judges: {}; labels: {}; threshold {}.</p>", len(self.scores),
                            ", ".join(self.judges) or "—", ", ".join(self.labels) or "—", fmt(self.threshold))]
        cards = self.judge_cards()
        if cards:
            head.append(html_format("<h3>Verdicts</h3><ul class='llm-connect-verdicts'>{}</ul>",
                                    join(html_format("<li>{}</li>", c.verdict) for c in cards)))
        if usage:
            udf = pd.DataFrame([{"judge": k, **v} for k, v in usage.items()])
            head.append(frame_html(udf, caption="Judge runs (unscored rows are NaN, never 0)"))
        body = [frame_html(self.summary(), caption="Summary"), self.agreement._repr_html_()]
        if cards:
            body.append(html_format("<h3>Judge cards</h3>{}", join(Markup(c._repr_html_()) for c in cards)))
        body.append(self._estimates_html(plots=plots))
        if self.bias is not None:
            body.append(self.bias._repr_html_())
        body.append(self._diagnostics_html())
        if self.by_group is not None:
            body.append(self.by_group.html(plots=plots))
        if plots:
            figs = self.figures()
            imgs = join(
                html_format("<figure style='display:inline-block;margin:4px'><img src='{}' alt='{}'>"
                            "<figcaption>{}</figcaption></figure>", png_data_uri(fig), name, name)
                for name, fig in figs.items()
            )
            body.append(html_format("<div>{}</div>", imgs))
        return html_format("<div class='llm-connect-report'>{}</div>", join([*head, *body]))

    def _estimates_html(self, *, plots: bool) -> Markup:
        """The "Estimates" section: when the data names the candidates' models and has human labels."""
        if "candidate_model" not in self.scores.columns or not self.scores["candidate_model"].notna().any():
            return Markup("")
        est = self.estimates()
        if est is None or est.empty:
            return Markup("")
        shown = est[["judge", "candidate_model", "method", "estimate", "ci_low", "ci_high", "n_labelled", "n_total",
                     "reason"]]
        parts = [Markup("<h3>Estimates</h3>"),
                 html_format("<p>Mean quality of each model's answers: as judge {} alone would claim it, from the "
                             "human labels alone, and both combined by prediction-powered inference (PPI++), whose "
                             "interval stays valid however biased the judge is.</p>", str(est["judge"].iloc[0])),
                 frame_html(shown, caption="Estimates per model", max_rows=200)]
        if plots:
            from ._estimates import plot_estimates

            fig, ax = new_figure(6, 1.2 + 0.45 * est["candidate_model"].nunique())
            plot_estimates(est.drop(columns=["judge"]), ax=ax)
            parts.append(html_format("<figure><img src='{}' alt='estimates per model'></figure>", png_data_uri(fig)))
        return join(parts)

    def _repr_html_(self) -> str:
        return self.html(plots=True)

    def to_html(self, path: str | Path, *, title: str = "Calibration report") -> Path:
        """Write one self-contained HTML file (figures embedded) and return its path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
                 "table.llm-connect td,table.llm-connect th{border:1px solid #ccc;padding:2px 6px;"
                 "text-align:right}table.llm-connect{margin:1em 0}caption{margin-bottom:4px}")
        doc = html_format("<!DOCTYPE html><html><head><meta charset='utf-8'><title>{}</title>"
                          "<style>{}</style></head><body>{}</body></html>",
                          title, Markup(style), self.html(plots=True, title=title))
        p.write_text(doc, encoding="utf-8")
        return p

    # -- widget -------------------------------------------------------------------------------

    def view(self, *, title: str = "Judgments", height: int = 760) -> Any:
        """Every judgment in one page: a row per item (prompt, reference, candidate, each judge's score
        and status, the human labels), filters by judge, status, disagreement with people and probe,
        sorting by disagreement, and per item the exact prompt each judge saw and its raw reply.

        Returns a :class:`~llm_connect.calibration.JudgmentViewer`: a notebook shows it in a sandboxed
        iframe; ``.save(path)`` writes the self-contained page. ``llm-connect view OUT_DIR`` shows the
        same page from the ``judgments.jsonl`` that ``calibrate`` writes."""
        from ._viewer import JudgmentViewer, judgment_records

        return JudgmentViewer.from_records(judgment_records(self, title=title), height=height)

    def widget(self) -> Any:
        """An ipywidgets explorer: pick two judges, move the threshold, read the bias tabs, and
        browse the items where the two judges disagree most. The controls only call this
        report's pure functions and the plot functions. The returned box has a ``controls``
        attribute naming its parts (``judge_a``, ``judge_b``, ``threshold``, ``summary``,
        ``scatter``, ``sweep``, ``disagreements``, ``bias_tabs``, ``top``)."""
        try:
            import ipywidgets as w
        except ImportError as exc:  # pragma: no cover - depends on the environment
            from ..errors import MissingDependencyError

            raise MissingDependencyError("ipywidgets", "notebooks", "CalibrationReport.widget()") from exc
        from types import SimpleNamespace

        from . import _plots

        names = self.names
        if len(names) < 2:
            raise ValueError("the widget needs at least two judges or labels")
        first = self.judges[0] if self.judges else names[0]
        second = self.reference if self.reference and self.reference != first else next(n for n in names if n != first)
        judge_a = w.Dropdown(options=names, value=first, description="judge")
        judge_b = w.Dropdown(options=names, value=second, description="against")
        threshold = w.FloatSlider(value=self.threshold, min=0.05, max=0.95, step=0.05, description="threshold",
                                  continuous_update=False, readout_format=".2f")
        top = w.IntSlider(value=10, min=1, max=50, description="items", continuous_update=False)
        summary = w.HTML()
        scatter = w.Image(format="png")
        sweep = w.Image(format="png")
        table = w.HTML()

        def render(draw: Callable[[Any], Any]) -> bytes:
            fig, ax = new_figure(4.6, 3.4)
            draw(ax)
            return png_bytes(fig)

        def update(_change: Any = None) -> None:
            a, b, t = judge_a.value, judge_b.value, float(threshold.value)
            if a == b:
                summary.value = "<p>choose two different judges</p>"
                return
            pair = self.pair(a, b, threshold=t, n_boot=200)
            summary.value = pair._repr_html_()
            scatter.value = render(lambda ax: _plots.plot_judge_scatter(self.scores, x=b, y=a, jitter=0.02,
                                                                        seed=self.seed, ax=ax))

            def draw_sweep(ax: Any) -> None:
                _plots.plot_threshold_sweep(self.sweep(a, b), ax=ax)
                ax.axvline(t, color="tab:red", linewidth=1)

            sweep.value = render(draw_sweep)
            table.value = frame_html(self.disagreements(a, b, top=int(top.value)),
                                     caption=f"where {a} and {b} disagree most")

        for control in (judge_a, judge_b, threshold, top):
            control.observe(update, names="value")
        update()

        tabs = w.Tab()
        children, titles = [], []
        if self.bias is not None:
            for probe in dict.fromkeys(r.probe for r in self.bias.results):
                parts = [r._repr_html_() if r.stats.n else html_format("<p>{}: {}</p>", r.judge, r.stats.note)
                         for r in self.bias.results if r.probe == probe]
                children.append(w.HTML(join(parts)))
                titles.append(probe)
        tabs.children = children
        for i, t in enumerate(titles):
            tabs.set_title(i, t)

        box = w.VBox([
            w.HBox([judge_a, judge_b, threshold]),
            summary,
            w.HBox([scatter, sweep]),
            w.HTML("<b>Bias probes</b>"),
            tabs,
            top,
            table,
        ])
        box.controls = SimpleNamespace(judge_a=judge_a, judge_b=judge_b, threshold=threshold, summary=summary,
                                       scatter=scatter, sweep=sweep, disagreements=table, bias_tabs=tabs, top=top)
        return box


def default_groups(scores: pd.DataFrame) -> dict[str, str]:
    """The group columns of graded agreement when none are given: ``candidate_model`` as the system
    when it names two or more models, ``prompt`` as the document when some prompt has several rows."""
    out: dict[str, str] = {}
    if "candidate_model" in scores.columns and scores["candidate_model"].dropna().nunique() >= 2:
        out["system"] = "candidate_model"
    if "prompt" in scores.columns and scores["prompt"].dropna().duplicated().any():
        out["document"] = "prompt"
    return out


def calibrate(
    items: Any,
    judges: Mapping[str, Any] | Sequence[Any],
    *,
    human: str | Sequence[str] | None = None,
    annotators: Sequence[str] = (),
    reference_sep: str | None = None,
    probes: str | Sequence[str] | None = "auto",
    probe_limit: int | None = None,
    threshold: float = 0.5,
    thresholds: Mapping[str, float | str] | None = None,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: Any = None,
    task_type: str | None = None,
    by: str | None = None,
    pairwise: bool | None = None,
    preference_codes: str | Mapping[str, Any] | None = None,
    scale: Any = None,
    groups: Mapping[str, str] | None = None,
    epochs: int = 1,
    reducer: Any = "mean",
) -> CalibrationReport:
    """Score ``items`` with every judge, measure their agreement with each other and with the
    human labels, and run the bias probes.

    With ``ledger`` and ``task_type``, every scored judgment is recorded as
    ``judge_many(..., ledger=...)`` records it (see :func:`score_items`).

    ``probes``: ``"auto"`` (those that apply to each judge), a list or comma-separated
    names, or ``None``/``[]`` for none. ``probe_limit`` probes a seeded sample of at
    most that many items (each probe costs one more judge call per item). Unscored
    replies are NaN, dropped pair by pair. See :func:`score_items` for ``items``.

    ``human``: a label column, or several (rating dimensions such as ``["coherence",
    "relevance"]``), each a separate target with its own agreement rows. ``scale=(low, high)``
    (or ``"1-5"``): the labels are ratings on that scale; rows against them gain quadratic-weighted
    kappa and ordinal/interval alpha on the scale, and correlations per ``groups``
    (``{"system": column, "document": column}``; by default, with a scale, ``candidate_model`` as
    system and ``prompt`` as document where they repeat; see
    :func:`~llm_connect.calibration._agreement.grouped_correlation`). ``thresholds``: per judge, a
    number or ``"best"`` (chosen by 5-fold cross-validation against the people, its verdict
    statistics out of fold; see :func:`~llm_connect.calibration._agreement.choose_threshold`).

    ``by``: an input column (e.g. ``"candidate_model"``); every agreement and bias figure is also
    computed per group of its values, the pooled figure beside (:attr:`CalibrationReport.by_group`,
    see :mod:`llm_connect.calibration._groups`). A column the data lacks is an error before any judge runs.

    Pairwise data (columns ``candidate_a`` and ``candidate_b``, or ``pairwise=True``) is judged by
    pairwise judges and measured without any threshold: three-way (a/b/tie) agreement, accuracy on
    people's non-tie pairs, tie rates, consistency across orders and position bias; the result is a
    :class:`~llm_connect.calibration.PairwiseReport` (see :func:`~llm_connect.calibration.calibrate_pairwise`;
    ``preference_codes`` says what the preference column's values mean, e.g. ``"a=1,b=2,tie=0"``).

    ``epochs=k`` (``k > 1``): every judge judges every item ``k`` times (each epoch moves the
    seeds, so a response cache serves no repeat; :func:`~llm_connect.grading.judge_many`) and
    ``reducer`` (``"mean"``, ``"median"``, ``"mode"``, ``"max"``, ``"min"`` or a callable)
    reduces the epochs to the score that agreement, thresholds and estimates read; each
    judge's card then carries its run-to-run reliability (epochs, percent agreement,
    Krippendorff's alpha: :attr:`~llm_connect.calibration.JudgeCard.reliability`). The bias
    probes judge the perturbed items once. Not for pairwise data (a :class:`ValidationError`).
    """
    from ._pairwise import calibrate_pairwise, is_pairwise_input

    if pairwise or (pairwise is None and is_pairwise_input(items)):
        if by is not None or reference_sep is not None or thresholds:
            from ..errors import ValidationError

            raise ValidationError("by=, reference_sep= and thresholds= do not apply to pairwise data (no threshold, "
                                  "no reference answer); drop them")
        if epochs != 1:
            from ..errors import ValidationError

            raise ValidationError("epochs= is not available for pairwise data in calibrate yet; run "
                                  "judge_many(judge, items, epochs=k) or tournament(..., epochs=k) for the "
                                  "run-to-run reliability, and JudgeCard.with_reliability(df) to keep it")
        if human is not None and not isinstance(human, str):
            if len(list(human)) != 1:
                from ..errors import ValidationError

                raise ValidationError("pairwise data takes one human preference column, not several")
            human = next(iter(human))
        return calibrate_pairwise(items, judges, human=human, annotators=annotators, codes=preference_codes,
                                  probes=probes, probe_limit=probe_limit, n_boot=n_boot, confidence=confidence,
                                  seed=seed, concurrency=concurrency, progress=progress, run_config=run_config,
                                  ledger=ledger, task_type=task_type)
    named = _named_judges(judges)
    group_col = None
    if by is not None:  # checked before any judge runs
        from ._groups import group_column
        from ._runner import items_table

        items = items_table(items)
        humans = [human] if isinstance(human, str) else list(human or [])
        group_col = group_column(items.columns, by, labels=[*humans, *annotators])
    scored = score_judges(items, named, human=human, annotators=annotators, reference_sep=reference_sep,
                          concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                          task_type=task_type, scale=scale, epochs=epochs, reducer=reducer)
    scores = scored.to_frame()  # users read the attrs mirror; the stages below get ``scored``
    ann = scored.annotators
    if groups is None and scale is not None:
        groups = default_groups(scores)
    table = agreement_table(scores, threshold=threshold, thresholds=thresholds, annotators=ann, n_boot=n_boot,
                            confidence=confidence, seed=seed, labels=scored.labels, scale=scale, groups=groups)
    thresholds = table.thresholds  # "best" resolved to the threshold chosen on all labelled rows
    bias = None
    probe_rows: Any = None
    if probes and named:
        probe_rows = np.arange(len(scores))
        if probe_limit is not None and probe_limit < len(scores):
            rng = np.random.default_rng(seed)
            probe_rows = np.sort(rng.choice(len(scores), size=max(0, int(probe_limit)), replace=False))
        sample = scores.iloc[probe_rows].reset_index(drop=True)
        items_frame = sample[[c for c in ("id", "prompt", "baseline", "candidate", "candidate_model")
                              if c in sample.columns]]
        bias = run_probes(
            named, items_frame, probes=probes,
            original_scores={k: sample[f"score_{k}"].to_numpy(dtype=float) for k in named},
            threshold=threshold, thresholds=thresholds, n_boot=n_boot, confidence=confidence, seed=seed,
            reference_sep=reference_sep, concurrency=concurrency, progress=progress, run_config=run_config,
        )
    report = CalibrationReport(scores=scores, agreement=table, bias=bias, threshold=threshold,
                               thresholds=dict(thresholds or {}), n_boot=n_boot, confidence=confidence, seed=seed,
                               scored=replace(scored, frame=scores))
    if by is not None and group_col is not None:
        from ._groups import group_breakdown

        report.by_group = group_breakdown(
            scores, by, group_col, agreement=table, bias=bias, probe_rows=probe_rows, judges=report.judges,
            reference=report.reference, n_boot=n_boot, confidence=confidence, seed=seed, threshold=threshold,
            thresholds=thresholds, annotators=ann, labels=scored.labels, scale=scale,
        )
    return report



