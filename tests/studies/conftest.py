"""The lab's tests: the only tests that import from studies/ (the product never does)."""

from __future__ import annotations

from tests.pipeline.conftest import workspace  # noqa: F401  (the tiny benchmark test_comparator_seeds runs on)
