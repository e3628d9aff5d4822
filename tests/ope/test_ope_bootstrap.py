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
