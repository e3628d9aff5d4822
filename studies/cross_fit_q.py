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
import json
import math
import shlex
import statistics as st
import sys
from pathlib import Path

from result_files import RESULTS, write_result

K0 = ["airline", "airline-seed1", "see2019"]
DELAYED = ["airline-delay3", "airline-delay8"]
SETS = K0 + DELAYED
SEEDS = [0, 1, 2]
CANDIDATE, INFO = "xfit3", "xfit2x6"


def load(benchmark: str, seed: int) -> dict | None:
    path = RESULTS / f"dev_rows_{benchmark.replace('-', '_')}_cross_fit_s{seed}.json"
    return json.loads(path.read_text()) if path.exists() else None


def correction_size(folder: Path, dev: list[str]) -> float:
    """The mean over the dev agents and ratings of |dr - q| in the ENIGMA result files of one row
    (``folder``: the row's results, ``enigma/<agent>.json``)."""
    from value_kinds_dev import dev_values

    from enigma.evaluation.results import read_results

    values = dev_values(read_results(folder), dev)
    return float((values["dr"] - values["q"]).abs().to_numpy().mean())


def calibrated(estimates: dict[str, dict[str, float]], truth: "pd.DataFrame") -> dict:  # noqa: F821
    """The reward rating's leave-one-out recalibration residual (rms) and, over every rating, the
    calibrated verdicts on the agents' pairs."""
    from enigma.evaluation.calibration import calibrated_intervals, pair_verdicts, verdict_accuracy

    agents = [a for a in truth.index if a in estimates]
    out: dict = {"pairs": []}
    for rating in truth.columns:
        e = {a: estimates[a][rating] for a in agents if math.isfinite(estimates[a].get(rating, math.nan))}
        t = {a: float(truth.loc[a, rating]) for a in agents}
        if rating == "reward":
            cal = calibrated_intervals(e, t, 0.95)
            out["reward_rms"] = math.sqrt(st.mean((t[a] - v["calibrated"]) ** 2 for a, v in cal.items()))
            out["reward_width"] = st.mean(v["high"] - v["low"] for v in cal.values() if v["low"] is not None)
        out["pairs"] += pair_verdicts(e, t, 0.95)
    acc = verdict_accuracy(out.pop("pairs"))
    out.update(power=acc["power_gap_0_05"], wrong=acc["wrong"], called=acc["called"], big=acc["pairs_gap_0_05"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="dev_rows' --work parent: <work>/s<seed>/<set>/<row>/enigma")
    ap.add_argument("--tag", default="cross_fit_q_dev")
    args = ap.parse_args()
    cmd = " ".join(shlex.quote(a) for a in [".venv/bin/python", "studies/cross_fit_q.py", *sys.argv[1:]])

    from dev_rows import dev_truth
    from enigma.params import Params

    params = Params.load()
    cells: dict = {}
    for b in SETS:
        for s in SEEDS:
            run = load(b, s)
            if run is None:
                continue
            truth = dev_truth(params, b, run["dev_agents"])
            cell = {"code": run["code"]}
            for name, row in run["rows"].items():
                cell[name] = {"mean_pearson": row["mean_pearson"], "spread": row["mean_spread_ratio"],
                              "seconds_median": row["seconds_per_agent_median"], "failed": row["failed_agents"],
                              "correction": correction_size(args.work / f"s{s}" / b / name, run["dev_agents"]),
                              **calibrated(row["estimates"], truth)}
            for name in run["paired"]:
                cell[name.split(" - ")[0]]["D"] = run["paired"][name]["pearson"]
            cells[f"{b}/s{s}"] = cell

    def dbar(b: str) -> float | None:
        ds = [cells[f"{b}/s{s}"][CANDIDATE]["D"]["difference"] for s in SEEDS if f"{b}/s{s}" in cells]
        return st.mean(ds) if len(ds) == len(SEEDS) else None

    means = {b: dbar(b) for b in SETS}
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

    f3 = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    sg = lambda v: "—" if v is None else f"{v:+.3f}"  # noqa: E731
    pct = lambda v: "—" if v is None else f"{v:.1%}"  # noqa: E731
    lines = ["# Issue 71: the fitted Q cross-fitted over the logging agents (dev halves)", "", f"`{cmd}`", "",
             "The rule, fixed before any row: [cross-fit-q-rule.md](../docs/cross-fit-q-rule.md). Rows from "
             "`studies/dev_rows.py` with `studies/patches/fqe_cross_fit.patch` applied in a worktree (`PYTHONPATH`); "
             "13 dev agents per set, no test-half agent estimated. D: paired difference of mean Pearson against "
             "`default` at the same `dice.seed`, with its agent-bootstrap interval. `|dr - q|`: the mean size of the "
             "dr value's correction over agents and ratings. Reward rms: the reward rating's residual after a "
             "leave-one-out linear recalibration on the other dev agents; power and wrong: the calibrated verdicts "
             "on the dev agents' pairs over every rating (each pair calibrated on the other 11 dev agents).", "",
             "| set | seed | row | mean Pearson | D [95%] | spread ratio | \\|dr − q\\| | reward rms | reward width | power (gap > 0.05) | wrong / called | s/agent (median) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, cell in cells.items():
        b, s = key.split("/")
        for name in ("default", CANDIDATE, INFO):
            if name not in cell:
                continue
            r = cell[name]
            d = r.get("D")
            dcell = "" if d is None else f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
            lines.append(f"| {b} | {s[1:]} | `{name}` | {r['mean_pearson']:.3f} | {dcell} | {r['spread']:.2f} | "
                         f"{f3(r['correction'])} | {f3(r.get('reward_rms'))} | {f3(r.get('reward_width'))} | "
                         f"{pct(r['power'])} | "
                         f"{r['wrong']} / {r['called']} | {r['seconds_median']:.1f} |")
    lines += ["", "## The rule's quantities", "", "| set | D̄ (`xfit3` − `default`, mean of seeds 0–2) |", "|---|---|"]
    lines += [f"| {b} | {sg(means[b])} |" for b in SETS]
    lines.append("")
    if decided:
        lines += [f"- k = 0 halves: mean D̄ {outcome['k0_mean']:+.4f} (asked ≥ +0.010), lowest {outcome['k0_lowest']:+.4f} (asked ≥ −0.010).",
                  f"- Delayed stores: mean D̄ {outcome['delayed_mean']:+.4f} (asked ≥ −0.010).",
                  "- Time, `xfit3` / `default` median s per agent at seed 0: "
                  + ", ".join(f"{b} {v:.2f}" for b, v in outcome["time_ratio"].items()) + " (asked ≤ 1.08 each).",
                  f"- **{'Eligible' if outcome['eligible'] else 'Not eligible'}**: "
                  + "; ".join(f"{k}: {'met' if v else 'not met'}" for k, v in outcome["conditions"].items()) + "."]
    else:
        lines.append("- Not decided: " + ", ".join(k for k in [f"{b}/s{s}" for b in SETS for s in SEEDS] if k not in cells) + " not run.")
    write_result(args.tag, lines, {"cells": cells, "d_bar": means, "outcome": outcome})


if __name__ == "__main__":
    main()
