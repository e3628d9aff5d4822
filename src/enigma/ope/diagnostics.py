"""The DICE weights' diagnostics: a pass over all dialogues at the current weights (zeta per slot
and at each dialogue's last agent turn) and the learning-curve row recorded every ``log_every``
steps (E_D[zeta] overall and per slot, ESS, lambda, nu at the pseudo slots, every rating's
estimate). The guards that stop a diverged run are in ``guards``."""

from __future__ import annotations

from typing import Any

import torch

from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.features import Features
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import slot_values
from enigma.ope.problem import DiceData


@torch.no_grad()
def evaluate(heads: DiceHeads, feats: Features, data: DiceData, *, eval_batch_size: int, slot_normalise: bool) -> dict[str, Any]:
    """One pass over all dialogues, ``eval_batch_size`` at a time: zeta per slot and at the last
    agent turn (``slot_normalise``: as the gda solver trained it, divided by its mean per slot)."""
    n = len(data.dialog_ids)
    zetas = []
    for i in range(0, n, eval_batch_size):
        idx = torch.arange(i, min(i + eval_batch_size, n))
        logged, target = feats(idx)
        v = slot_values(heads, logged, target, data.sample_mask[idx].to(feats.device), data.n_agent_turns[idx].to(feats.device))
        zetas.append(v.zeta.float().cpu())
    zeta_t = torch.cat(zetas)
    if slot_normalise:  # normalised over all dialogues, as training does per batch
        zeta_t = zeta_t / zeta_t.mean(0, keepdim=True).clamp(min=1e-12)
    zeta = zeta_t.numpy()
    last = zeta_t.gather(1, data.n_agent_turns.long().unsqueeze(1)).squeeze(1).numpy()
    return {"slot_means": zeta.mean(0), "zeta_last": last, "zeta_mean": float(zeta.mean())}


def curve_row(step: int, loss: float, heads: DiceHeads, feats: Features, data: DiceData, *, eval_batch_size: int,
              slot_normalise: bool) -> dict[str, Any]:
    ev = evaluate(heads, feats, data, eval_batch_size=eval_batch_size, slot_normalise=slot_normalise)
    row: dict[str, Any] = {"step": step, "loss": loss, "zeta_mean": ev["zeta_mean"]}
    lam = heads.lam.detach().float().cpu().numpy()
    row["lambda"] = float(lam.mean())
    row["ess"] = effective_sample_size(ev["zeta_last"])
    row["ess_share"] = row["ess"] / max(len(ev["zeta_last"]), 1)
    for j, m in enumerate(ev["slot_means"]):
        row[f"zeta_slot_{j}"] = float(m)
    nu_pad = heads.nu_pad.detach().float().cpu().numpy()
    for j in range(1, len(nu_pad)):
        row[f"nu_pad_{j}"] = float(nu_pad[j] - nu_pad[0])
    for name, e in rating_estimates(ev["zeta_last"], data.rewards, data.rating_names).items():
        row[f"estimate_{name}"] = e["estimate"]
    return row
