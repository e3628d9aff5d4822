"""Scoring one agent with one estimator, through the one scoring path
(``enigma.evaluation.loao.evaluate_one``): a benchmark's held-out agent, or a new agent."""

from __future__ import annotations

from typing import Any

from prefect import task

from tasks._common import CACHED


@task(name="estimate-heldout", **CACHED)
def estimate_heldout(b, params, estimator: str, agent_id: str, targets: Any, store_digest: str,
                     rollouts_digest: str = "", full: bool = False) -> list[dict]:
    """One (estimator, held-out agent) result of a benchmark: its rows (one per rating); the
    result file lands in the benchmark's results folder. The digests key the cache; the result
    file's own fingerprint then decides whether anything is recomputed."""
    from enigma.estimators import benchmark_estimator
    from enigma.pipeline.train import estimate_agent
    from enigma.store.experience import ExperienceStore

    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts is not None else None
    return estimate_agent(b, benchmark_estimator(b, estimator, params), agent_id, targets, ExperienceStore.open(b.store),
                          rollouts, b.results_dir(full))


@task(name="score-agent", **CACHED)
def score_agent(store_dir: str, store_digest: str, params, estimator: str, agent_name: str, agent_fingerprint: str,
                targets: Any, results_dir: str, labels: dict[str, str] | None = None,
                knowledge: str | None = None) -> dict:
    """A new agent (no rated dialogues of its own) scored on the whole store: the nightly job's
    estimate (``enigma.pipeline.score.score_agent``). ``agent_fingerprint`` keys the cache, so a
    replaced checkpoint under the same name is scored again."""
    from enigma.estimators import build_estimator
    from enigma.pipeline.score import score_agent as _score
    from enigma.store.experience import ExperienceStore

    return _score(ExperienceStore.open(store_dir), build_estimator(estimator, params, knowledge=knowledge), agent_name, targets, results_dir,
                  labels=labels)
