"""The params mapping of one benchmark row: params.yaml with an estimator's dice settings
overridden (shared by the benchmark scripts that write a params file per row)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


def with_dice(data: dict[str, Any], overrides: dict[str, Any], estimator: str = "enigma") -> dict[str, Any]:
    """A copy of the params mapping ``data`` whose ``estimators.<estimator>.dice`` has these
    settings over its own (keys replaced whole)."""
    out = copy.deepcopy(data)
    entry = out["estimators"][estimator]
    entry["dice"] = {**entry.get("dice", {}), **overrides}
    return out


def write_row_params(folder: Path, data: dict[str, Any], overrides: dict[str, Any], estimator: str = "enigma") -> Path:
    """``folder/params.yaml``: ``with_dice(data, overrides)``, the one way the scripts write a row's
    params, so that a row written by one script has the settings (and result fingerprints) of the
    same row written by another."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "params.yaml"
    path.write_text(yaml.safe_dump(with_dice(data, overrides, estimator), sort_keys=False))
    return path
