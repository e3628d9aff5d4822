"""The percentile bootstrap's two parts, shared by the report's intervals over agents
(``enigma.evaluation.correlation``) and ENIGMA's interval over logged dialogues
(``enigma.ope.bootstrap``): seeded resample indices, so that two quantities resampled with the same
seed are paired, and the percentile interval of the resampled values."""

from __future__ import annotations

import numpy as np


def bootstrap_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    """``resamples`` × ``n`` indices drawn with replacement; the same seed gives the same draws, so
    everything resampled with it is resampled identically (paired)."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def percentile_interval(draws: np.ndarray, level: float, min_draws: int = 1) -> list[float] | None:
    """``[low, high]``: the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the finite
    draws, or None with fewer than ``min_draws`` of them."""
    d = np.asarray(draws, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < max(min_draws, 1):
        return None
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(d, [a, 1.0 - a])
    return [float(lo), float(hi)]
