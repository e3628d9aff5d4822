"""How sure is an estimate, and is one agent better than another? Both answered from the store's
own agents held out in turn.

Every store that the train stage has run on gives, for each of its agents, a leave-one-agent-out
estimate beside that agent's truth (a simulator's value, or its mean rating in the store). Those
agents are the calibration set. This module is the one code path that turns them into

- a **calibrated interval** for a new estimate: a linear recalibration ``truth ~ a + b estimate``
  fitted on the calibration agents, plus or minus a quantile of their residuals
  ``r_i = t_i - (a + b e_i)``. With enough agents for the level (``ceil((n + 1) level) <= n``,
  19 at 95%) the half-width is split-conformal: the ``ceil((n + 1) level)``-th smallest ``|r_i|``.
  With fewer it is still finite: a normal-theory prediction interval
  ``t_{n-p, (1 + level)/2} sd(r) sqrt(1 + 1/n)`` (p the number of fitted coefficients), which
  says so in its ``how``;
- a **verdict** on two estimates from the same store: their calibrated difference
  ``D = b (e_new - e_other)`` against ``q``, the same kind of quantile of ``|r_i - r_j|`` over the
  calibration *pairs*: "better" if ``D > q``, "worse" if ``D < -q``, else "not distinguishable".
  The sampling noise of the logs is inside the residuals (each calibration estimate had its own),
  and so is the estimator's bias on differences, which a bootstrap of one store cannot see.

The report (``summary.py``), the nightly comparison (``pipeline.compare``), ``enigma estimate``
and ``studies/verdict_accuracy.py`` all call these functions.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

VERDICTS = ("better", "worse", "not distinguishable")


@dataclass(frozen=True)
class Calibration:
    """A fitted recalibration: ``truth ~ a + b * estimate`` and the calibration agents' residuals."""

    a: float
    b: float
    residuals: np.ndarray
    params: int  # coefficients fitted: 2 (a and b) or 1 (a only, b fixed at 1)
    note: str = ""  # why the slope fell back to 1, if it did
    agents: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(len(self.residuals))

    def calibrated(self, estimate: float) -> float:
        return self.a + self.b * float(estimate)


def fit(estimates: Sequence[float], truths: Sequence[float], agents: Sequence[str] | None = None) -> Calibration:
    """The recalibration fitted on the calibration agents (pairs with a non-finite value are left out).

    A slope that is not positive (or fewer than 3 agents) would turn a ranking upside down or rest
    on nothing: the slope is then 1 and ``a`` the mean residual, a pure bias correction."""
    e = np.asarray(estimates, dtype=np.float64)
    t = np.asarray(truths, dtype=np.float64)
    names = list(agents) if agents is not None else [str(i) for i in range(len(e))]
    ok = np.isfinite(e) & np.isfinite(t)
    e, t, names = e[ok], t[ok], [n for n, k in zip(names, ok) if k]
    n = len(e)
    if n == 0:
        return Calibration(0.0, 1.0, np.zeros(0), 1, "no calibration agents", names)
    note = ""
    if n >= 3 and float(np.var(e)) > 0:
        with warnings.catch_warnings():
            # estimates that differ only in their last bits (an estimator that gives every agent
            # the same number) make the fit rank-deficient: polyfit then warns and returns the
            # minimum-norm line, a slope that means nothing
            warnings.simplefilter("error", np.exceptions.RankWarning)
            try:
                b, a = np.polyfit(e, t, 1)
            except np.exceptions.RankWarning:
                b = a = None
        if b is None:
            note = "the estimates are too close together to fit a slope: slope 1, bias only"
        elif b > 0:
            return Calibration(float(a), float(b), t - (a + b * e), 2, "", names)
        else:
            note = f"fitted slope {b:.3f} is not positive: slope 1, bias only"
    else:
        note = f"{n} calibration agent(s) (3 or more, with distinct estimates, fit a slope): slope 1, bias only"
    a = float(np.mean(t - e))
    return Calibration(a, 1.0, t - (a + e), 1, note, names)


def _quantile(abs_values: np.ndarray, sd: float, n_agents: int, params: int, level: float, scale: float,
              what: str) -> tuple[float | None, str]:
    """The conformal rank of ``abs_values`` where there are enough agents for the level, else the
    normal-theory half-width ``t * sd * scale`` with ``n_agents - params`` degrees of freedom;
    None with too few. Pairs count as many as their agents: 8 agents make 28 pairs, but those
    pairs are not 28 independent draws, and conformal over them would rest on 8 residuals."""
    if 1 <= math.ceil((n_agents + 1) * level) <= n_agents:
        m = len(abs_values)
        k = min(math.ceil((m + 1) * level), m)
        return float(np.sort(abs_values)[k - 1]), f"conformal over {n_agents} agents{what}"
    dof = n_agents - params
    if n_agents < 3 or dof < 1:
        return None, f"{n_agents} calibration agent(s): too few for any interval at {level:.0%} (3 needed)"
    from scipy import stats

    t = float(stats.t.ppf((1 + level) / 2, dof))
    return t * sd * scale, (f"normal prediction interval over {n_agents} agents (too few for conformal at {level:.0%})")


def _sd(cal: Calibration) -> float:
    dof = cal.n - cal.params
    return float(math.sqrt(float(np.sum(cal.residuals**2)) / dof)) if dof >= 1 else math.nan


RATING_RANGE = (0.0, 1.0)  # every rating of a store is normalised to [0, 1] at ingest (the simulator's too)


def interval(cal: Calibration, estimate: float, level: float) -> tuple[float | None, float | None, str]:
    """``(low, high, how)``: the calibrated estimate plus or minus the half-width, cut to the
    ratings' range [0, 1] (the truth cannot lie outside it, so coverage is unchanged); ``(None,
    None, how)`` with fewer than 3 calibration agents."""
    h, how = _quantile(np.abs(cal.residuals), _sd(cal), cal.n, cal.params, level, math.sqrt(1 + 1 / max(cal.n, 1)), "")
    if h is None or not math.isfinite(estimate):
        return None, None, how
    c = cal.calibrated(estimate)
    return max(c - h, RATING_RANGE[0]), min(c + h, RATING_RANGE[1]), how


def pair_halfwidth(cal: Calibration, level: float) -> tuple[float | None, str]:
    """``q``: the quantile of ``|r_i - r_j|`` over the calibration pairs (normal fallback with few)."""
    r = cal.residuals
    diffs = np.abs(r[:, None] - r[None, :])[np.triu_indices(len(r), 1)]
    # the difference of two new agents' residuals: twice the variance of one, plus the fit's
    return _quantile(diffs, _sd(cal), cal.n, cal.params, level, math.sqrt(2 * (1 + 1 / max(cal.n, 1))), "' pairs")


def verdict(cal: Calibration, e_new: float, e_other: float, level: float) -> dict[str, Any]:
    """``{"verdict", "difference" (D, calibrated), "threshold" (q), "how", "level", "calibration_agents"}``."""
    q, how = pair_halfwidth(cal, level)
    d = cal.b * (float(e_new) - float(e_other))
    if q is None or not math.isfinite(d):
        v = "no verdict"
    else:
        v = "better" if d > q else "worse" if d < -q else "not distinguishable"
    return {"verdict": v, "difference": d, "threshold": q, "how": how, "level": level, "calibration_agents": cal.n}


def called_direction(v: str) -> int:
    return 1 if v == "better" else -1 if v == "worse" else 0


def fit_without(estimates: dict[str, float], truths: dict[str, float], leave_out: Sequence[str]) -> Calibration:
    """The calibration on every agent but ``leave_out`` (the agents being judged)."""
    names = [a for a in estimates if a in truths and a not in set(leave_out)]
    return fit([estimates[a] for a in names], [truths[a] for a in names], names)


def calibrated_intervals(estimates: dict[str, float], truths: dict[str, float], level: float,
                         agents: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Each agent's calibrated interval, calibrated on the OTHER agents (as in leave-one-agent-out):
    ``{agent: {"low", "high", "how", "calibrated"}}`` for ``agents`` (default: all with truth)."""
    out = {}
    for a in agents if agents is not None else [x for x in estimates if x in truths]:
        if a not in estimates or not math.isfinite(estimates[a]):
            continue
        cal = fit_without(estimates, truths, [a])
        lo, hi, how = interval(cal, estimates[a], level)
        out[a] = {"low": lo, "high": hi, "how": how, "calibrated": cal.calibrated(estimates[a])}
    return out


def interval_accuracy(intervals: dict[str, dict[str, Any]], truths: dict[str, float]) -> dict[str, Any] | None:
    """``{coverage, mean_width, n_agents, missed}`` of intervals against truth (None without any)."""
    rows = [(a, v["low"], v["high"]) for a, v in intervals.items() if a in truths and v["low"] is not None]
    if not rows:
        return None
    inside = [lo <= truths[a] <= hi for a, lo, hi in rows]
    return {"coverage": float(np.mean(inside)), "mean_width": float(np.mean([hi - lo for _, lo, hi in rows])),
            "n_agents": len(rows), "missed": sorted(a for (a, _, _), ok in zip(rows, inside) if not ok)}


def pair_verdicts(estimates: dict[str, float], truths: dict[str, float], level: float,
                  agents: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every pair of ``agents`` judged by ``verdict`` as the nightly job judges a new agent against
    the incumbent, calibrated on the agents other than the two: ``[{"agents": (i, j), "direction"
    (+1 i better, -1 worse, 0 none), "gap" (truth_i - truth_j), "difference", "threshold"}]``."""
    names = sorted(a for a in (agents if agents is not None else estimates)
                   if a in estimates and a in truths and math.isfinite(estimates[a]) and math.isfinite(truths[a]))
    return [judged_pair(fit_without(estimates, truths, [i, j]), estimates, truths, i, j, level)
            for i, j in itertools.combinations(names, 2)]


def judged_pair(cal: Calibration, estimates: dict[str, float], truths: dict[str, float], i: str, j: str,
                level: float) -> dict[str, Any]:
    """``verdict`` of agent i against j under calibration ``cal``, as a row of ``pair_verdicts``
    (with the ``verdict`` itself)."""
    v = verdict(cal, estimates[i], estimates[j], level)
    return {"agents": (i, j), "direction": called_direction(v["verdict"]), "gap": truths[i] - truths[j],
            "difference": v["difference"], "threshold": v["threshold"], "verdict": v["verdict"]}


def verdict_accuracy(pairs: Sequence[dict[str, Any]], agents: Sequence[str] | None = None,
                     min_gap: float = 0.05) -> dict[str, Any]:
    """``{pairs, called, wrong, wrong_rate, power_gap_0_05, pairs_gap_0_05}`` of ``pair_verdicts``
    (only the pairs with both agents in ``agents``, if given). ``wrong``: called the opposite way to
    the true gap (a true gap of exactly 0 makes any call wrong); ``power_gap_0_05``: the share of
    the pairs with ``|true gap| > min_gap`` called the right way."""
    keep = None if agents is None else set(agents)
    rows = [p for p in pairs if keep is None or (p["agents"][0] in keep and p["agents"][1] in keep)]
    called = [p for p in rows if p["direction"]]
    wrong = sum(1 for p in called if p["direction"] * p["gap"] <= 0)
    big = [p for p in rows if abs(p["gap"]) > min_gap]
    right = sum(1 for p in big if p["direction"] * p["gap"] > 0)
    return {"pairs": len(rows), "called": len(called), "wrong": wrong,
            "wrong_rate": wrong / len(called) if called else None,
            "power_gap_0_05": right / len(big) if big else None, "pairs_gap_0_05": len(big)}
