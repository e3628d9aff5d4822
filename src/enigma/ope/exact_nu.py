"""DICE with nu solved exactly (``dice.solver: exact_nu``): a minimisation, not a min-max.

Why. With fixed features and a linear nu head, the Lagrangian is linear in nu. Without a
penalty on nu its minimum over nu is minus infinity unless zeta meets every flow constraint of
the feature span exactly, which a zeta head of its own cannot in general: gradient
descent-ascent then has no saddle point to reach, and on the airline benchmark it did not
(lambda and nu kept drifting; benchmarks/results/ope_convergence.md). A penalty
``alpha_nu E_D[nu^2]`` (the primal regulariser of Yang et al. 2020) makes the nu problem
strictly convex, and being quadratic it can be solved in closed form at every zeta.

How. At slot t of a padded dialogue nu is linear in a fixed vector:
``nu_t = u . psi_t`` with ``psi_t = [phi_t, 1, 0]`` at a real agent turn (phi: the pair's
features) and ``[0, 0, e_t]`` at a pseudo slot (its own scalar). The successor's value at the
target's action is ``u . psi'_t`` likewise (phi averaged over the target's sampled replies).
So the nu part of the Lagrangian is

    E[zeta_t (nu'_t - nu_t)] + alpha_nu E[nu_t^2] = u . g(zeta) + alpha_nu u' C u,
    g(zeta) = E[zeta_t (psi'_t - psi_t)],   C = E[psi_t psi_t'],

whose minimum is ``-g' C^-1 g / (4 alpha_nu)`` at ``u* = -C^-1 g / (2 alpha_nu)``. zeta is
divided by its mean per slot position (every slot carries 1/Tmax of the padded mass), so the
lambda constraint holds exactly and lambda drops out. What is left is one smooth problem in
zeta's parameters, bounded below:

    minimise F(zeta) = g' C^-1 g / (4 alpha_nu) + alpha_zeta E[f(zeta)] - alpha_R E[zeta_T r]

(F is minus the Lagrangian at its inner optimum). Damped Newton steps (Levenberg-Marquardt,
exact Hessian by ``torch.func``; zeta's parameters are few) descend ``4 alpha_nu F`` (the same
minimiser; its curvature does not grow as alpha_nu shrinks, so one gradient tolerance means the
same at every alpha_nu) monotonically; the run has converged when its largest partial
derivative falls under ``solver_tol``. L-BFGS was tried first: on the airline features it
needed thousands of iterations at alpha_nu 0.1 and stalled short of the tolerance at 0.01. The learning curve records F's gradient and the flow residual
``sqrt(g' C^-1 g)`` (how far zeta is from the flow constraints, in units of RMS nu).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from tqdm.auto import tqdm

from enigma.ope.config import DiceConfig
from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.heads import DiceHeads, zeta_activation
from enigma.ope.objective import penalty
from enigma.ope.padding import real_mask, to_slots

# Newton steps solve a system in zeta's parameters (features + bias + one per slot); the
# default text features (32 PCA dimensions + 15 agreement features) give 63
MAX_PARAMS = 1024

log = logging.getLogger(__name__)


def flow_design(
    logged: torch.Tensor, target: torch.Tensor, sample_mask: torch.Tensor, n_agent_turns: torch.Tensor, tmax: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``psi`` [N, Tmax, D] (nu's basis at the logged action of each slot) and ``delta`` [N, Tmax, D]
    (``psi'_t - psi_t``, psi' at the successor slot with the target's action), D = d + 1 + Tmax.
    ``logged`` [N, K, d], ``target`` [N, K, S, d], ``sample_mask`` [N, K, S]."""
    n, k, d = logged.shape
    m = sample_mask.to(target.dtype).unsqueeze(-1)
    target_mean = (target * m).sum(2) / m.sum(2).clamp(min=1)  # nu is linear: mean of nu = nu of mean
    real = real_mask(n_agent_turns, tmax).unsqueeze(-1)  # [N, Tmax, 1]
    pad_basis = torch.zeros(tmax, d + 1 + tmax, dtype=logged.dtype, device=logged.device)
    pad_basis[:, d + 1 :] = torch.eye(tmax, dtype=logged.dtype, device=logged.device)

    def lay(per_turn: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(n, tmax, d + 1 + tmax, dtype=logged.dtype, device=logged.device)
        out[:, 1 : k + 1, :d] = per_turn
        out[:, 1 : k + 1, d] = 1.0
        return torch.where(real, out, pad_basis.unsqueeze(0))

    psi = lay(logged)
    successor = torch.roll(lay(target_mean), shifts=-1, dims=1)  # slot t's successor is t+1 (cyclic)
    return psi, successor - psi


def solve_exact_nu(
    heads: DiceHeads,
    logged: torch.Tensor,
    target: torch.Tensor,
    data: Any,
    cfg: DiceConfig,
    *,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
) -> tuple[DiceHeads, list[dict[str, Any]], dict[str, Any]]:
    """Fit zeta's parameters of ``heads`` by minimising F on fixed features (all dialogues at
    once). Returns the heads (float32, nu set to its exact optimum u*), the learning curve and
    the solver's summary (iterations, final gradient, converged)."""
    device = logged.device
    dt = torch.float64  # F is minimised to a tight gradient tolerance: float32 stalls first
    logged, target = logged.to(dt), target.to(dt)
    mask, n_turns = data.sample_mask.to(device), data.n_agent_turns.to(device)
    psi, delta = flow_design(logged, target, mask, n_turns, cfg.tmax)
    slots = psi.shape[0] * psi.shape[1]
    second = torch.einsum("ntd,nte->de", psi, psi) / slots
    # A tiny ridge keeps directions no logged slot spans (a pseudo slot that is never padding)
    # solvable; g has no component there, so it changes nothing else.
    ridge = 1e-9 * float(second.diagonal().mean()) + 1e-12
    chol = torch.linalg.cholesky(second + ridge * torch.eye(second.shape[0], dtype=dt, device=device))
    reward = None
    if cfg.alpha_r:
        reward = torch.nan_to_num(torch.as_tensor(data.rewards[:, reward_index], dtype=dt, device=device), nan=0.0)

    d = logged.shape[-1]
    n_params = d + 1 + cfg.tmax
    if n_params > MAX_PARAMS:
        raise ValueError(
            f"solver exact_nu takes Newton steps on zeta's {n_params} parameters (at most {MAX_PARAMS}): "
            "set dice.project_dim to shrink the features, or use solver gda"
        )
    real = real_mask(n_turns, cfg.tmax)

    def parts_of(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """4 alpha_nu F, zeta [N, Tmax] (normalised per slot), C^-1 g and the flow term g' C^-1 g;
        theta holds zeta's parameters [w (d), b, pseudo-slot raw values (Tmax)]."""
        turn = zeta_activation(logged @ theta[:d] + theta[d], cfg.zeta_activation)
        raw = to_slots(turn, zeta_activation(theta[d + 1 :], cfg.zeta_activation), n_turns, real)
        zeta = raw / raw.mean(0, keepdim=True).clamp(min=1e-12)
        g = torch.einsum("nt,ntd->d", zeta, delta) / slots
        c_inv_g = torch.cholesky_solve(g.unsqueeze(1), chol).squeeze(1)
        flow = g @ c_inv_g
        # Normalised zeta does not change when every raw zeta is multiplied by one constant, so F
        # is flat along that direction; left free, Newton steps drift along it until raw zeta
        # underflows. Pinning the raw mean at 1 removes the flat direction and changes nothing else
        # (at any theta the constant can be chosen to make this term 0).
        gauge = (raw.mean() - 1) ** 2
        scaled = flow + 4 * cfg.alpha_nu * (cfg.alpha_zeta * penalty(zeta, cfg.zeta_penalty).mean() + gauge)
        if reward is not None:
            zeta_last = zeta.gather(1, n_turns.long().unsqueeze(1)).squeeze(1)
            scaled = scaled - 4 * cfg.alpha_nu * cfg.alpha_r * (zeta_last * reward).mean()
        return scaled, zeta, c_inv_g, flow

    def phi(theta: torch.Tensor) -> torch.Tensor:
        return parts_of(theta)[0]

    grad_fn, hess_fn = torch.func.grad(phi), torch.func.hessian(phi)
    with torch.no_grad():
        theta = torch.cat([
            heads.zeta_net[-1].weight.reshape(-1), heads.zeta_net[-1].bias.reshape(-1), heads.zeta_pad_raw,
        ]).to(dt)
    eye = torch.eye(n_params, dtype=dt, device=device)

    curve: list[dict[str, Any]] = []
    iterations, grad_max, stalled, damping = 0, math.inf, False, None
    bar = tqdm(total=cfg.steps, desc=desc, disable=not progress, leave=False)
    f = phi(theta)
    while True:
        grad = grad_fn(theta)
        grad_max = float(grad.abs().max())
        if iterations % cfg.log_every == 0 or grad_max <= cfg.solver_tol or stalled or iterations >= cfg.steps:
            curve.append(_row(iterations, theta, f, grad_max, parts_of, data, cfg))
            bar.set_postfix(grad=f"{grad_max:.1e}", ess=f"{curve[-1]['ess']:.0f}")
            if not all(math.isfinite(v) for v in (float(f), grad_max)):
                from enigma.ope.trainer import DiceDivergence

                raise DiceDivergence(f"iteration {iterations}: the objective or its gradient is not finite")
        if grad_max <= cfg.solver_tol or stalled or iterations >= cfg.steps:
            break
        # Levenberg-Marquardt: a Newton step on H + damping I, the damping raised until the step
        # lowers F (F is not convex in the parameters: zeta is their square), lowered after success
        hess = hess_fn(theta)
        if damping is None:
            damping = 1e-3 * float(hess.diagonal().abs().mean()) + 1e-12
        while True:
            factor, info = torch.linalg.cholesky_ex(hess + damping * eye)
            if int(info) == 0:
                step = torch.cholesky_solve(-grad.unsqueeze(1), factor).squeeze(1)
                f_new = phi(theta + step)
                if bool(torch.isfinite(f_new)) and float(f_new) < float(f):
                    theta, f = theta + step, f_new
                    damping = max(damping / 3, 1e-15)
                    break
            damping *= 4
            if damping > 1e30:  # no step lowers F any more in float64: as stationary as it gets
                stalled = True
                break
        iterations += 1
        bar.update(1)
    bar.close()

    with torch.no_grad():
        _, _, c_inv_g, _ = parts_of(theta)
        heads = heads.to(dt)
        heads.zeta_net[-1].weight.copy_(theta[:d].unsqueeze(0))
        heads.zeta_net[-1].bias.copy_(theta[d : d + 1])
        heads.zeta_pad_raw.copy_(theta[d + 1 :])
        u = -c_inv_g / (2 * cfg.alpha_nu)
        heads.nu_net[-1].weight.copy_(u[:d].unsqueeze(0))
        heads.nu_net[-1].bias.copy_(u[d : d + 1])
        heads.nu_pad.copy_(u[d + 1 :])
        heads.lam.zero_()  # inactive: zeta is normalised per slot
    converged = grad_max <= cfg.solver_tol
    if not converged:
        log.warning("%s: exact_nu stopped at %d iterations with max |d(4 alpha_nu F)/dw| = %.2g > solver_tol %.2g", desc, iterations, grad_max, cfg.solver_tol)
    summary = {
        "solver": "exact_nu",
        "iterations": iterations,
        "grad_max": grad_max,
        "converged": converged,
        "flow_residual": curve[-1]["flow_residual"],
        "objective": curve[-1]["loss"],
    }
    return heads.float(), curve, summary


def _row(step: int, theta: torch.Tensor, f: torch.Tensor, grad_max: float, parts_of, data: Any, cfg: DiceConfig) -> dict[str, Any]:
    """One learning-curve row with the same keys as gradient descent-ascent's, plus the
    gradient (of 4 alpha_nu F) and the flow residual; loss is the Lagrangian at the inner optimum (-F)."""
    with torch.no_grad():
        _, zeta, c_inv_g, flow = parts_of(theta)
    last = zeta.gather(1, data.n_agent_turns.to(zeta.device).long().unsqueeze(1)).squeeze(1).cpu().numpy()
    u_pad = (-c_inv_g / (2 * cfg.alpha_nu))[-cfg.tmax :].cpu().numpy()
    row: dict[str, Any] = {"step": step, "loss": -float(f) / (4 * cfg.alpha_nu), "zeta_mean": float(zeta.mean()), "lambda": 0.0}
    row["ess"] = effective_sample_size(last)
    row["ess_share"] = row["ess"] / max(len(last), 1)
    for j, m in enumerate(zeta.mean(0).cpu().numpy()):
        row[f"zeta_slot_{j}"] = float(m)
    for j in range(1, len(u_pad)):
        row[f"nu_pad_{j}"] = float(u_pad[j] - u_pad[0])
    for name, e in rating_estimates(last, data.rewards, data.rating_names).items():
        row[f"estimate_{name}"] = e["estimate"]
    row["grad_max"] = grad_max
    row["flow_residual"] = math.sqrt(max(float(flow), 0.0))
    return row
