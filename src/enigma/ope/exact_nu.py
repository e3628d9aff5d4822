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

whose minimum is ``-g' C^-1 g / (4 alpha_nu)`` at ``u* = -C^-1 g / (2 alpha_nu)``. What is left
is one smooth problem in zeta's parameters, bounded below,

    minimise F(zeta) = g' C^-1 g / (4 alpha_nu) + alpha_zeta E[f(zeta)] - alpha_R E[zeta_T r]
    subject to E_D[zeta | slot t] = 1 for every slot t (one constraint if not lambda_per_slot)

(F is minus the Lagrangian at its inner optimum; the constraints are lambda's). The constraints
are met by the method of multipliers (an augmented Lagrangian whose multipliers are lambda, sign
flipped); each inner problem is solved by damped Newton steps (Levenberg-Marquardt, exact Hessian
in closed form; zeta's parameters are few) on ``4 alpha_nu A`` (the same minimiser; its curvature
does not grow as alpha_nu shrinks, so one gradient tolerance means the same at every alpha_nu).
The run has converged when the largest partial derivative is under ``solver_tol`` and every
constraint holds within ``constraint_tol``; the learning curve records both, the flow residual
``sqrt(g' C^-1 g)`` (how far zeta is from the flow constraints, in units of RMS nu) and the
estimates.

Tried first and dropped: dividing zeta by its mean per slot instead of the constraints. It
decouples the scale of the real turns' zeta from one slot to the next, and on the airline
features the optimum ran off to a boundary where the real turns of a slot weigh nothing (zeta
underflowed; 2 of the first 4 agents). L-BFGS instead of Newton steps needed thousands of
iterations at alpha_nu 0.1 and stalled short of the tolerance at 0.01.
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
from enigma.ope.padding import real_mask

# Newton steps solve a system in zeta's parameters (features + bias + one per slot); the
# default text features (32 PCA dimensions + 15 agreement features) give 63
MAX_PARAMS = 1024
MU_START = 10.0  # the first penalty weight of the mass constraints; x10 while they tighten slowly
MAX_OUTER = 50

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


class ZetaProblem:
    """The minimisation left once nu is solved exactly, on fixed features: its objective
    ``4 alpha_nu A`` and the closed-form gradient and Hessian in zeta's parameters ``theta``
    ``[w (d), b, pseudo-slot raw values (Tmax)]``, for given multipliers ``lam`` and penalty ``mu``.
    The raw output at every slot is ``psi @ theta`` (psi, nu's basis, is laid out the same way)."""

    def __init__(self, logged: torch.Tensor, target: torch.Tensor, data: Any, cfg: DiceConfig, reward_index: int | None = None):
        self.cfg = cfg
        self.feature_dim = logged.shape[-1]
        self.n_params = self.feature_dim + 1 + cfg.tmax
        if self.n_params > MAX_PARAMS:
            raise ValueError(
                f"solver exact_nu takes Newton steps on zeta's {self.n_params} parameters (at most {MAX_PARAMS}): "
                "set dice.project_dim to shrink the features, or use solver gda"
            )
        dt = torch.float64  # minimised to a tight gradient tolerance: float32 stalls first
        device = logged.device
        logged, target = logged.to(dt), target.to(dt)
        n_turns = data.n_agent_turns.to(device)
        self.psi, self.delta = flow_design(logged, target, data.sample_mask.to(device), n_turns, cfg.tmax)
        self.slots = self.psi.shape[0] * self.psi.shape[1]
        second = torch.einsum("ntd,nte->de", self.psi, self.psi) / self.slots
        # A tiny ridge keeps directions no logged slot spans (a pseudo slot that is never padding)
        # solvable; g has no component there, so it changes nothing else.
        ridge = 1e-9 * float(second.diagonal().mean()) + 1e-12
        self.chol = torch.linalg.cholesky(second + ridge * torch.eye(second.shape[0], dtype=dt, device=device))
        self.reward = None
        if cfg.alpha_r:
            self.reward = torch.nan_to_num(torch.as_tensor(data.rewards[:, reward_index], dtype=dt, device=device), nan=0.0)
        self.last_slot = n_turns.long()
        self.rows = torch.arange(len(n_turns), device=device)

    def parts(self, theta: torch.Tensor, lam: torch.Tensor, mu: float):
        """4 alpha_nu A (A: F plus the augmented-Lagrangian terms of the mass constraints), zeta
        [N, Tmax], C^-1 g, the flow term g' C^-1 g and the constrained means."""
        cfg = self.cfg
        zeta = zeta_activation(self.psi @ theta, cfg.zeta_activation)
        g = torch.einsum("nt,ntd->d", zeta, self.delta) / self.slots
        c_inv_g = torch.cholesky_solve(g.unsqueeze(1), self.chol).squeeze(1)
        flow = g @ c_inv_g
        f = flow / (4 * cfg.alpha_nu) + cfg.alpha_zeta * penalty(zeta, cfg.zeta_penalty).mean()
        if self.reward is not None:
            f = f - cfg.alpha_r * (zeta[self.rows, self.last_slot] * self.reward).mean()
        means = zeta.mean(0) if cfg.lambda_per_slot else zeta.mean().unsqueeze(0)
        if cfg.normalise:
            gap = means - 1
            f = f + (lam @ gap + mu / 2 * gap @ gap) / gap.numel()
        return 4 * cfg.alpha_nu * f, zeta, c_inv_g, flow, means

    def derivatives(self, theta: torch.Tensor, lam: torch.Tensor, mu: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient and Hessian of 4 alpha_nu A in closed form. A is a quadratic q in zeta, and
        zeta is an elementwise function of x = psi @ theta, so with J = diag(zeta') psi:
        grad = psi' (zeta' q_z), Hessian = psi' diag(zeta'' q_z) psi + J' q_zz J. Several times
        cheaper than automatic differentiation (tested equal to it)."""
        cfg, psi, slots = self.cfg, self.psi, self.slots
        scale = 4 * cfg.alpha_nu
        z, z1, z2 = _activation_derivatives(psi @ theta, cfg.zeta_activation)
        g = torch.einsum("nt,ntd->d", z, self.delta) / slots
        c_inv_g = torch.cholesky_solve(g.unsqueeze(1), self.chol).squeeze(1)
        f1, f2 = (2 * z, 2.0) if cfg.zeta_penalty == "square" else (z, 1.0)
        q_z = 2 * torch.einsum("ntd,d->nt", self.delta, c_inv_g) / slots + scale * cfg.alpha_zeta * f1 / slots
        if self.reward is not None:
            q_z[self.rows, self.last_slot] -= scale * cfg.alpha_r * self.reward / len(self.rows)
        jac = psi * z1.unsqueeze(-1)  # [N, Tmax, P]
        d_jac = torch.einsum("ntd,ntp->dp", self.delta, jac)
        hess = 2 * d_jac.T @ torch.cholesky_solve(d_jac, self.chol) / slots**2
        hess = hess + scale * cfg.alpha_zeta * f2 / slots * torch.einsum("ntp,ntq->pq", jac, jac)
        if cfg.normalise:
            if cfg.lambda_per_slot:
                gap, mean_jac, per = z.mean(0) - 1, jac.mean(0), len(self.rows)  # [Tmax], [Tmax, P]
            else:
                gap, mean_jac, per = (z.mean() - 1).unsqueeze(0), jac.mean((0, 1)).unsqueeze(0), slots
            q_z = q_z + (scale * (lam + mu * gap) / gap.numel() / per).expand(q_z.shape)
            hess = hess + scale * mu / gap.numel() * mean_jac.T @ mean_jac
        hess = hess + torch.einsum("ntp,nt,ntq->pq", psi, z2 * q_z, psi)
        grad = torch.einsum("ntp,nt->p", psi, z1 * q_z)
        return grad, hess


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
    """Fit zeta's parameters of ``heads`` on fixed features (all dialogues at once). Returns the
    heads (float32; nu at its exact optimum u*, lambda the multipliers), the learning curve and
    the solver's summary (iterations, final gradient and constraint gap, converged)."""
    device, dt = logged.device, torch.float64
    problem = ZetaProblem(logged, target, data, cfg, reward_index)
    parts_of, d = problem.parts, problem.feature_dim

    with torch.no_grad():
        theta = torch.cat([
            heads.zeta_net[-1].weight.reshape(-1), heads.zeta_net[-1].bias.reshape(-1), heads.zeta_pad_raw,
        ]).to(dt)
    lam = torch.zeros(cfg.tmax if cfg.lambda_per_slot else 1, dtype=dt, device=device)
    mu, last_gap = MU_START, math.inf

    curve: list[dict[str, Any]] = []
    iterations, grad_max, gap_max, stalled = 0, math.inf, math.inf, False
    bar = tqdm(total=cfg.steps, desc=desc, disable=not progress, leave=False)
    # Outer loop: the method of multipliers for E_D[zeta | slot] = 1. Inner loop: Levenberg-Marquardt
    # (a Newton step on H + damping I, the damping raised until the step lowers the objective, which
    # is not convex in the parameters: zeta is their square), to the gradient tolerance.
    for outer in range(MAX_OUTER):
        f, damping, stalled = parts_of(theta, lam, mu)[0], None, False
        while iterations < cfg.steps:
            grad, hess = problem.derivatives(theta, lam, mu)
            grad_max = float(grad.abs().max())
            if not math.isfinite(float(f)) or not math.isfinite(grad_max):
                from enigma.ope.trainer import DiceDivergence

                raise DiceDivergence(f"iteration {iterations}: the objective or its gradient is not finite")
            if grad_max <= cfg.solver_tol:
                break
            if damping is None:
                damping = 1e-3 * float(hess.diagonal().abs().mean()) + 1e-12
            theta, f, damping = _damped_newton_step(lambda th: parts_of(th, lam, mu)[0], theta, f, grad, hess, damping)
            stalled = damping is None  # no step lowers the objective any more in float64: as stationary as it gets
            iterations += 1
            bar.update(1)
            if stalled:
                break
            if iterations % cfg.log_every == 0:
                curve.append(_row(iterations, outer, theta, grad_max, lam, lambda th: parts_of(th, lam, mu), data, cfg))
        with torch.no_grad():
            means = parts_of(theta, lam, mu)[4]
        gap_max = float((means - 1).abs().max()) if cfg.normalise else 0.0
        curve.append(_row(iterations, outer, theta, grad_max, lam, lambda th: parts_of(th, lam, mu), data, cfg))
        bar.set_postfix(grad=f"{grad_max:.1e}", mass=f"{gap_max:.1e}", ess=f"{curve[-1]['ess']:.0f}")
        if gap_max <= cfg.constraint_tol or iterations >= cfg.steps:
            break
        lam = lam + mu * (means - 1)
        if gap_max > 0.25 * last_gap:  # the constraints did not tighten enough: a stiffer penalty
            mu *= 10
        last_gap = gap_max
    bar.close()

    with torch.no_grad():
        _, _, c_inv_g, _, _ = parts_of(theta, lam, mu)
        heads = heads.to(dt)
        heads.zeta_net[-1].weight.copy_(theta[:d].unsqueeze(0))
        heads.zeta_net[-1].bias.copy_(theta[d : d + 1])
        heads.zeta_pad_raw.copy_(theta[d + 1 :])
        u = -c_inv_g / (2 * cfg.alpha_nu)
        heads.nu_net[-1].weight.copy_(u[:d].unsqueeze(0))
        heads.nu_net[-1].bias.copy_(u[d : d + 1])
        heads.nu_pad.copy_(u[d + 1 :])
        # our Lagrangian has + lambda (zeta - 1) with zeta maximising; the multipliers here belong
        # to the minimisation of F, so the sign flips
        heads.lam = torch.nn.Parameter(-lam.clone())
    converged = grad_max <= cfg.solver_tol and gap_max <= cfg.constraint_tol
    if not converged:
        log.warning(
            "%s: exact_nu stopped at %d iterations with max |gradient| %.2g (solver_tol %.2g) and max |E_D[zeta|slot] - 1| "
            "%.2g (constraint_tol %.2g)%s", desc, iterations, grad_max, cfg.solver_tol, gap_max, cfg.constraint_tol,
            ", the line search stalled" if stalled else "",
        )
    summary = {
        "solver": "exact_nu",
        "iterations": iterations,
        "grad_max": grad_max,
        "mass_gap_max": gap_max,
        "converged": converged,
        "flow_residual": curve[-1]["flow_residual"],
        "objective": curve[-1]["loss"],
    }
    return heads.float(), curve, summary


def _damped_newton_step(objective, theta: torch.Tensor, f: torch.Tensor, grad: torch.Tensor, hess: torch.Tensor, damping: float):
    """One Levenberg-Marquardt step: a Newton step on H + damping I, the damping raised until the
    step lowers the objective (it is not convex in the parameters: zeta is their square) and
    lowered after a success. Returns theta, the objective there and the next damping, which is
    None when no step lowers the objective any more."""
    eye = torch.eye(len(theta), dtype=theta.dtype, device=theta.device)
    while damping <= 1e30:
        factor, info = torch.linalg.cholesky_ex(hess + damping * eye)
        if int(info) == 0:
            step = torch.cholesky_solve(-grad.unsqueeze(1), factor).squeeze(1)
            f_new = objective(theta + step)
            if bool(torch.isfinite(f_new)) and float(f_new) < float(f):
                return theta + step, f_new, max(damping / 3, 1e-15)
        damping *= 4
    return theta, f, None


def _activation_derivatives(x: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """zeta (``heads.zeta_activation``), d zeta / dx and d2 zeta / dx2, elementwise."""
    if kind in ("square", "shifted_square"):
        shift = 1.0 if kind == "shifted_square" else 0.0
        first, second = 2 * (x + shift), torch.full_like(x, 2.0)
    elif kind == "softplus":
        sig = torch.sigmoid(x)
        first, second = sig, sig * (1 - sig)
    else:
        first, second = torch.ones_like(x), torch.zeros_like(x)
    return zeta_activation(x, kind), first, second


def _row(
    step: int, outer: int, theta: torch.Tensor, grad_max: float, lam: torch.Tensor, parts_of, data: Any, cfg: DiceConfig
) -> dict[str, Any]:
    """One learning-curve row with the same keys as gradient descent-ascent's, plus the outer
    iteration, the gradient (of 4 alpha_nu A) and the flow residual; loss is the Lagrangian
    at the inner optimum (-F, the multiplier terms left out)."""
    with torch.no_grad():
        _, zeta, c_inv_g, flow, _ = parts_of(theta)
    last = zeta.gather(1, data.n_agent_turns.to(zeta.device).long().unsqueeze(1)).squeeze(1).cpu().numpy()
    u_pad = (-c_inv_g / (2 * cfg.alpha_nu))[-cfg.tmax :].cpu().numpy()
    f = float(flow) / (4 * cfg.alpha_nu) + cfg.alpha_zeta * float(penalty(zeta, cfg.zeta_penalty).mean())
    row: dict[str, Any] = {"step": step, "outer": outer, "loss": -f, "zeta_mean": float(zeta.mean()), "lambda": -float(lam.mean())}
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
