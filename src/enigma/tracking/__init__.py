"""MLflow tracking of benchmark runs, in three parts: where runs go (``config``), what is logged
per (estimator, held-out agent) (``results``) and the logging itself (``mlflow_log``: a parent
run per benchmark run, a child per agent, the best heads registered).

The default store is embedded (SQLite + file artifacts under ``mlflow/``), so nothing has to be
started; any tracking URI (e.g. ``http://127.0.0.1:5000``) can be set in ``params.yaml``
(section ``tracking``) or with ``MLFLOW_TRACKING_URI``. MLflow itself is imported only when a
run is logged.
"""

from enigma.tracking.config import DEFAULT_DB, TrackingConfig, project_root, resolve_uri
from enigma.tracking.mlflow_log import TrackedRun, log_benchmark_run, pip_requirements
from enigma.tracking.results import AgentResult, headline_metrics, load_results, results_from_report, results_from_rows

__all__ = [
    "DEFAULT_DB", "TrackingConfig", "project_root", "resolve_uri", "TrackedRun", "log_benchmark_run",
    "pip_requirements", "AgentResult", "headline_metrics", "load_results", "results_from_report", "results_from_rows",
]
