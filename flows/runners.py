"""The task runner a flow runs on: a bounded thread pool by default, or Dask (a local
cluster, or a real scheduler at ``pipeline.dask_address``)."""

from __future__ import annotations

import os
from pathlib import Path

import enigma  # noqa: F401

from enigma.pipeline.config import PipelineConfig

REPO_ROOT = Path(__file__).resolve().parents[1]


def make_task_runner(cfg: PipelineConfig, runner: str | None = None):
    kind = runner or cfg.runner
    if kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=cfg.max_workers)
    if kind != "dask":
        raise ValueError(f"pipeline.runner: unknown runner {kind!r}; expected 'threads' or 'dask'")
    from prefect_dask import DaskTaskRunner

    share_with_workers()
    if cfg.dask_address:
        return DaskTaskRunner(address=cfg.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": cfg.dask_n_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,  # no web dashboard: nothing to open, one port fewer
        }
    )


def share_with_workers() -> None:
    """Dask worker processes unpickle tasks by module name and report to Prefect's API. They
    inherit the environment, so put the repository on their path, and point them at the API
    this process uses: otherwise each worker starts a temporary Prefect server of its own."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
    for p in (str(REPO_ROOT), str(REPO_ROOT / "src")):
        if p not in paths:
            paths.insert(0, p)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    if not os.environ.get("PREFECT_API_URL"):
        from prefect.settings import PREFECT_API_URL

        url = PREFECT_API_URL.value()
        if url:
            os.environ["PREFECT_API_URL"] = url
