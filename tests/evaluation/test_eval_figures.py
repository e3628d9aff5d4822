"""Learning-curve tables in the shapes the estimators write them."""

from __future__ import annotations

import pandas as pd
import pytest

from enigma.evaluation.figures import curve_long


def test_one_run_for_all_ratings():
    wide = pd.DataFrame({"estimator": "enigma", "agent_id": "a", "run": "all", "step": [1, 2],
                         "loss": [0.5, 0.4], "estimate_enjoy": [0.1, 0.2], "estimate_fluency": [0.3, 0.4]})
    long = curve_long(wide)
    assert sorted(long["rating"].unique()) == ["enjoy", "fluency"] and len(long) == 4
    assert "loss" not in set(long["rating"])  # only estimates are curves of a rating


def test_one_run_per_rating_keeps_each_runs_own_rating():
    rows = []
    for run in ("enjoy", "fluency"):
        for step in (1, 2):
            rows.append({"estimator": "enigma", "agent_id": "a", "run": run, "step": step,
                         "estimate_enjoy": 0.1 * step, "estimate_fluency": 0.2 * step})
    long = curve_long(pd.DataFrame(rows))
    assert len(long) == 4 and set(zip(long["rating"], long["step"])) == {("enjoy", 1), ("enjoy", 2), ("fluency", 1), ("fluency", 2)}


def test_long_and_plain_wide_forms():
    long_in = pd.DataFrame({"estimator": "e", "agent_id": "a", "step": [1], "rating": ["enjoy"], "estimate": [0.5]})
    assert curve_long(long_in).equals(long_in[["estimator", "agent_id", "step", "rating", "estimate"]])
    wide = pd.DataFrame({"estimator": "e", "agent_id": "a", "step": [1, 2], "enjoy": [0.1, 0.2]})
    assert curve_long(wide)["rating"].tolist() == ["enjoy", "enjoy"]
    with pytest.raises(ValueError, match="'step'"):
        curve_long(pd.DataFrame({"estimator": ["e"], "agent_id": ["a"], "enjoy": [0.1]}))
