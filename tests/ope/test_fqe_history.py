"""What the fitted Q reads of a turn's past (``fqe.history``, the default since
studies/delayed_outcome.py), against a hand computation."""

from __future__ import annotations

import torch

from enigma.encoders.base import turn_positions
from enigma.ope.fqe import _earlier_mean


def test_the_history_of_a_turn_is_the_mean_of_its_dialogues_earlier_turns_only():
    n = torch.tensor([3, 1, 2])
    _, turn = turn_positions(n)
    x = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 50.0], [7.0, 70.0], [9.0, 90.0], [11.0, 110.0]])
    h = _earlier_mean(x, turn)
    expected = torch.tensor([[0.0, 0.0], [1.0, 10.0], [2.0, 20.0], [0.0, 0.0], [0.0, 0.0], [9.0, 90.0]])
    assert torch.allclose(h, expected)
