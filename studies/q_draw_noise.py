"""How far the dev rows' D moves when only ``dice.seed`` changes (studies/docs/q-draw-noise-rule.md):
summarises the ``dev_rows_<set>_q_draw_noise`` result files (rows ``default``, ``seed1``, ``seed2``,
each today's ENIGMA without its interval) into D(seed s - seed 0) per set and over the sets, the
sd over the three seeds of each set's mean Pearson, and of each agent's estimate against the
spread of the agents' truth.

    .venv/bin/python studies/q_draw_noise.py --tag q_draw_noise_dev
"""

from __future__ import annotations

import argparse
import json
import math
import statistics as st

from result_files import RESULTS, write_result

SETS = ["airline", "see2019", "airline-seed1", "airline-delay3", "airline-delay8"]
DELAYED = ["airline-delay3", "airline-delay8"]
SEEDS = ["seed1", "seed2"]


def load(benchmark: str) -> dict | None:
    path = RESULTS / f"dev_rows_{benchmark.replace('-', '_')}_q_draw_noise.json"
    return json.loads(path.read_text()) if path.exists() else None


def agent_sd(rows: dict) -> float:
    """The mean over agents and ratings of the sd over the three seeds of an agent's estimate."""
    runs = [rows[r]["estimates"] for r in ("default", *SEEDS)]
    sds = [st.stdev([run[a][k] for run in runs]) for a in runs[0] for k in runs[0][a]]
    return st.mean(sds)


def truth_sd(benchmark: str, agents: list[str]) -> float:
    """The mean over ratings of the sd of the dev agents' truth (what an estimate must order)."""
    from dev_rows import dev_truth
    from enigma.params import Params

    truth = dev_truth(Params.load("params.yaml"), benchmark, agents)
    return float(truth.std(ddof=1).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="q_draw_noise_dev")
    args = ap.parse_args()
    lines = ["# The dev rows' D when only `dice.seed` changes (today's default, no interval)", "",
             f"`.venv/bin/python studies/q_draw_noise.py --tag {args.tag}`, from the files "
             "`dev_rows_<set>_q_draw_noise.md` (each made by the command in its first line); rule: "
             "[q-draw-noise-rule.md](../docs/q-draw-noise-rule.md). D is the paired difference of mean "
             "Pearson over the ratings against seed 0, bootstrap over the 13 dev agents (95%).", "",
             "| dev set | seed 0 | seed 1: D [95%] | seed 2: D [95%] | sd of mean Pearson over 3 seeds | agent estimate sd over seeds | truth sd over agents |",
             "|---|---|---|---|---|---|---|"]
    payload: dict = {"sets": {}}
    d: dict[tuple[str, str], float] = {}
    for b in SETS:
        j = load(b)
        if j is None:
            lines.append(f"| {b} | not run | | | | | |")
            continue
        rows = j["rows"]
        cells = []
        for s in SEEDS:
            p = j["paired"][f"{s} - default"]["pearson"]
            d[(b, s)] = p["difference"]
            cells.append(f"{p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]")
        means = [rows[r]["mean_pearson"] for r in ("default", *SEEDS)]
        a_sd, t_sd = agent_sd(rows), truth_sd(b, j["dev_agents"])
        payload["sets"][b] = {"mean_pearson": means, "d": {s: d[(b, s)] for s in SEEDS}, "sd_mean_pearson": st.stdev(means),
                              "agent_estimate_sd": a_sd, "truth_sd": t_sd}
        lines.append(f"| {b} | {means[0]:.3f} | {cells[0]} | {cells[1]} | {st.stdev(means):.3f} | {a_sd:.4f} | {t_sd:.3f} |")
    if d:
        vals = list(d.values())
        summary = {"pairs": len(vals), "mean_abs_d": st.mean(abs(v) for v in vals), "max_abs_d": max(abs(v) for v in vals),
                   "rms_d": math.sqrt(st.mean(v * v for v in vals))}
        for s in SEEDS:
            k0 = [d[(b, s)] for b in SETS if b not in DELAYED and (b, s) in d]
            dl = [d[(b, s)] for b in DELAYED if (b, s) in d]
            summary[f"{s}_k0_mean_d"] = st.mean(k0) if len(k0) == 3 else None
            summary[f"{s}_delayed_mean_d"] = st.mean(dl) if len(dl) == 2 else None
        payload["summary"] = summary
        fmt = lambda v: "not run" if v is None else f"{v:+.4f}"  # noqa: E731
        lines += ["", f"Over the {summary['pairs']} (set, seed) pairs: mean |D| {summary['mean_abs_d']:.4f}, largest "
                  f"{summary['max_abs_d']:.4f}, root mean square {summary['rms_d']:.4f}.", "",
                  "What the rules threshold, at no change of setting:", "",
                  "| seed | mean D over airline, airline-seed1, See 2019 (rules: at least -0.01) | mean D over the delayed stores (rules: at least +0.03) |",
                  "|---|---|---|"]
        lines += [f"| {s} | {fmt(summary[f'{s}_k0_mean_d'])} | {fmt(summary[f'{s}_delayed_mean_d'])} |" for s in SEEDS]
    write_result(args.tag, lines, payload)


if __name__ == "__main__":
    main()
