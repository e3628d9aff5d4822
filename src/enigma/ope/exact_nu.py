"""DICE with nu solved exactly (``dice.solver: exact_nu``): a minimisation, not a min-max.

Why. With fixed features and a linear nu head, the Lagrangian is linear in nu. Without a
penalty on nu its minimum over nu is minus infinity unless zeta meets every flow constraint of
the feature span exactly, which a zeta head of its own cannot in general: gradient
descent-ascent then has no saddle point to reach, and on the airline benchmark it did not
(lambda and nu kept drifting; studies/results/ope_convergence.md). A penalty
``alpha_nu E_D[nu^2]`` (the primal regulariser of Yang et al. 2020) makes the nu problem
strictly convex, and being quadratic it can be solved in closed form at every zeta.

How. Nu solved in closed form at every zeta leaves one smooth problem in zeta's parameters,
bounded below, under a mass constraint per slot (``zeta_problem.ZetaProblem``). The constraints
are met by the method of multipliers (an augmented Lagrangian whose multipliers are lambda, sign
flipped); each inner problem is solved by damped Newton steps (Levenberg-Marquardt, exact Hessian
in closed form; zeta's parameters are few) on ``4 alpha_nu A`` (the same minimiser; its curvature
does not grow as alpha_nu shrinks, so one gradient tolerance means the same at every alpha_nu).
The run has converged when the largest partial derivative is under ``solver_tol`` (or the line
search stalls where a Newton step could no longer lower the objective by anything float64
resolves, ``STALL_RESOLUTION``) and every constraint holds within ``constraint_tol``; the
learning curve records both, the flow residual ``sqrt(g' C^-1 g)`` (how far zeta is from the flow constraints, in units of RMS nu) and the
estimates.

Tried first and dropped: dividing zeta by its mean per slot instead of the constraints. It
decouples the scale of the real turns' zeta from one slot to the next, and on the airline
features the optimum ran off to a boundary where the real turns of a slot weigh nothing (zeta
underflowed; 2 of the first 4 agents). L-BFGS instead of Newton steps needed thousands of
iterations at alpha_nu 0.1 and stalled short of the tolerance at 0.01.

A bootstrap resample can be refitted from the full fit by ``refit_kkt`` instead: Newton steps on
the optimality conditions, theta and the multipliers together (``dice.interval_refit: kkt``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from tqdm.auto import tqdm

from enigma.ope.config import ExactNuConfig, ObjectiveConfig
from enigma.ope.estimates import effective_sample_size, rating_estimates
from enigma.ope.features import Features
from enigma.ope.guards import DiceDivergence, check_zeta
from enigma.ope.heads import DiceHeads
from enigma.ope.objective import penalty
from enigma.ope.solution import Solution
from enigma.ope.turns import TurnFeatures
from enigma.ope.zeta_problem import ZetaProblem

MU_START = 10.0  # the first penalty weight of the mass constraints; x10 while they tighten slowly
MAX_OUTER = 50
# A line search that stalls has found no step that lowers the objective in float64. It counts as
# converged when the full Newton step's predicted decrease (half the Newton decrement) is below
# what float64 resolves in the objective: the iterate is as stationary as the arithmetic can tell,
# though the gradient, which grows with the penalty weight mu, can sit just above solver_tol.
# The margin over machine epsilon (2.2e-16) allows for the rounding of a sum over many rows. F
# itself grows with mu, so the decrement alone would pass a stall far from stationary under a huge
# penalty; the gradient must also be within STALL_GRAD_SLACK times solver_tol.
STALL_RESOLUTION = 1e-12
STALL_GRAD_SLACK = 10.0

log = logging.getLogger(__name__)


def solve_exact_nu(
    heads: DiceHeads,
    feats: Features,
    data: Any,
    solver: ExactNuConfig,
    objective: ObjectiveConfig,
    *,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
) -> Solution:
    """The solver on the trainer's features (fixed ones only: nu is solved in closed form on them)."""
    if feats.turns is None:
        raise ValueError(
            "dice.solver exact_nu needs fixed features (encoder onehot, or frozen without a trainable "
            "projection); a fine-tuned encoder trains through nu: use solver gda"
        )
    heads, curve, summary = fit_exact_nu(heads, feats.turns, data, solver, objective, reward_index=reward_index, progress=progress, desc=desc)
    return Solution(heads, feats, summary["iterations"], curve, summary)


def fit_exact_nu(
    heads: DiceHeads,
    turns: TurnFeatures,
    data: Any,
    solver: ExactNuConfig,
    objective: ObjectiveConfig,
    *,
    reward_index: int | None = None,
    progress: bool = True,
    desc: str = "dice",
    warm_mu: float | None = None,
    warn: bool = True,
    log_curve: bool = True,
) -> tuple[DiceHeads, list[dict[str, Any]], dict[str, Any]]:
    """Fit zeta's parameters of ``heads`` on fixed features (all dialogues at once). Returns the
    heads (float32; nu at its exact optimum u*, lambda the multipliers), the learning curve and
    the solver's summary (iterations, final gradient and constraint gap, converged, the final
    penalty weight ``mu``). ``warm_mu``: start from the multipliers in ``heads.lam`` with this
    penalty weight (a refit near a known solution, e.g. a bootstrap resample) instead of zero. The slots:
    ``heads``' own (``tmax``). ``log_curve=False``: the curve has only the row at the end of each outer
    iteration (what the zeta guard and the summary read), not one every ``log_every`` steps; for a
    caller that drops the curve (a bootstrap refit), the rest would be computed for nothing."""
    device, dt = turns.logged.device, torch.float64
    tmax = heads.nu_pad.numel()
    problem = ZetaProblem(turns, data, objective, tmax, reward_index)
    parts_of = problem.parts

    theta = _theta_of(heads, device)
    lam = torch.zeros(tmax if objective.lambda_per_slot else 1, dtype=dt, device=device)
    mu, last_gap = MU_START, math.inf
    if warm_mu is not None:
        with torch.no_grad():
            lam = -heads.lam.detach().to(device=device, dtype=dt).reshape(lam.shape)  # stored sign-flipped
        mu = warm_mu

    curve: list[dict[str, Any]] = []
    iterations, grad_max, gap_max, stalled, decrement = 0, math.inf, math.inf, False, None
    bar = tqdm(total=solver.steps, desc=desc, disable=not progress, leave=False)
    # Outer loop: the method of multipliers for E_D[zeta | slot] = 1. Inner loop: Levenberg-Marquardt
    # (a Newton step on H + damping I, the damping raised until the step lowers the objective, which
    # is not convex in the parameters: zeta is their square), to the gradient tolerance.
    for outer in range(MAX_OUTER):
        f, damping, stalled, decrement = parts_of(theta, lam, mu)[0], None, False, None
        while iterations < solver.steps:
            grad, hess = problem.derivatives(theta, lam, mu)
            grad_max = float(grad.abs().max())
            if not math.isfinite(float(f)) or not math.isfinite(grad_max):
                raise DiceDivergence(f"iteration {iterations}: the objective or its gradient is not finite")
            if grad_max <= solver.solver_tol:
                break
            if damping is None:
                damping = 1e-3 * float(hess.diagonal().abs().mean()) + 1e-12
            theta, f, damping = _damped_newton_step(lambda th: parts_of(th, lam, mu)[0], theta, f, grad, hess, damping)
            stalled = damping is None  # no step lowers the objective any more in float64
            iterations += 1
            bar.update(1)
            if stalled:
                decrement = _newton_decrement(grad, hess)  # theta did not move: grad and hess are still its own
                break
            if log_curve and iterations % solver.log_every == 0:
                curve.append(_row(iterations, outer, theta, grad_max, lam, mu, problem, data))
        with torch.no_grad():
            means = parts_of(theta, lam, mu)[4]
        gap_max = float((means - 1).abs().max()) if objective.normalise else 0.0
        curve.append(_row(iterations, outer, theta, grad_max, lam, mu, problem, data))
        check_zeta(f"iteration {iterations}", curve[-1]["zeta_mean"], solver)
        bar.set_postfix(grad=f"{grad_max:.1e}", mass=f"{gap_max:.1e}", ess=f"{curve[-1]['ess']:.0f}")
        if gap_max <= solver.constraint_tol or iterations >= solver.steps:
            break
        lam = lam + mu * (means - 1)
        if gap_max > 0.25 * last_gap:  # the constraints did not tighten enough: a stiffer penalty
            mu *= 10
        last_gap = gap_max
    bar.close()

    heads = _into_heads(heads, problem, theta, lam)
    # decrement is set only by a stall, which only follows a gradient above solver_tol
    at_precision = (decrement is not None and decrement / 2 <= STALL_RESOLUTION * max(1.0, abs(float(f)))
                    and grad_max <= STALL_GRAD_SLACK * solver.solver_tol)
    converged = (grad_max <= solver.solver_tol or at_precision) and gap_max <= solver.constraint_tol
    if not converged and warn:
        stall = ""
        if stalled:
            stall = (", the line search stalled where the Hessian is not positive definite" if decrement is None else
                     f", the line search stalled with a Newton decrement of {decrement:.2g}")
        log.warning(
            "%s: exact_nu stopped at %d iterations with max |gradient| %.2g (solver_tol %.2g) and max |E_D[zeta|slot] - 1| "
            "%.2g (constraint_tol %.2g)%s", desc, iterations, grad_max, solver.solver_tol, gap_max, solver.constraint_tol, stall,
        )
    summary = {
        "solver": "exact_nu",
        "iterations": iterations,
        "grad_max": grad_max,
        "mass_gap_max": gap_max,
        "converged": converged,
        # converged with the gradient above solver_tol: stationary to float64 precision (STALL_RESOLUTION)
        "stalled_at_precision": at_precision,
        "flow_residual": curve[-1]["flow_residual"],
        "objective": curve[-1]["loss"],
        "mu": mu,
    }
    return heads.float(), curve, summary


def _theta_of(heads: DiceHeads, device: torch.device) -> torch.Tensor:
    """zeta's parameters ``[w, b, pseudo-slot raw values]`` of linear heads, in float64."""
    with torch.no_grad():
        return torch.cat([
            heads.zeta_net[-1].weight.reshape(-1), heads.zeta_net[-1].bias.reshape(-1), heads.zeta_pad_raw,
        ]).to(device=device, dtype=torch.float64)


def _into_heads(heads: DiceHeads, problem: ZetaProblem, theta: torch.Tensor, lam: torch.Tensor) -> DiceHeads:
    """The heads in float64 with zeta's parameters ``theta``, nu at its exact optimum given them
    (``u* = -C^-1 g / (2 alpha_nu)``) and the multipliers ``lam``."""
    obj, d = problem.objective, problem.feature_dim
    with torch.no_grad():
        _, _, c_inv_g, _, _ = problem.parts(theta, lam, 0.0)
        heads = heads.to(torch.float64)
        heads.zeta_net[-1].weight.copy_(theta[:d].unsqueeze(0))
        heads.zeta_net[-1].bias.copy_(theta[d : d + 1])
        heads.zeta_pad_raw.copy_(theta[d + 1 :])
        u = -c_inv_g / (2 * obj.alpha_nu)
        heads.nu_net[-1].weight.copy_(u[:d].unsqueeze(0))
        heads.nu_net[-1].bias.copy_(u[d : d + 1])
        heads.nu_pad.copy_(u[d + 1 :])
        # our Lagrangian has + lambda (zeta - 1) with zeta maximising; the multipliers here belong
        # to the minimisation of F, so the sign flips
        heads.lam = torch.nn.Parameter(-lam.clone())
    return heads


def refit_kkt(
    heads: DiceHeads,
    turns: TurnFeatures,
    data: Any,
    solver: ExactNuConfig,
    objective: ObjectiveConfig,
    *,
    reward_index: int | None = None,
    max_steps: int = 100,
) -> tuple[DiceHeads, dict[str, Any]]:
    """Refit zeta's parameters from ``heads``, a solution of a nearby problem (the full fit, for a
    bootstrap resample), by Newton steps on the optimality (KKT) conditions: theta and the mass
    constraints' multipliers move together, to the full fit's ``solver_tol`` and ``constraint_tol``.

    Why not ``fit_exact_nu`` from the same start. The method of multipliers updates the
    multipliers once per inner solve, by a first-order step; where the constraints bind hard (a
    multiplier of 1e8 needs a penalty weight of 1e9), its refits took 87 Newton steps on average and
    half of them stopped at the cap. Near a solution the KKT step converges quadratically in both.
    Far from one (zeta is the square of a linear map, so the Lagrangian is not convex in theta) the
    step is damped on the Hessian block, Levenberg-Marquardt style, until it lowers the augmented
    Lagrangian at the updated multipliers with the solver's first penalty weight ``MU_START``: with
    a damped Hessian the step descends it, and the small weight keeps it from refusing every step
    but tiny ones, as the large weight of a hard-bound full fit did (studies/results/interval_kkt_*.md).

    Returns the heads (float32; nu at its exact optimum, lambda the multipliers) and a summary
    (iterations, final gradient and constraint gap, converged)."""
    device, dt = turns.logged.device, torch.float64
    problem = ZetaProblem(turns, data, objective, heads.nu_pad.numel(), reward_index)
    theta = _theta_of(heads, device)
    with torch.no_grad():
        lam = -heads.lam.detach().to(device=device, dtype=dt).reshape(-1)  # stored sign-flipped
    n_params = len(theta)
    eye = torch.eye(n_params, dtype=dt, device=device)
    # the multipliers enter 4 alpha_nu A as scale * lam' gap: the step solves for scale * dlam,
    # whose block of the KKT matrix is as well scaled as theta's
    scale = 4 * objective.alpha_nu / max(len(lam), 1)

    grad, hess, gap, jac = problem.derivatives_and_constraints(theta, lam, 0.0)  # the Lagrangian's: no penalty
    k = len(gap)
    # the damping starts at, and falls back to, a trace of the Hessian's scale: a near-Newton step
    floor = 1e-10 * float(hess.diagonal().abs().mean()) + 1e-300
    iterations, damping = 0, floor
    while True:
        grad_max = float(grad.abs().max())
        gap_max = float(gap.abs().max()) if k else 0.0
        if not math.isfinite(grad_max) or not math.isfinite(gap_max):
            raise DiceDivergence(f"KKT refit, step {iterations}: the gradient or the constraints are not finite")
        converged = grad_max <= solver.solver_tol and gap_max <= solver.constraint_tol
        if converged or iterations >= max_steps:
            break
        step = None
        # the directions that keep the constraints (to first order): the null space of their Jacobian
        null = torch.linalg.qr(jac.T, mode="complete")[0][:, k:] if k else eye
        kkt = torch.zeros(n_params + k, n_params + k, dtype=dt, device=device)
        kkt[:n_params, n_params:] = jac.T
        kkt[n_params:, :n_params] = jac
        rhs = -torch.cat([grad, gap])
        while damping <= 1e30:
            # inertia correction: damp until the Hessian is positive definite along the constraints,
            # so that the step goes to a minimum of the local model there, not to a saddle point
            # (where zeta = 0 on some rows, the Lagrangian is stationary without being a minimum)
            damped = hess + damping * eye
            if int(torch.linalg.cholesky_ex(null.T @ damped @ null)[1]):
                damping *= 4
                continue
            kkt[:n_params, :n_params] = damped
            solved, info = torch.linalg.solve_ex(kkt, rhs)
            if int(info) == 0 and bool(torch.isfinite(solved).all()):
                lam_new = lam + solved[n_params:] / scale if k else lam
                before = problem.parts(theta, lam_new, MU_START)[0]
                after = problem.parts(theta + solved[:n_params], lam_new, MU_START)[0]
                if bool(torch.isfinite(after)) and float(after) < float(before):
                    step = solved[:n_params]
                    break
            damping *= 4
        if step is None:  # no damped step lowers the merit: stopped short, as a capped refit is
            break
        theta, lam = theta + step, lam_new
        damping = max(damping / 3, floor)
        iterations += 1
        grad, hess, gap, jac = problem.derivatives_and_constraints(theta, lam, 0.0)
    heads = _into_heads(heads, problem, theta, lam)
    summary = {"solver": "exact_nu", "refit": "kkt", "iterations": iterations, "grad_max": grad_max,
               "mass_gap_max": gap_max, "converged": converged}
    return heads.float(), summary


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


def _newton_decrement(grad: torch.Tensor, hess: torch.Tensor) -> float | None:
    """g' H^-1 g, twice the decrease a full Newton step predicts; None where H has a negative
    curvature (then the point is no minimum's, whatever the line search found). A parameter the
    objective does not touch (a pseudo slot that is never padding) has zero curvature and zero
    gradient: the relative ridge makes it solvable and adds nothing to the decrement."""
    ridge = 1e-12 * float(hess.diagonal().abs().mean()) + 1e-300
    factor, info = torch.linalg.cholesky_ex(hess + ridge * torch.eye(len(grad), dtype=hess.dtype, device=hess.device))
    if int(info):
        return None
    return float(grad @ torch.cholesky_solve(grad.unsqueeze(1), factor).squeeze(1))


def _row(step: int, outer: int, theta: torch.Tensor, grad_max: float, lam: torch.Tensor, mu: float, problem: ZetaProblem,
         data: Any) -> dict[str, Any]:
    """One learning-curve row with the same keys as gradient descent-ascent's, plus the outer
    iteration, the gradient (of 4 alpha_nu A) and the flow residual; loss is the Lagrangian
    at the inner optimum (-F, the multiplier terms left out)."""
    rows, obj = problem.rows, problem.objective
    with torch.no_grad():
        _, zeta, c_inv_g, flow, _ = problem.parts(theta, lam, mu)
    last = zeta[rows.last].cpu().numpy()
    counts = rows.counts.cpu().numpy()
    u_pad = (-c_inv_g / (2 * obj.alpha_nu))[-problem.tmax :].cpu().numpy()
    zeta_mean = float((rows.weight * zeta).sum()) / rows.n_slots
    f = float(flow) / (4 * obj.alpha_nu) + obj.alpha_zeta * float((rows.weight * penalty(zeta, obj.zeta_penalty)).sum()) / rows.n_slots
    row: dict[str, Any] = {"step": step, "outer": outer, "loss": -f, "zeta_mean": zeta_mean, "lambda": -float(lam.mean())}
    row["ess"] = effective_sample_size(last, counts)
    row["ess_share"] = row["ess"] / max(rows.n_dialogues, 1)
    for j, m in enumerate((rows.slot_sums(zeta) / rows.n_dialogues).cpu().numpy()):
        row[f"zeta_slot_{j}"] = float(m)
    for j in range(1, len(u_pad)):
        row[f"nu_pad_{j}"] = float(u_pad[j] - u_pad[0])
    for name, e in rating_estimates(last, data.rewards, data.rating_names, counts).items():
        row[f"estimate_{name}"] = e["estimate"]
    row["grad_max"] = grad_max
    row["flow_residual"] = math.sqrt(max(float(flow), 0.0))
    return row
