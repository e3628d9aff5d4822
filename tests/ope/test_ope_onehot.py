"""The tabular featuriser: one vector per distinct (history, reply), zeros where nothing is."""

from __future__ import annotations

import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.onehot import OneHotPairEncoder


def _dialogue(did, user, reply, targets):
    return DialogueActions(did, (Turn("user", user), Turn("agent", reply)), (1,), (tuple(targets),))


def test_same_pair_same_vector_and_padding_is_zero():
    enc = OneHotPairEncoder()
    dialogues = [_dialogue("a", "hi", "x", ["x", "y"]), _dialogue("b", "hi", "y", ["x"])]
    prep = enc.prepare(dialogues, max_agent_turns=2)
    assert enc.dim == 2  # (hi, x) and (hi, y)
    logged, target = enc(prep, torch.tensor([0, 1]))
    assert logged.shape == (2, 2, 2) and target.shape == (2, 2, 2, 2)
    assert torch.equal(logged[0, 0], target[0, 0, 0]) and torch.equal(logged[1, 0], target[0, 0, 1])
    assert torch.equal(target[1, 0, 0], logged[0, 0])
    assert float(logged[:, 1].abs().sum()) == 0 and float(target[1, 0, 1].abs().sum()) == 0


def test_different_histories_are_different_states():
    enc = OneHotPairEncoder()
    enc.prepare([_dialogue("a", "hi", "x", ["x"]), _dialogue("b", "hello", "x", ["x"])], 1)
    assert enc.dim == 2


def test_too_many_pairs_is_a_clear_error():
    enc = OneHotPairEncoder(max_pairs=1)
    with pytest.raises(ValueError, match="max_pairs=1"):
        enc.prepare([_dialogue("a", "hi", "x", ["y"])], 1)
    with pytest.raises(ValueError, match="dialogue a"):
        OneHotPairEncoder().prepare([_dialogue("a", "hi", "x", ["y"])], 0)
