"""The packed sequence of ENIGMA's fine-tuned encoder (paper, Appendix A.2), tokenizer-agnostic.

One dialogue, with S target replies per agent turn, becomes one token sequence so that all its
state-action pairs are encoded in a single forward pass:

    [CLS] [user_1 SEP] [logged_1 SEP] [target_1,1 SEP] .. [target_1,S SEP] [user_2 SEP] ...

* Every utterance is one *segment*, closed by the separator token. History segments (user
  turns and logged agent replies) are numbered in order; a target segment carries the number
  of the logged reply it stands beside.
* Token types: 0 for ``[CLS]`` and user segments, 1 for both kinds of agent reply.
* Position ids: history tokens count up from 0; each target reply reuses the positions of the
  logged reply of its turn (starting where that reply starts), so the encoder sees it exactly
  where the logged reply stood.
* Attention (block-causal over segments): a history token sees ``[CLS]``, every earlier history
  segment and its own segment; a target token sees ``[CLS]``, the history segments *before* its
  logged reply, and its own segment. So a target reply never sees the logged reply (nor any
  other sample), and no later token ever sees a target reply: the history stays the logged one.
  Inside a segment attention is bidirectional, as the encoder was pretrained.
  Because visibility only ever reaches earlier segments, a pair's vector equals what the
  encoder gives for (history, reply) packed alone with the same mask: packing changes cost, not
  values (tested).
* The vector of a pair is the hidden state at the separator closing its reply: the last token
  of the reply, which has attended to the whole reply and its visible history.

Truncation: every utterance keeps at most ``cap`` content tokens (its first ones). If the history
positions still exceed the model's position limit, ``pack_with_limit`` lowers the cap for that
dialogue until it fits (long dialogues lose utterance tails, not turns), and raises
``PackingError`` if even one token per utterance does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

USER_TYPE = 0
AGENT_TYPE = 1


class PackingError(ValueError):
    """A dialogue cannot be packed (malformed input or too long); the message names it."""


@dataclass(frozen=True)
class PackedDialogue:
    dialog_id: str
    input_ids: np.ndarray  # [L] int64
    position_ids: np.ndarray  # [L] int64 (before any model-specific offset)
    token_type_ids: np.ndarray  # [L] int64
    segment: np.ndarray  # [L] int32: history segment number; for target tokens that of their logged reply
    branch: np.ndarray  # [L] int32: 0 for history tokens, a distinct id > 0 per target segment
    logged_last: np.ndarray  # [K] int64: index of the last token of each logged reply
    target_last: np.ndarray  # [K, S] int64: index of the last token of each target reply, -1 if absent
    cap: int  # the per-utterance token cap actually used

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_positions(self) -> int:
        return int(self.position_ids.max()) + 1


def pack_dialogue(
    dialog_id: str,
    roles: Sequence[str],
    turn_tokens: Sequence[Sequence[int]],
    agent_turns: Sequence[int],
    target_tokens: Sequence[Sequence[Sequence[int]]],
    *,
    cls_id: int,
    sep_id: int,
    cap: int,
) -> PackedDialogue:
    """Pack one dialogue. ``turn_tokens[i]`` are the content token ids of turn ``i``;
    ``target_tokens[k][s]`` those of sample ``s`` at agent turn ``agent_turns[k]``."""
    if len(roles) != len(turn_tokens):
        raise PackingError(f"dialogue {dialog_id}: {len(roles)} roles but {len(turn_tokens)} token lists")
    if len(target_tokens) != len(agent_turns):
        raise PackingError(
            f"dialogue {dialog_id}: {len(agent_turns)} agent turns but target replies for {len(target_tokens)}"
        )
    slot_of_turn: dict[int, int] = {}
    for k, t in enumerate(agent_turns):
        if not 0 <= t < len(roles) or roles[t] != "agent":
            raise PackingError(f"dialogue {dialog_id}: agent_turns[{k}] = {t} is not the index of an agent turn")
        if k and t <= agent_turns[k - 1]:
            raise PackingError(f"dialogue {dialog_id}: agent_turns must be increasing (got {list(agent_turns)})")
        slot_of_turn[t] = k
    # Turns may have different numbers of samples; absent ones keep index -1 (zero vectors).
    n_s = max((len(t) for t in target_tokens), default=0)

    ids: list[int] = [cls_id]
    pos: list[int] = [0]
    types: list[int] = [USER_TYPE]
    seg: list[int] = [0]
    branch: list[int] = [0]
    logged_last = np.full(len(agent_turns), -1, dtype=np.int64)
    target_last = np.full((len(agent_turns), n_s), -1, dtype=np.int64)
    next_pos, next_seg, next_branch = 1, 1, 1
    # Turns after the last evaluated agent turn cannot influence any pair (nothing looks forward).
    end = (agent_turns[-1] + 1) if agent_turns else 0
    for t in range(end):
        role = roles[t]
        if role not in ("user", "agent"):
            raise PackingError(f"dialogue {dialog_id}: turn {t} has unknown role {role!r}")
        body = list(turn_tokens[t])[:cap] + [sep_id]
        start_pos = next_pos
        ttype = AGENT_TYPE if role == "agent" else USER_TYPE
        ids += body
        pos += range(start_pos, start_pos + len(body))
        types += [ttype] * len(body)
        seg += [next_seg] * len(body)
        branch += [0] * len(body)
        next_pos += len(body)
        if t in slot_of_turn:
            k = slot_of_turn[t]
            logged_last[k] = len(ids) - 1
            for s, sample in enumerate(target_tokens[k]):
                tbody = list(sample)[:cap] + [sep_id]
                ids += tbody
                pos += range(start_pos, start_pos + len(tbody))
                types += [AGENT_TYPE] * len(tbody)
                seg += [next_seg] * len(tbody)
                branch += [next_branch] * len(tbody)
                next_branch += 1
                target_last[k, s] = len(ids) - 1
        next_seg += 1
    return PackedDialogue(
        dialog_id=dialog_id,
        input_ids=np.asarray(ids, dtype=np.int64),
        position_ids=np.asarray(pos, dtype=np.int64),
        token_type_ids=np.asarray(types, dtype=np.int64),
        segment=np.asarray(seg, dtype=np.int32),
        branch=np.asarray(branch, dtype=np.int32),
        logged_last=logged_last,
        target_last=target_last,
        cap=cap,
    )


def pack_with_limit(
    dialog_id: str,
    roles: Sequence[str],
    turn_tokens: Sequence[Sequence[int]],
    agent_turns: Sequence[int],
    target_tokens: Sequence[Sequence[Sequence[int]]],
    *,
    cls_id: int,
    sep_id: int,
    cap: int,
    max_positions: int,
) -> PackedDialogue:
    """``pack_dialogue`` with the largest cap <= ``cap`` whose positions fit ``max_positions``."""
    packed = pack_dialogue(dialog_id, roles, turn_tokens, agent_turns, target_tokens, cls_id=cls_id, sep_id=sep_id, cap=cap)
    if packed.n_positions <= max_positions:
        return packed
    lo, hi = 1, cap - 1  # the largest fitting cap lies in [lo, hi]; positions grow with the cap
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        trial = pack_dialogue(dialog_id, roles, turn_tokens, agent_turns, target_tokens, cls_id=cls_id, sep_id=sep_id, cap=mid)
        if trial.n_positions <= max_positions:
            best, lo = trial, mid + 1
        else:
            hi = mid - 1
    if best is None:
        raise PackingError(
            f"dialogue {dialog_id}: too many turns for the encoder's {max_positions} positions even at one "
            f"token per utterance ({len(roles)} turns)"
        )
    return best


def visibility(segment: torch.Tensor, branch: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean attention mask ``[..., L, L]`` (query, key): True where the query may attend.

    ``segment`` and ``branch`` are ``[..., L]`` as in ``PackedDialogue``; ``valid`` marks real
    (non-padding) tokens. Padding keys are never visible; a padding query sees only position 0,
    so that no softmax row is empty.
    """
    is_target = branch > 0
    upto = torch.where(is_target, segment - 1, segment)  # last history segment each query sees
    key_is_history = (branch == 0).unsqueeze(-2)
    sees_history = key_is_history & (segment.unsqueeze(-2) <= upto.unsqueeze(-1))
    same_branch = is_target.unsqueeze(-1) & (branch.unsqueeze(-2) == branch.unsqueeze(-1))
    mask = sees_history | same_branch
    if valid is not None:
        mask = mask & valid.unsqueeze(-2)
        first_key = torch.zeros_like(mask)
        first_key[..., 0] = True
        mask = torch.where(valid.unsqueeze(-1), mask, first_key)
    return mask
