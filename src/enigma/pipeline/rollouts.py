"""The rollouts stage: the agents' own unrated dialogues (``<data>/<name>/rollouts``), for the
estimators of the own-rollouts regime (regime b). Made by letting every agent of the store talk
with a customer learned from the OTHER agents' logged dialogues (``learned_customer``; never the
simulator's own customer, which is the truth), or read from the source's folder (``ingest``, e.g.
See 2019's self-play transcripts). A benchmark without rollouts gets an empty store there, so the
stage's output exists alike for every benchmark."""

from __future__ import annotations

import json
from typing import Any

from enigma.params import Params
from enigma.pipeline.config import Benchmark
from enigma.store.experience import ExperienceStore


def rollouts(b: Benchmark, params: Params, progress: bool = False) -> dict[str, Any]:
    """Write the benchmark's rollouts store; returns counts for the log."""

    from enigma.store import schema as S

    out = b.data_dir / "rollouts"
    how = b.config.rollouts
    if how is None:
        empty = ExperienceStore(S.dialogues_schema([]).empty_table(), S.TURNS_SCHEMA.empty_table())
        empty.write(out, {"source": "none", "note": f"benchmarks.{b.name}.rollouts is null: its agents have no rollouts"})
        return {"dialogues": 0}
    if how.ingest is not None:
        from enigma.store.ingest import ingest

        result = ingest(how.ingest, b.config.source.path, out, params.ingest, progress=progress)
        return {"dialogues": result.n_dialogues, "rejects": result.read.n_rejects}
    return learned_customer_rollouts(b, how.learned_customer, progress)


def learned_customer_rollouts(b: Benchmark, config, progress: bool = False) -> dict[str, Any]:
    """Every agent of the store (its spec from the benchmark) with a customer learned from the
    store's OTHER agents' dialogues (leave-one-agent-out); seeded, so a rerun gives the same."""
    from enigma.agents import load_agent
    from enigma.rollouts.learned_customer import leave_one_out_rollouts

    experience = ExperienceStore.open(b.store)
    specs = {a: b.agent_spec(a) for a in experience.agents()}
    agents = {name: load_agent(spec) for name, spec in specs.items()}
    store = leave_one_out_rollouts(experience, agents, config, progress=progress)
    ended = [json.loads(m)["ended"] for m in store.dialogues.column("meta").to_pylist()]
    manifest = {
        "source": "learned-customer",
        "experience": str(b.store),
        "agent_specs": specs,
        "learned_customer": config.model_dump(mode="json"),
        "ended": {k: ended.count(k) for k in sorted(set(ended))},
        "note": "each agent's dialogues with customers replayed from the other agents' logged dialogues "
        "(enigma.rollouts.learned_customer); unrated",
    }
    store.write(b.data_dir / "rollouts", manifest)
    return {"dialogues": store.dialogues.num_rows, "agents": len(agents), "ended": manifest["ended"]}
