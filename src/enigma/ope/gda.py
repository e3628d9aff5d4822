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
from enigma.ope.config import DiceConfig
from enigma.ope.diagnostics import curve_row
from enigma.ope.features import Features
from enigma.ope.guards import check_row
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import lagrangian, slot_values
from enigma.ope.problem import DiceData, Solution


def solve_gda(
    encoder: PairEncoder,
    prepared: Any,
    heads: DiceHeads,
    feats: Features,
    data: DiceData,
    cfg: DiceConfig,
    *,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
) -> Solution:
    """Train ``heads`` (and a fine-tuned ``encoder``'s trainable weights) on all dialogues of
    ``data``; ``reward_index`` selects the rating that enters the objective when ``cfg.alpha_r > 0``."""
    device = feats.device
    groups = [
        {"params": heads.zeta_parameters(), "lr": cfg.lr * cfg.lr_scale_zeta},
        {"params": heads.nu_parameters(), "lr": cfg.lr * cfg.lr_scale_nu},
        {"params": [heads.lam], "lr": cfg.lr * cfg.lr_scale_lambda},
    ]
    enc_params = [p for p in encoder.parameters() if p.requires_grad]
    if enc_params:
        groups.append({"params": enc_params, "lr": cfg.lr * cfg.lr_scale_encoder})
    if cfg.optimizer == "adamw":
        opt: torch.optim.Optimizer = torch.optim.AdamW(groups, betas=cfg.adam_betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.SGD(groups, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg))
    all_params = [p for g in groups for p in g["params"]]
    prev_grads: list[torch.Tensor | None] = [None] * len(all_params)

    n = len(data.dialog_ids)
    gen = torch.Generator().manual_seed(cfg.seed)
    rewards = torch.as_tensor(data.rewards, dtype=torch.float32)
    n_turns, mask = data.n_agent_turns.to(device), data.sample_mask.to(device)
    full_batch = cfg.batch_size is None or cfg.batch_size >= n
    avg_start = int(cfg.steps * (1 - cfg.average_last)) if cfg.average_last > 0 else cfg.steps
    averaged_modules: list[torch.nn.Module] = [heads] + ([encoder] if enc_params else [])
    averager: Averager | None = None
    curve: list[dict[str, Any]] = []
    perm, pos = torch.randperm(n, generator=gen), 0

    bar = tqdm(range(cfg.steps), desc=desc, disable=not progress, leave=False)
    step = 0
    for step in bar:
        if full_batch:
            idx = None
        else:
            if pos + cfg.batch_size > n:
                perm, pos = torch.randperm(n, generator=gen), 0
            idx, pos = perm[pos : pos + cfg.batch_size], pos + cfg.batch_size
        logged, target = feats(idx)
        if idx is None:
            b_mask, b_turns, b_reward = mask, n_turns, rewards
        else:
            dev_idx = idx.to(device)
            b_mask, b_turns, b_reward = mask[dev_idx], n_turns[dev_idx], rewards[idx]
        v = slot_values(heads, logged, target, b_mask, b_turns, reverse_zeta=True, slot_normalise=cfg.slot_normalise)
        reward = b_reward[:, reward_index].to(device) if cfg.alpha_r else None
        loss = lagrangian(v, heads.lam, cfg, reward)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.optimistic:
            for i, p in enumerate(all_params):
                if p.grad is None:
                    continue
                g = p.grad.detach().clone()
                if prev_grads[i] is not None:
                    p.grad.mul_(2).sub_(prev_grads[i])
                prev_grads[i] = g
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(all_params, cfg.clip_norm)
        opt.step()
        sched.step()
        if step + 1 > avg_start:
            if averager is None:
                averager = Averager(averaged_modules)
            else:
                averager.update()

        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            row = curve_row(step + 1, float(loss.detach()), heads, feats, data, cfg)
            curve.append(row)
            check_row(row, cfg)
            bar.set_postfix(zeta=f"{row['zeta_mean']:.3f}", ess=f"{row['ess']:.0f}")
            if cfg.stop_window and converged(curve, cfg):
                break
    bar.close()

    if averager is not None:
        final_heads = copy.deepcopy(heads)
        if enc_params:
            encoder_copy = copy.deepcopy(encoder)
            averager.load_into([final_heads, encoder_copy])
            feats = Features(encoder_copy, prepared, data, device, cfg)
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



def _lr_lambda(cfg: DiceConfig):
    if cfg.schedule == "constant":
        return lambda step: 1.0
    w = cfg.warmup_steps

    def inv_sqrt(step: int) -> float:
        s = step + 1
        if w == 0:
            return 1.0 / math.sqrt(s)
        return min(s / w, math.sqrt(w / s))

    return inv_sqrt



def converged(curve: list[dict[str, Any]], cfg: DiceConfig) -> bool:
    """The stopping rule: over the last ``stop_window`` steps (at least), every slot's E_D[zeta]
    stayed within 1 +- ``stop_slot_tol`` and no rating's estimate moved more than
    ``stop_estimate_tol``."""
    last = curve[-1]["step"]
    if last < cfg.stop_min_steps or curve[0]["step"] > last - cfg.stop_window:
        return False
    window = [r for r in curve if r["step"] >= last - cfg.stop_window]
    slots = [v for r in window for k, v in r.items() if k.startswith("zeta_slot_")]
    if any(abs(v - 1) > cfg.stop_slot_tol for v in slots):
        return False
    for key in (k for k in window[-1] if k.startswith("estimate_")):
        vals = [r[key] for r in window if math.isfinite(r[key])]
        if vals and max(vals) - min(vals) > cfg.stop_estimate_tol:
            return False
    return True
