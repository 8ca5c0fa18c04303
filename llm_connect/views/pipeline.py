"""A pipeline's graph, drawn with matplotlib: what :meth:`llm_connect.pipelines.Pipeline.plot` shows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..pipelines import Pipeline

__all__ = ["plot_pipeline"]


def plot_pipeline(pipeline: Pipeline, *, ax: Any = None, **kwargs: Any) -> Axes:
    """Draw ``pipeline``'s graph (layers left to right: the item, then each depth of units); returns the Axes.

    LLM units are white boxes, pools grey ones; an arrow joins each input to the unit it feeds.
    ``kwargs`` go to every box's ``ax.text``. Without ``ax``, a pyplot figure sized to the graph.
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
