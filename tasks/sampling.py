"""Target-action sampling: the held-out agent's replies at the logged states."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from tasks._common import CACHED


# Retries: agents may be remote (an OpenAI-compatible server) and fail transiently; the
# sampling cache keeps the replies already obtained, so a retry only asks for the rest.
@task(name="sample-targets", retries=2, retry_delay_seconds=10, **CACHED)
def sample_targets(
    store_dir: str,
    store_digest: str,
    agent_spec: str,
    out_path: str,
    *,
    sample: dict | None = None,
    exclude_agents: tuple[str, ...] = (),
    progress: bool = False,
):
    """Sample the agent's replies at every logged agent turn of the store (but those of
    ``exclude_agents``); write them to ``out_path`` (Parquet) and return the table. ``sample``
    is the ``sample`` section of params.yaml (``enigma.sampling.config.SampleConfig``)."""
    import pyarrow.parquet as pq

    from enigma.sampling import sample_targets as _sample
    from enigma.sampling.config import SampleConfig

    cfg = SampleConfig.model_validate(sample or {})
    # progress: off by default: several agents sample at once in a flow, and their bars would interleave.
    table = _sample(store_dir, agent_spec, exclude_agents=tuple(exclude_agents), progress=progress, **cfg.run_options())
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out_path)
    return table
