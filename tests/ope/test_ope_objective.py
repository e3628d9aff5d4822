"""The DICE Lagrangian, the gradient reversal, the heads, the estimates and the config."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from enigma.ope.config import DiceConfig
from enigma.ope.presets import PRESETS
from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import SlotValues, grad_reverse, lagrangian, slot_values


def _values(zeta, nu, nu_next):
    z = torch.tensor(zeta)
    return SlotValues(z, torch.tensor(nu), torch.tensor(nu_next), z[:, 1])


def test_lagrangian_matches_the_formula_by_hand():
    cfg = DiceConfig.preset("gda", lambda_per_slot=False)
    v = _values([[1.0, 2.0, 0.5]], [[0.1, 0.2, 0.3]], [[0.2, 0.3, 0.1]])
    lam = torch.tensor([0.7])
    zeta, nu, nxt = [1.0, 2.0, 0.5], [0.1, 0.2, 0.3], [0.2, 0.3, 0.1]
    want = sum(z * (b - a) + 0.7 * (z - 1) - z * z for z, a, b in zip(zeta, nu, nxt)) / 3
    assert float(lagrangian(v, lam, cfg.objective)) == pytest.approx(want)


def test_lagrangian_options_half_square_nu_penalty_and_reward():
    cfg = DiceConfig.preset("gda", zeta_penalty="half_square", alpha_nu=0.5, alpha_r=2.0, normalise=False, lambda_per_slot=False)
    v = _values([[1.0, 2.0]], [[1.0, -1.0]], [[0.0, 0.0]])
    want = ((1 * (0 - 1) - 0.5) + (2 * (0 + 1) - 2.0)) / 2 + 0.5 * (0.5 + 0.5) / 2 + 2.0 * 2.0 * 0.25
    assert float(lagrangian(v, torch.tensor([5.0]), cfg.objective, torch.tensor([0.25]))) == pytest.approx(want)
    with pytest.raises(ValueError, match="reward"):
        lagrangian(v, torch.tensor([0.0]), cfg.objective)


def test_gradient_reversal_flips_only_the_gradient():
    x = torch.tensor([1.5], requires_grad=True)
    y = grad_reverse(x) * 3
    y.backward()
    assert float(y.detach()) == pytest.approx(4.5) and float(x.grad) == pytest.approx(-3.0)


def test_heads_start_at_zeta_one_and_nu_zero_for_every_activation():
    for act in ("square", "shifted_square", "softplus", "none"):
        h = DiceHeads(dim=4, hidden=8, tmax=5, activation=act, lambda_per_slot=True)
        x = torch.randn(3, 2, 4)
        assert torch.allclose(h.zeta(x), torch.ones(3, 2), atol=1e-6)
        assert torch.allclose(h.nu(x), torch.zeros(3, 2))
        assert torch.allclose(h.zeta_pad(), torch.ones(5), atol=1e-6)
        assert h.lam.shape == (5,)


def test_slot_values_average_nu_over_existing_target_samples_only():
    h = DiceHeads(dim=2, hidden=0, tmax=3)
    with torch.no_grad():
        h.nu_net[0].weight.copy_(torch.tensor([[1.0, 10.0]]))
    logged = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    target = torch.tensor([[[[0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]]])
    mask = torch.tensor([[[True, True], [True, False]]])
    v = slot_values(h, logged, target, mask, torch.tensor([2]))
    # slot 0 -> turn 0 (mean of 10 and 1), turn 0 -> turn 1 (10 only), turn 1 -> slot 0 (pad 0)
    assert v.nu_next.tolist() == [[5.5, 10.0, 0.0]]
    assert v.zeta_last.tolist() == pytest.approx([1.0])


def test_estimates_post_normalised_unnormalised_and_ess():
    zeta = np.array([2.0, 0.0, 1.0, 1.0])
    rewards = np.array([[1.0, np.nan], [0.0, 1.0], [0.5, 0.0], [0.0, 1.0]])
    e = rating_estimates(zeta, rewards, ["a", "b"])
    assert e["a"]["estimate"] == pytest.approx((2 + 0.5) / 4)
    assert e["a"]["unnormalised"] == pytest.approx(2.5 / 4)
    assert e["a"]["ess"] == pytest.approx(16 / 6)
    assert e["b"]["estimate"] == pytest.approx(1 / 2) and e["b"]["n"] == 3  # NaN rating left out
    assert effective_sample_size(np.ones(7)) == pytest.approx(7)
    assert effective_sample_size(np.zeros(3)) == 0.0
    assert math.isnan(rating_estimates(np.zeros(2), np.ones((2, 1)), ["a"])["a"]["estimate"])


def test_presets_validate_and_unknown_names_are_rejected():
    for name in PRESETS:
        DiceConfig.preset(name)
    paper = DiceConfig.preset("paper").solver
    assert (paper.lr_scale_zeta, paper.lr_scale_nu, paper.lr_scale_lambda) == (1.0, 2.0, 10.0)
    assert paper.schedule == "inverse_sqrt" and paper.warmup_steps == 30 and paper.clip_norm == 1.0
    assert DiceConfig.preset("dualdice").objective.normalise is False and DiceConfig.preset("gendice").objective.alpha_nu == 1.0
    assert DiceConfig.preset("bestdice").objective.alpha_r == 1.0
    with pytest.raises(ValueError, match="unknown DICE preset"):
        DiceConfig.preset("nope")
    # gradient descent-ascent was the preset named "default", which it is not: a params file that
    # still says so is told its new name
    assert DiceConfig.preset("gda").solver.name == "gda"
    with pytest.raises(ValueError, match="unknown DICE preset 'default'.*is 'gda'"):
        DiceConfig.from_section({"preset": "default"})
    with pytest.raises(ValueError):
        DiceConfig.from_section({"preset": "paper", "lr": -1})
    with pytest.raises(ValueError):
        DiceConfig.from_section({"not_a_field": 1})
    assert DiceConfig.from_section({"preset": "paper", "tmax": 8}).tmax == 8


def test_stopping_rule_needs_a_full_stable_window():
    from enigma.ope.gda import converged

    cfg = DiceConfig.preset("gda", stop_window=200, stop_slot_tol=0.03, stop_estimate_tol=0.002)

    def row(step, slot=1.0, est=0.5):
        return {"step": step, "zeta_slot_0": slot, "zeta_slot_1": 1.0, "estimate_a": est}

    assert not converged([row(100), row(200)], cfg.solver)  # the window is not covered yet
    assert converged([row(100), row(200), row(300)], cfg.solver)
    assert not converged([row(100), row(200, slot=1.05), row(300)], cfg.solver)
    assert not converged([row(100), row(200, est=0.503), row(300)], cfg.solver)
    assert converged([row(100, slot=0.5), row(200), row(300), row(400)], cfg.solver)  # old rows leave the window
