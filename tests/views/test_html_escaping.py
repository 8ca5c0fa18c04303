"""Output hygiene: every HTML view escapes every value it shows.

Each result type is built with hostile text in every string field a user, a
dataset or a model can set (grader ids, judge names, item ids, answers, notes,
adapter and model ids, probe names, families...). Its HTML must then hold no
live markup of ours: ``html.parser`` sees only the elements the class itself
writes, no event-handler attribute, and the hostile text comes back as text,
escaped exactly once.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from llm_connect import LLMResponse, QualityLedger
from llm_connect.calibration import (
    AgreementTable,
    BiasReport,
    ProbeResult,
    agreement_table,
    calibrate,
    length_controlled_scores,
    length_effect,
    pair_agreement,
    self_preference,
)
from llm_connect.calibration._bias import ShiftStats
from llm_connect.grading import (
    EscalationSummary,
    ExactMatchJudge,
    GradingResult,
    LLMJudge,
    PairwiseSummary,
    PanelAgreement,
)
from llm_connect.pipelines import BooleanScale, JudgeUnit, Pipeline, PipelineResult, Trace, TraceRecord
from llm_connect.routing import RoutingPolicy, route
from llm_connect.testing import ScriptedAdapter


def evil(field: str) -> str:
    """Hostile text naming its field: breaks out of quotes, opens tags, holds an entity, format braces
    and a matplotlib mathtext formula that does not parse (judge names become plot titles)."""
    return f"{field}\"'><img src=x onerror=alert(1)><script>alert(1)</script>&amp;{{0}} $\\foo{{$"


TABLE = {"table", "caption", "thead", "tbody", "tr", "th", "td"}
PARAGRAPH = {"p", "b", "br"}
REPORT = TABLE | PARAGRAPH | {"div", "h2", "h3", "ul", "li", "figure", "img", "figcaption"}  # + verdicts and cards
DOCUMENT = REPORT | {"html", "head", "meta", "title", "style", "body"}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, name, value) for name, value in attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_clean(markup: str, allowed: set[str], shown: list[str]) -> None:
    """No live hostile markup; only ``allowed`` elements; each ``shown`` field's text visible, escaped once."""
    assert isinstance(markup, str) and markup
    lowered = markup.lower()
    assert "<img src=x" not in lowered
    assert "<script" not in lowered
    parser = _Collector()
    parser.feed(markup)
    parser.close()
    assert set(parser.tags) <= allowed, f"unexpected elements: {set(parser.tags) - allowed}"
    for tag, name, value in parser.attrs:
        assert not name.startswith("on"), f"event handler attribute {name!r} on <{tag}>"
        if tag == "img":
            assert name != "src" or (value or "").startswith("data:image/png;base64,"), value
    text = "".join(parser.text)
    for twice in ("&lt;", "&gt;", "&quot;", "&#x27;", "&amp;amp;"):
        assert twice not in text, f"text escaped twice: {twice!r} is shown"
    for field in shown:
        assert evil(field) in text, f"{field!r} is not shown as text (escaped twice, or dropped)"


# -- builders: one result object each, hostile in every string field ------------------------------------


def _response(role: str) -> LLMResponse:
    return LLMResponse(content=evil(f"{role} content"), adapter_id=evil(f"{role} adapter"),
                       model_id=evil(f"{role} model"))


def grading_result() -> tuple[str, set[str], list[str]]:
    result = GradingResult(0.5, evil("notes"), evil("grader_id"), _response("baseline"), _response("candidate"))
    return result._repr_html_(), TABLE, ["notes", "grader_id", "baseline content", "candidate content"]


def pairwise_summary() -> tuple[str, set[str], list[str]]:
    return PairwiseSummary(4, 4, 3, 0.75, 2, 1, 1, 0.5)._repr_html_(), TABLE, []


def panel_agreement() -> tuple[str, set[str], list[str]]:
    members = (evil("member a"), evil("member b"))
    html = PanelAgreement(0.4, evil("level"), 10, members)._repr_html_()
    return html, TABLE, ["level", "member a"]


def escalation_summary() -> tuple[str, set[str], list[str]]:
    return EscalationSummary(10, 3, 0.3, 0.5, 0.1, 0.4, 0.13, 1.3, 0.8, 0.6)._repr_html_(), TABLE, []


def selective_judge() -> tuple[str, set[str], list[str]]:
    from llm_connect.grading import SelectiveJudge, TokenF1Judge

    judge = SelectiveJudge(TokenF1Judge(grader_id=evil("selective grader")), cutoff=0.8)
    return judge._repr_html_(), TABLE | PARAGRAPH | {"div"}, ["selective grader"]


def _trace() -> Trace:
    return Trace([
        TraceRecord(evil("node"), evil("unit"), "judge", "ok", attempt=1, inputs=(evil("input"),),
                    prompt=evil("prompt"), reply=evil("reply"), verdict=evil("verdict"), score=1.0,
                    explanation=evil("explanation"), adapter_id=evil("adapter"), model_id=evil("model")),
        TraceRecord(evil("node 2"), evil("unit 2"), "judge", "error", error=evil("error")),
    ])


def trace() -> tuple[str, set[str], list[str]]:
    return _trace()._repr_html_(), TABLE, ["node", "node 2", "verdict", "explanation", "reply", "error"]


def pipeline_result() -> tuple[str, set[str], list[str]]:
    result = PipelineResult(quality_score=1.0, verdict=evil("final verdict"), value=True, passed=True, threshold=0.5,
                            notes=evil("pipeline notes"), outputs={}, trace=_trace())
    return result._repr_html_(), TABLE | PARAGRAPH, ["final verdict", "pipeline notes", "node"]


def pipeline() -> tuple[str, set[str], list[str]]:
    adapter = ScriptedAdapter(["Verdict: yes"], adapter_id=evil("adapter_id"), model_id=evil("model_id"))
    unit = JudgeUnit("Is {candidate} right?", BooleanScale(), name="judge")
    built = Pipeline(unit, adapter=adapter, name=evil("pipeline name"))
    return built._repr_html_(), TABLE | PARAGRAPH, ["pipeline name", "adapter_id"]


def pipeline_not_runnable() -> tuple[str, set[str], list[str]]:
    unit = JudgeUnit("Is {candidate} right?", BooleanScale(), name="judge")
    html = Pipeline(unit, name=evil("unrunnable pipeline"))._repr_html_()  # no adapter: not runnable
    return html, TABLE | PARAGRAPH, ["unrunnable pipeline"]


def routing_decision(tmp_path: Path, make_obs) -> tuple[str, set[str], list[str]]:
    ledger = QualityLedger(tmp_path / "ledger.jsonl")
    now = datetime(2026, 1, 2, tzinfo=UTC)
    task = evil("task_type")
    for i in range(25):
        for adapter, quality in (("good", 0.94 + 0.01 * (i % 3)), ("weak", 0.3)):  # scores that vary: a bootstrap
            ledger.append(make_obs(task_type=task, adapter_id=evil(f"{adapter} adapter"),
                                           model_id=evil(f"{adapter} model"), quality_score=quality,
                                           recorded_at=now - timedelta(minutes=i)))
    decision = route(ledger, task, now=now, policy=RoutingPolicy(min_observations=20))
    assert decision.adapter_id == evil("good adapter")
    return decision._repr_html_(), TABLE | PARAGRAPH, ["task_type", "good adapter", "weak adapter", "weak model"]


def quality_ledger(tmp_path: Path, make_obs) -> tuple[str, set[str], list[str]]:
    name = evil("ledger file").replace("/", "_")
    html = QualityLedger(tmp_path / name)._repr_html_()
    return html, {"code"}, []


def _scores(n: int = 40, seed: int = 0) -> pd.DataFrame:
    """A score frame as score_items makes it, with hostile judge names, ids, answers and families."""
    rng = np.random.default_rng(seed)
    human = (rng.random(n) < 0.6).astype(float)
    words = rng.integers(3, 60, size=n)
    fam = np.array([evil("family own"), evil("family other")])[np.arange(n) % 2]
    judge = np.clip(0.3 + 0.5 * human + 0.004 * words + rng.normal(0, 0.1, n), 0, 1)
    return pd.DataFrame({
        "id": [evil(f"id {i}") for i in range(n)],
        "candidate": [evil("answer") + " word" * int(w) for w in words],
        "candidate_words": words,
        "baseline_words": rng.integers(3, 20, size=n),
        "model_family": fam,
        f"score_{evil('judge')}": judge,
        f"score_{evil('label')}": human,
    })


def pair_agreement_html() -> tuple[str, set[str], list[str]]:
    s = _scores()
    pair = pair_agreement(s[f"score_{evil('judge')}"], s[f"score_{evil('label')}"], judge_a=evil("judge"),
                          judge_b=evil("label"), n_boot=20)
    return pair._repr_html_(), TABLE | PARAGRAPH, ["judge", "label"]


def agreement_table_html() -> tuple[str, set[str], list[str]]:
    table = agreement_table(_scores(), n_boot=20)
    assert isinstance(table, AgreementTable) and len(table.pairs) == 1
    return table._repr_html_(), TABLE, ["judge", "label"]


def _probe_result() -> ProbeResult:
    stats = ShiftStats(2, 0.4, 0.6, 0.2, 0.1, 0.3, 0.04, 0.5, 1, 0, note=evil("probe note"))
    items = pd.DataFrame({"id": [evil("item 1"), evil("item 2")], "candidate": [evil("answer"), "fine"],
                          "perturbed_candidate": [evil("perturbed answer"), "fine!"], "original": [0.4, 0.4],
                          "perturbed": [0.6, 0.6], "shift": [0.2, 0.2]})
    return ProbeResult(evil("judge"), evil("probe name"), stats, items)


def probe_result() -> tuple[str, set[str], list[str]]:
    return _probe_result()._repr_html_(), TABLE | PARAGRAPH, ["judge", "probe name", "item 1", "perturbed answer"]


def bias_report() -> tuple[str, set[str], list[str]]:
    html = BiasReport([_probe_result()])._repr_html_()
    return html, TABLE, ["judge", "probe name", "probe note"]


def length_effect_html() -> tuple[str, set[str], list[str]]:
    eff = length_effect(_scores(), evil("judge"), control=evil("label"))
    eff = dataclasses.replace(eff, note=evil("length note"))
    return eff._repr_html_(), TABLE | PARAGRAPH, ["judge", "label", "length note"]


def length_controlled_html() -> tuple[str, set[str], list[str]]:
    lc = length_controlled_scores(_scores(), evil("judge"), control=evil("label"))
    return lc._repr_html_(), TABLE | PARAGRAPH, ["judge", "family own", "family other"]


def self_preference_html() -> tuple[str, set[str], list[str]]:
    sp = self_preference(_scores(), evil("judge"), family=evil("family own"), label=evil("label"), n_boot=20)
    assert not math.isnan(sp.difference)
    sp = dataclasses.replace(sp, note=evil("self-preference note"))
    return sp._repr_html_(), TABLE | PARAGRAPH, ["judge", "family own", "label", "self-preference note"]


def _card():
    from llm_connect.calibration import card_from_scores
    from llm_connect.cards import ProbeEffect

    s = _scores()
    probe = ProbeEffect(evil("card probe"), 0.3, 0.1, 0.5, 0.01, 40, source=evil("probe source"))
    return card_from_scores(s[f"score_{evil('judge')}"], s[f"score_{evil('label')}"], grader_id=evil("card grader"),
                            rubric_hash=evil("rubric"), reference_name=evil("reference"), probes=[probe], n_boot=20)


def judge_card() -> tuple[str, set[str], list[str]]:
    return _card()._repr_html_(), TABLE | PARAGRAPH | {"div"}, ["card grader", "rubric", "card probe", "probe source"]


def judge_card_registry(tmp_path: Path, make_obs) -> tuple[str, set[str], list[str]]:
    from llm_connect.cards import JudgeCardRegistry

    registry = JudgeCardRegistry(tmp_path / "cards.json")
    empty = registry._repr_html_()
    assert_clean(empty, PARAGRAPH, [])
    registry.save(_card())
    return registry._repr_html_(), TABLE | PARAGRAPH | {"div"}, ["card grader"]


BUILDERS = {
    "GradingResult": grading_result,
    "PairwiseSummary": pairwise_summary,
    "PanelAgreement": panel_agreement,
    "EscalationSummary": escalation_summary,
    "SelectiveJudge": selective_judge,
    "Trace": trace,
    "PipelineResult": pipeline_result,
    "Pipeline": pipeline,
    "Pipeline (not runnable)": pipeline_not_runnable,
    "RoutingDecision": routing_decision,
    "QualityLedger": quality_ledger,
    "PairAgreement": pair_agreement_html,
    "AgreementTable": agreement_table_html,
    "ProbeResult": probe_result,
    "BiasReport": bias_report,
    "LengthEffect": length_effect_html,
    "LengthControlled": length_controlled_html,
    "SelfPreference": self_preference_html,
    "JudgeCard": judge_card,
    "JudgeCardRegistry": judge_card_registry,
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_repr_html_escapes_every_field(name, tmp_path, make_obs):
    build = BUILDERS[name]
    args = (tmp_path, make_obs) if name in ("RoutingDecision", "QualityLedger", "JudgeCardRegistry") else ()
    markup, allowed, shown = build(*args)
    assert_clean(markup, allowed, shown)


# -- the whole report, its file and its widget --------------------------------------------------------


def _items(n: int = 24) -> list[dict]:
    rows = []
    for i in range(n):
        correct = i % 3 != 0
        answer = f"Paris {i}" if correct else f"Lyon {i}"
        rows.append({
            "id": evil(f"report id {i}"),
            "prompt": f"Where is landmark {i}? " + evil("prompt"),
            "baseline": f"Paris {i}",
            "candidate": answer + " " + evil("report answer") + " padding" * (i % 5),
            "verdict": "yes" if correct else "no",
            "candidate_model": ["gpt-4o-mini", evil("candidate model")][i % 2],
        })
    return rows


def _llm_reply(prompt: str, run_config) -> str:
    candidate = prompt.split("Candidate answer:", 1)[-1]
    score = 0.8 if "Paris" in candidate else 0.2
    return '{"notes": "' + evil("judge notes").replace('"', "'") + '", "quality_score": ' + str(score) + "}"


@pytest.fixture(scope="module")
def hostile_report():
    judges = [  # named by their grader ids, verbatim
        ExactMatchJudge(grader_id=evil("exact grader")),
        LLMJudge(ScriptedAdapter(_llm_reply, adapter_id=evil("judge adapter"), model_id="gpt-4o-mini"),
                 grader_id=evil("llm grader")),
    ]
    report = calibrate(judges, _items(), human="verdict", probes="length", n_boot=20, progress=False)
    assert report.judges == [evil("exact grader"), evil("llm grader")]
    return report


@pytest.mark.slow  # 6 s measured on 2 busy cores: out of the fast loop
def test_calibration_report_html_and_file_escape_ids_and_answers(hostile_report, tmp_path):
    shown = ["exact grader", "llm grader"]
    assert_clean(hostile_report.html(plots=True, title=evil("title")), REPORT, [*shown, "title"])
    path = hostile_report.to_html(tmp_path / "report.html", title=evil("file title"))
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert_clean(text, DOCUMENT, [*shown, "file title"])


def test_calibration_report_widget_html_is_escaped(hostile_report):
    pytest.importorskip("ipywidgets")
    box = hostile_report.widget()
    c = box.controls
    assert_clean(c.summary.value, TABLE | PARAGRAPH, ["exact grader"])
    assert_clean(c.disagreements.value, TABLE, ["report answer", "prompt"])
    for tab in c.bias_tabs.children:
        assert_clean(tab.value, TABLE | PARAGRAPH, ["llm grader"])


# -- the helper every view goes through ----------------------------------------------------------------


def test_html_helpers_escape_values_and_keep_fragments():
    from llm_connect._html import Markup, escape, html_format, html_table, join, kv_table

    hostile = evil("value")
    para = html_format("<p><b>{}</b> p={:.2f} {name}</p>", hostile, 0.12345, name="{0}")
    assert para == f"<p><b>{escape(hostile)}</b> p=0.12 {{0}}</p>" and isinstance(para, Markup)
    assert escape(para) is para  # a fragment is not escaped twice
    assert html_format("<div>{}</div>", para) == f"<div>{para}</div>"
    assert para + "<i>" == str(para) + "&lt;i&gt;" and "<i>" + para == "&lt;i&gt;" + str(para)  # text is escaped
    assert isinstance(para + para, Markup) and para + para == str(para) * 2
    assert join([para, "<i>"]) == str(para) + "&lt;i&gt;"
    table = html_table([[hostile, 1]], header=["<h>", "n"], caption=hostile, note="<more>",
                       attrs={"class_": "x'><script>"})
    assert_clean(table, TABLE, ["value"])
    assert "colspan='2'" in table and "class='x&#x27;&gt;&lt;script&gt;'" in table
    assert_clean(kv_table([(hostile, hostile)], caption=hostile), TABLE, ["value"])


# -- HTML is built in views/ only ----------------------------------------------------------------------

#: The floors whose HTML moved to views/ (calibration's moves on its own).
HTML_FREE = ("grading", "pipelines", "quality", "testing", "routing.py")
BUILDERS_OF_HTML = {"Markup", "escape", "frame_html", "html_format", "html_table", "join", "kv_table"}


def test_html_is_built_in_views_and_objects_reach_it_by_name():
    """A judgment, a compound judge's summary, a selective judge, a pipeline, its trace, a routing decision, a
    ledger and a quality check keep ``_repr_html_`` (the Jupyter protocol), but it only looks its view up by name
    (``_display.view("...")``): no module of these floors imports an HTML builder or the ``html`` module."""
    import ast

    import llm_connect

    root = Path(llm_connect.__file__).parent
    paths = [p for name in HTML_FREE
             for p in ((root / name).rglob("*.py") if (root / name).is_dir() else [root / name])]
    problems = []
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(root)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_html"):
                problems += [f"{where}: imports {a.name} from _html" for a in node.names if a.name in BUILDERS_OF_HTML]
            elif isinstance(node, ast.Import) and any(a.name == "html" for a in node.names):
                problems.append(f"{where}: imports html")
            elif isinstance(node, ast.FunctionDef) and node.name == "_repr_html_":
                calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Call)
                         and isinstance(c.func.func, ast.Name) and c.func.func.id == "view"]
                if not calls:
                    problems.append(f"{where}:{node.lineno}: _repr_html_ builds its HTML instead of view('...')")
    assert paths and problems == []
    from llm_connect import views

    for name in ("grading_result_html", "pairwise_summary_html", "panel_agreement_html", "escalation_summary_html",
                 "epoch_reliability_html", "selective_judge_html", "selective_cascade_html",
                 "selective_cascade_summary_html", "pipeline_html", "trace_html", "pipeline_result_html",
                 "routing_decision_html", "ledger_html", "quality_check_html"):
        assert name in views.__all__ and callable(getattr(views, name))


def test_moved_views_give_the_html_the_objects_showed(tmp_path, make_obs):
    """The views are the ``_repr_html_`` bodies moved, not new pages: calling one gives what the object shows."""
    from llm_connect import views

    result = GradingResult(0.5, "n", "g", _response("baseline"), _response("candidate"))
    assert views.grading_result_html(result) == result._repr_html_()
    assert views.trace_html(_trace()) == _trace()._repr_html_()
    ledger = QualityLedger(tmp_path / "l<1>.jsonl")
    assert ledger._repr_html_() == f"<code>QualityLedger</code> at <code>{tmp_path}/l&lt;1&gt;.jsonl</code>"
