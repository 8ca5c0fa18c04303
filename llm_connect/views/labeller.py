"""The Labeller's pages and widget: the item shown (:func:`labeller_item_html`), the Labeller's summary
(:func:`labeller_html`), and the widget: one item at a time, buttons and keyboard shortcuts that label into
the ledger.

:meth:`Labeller.widget() <llm_connect.labelling.Labeller.widget>` reaches :func:`labeller_widget`
(and ``item_html()`` / ``_repr_html_`` the two pages) through :func:`llm_connect._display.view`. The
widget draws what the Labeller gives it
(:meth:`~llm_connect.labelling.Labeller.item_html`, :meth:`~llm_connect.labelling.Labeller.progress`,
:attr:`~llm_connect.labelling.Labeller.current`) and its buttons call the Labeller's programmatic
API (``label``, ``skip``, ``undo``, ``show_judge``): everything it does can be done without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from .._html import escape, kv_table, with_interval
from ..errors import MissingDependencyError, ValidationError
from ._transcript import transcript_html

__all__ = ["labeller_html", "labeller_item_html", "labeller_widget"]


def _is_trajectory(value: Any) -> bool:
    """A reply or reference that is a list of chat messages (an agent run), not texts."""
    return isinstance(value, (list, tuple)) and any(isinstance(m, Mapping) for m in value)


def labeller_item_html(labeller: Any) -> str:
    """The item a :class:`~llm_connect.labelling.Labeller` shows now, as HTML (every text escaped): its id
    and model, the prompt, the reference(s) and the candidate (a transcript for a conversation or an agent
    run), and the judge's score and reply when ``show_judge`` is on; the done message when all are done.

    Parameters
    ----------
    labeller : Labeller

    Returns
    -------
    str
    """
    lab = labeller
    item = lab.current
    if item is None:
        return ('<div class="llmc-done"><b>All done.</b> Every item of this labeller is labelled or skipped '
                f"({lab.n_labelled} labelled by {escape(lab.annotator)}).</div>")
    e = escape
    refs = "".join(f"<li>{e(r)}</li>" for r in item["references"]) or "<li><i>(none)</i></li>"
    parts = [
        f'<div class="llmc-item-head">item <span class="llmc-item-id">{e(str(item["item_id"]))}</span>'
        f' · model <span class="llmc-model">{e(item["model_id"])}</span></div>',
    ]
    if item["conversation_id"] is not None:
        what = (f"the whole conversation ({e(str(item['conversation_id']))}): label every turn together"
                if lab.unit == "conversation" else
                f"turn {e(str(item['turn']))} of conversation {e(str(item['conversation_id']))}: label the "
                "judged reply")
        parts.append(f'<div class="llmc-unit"><b>Label</b> {what}</div>')
    if (item["messages"] is not None or item["context"] is not None or _is_trajectory(item["reply"])
            or item["reference_run"] is not None):
        whole = lab.unit == "conversation"
        parts.append('<div class="llmc-conversation">' + str(transcript_html(
            item["messages"], context=item["context"], reply=None if whole else item["reply"],
            reference=item["reference_run"])) + "</div>")
        if item["references"]:
            parts.append(f'<div><b>Reference(s)</b><ul class="llmc-references">{refs}</ul></div>')
    else:
        parts += [
            f'<div><b>Prompt</b><pre class="llmc-prompt" style="white-space:pre-wrap">{e(item["prompt"])}'
            "</pre></div>",
            f'<div><b>Reference(s)</b><ul class="llmc-references">{refs}</ul></div>',
            f'<div><b>Candidate</b><pre class="llmc-candidate" style="white-space:pre-wrap">'
            f'{e(item["candidate"])}</pre></div>',
        ]
    if lab.show_judge:
        score = item["judge_score"]
        shown = "not scored" if score is None else f"{score:.3g}"
        reply = item["judge_reply"]
        parts.append(
            f'<div class="llmc-judge"><b>Judge {e(lab.judge or "(none)")}</b>: {e(shown)}'
            + (f'<pre style="white-space:pre-wrap">{e(reply)}</pre>' if reply else "") + "</div>"
        )
    return "".join(parts)


def labeller_html(labeller: Any) -> str:
    """A :class:`~llm_connect.labelling.Labeller` in one table: who labels what, how far, the estimate.

    Parameters
    ----------
    labeller : Labeller

    Returns
    -------
    str
    """
    lab = labeller
    prog = lab.progress()
    estimate = "—"
    if prog["n_plan_labels"] >= 2:
        row = lab.estimate().iloc[0]
        estimate = f"{row['method']}: " + with_interval(row["estimate"], row["ci_low"], row["ci_high"])
    return str(kv_table([
        ("annotator", lab.annotator), ("task type", lab.task_type), ("strategy", lab.strategy),
        ("judge", lab.judge or "(none: human-only intervals)"),
        ("labelled", f"{prog['n_labelled']} / {prog['n_total']}"),
        ("estimate", estimate), ("progress", prog["text"]),
    ], caption="Labeller", attrs={"class_": "llm-connect"}))


def labeller_widget(labeller: Any) -> Any:
    """The labelling widget (ipywidgets) of a :class:`~llm_connect.labelling.Labeller`: the item,
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
