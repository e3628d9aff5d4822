"""Target-action sampling: an agent's replies at the logged states."""

from __future__ import annotations

from prefect import task

from tasks._common import CACHED


# Retries: agents may be remote (an OpenAI-compatible server) and fail transiently; the
# sampling cache keeps the replies already obtained, so a retry only asks for the rest.
@task(name="sample-targets", retries=2, retry_delay_seconds=10, **CACHED)
def sample_agent(b, params, agent_id: str, store_digest: str):
    """A held-out agent's targets (``enigma.pipeline.sample.sample_agent``)."""
    from enigma.pipeline.sample import sample_agent as _sample

    return _sample(b, params, agent_id)


@task(name="sample-spec", retries=2, retry_delay_seconds=10, **CACHED)
def sample_spec(store_dir: str, store_digest: str, spec: str, out_path: str, params, exclude_agents: tuple[str, ...] = ()):
    """Any agent's replies at every logged agent turn of a store (a new agent of the nightly job)."""
    from enigma.pipeline.sample import sample_spec as _sample

    return _sample(store_dir, spec, out_path, params.sample, exclude_agents)
