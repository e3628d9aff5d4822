"""The sample stage: each held-out agent's replies at the logged states of the others' dialogues
(``<data>/<name>/targets/<agent>.parquet``), for the estimators that score from them (regime a:
ENIGMA among them). Sampling is cached per agent fingerprint (``sample.cache_dir``), so a rerun
asks the agents nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from enigma.contracts import Regime
from enigma.params import Params
from enigma.pipeline.config import Benchmark
from enigma.pipeline.store import heldout_agents
from enigma.sampling.config import SampleConfig


def needs_targets(b: Benchmark, params: Params) -> bool:
    """Whether any estimator of the benchmark (main or full) scores from the agents' replies."""
    from enigma.estimators import build_estimator

    every = b.estimators() + b.estimators(full=True)
    return any(Regime.REPLIES_AT_LOGGED_STATES in build_estimator(e, params).regimes for e in every)


def targets_path(b: Benchmark, agent_id: str) -> Path:
    return b.targets_dir / f"{agent_id}.parquet"


def sample_spec(store_dir: str | Path, spec: str, out: str | Path, sample_cfg: SampleConfig,
                exclude_agents: tuple[str, ...] = (), progress: bool = False) -> pa.Table:
    """An agent's replies at every logged agent turn of a store (but ``exclude_agents``'
    dialogues), written to ``out`` (Parquet) and returned."""
    from enigma.sampling.sampler import sample_targets
    from enigma.writes import write_parquet

    table = sample_targets(str(store_dir), spec, exclude_agents=tuple(exclude_agents), progress=progress,
                           **sample_cfg.run_options())
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_parquet(out, table)
    return table


def sample_agent(b: Benchmark, params: Params, agent_id: str, progress: bool = False) -> pa.Table:
    """A held-out agent's replies at every logged agent turn of the store but its own dialogues."""
    return sample_spec(b.store, b.agent_spec(agent_id), targets_path(b, agent_id), params.sample, (agent_id,), progress)


def sample(b: Benchmark, params: Params, progress: bool = False) -> dict[str, Any]:
    """Every held-out agent's targets (none when no estimator needs them)."""
    from tqdm.auto import tqdm

    b.targets_dir.mkdir(parents=True, exist_ok=True)
    agents, left_out = heldout_agents(b)
    if not needs_targets(b, params):
        return {"agents": [], "left_out": left_out}
    for a in tqdm(agents, desc=f"{b.name}: target actions", unit="agent", disable=not progress):
        sample_agent(b, params, a)
    return {"agents": agents, "left_out": left_out}


def read_targets(b: Benchmark, agent_id: str) -> pa.Table:
    import pyarrow.parquet as pq

    f = targets_path(b, agent_id)
    if not f.is_file():
        raise FileNotFoundError(f"{f}: target actions of {agent_id} missing (run the sample stage first)")
    return pq.read_table(f)
