"""The ``evaluate`` flow: one leave-one-agent-out benchmark run, the stages of
``enigma.pipeline`` as Prefect tasks (``tasks/``).

    store (simulate | ingest) -> validate -> rollouts (learned customer | self-play) -> per
    held-out agent: target-action sampling -> per (estimator, agent): estimate (evaluate_one)
    -> report (summary.json, figures, index.html) -> MLflow (parent run + a child per agent)

Held-out agents are mapped tasks on a bounded thread pool by default, or on Dask
(``pipeline.runner: dask``; a local cluster, or ``pipeline.dask_address``). Task results are
cached and persisted (``.prefect/results``), and each (estimator, agent) result file is written
as soon as it is done, so a rerun skips finished work. ``dvc repro`` runs the same stage
functions through ``enigma stage``.

    python -m flows.evaluate airline [--runner dask] [--params params.yaml] [--full]
"""

from __future__ import annotations

import sys
from typing import Any

import enigma  # noqa: F401  (offline environment before Prefect loads)
from prefect import flow, get_run_logger

from enigma.params import DEFAULT_PARAMS, Params
from enigma.pipeline.train import EstimateFailed, failures_message
from flows.runners import make_task_runner
from tasks._common import digest
from tasks.estimate import estimate_heldout
from tasks.report import report as report_task, track as track_task
from tasks.rollouts import rollouts
from tasks.sampling import sample_agent
from tasks.store import build_store, validate_store


@flow(name="evaluate", log_prints=True)
def evaluate(benchmark: str = "airline", params_path: str = str(DEFAULT_PARAMS), track: bool = True,
             full: bool = False) -> dict[str, Any]:
    """The benchmark's main run (``full``: its full_estimators as well, and the full report)."""
    from enigma.contracts import Regime
    from enigma.estimators import benchmark_estimator
    from enigma.pipeline.store import heldout_agents

    logger = get_run_logger()
    params = Params.load(params_path)
    b = params.benchmark(benchmark)
    retry = dict(retries=params.pipeline.retries, retry_delay_seconds=params.pipeline.retry_delay_seconds)

    store_digest = build_store(b, params, digest(b.config.source.path))
    checked = validate_store(str(b.store), store_digest, params)
    logger.info("store %s: %s", b.store, checked["counts"])
    made = rollouts.with_options(**retry)(b, params, store_digest)
    logger.info("rollouts: %s", made)
    rollouts_digest = digest(b.rollouts) if b.rollouts is not None else ""
    agents, left_out = heldout_agents(b)
    if left_out:
        logger.info("experience only (not held out: no rollouts to act them): %s", ", ".join(left_out))

    runs = [(name, False) for name in b.estimators()] + ([(name, True) for name in b.estimators(full=True)] if full else [])
    needs_targets = any(Regime.REPLIES_AT_LOGGED_STATES in benchmark_estimator(b, n, params).regimes for n, _ in runs)
    sampler = sample_agent.with_options(**retry)
    targets = {a: sampler.submit(b, params, a, store_digest) if needs_targets else None for a in agents}
    futures = [
        estimate_heldout.submit(b, params, name, a, targets[a], store_digest, rollouts_digest, in_full)
        for name, in_full in runs
        for a in agents
    ]
    # The train stage's rule: a failed estimate is the agent's result (written by the task), the
    # run goes on and says how many failed; any other error (a missing input) stops it.
    failures = 0
    for f in futures:
        try:
            f.result()
        except EstimateFailed as exc:
            failures += 1
            logger.warning("%s", exc)
    if failures:
        logger.warning(failures_message(failures))

    summary = report_task(b, params, full)
    tracked = track_task(b, params, summary, full) if track else {}
    logger.info("report: %s", summary.get("report_html"))
    return {"summary_json": summary.get("summary_json"), "report_html": summary.get("report_html"),
            "headline": summary.get("headline"), "mlflow": tracked, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m flows.evaluate", description=__doc__.split("\n\n")[0])
    p.add_argument("benchmark", nargs="?", default="airline")
    p.add_argument("--params", default=str(DEFAULT_PARAMS))
    p.add_argument("--runner", choices=["threads", "dask"], default=None)
    p.add_argument("--full", action="store_true", help="the full_estimators too, and the full report")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    a = p.parse_args(argv)
    flow_ = evaluate.with_options(task_runner=make_task_runner(Params.load(a.params).pipeline, a.runner))
    out = flow_(a.benchmark, a.params, track=not a.no_track, full=a.full)
    print(f"report: {out['report_html']}\nsummary: {out['summary_json']}\n{out['headline']}")
    if out["failures"]:
        print(failures_message(out["failures"]))
    return 0  # as `enigma stage train`: failed runs are results the report lists, not a failed command


if __name__ == "__main__":
    sys.exit(main())
