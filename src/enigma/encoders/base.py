"""The seam between the DICE trainer (``enigma.ope``) and the text encoders.

The trainer sees a dialogue as its agent turns: at each one the logged state-action pair
(history, logged reply) and S target pairs (history, target reply ``a'_t ~ pi(s_t)``). An
encoder turns those into vectors; the trainer puts the zeta/nu heads on top.

``prepare`` runs once per data set (tokenising, looking up cached embeddings) and returns
tensors on the CPU; ``forward`` maps a batch of prepared dialogues to vectors, so that a
fine-tuned encoder can backpropagate while a frozen one is a table lookup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from enigma.contracts import Turn


@dataclass(frozen=True)
class DialogueActions:
    """One logged dialogue with the target agent's sampled replies at its agent turns."""

    dialog_id: str
    turns: tuple[Turn, ...]
    agent_turns: tuple[int, ...]  # indices into ``turns`` of the agent turns, in order
    target_replies: tuple[tuple[str, ...], ...]  # per agent turn, the S sampled replies

    @property
    def n_agent_turns(self) -> int:
        return len(self.agent_turns)


class PairEncoder(torch.nn.Module):
    """Base class: subclasses set ``dim`` and implement ``prepare`` and ``forward``."""

    dim: int

    def prepare(self, dialogues: list[DialogueActions], max_agent_turns: int) -> Any:
        """Precompute what ``forward`` needs for these dialogues (CPU tensors)."""
        raise NotImplementedError

    def forward(self, prepared: Any, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Vectors for the dialogues at ``index`` (positions in the prepared list):
        ``logged`` of shape [B, K, dim] and ``target`` of shape [B, K, S, dim], K being
        ``max_agent_turns``; slots past a dialogue's last agent turn are zeros."""
        raise NotImplementedError

    def diagnostics(self, prepared: Any) -> dict[str, Any]:
        """Facts about the prepared features that belong beside an estimate (none by default)."""
        return {}
