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
        DiceConfig.preset("gda", interval_resamples=200)
    with pytest.raises(ValueError, match="at least 20"):
        _cfg(interval_resamples=5)


def test_interval_settings_key_the_result_even_without_an_interval():
    # the fingerprint is every setting, read or not: no rule of which ones a run without an
    # interval reads to keep in step with the code
    a = EnigmaEstimator(_cfg(interval_resamples=0, interval_level=0.9)).fingerprint()
    assert a != EnigmaEstimator(_cfg(interval_resamples=0, interval_level=0.8)).fingerprint()
    assert a != EnigmaEstimator(_cfg(interval_resamples=0, interval_level=0.9, interval_refit="kkt")).fingerprint()
    assert a != EnigmaEstimator(_cfg(interval_level=0.9)).fingerprint()  # a result with intervals is another result
    # the other refit method gives other draws, so another result
    assert '"refit": "multipliers"' in EnigmaEstimator(_cfg()).fingerprint()
    assert EnigmaEstimator(_cfg(interval_refit="kkt")).fingerprint() != EnigmaEstimator(_cfg()).fingerprint()


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
    # almost none); the full measurement is studies/results/interval_coverage_tabular.md
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
    fits = [fit_exact_nu(copy.deepcopy(run.heads), t, d, cfg.solver, cfg.objective, progress=False, warm_mu=run.solver["mu"], warn=False)
            for t, d in ((copies, data_copies), (weighted, data_weighted))]
    (h_c, curve_c, sum_c), (h_w, curve_w, sum_w) = fits
    assert sum_w["iterations"] == sum_c["iterations"] and sum_c["converged"]
    for a, b in zip(h_c.parameters(), h_w.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)  # stored in float32
    for key in ("zeta_mean", "ess", "flow_residual", "estimate_match", "estimate_short"):
        assert curve_w[-1][key] == pytest.approx(curve_c[-1][key], rel=1e-9), key
    for q_c, q_w in ((None, None), (turn_q.select(idx), turn_q.select(unique))):
        v_c = value_estimates(h_c, copies, data_copies, cfg.tmax, cfg.value.q_ridge, q_c)
        v_w = value_estimates(h_w, weighted, data_weighted, cfg.tmax, cfg.value.q_ridge, q_w)
        for r in RATINGS:
            for k in ("weighted", "q", "dr"):
                assert v_w[r][k] == pytest.approx(v_c[r][k], abs=1e-7), (r, k, q_c is None)
    e_c = rating_estimates(zeta_last(h_c, copies), data_copies.rewards, RATINGS)
    e_w = rating_estimates(zeta_last(h_w, weighted), data_weighted.rewards, RATINGS, counts.numpy())
    for r in RATINGS:
        for k in ("estimate", "unnormalised", "ess", "n"):
            assert e_w[r][k] == pytest.approx(e_c[r][k], rel=1e-6), (r, k)


def _resample_problem(n_dialogues: int, seed: int):
    """The full fit of the tabular problem's ``soft`` target on ``n_dialogues`` logs, and one
    bootstrap resample of them as the bootstrap refits it (distinct dialogues, weighted)."""
    from enigma.ope.bootstrap import subset
    from enigma.ope.turns import TurnFeatures, resample_counts
    from test_ope_value import _data, _features

    problem = reference_problem()
    store = problem.logs(n_dialogues, seed=seed)
    ta = target_actions(store, problem.targets["soft"], 1, seed=seed)
    cfg = _cfg(interval_resamples=0)
    est = EnigmaEstimator(cfg, progress=False)
    run = est.estimate_full(store, HeldOutAgent("soft", target_actions=ta)).runs["all"]
    logged, target = _features(est, store, ta)
    data = _data(store, ta)
    turns = TurnFeatures.from_dense(logged, target, data.sample_mask, data.n_agent_turns)
    unique, counts = resample_counts(torch.as_tensor(resample_indices(n_dialogues, 1, seed=seed)[0]))
    return cfg, run, turns.resample(unique, counts), subset(data, unique.numpy())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_kkt_refit_reaches_the_solution_of_the_multipliers_at_the_fits_tolerance_in_fewer_steps(seed):
    """``interval_refit: kkt`` refits a resample by Newton steps on the optimality conditions
    (``refit_kkt``): the same zeta and estimates as the method of multipliers run from the same
    start to the full fit's own tolerances, in fewer Newton steps, with the multipliers of a
    solution (the Lagrangian's gradient at them is zero)."""
    import copy

    from enigma.ope.bootstrap import zeta_last
    from enigma.ope.estimates import rating_estimates
    from enigma.ope.exact_nu import fit_exact_nu, refit_kkt
    from enigma.ope.zeta_problem import ZetaProblem

    torch.set_num_threads(1)
    cfg, run, turns, data = _resample_problem(400, seed)
    by_multipliers, _, s_m = fit_exact_nu(copy.deepcopy(run.heads), turns, data, cfg.solver, cfg.objective, progress=False, warm_mu=run.solver["mu"],
                                          warn=False)
    by_kkt, s_k = refit_kkt(copy.deepcopy(run.heads), turns, data, cfg.solver, cfg.objective)
    assert s_m["converged"] and s_k["converged"]
    assert s_k["grad_max"] <= cfg.solver.solver_tol and s_k["mass_gap_max"] <= cfg.solver.constraint_tol
    assert s_k["iterations"] < s_m["iterations"], (s_k["iterations"], s_m["iterations"])
    counts = turns.counts.numpy()
    e_m = rating_estimates(zeta_last(by_multipliers, turns), data.rewards, RATINGS, counts)
    e_k = rating_estimates(zeta_last(by_kkt, turns), data.rewards, RATINGS, counts)
    for r in RATINGS:  # each stops within its tolerances of the solution: equal to about 1e-5
        assert e_k[r]["estimate"] == pytest.approx(e_m[r]["estimate"], abs=1e-4), r
    # the returned multipliers are the solution's: with them (and no penalty) the gradient vanishes
    problem = ZetaProblem(turns, data, cfg.objective, cfg.tmax)
    theta = torch.cat([by_kkt.zeta_net[-1].weight.reshape(-1), by_kkt.zeta_net[-1].bias, by_kkt.zeta_pad_raw]).double()
    grad, _ = problem.derivatives(theta, -by_kkt.lam.detach().double(), 0.0)
    assert float(grad.detach().abs().max()) < 1e-3  # theta and lambda stored in float32


def test_a_kkt_refit_from_far_off_is_damped_until_it_converges():
    """A start far from the resample's solution (zeta's parameters scaled by 3, the multipliers
    zero): full KKT steps would leave the region where the model of the Lagrangian holds (zeta is
    the square of a linear map), so steps are damped until they lower the merit; the refit still
    reaches the full fit's tolerances and the same estimates."""
    import copy

    from enigma.ope.bootstrap import zeta_last
    from enigma.ope.estimates import rating_estimates
    from enigma.ope.exact_nu import refit_kkt

    torch.set_num_threads(1)
    cfg, run, turns, data = _resample_problem(400, 3)
    near, s_near = refit_kkt(copy.deepcopy(run.heads), turns, data, cfg.solver, cfg.objective)
    far_start = copy.deepcopy(run.heads)
    with torch.no_grad():
        far_start.zeta_net[-1].weight.mul_(3.0)
        far_start.zeta_pad_raw.mul_(3.0)
        far_start.lam.zero_()
    far, s_far = refit_kkt(far_start, turns, data, cfg.solver, cfg.objective)
    assert s_near["converged"] and s_far["converged"] and s_far["iterations"] > s_near["iterations"]
    counts = turns.counts.numpy()
    e_near = rating_estimates(zeta_last(near, turns), data.rewards, RATINGS, counts)
    e_far = rating_estimates(zeta_last(far, turns), data.rewards, RATINGS, counts)
    for r in RATINGS:
        assert e_far[r]["estimate"] == pytest.approx(e_near[r]["estimate"], abs=1e-4), r


def test_the_interval_with_kkt_refits_is_the_multipliers_interval_with_every_refit_at_the_fits_tolerance():
    torch.set_num_threads(1)
    problem = reference_problem()
    store = problem.logs(1000, seed=5)
    ta = target_actions(store, problem.targets["soft"], 1, seed=0)
    results = {m: EnigmaEstimator(_cfg(interval_refit=m), progress=False).estimate_full(store, HeldOutAgent("soft", target_actions=ta))
               for m in ("multipliers", "kkt")}
    by_kkt, by_multipliers = results["kkt"], results["multipliers"]
    diag = by_kkt.diagnostics["all"]["bootstrap"]
    assert diag["failed"] == 0 and diag["unconverged"] == 0 and diag["mass_gap_max"] <= 1e-6
    assert by_multipliers.diagnostics["all"]["bootstrap"]["mass_gap_max"] > 1e-6  # they stop at interval_tol
    a, b = by_kkt.to_estimate(), by_multipliers.to_estimate()
    for r in RATINGS:
        assert a.estimates[r] == b.estimates[r]  # the fit itself is the same
        # the multipliers' refits stop at slot masses within 1e-3 (interval_tol): draws within 1e-4
        np.testing.assert_allclose(a.intervals[r], b.intervals[r], atol=5e-4)
