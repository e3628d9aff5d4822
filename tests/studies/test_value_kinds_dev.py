"""studies/value_kinds_dev.py: each value kind's estimates come from the rows' own diagnostics,
for the dev agents only, and a dev agent without a result stops the study."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from studies.value_kinds_dev import dev_values


def _row(agent: str, rating: str, dr: float, q: float, weighted: float, error=None) -> dict:
    values = {rating: {"dr": dr, "q": q, "weighted": weighted}}
    return {"estimator": "enigma", "agent_id": agent, "rating": rating, "estimate": dr, "error": error,
            "diagnostics": json.dumps({"all": {"values": values}})}


def test_each_kind_is_read_from_the_diagnostics_of_the_dev_agents_only():
    results = pd.DataFrame([_row("a", "r", 0.1, 0.2, 0.3), _row("b", "r", 0.4, 0.5, 0.6), _row("test-agent", "r", 9, 9, 9),
                            {**_row("a", "r", 7, 7, 7), "estimator": "fqe-critic"}])
    v = dev_values(results, ["b", "a"])
    assert list(v["dr"].index) == ["b", "a"]
    assert v["dr"].loc["a", "r"] == 0.1 and v["q"].loc["a", "r"] == 0.2 and v["weighted"].loc["b", "r"] == 0.6
    assert "test-agent" not in v["q"].index


def test_a_dev_agent_without_a_result_stops_the_study():
    results = pd.DataFrame([_row("a", "r", 0.1, 0.2, 0.3), _row("b", "r", 0, 0, 0, error="ValueError: x")])
    with pytest.raises(SystemExit, match="'b'"):
        dev_values(results, ["a", "b"])
