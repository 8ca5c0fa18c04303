"""The seam between data and its drawing (``llm_connect._display``): typed by name, and the only way a floor
below views reaches a view.

Calibration objects keep their ``_repr_html_`` (Jupyter's protocol), but every page is built in
``llm_connect.views``; the floors below draw nothing themselves.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

import llm_connect
import llm_connect.views as views
from llm_connect import _display
from llm_connect._display import VIEW_NAMES, ReportPage, ReportViewer, Widget, view

PKG = Path(llm_connect.__file__).parent


def _overloads() -> dict[str, object]:
    """Each view name typed by an overload of :func:`view`, to the type the overload returns."""
    typed: dict[str, object] = {}
    hints = [typing.get_type_hints(f, vars(_display)) for f in typing.get_overloads(view)]
    for h in hints:
        for arg in typing.get_args(h["name"]):
            for name in typing.get_args(arg) or (arg,):
                typed[name] = h["return"]
    return typed


def test_view_is_typed_by_name():
    """mypy knows what ``view("report_widget")`` returns: one overload per name of ViewName."""
    typed = _overloads()
    assert typed["report_widget"] is Widget and typed["labeller_widget"] is Widget
    assert typed["report_html"] is ReportPage and typed["judgment_viewer"] is ReportViewer
    assert set(typed) == set(VIEW_NAMES)


def test_every_name_the_floors_reach_is_typed_and_in_views():
    used = set()
    for path in PKG.rglob("*.py"):
        if path.parts[len(PKG.parts)] != "views":
            used.update(re.findall(r"\bview\(\"(\w+)\"\)", path.read_text(encoding="utf-8")))
    assert used and used <= VIEW_NAMES, sorted(used - VIEW_NAMES)
    assert set(views.__all__) >= VIEW_NAMES


def test_an_unknown_view_is_refused_by_name():
    with pytest.raises(LookupError, match="no view 'report_htm'"):
        view("report_htm")


_DRAWING = {"html_format", "frame_html", "kv_table", "html_table", "with_interval", "escape", "join"}


@pytest.mark.parametrize("floor", ["calibration", "cards", "labelling"])
def test_the_floors_below_views_build_no_html(floor):
    """Every page of a calibration object is drawn in views (reached through the seam): the floor imports
    no HTML builder from llm_connect._html (only ``Markup``, the type its ``html()`` methods return)."""
    found = []
    for path in (PKG / floor).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_html"):
                found += [f"{path.name}: {a.name}" for a in node.names if a.name in _DRAWING]
    assert found == []


def test_a_calibration_objects_repr_is_its_view():
    """``_repr_html_`` delegates: the page a notebook shows is the view's, byte for byte."""
    from llm_connect.calibration import pair_agreement
    from llm_connect.views import pair_agreement_html

    pair = pair_agreement([0.1, 0.9, 0.8, 0.2, 0.7], [0, 1, 1, 0, 0], n_boot=50, judge_a="<b>a</b>")
    assert pair._repr_html_() == str(pair_agreement_html(pair))
    assert "&lt;b&gt;a&lt;/b&gt;" in pair._repr_html_()
