"""Fixtures for the store tests: a config with declared scales and a small valid input."""

from __future__ import annotations

import pytest
from store_fixtures import dialogue

from enigma.store.config import IngestConfig, RatingScale, SourceSpec


@pytest.fixture
def config() -> IngestConfig:
    spec = SourceSpec(ratings={"overall": RatingScale(min=1, max=5), "fun": RatingScale(min=0, max=1)})
    return IngestConfig(max_text_chars=1000, min_dialogues_per_agent=2, sources={"jsonl": spec})


@pytest.fixture
def good_records() -> list[dict]:
    return [dialogue(f"d{i}", "bot-a" if i % 2 else "bot-b", ratings={"overall": 1 + i % 5, "fun": i % 2}) for i in range(6)]
