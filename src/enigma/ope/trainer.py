"""Training DICE on padded dialogues: the features (``features``), the heads, one of the two
solvers (``gda``: gradient descent-ascent, any encoder; ``exact_nu``: nu in closed form, fixed
features) and a final pass over all dialogues at the solution's weights, guarded, whose zeta at
each dialogue's last agent turn gives every rating's estimate (``DiceRun``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from enigma.encoders.base import PairEncoder
from enigma.ope.bootstrap import bootstrap_estimates, percentile_interval
from enigma.ope.config import DiceConfig, ExactNuConfig
from enigma.ope.diagnostics import evaluate
from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.exact_nu import solve_exact_nu
from enigma.ope.features import Features
from enigma.ope.fqe import TurnQ, fit_turn_q
from enigma.ope.gda import solve_gda
from enigma.ope.guards import check_zeta, dr_balance_problem
from enigma.ope.heads import DiceHeads
from enigma.ope.value import value_estimates
from enigma.ope.problem import DiceData


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
    intervals: dict[str, list[float] | None] = field(default_factory=dict)  # rating -> [low, high] (bootstrap)
    bootstrap: dict[str, Any] = field(default_factory=dict)  # resamples, converged share, standard errors
    draws: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # rating -> the resamples' estimates

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
            **({"bootstrap": self.bootstrap} if self.bootstrap else {}),
        }


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("dice.device is 'cuda' but no CUDA device is available")
    return torch.device(name)


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
    the objective when ``alpha_r > 0``. The whole config is handed out here, each part to its module."""
    if cfg.objective.alpha_r and reward_index is None:
        raise ValueError("alpha_r > 0: train once per rating (pass reward_index)")
    device = pick_device(cfg.device)
    # the seed before the features (a PCA projection draws) and the heads' initial weights
    torch.manual_seed(cfg.seed)
    encoder = encoder.to(device)
    feats = Features(encoder, prepared, data, device, cfg.frozen, tmax=cfg.tmax, seed=cfg.seed,
                     eval_batch_size=cfg.eval_batch_size, q_project_dim=cfg.q_project_dim)
    obj, solver = cfg.objective, cfg.solver
    heads = DiceHeads(feats.dim, solver.head_hidden, cfg.tmax, obj.zeta_activation, obj.lambda_per_slot).to(device)
    if isinstance(solver, ExactNuConfig):
        sol = solve_exact_nu(heads, feats, data, solver, obj, reward_index=reward_index, progress=progress, desc=desc)
    else:
        sol = solve_gda(encoder, prepared, heads, feats, data, solver, obj, seed=cfg.seed, eval_batch_size=cfg.eval_batch_size,
                        reward_index=reward_index, progress=progress, desc=desc)
    run = final_run(sol.heads, sol.features, data, cfg, sol.steps, sol.curve, sol.summary)
    turn_q = add_values(run, sol.features, data, cfg)
    if cfg.interval.resamples:
        add_intervals(run, sol.features, data, cfg, reward_index=reward_index, desc=desc, progress=progress, turn_q=turn_q)
    return run


def add_values(run: DiceRun, feats: Features, data: DiceData, cfg: DiceConfig) -> TurnQ | None:
    """The value three ways (``enigma.ope.value``) into the diagnostics, for heads on fixed
    features; ``dice.value`` picks the one reported as each rating's estimate. Returns the fitted
    Q at the real turns when ``dice.q_model`` is fqe (the bootstrap keeps it)."""
    if feats.turns is None:
        return None
    turn_q = None
    value = cfg.applied_value
    if value.q_model == "fqe":
        if feats.q_turns is not None:  # fqe.project_dim: its own text features (and grounding), no agreement block
            turn_q = fit_turn_q(feats.q_turns, data.rewards, value.fqe, cfg.seed)
        else:
            columns = None if value.fqe.agreement else slice(0, feats.text_dim + feats.pair_dim)
            turn_q = fit_turn_q(feats.turns, data.rewards, value.fqe, cfg.seed, columns=columns)
    values = value_estimates(run.heads, feats.turns, data, cfg.tmax, value.q_ridge, turn_q, cfg.solver.slot_normalise,
                             lstd_residual=value.fqe.lstd_residual, zeta_cap=value.dr_zeta_cap)
    run.solver["values"] = values
    if value.kind != "weighted":  # weighted is the final pass's own estimate already
        for name, v in values.items():
            run.estimates[name]["estimate"] = v[value.kind]
    problem = dr_balance_problem(run.slot_means, value)
    if problem is not None:
        run.solver.update(converged=False, why=problem)
    return turn_q


def add_intervals(run: DiceRun, feats: Features, data: DiceData, cfg: DiceConfig, *, reward_index: int | None, desc: str,
                  progress: bool = False, turn_q: TurnQ | None = None) -> None:
    """The bootstrap's percentile interval of every rating's estimate (``enigma.ope.bootstrap``)."""
    if feats.turns is None:
        raise ValueError("dice.interval_resamples needs fixed features (the bootstrap refits on them)")
    if not isinstance(cfg.solver, ExactNuConfig):
        raise ValueError("dice.interval_resamples needs solver exact_nu (each resample is refitted from the full fit)")
    boot = bootstrap_estimates(run.heads, feats.turns, data, solver=cfg.solver, objective=cfg.objective, interval=cfg.interval,
                               value=cfg.applied_value, seed=cfg.seed, reward_index=reward_index, warm_mu=run.solver.get("mu"), desc=desc,
                               progress=progress, turn_q=turn_q)
    run.draws = boot["draws"]
    run.intervals = {r: percentile_interval(d, cfg.interval.level) for r, d in boot["draws"].items()}
    run.bootstrap = {
        "method": "dialogue bootstrap, percentile; each resample refitted from the full fit",
        "resamples": cfg.interval.resamples, "level": cfg.interval.level, "seed": cfg.seed,
        "failed": boot["failed"], "unconverged": boot["unconverged"], "mass_gap_max": boot["mass_gap_max"],
        "mean_iterations": boot["mean_iterations"],
        "se": {r: float(np.std(d, ddof=1)) if len(d) > 1 else None for r, d in boot["draws"].items()},
    }


def final_run(
    heads: DiceHeads, feats: Features, data: DiceData, cfg: DiceConfig, steps_run: int, curve: list[dict[str, Any]],
    solver: dict[str, Any] | None = None,
) -> DiceRun:
    """The final pass over all dialogues at the final weights, guarded, as a ``DiceRun``."""
    ev = evaluate(heads, feats, data, eval_batch_size=cfg.eval_batch_size, slot_normalise=cfg.solver.slot_normalise)
    check_zeta("final pass", ev["zeta_mean"], cfg.solver, ev["zeta_last"])
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
