"""The estimators that read the target replies, scored with the agents' own replies and with
stand-ins' (``studies/stand_in_params.py``), paired: the same agents, truth and bootstrap
resamples. The estimators must have run on each folder (``enigma stage train <benchmark> --params
<stand-in params>`` with the benchmark's ``estimators`` narrowed to them).

    .venv/bin/python studies/stand_in_comparators.py airline --tag standin_comparators_airline \\
        --folder agents=data/airline/results --folder self-play=data/work/standin_rollouts/airline/results \\
        --estimator 'fqe-critic[replies-at-logged-states]'

Output: studies/results/<tag>.md and .json; every folder after the first is paired against it.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark", help="an entry of params.yaml's benchmarks (its truth)")
    ap.add_argument("--folder", action="append", required=True, metavar="NAME=RESULTS_DIR",
                    help="a results folder; the first is the reference")
    ap.add_argument("--estimator", action="append", required=True, help="an estimator as the results name it")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()

    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide
    from enigma.params import Params
    from provenance import code_version
    from result_files import paired_cell, write_result

    truth = truth_wide(read_truth(REPO / Params.load(REPO / "params.yaml").benchmark(args.benchmark).truth))
    folders = []
    for spec in args.folder:
        name, sep, path = spec.partition("=")
        if not sep or not Path(path).is_dir():
            sys.exit(f"--folder {spec!r}: expected NAME=RESULTS_DIR, an existing folder")
        folders.append((name, read_results(path)))

    out, lines = {}, [f"# Estimators that read the target replies, with the agents' and with stand-ins' replies ({args.benchmark})", "",
                      f"`{shlex.join(['.venv/bin/python', 'studies/stand_in_comparators.py', *sys.argv[1:]])}` (code: {code_version()})", "",
                      "27 held-out agents as the results hold them; 1000 bootstrap resamples of the agents (seed 0), the same for every row.", "",
                      "| estimator | replies of | mean Pearson [95% CI] | reward Pearson | mean spread ratio | minus the first, mean Pearson [95% CI] |",
                      "|---|---|---|---|---|---|"]
    for est in args.estimator:
        scores = {}
        for name, results in folders:
            part = results[results.estimator == est]
            if part.empty:
                sys.exit(f"{name}: no results of {est!r} (estimators there: {sorted(results.estimator.unique())})")
            estimates = part.pivot(index="agent_id", columns="rating", values="estimate")
            scores[name] = score_estimator(f"{est}@{name}", estimates, truth.loc[estimates.index], sorted(estimates.columns))
        ref = folders[0][0]
        for name, s in scores.items():
            diff = paired_difference(s, scores[ref], "pearson", 0.95) if name != ref else None
            spread = statistics.mean(s.per_rating[r]["spread_ratio"] for r in s.ratings)
            out.setdefault(est, {})[name] = {"mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
                                             "reward_pearson": s.per_rating["reward"]["pearson"], "mean_spread_ratio": spread,
                                             "minus_" + ref: diff}
            ci = s.mean_ci["pearson"]
            d = paired_cell(diff)
            lines.append(f"| {est} | {name} | {s.means['pearson']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | "
                         f"{s.per_rating['reward']['pearson']:.3f} | {spread:.2f} | {d} |")
    write_result(args.tag, lines, {"reproduce": shlex.join(sys.argv), "rows": out})


if __name__ == "__main__":
    main()
