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

from enigma.dialogue import Turn


def turn_offsets(n_agent_turns: torch.Tensor) -> torch.Tensor:
    """[N + 1]: the rows of dialogue i are ``offsets[i]:offsets[i + 1]``."""
    return torch.nn.functional.pad(torch.cumsum(n_agent_turns.long(), 0), (1, 0))


def turn_positions(n_agent_turns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[T] each row's dialogue and agent-turn index (0-based) within it."""
    n = n_agent_turns.long()
    dialogue = torch.repeat_interleave(torch.arange(len(n), device=n.device), n)
    return dialogue, torch.arange(len(dialogue), device=n.device) - turn_offsets(n)[:-1][dialogue]


def turn_mask(n_agent_turns: torch.Tensor, k_max: int) -> torch.Tensor:
    """[N, K] bool: True at a real agent turn of the padded layout (the rows' order, row-major)."""
    return torch.arange(k_max, device=n_agent_turns.device).unsqueeze(0) < n_agent_turns.unsqueeze(1)


def pad_rows(rows: torch.Tensor, n_agent_turns: torch.Tensor, k_max: int) -> torch.Tensor:
    """Per-turn rows [T, ...] laid out padded, [N, K, ...], zeros past each dialogue's last turn."""
    dialogue, turn = turn_positions(n_agent_turns.to(rows.device))
    out = rows.new_zeros((len(n_agent_turns), k_max) + tuple(rows.shape[1:]))
    out[dialogue, turn] = rows
    return out


def pair_block(pairs: list[list], s_max: int, width: int) -> torch.Tensor:
    """[T, 1 + S, width] float32 from one entry per turn row: the logged pair's features then each
    target sample's, None where there is no sample (zeros, as a zero-filled tensor written row by
    row had). Each Python float is rounded to float32 once, as ``torch.tensor`` of the row did."""
    zeros = [0.0] * width
    return torch.tensor([[zeros if f is None else f for f in pair] for pair in pairs],
                        dtype=torch.float32).reshape(len(pairs), 1 + s_max, width)


def rows_of(n_agent_turns: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
    """The row numbers of the dialogues at ``index`` (all when None), in that order; a dialogue
    given twice (a bootstrap resample) gives its rows twice."""
    n = n_agent_turns.long()
    if index is None:
        return torch.arange(int(n.sum()))
    index = index.long().cpu()
    counts = n[index]
    dialogue, within = turn_positions(counts)
    return turn_offsets(n)[:-1][index][dialogue] + within


@dataclass(frozen=True)
class DialogueActions:
    """One logged dialogue with the target agent's sampled replies at its agent turns."""

    dialog_id: str
    turns: tuple[Turn, ...]
    agent_turns: tuple[int, ...]  # indices into ``turns`` of the agent turns, in order
    target_replies: tuple[tuple[str, ...], ...]  # per agent turn, the S sampled replies
    # per agent turn, parallel to target_replies: the conversation each reply was said in (a
    # retrieval stand-in's source, a JSON list of [role, text] before it), None where unknown
    target_sources: tuple[tuple[str | None, ...], ...] | None = None

    def source_of(self, k: int, s: int) -> str | None:
        return None if self.target_sources is None else self.target_sources[k][s]

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

    def turn_rows(self, prepared: Any, index: torch.Tensor, n_agent_turns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The same vectors at the real agent turns only, ragged: ``logged`` [T, dim] and ``target``
        [T, S, dim], the turns of the dialogues at ``index`` in order (``n_agent_turns``: every
        prepared dialogue's). This default drops the padding of ``forward``; an encoder whose
        padded batch would be large (long dialogues) computes the rows directly."""
        logged, target = self(prepared, index)
        valid = turn_mask(n_agent_turns[index.cpu()].to(logged.device), logged.shape[1])
        return logged[valid], target[valid]

    def diagnostics(self, prepared: Any) -> dict[str, Any]:
        """Facts about the prepared features that belong beside an estimate (none by default)."""
        return {}
