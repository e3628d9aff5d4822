"""The ``evaluate`` flow: one leave-one-agent-out benchmark run.

    store (simulate | ingest | existing) -> validate -> [learned-customer rollouts of every
    agent, where the benchmark has ``learned_customer``] -> per held-out agent: target-action
    sampling -> estimate (padding + DICE training for ENIGMA; each comparator alike)
    -> report (summary.json, figures, index.html) -> MLflow (parent run + a child per agent)

Held-out agents are mapped tasks on a bounded thread pool by default, or on Dask
(``pipeline.runner: dask``; a local cluster, or ``pipeline.dask_address``). Task results are
cached and persisted (``.prefect/results``), and the runner writes each (estimator, agent)
result file as soon as it is done, so a rerun skips finished work.

    python -m flows.evaluate airline [--runner dask] [--params params.yaml]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import enigma  # noqa: F401  (offline environment before Prefect loads)
from prefect import flow, get_run_logger

from enigma.params import DEFAULT_PARAMS, ParamsError, load_params
from flows.config import BenchmarkConfig, pipeline_config
from flows.runners import make_task_runner
from tasks._common import digest
from tasks.estimate import build_estimator, estimate_heldout
from tasks.report import write_report
from tasks.rollouts import learned_customer_rollouts
from tasks.sampling import sample_targets
from tasks.store import validate_store
from tasks.tracking import log_to_mlflow


def benchmark_config(benchmark: str, params_path: str | Path = DEFAULT_PARAMS) -> BenchmarkConfig:
    cfg = pipeline_config(params_path)
    if benchmark not in cfg.benchmarks:
        raise ParamsError(
            f"{params_path}: pipeline.benchmarks has no benchmark {benchmark!r}; known: {sorted(cfg.benchmarks)}"
        )
    return cfg.benchmarks[benchmark]


def heldout_agents(b: BenchmarkConfig, store_dir: str | Path) -> tuple[list[str], list[str]]:
    """The agents to hold out, and those of the store left out (kept as experience only):
    with a rollouts store (self-play), only agents that have rollouts can be acted by their
    stand-in, so the others (e.g. the human baseline) are experience only."""
    from enigma.store.experience import ExperienceStore

    in_store = ExperienceStore.open(store_dir).agents()
    if b.agents is not None:
        missing = sorted(set(b.agents) - set(in_store))
        if missing:
            raise ParamsError(f"benchmark agents {missing} have no dialogues in the store {store_dir}")
        return list(b.agents), sorted(set(in_store) - set(b.agents))
    if b.rollouts is None:
        return in_store, []
    with_rollouts = set(ExperienceStore.open(b.rollouts).agents())
    return [a for a in in_store if a in with_rollouts], [a for a in in_store if a not in with_rollouts]


def prepare_store(b: BenchmarkConfig, params_path: str, params: dict) -> str:
    """simulate | ingest | existing: the store the benchmark runs on."""
    from tasks import store as store_tasks

    if b.source == "simulate":
        if b.truth is None:
            raise ParamsError(f"{params_path}: a simulated benchmark needs 'truth' (where the simulator writes it)")
        return store_tasks.simulate_store(str(b.store), str(b.truth), params_path=params_path,
                                          simulate=params.get("simulate") or {})
    if b.source == "ingest":
        if not any(Path(s.out) == Path(b.store) for s in b.ingest):
            raise ParamsError(f"{params_path}: benchmark source 'ingest' but no ingest step writes its store {b.store}")
        for s in b.ingest:
            store_tasks.ingest_store(s.format, str(s.path), digest(s.path), str(s.out), params_path=params_path,
                                     ingest=params.get("ingest") or {})
        return str(b.store)
    if not Path(b.store).is_dir():
        raise FileNotFoundError(f"{b.store}: experience store not found (benchmark source is 'existing')")
    return str(b.store)


@flow(name="evaluate", log_prints=True)
def evaluate(benchmark: str = "airline", params_path: str = str(DEFAULT_PARAMS), track: bool = True) -> dict[str, Any]:
    logger = get_run_logger()
    params = load_params(params_path)
    pcfg = pipeline_config(params_path)
    b = benchmark_config(benchmark, params_path)

    store_dir = prepare_store(b, params_path, params)
    store_digest = digest(store_dir)
    checked = validate_store(store_dir, store_digest, params_path)
    logger.info("store %s: %s", store_dir, checked["counts"])

    from enigma.contracts import Regime

    if b.learned_customer is not None:
        if b.rollouts is None:
            raise ParamsError(f"{params_path}: benchmark {benchmark!r} has 'learned_customer' but no 'rollouts' path to write")
        from enigma.store.experience import ExperienceStore

        every = b.agents if b.agents is not None else ExperienceStore.open(store_dir).agents()
        made = learned_customer_rollouts.with_options(retries=pcfg.retries, retry_delay_seconds=pcfg.retry_delay_seconds)(
            store_dir, {a: b.agent_spec.replace("{agent}", a) for a in every}, str(b.rollouts),
            config=b.learned_customer.model_dump(mode="json"),
        )
        logger.info("learned-customer rollouts: %s", made)
    agents, left_out = heldout_agents(b, store_dir)
    if left_out:
        logger.info("experience only (not held out: no rollouts to act them): %s", ", ".join(left_out))
    estimators = {name: build_estimator(name, params_path) for name in b.estimators}
    needs_targets = any(Regime.REPLIES_AT_LOGGED_STATES in e.regimes for e in estimators.values())
    params_digest = digest(params_path)
    labels = {Regime.REPLIES_AT_LOGGED_STATES.value: b.note} if b.note else {}

    sampler = sample_targets.with_options(retries=pcfg.retries, retry_delay_seconds=pcfg.retry_delay_seconds)
    targets = {
        a: (
            sampler.submit(
                store_dir,
                store_digest,
                b.agent_spec.replace("{agent}", a),
                str(Path(b.targets_dir) / f"{a}.parquet"),
                sample=params.get("sample") or {},
                exclude_agents=(a,),
            )
            if needs_targets
            else None
        )
        for a in agents
    }
    futures = [
        estimate_heldout.submit(
            store_dir,
            store_digest,
            a,
            name,
            targets[a],
            results_dir=str(b.results_dir),
            params_path=params_path,
            params_digest=params_digest,
            labels=labels,
            rollouts_dir=str(b.rollouts) if b.rollouts else None,
            rollouts_digest=digest(b.rollouts) if b.rollouts else "",
        )
        for name in b.estimators
        for a in agents
    ]
    rows = [r for f in futures for r in f.result()]

    summary = write_report(
        rows,
        benchmark,
        str(b.report_dir),
        store_dir=store_dir,
        truth_path=str(b.truth) if b.truth else None,
        results_dir=str(b.results_dir),
        report=params.get("report") or {},
    )
    if b.note:
        _add_note(Path(summary["summary_json"]), b.note)
    tracked = {}
    if track:
        tracked = log_to_mlflow(
            benchmark,
            _agent_results(rows, summary, [b.results_dir]),
            tracking=params.get("tracking") or {},
            run_params={"benchmark": benchmark, "store": store_dir, "estimators": ",".join(b.estimators),
                        **{f"dice.{k}": v for k, v in (params.get("dice") or {}).items()}},
            summary=_headline_metrics(summary),
            report_dir=str(b.report_dir),
        )
    logger.info("report: %s", summary.get("report_html"))
    return {"summary_json": summary.get("summary_json"), "report_html": summary.get("report_html"),
            "headline": summary.get("headline"), "mlflow": tracked}


def _add_note(summary_json: Path, note: str) -> None:
    """The report states how the agents were run (e.g. stood in for by transcripts)."""
    s = json.loads(summary_json.read_text())
    s["note"] = note
    summary_json.write_text(json.dumps(s, indent=2) + "\n")


def _headline_metrics(summary: dict) -> dict[str, float]:
    out = {}
    for est, entry in (summary.get("estimators") or {}).items():
        for k in ("mean_pearson", "mean_spearman", "mean_kendall"):
            if isinstance(entry.get(k), (int, float)):
                out[f"{est}.{k}"] = entry[k]
        for r in summary.get("ratings") or []:
            for k in ("pearson", "spearman"):
                v = (entry.get(r) or {}).get(k)
                if isinstance(v, (int, float)):
                    out[f"{est}.{r}.{k}"] = v
    return out


def _agent_results(rows: list[dict], summary: dict, results_dirs: list) -> list[dict]:
    from enigma.evaluation.results import read_curves
    from enigma.tracking import results_from_rows

    truth = {
        (agent, r): cell["truth"]
        for agent, per in (summary.get("agents") or {}).items()
        for r, cell in per.items()
        if isinstance(cell, dict) and cell.get("truth") is not None
    }
    return [r.to_dict() for r in results_from_rows(rows, truth, read_curves(results_dirs))]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m flows.evaluate", description=__doc__.split("\n\n")[0])
    p.add_argument("benchmark", nargs="?", default="airline")
    p.add_argument("--params", default=str(DEFAULT_PARAMS))
    p.add_argument("--runner", choices=["threads", "dask"], default=None)
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    a = p.parse_args(argv)
    flow_ = evaluate.with_options(task_runner=make_task_runner(a.params, a.runner))
    out = flow_(a.benchmark, a.params, track=not a.no_track)
    print(f"report: {out['report_html']}\nsummary: {out['summary_json']}\n{out['headline']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
