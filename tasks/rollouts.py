"""Own-rollouts of every agent with a customer learned from the experience data (regime (b)
on a benchmark whose agents can run, e.g. the airline sellers)."""

from __future__ import annotations

from prefect import task


# Retries: agents may be remote and fail transiently; the rollouts are seeded, so a retry
# produces the same dialogues. Not cached: the task's product is the directory it writes
# (a cached return value would not bring a deleted directory back), and it costs about a
# second per agent (benchmarks/results/rollouts_customer.json).
@task(name="learned-customer-rollouts", retries=2, retry_delay_seconds=10)
def learned_customer_rollouts(
    store_dir: str,
    agent_specs: dict[str, str],
    out_dir: str,
    *,
    config: dict | None = None,
    progress: bool = False,
) -> dict:
    """Roll out each agent (name -> spec) with a customer learned from the store's OTHER
    agents' dialogues (leave-one-agent-out); write the unrated store to ``out_dir``. ``config``
    is ``pipeline.benchmarks.<name>.learned_customer``. Returns counts for the log."""
    import json

    from enigma.agents import load_agent
    from enigma.rollouts.learned_customer import LearnedCustomerConfig, leave_one_out_rollouts
    from enigma.store.experience import ExperienceStore

    cfg = LearnedCustomerConfig.model_validate(config or {})
    agents = {name: load_agent(spec) for name, spec in agent_specs.items()}
    store = leave_one_out_rollouts(ExperienceStore.open(store_dir), agents, cfg, progress=progress)
    ended = [json.loads(m)["ended"] for m in store.dialogues.column("meta").to_pylist()]
    manifest = {
        "source": "learned-customer",
        "experience": store_dir,
        "agent_specs": agent_specs,
        "learned_customer": cfg.model_dump(mode="json"),
        "ended": {k: ended.count(k) for k in sorted(set(ended))},
        "note": "each agent's dialogues with customers replayed from the other agents' logged dialogues "
        "(enigma.rollouts.learned_customer); unrated",
    }
    store.write(out_dir, manifest)
    return {"dialogues": store.dialogues.num_rows, "turns": store.turns.num_rows, "ended": manifest["ended"]}
