"""The judgment viewer: one self-contained page for every judgment (records from
:mod:`llm_connect.views.judgments`, ``judgments.jsonl``).

The page embeds the records as JSON inside ``<script type="application/json">``
with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, and its script renders them
with ``textContent`` only; a Content-Security-Policy allows no script but its own
(by hash), so even markup that slipped through could not run, and no network
access at all. The transcript of a conversation or an agent run is drawn here, in
Python, by the one renderer (:func:`~llm_connect.views._transcript.transcript_html`,
every value escaped), into an inert ``<template>`` the script clones.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._html import Markup, html_format, join
from ..errors import ValidationError
from ._transcript import TRANSCRIPT_CSS, transcript_html

__all__ = ["JudgmentViewer", "content_security_policy", "viewer_html"]


# -- the page ----------------------------------------------------------------------------------------


def _embedded_json(records: Sequence[Mapping[str, Any]]) -> str:
    """The records as JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&``
    (so no ``</script>`` or ``<!--`` can end or change the element) and no U+2028/U+2029."""
    text = json.dumps(list(records), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def content_security_policy() -> str:
    """The page's policy: its own script (by hash) and inline styles; no network, no plugins, no frames.

    Returns
    -------
    str
        The ``Content-Security-Policy`` value.
    """
    return (f"default-src 'none'; script-src '{_script_hash(_SCRIPT)}'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


#: The keys of an item record that the page draws as a transcript (in a ``<template>``), not from its JSON.
_TRANSCRIPT_KEYS = ("messages", "context", "candidate_run", "baseline_run")


def _transcripts(records: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], Markup]:
    """The records without their conversations, and each conversation's transcript drawn once, here, by the one
    renderer (:func:`~llm_connect.views._transcript.transcript_html`, every value escaped), in an inert
    ``<template id="transcript-ROW">`` that the page's script clones into the item's detail (no markup is ever
    made from the JSON)."""
    kept: list[Mapping[str, Any]] = []
    templates: list[Markup] = []
    for record in records:
        if record.get("kind") != "item" or not any(record.get(k) is not None for k in _TRANSCRIPT_KEYS):
            kept.append(record)
            continue
        run, ref = record.get("candidate_run"), record.get("baseline_run")
        drawn = transcript_html(
            record.get("messages"), context=record.get("context"),
            reply=run if run is not None else record.get("candidate"),
            reference=ref if ref is not None else record.get("baseline"),
            style=False, id_prefix=f"t{int(record['row'])}")
        templates.append(html_format("<template id='transcript-{}'>{}</template>", int(record["row"]), drawn))
        kept.append({**{k: v for k, v in record.items() if k not in _TRANSCRIPT_KEYS}, "transcript": True})
    return kept, join(templates)


def viewer_html(records: Sequence[Mapping[str, Any]], *, title: str | None = None) -> str:
    """The self-contained viewer page (inline CSS and script, no network) for ``records``.

    Items of a conversation or an agent run (``messages``, ``context``, ``candidate_run``,
    ``baseline_run``) show their transcript in the item's detail: roles, tool calls with their
    arguments, tool results and the documents, collapsible, every value escaped.

    Parameters
    ----------
    records : sequence of mapping
        The judgment records (``judgments.jsonl``).
    title : str, optional
        The page's title.

    Returns
    -------
    str
        The page.
    """
    if not records or records[0].get("kind") != "meta":
        raise ValidationError("viewer_html needs judgment records starting with the meta record")
    records, templates = _transcripts(records)
    shown = title if title is not None else str(records[0].get("title") or "Judgments")
    return str(html_format(
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content='{}'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>{}</title><style>{}</style></head><body>"
        "<header><h1 id='title'>{}</h1><p id='summary'></p>"
        "<div id='controls'>"
        "<label>judge <select id='filter-judge'></select></label>"
        "<label>status <select id='filter-status'></select></label>"
        "<label>people <select id='filter-people'></select></label>"
        "<label>probe <select id='filter-probe'></select></label>"
        "<label>sort <select id='sort'></select></label>"
        "<label>search <input id='search' type='search' placeholder='id or text'></label>"
        "<span id='count' aria-live='polite'></span></div>"
        "<p id='legend'><span class='legend-head'>Colours:</span> "
        "<span class='swatch disagrees'>red box</span> the judge disagrees with people; "
        "<span class='status-unscored'>orange</span> unscored (the reply had no usable score); "
        "<span class='status-abstained'>orange italic</span> abstained (not confident enough); "
        "<span class='status-error'>red text</span> error (the call failed); plain text: scored.</p>"
        "</header>"
        "<main><div id='list'><table id='items'><thead></thead><tbody></tbody></table>"
        "<p id='more'></p></div>"
        "<aside id='detail' hidden><button id='close' type='button' aria-label='close'>×</button>"
        "<div id='detail-body'></div></aside></main>"
        "<noscript>This page needs JavaScript to show the judgments.</noscript>"
        "<div id='transcripts' hidden>{}</div>"
        "<script type='application/json' id='judgments-data'>{}</script>"
        "<script>{}</script></body></html>\n",
        # constant style and script of this module, the JSON made safe above and the escaped transcripts go in
        # as they are
        content_security_policy(), shown, Markup(_STYLE + TRANSCRIPT_CSS), shown, templates,
        Markup(_embedded_json(records)), Markup(_SCRIPT),
    ))


def _iframe(page: str, height: int) -> str:
    return str(html_format(
        "<iframe class='llm-connect-viewer' sandbox='allow-scripts' srcdoc='{}' "
        "style='width:100%;height:{}px;border:1px solid #ccc' title='judgments'></iframe>",
        page, int(height),
    ))


@dataclass(frozen=True)
class JudgmentViewer:
    """The viewer page for some judgment records: ``_repr_html_`` shows it in a sandboxed iframe
    (``srcdoc``, scripts allowed but no access to the notebook), :meth:`save` writes the page.

    Parameters
    ----------
    records : tuple of mapping
        The judgment records.
    title : str, optional
        The page's title.
    height : int, default 760
        The iframe's height in a notebook, in pixels.

    See Also
    --------
    viewer_html : The page itself.
    """

    records: tuple[Mapping[str, Any], ...]
    title: str | None = None
    height: int = 760

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], **kwargs: Any) -> JudgmentViewer:
        """A viewer of ``records`` (any iterable of mappings, kept as a tuple).

        Parameters
        ----------
        records : iterable of mapping
            The judgment records.
        **kwargs
            ``title`` and ``height``.

        Returns
        -------
        JudgmentViewer
            The viewer.
        """
        return cls(tuple(records), **kwargs)

    @property
    def html(self) -> str:
        """The whole page."""
        return viewer_html(self.records, title=self.title)

    def save(self, path: str | Path) -> Path:
        """Write the page (one self-contained file that opens from ``file://``); its path.

        Parameters
        ----------
        path : str or Path
            The file.

        Returns
        -------
        Path
            The file written.
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.html, encoding="utf-8")
        return p

    def _repr_html_(self) -> str:
        return _iframe(self.html, self.height)

    def __repr__(self) -> str:
        meta = self.records[0] if self.records else {}
        return (f"JudgmentViewer({meta.get('n_items', 0)} items, judges {', '.join(meta.get('judges', []))}; "
                "display it in Jupyter or .save('viewer.html'))")


_STYLE = """
:root{--bd:#d0d4da;--muted:#5b6472;--bad:#b42318;--ok:#067647;--warn:#b54708;--sel:#eef4ff}
*{box-sizing:border-box}
html,body{height:100%}
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2433;background:#fff;
  display:flex;flex-direction:column}
header{flex:0 0 auto;padding:10px 16px;border-bottom:1px solid var(--bd);background:#f8f9fb}
h1{font-size:18px;margin:0 0 4px}
#summary{margin:0 0 8px;color:var(--muted)}
#controls{display:flex;flex-wrap:wrap;gap:10px;align-items:center}
#controls label{font-size:13px;color:var(--muted)}
#controls select,#controls input{font:inherit;margin-left:4px;padding:2px 4px}
#count{font-weight:600}
#legend{margin:6px 0 0;font-size:12px;color:var(--muted)}
#legend .swatch{padding:0 4px}
#legend .legend-head{font-weight:600}
main{flex:1 1 auto;display:flex;min-height:0}
#list{flex:1 1 auto;min-width:0;overflow:auto;padding:0 16px 8px}
table#items{border-collapse:collapse;width:100%}
#items th,#items td{border-bottom:1px solid var(--bd);padding:4px 6px;text-align:left;vertical-align:top}
#items th{position:sticky;top:0;background:#fff;font-size:12px;color:var(--muted);z-index:1}
#items tr.item{cursor:pointer}
#items tr.item:hover{background:#f4f6f9}
#items tr.item.open{background:var(--sel)}
#items td.clip{max-width:14em;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
#items td.id{max-width:8em}
#items td.baseline{max-width:9em}
main.detail-open #items td.clip{max-width:9em}
main.detail-open #items td.id,main.detail-open #items td.baseline{max-width:6em}
#items td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.status-unscored{color:var(--warn)}
.status-abstained{color:var(--warn);font-style:italic}
.status-error{color:var(--bad)}
.disagrees{background:#fef3f2;outline:1px solid #fda29b}
.tag{display:inline-block;font-size:11px;padding:0 4px;border-radius:3px;border:1px solid var(--bd);margin-left:3px}
#detail{flex:0 0 44%;max-width:44%;border-left:1px solid var(--bd);padding:8px 16px;overflow:auto;background:#fff}
#detail h2{font-size:16px;margin:4px 0}
#detail h3{font-size:14px;margin:14px 0 4px;border-bottom:1px solid var(--bd)}
#detail h4{font-size:13px;margin:8px 0 2px;color:var(--muted)}
#detail pre{white-space:pre-wrap;word-break:break-word;background:#f6f7f9;border:1px solid #e4e7ec;padding:6px;
  margin:2px 0;max-height:24em;overflow:auto;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
#detail .none{color:var(--muted);font-style:italic}
#detail table{border-collapse:collapse}
#detail td,#detail th{border:1px solid var(--bd);padding:2px 6px;text-align:left}
#close{float:right;font-size:18px;border:none;background:none;cursor:pointer}
#more{color:var(--muted)}
"""

_SCRIPT = r"""
(function () {
  "use strict";
  var all = JSON.parse(document.getElementById("judgments-data").textContent);
  var meta = all[0], items = [], probesByRow = {};
  all.slice(1).forEach(function (r) {
    if (r.kind === "item") items.push(r);
    else if (r.kind === "probe" && r.row !== null && r.row !== undefined) {
      (probesByRow[r.row] = probesByRow[r.row] || []).push(r);
    }
  });
  var judges = meta.judges || [], labels = meta.labels || [], people = meta.people;
  var LIMIT = 2000;
  var $ = function (id) { return document.getElementById(id); };

  // Every element is built here; data only ever becomes text (textContent), never markup.
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function option(select, value, text) {
    var o = el("option", null, text);
    o.value = value;
    select.appendChild(o);
  }
  function num(x) { return x === null || x === undefined ? "\u2014" : (Math.round(x * 1000) / 1000).toString(); }
  function show(x) { return x === null || x === undefined ? "" : String(x); }

  $("summary").textContent = items.length + " items; judges: " + (judges.join(", ") || "\u2014") +
    "; human labels: " + (labels.join(", ") || "none") +
    (people ? "; compared with people through \u201c" + people + "\u201d" : "");
  var fj = $("filter-judge"), fs = $("filter-status"), fp = $("filter-people"), fq = $("filter-probe"),
      so = $("sort"), search = $("search");
  option(fj, "", "every judge");
  judges.forEach(function (j) { option(fj, j, j); });
  option(fs, "", "any");
  ["scored", "unscored", "abstained", "error"].forEach(function (s) { option(fs, s, s); });
  option(fp, "", "any");
  if (people) {
    option(fp, "disagree", "judge disagrees with people");
    option(fp, "agree", "judge agrees with people");
  }
  option(fp, "unlabelled", "no human label");
  option(fq, "", "any item");
  (meta.probes || []).forEach(function (p) {
    option(fq, "probed:" + p, p + ": probed");
    option(fq, "flipped:" + p, p + ": verdict flipped");
  });
  option(so, "row", "input order");
  option(so, "disagreement", "disagreement with people");
  option(so, "score", "score, lowest first");

  function selected() { return fj.value ? [fj.value] : judges; }

  function keep(item) {
    var js = selected(), s = fs.value, d = fp.value, q = fq.value, text = search.value.trim().toLowerCase();
    if (s && !js.some(function (j) { return item.judges[j] && item.judges[j].status === s; })) return false;
    if (d === "unlabelled" && item.people !== null && item.people !== undefined) return false;
    if (d === "disagree" && !js.some(function (j) { return item.judges[j] && item.judges[j].disagrees === true; }))
      return false;
    if (d === "agree" && !js.some(function (j) { return item.judges[j] && item.judges[j].disagrees === false; }))
      return false;
    if (q) {
      var kind = q.slice(0, q.indexOf(":")), probe = q.slice(q.indexOf(":") + 1);
      var mine = (probesByRow[item.row] || []).filter(function (p) {
        return p.probe === probe && js.indexOf(p.judge) >= 0;
      });
      if (!mine.length) return false;
      if (kind === "flipped" && !mine.some(function (p) { return p.flipped === true; })) return false;
    }
    if (text) {
      var hay = [show(item.id), show(item.prompt), show(item.baseline), show(item.candidate)].join("\n").toLowerCase();
      if (hay.indexOf(text) < 0) return false;
    }
    return true;
  }

  function gap(item) {
    var best = -1;
    selected().forEach(function (j) {
      var g = item.judges[j] && item.judges[j].gap;
      if (g !== null && g !== undefined && g > best) best = g;
    });
    return best;
  }
  function lowest(item) {
    var best = Infinity;
    selected().forEach(function (j) {
      var v = item.judges[j] && item.judges[j].score;
      if (v !== null && v !== undefined && v < best) best = v;
    });
    return best;
  }

  var openRow = null;

  function header() {
    var tr = el("tr");
    ["#", "id", "prompt", "reference", "candidate"].forEach(function (h) { tr.appendChild(el("th", null, h)); });
    selected().forEach(function (j) { tr.appendChild(el("th", null, j)); });
    labels.forEach(function (l) { tr.appendChild(el("th", null, l)); });
    var thead = $("items").tHead;
    thead.textContent = "";
    thead.appendChild(tr);
  }

  function scoreCell(result) {
    var td = el("td", "num judge");
    if (!result) return td;
    if (result.status === "scored") td.textContent = num(result.score);
    else {
      td.textContent = result.status || "\u2014";
      td.classList.add("status-" + (result.status === "error" ? "error"
        : result.status === "abstained" ? "abstained" : "unscored"));
    }
    td.dataset.status = result.status || "";
    if (result.disagrees === true) {
      td.classList.add("disagrees");
      td.title = "disagrees with people";
    }
    return td;
  }

  function render() {
    header();
    var rows = items.filter(keep);
    if (so.value === "disagreement") rows.sort(function (a, b) { return gap(b) - gap(a) || a.row - b.row; });
    else if (so.value === "score") rows.sort(function (a, b) { return lowest(a) - lowest(b) || a.row - b.row; });
    var tbody = $("items").tBodies[0];
    tbody.textContent = "";
    rows.slice(0, LIMIT).forEach(function (item) {
      var tr = el("tr", "item");
      tr.tabIndex = 0;
      tr.dataset.row = String(item.row);
      if (item.row === openRow) tr.classList.add("open");
      tr.appendChild(el("td", "num", item.row + 1));
      tr.appendChild(el("td", "clip id", show(item.id)));
      ["prompt", "baseline", "candidate"].forEach(function (k) {
        var td = el("td", "clip " + k, show(item[k]));
        td.title = show(item[k]);
        tr.appendChild(td);
      });
      selected().forEach(function (j) { tr.appendChild(scoreCell(item.judges[j])); });
      labels.forEach(function (l) { tr.appendChild(el("td", "num label", num(item.labels[l]))); });
      tr.addEventListener("click", function () { openItem(item); });
      tr.addEventListener("keydown", function (ev) { if (ev.key === "Enter") openItem(item); });
      tbody.appendChild(tr);
    });
    $("count").textContent = "showing " + Math.min(rows.length, LIMIT) + " of " + items.length + " items" +
      (rows.length !== items.length ? " (" + rows.length + " match)" : "");
    $("more").textContent = rows.length > LIMIT ? (rows.length - LIMIT) + " more match; narrow the filters" : "";
  }

  function block(parent, title, text, cls) {
    parent.appendChild(el("h4", null, title));
    if (text === null || text === undefined) parent.appendChild(el("p", "none", "not recorded"));
    else parent.appendChild(el("pre", cls, text));
  }

  function kv(parent, pairs) {
    var t = el("table");
    pairs.forEach(function (p) {
      var tr = el("tr");
      tr.appendChild(el("th", null, p[0]));
      tr.appendChild(el("td", null, p[1]));
      t.appendChild(tr);
    });
    parent.appendChild(t);
  }

  function openItem(item) {
    openRow = item.row;
    Array.prototype.forEach.call(document.querySelectorAll("#items tr.item"), function (tr) {
      tr.classList.toggle("open", tr.dataset.row === String(item.row));
    });
    var body = $("detail-body");
    body.textContent = "";
    body.dataset.row = String(item.row);
    body.appendChild(el("h2", null, "item " + show(item.id) + " (row " + (item.row + 1) + ")"));
    var facts = [];
    if (item.candidate_model) facts.push(["candidate model", item.candidate_model]);
    Object.keys(item.fields || {}).forEach(function (k) { facts.push([k, show(item.fields[k])]); });
    labels.forEach(function (l) { facts.push(["label " + l, num(item.labels[l])]); });
    if (facts.length) kv(body, facts);
    var drawn = item.transcript ? document.getElementById("transcript-" + item.row) : null;
    if (drawn) {  // a conversation or an agent run: its transcript, drawn and escaped by the page's maker
      body.appendChild(el("h4", null, "conversation"));
      var box = el("div", "transcript");
      box.appendChild(drawn.content.cloneNode(true));
      body.appendChild(box);
    } else {
      block(body, "prompt", item.prompt, "prompt");
      block(body, "reference", item.baseline, "baseline");
      block(body, "candidate", item.candidate, "candidate");
    }
    var first = fj.value ? [fj.value] : [];  // the judge chosen in the filter comes first
    first.concat(judges.filter(function (j) { return first.indexOf(j) < 0; })).forEach(function (j) {
      var r = item.judges[j];
      if (!r) return;
      var sec = el("section", "judge");
      sec.dataset.judge = j;
      sec.appendChild(el("h3", null, j));
      var line = r.status === "scored" ? "score " + num(r.score) : r.status;
      if (r.confidence !== undefined && r.confidence !== null) line += " (confidence " + num(r.confidence) + ")";
      if (r.disagrees === true) line += " \u2014 disagrees with people";
      else if (r.disagrees === false) line += " \u2014 agrees with people";
      sec.appendChild(el("p", "status-" + r.status, line));
      if (r.notes) block(sec, r.status === "scored" ? "notes" : "why not scored", r.notes, "notes");
      if (r.judge_prompt === null && r.raw_reply === null) {
        sec.appendChild(el("p", "none", "this judge sent no prompt to a model (or the run did not keep it)"));
      } else {
        block(sec, "prompt the judge saw", r.judge_prompt, "judge-prompt");
        block(sec, "raw reply", r.raw_reply, "raw-reply");
      }
      body.appendChild(sec);
    });
    var probes = probesByRow[item.row] || [], byProbe = {}, order = [];
    probes.forEach(function (p) {
      if (!byProbe[p.probe]) { byProbe[p.probe] = []; order.push(p.probe); }
      byProbe[p.probe].push(p);
    });
    if (order.length) {
      var sec = el("section", "probes");
      sec.appendChild(el("h3", null, "bias probes"));
      order.forEach(function (name) {
        var rows = byProbe[name];
        sec.appendChild(el("h4", null, name + ": the candidate became"));
        sec.appendChild(el("pre", "perturbed", show(rows[0].perturbed_candidate)));
        kv(sec, rows.map(function (p) {
          return [p.judge, num(p.original) + " \u2192 " + num(p.perturbed) + (p.flipped ? " (verdict flipped)" : "")];
        }));
      });
      body.appendChild(sec);
    }
    $("detail").hidden = false;
    document.querySelector("main").classList.add("detail-open");
  }

  $("close").addEventListener("click", function () {
    $("detail").hidden = true;
    document.querySelector("main").classList.remove("detail-open");
    openRow = null;
    render();
  });
  [fj, fs, fp, fq, so].forEach(function (c) { c.addEventListener("change", render); });
  search.addEventListener("input", render);
  render();
})();
"""
