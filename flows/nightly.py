"""The nightly job: score the agents of a registry that have not been scored yet.

Reads the registry (a YAML file of named specs or a folder of checkpoints), keeps the agents
whose fingerprint is not in the seen-state file, samples their replies at the store's logged
states, scores them with the configured estimators, writes a report under ``report_dir``, logs
to MLflow, and only then marks them seen. With nothing new it does nothing.

Each agent stands alone: one whose sampling or scoring fails (a dead server, a broken
checkpoint) is written into the report and MLflow with the reason and is not marked seen, so
the next night tries it again; the others are reported, tracked and marked seen as usual. The
flow run then ends Failed, naming the failed agents.

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
from prefect.futures import as_completed
from prefect.states import Failed

from enigma.agents import unsourced_stand_in
from enigma.agents.registry import RegisteredAgent, SeenAgents, read_registry
from enigma.encoders.config import STAND_IN_REFUSAL
from enigma.evaluation import calibration as calib
from enigma.params import DEFAULT_PARAMS, Params
from enigma.pipeline.config import NightlyConfig
from flows.runners import make_task_runner
from tasks._common import digest
from tasks.estimate import score_agent
from tasks.sampling import sample_spec


@flow(name="nightly", log_prints=True)
def nightly(params_path: str = str(DEFAULT_PARAMS), registry: str | None = None) -> dict[str, Any]:
    logger = get_run_logger()
    params = Params.load(params_path)
    cfg = params.with_overrides("nightly", registry=registry)
    agents = read_registry(cfg.registry, cfg.checkpoint_spec)
    seen = SeenAgents(cfg.seen)
    new = seen.unseen(agents)
    if not new:
        logger.info("nightly: %d agent(s) in %s, none new: nothing to do", len(agents), cfg.registry)
        return {"evaluated": [], "report": None}
    logger.info("nightly: %d new agent(s): %s", len(new), ", ".join(a.name for a in new))
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")

    scores, errors = _score_each(new, cfg, params)
    failed = {name: errs for name, errs in errors.items() if errs}
    for name, errs in failed.items():
        logger.error("nightly: agent %s failed (%s); not marked seen, the next night retries it", name, _describe(errs))
    comparisons = _compare_each(cfg, agents, new, scores)
    report_path = _write_report(cfg, stamp, new, scores, errors, comparisons)
    tags = {"nightly_run": stamp, **({"failed_agents": ",".join(sorted(failed))} if failed else {})}
    tracked = _track(params, _tracked_results(new, cfg, scores, failed, comparisons), tags,
                     {"registry": str(cfg.registry), "store": str(cfg.store), "estimators": ",".join(cfg.estimators)})
    for a in new:
        if a.name not in failed:
            seen.mark(a, run=stamp, mlflow_parent_run_id=tracked.get("parent_run_id"))
    seen.save()
    logger.info("nightly: report at %s", report_path)
    out = {"evaluated": [a.name for a in new if a.name not in failed], "failed": failed,
           "report": str(report_path), "mlflow": tracked}
    if failed:
        message = f"{len(failed)} of {len(new)} new agent(s) failed: " + "; ".join(
            f"{name} ({_describe(errs)})" for name, errs in sorted(failed.items()))
        # The run ends Failed (what the scheduler and the UI show); calling the flow raises
        # AgentsFailed, which carries what the run did report.
        return Failed(message=message[:2000], data=AgentsFailed(message, out))
    return out


class AgentsFailed(RuntimeError):
    """Some agents of a nightly run failed; ``result`` is what the run reported (the others'
    estimates, the failures, the report path and the MLflow runs)."""

    def __init__(self, message: str, result: dict[str, Any]):
        super().__init__(message)
        self.result = result


def _track(params: Params, results: list[dict], tags: dict, run_params: dict) -> dict[str, Any]:
    """The night's runs into MLflow (nothing when tracking is off)."""
    from enigma.tracking.results import AgentResult
    from enigma.tracking.mlflow_log import log_benchmark_run

    if not params.tracking.enabled:
        return {}
    run = log_benchmark_run("nightly", [AgentResult.from_dict(r) for r in results], cfg=params.tracking,
                            run_params=run_params, tags=tags)
    return {"parent_run_id": run.parent_run_id, "children": run.child_run_ids, "registered": run.registered}


def _score_each(
    new: list[RegisteredAgent], cfg: NightlyConfig, params: Params
) -> tuple[dict[tuple[str, str], dict], dict[str, dict[str, str]]]:
    """Sample each new agent's replies and score them with every estimator, each agent on its
    own: returns the scores by (agent, estimator) and, for every agent, its failed steps
    (``knowledge``: a retrieval stand-in the store's base may not judge; ``sampling``; or an
    estimator) with the reason; a failure stops only that agent."""
    store, store_digest = str(cfg.store), digest(cfg.store)
    targets_dir = Path(cfg.work_dir) / "targets"
    # Agents may be remote and flaky: the pipeline's retries, as in the evaluate flow.
    sampler = sample_spec.with_options(retries=params.pipeline.retries, retry_delay_seconds=params.pipeline.retry_delay_seconds)
    errors: dict[str, dict[str, str]] = {a.name: {} for a in new}
    if cfg.knowledge is not None:
        for a in new:
            if unsourced_stand_in(a.spec, params.sample.agents):
                errors[a.name]["knowledge"] = f"nightly.knowledge {cfg.knowledge!r} with agent spec {a.shown!r}: {STAND_IN_REFUSAL}"
    by_run = {
        sampler.submit(store, store_digest, a.spec, str(targets_dir / f"{a.name}-{a.fingerprint}.parquet"), params,
                       exclude_agents=(a.name,)): a
        for a in new if not errors[a.name]
    }
    # A task whose input future failed never runs (Prefect leaves it pending): an agent's
    # scoring is submitted once its sampling has succeeded.
    score_futures = {}
    for targets in as_completed(list(by_run)):
        a = by_run[targets]
        targets.wait()  # sets the future's final state; without it, .state asks the API, which can lag
        if not targets.state.is_completed():
            errors[a.name]["sampling"] = _failure(targets)
            continue
        for est in cfg.estimators:
            score_futures[(a.name, est)] = score_agent.submit(
                store, store_digest, params, est, a.name, a.fingerprint, targets,
                str(Path(cfg.work_dir) / "results"), labels={"spec": a.shown}, knowledge=cfg.knowledge,
            )
    scores = {}
    for (name, est), f in score_futures.items():
        f.wait()
        if f.state.is_completed():
            scores[(name, est)] = f.result()
        else:
            errors[name][est] = _failure(f)
    return scores, errors


def _compare_each(cfg: NightlyConfig, agents: list[RegisteredAgent], new: list[RegisteredAgent], scores: dict) -> dict:
    """(agent, estimator) -> its comparison with the registry (``enigma.pipeline.compare``)."""
    from enigma.pipeline.compare import calibration_residuals, compare_agent
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(cfg.store)
    if cfg.compare_rating not in store.rating_names:
        return {}  # nothing to rank on; the report says which ratings there are
    names = [a.name for a in agents]
    earlier = set(names) - {a.name for a in new}
    results_dir = Path(cfg.work_dir) / "results"
    out, calibration = {}, {}
    for (name, _), s in scores.items():
        est = s["estimator"]
        if est not in calibration:
            calibration[est] = calibration_residuals(cfg.calibration_results, est, store, cfg.compare_rating,
                                                     cfg.interval_level)
        out[(name, est)] = compare_agent(name, est, results_dir, names, earlier, calibration[est], cfg.compare_rating,
                                         cfg.interval_level)
    return out


def _failure(future) -> str:
    """Why a task run did not complete: its exception, or else its state's message."""
    exc = future.state.result(raise_on_failure=False)
    if isinstance(exc, BaseException):
        return f"{type(exc).__name__}: {exc}"[:2000]
    return future.state.message or future.state.name


def _describe(errs: dict[str, str]) -> str:
    return "; ".join(f"{step}: {reason}" for step, reason in errs.items())


def _write_report(cfg: NightlyConfig, stamp: str, new: list[RegisteredAgent], scores: dict, errors: dict,
                  comparisons: dict) -> Path:
    """``nightly-<stamp>.json``, ``.md`` and ``.html`` (and ``latest.*``): every new agent with its
    status, estimates, errors and its comparison with the registry; ``estimates.csv`` gets a line
    per estimate."""
    from enigma.pipeline.compare import html, markdown

    report = {
        "run": stamp,
        "store": str(cfg.store),
        "registry": str(cfg.registry),
        "level": cfg.interval_level,
        "agents": {
            a.name: {
                "spec": a.shown,
                "fingerprint": a.fingerprint,
                "status": "failed" if errors[a.name] else "ok",
                "estimates": {s["estimator"]: s["estimates"] for (n, _), s in scores.items() if n == a.name},
                "intervals": {s["estimator"]: s.get("intervals") for (n, _), s in scores.items() if n == a.name},
                "comparison": {est: c for (n, est), c in comparisons.items() if n == a.name},
                "errors": errors[a.name],
                # of the replies the estimators read (the same table for each): empty or repeated ones
                "degenerate": next((s.get("degenerate") for (n, _), s in scores.items() if n == a.name), None),
            }
            for a in new
        },
        "failed": sorted(name for name, errs in errors.items() if errs),
    }
    report_dir = Path(cfg.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    report_path = report_dir / f"nightly-{stamp}.json"
    report_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (report_dir / "latest.json").write_text(report_path.read_text())
    md = markdown(report)
    for suffix, text in ((".md", md), (".html", html(md, f"nightly {stamp}"))):
        report_path.with_suffix(suffix).write_text(text)
        (report_dir / f"latest{suffix}").write_text(text)
    _append_table(report_dir / "estimates.csv", stamp, report["agents"])
    return report_path


def _tracked_results(new: list[RegisteredAgent], cfg: NightlyConfig, scores: dict, failed: dict,
                     comparisons: dict) -> list[dict]:
    """One MLflow child run per (agent, estimator), with its comparison as ``diag.compare.*``
    metrics (rank, difference with the incumbent and its interval, both intervals) and the
    incumbent as a param. A failure is one too (status FAILED, the reason in its ``error``
    tag): for the estimator that failed, or for every estimator when the agent's sampling failed."""
    spec = {a.name: a.shown for a in new}
    results = [
        {
            "agent_id": name,
            "estimator": s["estimator"],
            "estimates": s["estimates"],
            "params": {"spec": spec[name], "store": str(cfg.store),
                       **_comparison_params(comparisons.get((name, s["estimator"])))},
            "diagnostics": {**s["diagnostics"], **({"ess": s["ess"]} if s["ess"] is not None else {}),
                            "compare": _comparison_metrics(comparisons.get((name, s["estimator"])))},
        }
        for (name, _), s in scores.items()
    ]
    results += [
        {
            "agent_id": name,
            "estimator": est,
            "estimates": {},
            "params": {"spec": spec[name], "store": str(cfg.store)},
            "error": errs.get(est) or f"sampling: {errs['sampling']}",
        }
        for name, errs in failed.items()
        for est in cfg.estimators
        if est in errs or "sampling" in errs
    ]
    return results


def _comparison_metrics(c: dict | None) -> dict[str, float]:
    if not c or c.get("error"):
        return {}
    out = {"estimate": c["estimate"], "rank": c["rank"], "ranked": c["ranked"]}
    for kind in ("interval", "sampling_interval", "conformal_interval"):
        if c.get(kind) and c[kind][0] is not None:
            out[f"{kind}.low"], out[f"{kind}.high"] = c[kind]
    cal = c.get("calibration") or {}
    out["calibration_agents"] = cal.get("calibration_agents", 0)
    acc = cal.get("accuracy") or {}
    # the store's accuracy of the interval and of the verdict rule, for night-over-night comparison
    for k in ("coverage", "mean_width"):
        if acc.get(k) is not None:
            out[f"store.interval_{k}"] = acc[k]
    for k in ("pairs", "called", "wrong", "wrong_rate", "power_gap_0_05"):
        if (acc.get("verdicts") or {}).get(k) is not None:
            out[f"store.verdicts.{k}"] = acc["verdicts"][k]
    cmp = c.get("comparison")
    if cmp:
        out["difference"] = cmp["difference"]
        if cmp.get("calibrated_difference") is not None:
            out["calibrated_difference"] = cmp["calibrated_difference"]
        if cmp.get("threshold") is not None:
            out["verdict_threshold"] = cmp["threshold"]
        # +1 better, -1 worse, 0 not distinguishable: a number MLflow can plot night over night
        out["verdict"] = calib.called_direction(cmp["verdict"])
        if cmp["interval"]:
            out["difference.low"], out["difference.high"] = cmp["interval"]
    return out


def _comparison_params(c: dict | None) -> dict[str, str]:
    cmp = (c or {}).get("comparison")
    out = {"incumbent": cmp["incumbent"], "verdict": cmp["verdict"], "verdict_how": cmp.get("how") or "",
           "sampling_only_verdict": cmp.get("sampling_only_verdict") or ""} if cmp else {}
    if c and not c.get("error"):
        out["interval_kind"] = c.get("interval_kind") or ""
        out["calibration"] = (c.get("calibration") or {}).get("how") or ""
    return out


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
    cfg = Params.load(params_path).nightly
    nightly.serve(name=cfg.deployment, cron=cfg.cron, parameters={"params_path": params_path})


def deployment(params_path: str = str(DEFAULT_PARAMS)):
    """The deployment object (for ``prefect.serve`` with other deployments, or inspection)."""
    cfg = Params.load(params_path).nightly
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
    try:
        runner = make_task_runner(Params.load(a.params).pipeline, a.runner)
        out = nightly.with_options(task_runner=runner)(a.params, a.registry)
    except AgentsFailed as exc:
        print(json.dumps({k: v for k, v in exc.result.items() if k != "mlflow"}, indent=2))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in out.items() if k != "mlflow"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
