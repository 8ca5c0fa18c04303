"""The one seam between data and its drawing.

:mod:`llm_connect.views` sits above every floor that computes: it draws what the
others give it, and nothing below it imports it. A data object that offers a
picture or a page as a convenience (``CalibrationReport.widget()``,
``.to_html()``, ``Labeller.widget()``, ``Pipeline.plot()``, every ``_repr_html_``
of the floors below) looks its view up here by name when it is called, as
pandas' ``DataFrame.plot`` finds its plotting backend. So the floors stay one-way,
``import llm_connect`` never loads matplotlib or ipywidgets, and a view is one
function in ``views/`` that takes the object (or plain data) and returns HTML, a
figure or a widget.

The seam is typed: each name a floor reaches is one of :data:`ViewName`, and
:func:`view` is overloaded on those names, so mypy knows that
``view("report_html")`` is a :class:`ReportPage` (called with a report, it gives
HTML) and ``view("report_widget")`` a :class:`Widget`. ``llm_connect.views``
checks statically that each of its functions is what the seam promises.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, overload

__all__ = [
    "VIEW_NAMES",
    "AlignmentPage",
    "FigureView",
    "LedgerPage",
    "ObjectPage",
    "Plot",
    "ReportFigures",
    "ReportPage",
    "ReportViewer",
    "SavedPage",
    "SectionPage",
    "ViewName",
    "Widget",
    "view",
]

_VIEWS = "llm_connect.views"


class ObjectPage(Protocol):
    """One object as HTML: ``view("judge_card_html")(card)`` (the ``_repr_html_`` of most objects)."""

    def __call__(self, obj: Any, /) -> str: ...


class ReportPage(Protocol):
    """A report as an HTML fragment, its figures embedded as PNGs with ``plots``."""

    def __call__(self, report: Any, /, *, plots: bool = ..., title: str = ...) -> str: ...


class SectionPage(Protocol):
    """A section of a report as HTML, its figures embedded with ``plots``."""

    def __call__(self, obj: Any, /, *, plots: bool = ...) -> str: ...


class AlignmentPage(Protocol):
    """An alignment's page: a whole document with ``full_page``, else a fragment."""

    def __call__(self, alignment: Any, /, *, full_page: bool = ..., max_rows: int = ...) -> str: ...


class SavedPage(Protocol):
    """A report written to ``path`` as one self-contained HTML file; returns the path."""

    def __call__(self, report: Any, path: str | Path, /, *, title: str = ...) -> Path: ...


class ReportFigures(Protocol):
    """A report's figures (``matplotlib.figure.Figure``), by name."""

    def __call__(self, report: Any, /) -> Mapping[str, Any]: ...


class FigureView(Protocol):
    """One figure of an object (a ``matplotlib.figure.Figure``), or ``None`` when there is nothing to draw."""

    def __call__(self, obj: Any, /) -> Any: ...


class Plot(Protocol):
    """A seaborn-shaped plot of an object on ``ax`` (default: the current Axes); returns the Axes. Further
    keyword arguments go to the main matplotlib call."""

    def __call__(self, data: Any, /, *, ax: Any = ...) -> Any: ...


class Widget(Protocol):
    """An ipywidgets widget of an object (its parts named in its ``controls`` attribute)."""

    def __call__(self, obj: Any, /) -> Any: ...


class ReportViewer(Protocol):
    """Every judgment of a report in one page (a ``JudgmentViewer``, shown in a sandboxed iframe)."""

    def __call__(self, report: Any, /, *, title: str = ..., height: int = ...) -> Any: ...


class LedgerPage(Protocol):
    """A ledger in one line of HTML: its kind (``"QualityLedger"``) and where it lives."""

    def __call__(self, kind: str, location: str, /) -> str: ...


ObjectPageName = Literal[
    "agreement_table_html", "bias_report_html", "card_registry_html", "epoch_reliability_html",
    "escalation_summary_html", "grading_result_html", "judge_card_html", "labeller_html", "labeller_item_html",
    "leaderboard_comparison_html", "length_controlled_html", "length_effect_html", "pair_agreement_html",
    "pairwise_summary_html", "panel_agreement_html", "pipeline_html", "pipeline_result_html", "probe_result_html",
    "quality_check_html", "routing_decision_html", "selective_cascade_html", "selective_cascade_summary_html",
    "selective_judge_html", "self_preference_html", "trace_html",
]
ReportPageName = Literal["pairwise_report_html", "report_html"]
PlotName = Literal["plot_pipeline", "plot_risk_coverage"]
WidgetName = Literal["labeller_widget", "report_widget"]
#: Every view a floor below :mod:`llm_connect.views` reaches through :func:`view`, each typed by an overload.
ViewName = Literal[
    ObjectPageName, ReportPageName, PlotName, WidgetName, "alignment_html", "group_breakdown_figure",
    "group_breakdown_html", "judgment_viewer", "ledger_html", "report_figures", "save_report_html",
]
#: The names of :data:`ViewName`, for a test (each one is in ``llm_connect.views.__all__``).
VIEW_NAMES: frozenset[str] = frozenset(
    name for part in get_args(ViewName) for name in (get_args(part) or (part,))
)


@overload
def view(name: ObjectPageName) -> ObjectPage: ...
@overload
def view(name: ReportPageName) -> ReportPage: ...
@overload
def view(name: PlotName) -> Plot: ...
@overload
def view(name: WidgetName) -> Widget: ...
@overload
def view(name: Literal["alignment_html"]) -> AlignmentPage: ...
@overload
def view(name: Literal["group_breakdown_html"]) -> SectionPage: ...
@overload
def view(name: Literal["group_breakdown_figure"]) -> FigureView: ...
@overload
def view(name: Literal["report_figures"]) -> ReportFigures: ...
@overload
def view(name: Literal["save_report_html"]) -> SavedPage: ...
@overload
def view(name: Literal["judgment_viewer"]) -> ReportViewer: ...
@overload
def view(name: Literal["ledger_html"]) -> LedgerPage: ...
@overload
def view(name: str) -> Any: ...


def view(name: str) -> Any:
    """The view ``name`` of :mod:`llm_connect.views`, imported on first use.

    Parameters
    ----------
    name : str
        One of :data:`ViewName` (typed: mypy knows what each returns), or another public name of
        :mod:`llm_connect.views` (then untyped: add it to :data:`ViewName` to type it).

    Returns
    -------
    callable
        The view: a function that takes the object (or plain data) and returns HTML, a figure, a
        widget or a page.

    Raises
    ------
    LookupError
        ``llm_connect.views`` has no public view of that name.
    """
    views = importlib.import_module(_VIEWS)
    if name not in getattr(views, "__all__", ()):
        raise LookupError(f"llm_connect.views has no view {name!r}")
    return getattr(views, name)
