"""``dice.target_history``: whose earlier turns a target reply is read after, in its state's
prev_agent block and its reply measures. The logged pair is read after the logged dialogue
whatever the setting."""

from __future__ import annotations

import json

import pytest
import torch

from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.reply_measures import reply_measures

TURNS = (
    Turn("user", "hi there"),
    Turn("agent", "hello how are you"),
    Turn("user", "fine thanks"),
    Turn("agent", "what do you do for work"),
    Turn("user", "i teach"),
    Turn("agent", "that sounds fun"),
)
# the target says the same thing twice; the logged agent never repeats itself
TARGET = (("i love my dog so much",), ("i love my dog so much too",), ("do you like cats",))
D = DialogueActions("d", TURNS, (1, 3, 5), TARGET)
SELF_REPETITION = 0


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def _read(cache, history: str, dialogue: DialogueActions = D):
    enc = FrozenPairEncoder(cache, reply_measures=True, target_history=history)
    prepared = enc.prepare([dialogue], max_agent_turns=3)
    logged, target = enc.turn_rows(prepared, torch.tensor([0]))
    d = cache.dim
    prev = slice(2 * d, 3 * d)  # [reply | last_user | prev_agent | ...]
    return prepared, logged, target, prev, lambda text: cache.embed([text])[0]


def test_own_reads_a_target_reply_after_the_targets_own_earlier_replies(cache):
    prepared, logged, target, prev, vec = _read(cache, "own")
    # its second reply repeats five of its first's six bigrams, and none of the logged agent's
    assert prepared.reply_measures[1, 1, SELF_REPETITION] == pytest.approx(5 / 6)
    assert prepared.reply_measures[1, 1].tolist() == pytest.approx(reply_measures(TARGET[1][0], TURNS[:3], {
        ("i", "love"), ("love", "my"), ("my", "dog"), ("dog", "so"), ("so", "much")}))
    # the previous agent reply its state holds is its own: none before its first reply
    assert not target[0, 0, prev].any()
    torch.testing.assert_close(target[1, 0, prev], torch.as_tensor(vec(TARGET[0][0])))
    torch.testing.assert_close(target[2, 0, prev], torch.as_tensor(vec(TARGET[1][0])))
    # the logged pairs are read after the logged dialogue, as with the default
    _, logged_default, target_default, _, _ = _read(cache, "logged")
    torch.testing.assert_close(logged, logged_default)
    torch.testing.assert_close(target_default[1, 0, prev], torch.as_tensor(vec(TURNS[1].text)))
    assert reply_measures(TARGET[1][0], TURNS[:3])[SELF_REPETITION] == 0.0


def test_source_reads_a_retrieved_reply_in_the_conversation_it_was_said_in(cache):
    said_as_agent = json.dumps([["user", "hey"], ["agent", "i love my dog so much"], ["user", "cool"]])
    said_as_user = json.dumps([["user", "hey"], ["agent", "i love cats"]])  # self-play: the bot spoke on both sides
    sourced = DialogueActions("d", TURNS, (1, 3, 5), TARGET, ((None,), (said_as_agent,), (said_as_user,)))
    prepared, logged, target, prev, vec = _read(cache, "source", sourced)
    m = prepared.reply_measures[:, 1]
    # a reply without a source is read after the logged dialogue
    assert m[0].tolist() == pytest.approx(reply_measures(TARGET[0][0], TURNS[:1]))
    assert not target[0, 0, prev].any()
    # one said after its speaker's "i love my dog so much" repeats it, and follows it
    assert m[1].tolist() == pytest.approx(reply_measures(TARGET[1][0], (Turn("user", "hey"), Turn("agent", "i love my dog so much"),
                                                                        Turn("user", "cool"))))
    assert m[1, SELF_REPETITION] == pytest.approx(5 / 6)
    torch.testing.assert_close(target[1, 0, prev], torch.as_tensor(vec("i love my dog so much")))
    # one said from the user's side of a self-play chat: its speaker's earlier turn is "hey"
    assert m[2].tolist() == pytest.approx(reply_measures(TARGET[2][0], (Turn("agent", "hey"), Turn("user", "i love cats"))))
    torch.testing.assert_close(target[2, 0, prev], torch.as_tensor(vec("hey")))
    _, logged_default, _, _, _ = _read(cache, "logged", sourced)
    torch.testing.assert_close(logged, logged_default)


def test_without_sources_source_is_the_logged_reading(cache):
    _, logged, target, _, _ = _read(cache, "source")
    _, logged_default, target_default, _, _ = _read(cache, "logged")
    torch.testing.assert_close(target, target_default)
    torch.testing.assert_close(logged, logged_default)


def test_the_setting_needs_the_frozen_encoder_and_keys_saved_results(cache):
    from enigma.ope.estimator import EnigmaEstimator

    with pytest.raises(ValueError, match="target_history"):
        DiceConfig.preset("gda", encoder="finetune", target_history="own")
    # onehot's states are the whole history: nothing to read it after but the logs (no sources there)
    assert DiceConfig.preset("exact_nu", encoder="onehot", target_history="own").frozen is None
    with pytest.raises(ValueError, match="target_history"):
        FrozenPairEncoder(cache, target_history="theirs")
    # the default reads sources where a stand-in recorded them, and is the logged reading elsewhere
    assert DiceConfig.preset("exact_nu").features.target_history == "source"
    for other in ("source", "logged", "own"):
        fingerprint = EnigmaEstimator(DiceConfig.preset("exact_nu", target_history=other)).fingerprint()
        assert f'"target_history": "{other}"' in fingerprint
