"""A viewer for every judgment: ``judgments.jsonl`` and the self-contained page built from it.

One function turns a :class:`~llm_connect.calibration.CalibrationReport` into records
(:func:`judgment_records`); ``calibrate`` and ``demo`` write them as ``judgments.jsonl``
(:func:`write_judgments`), ``llm-connect view`` reads them back (:func:`read_judgments`), and
``report.view()`` uses them directly, so the page is the same from the command line and in Jupyter.

The file is JSON Lines, ASCII only (every other character as a ``\\uXXXX`` escape), one record a line:

- first a ``meta`` record: ``format`` (``llm-connect-judgments``), ``version``, ``title``, ``n_items``,
  ``judges`` (the machine judges), ``labels`` (the human label columns), ``people`` (the label the
  judges are compared with: ``human``, else the first annotator; ``null`` without labels),
  ``thresholds`` (per judge and label: the score at or above which a verdict is "correct"),
  ``probes`` and ``fields`` (the extra text columns the items carry);
- an ``item`` record per item, in input order: ``row``, ``id``, ``prompt``, ``baseline``,
  ``candidate``, ``candidate_model``, ``fields``, ``labels`` (label -> score in 0..1 or ``null``),
  ``people`` (that label's score) and ``judges``: per judge ``score`` (``null`` when unscored, never
  0), ``status`` (``scored`` / ``unscored`` / ``error``), ``notes`` (the error or the reason when not
  scored), ``raw_reply`` and ``judge_prompt`` (the exact prompt the judge saw; ``null`` for a judge
  that calls no model, or when the run did not keep it), ``verdict`` (score >= threshold),
  ``disagrees`` (verdict differs from people's; ``null`` when either is missing) and ``gap``
  (``|score - people|``);
- a ``probe`` record per probe, judge and probed item: ``probe``, ``judge``, ``row`` (the item's
  row), ``id``, ``perturbed_candidate``, ``original``, ``perturbed``, ``shift`` and ``flipped``
  (the verdict changed at the judge's threshold).

Text that may hold credentials (``scheme://user:password@``) is redacted on the way in. The page
(:func:`viewer_html`) embeds the records as JSON inside ``<script type="application/json">``
with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, and its script renders them with
``textContent`` only; a Content-Security-Policy allows no script but its own (by hash), so even
markup that slipped through could not run, and no network access at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._textsafe import redact_urls
from ..errors import ValidationError
from .._html import Markup, html_format

__all__ = [
    "JUDGMENTS_FILE",
    "JUDGMENTS_FORMAT",
    "JudgmentViewer",
    "judgment_records",
    "read_judgments",
    "viewer_html",
    "write_judgments",
]

JUDGMENTS_FILE = "judgments.jsonl"
JUDGMENTS_FORMAT = "llm-connect-judgments"
JUDGMENTS_VERSION = 1
#: Per judge ``N``, the columns of a report's ``scores`` frame holding the judge's raw reply and the
#: exact prompt it saw (absent for a judge that calls no model, or from a run that did not keep them).
RAW_REPLY_PREFIX = "reply_"
JUDGE_PROMPT_PREFIX = "judge_prompt_"
_ITEM_TEXT = ("id", "prompt", "baseline", "candidate", "candidate_model")
_FEATURES = ("model_family", "candidate_chars", "candidate_words", "baseline_chars", "baseline_words",
             "length_ratio", "has_header", "has_list", "has_bold", "has_code", "markdown_features")
_JUDGE_PREFIXES = ("score_", "status_", "notes_", RAW_REPLY_PREFIX, JUDGE_PROMPT_PREFIX)
_STATUSES = ("scored", "unscored", "error")


# -- values as plain JSON --------------------------------------------------------------------------


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return True
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return isinstance(value, float) and math.isnan(value)


def _text(value: Any) -> str | None:
    """Untrusted text as a plain ``str`` (credentials in URLs redacted), ``None`` when missing."""
    value = _plain(value)
    if value is None:
        return None
    return redact_urls(value if isinstance(value, str) else str(value))


def _plain(value: Any) -> Any:
    """A numpy / pandas scalar as plain Python; NaN and NA as ``None``."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            value = item()
        except (TypeError, ValueError):
            pass
    if _missing(value):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _score(value: Any) -> float | None:
    value = _plain(value)
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _item_id(value: Any) -> str | int | float | bool | None:
    value = _plain(value)
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, float) and value.is_integer():
            return int(value)  # pandas turns ids 1, 2, NaN into 1.0, 2.0, NaN
        return value
    return _text(value)


# -- records from a report ---------------------------------------------------------------------------


def _people(report: Any) -> str | None:
    from ._cards import card_reference

    reference, is_people = card_reference(report)
    return reference if is_people else None


def _extra_fields(report: Any, judges: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The columns an item carries besides ours (group columns and the like): the input's columns the
    run carried through (``ScoredItems.passthrough``), else any column of the frame that is not ours."""
    scores = report.scores
    passthrough = getattr(report.meta, "passthrough", None)
    if isinstance(passthrough, list):
        return [c for c in passthrough if c in scores.columns]
    ours = {*_ITEM_TEXT, *_FEATURES}
    names = [*judges, *labels]
    out = []
    for column in scores.columns:
        if not isinstance(column, str) or column in ours:
            continue
        if any(column == f"{p}{n}" for p in _JUDGE_PREFIXES for n in names):
            continue
        out.append(column)
    return out


def _verdicts(score: float | None, people: float | None, threshold: float,
              people_threshold: float) -> tuple[bool | None, bool | None, float | None]:
    verdict = None if score is None else score >= threshold
    if verdict is None or people is None:
        return verdict, None, None
    return verdict, verdict != (people >= people_threshold), abs(score - people)  # type: ignore[operator]


def _probe_rows(ids: Sequence[Any], candidates: Sequence[Any], probe_ids: Sequence[Any],
                probe_candidates: Sequence[Any]) -> list[int | None]:
    """The item row of each probed item: its id and candidate, matched forward (probes keep input order)."""
    rows: list[int | None] = []
    start = 0
    for pid, pc in zip(probe_ids, probe_candidates, strict=True):
        found = None
        for scan in (range(start, len(ids)), range(0, start)):
            for r in scan:
                if ids[r] == pid and candidates[r] == pc:
                    found = r
                    break
            if found is not None:
                break
        rows.append(found)
        if found is not None:
            start = found + 1
    return rows


def judgment_records(report: Any, *, title: str = "Judgments") -> list[dict[str, Any]]:
    """Every judgment of a :class:`~llm_connect.calibration.CalibrationReport` as plain records.

    The ``meta`` record, one ``item`` record per item in input order, then the ``probe``
    records (the format is in this module's docstring). What ``judgments.jsonl`` holds and
    what ``report.view()`` shows.
    """
    scores = report.scores
    judges = list(report.judges)
    labels = list(report.labels)
    people = _people(report)
    thresholds = {n: float(report.threshold_of(n)) for n in [*judges, *labels]}
    fields = _extra_fields(report, judges, labels)
    n = len(scores)

    def column(name: str) -> list[Any]:
        return scores[name].tolist() if name in scores.columns else [None] * n

    ids = [_item_id(v) for v in column("id")]
    texts = {c: [_text(v) for v in column(c)] for c in ("prompt", "baseline", "candidate", "candidate_model")}
    label_scores = {lab: [_score(v) for v in column(f"score_{lab}")] for lab in labels}
    people_scores = label_scores.get(people, [None] * n) if people else [None] * n
    per_judge: dict[str, dict[str, list[Any]]] = {
        j: {
            "score": [_score(v) for v in column(f"score_{j}")],
            "status": [_text(v) for v in column(f"status_{j}")],
            "notes": [_text(v) for v in column(f"notes_{j}")],
            "raw_reply": [_text(v) for v in column(f"{RAW_REPLY_PREFIX}{j}")],
            "judge_prompt": [_text(v) for v in column(f"{JUDGE_PROMPT_PREFIX}{j}")],
        }
        for j in judges
    }
    extra = {c: [_text(v) for v in column(c)] for c in fields}
    probes = [] if report.bias is None else list(dict.fromkeys(r.probe for r in report.bias.results if r.stats.n))

    records: list[dict[str, Any]] = [{
        "kind": "meta", "format": JUDGMENTS_FORMAT, "version": JUDGMENTS_VERSION, "title": _text(title),
        "n_items": n, "judges": judges, "labels": labels, "people": people, "thresholds": thresholds,
        "probes": probes, "fields": fields,
    }]
    people_t = thresholds.get(people, 0.5) if people else 0.5
    for i in range(n):
        judged: dict[str, Any] = {}
        for j in judges:
            d = per_judge[j]
            score = d["score"][i] if d["status"][i] == "scored" else None
            verdict, disagrees, gap = _verdicts(score, people_scores[i], thresholds[j], people_t)
            judged[j] = {"score": score, "status": d["status"][i], "notes": d["notes"][i],
                         "raw_reply": d["raw_reply"][i], "judge_prompt": d["judge_prompt"][i],
                         "verdict": verdict, "disagrees": disagrees, "gap": gap}
        records.append({
            "kind": "item", "row": i, "id": ids[i], "prompt": texts["prompt"][i], "baseline": texts["baseline"][i],
            "candidate": texts["candidate"][i], "candidate_model": texts["candidate_model"][i],
            "fields": {c: extra[c][i] for c in fields},
            "labels": {lab: label_scores[lab][i] for lab in labels}, "people": people_scores[i], "judges": judged,
        })
    if report.bias is not None:
        for r in report.bias.results:
            if not r.stats.n or r.items.empty:
                continue
            detail = r.items
            p_ids = [_item_id(v) for v in detail["id"].tolist()]
            p_cand = [_text(v) for v in detail["candidate"].tolist()]
            rows = _probe_rows(ids, texts["candidate"], p_ids, p_cand)
            t = thresholds.get(r.judge, float(r.threshold))
            for k, row in enumerate(rows):
                original = _score(detail["original"].iloc[k])
                perturbed = _score(detail["perturbed"].iloc[k])
                flipped = None if original is None or perturbed is None else (original >= t) != (perturbed >= t)
                records.append({
                    "kind": "probe", "probe": r.probe, "judge": r.judge, "row": row, "id": p_ids[k],
                    "perturbed_candidate": _text(detail["perturbed_candidate"].iloc[k]), "original": original,
                    "perturbed": perturbed,
                    "shift": None if original is None or perturbed is None else perturbed - original,
                    "flipped": flipped,
                })
    return records


# -- the file --------------------------------------------------------------------------------------


def _json_line(record: Mapping[str, Any]) -> str:
    # ASCII only: a lone surrogate in a reply stays an escape instead of failing to encode
    return json.dumps(record, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def write_judgments(report_or_records: Any, path: str | Path, *, title: str = "Judgments") -> Path:
    """Write ``judgments.jsonl`` (a report's :func:`judgment_records`, or the records) atomically; its path."""
    records = (report_or_records if isinstance(report_or_records, list)
               else judgment_records(report_or_records, title=title))
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="ascii", newline="\n") as f:
        for record in records:
            f.write(_json_line(record) + "\n")
    tmp.replace(p)
    return p


_MAX_FILE_BYTES = 1 << 30  # a viewer page past a gigabyte would not open in a browser anyway


def read_judgments(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``judgments.jsonl``, checked: a missing, foreign or malformed file is a
    :class:`~llm_connect.errors.ValidationError` saying what is wrong in one line."""
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"no {p.name} at {str(p)!r}")
    if p.stat().st_size > _MAX_FILE_BYTES:
        raise ValidationError(f"{str(p)!r} is larger than {_MAX_FILE_BYTES >> 20} MiB")
    records: list[dict[str, Any]] = []
    try:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValidationError(f"{p.name} line {n} is not JSON: {exc.msg}") from None
                if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
                    raise ValidationError(f"{p.name} line {n} is not a judgments record (no 'kind')")
                records.append(record)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{p.name} is not UTF-8 text: {exc.reason}") from None
    if not records or records[0].get("kind") != "meta" or records[0].get("format") != JUDGMENTS_FORMAT:
        raise ValidationError(f"{p.name} is not an llm-connect judgments file (its first line is not the meta record)")
    version = records[0].get("version")
    if not isinstance(version, int) or version > JUDGMENTS_VERSION:
        raise ValidationError(f"{p.name} has format version {version!r}; this llm-connect reads up to "
                              f"{JUDGMENTS_VERSION} (upgrade llm-connect)")
    _check_records(records, p.name)
    return records


def _check_records(records: Sequence[Mapping[str, Any]], name: str) -> None:
    """The shapes the page relies on (so a hand-edited file fails here, not in the browser)."""
    meta = records[0]
    for key in ("judges", "labels", "probes", "fields"):
        value = meta.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationError(f"{name}: the meta record's {key!r} must be a list of names")
    for n, record in enumerate(records[1:], 2):  # records of other kinds (a later version's) are not shown
        row = record.get("row")
        if record["kind"] == "item":
            if not isinstance(row, int) or isinstance(row, bool):
                raise ValidationError(f"{name} line {n}: an item needs its 'row' (a whole number)")
            if not all(isinstance(record.get(k, {}), dict) for k in ("judges", "labels", "fields")):
                raise ValidationError(f"{name} line {n}: an item's 'judges', 'labels' and 'fields' must be objects")
            if not all(isinstance(v, dict) for v in record.get("judges", {}).values()):
                raise ValidationError(f"{name} line {n}: each judge of an item must be an object")
        elif record["kind"] == "probe" and row is not None and (not isinstance(row, int) or isinstance(row, bool)):
            raise ValidationError(f"{name} line {n}: a probe's 'row' must be a whole number or null")


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
    """The page's policy: its own script (by hash) and inline styles; no network, no plugins, no frames."""
    return (f"default-src 'none'; script-src '{_script_hash(_SCRIPT)}'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def viewer_html(records: Sequence[Mapping[str, Any]], *, title: str | None = None) -> str:
    """The self-contained viewer page (inline CSS and script, no network) for ``records``."""
    if not records or records[0].get("kind") != "meta":
        raise ValidationError("viewer_html needs judgment records starting with the meta record")
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
        "<span id='count' aria-live='polite'></span></div></header>"
        "<main><div id='list'><table id='items'><thead></thead><tbody></tbody></table>"
        "<p id='more'></p></div>"
        "<aside id='detail' hidden><button id='close' type='button' aria-label='close'>×</button>"
        "<div id='detail-body'></div></aside></main>"
        "<noscript>This page needs JavaScript to show the judgments.</noscript>"
        "<script type='application/json' id='judgments-data'>{}</script>"
        "<script>{}</script></body></html>\n",
        # constant style and script of this module, and the JSON made safe above, go in as they are
        content_security_policy(), shown, Markup(_STYLE), shown, Markup(_embedded_json(records)), Markup(_SCRIPT),
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
    (``srcdoc``, scripts allowed but no access to the notebook), :meth:`save` writes the page."""

    records: tuple[Mapping[str, Any], ...]
    title: str | None = None
    height: int = 760

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], **kwargs: Any) -> JudgmentViewer:
        return cls(tuple(records), **kwargs)

    @property
    def html(self) -> str:
        """The whole page."""
        return viewer_html(self.records, title=self.title)

    def save(self, path: str | Path) -> Path:
        """Write the page (one self-contained file that opens from ``file://``); its path."""
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
  ["scored", "unscored", "error"].forEach(function (s) { option(fs, s, s); });
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
      td.classList.add("status-" + (result.status === "error" ? "error" : "unscored"));
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
    block(body, "prompt", item.prompt, "prompt");
    block(body, "reference", item.baseline, "baseline");
    block(body, "candidate", item.candidate, "candidate");
    var first = fj.value ? [fj.value] : [];  // the judge chosen in the filter comes first
    first.concat(judges.filter(function (j) { return first.indexOf(j) < 0; })).forEach(function (j) {
      var r = item.judges[j];
      if (!r) return;
      var sec = el("section", "judge");
      sec.dataset.judge = j;
      sec.appendChild(el("h3", null, j));
      var line = r.status === "scored" ? "score " + num(r.score) : r.status;
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
