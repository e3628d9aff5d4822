"""Issue 71: where half a Monte Carlo baseline would land, read off the fqe.baseline study's rows
(``docs/returns-baseline-rule.md``) without running anything: each dev agent's estimate averaged
over the ``online`` and ``returns`` rows of the same seed, scored as ``dev_rows.py`` scores a row
(mean Pearson over the ratings against the truth). The average of the two estimates stands in
for an ensemble with the baseline in half its members; the doubly robust value is linear in the
Q only up to its normalisation, so this is a proxy, not a row.

    .venv/bin/python studies/baseline_mixture_proxy.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
OUT = RESULTS / "baseline_mixture_proxy.md"
ROWS = [("airline-delay8", 0), ("airline-delay3", 0), ("airline", 0), ("airline", 1), ("airline", 2), ("airline-seed1", 0)]


def mean_pearson(estimates: pd.Series, truth: pd.Series) -> float:
    both = pd.DataFrame({"e": estimates, "t": truth.reindex(estimates.index)})
    return float(np.mean([g.e.corr(g.t) for _, g in both.groupby(level="rating")]))


def estimates(row: dict) -> pd.Series:
    return pd.Series({(agent, rating): v for agent, per in row["estimates"].items() for rating, v in per.items()}).rename_axis(["agent", "rating"])


def main() -> int:
    lines = ["# Half a Monte Carlo baseline, read off the fqe.baseline rows (a proxy)", "",
             "`.venv/bin/python studies/baseline_mixture_proxy.py`", "",
             "Airline's 13 dev sellers; each agent's estimate averaged over the `online` and `returns` rows of the "
             "same seed (`dev_rows_<set>_fqe_baseline_s<seed>.json`). D: minus `online`, mean Pearson.", "",
             "| set | seed | `online` | `returns` | the average | D `returns` | D the average |", "|---|---|---|---|---|---|---|"]
    for benchmark, seed in ROWS:
        rows = json.loads((RESULTS / f"dev_rows_{benchmark.replace('-', '_')}_fqe_baseline_s{seed}.json").read_text())["rows"]
        truth = pd.read_parquet(REPO / "data" / benchmark / "truth.parquet").set_index(["agent_id", "rating"])["value"]
        truth.index = truth.index.set_names(["agent", "rating"])
        online, based = estimates(rows["online"]), estimates(rows["returns"])
        p = [mean_pearson(e, truth) for e in (online, based, (online + based) / 2)]
        lines.append(f"| {benchmark} | {seed} | {p[0]:.3f} | {p[1]:.3f} | {p[2]:.3f} | {p[1] - p[0]:+.3f} | {p[2] - p[0]:+.3f} |")
        print(lines[-1])
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
