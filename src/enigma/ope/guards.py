"""Guards on the DICE weights: a run whose zeta is not finite, collapsed to 0 or exploded stops
with ``DiceDivergence`` instead of yielding a number. Both solvers check every logged step and
the final pass."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from enigma.ope.config import DiceConfig


class DiceDivergence(RuntimeError):
    """The optimisation diverged; the message says how and at which step."""


def check_zeta(where: str, zeta_mean: float, cfg: DiceConfig, zeta: np.ndarray | None = None) -> None:
    """E_D[zeta] (and every value of ``zeta``, if given) finite, neither collapsed to 0 nor
    exploded: an estimate from such weights is not a number to report."""
    if not math.isfinite(zeta_mean) or (zeta is not None and not np.all(np.isfinite(zeta))):
        raise DiceDivergence(f"{where}: zeta is not finite")
    if zeta_mean < cfg.zeta_collapse:
        raise DiceDivergence(f"{where}: E_D[zeta] = {zeta_mean:.3g} collapsed below dice.zeta_collapse={cfg.zeta_collapse}")
    if zeta_mean > cfg.zeta_explode:
        raise DiceDivergence(f"{where}: E_D[zeta] = {zeta_mean:.3g} exploded above dice.zeta_explode={cfg.zeta_explode}")


def check_row(row: dict[str, Any], cfg: DiceConfig) -> None:
    """A learning-curve row: every diagnostic finite, E_D[zeta] within the guards."""
    bad = [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v) and not k.startswith("estimate_")]
    if bad:
        raise DiceDivergence(f"step {row['step']}: {', '.join(bad)} not finite (lower dice.lr or change the preset)")
    check_zeta(f"step {row['step']}", row["zeta_mean"], cfg)
