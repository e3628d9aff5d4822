"""Logging a finished benchmark (or nightly) run to MLflow."""

from __future__ import annotations

from typing import Any

from prefect import task


# Not cached: a rerun of the flow is a new run in MLflow by design.
@task(name="log-to-mlflow")
def log_to_mlflow(
    benchmark: str,
    results: list[dict],
    *,
    tracking: dict | None = None,
    run_params: dict | None = None,
    summary: dict | None = None,
    report_dir: str | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    from enigma.tracking import AgentResult, TrackingConfig, log_benchmark_run

    cfg = TrackingConfig.model_validate(tracking or {})
    if not cfg.enabled:
        return {}
    run = log_benchmark_run(
        benchmark,
        [AgentResult.from_dict(r) for r in results],
        cfg=cfg,
        run_params=run_params,
        summary=summary,
        report_dir=report_dir,
        tags=tags,
    )
    return {"parent_run_id": run.parent_run_id, "children": run.child_run_ids, "registered": run.registered}
