"""The frozen encoder's request block (``dice.request``): each reply's closeness to the user's
opening request, two numbers per pair outside the PCA."""

from __future__ import annotations

import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.agreement import AGREEMENT_DIM
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.grounding import GROUNDING_DIM
from enigma.encoders.request import REQUEST_DIM
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.reply_measures import REPLY_MEASURES_DIM

CANCEL = DialogueActions(
    "cancel",
    (
        Turn("user", "hello please cancel my reservation"),
        Turn("agent", "may i have your name"),
        Turn("user", "eric campbell"),
        Turn("agent", "done [action: cancel | flight: none | name: eric campbell]"),
    ),
    (1, 3),
    (("your name please",), ("done [action: change | flight: none | name: eric campbell]", "done [action: cancel]")),
)
# the agent speaks first: no request before its first reply
AGENT_FIRST = DialogueActions(
    "opens",
    (Turn("user", ""), Turn("agent", "welcome"), Turn("user", "book a flight"), Turn("agent", "booked")),
    (1, 3),
    (("hi",), ("book it",)),
)


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def _cos(cache, a: str, b: str) -> float:
    va, vb = (torch.from_numpy(cache.embed([t])[0]) for t in (a, b))
    return float(torch.nn.functional.cosine_similarity(va, vb, dim=0))


def test_the_block_compares_each_reply_with_the_opening_request(cache):
    enc = FrozenPairEncoder(cache, request=True)
    prepared = enc.prepare([CANCEL, AGENT_FIRST], max_agent_turns=2)
    q = prepared.request  # [T, 1 + S, REQUEST_DIM]: the logged reply, then the target's samples
    assert q.shape == (4, 3, REQUEST_DIM)
    request = "hello please cancel my reservation"
    final = "done [action: cancel | flight: none | name: eric campbell]"
    assert q[1, 0, 0].item() == pytest.approx(_cos(cache, final, request), abs=1e-5)
    # word F1 with the request: "cancel" is the one word the right final action shares with it
    assert q[1, 0, 1].item() == pytest.approx(2 * (1 / 8) * (1 / 5) / (1 / 8 + 1 / 5))
    assert q[1, 1, 1].item() == 0.0  # the wrong status shares no word with the request
    assert q[1, 2, 1].item() == pytest.approx(2 * (1 / 3) * (1 / 5) / (1 / 3 + 1 / 5))
    assert not q[0, 2].any()  # the first turn has one target sample: the second slot is blank
    # before the user has asked anything the block is zeros; afterwards the first non-blank turn counts
    assert not q[2].any()
    assert q[3, 0, 1].item() == 0.0  # "booked" is not "book"
    assert q[3, 1, 1].item() == pytest.approx(2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))
    # the request block alone does not add the first_user state block
    assert prepared.first_user is None and enc.feature_dim == FrozenPairEncoder(cache).feature_dim


def test_the_block_follows_the_reply_measures_precedes_agreement_and_counts_as_the_pairs_own(cache):
    enc = FrozenPairEncoder(cache, agreement=True, grounding=True, reply_measures=True, request=True)
    assert enc.pair_passthrough_dim == GROUNDING_DIM + REPLY_MEASURES_DIM + REQUEST_DIM
    assert enc.dim == enc.feature_dim + GROUNDING_DIM + REPLY_MEASURES_DIM + REQUEST_DIM + AGREEMENT_DIM
    prepared = enc.prepare([CANCEL], max_agent_turns=2)
    logged, target = enc.turn_rows(prepared, torch.tensor([0]))
    at = enc.feature_dim + GROUNDING_DIM + REPLY_MEASURES_DIM
    torch.testing.assert_close(logged[:, at : at + REQUEST_DIM], prepared.request[:, 0])
    torch.testing.assert_close(target[:, :, at : at + REQUEST_DIM], prepared.request[:, 1:])
    torch.testing.assert_close(logged[:, at + REQUEST_DIM :], prepared.agreement[:, 0])


def test_without_the_block_the_vectors_are_what_they_were(cache):
    plain, asked = FrozenPairEncoder(cache, reply_measures=True), FrozenPairEncoder(cache, reply_measures=True, request=True)
    assert plain.prepare([CANCEL], 2).request is None
    lp, tp = plain.turn_rows(plain.prepare([CANCEL], 2), torch.tensor([0]))
    la, ta = asked.turn_rows(asked.prepare([CANCEL], 2), torch.tensor([0]))
    torch.testing.assert_close(la[:, : plain.dim], lp)
    torch.testing.assert_close(ta[:, :, : plain.dim], tp)


def test_the_request_block_needs_the_frozen_encoder_and_is_off_for_onehot():
    with pytest.raises(ValueError, match="request"):
        DiceConfig.preset("gda", encoder="finetune", request=True)
    assert DiceConfig.preset("exact_nu", encoder="onehot", request=True).frozen is None
