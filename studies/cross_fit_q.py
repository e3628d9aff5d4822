"""Issue 71's cross-fitted Q (studies/docs/cross-fit-q-rule.md): summarises the
``dev_rows_<set>_cross_fit_s<seed>`` result files (rows ``default``, ``xfit3``, at seed 0 also
``xfit2x6``) into the rule's D per set and seed, its three-seed means and the rule's outcome, and
beside them what the rule reports whatever it decides: the size of the dr value's correction
``|dr - q|`` (read from the rows' saved diagnostics under ``--work``), the reward rating's
residual after a leave-one-out linear recalibration, and the calibrated verdicts on the dev
agents' pairs (``enigma.evaluation.calibration``, as the reports judge them; calibrated here on
the other dev agents only, 11 per pair, so wider than the reports').

    .venv/bin/python studies/cross_fit_q.py --work /work/dev_rows93 --tag cross_fit_q_dev
"""

from __future__ import annotations

import argparse
import shlex
import statistics as st
import sys
from pathlib import Path

from result_files import write_result
from seeded_rows import DELAYED, K0, SETS, d_bar, gather, row_lines, verdict_line

CANDIDATE, INFO = "xfit3", "xfit2x6"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="dev_rows' --work parent: <work>/s<seed>/<set>/<row>/enigma")
    ap.add_argument("--tag", default="cross_fit_q_dev")
    args = ap.parse_args()
    cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "studies/cross_fit_q.py", *sys.argv[1:]])

    from enigma.params import Params

    cells = gather(Params.load(), "cross_fit", args.work)

    means = {b: d_bar(cells, b, CANDIDATE) for b in SETS}
    decided = all(v is not None for v in means.values()) and all(f"{b}/s0" in cells for b in ("airline", "see2019"))
    outcome: dict = {"decided": decided}
    if decided:
        k0 = st.mean(means[b] for b in K0)
        late = st.mean(means[b] for b in DELAYED)
        time = {b: cells[f"{b}/s0"][CANDIDATE]["seconds_median"] / cells[f"{b}/s0"]["default"]["seconds_median"]
                for b in ("airline", "see2019")}
        outcome.update(k0_mean=k0, k0_lowest=min(means[b] for b in K0), delayed_mean=late, time_ratio=time)
        outcome["conditions"] = {"1 k0 mean >= +0.010 and none < -0.010": k0 >= 0.010 and min(means[b] for b in K0) >= -0.010,
                                 "2 delayed mean >= -0.010": late >= -0.010,
                                 "3 time <= 1.08 on airline and see2019": all(v <= 1.08 for v in time.values())}
        outcome["eligible"] = all(outcome["conditions"].values())

    sg = lambda v: "—" if v is None else f"{v:+.3f}"  # noqa: E731
    lines = ["# Issue 71: the fitted Q cross-fitted over the logging agents (dev halves)", "", f"`{cmd}`", "",
             "The rule, fixed before any row: [cross-fit-q-rule.md](../docs/cross-fit-q-rule.md). Rows from "
             "`studies/dev_rows.py` with `studies/patches/fqe_cross_fit.patch` applied in a worktree (`PYTHONPATH`); "
             "13 dev agents per set, no test-half agent estimated. D: paired difference of mean Pearson against "
             "`default` at the same `dice.seed`, with its agent-bootstrap interval. `|dr - q|`: the mean size of the "
             "dr value's correction over agents and ratings. Reward rms: the reward rating's residual after a "
             "leave-one-out linear recalibration on the other dev agents; power and wrong: the calibrated verdicts "
             "on the dev agents' pairs over every rating (each pair calibrated on the other 11 dev agents).", ""]
    lines += row_lines(cells, ["default", CANDIDATE, INFO], correction=True)
    lines += ["", "## The rule's quantities", "", "| set | D̄ (`xfit3` − `default`, mean of seeds 0–2) |", "|---|---|"]
    lines += [f"| {b} | {sg(means[b])} |" for b in SETS]
    lines.append("")
    if decided:
        lines += [f"- k = 0 halves: mean D̄ {outcome['k0_mean']:+.4f} (asked ≥ +0.010), lowest {outcome['k0_lowest']:+.4f} (asked ≥ −0.010).",
                  f"- Delayed stores: mean D̄ {outcome['delayed_mean']:+.4f} (asked ≥ −0.010).",
                  "- Time, `xfit3` / `default` median s per agent at seed 0: "
                  + ", ".join(f"{b} {v:.2f}" for b, v in outcome["time_ratio"].items()) + " (asked ≤ 1.08 each)."]
    lines.append(verdict_line(outcome, cells))
    write_result(args.tag, lines, {"cells": cells, "d_bar": means, "outcome": outcome})


if __name__ == "__main__":
    main()
