"""What the exact_nu solver (``exact_nu``) minimises once nu is solved in closed form:
``ZetaProblem``, the objective in zeta's parameters with its closed-form gradient and Hessian.

At slot t of a padded dialogue nu is linear in a fixed vector:
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

(F is minus the Lagrangian at its inner optimum; the constraints are lambda's).

The padded chain's rows (``FlowRows``: ragged, with the pseudo-slot coordinates only where they are
nonzero) are in ``flow_rows``.
"""

from __future__ import annotations

from typing import Any

import torch

from enigma.ope.config import ObjectiveConfig
from enigma.ope.flow_rows import flow_rows
from enigma.ope.heads import zeta_activation
from enigma.ope.objective import penalty
from enigma.ope.turns import TurnFeatures

# Newton steps solve a system in zeta's parameters (features + bias + one per slot); the
# default text features (32 PCA dimensions + 15 agreement features) give 48 + Tmax. The bound
# keeps each step's P x P solve cheap; it admits dialogues of up to about 970 agent turns.
MAX_PARAMS = 1024
# ZetaProblem keeps what it computed at this many latest thetas: the solvers read the objective at
# a theta, then its derivatives (and a curve row) there, with a trial step or two in between
_SEEN = 3


class ZetaProblem:
    """The minimisation left once nu is solved exactly, on fixed features: its objective
    ``4 alpha_nu A`` and the closed-form gradient and Hessian in zeta's parameters ``theta``
    ``[w (d), b, pseudo-slot raw values (Tmax)]``, for given multipliers ``lam`` and penalty ``mu``.
    The raw output of every row is ``psi @ theta`` (psi, nu's basis, is laid out the same way).
    Expectations are over all ``N x Tmax`` slots, computed on the weighted rows (``FlowRows``)."""

    def __init__(self, turns: TurnFeatures, data: Any, objective: ObjectiveConfig, tmax: int, reward_index: int | None = None):
        self.objective, self.tmax = objective, tmax
        self.feature_dim = turns.dim
        self.n_params = self.feature_dim + 1 + tmax
        if self.n_params > MAX_PARAMS:
            raise ValueError(
                f"solver exact_nu takes Newton steps on zeta's {self.n_params} parameters (at most {MAX_PARAMS}): "
                f"{self.feature_dim} features, a bias and one per slot (dice.tmax {tmax}); set dice.project_dim to shrink "
                "text features (onehot: fewer distinct state-action pairs), or use solver gda; dialogues longer than "
                f"{MAX_PARAMS - self.feature_dim - 2} agent turns do not fit this solver"
            )
        dt = torch.float64  # minimised to a tight gradient tolerance: float32 stalls first
        device = turns.logged.device
        self.rows = flow_rows(turns, tmax)
        rows = self.rows
        self.weight = rows.weight
        self.slots = rows.n_slots
        second = rows.gram("psi", "psi", self.weight) / self.slots
        # A tiny ridge keeps directions no logged slot spans (a pseudo slot that is never padding)
        # solvable; g has no component there, so it changes nothing else.
        ridge = 1e-9 * float(second.diagonal().mean()) + 1e-12
        self.chol = torch.linalg.cholesky(second + ridge * torch.eye(second.shape[0], dtype=dt, device=device))
        self.reward = None
        if objective.alpha_r:
            self.reward = torch.nan_to_num(torch.as_tensor(data.rewards[:, reward_index], dtype=dt, device=device), nan=0.0)
        # what parts and derivatives both compute from theta alone, for the latest few thetas (_at)
        self._seen: list[tuple[torch.Tensor, int, dict[str, torch.Tensor]]] = []

    def _at(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """The quantities that depend on theta alone (the raw outputs ``x``, ``zeta``, ``g``, ``C^-1 g``;
        ``parts`` adds its theta-only part of the objective and the means), computed once per theta.
        The solvers evaluate the objective at a trial theta, then, once it is taken, the derivatives
        and the learning-curve row at the same theta: each is the same arithmetic on the same
        tensors, so reading the stored result changes no bit. Held for the last ``_SEEN`` thetas,
        keyed by the tensor itself and its version (an in-place change is a new theta); a theta
        that records gradients (automatic differentiation, ``torch.func``) is never stored."""
        if theta.requires_grad or torch._C._functorch.is_functorch_wrapped_tensor(theta):
            return self._compute_at(theta)
        for seen, version, got in self._seen:
            if seen is theta and version == theta._version:
                return got
        got = self._compute_at(theta)
        self._seen = [(theta, theta._version, got)] + self._seen[: _SEEN - 1]
        return got

    def _compute_at(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.rows.apply("psi", theta)
        zeta = zeta_activation(x, self.objective.zeta_activation)
        g = self.rows.rapply("delta", self.weight * zeta) / self.slots
        c_inv_g = torch.cholesky_solve(g.unsqueeze(1), self.chol).squeeze(1)
        return {"x": x, "zeta": zeta, "g": g, "c_inv_g": c_inv_g}

    def means(self, zeta: torch.Tensor) -> torch.Tensor:
        """E_D[zeta | slot] per slot position, or E_D[zeta] (one lambda)."""
        if self.objective.lambda_per_slot:
            return self.rows.slot_sums(zeta) / self.rows.n_dialogues
        return ((self.weight * zeta).sum() / self.slots).unsqueeze(0)

    def parts(self, theta: torch.Tensor, lam: torch.Tensor, mu: float):
        """4 alpha_nu A (A: F plus the augmented-Lagrangian terms of the mass constraints), zeta
        per row, C^-1 g, the flow term g' C^-1 g and the constrained means."""
        obj, w = self.objective, self.weight
        at = self._at(theta)
        zeta, c_inv_g = at["zeta"], at["c_inv_g"]
        if "f" not in at:  # the objective's theta-only part, once per theta
            flow = at["g"] @ c_inv_g
            f = flow / (4 * obj.alpha_nu) + obj.alpha_zeta * (w * penalty(zeta, obj.zeta_penalty)).sum() / self.slots
            if self.reward is not None:
                last = self.rows.last
                f = f - obj.alpha_r * (w[last] * zeta[last] * self.reward).sum() / self.rows.n_dialogues
            at.update(flow=flow, f=f, means=self.means(zeta))
        flow, f, means = at["flow"], at["f"], at["means"]
        if obj.normalise:
            gap = means - 1
            f = f + (lam @ gap + mu / 2 * gap @ gap) / gap.numel()
        return 4 * obj.alpha_nu * f, zeta, c_inv_g, flow, means

    def derivatives(self, theta: torch.Tensor, lam: torch.Tensor, mu: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradient and Hessian of 4 alpha_nu A in closed form. A is a quadratic q in zeta, and
        zeta is an elementwise function of x = psi @ theta, so with J = diag(zeta') psi:
        grad = psi' W (zeta' q_z), Hessian = psi' W diag(zeta'' q_z) psi + J' q_zz J (W: the
        rows' weights; q_z per unit weight). Several times cheaper than automatic
        differentiation (tested equal to it)."""
        return self.derivatives_and_constraints(theta, lam, mu)[:2]

    def derivatives_and_constraints(self, theta: torch.Tensor, lam: torch.Tensor, mu: float):
        """``derivatives`` and, computed on the way, the mass constraints ``E_D[zeta | slot] - 1``
        (or ``E_D[zeta] - 1``) [K] and their Jacobian in theta [K, P]; K = 0 without ``normalise``."""
        obj, rows, slots, w = self.objective, self.rows, self.slots, self.weight
        scale = 4 * obj.alpha_nu
        at = self._at(theta)  # x, zeta, g and C^-1 g as parts computed them at this theta
        z, (z1, z2), c_inv_g = at["zeta"], _activation_slopes(at["x"], obj.zeta_activation), at["c_inv_g"]
        f1, f2 = (2 * z, 2.0) if obj.zeta_penalty == "square" else (z, 1.0)
        q_z = 2 * rows.apply("delta", c_inv_g) / slots + scale * obj.alpha_zeta * f1 / slots
        if self.reward is not None:  # per unit weight, as every q_z: the rows' weights multiply it below
            q_z[rows.last] -= scale * obj.alpha_r * self.reward / rows.n_dialogues
        # J = diag(zeta') psi; every product with it is taken block by block (FlowRows)
        d_jac = rows.gram("delta", "psi", w * z1)  # delta' W J
        hess = 2 * d_jac.T @ torch.cholesky_solve(d_jac, self.chol) / slots**2
        gap, mean_jac = theta.new_zeros(0), theta.new_zeros((0, len(theta)))
        if obj.normalise:
            if obj.lambda_per_slot:
                gap = rows.slot_sums(z) / rows.n_dialogues - 1  # [Tmax]
                mean_jac = rows.slot_sums_of("psi", z1) / rows.n_dialogues  # [Tmax, P]
                q_z = q_z + scale * (lam + mu * gap)[rows.slot] / gap.numel() / rows.n_dialogues
            else:
                gap = ((w * z).sum() / slots - 1).unsqueeze(0)
                mean_jac = rows.rapply("psi", w * z1).unsqueeze(0) / slots
                q_z = q_z + scale * (lam + mu * gap) / slots
            hess = hess + scale * mu / gap.numel() * mean_jac.T @ mean_jac
        # the penalty's curvature and the activation's are both psi' diag(.) psi: one pass over
        # the rows for the two (the grams are most of a bootstrap resample's time)
        hess = hess + rows.gram("psi", "psi", w * (scale * obj.alpha_zeta * f2 / slots * z1 * z1 + z2 * q_z))
        grad = rows.rapply("psi", w * z1 * q_z)
        return grad, hess, gap, mean_jac


def _activation_slopes(x: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """d zeta / dx and d2 zeta / dx2 (``heads.zeta_activation``), elementwise."""
    if kind in ("square", "shifted_square"):
        shift = 1.0 if kind == "shifted_square" else 0.0
        return 2 * (x + shift), torch.full_like(x, 2.0)
    if kind == "softplus":
        sig = torch.sigmoid(x)
        return sig, sig * (1 - sig)
    return torch.ones_like(x), torch.zeros_like(x)
