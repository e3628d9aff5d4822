"""The named DICE presets: sets of flat ``dice`` values a params section picks with ``preset:``
(``DiceConfig.preset``) and may override key by key. ENIGMA as the product runs it is not one of
them but a section on top of ``exact_nu`` (``enigma.ope.config.ENIGMA_DEFAULT``)."""

from __future__ import annotations

from typing import Any

# The authors' own runs (ENIGMA-REFERENCE.md): one AdamW with gradient reversal, lr scales
# zeta 1 / nu 2 / lambda 10, inverse-sqrt decay after 30 warm-up steps, eps 1e-6, wd 1e-4,
# clip 1. Their lr (1e-4..2e-4) is for a fine-tuned RoBERTa with batch 160; the heads-only
# modes here keep it as the default of the preset so the preset stays the paper's.
PAPER: dict[str, Any] = dict(
    alpha_zeta=1.0, zeta_penalty="square", alpha_nu=0.0, alpha_r=0.0, normalise=True,
    lambda_per_slot=False, zeta_activation="square", optimizer="adamw", optimistic=False,
    lr=2e-4, lr_scale_zeta=1.0, lr_scale_nu=2.0, lr_scale_lambda=10.0, lr_scale_encoder=1.0,
    schedule="inverse_sqrt", warmup_steps=30, adam_eps=1e-6, weight_decay=1e-4, clip_norm=1.0,
    average_last=0.0,
)

# Yang et al. 2020 (dice_rl presets): f(x) = x^2/2, Adam, value clipping 1, separate
# learning rates per player (expressed here as the lr scales of one optimiser).
_YANG: dict[str, Any] = dict(
    zeta_penalty="half_square", optimizer="adamw", optimistic=False, lr=1e-3, lr_scale_zeta=1.0,
    lr_scale_nu=1.0, lr_scale_lambda=1.0, schedule="constant", weight_decay=0.0, clip_norm=1.0,
    lambda_per_slot=False, average_last=0.0,
)
DUALDICE = dict(_YANG, alpha_nu=0.0, alpha_zeta=1.0, alpha_r=0.0, normalise=False, zeta_activation="none")
GENDICE = dict(_YANG, alpha_nu=1.0, alpha_zeta=0.0, alpha_r=0.0, normalise=True, zeta_activation="square")
BESTDICE = dict(_YANG, alpha_nu=0.0, alpha_zeta=1.0, alpha_r=1.0, normalise=True, zeta_activation="square")

# The gradient descent-ascent solver, the project default before exact_nu (chosen by
# studies/ope_tabular.py, results in studies/results/ope_tabular.md): two-timescale gradient
# descent-ascent with zeta the slower player, one lambda per slot position, and a final pass with
# weights averaged over the last 20% (params.yaml's enigma-gda row).
GDA: dict[str, Any] = dict(
    alpha_zeta=1.0, zeta_penalty="square", alpha_nu=0.0, alpha_r=0.0, normalise=True,
    lambda_per_slot=True, zeta_activation="square", optimizer="sgd", optimistic=False,
    lr=2.0, lr_scale_zeta=0.1, lr_scale_nu=1.0, lr_scale_lambda=0.05, lr_scale_encoder=0.01,
    schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=None, average_last=0.2,
)

# The same regularised Lagrangian with alpha_nu > 0, nu solved in closed form at every zeta and
# one lambda per slot met by the method of multipliers (enigma/ope/exact_nu.py): a minimisation
# that converges to a gradient and a constraint tolerance. alpha_nu 1e-4 reproduces the tabular
# problem's certainty-equivalence value (tests/ope/test_ope_exact_nu.py).
EXACT_NU: dict[str, Any] = dict(
    solver="exact_nu", alpha_zeta=1.0, zeta_penalty="square", alpha_nu=1e-4, alpha_r=0.0, normalise=True,
    lambda_per_slot=True, zeta_activation="square", steps=3000, log_every=25,
)

PRESETS: dict[str, dict[str, Any]] = {
    "gda": GDA,
    "exact_nu": EXACT_NU,
    "paper": PAPER,
    "dualdice": DUALDICE,
    "gendice": GENDICE,
    "bestdice": BESTDICE,
}
