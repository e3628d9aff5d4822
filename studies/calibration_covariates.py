"""Issue 61, two more ways to narrow the calibrated interval without a better estimator, on the
dev halves (airline, airline-seed1, airline-seed2, See 2019):

1. **A difficulty score** (normalised conformal: residuals divided by a per-agent scale) only
   helps if the scale predicts the size of an agent's error. Candidates from ENIGMA's own run,
   which a new checkpoint has too: ``1/sqrt(ESS)`` of zeta, the bootstrap's standard error of the
   rating, ``|dr - weighted|`` (how far the fitted Q moved the paper's value) and ``|dr - q|``.
   For each (benchmark, rating): Spearman between the score and ``|r|``, each dev agent's
   residual calibrated on the benchmark's other agents (``calibration.fit_without``).
   (Scaling by the sampling spread alone: ``verdict_scaled_residuals.md``.)
2. **Stacking**: ``truth ~ a + b ENIGMA + c X`` with X another estimator of the same report, fitted
   on the other agents; the dev agents' root mean square residual against ENIGMA alone.

    .venv/bin/python studies/calibration_covariates.py
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from studies.result_files import write_result  # noqa: E402
from studies.verdict_scaled_residuals import BENCHMARKS  # noqa: E402

from enigma.evaluation import calibration as calib  # noqa: E402
from enigma.evaluation.results import read_results  # noqa: E402
from enigma.evaluation.split import split_agents  # noqa: E402
from enigma.evaluation.truth import read_truth, truth_wide  # noqa: E402
from enigma.params import Params  # noqa: E402

SCORES = {
    "1/sqrt(ESS)": lambda row, d, r: 1 / np.sqrt(d["ess"]),
    "bootstrap se": lambda row, d, r: d["bootstrap"]["se"][r],
    "abs(dr - weighted)": lambda row, d, r: abs(row.estimate - d["values"][r]["weighted"]),
    "abs(dr - q)": lambda row, d, r: abs(row.estimate - d["values"][r]["q"]),
}


def main() -> int:
    params = Params.load(REPO / "params.yaml")
    split = params.report.split
    cmd = shlex.join([".venv/bin/python", "studies/calibration_covariates.py", *sys.argv[1:]])
    corr, stack = [], []
    for b in BENCHMARKS:
        res = read_results(REPO / "data" / b / "results")
        res = res[res.error.isna()]
        tw = truth_wide(read_truth(REPO / "data" / b / "truth.parquet"))
        for r, g in res.groupby("rating"):
            en = g[g.estimator == "enigma"].set_index("agent_id")
            e = en.estimate.astype(float).to_dict()
            t = {a: float(tw.loc[a, r]) for a in e}
            dev = split_agents(sorted(e), split, b)["dev"]
            resid = {a: t[a] - calib.fit_without(e, t, [a]).calibrated(e[a]) for a in dev}
            diag = {a: json.loads(en.loc[a, "diagnostics"])["all"] for a in dev}
            row = {"benchmark": b, "rating": r}
            for name, f in SCORES.items():
                x = [f(en.loc[a], diag[a], r) for a in dev]
                row[name] = float(stats.spearmanr(x, [abs(resid[a]) for a in dev])[0])
            corr.append(row)
            wide = g.pivot_table(index="agent_id", columns="estimator", values="estimate")
            base = float(np.sqrt(np.mean([resid[a] ** 2 for a in dev])))
            for other in sorted(c for c in wide.columns if c not in ("enigma", "experience-mean")):
                x = wide[other].to_dict()
                names = [a for a in e if np.isfinite(x.get(a, np.nan))]
                if not set(dev) <= set(names):
                    continue
                err = []
                for a in dev:
                    cal_names = [c for c in names if c != a]
                    X = np.column_stack([np.ones(len(cal_names)), [e[c] for c in cal_names], [x[c] for c in cal_names]])
                    beta = np.linalg.lstsq(X, [t[c] for c in cal_names], rcond=None)[0]
                    err.append(t[a] - beta @ [1.0, e[a], x[a]])
                stack.append({"benchmark": b, "rating": r, "with": other, "rms_ratio": float(np.sqrt(np.mean(np.square(err)))) / base})

    lines = ["# Calibration without a better estimator: difficulty scores and stacking (dev halves)", "", f"`{cmd}`", "",
             "Issue 61. Dev agents only, each calibrated on its benchmark's other agents. No setting is chosen from this.", "",
             "## 1. Does a score from ENIGMA's own run predict the size of an agent's error?", "",
             "Spearman between the score and the absolute residual over the dev agents (13 per benchmark): a useful scale would be "
             "clearly positive in most cells.", "",
             "| score | cells | median Spearman | cells above +0.3 | cells below -0.3 |", "|---|---|---|---|---|"]
    for name in SCORES:
        v = np.array([c[name] for c in corr])
        lines.append(f"| {name} | {len(v)} | {np.median(v):+.2f} | {int(np.sum(v > 0.3))} | {int(np.sum(v < -0.3))} |")
    lines += ["", "Per benchmark, the median over its ratings:", "", "| benchmark | " + " | ".join(SCORES) + " |",
              "|---|" + "---|" * len(SCORES)]
    for b in BENCHMARKS:
        lines.append(f"| {b} | " + " | ".join(f"{np.median([c[n] for c in corr if c['benchmark'] == b]):+.2f}" for n in SCORES) + " |")
    lines += ["", "## 2. Stacking: ENIGMA and one other estimator of the same report", "",
              "Root mean square residual of the dev agents, `truth ~ a + b ENIGMA + c X` over ENIGMA's recalibration alone "
              "(below 1: the pair calibrates better).", "",
              "| X | cells | median ratio | cells below 0.9 | cells above 1.1 |", "|---|---|---|---|---|"]
    ratios = {o: np.array([s["rms_ratio"] for s in stack if s["with"] == o]) for o in sorted({s["with"] for s in stack})}
    for other, v in ratios.items():
        lines.append(f"| {other} | {len(v)} | {np.median(v):.2f} | {int(np.sum(v < 0.9))} | {int(np.sum(v > 1.1))} |")
    best = min(ratios, key=lambda o: np.median(ratios[o]))
    lines += ["", "Not adopted: no score orders the agents' errors on every benchmark (a scale that does not predict the error "
              "only adds noise to the quantile), and the best stacking partner, "
              f"{best}, takes a median {1 - np.median(ratios[best]):.0%} off the "
              "residuals at the price of a second estimator per checkpoint; `verdict_error_scale.md` puts what the width "
              "and power targets need at 40 to 50% off every residual."]
    write_result("calibration_covariates", lines, {"command": cmd, "scores": corr, "stacking": stack})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
