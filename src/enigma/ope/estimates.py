"""From learned zeta at each dialogue's last agent turn to per-rating estimates.

Post-normalised (the paper's estimate): ``sum zeta_i r_i / sum zeta_i``; unnormalised (its
ablation): ``mean zeta_i r_i``; effective sample size ``(sum zeta)^2 / sum zeta^2``. Every rating
is estimated at once from the same zeta; a dialogue without a value for some rating is left
out of that rating's sums only. ``counts``: how many times each dialogue counts (a bootstrap
resample held as its distinct dialogues, ``TurnFeatures.counts``); the sums are those of the
dialogues repeated that many times.
"""

from __future__ import annotations

import numpy as np


def effective_sample_size(zeta: np.ndarray, counts: np.ndarray | None = None) -> float:
    zeta = np.asarray(zeta, dtype=np.float64)
    c = np.ones_like(zeta) if counts is None else np.asarray(counts, dtype=np.float64)
    sq = float(np.sum(c * zeta * zeta))
    return float(np.sum(c * zeta) ** 2 / sq) if sq > 0 else 0.0


def rating_estimates(zeta_last: np.ndarray, rewards: np.ndarray, names: list[str],
                     counts: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """``zeta_last`` [N], ``rewards`` [N, R] (NaN where a rating is missing), ``counts`` [N] or None (once each)."""
    zeta_last = np.asarray(zeta_last, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64).reshape(len(zeta_last), len(names))
    c_all = np.ones_like(zeta_last) if counts is None else np.asarray(counts, dtype=np.float64)
    out: dict[str, dict[str, float]] = {}
    for j, name in enumerate(names):
        ok = ~np.isnan(rewards[:, j])
        z, r, c = zeta_last[ok], rewards[ok, j], c_all[ok]
        total, n = float(np.sum(c * z)), float(np.sum(c))
        out[name] = {
            "estimate": float(np.sum(c * z * r) / total) if total > 0 else float("nan"),
            "unnormalised": float(np.sum(c * z * r) / n) if n else float("nan"),
            "ess": effective_sample_size(z, c),
            "n": int(round(n)),
        }
    return out
