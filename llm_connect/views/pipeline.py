"""A pipeline's graph, drawn with matplotlib (what :meth:`llm_connect.pipelines.Pipeline.plot` shows), and the
HTML Jupyter shows for a pipeline, its run's trace and an item's result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._html import Markup, html_format, html_table
from ..errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..pipelines import Pipeline, PipelineResult, Trace

__all__ = ["pipeline_html", "pipeline_result_html", "plot_pipeline", "trace_html"]


def plot_pipeline(pipeline: Pipeline, *, ax: Any = None, **kwargs: Any) -> Axes:
    """Draw ``pipeline``'s graph (layers left to right: the item, then each depth of units); returns the Axes.

    LLM units are white boxes, pools grey ones; an arrow joins each input to the unit it feeds.
    ``kwargs`` go to every box's ``ax.text``. Without ``ax``, a pyplot figure sized to the graph.

    Parameters
    ----------
    pipeline : Pipeline
        The pipeline.
    ax : matplotlib.axes.Axes, optional
        Where to draw (default: a new figure sized to the graph).
    **kwargs
        Go to every box's ``ax.text``.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    g = pipeline._compiled()
    if ax is None:
        import matplotlib.pyplot as plt

        depth = max(n.depth for n in g.nodes.values())
        width = max(sum(1 for n in g.nodes.values() if n.depth == d) for d in range(1, depth + 1))
        _, ax = plt.subplots(figsize=(2.4 * (depth + 1), 1.0 + 0.9 * width))
    columns: dict[int, list[str]] = {0: ["item"]}
    for node in g.nodes.values():
        columns.setdefault(node.depth, []).append(node.id)
    pos: dict[str, tuple[float, float]] = {}
    for d, ids in columns.items():
        for k, nid in enumerate(ids):
            pos[nid] = (float(d), (len(ids) - 1) / 2.0 - k)
    for node in g.nodes.values():
        for src in node.inputs or ("item",):
            ax.annotate("", xy=pos[node.id], xytext=pos[src],
                        arrowprops={"arrowstyle": "->", "color": "0.5", "shrinkA": 22, "shrinkB": 22})
    box = {"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.3"}
    ax.text(*pos["item"], "item", ha="center", va="center", bbox={**box, "boxstyle": "circle,pad=0.3"}, **kwargs)
    for node in g.nodes.values():
        style = box if node.unit.calls_llm else {**box, "facecolor": "0.92"}
        ax.text(*pos[node.id], node.id, ha="center", va="center", bbox=style, **kwargs)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.7)
    ax.set_axis_off()
    ax.set_title(pipeline.name)
    return ax


def pipeline_html(pipeline: Pipeline) -> Markup:
    """A pipeline's nodes as a table (node, unit, inputs, adapter), captioned with its LLM calls per item.

    Parameters
    ----------
    pipeline : Pipeline

    Returns
    -------
    Markup
        The table; a pipeline that cannot be built yet gives one paragraph saying why.
    """
    try:
        g = pipeline._compiled()
    except ConfigError as exc:
        return html_format("<p>{}: not runnable yet: {}</p>", pipeline.name, str(exc))
    rows = []
    for node in g.nodes.values():
        adapter = getattr(node.adapter, "adapter_id", "") if node.adapter is not None else ""
        rows.append([node.id, node.unit.describe(), ", ".join(node.inputs) or "item", str(adapter)])
    cap = f"{pipeline.name}: {pipeline.llm_units} LLM calls per item"
    if pipeline.threshold is not None:
        cap += f", pass at score >= {pipeline.threshold:g}"
    return html_table(rows, header=["node", "unit", "inputs", "adapter"], caption=cap)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def trace_html(trace: Trace) -> Markup:
    """One row per step of a pipeline's run (node, status, verdict, score, the reply shortened, tokens, cost,
    latency), captioned with the totals.

    Parameters
    ----------
    trace : Trace

    Returns
    -------
    Markup
    """
    head = ["node", "status", "attempt", "verdict", "score", "explanation", "reply", "tokens", "cost (USD)", "ms"]
    body = []
    for r in trace.records:
        cells = [
            r.node,
            r.status,
            str(r.attempt) if r.prompt is not None else "",
            r.verdict or "",
            "" if r.score is None else f"{r.score:.3g}",
            _short(r.explanation or ""),
            _short(r.reply or r.error or ""),
            f"{r.tokens_in}+{r.tokens_out}" if r.prompt is not None else "",
            f"{r.cost_usd:.6f}" if r.prompt is not None else "",
            f"{r.latency_ms:.0f}" if r.prompt is not None else "",
        ]
        body.append(cells)
    t = trace.totals()
    return html_table(
        body,
        header=head,
        caption=f"{t['calls']} calls, {t['tokens_in']}+{t['tokens_out']} tokens, ${t['cost_usd']:.6f}",
        caption_attrs={"style": "caption-side:bottom;text-align:left"},
    )


def pipeline_result_html(result: PipelineResult) -> Markup:
    """An item's result: the verdict, score, pass or fail and notes, then its trace (:func:`trace_html`).

    Parameters
    ----------
    result : PipelineResult

    Returns
    -------
    Markup
    """
    passed = "" if result.passed is None else (" — pass" if result.passed else " — fail")
    head = html_format("<p><b>verdict</b> {} · <b>score</b> {:.3g}{} · {}</p>", result.verdict, result.quality_score,
                       passed, result.notes)
    return head + trace_html(result.trace)
