"""Pseudo-state padding: slot layout, the cycle, and the Tmax check."""

from __future__ import annotations

import pytest
import torch

from enigma.ope.padding import PaddingError, check_tmax, real_mask, successor_values, to_slots


def test_slots_hold_pseudo_zero_then_turns_then_pseudo():
    per_turn = torch.tensor([[10.0, 11.0, 12.0], [20.0, 0.0, 0.0]])
    pad = torch.tensor([-0.0, -1.0, -2.0, -3.0, -4.0])
    n = torch.tensor([3, 1])
    slots = to_slots(per_turn, pad, n)
    assert slots.tolist() == [[-0.0, 10.0, 11.0, 12.0, -4.0], [-0.0, 20.0, -2.0, -3.0, -4.0]]
    assert real_mask(n, 5).tolist() == [[False, True, True, True, False], [False, True, False, False, False]]


def test_successor_is_a_cycle_through_slot_zero():
    # Slot j's successor is j+1, and the last slot's successor is pseudo slot 0: the chain of
    # every dialogue is closed, so each slot position keeps 1/Tmax of the padded mass.
    target_nu = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    assert successor_values(target_nu).tolist() == [[1.0, 2.0, 3.0, 0.0]]


def test_successor_of_slot_zero_is_the_first_turn_at_the_target_action():
    nu_target = torch.tensor([[7.0, 8.0]])  # nu at the target's replies of turns 0 and 1
    pad = torch.tensor([100.0, 101.0, 102.0, 103.0])
    nxt = successor_values(to_slots(nu_target, pad, torch.tensor([2])))
    # slot 0 -> turn 0 (target), turn 0 -> turn 1 (target), turn 1 -> pseudo 3, pseudo 3 -> pseudo 0
    assert nxt.tolist() == [[7.0, 8.0, 103.0, 100.0]]


def test_dialogue_filling_every_slot_wraps_from_its_last_turn_to_slot_zero():
    nxt = successor_values(to_slots(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([9.0, 0, 0, 0]), torch.tensor([3])))
    assert nxt.tolist() == [[1.0, 2.0, 3.0, 9.0]]


def test_tmax_check_names_the_dialogue_and_the_fix():
    check_tmax([1, 4], 5)
    with pytest.raises(PaddingError) as err:
        check_tmax([1, 5, 2], 5, ["a", "long-one", "c"])
    msg = str(err.value)
    assert "long-one" in msg and "5 agent turns" in msg and "at least 6" in msg and "dice.tmax" in msg
    with pytest.raises(PaddingError, match="no agent turn"):
        check_tmax([0], 5, ["empty"])


def test_to_slots_rejects_more_turns_than_slots():
    with pytest.raises(PaddingError):
        to_slots(torch.zeros(1, 4), torch.zeros(4), torch.tensor([4]))
