"""FrozenPairEncoder: the feature blocks, lookups instead of re-encoding, masks and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.text_cache import EmbeddingCache

D1 = DialogueActions(
    "d1",
    (
        Turn("user", "hello"),
        Turn("agent", "how can i help"),
        Turn("user", "book a flight"),
        Turn("agent", "which day"),
        Turn("user", "monday"),
        Turn("agent", "done"),
    ),
    (1, 3, 5),
    (("hi", "hey"), ("sure",), ("booked", "ok")),
)
D2 = DialogueActions("d2", (Turn("user", ""), Turn("agent", "welcome")), (0 + 1,), (("hello there",),))


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def test_feature_blocks(cache):
    enc = FrozenPairEncoder(cache, position_buckets=4)
    d = cache.dim
    assert enc.dim == 4 * d + 4
    prepared = enc.prepare([D1, D2], max_agent_turns=3)
    logged, target = enc(prepared, torch.tensor([0, 1]))
    assert logged.shape == (2, 3, enc.dim) and target.shape == (2, 3, 2, enc.dim)
    e = lambda text: torch.from_numpy(cache.embed([text])[0])  # noqa: E731
    zero = torch.zeros(d)
    # d1, third agent turn ("done"): last user "monday", previous agent "which day",
    # summary = mean of the other earlier turns: "hello", "how can i help", "book a flight"
    summary = (e("hello") + e("how can i help") + e("book a flight")) / 3
    want = torch.cat([e("done"), e("monday"), e("which day"), summary, torch.tensor([0.0, 0, 1, 0])])
    torch.testing.assert_close(logged[0, 2], want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(target[0, 2, 1], torch.cat([e("ok"), want[d:]]), atol=1e-6, rtol=1e-5)
    # first agent turn: no previous agent reply, no earlier history
    torch.testing.assert_close(logged[0, 0], torch.cat([e("how can i help"), e("hello"), zero, zero, torch.tensor([1.0, 0, 0, 0])]))
    # a turn with one sample: the second sample slot is zeros; slots past the end are zeros
    assert not target[0, 1, 1].any() and target[0, 1, 0].any()
    assert not logged[1, 1:].any() and not target[1, 1:].any()
    # the blank first user utterance of an agent-opened dialogue is the zero block
    torch.testing.assert_close(logged[1, 0, d : 2 * d], zero)


def test_prepare_encodes_each_text_once_and_reuses_the_cache(cache):
    enc = FrozenPairEncoder(cache)
    enc.prepare([D1, D2], 3)
    n_texts = len({t.text for d in (D1, D2) for t in d.turns if t.text} | {r for d in (D1, D2) for rs in d.target_replies for r in rs})
    assert cache.encoded_count == n_texts
    # the next held-out agent: same logged dialogues, new replies; only those are encoded
    other = DialogueActions(D1.dialog_id, D1.turns, D1.agent_turns, (("a new reply",), ("sure",), ("done",)))
    enc.prepare([other, D2], 3)
    assert cache.encoded_count == n_texts + 1


def test_selected_blocks(cache):
    d = cache.dim
    enc = FrozenPairEncoder(cache, position_buckets=4, blocks=("position", "last_user"))
    assert enc.blocks == ("last_user", "position") and enc.dim == 2 * d + 4
    full = FrozenPairEncoder(cache, position_buckets=4)
    idx = torch.tensor([0, 1])
    small, small_t = enc(enc.prepare([D1, D2], 3), idx)
    big, big_t = full(full.prepare([D1, D2], 3), idx)
    keep = list(range(2 * d)) + list(range(4 * d, 4 * d + 4))  # reply, last user, position
    torch.testing.assert_close(small, big[..., keep])
    torch.testing.assert_close(small_t, big_t[..., keep])
    assert FrozenPairEncoder(cache, blocks=()).dim == d
    with pytest.raises(ValueError, match="blocks: expected distinct names"):
        FrozenPairEncoder(cache, blocks=("history",))


def test_the_first_user_block_is_the_opening_request_at_every_turn(cache):
    d = cache.dim
    enc = FrozenPairEncoder(cache, position_buckets=4, blocks=("last_user", "prev_agent", "summary", "first_user", "position"))
    assert enc.dim == 5 * d + 4
    logged, target = enc(enc.prepare([D1, D2], 3), torch.tensor([0, 1]))
    e = lambda text: torch.from_numpy(cache.embed([text])[0])  # noqa: E731
    first = slice(4 * d, 5 * d)
    for k in range(3):  # d1 opens with "hello", whichever turn answers
        torch.testing.assert_close(logged[0, k, first], e("hello"), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(target[0, k, 0, first], e("hello"), atol=1e-6, rtol=1e-5)
    # d2's only user turn is blank: nothing requested yet, the zero block
    assert not logged[1, 0, first].any()
    # the other blocks are those of the default layout
    default = FrozenPairEncoder(cache, position_buckets=4)
    base, _ = default(default.prepare([D1, D2], 3), torch.tensor([0, 1]))
    torch.testing.assert_close(torch.cat([logged[..., : 4 * d], logged[..., 5 * d :]], dim=-1), base)


def test_position_buckets_saturate(cache):
    turns = tuple(Turn("user" if i % 2 == 0 else "agent", f"turn {i}") for i in range(10))
    d = DialogueActions("long", turns, (1, 3, 5, 7, 9), tuple(("x",) for _ in range(5)))
    enc = FrozenPairEncoder(cache, position_buckets=3)
    prepared = enc.prepare([d], 5)
    assert prepared.position[prepared.rows(torch.tensor([0]))].tolist() == [0, 1, 2, 2, 2]


def test_projection_is_trainable_and_masked(cache):
    torch.manual_seed(0)
    enc = FrozenPairEncoder(cache, projection_dim=8)
    assert enc.dim == 8 and sum(p.numel() for p in enc.parameters()) > 0
    prepared = enc.prepare([D1, D2], 3)
    logged, target = enc(prepared, torch.tensor([1]))
    assert not logged[0, 1:].any() and not target[0, 0, 1].any()
    (logged.sum() + target.sum()).backward()
    assert enc.projection.weight.grad.abs().sum() > 0


def test_without_projection_there_is_nothing_to_train(cache):
    assert not any(True for _ in FrozenPairEncoder(cache).parameters())


def test_built_from_a_model_name_or_directory(tiny_model_dir, tmp_path):
    enc = FrozenPairEncoder(str(tiny_model_dir), cache_dir=tmp_path)
    assert enc.cache.dir.parent == tmp_path and enc.text_dim == 32


def test_malformed_dialogues_are_named(cache):
    enc = FrozenPairEncoder(cache)
    with pytest.raises(ValueError, match="dialogue d1: 3 agent turns, more than max_agent_turns=2"):
        enc.prepare([D1], 2)
    bad = DialogueActions("bad", D1.turns, (0,), (("x",),))
    with pytest.raises(ValueError, match=r"dialogue bad: agent_turns\[0\] = 0 is not the index of an agent turn"):
        enc.prepare([bad], 3)
    bad = DialogueActions("bad2", D1.turns, (1,), ((None,),))
    with pytest.raises(ValueError, match="dialogue bad2, agent turn 0, sample 0: target reply is NoneType"):
        enc.prepare([bad], 3)


@pytest.mark.slow
def test_real_minilm_frozen_pairs(tmp_path):
    enc = FrozenPairEncoder(EmbeddingCache("minilm", tmp_path, progress=False))
    prepared = enc.prepare([D1], 3)
    logged, target = enc(prepared, torch.arange(1))
    assert logged.shape == (1, 3, 4 * 384 + 16)
    assert np.isclose(float(logged[0, 0, :384].norm()), 1.0, atol=1e-4)


def test_turn_rows_are_the_real_turns_of_the_padded_batch_and_nothing_else(cache):
    """The ragged layout: one row per agent turn, so a long dialogue does not pad the short ones."""
    long = DialogueActions("long", tuple(Turn("user" if i % 2 == 0 else "agent", f"turn {i}") for i in range(20)),
                           tuple(range(1, 20, 2)), tuple((f"reply {k}",) for k in range(10)))
    enc = FrozenPairEncoder(cache, agreement=True)
    prepared = enc.prepare([D1, long, D2], 10)
    lengths = torch.tensor([D1.n_agent_turns, long.n_agent_turns, D2.n_agent_turns])
    assert prepared.logged_reply.shape == (int(lengths.sum()),)
    logged, target = enc(prepared, torch.arange(3))
    rows_l, rows_t = enc.turn_rows(prepared, torch.arange(3), lengths)
    valid = torch.arange(10).unsqueeze(0) < lengths.unsqueeze(1)
    assert torch.equal(rows_l, logged[valid]) and torch.equal(rows_t, target[valid])
    # a resample's order, with a repeat
    again_l, _ = enc.turn_rows(prepared, torch.tensor([2, 0, 2]), lengths)
    assert torch.equal(again_l, torch.cat([logged[2, : D2.n_agent_turns], logged[0, : D1.n_agent_turns], logged[2, : D2.n_agent_turns]]))
