"""What a pipeline run leaves behind: each unit's output, a trace of every call, the result."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._display import view
from ..errors import ConfigError
from ._scales import Scale
from ._template import TemplateView, ViewList

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PipelineResult", "Trace", "TraceRecord", "UnitOutput"]


@dataclass(frozen=True)
class UnitOutput(TemplateView):
    """One unit's output for one item.

    Parameters
    ----------
    node : str
        The node in the graph.
    unit : str
        The unit's name.
    kind : str
        The unit's kind.
    ok : bool
        False when the unit gave no verdict (its replies never parsed, an input it needs failed, or a pool
        had too few valid inputs).
    value : object, optional
        The scale's value (a label, an int, a float, a bool).
    verdict : str, default ""
        Its text.
    score : float, optional
        Its 0..1 value.
    explanation : str, default ""
        The explanation the unit gave.
    agrees : bool, optional
        A verify unit's: whether it upheld the verdict it checked (its ``value``/``verdict``/``score`` are
        the *verified* verdict).
    scale : Scale, optional
        The output's scale.
    error : str, optional
        Why there is no verdict.
    details : mapping, default {}
        What a pool adds (``votes``, ``scores``, ``n_valid``...).
    """

    node: str
    unit: str
    kind: str
    ok: bool
    value: Any = None
    verdict: str = ""
    score: float | None = None
    explanation: str = ""
    agrees: bool | None = None
    scale: Scale | None = field(default=None, repr=False)
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict, repr=False)

    fields = ("verdict", "explanation", "score", "value", "agrees", "unit", "node")

    def template_attr(self, name: str) -> Any:
        """The value a template reads as ``{previous.NAME.<name>}`` (a score rounded to 4 digits).

        Parameters
        ----------
        name : str
            One of :attr:`fields`.

        Returns
        -------
        object
            The value.
        """
        value = getattr(self, name)
        if name == "score" and value is not None:
            return round(float(value), 4)
        return value

    def __str__(self) -> str:
        if self.explanation:
            return f"Explanation: {self.explanation}\nVerdict: {self.verdict}"
        return f"Verdict: {self.verdict}"


class PreviousView(TemplateView):
    """``{previous...}`` in a template: the unit's inputs.

    ``previous.verdict`` / ``.explanation`` / ``.score`` / ``.value`` / ``.agrees``
    read the single input; ``previous.<unit name>`` is the list of inputs from
    units of that name (``previous.judge[2]``); ``previous.all`` every input.
    """

    _single = ("verdict", "explanation", "score", "value", "agrees")

    def __init__(self, inputs: Sequence[UnitOutput], where: str) -> None:
        self.inputs = list(inputs)
        self.where = where
        names = []
        for out in self.inputs:
            if out.unit not in names:
                names.append(out.unit)
        self.names = names

    @property
    def fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (*self._single, "all", *self.names)

    def template_attr(self, name: str) -> Any:
        if name in self._single:
            if len(self.inputs) != 1:
                raise ConfigError(
                    f"{self.where}: {{previous.{name}}} is ambiguous with {len(self.inputs)} inputs; "
                    f"name one, e.g. {{previous.{self.names[0] if self.names else 'judge'}[0].{name}}}"
                )
            return self.inputs[0].template_attr(name)
        if name == "all":
            return ViewList(self.inputs, "inputs")
        return ViewList([o for o in self.inputs if o.unit == name], f"inputs from unit {name!r}")

    def __str__(self) -> str:
        return str(ViewList(self.inputs, "inputs"))


@dataclass(frozen=True)
class TraceRecord:
    """One step of a run: an LLM call (one attempt), a skipped unit, or a pool.

    Parameters
    ----------
    node : str
        The node.
    unit : str
        The unit's name.
    kind : str
        The unit's kind.
    status : {"ok", "unparsed", "error", "skipped", "failed"}
        What happened (``"failed"``: a pool without enough inputs).
    attempt : int, default 0
        The attempt (0 first).
    inputs : tuple of str, default ()
        The input nodes.
    prompt : str, optional
        The prompt sent.
    reply : str, optional
        The reply.
    value : object, optional
        The value parsed.
    verdict : str, optional
        Its text.
    score : float, optional
        Its 0..1 value.
    explanation : str, optional
        The explanation.
    error : str, optional
        What went wrong.
    adapter_id : str, optional
        The adapter called.
    model_id : str, optional
        Its model.
    tokens_in : int, default 0
        Prompt tokens.
    tokens_out : int, default 0
        Completion tokens.
    cost_usd : float, default 0.0
        The call's cost.
    latency_ms : float, default 0.0
        The call's latency.
    cached : bool, default False
        Served from the response cache.
    """

    node: str
    unit: str
    kind: str
    status: str  # "ok" | "unparsed" | "error" | "skipped" | "failed" (a pool without enough inputs)
    attempt: int = 0
    inputs: tuple[str, ...] = ()
    prompt: str | None = None
    reply: str | None = None
    value: Any = None
    verdict: str | None = None
    score: float | None = None
    explanation: str | None = None
    error: str | None = None
    adapter_id: str | None = None
    model_id: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    cached: bool = False

    @property
    def is_call(self) -> bool:
        return self.prompt is not None and self.status in ("ok", "unparsed")


TRACE_COLUMNS = (
    "node",
    "unit",
    "kind",
    "attempt",
    "status",
    "inputs",
    "verdict",
    "score",
    "explanation",
    "error",
    "prompt",
    "reply",
    "adapter_id",
    "model_id",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "latency_ms",
    "cached",
)


class Trace:
    """Every step of one item's run, in the order the steps finished.

    ``calls`` counts LLM calls that returned (parsed or not); tokens, cost and
    latency are summed over them. Shows as a table in a notebook; ``to_frame()``
    gives the same as a DataFrame.

    Parameters
    ----------
    records : sequence of TraceRecord, default ()
        The steps so far.
    """

    def __init__(self, records: Sequence[TraceRecord] = ()) -> None:
        self.records: list[TraceRecord] = list(records)

    def add(self, record: TraceRecord) -> None:
        """Add one step.

        Parameters
        ----------
        record : TraceRecord
            The step.
        """
        self.records.append(record)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Any:
        return iter(self.records)

    @property
    def calls(self) -> int:
        return sum(1 for r in self.records if r.is_call)

    @property
    def tokens_in(self) -> int:
        return sum(r.tokens_in for r in self.records)

    @property
    def tokens_out(self) -> int:
        return sum(r.tokens_out for r in self.records)

    @property
    def cost_usd(self) -> float:
        return math.fsum(r.cost_usd for r in self.records)

    @property
    def latency_ms(self) -> float:
        """Summed latency of the calls (more than the wall time when units ran concurrently)."""
        return math.fsum(r.latency_ms for r in self.records)

    def totals(self) -> dict[str, Any]:
        """The run's calls, tokens, cost and latency.

        Returns
        -------
        dict
            ``calls``, ``tokens_in``, ``tokens_out``, ``cost_usd``, ``latency_ms``.
        """
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per step: node, status, verdict, score, prompt, reply, tokens, cost, latency...

        Returns
        -------
        DataFrame
            :data:`TRACE_COLUMNS`.
        """
        import pandas as pd

        rows = [{c: getattr(r, c) for c in TRACE_COLUMNS} for r in self.records]
        frame = pd.DataFrame(rows, columns=list(TRACE_COLUMNS))
        frame["inputs"] = [", ".join(r.inputs) for r in self.records]
        return frame

    def _repr_html_(self) -> str:
        return view("trace_html")(self)

    def __repr__(self) -> str:
        t = self.totals()
        return f"Trace({len(self.records)} steps, {t['calls']} calls, ${t['cost_usd']:.6f})"


@dataclass(frozen=True)
class PipelineResult:
    """The outcome of one item: the final verdict, its 0..1 ``quality_score``, pass/fail, every unit's output and
    the trace.

    Parameters
    ----------
    quality_score : float
        The final verdict's 0..1 value (as a judge's :class:`~llm_connect.grading.GradingResult`).
    verdict : str
        The final verdict's text.
    value : object
        Its value on the final scale.
    passed : bool or None
        ``quality_score >= threshold``; ``None`` without a threshold.
    threshold : float or None
        The pipeline's.
    notes : str
        A one-line summary.
    outputs : mapping of str to UnitOutput
        Every node's output.
    trace : Trace
        Every step.
    """

    quality_score: float
    verdict: str
    value: Any
    passed: bool | None
    threshold: float | None
    notes: str
    outputs: Mapping[str, UnitOutput] = field(repr=False)
    trace: Trace = field(repr=False)

    @property
    def calls(self) -> int:
        return self.trace.calls

    @property
    def tokens_in(self) -> int:
        return self.trace.tokens_in

    @property
    def tokens_out(self) -> int:
        return self.trace.tokens_out

    @property
    def cost_usd(self) -> float:
        return self.trace.cost_usd

    @property
    def latency_ms(self) -> float:
        return self.trace.latency_ms

    def _repr_html_(self) -> str:
        return view("pipeline_result_html")(self)
