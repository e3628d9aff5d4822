"""A tabular featuriser for small discrete dialogue problems: one one-hot vector per distinct
state-action pair, the state being the whole history (so the padded chain is a tree).

With linear heads on these features zeta and nu are tables, and the DICE saddle point can be
checked against exact values (``tests/ope``). Pairs are identified by their text, so a target
reply equal to the logged reply gets the same vector, as it should. A target reply the logs
never show at its state is off their support (DICE needs d^pi << d^D): the flow into such a pair
cannot be matched, so the pair before it gets zeta = 0. How many samples are off the support is
reported beside the estimate (``off_support_samples``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from enigma.encoders.base import DialogueActions, PairEncoder


@dataclass
class OneHotPrepared:
    logged: torch.Tensor  # [N, K] pair ids, -1 past the last agent turn
    target: torch.Tensor  # [N, K, S] pair ids, -1 where no sample
    vocabulary: dict[tuple, int]
    # target samples whose state-action pair is never logged: nu there is free (no logged slot
    # penalises it), so the flow into it is held at 0 and the pair before it gets zeta = 0
    off_support_samples: int = 0
    target_samples: int = 0


def pair_key(dialogue: DialogueActions, k: int, reply: str) -> tuple:
    """The state-action pair at agent turn ``k`` with ``reply``: the history before that turn."""
    t = dialogue.agent_turns[k]
    history = tuple((turn.role, turn.text) for turn in dialogue.turns[:t])
    return history, reply


class OneHotPairEncoder(PairEncoder):
    def __init__(self, max_pairs: int = 20_000):
        super().__init__()
        self.max_pairs = max_pairs
        self.dim = 0

    def prepare(self, dialogues: list[DialogueActions], max_agent_turns: int) -> OneHotPrepared:
        vocab: dict[tuple, int] = {}
        s_max = max((len(r) for d in dialogues for r in d.target_replies), default=1)
        logged = torch.full((len(dialogues), max_agent_turns), -1, dtype=torch.long)
        target = torch.full((len(dialogues), max_agent_turns, s_max), -1, dtype=torch.long)
        for i, d in enumerate(dialogues):
            if d.n_agent_turns > max_agent_turns:
                raise ValueError(f"dialogue {d.dialog_id}: {d.n_agent_turns} agent turns, more than {max_agent_turns}")
            for k, t in enumerate(d.agent_turns):
                logged[i, k] = vocab.setdefault(pair_key(d, k, d.turns[t].text), len(vocab))
                for s, reply in enumerate(d.target_replies[k]):
                    target[i, k, s] = vocab.setdefault(pair_key(d, k, reply), len(vocab))
        if len(vocab) > self.max_pairs:
            raise ValueError(
                f"onehot encoder: {len(vocab)} distinct state-action pairs exceed max_pairs={self.max_pairs}; "
                "it is meant for small tabular problems (use the frozen encoder for text)"
            )
        self.dim = max(len(vocab), 1)
        logged_ids = set(logged[logged >= 0].tolist())
        sampled = target[target >= 0].tolist()
        off = sum(1 for i in sampled if i not in logged_ids)
        return OneHotPrepared(logged, target, vocab, off, len(sampled))

    def forward(self, prepared: OneHotPrepared, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._one_hot(prepared.logged[index]), self._one_hot(prepared.target[index])

    def _one_hot(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.nn.functional.one_hot(ids.clamp(min=0), self.dim).float()
        return out * (ids >= 0).unsqueeze(-1).float()

    def diagnostics(self, prepared: OneHotPrepared) -> dict[str, Any]:
        return {"target_samples": prepared.target_samples, "off_support_samples": prepared.off_support_samples}
