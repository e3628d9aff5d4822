"""``rollouts`` plays many dialogues side by side (an ``hf:`` checkpoint answers them in batches);
each dialogue is the one ``rollout`` plays alone with its seed, for the simulator's sellers and for
a language model, with and without closing exchanges."""

from __future__ import annotations

import pytest

from enigma.sim.rollout import rollout, rollouts
from enigma.sim.sellers import make_seller


@pytest.mark.parametrize("closing", [0, 2])
def test_side_by_side_is_each_dialogue_alone_for_sellers(closing):
    seeds = list(range(40))
    for seller in ("careless", "chatterbox", "quitter"):
        agent = make_seller(seller)
        assert rollouts(agent, seeds, closing_exchanges=closing) == [rollout(agent, s, closing_exchanges=closing)
                                                                     for s in seeds]


def test_side_by_side_is_each_dialogue_alone_for_a_batched_language_model(tiny_lm_dir):
    from enigma.agents.config import HFSettings
    from enigma.agents.hf import HFAgent

    calls = []
    agent = HFAgent(tiny_lm_dir, HFSettings(max_new_tokens=6, batch_size=4, device="cpu"))
    batch = agent.respond_batch
    agent.respond_batch = lambda h, n, s: calls.append(len(h)) or batch(h, n, s)
    together = rollouts(agent, list(range(6)), max_agent_turns=3)
    assert calls and calls[0] == 6  # every dialogue's first turn in one call
    del agent.respond_batch
    assert together == [rollout(agent, s, max_agent_turns=3) for s in range(6)]
    assert all(r.n_agent_turns >= 1 for r in together)


def test_a_reply_that_is_not_one_string_names_the_agent():
    class Two:
        def respond(self, history, n=1, seed=None):
            return ["a", "b"]

    with pytest.raises(ValueError, match="expected one string"):
        rollouts(Two(), [0])
