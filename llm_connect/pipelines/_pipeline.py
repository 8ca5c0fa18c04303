"""Layers and pipelines: build a graph of units with ``>>``, run it on items, trace every call.

Connections, pinned. A :class:`Layer` holds units (or sub-pipelines) side by
side; ``connect`` says how its outputs feed the *next* stage:

- ``"dense"`` (default): every output feeds every unit of the next stage;
- ``"broadcast"``: output i feeds unit i (equal sizes);
- ``"cumulative"``: output i feeds units 0..i (so unit j reads outputs j..n-1);
- ``"last"``: only the last output feeds onward.

``inner="chain"`` runs a layer's units one after another (debate turns,
self-refinement): unit 0 reads the layer's inputs, unit k reads unit k-1; the
layer's outputs are all its units' outputs (follow with ``connect="last"`` to
keep only the final turn). ``Layer(judge >> verify, repeat=3)`` holds three
independent judge-then-verify chains.

Verify stages, pinned. A verify unit checks exactly one verdict. So a stage
that is a single :class:`VerifyUnit` without an explicit ``repeat`` (in Python:
``Layer(verify)`` or a bare ``>> verify``; in a config: no ``repeat:`` key),
following a stage of n outputs, is replicated n times and connected
``broadcast``: each verdict gets its own verifier (as Verdict does). A verify
stage of n units after n outputs is connected ``broadcast`` unless the previous
layer says otherwise; any other shape that would give a verifier more than one
input is a :class:`ConfigError`. A judge after several outputs stays ``dense``
(it reads them all, e.g. as ``{previous.judge[2]}``); a pool always reads all.

A pipeline must end in exactly one output (end an ensemble with a pool).
Every item runs its independent units concurrently.

The base class :class:`Unit` lives here, beside :class:`Pipeline`, because
``unit >> unit`` makes a pipeline. The LLM units and pools derive from it in
modules above this one; the pipeline asks a unit what it is through the class
attributes it declares (``calls_llm``, ``checks_one_verdict``) and its methods,
never through its class, so it imports none of them. :meth:`Pipeline.plot` is
drawn by :func:`llm_connect.views.plot_pipeline`, found by name at call time.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from .._display import view
from .._docstrings import PIPELINE_TEXTS, share_parameters
from .._options import check_run_options
from .._runtime import on_background, run_sync
from ..columns import PIPELINE_COLUMNS, PIPELINE_EXTRA_COLUMNS
from ..core import BudgetTracker, LLMAdapter, RunConfig
from ..errors import ConfigError, JudgeReplyError, ValidationError
from ..grading._base import validate_score
from ..grading._epochs import EPOCH_COLUMNS, Reducer, epoch_reliability, epoch_run_config, reducer_of
from ..grading._judge_many import reduce_item
from ..grading._parse import brief_repr
from ..items import item_text, items_frame, reference_text
from ..runner import RunPlan, arun_plan, attach_rows, run_budget, run_plan
from ._pipeline_judge import PipelineJudge, _not_pairwise_reason, _usage_response
from ._scales import Scale
from ._trace import PipelineResult, Trace, UnitOutput
from ._unit_base import NodeContext, _check_name

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CONNECTIONS", "MAX_REPEAT", "PIPELINE_COLUMNS", "Layer", "Pipeline", "Unit"]

#: The largest ``repeat`` of a :class:`Layer` (each copy is at least one more call per item), enforced by
#: ``Layer(...)`` and by :func:`~llm_connect.pipelines.from_config` alike.
MAX_REPEAT = 100

CONNECTIONS = ("dense", "broadcast", "cumulative", "last")
# item fields holding the reference answer: blank is an error, as a missing field is
_REFERENCE_FIELDS = frozenset({"baseline", "reference"})
INNER = ("independent", "chain")


@share_parameters(texts=PIPELINE_TEXTS)
class Unit:
    """A step of a pipeline. Join steps with ``>>``.

    A subclass declares what it is as class attributes, which the pipeline reads
    (never the subclass itself): ``kind`` (its name in traces and configs),
    ``calls_llm`` (an LLM unit: it has an ``adapter``, ``None`` for the
    pipeline's), and ``checks_one_verdict`` (a verify unit: a lone one after
    ``n`` outputs is copied ``n`` times, connected ``broadcast``; see the module
    docs).

    Parameters
    ----------
    name : str
        The unit's name.
    {origin}
    """

    kind: ClassVar[str] = "unit"
    calls_llm: ClassVar[bool] = False
    checks_one_verdict: ClassVar[bool] = False

    def __init__(self, name: str, origin: str | None = None) -> None:
        self.name = _check_name(name)
        self.origin = origin  # where a config defined it, for error messages

    def __rshift__(self, other: Any) -> Pipeline:
        return Pipeline([self]) >> other

    def where(self, node: str) -> str:
        """Where the unit is, for an error message: ``node``, after the config location that defined it.

        Parameters
        ----------
        node : str
            The node's name in the graph.

        Returns
        -------
        str
            The location.
        """
        return f"{self.origin} ({node})" if self.origin else node

    def describe(self) -> str:
        """One line saying what the unit is (in :meth:`Pipeline.describe` and traces).

        Returns
        -------
        str
            The line (the ``kind`` here).
        """
        return self.kind

    def describe_call(self) -> list[str]:
        """The lines :meth:`Pipeline.describe` writes under this unit's (hashed into the rubric hash): none here;
        an LLM unit's prompt and call settings.

        Returns
        -------
        list of str
            The lines.
        """
        return []

    def output_scale(self, input_scales: Sequence[Scale | None], where: str) -> Scale | None:
        """The scale of the unit's output, from those of its inputs (what each kind of unit defines).

        Parameters
        ----------
        input_scales : sequence of Scale or None
            The inputs' scales.
        where : str
            Where the unit is, for an error.

        Returns
        -------
        Scale or None
            The output's scale.

        Raises
        ------
        ConfigError
            Inputs whose scales the unit cannot combine.
        """
        raise NotImplementedError

    def check_inputs(self, inputs: Sequence[tuple[str, Unit]], where: str) -> None:
        """Refuse, at build time, inputs this unit cannot use.

        Parameters
        ----------
        inputs : sequence of (str, Unit)
            Each input's node and unit.
        where : str
            Where the unit is, for an error.

        Raises
        ------
        ConfigError
            Inputs it cannot use.
        """

    async def execute(self, ctx: NodeContext) -> UnitOutput:
        """Run the unit on one item (what each kind of unit defines).

        Parameters
        ----------
        ctx : NodeContext
            The node being run: the item, the inputs' outputs, the run config, the trace.

        Returns
        -------
        UnitOutput
            The output.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


@share_parameters(texts=PIPELINE_TEXTS)
class Layer:
    """Units (or sub-pipelines) side by side: ``Layer(unit, repeat=3)``, ``Layer([a, b, c])``.

    ``repeat`` repeats the list (``Layer([a, b], repeat=2)`` is a, b, a, b),
    at most :data:`MAX_REPEAT` times;
    ``inner`` is ``"independent"`` or ``"chain"``; ``connect`` how the layer
    feeds the next stage (``None``: dense, or broadcast into verify units; see
    the module docs).

    Parameters
    ----------
    units : Unit or Pipeline or sequence of them
        The units (or sub-pipelines).
    repeat : int, optional
        Repeat the list (above).
    inner : {"independent", "chain"}, default "independent"
        Whether the layer's units run side by side, or each after the one before.
    connect : {"dense", "broadcast", "cumulative", "last"}, optional
        How the layer feeds the next stage (:data:`CONNECTIONS`).
    {origin}

    Raises
    ------
    ConfigError
        No units, a ``repeat`` out of range, or an unknown ``inner`` or ``connect``.
    """

    def __init__(
        self,
        units: Unit | Pipeline | Sequence[Unit | Pipeline],
        repeat: int | None = None,
        *,
        inner: str = "independent",
        connect: str | None = None,
        origin: str | None = None,
    ) -> None:
        if isinstance(units, (Unit, Pipeline)):
            base: list[Unit | Pipeline] = [units]
        elif isinstance(units, Sequence) and not isinstance(units, str):
            base = list(units)
        else:
            raise ConfigError(f"a Layer holds units or pipelines, got {type(units).__name__}")
        if not base:
            raise ConfigError("a Layer needs at least one unit")
        for u in base:
            if not isinstance(u, (Unit, Pipeline)):
                raise ConfigError(f"a Layer holds units or pipelines, got {type(u).__name__}")
        if repeat is not None and (
            isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= MAX_REPEAT
        ):
            raise ConfigError(
                f"repeat must be an integer from 1 to MAX_REPEAT = {MAX_REPEAT}, got {brief_repr(repeat)}"
            )
        if inner not in INNER:
            raise ConfigError(f"inner must be one of {list(INNER)}, got {inner!r}")
        if connect is not None and connect not in CONNECTIONS:
            raise ConfigError(f"connect must be one of {list(CONNECTIONS)}, got {connect!r}")
        self.base = base
        self.repeat = repeat
        self.inner = inner
        self.connect = connect
        self.origin = origin

    @property
    def elements(self) -> list[Unit | Pipeline]:
        return self.base * (self.repeat or 1)

    def __rshift__(self, other: Any) -> Pipeline:
        return Pipeline([self]) >> other

    def __repr__(self) -> str:
        return f"Layer({self.base!r}, repeat={self.repeat!r}, inner={self.inner!r}, connect={self.connect!r})"


def _stages_of(x: Any) -> list[Layer]:
    if isinstance(x, Pipeline):
        return list(x.stages)
    if isinstance(x, Layer):
        return [x]
    if isinstance(x, Unit):
        return [Layer(x)]
    raise ConfigError(f"cannot join {type(x).__name__} into a pipeline; use units, layers or pipelines")


@dataclass
class _Node:
    id: str
    unit: Unit
    inputs: tuple[str, ...]
    replica: int
    depth: int
    scale: Scale | None
    adapter: LLMAdapter | None
    where: str
    replicas: int = 1  # how many copies of its unit the graph holds (set once built)


@dataclass
class _Graph:
    nodes: dict[str, _Node]
    exit: str
    item_fields: frozenset[str]


class _Builder:
    def __init__(self, default_adapter: LLMAdapter | None) -> None:
        self.nodes: dict[str, _Node] = {}
        self.name_counts: dict[str, int] = {}
        self.replicas: dict[int, int] = {}
        self.default_adapter = default_adapter

    def add(self, unit: Unit, inputs: Sequence[str]) -> str:
        k = self.name_counts.get(unit.name, 0)
        self.name_counts[unit.name] = k + 1
        node_id = f"{unit.name}[{k}]"
        replica = self.replicas.get(id(unit), 0)
        self.replicas[id(unit)] = replica + 1
        where = unit.where(node_id)
        unit.check_inputs([(i, self.nodes[i].unit) for i in inputs], where)
        scale = unit.output_scale([self.nodes[i].scale for i in inputs], where)
        adapter = None
        if unit.calls_llm:
            own = getattr(unit, "adapter", None)  # an LLM unit's own adapter (None: the pipeline's)
            adapter = own if own is not None else self.default_adapter
            if adapter is None:
                raise ConfigError(
                    f"{where}: no adapter; give the unit adapter=... or the pipeline one "
                    "(Pipeline(..., adapter=...), from_config(..., adapter=...))"
                )
        depth = 1 + max((self.nodes[i].depth for i in inputs), default=0)
        self.nodes[node_id] = _Node(node_id, unit, tuple(inputs), replica, depth, scale, adapter, where)
        return node_id

    def stages(self, stages: Sequence[Layer], entry: list[str]) -> list[str]:
        exits = entry
        connect: str | None = "dense"
        for s, layer in enumerate(stages):
            exits = self.layer(layer, exits, connect, first=s == 0)
            connect = layer.connect
        return exits

    def layer(self, layer: Layer, incoming: list[str], connect: str | None, *, first: bool) -> list[str]:
        elements = layer.elements
        where = layer.origin or f"layer of {', '.join(_label(e) for e in layer.base)}"
        all_verify = all(isinstance(e, Unit) and e.checks_one_verdict for e in elements)
        if first:
            connect = "dense"  # the entry inputs feed every element
        elif all_verify and len(incoming) > 1 and connect in (None, "broadcast"):
            if layer.repeat is None and len(elements) == 1:
                elements = elements * len(incoming)  # one verifier per verdict
            connect = "broadcast"
        connect = connect or "dense"
        n = len(elements)
        if connect == "broadcast" and len(incoming) != n:
            raise ConfigError(
                f"{where}: broadcast joins equal sizes, but {len(incoming)} outputs meet {n} units"
            )
        assigned: list[list[str]] = []
        for j in range(n):
            if connect == "dense":
                ins = list(incoming)
            elif connect == "broadcast":
                ins = [incoming[j]]
            elif connect == "cumulative":
                ins = incoming[j:]
                if incoming and not ins:
                    raise ConfigError(
                        f"{where}: cumulative: unit {j} receives nothing ({len(incoming)} outputs feed units 0..i)"
                    )
            else:  # last
                ins = incoming[-1:]
            assigned.append(ins)
        exits: list[str] = []
        previous_exits: list[str] | None = None
        for j, element in enumerate(elements):
            ins = assigned[j] if (layer.inner == "independent" or previous_exits is None) else previous_exits
            out = self.stages(element.stages, ins) if isinstance(element, Pipeline) else [self.add(element, ins)]
            exits.extend(out)
            previous_exits = out
        return exits


def _label(x: Unit | Pipeline) -> str:
    return x.name if isinstance(x, Unit) else "(" + " >> ".join(_label(e) for s in x.stages for e in s.base) + ")"


class Pipeline:
    """A compound judge: units and layers joined with ``>>``.

    ``threshold`` (0..1) turns the final score into pass/fail; ``adapter``
    serves every LLM unit that has none. Build with ``unit >> unit``,
    ``Layer(...) >> pool`` or :func:`from_config`; run with :meth:`run` /
    :meth:`run_many`; plug into grading with :meth:`as_judge`.

    Parameters
    ----------
    stages : sequence of Unit or Layer or Pipeline, default ()
        The stages, in order (``a >> b`` builds them).
    threshold : float, optional
        Turns the final score into pass/fail (0..1).
    adapter : LLMAdapter, optional
        Serves every LLM unit that has none.
    name : str, default "pipeline"
        The pipeline's name (its grader id as a judge).

    Raises
    ------
    ConfigError
        A bad ``threshold``, ``adapter`` or ``name``; the graph itself is checked when it is first used
        (:meth:`validate`).

    See Also
    --------
    from_config : A pipeline from a YAML or JSON config.
    llm_connect.grading.PanelJudge : Several judges, aggregated.

    Examples
    --------
    >>> from llm_connect.pipelines import BooleanScale, JudgeUnit, Layer, MajorityPool
    >>> from llm_connect.testing import ScriptedAdapter
    >>> unit = JudgeUnit("Is {candidate} right for {prompt}?", BooleanScale(), temperature=0.7, seed=1)
    >>> pipeline = Pipeline(Layer(unit, repeat=3) >> MajorityPool(), adapter=ScriptedAdapter(["yes"], cycle=True))
    >>> result = pipeline.run({"prompt": "2+2?", "candidate": "4"})
    >>> result.quality_score, result.trace.calls
    (1.0, 3)
    """

    def __init__(
        self,
        stages: Any = (),
        *,
        threshold: float | None = None,
        adapter: LLMAdapter | None = None,
        name: str = "pipeline",
    ) -> None:
        if isinstance(stages, (Pipeline, Layer, Unit)):
            stages = [stages]
        flat: list[Layer] = []
        for s in stages:
            flat.extend(_stages_of(s))
        self.stages: tuple[Layer, ...] = tuple(flat)
        if threshold is not None:
            try:
                threshold = validate_score(threshold, what="threshold")
            except ValidationError as exc:
                raise ConfigError(str(exc)) from None
        self.threshold = threshold
        if adapter is not None and not callable(getattr(adapter, "complete", None)):
            raise ConfigError("adapter must have a complete(prompt, run_config) method")
        self.adapter = adapter
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a pipeline name must be a non-empty string, got {name!r}")
        self.name = name
        self._graph: _Graph | None = None

    def __rshift__(self, other: Any) -> Pipeline:
        threshold = self.threshold
        adapter = self.adapter
        if isinstance(other, Pipeline):
            threshold = threshold if threshold is not None else other.threshold
            adapter = adapter if adapter is not None else other.adapter
        return Pipeline([*self.stages, *_stages_of(other)], threshold=threshold, adapter=adapter, name=self.name)

    def with_options(
        self, *, adapter: LLMAdapter | None = None, threshold: float | None = None, name: str | None = None
    ) -> Pipeline:
        """A copy with a default adapter, threshold or name set (the others kept).

        Parameters
        ----------
        adapter : LLMAdapter, optional
            The adapter of every LLM unit that has none.
        threshold : float, optional
            The pass/fail threshold.
        name : str, optional
            The name.

        Returns
        -------
        Pipeline
            The copy.
        """
        return Pipeline(
            self.stages,
            threshold=threshold if threshold is not None else self.threshold,
            adapter=adapter if adapter is not None else self.adapter,
            name=name or self.name,
        )

    # -- the graph ------------------------------------------------------------------

    def _compiled(self) -> _Graph:
        if self._graph is None:
            if not self.stages:
                raise ConfigError("the pipeline is empty; join units with >>")
            builder = _Builder(self.adapter)
            exits = builder.stages(self.stages, [])
            if len(exits) != 1:
                raise ConfigError(
                    f"the pipeline ends in {len(exits)} outputs ({', '.join(exits)}); "
                    "end it with one unit or a pool, e.g. >> MajorityPool() or >> MeanPool()"
                )
            fields: set[str] = set()
            for node in builder.nodes.values():
                node.replicas = builder.replicas[id(node.unit)]
                item_fields = getattr(node.unit, "item_fields", None)
                if item_fields is not None:
                    fields |= item_fields()
            self._graph = _Graph(builder.nodes, exits[0], frozenset(fields))
        return self._graph

    def validate(self) -> Pipeline:
        """Build the graph now, raising :class:`ConfigError` for anything wrong.

        Returns
        -------
        Pipeline
            ``self``.

        Raises
        ------
        ConfigError
            An empty pipeline, an LLM unit without an adapter, inputs a unit cannot use...
        """
        self._compiled()
        return self

    @property
    def nodes(self) -> list[str]:
        """The node ids in run order (``judge[0]``, ``verify[0]``...)."""
        return list(self._compiled().nodes)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Every connection as ``(source, target)``; ``"item"`` is the source of the first units."""
        return [(src, n.id) for n in self._compiled().nodes.values() for src in (n.inputs or ("item",))]

    @property
    def llm_units(self) -> int:
        """How many LLM calls one item makes when every reply parses first time."""
        return sum(1 for n in self._compiled().nodes.values() if n.unit.calls_llm)

    @property
    def item_fields(self) -> frozenset[str]:
        """The item fields the templates read (each item must hold them)."""
        return self._compiled().item_fields

    def describe(self) -> str:
        """A stable text of the graph (units, scales, templates, inputs), hashed into :attr:`rubric_hash`.

        Returns
        -------
        str
            The text.
        """
        lines = []
        for node in self._compiled().nodes.values():
            u = node.unit
            lines.append(f"{node.id} <- {', '.join(node.inputs) or 'item'}: {u.describe()}")
            lines.extend(u.describe_call())
        lines.append(f"threshold: {self.threshold}")
        return "\n".join(lines)

    @property
    def rubric_hash(self) -> str:
        return hashlib.sha256(self.describe().encode("utf-8")).hexdigest()[:16]

    def graph(self) -> str:
        """The graph in Graphviz DOT (render with ``graphviz.Source(p.graph())`` or ``dot -Tsvg``).

        Returns
        -------
        str
            The DOT source.
        """
        g = self._compiled()

        def q(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [f"digraph {q(self.name)} {{", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];',
                 '  item [shape=ellipse, label="item"];']
        for node in g.nodes.values():
            shape = "box" if node.unit.calls_llm else "hexagon"
            label = f"{node.id}\\n{node.unit.describe()}"
            label = label.replace('"', "'")
            lines.append(f'  {q(node.id)} [shape={shape}, label="{label}"];')
        for node in g.nodes.values():
            for src in node.inputs or ("item",):
                lines.append(f"  {q(src) if src != 'item' else 'item'} -> {q(node.id)};")
        if self.threshold is not None:
            lines.append(f'  verdict [shape=ellipse, label="pass if score >= {self.threshold:g}"];')
            lines.append(f"  {q(g.exit)} -> verdict;")
        lines.append("}")
        return "\n".join(lines)

    def plot(self, ax: Any = None, **kwargs: Any) -> Any:
        """Plot the graph with matplotlib (layers left to right), as every ``.plot()`` of the package does.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure's Axes when ``None``.
        **kwargs
            Passed to the box labels of :func:`llm_connect.views.plot_pipeline`, which draws it.

        Returns
        -------
        matplotlib.axes.Axes
            The Axes drawn on.
        """
        return view("plot_pipeline")(self, ax=ax, **kwargs)

    def _repr_html_(self) -> str:
        return view("pipeline_html")(self)

    def __repr__(self) -> str:
        return f"Pipeline(name={self.name!r}, stages={len(self.stages)}, threshold={self.threshold!r})"

    # -- running ----------------------------------------------------------------------

    async def _execute(
        self, item: Mapping[str, Any], run_config: RunConfig, trace: Trace, epoch: int = 0
    ) -> PipelineResult:
        g = self._compiled()
        if not isinstance(item, Mapping):
            raise ValidationError(
                f"an item must be a mapping (prompt, candidate, baseline...), got {type(item).__name__}"
            )
        tasks: dict[str, asyncio.Future[UnitOutput]] = {}

        async def run(node: _Node) -> UnitOutput:
            inputs = [await tasks[i] for i in node.inputs]
            ctx = NodeContext(node.id, inputs, item, node.adapter, run_config, trace, node.replica, node.where,
                              epoch=epoch, replicas=node.replicas)
            return await node.unit.execute(ctx)

        for node in g.nodes.values():
            tasks[node.id] = asyncio.ensure_future(run(node))
        try:
            await asyncio.gather(*tasks.values())
        except BaseException:
            for t in tasks.values():
                t.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            raise
        outputs = {nid: t.result() for nid, t in tasks.items()}
        final = outputs[g.exit]
        if not final.ok or final.score is None:
            raise JudgeReplyError(f"{self.name}: no verdict: {final.node}: {final.error}")
        passed = None if self.threshold is None else final.score >= self.threshold
        return PipelineResult(
            quality_score=final.score, verdict=final.verdict, value=final.value, passed=passed,
            threshold=self.threshold, notes=_notes(final, passed, self.threshold), outputs=outputs, trace=trace,
        )

    async def _run_traced(
        self, item: Mapping[str, Any], run_config: RunConfig | None, trace: Trace, epoch: int = 0
    ) -> PipelineResult:
        """Run one item; ``epoch``: the repeat (0 for a single run), which moves every seeded unit's seed."""
        try:
            return await self._execute(item, run_config or RunConfig(), trace, epoch)
        except Exception as exc:
            _attach_trace(exc, trace)
            raise

    async def arun(self, item: Mapping[str, Any], *, run_config: RunConfig | None = None) -> PipelineResult:
        """The awaitable twin of :meth:`run`.

        Parameters
        ----------
        item : mapping
            The fields the templates read.
        run_config : RunConfig, optional
            The base of every call.

        Returns
        -------
        PipelineResult
            What :meth:`run` returns.
        """
        self._compiled()
        return await on_background(self._run_traced(item, run_config, Trace()))

    def run(self, item: Mapping[str, Any], *, run_config: RunConfig | None = None) -> PipelineResult:
        """Run one item (a mapping with the fields the templates read).

        Parameters
        ----------
        item : mapping
            The fields the templates read.
        run_config : RunConfig, optional
            The base of every call (its budget tracker is charged); each unit sets its own temperature.

        Returns
        -------
        PipelineResult
            The verdict, score, pass/fail and the trace of every call.

        Raises
        ------
        JudgeReplyError
            No final verdict; any exception carries ``.trace``.
        """
        self._compiled()
        return run_sync(self._run_traced(item, run_config, Trace()))

    def _plan(self, items: Any, run_config: RunConfig | None, budget: BudgetTracker | float | None,
              epochs: int = 1, reducer: str | Reducer = "mean") -> RunPlan:
        """The batch plan of :meth:`run_many` (and of :meth:`arun_many`: the same rows and columns).

        With ``epochs=k > 1`` the plan has ``k * n`` runs, epoch-major (every item's epoch 0
        first), as :func:`~llm_connect.grading.judge_many`'s, and its ``finish`` reduces them."""
        k = epochs  # checked by run_many / arun_many
        reducer_name, _ = reducer_of(reducer)
        g = self._compiled()
        frame = items_frame(items, ())
        missing = sorted(f for f in g.item_fields if f not in frame.columns)
        if missing:
            raise ConfigError(
                f"{self.name}: the templates read the field(s) {missing} but the items have {list(frame.columns)}"
            )
        records = cast(list[dict[str, Any]], frame.to_dict("records"))  # items_frame: str column names
        n = len(records)
        traces = [Trace() for _ in range(n * k)]
        rc = run_config or RunConfig()
        read = sorted(g.item_fields)

        async def work(pos: int) -> dict[str, Any]:
            epoch, i = divmod(pos, n)
            for name in read:  # a missing field the templates read is an error row, never the text "nan"
                if name in _REFERENCE_FIELDS:
                    reference_text(records[i][name], column=name)
                else:
                    item_text(records[i][name], name)
            result = await self._run_traced(records[i], epoch_run_config(rc, epoch), traces[pos], epoch)
            return {"quality_score": result.quality_score, "grader_id": self.name, "verdict": result.verdict,
                    "passed": result.passed, "notes": result.notes}

        def finish(rows: list[dict[str, Any]], interrupted: bool) -> Any:
            return self._finish(frame, rows, traces, interrupted, k, reducer, reducer_name)

        return RunPlan(n * k, work, finish, desc=self.name if k == 1 else f"{self.name} ({k} epochs)",
                         budget=run_budget(budget, run_config))

    def _finish(self, frame: Any, rows: list[dict[str, Any]], traces: list[Trace], interrupted: bool,
                k: int = 1, reducer: str | Reducer = "mean", reducer_name: str = "mean") -> Any:
        for row, trace in zip(rows, traces, strict=True):
            totals = trace.totals()
            row.update(calls=totals["calls"], tokens_in=totals["tokens_in"], tokens_out=totals["tokens_out"],
                       judge_cost_usd=totals["cost_usd"])  # the row's latency_ms stays the item's wall time
            row["grader_id"] = self.name
            row["trace"] = trace
        columns: tuple[str, ...] = PIPELINE_COLUMNS
        if k > 1:
            n = len(rows) // k
            by_item = [[rows[e * n + i] for e in range(k)] for i in range(n)]
            pairwise = _is_pairwise_scale(self._compiled())
            reduced = []
            for epoch_rows in by_item:
                row = reduce_item(epoch_rows, reducer, reducer_name, pairwise=pairwise,
                                  extra=PIPELINE_EXTRA_COLUMNS)
                score = row.get("quality_score")
                if self.threshold is not None and row.get("status") == "scored":
                    row["passed"] = bool(score is not None and score >= self.threshold)
                reduced.append(row)
            rows = reduced
            columns = (*PIPELINE_COLUMNS, *EPOCH_COLUMNS)
        out = attach_rows(frame, rows, columns, interrupted)
        if self.threshold is not None:
            out["passed"] = out["passed"].astype("boolean")
        if k > 1:
            out.attrs["epochs"] = {"epochs": k, "reducer": reducer_name}
            out.attrs["reliability"] = epoch_reliability([r["epoch_scores"] for r in rows],
                                                         reducer=reducer_name).to_dict()
        out.attrs["totals"] = {
            "items": len(rows),
            "calls": int(sum(t.calls for t in traces)),
            "tokens_in": int(sum(t.tokens_in for t in traces)),
            "tokens_out": int(sum(t.tokens_out for t in traces)),
            "judge_cost_usd": math.fsum(t.cost_usd for t in traces),
        }
        return out

    @share_parameters
    def run_many(
        self,
        items: Any,
        *,
        concurrency: int = 16,
        progress: bool = True,
        run_config: RunConfig | None = None,
        budget: BudgetTracker | float | None = None,
        epochs: int = 1,
        reducer: str | Reducer = "mean",
        batch: Any = False,
    ) -> pd.DataFrame:
        """Run many items; a DataFrame with one row per item, in order, never fewer.

        Runs on the one runner (:mod:`llm_connect.runner`), as :func:`llm_connect.grading.judge_many`
        does. An item whose field read by the templates is missing (None/NaN), or whose
        ``baseline``/``reference`` is blank, is an ``error`` row naming it.

        Parameters
        ----------
        items : DataFrame or iterable of mappings
            The items, with the fields the templates read.
        {concurrency}
        {progress}
        {run_config}
            The base of every unit's calls (each unit sets its own temperature).
        {budget}
            Every call of every unit is charged to it: ``budget=0.50`` caps the run at about $0.50. Every
            reply that came back is kept in the item's trace and cost, and an item whose later units were
            refused is an ``error`` row too, its paid calls still in its cost. ``df.attrs["budget"]`` holds
            the limit, the spend and the calls.
        {epochs}
            As :func:`~llm_connect.grading.judge_many` does: the same reducers, the same
            :data:`~llm_connect.grading.EPOCH_COLUMNS` after the pipeline's columns, ``df.attrs["epochs"]``
            and ``df.attrs["reliability"]``. Epoch ``e > 0`` moves the run config's seed by ``e`` and every
            seeded unit's by ``e`` times its copies, so a response cache serves no repeat. ``calls``,
            tokens, cost and latency are summed over the epochs; ``passed`` is the reduced score at
            ``threshold``; ``verdict`` and ``trace`` are the first scored epoch's (a pairwise pipeline's
            ``verdict`` is read from the reduced score).
        {reducer}
        {batch}
            A unit that reads an earlier unit's reply waits for the next round.

        Returns
        -------
        DataFrame
            Columns (:data:`~llm_connect.columns.PIPELINE_COLUMNS`): the items' own, then a judge's result
            columns, as :func:`~llm_connect.grading.judge_many` of :meth:`as_judge` gives them:
            ``quality_score``, ``notes``, ``grader_id`` (the pipeline's name), ``status`` (scored /
            unscored / error), ``error``, ``latency_ms`` (the item's wall time), ``judge_tokens_in``,
            ``judge_tokens_out``, ``judge_cost_usd`` (summed over the item's calls); then the pipeline's
            own: ``verdict``, ``passed``, ``calls`` and ``trace``. ``df.attrs["totals"]`` holds the run's
            calls, tokens and cost.

        Raises
        ------
        ConfigError
            The templates read fields the items lack, or the pipeline does not compile.
        ValidationError
            A bad run option.

        See Also
        --------
        arun_many : The awaitable twin.
        run : One item.
        """
        check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, budget=budget,
                          epochs=epochs, reducer=reducer, batch=batch)
        from ..grading._batch_api import provider_batch_plan

        plan, concurrency = provider_batch_plan(self._plan(items, run_config, budget, epochs, reducer), batch,
                                                concurrency=concurrency, progress=progress)
        return run_plan(plan, concurrency=concurrency, progress=progress)

    @share_parameters
    async def arun_many(
        self,
        items: Any,
        *,
        concurrency: int = 16,
        progress: bool = True,
        run_config: RunConfig | None = None,
        budget: BudgetTracker | float | None = None,
        epochs: int = 1,
        reducer: str | Reducer = "mean",
        batch: Any = False,
    ) -> pd.DataFrame:
        """The awaitable twin of :meth:`run_many`: the same rows and columns.

        Parameters
        ----------
        items : DataFrame or iterable of mappings
            The items, with the fields the templates read.
        {concurrency}
        {progress}
        {run_config}
        {budget}
        {epochs}
        {reducer}
        {batch}

        Returns
        -------
        DataFrame
            What :meth:`run_many` returns.

        See Also
        --------
        run_many : The sync twin.
        """
        check_run_options(concurrency=concurrency, progress=progress, run_config=run_config, budget=budget,
                          epochs=epochs, reducer=reducer, batch=batch)
        from ..grading._batch_api import provider_batch_plan

        plan, concurrency = provider_batch_plan(self._plan(items, run_config, budget, epochs, reducer), batch,
                                                concurrency=concurrency, progress=progress)
        return await arun_plan(plan, concurrency=concurrency, progress=progress)

    def as_judge(self, grader_id: str | None = None) -> PipelineJudge:
        """This pipeline as a :class:`~llm_connect.grading.Judge` (``judge()`` and ``ajudge()``).

        Parameters
        ----------
        grader_id : str, optional
            The judge's id (default: the pipeline's name).

        Returns
        -------
        PipelineJudge
            The judge.
        """
        return PipelineJudge(self, grader_id or self.name)


def _is_pairwise_scale(g: _Graph) -> bool:
    return _not_pairwise_reason(g, "") is None


def _notes(final: UnitOutput, passed: bool | None, threshold: float | None) -> str:
    text = f"{final.node}: {final.verdict}"
    votes = final.details.get("votes") if final.details else None
    if votes:
        text += " (votes " + ", ".join(f"{k}={v}" for k, v in votes.items()) + ")"
    text += f"; score {final.score:.3g}"
    if passed is not None:
        text += f"; {'pass' if passed else 'fail'} at >= {threshold:g}"
    return text


def _attach_trace(exc: BaseException, trace: Trace) -> None:
    try:
        exc.trace = trace  # type: ignore[attr-defined]
        if isinstance(exc, JudgeReplyError) and exc.response is None:
            exc.response = _usage_response(trace, "pipeline")
    except AttributeError:  # an exception type with __slots__: it keeps its own message
        pass
