"""GradingResult, the Judge / BaselineGrader protocols, the abilities a judge declares, and its ledger record.

Optional abilities are declared, not guessed (as llm's ``can_stream``): a
judge may set the attributes of :class:`JudgeBase` (``pairwise``,
``rubric_hash``, ``reference_sep``, ``extra_columns`` / ``result_columns`` and
an ``ajudge`` coroutine method). The runtime and calibration read them through
one helper, :func:`judge_abilities`, and call a judge through one dispatch,
:func:`acall_judge` (awaited when the judge declares ``ajudge``, else in a thread).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, runtime_checkable

from .._display import view
from .._docstrings import JUDGE_TEXTS, share_parameters
from .._runtime import to_thread
from ..core import LLMAdapter, LLMResponse, RunConfig
from ..errors import ValidationError
from ..items import canonical_item_id
from ..quality import QualityObservation

__all__ = [
    "AsyncJudge",
    "BaselineGrader",
    "GradingResult",
    "Judge",
    "JudgeAbilities",
    "JudgeBase",
    "acall_judge",
    "judge_abilities",
    "judge_result_columns",
    "observation_for",
    "supports_async",
    "validate_grader_id",
    "validate_score",
]


def validate_grader_id(grader_id: Any) -> str:
    """Return ``grader_id`` or raise ``ValueError`` when it is empty or blank."""
    if not isinstance(grader_id, str) or not grader_id.strip():
        raise ValidationError(f"grader_id must be a non-empty string, got {grader_id!r}")
    return grader_id


def validate_score(score: Any, *, what: str = "quality_score") -> float:
    """Return ``score`` as a float in 0..1 or raise ``ValueError`` saying what is wrong."""
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ValidationError(f"{what} must be a number in 0.0..1.0, got {type(score).__name__} {score!r}")
    value = float(score)
    if math.isnan(value):
        raise ValidationError(f"{what} must be a number in 0.0..1.0, got NaN")
    if not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be in 0.0..1.0, got {value!r}")
    return value


@dataclass(frozen=True)
class GradingResult:
    """One judgment of a candidate against a baseline.

    The first five fields are the contract's. The extras record what the
    judgment itself cost (for an LLM judge: its own calls) and ``details`` for
    audit: the raw reply, the rubric hash, the order asked, a pipeline trace...

    Parameters
    ----------
    quality_score : float
        The candidate's score, in 0..1 (checked: NaN or out of range is an error).
    notes : str
        What the judge said about it.
    grader_id : str
        The judge's id (non-empty).
    baseline_response : LLMResponse
        The reference answer judged against.
    candidate_response : LLMResponse
        The answer judged.
    tokens_in : int, default 0
        The judge's own prompt tokens (every call it made).
    tokens_out : int, default 0
        The judge's own completion tokens.
    cost_usd : float, default 0.0
        The judge's own cost in USD.
    latency_ms : float, default 0.0
        How long the judgment took.
    details : mapping, default {}
        For audit: the raw reply, the rubric hash, the order asked, a pipeline trace...
    tokens_cached : int, default 0
        Of ``tokens_in``, those the provider read from its prompt cache (priced at the cached rate in
        ``cost_usd``).

    Raises
    ------
    ValidationError
        A score out of 0..1, a blank ``grader_id``, ``notes`` that is not a string, or a response that is
        not an :class:`~llm_connect.LLMResponse`.

    Examples
    --------
    >>> from llm_connect import LLMResponse
    >>> reply = LLMResponse(content="4", adapter_id="a", model_id="m")
    >>> GradingResult(1.0, "exact match", "exact-match", reply, reply).quality_score
    1.0
    """

    quality_score: float
    notes: str
    grader_id: str
    baseline_response: LLMResponse
    candidate_response: LLMResponse
    # extras: the judge's own usage, and details for audit
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: of ``tokens_in``, those the provider read from its prompt cache (priced at the cached rate in ``cost_usd``)
    tokens_cached: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "quality_score", validate_score(self.quality_score))
        validate_grader_id(self.grader_id)
        if not isinstance(self.notes, str):
            raise ValidationError(f"notes must be a str, got {type(self.notes).__name__}")
        for name in ("baseline_response", "candidate_response"):
            if not isinstance(getattr(self, name), LLMResponse):
                raise ValidationError(f"{name} must be an LLMResponse")

    def _repr_html_(self) -> str:
        return view("grading_result_html")(self)


@runtime_checkable
class Judge(Protocol):
    """Compares a candidate response with a baseline response.

    The protocol every judge meets: a ``grader_id`` and a :meth:`judge` method. The optional abilities
    (``ajudge``, ``pairwise``, ``rubric_hash``...) are those of :class:`JudgeBase`.

    See Also
    --------
    AsyncJudge : A judge the runner can await.
    JudgeBase : The optional abilities and their defaults.
    """

    @property
    def grader_id(self) -> str: ...  # read-only to callers: a plain attribute or a property satisfies it

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """Judge ``candidate`` against ``baseline`` for ``prompt``.

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        run_config : RunConfig
            The caller's call configuration (a judge drops its budget tracker: the run budget charges the
            judge's calls).

        Returns
        -------
        GradingResult
            The judgment.

        Raises
        ------
        JudgeReplyError
            The judge's reply held no usable verdict (an ``unscored`` row in a batch run).
        """


@runtime_checkable
class AsyncJudge(Judge, Protocol):
    """A judge the runner can await instead of running in a thread.

    See Also
    --------
    supports_async : Whether a judge is one.
    """

    @share_parameters(texts=JUDGE_TEXTS)
    async def ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """The awaitable twin of :meth:`Judge.judge`.

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            The judgment.
        """


@runtime_checkable
class BaselineGrader(Protocol):
    """Generates a baseline and a candidate answer to a prompt and judges them (:class:`PairedGrader`).

    See Also
    --------
    PairedGrader : The implementation.
    """
    def grade(
        self,
        baseline_adapter: LLMAdapter,
        candidate_adapter: LLMAdapter,
        prompt: str,
        run_config: RunConfig,
    ) -> GradingResult:
        """Generate both answers to ``prompt`` and judge them.

        Parameters
        ----------
        baseline_adapter : LLMAdapter
            Answers for the baseline.
        candidate_adapter : LLMAdapter
            Answers for the candidate.
        prompt : str
            The prompt both answer, unchanged.
        run_config : RunConfig
            The call configuration of both answers.

        Returns
        -------
        GradingResult
            The judgment.
        """


# -- declared abilities ------------------------------------------------------------------


class JudgeBase:
    """The optional abilities of a judge, with their defaults; a judge class overrides what it has.

    - ``pairwise``: the judge compares two answers (so a bias probe swaps their order);
    - ``rubric_hash``: a stable hash of the judge's prompt template, recorded in ledgers;
    - ``reference_sep``: the judge splits the baseline into several references on it;
    - ``splits_references``: the judge reads several references itself (``reference_sep``
      is its own setting), so calibration hands it the baseline as is; by default a judge
      with its own ``reference_sep`` attribute does;
    - ``extra_columns`` and :meth:`result_columns`: the judge's own columns in a batch frame;
    - ``judge_model_id``: the model that judges (by default its ``adapter``'s ``model_id``),
      whose family calibration compares with the candidate's (self-preference);
    - an ``async def ajudge(...)`` method: the runner awaits it instead of running
      ``judge`` in a thread.

    Judges need not inherit it (:class:`Judge` is a Protocol): :func:`judge_abilities`
    reads the same attributes, with the same defaults, from any judge.
    """

    pairwise: bool = False
    reference_sep: str | None = None
    splits_references: bool = False
    extra_columns: tuple[str, ...] = ()
    judge_model_id: str | None = None

    @property
    def rubric_hash(self) -> str | None:
        """None: a judge without a prompt template; LLM-based judges override it."""
        return None

    def result_columns(self, result: GradingResult) -> dict[str, Any]:
        """This judge's own columns (``extra_columns``) of one result's batch row.

        Parameters
        ----------
        result : GradingResult
            One judgment of this judge.

        Returns
        -------
        dict
            ``{column: value}`` for each of ``extra_columns`` (empty by default).
        """
        return {}


class InlineJudge(JudgeBase):
    """A judge whose ``judge()`` is quick computation with no I/O (exact match, the lexical judges):
    its ``ajudge`` runs it on the event loop, so the runner spends no thread on it."""

    @share_parameters(texts=JUDGE_TEXTS)
    def judge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:  # pragma: no cover - each subclass defines it
        """Judge ``candidate`` against ``baseline`` for ``prompt`` (quick computation, no I/O).

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            The judgment.
        """
        raise NotImplementedError

    @share_parameters(texts=JUDGE_TEXTS)
    async def ajudge(
        self, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
    ) -> GradingResult:
        """The awaitable twin of :meth:`judge`, run on the event loop (no thread).

        Parameters
        ----------
        {baseline}
        {candidate}
        {prompt}
        {run_config}

        Returns
        -------
        GradingResult
            What :meth:`judge` returns.
        """
        return self.judge(baseline, candidate, prompt=prompt, run_config=run_config)


@dataclass(frozen=True)
class JudgeAbilities:
    """What a judge declares it can do (see :class:`JudgeBase`); built by :func:`judge_abilities`.

    Parameters
    ----------
    is_async : bool, default False
        It declares an ``async def ajudge(...)`` (:func:`supports_async`).
    pairwise : bool, default False
        It compares two answers (a bias probe swaps their order).
    rubric_hash : str, optional
        A stable hash of its prompt template, recorded in ledgers.
    reference_sep : str, optional
        It splits the baseline into several references on it.
    splits_references : bool, default False
        It reads several references itself, so calibration hands it the baseline as is.
    extra_columns : tuple of str, default ()
        Its own columns in a batch frame.
    model_id : str, optional
        The model that judges (whose family calibration compares with the candidate's).
    needs_reference : bool, default True
        False for a judge shown no reference (``needs_reference = False``): a blank baseline is then no
        error.
    """

    is_async: bool = False
    pairwise: bool = False
    rubric_hash: str | None = None
    reference_sep: str | None = None
    splits_references: bool = False
    extra_columns: tuple[str, ...] = ()
    model_id: str | None = None
    #: False for a judge shown no reference (``needs_reference = False``): a blank baseline is then no error.
    needs_reference: bool = True


def _declared(judge: Any, name: str, default: Any) -> Any:
    return getattr(judge, name, default)  # the one place an optional ability is read


def supports_async(judge: Judge) -> TypeGuard[AsyncJudge]:
    """True when ``judge`` declares an ``async def ajudge(...)``: the one rule for awaiting vs a thread.

    Parameters
    ----------
    judge : Judge
        Any judge.

    Returns
    -------
    bool
        Whether the runner awaits it.
    """
    ajudge = _declared(judge, "ajudge", None)
    return ajudge is not None and inspect.iscoroutinefunction(ajudge)


def judge_abilities(judge: Judge) -> JudgeAbilities:
    """The abilities ``judge`` declares, with :class:`JudgeBase`'s defaults for those it does not.

    Parameters
    ----------
    judge : Judge
        Any judge (it need not inherit :class:`JudgeBase`).

    Returns
    -------
    JudgeAbilities
        What it declares.

    Examples
    --------
    >>> from llm_connect.grading import ExactMatchJudge
    >>> judge_abilities(ExactMatchJudge()).pairwise
    False
    """
    rubric_hash = _declared(judge, "rubric_hash", None)
    sep = _declared(judge, "reference_sep", None)
    splits = _declared(judge, "splits_references", None)
    if splits is None:  # a judge outside JudgeBase: one with its own reference_sep setting splits
        splits = hasattr(judge, "reference_sep")
    model = _declared(judge, "judge_model_id", None)
    if model is None:  # an LLM judge's model is its adapter's
        model = _declared(_declared(judge, "adapter", None), "model_id", None)
    return JudgeAbilities(
        is_async=supports_async(judge),
        pairwise=bool(_declared(judge, "pairwise", False)),
        rubric_hash=rubric_hash if isinstance(rubric_hash, str) and rubric_hash else None,
        reference_sep=sep if isinstance(sep, str) and sep else None,
        splits_references=bool(splits),
        extra_columns=tuple(_declared(judge, "extra_columns", ())),
        model_id=model if isinstance(model, str) and model else None,
        needs_reference=_declared(judge, "needs_reference", True) is not False,
    )


def judge_result_columns(judge: Judge, result: GradingResult) -> dict[str, Any]:
    """The judge's own batch columns for ``result`` (empty for a judge that declares none).

    Parameters
    ----------
    judge : Judge
        Any judge.
    result : GradingResult
        One of its judgments.

    Returns
    -------
    dict
        ``{column: value}``.
    """
    columns = _declared(judge, "result_columns", None)
    return dict(columns(result)) if columns is not None else {}


async def acall_judge(
    judge: Judge, baseline: LLMResponse, candidate: LLMResponse, *, prompt: str, run_config: RunConfig
) -> GradingResult:
    """Judge one pair, awaiting ``ajudge`` when the judge declares it, else ``judge`` in a worker thread.

    The one sync/async dispatch of the package (the runner, compound judges and
    :class:`PairedGrader` all call judges through it).

    Parameters
    ----------
    judge : Judge
        Any judge.
    baseline : LLMResponse
        The reference answer.
    candidate : LLMResponse
        The answer judged.
    prompt : str
        The prompt both answer.
    run_config : RunConfig
        The caller's call configuration.

    Returns
    -------
    GradingResult
        The judgment.
    """
    if supports_async(judge):
        result: GradingResult = await judge.ajudge(baseline, candidate, prompt=prompt, run_config=run_config)
        return result
    threaded: GradingResult = await to_thread(judge.judge, baseline, candidate, prompt=prompt, run_config=run_config)
    return threaded


# -- the ledger record ----------------------------------------------------------------------


def observation_for(
    result: GradingResult,
    *,
    task_type: str,
    judge: Judge | None = None,
    item_id: Any = None,
    extra_tags: Mapping[str, Any] | None = None,
) -> QualityObservation:
    """The candidate's :class:`QualityObservation` for one grade, with grader id, rubric hash and item id in tags.

    Parameters
    ----------
    result : GradingResult
        The grade.
    task_type : str
        The task it is recorded under.
    judge : Judge, optional
        The judge (its rubric hash; else the result's ``details["rubric_hash"]``).
    item_id : object, optional
        Stored as plain JSON (see :func:`llm_connect.items.canonical_item_id`); a missing one (None/NaN) is
        left out.
    extra_tags : mapping, optional
        More tags.

    Returns
    -------
    QualityObservation
        The candidate's observation: ``cost_usd`` is the candidate's; the judge's own cost is
        ``tags["judge_cost_usd"]``; ``tags["judge_tokens_cached"]``: the judge's prompt tokens read from the
        provider's prompt cache (when any).
    """
    cand = result.candidate_response
    tags: dict[str, Any] = {"grader_id": result.grader_id}
    rubric_hash = judge_abilities(judge).rubric_hash if judge is not None else None
    rubric_hash = rubric_hash or result.details.get("rubric_hash")
    if rubric_hash:
        tags["rubric_hash"] = rubric_hash
    item_id = canonical_item_id(item_id)
    if item_id is not None:
        tags["item_id"] = item_id
    if result.cost_usd:
        tags["judge_cost_usd"] = result.cost_usd
    if getattr(result, "tokens_cached", 0):
        tags["judge_tokens_cached"] = int(result.tokens_cached)
    if extra_tags:
        tags.update(extra_tags)
    base = result.baseline_response.adapter_id
    return QualityObservation(
        task_type=task_type,
        adapter_id=cand.adapter_id,
        model_id=cand.model_id,
        cost_usd=cand.cost_usd,
        quality_score=result.quality_score,
        latency_ms=cand.latency_ms,
        tokens_in=cand.tokens_in,
        tokens_out=cand.tokens_out,
        baseline_adapter_id=base if base and base.strip() else None,
        tags=tags,
    )
