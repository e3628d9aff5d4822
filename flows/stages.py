"""The DVC stages of a benchmark: the same steps as the ``evaluate`` flow, one command each,
run in-process without a Prefect server (the task bodies, ``task.fn``), so that ``dvc repro``
works offline on a fresh clone.

    python -m flows.stages rollouts airline   # each agent with the learned customer (regime b)
    python -m flows.stages sample airline     # target actions of every held-out agent
    python -m flows.stages train airline      # every estimator on every held-out agent
    python -m flows.stages train airline --full   # ... and the slow ones of estimators_full
    python -m flows.stages report airline     # summary.json + figures + index.html, MLflow

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


def _agents(b, store_dir: str) -> list[str]:
    from flows.evaluate import heldout_agents

    agents, left_out = heldout_agents(b, store_dir)
    if left_out:
        print(f"experience only (not held out: no rollouts to act them): {', '.join(left_out)}")
    return agents


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
    needs = any(Regime.REPLIES_AT_LOGGED_STATES in build_estimator(e, params_path).regimes for e in b.estimators)
    Path(b.targets_dir).mkdir(parents=True, exist_ok=True)
    if not needs:
        return
    params = load_params(params_path)
    store_digest = digest(store)
    for a in tqdm(_agents(b, store), desc=f"{benchmark}: target actions", unit="agent"):
        sample_targets.fn(
            store,
            store_digest,
            b.agent_spec.replace("{agent}", a),
            str(Path(b.targets_dir) / f"{a}.parquet"),
            sample=params.get("sample") or {},
            exclude_agents=(a,),
        )


def train(benchmark: str, params_path: str, full: bool = False) -> None:
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    from enigma.contracts import Regime
    from enigma.store.experience import ExperienceStore
    from flows.evaluate import benchmark_config
    from tasks.estimate import build_estimator, record_failure, run_heldout

    b = benchmark_config(benchmark, params_path)
    failures = 0
    store = ExperienceStore.open(b.store)
    agents = _agents(b, str(b.store))
    labels = {Regime.REPLIES_AT_LOGGED_STATES.value: b.note} if b.note else {}
    rollouts = ExperienceStore.open(b.rollouts) if b.rollouts else None
    names = list(b.estimators) + ([n for n in b.estimators_full if n not in b.estimators] if full else [])
    for name in names:
        est = build_estimator(name, params_path)  # one per estimator: its encoder is reused
        needs = Regime.REPLIES_AT_LOGGED_STATES in est.regimes
        for a in tqdm(agents, desc=f"{benchmark}: {est.name}", unit="agent"):
            targets = None
            if needs:
                f = Path(b.targets_dir) / f"{a}.parquet"
                if not f.is_file():
                    raise FileNotFoundError(f"{f}: target actions of {a} missing (run the sample stage first)")
                targets = pq.read_table(f)
            t0 = time.perf_counter()
            try:
                run_heldout(est, store, a, targets, str(b.results_dir), labels, rollouts)
            except Exception as exc:  # one agent's failure (e.g. a diverged run) is reported, not fatal
                failures += 1
                record_failure(str(b.results_dir), est, a, store.rating_names, exc)
                tqdm.write(f"{est.name} / {a}: FAILED ({type(exc).__name__}: {str(exc)[:300]})")
                continue
            tqdm.write(f"{est.name} / {a}: {time.perf_counter() - t0:.1f}s")
    if failures:
        print(f"{failures} (estimator, agent) run(s) failed; the report lists them; the next run retries them")


def report(benchmark: str, params_path: str, track: bool = True) -> dict:
    from enigma.evaluation.loao import read_results, result_path
    from flows.evaluate import _add_note, _agent_results, _headline_metrics, benchmark_config
    from tasks.report import write_report
    from tasks.tracking import log_to_mlflow

    params = load_params(params_path)
    b = benchmark_config(benchmark, params_path)
    rows = read_results(b.results_dir).to_dict(orient="records")
    for r in rows:
        heads = result_path(b.results_dir, r["estimator"], r["agent_id"]).with_suffix(".heads.pt")
        r["heads_path"] = str(heads) if heads.is_file() else None
    summary = write_report.fn(
        rows,
        benchmark,
        str(b.report_dir),
        store_dir=str(b.store),
        truth_path=str(b.truth) if b.truth else None,
        results_dir=str(b.results_dir),
        report=params.get("report") or {},
    )
    if b.note:
        _add_note(Path(summary["summary_json"]), b.note)
    if track:
        tracked = log_to_mlflow.fn(
            benchmark,
            _agent_results(rows, summary, b),
            tracking=params.get("tracking") or {},
            run_params={"benchmark": benchmark, "store": str(b.store), "estimators": ",".join(b.estimators),
                        **{f"dice.{k}": v for k, v in (params.get("dice") or {}).items()}},
            summary=_headline_metrics(summary),
            report_dir=str(b.report_dir),
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
                   help="train: also the benchmark's estimators_full (too slow for the main job)")
    a = p.parse_args(argv)
    try:
        if a.stage == "rollouts":
            rollouts(a.benchmark, a.params)
        elif a.stage == "sample":
            sample(a.benchmark, a.params)
        elif a.stage == "train":
            train(a.benchmark, a.params, full=a.full)
        else:
            report(a.benchmark, a.params, track=not a.no_track)
    except (ValueError, FileNotFoundError, ParamsError, StoreError) as exc:  # user errors: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
