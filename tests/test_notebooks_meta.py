"""The tutorial notebooks as files: in step with their sources, stripped, and checkable.

Running them is nbval's job (``pytest --nbval-lax notebooks/``); these checks are
fast and catch what nbval cannot: a notebook edited by hand instead of in its
``.py`` source (jupytext percent format) or not rewritten after the source
changed, outputs committed by mistake, a checked cell without a stored output
(which nbval would compare with nothing), a notebook that does not end with an
assertion, or one that reaches for the network. The scripted stand-ins of
``notebooks/tutorial_helpers.py`` are checked not to depend on a prompt's wording,
and none of them to read the human labels.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
try:
    import jupytext
except ImportError:  # the dev extra installs it; the checks that do not need it still run
    jupytext = None

needs_jupytext = pytest.mark.skipif(jupytext is None, reason="needs jupytext (pip install -e '.[dev]')")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHECK = "# NBVAL_CHECK_OUTPUT"
NAMES = [
    "01_quickstart.ipynb",
    "02_ledger_and_frames.ipynb",
    "03_calibration_report.ipynb",
    "04_bias_diagnostics.ipynb",
    "05_compound_judges.ipynb",
    "06_routing.ipynb",
    "07_trustworthy_estimates.ipynb",
    "08_labelling.ipynb",
    "09_leaderboards.ipynb",
    "10_align_a_judge.ipynb",
    "11_trust_or_escalate.ipynb",
    "12_conversations.ipynb",
]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_notebooks_{name}", NOTEBOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sync = _load("sync_notebooks") if jupytext is not None else None
strip = _load("strip_outputs")


def _read(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _cells(path: Path) -> list[tuple[str, str]]:
    """The (type, source) of every cell, as jupytext reads the file (.ipynb or .py)."""
    return [(c.cell_type, c.source) for c in jupytext.read(path).cells]


def _source(name: str) -> Path:
    return NOTEBOOKS / f"{Path(name).stem}.py"


def test_every_notebook_has_a_source():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == NAMES
    assert sorted(p.with_suffix(".ipynb").name for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")) == NAMES


@needs_jupytext
@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_in_sync_with_its_source(name):
    assert _cells(NOTEBOOKS / name) == _cells(_source(name)), (
        f"{name} differs from {_source(name).name}: run python notebooks/sync_notebooks.py --execute {name}"
    )


@needs_jupytext
@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_what_the_sync_script_writes(name):
    """Cell ids, metadata and stripped outputs too: the committed file is reproducible from its source."""
    assert not sync.stale(_source(name)), f"run python notebooks/sync_notebooks.py {name}"


@needs_jupytext
@pytest.mark.parametrize("name", NAMES)
def test_source_is_paired_with_the_notebook(name):
    assert jupytext.read(_source(name)).metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert _read(name).metadata["jupytext"]["formats"] == "ipynb,py:percent"


def _copy_pair(tmp_path: Path, name: str = NAMES[0]) -> tuple[Path, Path]:
    for path in (NOTEBOOKS / name, _source(name)):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path / _source(name).name, tmp_path / name


@needs_jupytext
def test_a_changed_source_is_out_of_sync(tmp_path):
    source, notebook = _copy_pair(tmp_path)
    assert _cells(source) == _cells(notebook) and not sync.stale(source)
    text = source.read_text(encoding="utf-8")
    source.write_text(text.replace("print(f\"{len(qa)} rows", "print(f\"{len(qa)} items", 1), encoding="utf-8")
    assert source.read_text(encoding="utf-8") != text
    assert _cells(source) != _cells(notebook)
    assert sync.stale(source)

    sync.write(source)  # rewriting the notebook brings it back in step
    assert _cells(source) == _cells(notebook) and not sync.stale(source)
    changed = [c for c in nbformat.read(notebook, as_version=4).cells if c.source.startswith(CHECK + "\nprint(f\"")]
    assert changed and not changed[0].outputs, "a changed checked cell keeps no stale output"
    kept = [c for c in nbformat.read(notebook, as_version=4).cells if strip.is_checked(c) and c.outputs]
    assert kept, "unchanged checked cells keep their stored outputs"


@needs_jupytext
@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda cells: cells[1].update(source=cells[1]["source"] + "\nprint('edited')"), id="code"),
        pytest.param(lambda cells: cells[0].update(source=cells[0]["source"].replace("Quickstart", "Start")), id="md"),
        pytest.param(lambda cells: cells.pop(2), id="removed-cell"),
        pytest.param(lambda cells: cells[2].update(cell_type="raw"), id="cell-type"),
    ],
)
def test_a_hand_edited_notebook_is_out_of_sync(tmp_path, change):
    source, notebook = _copy_pair(tmp_path)
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"])
    change(nb["cells"])
    if nb["cells"][2]["cell_type"] == "raw":
        nb["cells"][2].pop("outputs", None)
        nb["cells"][2].pop("execution_count", None)
    notebook.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    assert _cells(source) != _cells(notebook)
    assert sync.stale(source)


@needs_jupytext
def test_check_mode_reports_a_stale_notebook(tmp_path, monkeypatch, capsys):
    _source, notebook = _copy_pair(tmp_path)
    monkeypatch.setattr(sync, "HERE", tmp_path)
    assert sync.main(["--check"]) == 0
    notebook.write_text(notebook.read_text(encoding="utf-8").replace("Quickstart", "Start", 1), encoding="utf-8")
    assert sync.main(["--check"]) == 1
    assert notebook.name in capsys.readouterr().err


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_stripped_except_checked_cells(name):
    nb = _read(name)
    assert nbformat.writes(strip.stripped(nb)) == nbformat.writes(nb), "run python notebooks/strip_outputs.py"
    checked = [c for c in nb.cells if strip.is_checked(c)]
    assert checked, f"{name} has no '{CHECK}' cell"
    for cell in checked:
        assert cell.outputs, f"checked cell without a stored output: {cell.source.splitlines()[1]!r}"
        assert cell.execution_count is not None
        for out in cell.outputs:
            assert out["output_type"] == "stream" and out["name"] == "stdout", "check printed text only"
            text = out["text"]
            assert not re.search(r"0x[0-9a-f]{6,}|\d+(\.\d+)?\s*(ms|s)\b.*elapsed|it/s", text), text


@pytest.mark.parametrize("name", NAMES)
def test_ends_with_an_assertion_and_stays_offline(name):
    nb = _read(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[-1].source.lstrip().startswith("assert") or "\nassert " in code[-1].source
    source = "\n".join(c.source for c in code)
    assert not re.search(r"https?://", source), "notebooks must not reach the network"
    for match in re.finditer(r"""["']([^"'\n]*\.(?:jsonl|csv|yaml))["']""", source):
        path = match.group(1)
        assert not path.startswith("/"), f"use a path relative to the notebook, not {path!r}"
    if "qa_calibration.jsonl" in source:
        assert (NOTEBOOKS / "../data/qa_calibration.jsonl").is_file()


# -- the scripted models decide from the item, not from the prompt's wording ---------------------------


@pytest.fixture(scope="module")
def helpers():
    pytest.importorskip("pandas")
    return _load("tutorial_helpers")


@pytest.fixture(scope="module")
def qa():
    pd = pytest.importorskip("pandas")
    return pd.read_json(NOTEBOOKS / "../data/qa_calibration.jsonl", lines=True, dtype=False)


def _judge_prompt(row, candidate=None):
    from llm_connect import LLMJudge, LLMResponse
    from llm_connect.testing import ScriptedAdapter

    judge = LLMJudge(ScriptedAdapter(["unused"]))
    return judge.build_prompt(
        LLMResponse(content=row["baseline"], adapter_id="b", model_id="b"),
        LLMResponse(content=row["candidate"] if candidate is None else candidate, adapter_id="c", model_id="c"),
        row["prompt"],
    )


def _reworded(row, candidate=None):
    """The same item under a rubric written in other words, in another order, with other markers."""
    candidate = row["candidate"] if candidate is None else candidate
    return (
        f"Grade this reply.\n[REPLY]\n{candidate}\n[/REPLY]\nAsked: {row['prompt']}\n"
        f"Acceptable: {row['baseline']}\nAnswer with JSON holding quality_score (0 to 1) and notes. 2 6 0x1f2a"
    )


def test_answer_index_finds_the_answer_a_prompt_shows(helpers, qa):
    answers = helpers.AnswerIndex(qa)
    for row in qa.to_dict("records"):
        for prompt in (_judge_prompt(row), _reworded(row)):
            found = answers.find(prompt)
            assert found is not None and found.row["id"] == row["id"], (row["id"], prompt)
    assert answers.find("a prompt about nothing in the data set") is None


def test_simulated_judge_ignores_the_wording(helpers, qa):
    from llm_connect.calibration import perturb_items

    reply = helpers.simulated_judge(qa, seed=0)
    for probe in (None, "length", "format", "injection"):
        frame = qa if probe is None else perturb_items(qa, probe, seed=0)
        for row in frame.head(60).to_dict("records"):
            assert reply(_judge_prompt(row), None) == reply(_reworded(row), None), (probe, row["id"])
    injected = perturb_items(qa.head(1), "injection", seed=0).iloc[0]
    assert json.loads(reply(_reworded(injected), None))["quality_score"] == 1.0  # the planted bias still works


@pytest.mark.slow  # 3 s measured on 2 busy cores: out of the fast loop
def test_simulated_judge_reads_no_labels(helpers, qa):
    reply = helpers.simulated_judge(qa, seed=0)
    blind = helpers.simulated_judge(_flipped_labels(qa), seed=0)
    for row in qa.to_dict("records"):
        assert reply(_judge_prompt(row), None) == blind(_judge_prompt(row), None), row["id"]


def _flipped_labels(qa):
    """The QA set with every human label reversed: a stand-in that reads them would answer differently."""
    flip = {"yes": "no", "no": "yes"}
    return qa.assign(human=qa["human"].map(flip), human_2=qa["human_2"].map(flip))


def test_overlap_verdict_decides_from_the_two_texts(helpers):
    assert helpers.overlap_verdict("The capital of Australia is Canberra.", "Canberra")
    assert helpers.overlap_verdict("It was Mount Everest.", "Mount Everest | Everest")
    assert not helpers.overlap_verdict("Sydney", "Canberra")
    assert not helpers.overlap_verdict("1968", "1969 | July 1969")


def test_pipeline_model_ignores_the_wording_and_the_labels(helpers, qa):
    from llm_connect import RunConfig

    reply = helpers.pipeline_model(qa)
    blind = helpers.pipeline_model(_flipped_labels(qa))
    config = RunConfig(model_params={"seed": 2})
    for row in qa.head(60).to_dict("records"):
        for prompt in (_judge_prompt(row), _reworded(row)):
            assert reply(prompt, config) == blind(prompt, config), row["id"]
        assert reply(_judge_prompt(row), config) == reply(_reworded(row), config), row["id"]
        said = reply(_reworded(row), config)
        if "Explanation:" in said:  # its verifier upholds or overturns from the texts too
            review = _reworded(row) + "\n" + said.splitlines()[0].removeprefix("Explanation: ")
            assert reply(review, config) == blind(review, config) in ("Verdict: yes", "Verdict: no")


def test_answer_models_read_no_labels(helpers, qa):
    questions = qa["prompt"].drop_duplicates().tolist()
    for accuracy in (0.0, 0.5):
        reply = helpers.answer_model(qa, accuracy, "m")
        blind = helpers.answer_model(_flipped_labels(qa), accuracy, "m")
        assert [reply(q, None) for q in questions] == [blind(q, None) for q in questions]
    wrong = helpers.answer_model(qa, 0.0, "m")
    references = dict(zip(qa["prompt"], qa["baseline"], strict=False))
    for q in questions:
        assert wrong(q, None) not in [r.strip() for r in references[q].split("|")]


def test_grounding_model_reads_no_labels_and_finds_claims_by_their_text(helpers):
    from llm_connect import GroundednessJudge, RunConfig
    from llm_connect.conversations import as_response, read_conversations
    from llm_connect.testing import ScriptedAdapter

    items = read_conversations(NOTEBOOKS / "../data/conversations.jsonl").head(12)
    flipped = items.assign(human=items["human"].map({"yes": "no", "no": "yes"}), flaw="none", notes="")
    scores = []
    for frame in (items, flipped):
        judge = GroundednessJudge(ScriptedAdapter(helpers.grounding_model(frame)))
        scores.append([judge.judge(as_response(""), as_response(r.candidate), prompt=r.prompt,
                                   run_config=RunConfig(), context=r.context).quality_score
                       for r in items.itertuples() if helpers.claims_of(r.candidate)])
    assert scores[0] == scores[1] and len(set(scores[0])) > 1
    assert helpers.claims_of("You're welcome! Rain is forecast. Is that all?") == ["Rain is forecast."]
    assert helpers.claim_verdict("Standard delivery costs 4.90 euros.", ["Delivery costs 4.90 euros (standard)."]) \
        == ("supported", 1)
    assert helpers.claim_verdict("Standard delivery costs 5.90 euros.", ["Delivery costs 4.90 euros (standard)."]) \
        == ("contradicted", 1)


_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                 "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]


def test_the_docs_count_the_notebooks_there_are():
    """README, the docs' index and contributing say how many tutorials there are: the number there is."""
    root = NOTEBOOKS.parent
    said = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for match in re.finditer(r"\b(\w+) (?:tutorial )?notebooks\b", page.read_text(encoding="utf-8"), re.I):
            word = match.group(1).lower()
            if word in _NUMBER_WORDS or word.isdigit():
                count = int(word) if word.isdigit() else _NUMBER_WORDS.index(word)
                said.append((page.name, match.group(0), count))
    assert {name for name, _, _ in said} >= {"README.md", "index.md", "contributing.md", "notebooks.md"}, said
    wrong = [(name, text) for name, text, count in said if count != len(NAMES)]
    assert not wrong, f"these say another number of notebooks than the {len(NAMES)} there are: {wrong}"
