"""Per-agent intervals and their measured coverage: how sure is each estimate?

Three kinds, side by side:

- **sampling**: the estimator's own interval of its estimate (ENIGMA: the dialogue bootstrap,
  ``enigma.ope.bootstrap``). It covers the noise of the logs and of the target draws, not the
  estimator's bias; where estimates are compressed towards the mean it misses extreme agents.
- **conformal**: the estimate plus or minus a quantile of the *other* agents' absolute residuals
  ``|estimate - truth|`` (split-conformal with the other agents as the calibration set, as in a
  leave-one-agent-out study, where every other agent's residual is known). With ``n`` other
  agents the half-width is their ``ceil((n + 1) * level)``-th smallest residual; when that rank
  exceeds ``n`` the interval is unbounded (too few agents for the level: at 95% it takes 19).
  If the agents' residuals are exchangeable its coverage is at least ``level`` on average.
- **calibrated** (the default the reports show): the other agents' linear recalibration of the
  estimate plus or minus a quantile of their residuals, finite with few agents
  (``enigma.evaluation.calibration``, the code the nightly job and ``enigma estimate`` use).

Coverage is the share of agents whose truth lies inside their interval, per estimator and rating.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from enigma.evaluation.calibration import calibrated_intervals


def conformal_halfwidth(residuals: Sequence[float], level: float) -> float:
    """The half-width for a new agent from the absolute residuals of ``n`` calibration agents:
    their ``ceil((n + 1) level)``-th smallest, or inf when there are too few."""
    r = np.sort(np.abs(np.asarray([x for x in residuals if x is not None and math.isfinite(x)], dtype=np.float64)))
    k = math.ceil((len(r) + 1) * level)
    return float(r[k - 1]) if 1 <= k <= len(r) else math.inf


def interval_text(c: Any, truth: Any = None) -> str:
    """``[0.610, 0.720]`` for the reports, marked ``MISSES`` where it misses a known truth;
    ``none`` without an interval, ``unbounded`` with an infinite bound (null in JSON)."""
    if not c:
        return "none"
    if c[0] is None or c[1] is None:
        return "unbounded"
    missed = truth is not None and not (c[0] <= truth <= c[1])
    return f"[{c[0]:.3f}, {c[1]:.3f}]" + (" MISSES" if missed else "")


def conformal_intervals(estimates: pd.Series, truth: pd.Series, level: float) -> pd.DataFrame:
    """Each agent's conformal interval from the other agents' residuals (index: agent)."""
    agents = [a for a in estimates.index if a in truth.index and math.isfinite(estimates[a]) and math.isfinite(truth[a])]
    resid = {a: abs(float(estimates[a]) - float(truth[a])) for a in agents}
    rows = {}
    for a in agents:
        h = conformal_halfwidth([v for b, v in resid.items() if b != a], level)
        rows[a] = {"low": float(estimates[a]) - h, "high": float(estimates[a]) + h}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["low", "high"])


def _coverage(intervals: pd.DataFrame, truth: pd.Series) -> dict[str, Any] | None:
    """None where no agent has an interval (e.g. every run of the estimator failed)."""
    ok = intervals.dropna()
    ok = ok[[a in truth.index for a in ok.index]]
    if ok.empty:
        return None
    t = truth.loc[ok.index].astype(float)
    inside = (ok["low"] <= t) & (t <= ok["high"])
    width = ok["high"] - ok["low"]
    return {
        "coverage": float(inside.mean()),
        "mean_width": float(width.mean()) if np.isfinite(width).all() else None,
        "n_agents": int(len(ok)),
        "missed": sorted(ok.index[~inside]),
    }


def interval_table(group: pd.DataFrame, truth_wide: pd.DataFrame, rating: str, level: float) -> pd.DataFrame:
    """One estimator's agents for one rating: truth, estimate, sampling and conformal bounds."""
    rows = group[group["rating"] == rating].set_index("agent_id")
    est = rows["estimate"].astype(float)
    truth = truth_wide[rating]
    conf = conformal_intervals(est, truth, level)
    out = pd.DataFrame({"truth": truth.reindex(est.index), "estimate": est})
    for col in ("interval_low", "interval_high"):
        out[col] = pd.to_numeric(rows[col], errors="coerce") if col in rows else np.nan
    out["conformal_low"] = conf["low"].reindex(est.index)
    out["conformal_high"] = conf["high"].reindex(est.index)
    cal = calibrated_intervals(est.to_dict(), truth.dropna().to_dict(), level)
    out["calibrated_low"] = pd.Series({a: v["low"] for a, v in cal.items()}, dtype=float).reindex(est.index)
    out["calibrated_high"] = pd.Series({a: v["high"] for a, v in cal.items()}, dtype=float).reindex(est.index)
    return out


KINDS = ("calibrated", "sampling", "conformal")  # the first is the reports' default


def interval_coverage(group: pd.DataFrame, truth_wide: pd.DataFrame, rating: str, level: float,
                      agents: list[str] | None = None, table: pd.DataFrame | None = None) -> dict[str, Any]:
    """``{"calibrated": {coverage, mean_width, n_agents, missed} or None, "conformal": ..., "sampling":
    ...}`` over ``agents`` (default all; each agent's interval still calibrated on all the others):
    the sampling interval only where the estimator gave one for every agent; None where no agent
    has that interval."""
    table = interval_table(group, truth_wide, rating, level) if table is None else table
    if agents is not None:
        table = table.loc[[a for a in table.index if a in set(agents)]]
    truth = truth_wide[rating]
    out: dict[str, Any] = {"level": level, "conformal": _coverage(table[["conformal_low", "conformal_high"]].set_axis(["low", "high"], axis=1), truth),
                           "calibrated": _coverage(table[["calibrated_low", "calibrated_high"]].set_axis(["low", "high"], axis=1), truth)}
    sampling = table[["interval_low", "interval_high"]].set_axis(["low", "high"], axis=1)
    out["sampling"] = _coverage(sampling, truth) if sampling.notna().all(axis=None) and len(sampling) else None
    return out
