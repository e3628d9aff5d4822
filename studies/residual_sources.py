"""Issue 71: where the agent-level residual comes from (studies/docs/residual-sources-rule.md).

(1) The fit's draw: from the ``default`` rows of the cross-fit study at ``dice.seed`` 0, 1 and 2
(``dev_rows_<set>_cross_fit_s<seed>``), per dev set the reward residual after leave-one-out
recalibration at each seed, the residual of the three seeds' mean estimate, and the between-seed
sd of an agent's estimate. (2) The information the text lacks: the ``default`` and ``knowledge``
rows (the airline simulator's own knowledge block, never the product's) of
``dev_rows_<set>_knowledge_bound``, their mean Pearson, reward residual and the largest residuals.

    .venv/bin/python studies/residual_sources.py
"""

from __future__ import annotations

import argparse
import shlex
import statistics as st
import sys

from result_files import write_result
from seeded_rows import SEEDS, SETS, load, recalibrated, seed_sd

KNOWLEDGE_SETS = ["airline", "airline-seed1", "airline-delay8"]


def reward(estimates: dict[str, dict[str, float]]) -> dict[str, float]:
    return {a: e["reward"] for a, e in estimates.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default="residual_sources_dev")
    args = ap.parse_args()
    cmd = shlex.join([".venv/bin/python", "studies/residual_sources.py", *sys.argv[1:]])

    from dev_rows import dev_truth
    from enigma.params import Params

    params = Params.load()
    draw, info = {}, {}
    for b in SETS:
        runs = [load(b, "cross_fit", s) for s in SEEDS]
        if any(r is None for r in runs):
            continue
        dev = runs[0]["dev_agents"]
        truth = dev_truth(params, b, dev)["reward"].to_dict()
        per_seed = [reward(r["rows"]["default"]["estimates"]) for r in runs]
        mean = {a: st.mean(e[a] for e in per_seed) for a in dev}
        draw[b] = {"rms_per_seed": [recalibrated(e, truth)["rms"] for e in per_seed],
                   "rms_of_seed_mean": recalibrated(mean, truth)["rms"],
                   "seed_sd": seed_sd([r["rows"]["default"]["estimates"] for r in runs]),
                   "truth_sd": st.pstdev(truth.values()), "estimate_sd": st.mean(st.pstdev(e.values()) for e in per_seed)}
    for b in KNOWLEDGE_SETS:
        run = load(b, "knowledge_bound")
        if run is None:
            continue
        truth = dev_truth(params, b, run["dev_agents"])["reward"].to_dict()
        info[b] = {"code": run["code"], "D": run["paired"]["knowledge - default"]["pearson"]}
        for name, row in run["rows"].items():
            r = recalibrated(reward(row["estimates"]), truth)
            worst = sorted(r["residual"].items(), key=lambda kv: -abs(kv[1]))[:4]
            info[b][name] = {"mean_pearson": row["mean_pearson"], "reward_pearson": row["pearson_per_rating"]["reward"],
                             "spread": row["mean_spread_ratio"], "reward_rms": r["rms"], "largest": dict(worst),
                             "seconds_median": row["seconds_per_agent_median"]}

    f3 = lambda v: f"{v:.3f}"  # noqa: E731
    lines = ["# Issue 71: where the agent-level residual comes from (dev halves)", "", f"`{cmd}`", "",
             "The question, fixed before the knowledge rows ran: [residual-sources-rule.md](../docs/residual-sources-rule.md). "
             "Residual: the reward rating's truth minus its leave-one-out linear recalibration on the other dev agents "
             "(the calibrated interval's fit), root mean square over the 13 dev agents. Nothing is adopted from it.", "",
             "## (1) The fit's draw: today's default at `dice.seed` 0, 1 and 2", "",
             "From the `default` rows of [cross_fit_q_dev.md](cross_fit_q_dev.md) (`dev_rows_<set>_cross_fit_s<seed>`).", "",
             "| dev set | residual at seeds 0 / 1 / 2 | residual of the three seeds' mean | between-seed sd of an agent's estimate | sd of the estimates | sd of the truth |",
             "|---|---|---|---|---|---|"]
    for b, d in draw.items():
        lines.append(f"| {b} | {' / '.join(map(f3, d['rms_per_seed']))} | {f3(d['rms_of_seed_mean'])} | {f3(d['seed_sd'])} | "
                     f"{f3(d['estimate_sd'])} | {f3(d['truth_sd'])} |")
    lines += ["", "## (2) The information the text lacks: the simulator's knowledge block (not generic)", "",
              "`default` against `knowledge` (`dice.knowledge: python:enigma.sim.knowledge:airline_checked_every_turn`, the "
              "airline's reservation book, timetable and outcome rules), `dice.seed` 0, `dev_rows_<set>_knowledge_bound`.", "",
              "| dev set | row | mean Pearson | D [95%] | reward Pearson | reward residual | largest reward residuals | spread ratio | s/agent (median) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for b, d in info.items():
        for name in ("default", "knowledge"):
            r = d[name]
            dcell = "" if name == "default" else f"{d['D']['difference']:+.3f} [{d['D']['ci95'][0]:+.3f}, {d['D']['ci95'][1]:+.3f}]"
            largest = ", ".join(f"{a} {v:+.3f}" for a, v in r["largest"].items())
            lines.append(f"| {b} | `{name}` | {f3(r['mean_pearson'])} | {dcell} | {f3(r['reward_pearson'])} | {f3(r['reward_rms'])} | "
                         f"{largest} | {r['spread']:.2f} | {r['seconds_median']:.1f} |")
    write_result(args.tag, lines, {"draw": draw, "knowledge": info})


if __name__ == "__main__":
    main()
