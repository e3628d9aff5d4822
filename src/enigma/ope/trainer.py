"""Training the DICE heads (and a fine-tuned encoder, if any) on padded dialogues.

One optimiser minimises the Lagrangian after a gradient reversal on zeta; the three players
differ only in their learning-rate scales (zeta / nu / lambda / encoder). With ``optimizer:
sgd`` and zeta the slower player this is two-timescale gradient descent-ascent; ``optimistic``
feeds ``2 g_t - g_{t-1}`` instead of ``g_t``. The final estimate comes from a pass over all
dialogues with the weights averaged over the last ``average_last`` of the steps (the last
iterate of a saddle-point method oscillates).

Every ``log_every`` steps a pass over all dialogues records the diagnostics (E_D[zeta] overall
and per slot, ESS, the estimate of every rating, the Lagrangian, lambda); a run whose numbers
are NaN, whose zeta collapses to 0 or explodes stops with ``DiceDivergence``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from enigma.encoders.base import PairEncoder
from enigma.ope.config import DiceConfig
from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.guards import DiceDivergence, check_row, check_zeta
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import lagrangian, slot_values


@dataclass
class DiceData:
    """Everything but the encoder input: per dialogue its number of agent turns, which target
    samples exist, and its ratings."""

    dialog_ids: list[str]
    n_agent_turns: torch.Tensor  # [N] long
    sample_mask: torch.Tensor  # [N, K, S] bool
    rewards: np.ndarray  # [N, R] float, NaN where missing
    rating_names: list[str]

    def __post_init__(self) -> None:
        n = len(self.dialog_ids)
        if self.n_agent_turns.shape != (n,) or self.sample_mask.shape[0] != n or self.rewards.shape != (n, len(self.rating_names)):
            raise ValueError("DiceData: dialog_ids, n_agent_turns, sample_mask and rewards disagree in size")
        empty = (self.sample_mask.sum(-1) == 0) & (
            torch.arange(self.sample_mask.shape[1]).unsqueeze(0) < self.n_agent_turns.unsqueeze(1)
        )
        if bool(empty.any()):
            i, k = (int(x) for x in empty.nonzero()[0])
            raise ValueError(f"dialogue {self.dialog_ids[i]}: agent turn {k} has no target reply")


@dataclass
class DiceRun:
    estimates: dict[str, dict[str, float]]
    zeta_last: np.ndarray  # [N] at the final (averaged) weights
    slot_means: np.ndarray  # [Tmax] E_D[zeta] per slot position
    lam: np.ndarray
    nu_pad: np.ndarray
    ess: float
    steps_run: int
    curve: list[dict[str, Any]] = field(default_factory=list)  # the learning-curve table
    heads: DiceHeads | None = None
    solver: dict[str, Any] = field(default_factory=dict)  # exact_nu: iterations, final gradient, converged

    def diagnostics(self) -> dict[str, Any]:
        return {
            "ess": self.ess,
            "ess_share": self.ess / max(len(self.zeta_last), 1),
            "zeta_mean": float(np.mean(self.zeta_last)) if len(self.zeta_last) else float("nan"),
            "slot_zeta_mean": [float(x) for x in self.slot_means],
            "lambda": [float(x) for x in self.lam],
            "nu_pad_minus_slot0": [float(x - self.nu_pad[0]) for x in self.nu_pad],
            "steps": self.steps_run,
            **self.solver,
        }


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("dice.device is 'cuda' but no CUDA device is available")
    return torch.device(name)


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


class _Features:
    """Encoder outputs for index batches; a frozen encoder's outputs are computed once."""

    def __init__(self, encoder: PairEncoder, prepared: Any, n: int, device: torch.device, cfg: DiceConfig):
        self.encoder, self.prepared, self.device, self.n = encoder, prepared, device, n
        self.trainable = any(p.requires_grad for p in encoder.parameters())
        self.autocast = device.type == "cuda" and self.trainable
        self.cache: tuple[torch.Tensor, torch.Tensor] | None = None
        self.dim = encoder.dim
        if not self.trainable:
            parts = [self._run(torch.arange(i, min(i + cfg.eval_batch_size, n))) for i in range(0, n, cfg.eval_batch_size)]
            self.cache = (torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))
            keep = getattr(encoder, "passthrough_dim", 0)  # trailing features the PCA leaves alone
            if cfg.project_dim and cfg.project_dim < self.dim - keep:
                logged, target = self.cache
                cut = self.dim - keep
                pl, pt = self._project(logged[..., :cut], target[..., :cut], cfg.project_dim, cfg.seed)
                self.cache = (torch.cat([pl, logged[..., cut:]], -1), torch.cat([pt, target[..., cut:]], -1))
                self.dim = cfg.project_dim + keep

    @staticmethod
    def _project(logged: torch.Tensor, target: torch.Tensor, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Fixed, whitened PCA projection of frozen features onto their top ``k`` directions (fitted on
        the logged and target vectors of real turns): lower-capacity, much cheaper heads."""
        flat = torch.cat([logged.reshape(-1, logged.shape[-1]), target.reshape(-1, target.shape[-1])])
        rows = flat[flat.abs().sum(-1) > 0]
        mean = rows.mean(0)
        torch.manual_seed(seed)
        _, sv, v = torch.pca_lowrank(rows - mean, q=k, center=False)
        # Whitened: unit variance per direction, so one learning rate suits every input scale.
        w = v / (sv / max(len(rows) - 1, 1) ** 0.5).clamp(min=1e-6)
        return (logged - mean) @ w, (target - mean) @ w

    def _run(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            logged, target = self.encoder(self.prepared, index)
        return logged.float().to(self.device), target.float().to(self.device)

    def __call__(self, index: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``index`` None means every dialogue (no copy of a cached table)."""
        if self.cache is not None:
            if index is None:
                return self.cache
            i = index.to(self.cache[0].device)
            return self.cache[0][i], self.cache[1][i]
        return self._run(torch.arange(self.n) if index is None else index)


class _Averager:
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


@torch.no_grad()
def evaluate(heads: DiceHeads, feats: _Features, data: DiceData, cfg: DiceConfig) -> dict[str, Any]:
    """One pass over all dialogues: zeta per slot and at the last agent turn."""
    n = len(data.dialog_ids)
    zetas = []
    for i in range(0, n, cfg.eval_batch_size):
        idx = torch.arange(i, min(i + cfg.eval_batch_size, n))
        logged, target = feats(idx)
        v = slot_values(heads, logged, target, data.sample_mask[idx].to(feats.device), data.n_agent_turns[idx].to(feats.device))
        zetas.append(v.zeta.float().cpu())
    zeta_t = torch.cat(zetas)
    if cfg.slot_normalise:  # normalised over all dialogues, as training does per batch
        zeta_t = zeta_t / zeta_t.mean(0, keepdim=True).clamp(min=1e-12)
    zeta = zeta_t.numpy()
    last = zeta_t.gather(1, data.n_agent_turns.long().unsqueeze(1)).squeeze(1).numpy()
    return {"slot_means": zeta.mean(0), "zeta_last": last, "zeta_mean": float(zeta.mean())}


def train_dice(
    encoder: PairEncoder,
    prepared: Any,
    data: DiceData,
    cfg: DiceConfig,
    *,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
) -> DiceRun:
    """Train on all dialogues of ``data``; ``reward_index`` selects the rating that enters
    the objective when ``cfg.alpha_r > 0``."""
    if cfg.alpha_r and reward_index is None:
        raise ValueError("alpha_r > 0: train once per rating (pass reward_index)")
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    n = len(data.dialog_ids)
    encoder = encoder.to(device)
    feats = _Features(encoder, prepared, n, device, cfg)
    heads = DiceHeads(feats.dim, cfg.head_hidden, cfg.tmax, cfg.zeta_activation, cfg.lambda_per_slot).to(device)
    if cfg.solver == "exact_nu":
        return _train_exact_nu(heads, feats, data, cfg, reward_index, progress, desc)

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

    rewards = torch.as_tensor(data.rewards, dtype=torch.float32)
    n_turns, mask = data.n_agent_turns.to(device), data.sample_mask.to(device)
    full_batch = cfg.batch_size is None or cfg.batch_size >= n
    avg_start = int(cfg.steps * (1 - cfg.average_last)) if cfg.average_last > 0 else cfg.steps
    averaged_modules: list[torch.nn.Module] = [heads] + ([encoder] if enc_params else [])
    averager: _Averager | None = None
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
                averager = _Averager(averaged_modules)
            else:
                averager.update()

        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            row = _diagnostics_row(step + 1, float(loss.detach()), heads, feats, data, cfg)
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
            feats = _Features(encoder_copy, prepared, n, device, cfg)
        else:
            averager.load_into([final_heads])
    else:
        final_heads = heads
    return _final_run(final_heads, feats, data, cfg, step + 1, curve)


def _final_run(
    heads: DiceHeads, feats: _Features, data: DiceData, cfg: DiceConfig, steps_run: int, curve: list[dict[str, Any]],
    solver: dict[str, Any] | None = None,
) -> DiceRun:
    """The final pass over all dialogues at the final weights, guarded, as a ``DiceRun``."""
    ev = evaluate(heads, feats, data, cfg)
    check_zeta("final pass", ev["zeta_mean"], cfg, ev["zeta_last"])
    return DiceRun(
        estimates=rating_estimates(ev["zeta_last"], data.rewards, data.rating_names),
        zeta_last=ev["zeta_last"],
        slot_means=ev["slot_means"],
        lam=heads.lam.detach().float().cpu().numpy(),
        nu_pad=heads.nu_pad.detach().float().cpu().numpy(),
        ess=effective_sample_size(ev["zeta_last"]),
        steps_run=steps_run,
        curve=curve,
        heads=heads,
        solver=solver or {},
    )


def _train_exact_nu(
    heads: DiceHeads, feats: _Features, data: DiceData, cfg: DiceConfig, reward_index: int | None, progress: bool, desc: str
) -> DiceRun:
    from enigma.ope.exact_nu import solve_exact_nu

    if feats.cache is None:
        raise ValueError(
            "dice.solver exact_nu needs fixed features (encoder onehot, or frozen without a trainable "
            "projection); a fine-tuned encoder trains through nu: use solver gda"
        )
    logged, target = feats(None)
    heads, curve, summary = solve_exact_nu(heads, logged, target, data, cfg, reward_index=reward_index, progress=progress, desc=desc)
    return _final_run(heads, feats, data, cfg, summary["iterations"], curve, summary)


def _diagnostics_row(step: int, loss: float, heads: DiceHeads, feats: _Features, data: DiceData, cfg: DiceConfig) -> dict[str, Any]:
    ev = evaluate(heads, feats, data, cfg)
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
