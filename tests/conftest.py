"""Shared fixtures. Tests use real fakes from ``llm_connect.testing``, never mocks of our own code.

Fixtures only: builders and Hypothesis strategies live in ``strategies.py``
(``from strategies import ...``), never imported from here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing in the tests may reach a hub or the internet.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
NQ301 = SHARED / "data" / "nq301"


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.fixture
def make_obs():
    """:func:`strategies.make_observation`: a valid observation with fixed defaults; keywords replace fields."""
    from strategies import make_observation  # here, not at the top: llm_connect loads after the settings above

    return make_observation
