"""Exactness: on a tabular dialogue MDP (values known by enumeration) the onehot ENIGMA run
reproduces the DICE saddle point of the logs and the true value of the target.

Two distances are checked separately: the optimiser against the saddle point of these very
logs (the certainty-equivalence value and the empirical ratio, exact for the data), tightly;
and the estimate against the true rho(pi), within 0.02 (the data's own sampling error, about
0.013 at 2,500 dialogues, is part of that).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.contracts import HeldOutAgent
from enigma.ope import DiceConfig, EnigmaEstimator
from enigma.ope.tabular import (
    RATINGS,
    TabularDialogueMDP,
    TabularPolicy,
    certainty_equivalence_value,
    empirical_ratio,
    target_actions,
)


def _problem(n_dialogues: int, seed: int):
    mdp = TabularDialogueMDP(n_user=2, n_agent=2, max_turns=2, p_agent_first=0.25, seed=0)
    behaviours = [
        mdp.random_policy("uniform", 0, concentration=1e6),
        mdp.random_policy("b1", 1),
        mdp.random_policy("b2", 2),
    ]
    return mdp, mdp.logs(behaviours, n_dialogues, seed=seed)


def _targets(mdp: TabularDialogueMDP) -> list[TabularPolicy]:
    matcher = mdp.deterministic_policy("matcher", lambda k, u: 0 if u == mdp.n_user else u)
    uniform = mdp.random_policy("uniform", 0, concentration=1e6)
    return [
        mdp.random_policy("soft", 7, concentration=2),
        TabularPolicy("soft-matcher", 0.7 * matcher.probs + 0.3 * uniform.probs),
        mdp.random_policy("rough", 11),
    ]


def _config(**kw) -> DiceConfig:
    values = dict(encoder="onehot", head_hidden=0, tmax=3, steps=1000, lr=2.0, log_every=250, device="cpu")
    values.update(kw)
    return DiceConfig.preset("gda", **values)


def _check(mdp, store, policy, cfg, tol_exact=0.02):
    torch.set_num_threads(1)
    ta = target_actions(store, policy, n_samples=2, seed=0)
    result = EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    run = result.runs["all"]
    exact, ce = mdp.exact_value(policy), certainty_equivalence_value(store, ta)
    for r in RATINGS:
        assert abs(result.estimates[r]["estimate"] - ce[r]) < 0.006, (policy.name, r, result.estimates[r], ce[r])
        assert abs(result.estimates[r]["estimate"] - exact[r]) < tol_exact, (policy.name, r, result.estimates[r], exact[r])
    # zeta at each dialogue's last agent turn against the exact ratio d^pi/d^D of the logs
    ratio = empirical_ratio(store, ta)
    last: dict[str, float] = {}
    for (did, _k), w in sorted(ratio.items()):
        last[did] = w
    want = np.array([last[d] for d in run_ids(result, store)])
    assert np.mean(np.abs(run.zeta_last - want)) / np.mean(want) < 0.04
    assert np.corrcoef(run.zeta_last, want)[0, 1] > 0.99
    # every slot group carries 1/Tmax of the mass: E_D[zeta] = 1 slot by slot (slot 0 included)
    assert np.all(np.abs(run.slot_means - 1) < 0.02), run.slot_means
    # lambda at the saddle point: 2 alpha_zeta E_D[zeta^2] per slot in our sign convention
    curve = run.curve[-1]
    assert curve["step"] == cfg.solver.steps and 0.9 < curve["zeta_slot_0"] < 1.1
    return result


def run_ids(result, store):
    return store.dialogues.column("dialog_id").to_pylist()


def test_onehot_estimate_is_exact_on_the_tabular_problem():
    mdp, store = _problem(2500, seed=2)
    _check(mdp, store, _targets(mdp)[0], _config(steps=600))


@pytest.mark.slow
def test_onehot_estimate_is_exact_for_several_targets():
    mdp, store = _problem(2500, seed=2)
    for policy in _targets(mdp):
        _check(mdp, store, policy, _config(steps=2000))


def test_learning_curve_records_the_diagnostics():
    mdp, store = _problem(300, seed=0)
    policy = _targets(mdp)[0]
    ta = target_actions(store, policy, n_samples=1, seed=0)
    result = EnigmaEstimator(_config(steps=60, log_every=20), progress=False).estimate_full(
        store, HeldOutAgent("soft", target_actions=ta)
    )
    curve = result.curves["all"]
    assert [row["step"] for row in curve] == [20, 40, 60]
    for key in ("loss", "lambda", "zeta_mean", "ess", "ess_share", "zeta_slot_0", "zeta_slot_2", "nu_pad_2", "estimate_match", "estimate_short"):
        assert key in curve[-1] and np.isfinite(curve[-1][key]), key
    d = result.diagnostics["all"]
    assert len(d["slot_zeta_mean"]) == 3 and 0 < d["ess_share"] <= 1
    assert result.diagnostics["n_dialogues"] == 300


def test_stopping_rule_ends_a_converged_run_early():
    mdp, store = _problem(600, seed=0)
    ta = target_actions(store, _targets(mdp)[0], n_samples=1, seed=0)
    cfg = _config(steps=5000, log_every=100, stop_window=300, stop_min_steps=500, average_last=0.0)
    result = EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent("soft", target_actions=ta))
    run = result.runs["all"]
    assert 500 <= run.steps_run < 5000
    ce = certainty_equivalence_value(store, ta)
    assert all(abs(result.estimates[r]["estimate"] - ce[r]) < 0.01 for r in RATINGS)
