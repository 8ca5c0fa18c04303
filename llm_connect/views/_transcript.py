"""Transcripts as HTML: one renderer for the viewer, the report and the Labeller.

A *transcript* is what an item of a conversation or an agent run holds (see
:mod:`llm_connect.conversations`): the chat ``messages`` before the judged reply, the reply itself
(a text, or a trajectory: assistant messages with tool calls, tool results, the final answer), a
reference (the same two shapes) and ``context`` documents. :func:`transcript_html` draws them:

- each message a collapsible ``<details>`` block (``class="llmc-msg llmc-role-<role>"``) whose
  ``<summary>`` holds a role badge (``llmc-role``) and a one-line preview;
- each tool call (``llmc-call``) with its function name (``llmc-tool``), its id (``llmc-call-id``)
  and its arguments as pretty-printed JSON (``llmc-args``; arguments that are not JSON are shown as
  they are and marked ``llmc-bad-args``);
- each tool result linked to the call it answers by ``tool_call_id``: its summary names the tool and
  links (``<a href="#...">``) to the call; a result whose id matches no call is marked
  ``llmc-orphan``;
- the judged reply in a block of its own (``llmc-reply``), the reference in another
  (``llmc-reference``), and the context documents collapsed (``llmc-context``, one ``llmc-doc``
  each).

Every string that comes from data (contents, roles, tool names, call ids, argument keys and values,
documents) goes into the page through :func:`llm_connect._html.escape` (``html.escape`` with quotes),
so a message holding ``<script>`` or ``</details>`` is text, never markup. Element ids are made here
(a prefix and a counter), never from data. Messages that are not valid chat messages are still drawn
as far as they can be, under a line saying what is wrong (a view never refuses to show an item).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

from .._html import Markup, html_format, join
from ..errors import ValidationError

__all__ = ["TRANSCRIPT_CSS", "has_transcript", "report_transcripts", "transcript_html"]

#: The transcript's style: every rule scoped to ``.llmc-transcript``, so it can sit in any page.
TRANSCRIPT_CSS = """
.llmc-transcript{font:13px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d2433;margin:4px 0}
.llmc-transcript details{border:1px solid #d0d4da;border-radius:4px;margin:3px 0;background:#fff}
.llmc-transcript summary{cursor:pointer;padding:2px 6px;list-style-position:inside;overflow:hidden;
  text-overflow:ellipsis;white-space:nowrap}
.llmc-transcript pre{white-space:pre-wrap;word-break:break-word;margin:0;padding:4px 8px;background:#f6f7f9;
  font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:28em;overflow:auto}
.llmc-transcript .llmc-role{display:inline-block;font-size:11px;font-weight:600;padding:0 5px;border-radius:3px;
  margin-right:6px;color:#fff;background:#5b6472}
.llmc-transcript .llmc-role-user>summary .llmc-role{background:#175cd3}
.llmc-transcript .llmc-role-assistant>summary .llmc-role{background:#067647}
.llmc-transcript .llmc-role-tool>summary .llmc-role{background:#b54708}
.llmc-transcript .llmc-role-system>summary .llmc-role,.llmc-transcript .llmc-role-developer>summary .llmc-role{
  background:#6941c6}
.llmc-transcript .llmc-preview{color:#5b6472}
.llmc-transcript .llmc-call{margin:4px 8px;border-left:3px solid #b54708;padding-left:6px}
.llmc-transcript .llmc-tool{font-weight:600;font-family:ui-monospace,Menlo,monospace}
.llmc-transcript .llmc-call-id{color:#5b6472;font-size:11px;margin-left:6px}
.llmc-transcript .llmc-note{color:#b42318;font-size:12px;margin:2px 8px}
.llmc-transcript .llmc-section{font-size:12px;font-weight:600;color:#5b6472;margin:8px 0 2px}
.llmc-transcript .llmc-reply{border-left:3px solid #067647;padding-left:6px}
.llmc-transcript .llmc-reference{border-left:3px solid #6941c6;padding-left:6px}
.llmc-transcript .llmc-empty{color:#5b6472;font-style:italic;padding:2px 8px}
"""

_PREVIEW = 90
_ids = itertools.count()


def _present(value: Any) -> bool:
    """A value to draw: not None / NaN / NA, and (for a list) not empty."""
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if type(value).__name__ == "ndarray":
        return len(value) > 0
    if isinstance(value, (list, tuple)):
        return len(value) > 0
    try:
        import pandas as pd

        if value is pd.NA:
            return False
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return True


def _as_list(value: Any, *, parse: bool = False) -> Any:
    """A numpy array (a list column read from Parquet) as a list; with ``parse``, a JSON list in a string (a
    CSV cell) too. A reply's text is never parsed: ``"[1, 2]"`` is an answer, not messages."""
    if type(value).__name__ == "ndarray" and hasattr(value, "tolist"):
        return value.tolist()
    if parse and isinstance(value, str) and value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, list) else value
    return value


def has_transcript(*, messages: Any = None, reply: Any = None, reference: Any = None, context: Any = None) -> bool:
    """Whether an item has anything a transcript shows that its plain texts do not: messages before the
    reply, a reply or reference that is a trajectory (a list of messages), or context documents."""
    return (_present(_as_list(messages, parse=True)) or isinstance(_as_list(reply), list)
            or isinstance(_as_list(reference), list) or _present(_as_list(context, parse=True)))


def _text_of(content: Any) -> str:
    """A message's content as text, leniently (text parts joined; anything else as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in content):
        return "\n".join(p["text"] for p in content)
    return json.dumps(content, ensure_ascii=False, indent=2, default=str)


def _preview(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…"


def _arguments(arguments: Any) -> tuple[str, bool]:
    """Pretty-printed JSON arguments, and whether they are JSON at all."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments, False
    try:
        return json.dumps(arguments, ensure_ascii=False, indent=2), True
    except (TypeError, ValueError):
        return str(arguments), False


class _Page:
    """Ids of one transcript: a prefix made here and a counter; the tool calls seen so far by id."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.calls: dict[str, tuple[str, str]] = {}  # call id -> (element id, tool name)
        self.n = 0

    def new_id(self) -> str:
        self.n += 1
        return f"{self.prefix}-{self.n}"


def _message_problem(messages: Any) -> str | None:
    """Why ``messages`` are not valid chat messages (the strict reader's words), or None."""
    from ..conversations import normalize_messages

    try:
        normalize_messages(messages)
    except ValidationError as exc:
        return str(exc)
    return None


def _call_html(call: Any, page: _Page) -> Markup:
    if not isinstance(call, Mapping):
        return html_format("<div class='llmc-call'><div class='llmc-note'>not a tool call:</div><pre>{}</pre></div>",
                           _text_of(call))
    found = call.get("function")
    function: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    name = function.get("name")
    name = name if isinstance(name, str) and name else "(no name)"
    call_id = call.get("id")
    element = page.new_id()
    if isinstance(call_id, str) and call_id:
        page.calls.setdefault(call_id, (element, name))
    args, is_json = _arguments(function.get("arguments", ""))
    note = Markup("") if is_json else Markup("<div class='llmc-note'>arguments are not valid JSON</div>")
    return html_format(
        "<div class='llmc-call{}' id='{}'><span class='llmc-tool'>{}</span>{}{}<pre class='llmc-args'>{}</pre></div>",
        "" if is_json else " llmc-bad-args", element, name,
        html_format("<span class='llmc-call-id'>{}</span>", call_id) if call_id is not None else Markup(""),
        note, args)


def _message_html(message: Any, page: _Page, *, open_: bool) -> Markup:
    if not isinstance(message, Mapping):
        return html_format("<details class='llmc-msg llmc-role-unknown' open><summary><span class='llmc-role'>?"
                           "</span><span class='llmc-preview'>not a message</span></summary><pre>{}</pre></details>",
                           _text_of(message))
    role = message.get("role")
    role = role if isinstance(role, str) and role else "unknown"
    css = role if role in ("system", "developer", "user", "assistant", "tool") else "unknown"
    text = _text_of(message.get("content"))
    calls = message.get("tool_calls") or []
    calls = calls if isinstance(calls, list) else [calls]
    body = [html_format("<pre class='llmc-content'>{}</pre>", text)] if text else []
    body += [_call_html(c, page) for c in calls]
    summary: list[Any] = [html_format("<span class='llmc-role'>{}</span>", role)]
    extra = ""
    if role == "tool":
        answered = message.get("tool_call_id")
        found = page.calls.get(answered) if isinstance(answered, str) else None
        if found is not None:
            summary.append(html_format("<span class='llmc-preview'>result of <a class='llmc-call-link' href='#{}'>"
                                       "{}</a> ({}): </span>", found[0], found[1], answered))
        else:
            extra = " llmc-orphan"
            summary.append(html_format("<span class='llmc-preview'>result of an unknown call ({}): </span>",
                                       answered if answered is not None else "no tool_call_id"))
    if calls:
        names = [c["function"].get("name") for c in calls if isinstance(c, Mapping)
                 and isinstance(c.get("function"), Mapping)]
        summary.append(html_format("<span class='llmc-preview'>calls {} </span>",
                                   ", ".join(str(n) for n in names) or "a tool"))
    if text:
        summary.append(html_format("<span class='llmc-preview'>{}</span>", _preview(text)))
    elif not calls:
        body.append(Markup("<div class='llmc-empty'>(empty)</div>"))
    return html_format("<details class='llmc-msg llmc-role-{}{}'{}><summary>{}</summary>{}</details>",
                       css, extra, Markup(" open" if open_ else ""), join(summary), join(body))


def _messages_html(messages: Any, page: _Page, *, open_tools: bool = False) -> Markup:
    messages = _as_list(messages, parse=True)
    if not isinstance(messages, list):
        return html_format("<div class='llmc-note'>not a list of messages:</div><pre>{}</pre>", _text_of(messages))
    problem = _message_problem(messages)
    parts = [html_format("<div class='llmc-note'>{}</div>", problem)] if problem else []
    for m in messages:
        role = m.get("role") if isinstance(m, Mapping) else None
        parts.append(_message_html(m, page, open_=role != "tool" or open_tools))
    return join(parts)


def _reply_html(reply: Any, page: _Page, css: str, title: str) -> Markup:
    reply = _as_list(reply)
    if isinstance(reply, list):
        inner = _messages_html(reply, page, open_tools=True) if reply else Markup(
            "<div class='llmc-empty'>(no messages)</div>")
    else:
        inner = html_format("<details class='llmc-msg llmc-role-assistant' open><summary><span class='llmc-role'>"
                            "assistant</span><span class='llmc-preview'>{}</span></summary>"
                            "<pre class='llmc-content'>{}</pre></details>", _preview(str(reply)), str(reply))
    return html_format("<div class='llmc-section'>{}</div><div class='{}'>{}</div>", title, css, inner)


def _context_html(context: Any) -> Markup:
    docs = _as_list(context, parse=True)
    if not isinstance(docs, list):
        docs = [docs]
    items = join(
        html_format("<details class='llmc-doc'><summary><span class='llmc-role'>document {}</span>"
                    "<span class='llmc-preview'>{}</span></summary><pre>{}</pre></details>",
                    k, _preview(_text_of(d)), _text_of(d))
        for k, d in enumerate(docs, 1))
    return html_format("<details class='llmc-context'><summary><span class='llmc-role'>context</span>"
                       "<span class='llmc-preview'>{} document{}</span></summary>{}</details>",
                       len(docs), "" if len(docs) == 1 else "s", items)


def transcript_html(
    messages: Any = None,
    *,
    context: Any = None,
    reply: Any = None,
    reference: Any = None,
    reply_title: str = "judged reply",
    style: bool = True,
    id_prefix: str | None = None,
) -> Markup:
    """A conversation or an agent run as collapsible, escaped HTML.

    Parameters
    ----------
    messages : sequence of Mapping, optional
        OpenAI chat messages (``role``, ``content``, ``tool_calls``, ``tool_call_id``): the
        conversation before the judged reply. A JSON string of such a list (a CSV cell) is read too.
    context : sequence of str, optional
        The documents the reply may use, drawn collapsed, one block each.
    reply : str or sequence of Mapping, optional
        The judged reply: a text, or a trajectory (tool calls, tool results, final answer), drawn
        after ``messages`` under ``reply_title``.
    reference : str or sequence of Mapping, optional
        The reference reply (a text, or a reference trajectory), drawn after the reply.
    reply_title : str
        The heading of the reply's block.
    style : bool
        Start with a ``<style>`` element holding :data:`TRANSCRIPT_CSS` (all its rules scoped to
        ``.llmc-transcript``); ``False`` where the page carries the style once.
    id_prefix : str, optional
        The prefix of the element ids (tool calls, which tool results link to); by default one made
        from the transcript's content and a counter, so two transcripts on one page never share one.

    Returns
    -------
    Markup
        ``<div class="llmc-transcript">...</div>``: messages open except tool results (collapsed;
        their summary names the tool and links to its call), a trajectory's messages all open,
        context collapsed. Every value from data is escaped.
    """
    if id_prefix is None:
        digest = hashlib.sha256(repr((messages, reply, reference)).encode("utf-8", "replace")).hexdigest()[:8]
        id_prefix = f"llmc-{digest}-{next(_ids)}"
    page = _Page(id_prefix)
    parts: list[Any] = []
    if style:
        parts.append(html_format("<style>{}</style>", Markup(TRANSCRIPT_CSS)))
    body: list[Any] = []
    if _present(_as_list(messages, parse=True)):
        body.append(_messages_html(messages, page))
    if _present(reply) or isinstance(_as_list(reply), list):
        body.append(_reply_html(reply, page, "llmc-reply", reply_title))
    if _present(reference) or isinstance(_as_list(reference), list):
        body.append(_reply_html(reference, page, "llmc-reference", "reference"))
    if _present(_as_list(context, parse=True)):
        body.append(_context_html(context))
    if not body:
        body.append(Markup("<div class='llmc-empty'>(nothing to show)</div>"))
    parts.append(html_format("<div class='llmc-transcript'>{}</div>", join(body)))
    return join(parts)


def _cell(frame: Any, column: str, row: Any) -> Any:
    return frame.at[row, column] if column in frame.columns else None


def report_transcripts(report: Any, *, top: int = 5) -> Markup:
    """The transcripts of a calibration report's items that carry one (a conversation or an agent run): those
    where its first judge and the reference (people) disagree most (:meth:`disagreements`), else the first
    ones; ``Markup("")`` when no item has a transcript.

    Parameters
    ----------
    report : CalibrationReport
        The report (its ``scores`` frame holds the items' ``messages``, ``context`` and runs).
    top : int
        How many items to show.

    Returns
    -------
    Markup
        One collapsed ``<details class="llmc-item">`` per item (its summary: the id, the judge's
        score, the reference's), each holding :func:`transcript_html`; the style once, first.
    """
    scores = report.scores
    has = [has_transcript(messages=_cell(scores, "messages", r), reply=_cell(scores, "candidate", r),
                          reference=_cell(scores, "baseline", r), context=_cell(scores, "context", r))
           for r in scores.index]
    if not any(has):
        return Markup("")
    judge = report.judges[0] if report.judges else None
    reference = report.reference if report.reference != judge else None
    rows: list[Any] = []
    if judge is not None and reference is not None:
        worst = report.disagreements(judge, reference, top=len(scores))
        rows = [r for r in worst.index if has[scores.index.get_loc(r)]][:top]
    if not rows:
        rows = [r for r, h in zip(scores.index, has, strict=True) if h][:top]
    parts: list[Any] = [html_format("<style>{}</style>", Markup(TRANSCRIPT_CSS))]
    if judge is not None and reference is not None:
        parts.append(html_format("<p>The {} item(s) with a conversation or an agent run where {} and {} disagree "
                                 "most, each collapsed: open one to read it.</p>", len(rows), judge, reference))
    for r in rows:
        said = []
        for name in (judge, reference):
            if name is None:
                continue
            value = _cell(scores, f"score_{name}", r)
            said.append(f"{name} {'—' if value is None or value != value else f'{float(value):.2f}'}")
        parts.append(html_format(
            "<details class='llmc-item'><summary>item {}{}</summary>{}</details>",
            _cell(scores, "id", r), (" · " + ", ".join(said)) if said else "",
            transcript_html(_cell(scores, "messages", r), context=_cell(scores, "context", r),
                            reply=_cell(scores, "candidate", r), reference=_cell(scores, "baseline", r),
                            style=False)))
    return join(parts)
