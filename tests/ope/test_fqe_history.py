"""What the fitted Q reads of a turn's past (``fqe.history``, the default since
studies/delayed_outcome.py; ``fqe.history_extremes``), against a hand computation."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from enigma.encoders.base import turn_positions
from enigma.ope.config import FqeConfig
from enigma.ope.fqe import _earlier_extremes, _earlier_mean


def test_the_history_of_a_turn_is_the_mean_of_its_dialogues_earlier_turns_only():
    n = torch.tensor([3, 1, 2])
    _, turn = turn_positions(n)
    x = torch.tensor([[1.0, 10.0], [3.0, 30.0], [5.0, 50.0], [7.0, 70.0], [9.0, 90.0], [11.0, 110.0]])
    h = _earlier_mean(x, turn)
    expected = torch.tensor([[0.0, 0.0], [1.0, 10.0], [2.0, 20.0], [0.0, 0.0], [0.0, 0.0], [9.0, 90.0]])
    assert torch.allclose(h, expected)


def test_the_extremes_of_a_turns_past_are_its_dialogues_earlier_max_then_min():
    n = torch.tensor([4, 1, 2])
    _, turn = turn_positions(n)
    x = torch.tensor([[1.0, -5.0], [-3.0, 30.0], [5.0, 0.0], [2.0, 2.0], [9.0, 90.0], [-1.0, 4.0], [6.0, 6.0]])
    e = _earlier_extremes(x, turn)
    expected = torch.tensor([
        [0.0, 0.0, 0.0, 0.0],      # a first turn has no past
        [1.0, -5.0, 1.0, -5.0],
        [1.0, 30.0, -3.0, -5.0],
        [5.0, 30.0, -3.0, -5.0],   # the max of turn 0's and turn 2's columns, not diluted by turn 1
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0],
        [-1.0, 4.0, -1.0, 4.0],    # nothing of the dialogue before it leaks in
    ])
    assert torch.equal(e, expected)


def test_the_extremes_are_read_only_beside_the_history():
    assert FqeConfig(history=True, history_extremes=True).history_extremes
    with pytest.raises(ValidationError, match="fqe.history: true"):
        FqeConfig(history=False, history_extremes=True)
