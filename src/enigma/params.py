"""Loading ``params.yaml``: one section per pipeline stage, each read into a typed config.

Stage modules define their own pydantic config class; this module only finds the file and
hands out sections, so that the CLI, the Prefect tasks and DVC all read the same values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

DEFAULT_PARAMS = Path("params.yaml")

T = TypeVar("T", bound=BaseModel)


class ParamsError(Exception):
    """params.yaml is missing a section or has a bad value; the message names both."""


def load_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: parameters file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of stage sections at the top level")
    return data


def section(model: type[T], name: str, path: str | Path = DEFAULT_PARAMS, **overrides: Any) -> T:
    """Read section ``name`` of the params file into ``model``; ``overrides`` win."""
    data = dict(load_params(path).get(name) or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ParamsError(f"{path}: section '{name}': {exc}") from exc
