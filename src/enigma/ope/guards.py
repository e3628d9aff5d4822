"""Guards on the DICE weights: a run whose zeta is not finite, collapsed to 0 or exploded stops
with ``DiceDivergence`` instead of yielding a number. Both solvers check every logged step and
the final pass. A doubly robust value read from weights whose slot masses are out of balance is
kept but flagged (``dr_balance_problem``): the run says ``converged: false`` and why."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from enigma.ope.config import SolverConfig, ValueConfig


class DiceDivergence(RuntimeError):
    """The optimisation diverged; the message says how and at which step."""


def check_zeta(where: str, zeta_mean: float, solver: SolverConfig, zeta: np.ndarray | None = None) -> None:
    """E_D[zeta] (and every value of ``zeta``, if given) finite, neither collapsed to 0 nor
    exploded: an estimate from such weights is not a number to report."""
    if not math.isfinite(zeta_mean) or (zeta is not None and not np.all(np.isfinite(zeta))):
        raise DiceDivergence(f"{where}: zeta is not finite")
    if zeta_mean < solver.zeta_collapse:
        raise DiceDivergence(f"{where}: E_D[zeta] = {zeta_mean:.3g} collapsed below dice.zeta_collapse={solver.zeta_collapse}")
    if zeta_mean > solver.zeta_explode:
        raise DiceDivergence(f"{where}: E_D[zeta] = {zeta_mean:.3g} exploded above dice.zeta_explode={solver.zeta_explode}")


def check_row(row: dict[str, Any], solver: SolverConfig) -> None:
    """A learning-curve row: every diagnostic finite, E_D[zeta] within the guards."""
    bad = [k for k, v in row.items() if isinstance(v, float) and not math.isfinite(v) and not k.startswith("estimate_")]
    if bad:
        raise DiceDivergence(f"step {row['step']}: {', '.join(bad)} not finite (lower dice.lr or change the preset)")
    check_zeta(f"step {row['step']}", row["zeta_mean"], solver)


def dr_balance_problem(slot_means: np.ndarray, value: ValueConfig) -> str | None:
    """Why the doubly robust value of weights with per-slot masses ``slot_means`` (E_D[zeta |
    slot]) is not to be trusted, or None. The value is a ratio of zeta-weighted sums whose
    denominator is the slot-0 mass times the rated dialogues, so it is unchanged by a common scale
    of zeta but not by slots out of balance: a slot-0 mass near 0 beside the others blows it up.
    Weights that meet the slot constraints (exact_nu, or slot_normalise) are in balance exactly;
    the weighted value, normalised by zeta's own sum at the last turns, does not read slot 0."""
    if value.kind != "dr":
        return None
    m = np.asarray(slot_means, dtype=float)
    rel = m / max(float(m.mean()), 1e-300)
    worst = int(np.argmax(np.abs(rel - 1.0)))
    if abs(rel[worst] - 1.0) <= value.dr_slot_tol:
        return None
    slot0 = "" if worst == 0 else f" (slot 0: {rel[0]:.3g})"
    return (f"E_D[zeta | slot] out of balance: slot {worst} has {rel[worst]:.3g} times the slots' mean mass{slot0}, "
            f"beyond 1 +- {value.dr_slot_tol:g} (dice.dr_slot_tol); the doubly robust value is a ratio over "
            f"the slots and needs the slot constraints met (exact_nu meets them; or use value: weighted)")
