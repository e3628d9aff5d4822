"""MLflow tracking of benchmark runs, in three parts: where runs go (``config``), what is logged
per (estimator, held-out agent) (``results``) and the logging itself (``mlflow_log``: a parent
run per benchmark run, a child per agent, the best heads registered).

The default store is embedded (SQLite + file artifacts under ``mlflow/``), so nothing has to be
started; any tracking URI (e.g. ``http://127.0.0.1:5000``) can be set in ``params.yaml``
(section ``tracking``) or with ``MLFLOW_TRACKING_URI``. MLflow itself is imported only when a
run is logged.

Nothing is re-exported here: params.yaml's typed root reads ``tracking.config``, and reading
settings must not load the logging code.
"""
