"""Per-agent intervals in the report: the conformal rule, and coverage measured against truth."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.intervals import conformal_halfwidth, conformal_intervals
from enigma.evaluation.summary import build_summary
from enigma.evaluation.truth import check_truth


def test_the_conformal_halfwidth_is_the_ceil_n_plus_1_level_th_smallest_residual():
    residuals = [0.5, -0.1, 0.3, 0.2, -0.4]  # sorted |r|: 0.1 0.2 0.3 0.4 0.5
    assert conformal_halfwidth(residuals, 0.5) == pytest.approx(0.3)  # ceil(6 * 0.5) = 3rd
    assert conformal_halfwidth(residuals, 0.8) == pytest.approx(0.5)  # ceil(4.8) = 5th
    assert math.isinf(conformal_halfwidth(residuals, 0.9))  # ceil(5.4) = 6th of 5: unbounded
    assert conformal_halfwidth(list(range(26)), 0.95) == 25  # 27 agents at 95%: the largest other residual


def test_an_agent_never_calibrates_its_own_interval():
    est = pd.Series({"a": 0.0, "b": 0.0, "c": 0.0, "d": 5.0})
    truth = pd.Series({"a": 0.1, "b": -0.1, "c": 0.2, "d": 0.0})
    iv = conformal_intervals(est, truth, 0.5)  # each from the 3 others: ceil(4 * 0.5) = 2nd smallest
    assert iv.loc["d"].tolist() == pytest.approx([4.9, 5.1])  # others: 0.1, 0.1, 0.2; d's own 5 is not used
    assert iv.loc["a"].tolist() == pytest.approx([-0.2, 0.2])  # others: 0.1, 0.2, 5


def _tables(n_agents: int, seed: int, sampling_sd: float | None, bias_sd: float = 0.05):
    """Estimates = truth + an agent-level error; a sampling interval of +-1.96 sampling_sd."""
    rng = np.random.default_rng(seed)
    truth = 0.2 + 0.6 * rng.random(n_agents)
    est = truth + rng.normal(0, bias_sd, n_agents)
    res = pd.DataFrame({"estimator": "enigma", "agent_id": [f"a{i}" for i in range(n_agents)], "rating": "reward", "estimate": est})
    if sampling_sd is not None:
        res["interval_low"], res["interval_high"] = est - 1.96 * sampling_sd, est + 1.96 * sampling_sd
    tr = check_truth(pd.DataFrame({"agent_id": res.agent_id, "rating": "reward", "value": truth}))
    return res, tr


def test_report_coverage_is_honest_for_conformal_and_exposes_a_too_narrow_sampling_interval():
    cfg = ReportConfig(bootstrap_resamples=50, plots=False)
    covered, sampled = [], []
    for seed in range(10):
        res, tr = _tables(40, seed, sampling_sd=0.01)  # the errors are 5x the sampling interval's scale
        e = build_summary(res, tr, "toy", cfg)[0]["estimators"]["enigma"]["reward"]
        covered.append(e["interval_coverage"]["conformal"])
        sampled.append(e["interval_coverage"]["sampling"])
        assert e["interval_mean_width"]["sampling"] == pytest.approx(2 * 1.96 * 0.01)
    assert 0.9 <= np.mean(covered) <= 1.0  # exchangeable residuals: at least 95% on average (400 agents)
    assert np.mean(sampled) < 0.5  # blind to the bias: the report shows it missing


def test_the_summary_lists_each_agents_intervals_for_enigma_only():
    res, tr = _tables(25, 0, sampling_sd=0.02)
    res = pd.concat([res, res.assign(estimator="bleu").drop(columns=["interval_low", "interval_high"])])
    s = build_summary(res, tr, "toy", ReportConfig(bootstrap_resamples=50, plots=False))[0]
    assert s["estimators"]["bleu"]["reward"]["interval_coverage"]["sampling"] is None  # bleu gives none
    cells = s["agent_intervals"]["ratings"]["reward"]
    assert s["agent_intervals"]["estimator"] == "enigma" and len(cells) == 25
    a0 = cells["a0"]
    assert a0["sampling"][1] - a0["sampling"][0] == pytest.approx(2 * 1.96 * 0.02)
    lo, hi = a0["conformal"]
    assert lo < a0["estimate"] < hi and hi - a0["estimate"] == pytest.approx(a0["estimate"] - lo)
