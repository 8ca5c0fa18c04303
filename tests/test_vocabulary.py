"""One word, one meaning (issue 35): "batch" names the providers' Batch APIs and nothing else.

The runner that turns items into rows is ``llm_connect.runner`` (``RunPlan``, ``run_plan``), the item rules
``llm_connect.items``, the result columns ``llm_connect.columns``, ``judge_many``'s module ``grading/_judge_many.py``;
``batch=`` is the one keyword for the Batch APIs everywhere (no ``provider_batch=``). These tests walk the
package as it is, so a new module, public name, method or parameter that says "batch" for anything else fails.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import llm_connect

PKG = Path(llm_connect.__file__).resolve().parent

#: The modules of the providers' Batch APIs, the only ones whose names may say "batch".
BATCH_API_MODULES = {
    "llm_connect.adapters._batches",  # the Batch APIs' client: submit, poll, collect, resume
    "llm_connect.grading._batch_api",  # a run plan's batch= switch
    "llm_connect.testing._batch_api",  # the loopback server's fake Batch APIs
    "llm_connect.adapters._batch_driver",  # one provider's Batch API: the interface each provider module implements
    "llm_connect.adapters._batch_openai",  # OpenAI's Batch API
    "llm_connect.adapters._batch_anthropic",  # Anthropic's Message Batches API
    "llm_connect.adapters._batch_state",  # the state store of a run through the Batch APIs
}
#: Public names that say "batch": each is about the Batch APIs.
BATCH_API_NAMES = {"BatchOptions", "BatchRequestError", "BATCH_DISCOUNT"}
#: Parameters that say "batch": ``batch`` (the Batch APIs switch) and ``batch_id`` (a provider batch's id) are
#: ours; the others are the names third-party libraries give them, kept so their users recognise them.
BATCH_API_PARAMETERS = {"batch", "batch_id"}
THIRD_PARTY_PARAMETERS = {
    "batch_size",  # Ray Data's map_batches(batch_size=), sentence-transformers' encode(batch_size=)
    "n_threads_batch",  # llama.cpp's Llama(n_threads_batch=)
}


def _module_names() -> list[str]:
    """Every module of the package, private ones included."""
    names = ["llm_connect"]
    names += [info.name for info in pkgutil.walk_packages([str(PKG)], "llm_connect.")]
    return sorted(names)


def _public_modules() -> list[object]:
    """Every public module (no part of its name starts with an underscore), imported."""
    out = []
    for name in _module_names():
        if any(part.startswith("_") for part in name.split(".")[1:]):
            continue
        try:
            out.append(importlib.import_module(name))
        except ImportError as exc:  # an optional extra (ray, the local runtimes) or a __main__ shim
            if name.endswith("__main__"):
                continue
            pytest.fail(f"{name} does not import: {exc}")
    return out


def _public_callables() -> list[tuple[str, object, str]]:
    """``(label, callable, docs)`` for every public function and class of every public module's ``__all__``, each
    public method of those classes, and each class's constructor (whose parameters its class docs)."""
    seen: set[int] = set()
    out = []
    for module in _public_modules():
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if id(obj) in seen or not callable(obj):
                continue
            seen.add(id(obj))
            label = f"{module.__name__}.{attr}"
            if inspect.isclass(obj):
                class_doc = inspect.getdoc(obj) or ""
                out.append((f"{label}.__init__", obj.__init__, class_doc + (inspect.getdoc(obj.__init__) or "")))
                for name, member in vars(obj).items():
                    function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    if not name.startswith("_") and callable(function):
                        out.append((f"{label}.{name}", function, inspect.getdoc(function) or ""))
            else:
                out.append((label, obj, inspect.getdoc(obj) or ""))
    return out


def test_no_module_but_the_batch_apis_is_named_batch():
    named = {name for name in _module_names() if "batch" in name.rsplit(".", 1)[-1].lower()}
    assert named == BATCH_API_MODULES
    for name in sorted(BATCH_API_MODULES):  # each is what its name says: the providers' Batch APIs
        assert "Batch API" in (importlib.import_module(name).__doc__ or ""), name


def test_the_row_engine_is_the_runner_not_a_batch_module():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("llm_connect.batch")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("llm_connect.grading._batch")
    runner = importlib.import_module("llm_connect.runner")
    assert {"RunPlan", "run_plan", "arun_plan", "run_budget"} <= set(runner.__all__)
    assert not any("batch" in name.lower() for name in vars(runner) if not name.startswith("__"))


def test_public_names_say_batch_only_for_the_batch_apis():
    found = {
        attr
        for module in _public_modules()
        for attr in getattr(module, "__all__", ())
        if "batch" in attr.lower()
    }
    assert found <= BATCH_API_NAMES, sorted(found - BATCH_API_NAMES)


def test_public_methods_say_batch_only_for_the_batch_apis():
    """A judge prepares for a run with ``aprepare_run`` (not ``aprepare_batch``), and so on."""
    found = [label for label, _, _ in _public_callables() if "batch" in label.rsplit(".", 1)[-1].lower()]
    assert found == []


def test_no_public_callable_takes_provider_batch_and_every_batch_parameter_is_the_batch_apis():
    problems = []
    for label, function, docs in _public_callables():
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):  # a builtin without a signature
            continue
        for name in parameters:
            if "batch" not in name.lower() or name in THIRD_PARTY_PARAMETERS:
                continue
            if name not in BATCH_API_PARAMETERS:
                problems.append(f"{label}({name}=)")
            elif name == "batch" and "Batch API" not in docs:
                problems.append(f"{label}(batch=) does not say it is the providers' Batch APIs")
    assert problems == []
    from llm_connect.calibration._runner import _judge_items  # calibration's (private) run of one judge

    assert "batch" in inspect.signature(_judge_items).parameters  # the one keyword, as judge_many's
