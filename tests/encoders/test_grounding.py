"""The grounding block of FrozenPairEncoder: which names and numbers of a reply the dialogue had
not mentioned before it (``dice.grounding``), and the fitted Q reading it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

import enigma.ope as ope
from enigma.contracts import HeldOutAgent
from enigma.dialogue import Turn
from enigma.encoders.base import DialogueActions
from enigma.encoders.agreement import AGREEMENT_DIM
from enigma.encoders.frozen import FrozenPairEncoder
from enigma.encoders.grounding import GROUNDING_DIM, Mentioned, grounding_features
from enigma.encoders.text_cache import EmbeddingCache
from enigma.ope.config import DiceConfig
from enigma.ope.features import Features
from enigma.ope.problem import DiceData
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore

D = DialogueActions(
    "d",
    (
        Turn("user", "i need to fly from boston to denver. i'm eric campbell."),
        Turn("agent", "Which dates, Eric Campbell?"),
        Turn("user", "Out on the 7th, I can spend $130."),
        Turn("agent", "There is flight 135844 on September 7th for $130 with American. Shall I book it?"),
    ),
    (1, 3),
    (("Which dates, Eric Hall?",), ("There is flight 135844 on September 9th for $130 with American. Shall I book it?",)),
)


@pytest.fixture()
def cache(tiny_model_dir, tmp_path):
    return EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False)


def test_new_names_and_numbers_are_told_apart_and_the_users_lower_case_words_count():
    said = Mentioned()
    said.extend(D.turns[:1])
    # names_new, numbers_new, states_names, states_numbers
    assert grounding_features("Which dates, Eric Campbell?", said) == [0.0, 0.0, 1.0, 0.0]  # the user wrote them in lower case
    assert grounding_features("Which dates, Eric Hall?", said) == [0.5, 0.0, 1.0, 0.0]  # misheard
    assert grounding_features("Which dates?", said) == [0.0] * GROUNDING_DIM  # nothing asserted
    said.extend(D.turns[:3])  # the turns already added are not added twice
    # '7th' is the user's '7th', '$130' their '$130'; the flight, the month and the airline are new
    assert grounding_features(D.turns[3].text, said) == pytest.approx([2 / 2, 1 / 3, 1.0, 1.0])
    assert grounding_features("On the 9th then, for 130 dollars.", said) == [0.0, 0.5, 0.0, 1.0]


def test_the_block_follows_the_text_and_precedes_agreement_and_the_pca_leaves_it_alone(cache):
    enc = FrozenPairEncoder(cache, agreement=True, grounding=True)
    assert enc.passthrough_dim == GROUNDING_DIM + AGREEMENT_DIM and enc.pair_passthrough_dim == GROUNDING_DIM
    assert enc.dim == enc.feature_dim + GROUNDING_DIM + AGREEMENT_DIM
    prepared = enc.prepare([D], max_agent_turns=2)
    g = prepared.grounding  # [T, 1 + S, G]: the logged reply, then the target's
    assert g[0, 0].tolist() == [0.0, 0.0, 1.0, 0.0] and g[0, 1].tolist() == [0.5, 0.0, 1.0, 0.0]
    assert g[1, 1, 1] == pytest.approx(2 / 3)  # the target's '9th' is new too
    logged, target = enc.turn_rows(prepared, torch.tensor([0]))
    text = enc.feature_dim
    torch.testing.assert_close(logged[:, text : text + GROUNDING_DIM], g[:, 0])
    torch.testing.assert_close(target[:, :, text : text + GROUNDING_DIM], g[:, 1:])
    torch.testing.assert_close(logged[:, text + GROUNDING_DIM :], prepared.agreement[:, 0])
    # the heads' PCA projects the text only; the fqe Q reads text and grounding, not agreement
    mask = torch.tensor([[[True], [True]]])
    data = DiceData(["d"], torch.tensor([2]), mask, np.zeros((1, 0)), [])
    feats = Features(enc, prepared, data, torch.device("cpu"), DiceConfig.preset("gda", project_dim=1).frozen)
    assert (feats.text_dim, feats.pair_dim, feats.dim) == (1, GROUNDING_DIM, 1 + GROUNDING_DIM + AGREEMENT_DIM)
    torch.testing.assert_close(feats(None)[0][0, :, 1 : 1 + GROUNDING_DIM], g[:, 0])


def test_grounding_needs_the_frozen_encoder_and_is_off_for_onehot():
    with pytest.raises(ValueError, match="grounding"):
        DiceConfig.preset("gda", encoder="finetune", grounding=True)
    assert DiceConfig.preset("exact_nu", encoder="onehot", grounding=True).frozen is None


NAMES = ["Ann", "Bob", "Cleo", "Dirk", "Edna", "Fritz", "Gus", "Hana"]


def _naming_store(n: int) -> ExperienceStore:
    """One exchange per dialogue: the user gives a name, the agent books for a name. Agent `right`
    books for the user's name (rated 1), agent `wrong` for another one (rated 0)."""
    rng = np.random.default_rng(0)
    d_rows, t_rows = [], []
    for i in range(n):
        did, agent = f"d{i}", ("right", "wrong")[i % 2]
        name = NAMES[rng.integers(len(NAMES))]
        booked = name if agent == "right" else NAMES[(NAMES.index(name) + 1 + rng.integers(len(NAMES) - 1)) % len(NAMES)]
        t_rows += [{"dialog_id": did, "turn_index": 0, "role": "user", "text": f"Hello, this is {name}."},
                   {"dialog_id": did, "turn_index": 1, "role": "agent", "text": f"Thank you. Booked for {booked}."}]
        d_rows.append({"dialog_id": did, "agent_id": agent, "source": "test", "n_turns": 2,
                       "rating_q": float(agent == "right"), "raw_q": float(agent == "right"), "meta": None})
    return ExperienceStore(pa.Table.from_pylist(d_rows, schema=S.dialogues_schema(["q"])),
                           pa.Table.from_pylist(t_rows, schema=S.TURNS_SCHEMA))


def test_the_fitted_q_reads_whether_the_reply_names_someone_new(tiny_model_dir, tmp_path):
    """The tiny test encoder hardly tells these names apart, so the Q can tell a right booking
    from a wrong one only through the grounding block: a target that always books for the user's
    name is worth 1, and its Q value comes near that only with the block (about 0.98 against
    0.77 without it)."""
    store = _naming_store(120)
    histories = store.histories()
    targets = pa.table({
        "dialog_id": list(histories), "turn_index": [1] * len(histories), "sample_index": [0] * len(histories),
        "text": [f"Thank you. Booked for {h[0].text.split()[-1].rstrip('.')}." for h in histories.values()],
        "error": [None] * len(histories),
    })
    values = {}
    for grounding in (False, True):
        cfg = DiceConfig.preset("exact_nu", encoder="frozen", tmax=3, project_dim=4, agreement=False, value="q", q_model="fqe",
                                fqe={"agreement": False, "epochs": 30}, grounding=grounding, interval_resamples=0, device="cpu")
        encoder = FrozenPairEncoder(EmbeddingCache(str(tiny_model_dir), tmp_path, progress=False), grounding=grounding)
        est = ope.EnigmaEstimator(cfg, encoder=encoder, progress=False)
        values[grounding] = est.estimate(store, HeldOutAgent("t", target_actions=targets)).estimates["q"]
    assert values[True] > 0.93 and values[False] < 0.88 and values[True] - values[False] > 0.1, values


def test_a_retrieved_reply_is_read_against_the_conversation_it_was_said_in(cache):
    """A retrieval stand-in's reply names the people of the chat it came from. With its source
    recorded (``transcripts.sources``), the block reads it there, not against the logged chat
    whose state retrieved it; a reply with no source (None) is read as before."""
    source = json.dumps([["user", "hi, i'm eric hall, flying austin to reno."], ["agent", "Which dates?"], ["user", "the 9th please"]])
    d = DialogueActions(D.dialog_id, D.turns, D.agent_turns, D.target_replies, ((source,), (None,)))
    enc = FrozenPairEncoder(cache, grounding=True)
    with_source, without = enc.prepare([d], max_agent_turns=2).grounding, enc.prepare([D], max_agent_turns=2).grounding
    assert without[0, 1].tolist() == [0.5, 0.0, 1.0, 0.0]  # 'Hall' is not in the logged chat
    assert with_source[0, 1].tolist() == [0.0, 0.0, 1.0, 0.0]  # its own chat had said "eric hall"
    assert torch.equal(with_source[1], without[1]) and torch.equal(with_source[:, 0], without[:, 0])
