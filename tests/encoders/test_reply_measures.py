"""The reply-measure block of FrozenPairEncoder (``dice.reply_measures``): what each pair's reply
does in See et al.'s terms, read the same way as the comparators' dialogue features."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from enigma.comparators.dialogues import AgentDialogue
from enigma.comparators.features import FeatureExtractor
from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.agreement import AGREEMENT_DIM
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.grounding import GROUNDING_DIM
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.ope.features import Features
from enigma.ope.problem import DiceData
from enigma.reply_measures import REPLY_MEASURES, REPLY_MEASURES_DIM, reply_measures

TURNS = (
    Turn("user", "hi there how are you"),
    Turn("agent", "i am fine thank you. do you like dogs?"),
    Turn("user", "i like dogs a lot"),
    Turn("agent", "i am fine thank you. i like dogs a lot too"),
)
D = DialogueActions("d", TURNS, (1, 3), (("hello hello hello hello",), ("what is your favourite food?",)))


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def test_each_measure_on_a_hand_made_dialogue():
    assert REPLY_MEASURES == ("self_repetition", "internal_repetition", "partner_repetition", "question", "log_length")
    # 10 bigrams: 5 the agent said in its first turn ("i am", "am fine", "fine thank", "thank
    # you", "like dogs"), 4 copied from the user's last turn; none twice; no question; 11 words
    assert reply_measures(TURNS[3].text, TURNS[:3]) == pytest.approx([0.5, 0.0, 0.4, 0.0, math.log1p(11)])
    # the agent's first turn: nothing of its own before it, nothing of the user's greeting, a question
    assert reply_measures(TURNS[1].text, TURNS[:1]) == pytest.approx([0.0, 0.0, 0.0, 1.0, math.log1p(9)])
    # one bigram three times; no user turn before it
    assert reply_measures("hello hello hello hello", ()) == pytest.approx([0.0, 2 / 3, 0.0, 0.0, math.log1p(4)])
    assert reply_measures("", TURNS) == [0.0, 0.0, 0.0, 0.0, 0.0]


def test_the_comparators_dialogue_features_are_the_means_of_the_same_measures():
    """SPE and See's ridge read a dialogue's mean of what the block gives per reply (their
    self-repetition leaves out the first reply, which has nothing of its own to repeat)."""
    per_reply = np.array([reply_measures(TURNS[t].text, TURNS[:t]) for t in (1, 3)])
    names = ["self_repetition", "internal_repetition", "partner_repetition", "question_rate", "length"]
    dialogue = FeatureExtractor().matrix([AgentDialogue("d", TURNS, (1, 3))], names)[0]
    expected = [per_reply[1, 0], *per_reply[:, 1:4].mean(0), np.expm1(per_reply[:, 4]).mean()]
    assert dialogue == pytest.approx(expected)


def test_the_block_follows_grounding_precedes_agreement_and_the_pca_leaves_it_alone(cache):
    enc = FrozenPairEncoder(cache, agreement=True, grounding=True, reply_measures=True)
    assert enc.pair_passthrough_dim == GROUNDING_DIM + REPLY_MEASURES_DIM
    assert enc.dim == enc.feature_dim + GROUNDING_DIM + REPLY_MEASURES_DIM + AGREEMENT_DIM
    prepared = enc.prepare([D], max_agent_turns=2)
    m = prepared.reply_measures  # [T, 1 + S, M]: the logged reply, then the target's
    assert m[1, 0].tolist() == pytest.approx(reply_measures(TURNS[3].text, TURNS[:3]))
    assert m[0, 1].tolist() == pytest.approx(reply_measures("hello hello hello hello", TURNS[:1]))
    assert m[1, 1].tolist() == pytest.approx(reply_measures("what is your favourite food?", TURNS[:3]))
    logged, target = enc.turn_rows(prepared, torch.tensor([0]))
    at = enc.feature_dim + GROUNDING_DIM
    torch.testing.assert_close(logged[:, at : at + REPLY_MEASURES_DIM], m[:, 0])
    torch.testing.assert_close(target[:, :, at : at + REPLY_MEASURES_DIM], m[:, 1:])
    torch.testing.assert_close(logged[:, at + REPLY_MEASURES_DIM :], prepared.agreement[:, 0])
    # the heads' PCA projects the text only; the fqe Q reads text, grounding and the measures, not agreement
    mask = torch.tensor([[[True], [True]]])
    data = DiceData(["d"], torch.tensor([2]), mask, np.zeros((1, 0)), [])
    feats = Features(enc, prepared, data, torch.device("cpu"), DiceConfig.preset("gda", project_dim=1).frozen)
    assert (feats.text_dim, feats.pair_dim) == (1, GROUNDING_DIM + REPLY_MEASURES_DIM)
    torch.testing.assert_close(feats(None)[0][0, :, 1 + GROUNDING_DIM : 1 + GROUNDING_DIM + REPLY_MEASURES_DIM], m[:, 0])


def test_without_the_block_the_vectors_are_what_they_were(cache):
    plain, measured = FrozenPairEncoder(cache, agreement=True), FrozenPairEncoder(cache, agreement=True, reply_measures=True)
    assert plain.prepare([D], 2).reply_measures is None
    lp, tp = plain.turn_rows(plain.prepare([D], 2), torch.tensor([0]))
    lm, tm = measured.turn_rows(measured.prepare([D], 2), torch.tensor([0]))
    text = plain.feature_dim
    torch.testing.assert_close(lm[:, :text], lp[:, :text])
    torch.testing.assert_close(lm[:, text + REPLY_MEASURES_DIM :], lp[:, text:])
    torch.testing.assert_close(tm[:, :, text + REPLY_MEASURES_DIM :], tp[:, :, text:])


def test_reply_measures_need_the_frozen_encoder_and_are_off_for_onehot():
    with pytest.raises(ValueError, match="reply_measures"):
        DiceConfig.preset("gda", encoder="finetune", reply_measures=True)
    assert DiceConfig.preset("exact_nu", encoder="onehot", reply_measures=True).frozen is None


TOPICS = ["dogs", "jazz", "tennis", "pizza", "chess", "rain", "boats", "poems"]


def _parrot_store(n: int):
    """Two exchanges per dialogue. Agent `fresh` names a new topic in its second reply (rated 1);
    agent `parrot` says its first reply again (rated 0)."""
    import pyarrow as pa

    from enigma.store import schema as S
    from enigma.store.experience import ExperienceStore

    rng = np.random.default_rng(0)
    d_rows, t_rows = [], []
    for i in range(n):
        did, agent = f"d{i}", ("fresh", "parrot")[i % 2]
        a, b = rng.choice(len(TOPICS), 2, replace=False)
        first = f"I really like {TOPICS[a]} a lot."
        texts = ["Hello, what do you like?", first, "Tell me more.", f"I really like {TOPICS[b]} a lot." if agent == "fresh" else first]
        t_rows += [{"dialog_id": did, "turn_index": k, "role": ("user", "agent")[k % 2], "text": x} for k, x in enumerate(texts)]
        d_rows.append({"dialog_id": did, "agent_id": agent, "source": "test", "n_turns": 4,
                       "rating_q": float(agent == "fresh"), "raw_q": float(agent == "fresh"), "meta": None})
    return ExperienceStore(pa.Table.from_pylist(d_rows, schema=S.dialogues_schema(["q"])),
                           pa.Table.from_pylist(t_rows, schema=S.TURNS_SCHEMA))


def test_the_fitted_q_reads_whether_a_reply_repeats_the_agent(tiny_model_dir, tmp_path):
    """The tiny test encoder can hardly tell a repeated reply from a new one, so the Q values a
    target that never repeats itself (worth 1) near that only through the block: about 0.95
    with it against 0.81-0.85 without it (seeds 0-3)."""
    import pyarrow as pa

    import enigma.ope as ope
    from enigma.contracts import HeldOutAgent

    store = _parrot_store(120)
    rows = []
    for i, (did, turns) in enumerate(store.histories().items()):
        topic = turns[1].text.split()[3]
        other = [t for t in TOPICS if t != topic][i % (len(TOPICS) - 1)]
        rows += [{"dialog_id": did, "turn_index": 1, "sample_index": 0, "text": turns[1].text, "error": None},
                 {"dialog_id": did, "turn_index": 3, "sample_index": 0, "text": f"I really like {other} a lot.", "error": None}]
    targets = pa.Table.from_pylist(rows)
    values = {}
    for measured in (False, True):
        cfg = DiceConfig.preset("exact_nu", encoder="frozen", tmax=4, project_dim=4, agreement=False, value="q", q_model="fqe",
                                fqe={"agreement": False, "epochs": 300, "tau": 0.1}, reply_measures=measured, interval_resamples=0, device="cpu")
        encoder = FrozenPairEncoder(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False), reply_measures=measured)
        est = ope.EnigmaEstimator(cfg, encoder=encoder, progress=False)
        values[measured] = est.estimate(store, HeldOutAgent("t", target_actions=targets)).estimates["q"]
    assert values[True] > 0.92 and values[False] < 0.88 and values[True] - values[False] > 0.07, values
