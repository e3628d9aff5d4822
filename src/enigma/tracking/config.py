"""Where MLflow runs go: the ``tracking`` section of params.yaml and the tracking URI it resolves
to (embedded SQLite under ``mlflow/`` unless told otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class TrackingConfig(BaseModel):
    """Section ``tracking`` of params.yaml."""

    model_config = ConfigDict(extra="forbid")

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
