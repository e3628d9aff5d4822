"""The train stage: every estimator of a benchmark (or of its ``full_estimators``) on every
held-out agent, through the one scoring path (``enigma.evaluation.loao.evaluate_one``), into
``<data>/<name>/results`` (``results_full``). Each (estimator, agent) result file is written as
it finishes and reused while its inputs are unchanged, so an interrupted stage resumes.

``pipeline.max_workers`` processes run at a time, each with one torch thread (on 2 cores, two torch
threads per process ran several times slower: studies/results/ope_speed.md), after one shared
encode step, run by the same workers, that puts every text of the store, the rollouts and the
sampled replies into the embedding cache, so that no text is encoded twice. Each estimator's agents
are dealt into one share per worker: when one estimator is all that needs recomputing (a changed
setting; the others' results are reused), every worker runs a share of it instead of one worker
running it all.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from enigma.contracts import Regime
from enigma.params import Params
from enigma.pipeline.config import Benchmark
from enigma.pipeline.sample import read_targets
from enigma.pipeline.store import heldout_agents
from enigma.pipeline.workers import init_worker


def sources(b: Benchmark, agent_targets, rollouts):
    """What the held-out protocol may give an estimator about the agent: its sampled replies,
    its own rollouts, and the benchmark's note beside estimates from its replies."""
    from enigma.evaluation.heldout import HeldOutSources

    def own_rollouts(agent: str):
        got = rollouts.filter_agents(keep={agent})
        if got.dialogues.num_rows == 0:
            raise ValueError(f"agent {agent!r} has no dialogues in the rollouts store")
        return got

    return HeldOutSources(
        target_actions=(lambda _agent, _experience: agent_targets) if agent_targets is not None else None,
        rollouts=own_rollouts if rollouts is not None else None,
        labels={Regime.REPLIES_AT_LOGGED_STATES.value: b.config.note} if b.config.note else {},
    )


def estimate_agent(b: Benchmark, est, agent_id: str, targets, store, rollouts, results_dir) -> list[dict[str, Any]]:
    """One (estimator, held-out agent) result, as rows (one per rating)."""
    from enigma.evaluation.loao import evaluate_one

    rows, _ = evaluate_one(store, est, agent_id, sources(b, targets, rollouts), results_dir)
    return rows.to_dict(orient="records")


class EstimateFailed(Exception):
    """An (estimator, held-out agent) run failed and its failure was written as the agent's
    result (``run_agent``); raised by the Prefect task so that the flow counts it, as the train
    stage does, and so that Prefect caches no result for it (the next run retries it). Its
    arguments are strings, so it pickles (a Dask worker sends it back to the flow)."""

    def __init__(self, estimator: str, agent_id: str, error: str):
        super().__init__(estimator, agent_id, error)
        self.estimator, self.agent_id, self.error = estimator, agent_id, error

    @classmethod
    def of(cls, estimator: str, agent_id: str, exc: BaseException) -> "EstimateFailed":
        return cls(estimator, agent_id, f"{type(exc).__name__}: {str(exc)[:300]}")

    def __str__(self) -> str:
        return f"{self.estimator} / {self.agent_id}: FAILED ({self.error})"


def run_agent(b: Benchmark, est, agent_id: str, targets, store, rollouts,
              results_dir) -> tuple[list[dict[str, Any]], BaseException | None]:
    """One (estimator, held-out agent) run as the train stage and the evaluate flow both make it:
    its result file, or, where the estimate fails (e.g. a diverged run), the failure written as
    the agent's result (``record_failure``), so that the report lists it and the next run retries
    it. Returns the result's rows and the failure (None: estimated). Only the estimate is caught:
    a missing input (the sample stage has not run) is an error of the stage, raised before."""
    from enigma.evaluation.results import record_failure

    try:
        return estimate_agent(b, est, agent_id, targets, store, rollouts, results_dir), None
    except Exception as exc:
        return record_failure(results_dir, est, agent_id, store.rating_names, exc), exc


def train_estimator(b: Benchmark, params: Params, name: str, full: bool = False, progress: bool = False,
                    results_dir=None, share: tuple[int, int] = (0, 1)) -> int:
    """Every held-out agent with one estimator (built once: its encoder is reused), into the
    benchmark's results folder (or ``results_dir``); returns how many (estimator, agent) runs
    failed. ``share=(i, n)``: only every n-th agent from the i-th. A failure (e.g. a diverged
    run) is written as the agent's result, so the report lists it and the next run retries it."""
    from tqdm.auto import tqdm

    from enigma.estimators import benchmark_estimator
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(b.store)
    agents, _ = heldout_agents(b)
    index, count = share
    agents = agents[index::count]
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts is not None else None
    results_dir = results_dir or b.results_dir(full)
    est = benchmark_estimator(b, name, params)
    needs = Regime.REPLIES_AT_LOGGED_STATES in est.regimes
    failures = 0
    for a in tqdm(agents, desc=f"{b.name}: {est.name}", unit="agent", disable=not progress):
        targets = read_targets(b, a) if needs else None  # missing: the sample stage has not run (an error, not a result)
        t0 = time.perf_counter()
        _, failure = run_agent(b, est, a, targets, store, rollouts, results_dir)
        if failure is not None:
            failures += 1
            tqdm.write(str(EstimateFailed.of(est.name, a, failure)))
            continue
        tqdm.write(f"{est.name} / {a}: {time.perf_counter() - t0:.1f}s")
        sys.stdout.flush()
    return failures


def warm_embeddings(b: Benchmark, params: Params, progress: bool = False, pool=None, workers: int = 1) -> dict[str, Any]:
    """The encode step, once, before the estimators run: every utterance of the store and the
    rollouts and every sampled reply into the shared embedding cache. With a process ``pool``
    (and no GPU, where one process is the better use) its ``workers`` share the batches."""
    import pyarrow.parquet as pq
    import torch

    from enigma.encoders.warm import WarmStats, encode_in_pool, store_texts, warm_texts
    from enigma.store.experience import ExperienceStore

    cache = params.encode.embedding_cache(progress=progress)
    targets = [(str(f), pq.read_table(f)) for f in sorted(b.targets_dir.glob("*.parquet"))]
    # the rollouts' texts after the store's and the replies', in batches of their own: the batches
    # (and so the vectors) this step has always made
    groups = [warm_texts(ExperienceStore.open(b.store), targets)]
    if b.rollouts is not None:
        groups.append(store_texts(ExperienceStore.open(b.rollouts)))
    if pool is not None and workers > 1 and not torch.cuda.is_available():
        encoded = sum(encode_in_pool(cache, texts, params.encode, pool, workers, progress) for texts in groups)
    else:
        encoded = sum(cache.encode_batches(cache.plan(texts)) for texts in groups)
    return WarmStats(texts=len(groups[0]), newly_encoded=encoded, cache_dir=str(cache.dir)).as_dict()


def train(b: Benchmark, params: Params, full: bool = False, progress: bool = False, say=print) -> dict[str, Any]:
    """Every estimator of the benchmark (``full``: of its ``full_estimators``) on every held-out
    agent; returns how many estimators, agents and failed runs."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from enigma.encoders.knowledge import load_knowledge
    from enigma.estimators import benchmark_estimator, uses_embedding_cache

    names = b.estimators(full)
    if b.config.knowledge is not None:
        # ENIGMA loads it per held-out agent: a base that cannot load is one error before any work
        load_knowledge(b.config.knowledge, f"benchmarks.{b.name}.knowledge")
    built = [benchmark_estimator(b, n, params) for n in names]  # cheap: models load on first use
    for est in built:
        if Regime.OWN_ROLLOUTS in est.regimes and b.rollouts is None:
            raise ValueError(f"benchmarks.{b.name}: {est.name} needs the agents' rollouts, but the benchmark has none "
                             "(rollouts: null)")
    b.results_dir(full).mkdir(parents=True, exist_ok=True)
    agents, left_out = heldout_agents(b)
    if left_out:
        say(f"experience only (not held out: no rollouts to act them): {', '.join(left_out)}")
    workers = params.pipeline.max_workers
    t0 = time.perf_counter()
    if workers <= 1:
        # as in a pool's worker (init_worker): with the cores' count of threads, torch's parallel
        # reductions made the fitted models' last bits depend on the machine
        import torch

        torch.set_num_threads(1)
        failures = sum(train_estimator(b, params, n, full, progress) for n in names)
    else:
        # spawn: a forked child would inherit torch's thread pool state from the parent
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=init_worker) as pool:
            if any(uses_embedding_cache(est, params) for est in built):
                stats = warm_embeddings(b, params, progress, pool, workers)
                say(f"embedding cache: {stats['texts']} texts, {stats['newly_encoded']} newly encoded -> {stats['cache_dir']}")
            say(f"{b.name}: {len(names)} estimators x {len(agents)} agents, {workers} at a time")
            futures = [pool.submit(train_estimator, b, params, n, full, share=(i, workers))
                       for n in names for i in range(workers)]
            failures = sum(f.result() for f in futures)
    say(f"{b.name}: trained {len(names)} estimator(s) in {time.perf_counter() - t0:.0f}s -> {b.results_dir(full)}")
    if failures:
        say(failures_message(failures))
    return {"estimators": names, "agents": agents, "failures": failures}


def failures_message(failures: int) -> str:
    """What the train stage and the evaluate flow say of their failed runs (they go on: each is
    the agent's result, listed by the report)."""
    return f"{failures} (estimator, agent) run(s) failed; the report lists them; the next run retries them"
