"""A tournament: N models' answers to the same prompts, compared in pairs by a pairwise judge.

:func:`tournament` schedules the comparisons (every pair of models on each prompt, or a seeded
random subset of them per prompt, with a coin deciding which model is shown as A, as Chatbot
Arena samples its battles: Chiang et al. 2024, "Chatbot Arena: An Open Platform for Evaluating
LLMs by Human Preference"), runs them through the one runner (:func:`judge_many` with the
pairwise judge: concurrency, budget, ledger, epochs, progress) and returns the battles with
``model_a``, ``model_b`` and ``winner`` beside the judge's columns, the frame
:func:`llm_connect.stats.leaderboard` reads.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from typing import TYPE_CHECKING, Any

from .._docstrings import share_parameters
from .._options import check_run_options
from ..core import BudgetTracker, RunConfig
from ..errors import ValidationError
from ..items import is_missing, items_frame
from ..quality import BaseLedger
from ._base import Judge, judge_abilities
from ._epochs import Reducer
from ._judge_many import judge_many

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TOURNAMENT_COLUMNS", "schedule_battles", "tournament", "winner_of"]

#: The columns :func:`tournament` puts first, before the judge's (``judge_many``'s) columns.
TOURNAMENT_COLUMNS = ("prompt_id", "prompt", "model_a", "model_b", "answer_a", "answer_b", "winner")


def winner_of(status: Any, score: Any) -> str | None:
    """A battle's winner from a pairwise judgment of A (the baseline) against B (the candidate).

    Parameters
    ----------
    status : str
        The row's ``status`` (``"scored"``, ``"unscored"``, ``"error"``...).
    score : float
        The row's ``quality_score``: the probability-like score that B (the candidate) is better.

    Returns
    -------
    str or None
        ``"b"`` when the score is above 0.5 (the candidate better), ``"a"`` below, ``"tie"`` at 0.5;
        ``None`` for a row that is not scored (or has no score).

    Examples
    --------
    >>> winner_of("scored", 1.0), winner_of("scored", 0.5), winner_of("unscored", float("nan"))
    ('b', 'tie', None)
    """
    if status != "scored" or is_missing(score):
        return None
    s = float(score)
    if math.isnan(s):
        return None
    return "b" if s > 0.5 else "a" if s < 0.5 else "tie"


def _check_pairs(pairs: Any) -> str | int:
    if pairs == "all" and isinstance(pairs, str):
        return "all"
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise ValidationError(f"pairs must be 'all' or a positive integer (random pairs per prompt), got {pairs!r}")
    return pairs


def schedule_battles(
    answers: Any,
    *,
    prompt: str = "prompt",
    model: str = "model",
    answer: str = "answer",
    prompt_id: str | None = None,
    pairs: str | int = "all",
    seed: int = 0,
) -> pd.DataFrame:
    """The comparisons a :func:`tournament` runs, without running them (see :func:`tournament`).

    Parameters
    ----------
    answers : DataFrame or iterable of mappings
        A long frame, one row per (prompt, model).
    prompt : str, default "prompt"
        The column of the prompt text.
    model : str, default "model"
        The column of the model's name.
    answer : str, default "answer"
        The column of the model's answer.
    prompt_id : str, optional
        A column identifying the prompt; ``None``: the prompt text does.
    pairs : "all" or int, default "all"
        Every pair of the models that answered a prompt, or this many pairs drawn at random without
        replacement per prompt (all of them when there are fewer).
    seed : int, default 0
        Seeds the draw of the pairs and the coin that decides which model is A.

    Returns
    -------
    DataFrame
        One row per battle, in prompt order: ``prompt_id``, ``prompt``, ``model_a``, ``model_b``,
        ``answer_a``, ``answer_b``. ``df.attrs["missing"]``: the ``(prompt_id, model)`` pairs left
        out because the model's answer is missing or blank; ``df.attrs["skipped_prompts"]``: prompts
        with fewer than two answers.

    Raises
    ------
    ValidationError
        A bad ``pairs`` or ``seed``, no answers, a missing prompt id or model, several answers of one
        model to one prompt, or one prompt id holding several prompt texts.

    Examples
    --------
    >>> answers = [{"prompt": "2+2?", "model": m, "answer": a} for m, a in [("x", "4"), ("y", "5"), ("z", "4")]]
    >>> schedule_battles(answers)[["model_a", "model_b"]].values.tolist()
    [['x', 'y'], ['x', 'z'], ['z', 'y']]
    """
    import pandas as pd

    pairs = _check_pairs(pairs)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError(f"seed must be an integer, got {seed!r}")
    columns = [prompt, model, answer] + ([prompt_id] if prompt_id is not None else [])
    frame = items_frame(answers, columns)
    if frame.empty:
        raise ValidationError("answers is empty: a tournament needs the answers of at least two models")
    key_column = prompt_id if prompt_id is not None else prompt
    for column in (key_column, model):
        bad = [k for k, v in enumerate(frame[column].tolist()) if is_missing(v)]
        if bad:
            raise ValidationError(f"the {column!r} column is missing in row(s) {bad[:5]}; every answer needs a "
                                  f"{'prompt id' if column == key_column else 'model'}")
    dupes = frame.duplicated([key_column, model], keep=False)
    if dupes.any():
        shown = frame.loc[dupes, [key_column, model]].drop_duplicates().head(5).to_records(index=False).tolist()
        raise ValidationError(f"some models have several answers to one prompt, e.g. {shown}: keep one answer per "
                              f"({key_column}, {model}) (or pass prompt_id= naming a column that tells them apart)")
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    missing: list[tuple[Any, Any]] = []
    skipped: list[Any] = []
    for key, group in frame.groupby(key_column, sort=False):
        texts = group[prompt].tolist()
        if any(is_missing(t) for t in texts) or len({str(t) for t in texts}) > 1:
            raise ValidationError(f"prompt {key!r} has a missing prompt text or several different texts; "
                                  "one prompt id must hold one prompt")
        present = []
        for m, a in zip(group[model].tolist(), group[answer].tolist(), strict=True):
            if is_missing(a) or not str(a).strip():
                missing.append((key, m))
            else:
                present.append((m, str(a)))
        present.sort(key=lambda p: str(p[0]))
        every = list(itertools.combinations(present, 2))
        if not every:
            skipped.append(key)
            continue
        chosen = every if isinstance(pairs, str) or pairs >= len(every) else rng.sample(every, pairs)
        for first, second in chosen:
            (ma, aa), (mb, ab) = (second, first) if rng.random() < 0.5 else (first, second)
            rows.append({"prompt_id": key, "prompt": str(texts[0]), "model_a": ma, "model_b": mb,
                         "answer_a": aa, "answer_b": ab})
    out = pd.DataFrame(rows, columns=list(TOURNAMENT_COLUMNS[:-1]))
    out.attrs["missing"] = missing
    out.attrs["skipped_prompts"] = skipped
    return out


@share_parameters
def tournament(
    judge: Judge,
    answers: Any,
    *,
    prompt: str = "prompt",
    model: str = "model",
    answer: str = "answer",
    prompt_id: str | None = None,
    pairs: str | int = "all",
    seed: int = 0,
    concurrency: int = 16,
    progress: bool = True,
    run_config: RunConfig | None = None,
    ledger: BaseLedger | str | os.PathLike[str] | None = None,
    task_type: str | None = None,
    budget: BudgetTracker | float | None = None,
    epochs: int = 1,
    reducer: str | Reducer = "mean",
) -> pd.DataFrame:
    """Compare N models' answers to the same prompts in pairs with a pairwise judge; battles for a leaderboard.

    Scheduling: on each prompt, every pair of the models that answered it (``pairs="all"``), or
    ``pairs=n`` pairs drawn at random without replacement (all of them when there are fewer);
    for each pair a coin decides which model is A, so no model is always shown first. The draw is
    seeded (``seed``): the same inputs give the same battles. A model whose answer to a prompt is
    missing (None/NaN) or blank sits that prompt out (``df.attrs["missing"]`` lists the
    ``(prompt_id, model)`` pairs); a prompt with fewer than two answers has no battle
    (``df.attrs["skipped_prompts"]``).

    Each battle is judged by :func:`judge_many` with answer A as the ``baseline`` and answer B as
    the ``candidate`` (so ``baseline_model``/``candidate_model`` are ``model_a``/``model_b``), with
    ``concurrency``, ``progress``, ``run_config``, ``ledger``/``task_type``, ``budget`` and
    ``epochs``/``reducer`` as there.

    Parameters
    ----------
    judge : Judge
        A pairwise judge (:class:`~llm_connect.grading.PairwiseJudge`, in both orders by default; a
        pipeline whose final verdict is pairwise, ``pipeline.as_judge()``; or any judge declaring
        ``pairwise = True`` whose score is 1.0 when the candidate is better, 0.0 when the baseline is,
        0.5 for a tie).
    answers : DataFrame or iterable of mappings
        A long frame (or mappings), one row per (prompt, model): the ``prompt`` text, the ``model`` name
        and its ``answer``.
    prompt : str, default "prompt"
        The column of the prompt text.
    model : str, default "model"
        The column of the model's name.
    answer : str, default "answer"
        The column of the model's answer.
    prompt_id : str, optional
        A column identifying the prompt (default: the prompt text does).
    pairs : "all" or int, default "all"
        Every pair per prompt, or this many random pairs per prompt (see above).
    seed : int, default 0
        Seeds the draw of the pairs and the coin deciding which model is A.
    {concurrency}
    {progress}
    {run_config}
    {ledger}
    {task_type}
    {budget}
    {epochs}
    {reducer}

    Returns
    -------
    DataFrame
        One row per battle: :data:`TOURNAMENT_COLUMNS` (``prompt_id``, ``prompt``, ``model_a``,
        ``model_b``, ``answer_a``, ``answer_b``, ``winner``) then ``judge_many``'s columns. ``winner``:
        ``"a"``, ``"b"`` or ``"tie"`` from the (reduced) score (:func:`winner_of`; a pairwise judge whose
        orders disagree calls a tie); ``None`` for an unscored or error battle, which stays in the frame
        (its reason in ``error``) and is counted in ``df.attrs["counts"]``: pass the frame to
        :func:`llm_connect.calibration.battle_outcomes` to keep the decided battles only, or straight to
        ``leaderboard(df, model_a="model_a", model_b="model_b", winner="winner")``. ``df.attrs`` also
        keeps ``judge_many``'s (``budget``, ``reliability`` with epochs...), and ``df.attrs["tournament"]``
        the settings and counts (``pairs``, ``seed``, ``battles``, ``decided``).

    Raises
    ------
    ValidationError
        ``judge`` is not pairwise (the message says why), the answers cannot be scheduled (see
        :func:`schedule_battles`), or a bad run option.

    See Also
    --------
    schedule_battles : The battles, without running them.
    llm_connect.stats.leaderboard : Ratings from the battles.

    Examples
    --------
    >>> from llm_connect.grading import PairwiseJudge
    >>> from llm_connect.testing import ScriptedAdapter
    >>> answers = [{"prompt": "2+2?", "model": "x", "answer": "4"}, {"prompt": "2+2?", "model": "y", "answer": "5"}]
    >>> judge = PairwiseJudge(ScriptedAdapter(['{"winner": "A"}'], cycle=True), both_orders=False)
    >>> tournament(judge, answers, progress=False)[["model_a", "model_b", "winner"]]
      model_a model_b winner
    0       x       y      a
    """
    check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, ledger=ledger,
                      task_type=task_type, budget=budget, epochs=epochs, reducer=reducer)
    if not judge_abilities(judge).pairwise:
        reason = getattr(judge, "not_pairwise_reason", None)  # a PipelineJudge says why it is not
        raise ValidationError("a tournament needs a pairwise judge (one that compares two answers, such as "
                              "PairwiseJudge(adapter), or a pipeline ending in a pairwise verdict); "
                              + (reason if isinstance(reason, str) and reason else
                                 f"{getattr(judge, 'grader_id', type(judge).__name__)!r} does not declare "
                                 "pairwise = True"))
    battles = schedule_battles(answers, prompt=prompt, model=model, answer=answer, prompt_id=prompt_id,
                               pairs=pairs, seed=seed)
    ids = [f"{p}|{a}|{b}" for p, a, b in zip(battles["prompt_id"], battles["model_a"], battles["model_b"],
                                             strict=True)]
    items = [{"id": i, "prompt": p, "baseline": a, "candidate": b, "baseline_model": ma, "candidate_model": mb}
             for i, p, a, b, ma, mb in zip(ids, battles["prompt"], battles["answer_a"], battles["answer_b"],
                                           battles["model_a"].map(str), battles["model_b"].map(str), strict=True)]
    judged = judge_many(judge, items, concurrency=concurrency, progress=progress, run_config=run_config,
                        ledger=ledger, task_type=task_type, budget=budget, epochs=epochs, reducer=reducer)
    out = battles.copy()
    out["winner"] = [winner_of(s, q) for s, q in zip(judged["status"], judged["quality_score"], strict=True)]
    rest = judged.drop(columns=["prompt", "baseline", "candidate"])
    out = out.join(rest.set_index(out.index))
    out.attrs.update(judged.attrs)
    out.attrs["missing"] = battles.attrs["missing"]
    out.attrs["skipped_prompts"] = battles.attrs["skipped_prompts"]
    out.attrs["tournament"] = {"pairs": pairs, "seed": seed, "battles": len(out),
                               "decided": int(out["winner"].notna().sum())}
    return out
