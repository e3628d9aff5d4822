"""The DICE Lagrangian on padded dialogues (paper eq. 6, Algorithm 2).

    L = (1/Tmax) sum_t [ zeta_t (nu'_{t+1} - nu_t) + lambda_t (zeta_t - 1) - alpha_zeta f(zeta_t) ]
        + alpha_nu f(nu_t) averaged over slots + alpha_R zeta_T r

averaged over dialogues, to be maximised over zeta >= 0 and minimised over nu and lambda.
``nu'`` is nu at the successor slot with the TARGET agent's action (averaged over its S
sampled replies); at a pseudo slot it is the next pseudo scalar. In our sign convention the
saddle point has lambda = 2 alpha_zeta E_D[zeta^2] (the authors' code writes lambda(1 - zeta),
so its lambda is the negative).

Training minimises ``L`` for every parameter after zeta has passed through a gradient
reversal, so one optimiser (or one backward pass) serves both players, including a shared
fine-tuned encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from enigma.ope.config import ObjectiveConfig
from enigma.ope.heads import DiceHeads
from enigma.ope.padding import real_mask, successor_values, to_slots


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return -grad


def grad_reverse(x: torch.Tensor) -> torch.Tensor:
    return _GradReverse.apply(x)


def penalty(x: torch.Tensor, kind: str) -> torch.Tensor:
    return x * x if kind == "square" else 0.5 * x * x


@dataclass
class SlotValues:
    """The padded per-slot quantities of a batch of dialogues, all [B, Tmax]."""

    zeta: torch.Tensor
    nu: torch.Tensor
    nu_next: torch.Tensor
    zeta_last: torch.Tensor  # [B] zeta at each dialogue's last agent turn


def slot_values(
    heads: DiceHeads,
    logged: torch.Tensor,
    target: torch.Tensor,
    sample_mask: torch.Tensor,
    n_agent_turns: torch.Tensor,
    reverse_zeta: bool = False,
    slot_normalise: bool = False,
) -> SlotValues:
    """``logged`` [B, K, d], ``target`` [B, K, S, d], ``sample_mask`` [B, K, S] (True where a
    target reply exists), ``n_agent_turns`` [B]. ``slot_normalise`` divides zeta by its batch
    mean per slot position."""
    zeta_turn = heads.zeta(logged)  # [B, K]
    nu_turn = heads.nu(logged)
    m = sample_mask.to(target.dtype)
    nu_target = (heads.nu(target) * m).sum(-1) / m.sum(-1).clamp(min=1)  # [B, K]
    zeta_pad = heads.zeta_pad()
    if reverse_zeta:
        zeta_turn, zeta_pad = grad_reverse(zeta_turn), grad_reverse(zeta_pad)
    mask = real_mask(n_agent_turns, zeta_pad.shape[0])
    zeta = to_slots(zeta_turn, zeta_pad, n_agent_turns, mask)
    if slot_normalise:
        # Each slot position carries 1/Tmax of the padded mass under every policy, so
        # E_D[zeta | slot] = 1 holds at the saddle point: impose it on the batch directly.
        zeta = zeta / zeta.mean(0, keepdim=True).clamp(min=1e-12)
    nu = to_slots(nu_turn, heads.nu_pad, n_agent_turns, mask)
    nu_next = successor_values(to_slots(nu_target, heads.nu_pad, n_agent_turns, mask))
    zeta_last = zeta.gather(1, n_agent_turns.long().unsqueeze(1)).squeeze(1)
    return SlotValues(zeta, nu, nu_next, zeta_last)


def lagrangian(
    v: SlotValues, lam: torch.Tensor, objective: ObjectiveConfig, reward: torch.Tensor | None = None
) -> torch.Tensor:
    """The objective above for one batch (a scalar). ``lam`` has one entry or one per slot;
    ``reward`` [B] is needed only when ``alpha_r > 0`` (missing ratings as NaN count 0)."""
    per_slot = v.zeta * (v.nu_next - v.nu) - objective.alpha_zeta * penalty(v.zeta, objective.zeta_penalty)
    if objective.normalise:
        per_slot = per_slot + lam.unsqueeze(0) * (v.zeta - 1.0)
    if objective.alpha_nu:
        per_slot = per_slot + objective.alpha_nu * penalty(v.nu, objective.zeta_penalty)
    loss = per_slot.mean()
    if objective.alpha_r:
        if reward is None:
            raise ValueError("alpha_r > 0 needs a reward per dialogue")
        loss = loss + objective.alpha_r * (v.zeta_last * torch.nan_to_num(reward, nan=0.0)).mean()
    return loss
