"""A griffe extension for the API reference: the shared texts (run options, calibration's) in the docstrings.

A function decorated with ``@share_parameters`` (``llm_connect/_docstrings.py``) holds placeholder lines
such as ``{concurrency}`` in the ``Parameters`` section of its source docstring; the decorator fills them
when the module is imported. griffe reads the source without importing it, so it would show the
placeholders: this extension fills them first, with the same function (``fill_shared``) and the same
texts, for the objects that carry the decorator. It runs before ``griffe_rst.py`` (``mkdocs.yml`` lists
it first), so the shared texts' roles become cross-references too.
"""

from __future__ import annotations

from typing import Any

from griffe import Extension, Object

from llm_connect._docstrings import SHARED_TEXTS, fill_shared

DECORATOR = "share_parameters"


def _decorated(obj: Object) -> bool:
    decorators = getattr(obj, "decorators", None) or []
    return any(str(d.value).rsplit(".", 1)[-1] == DECORATOR for d in decorators)


class SharedParameters(Extension):
    """Fills the shared-text placeholders of the docstrings of decorated functions and classes."""

    def on_object(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None or not _decorated(obj):
            return
        # a function's parameters are checked here too; a class's by the decorator at import (griffe may not
        # know a generated __init__)
        names = {p.name for p in obj.parameters} if obj.is_function else None
        obj.docstring.value = fill_shared(obj.docstring.value, SHARED_TEXTS,
                                          None if names is None else names.__contains__)
