"""The gradient descent-ascent solver (``dice.solver: gda``): one optimiser minimises the
Lagrangian after a gradient reversal on zeta, so the players differ only in their learning-rate
scales (zeta / nu / lambda / a fine-tuned encoder). With ``optimizer: sgd`` and zeta the slower
player this is two-timescale gradient descent-ascent; ``optimistic`` feeds ``2 g_t - g_{t-1}``
instead of ``g_t``. The solution's weights are averaged over the last ``average_last`` of the
steps (the last iterate of a saddle-point method oscillates); a stopping rule (``stop_window``)
ends the run once the per-slot mass and the estimates are stable.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from tqdm.auto import tqdm

from enigma.encoders.base import PairEncoder
from enigma.ope.config import GdaConfig, ObjectiveConfig
from enigma.ope.diagnostics import curve_row
from enigma.ope.features import Features
from enigma.ope.guards import check_row
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import lagrangian, slot_values
from enigma.ope.problem import DiceData
from enigma.ope.solution import Solution


def solve_gda(
    encoder: PairEncoder,
    prepared: Any,
    heads: DiceHeads,
    feats: Features,
    data: DiceData,
    solver: GdaConfig,
    objective: ObjectiveConfig,
    *,
    seed: int = 0,
    eval_batch_size: int = 512,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
) -> Solution:
    """Train ``heads`` (and a fine-tuned ``encoder``'s trainable weights) on all dialogues of
    ``data``; ``reward_index`` selects the rating that enters the objective when
    ``objective.alpha_r > 0``; ``seed``: the batches' order; ``eval_batch_size``: the diagnostics' passes."""
    device = feats.device
    groups = [
        {"params": heads.zeta_parameters(), "lr": solver.lr * solver.lr_scale_zeta},
        {"params": heads.nu_parameters(), "lr": solver.lr * solver.lr_scale_nu},
        {"params": [heads.lam], "lr": solver.lr * solver.lr_scale_lambda},
    ]
    enc_params = [p for p in encoder.parameters() if p.requires_grad]
    if enc_params:
        groups.append({"params": enc_params, "lr": solver.lr * solver.lr_scale_encoder})
    if solver.optimizer == "adamw":
        opt: torch.optim.Optimizer = torch.optim.AdamW(groups, betas=solver.adam_betas, eps=solver.adam_eps, weight_decay=solver.weight_decay)
    else:
        opt = torch.optim.SGD(groups, weight_decay=solver.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(solver))
    all_params = [p for g in groups for p in g["params"]]
    prev_grads: list[torch.Tensor | None] = [None] * len(all_params)

    n = len(data.dialog_ids)
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.as_tensor(data.rewards, dtype=torch.float32)
    n_turns, mask = data.n_agent_turns.to(device), data.sample_mask.to(device)
    full_batch = solver.batch_size is None or solver.batch_size >= n
    avg_start = int(solver.steps * (1 - solver.average_last)) if solver.average_last > 0 else solver.steps
    averaged_modules: list[torch.nn.Module] = [heads] + ([encoder] if enc_params else [])
    averager: Averager | None = None
    curve: list[dict[str, Any]] = []
    perm, pos = torch.randperm(n, generator=gen), 0

    bar = tqdm(range(solver.steps), desc=desc, disable=not progress, leave=False)
    step = 0
    for step in bar:
        if full_batch:
            idx = None
        else:
            if pos + solver.batch_size > n:
                perm, pos = torch.randperm(n, generator=gen), 0
            idx, pos = perm[pos : pos + solver.batch_size], pos + solver.batch_size
        logged, target = feats(idx)
        if idx is None:
            b_mask, b_turns, b_reward = mask, n_turns, rewards
        else:
            dev_idx = idx.to(device)
            b_mask, b_turns, b_reward = mask[dev_idx], n_turns[dev_idx], rewards[idx]
        v = slot_values(heads, logged, target, b_mask, b_turns, reverse_zeta=True, slot_normalise=solver.slot_normalise)
        reward = b_reward[:, reward_index].to(device) if objective.alpha_r else None
        loss = lagrangian(v, heads.lam, objective, reward)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if solver.optimistic:
            for i, p in enumerate(all_params):
                if p.grad is None:
                    continue
                g = p.grad.detach().clone()
                if prev_grads[i] is not None:
                    p.grad.mul_(2).sub_(prev_grads[i])
                prev_grads[i] = g
        if solver.clip_norm:
            torch.nn.utils.clip_grad_norm_(all_params, solver.clip_norm)
        opt.step()
        sched.step()
        if step + 1 > avg_start:
            if averager is None:
                averager = Averager(averaged_modules)
            else:
                averager.update()

        if (step + 1) % solver.log_every == 0 or step + 1 == solver.steps:
            row = curve_row(step + 1, float(loss.detach()), heads, feats, data, eval_batch_size=eval_batch_size,
                           slot_normalise=solver.slot_normalise)
            curve.append(row)
            check_row(row, solver)
            bar.set_postfix(zeta=f"{row['zeta_mean']:.3f}", ess=f"{row['ess']:.0f}")
            if solver.stop_window and converged(curve, solver):
                break
    bar.close()

    if averager is not None:
        final_heads = copy.deepcopy(heads)
        if enc_params:
            encoder_copy = copy.deepcopy(encoder)
            averager.load_into([final_heads, encoder_copy])
            feats = feats.with_encoder(encoder_copy, data)
        else:
            averager.load_into([final_heads])
    else:
        final_heads = heads
    return Solution(final_heads, feats, step + 1, curve)


class Averager:
    """Running mean of the trainable weights over the tail of the run."""

    def __init__(self, modules: list[torch.nn.Module]):
        self.modules = modules
        self.count = 1
        self.sums = [
            {k: v.detach().clone().float() for k, v in m.state_dict().items() if v.is_floating_point()} for m in modules
        ]

    def update(self) -> None:
        self.count += 1
        for m, avg in zip(self.modules, self.sums):
            for k, v in m.state_dict().items():
                if k in avg:
                    avg[k] += (v.detach().float() - avg[k]) / self.count

    def load_into(self, modules: list[torch.nn.Module]) -> None:
        for m, avg in zip(modules, self.sums):
            state = m.state_dict()
            state.update({k: v.to(state[k].dtype) for k, v in avg.items()})
            m.load_state_dict(state)



def _lr_lambda(solver: GdaConfig):
    if solver.schedule == "constant":
        return lambda step: 1.0
    w = solver.warmup_steps

    def inv_sqrt(step: int) -> float:
        s = step + 1
        if w == 0:
            return 1.0 / math.sqrt(s)
        return min(s / w, math.sqrt(w / s))

    return inv_sqrt



def converged(curve: list[dict[str, Any]], solver: GdaConfig) -> bool:
    """The stopping rule: over the last ``stop_window`` steps (at least), every slot's E_D[zeta]
    stayed within 1 +- ``stop_slot_tol`` and no rating's estimate moved more than
    ``stop_estimate_tol``."""
    last = curve[-1]["step"]
    if last < solver.stop_min_steps or curve[0]["step"] > last - solver.stop_window:
        return False
    window = [r for r in curve if r["step"] >= last - solver.stop_window]
    slots = [v for r in window for k, v in r.items() if k.startswith("zeta_slot_")]
    if any(abs(v - 1) > solver.stop_slot_tol for v in slots):
        return False
    for key in (k for k in window[-1] if k.startswith("estimate_")):
        vals = [r[key] for r in window if math.isfinite(r[key])]
        if vals and max(vals) - min(vals) > solver.stop_estimate_tol:
            return False
    return True
