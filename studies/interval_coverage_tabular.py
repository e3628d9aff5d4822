"""Coverage of ENIGMA's sampling interval where the truth is exact: the reference tabular problem.

Each replication draws fresh logs (``reference_problem().logs(n, seed=rep)``) and fresh target
replies at their states, estimates every reference target with onehot features and the ``enigma``
settings of params.yaml (its ``interval_resamples``, ``interval_tol`` and ``interval_steps``), and records whether
the interval holds the target's exact value (enumeration). The share of intervals that do is the
coverage; at nominal 95% it should be near 0.95 (its binomial standard error at 360 intervals is
about 0.012).

    .venv/bin/python studies/interval_coverage_tabular.py --reps 45 --dialogues 2000
    .venv/bin/python studies/interval_coverage_tabular.py --reps 45 --dialogues 2000 \
        --dice '{"q_model": "fqe", "fqe": {"agreement": false}}' --tag interval_coverage_tabular_fqe

Output: studies/results/<tag>.{md,json}. Two runs on the same logs compared paired (which
intervals only one of them covers, McNemar's exact test; widths and errors side by side):

    .venv/bin/python studies/interval_coverage_tabular.py --compare interval_coverage_tabular interval_coverage_tabular_fqe

Output: studies/results/<first>_vs_<second>.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from enigma.contracts import HeldOutAgent
from enigma.estimators import dice_config
from enigma.ope import EnigmaEstimator
from enigma.ope.tabular import RATINGS, reference_problem, target_actions
from enigma.params import Params

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--start", type=int, default=0, help="the first replication (logs seed 1000 + it): later runs add fresh ones")
    ap.add_argument("--dialogues", type=int, default=2000)
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    ap.add_argument("--dice", default=None, metavar="JSON", help="overrides of the enigma estimator's dice settings, e.g. "
                    "'{\"q_model\": \"fqe\", \"fqe\": {\"agreement\": false}}'")
    ap.add_argument("--tag", default="interval_coverage_tabular")
    ap.add_argument("--compare", nargs=2, metavar="TAG", help="compare two finished runs paired instead of running")
    args = ap.parse_args()
    if args.compare:
        compare(*args.compare)
        return

    cfg = dice_config("enigma", Params.load(args.params)).with_flat(device="cpu")
    torch.set_num_threads(cfg.torch_threads or 1)  # as `enigma estimate` does
    cfg = cfg.with_flat(**json.loads(args.dice or "{}"), encoder="onehot")
    problem = reference_problem()
    exact = {t: problem.mdp.exact_value(p) for t, p in problem.targets.items()}
    rows, t0 = [], time.perf_counter()
    for rep in range(args.start, args.start + args.reps):
        store = problem.logs(args.dialogues, seed=1000 + rep)
        est = EnigmaEstimator(cfg.with_flat(seed=rep), progress=False)
        for t, policy in problem.targets.items():
            got = est.estimate_full(store, HeldOutAgent(t, target_actions=target_actions(store, policy, 1, seed=rep)))
            for r in RATINGS:
                lo, hi = got.intervals[r]
                rows.append({"rep": rep, "target": t, "rating": r, "estimate": got.estimates[r]["estimate"], "low": lo, "high": hi,
                             "exact": exact[t][r], "covered": bool(lo <= exact[t][r] <= hi), "width": hi - lo})
        print(f"rep {rep + 1 - args.start}/{args.reps}: coverage so far {np.mean([x['covered'] for x in rows]):.3f}", flush=True)
    seconds = time.perf_counter() - t0

    covered = np.array([x["covered"] for x in rows])
    widths = np.array([x["width"] for x in rows])
    errors = np.array([x["estimate"] - x["exact"] for x in rows])
    per = {}
    for t in problem.targets:
        for r in RATINGS:
            sel = [x for x in rows if x["target"] == t and x["rating"] == r]
            e = np.array([x["estimate"] - x["exact"] for x in sel])
            per[f"{t}/{r}"] = {"coverage": float(np.mean([x["covered"] for x in sel])), "mean_width": float(np.mean([x["width"] for x in sel])),
                               "bias": float(e.mean()), "sd": float(e.std(ddof=1))}
    summary = {
        "command": shlex.join([".venv/bin/python", "studies/interval_coverage_tabular.py", *sys.argv[1:]]),
        "dialogues": args.dialogues, "reps": args.reps, "first_rep": args.start, "resamples": cfg.interval.resamples, "tol": cfg.interval.tol, "steps": cfg.interval.steps,
        "level": cfg.interval.level, "intervals": len(rows), "coverage": float(covered.mean()),
        "coverage_se": float(np.sqrt(covered.mean() * (1 - covered.mean()) / len(rows))),
        "mean_width": float(widths.mean()), "max_width": float(widths.max()), "rmse": float(np.sqrt(np.mean(errors**2))),
        "per_target": per, "seconds": seconds, "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [
        f"# ENIGMA's sampling interval on the tabular problem: coverage of the exact value",
        "",
        f"`{summary['command']}`",
        "",
        f"{args.reps} sets of logs drawn afresh (seeds {1000 + args.start}-{1000 + args.start + args.reps - 1}) ({args.dialogues} dialogues each), 4 targets x 2 ratings each: "
        f"{len(rows)} intervals at nominal {cfg.interval.level:.0%} ({cfg.interval.resamples} dialogue-bootstrap resamples, "
        f"each refitted until its slot masses are within {cfg.interval.tol:g}, at most {cfg.interval.steps} Newton steps). {seconds:.0f} s.",
        "",
        f"**Coverage {summary['coverage']:.3f}** (binomial s.e. {summary['coverage_se']:.3f}); mean width {summary['mean_width']:.4f}, "
        f"widest {summary['max_width']:.4f}; RMSE of the estimates {summary['rmse']:.4f}.",
        "",
        "| target/rating | coverage | mean width | bias | sd of the estimate |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {k} | {v['coverage']:.3f} | {v['mean_width']:.4f} | {v['bias']:+.4f} | {v['sd']:.4f} |" for k, v in per.items()]
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def compare(first: str, second: str) -> None:
    """The two runs' intervals on the same (logs, target, rating), paired."""
    from scipy.stats import binomtest

    runs = [json.loads((RESULTS / f"{t}.json").read_text()) for t in (first, second)]
    keyed = [{(x["rep"], x["target"], x["rating"]): x for x in run["rows"]} for run in runs]
    if keyed[0].keys() != keyed[1].keys():
        raise SystemExit(f"{first} and {second} are not on the same logs, targets and ratings: rerun with the same --reps/--start")
    a, b = keyed
    only_b = sum(b[k]["covered"] and not a[k]["covered"] for k in a)
    only_a = sum(a[k]["covered"] and not b[k]["covered"] for k in a)
    p = binomtest(only_b, only_b + only_a).pvalue if only_a + only_b else 1.0
    width_ratio = float(np.median([b[k]["width"] / a[k]["width"] for k in a]))
    closer = sum(abs(b[k]["estimate"] - b[k]["exact"]) < abs(a[k]["estimate"] - a[k]["exact"]) for k in a)
    lines = [f"# Tabular interval coverage, paired: {second} against {first}", "",
             f"`.venv/bin/python studies/interval_coverage_tabular.py --compare {first} {second}`", "",
             f"The same {len(a)} (logs, target, rating) cells ({runs[0]['reps']} sets of logs).", "",
             "| | " + first + " | " + second + " |", "|---|---|---|",
             f"| coverage at nominal {runs[0]['level']:.0%} | {runs[0]['coverage']:.3f} (s.e. {runs[0]['coverage_se']:.3f}) | "
             f"{runs[1]['coverage']:.3f} (s.e. {runs[1]['coverage_se']:.3f}) |",
             f"| mean width | {runs[0]['mean_width']:.4f} | {runs[1]['mean_width']:.4f} |",
             f"| RMSE of the estimate | {runs[0]['rmse']:.4f} | {runs[1]['rmse']:.4f} |", "",
             f"- Covered by {second} only: {only_b}; by {first} only: {only_a} (McNemar's exact test, two-sided p = {p:.3f}).",
             f"- Median width ratio {second} / {first}: {width_ratio:.2f}.",
             f"- {second}'s estimate is the closer to the exact value in {closer} of {len(a)} cells."]
    (RESULTS / f"{first}_vs_{second}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
