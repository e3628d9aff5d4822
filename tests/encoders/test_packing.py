"""The packed sequence: what each token may see, its positions and token types, truncation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.encoders.packing import PackingError, pack_dialogue, pack_with_limit, visibility

CLS, SEP = 1, 2


def _example():
    # user "10 11", agent logged "20", user "12", agent logged "21 22"; two target samples per turn
    roles = ["user", "agent", "user", "agent"]
    turns = [[10, 11], [20], [12], [21, 22]]
    targets = [[[30], [31, 32]], [[33, 34, 35], [36]]]
    return pack_dialogue("d", roles, turns, [1, 3], targets, cls_id=CLS, sep_id=SEP, cap=8)


# Token labels of the example, in sequence order: u=user, l=logged reply, t=target (turn.sample)
LABELS = [
    "C",
    "u1.10", "u1.11", "u1.S",
    "l1.20", "l1.S",
    "t1.0.30", "t1.0.S",
    "t1.1.31", "t1.1.32", "t1.1.S",
    "u2.12", "u2.S",
    "l2.21", "l2.22", "l2.S",
    "t2.0.33", "t2.0.34", "t2.0.35", "t2.0.S",
    "t2.1.36", "t2.1.S",
]


def _group(prefix: str) -> set[str]:
    return {lab for lab in LABELS if lab.startswith(prefix + ".")}


def test_packed_ids_positions_and_types():
    p = _example()
    assert p.input_ids.tolist() == [CLS, 10, 11, SEP, 20, SEP, 30, SEP, 31, 32, SEP, 12, SEP, 21, 22, SEP, 33, 34, 35, SEP, 36, SEP]
    assert len(LABELS) == p.length
    # history counts up; each target reuses the positions of its turn's logged reply
    assert p.position_ids.tolist() == [0, 1, 2, 3, 4, 5, 4, 5, 4, 5, 6, 6, 7, 8, 9, 10, 8, 9, 10, 11, 8, 9]
    assert p.token_type_ids.tolist() == [0, 0, 0, 0] + [1] * 7 + [0, 0] + [1] * 9
    assert p.logged_last.tolist() == [LABELS.index("l1.S"), LABELS.index("l2.S")]
    assert p.target_last.tolist() == [
        [LABELS.index("t1.0.S"), LABELS.index("t1.1.S")],
        [LABELS.index("t2.0.S"), LABELS.index("t2.1.S")],
    ]


def test_mask_token_by_token():
    p = _example()
    mask = visibility(torch.from_numpy(p.segment.astype(np.int64)), torch.from_numpy(p.branch.astype(np.int64)))
    u1, l1, u2, l2 = _group("u1"), _group("l1"), _group("u2"), _group("l2")
    # Written out per group: who each token may attend to.
    sees = {
        "C": {"C"},
        "u1": {"C"} | u1,
        "l1": {"C"} | u1 | l1,
        "t1.0": {"C"} | u1 | _group("t1.0"),
        "t1.1": {"C"} | u1 | _group("t1.1"),
        "u2": {"C"} | u1 | l1 | u2,
        "l2": {"C"} | u1 | l1 | u2 | l2,
        "t2.0": {"C"} | u1 | l1 | u2 | _group("t2.0"),
        "t2.1": {"C"} | u1 | l1 | u2 | _group("t2.1"),
    }
    for qi, q in enumerate(LABELS):
        group = "C" if q == "C" else q.rsplit(".", 1)[0]
        visible = {LABELS[kj] for kj in range(len(LABELS)) if mask[qi, kj]}
        assert visible == sees[group], f"token {q} sees {sorted(visible)}"


def test_padding_rows_and_keys():
    p = _example()
    n = p.length
    seg = torch.zeros(1, n + 3, dtype=torch.long)
    br = torch.full((1, n + 3), -1, dtype=torch.long)
    seg[0, :n] = torch.from_numpy(p.segment.astype(np.int64))
    br[0, :n] = torch.from_numpy(p.branch.astype(np.int64))
    valid = torch.zeros(1, n + 3, dtype=torch.bool)
    valid[0, :n] = True
    mask = visibility(seg, br, valid)[0]
    assert not mask[:, n:].any(), "no token may attend to padding"
    assert mask[n:].tolist() == [[True] + [False] * (n + 2)] * 3, "padding queries see only position 0"


def test_dialogue_starting_with_agent_and_trailing_user_turn():
    p = pack_dialogue("d", ["agent", "user", "agent", "user"], [[20], [10], [21], [11]], [0, 2], [[[30]], [[31]]], cls_id=CLS, sep_id=SEP, cap=4)
    # the trailing user turn cannot affect any pair, so it is not packed
    assert p.input_ids.tolist() == [CLS, 20, SEP, 30, SEP, 10, SEP, 21, SEP, 31, SEP]
    assert p.token_type_ids.tolist() == [0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1]


def test_truncation_caps_utterances_then_shrinks_to_fit():
    roles = ["user", "agent"] * 3
    turns = [list(range(10, 30))] * 6  # 20 tokens each
    targets = [[list(range(40, 70))]] * 3  # 30 tokens: longer than the logged reply
    p = pack_dialogue("d", roles, turns, [1, 3, 5], targets, cls_id=CLS, sep_id=SEP, cap=8)
    assert p.cap == 8 and p.n_positions == 1 + 6 * 9
    fitted = pack_with_limit("d", roles, turns, [1, 3, 5], targets, cls_id=CLS, sep_id=SEP, cap=8, max_positions=40)
    assert fitted.n_positions <= 40 and fitted.cap == 5  # 1 + 6 * (5 + 1) = 37; cap 6 needs 43
    with pytest.raises(PackingError, match="dialogue d: too many turns"):
        pack_with_limit("d", roles, turns, [1, 3, 5], targets, cls_id=CLS, sep_id=SEP, cap=8, max_positions=12)


@pytest.mark.parametrize(
    "agent_turns, targets, message",
    [
        ([0], [[[1]]], "agent_turns\\[0\\] = 0 is not the index of an agent turn"),
        ([1], [[[1]], [[2]]], "1 agent turns but target replies for 2"),
        ([1, 3], [[[1]], [[2], [3]], [[4]]], "2 agent turns but target replies for 3"),
    ],
)
def test_malformed_dialogues_are_named(agent_turns, targets, message):
    with pytest.raises(PackingError, match="dialogue bad: .*" + message):
        pack_dialogue("bad", ["user", "agent", "user", "agent"], [[5]] * 4, agent_turns, targets, cls_id=CLS, sep_id=SEP, cap=4)


def test_turns_may_have_different_sample_counts():
    p = pack_dialogue("d", ["user", "agent", "user", "agent"], [[5]] * 4, [1, 3], [[[6]], [[7], [8]]], cls_id=CLS, sep_id=SEP, cap=4)
    assert p.target_last.shape == (2, 2)
    assert p.target_last[0, 1] == -1 and (p.target_last[1] >= 0).all()
