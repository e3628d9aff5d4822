"""Issue 71's two fitted Qs trained 45 epochs instead of three trained 30
(studies/docs/fewer-longer-fits-rule.md): summarises the ``dev_rows_<set>_fewer_longer_fits_s<seed>``
result files (rows ``default`` and ``e2x45``; ``e3x45``, the mechanism, at seed 0 on two sets) into the rule's D per set and seed, its three-seed
means and the rule's outcome, and beside them what the rule reports whatever it decides: the
reward residual after leave-one-out recalibration, the dev verdicts, and how far an agent's
reward estimate moves between seeds with two members against three.

    .venv/bin/python studies/fewer_longer_fits.py
"""

from __future__ import annotations

import argparse
import shlex
import sys

from result_files import write_result
from seeded_rows import collect, load, pooled_verdict_lines, quantity_lines, row_lines, rule_mean_lines, rule_means, verdict_line

STUDY, CANDIDATE, MECHANISM = "fewer_longer_fits", "e2x45", "e3x45"
TIMED = ("airline", "airline-delay8")  # the rule's time point: against this session's fresh seed-0 default runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default="fewer_longer_fits_dev")
    args = ap.parse_args()
    cmd = shlex.join([".venv/bin/python", "studies/fewer_longer_fits.py", *sys.argv[1:]])

    cells, means, spread_sd = collect(STUDY, "default", CANDIDATE)
    fresh = {b: load(b, "knowledge_bound") for b in TIMED}
    timed = all(f"{b}/s0" in cells and fresh[b] for b in TIMED)
    decided = all(v is not None for v in means.values()) and timed
    outcome: dict = {"decided": decided}
    if timed:
        outcome["time_ratio"] = {b: cells[f"{b}/s0"][CANDIDATE]["seconds_median"]
                                 / fresh[b]["rows"]["default"]["seconds_per_agent_median"] for b in TIMED}
    if decided:
        outcome.update(rule_means(means))
        outcome["conditions"] = {"1 delayed mean >= +0.020": outcome["delayed_mean"] >= 0.020,
                                 "2 k0 mean >= -0.005 and none < -0.015": outcome["k0_mean"] >= -0.005 and outcome["k0_lowest"] >= -0.015,
                                 "3 time <= 1.08 on airline and airline-delay8": all(v <= 1.08 for v in outcome["time_ratio"].values())}
        outcome["eligible"] = all(outcome["conditions"].values())

    lines = ["# Issue 71: two fitted Qs trained 45 epochs instead of three trained 30 (dev halves)", "", f"`{cmd}`", "",
             "The rule, fixed before any row: [fewer-longer-fits-rule.md](../docs/fewer-longer-fits-rule.md). Rows from "
             "`studies/dev_rows.py` on main's code; 13 dev agents per set, no test-half agent estimated. D: paired "
             "difference of mean Pearson against `default` at the same `dice.seed`, with its agent-bootstrap interval. "
             "Reward rms: the reward rating's residual after a leave-one-out linear recalibration on the other dev agents; "
             "power and wrong: the calibrated verdicts on the dev agents' pairs over every rating (each pair calibrated on "
             "the other 11 dev agents).", ""]
    lines += row_lines(cells, ["default", CANDIDATE, MECHANISM])
    lines += ["", "## The rule's quantities", ""]
    lines += quantity_lines(cells, means, spread_sd, "default", CANDIDATE)
    lines.append("")
    lines += pooled_verdict_lines(cells, "default", CANDIDATE)
    mech = {k: c[MECHANISM]["D"]["difference"] for k, c in cells.items() if MECHANISM in c}
    if mech:
        lines.append(f"- `{MECHANISM}` (information, seed 0): D " + ", ".join(f"{k.split('/')[0]} {v:+.3f}" for k, v in mech.items())
                     + f", against `{CANDIDATE}`'s at seed 0 " + ", ".join(f"{k.split('/')[0]} {cells[k][CANDIDATE]['D']['difference']:+.3f}" for k in mech) + ".")
    if "time_ratio" in outcome:
        lines.append(f"- Time, `{CANDIDATE}` at seed 0 / the fresh seed-0 `default` (`dev_rows_<set>_knowledge_bound`), median s "
                     "per agent: " + ", ".join(f"{b} {v:.2f}" for b, v in outcome["time_ratio"].items()) + " (asked ≤ 1.08 each).")
    if decided:
        lines += rule_mean_lines(outcome)
    lines.append(verdict_line(outcome, cells))
    write_result(args.tag, lines, {"cells": cells, "d_bar": means, "seed_sd": spread_sd, "outcome": outcome})


if __name__ == "__main__":
    main()
