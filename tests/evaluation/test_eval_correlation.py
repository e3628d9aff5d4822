"""Correlations, bootstrap intervals and spread ratios on known values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from enigma.evaluation import correlation as C


def test_perfectly_monotone_linear_and_nonlinear():
    x = np.arange(1.0, 11.0)
    assert C.correlations(x, 2 * x + 1) == pytest.approx({"pearson": 1.0, "spearman": 1.0, "kendall": 1.0})
    got = C.correlations(x, x**5)
    assert got["spearman"] == pytest.approx(1.0) and got["kendall"] == pytest.approx(1.0)
    assert 0.8 < got["pearson"] < 0.99  # monotone but not linear


def test_anti_correlated():
    x = np.arange(8.0)
    assert C.correlations(x, -3 * x) == pytest.approx({"pearson": -1.0, "spearman": -1.0, "kendall": -1.0})


def test_ties_follow_scipy_tau_b():
    x = [1, 2, 2, 3, 3, 3, 4]
    y = [1, 1, 2, 2, 3, 3, 3]
    got = C.correlations(x, y)
    assert got["kendall"] == pytest.approx(stats.kendalltau(x, y)[0])
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert got["kendall"] < 1.0


def test_constant_or_too_short_is_undefined():
    assert all(math.isnan(v) for v in C.correlations([1, 2, 3], [5, 5, 5]).values())
    assert all(math.isnan(v) for v in C.correlations([1, 2], [1, 2]).values())
    with pytest.raises(ValueError, match="equal length"):
        C.correlations([1, 2, 3], [1, 2])


def test_vectorised_bootstrap_matches_scipy_per_resample():
    rng = np.random.default_rng(3)
    x = np.round(rng.normal(size=12), 1)  # rounded: ties inside x and y
    y = np.round(x + rng.normal(scale=0.7, size=12), 1)
    idx = C.bootstrap_indices(len(x), 40, seed=1)
    draws = C.bootstrap_stats(x, y, idx)
    for b in range(40):
        xs, ys = x[idx[b]], y[idx[b]]
        if np.ptp(xs) == 0 or np.ptp(ys) == 0:
            assert np.isnan(draws["pearson"][b])
            continue
        assert draws["pearson"][b] == pytest.approx(stats.pearsonr(xs, ys)[0], abs=1e-9)
        assert draws["spearman"][b] == pytest.approx(stats.spearmanr(xs, ys)[0], abs=1e-9)
        assert draws["kendall"][b] == pytest.approx(stats.kendalltau(xs, ys)[0], abs=1e-9)


def _frames(est: np.ndarray, truth: np.ndarray, rating: str = "r"):
    agents = [f"a{i:02d}" for i in range(len(truth))]
    return (
        pd.DataFrame({rating: est}, index=pd.Index(agents, name="agent_id")),
        pd.DataFrame({rating: truth}, index=pd.Index(agents, name="agent_id")),
    )


def test_interval_contains_point_and_is_seeded():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0.3, 0.8, size=20)
    est, tw = _frames(truth + rng.normal(scale=0.05, size=20), truth)
    a = C.score_estimator("e", est, tw, ["r"], resamples=300, seed=7)
    b = C.score_estimator("e", est, tw, ["r"], resamples=300, seed=7)
    c = C.score_estimator("e", est, tw, ["r"], resamples=300, seed=8)
    for s in C.STATS:
        lo, hi = a.per_rating["r"][f"{s}_ci95"]
        assert lo <= a.per_rating["r"][s] <= hi
        assert lo < hi
    assert a.per_rating == b.per_rating
    assert a.per_rating["r"]["pearson_ci95"] != c.per_rating["r"]["pearson_ci95"]


def test_leave_one_out_mean_collapse_is_flagged():
    truth = np.linspace(0.2, 0.9, 10)
    loo = np.array([(truth.sum() - t) / (len(truth) - 1) for t in truth])
    est, tw = _frames(loo, truth)
    score = C.score_estimator("loo-mean", est, tw, ["r"], resamples=100, collapse_spread_ratio=0.2)
    assert score.per_rating["r"]["pearson"] == pytest.approx(-1.0)
    assert score.per_rating["r"]["spread_ratio"] == pytest.approx(1 / 9)
    assert any("collapse" in f for f in score.flags)
    good = C.score_estimator("good", *_frames(truth * 0.9, truth), ["r"], resamples=100, collapse_spread_ratio=0.2)
    assert good.flags == [] and good.per_rating["r"]["spread_ratio"] == pytest.approx(0.9)


def test_missing_agents_are_left_out_and_named():
    truth = np.linspace(0, 1, 6)
    est, tw = _frames(truth.copy(), truth)
    est.loc["a03", "r"] = np.nan
    score = C.score_estimator("e", est, tw, ["r"], resamples=50)
    assert score.missing_agents == ["a03"] and len(score.agents) == 5
    assert any("a03" in f for f in score.flags)


def test_paired_difference_favours_the_better_estimator():
    rng = np.random.default_rng(1)
    truth = rng.uniform(size=15)
    good = C.score_estimator("g", *_frames(truth + rng.normal(scale=0.02, size=15), truth), ["r"], resamples=200)
    bad = C.score_estimator("b", *_frames(truth + rng.normal(scale=0.5, size=15), truth), ["r"], resamples=200)
    d = C.paired_difference(good, bad, "pearson", 0.95)
    assert d["difference"] == pytest.approx(good.means["pearson"] - bad.means["pearson"])
    assert d["ci95"][0] <= d["difference"] <= d["ci95"][1]
    assert d["share_of_resamples_a_better"] > 0.9
