"""The Labeller's widget: one item at a time, buttons and keyboard shortcuts that label into the ledger.

:meth:`Labeller.widget() <llm_connect.calibration.Labeller.widget>` reaches :func:`labeller_widget`
through :func:`llm_connect._display.view`. The widget draws what the Labeller gives it
(:meth:`~llm_connect.calibration.Labeller.item_html`, :meth:`~llm_connect.calibration.Labeller.progress`,
:attr:`~llm_connect.calibration.Labeller.current`) and its buttons call the Labeller's programmatic
API (``label``, ``skip``, ``undo``, ``show_judge``): everything it does can be done without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from .._html import escape
from ..errors import MissingDependencyError, ValidationError

__all__ = ["labeller_widget"]


def labeller_widget(labeller: Any) -> Any:
    """The labelling widget (ipywidgets) of a :class:`~llm_connect.calibration.Labeller`: the item,
    buttons Correct / Incorrect / Partial (with the score slider) / Skip / Undo / Show judge, a note,
    the progress line. Keyboard shortcuts with ``ipyevents`` installed (hover over the item): ``c``
    correct, ``x`` incorrect, ``p`` partial, ``s`` skip, ``u`` undo, ``j`` show/hide the judge. CSS
    classes for scripts and tests: root ``llmc-labeller``; ``llmc-correct``, ``llmc-incorrect``,
    ``llmc-partial``, ``llmc-skip``, ``llmc-undo``, ``llmc-reveal``, ``llmc-partial-score``,
    ``llmc-note``, ``llmc-item``, ``llmc-progress``. The returned box has a ``controls`` attribute
    naming them.

    Parameters
    ----------
    labeller : Labeller
        The labeller.

    Returns
    -------
    ipywidgets.VBox
        The widget.

    Raises
    ------
    MissingDependencyError
        ipywidgets is not installed.
    """
    try:
        import ipywidgets as w
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("ipywidgets", "notebooks", "Labeller.widget()") from exc
    lab = labeller

    item = w.HTML()
    item.add_class("llmc-item")
    progress = w.HTML()
    progress.add_class("llmc-progress")
    message = w.HTML()
    message.add_class("llmc-message")
    note = w.Text(placeholder="note (optional)", description="note")
    note.add_class("llmc-note")
    slider = w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.05, description="partial", readout_format=".2f",
                           continuous_update=False)
    slider.add_class("llmc-partial-score")

    def button(text: str, css: str, tip: str, style: str = "") -> Any:
        b = w.Button(description=text, tooltip=tip, button_style=style)
        b.add_class(css)
        return b

    correct = button("Correct (c)", "llmc-correct", "1.0", "success")
    incorrect = button("Incorrect (x)", "llmc-incorrect", "0.0", "danger")
    partial = button("Partial (p)", "llmc-partial", "the slider's score", "warning")
    skip = button("Skip (s)", "llmc-skip", "not sure: skip this item")
    undo = button("Undo (u)", "llmc-undo", "take back the last label")
    reveal = button("Show judge (j)", "llmc-reveal", "show or hide the judge's score and reply")

    def render() -> None:
        item.value = lab.item_html()
        progress.value = f"<span>{escape(lab.progress()['text'])}</span>"
        reveal.description = "Hide judge (j)" if lab.show_judge else "Show judge (j)"
        done = lab.current is None
        for b in (correct, incorrect, partial, skip):
            b.disabled = done

    def act(do: Any) -> Any:
        def handler(_: Any = None) -> None:
            try:
                do()
                message.value = ""
            except Exception as exc:  # shown in the widget: a callback's exception would be lost
                message.value = f'<span style="color:#b00">{escape(str(exc))}</span>'
            render()
        return handler

    def give(score: Any) -> None:
        text = note.value
        lab.label(float(score() if callable(score) else score), note=text)
        note.value = ""

    def toggle() -> None:
        lab.show_judge = not lab.show_judge

    def pass_over() -> None:
        lab.skip(note=note.value)
        note.value = ""

    def take_back() -> None:
        if lab.undo() is None:
            raise ValidationError("nothing to undo")

    handlers = {
        "c": act(lambda: give(1.0)), "x": act(lambda: give(0.0)), "p": act(lambda: give(lambda: slider.value)),
        "s": act(pass_over),
        "u": act(take_back), "j": act(toggle),
    }
    for b, k in ((correct, "c"), (incorrect, "x"), (partial, "p"), (skip, "s"), (undo, "u"), (reveal, "j")):
        b.on_click(handlers[k])
    root = w.VBox([
        item,
        w.HBox([correct, incorrect, partial, slider]),
        w.HBox([skip, undo, reveal]),
        note, progress, message,
    ])
    root.add_class("llmc-labeller")
    events = None
    try:
        from ipyevents import Event
    except ImportError:
        pass
    else:
        events = Event(source=item, watched_events=["keydown"])

        def on_key(event: Mapping[str, Any]) -> None:
            handler = handlers.get(str(event.get("key", "")).lower())
            if handler is not None:
                handler()

        events.on_dom_event(on_key)
    render()
    root.controls = SimpleNamespace(item=item, progress=progress, message=message, note=note, slider=slider,
                                    correct=correct, incorrect=incorrect, partial=partial, skip=skip, undo=undo,
                                    reveal=reveal, events=events, render=render)
    return root
