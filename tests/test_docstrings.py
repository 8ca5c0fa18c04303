"""The public names are documented in the ecosystem's convention (numpydoc), and the shared run-option texts reach
every reader.

- Every class and function of ``llm_connect.__all__`` has a numpydoc docstring whose sections are sound: each
  parameter documented (a class documents its constructor's), none documented that is not taken, a ``Returns``
  section where something is returned, only known sections and in numpydoc's order (:data:`CODES`). See Also and
  Examples are welcome where they help, not required.
- Every class and function in the ``__all__`` of every public module (``llm_connect.grading``,
  ``llm_connect.stats.agreement``, ...) has a docstring at all (GL08).
- The Examples of those docstrings run as doctests (``# doctest: +SKIP`` marks one that needs a model or a server).
- ``llm_connect._docstrings``: the shared run-option texts are spliced into a decorated function's docstring, as
  ``help()``, ``inspect.getdoc``, Jupyter's ``?`` and numpydoc read it at run time, and as the documentation site's
  griffe extension (``docs/hooks/griffe_shared.py``) reads it from the source; a placeholder that names no shared
  text, or a parameter the function does not take, is an error at import.
"""

from __future__ import annotations

import doctest
import functools
import importlib
import inspect
import pkgutil
import pydoc
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest
from numpydoc.docscrape import get_doc_object
from numpydoc.validate import validate

import llm_connect
from llm_connect._docstrings import (
    ADAPTER_TEXTS,
    CALIBRATION_TEXTS,
    JUDGE_TEXTS,
    PLOT_TEXTS,
    RUN_OPTIONS,
    SHARED_TEXTS,
    DocstringComponents,
    fill_shared,
    share_parameters,
)

REPO = Path(__file__).resolve().parents[1]

#: The numpydoc checks every public name passes (numpydoc.validate's codes).
CODES = {
    "GL08": "no docstring",
    "PR01": "a parameter is not documented",
    "PR02": "a documented parameter is not taken",
    "PR10": "'name: type' without the space before the colon (numpydoc reads it as a name)",
    "RT01": "something is returned and there is no Returns section",
    "GL06": "an unknown section",
    "GL07": "sections out of numpydoc's order",
}


def _documented(obj: Any) -> bool:
    """A class or function of the package (re-exports of other libraries' names and constants are not ours)."""
    return (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", "").startswith(
        "llm_connect")


def _has_returns_section(obj: Any) -> bool:
    """A ``Returns`` section, or ``Yields`` for a generator (a context manager's ``-> Iterator[...]``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = get_doc_object(obj)
        return bool(doc["Returns"]) or bool(doc["Yields"])


def numpydoc_problems(obj: Any, codes: set[str] | frozenset[str] = frozenset(CODES)) -> list[str]:
    """``"code message"`` for each of numpydoc's findings on ``obj``'s docstring whose code is in ``codes``.

    A class documents its constructor's parameters; a Protocol has no constructor of its own (numpydoc would see
    ``typing``'s ``*args, **kwargs``), so parameters are not checked on one. ``RT01`` is also found where the
    return annotation says something other than ``None`` is returned. A warning numpydoc gives while reading the
    docstring (an unknown section, a malformed one) is a finding too (``GL06``).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = validate(get_doc_object(obj))
    found = [(code, message) for code, message in result["errors"]]
    found += [("GL06", str(w.message)) for w in caught]
    if inspect.isclass(obj) and getattr(obj, "_is_protocol", False):
        found = [(c, m) for c, m in found if c not in ("PR01", "PR02")]
    if inspect.isfunction(obj) and "GL08" not in dict(found) and "RT01" not in dict(found):
        annotation = inspect.signature(obj).return_annotation
        if annotation not in (inspect.Signature.empty, None, "None") and not _has_returns_section(obj):
            found.append(("RT01", f"No Returns section found (the function is annotated -> {annotation})"))
    return [f"{code} {message}" for code, message in found if code in codes]


def _report(problems: dict[str, list[str]]) -> str:
    lines = [f"{name}: {problem}" for name, found in problems.items() for problem in found]
    return f"{len(problems)} names fail the numpydoc check ({', '.join(sorted(CODES))}):\n" + "\n".join(lines)


def _public_names() -> list[tuple[str, Any]]:
    return [(name, getattr(llm_connect, name)) for name in llm_connect.__all__
            if _documented(getattr(llm_connect, name))]


def public_modules() -> list[str]:
    """``llm_connect`` and each of its modules and packages with no private part in its name."""
    names = ["llm_connect"]
    for info in pkgutil.walk_packages(llm_connect.__path__, "llm_connect."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return names


@functools.cache
def _module_objects() -> dict[str, Any]:
    """``{"module.name": object}`` for each class and function in a public module's ``__all__``, once each."""
    objects: dict[str, Any] = {}
    seen: set[int] = set()
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if _documented(obj) and id(obj) not in seen:
                seen.add(id(obj))
                objects[f"{module_name}.{name}"] = obj
    return objects


# -- the check itself can fail --------------------------------------------------------------------------------------


def _undocumented_parameter(items: list[str], *, concurrency: int = 16) -> int:
    """Count the items.

    Parameters
    ----------
    items : list of str
        The items.

    Returns
    -------
    int
        How many.
    """
    return len(items)


def _unknown_parameter_and_no_returns(items: list[str]) -> int:
    """Count the items.

    Parameters
    ----------
    items : list of str
        The items.
    concurrency : int
        Not taken.
    """
    return len(items)


def _misordered(items: list[str]) -> None:
    """Do nothing.

    Returns
    -------
    None
        Nothing.

    Parameters
    ----------
    items: list of str
        The items.
    """


def _no_docstring(x: int) -> int:
    return x


class _ClassWithoutInitDocs:
    """A class that does not document its constructor."""

    def __init__(self, path: str) -> None:
        self.path = path


def test_the_check_finds_each_kind_of_problem():
    assert [p[:4] for p in numpydoc_problems(_undocumented_parameter)] == ["PR01"]
    assert "concurrency" in numpydoc_problems(_undocumented_parameter)[0]
    assert sorted(p[:4] for p in numpydoc_problems(_unknown_parameter_and_no_returns)) == ["PR02", "RT01"]
    assert {p[:4] for p in numpydoc_problems(_misordered)} >= {"GL07", "PR10"}
    assert [p[:4] for p in numpydoc_problems(_ClassWithoutInitDocs)] == ["PR01"]
    assert [p[:4] for p in numpydoc_problems(_no_docstring)] == ["GL08"]


def test_a_protocol_is_not_asked_for_constructor_parameters():
    from llm_connect.core import LLMAdapter

    assert numpydoc_problems(LLMAdapter) == []


def test_the_check_covers_every_public_name_and_module():
    names = dict(_public_names())
    assert {"judge_many", "calibrate", "QualityLedger", "RunConfig", "ValidationError"} <= set(names)
    modules = public_modules()
    assert {"llm_connect.grading", "llm_connect.stats", "llm_connect.cards", "llm_connect.labelling",
            "llm_connect.calibration", "llm_connect.alignment", "llm_connect.views", "llm_connect.quality",
            "llm_connect.adapters", "llm_connect.testing", "llm_connect.errors"} <= set(modules)
    assert not [m for m in modules if any(part.startswith("_") for part in m.split(".")[1:])]
    assert len(_module_objects()) >= len(names)


# -- the public names ------------------------------------------------------------------------------------------------


def _cases(pairs: list[tuple[str, Any]]) -> list[Any]:
    """One test case per name, named after it. Every name passes strictly: there is no list of names excused."""
    return [pytest.param(name, obj, id=name) for name, obj in pairs]


def _public_methods(cls: type) -> list[tuple[str, Any]]:
    """The public methods a class defines itself (what ``obj.method?`` shows). A method without a docstring of its
    own that overrides a documented one shows the base's (``inspect.getdoc``), so it is not asked for one."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if not inspect.isfunction(func):
            continue
        if func.__doc__ is None and inspect.getdoc(getattr(cls, name)):
            continue
        out.append((name, func))
    return out


@pytest.mark.parametrize(("name", "obj"), _cases(_public_names()))
def test_every_public_name_has_numpydoc_sections(name, obj):
    problems = numpydoc_problems(obj)
    assert not problems, _report({name: problems})


def test_every_name_of_every_public_module_has_a_docstring():
    problems = {name: found for name, obj in _module_objects().items() if (found := numpydoc_problems(obj, {"GL08"}))}
    assert not problems, _report(problems)


@pytest.mark.parametrize(("name", "obj"), _cases(list(_module_objects().items())))
def test_every_name_of_every_public_module_has_numpydoc_sections(name, obj):
    """Not only ``llm_connect.__all__``: every class and function a public module exports (``llm_connect.grading``,
    ``llm_connect.stats.selective``, ...) has sound sections."""
    problems = numpydoc_problems(obj)
    assert not problems, _report({name: problems})


def _classes() -> list[tuple[str, Any]]:
    seen: dict[int, tuple[str, Any]] = {}
    for name, obj in [*(("llm_connect." + n, o) for n, o in _public_names()), *_module_objects().items()]:
        if inspect.isclass(obj):
            seen.setdefault(id(obj), (name, obj))
    return list(seen.values())


@pytest.mark.parametrize(("name", "cls"), _cases(_classes()))
def test_the_public_methods_of_every_public_class_have_numpydoc_sections(name, cls):
    """What a user calls on a judge, a ledger, a pipeline or a report (``judge.judge_many?``) reads like pandas."""
    problems = {f"{name}.{m}": found for m, func in _public_methods(cls) if (found := numpydoc_problems(func))}
    assert not problems, _report(problems)


def test_a_method_that_overrides_a_documented_one_shows_its_text():
    from llm_connect.grading import ExactMatchJudge

    assert "ExactMatchJudge.judge" not in dict(_public_methods(ExactMatchJudge))  # no text of its own
    assert "Judge ``candidate`` against ``baseline``" in inspect.getdoc(ExactMatchJudge.judge)
    assert "matches" in dict(_public_methods(ExactMatchJudge))


def test_the_report_and_the_alignment_floor_are_checked_strictly():
    """The last names of issue #35 (the calibration report's methods, the alignment floor) are among the strict cases:
    no test case of this module is an expected failure."""
    from llm_connect.alignment import Alignment, align
    from llm_connect.calibration import CalibrationReport

    methods = dict(_public_methods(CalibrationReport))
    assert {"threshold_of", "pair", "sweep", "estimates", "disagreements", "to_csv", "summary", "widget"} <= {*methods}
    assert not [n for n, f in methods.items() if numpydoc_problems(f)]
    assert {id(align), id(Alignment)} <= {id(o) for o in _module_objects().values()}
    assert "llm_connect.alignment._alignment" in _documented_modules()
    cases = [*_cases(_public_names()), *_cases(list(_module_objects().items())), *_cases(_classes())]
    assert [c.id for c in cases if c.marks] == []


def _defined_in(module_name: str) -> list[tuple[str, Any]]:
    """The public classes and functions defined in a module (its methods are reached from them)."""
    module = importlib.import_module(module_name)
    return [(f"{module_name}.{name}", obj) for name, obj in vars(module).items()
            if not name.startswith("_") and _documented(obj) and obj.__module__ == module_name]


def _documented_modules() -> list[str]:
    """The modules that define a public name (of ``llm_connect.__all__`` or of a public module's ``__all__``):
    where their Examples live."""
    names = {obj.__module__ for _, obj in [*_public_names(), *_module_objects().items()]}
    return sorted(names)


def _run_examples(module: str) -> tuple[int, int, str]:
    """``(examples run, failures, report)`` of the doctests of the names defined in ``module``."""
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    globs = {**vars(importlib.import_module(module)), "llm_connect": llm_connect}
    out: list[str] = []
    ran = 0
    for name, obj in _defined_in(module):
        for test in finder.find(obj, name, globs=dict(globs)):
            if test.examples:
                ran += 1
                runner.run(test, out=out.append)
    return ran, runner.failures, "".join(out)


@pytest.mark.parametrize("module", _documented_modules())
def test_the_examples_run(module):
    """Every Examples section runs as a doctest (``# doctest: +SKIP`` marks one that needs a model or a key)."""
    _, failures, report = _run_examples(module)
    assert failures == 0, report


#: Modules whose every public name shows its use: Examples are not required, but these keep theirs.
WITH_EXAMPLES = ("llm_connect.core", "llm_connect.errors", "llm_connect.frames", "llm_connect.quality._observation",
                 "llm_connect.grading._judge_many", "llm_connect.grading._paired", "llm_connect.grading._tournament",
                 "llm_connect.items", "llm_connect.routing", "llm_connect.quality._ledger",
                 "llm_connect.pipelines._pipeline", "llm_connect.stats.selective", "llm_connect.testing._doubles")


@pytest.mark.parametrize("module", WITH_EXAMPLES)
def test_the_main_entry_points_show_their_use(module):
    ran, _, _ = _run_examples(module)
    assert ran, f"{module}: no examples at all"


# -- the shared run-option texts -------------------------------------------------------------------------------------


@share_parameters
def _shared(items: list[str], *, concurrency: int = 16, budget: float | None = None) -> int:
    """Count the items, {literally} in braces.

    Parameters
    ----------
    items : list of str
        The items.
    {concurrency}
    {budget}

    Returns
    -------
    int
        How many.
    """
    return len(items)


def test_shared_texts_are_spliced_into_the_docstring():
    doc = inspect.getdoc(_shared)
    assert "{concurrency}" not in doc and "{budget}" not in doc
    assert RUN_OPTIONS["concurrency"] in doc  # each line at the docstring's own indentation
    assert RUN_OPTIONS["budget"] in doc
    assert "{literally}" in doc  # other braces are left alone
    assert doc.index("items : list of str") < doc.index("concurrency : int") < doc.index("budget : ") < doc.index(
        "Returns")


def test_a_spliced_docstring_passes_numpydoc():
    assert numpydoc_problems(_shared) == []
    parameters = [p.name for p in get_doc_object(_shared)["Parameters"]]
    assert parameters == ["items", "concurrency", "budget"]


def test_help_and_jupyter_question_mark_show_the_shared_text():
    text = pydoc.render_doc(_shared, renderer=pydoc.plaintext)
    assert "How many items are judged at once" in text and "One budget for the whole run" in text
    oinspect = pytest.importorskip("IPython.core.oinspect")
    assert "How many items are judged at once" in oinspect.getdoc(_shared)  # what `_shared?` shows


def test_a_placeholder_with_no_shared_text_is_an_error():
    def f(items, *, concurrency=16):
        """Count.

        Parameters
        ----------
        {concurency}
        """

    with pytest.raises(ValueError, match=r"\{concurency\} names no shared text"):
        share_parameters(f)


def test_a_placeholder_for_a_parameter_not_taken_is_an_error():
    def f(items):
        """Count.

        Parameters
        ----------
        {epochs}
        """

    with pytest.raises(ValueError, match=r"f: the docstring placeholder \{epochs\} documents a parameter"):
        share_parameters(f)


def test_a_class_takes_the_shared_text_of_its_constructor():
    @share_parameters
    class Runner:
        """Runs.

        Parameters
        ----------
        {progress}
        """

        def __init__(self, *, progress: bool = True) -> None:
            self.progress = progress

    assert RUN_OPTIONS["progress"] in inspect.getdoc(Runner)


def test_no_docstring_is_left_alone():
    def f(x):
        return x

    assert share_parameters(f) is f and f.__doc__ is None


def test_every_shared_text_is_a_numpydoc_parameter_entry():
    assert set(RUN_OPTIONS) == {"concurrency", "progress", "run_config", "ledger", "task_type", "budget", "batch",
                                "epochs", "reducer"}
    for name, text in RUN_OPTIONS.items():
        head, _, body = text.partition("\n")
        assert head.startswith(f"{name} : "), head
        assert body and all(line.startswith("    ") for line in body.split("\n") if line), name
        assert "provider_batch" not in text
    assert RUN_OPTIONS.budget == RUN_OPTIONS["budget"]
    with pytest.raises(ValueError, match="must start with 'x : <type>'"):
        DocstringComponents({"x": "y : int\n    Wrong name."})


def test_the_calibration_texts_are_numpydoc_entries_spliced_like_the_run_options():
    """The calibration floor's shared texts (a scores frame, the judge read from it, the intervals' settings) are
    parameter entries, named apart from the run options, and a decorated function or class takes them by placeholder."""
    assert not set(CALIBRATION_TEXTS) & set(RUN_OPTIONS)
    assert SHARED_TEXTS == {**RUN_OPTIONS, **CALIBRATION_TEXTS}
    for name, text in CALIBRATION_TEXTS.items():
        head, _, body = text.partition("\n")
        assert head.startswith(f"{name} : "), head
        assert body and all(line.startswith("    ") for line in body.split("\n") if line), name

    @share_parameters
    def diagnose(scores, judge, *, confidence=0.95, concurrency=16):
        """Diagnose.

        Parameters
        ----------
        {scores}
        {judge}
        {confidence}
        {concurrency}
        """

    assert numpydoc_problems(diagnose) == []
    doc = inspect.getdoc(diagnose)
    assert CALIBRATION_TEXTS["judge"] in doc and RUN_OPTIONS["concurrency"] in doc
    from llm_connect.calibration import PairAgreement, length_effect

    assert CALIBRATION_TEXTS["scores"] in inspect.getdoc(length_effect)
    assert CALIBRATION_TEXTS["n_clusters"] in inspect.getdoc(PairAgreement)


def test_a_method_takes_the_judges_texts_named_by_texts():
    """A judge's ``prompt`` and ``run_config`` mean one call, not a run: a method takes them from the set that
    ``texts=`` names, while a bare decorator still fills from the run options."""

    class Echo:
        @share_parameters(texts=JUDGE_TEXTS)
        def judge(self, baseline, candidate, *, prompt, run_config):
            """Judge, in a docstring with no other section.

            Parameters
            ----------
            {run_config}
            {prompt}
            {candidate}
            {baseline}
            """

        @share_parameters
        def judge_many(self, items, *, run_config=None):
            """Judge many.

            Parameters
            ----------
            items : list
                The items.
            {run_config}

            Returns
            -------
            list
                The scores.
            """
            return [1.0 for _ in items]

    judge_doc, many_doc = inspect.getdoc(Echo.judge), inspect.getdoc(Echo.judge_many)
    assert all(JUDGE_TEXTS[name] in judge_doc for name in ("baseline", "candidate", "prompt", "run_config"))
    assert RUN_OPTIONS["run_config"] in many_doc and JUDGE_TEXTS["run_config"] not in many_doc
    assert numpydoc_problems(Echo.judge) == []
    assert Echo().judge("a", "b", prompt="q", run_config=None) is None

    def call(prompt, ledger):
        """Call.

        Parameters
        ----------
        {prompt}
        {ledger}
        """

    with pytest.raises(ValueError, match=r"call: the docstring placeholder \{ledger\} names no shared text"):
        share_parameters(texts=ADAPTER_TEXTS)(call)  # a run option is not in the adapters' set
    from llm_connect.adapters import LlamaCppAdapter
    from llm_connect.grading import ExactMatchJudge

    assert ADAPTER_TEXTS["prompt"] in inspect.getdoc(LlamaCppAdapter.acomplete)
    assert JUDGE_TEXTS["candidate"] in inspect.getdoc(ExactMatchJudge.ajudge)


def test_an_entry_of_one_set_is_reused_as_it_is_by_another():
    """The plots read a judge and a label from a scores frame as the calibration floor does: their set reuses the
    calibration entries, already cleaned, and a plot shows them with their description indented under the name."""
    assert PLOT_TEXTS["judge"] == CALIBRATION_TEXTS["judge"] and PLOT_TEXTS["label"] == CALIBRATION_TEXTS["label"]
    assert DocstringComponents({"seed": CALIBRATION_TEXTS["seed"]})["seed"] == CALIBRATION_TEXTS["seed"]
    pytest.importorskip("matplotlib")
    from llm_connect.views import plot_reliability

    doc = inspect.getdoc(plot_reliability)
    assert CALIBRATION_TEXTS["judge"] in doc and PLOT_TEXTS["ax"] in doc
    assert numpydoc_problems(plot_reliability) == []


#: Run options an entry point documents in its own words, because they mean something narrower there.
OWN_TEXT = {
    ("grade_dataset", "concurrency"): "judgments each Ray actor keeps in flight",
    # the row engine under the entry points: it takes what they made of the options
    **{(f, o): "the runner's own: a tracker, a bar" for f in ("run_rows", "arun_rows")
       for o in ("concurrency", "progress", "budget")},
    ("align", "budget"): "a spent budget stops align() with BudgetExceededError, where a run leaves rows unjudged",
}


def _entry_points() -> dict[str, Any]:
    """Every public function and method that takes three or more run options."""
    found: dict[str, Any] = {}
    for name, obj in [*(("llm_connect." + n, o) for n, o in _public_names()), *_module_objects().items()]:
        members = [(name, obj)] if inspect.isfunction(obj) else [(f"{name}.{m}", f) for m, f in _public_methods(obj)]
        for _label, func in members:
            taken = set(inspect.signature(func).parameters) & set(RUN_OPTIONS)
            if len(taken) >= 3:
                found.setdefault(f"{func.__module__}.{func.__qualname__}", func)
    return found


def test_every_entry_point_that_takes_run_options_shows_their_shared_text():
    """The text a user reads for ``concurrency``, ``ledger``, ``budget``... is the same in every entry point (the
    placeholders of :func:`share_parameters`), except where :data:`OWN_TEXT` says why it is narrower."""
    entries = _entry_points()
    assert {"llm_connect.grading._judge_many.judge_many", "llm_connect.grading._judge_many.ajudge_many",
            "llm_connect.grading._paired.grade_many", "llm_connect.grading._tournament.tournament",
            "llm_connect.pipelines._pipeline.Pipeline.run_many", "llm_connect.grading._wrapper.WrapperJudge.judge_many",
            "llm_connect.distributed._grade.grade_dataset", "llm_connect.grading._selective.SelectiveJudge.calibrate",
            } <= set(entries)
    missing = [f"{where}: {option}" for where, func in entries.items()
               for option in sorted(set(inspect.signature(func).parameters) & set(RUN_OPTIONS))
               if (func.__name__, option) not in OWN_TEXT and RUN_OPTIONS[option] not in inspect.getdoc(func)]
    assert not missing, "entry points that do not show the shared text of a run option:\n" + "\n".join(missing)


def test_fill_shared_reads_a_cleaned_docstring_as_griffe_holds_it():
    cleaned = "Count.\n\nParameters\n----------\n{epochs}\n{reducer}\n"
    filled = fill_shared(cleaned)
    assert filled.startswith(f"Count.\n\nParameters\n----------\n{RUN_OPTIONS['epochs']}\n{RUN_OPTIONS['reducer']}")


def test_the_site_extension_fills_the_placeholders_from_the_source(tmp_path):
    """What mkdocstrings renders: griffe reads the module's source (it does not import it), the extension fills."""
    griffe = pytest.importorskip("griffe")
    package = tmp_path / "shared_demo"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent('''
        from llm_connect._docstrings import JUDGE_TEXTS, share_parameters


        @share_parameters
        def run(items, *, concurrency=16, batch=False):
            """Run.

            Parameters
            ----------
            items : list
                The items.
            {concurrency}
            {batch}

            See Also
            --------
            plain : Not decorated.
            llm_connect.judge_many
            """


        class Echo:
            @share_parameters(texts=JUDGE_TEXTS)
            def judge(self, baseline, candidate, *, prompt, run_config):
                """Judge.

                Parameters
                ----------
                {prompt}
                {run_config}
                {baseline}
                {candidate}
                """


        def plain(items):
            """Not decorated: {concurrency} stays as written.

            Parameters
            ----------
            items : list
                The items.
            """
        '''), encoding="utf-8")
    hooks = REPO / "docs" / "hooks"
    extensions = griffe.load_extensions(f"{hooks / 'griffe_shared.py'}:SharedParameters",
                                        f"{hooks / 'griffe_rst.py'}:RstToMarkdown")
    module = griffe.load("shared_demo", search_paths=[str(tmp_path)], extensions=extensions,
                         docstring_parser="numpy")
    run = module["run"]
    sections = run.docstring.parse("numpy")
    parameters = next(s for s in sections if s.kind.value == "parameters").value
    assert [p.name for p in parameters] == ["items", "concurrency", "batch"]
    assert parameters[1].description == RUN_OPTIONS["concurrency"].split("\n", 1)[1].replace("\n    ", "\n").strip()
    assert "{concurrency}" in module["plain"].docstring.value
    judge_doc = module["Echo"]["judge"].docstring.value
    assert JUDGE_TEXTS["run_config"] in judge_doc and RUN_OPTIONS["run_config"] not in judge_doc
    see_also = next(s for s in sections if s.kind.value == "admonition" and s.title == "See Also").value.contents
    assert see_also.splitlines() == [
        '- <code><autoref identifier="shared_demo.plain" optional hover>plain</autoref></code>: Not decorated.',
        '- <code><autoref identifier="llm_connect.judge_many" optional hover>llm_connect.judge_many</autoref></code>',
    ]
    sys.modules.pop("shared_demo", None)
