"""``align()``: improve an LLM judge from the labels people gave, and prove it on labels it never saw.

:func:`align` runs in named steps (:class:`_Run`): it reads the labelled items; sets aside a **held-out split** that no
selection step ever sees (stratified by people's pass/fail label; items told apart by their
*content*, not their ids, and a conversation never straddling it); **proposes candidate rubrics** from the
rest (worked-example sets, the decision threshold, criteria rewritten by an ``optimizer`` LLM) and says their calls and
cost before any call; judges every labelled item with the original; **scores every candidate by cross-validation** on
the selection split only; **measures the original and the best candidate once on the held-out split** (Cohen's kappa,
percent agreement, the paired bootstrap of the difference, :func:`llm_connect.stats.alignment.paired_difference`); and
**accepts the candidate only when that difference interval lies above 0**, otherwise it keeps the original and says why
("kept: no held-out improvement"). What it takes from MLflow's ``judge.align``, LangSmith's align evaluator, DSPy's
optimizers and EvalGen, and what it adds (the proof on held-out labels), is told in the guide
(``docs/guides/rubrics-and-align.md``).

The parameters in detail. ``data``: ``baseline`` may be blank, or absent, for a rubric with ``reference=False``; the
``human`` column holds booleans, yes/no, 0..1, or ratings on the rubric's Likert scale; ``id`` keys the items (else
their texts do); ``notes`` (people's reasons) are shown to the optimizer and kept as the worked examples' notes.
``candidates="auto"``: worked-example sets of 2, 4 and 8, the threshold when scores are continuous, and with
``optimizer`` the rewrites ``"rewrite"`` and ``"rewrite+examples:4"``. Before judging, the number of calls and (where
the price is known) the cost are logged, and printed to stderr with ``progress``. ``cluster``: the turns of one
conversation are one unit for the held-out split, the folds and the worked examples, as items of one content are (a
conversation never straddles the split or two folds), and the held-out intervals resample whole conversations (with
fewer than :data:`~llm_connect.stats.clusters.MIN_CLUSTERS` held-out conversations there is no interval, so the change
is not accepted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._docstrings import share_parameters
from ..core import BudgetTracker, LLMAdapter
from ..errors import ValidationError
from ..grading import LLMJudge
from ..stats.alignment import METRICS
from ._align_steps import _labelled_items, _Run
from ._alignment import Alignment

__all__ = ["Alignment", "align"]


@share_parameters
def align(judge: LLMJudge, data: Any, *, human: str, candidates: Any = "auto", optimizer: LLMAdapter | None = None,
          folds: int = 5, heldout: float = 0.3, metric: str = "kappa", seed: int = 0,
          budget: BudgetTracker | float | None = None, concurrency: int = 16, progress: bool = True,
          cluster: str | None = "auto") -> Alignment:
    """Improve ``judge``'s rubric from people's labels; accept the change only if it holds on held-out labels.

    Parameters
    ----------
    judge : LLMJudge
        Its rubric (or the built-in correctness one) is the original.
    data : DataFrame or iterable of mapping
        One row per labelled item: ``prompt``, ``candidate``, ``baseline``, ``human``, optionally ``id``, ``notes``.
    human : str
        The column of people's labels (pass/fail: at or above the middle of their scale; blank: left out).
    candidates : "auto" or list of str or Rubric, default "auto"
        ``"examples:K"``, ``"threshold"``, ``"rewrite"``, ``"rewrite+examples:K"`` and rubrics of your own.
    optimizer : LLMAdapter, optional
        The LLM adapter that rewrites criteria.
    folds : int, default 5
        Cross-validation folds on the selection split (fewer when a label has fewer items).
    heldout : float, default 0.3
        The share held out (stratified by label).
    metric : {"kappa", "agreement"}, default "kappa"
        What candidates are ranked and the change is proven on (Cohen's kappa or percent agreement).
    seed : int, default 0
        The split, folds and example draws.
    budget : BudgetTracker or float, optional
        Every call is charged to it (as :func:`~llm_connect.grading.judge_many` reserves); spent: BudgetExceededError.
    {concurrency}
    {progress}
    cluster : str, optional, default "auto"
        The column of each item's conversation (``"auto"``: ``conversation_id`` when present; ``None``: none).

    Returns
    -------
    Alignment
        The judge to use, and the evidence (the procedure and the details: the module docstring).

    Raises
    ------
    JudgeFailedError
        When the original judge scores none of the labelled items (nothing to align or compare).
    ValidationError
        When ``judge`` is not an ``LLMJudge``, or ``metric``, ``human`` or ``seed`` is invalid.
    """
    from ..items import item_ids, items_frame

    if not isinstance(judge, LLMJudge):
        raise ValidationError(f"align improves an LLMJudge's rubric; got {type(judge).__name__}")
    if metric not in METRICS:
        raise ValidationError(f"metric must be one of {METRICS}, got {metric!r}")
    if not isinstance(human, str) or not human:
        raise ValidationError("human must name the column of people's labels")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValidationError(f"seed must be an integer, got {seed!r}")
    seed = int(seed)
    frame = _labelled_items(items_frame(data, ("prompt", "candidate", human)), judge.current_rubric, human, item_ids)
    tracker = budget if isinstance(budget, BudgetTracker) else BudgetTracker(None if budget is None else budget)
    run = _Run(judge=judge, original=judge.current_rubric, frame=frame, tracker=tracker, spent_before=tracker.spent_usd,
               optimizer=optimizer, metric=metric, seed=seed, concurrency=concurrency, progress=progress)
    split = run.split(candidates, heldout=heldout, folds=folds, cluster=cluster)  # 1. held out, never seen
    recipes, plan = run.candidates(candidates, split)  # 2. the candidates, their calls and cost said first
    run.score_original()  # 3. the original on every labelled item (its held-out replies are read in step 5)
    recipes = [r for r in recipes if r.kind != "threshold" or run.continuous(split)] or recipes
    table, cv_verdicts, best = run.score_folds(recipes, split)  # 4. cross-validation on the selection split
    held = run.score_heldout(best, len(recipes), split, cv_verdicts)  # 5. each rubric once on the held-out split
    return run.result(held, table, split, plan, human=human, heldout=heldout)
