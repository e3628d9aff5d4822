"""From learned zeta at each dialogue's last agent turn to per-rating estimates.

Post-normalised (the paper's estimate): ``sum zeta_i r_i / sum zeta_i``; unnormalised (its
ablation): ``mean zeta_i r_i``; effective sample size ``(sum zeta)^2 / sum zeta^2``. Every rating
is estimated at once from the same zeta; a dialogue without a value for some rating is left
out of that rating's sums only.
"""

from __future__ import annotations

import numpy as np


def effective_sample_size(zeta: np.ndarray) -> float:
    zeta = np.asarray(zeta, dtype=np.float64)
    sq = float(np.sum(zeta * zeta))
    return float(np.sum(zeta) ** 2 / sq) if sq > 0 else 0.0


def rating_estimates(zeta_last: np.ndarray, rewards: np.ndarray, names: list[str]) -> dict[str, dict[str, float]]:
    """``zeta_last`` [N], ``rewards`` [N, R] (NaN where a rating is missing)."""
    zeta_last = np.asarray(zeta_last, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64).reshape(len(zeta_last), len(names))
    out: dict[str, dict[str, float]] = {}
    for j, name in enumerate(names):
        ok = ~np.isnan(rewards[:, j])
        z, r = zeta_last[ok], rewards[ok, j]
        total = float(np.sum(z))
        out[name] = {
            "estimate": float(np.sum(z * r) / total) if total > 0 else float("nan"),
            "unnormalised": float(np.mean(z * r)) if len(z) else float("nan"),
            "ess": effective_sample_size(z),
            "n": int(ok.sum()),
        }
    return out
