"""Time the report's bootstrap (all resamples at once) against a loop of scipy.stats calls on
the same resamples, and check that both give the same intervals. Sizes of the See 2019 report:
28 agents, 10 ratings, 1000 resamples, per estimator.

    .venv/bin/python studies/evaluation_bootstrap.py   # -> studies/results/evaluation_bootstrap.json
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from enigma.evaluation.correlation import bootstrap_indices, bootstrap_stats, percentile_interval

OUT = Path(__file__).parent / "results" / "evaluation_bootstrap.json"
N_AGENTS, N_RATINGS, RESAMPLES = 28, 10, 1000


def scipy_loop(x, y, idx):
    out = {"pearson": [], "spearman": [], "kendall": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for row in idx:
            xs, ys = x[row], y[row]
            out["pearson"].append(stats.pearsonr(xs, ys)[0])
            out["spearman"].append(stats.spearmanr(xs, ys)[0])
            out["kendall"].append(stats.kendalltau(xs, ys)[0])
    return {k: np.asarray(v, float) for k, v in out.items()}


def main() -> None:
    rng = np.random.default_rng(0)
    idx = bootstrap_indices(N_AGENTS, RESAMPLES, seed=0)
    data = [(x, x + rng.normal(scale=0.5, size=N_AGENTS)) for x in rng.normal(size=(N_RATINGS, N_AGENTS))]
    t0 = time.perf_counter()
    fast = [bootstrap_stats(x, y, idx) for x, y in data]
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = [scipy_loop(x, y, idx) for x, y in data]
    t_slow = time.perf_counter() - t0
    max_diff = max(float(np.nanmax(np.abs(f[s] - g[s]))) for f, g in zip(fast, slow) for s in f)
    same_ci = all(
        np.allclose(percentile_interval(f[s], 0.95), percentile_interval(g[s], 0.95)) for f, g in zip(fast, slow) for s in f
    )
    out = {
        "sizes": {"agents": N_AGENTS, "ratings": N_RATINGS, "resamples": RESAMPLES},
        "seconds_vectorised": round(t_fast, 3),
        "seconds_scipy_loop": round(t_slow, 3),
        "speedup": round(t_slow / t_fast, 1),
        "max_abs_difference": max_diff,
        "same_intervals": bool(same_ci),
        "note": "one run on a shared 2-core machine; compare the ratio, not the seconds",
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
