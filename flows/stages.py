"""The DVC stages of a benchmark: the same steps as the ``evaluate`` flow, one command each,
run in-process without a Prefect server (the task bodies, ``task.fn``), so that ``dvc repro``
works offline on a fresh clone.

    python -m flows.stages rollouts airline   # each agent with the learned customer (regime b)
    python -m flows.stages sample airline     # target actions of every held-out agent
    python -m flows.stages train airline      # every estimator on every held-out agent
    python -m flows.stages report airline     # summary.json + figures + index.html, MLflow
    python -m flows.stages train airline --full   # the slow estimators of pipeline...airline.full
    python -m flows.stages report airline --full  # every estimator side by side (full.report_dir)

Each reads ``pipeline.benchmarks.<name>`` of params.yaml (and the sections of the library it
calls: ``sample``, ``dice``, ``comparators``, ``report``, ``tracking``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import enigma  # noqa: F401

from enigma.params import DEFAULT_PARAMS, ParamsError, load_params
from enigma.store.experience import StoreError


def _agents(b, say: bool = True) -> list[str]:
    from flows.evaluate import heldout_agents

    agents, left_out = heldout_agents(b, str(b.store))
    if left_out and say:
        print(f"experience only (not held out: no rollouts to act them): {', '.join(left_out)}")
    return agents


def _full(b, benchmark: str, params_path: str):
    if b.full is None:
        raise ValueError(f"{params_path}: pipeline.benchmarks.{benchmark} has no 'full' section (estimators, results_dir, report_dir)")
    return b.full


def rollouts(benchmark: str, params_path: str) -> None:
    """Every agent of the store talks with a customer learned from the other agents' logged
    dialogues; the unrated dialogues go to ``rollouts`` (for the own-rollouts estimators)."""
    from enigma.store.experience import ExperienceStore
    from flows.evaluate import benchmark_config
    from tasks.rollouts import learned_customer_rollouts

    b = benchmark_config(benchmark, params_path)
    if b.learned_customer is None or b.rollouts is None:
        raise ValueError(
            f"{params_path}: pipeline.benchmarks.{benchmark} needs both 'rollouts' (where to write) and "
            "'learned_customer' (its settings) for the rollouts stage"
        )
    store = str(b.store)
    agents = b.agents if b.agents is not None else ExperienceStore.open(store).agents()
    t0 = time.perf_counter()
    out = learned_customer_rollouts.fn(
        store, {a: b.agent_spec.replace("{agent}", a) for a in agents}, str(b.rollouts),
        config=b.learned_customer.model_dump(mode="json"), progress=True,
    )
    print(f"{benchmark}: {out['dialogues']} rollouts of {len(agents)} agents in {time.perf_counter() - t0:.1f}s "
          f"(ended: {out['ended']}) -> {b.rollouts}")


def sample(benchmark: str, params_path: str) -> None:
    from tqdm.auto import tqdm

    from flows.evaluate import benchmark_config
    from tasks._common import digest
    from tasks.estimate import build_estimator
    from tasks.sampling import sample_targets
    from enigma.contracts import Regime

    b = benchmark_config(benchmark, params_path)
    store = str(b.store)
    every = list(b.estimators) + (list(b.full.estimators) if b.full else [])
    needs = any(Regime.REPLIES_AT_LOGGED_STATES in build_estimator(e, params_path).regimes for e in every)
    Path(b.targets_dir).mkdir(parents=True, exist_ok=True)
    if not needs:
        return
    params = load_params(params_path)
    store_digest = digest(store)
    for a in tqdm(_agents(b), desc=f"{benchmark}: target actions", unit="agent"):
        sample_targets.fn(
            store,
            store_digest,
            b.agent_spec.replace("{agent}", a),
            str(Path(b.targets_dir) / f"{a}.parquet"),
            sample=params.get("sample") or {},
            exclude_agents=(a,),
        )


def _train_one(name: str, benchmark: str, params_path: str, results_dir: str, bars: bool) -> int:
    """Every held-out agent with one estimator; returns how many (estimator, agent) runs failed.
    A failure (e.g. a diverged run) is recorded in the results and reported, not fatal."""
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    from enigma.contracts import Regime
    from enigma.store.experience import ExperienceStore
    from flows.evaluate import benchmark_config
    from enigma.evaluation.results import record_failure
    from tasks.estimate import build_estimator, run_heldout

    b = benchmark_config(benchmark, params_path)
    store = ExperienceStore.open(b.store)
    agents = _agents(b, say=False)
    labels = {Regime.REPLIES_AT_LOGGED_STATES.value: b.note} if b.note else {}
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts else None
    est = build_estimator(name, params_path)  # one per estimator: its encoder is reused
    needs = Regime.REPLIES_AT_LOGGED_STATES in est.regimes
    failures = 0
    for a in tqdm(agents, desc=f"{benchmark}: {est.name}", unit="agent", disable=not bars):
        targets = None
        if needs:
            f = Path(b.targets_dir) / f"{a}.parquet"
            if not f.is_file():
                raise FileNotFoundError(f"{f}: target actions of {a} missing (run the sample stage first)")
            targets = pq.read_table(f)
        t0 = time.perf_counter()
        try:
            run_heldout(est, store, a, targets, results_dir, labels, rollouts)
        except Exception as exc:
            failures += 1
            record_failure(results_dir, est, a, store.rating_names, exc)
            tqdm.write(f"{est.name} / {a}: FAILED ({type(exc).__name__}: {str(exc)[:300]})")
            continue
        tqdm.write(f"{est.name} / {a}: {time.perf_counter() - t0:.1f}s")
        sys.stdout.flush()
    return failures


def _one_torch_thread() -> None:
    # Workers share the machine's cores: one thread each, or they oversubscribe them (on 2 cores
    # two torch threads per process ran several times slower: benchmarks/results/ope_speed.md).
    import torch

    torch.set_num_threads(1)


def _shares_embeddings(names: list[str], params_path: str) -> bool:
    """Whether some estimator looks texts up in the shared embedding cache: a comparator with a
    text embedder, or ENIGMA's frozen encoder on the encode stage's model."""
    from enigma.encoders.config import EncodeConfig
    from tasks.estimate import build_estimator

    model = EncodeConfig.load(params_path).model
    for name in names:
        est = build_estimator(name, params_path)  # cheap: models load on first use
        cfg = getattr(est, "config", None)
        if getattr(est, "embedder", None) is not None:
            return True
        if getattr(cfg, "encoder", None) == "frozen" and getattr(cfg, "encoder_model", None) == model:
            return True
    return False


def _warm_embeddings(b, params_path: str) -> None:
    """The encode step, once, before the workers start: every utterance of the store and the
    rollouts and every sampled reply into the shared embedding cache (``encode.cache``), so that
    parallel estimators look vectors up instead of each encoding the same texts."""
    import pyarrow.parquet as pq

    from enigma.encoders.config import EncodeConfig
    from enigma.encoders.warm import store_texts, warm_cache
    from enigma.store.experience import ExperienceStore

    cache = EncodeConfig.load(params_path).embedding_cache()
    targets = [(str(f), pq.read_table(f)) for f in sorted(Path(b.targets_dir).glob("*.parquet"))]
    stats = warm_cache(cache, ExperienceStore.open(b.store), targets)
    if b.rollouts:
        cache.embed(store_texts(ExperienceStore.open(b.rollouts)))
    print(f"embedding cache: {stats.texts} texts, {stats.newly_encoded} newly encoded -> {stats.cache_dir}")


def train(benchmark: str, params_path: str, full: bool = False) -> None:
    """Every estimator of the benchmark (``--full``: of its ``full`` section) on every held-out
    agent, ``pipeline.max_workers`` estimators at a time in their own processes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from flows.config import pipeline_config
    from flows.evaluate import benchmark_config

    b = benchmark_config(benchmark, params_path)
    names = list(_full(b, benchmark, params_path).estimators) if full else list(b.estimators)
    results_dir = str(b.full.results_dir if full else b.results_dir)
    agents = _agents(b)
    workers = min(pipeline_config(params_path).max_workers, len(names))
    t0 = time.perf_counter()
    if workers <= 1:
        failures = sum(_train_one(n, benchmark, params_path, results_dir, bars=True) for n in names)
    else:
        if _shares_embeddings(names, params_path):
            _warm_embeddings(b, params_path)
        print(f"{benchmark}: {len(names)} estimators x {len(agents)} agents, {workers} at a time")
        # spawn: a forked child would inherit torch's thread pool state from the parent
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_one_torch_thread) as pool:
            futures = [pool.submit(_train_one, n, benchmark, params_path, results_dir, False) for n in names]
            failures = sum(f.result() for f in futures)
    print(f"{benchmark}: trained {len(names)} estimator(s) in {time.perf_counter() - t0:.0f}s -> {results_dir}")
    if failures:
        print(f"{failures} (estimator, agent) run(s) failed; the report lists them; the next run retries them")


def report(benchmark: str, params_path: str, track: bool = True, full: bool = False) -> dict:
    from enigma.evaluation.results import read_results, result_path
    from flows.evaluate import _add_note, _agent_results, _headline_metrics, benchmark_config
    from tasks.report import write_report
    from tasks.tracking import log_to_mlflow

    params = load_params(params_path)
    b = benchmark_config(benchmark, params_path)
    if full:
        _full(b, benchmark, params_path)
    # the full report: the main run's results and the slow estimators' side by side
    results_dirs = [b.results_dir, b.full.results_dir] if full else [b.results_dir]
    report_dir = b.full.report_dir if full else b.report_dir
    estimators = list(b.estimators) + (list(b.full.estimators) if full else [])
    rows = []
    for d in results_dirs:
        part = read_results(d).to_dict(orient="records")
        for r in part:
            heads = result_path(d, r["estimator"], r["agent_id"]).with_suffix(".heads.pt")
            r["heads_path"] = str(heads) if heads.is_file() else None
        rows += part
    summary = write_report.fn(
        rows,
        benchmark,
        str(report_dir),
        store_dir=str(b.store),
        truth_path=str(b.truth) if b.truth else None,
        results_dir=[str(d) for d in results_dirs],
        report=params.get("report") or {},
    )
    if b.note:
        _add_note(Path(summary["summary_json"]), b.note)
    if track:
        tracked = log_to_mlflow.fn(
            f"{benchmark}-full" if full else benchmark,
            _agent_results(rows, summary, results_dirs),
            tracking=params.get("tracking") or {},
            run_params={"benchmark": benchmark, "store": str(b.store), "estimators": ",".join(estimators),
                        **{f"dice.{k}": v for k, v in (params.get("dice") or {}).items()}},
            summary=_headline_metrics(summary),
            report_dir=str(report_dir),
        )
        if tracked:
            print(f"MLflow: parent run {tracked['parent_run_id']} ({len(tracked['children'])} child runs)"
                  + (f", registered {tracked['registered']}" if tracked.get("registered") else ""))
    print(f"report: {summary['report_html']}")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m flows.stages", description=__doc__.split("\n\n")[0])
    p.add_argument("stage", choices=["rollouts", "sample", "train", "report"])
    p.add_argument("benchmark")
    p.add_argument("--params", default=str(DEFAULT_PARAMS))
    p.add_argument("--no-track", action="store_true", help="report: do not log to MLflow")
    p.add_argument("--full", action="store_true",
                   help="train: the slow estimators of the benchmark's 'full' section, into its results_dir; "
                        "report: every estimator (main and full) into full.report_dir")
    a = p.parse_args(argv)
    try:
        if a.stage == "rollouts":
            rollouts(a.benchmark, a.params)
        elif a.stage == "sample":
            sample(a.benchmark, a.params)
        elif a.stage == "train":
            train(a.benchmark, a.params, full=a.full)
        else:
            report(a.benchmark, a.params, track=not a.no_track, full=a.full)
    except (ValueError, FileNotFoundError, ParamsError, StoreError) as exc:  # user errors: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
