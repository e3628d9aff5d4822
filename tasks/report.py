"""A benchmark's report and its MLflow runs."""

from __future__ import annotations

from typing import Any

from prefect import task


# Not cached: it is cheap next to training, and must always reflect the result files on disk.
@task(name="report")
def report(b, params, full: bool = False) -> dict:
    """``enigma.pipeline.report.report``: summary.json, figures, index.html; returns the summary."""
    from enigma.pipeline.report import report as _report

    return _report(b, params, full)


# Not cached: a rerun of the flow is a new run in MLflow by design.
@task(name="track")
def track(b, params, summary: dict, full: bool = False) -> dict[str, Any]:
    """``enigma.pipeline.report.track``: the run into MLflow."""
    from enigma.pipeline.report import track as _track

    return _track(b, params, summary, full)
