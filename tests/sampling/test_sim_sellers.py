"""The simulator's sellers as target agents: a store of one seller's simulated dialogues,
sampled with another seller through ``python:enigma.sim.sellers:<id>``."""

from __future__ import annotations

from enigma.agents import load_agent
from enigma.sampling.sampler import run_sampling


def test_seller_sampled_at_another_sellers_states(tmp_path):
    from enigma.sim.generate import rollout_store
    from enigma.sim.seller_presets import preset_agents
    from enigma.sim.sellers import agent_spec, make_seller

    logged, target = preset_agents()[0], preset_agents()[-1]
    store = rollout_store(make_seller(logged), logged, n=3, seed=0)
    spec = agent_spec(target)
    assert spec == f"python:enigma.sim.sellers:{target}"
    table, stats = run_sampling(store, spec, n_samples=2, cache_dir=tmp_path, progress=False)
    n_agent_turns = sum(r == "agent" for r in store.turns.column("role").to_pylist())
    assert table.num_rows == 2 * n_agent_turns and stats.n_failed == 0
    # the same seller, asked directly as the sampler planned the call, gives the cached replies
    agent = load_agent(spec)
    from enigma.sampling.plan import logged_agent_states, plan_calls

    calls = plan_calls(logged_agent_states(store), 2, 0, "occurrence")
    for row in table.to_pylist()[:6]:
        call = next(c for c in calls if any((o.dialog_id, o.turn_index) == (row["dialog_id"], row["turn_index"]) for o in c.occurrences))
        j = [(o.dialog_id, o.turn_index) for o in call.occurrences].index((row["dialog_id"], row["turn_index"]))
        replies = agent.respond(list(call.state.history), n=2 * len(call.occurrences), seed=call.seed)
        assert replies[row["sample_index"] * len(call.occurrences) + j] == row["text"]
