"""The agents' own rollouts (regime b): learned-customer rollouts or ingested self-play."""

from __future__ import annotations

from prefect import task


# Retries: agents may be remote and fail transiently; the rollouts are seeded, so a retry
# produces the same dialogues. Not cached: the task's product is the directory it writes (a
# cached return value would not bring a deleted directory back), and it costs about a second
# per agent (studies/results/rollouts_customer.json).
@task(name="rollouts", retries=2, retry_delay_seconds=10)
def rollouts(b, params, store_digest: str) -> dict:
    """``enigma.pipeline.rollouts.rollouts``; counts for the log."""
    from enigma.pipeline.rollouts import rollouts as _rollouts

    return _rollouts(b, params)
