"""The report's figures: learning-curve tables in the shapes the estimators write them, and the overview."""

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


def test_the_overview_draws_an_estimate_outside_its_interval_as_a_palette_png(tmp_path):
    """A percentile interval need not contain the estimate (a tiny benchmark's report crashed on
    it: errorbar lengths may not be negative); the figure is a 256-colour palette PNG, the size
    the committed reports' budget is made for."""
    from PIL import Image

    from enigma.evaluation.figures import overview_figure

    summary = {"benchmark": "b", "n_agents": 3, "estimators": {
        "outside": {"mean_pearson": 0.5, "mean_pearson_ci95": [0.6, 0.9], "mean_spearman": -0.2,
                    "mean_spearman_ci95": [-0.1, 0.4]},
        "no-interval": {"mean_pearson": None, "mean_pearson_ci95": [None, None]}}}
    path = overview_figure(summary, ["outside", "no-interval"], tmp_path / "overview.png")
    with Image.open(path) as im:
        assert im.mode == "P" and im.size[0] > 100
