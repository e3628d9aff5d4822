"""The agreement block of FrozenPairEncoder: how far a logged dialogue has followed the target."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders import text_tokens as tokens
from enigma.encoders.agreement import AGREEMENT_DIM
from enigma.encoders.base import DialogueActions
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.ope.features import Features
from enigma.ope.problem import DiceData

# three agent turns; the target says the same at turn 0, other words with the same facts at
# turn 1, and the same template with another flight at turn 2
D = DialogueActions(
    "d",
    (
        Turn("user", "I want to change my flight."),
        Turn("agent", "May I have your name?"),
        Turn("user", "Eric Campbell."),
        Turn("agent", "Thank you, Eric Campbell. Which dates?"),
        Turn("user", "The 7th."),
        Turn("agent", "There is flight 135844 on September 7th for $130."),
    ),
    (1, 3, 5),
    (
        ("May I have your name?",),
        ("Which dates, Eric Campbell?",),
        ("There is flight 200001 on September 7th for $130.", "There is flight 135844 on September 7th for $130."),
    ),
)


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def test_facts_are_numbers_and_names_not_sentence_starts():
    assert tokens.facts("There is flight 135844: out September 7th at 23:00, $130. Would that suit you?") == [
        "135844", "september", "7th", "23:00", "$130",
    ]
    assert tokens.facts("I can help. Could I have your name?") == []
    assert tokens.f1(tokens.facts("Thanks, Eric Campbell."), tokens.facts("Which dates, Eric Campbell?")) == 1.0
    # a name that opens a sentence is not told from an ordinary capitalised word (a known miss)
    assert tokens.facts("Eric Campbell, which dates?") == ["campbell"]
    assert tokens.f1(tokens.words("a b c d"), tokens.words("a b x y")) == pytest.approx(0.5)
    assert tokens.f1([], []) == 1.0 and tokens.f1(["a"], []) == 0.0


def test_agreement_features_follow_the_dialogue(cache):
    enc = FrozenPairEncoder(cache, agreement=True)
    assert enc.dim == enc.feature_dim + AGREEMENT_DIM and enc.passthrough_dim == AGREEMENT_DIM
    prepared = enc.prepare([D], max_agent_turns=3)
    a = prepared.agreement[prepared.rows(torch.tensor([0]))]  # [K, 1 + S, A]; per measure: cur, past min, past mean, joint, joint^4
    cos, words, facts = (slice(5 * m, 5 * m + 5) for m in range(3))
    # turn 0: the same reply; nothing earlier
    assert a[0, 0].tolist() == pytest.approx([1.0] * AGREEMENT_DIM, abs=1e-5)
    # turn 1: other words, same facts (Eric Campbell)
    assert a[1, 0, facts][0] == 1.0 and a[1, 0, words][0] < 1.0
    assert a[1, 0, words][1] == pytest.approx(1.0)  # the earlier turn agreed
    # turn 2: compared with both samples: facts agree with one of two
    f_other = tokens.f1(tokens.facts(D.turns[5].text), tokens.facts(D.target_replies[2][0]))
    assert a[2, 0, facts][0] == pytest.approx((f_other + 1.0) / 2)
    assert a[2, 0, words][1] == pytest.approx(min(1.0, float(a[1, 0, words][0])))  # past min
    joint = min(float(a[2, 0, facts][0]), float(a[2, 0, facts][1]))
    assert a[2, 0, facts][3:].tolist() == pytest.approx([joint, joint**4])
    # a target sample is compared with the other sample at its state; the state part is shared
    assert a[2, 1, facts][0] == pytest.approx(f_other)
    assert torch.equal(a[2, 1, words][1:3], a[2, 0, words][1:3])
    # a lone sample agrees with itself
    assert a[0, 1, :].tolist() == pytest.approx([1.0] * AGREEMENT_DIM, abs=1e-5)


def test_agreement_is_appended_after_the_text_blocks_and_masked(cache):
    enc = FrozenPairEncoder(cache, agreement=True)
    short = DialogueActions("s", (Turn("user", "hi"), Turn("agent", "hello")), (1,), (("hey",),))
    prepared = enc.prepare([D, short], max_agent_turns=3)
    logged, target = enc(prepared, torch.tensor([0, 1]))
    assert logged.shape[-1] == enc.dim
    torch.testing.assert_close(logged[0, :, -AGREEMENT_DIM:], prepared.agreement[prepared.rows(torch.tensor([0])), 0])
    assert not logged[1, 1:].any() and not target[1, 1:].any()  # past the end: zeros


def test_pca_leaves_the_agreement_features_alone(cache):
    enc = FrozenPairEncoder(cache, agreement=True)
    prepared = enc.prepare([D], max_agent_turns=3)
    cfg = DiceConfig.preset("gda", project_dim=2)
    mask = torch.tensor([[[True, False], [True, False], [True, True]]])
    data = DiceData(["d"], torch.tensor([D.n_agent_turns]), mask, np.zeros((1, 0)), [])
    feats = Features(enc, prepared, data, torch.device("cpu"), cfg.frozen)
    assert feats.dim == 2 + AGREEMENT_DIM
    logged, _ = feats(None)
    torch.testing.assert_close(logged[0, :, 2:], prepared.agreement[:, 0])
    # text_dim: the leading text columns, which a Q told to leave the agreement block out reads
    # (fqe.agreement: false), with or without the PCA and with random features appended after
    assert feats.text_dim == 2
    for c in (DiceConfig.preset("gda"), DiceConfig.preset("gda", project_dim=2, random_features=4)):
        f = Features(enc, prepared, data, torch.device("cpu"), c.frozen)
        assert f.text_dim == (2 if c.frozen.project_dim else enc.dim - AGREEMENT_DIM)
        torch.testing.assert_close(f(None)[0][0, :, f.text_dim : f.text_dim + AGREEMENT_DIM], prepared.agreement[:, 0])
