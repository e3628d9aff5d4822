"""Fixed features of the real agent turns, ragged: one row per (dialogue, agent turn).

Padding every dialogue to ``Tmax`` slots (``enigma.ope.padding``) is how the estimator is
defined, not how it has to be stored. A dense ``[dialogues x longest x dim]`` table grows with the
longest dialogue times the number of dialogues: one 300-turn chat in a store of short ones makes
every dialogue pay for 300 turns. Here the real turns are rows in dialogue order and the pseudo
slots are not stored at all (they have no input: one scalar per slot position, shared by every
dialogue), so memory grows with the number of agent turns. ``FlowRows`` (``enigma.ope.flow_rows``)
builds the padded chain's sums from these rows; ``dense`` lays a batch out as ``[B, K, ...]`` for
the code that works on padded batches (gradient descent-ascent, the final pass).

A bootstrap resample draws about 63% of the dialogues, many of them twice or more. Held as
``select(index)`` it copies a repeated dialogue's rows, and every pass of the solver over the rows
pays for each copy; held as ``resample(*resample_counts(index))`` it keeps each drawn dialogue once
with how many times it was drawn (``counts``), and ``FlowRows`` weighs its rows by that: the same sums over
about 63% of the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from enigma.encoders.base import pad_rows, rows_of, turn_mask, turn_offsets, turn_positions


@dataclass
class TurnFeatures:
    """``logged`` [T, d]: the logged pair's features at every real agent turn; ``target`` [T, S, d]:
    the target's S sampled replies at the same states; ``sample_mask`` [T, S]: which samples exist;
    ``n_agent_turns`` [N]: the dialogues' lengths (their rows are consecutive, in order);
    ``counts`` [N]: how many times each dialogue counts in every sum (None: once each)."""

    logged: torch.Tensor
    target: torch.Tensor
    sample_mask: torch.Tensor
    n_agent_turns: torch.Tensor
    counts: torch.Tensor | None = None
    # tmax -> the padded chain's rows (``enigma.ope.flow_rows``), built once for these features
    rows_cache: dict[int, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        t = int(self.n_agent_turns.sum())
        if self.counts is not None and self.counts.shape != self.n_agent_turns.shape:
            raise ValueError(f"TurnFeatures: {self.n_agent_turns.shape[0]} dialogues but {self.counts.shape[0]} counts")
        if self.logged.shape[0] != t or self.target.shape[0] != t or self.sample_mask.shape[0] != t:
            raise ValueError(f"TurnFeatures: {t} agent turns but {self.logged.shape[0]} logged, {self.target.shape[0]} target "
                             f"and {self.sample_mask.shape[0]} mask rows")

    @property
    def n_dialogues(self) -> int:
        return int(self.n_agent_turns.shape[0])

    @property
    def dim(self) -> int:
        return int(self.logged.shape[-1])

    def positions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[T] each row's dialogue and agent-turn index (0-based) within it."""
        return turn_positions(self.n_agent_turns.to(self.logged.device))

    def last(self) -> torch.Tensor:
        """[N] the row of each dialogue's last agent turn."""
        return turn_offsets(self.n_agent_turns.to(self.logged.device))[1:] - 1

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> "TurnFeatures":
        return TurnFeatures(self.logged.to(device=device, dtype=dtype), self.target.to(device=device, dtype=dtype),
                            self.sample_mask.to(device), self.n_agent_turns.to(device),
                            None if self.counts is None else self.counts.to(device))

    def select(self, index: torch.Tensor) -> "TurnFeatures":
        """The dialogues at ``index`` (repeats allowed), in that order."""
        r = rows_of(self.n_agent_turns.cpu(), index).to(self.logged.device)
        counts = None if self.counts is None else self.counts[index.to(self.counts.device)]
        return TurnFeatures(self.logged[r], self.target[r], self.sample_mask[r], self.n_agent_turns[index.to(self.n_agent_turns.device)],
                            counts)

    def resample(self, unique: torch.Tensor, counts: torch.Tensor) -> "TurnFeatures":
        """The distinct dialogues ``unique`` of a resample, each counted ``counts`` times: the sums of
        ``select`` of the resample with each dialogue's rows once (``resample_counts``)."""
        if self.counts is not None:
            raise ValueError("TurnFeatures.resample: these features are already a weighted resample")
        return replace(self.select(unique), counts=counts.to(device=self.logged.device, dtype=torch.long))

    def dense(self, index: torch.Tensor | None, k_max: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``logged`` [B, K, d] and ``target`` [B, K, S, d] of the dialogues at ``index`` (all when
        None), zeros past each one's last agent turn: the padded batch layout."""
        part = self if index is None else self.select(index)
        return pad_rows(part.logged, part.n_agent_turns, k_max), pad_rows(part.target, part.n_agent_turns, k_max)

    @classmethod
    def from_dense(cls, logged: torch.Tensor, target: torch.Tensor, sample_mask: torch.Tensor,
                   n_agent_turns: torch.Tensor) -> "TurnFeatures":
        """From the padded layout ([N, K, d], [N, K, S, d], [N, K, S]): its real turns' rows."""
        valid = turn_mask(n_agent_turns.to(logged.device), logged.shape[1])
        return cls(logged[valid], target[valid], sample_mask.to(logged.device)[valid], n_agent_turns.to(logged.device))


def resample_counts(index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct dialogues of a resample ``index`` (drawn with replacement) and how many times
    each was drawn, for ``TurnFeatures.resample``."""
    return torch.unique(torch.as_tensor(index, dtype=torch.long), return_counts=True)
