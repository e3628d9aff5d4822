"""Pseudo-state padding (paper §3.1, Appendix A): every dialogue becomes ``Tmax`` slots.

Slot 0 is the pseudo state ``Pad_Tmax``; slots ``1..n`` hold the dialogue's ``n`` agent turns;
slots ``n+1..Tmax-1`` are pseudo states. The successor of slot ``j`` is slot ``j+1``, and the
last slot's successor is slot 0, so each dialogue is a cycle of length ``Tmax``. With that
cycle every slot position carries exactly ``1/Tmax`` of the padded distribution, under the
logging policy and under the target alike, which is what makes ``E_D[zeta] = 1`` hold slot by
slot at the saddle point.

Pseudo slots have no encoder input: their zeta/nu are learnable scalars per slot position,
shared across dialogues. Their next action is the deterministic ``NextPad``, so the next-state
value after a pseudo slot is just the next pseudo slot's nu.
"""

from __future__ import annotations

import torch


class PaddingError(ValueError):
    """A dialogue does not fit the configured number of slots."""


def check_tmax(n_agent_turns: "list[int]", tmax: int, dialog_ids: "list[str] | None" = None) -> None:
    """Every dialogue needs its pseudo slot 0 plus one slot per agent turn."""
    for i, n in enumerate(n_agent_turns):
        if n < 1:
            who = dialog_ids[i] if dialog_ids else f"#{i}"
            raise PaddingError(f"dialogue {who}: no agent turn, nothing to pad")
        if n + 1 > tmax:
            who = dialog_ids[i] if dialog_ids else f"#{i}"
            longest = max(n_agent_turns)
            raise PaddingError(
                f"dialogue {who} has {n} agent turns but dice.tmax={tmax} leaves room for "
                f"{tmax - 1} (slot 0 is the pseudo initial state); the longest dialogue has "
                f"{longest} agent turns, so set dice.tmax to at least {longest + 1} in params.yaml"
            )


def real_mask(n_agent_turns: torch.Tensor, tmax: int) -> torch.Tensor:
    """[B, Tmax] bool: True where the slot holds a real agent turn (slots 1..n)."""
    j = torch.arange(tmax, device=n_agent_turns.device)
    return (j >= 1) & (j <= n_agent_turns.unsqueeze(1))


def to_slots(
    per_turn: torch.Tensor, per_slot_pad: torch.Tensor, n_agent_turns: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Lay per-turn values [B, K] into [B, Tmax] slots: turn k at slot k+1, pseudo values
    ``per_slot_pad`` [Tmax] everywhere else. ``mask`` is ``real_mask`` if already computed."""
    b, k = per_turn.shape
    tmax = per_slot_pad.shape[0]
    if k + 1 > tmax:
        raise PaddingError(f"{k} agent turns need at least {k + 1} slots, Tmax is {tmax}")
    shifted = torch.nn.functional.pad(per_turn, (1, tmax - 1 - k))
    if mask is None:
        mask = real_mask(n_agent_turns, tmax)
    return torch.where(mask, shifted, per_slot_pad.to(per_turn.dtype).unsqueeze(0).expand(b, tmax))


def successor_values(target_slots: torch.Tensor) -> torch.Tensor:
    """Given slot values at the target's action ([B, Tmax]), the value of each slot's
    successor: slot j+1 for j < Tmax-1, slot 0 for the last slot (the cycle)."""
    return torch.roll(target_slots, shifts=-1, dims=1)


def last_turn_slot(n_agent_turns: torch.Tensor) -> torch.Tensor:
    """Slot index of each dialogue's last agent turn (where zeta_T is read)."""
    return n_agent_turns.long()
