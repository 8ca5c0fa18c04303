"""A griffe extension for the API reference: the shared texts (run options, calibration's, judges') in the docstrings.

A function decorated with ``@share_parameters`` (``llm_connect/_docstrings.py``) holds placeholder lines
such as ``{concurrency}`` in the ``Parameters`` section of its source docstring; the decorator fills them
when the module is imported. griffe reads the source without importing it, so it would show the
placeholders: this extension fills them first, with the same function (``fill_shared``) and the same
texts, for the objects that carry the decorator (from the set its ``texts=`` names, if any). It runs before
``griffe_rst.py`` (``mkdocs.yml`` lists it first), so the shared texts' roles become cross-references too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from griffe import Extension, Object

from llm_connect._docstrings import SHARED_TEXTS, TEXT_SETS, fill_shared

DECORATOR = "share_parameters"
# ``share_parameters``, ``_docstrings.share_parameters`` or ``share_parameters(texts=JUDGE_TEXTS)``
_CALL = re.compile(rf"^(?:[\w.]+\.)?{DECORATOR}(?:\(\s*texts\s*=\s*(?:[\w.]+\.)?(?P<texts>\w+)\s*\))?$")


def _texts(obj: Object) -> Mapping[str, str] | None:
    """The texts the object's ``share_parameters`` decorator fills from; ``None`` when it has none."""
    for decorator in getattr(obj, "decorators", None) or []:
        match = _CALL.match(str(decorator.value))
        if match:
            name = match.group("texts")
            if name is None:
                return SHARED_TEXTS
            if name not in TEXT_SETS:
                raise ValueError(f"{obj.path}: share_parameters(texts={name}) names no set of texts; "
                                 f"known: {', '.join(TEXT_SETS)}")
            return TEXT_SETS[name]
    return None


class SharedParameters(Extension):
    """Fills the shared-text placeholders of the docstrings of decorated functions and classes."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None:
            return
        texts = _texts(obj)
        if texts is None:
            return
        # a function's parameters are checked here too; a class's by the decorator at import (griffe may not
        # know a generated __init__)
        names = {p.name for p in obj.parameters} if obj.is_function else None
        obj.docstring.value = fill_shared(obj.docstring.value, texts,
                                          None if names is None else names.__contains__)
