"""Shared fixtures. Tests use real fakes from ``llm_connect.testing``, never mocks of our own code."""

from __future__ import annotations

import os
from datetime import UTC, datetime
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


def make_observation(**overrides):
    """A valid QualityObservation with fixed defaults; ``overrides`` replace fields."""
    from llm_connect import QualityObservation

    fields = {
        "task_type": "qa",
        "adapter_id": "openai:gpt-4o-mini",
        "model_id": "gpt-4o-mini",
        "cost_usd": 0.001,
        "quality_score": 0.75,
        "latency_ms": 120.0,
        "tokens_in": 100,
        "tokens_out": 20,
        "recorded_at": datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
    }
    fields.update(overrides)
    return QualityObservation(**fields)


@pytest.fixture
def make_obs():
    return make_observation
