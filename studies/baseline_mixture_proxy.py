"""Issue 71: where half a Monte Carlo baseline would land, read off the fqe.baseline study's rows
(``docs/returns-baseline-rule.md``) without running anything: each dev agent's estimate averaged
over the ``online`` and ``returns`` rows of the same seed, scored as ``dev_rows.py`` scores a row
(``score_estimator``'s mean Pearson against the dev truth). The average of the two estimates
stands in for an ensemble with the baseline in half its members; the doubly robust value is
linear in the Q only up to its normalisation, so this is a proxy, not a row.

    .venv/bin/python studies/baseline_mixture_proxy.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dev_rows import dev_truth
from enigma.evaluation.correlation import score_estimator
from enigma.params import Params
from result_files import write_result
from seeded_rows import load

ROWS = [("airline-delay8", 0), ("airline-delay3", 0), ("airline", 0), ("airline", 1), ("airline", 2), ("airline-seed1", 0)]


def main() -> int:
    params = Params.load(Path(__file__).resolve().parents[1] / "params.yaml")
    lines = ["# Half a Monte Carlo baseline, read off the fqe.baseline rows (a proxy)", "",
             "`.venv/bin/python studies/baseline_mixture_proxy.py`", "",
             "Airline's 13 dev sellers; each agent's estimate averaged over the `online` and `returns` rows of the "
             "same seed (`dev_rows_<set>_fqe_baseline_s<seed>.json`). D: minus `online`, mean Pearson.", "",
             "| set | seed | `online` | `returns` | the average | D `returns` | D the average |", "|---|---|---|---|---|---|---|"]
    payload = {}
    for benchmark, seed in ROWS:
        rows = load(benchmark, "fqe_baseline", seed)["rows"]
        online, based = (pd.DataFrame(rows[r]["estimates"]).T for r in ("online", "returns"))
        truth = dev_truth(params, benchmark, list(online.index))
        p = [score_estimator(name, e, truth, list(truth.columns)).means["pearson"]
             for name, e in (("online", online), ("returns", based), ("average", (online + based) / 2))]
        payload[f"{benchmark}_s{seed}"] = dict(zip(("online", "returns", "average"), p))
        lines.append(f"| {benchmark} | {seed} | {p[0]:.3f} | {p[1]:.3f} | {p[2]:.3f} | {p[1] - p[0]:+.3f} | {p[2] - p[0]:+.3f} |")
    write_result("baseline_mixture_proxy", lines, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
