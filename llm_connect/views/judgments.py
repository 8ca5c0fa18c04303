"""The judgment viewer's records: every judgment of a report as ``judgments.jsonl``, which the viewer page
(:mod:`llm_connect.views.viewer`) shows.

One function turns a :class:`~llm_connect.calibration.CalibrationReport` into records
(:func:`judgment_records`); ``calibrate`` and ``demo`` write them as ``judgments.jsonl``
(:func:`write_judgments`), ``llm-connect view`` reads them back (:func:`read_judgments`), and
``report.view()`` shows them directly (:func:`judgment_viewer`), so the page is the same from the command line
and in Jupyter.

The file is JSON Lines, ASCII only (every other character as a ``\\uXXXX`` escape), one record a line:

- first a ``meta`` record: ``format`` (``llm-connect-judgments``), ``version``, ``title``, ``n_items``,
  ``judges`` (the machine judges), ``labels`` (the human label columns), ``people`` (the label the
  judges are compared with: ``human``, else the first annotator; ``null`` without labels),
  ``thresholds`` (per judge and label: the score at or above which a verdict is "correct"),
  ``probes`` and ``fields`` (the extra text columns the items carry);
- an ``item`` record per item, in input order: ``row``, ``id``, ``prompt``, ``baseline``,
  ``candidate``, ``candidate_model``, ``fields``, ``labels`` (label -> score in 0..1 or ``null``),
  ``people`` (that label's score) and ``judges``: per judge ``score`` (``null`` when unscored, never
  0), ``status`` (``scored`` / ``unscored`` / ``abstained`` (a selective judge below its cut-off) /
  ``error``), ``confidence`` (a selective judge's, else ``null``), ``notes`` (the error or the reason when not
  scored), ``raw_reply`` and ``judge_prompt`` (the exact prompt the judge saw; ``null`` for a judge
  that calls no model, or when the run did not keep it), ``verdict`` (score >= threshold),
  ``disagrees`` (verdict differs from people's; ``null`` when either is missing) and ``gap``
  (``|score - people|``);
  An item of a conversation or an agent run also has ``messages`` (the chat messages before the
  judged reply), ``context`` (its documents), ``candidate_run`` / ``baseline_run`` (the reply or
  the reference when it is a trajectory, a list of messages; ``candidate`` / ``baseline`` then hold
  its final answer), each ``null`` when the item has none; the viewer draws them as a transcript
  (:func:`llm_connect.views._transcript.transcript_html`). ``conversation_id`` and ``turn`` are
  among its ``fields``;
- a ``probe`` record per probe, judge and probed item: ``probe``, ``judge``, ``row`` (the item's
  row), ``id``, ``perturbed_candidate``, ``original``, ``perturbed``, ``shift`` and ``flipped``
  (the verdict changed at the judge's threshold).

Text that may hold credentials (``scheme://user:password@``) is redacted on the way in. The page
(:func:`llm_connect.views.viewer_html`) embeds the records as JSON inside ``<script type="application/json">``
with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, and its script renders them with
``textContent`` only; a Content-Security-Policy allows no script but its own (by hash), so even
markup that slipped through could not run, and no network access at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._textsafe import redact_urls
from ..errors import ValidationError

__all__ = [
    "JUDGMENTS_FILE",
    "JUDGMENTS_FORMAT",
    "check_records",
    "judgment_records",
    "judgment_viewer",
    "read_judgments",
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
_STATUSES = ("scored", "unscored", "abstained", "error")


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


def _redacted(value: Any) -> Any:
    """A JSON value with every string redacted as :func:`_text` redacts it."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return _plain(value)


def _messages(value: Any, *, parse: bool = False) -> list[dict[str, Any]] | None:
    """A list of chat messages (a trajectory, or the messages before the reply) checked and redacted; ``None`` for
    a value that is not one (a text reply, a missing value, a malformed list: shown as text instead). ``parse``:
    a string holding a JSON list is read (a ``messages`` column of a CSV file)."""
    from ..conversations import normalize_messages

    if type(value).__name__ == "ndarray":
        value = value.tolist()
    if parse and isinstance(value, str) and value.lstrip().startswith("["):  # a CSV cell holds the JSON
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, (list, tuple)):
        return None
    try:
        return _redacted(normalize_messages(value))
    except ValidationError:
        return None


def _documents(value: Any) -> list[str] | None:
    if type(value).__name__ == "ndarray":
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_text(v) or "" for v in value]
    return None if _missing(value) else [_text(value) or ""]


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
    from ..calibration._cards import card_reference

    reference, is_people = card_reference(report)
    return reference if is_people else None


#: The columns of a conversation's item that the viewer draws as a transcript, not as fields.
TRANSCRIPT_COLUMNS = ("messages", "context")


def _json_value(value: Any) -> Any:
    """A message, a list of messages or of documents as plain JSON: numpy arrays and scalars as Python, every
    string with URL credentials redacted; ``None`` when missing."""
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__name__ == "ndarray":
        value = tolist()
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    value = _plain(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _text(value)


def _run(value: Any) -> list[Any] | None:
    """A reply or reference that is a trajectory (a list of messages) as plain JSON, else ``None``."""
    if type(value).__name__ == "ndarray":
        value = value.tolist()
    return _json_value(value) if isinstance(value, (list, tuple)) else None


def _final_text(value: Any) -> str | None:
    """A reply's text: a trajectory's final answer (its last message's text when that is the assistant's)."""
    run = _run(value)
    if run is None:
        return _text(value)
    last = run[-1] if run else None
    if isinstance(last, Mapping) and last.get("role") == "assistant" and isinstance(last.get("content"), str):
        return last["content"]
    return ""


def _extra_fields(report: Any, judges: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The columns an item carries besides ours (group columns and the like): the input's columns the
    run carried through (``ScoredItems.passthrough``), else any column of the frame that is not ours."""
    scores = report.scores
    passthrough = getattr(report.meta, "passthrough", None)
    if isinstance(passthrough, list):
        return [c for c in passthrough if c in scores.columns and c not in TRANSCRIPT_COLUMNS]
    ours = {*_ITEM_TEXT, *_FEATURES, *TRANSCRIPT_COLUMNS}
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

    Parameters
    ----------
    report : CalibrationReport
        The report.
    title : str, default "Judgments"
        The ``meta`` record's title.

    Returns
    -------
    list of dict
        The records.
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
    texts = {c: [_text(v) for v in column(c)] for c in ("prompt", "candidate_model")}
    texts.update({c: [_final_text(v) for v in column(c)] for c in ("baseline", "candidate")})
    runs = {c: [_run(v) for v in column(c)] for c in ("baseline", "candidate")}
    transcript: dict[str, list[Any]] = {"messages": [_messages(v, parse=True) for v in column("messages")],
                                        "context": [_documents(v) for v in column("context")]}
    label_scores = {lab: [_score(v) for v in column(f"score_{lab}")] for lab in labels}
    people_scores = label_scores.get(people, [None] * n) if people else [None] * n
    per_judge: dict[str, dict[str, list[Any]]] = {
        j: {
            "score": [_score(v) for v in column(f"score_{j}")],
            "status": [_text(v) for v in column(f"status_{j}")],
            "notes": [_text(v) for v in column(f"notes_{j}")],
            "raw_reply": [_text(v) for v in column(f"{RAW_REPLY_PREFIX}{j}")],
            "judge_prompt": [_text(v) for v in column(f"{JUDGE_PROMPT_PREFIX}{j}")],
            "confidence": [_score(v) for v in column(f"confidence_{j}")],
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
                         "verdict": verdict, "disagrees": disagrees, "gap": gap,
                         "confidence": d["confidence"][i]}
        record = {
            "kind": "item", "row": i, "id": ids[i], "prompt": texts["prompt"][i], "baseline": texts["baseline"][i],
            "candidate": texts["candidate"][i], "candidate_model": texts["candidate_model"][i],
            "fields": {c: extra[c][i] for c in fields},
            "labels": {lab: label_scores[lab][i] for lab in labels}, "people": people_scores[i], "judges": judged,
        }
        conversation = {"messages": transcript["messages"][i], "context": transcript["context"][i],
                        "candidate_run": runs["candidate"][i], "baseline_run": runs["baseline"][i]}
        if any(v is not None for v in conversation.values()):
            record.update(conversation)
        records.append(record)
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
    """Write ``judgments.jsonl`` (a report's :func:`judgment_records`, or the records) atomically; its path.

    Parameters
    ----------
    report_or_records : CalibrationReport or sequence of mapping
        A report, or its records.
    path : str or Path
        The file.
    title : str, default "Judgments"
        The ``meta`` record's title (for a report).

    Returns
    -------
    Path
        The file written.
    """
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
    :class:`~llm_connect.errors.ValidationError` saying what is wrong in one line.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    list of dict
        The records.

    Raises
    ------
    ValidationError
        A missing, foreign or malformed file.
    """
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
    check_records(records, p.name)
    return records


def check_records(records: Sequence[Mapping[str, Any]], name: str) -> None:
    """The shapes the page relies on (so a hand-edited file fails here, not in the browser).

    Parameters
    ----------
    records : sequence of mapping
        The records.
    name : str
        Where they came from, for the error.

    Raises
    ------
    ValidationError
        A record of the wrong shape.
    """
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


def judgment_viewer(report: Any, *, title: str = "Judgments", height: int = 760) -> Any:
    """Every judgment of a report in one page (:class:`~llm_connect.views.JudgmentViewer` of its
    :func:`judgment_records`): what :meth:`CalibrationReport.view() <llm_connect.calibration.CalibrationReport.view>`
    returns.

    Parameters
    ----------
    report : CalibrationReport
    title : str
        The page's title.
    height : int
        The iframe's height in a notebook, in pixels.

    Returns
    -------
    JudgmentViewer
    """
    from .viewer import JudgmentViewer

    return JudgmentViewer.from_records(judgment_records(report, title=title), height=height)
