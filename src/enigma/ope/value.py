"""The value of the target three ways, from one fit on fixed features (``dice.value``).

- ``weighted`` (the paper's): the post-normalised zeta-weighted reward, ``sum zeta_i r_i / sum zeta_i``
  over the dialogues' last agent turns.
- ``q``: the value of a differential Q function fitted to the logged rewards by least-squares
  temporal differences on nu's own basis (``psi``: the pair's features, a bias, one coordinate per
  pseudo slot), with no zeta at all: the direct, model-based estimate. With ``dice.q_model: fqe``
  the Q is a network fitted by fitted Q evaluation instead (``enigma.ope.fqe``; its corrections:
  ``fqe_corrections``).
- ``dr``: the two combined. In the padded chain under the target every slot has mass ``1/Tmax``,
  and for *any* function ``Q`` the stationary mean of ``r + Q(s', pi) - Q(s, a)`` is the mean
  reward, so

      dr = sum_rows w zeta (r + delta . u_r) / sum_rows w zeta (m + delta . u_m)

  is right if zeta is the true ratio (whatever Q) or if Q is the true differential value (whatever
  zeta): the regularised Lagrangian at its saddle point read as a doubly robust estimator. ``m`` is
  the "this dialogue ended here with the rating observed" indicator, whose stationary mean is known
  to be one per cycle: dividing by its own doubly robust estimate is the post-normalisation (with
  ``u = 0`` the ratio is exactly the ``weighted`` estimate), and it leaves dialogues without that
  rating out of both sums, as ``rating_estimates`` does.

  With ``dice.dr_zeta_cap`` the zeta of ``dr`` is clipped at the cap (zeta has mean 1 over the
  logs), the clipped importance weight of the off-policy literature. The Q half of the argument
  holds for any weights, so a clipped zeta with the true Q is still right; what the clip gives up
  is the zeta half (the true ratio with a wrong Q), in exchange for not letting the few
  dialogues with a large zeta carry the correction (issue 58: zeta's effective sample is 6-14%
  of the See 2019 logs).

Why not nu itself as the Q. ENIGMA's objective has no reward in it (``alpha_r = 0``): its nu is the
multiplier of the flow constraints, not a value, so a separate fit with the reward is needed. It is
one linear solve per rating on the rows ``exact_nu`` already builds (``FlowRows``), so all three
values come with every run and land in its diagnostics; ``dice.value`` picks the one reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from enigma.encoders.base import turn_offsets, turn_positions
from enigma.ope.flow_rows import FlowRows, flow_rows
from enigma.ope.fqe import TurnQ
from enigma.ope.heads import DiceHeads, zeta_activation
from enigma.ope.turns import TurnFeatures

VALUES = ("weighted", "q", "dr")


def zeta_rows(heads: DiceHeads, rows: FlowRows, turns: TurnFeatures | None = None, slot_normalise: bool = False) -> torch.Tensor:
    """zeta at every row. A linear head is read through ``psi``, which is laid out as its
    parameters are (float64 throughout); a nonlinear one (``head_hidden`` > 0, gradient
    descent-ascent) at the logged features of the real turns ``turns`` the rows were built from,
    in the rows' order (``FlowRows.turn_order``), the pseudo rows taking its per-slot scalars.
    ``slot_normalise`` divides by the mean per slot position, as the solver and its final pass do
    (``dice.slot_normalise``)."""
    if len(heads.zeta_net) == 1:
        theta = torch.cat([
            heads.zeta_net[-1].weight.reshape(-1), heads.zeta_net[-1].bias.reshape(-1), heads.zeta_pad_raw.reshape(-1),
        ]).to(rows.weight)
        zeta = zeta_activation(rows.apply("psi", theta), heads.activation)
    else:
        if turns is None:
            raise ValueError("zeta_rows: a nonlinear zeta head is read at the turns' features; pass the turns the rows were built from")
        param = heads.zeta_pad_raw
        at_turns = heads.zeta(turns.logged.to(device=param.device, dtype=param.dtype)).to(rows.weight)
        zeta = torch.cat([at_turns[rows.turn_order.to(at_turns.device)], heads.zeta_pad().to(rows.weight)])
    if slot_normalise:
        per_slot = rows.slot_sums(zeta) / rows.slot_sums(torch.ones_like(zeta)).clamp(min=1e-300)
        zeta = zeta / per_slot[rows.slot].clamp(min=1e-12)
    return zeta


def reward_columns(rows: FlowRows, rewards: np.ndarray) -> torch.Tensor:
    """[R_rows, 2 x ratings]: per rating, the reward at each dialogue's last agent turn (0 where
    missing), then the indicator that the dialogue ends there with that rating observed."""
    r = torch.as_tensor(rewards, dtype=rows.weight.dtype, device=rows.weight.device)
    seen = ~torch.isnan(r)
    out = rows.weight.new_zeros((rows.n_rows, 2 * r.shape[1]))
    out[rows.last] = torch.cat([torch.nan_to_num(r, nan=0.0), seen.to(r.dtype)], 1)
    return out


def fit_q(rows: FlowRows, b: torch.Tensor, ridge: float) -> torch.Tensor:
    """Average-reward LSTD: ``u`` [D, K] with ``E_D[psi (b + delta . u - rho)] = 0`` for every
    column of ``b`` (``rho`` the mean reward per slot). Q is defined up to a constant (the bias and
    pseudo-slot coordinates sum to one on every row, so adding a constant to all of them changes no
    ``delta . u``): the pseudo slot 0's coordinate is pinned to 0. ``ridge``, relative to the mean
    diagonal of ``E[psi psi']``, keeps directions the logs barely span from taking huge values
    (Tikhonov on ``u``, a least-squares solve of the stacked system)."""
    w = rows.weight
    n = float(w.sum())
    m = rows.gram("psi", "delta", w) / n  # [D, D]
    p = rows.rapply("psi", w) / n  # [D]
    c = rows.rapply("psi", b * w.unsqueeze(1)) / n  # [D, K]
    dim = m.shape[0]
    pin = m.new_zeros(dim + 1)
    pin[dim - rows.tmax] = 1.0  # the pseudo slot 0 coordinate (after the features and the bias)
    system = torch.cat([torch.cat([m, -p.unsqueeze(1)], 1), pin.unsqueeze(0)])
    rhs = torch.cat([-c, c.new_zeros((1, c.shape[1]))])
    if ridge > 0:
        scale = float((rows.sq_norms("psi") * w).sum() / n / dim)
        reg = torch.cat([torch.eye(dim, dtype=m.dtype, device=m.device), m.new_zeros((dim, 1))], 1) * (ridge * scale) ** 0.5
        system, rhs = torch.cat([system, reg]), torch.cat([rhs, rhs.new_zeros((dim, rhs.shape[1]))])
    driver = "gelsd" if system.device.type == "cpu" else None
    x = torch.linalg.lstsq(system, rhs, driver=driver).solution
    return x[:dim]


def fqe_corrections(rows: FlowRows, turn_q: TurnQ, seen: torch.Tensor) -> torch.Tensor:
    """[R, 2 x ratings]: ``Q(s', pi) - Q(s, a)`` at every row for a Q given at the real turns
    (``TurnQ``, e.g. fitted by ``enigma.ope.fqe``) and zero at every pseudo slot but slot 0, so
    that along one dialogue the corrections telescope as in the per-decision doubly robust
    estimator: an inner turn gets the target's Q at the next state minus Q at its own logged pair,
    the last turn minus its Q (its successor, a pseudo slot, is worth 0 once the reward is in),
    and slot 0 the mean over dialogues of the target's Q at the first state. A dialogue without
    a rating takes no part in that rating's corrections, as it takes none in its reward sum.

    For the normaliser's columns the Q is the indicator itself (1 at every turn of a rated
    dialogue): its corrections cancel but at slot 0, so the denominator is ``zeta_0`` times the
    rated dialogues, the one-per-cycle it estimates."""
    n = rows.n_dialogues
    counts = rows.counts.unsqueeze(1).to(turn_q.target.dtype)
    lengths = turn_q.n_agent_turns.to(turn_q.logged.device).long()
    t_all = len(turn_q.logged)
    dialogue, turn = turn_positions(lengths)
    has_next = turn + 1 < lengths[dialogue]
    first = turn_offsets(lengths)[:-1]
    s = seen.to(turn_q.logged.dtype)  # [N, K]
    q_next = torch.where(has_next.unsqueeze(1), turn_q.target[torch.clamp(torch.arange(t_all, device=lengths.device) + 1, max=t_all - 1)], 0.0)
    real = torch.cat([(q_next - turn_q.logged) * s[dialogue], s[dialogue] * (has_next.unsqueeze(1).to(s.dtype) - 1.0)], 1)
    pads = real.new_zeros((rows.tmax, real.shape[1]))
    k = s.shape[1]
    pads[0, :k] = (counts * turn_q.target[first] * s).sum(0) / n
    pads[0, k:] = (counts * s).sum(0) / n
    return torch.cat([real[rows.turn_order.to(real.device)], pads]).to(rows.weight)


def ratio_values(rows: FlowRows, zeta: torch.Tensor, b: torch.Tensor, correction: torch.Tensor | None) -> np.ndarray:
    """``sum w zeta (b_r + c_r) / sum w zeta (b_m + c_m)`` per rating (``correction`` None: zero)."""
    corrected = b if correction is None else b + correction
    sums = (rows.weight * zeta) @ corrected
    k = b.shape[1] // 2
    num, den = sums[:k], sums[k:]
    out = torch.where(den > 0, num / den.clamp(min=1e-300), torch.full_like(num, float("nan")))
    return out.detach().cpu().numpy()


def value_estimates(heads: DiceHeads, turns: TurnFeatures, data: Any, tmax: int, ridge: float,
                    turn_q: TurnQ | None = None, slot_normalise: bool = False, lstd_residual: bool = False,
                    zeta_cap: float | None = None) -> dict[str, dict[str, float]]:
    """``{rating: {"weighted", "q", "dr"}}`` for heads (linear or not) on fixed features; the Q of
    ``q`` and ``dr`` is ``turn_q`` when given (``dice.q_model: fqe``), else the LSTD fit on nu's
    basis (the basis, not the heads: it needs no linear head); with ``lstd_residual`` it is
    ``turn_q`` plus an LSTD fit to ``turn_q``'s own TD errors (without a ``turn_q``, the LSTD Q
    alone: the flag changes nothing). ``zeta_cap`` clips the zeta that weights ``dr`` (not
    ``weighted``, the paper's)."""
    rows = flow_rows(turns, tmax)
    with torch.no_grad():
        zeta = zeta_rows(heads, rows, turns, slot_normalise)
        b = reward_columns(rows, data.rewards)
        ones = torch.ones_like(zeta)
        if turn_q is None:
            # LSTD's TD errors sum to zero on the logs (the bias is in its basis): with zeta = 1
            # the corrected ratio is the model's own value
            correction = rows.apply("delta", fit_q(rows, b, ridge))
            q = ratio_values(rows, ones, b, correction)
        else:
            seen = torch.as_tensor(~np.isnan(data.rewards), device=rows.weight.device)
            correction = fqe_corrections(rows, turn_q, seen)
            q = opening_values(turn_q, seen, rows.counts)
            if lstd_residual:
                # the rewards' columns only: the normaliser's Q (the indicator) is exact already
                k = len(data.rating_names)
                extra = rows.apply("delta", fit_q(rows, b + correction, ridge))
                extra[:, k:] = 0.0
                correction = correction + extra
                q = ratio_values(rows, ones, b, correction)
        zeta_dr = zeta if zeta_cap is None else zeta.clamp(max=zeta_cap)
        values = {"weighted": ratio_values(rows, zeta, b, None), "q": q, "dr": ratio_values(rows, zeta_dr, b, correction)}
    return {name: {v: float(values[v][j]) for v in VALUES} for j, name in enumerate(data.rating_names)}


def opening_values(turn_q: TurnQ, seen: torch.Tensor, counts: torch.Tensor | None = None) -> np.ndarray:
    """The direct estimate per rating: the target's mean Q at the rated dialogues' first states
    (each counted ``counts`` times: a weighted resample)."""
    first = turn_offsets(turn_q.n_agent_turns)[:-1]
    s = seen.to(turn_q.target.dtype)
    if counts is not None:
        s = s * counts.to(s).unsqueeze(1)
    return ((turn_q.target[first] * s).sum(0) / s.sum(0).clamp(min=1)).cpu().numpy()
