"""The learned customer's mechanics on a tiny store: which logged utterance it answers with,
when it stops, that it is seeded, and that an excluded agent's customers are never replayed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from enigma.rollouts.learned_customer import (
    EmbeddingSimilarity,
    LearnedCustomer,
    LearnedCustomerConfig,
    RolloutError,
    leave_one_out_rollouts,
    roll_out,
)
from enigma.store.experience import ExperienceStore
from tests.stores import chat_store


def make_store(rows) -> ExperienceStore:
    """rows: (dialog_id, agent_id, [(role, text), ...]); one rating, always 1."""
    return chat_store([(did, agent, turns, {"q": 1.0}) for did, agent, turns in rows], ("q",))


ANN = ("ann-1", "polite", [
    ("user", "hello I want to book a trip"),
    ("agent", "sure, what is your name please"),
    ("user", "my name is Ann Lee"),
    ("agent", "where would you like to fly to"),
    ("user", "I fly to Paris"),
    ("agent", "booked your trip to Paris [done]"),
])
BOB = ("bob-1", "blunt", [
    ("user", "hi, change my flight"),
    ("agent", "where would you like to fly to"),
    ("user", "Rome please"),
    ("agent", "changed your flight to Rome [done]"),
])
# never answered an agent turn: not replayable, but its final turn still teaches the end detector
CARL = ("carl-1", "blunt", [("user", "cancel it"), ("agent", "cancelled [done]")])


@pytest.fixture
def store():
    return make_store([ANN, BOB, CARL])


def customer(store, **kw):
    return LearnedCustomer(store, LearnedCustomerConfig(similarity="words", **kw))


def episode_of(c, dialog_id):
    return next(e for e in c.episodes(50, seed=0) if e.customer.dialog_id == dialog_id)


def test_answers_with_the_utterance_after_the_most_similar_logged_agent_turn(store):
    c = customer(store)
    ep = episode_of(c, "ann-1")
    assert ep.customer.opening == "hello I want to book a trip"
    # asked in the other order than in the log: the answer follows the matching logged turn
    assert c.react([ep], ["where do you want to fly to?"]) == ["I fly to Paris"]
    assert c.react([ep], ["and your name please?"]) == ["my name is Ann Lee"]
    assert ep.ended is None


def test_stops_when_the_reply_looks_like_a_logged_ending(store):
    c = customer(store)
    ep = episode_of(c, "ann-1")
    assert c.react([ep], ["booked your flight to Paris [done]"]) == [None]
    assert ep.ended == "final"
    assert list(c.is_final(["cancelled [done]", "what is your name please"])) == [True, False]


def test_only_dialogues_that_answered_an_agent_turn_are_customers(store):
    c = customer(store)
    assert sorted(x.dialog_id for x in c.customers) == ["ann-1", "bob-1"]
    assert "cancelled [done]" in c.pool_texts  # still an example of an ending
    assert c.max_agent_turns == 3  # the longest logged dialogue


class ScriptedAgent:
    """Asks the name, then the destination, then books (with the logged ending's marker)."""

    def __init__(self):
        self.calls = []

    def respond(self, history, n=1, seed=None):
        self.calls.append(seed)
        k = sum(t.role == "agent" for t in history)
        return [["what is your name please", "where would you like to fly to", "booked it [done]"][min(k, 2)]]


def test_rollout_dialogue_and_store_shape(store):
    c = customer(store, episodes=4)
    r = roll_out(ScriptedAgent(), "scripted", c)
    assert r.dialogues.num_rows == 4 and r.rating_names == []
    assert set(r.dialogues.column("source").to_pylist()) == {"learned-customer"}
    turns = r.turns.to_pandas()
    for did, meta in zip(r.dialogues.column("dialog_id").to_pylist(), r.dialogues.column("meta").to_pylist()):
        m = json.loads(meta)
        texts = turns[turns.dialog_id == did].sort_values("turn_index")
        assert list(texts.role)[0] == "user" and list(texts.role)[-1] == "agent"
        assert m["ended"] == "final" and texts.text.iloc[-1] == "booked it [done]"
        if m["customer_dialog"] == "ann-1":
            assert list(texts.text) == ["hello I want to book a trip", "what is your name please", "my name is Ann Lee",
                                        "where would you like to fly to", "I fly to Paris", "booked it [done]"]


def test_turn_limit_ends_on_the_agents_turn(store):
    class Asker:
        def respond(self, history, n=1, seed=None):
            return ["where would you like to fly to"]

    r = roll_out(Asker(), "asker", customer(store, episodes=3, max_agent_turns=2))
    assert {json.loads(m)["ended"] for m in r.dialogues.column("meta").to_pylist()} == {"max_turns"}
    t = r.turns.to_pandas()
    assert (t.groupby("dialog_id").role.last() == "agent").all()
    assert (t[t.role == "agent"].groupby("dialog_id").size() == 2).all()


def test_seeded_and_deterministic(store):
    a1, a2 = ScriptedAgent(), ScriptedAgent()
    r1 = roll_out(a1, "s", customer(store, episodes=6, seed=3))
    r2 = roll_out(a2, "s", customer(store, episodes=6, seed=3))
    assert r1.turns.equals(r2.turns) and r1.dialogues.equals(r2.dialogues)
    assert a1.calls == a2.calls and len(set(a1.calls)) == len(a1.calls)  # a distinct agent seed per turn
    picks = lambda seed: [e.customer.dialog_id for e in customer(store).episodes(40, seed=seed)]  # noqa: E731
    assert picks(1) == picks(1) and picks(1) != picks(2)


def test_the_excluded_agent_is_never_replayed(store):
    c = LearnedCustomer(store, LearnedCustomerConfig(similarity="words"), exclude_agents=("polite",))
    assert {x.agent_id for x in c.customers} == {"blunt"}
    assert not any("Paris" in t for t in c.pool_texts)
    r = leave_one_out_rollouts(store, {"polite": ScriptedAgent(), "blunt": ScriptedAgent()},
                               LearnedCustomerConfig(similarity="words", episodes=10))
    for agent, meta in zip(r.dialogues.column("agent_id").to_pylist(), r.dialogues.column("meta").to_pylist()):
        assert json.loads(meta)["customer_agent"] != agent


def test_embedding_similarity_with_any_embedder(store):
    class Bag:
        vocab = ["name", "fly", "done", "where", "booked"]

        def embed(self, texts):
            return np.array([[t.count(w) for w in self.vocab] + [0.1] for t in texts], dtype=np.float32)

    c = LearnedCustomer(store, LearnedCustomerConfig(similarity="embedding"), embedder=Bag())
    assert isinstance(c.similarity, EmbeddingSimilarity)
    ep = episode_of(c, "ann-1")
    assert c.react([ep], ["your name?"]) == ["my name is Ann Lee"]
    assert c.react([ep], ["booked [done]"]) == [None]


def test_bad_inputs_are_named(store):
    with pytest.raises(RolloutError, match="no logged dialogue opens with a user turn"):
        LearnedCustomer(make_store([CARL]), LearnedCustomerConfig(similarity="words"))
    with pytest.raises(RolloutError, match="agents excluded: blunt, polite"):
        LearnedCustomer(store, LearnedCustomerConfig(similarity="words"), exclude_agents=("polite", "blunt"))
    with pytest.raises(RolloutError, match="no ending can be learned"):
        LearnedCustomer(make_store([("x", "a", [("user", "hi"), ("agent", "name?"), ("user", "Ann")])]),
                        LearnedCustomerConfig(similarity="words"))
    with pytest.raises(RolloutError, match="episodes must be >= 1"):
        customer(store).episodes(0)
    with pytest.raises(RolloutError, match="2 episodes but 1 replies"):
        c = customer(store)
        c.react(c.episodes(2), ["hi"])

    class Broken:
        def respond(self, history, n=1, seed=None):
            return ["a", "b"]

    with pytest.raises(RolloutError, match="expected one string"):
        roll_out(Broken(), "broken", customer(store, episodes=1))
    with pytest.raises(ValueError):
        LearnedCustomerConfig(similarity="bm25")
