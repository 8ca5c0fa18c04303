"""The result of :func:`~llm_connect.alignment.align`: the judge to use, and the evidence (held-out figures before and
after, every candidate in every fold, the disagreements that remain, the judge cards)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from .._html import Markup
from ..calibration import card_from_scores
from ..cards import JudgeCard, JudgeCardRegistry
from ..errors import ValidationError
from ..grading import LLMJudge, Rubric
from ..stats.agreement import Estimate

__all__ = ["N_BOOT", "Alignment"]

#: Bootstrap resamples of the held-out intervals.
N_BOOT = 2000


@dataclass(eq=False)
class Alignment:
    """What :func:`align` found: the judge to use, and the evidence.

    Parameters
    ----------
    accepted : bool
        Whether the candidate beat the original on the held-out labels (the paired bootstrap interval of the difference
        lies above 0).
    rubric, judge : Rubric, LLMJudge
        The aligned rubric and judge when accepted, else the original's.
    heldout : DataFrame
        One row per rubric (``original``, ``aligned``: the best candidate, measured whether accepted or not) with ``n``,
        ``kappa``, ``kappa_low``, ``kappa_high``, ``agreement`` (and its interval, the rubric's hash and name);
        ``heldout.attrs["difference"]`` is the difference.
    heldout_ids : list
        The held-out items' ids.
    candidates : DataFrame
        One row per candidate and fold (``fold`` is ``"all"`` on each candidate's pooled out-of-fold row, which ranks
        them).
    cost_usd : float
        What the run spent (cache hits are free).
    reason : str
        One line saying what was decided and why.
    difference : Estimate
        The held-out difference of ``metric``, aligned minus original.
    metric : str
        ``"kappa"`` or ``"agreement"``.
    original_rubric, aligned_rubric, original_judge, aligned_judge : Rubric or LLMJudge
        Both rubrics and judges, whichever was chosen.
    chosen : str
        The best candidate's name.
    items, plan, provenance : DataFrame, dict, dict
        The labelled items, the calls and cost said before the run, and how it was run.
    """

    accepted: bool
    rubric: Rubric
    judge: LLMJudge
    heldout: pd.DataFrame
    heldout_ids: list[Any]
    candidates: pd.DataFrame
    cost_usd: float
    reason: str
    difference: Estimate
    metric: str
    original_rubric: Rubric
    aligned_rubric: Rubric
    original_judge: LLMJudge
    aligned_judge: LLMJudge
    chosen: str
    items: pd.DataFrame = field(repr=False)
    plan: dict[str, Any] = field(default_factory=dict, repr=False)
    provenance: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- the decision in one line --------------------------------------------------------------------

    def summary(self) -> str:
        """The decision in one line.

        Returns
        -------
        str
            Accepted or kept (and why), the held-out kappa before and after, the difference with its interval and the
            candidate chosen.
        """
        o, a = self._row("original"), self._row("aligned")
        d = self.difference
        diff = (f"{self.metric} difference {d.value:+.2f} [{d.low:+.2f}, {d.high:+.2f}]" if d.defined
                else f"{self.metric} difference undefined ({d.reason})")
        head = ("accepted: the aligned rubric agrees better with people on held-out labels" if self.accepted
                else self.reason)
        return (f"{head} (kappa {o['kappa']:.2f} -> {a['kappa']:.2f} on {int(a['n'])} held-out items; {diff}; "
                f"candidate {self.chosen})")

    def __str__(self) -> str:
        return self.summary()

    def _row(self, name: str) -> Mapping[str, Any]:
        return {str(k): v for k, v in self.heldout.set_index("rubric").loc[name].to_dict().items()}

    # -- what remains to fix -------------------------------------------------------------------------

    def disagreements(self) -> pd.DataFrame:
        """The held-out items where the returned judge still disagrees with people.

        Returns
        -------
        pandas.DataFrame
            ``id``, ``prompt``, ``baseline``, ``candidate``, people's label and ``human_verdict``, the returned rubric's
            score and verdict, and ``notes`` (those present), indexed 0..n-1.
        """
        col = "aligned" if self.accepted else "original"
        items = self.items
        rows = items[items["split"] == "heldout"]
        verdict = rows[f"{col}_verdict"]
        out = rows[verdict.notna() & (verdict != rows["human_verdict"])]
        human = self.provenance.get("human_column", "human")
        keep = [c for c in ("id", "prompt", "baseline", "candidate", human, "human_verdict", f"{col}_score",
                            f"{col}_verdict", "notes") if c in out.columns]
        return out[keep].reset_index(drop=True)

    # -- cards --------------------------------------------------------------------------------------

    def card(self, which: str = "returned") -> JudgeCard:
        """The judge card of a rubric, measured on the held-out labels.

        Parameters
        ----------
        which : {"returned", "aligned", "original"}, default "returned"
            The rubric; ``"returned"``: the aligned one when accepted, else the original.

        Returns
        -------
        JudgeCard
            Its ``provenance`` names the rubric, the labels, the split sizes and the held-out figures (and, for the
            aligned card, the parent rubric hash).

        Raises
        ------
        ValidationError
            When ``which`` is none of the three.
        """
        if which == "returned":
            which = "aligned" if self.accepted else "original"
        if which not in ("aligned", "original"):
            raise ValidationError(f"which must be 'aligned', 'original' or 'returned', got {which!r}")
        judge = self.aligned_judge if which == "aligned" else self.original_judge
        rubric = self.aligned_rubric if which == "aligned" else self.original_rubric
        rows = self.items[self.items["split"] == "heldout"]
        grouped = [c for c in (self.provenance.get("split") or {}).get("grouped_by", ()) if c != "content"]
        cluster = rows[grouped[0]].reset_index(drop=True) if grouped and grouped[0] in rows.columns else None
        card = card_from_scores(rows[f"{which}_score"], rows["human_unit"], grader_id=judge.grader_id,
                                rubric_hash=judge.rubric_hash, threshold=rubric.threshold, reference_threshold=0.5,
                                reference_name="human (held-out)", n_boot=N_BOOT, cluster=cluster)
        prov = dict(self.provenance)
        prov["rubric"] = which
        prov["rubric_hash"] = judge.rubric_hash
        if which == "original":
            prov.pop("parent_rubric_hash", None)
        return replace(card, provenance=prov)

    def cards(self) -> list[JudgeCard]:
        """Both rubrics' held-out cards, before and after.

        Returns
        -------
        list of JudgeCard
            The original's card, then the aligned rubric's.
        """
        return [self.card("original"), self.card("aligned")]

    def save_card(self, ledger_or_registry: Any) -> JudgeCard | None:
        """Save the aligned judge's card when the candidate was accepted.

        The registry keeps each rubric's card (one per ``(grader_id, rubric_hash)``), so the parent's stays.

        Parameters
        ----------
        ledger_or_registry : JudgeCardRegistry or BaseLedger or str or os.PathLike
            A :class:`~llm_connect.cards.JudgeCardRegistry`, or a ledger (or its path) whose registry beside it is used.

        Returns
        -------
        JudgeCard or None
            The card saved; ``None`` when the original was kept (nothing is saved).
        """
        if not self.accepted:
            return None
        registry = (ledger_or_registry if isinstance(ledger_or_registry, JudgeCardRegistry)
                    else JudgeCardRegistry.for_ledger(ledger_or_registry))
        card = self.card("aligned")
        registry.save(card)
        return card

    # -- tables and pages ----------------------------------------------------------------------------

    def ranking(self) -> pd.DataFrame:
        """The candidates, best first.

        Returns
        -------
        pandas.DataFrame
            One row per candidate: its pooled out-of-fold figures on the selection split (the ``fold == "all"`` rows of
            :attr:`candidates`), sorted by ``metric``.
        """
        pooled = self.candidates[self.candidates["fold"] == "all"].copy()
        return pooled.sort_values(self.metric, ascending=False, kind="stable").reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        """Every labelled item.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`items`: each item with its split, people's verdict, and both rubrics' scores and verdicts.
        """
        return self.items.copy()

    def html(self) -> Markup:
        """The alignment page's body.

        Returns
        -------
        Markup
            Held-out before and after, the candidates and the disagreements that remain, as an HTML fragment.
        """
        from .._display import view

        return Markup(view("alignment_html")(self, full_page=False))

    def to_html(self, path: Any = None) -> str:
        """The alignment page as a standalone HTML document.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Where to write it (UTF-8); ``None``: not written.

        Returns
        -------
        str
            The document.
        """
        from .._display import view

        page = str(view("alignment_html")(self, full_page=True))
        if path is not None:
            from pathlib import Path

            Path(path).write_text(page, encoding="utf-8")
        return page

    def _repr_html_(self) -> str:
        return str(self.html())
