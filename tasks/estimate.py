"""Scoring one agent with one estimator, through the one scoring path
(``enigma.evaluation.loao.evaluate_one``): a benchmark's held-out agent, or a new agent."""

from __future__ import annotations

from typing import Any

from prefect import task

from tasks._common import CACHED


@task(name="estimate-heldout", **CACHED)
def estimate_heldout(b, params, estimator: str, agent_id: str, targets: Any, store_digest: str,
                     rollouts_digest: str = "", full: bool = False) -> list[dict]:
    """One (estimator, held-out agent) result of a benchmark, made as the train stage makes it
    (``enigma.pipeline.train.run_agent``): its rows (one per rating); the result file lands in
    the benchmark's results folder. The digests key the cache; the result file's own
    fingerprint then decides whether anything is recomputed. A failed estimate is written as the agent's result, as the stage
    writes it, and raised as ``EstimateFailed``: the flow counts it and goes on, and a failed
    task leaves nothing in Prefect's cache, so the next run retries it as the stage's does."""
    from enigma.estimators import benchmark_estimator
    from enigma.pipeline.train import EstimateFailed, run_agent
    from enigma.store.experience import ExperienceStore

    est = benchmark_estimator(b, estimator, params)
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts is not None else None
    rows, failure = run_agent(b, est, agent_id, targets, ExperienceStore.open(b.store), rollouts, b.results_dir(full))
    if failure is not None:
        raise EstimateFailed.of(est.name, agent_id, failure) from failure
    return rows


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
