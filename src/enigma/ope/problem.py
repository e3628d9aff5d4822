"""What a DICE solver works on: ``DiceData``, everything about the dialogues but the encoder
input. The solvers (``gda``, ``exact_nu``) take it and return a ``solution.Solution``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


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
