"""The sampling interval of an ENIGMA estimate (enigma.ope.bootstrap): seeded, paired, honest.

Where the truth is exact (the reference tabular problem), repeated logs drawn afresh must put the
exact value inside the interval about as often as its level says; the CLI's own check (every
target's interval holds its exact value) is in test_estimate_user_path.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.contracts import HeldOutAgent
from enigma.ope import DiceConfig, EnigmaEstimator
from enigma.ope.bootstrap import resample_indices
from enigma.ope.tabular import RATINGS, reference_problem, target_actions


def _cfg(**kw) -> DiceConfig:
    return DiceConfig.preset("exact_nu", **{"encoder": "onehot", "tmax": 4, "interval_resamples": 40, "device": "cpu", **kw})


def test_the_interval_needs_exact_nu_and_enough_resamples():
    with pytest.raises(ValueError, match="needs solver exact_nu"):
        DiceConfig.preset("default", interval_resamples=200)
    with pytest.raises(ValueError, match="at least 20"):
        _cfg(interval_resamples=5)


def test_interval_settings_leave_the_fingerprint_alone_while_there_is_no_interval():
    a = EnigmaEstimator(_cfg(interval_resamples=0, interval_level=0.9)).fingerprint()
    assert a == EnigmaEstimator(_cfg(interval_resamples=0, interval_level=0.8)).fingerprint()
    assert a != EnigmaEstimator(_cfg()).fingerprint()  # a result with intervals is another result


def test_resamples_are_seeded_and_shared_by_targets_on_the_same_logs():
    np.testing.assert_array_equal(resample_indices(50, 7, seed=3), resample_indices(50, 7, seed=3))
    assert not np.array_equal(resample_indices(50, 7, seed=3), resample_indices(50, 7, seed=4))


def test_every_rating_gets_an_interval_around_its_estimate_and_the_draws_are_saved():
    torch.set_num_threads(1)
    problem = reference_problem()
    store = problem.logs(1000, seed=5)
    ta = target_actions(store, problem.targets["soft"], 1, seed=0)
    full = EnigmaEstimator(_cfg(), progress=False).estimate_full(store, HeldOutAgent("soft", target_actions=ta))
    result = full.to_estimate()
    for r in RATINGS:
        lo, hi = result.intervals[r]
        assert lo < result.estimates[r] < hi
    boot = result.artifacts["bootstrap"]
    assert boot["n_dialogues"] == 1000 and boot["seed"] == 0 and boot["draws"]["match"].shape == (40,)
    diag = full.diagnostics["all"]["bootstrap"]
    assert diag["failed"] == 0 and diag["unconverged"] == 0 and diag["mass_gap_max"] <= 1e-3
    # a rerun draws the same resamples: the same interval
    again = EnigmaEstimator(_cfg(), progress=False).estimate(store, HeldOutAgent("soft", target_actions=ta))
    assert again.intervals == result.intervals


@pytest.mark.slow  # 24 estimates with 60 refits each (about 2 minutes on a busy core)
def test_over_fresh_logs_the_interval_covers_the_exact_value_about_as_often_as_its_level():
    torch.set_num_threads(1)
    problem = reference_problem()
    covered = []
    for rep in range(6):
        store = problem.logs(1500, seed=100 + rep)
        for t, policy in problem.targets.items():
            ta = target_actions(store, policy, 1, seed=rep)
            got = EnigmaEstimator(_cfg(interval_resamples=60, seed=rep), progress=False).estimate(store, HeldOutAgent(t, target_actions=ta))
            exact = problem.mdp.exact_value(policy)
            covered += [got.intervals[r][0] <= exact[r] <= got.intervals[r][1] for r in RATINGS]
    # 48 intervals at nominal 95%: at least 40 (a zero-width or a badly biased interval covers
    # almost none); the full measurement is benchmarks/results/interval_coverage_tabular.md
    assert sum(covered) >= 40, f"{sum(covered)} of {len(covered)} intervals hold the exact value"


def test_a_resample_held_as_its_distinct_dialogues_with_their_counts_refits_as_its_copies():
    """The bootstrap refits a resample on its distinct dialogues weighted by their draws
    (``TurnFeatures.resample``) instead of copies of their rows: the same solution, the same
    values (both Qs) and the same weighted estimate, at about 63% of the rows."""
    import copy

    from enigma.ope.bootstrap import subset, zeta_last
    from enigma.ope.estimates import rating_estimates
    from enigma.ope.exact_nu import fit_exact_nu
    from enigma.ope.fqe import TurnQ
    from enigma.ope.turns import TurnFeatures, resample_counts
    from enigma.ope.value import value_estimates
    from test_ope_value import _data, _features

    torch.set_num_threads(1)
    problem = reference_problem()
    store = problem.logs(400, seed=7)
    ta = target_actions(store, problem.targets["soft"], 2, seed=1)
    cfg = _cfg(interval_resamples=0, tmax=4)
    est = EnigmaEstimator(cfg, progress=False)
    run = est.estimate_full(store, HeldOutAgent("soft", target_actions=ta)).runs["all"]
    logged, target = _features(est, store, ta)
    data = _data(store, ta)
    turns = TurnFeatures.from_dense(logged, target, data.sample_mask, data.n_agent_turns)
    gen = torch.Generator().manual_seed(0)
    q_logged = torch.rand(len(turns.logged), len(RATINGS), generator=gen)
    turn_q = TurnQ(q_logged, q_logged + 0.1 * torch.rand(q_logged.shape, generator=gen), turns.n_agent_turns)

    idx = torch.as_tensor(resample_indices(400, 1, seed=11)[0])
    unique, counts = resample_counts(idx)
    assert counts.max() > 1 and len(unique) < 0.7 * len(idx)  # a real resample: repeats, fewer rows
    copies, weighted = turns.select(idx), turns.resample(unique, counts)
    data_copies, data_weighted = subset(data, idx.numpy()), subset(data, unique.numpy())
    fits = [fit_exact_nu(copy.deepcopy(run.heads), t, d, cfg, progress=False, warm_mu=run.solver["mu"], warn=False)
            for t, d in ((copies, data_copies), (weighted, data_weighted))]
    (h_c, curve_c, sum_c), (h_w, curve_w, sum_w) = fits
    assert sum_w["iterations"] == sum_c["iterations"] and sum_c["converged"]
    for a, b in zip(h_c.parameters(), h_w.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # stored in float32
    for key in ("zeta_mean", "ess", "flow_residual", "estimate_match", "estimate_short"):
        assert curve_w[-1][key] == pytest.approx(curve_c[-1][key], rel=1e-9), key
    for q_c, q_w in ((None, None), (turn_q.select(idx), turn_q.select(unique))):
        v_c = value_estimates(h_c, copies, data_copies, cfg.tmax, cfg.q_ridge, q_c)
        v_w = value_estimates(h_w, weighted, data_weighted, cfg.tmax, cfg.q_ridge, q_w)
        for r in RATINGS:
            for k in ("weighted", "q", "dr"):
                assert v_w[r][k] == pytest.approx(v_c[r][k], abs=1e-7), (r, k, q_c is None)
    e_c = rating_estimates(zeta_last(h_c, copies), data_copies.rewards, RATINGS)
    e_w = rating_estimates(zeta_last(h_w, weighted), data_weighted.rewards, RATINGS, counts.numpy())
    for r in RATINGS:
        for k in ("estimate", "unnormalised", "ess", "n"):
            assert e_w[r][k] == pytest.approx(e_c[r][k], rel=1e-6), (r, k)
