"""Issue 61, width and power: would the normal-theory prediction interval (the fallback below 19
calibration agents) do better than split-conformal with 26? At 95% and 26 agents, conformal takes
the largest residual, so its interval is wide. Dev halves only (airline, airline-seed1,
airline-seed2, See 2019), ENIGMA's leave-one-agent-out results: each dev agent's interval
calibrated on the other agents, and every dev pair judged with the agents other than the two as
calibration (``enigma.evaluation.calibration``), once with the conformal quantiles as built and
once with ``t * sd * sqrt(1 + 1/n)`` (``sqrt(2 (1 + 1/n))`` for a pair).

    .venv/bin/python studies/calibration_normal_theory.py
"""

from __future__ import annotations

import itertools
import math
import shlex
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from studies.result_files import write_result  # noqa: E402
from studies.verdict_scaled_residuals import BENCHMARKS, load  # noqa: E402

from enigma.evaluation import calibration as calib  # noqa: E402
from enigma.evaluation.split import split_agents  # noqa: E402
from enigma.params import Params  # noqa: E402

KINDS = ("conformal", "normal")


def normal_halfwidth(cal: calib.Calibration, level: float, scale: float) -> float:
    from scipy import stats

    dof = cal.n - cal.params
    sd = math.sqrt(float(np.sum(cal.residuals**2)) / dof)
    return float(stats.t.ppf((1 + level) / 2, dof)) * sd * scale


def main() -> int:
    params = Params.load(REPO / "params.yaml")
    level, split = params.report.confidence, params.report.split
    cmd = shlex.join([".venv/bin/python", "studies/calibration_normal_theory.py", *sys.argv[1:]])
    rows, pairs, dump = [], {k: [] for k in KINDS}, {"cells": []}
    for b in BENCHMARKS:
        for r, (e, _, t) in load(b).items():
            dev = split_agents(sorted(set(e) & set(t)), split, b)["dev"]
            cov, wid = {k: [] for k in KINDS}, {k: [] for k in KINDS}
            for a in dev:
                cal = calib.fit_without(e, t, [a])
                c = cal.calibrated(e[a])
                lo, hi, _ = calib.interval(cal, e[a], level)
                h = normal_halfwidth(cal, level, math.sqrt(1 + 1 / cal.n))
                for k, (x, y) in (("conformal", (lo, hi)), ("normal", (max(c - h, 0.0), min(c + h, 1.0)))):
                    cov[k].append(x <= t[a] <= y)
                    wid[k].append(y - x)
            for i, j in itertools.combinations(dev, 2):
                cal = calib.fit_without(e, t, [i, j])
                d = cal.b * (e[i] - e[j])
                for k in KINDS:
                    q = (calib.pair_halfwidth(cal, level)[0] if k == "conformal"
                         else normal_halfwidth(cal, level, math.sqrt(2 * (1 + 1 / cal.n))))
                    pairs[k].append({"agents": (i, j), "direction": 1 if d > q else -1 if d < -q else 0, "gap": t[i] - t[j]})
            cell = {"benchmark": b, "rating": r, **{f"{k}_{m}": float(np.mean(v[k])) for m, v in (("coverage", cov), ("width", wid)) for k in KINDS}}
            dump["cells"].append(cell)
            rows.append(f"| {b} | {r} | {cell['conformal_coverage']:.2f} | {cell['conformal_width']:.3f} | "
                        f"{cell['normal_coverage']:.2f} | {cell['normal_width']:.3f} |")
    lines = ["# Conformal against normal-theory calibrated intervals and verdicts (dev halves)", "", f"`{cmd}`", "",
             __doc__.split("\n\n")[0].replace("\n", " "), "",
             "| benchmark | rating | conformal coverage | conformal width | normal coverage | normal width |",
             "|---|---|---|---|---|---|", *rows, "", "| verdict threshold | pairs | called | wrong rate | power at gap > 0.05 |",
             "|---|---|---|---|---|"]
    for k in KINDS:
        v = calib.verdict_accuracy(pairs[k])
        dump[k] = v
        lines.append(f"| {k} | {v['pairs']} | {v['called']} | {100 * v['wrong_rate']:.1f}% | {100 * v['power_gap_0_05']:.1f}% |")
    under = sum(c["normal_coverage"] < 0.90 for c in dump["cells"])
    lines += ["", f"Not adopted: the normal-theory interval is narrower but covers under 0.90 in {under} of "
              f"{len(dump['cells'])} (benchmark, rating) cells of the dev halves, and its verdicts are wrong more often than "
              "the 2.5% target for a small gain in power. No test half was read."]
    write_result("calibration_normal_theory", lines, {"command": cmd, "level": level, **dump})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
