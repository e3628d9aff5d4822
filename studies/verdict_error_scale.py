"""Issue 61, what it would take: how small must ENIGMA's error between agents become for the
calibrated interval and the verdict to meet the issue's widths and power?

The calibration code is left as built (``enigma.evaluation.calibration``, conformal over the
benchmark's other agents, the report's 95%); only the estimates move. On each benchmark and rating,
``truth ~ a + b estimate`` is fitted on every agent and each estimate is moved so that its residual
becomes ``s`` times what it is: ``e' = e + (1 - s) r / b``. ``s = 1`` is today's estimator; ``s =
0.5`` an estimator whose errors, agent for agent, are half today's (same pattern, same agents
worst). Read on the dev halves only (airline, airline-seed1, airline-seed2, See 2019): coverage
and mean width of every dev agent's calibrated interval (calibrated on the other agents), and
every dev pair judged with the agents other than the two (``calibration.pair_verdicts``).

No setting is chosen from it: it says how far the targets are from the estimator's accuracy.

    .venv/bin/python studies/verdict_error_scale.py
"""

from __future__ import annotations

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

SCALES = (1.0, 0.8, 0.6, 0.5, 0.4, 0.3)
WIDTH_TARGETS = {("airline", "reward"): 0.15, ("see2019", "reward"): 0.10}


def shrink(e: dict[str, float], t: dict[str, float], s: float) -> dict[str, float]:
    names = [a for a in e if a in t]
    cal = calib.fit([e[a] for a in names], [t[a] for a in names], names)
    return {a: e[a] + (1 - s) * (t[a] - cal.calibrated(e[a])) / cal.b for a in names}


def main() -> int:
    params = Params.load(REPO / "params.yaml")
    level, split = params.report.confidence, params.report.split
    cmd = shlex.join([".venv/bin/python", "studies/verdict_error_scale.py", *sys.argv[1:]])
    data = {b: load(b) for b in BENCHMARKS}
    cells, pooled = [], {}
    for s in SCALES:
        rows = []
        for b, ratings in data.items():
            for r, (e, _, t) in ratings.items():
                dev = split_agents(sorted(set(e) & set(t)), split, b)["dev"]
                es = shrink(e, t, s)
                iv = calib.interval_accuracy(calib.calibrated_intervals(es, t, level, agents=dev), t)
                pairs = calib.pair_verdicts(es, t, level, agents=dev)
                rows += pairs
                cells.append({"scale": s, "benchmark": b, "rating": r, "coverage": iv["coverage"],
                              "mean_width": iv["mean_width"], "verdicts": calib.verdict_accuracy(pairs)})
        pooled[s] = calib.verdict_accuracy(rows)

    def cell(s, b, r):
        return next(c for c in cells if c["scale"] == s and c["benchmark"] == b and c["rating"] == r)

    airline_width = {s: np.mean([cell(s, b, "reward")["mean_width"] for b in BENCHMARKS if b.startswith("airline")]) for s in SCALES}

    lines = ["# What the targets of issue 61 ask of the estimator: ENIGMA's errors scaled (dev halves)", "", f"`{cmd}`", "",
             "Each estimate is moved so that its residual from `truth ~ a + b estimate` (fitted on the benchmark's agents) is "
             "`s` times today's; the calibration, the verdict rule and the level (95%) are as built. Dev agents and dev pairs "
             "only, each calibrated on the benchmark's other agents. No setting is chosen from this.", "",
             "| error scale s | airline reward width (target <= 0.15) | See 2019 reward width (<= 0.10) | lowest coverage over "
             "(benchmark, rating) | called / pairs | wrong | power at gap > 0.05 (target 60%) |",
             "|---|---|---|---|---|---|---|"]
    for s in SCALES:
        p = pooled[s]
        low = min(c["coverage"] for c in cells if c["scale"] == s)
        lines.append(f"| {s:.1f} | {airline_width[s]:.3f} | {cell(s, 'see2019', 'reward')['mean_width']:.3f} | {low:.2f} | "
                     f"{p['called']} / {p['pairs']} | {p['wrong']} ({100 * (p['wrong_rate'] or 0):.1f}%) | "
                     f"{100 * p['power_gap_0_05']:.1f}% ({p['pairs_gap_0_05']}) |")
    lines += ["", "Airline's width is the mean over its three seeds' dev halves. Per benchmark, power at gap > 0.05:", "",
              "| error scale s | " + " | ".join(BENCHMARKS) + " |", "|---|" + "---|" * len(BENCHMARKS)]
    for s in SCALES:
        per = []
        for b in BENCHMARKS:
            pr = [c["verdicts"] for c in cells if c["scale"] == s and c["benchmark"] == b]
            big = sum(v["pairs_gap_0_05"] for v in pr)
            right = sum(round((v["power_gap_0_05"] or 0) * v["pairs_gap_0_05"]) for v in pr)
            per.append(f"{100 * right / big:.1f}%" if big else "n/a")
        lines.append(f"| {s:.1f} | " + " | ".join(per) + " |")
    def first(ok):  # the largest scale in the table that meets a target
        return next((f"{s:.1f}" for s in SCALES if ok(s)), "none in the table")
    lines += ["", f"Largest error scale that meets each target: airline reward width <= 0.15 at s = "
              f"{first(lambda s: airline_width[s] <= 0.15)}; See 2019 reward width <= 0.10 at s = "
              f"{first(lambda s: cell(s, 'see2019', 'reward')['mean_width'] <= 0.10)}; pooled power >= 60% at s = "
              f"{first(lambda s: pooled[s]['power_gap_0_05'] >= 0.60)}, with wrong verdicts <= 2.5% at every scale "
              f"({max(pooled[s]['wrong_rate'] for s in SCALES):.1%} at most). Coverage does not move with s: scaling every "
              "residual alike keeps their ranks, and the conformal quantile follows them."]
    write_result("verdict_error_scale", lines, {"command": cmd, "level": level, "scales": list(SCALES),
                                                 "pooled": {str(k): v for k, v in pooled.items()}, "cells": cells})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
