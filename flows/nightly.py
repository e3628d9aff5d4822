"""The nightly job: score the agents of a registry that have not been scored yet.

Reads the registry (a YAML file of named specs or a folder of checkpoints), keeps the agents
whose fingerprint is not in the seen-state file, samples their replies at the store's logged
states, scores them with the configured estimators, writes a report under ``report_dir``, logs
to MLflow, and only then marks them seen (a failed night is retried the next night). With
nothing new it does nothing.

    python -m flows.nightly run            # once, now
    python -m flows.nightly serve          # a deployment on the cron schedule of params.yaml
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

import enigma  # noqa: F401  (offline environment before Prefect loads)
from prefect import flow, get_run_logger

from enigma.params import DEFAULT_PARAMS, load_params
from enigma.registry import SeenAgents, read_registry
from flows.config import nightly_config
from flows.runners import make_task_runner
from tasks._common import digest
from tasks.estimate import score_new_agent
from tasks.sampling import sample_targets
from tasks.tracking import log_to_mlflow


@flow(name="nightly", log_prints=True)
def nightly(params_path: str = str(DEFAULT_PARAMS), registry: str | None = None) -> dict[str, Any]:
    logger = get_run_logger()
    params = load_params(params_path)
    cfg = nightly_config(params_path, registry=registry)
    agents = read_registry(cfg.registry, cfg.checkpoint_spec)
    seen = SeenAgents(cfg.seen)
    new = seen.unseen(agents)
    if not new:
        logger.info("nightly: %d agent(s) in %s, none new: nothing to do", len(agents), cfg.registry)
        return {"evaluated": [], "report": None}
    logger.info("nightly: %d new agent(s): %s", len(new), ", ".join(a.name for a in new))

    store = str(cfg.store)
    store_digest = digest(cfg.store)
    params_digest = digest(params_path)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    targets_dir = Path(cfg.work_dir) / "targets"

    target_futures = {
        a.name: sample_targets.submit(
            store,
            store_digest,
            a.spec,
            str(targets_dir / f"{a.name}-{a.fingerprint}.parquet"),
            sample=params.get("sample") or {},
            exclude_agents=(a.name,),
        )
        for a in new
    }
    score_futures = {
        (a.name, est): score_new_agent.submit(
            store,
            store_digest,
            a.name,
            a.fingerprint,
            est,
            target_futures[a.name],
            params_path=params_path,
            params_digest=params_digest,
            labels={"spec": a.spec},
        )
        for a in new
        for est in cfg.estimators
    }
    scores = {k: f.result() for k, f in score_futures.items()}

    report = {
        "run": stamp,
        "store": store,
        "registry": str(cfg.registry),
        "agents": {
            a.name: {
                "spec": a.spec,
                "fingerprint": a.fingerprint,
                "estimates": {scores[(a.name, e)]["estimator"]: scores[(a.name, e)]["estimates"] for e in cfg.estimators},
            }
            for a in new
        },
    }
    report_dir = Path(cfg.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    report_path = report_dir / f"nightly-{stamp}.json"
    report_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (report_dir / "latest.json").write_text(report_path.read_text())
    _append_table(report_dir / "estimates.csv", stamp, report["agents"])

    results = [
        {
            "agent_id": name,
            "estimator": s["estimator"],
            "estimates": s["estimates"],
            "params": {"spec": next(a.spec for a in new if a.name == name), "store": store},
            "diagnostics": {
                **s["diagnostics"],
                **({"ess": s["ess"]} if s["ess"] is not None else {}),
            },
        }
        for (name, _), s in scores.items()
    ]
    tracked = log_to_mlflow(
        "nightly",
        results,
        tracking=params.get("tracking") or {},
        run_params={"registry": str(cfg.registry), "store": store, "estimators": ",".join(cfg.estimators)},
        report_dir=None,
        tags={"nightly_run": stamp},
    )
    for a in new:
        seen.mark(a, run=stamp, mlflow_parent_run_id=tracked.get("parent_run_id"))
    seen.save()
    logger.info("nightly: report at %s", report_path)
    return {"evaluated": [a.name for a in new], "report": str(report_path), "mlflow": tracked}


def _append_table(path: Path, stamp: str, agents: dict) -> None:
    """One line per (run, agent, estimator, rating): the history of every nightly estimate."""
    new_file = not path.is_file()
    with path.open("a") as fh:
        if new_file:
            fh.write("run,agent,estimator,rating,estimate\n")
        for name, info in sorted(agents.items()):
            for est, values in sorted(info["estimates"].items()):
                for rating, v in sorted(values.items()):
                    fh.write(f"{stamp},{name},{est},{rating},{v!r}\n")


def serve(params_path: str = str(DEFAULT_PARAMS)) -> None:
    """Serve the nightly deployment on its cron schedule (needs a Prefect server:
    ``prefect server start`` and ``PREFECT_API_URL=http://127.0.0.1:4200/api``)."""
    cfg = nightly_config(params_path)
    nightly.serve(name=cfg.deployment, cron=cfg.cron, parameters={"params_path": params_path})


def deployment(params_path: str = str(DEFAULT_PARAMS)):
    """The deployment object (for ``prefect.serve`` with other deployments, or inspection)."""
    cfg = nightly_config(params_path)
    return nightly.to_deployment(name=cfg.deployment, cron=cfg.cron, parameters={"params_path": params_path})


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m flows.nightly", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "serve"])
    p.add_argument("--params", default=str(DEFAULT_PARAMS))
    p.add_argument("--registry", default=None, help="override nightly.registry")
    p.add_argument("--runner", choices=["threads", "dask"], default=None)
    a = p.parse_args(argv)
    if a.command == "serve":
        serve(a.params)
        return 0
    out = nightly.with_options(task_runner=make_task_runner(a.params, a.runner))(a.params, a.registry)
    print(json.dumps({k: v for k, v in out.items() if k != "mlflow"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
