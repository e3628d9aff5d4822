"""The calibrated interval and the verdict rule (enigma.evaluation.calibration) on known cases."""

import math
import warnings

import numpy as np

from enigma.evaluation import calibration as C


def test_fit_recovers_a_linear_bias_and_its_residuals():
    e = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    t = 0.2 + 2.0 * e
    cal = C.fit(e, t)
    assert (cal.params, round(cal.a, 6), round(cal.b, 6)) == (2, 0.2, 2.0)
    assert np.allclose(cal.residuals, 0.0)


def test_a_slope_that_is_not_positive_falls_back_to_a_bias_correction():
    e = [0.1, 0.2, 0.3, 0.4]
    t = [0.9, 0.8, 0.7, 0.6]
    cal = C.fit(e, t)
    assert cal.b == 1.0 and cal.params == 1 and "not positive" in cal.note
    assert math.isclose(cal.a, float(np.mean(np.subtract(t, e))))
    two = C.fit([0.1, 0.3], [0.5, 0.6])  # fewer than 3: bias only
    assert two.b == 1.0 and two.params == 1


def test_estimates_equal_but_for_their_last_bits_get_a_bias_correction_not_a_meaningless_slope():
    """Four agents given the same number up to rounding (an estimator that cannot tell them
    apart): the least-squares line is rank-deficient, and polyfit's minimum-norm answer was a
    slope of 0.19 that scaled every verdict's difference by it."""
    e = [1.0, 1.0 + 2.2e-16, 1.0 + 4.4e-16, 1.0]
    t = [0.2, 0.4, 0.6, 0.3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = C.fit(e, t)
    assert cal.b == 1.0 and cal.params == 1 and "too close together" in cal.note
    assert math.isclose(cal.a, float(np.mean(np.subtract(t, e))))


def test_conformal_half_width_is_the_ceil_n_plus_1_level_th_residual():
    noise = np.array([(-1) ** i * (i + 1) / 100 for i in range(19)])
    cal = C.Calibration(a=0.0, b=1.0, residuals=noise, params=1)
    lo, hi, how = C.interval(cal, 0.5, 0.95)
    k = math.ceil(20 * 0.95)  # 19: the largest of 19
    assert math.isclose(hi - 0.5, np.sort(np.abs(noise))[k - 1]) and how == "conformal over 19 agents"
    lo, hi, how = C.interval(cal, 0.5, 0.80)  # ceil(20 * 0.8) = 16th smallest
    assert math.isclose(hi - 0.5, np.sort(np.abs(noise))[15])


def test_below_19_agents_at_95_the_interval_is_finite_and_says_how():
    rng = np.random.default_rng(0)
    e = rng.uniform(0, 1, 8)
    t = e + rng.normal(0, 0.05, 8)
    cal = C.fit(e, t)
    lo, hi, how = C.interval(cal, 0.5, 0.95)
    assert lo is not None and math.isfinite(lo) and math.isfinite(hi) and lo < hi
    assert how == "normal prediction interval over 8 agents (too few for conformal at 95%)"
    assert C.interval(C.fit([0.1, 0.2], [0.1, 0.3]), 0.5, 0.95)[:2] == (None, None)
    v = C.verdict(cal, 0.9, 0.1, 0.95)
    assert v["verdict"] == "better" and "normal prediction interval over 8 agents" in v["how"]


def test_verdict_compares_the_calibrated_difference_with_the_pair_quantile():
    cal = C.Calibration(a=0.0, b=2.0, residuals=np.array([0.0, 0.01, -0.01, 0.02, -0.02, 0.0, 0.01, -0.01]), params=1)
    # 8 agents, 28 pairs: at 80% (ceil(9 * 0.8) = 8 <= 8 agents) conformal over the pairs, rank
    # ceil(29 * 0.8) = 24 of the sorted |r_i - r_j|
    diffs = sorted(abs(x - y) for i, x in enumerate(cal.residuals) for y in cal.residuals[i + 1:])
    v = C.verdict(cal, 0.53, 0.50, 0.80)
    assert math.isclose(v["threshold"], diffs[23]) and math.isclose(v["difference"], 0.06) and v["verdict"] == "better"
    assert C.verdict(cal, 0.50, 0.53, 0.80)["verdict"] == "worse"
    assert C.verdict(cal, 0.505, 0.50, 0.80)["verdict"] == "not distinguishable"
    assert v["how"] == "conformal over 8 agents' pairs"
    # at 95% 8 agents are too few: the normal fallback, finite
    assert C.verdict(cal, 0.53, 0.50, 0.95)["how"].startswith("normal prediction interval over 8 agents")


def test_calibrated_intervals_cover_a_biased_estimator_near_the_level():
    """A leave-one-agent-out table whose estimates are compressed and shifted (truth = 0.3 + 2 e +
    noise): the sampling-blind estimate misses most agents, the calibrated interval covers ~95%,
    and no interval leaves the ratings' range [0, 1]."""
    rng = np.random.default_rng(1)
    cover, n_rep = [], 40
    for _ in range(n_rep):
        e = rng.uniform(0.05, 0.3, 30)
        t = 0.3 + 2.0 * e + rng.normal(0, 0.03, 30)  # ratings stay in [0, 1], where intervals are cut
        est = {f"a{i}": float(x) for i, x in enumerate(e)}
        tr = {f"a{i}": float(x) for i, x in enumerate(t)}
        ivs = C.calibrated_intervals(est, tr, 0.95)
        assert all(0.0 <= v["low"] <= v["high"] <= 1.0 for v in ivs.values())
        acc = C.interval_accuracy(ivs, tr)
        cover.append(acc["coverage"])
    assert 0.90 <= float(np.mean(cover)) <= 0.99
    pv = C.verdict_accuracy(C.pair_verdicts(est, tr, 0.95))
    assert pv["pairs"] == 435 and pv["called"] > 0 and pv["wrong_rate"] <= 0.05
