"""Logging one benchmark run to MLflow: a parent run (parameters, summary metrics, the report
files) with a child run per (estimator, held-out agent) (estimates, truth, diagnostics, learning
curves, the trained heads as a model), and the best heads registered in the model registry.

Logging is done from one thread after the per-agent work has finished: MLflow's notion of an
"active run" is process state, and the per-agent tasks run concurrently.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import enigma  # noqa: F401  (offline environment, telemetry off)
from enigma.tracking.config import TrackingConfig, project_root, resolve_uri
from enigma.tracking.results import AgentResult, _finite


@dataclass
class TrackedRun:
    parent_run_id: str
    child_run_ids: dict[str, str]  # "<estimator>/<agent_id>" -> run id
    registered: str | None  # "name/version" when a model was registered
    experiment_id: str


def _flat(prefix: str, d: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            yield from _flat(key + ".", v)
        else:
            yield key, v


def _metric_key(key: str) -> str:
    # MLflow keys allow alphanumerics and _-. /; agent ids and rating names can hold others.
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in key)


def _experiment_id(client, cfg: TrackingConfig, root: Path) -> str:
    exp = client.get_experiment_by_name(cfg.experiment)
    if exp is not None:
        return exp.experiment_id
    artifacts = Path(cfg.artifact_root)
    if not artifacts.is_absolute():
        artifacts = root / artifacts
    artifacts.mkdir(parents=True, exist_ok=True)
    return client.create_experiment(cfg.experiment, artifact_location=artifacts.resolve().as_uri())


def log_benchmark_run(
    benchmark: str,
    results: Sequence[AgentResult],
    *,
    cfg: TrackingConfig | None = None,
    run_params: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None,
    report_dir: str | Path | None = None,
    root: Path | None = None,
    tags: Mapping[str, str] | None = None,
) -> TrackedRun:
    """Log one benchmark run: a parent run (params, summary metrics, report files) with one
    child run per (estimator, held-out agent); register the best ENIGMA heads."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    cfg = cfg or TrackingConfig()
    root = (root or project_root()).resolve()
    uri = resolve_uri(cfg, root)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    exp_id = _experiment_id(client, cfg, root)

    parent = client.create_run(exp_id, run_name=benchmark, tags={"benchmark": benchmark, **(tags or {})})
    pid = parent.info.run_id
    try:
        params = [Param(_metric_key(k), str(v)[:6000]) for k, v in _flat("", run_params or {})]
        metrics = []
        for k, v in _flat("", summary or {}):
            if _finite(v):
                metrics.append(Metric(_metric_key(k), float(v), 0, 0))
        _log_batched(client, pid, metrics=metrics, params=params)
        if report_dir is not None and Path(report_dir).is_dir():
            client.log_artifacts(pid, str(report_dir), artifact_path="report")

        children: dict[str, str] = {}
        logged_models: list[tuple[float, str]] = []
        if cfg.log_models:
            _quiet_pickle_warnings()
        for res in results:
            child = client.create_run(
                exp_id,
                run_name=f"{res.estimator}:{res.agent_id}",
                tags={
                    "mlflow.parentRunId": pid,
                    "benchmark": benchmark,
                    "agent_id": res.agent_id,
                    "estimator": res.estimator,
                    # MLflow caps a tag value at 8,000 characters
                    **({"error": res.error[:8000]} if res.error else {}),
                },
            )
            cid = child.info.run_id
            children[f"{res.estimator}/{res.agent_id}"] = cid
            # The heads go before the metrics: MLflow's log_model links the metrics a run has so
            # far to the model by reading back every metric's whole history, learning curves
            # included, which made it the slowest part of a report's logging
            # (studies/results/tracking_cost.md). The scalars are linked here instead.
            model_id = None
            if cfg.log_models and res.model_path:
                score, uri, model_id = _log_heads(res, cid)
                logged_models.append((score, uri))
            scalars = [(f"estimate.{k}", v) for k, v in res.estimates.items()]
            scalars += [(f"truth.{k}", v) for k, v in res.truth.items()]
            scalars += [(f"diag.{k}", v) for k, v in _flat("", res.diagnostics) if not isinstance(v, bool)]
            scalars.append(("abs_error_mean", res.mean_abs_error()))
            m = [Metric(_metric_key(k), float(v), 0, 0, model_id=model_id) for k, v in scalars if _finite(v)]
            for name, pts in res.curves.items():
                m += [Metric(_metric_key(f"curve.{name}"), float(v), 0, int(s)) for s, v in pts if _finite(v)]
            p = [Param(_metric_key(k), str(v)[:6000]) for k, v in _flat("", res.params)]
            _log_batched(client, cid, metrics=m, params=p)
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "result.json"
                f.write_text(json.dumps(res.to_dict(), indent=2, default=str))
                client.log_artifact(cid, str(f))
            client.set_terminated(cid, status="FAILED" if res.error else "FINISHED")

        registered = _register_best(logged_models, cfg)
        if registered:
            client.set_tag(pid, "registered_model", registered)
        client.set_terminated(pid)
    except BaseException:
        client.set_terminated(pid, status="FAILED")
        raise
    return TrackedRun(pid, children, registered, exp_id)


def _log_batched(client, run_id: str, *, metrics=(), params=()) -> None:
    # MLflow caps a batch at 1000 metrics and 100 params.
    metrics, params = list(metrics), list(params)
    for i in range(0, len(params), 100):
        client.log_batch(run_id, params=params[i : i + 100])
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[i : i + 1000])


def pip_requirements() -> list[str]:
    """Pins for the logged heads: loading them needs torch only (the project pins it)."""
    import torch

    return [f"torch=={torch.__version__.split('+')[0]}"]


def _quiet_pickle_warnings() -> None:
    # The heads are plain nn.Modules saved by pickle on purpose (torch.export would need an
    # input example per encoder); MLflow warns about pickle once per model, which for 27 agents
    # buries the pipeline's own output.
    import logging

    logging.getLogger("mlflow.pytorch").setLevel(logging.ERROR)


def _log_heads(res: AgentResult, run_id: str) -> tuple[float, str, str]:
    """Log one result's heads as an MLflow pytorch model in its child run; returns its score for
    registration (lower is better: the mean absolute error against truth, or, without truth,
    minus the effective sample size, the most trustworthy weights), its URI and its model id."""
    import mlflow
    import torch

    path = Path(res.model_path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: heads of held-out agent {res.agent_id} not found")
    # The heads are a whole nn.Module (enigma.ope.heads.DiceHeads, or a ModuleDict of them for
    # per-rating runs), so weights alone do not load them: torch's safe loader, with those module
    # classes allowed and nothing else (weights_only=False would run any code a file's pickle names).
    import pickle

    from enigma.ope.heads import DiceHeads

    allowed = [DiceHeads, torch.nn.ModuleDict, torch.nn.Sequential, torch.nn.Linear, torch.nn.GELU]
    try:
        with torch.serialization.safe_globals(allowed):
            module = torch.load(path, weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: heads of held-out agent {res.agent_id}: not ENIGMA's heads, refused ({first})") from exc
    with mlflow.start_run(run_id=run_id):
        info = mlflow.pytorch.log_model(
            module, name="heads", pip_requirements=pip_requirements(), serialization_format="pickle"
        )
    mae = res.mean_abs_error()
    ess = res.diagnostics.get("ess")
    score = mae if mae is not None else (-float(ess) if _finite(ess) else math.inf)
    return score, info.model_uri, info.model_id


def _register_best(logged: Sequence[tuple[float, str]], cfg: TrackingConfig) -> str | None:
    """Register the best logged heads under ``cfg.registered_model``; "name/version", or None."""
    import mlflow

    if not logged or not cfg.registered_model:
        return None
    best_uri = min(logged, key=lambda t: t[0])[1]
    mv = mlflow.register_model(best_uri, cfg.registered_model)
    return f"{mv.name}/{mv.version}"
