"""Fixtures of the simulator tests: the tiny language model of the agent tests."""

from tests.agents.conftest import tiny_lm_dir  # noqa: F401
