"""Fixtures of the evaluation tests."""

from __future__ import annotations

import pytest

from enigma.store.experience import ExperienceStore
from tests.evaluation.eval_fixtures import make_store


@pytest.fixture
def store() -> ExperienceStore:
    return make_store()
