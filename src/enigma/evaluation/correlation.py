"""How well each estimator's per-agent estimates track the truth across agents.

Per estimator and rating: Pearson, Spearman and Kendall (tau-b) from ``scipy.stats``, with
percentile bootstrap intervals that resample agents (seeded; the same resampled agent sets for
every rating, so the mean over ratings gets an interval too), and the spread ratio
std(estimates) / std(truth). A spread ratio near zero means the estimator has collapsed to a
(near) constant, e.g. the leave-one-out mean of the other agents, which correlates -1 with
truth by construction: its correlations then say nothing good about it and are flagged.

The bootstrap statistics are computed for all resamples at once (vectorised); tests check
them against ``scipy.stats`` on individual resamples.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from enigma import resampling
from enigma.resampling import bootstrap_indices  # noqa: F401  (part of this module's interface)

STATS = ("pearson", "spearman", "kendall")


# ---- point statistics -------------------------------------------------------------------
def correlations(x, y) -> dict[str, float]:
    """Pearson, Spearman and Kendall tau-b of two equal-length sequences; NaN where undefined
    (fewer than 3 points, or one side constant)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"correlations need two 1-D sequences of equal length, got {x.shape} and {y.shape}")
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {s: float("nan") for s in STATS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConstantInputWarning after ranking: reported as NaN
        return {
            "pearson": float(stats.pearsonr(x, y)[0]),
            "spearman": float(stats.spearmanr(x, y)[0]),
            "kendall": float(stats.kendalltau(x, y)[0]),
        }


def spread_ratio(estimates, truth) -> float:
    e = np.asarray(estimates, dtype=float)
    t = np.asarray(truth, dtype=float)
    if len(e) < 2:
        return float("nan")
    st = t.std(ddof=1)
    return float(e.std(ddof=1) / st) if st > 0 else float("nan")


def loo_mean_dependence(estimates, loo_mean, truth, max_collinear: float = 0.98) -> dict[str, float | None]:
    """How far an estimator's estimates are the leave-one-out mean of the other agents' logs
    (``loo_mean``: the experience-mean estimator's estimates). ``loo_mean_pearson``: their Pearson
    with it; positive means they move with the mean of the others, which moves against the truth
    (holding a good agent out lowers the mean of the rest). ``partial_pearson``: the Pearson of
    estimates and truth once the leave-one-out mean is regressed out of both, what the estimator
    knows beyond it; None where the leave-one-out mean and the truth are nearly collinear (then
    nothing is left to correlate, e.g. simulated logs that follow each agent's own policy)."""
    e, m, t = (np.asarray(v, dtype=float) for v in (estimates, loo_mean, truth))
    ok = np.isfinite(e) & np.isfinite(m) & np.isfinite(t)
    e, m, t = e[ok], m[ok], t[ok]
    out: dict[str, float | None] = {"loo_mean_pearson": None, "partial_pearson": None}
    if len(e) < 4 or np.ptp(m) == 0 or np.ptp(e) == 0:
        return out
    out["loo_mean_pearson"] = float(np.corrcoef(e, m)[0, 1])
    if np.ptp(t) > 0 and abs(np.corrcoef(m, t)[0, 1]) < max_collinear:
        design = np.column_stack([np.ones_like(m), m])

        def residual(v: np.ndarray) -> np.ndarray:
            return v - design @ np.linalg.lstsq(design, v, rcond=None)[0]

        re, rt = residual(e), residual(t)
        if np.ptp(re) > 0 and np.ptp(rt) > 0:
            out["partial_pearson"] = float(np.corrcoef(re, rt)[0, 1])
    return out


# ---- vectorised statistics over bootstrap resamples (rows) --------------------------------
def _pearson_rows(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    xc = X - X.mean(axis=1, keepdims=True)
    yc = Y - Y.mean(axis=1, keepdims=True)
    num = (xc * yc).sum(axis=1)
    den = np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = num / den
    # Rounding can make nearly constant resamples look correlated; treat them as undefined.
    r[den <= 1e-12 * np.maximum(1.0, np.abs(num))] = np.nan
    return np.clip(r, -1.0, 1.0)


def _spearman_rows(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return _pearson_rows(stats.rankdata(X, axis=1), stats.rankdata(Y, axis=1))


def _kendall_rows(X: np.ndarray, Y: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Kendall tau-b per row, as scipy.stats.kendalltau computes it (ties in x, in y, in both)."""
    n = X.shape[1]
    iu = np.triu_indices(n, k=1)
    out = np.empty(X.shape[0])
    for s in range(0, X.shape[0], chunk):
        x, y = X[s : s + chunk], Y[s : s + chunk]
        dx = np.sign(x[:, :, None] - x[:, None, :])[:, iu[0], iu[1]]
        dy = np.sign(y[:, :, None] - y[:, None, :])[:, iu[0], iu[1]]
        num = (dx * dy).sum(axis=1)
        den = np.sqrt((dx != 0).sum(axis=1).astype(float) * (dy != 0).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(den > 0, num / den, np.nan)
        out[s : s + chunk] = t
    return out


_ROW_STATS = {"pearson": _pearson_rows, "spearman": _spearman_rows, "kendall": _kendall_rows}


def bootstrap_stats(x, y, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Each statistic on every resample of (x, y) given by the rows of ``idx``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    X, Y = x[idx], y[idx]
    return {s: f(X, Y) for s, f in _ROW_STATS.items()}


def percentile_interval(draws: np.ndarray, confidence: float) -> list[float | None]:
    """The report's form of ``enigma.resampling.percentile_interval``: ``[None, None]`` when no
    draw is finite (summary.json keeps a pair in every ``*_ci95``)."""
    return resampling.percentile_interval(draws, confidence) or [None, None]


# ---- scoring an estimator -----------------------------------------------------------------
@dataclass
class EstimatorScore:
    """Correlations of one estimator with truth, per rating and averaged over ratings."""

    estimator: str
    agents: list[str]
    ratings: list[str]
    per_rating: dict[str, dict[str, object]]
    means: dict[str, float]
    mean_ci: dict[str, list[float | None]]
    missing_agents: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    # bootstrap draws of the mean over ratings, kept for paired comparisons
    mean_draws: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def score_estimator(
    name: str,
    estimates: pd.DataFrame,
    truth: pd.DataFrame,
    ratings: list[str],
    *,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    collapse_spread_ratio: float = 0.1,
    loo_mean: pd.DataFrame | None = None,
    loo_mean_flag: float = 0.5,
) -> EstimatorScore:
    """``estimates`` and ``truth`` are agent × rating tables (index agent_id). Agents that lack
    an estimate or a true value for any of ``ratings`` are left out of every rating (listed in
    ``missing_agents``), so that all ratings and the mean share one set of agents. ``loo_mean``
    (agent x rating, the experience mean held out per agent) adds ``loo_mean_dependence`` per
    rating, flagged where the estimates' Pearson with it reaches ``loo_mean_flag``."""
    missing_cols = [r for r in ratings if r not in estimates.columns or r not in truth.columns]
    if missing_cols:
        raise ValueError(f"estimator {name!r}: no estimates or no truth for rating(s) {missing_cols}")
    e = estimates.reindex(columns=ratings)
    t = truth.reindex(columns=ratings)
    all_agents = sorted(set(t.index))
    e = e.reindex(all_agents)
    t = t.reindex(all_agents)
    ok = e.notna().all(axis=1) & t.notna().all(axis=1)
    agents = [a for a, good in zip(all_agents, ok) if good]
    missing = [a for a in all_agents if a not in agents]
    e, t = e.loc[agents], t.loc[agents]

    idx = bootstrap_indices(len(agents), resamples, seed) if len(agents) >= 3 else None
    per_rating: dict[str, dict[str, object]] = {}
    draws_sum = {s: np.zeros(resamples) for s in STATS}
    flags: list[str] = []
    # The leave-one-out mean of the other agents' values has a spread ratio of exactly
    # 1/(n-1); with few agents that exceeds a fixed threshold, so the threshold never goes
    # below 1.5 times it.
    threshold = max(collapse_spread_ratio, 1.5 / (len(agents) - 1)) if len(agents) > 1 else collapse_spread_ratio
    for r in ratings:
        x, y = e[r].to_numpy(float), t[r].to_numpy(float)
        point = correlations(x, y)
        entry: dict[str, object] = dict(point)
        if idx is not None:
            draws = bootstrap_stats(x, y, idx)
            for s in STATS:
                entry[f"{s}_ci95"] = percentile_interval(draws[s], confidence)
                draws_sum[s] += draws[s]
        else:
            for s in STATS:
                entry[f"{s}_ci95"] = [None, None]
        entry["spread_ratio"] = spread_ratio(x, y)
        if loo_mean is not None and r in loo_mean.columns:
            dep = loo_mean_dependence(x, loo_mean[r].reindex(agents).to_numpy(float), y)
            entry.update(dep)
            lp = dep["loo_mean_pearson"]
            if lp is not None and lp >= loo_mean_flag:
                flags.append(
                    f"{r}: estimates follow the leave-one-out mean of the other agents' logs (Pearson {lp:+.2f} with it; "
                    "that mean moves against the truth)"
                )
        per_rating[r] = entry
        sr = entry["spread_ratio"]
        if isinstance(sr, float) and math.isfinite(sr) and sr < threshold:
            flags.append(
                f"{r}: estimates spread {sr:.3f} of the truth's spread (collapse to a near-constant; "
                f"its correlations are not evidence of skill)"
            )
    means = {s: _nanmean([per_rating[r][s] for r in ratings]) for s in STATS}
    mean_draws = {s: draws_sum[s] / max(len(ratings), 1) for s in STATS} if idx is not None else {}
    mean_ci = {s: percentile_interval(mean_draws[s], confidence) if mean_draws else [None, None] for s in STATS}
    if missing:
        flags.append(f"no estimate or truth for {len(missing)} agent(s), left out: {', '.join(missing)}")
    if len(agents) < 3:
        flags.append(f"only {len(agents)} agent(s) with estimates: correlations undefined")
    return EstimatorScore(name, agents, list(ratings), per_rating, means, mean_ci, missing, flags, mean_draws)


def paired_difference(a: EstimatorScore, b: EstimatorScore, stat: str, confidence: float) -> dict[str, object] | None:
    """Mean-over-ratings ``stat`` of ``a`` minus ``b``, with a paired bootstrap interval. Both
    must have been scored on the same agents with the same seed and resample count (their
    resamples are then the same agent sets)."""
    if a.agents != b.agents or stat not in a.mean_draws or stat not in b.mean_draws:
        return None
    if len(a.mean_draws[stat]) != len(b.mean_draws[stat]):
        return None
    diff = a.mean_draws[stat] - b.mean_draws[stat]
    return {
        "difference": a.means[stat] - b.means[stat],
        "ci95": percentile_interval(diff, confidence),
        "share_of_resamples_a_better": float(np.mean(diff[np.isfinite(diff)] > 0)) if np.isfinite(diff).any() else None,
    }


def _nanmean(values) -> float:
    v = np.asarray([float(x) for x in values], dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else float("nan")
