"""The padded chain of slots as weighted rows (``FlowRows``), the layout ``exact_nu`` and
``value`` compute on.

A real agent turn is a row of its own (weight 1). A pseudo slot has no input: its nu and zeta are
one scalar per slot position, the same in every dialogue, so the pseudo slots of one position are
one row whose weight is how many dialogues pad there, and whose ``delta`` is their mean (slot 0's
successor is each dialogue's first turn with the target's reply; every other pseudo slot's
successor is the next pseudo slot). Every quantity of the problem is a weighted sum over rows,
linear in ``delta`` within a row, so the rows give exactly the sums of the ``N x Tmax`` slots at a
cost that grows with the agent turns, not with ``N x Tmax``.

nu's basis has one coordinate per pseudo slot (``D = d + 1 + Tmax``), but a real turn that is not
its dialogue's last has none of them, neither at itself nor at its successor (the next turn). So
the rows are kept in two blocks: those *inner* turns with their ``d + 1`` feature and bias
coordinates only, and the few *edge* rows (each dialogue's last turn, whose successor is a pseudo
slot, and the ``Tmax`` pseudo rows) with all ``D``. Products with the basis are computed block by
block: memory and time grow with the turns times ``d``, not times ``Tmax`` (dialogues of 300 turns
need ``Tmax`` 301).

A dialogue counted ``c`` times (``TurnFeatures.counts``: a bootstrap resample held as its distinct
dialogues) gives its real rows weight ``c`` and ``c`` to the pseudo rows it pads, and
``n_dialogues`` counts it ``c`` times: every sum is the one of the dialogue repeated ``c`` times.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from enigma.ope.turns import TurnFeatures


@dataclass
class FlowRows:
    """``inner_psi`` / ``inner_delta`` [Ri, d + 1] and ``edge_psi`` / ``edge_delta`` [Re, D]: nu's
    basis at the logged action (features, bias, one coordinate per pseudo slot) and ``psi'`` at the
    successor (the target's reply at a real slot, ``t + 1`` cyclic) minus ``psi``, the inner rows
    first. ``weight`` [R]; ``slot`` [R] the slot position; ``last`` [N] the row of each dialogue's
    last agent turn (rows numbered inner then edge); ``n_dialogues`` the dialogues counted with
    their ``counts``; ``turn_order``: a per-turn quantity indexed by it is laid out as the real rows
    (what reads the rows beside the turns, e.g. a nonlinear zeta or a Q given at the turns, uses it)."""

    inner_psi: torch.Tensor
    inner_delta: torch.Tensor
    edge_psi: torch.Tensor
    edge_delta: torch.Tensor
    weight: torch.Tensor
    slot: torch.Tensor
    last: torch.Tensor
    n_dialogues: int
    tmax: int
    turn_order: torch.Tensor  # [T] the real turn (``TurnFeatures`` row) behind each real row, in the rows' order

    @property
    def n_slots(self) -> int:
        return self.n_dialogues * self.tmax

    @property
    def counts(self) -> torch.Tensor:
        """[N] how many times each dialogue counts (1 but in a weighted resample): the weight of its last row."""
        return self.weight[self.last]

    @property
    def n_rows(self) -> int:
        return int(self.weight.shape[0])

    @property
    def width(self) -> int:
        return int(self.edge_psi.shape[1])

    @property
    def _split(self) -> int:
        return int(self.inner_psi.shape[0])

    def _blocks(self, which: str) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.inner_psi, self.edge_psi) if which == "psi" else (self.inner_delta, self.edge_delta)

    def dense(self, which: str) -> torch.Tensor:
        """``psi`` or ``delta`` as one [R, D] matrix (small problems and tests)."""
        inner, edge = self._blocks(which)
        return torch.cat([torch.nn.functional.pad(inner, (0, self.width - inner.shape[1])), edge])

    @property
    def psi(self) -> torch.Tensor:
        return self.dense("psi")

    @property
    def delta(self) -> torch.Tensor:
        return self.dense("delta")

    def apply(self, which: str, x: torch.Tensor) -> torch.Tensor:
        """``M @ x`` for ``M`` = psi or delta: ``x`` [D] or [D, K] -> [R] or [R, K]."""
        inner, edge = self._blocks(which)
        return torch.cat([inner @ x[: inner.shape[1]], edge @ x])

    def rapply(self, which: str, y: torch.Tensor) -> torch.Tensor:
        """``M' y``: ``y`` [R] or [R, K] -> [D] or [D, K]."""
        inner, edge = self._blocks(which)
        i = self._split
        out = edge.T @ y[i:]
        out[: inner.shape[1]] += inner.T @ y[:i]
        return out

    def gram(self, a: str, b: str, scale: torch.Tensor) -> torch.Tensor:
        """``A' diag(scale) B`` [D, D] for A, B among psi and delta."""
        (ai, ae), (bi, be) = self._blocks(a), self._blocks(b)
        i, d1 = self._split, ai.shape[1]
        out = ae.T @ (be * scale[i:].unsqueeze(1))
        out[:d1, :d1] += ai.T @ (bi * scale[:i].unsqueeze(1))
        return out

    def sq_norms(self, which: str) -> torch.Tensor:
        """[R] each row's squared norm."""
        inner, edge = self._blocks(which)
        return torch.cat([(inner**2).sum(1), (edge**2).sum(1)])

    def slot_sums(self, per_row: torch.Tensor) -> torch.Tensor:
        """Sum over the slots of each position of a per-row quantity ([R] or [R, P])."""
        out = per_row.new_zeros((self.tmax,) + tuple(per_row.shape[1:]))
        w = self.weight.reshape((-1,) + (1,) * (per_row.dim() - 1))
        return out.index_add_(0, self.slot, per_row * w)

    def slot_sums_of(self, which: str, scale: torch.Tensor) -> torch.Tensor:
        """``slot_sums`` of the rows of psi or delta scaled by ``scale`` [R]: [Tmax, D]."""
        inner, edge = self._blocks(which)
        i, w = self._split, self.weight * scale
        d1 = inner.shape[1]
        out = edge.new_zeros((self.tmax, self.width))
        out.index_add_(0, self.slot[i:], edge * w[i:].unsqueeze(1))
        # the inner rows' columns added on a contiguous copy and put back: index_add_ into the strided
        # view out[:, :d1] took several times as long; every element gets the same additions in the
        # same order (the edge rows', then the inner rows' in row order), so the sums are the same bits
        head = out[:, :d1].contiguous()
        out[:, :d1] = head.index_add_(0, self.slot[:i], inner * w[:i].unsqueeze(1))
        return out


def flow_rows(turns: TurnFeatures, tmax: int) -> FlowRows:
    """The rows of the cyclic chain of slots 0 (pseudo), 1..n (the agent turns), n+1..Tmax-1
    (pseudo) of every dialogue, from its real turns' features (``TurnFeatures``, ragged), in
    float64. Built once per ``turns`` and ``tmax``: the solver and the value (``enigma.ope.value``)
    read the same rows, in the full fit and in every bootstrap resample."""
    if tmax not in turns.rows_cache:
        turns.rows_cache[tmax] = _build(turns.to(torch.float64), tmax)
    return turns.rows_cache[tmax]


def _build(turns: TurnFeatures, tmax: int) -> FlowRows:
    logged, target = turns.logged, turns.target
    n, d = turns.n_dialogues, logged.shape[-1]
    dt, device = logged.dtype, logged.device
    m = turns.sample_mask.to(device=device, dtype=dt).unsqueeze(-1)
    target_mean = (target * m).sum(1) / m.sum(1).clamp(min=1)  # nu is linear: mean of nu = nu of mean
    lengths = turns.n_agent_turns.to(device).long()
    dialogue, turn = turns.positions()
    eye = torch.eye(tmax, dtype=dt, device=device)
    counts = torch.ones(n, dtype=dt, device=device) if turns.counts is None else turns.counts.to(device=device, dtype=dt)
    total = int(round(float(counts.sum())))

    # real rows: slot turn + 1; the successor of a turn is the next turn (the next row) with the
    # target's reply, or after the last turn the pseudo slot turn + 2 (slot 0 when the chain wraps)
    has_next = turn + 1 < lengths[dialogue]
    psi = torch.cat([logged, torch.ones_like(logged[:, :1])], 1)
    nxt = torch.clamp(torch.arange(len(turn), device=device) + 1, max=max(len(turn) - 1, 0))
    succ = torch.cat([torch.where(has_next.unsqueeze(1), target_mean[nxt], 0.0), has_next.to(dt).unsqueeze(1)], 1)
    delta = succ - psi
    del succ
    inner, last = has_next, ~has_next  # the last turns are in dialogue order: one per dialogue
    edge_psi = torch.nn.functional.pad(psi[last], (0, tmax))
    edge_delta = torch.cat([delta[last], eye[(turn[last] + 2) % tmax]], 1)

    # pseudo rows, one per slot position: slot 0 in every dialogue (successor: the first turn with
    # the target's reply), slot t >= 1 in the dialogues shorter than t (successor: t + 1, cyclic)
    width = d + 1 + tmax
    pad_psi = torch.zeros(tmax, width, dtype=dt, device=device)
    pad_psi[:, d + 1 :] = eye
    pad_succ = torch.zeros_like(pad_psi)
    pad_succ[0, :d] = (counts.unsqueeze(1) * target_mean[turn == 0]).sum(0) / total
    pad_succ[0, d] = 1.0
    pad_succ[1:, d + 1 :] = eye[(torch.arange(1, tmax, device=device) + 1) % tmax]
    # dialogues shorter than t, per slot t: n minus those with at least t agent turns
    longer = torch.bincount(lengths, weights=counts, minlength=tmax)[:tmax].flip(0).cumsum(0).flip(0)
    pad_weight = (total - longer).to(dt)
    pad_weight[0] = total

    n_inner = int(inner.sum())
    return FlowRows(
        inner_psi=psi[inner],
        inner_delta=delta[inner],
        edge_psi=torch.cat([edge_psi, pad_psi]),
        edge_delta=torch.cat([edge_delta, pad_succ - pad_psi]),
        weight=torch.cat([counts[dialogue[inner]], counts[dialogue[last]], pad_weight]),
        slot=torch.cat([turn[inner] + 1, turn[last] + 1, torch.arange(tmax, device=device)]),
        last=n_inner + torch.arange(n, device=device),
        n_dialogues=total,
        tmax=tmax,
        turn_order=torch.cat([inner.nonzero().squeeze(1), last.nonzero().squeeze(1)]),
    )
