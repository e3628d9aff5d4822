"""MLflow tracking of benchmark runs: one parent run per benchmark run, one child run per
held-out agent (params, estimates, diagnostics, learning curves, the trained heads as a model),
and the best heads registered in the model registry.

The default store is embedded (SQLite + file artifacts under ``mlflow/``), so nothing has to be
started; any tracking URI (e.g. ``http://127.0.0.1:5000``) can be set in ``params.yaml``
(section ``tracking``) or with ``MLFLOW_TRACKING_URI``.

Logging is done from one thread after the per-agent work has finished: MLflow's notion of an
"active run" is process state, and the per-agent tasks run concurrently.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pydantic import BaseModel

import enigma  # noqa: F401  (offline environment, telemetry off)


class TrackingConfig(BaseModel):
    """Section ``tracking`` of params.yaml."""

    enabled: bool = True
    # None: MLFLOW_TRACKING_URI if set, else the embedded SQLite store under mlflow/.
    uri: str | None = None
    artifact_root: str = "mlflow/artifacts"
    experiment: str = "enigma"
    # Name under which the best held-out agent's heads are registered; None: do not register.
    registered_model: str | None = "enigma-dice-heads"
    log_models: bool = True


DEFAULT_DB = "mlflow/mlflow.db"


def project_root(cwd: Path | None = None) -> Path:
    """Where relative tracking paths resolve: the working directory, except inside a
    ``dvc exp run --temp`` workspace (``<repo>/.dvc/tmp/exps/<tmp>``), whose runs belong in the
    repository's own MLflow store rather than a folder DVC deletes afterwards."""
    cwd = (cwd or Path.cwd()).resolve()
    parts = cwd.parts
    for i in range(len(parts) - 3):
        if parts[i : i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    return cwd


def resolve_uri(cfg: TrackingConfig, root: Path | None = None) -> str:
    """The tracking URI to use; relative SQLite paths are made absolute against ``root`` (by
    default ``project_root()``) so that a run from another working directory writes to the same
    database."""
    uri = cfg.uri or os.environ.get("MLFLOW_TRACKING_URI")
    root = (root or project_root()).resolve()
    if not uri:
        db = root / DEFAULT_DB
        db.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{db}"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        db = Path(uri[len("sqlite:///") :])
        if not db.is_absolute():
            db = root / db
            db.parent.mkdir(parents=True, exist_ok=True)
            return f"sqlite:///{db}"
    return uri


@dataclass
class AgentResult:
    """Everything the pipeline knows about one held-out agent after estimation."""

    agent_id: str
    estimator: str
    estimates: dict[str, float]
    truth: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    # metric name -> list of (step, value); e.g. the DICE loss and running estimates
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # a file saved with torch.save(module): the trained zeta/nu heads, if the estimator has any
    model_path: str | None = None
    # why this (estimator, agent) has no result (e.g. the agent's server was down); its child
    # run is then marked FAILED with this reason as its "error" tag
    error: str | None = None

    def mean_abs_error(self) -> float | None:
        errs = [abs(self.estimates[k] - v) for k, v in self.truth.items() if k in self.estimates]
        errs = [e for e in errs if _finite(e)]
        return sum(errs) / len(errs) if errs else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "estimator": self.estimator,
            "estimates": self.estimates,
            "truth": self.truth,
            "params": self.params,
            "diagnostics": self.diagnostics,
            "curves": {k: [list(p) for p in v] for k, v in self.curves.items()},
            "model_path": self.model_path,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AgentResult":
        return cls(
            agent_id=d["agent_id"],
            estimator=d["estimator"],
            estimates=dict(d["estimates"]),
            truth=dict(d.get("truth") or {}),
            params=dict(d.get("params") or {}),
            diagnostics=dict(d.get("diagnostics") or {}),
            curves={k: [(int(s), float(v)) for s, v in pts] for k, pts in (d.get("curves") or {}).items()},
            model_path=d.get("model_path"),
            error=d.get("error"),
        )


@dataclass
class TrackedRun:
    parent_run_id: str
    child_run_ids: dict[str, str]  # "<estimator>/<agent_id>" -> run id
    registered: str | None  # "name/version" when a model was registered
    experiment_id: str


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(float(x))


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
    from mlflow.entities import Metric, Param, RunTag

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
            m = [Metric(_metric_key(f"estimate.{k}"), float(v), 0, 0) for k, v in res.estimates.items() if _finite(v)]
            m += [Metric(_metric_key(f"truth.{k}"), float(v), 0, 0) for k, v in res.truth.items() if _finite(v)]
            m += [
                Metric(_metric_key(f"diag.{k}"), float(v), 0, 0)
                for k, v in _flat("", res.diagnostics)
                if _finite(v) and not isinstance(v, bool)
            ]
            mae = res.mean_abs_error()
            if mae is not None:
                m.append(Metric("abs_error_mean", mae, 0, 0))
            for name, pts in res.curves.items():
                m += [Metric(_metric_key(f"curve.{name}"), float(v), 0, int(s)) for s, v in pts if _finite(v)]
            p = [Param(_metric_key(k), str(v)[:6000]) for k, v in _flat("", res.params)]
            _log_batched(client, cid, metrics=m, params=p)
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "result.json"
                f.write_text(json.dumps(res.to_dict(), indent=2, default=str))
                client.log_artifact(cid, str(f))
            client.set_terminated(cid, status="FAILED" if res.error else "FINISHED")

        registered = None
        if cfg.log_models:
            registered = _log_models(results, children, cfg)
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


def _log_models(results: Sequence[AgentResult], children: Mapping[str, str], cfg: TrackingConfig) -> str | None:
    """Log each result's heads as an MLflow pytorch model in its child run; register the best:
    lowest mean absolute error against truth, or, without truth, the largest effective sample
    size (the most trustworthy weights)."""
    import logging

    import mlflow
    import torch

    # The heads are plain nn.Modules saved by pickle on purpose (torch.export would need an
    # input example per encoder); MLflow warns about pickle once per model, which for 27 agents
    # buries the pipeline's own output.
    logging.getLogger("mlflow.pytorch").setLevel(logging.ERROR)
    logged: list[tuple[float, str]] = []
    for res in results:
        if not res.model_path:
            continue
        path = Path(res.model_path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: heads of held-out agent {res.agent_id} not found")
        module = torch.load(path, weights_only=False)
        cid = children[f"{res.estimator}/{res.agent_id}"]
        with mlflow.start_run(run_id=cid):
            info = mlflow.pytorch.log_model(
                module, name="heads", pip_requirements=pip_requirements(), serialization_format="pickle"
            )
        mae = res.mean_abs_error()
        ess = res.diagnostics.get("ess")
        score = mae if mae is not None else (-float(ess) if _finite(ess) else math.inf)
        logged.append((score, info.model_uri))
    if not logged or not cfg.registered_model:
        return None
    best_uri = min(logged, key=lambda t: t[0])[1]
    mv = mlflow.register_model(best_uri, cfg.registered_model)
    return f"{mv.name}/{mv.version}"


def load_results(path: str | Path) -> list[AgentResult]:
    """Read the JSON list of per-agent results that the pipeline writes."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of per-agent results")
    out = []
    for i, d in enumerate(data):
        try:
            out.append(AgentResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: record {i}: bad per-agent result ({exc!r})") from exc
    return out


def results_from_rows(
    rows: Iterable[Mapping[str, Any]],
    truth: Mapping[tuple[str, str], float] | None = None,
    curves: "Any | None" = None,
) -> list[AgentResult]:
    """Group the leave-one-agent-out runner's rows (one per estimator, agent, rating; see
    ``enigma.evaluation.loao.RESULT_COLUMNS``) into one ``AgentResult`` per (estimator, agent).
    ``truth`` maps (agent_id, rating) to the true value; ``curves`` is the runner's learning-curve
    table (columns estimator, agent_id, step and one column per logged quantity)."""
    grouped: dict[tuple[str, str], AgentResult] = {}
    for i, r in enumerate(rows):
        try:
            key = (str(r["estimator"]), str(r["agent_id"]))
            rating, value = str(r["rating"]), r["estimate"]
        except KeyError as exc:
            raise ValueError(f"result row {i}: field {exc} missing") from None
        res = grouped.get(key)
        if res is None:
            diags = r.get("diagnostics") or "{}"
            res = grouped[key] = AgentResult(
                agent_id=key[1],
                estimator=key[0],
                estimates={},
                params={
                    "regime": r.get("regime"),
                    "labels": r.get("labels"),
                    "n_experience_dialogues": r.get("n_experience_dialogues"),
                },
                diagnostics=json.loads(diags) if isinstance(diags, str) else dict(diags),
                model_path=r.get("heads_path"),
            )
            if _finite(r.get("seconds")):
                res.diagnostics["seconds"] = float(r["seconds"])
        if r.get("error"):
            res.diagnostics[f"error.{rating}"] = 1.0
            res.params[f"error.{rating}"] = r["error"]
            continue
        if _finite(value):
            res.estimates[rating] = float(value)
        for extra in ("unnormalised", "ess"):
            if _finite(r.get(extra)):
                res.diagnostics[f"{extra}.{rating}"] = float(r[extra])
        if truth and (key[1], rating) in truth:
            res.truth[rating] = float(truth[(key[1], rating)])
    if curves is not None and len(curves):
        value_cols = [c for c in curves.columns if c not in ("estimator", "agent_id", "step")]
        step_col = "step" if "step" in curves.columns else None
        for (est, agent), frame in curves.groupby(["estimator", "agent_id"]):
            res = grouped.get((est, agent))
            if res is None:
                continue
            steps = frame[step_col].astype(int).tolist() if step_col else list(range(len(frame)))
            for c in value_cols:
                vals = frame[c].tolist()
                res.curves[c] = [(s, float(v)) for s, v in zip(steps, vals) if _finite(v)]
    return list(grouped.values())
