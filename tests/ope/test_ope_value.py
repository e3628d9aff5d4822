"""The value three ways (enigma.ope.value) where the truth is known exactly: the tabular MDP on
one-hot features, where a linear Q on nu's basis is a table, so LSTD gives the logs'
certainty-equivalence value and the doubly robust value is right with either part spoiled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from enigma.contracts import HeldOutAgent
from enigma.ope import DiceConfig, EnigmaEstimator
from enigma.ope.flow_rows import flow_rows
from enigma.ope.estimates import rating_estimates
from enigma.ope.tabular import RATINGS, certainty_equivalence_value, target_actions
from enigma.ope.fqe import TurnQ
from enigma.ope.value import fit_q, fqe_corrections, ratio_values, reward_columns, value_estimates, zeta_rows
from enigma.ope.turns import TurnFeatures

from test_ope_exactness import _problem, _targets


@pytest.fixture(scope="module")
def fitted():
    torch.set_num_threads(1)
    mdp, store = _problem(2500, seed=2)
    policy = _targets(mdp)[1]  # soft-matcher: far from the logging policies
    ta = target_actions(store, policy, n_samples=2, seed=0)
    cfg = DiceConfig.preset("exact_nu", encoder="onehot", tmax=3, device="cpu")
    est = EnigmaEstimator(cfg, progress=False)
    result = est.estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    return mdp, store, policy, ta, cfg, est, result


def test_all_three_values_are_the_certainty_equivalence_value_on_tabular_features(fitted):
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    values = result.runs["all"].solver["values"]
    for r in RATINGS:
        assert values[r]["weighted"] == pytest.approx(result.estimates[r]["estimate"], abs=1e-6)  # u = 0: the paper's estimate (float64 here, the float32 final pass there)
        for kind in ("q", "dr"):
            assert abs(values[r][kind] - ce[r]) < 0.002, (r, kind, values[r], ce[r])
    assert result.diagnostics["all"]["values"] == values  # recorded with every run


def test_doubly_robust_survives_a_wrong_zeta_or_a_wrong_q(fitted):
    """Spoil one part at a time on the fitted run's own rows: zeta = 1 everywhere (the logs' own
    distribution) with the fitted Q, and the fitted zeta with a Q fitted on a basis that cannot
    express it (its features zeroed: only the bias and the pseudo slots are left)."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    run = result.runs["all"]
    logged, target = _features(est, store, ta)
    data = _data(store, ta)
    rows = flow_rows(TurnFeatures.from_dense(logged.double(), target.double(), data.sample_mask, data.n_agent_turns), cfg.tmax)
    b = reward_columns(rows, data.rewards)
    with torch.no_grad():
        zeta = zeta_rows(run.heads, rows)
    u = fit_q(rows, b, cfg.value.q_ridge)
    wrong_zeta = ratio_values(rows, torch.ones_like(zeta), b, rows.apply("delta", u))
    poor_rows = flow_rows(TurnFeatures.from_dense(torch.zeros_like(logged).double(), torch.zeros_like(target).double(), data.sample_mask,
                                                 data.n_agent_turns), cfg.tmax)
    poor_u = fit_q(poor_rows, reward_columns(poor_rows, data.rewards), cfg.value.q_ridge)
    wrong_q = ratio_values(rows, zeta, b, rows.apply("delta", poor_u))
    for j, r in enumerate(data.rating_names):
        assert abs(wrong_zeta[j] - ce[r]) < 0.002 and abs(wrong_q[j] - ce[r]) < 0.002, (r, wrong_zeta[j], wrong_q[j], ce[r])
    # the spoiled parts are wrong on their own (so the test can fail): the logs' own mean, and the poor Q alone
    for spoiled in (ratio_values(rows, torch.ones_like(zeta), b, None), ratio_values(rows, torch.ones_like(zeta), b, rows.apply("delta", poor_u))):
        assert max(abs(spoiled[j] - ce[r]) for j, r in enumerate(data.rating_names)) > 0.02


def test_dice_value_picks_the_reported_estimate_and_its_interval(fitted):
    mdp, store, policy, ta, cfg, est, result = fitted
    dr_cfg = cfg.with_flat(value="dr", interval_resamples=20)
    out = EnigmaEstimator(dr_cfg, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    values = out.runs["all"].solver["values"]
    for r in RATINGS:
        assert out.estimates[r]["estimate"] == values[r]["dr"]
        low, high = out.intervals[r]
        assert low <= values[r]["dr"] <= high
    assert EnigmaEstimator(dr_cfg).fingerprint() != EnigmaEstimator(cfg).fingerprint()
    with pytest.raises(ValueError, match="fixed features"):
        DiceConfig.preset("gda", value="dr", encoder="finetune")


@pytest.mark.parametrize("slot_normalise", [False, True])
def test_nonlinear_zeta_heads_get_the_doubly_robust_value(slot_normalise):
    """Gradient descent-ascent with an MLP zeta head (``head_hidden`` > 0) through the estimator:
    zeta at the value's rows is the one the final pass reads (so ``weighted`` is the run's own
    estimate, slot normalisation included). A short run leaves zeta far from the ratio; the LSTD
    Q, exact on one-hot features, puts the doubly robust value on the certainty-equivalence value
    all the same."""
    torch.set_num_threads(1)
    mdp, store = _problem(2500, seed=2)
    policy = _targets(mdp)[1]
    ta = target_actions(store, policy, n_samples=2, seed=0)
    ce = certainty_equivalence_value(store, ta)
    cfg = DiceConfig.preset("gda", encoder="onehot", head_hidden=16, tmax=3, steps=150, lr=1.0, log_every=50, device="cpu",
                            value="dr", q_model="lstd", slot_normalise=slot_normalise)
    out = EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    run = out.runs["all"]
    values = run.solver["values"]
    final_pass = rating_estimates(run.zeta_last, _data(store, ta).rewards, list(RATINGS))
    for r in RATINGS:
        assert values[r]["weighted"] == pytest.approx(final_pass[r]["estimate"], abs=1e-6)
        assert out.estimates[r]["estimate"] == values[r]["dr"]
        assert abs(values[r]["dr"] - ce[r]) < 0.002, (r, values[r], ce[r])
    assert max(abs(values[r]["weighted"] - ce[r]) for r in RATINGS) > 0.1  # the short run's zeta alone is far off


def _features(est, store, ta):
    from enigma.ope.estimator import pair_dialogues

    paired = pair_dialogues(store, ta)
    enc = est.encoder()
    prepared = enc.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    return enc(prepared, torch.arange(len(paired.dialogues)))


def _data(store, ta):
    from enigma.ope.estimator import dice_data, pair_dialogues

    return dice_data(pair_dialogues(store, ta))


def test_value_estimates_match_the_run(fitted):
    mdp, store, policy, ta, cfg, est, result = fitted
    logged, target = _features(est, store, ta)
    data = _data(store, ta)
    turns = TurnFeatures.from_dense(logged, target, data.sample_mask, data.n_agent_turns)
    again = value_estimates(result.runs["all"].heads, turns, data, cfg.tmax, cfg.value.q_ridge)
    for r in RATINGS:
        for k in ("weighted", "q", "dr"):
            assert again[r][k] == pytest.approx(result.runs["all"].solver["values"][r][k], abs=1e-9)


def _turns(est, store, ta):
    logged, target = _features(est, store, ta)
    data = _data(store, ta)
    return TurnFeatures.from_dense(logged.double(), target.double(), data.sample_mask, data.n_agent_turns), data


def _arbitrary_turn_q(turns: TurnFeatures, seed: int) -> TurnQ:
    """A random nonlinear function of the pair's features as a Q at the real turns: at the logged
    pair, and the mean over the target's samples."""
    g = torch.Generator().manual_seed(seed)
    w, v = torch.randn(turns.dim, 8, generator=g, dtype=torch.float64), torch.randn(8, len(RATINGS), generator=g, dtype=torch.float64)

    def q(x):
        return torch.tanh(3 * x @ w) @ v

    m = turns.sample_mask.to(torch.float64).unsqueeze(-1)
    return TurnQ(q(turns.logged), (q(turns.target) * m).sum(1) / m.sum(1), turns.n_agent_turns)


def test_doubly_robust_with_any_q_of_the_pair_is_exact_when_zeta_is(fitted):
    """The corrections of a Q given at the real turns (``fqe_corrections``) telescope along every
    dialogue: with the fitted zeta, which meets the flow constraints of every function of the
    (state, action) pair on one-hot features, the doubly robust value is the certainty-equivalence
    value whatever that Q is, here an arbitrary nonlinear one. With zeta = 1 the same Q is wrong."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    turns, data = _turns(est, store, ta)
    turn_q = _arbitrary_turn_q(turns, seed=3)
    values = value_estimates(result.runs["all"].heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q)
    for r in RATINGS:
        assert abs(values[r]["dr"] - ce[r]) < 0.002, (r, values[r], ce[r])
    rows = flow_rows(turns, cfg.tmax)
    seen = torch.as_tensor(~np.isnan(data.rewards))
    ones = ratio_values(rows, torch.ones(rows.n_rows, dtype=torch.float64), reward_columns(rows, data.rewards),
                        fqe_corrections(rows, turn_q, seen))
    assert max(abs(ones[j] - ce[r]) for j, r in enumerate(data.rating_names)) > 0.02


def test_fitted_q_evaluation_through_the_estimator(fitted):
    """``q_model: fqe`` on the user's path: the reported dr is the certainty-equivalence value
    (zeta is exact here), the fitted Q's own direct value is near it, and the interval is
    around the estimate with the Q kept across resamples."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    fqe_cfg = cfg.with_flat(value="dr", q_model="fqe", interval_resamples=20)
    out = EnigmaEstimator(fqe_cfg, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    values = out.runs["all"].solver["values"]
    for r in RATINGS:
        assert out.estimates[r]["estimate"] == values[r]["dr"]
        assert abs(values[r]["dr"] - ce[r]) < 0.002, (r, values[r], ce[r])
        assert abs(values[r]["q"] - ce[r]) < 0.05, (r, values[r], ce[r])
        low, high = out.intervals[r]
        assert low <= values[r]["dr"] <= high
    assert EnigmaEstimator(fqe_cfg).fingerprint() != EnigmaEstimator(cfg.with_flat(value="dr", interval_resamples=20)).fingerprint()
    # the weighted value reads no Q, but the Q fitted beside it is a setting like any other: the
    # fingerprint keys every setting, not the ones a value happens to read
    weighted = cfg.with_flat(value="weighted")
    assert EnigmaEstimator(weighted.with_flat(q_model="fqe")).fingerprint() != EnigmaEstimator(weighted).fingerprint()


def test_fitted_q_reads_only_the_columns_it_is_given(fitted):
    """``fqe.agreement: false`` hands the Q the text columns only: whatever the other columns hold
    (here the agreement block's place, filled with noise), the fitted Q is the same; and it is
    not when they are read."""
    from enigma.ope.config import FqeConfig
    from enigma.ope.fqe import fit_turn_q
    from enigma.ope.turns import TurnFeatures

    mdp, store, policy, ta, cfg, est, result = fitted
    turns, data = _turns(est, store, ta)
    g = torch.Generator().manual_seed(5)

    def with_noise():
        noise = torch.rand((len(turns.logged), 1 + turns.target.shape[1], 3), generator=g, dtype=torch.float64)
        return TurnFeatures(torch.cat([turns.logged, noise[:, 0]], 1), torch.cat([turns.target, noise[:, 1:]], 2),
                            turns.sample_mask, turns.n_agent_turns)

    small = FqeConfig(epochs=2)
    a, b = with_noise(), with_noise()
    text = slice(0, turns.dim)
    qa, qb = fit_turn_q(a, data.rewards, small, 0, columns=text), fit_turn_q(b, data.rewards, small, 0, columns=text)
    assert torch.equal(qa.logged, qb.logged) and torch.equal(qa.target, qb.target)
    assert not torch.equal(fit_turn_q(a, data.rewards, small, 0).logged, fit_turn_q(b, data.rewards, small, 0).logged)


def test_fitted_q_stays_a_rating_where_the_target_leaves_the_logs():
    """The reference problem's logs of seed 1007 (the tabular coverage benchmark's 8th set) give the
    `soft` target pairs no logged dialogue took. Their one-hot columns are constant in the logs:
    scaled by that ~0 spread, the fitted Q ran into the thousands through its own bootstrapped
    targets and the dr estimate was -40. The Q is an expected rating, so held in the ratings'
    range, and the estimate is the exact value to within the logs' own sampling error."""
    from enigma.estimators import dice_config
    from enigma.ope.tabular import reference_problem
    from enigma.params import Params

    torch.set_num_threads(1)
    problem = reference_problem()
    store = problem.logs(2000, seed=1007)
    policy = problem.targets["soft"]
    # ENIGMA's settings of the repository's params.yaml, as the benchmark ran them, with this Q
    cfg = dice_config("enigma", Params.load(Path(__file__).resolve().parents[2] / "params.yaml"))
    cfg = cfg.with_flat(encoder="onehot", device="cpu", interval_resamples=0, value="dr", q_model="fqe", seed=7)
    out = EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent("soft", target_actions=target_actions(store, policy, 1, seed=7)))
    exact = problem.mdp.exact_value(policy)
    values = out.runs["all"].solver["values"]
    for r in RATINGS:
        assert abs(out.estimates[r]["estimate"] - exact[r]) < 0.05, (r, values[r], exact[r])
        assert 0.0 <= values[r]["q"] <= 1.0, (r, values[r])


def test_the_fitted_q_can_read_its_own_projection_of_the_text_vectors():
    """``fqe.project_dim``: the Q reads its own PCA of the pair's vectors, not the heads' columns.
    On the text path (one-hot vectors handed to a frozen encoder) the heads keep every column, so
    zeta is exact and the doubly robust value stays the certainty-equivalence value whatever the
    Q reads; the Q's own value moves when it reads a 3-dimensional projection; and the setting
    is part of a saved result's fingerprint, set or not."""
    from enigma.encoders.onehot import OneHotPairEncoder

    torch.set_num_threads(1)
    mdp, store = _problem(2500, seed=2)
    policy = _targets(mdp)[1]
    ta = target_actions(store, policy, n_samples=2, seed=0)
    ce = certainty_equivalence_value(store, ta)
    base = DiceConfig.preset("exact_nu", encoder="frozen", tmax=3, device="cpu", value="dr", q_model="fqe",
                             fqe={"epochs": 5})
    narrow = base.with_flat(fqe=base.value.fqe.model_copy(update={"project_dim": 3}))

    def run(cfg):
        out = EnigmaEstimator(cfg, encoder=OneHotPairEncoder(), progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
        return out.runs["all"].solver["values"]

    wide, small = run(base), run(narrow)
    for r in RATINGS:
        assert abs(small[r]["dr"] - ce[r]) < 0.002, (r, small[r], ce[r])
    assert max(abs(small[r]["q"] - wide[r]["q"]) for r in RATINGS) > 1e-3
    assert json.loads(EnigmaEstimator(base).fingerprint())["dice"]["value"]["fqe"]["project_dim"] is None
    assert EnigmaEstimator(narrow).fingerprint() != EnigmaEstimator(base).fingerprint()


def test_the_fqe_q_reads_the_turn_position_when_asked():
    """Constant pair features cannot tell the turns apart: one-turn dialogues rated 0 and
    three-turn dialogues rated 1 leave a Q without the position with one value at every turn.
    With ``fqe.position`` it learns that only the long dialogues reach the later turns (Q near 1
    there) while the first turn is the mixture (near 0.5)."""
    from enigma.ope.config import FqeConfig
    from enigma.ope.fqe import fit_turn_q
    from enigma.ope.turns import TurnFeatures

    n_turns = torch.tensor([1, 3] * 40)
    t_all = int(n_turns.sum())
    logged = torch.ones((t_all, 2))
    turns = TurnFeatures(logged, logged.unsqueeze(1).clone(), torch.ones((t_all, 1), dtype=torch.bool), n_turns)
    rewards = np.array([[0.0], [1.0]] * 40)
    plain = fit_turn_q(turns, rewards, FqeConfig(dropout=0.0, epochs=60, tau=0.1), seed=0)
    assert float(plain.logged.max() - plain.logged.min()) < 1e-6
    pos = fit_turn_q(turns, rewards, FqeConfig(dropout=0.0, epochs=60, tau=0.1, position=True), seed=0)
    # rows 0: the one-turn dialogue's turn; 1, 2, 3: the three-turn dialogue's turns 0, 1, 2
    assert abs(float(pos.logged[0, 0]) - 0.5) < 0.1 and abs(float(pos.logged[1, 0]) - 0.5) < 0.1
    assert float(pos.logged[2, 0]) > 0.9 and float(pos.logged[3, 0]) > 0.9


def test_an_fqe_ensemble_is_the_mean_of_its_members_from_consecutive_seeds():
    """``fqe.ensemble``: the Q of n fits from seeds seed, seed + 1, ... averaged, at the logged
    pairs and at the target's samples; its members differ (another start, another Q)."""
    from enigma.ope.config import FqeConfig
    from enigma.ope.fqe import fit_turn_q
    from enigma.ope.turns import TurnFeatures

    gen = torch.Generator().manual_seed(0)
    n_turns = torch.tensor([1, 2, 3] * 20)
    t_all = int(n_turns.sum())
    logged = torch.randn((t_all, 3), generator=gen)
    turns = TurnFeatures(logged, torch.randn((t_all, 2, 3), generator=gen), torch.ones((t_all, 2), dtype=torch.bool), n_turns)
    rewards = torch.rand((60, 2), generator=gen).numpy()
    cfg = FqeConfig(epochs=5, hidden=8)
    members = [fit_turn_q(turns, rewards, cfg, seed=7 + m) for m in range(3)]
    assert not torch.allclose(members[0].target, members[1].target)
    ensemble = fit_turn_q(turns, rewards, cfg.model_copy(update={"ensemble": 3}), seed=7)
    torch.testing.assert_close(ensemble.logged, torch.stack([m.logged for m in members]).mean(0))
    torch.testing.assert_close(ensemble.target, torch.stack([m.target for m in members]).mean(0))


def test_a_standardised_fqe_q_does_not_depend_on_a_ratings_units():
    """``fqe.standardise``: the Q is fitted to each rating over its spread and mapped back, so
    rescaling one rating (a * r + b, a > 0; here to a twentieth of its spread, as a 0/1 rating
    divided by 4 sits beside ratings of 1 to 4) rescales that rating's Q and leaves the others'
    alone. In raw units it does not: the shared layers serve the rating of large spread."""
    from enigma.ope.config import FqeConfig
    from enigma.ope.fqe import fit_turn_q
    from enigma.ope.turns import TurnFeatures

    gen = torch.Generator().manual_seed(0)
    n_turns = torch.tensor([1, 2, 3] * 20)
    t_all = int(n_turns.sum())
    turns = TurnFeatures(torch.randn((t_all, 3), generator=gen), torch.randn((t_all, 2, 3), generator=gen),
                         torch.ones((t_all, 2), dtype=torch.bool), n_turns)
    rewards = torch.rand((60, 2), generator=gen).numpy()
    rewards[3, 1] = np.nan  # an unrated dialogue stays unrated
    rescaled = rewards.copy()
    rescaled[:, 1] = 0.05 * rewards[:, 1] + 0.2
    cfg = FqeConfig(epochs=5, hidden=8, standardise=True)
    q, q2 = fit_turn_q(turns, rewards, cfg, seed=3), fit_turn_q(turns, rescaled, cfg, seed=3)
    for a, b in ((q.logged, q2.logged), (q.target, q2.target)):
        torch.testing.assert_close(b[:, 0], a[:, 0], atol=1e-5, rtol=0)
        torch.testing.assert_close(b[:, 1], 0.05 * a[:, 1] + 0.2, atol=1e-5, rtol=0)
    raw = cfg.model_copy(update={"standardise": False})
    r, r2 = fit_turn_q(turns, rewards, raw, seed=3), fit_turn_q(turns, rescaled, raw, seed=3)
    assert not torch.allclose(r2.logged[:, 0], r.logged[:, 0], atol=1e-4)
    constant = rewards.copy()
    constant[:, 1] = 0.5  # no spread: no division by 0, and the Q is that rating
    c = fit_turn_q(turns, constant, cfg, seed=3)
    torch.testing.assert_close(c.logged[:, 1], torch.full((t_all,), 0.5, dtype=c.logged.dtype))


def test_an_lstd_residual_makes_any_fitted_q_exact_on_tabular_features(fitted):
    """``fqe.lstd_residual``: the linear Q fitted by LSTD to a fitted Q's own temporal-difference
    errors. On one-hot features nu's basis is a table, so whatever the fitted Q (here an arbitrary
    nonlinear one) the sum is the logs' certainty-equivalence Q: the direct value with zeta = 1
    (``q``) is exact, where the arbitrary Q's alone is not, and the doubly robust value stays so."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    turns, data = _turns(est, store, ta)
    turn_q = _arbitrary_turn_q(turns, seed=5)
    alone = value_estimates(result.runs["all"].heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q)
    both = value_estimates(result.runs["all"].heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q, lstd_residual=True)
    for r in RATINGS:
        assert abs(both[r]["q"] - ce[r]) < 0.005, (r, both[r], ce[r])  # the arbitrary Q's alone: off by up to 1.4
        assert abs(both[r]["dr"] - ce[r]) < 0.002, (r, both[r], ce[r])
    assert max(abs(alone[r]["q"] - ce[r]) for r in RATINGS) > 0.02


def test_the_fqe_q_settings_studied_for_persona_guess_run_through_the_estimator(fitted):
    """``fqe.linear_members`` and ``fqe.lstd_residual`` on the user's path: the dr value stays the
    certainty-equivalence value (zeta is exact here) with the interval around it, each setting
    changes the fingerprint, and at its default each is in it too."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    base = cfg.with_flat(value="dr", q_model="fqe", interval_resamples=20)
    for setting in ({"linear_members": 1}, {"lstd_residual": True}):
        studied = base.with_flat(fqe=base.value.fqe.model_copy(update=setting))
        out = EnigmaEstimator(studied, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
        for r in RATINGS:
            assert abs(out.estimates[r]["estimate"] - ce[r]) < 0.002, (setting, r, out.estimates[r], ce[r])
            low, high = out.intervals[r]
            assert low <= out.estimates[r]["estimate"] <= high
        assert EnigmaEstimator(studied).fingerprint() != EnigmaEstimator(base).fingerprint()
        assert set(setting) <= set(json.loads(EnigmaEstimator(base).fingerprint())["dice"]["value"]["fqe"])


def test_the_fqe_linear_path_reads_a_small_linear_rating():
    """``fqe.linear_members``: a rating linear in the pair's features with a small spread (a 0/1 rating
    divided by 4 beside ratings of 1 to 4 has such a spread) is read through the skip path, which
    no dropout touches; the network alone, as narrow, misses more of it."""
    from enigma.ope.config import FqeConfig
    from enigma.ope.fqe import fit_turn_q
    from enigma.ope.turns import TurnFeatures

    gen = torch.Generator().manual_seed(0)
    n = 400
    n_turns = torch.ones(n, dtype=torch.long)
    x = torch.randn((n, 4), generator=gen)
    turns = TurnFeatures(x, x.unsqueeze(1).clone(), torch.ones((n, 1), dtype=torch.bool), n_turns)
    big = 2.5 + torch.tanh(2 * x[:, 1] * x[:, 2])  # the network's job
    small = 0.1 + 0.03 * x[:, 0]  # the skip path's
    rewards = torch.stack([big, small], 1).numpy()
    cfg = FqeConfig(epochs=40, batch_size=32, hidden=8, dropout=0.5)
    err = {}
    for members in (0, 1):
        q = fit_turn_q(turns, rewards, cfg.model_copy(update={"linear_members": members}), seed=0)
        err[members] = float((q.logged[:, 1].float() - small).abs().mean())
    assert err[1] < 0.5 * err[0], err
    # in an ensemble the last members get the path: the first is the plain fit from its seed
    pair = fit_turn_q(turns, rewards, cfg.model_copy(update={"ensemble": 2, "linear_members": 1}), seed=0)
    plain = fit_turn_q(turns, rewards, cfg, seed=0)
    skip = fit_turn_q(turns, rewards, cfg.model_copy(update={"linear_members": 1}), seed=1)
    torch.testing.assert_close(pair.logged, (plain.logged + skip.logged) / 2)
    with pytest.raises(ValueError, match="linear_members"):
        FqeConfig(ensemble=2, linear_members=3)


def test_a_zeta_cap_keeps_the_doubly_robust_value_exact_when_the_q_is(fitted):
    """``dr_zeta_cap`` clips the zeta that weights the corrected rewards. The corrections of an
    exact Q (LSTD on one-hot features is the certainty-equivalence table) leave nothing for zeta
    to weight, so a clipped zeta still gives the exact value; with an arbitrary Q it does not (the
    clip moves the value), and a cap above every zeta changes nothing."""
    mdp, store, policy, ta, cfg, est, result = fitted
    ce = certainty_equivalence_value(store, ta)
    turns, data = _turns(est, store, ta)
    heads = result.runs["all"].heads
    with torch.no_grad():
        zeta_max = float(zeta_rows(heads, flow_rows(turns, cfg.tmax)).max())
    cap = 0.5 * zeta_max
    exact_q = value_estimates(heads, turns, data, cfg.tmax, cfg.value.q_ridge, zeta_cap=cap)
    for r in RATINGS:
        assert abs(exact_q[r]["dr"] - ce[r]) < 0.002, (r, exact_q[r], ce[r])
    turn_q = _arbitrary_turn_q(turns, seed=3)
    free = value_estimates(heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q)
    above = value_estimates(heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q, zeta_cap=2 * zeta_max)
    clipped = value_estimates(heads, turns, data, cfg.tmax, cfg.value.q_ridge, turn_q, zeta_cap=cap)
    for r in RATINGS:
        assert above[r] == free[r]
        assert clipped[r]["weighted"] == free[r]["weighted"] and clipped[r]["q"] == free[r]["q"]
    assert max(abs(clipped[r]["dr"] - free[r]["dr"]) for r in RATINGS) > 0.002


def test_the_zeta_cap_is_not_applied_on_one_hot_features(fitted):
    """Through the estimator: on one-hot features zeta is the logs' empirical ratio and the
    unclipped dr their saddle point, so ``dr_zeta_cap`` set changes neither the estimate nor any
    bootstrap draw (it would only move them by the Q's error); text features: test_with_estimator."""
    mdp, store, policy, ta, cfg, est, result = fitted
    base = cfg.with_flat(value="dr", interval_resamples=20)
    free = EnigmaEstimator(base, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    set_cap = base.with_flat(dr_zeta_cap=1.0)
    assert set_cap.value.dr_zeta_cap == 1.0 and set_cap.applied_value.dr_zeta_cap is None
    capped = EnigmaEstimator(set_cap, progress=False).estimate_full(store, HeldOutAgent(policy.name, target_actions=ta))
    ce = certainty_equivalence_value(store, ta)
    for r in RATINGS:
        assert capped.estimates[r]["estimate"] == free.estimates[r]["estimate"]
        assert abs(capped.estimates[r]["estimate"] - ce[r]) < 0.002, (r, capped.estimates[r], ce[r])
        assert capped.intervals[r] == free.intervals[r]
