"""The params mapping of one benchmark row: params.yaml with an estimator's dice settings
overridden (shared by the benchmark scripts that write a params file per row)."""

from __future__ import annotations

import copy
from typing import Any


def with_dice(data: dict[str, Any], overrides: dict[str, Any], estimator: str = "enigma") -> dict[str, Any]:
    """A copy of the params mapping ``data`` whose ``estimators.<estimator>.dice`` has these
    settings over its own (keys replaced whole)."""
    out = copy.deepcopy(data)
    entry = out["estimators"][estimator]
    entry["dice"] = {**entry.get("dice", {}), **overrides}
    return out
