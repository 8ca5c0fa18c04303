"""The tests' marking hook for the notebooks too, when they are collected on their own
(``python -m pytest notebooks/ -m "not slow"``): every nbval cell is marked ``notebooks`` and ``slow``."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith("notebooks/") and not any(m.name == "notebooks" for m in item.iter_markers()):
            item.add_marker(pytest.mark.notebooks)
            item.add_marker(pytest.mark.slow)
