"""A new default against the old one, paired, on every half of the committed reports (issue 71's
rule, point 3: the test halves reported as they come, losses included). The old default's
per-agent estimates are read from the reports as committed at ``--before`` (git), the new
default's from the reports in the working tree; both are scored on the same agents with the same
bootstrap resamples, so the difference is paired. With ``--old-results``, also each default's
seconds per agent (median), from the old default's result files kept aside and the new ones in
``data/<benchmark>/results/enigma``.

    .venv/bin/python studies/adoption_paired.py --before 0bfafd5 --tag adoption_history_extremes airline see2019 ...
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from result_files import paired_cell, write_result  # noqa: E402

ESTIMATOR = "enigma"


def seconds(folder: Path) -> float | None:
    values = [float(p.read_text()) for p in sorted(folder.glob("*.seconds"))]  # the runner's timing, beside each result
    return statistics.median(values) if values else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--before", required=True, help="the git commit whose reports hold the old default's estimates")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--old-results", type=Path, default=None, help="<dir>/<benchmark>/enigma: the old default's result files")
    args = ap.parse_args()

    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.summary_file import read_summary, summary_estimates
    from provenance import code_version

    rows, payload = [], {}
    for bench in args.benchmarks:
        path = f"reports/{bench}/summary.json"
        new = read_summary(REPO / path)
        shown = subprocess.run(["git", "show", f"{args.before}:{path}"], cwd=REPO, capture_output=True, text=True, check=True)
        old = json.loads(shown.stdout)  # as written (packed): summary_estimates reads either layout
        halves = {h: a for h, a in new["splits"].items() if a} if new.get("splits") else {}
        if len(halves) != 1:  # an all-test benchmark's one half is all of it
            halves["all"] = sorted(new["agents"])
        payload[bench] = {}
        for half, agents in halves.items():
            e_new, truth = summary_estimates(new, ESTIMATOR).loc[agents], summary_estimates(new, "truth").loc[agents]
            e_old, truth_old = summary_estimates(old, ESTIMATOR).loc[agents], summary_estimates(old, "truth").loc[agents]
            if not truth.equals(truth_old):
                raise SystemExit(f"{bench}: the truth differs between {args.before} and the working tree")
            ratings = list(truth.columns)
            s_new = score_estimator("new", e_new, truth, ratings)
            s_old = score_estimator("old", e_old, truth, ratings)
            d = paired_difference(s_new, s_old, "pearson", 0.95)
            spread = {k: sum(s.per_rating[r]["spread_ratio"] for r in ratings) / len(ratings) for k, s in (("old", s_old), ("new", s_new))}
            payload[bench][half] = {"agents": len(agents), "old": s_old.means["pearson"], "new": s_new.means["pearson"],
                                    "paired": d, "spread_ratio": spread}
            rows.append(f"| {bench} | {half} ({len(agents)}) | {s_old.means['pearson']:.3f} | {s_new.means['pearson']:.3f} | "
                        f"{paired_cell(d)} | {spread['old']:.2f} → {spread['new']:.2f} |")
        if args.old_results is not None:
            t_old, t_new = seconds(args.old_results / bench / ESTIMATOR), seconds(REPO / "data" / bench / "results" / ESTIMATOR)
            payload[bench]["median_seconds_per_agent"] = {"old": t_old, "new": t_new}
    cmd = shlex.join([".venv/bin/python", "studies/adoption_paired.py", *sys.argv[1:]])
    lines = [f"# ENIGMA's new default against the old one, on the reports' halves", "",
             f"`{cmd}` (code: {code_version()}; the old default's estimates: the reports at {args.before})", "",
             "Mean Pearson over the ratings; the paired difference (new − old) with a 95% bootstrap interval over the "
             "agents (1000 resamples, the same for both); the estimates' spread over the truth's, mean over the ratings.", "",
             "| benchmark | half (agents) | old default | new default | new − old [95% CI] | spread ratio |",
             "|---|---|---|---|---|---|", *rows]
    if args.old_results is not None:
        lines += ["", "Median seconds per agent (ENIGMA's result files, 2 workers). The old default's files are a copy kept aside "
                  "before the rebuild, not in git: these seconds reproduce only where that copy is; the Pearson columns "
                  "reproduce from any clone. Both were timed on this 2-core machine, in different sessions.", "",
                  "| benchmark | old default | new default | ratio |", "|---|---|---|---|"]
        for bench in args.benchmarks:
            t = payload[bench]["median_seconds_per_agent"]
            if t["old"] and t["new"]:
                lines.append(f"| {bench} | {t['old']:.1f} | {t['new']:.1f} | {t['new'] / t['old']:.2f} |")
    write_result(args.tag, lines, {"reproduce": cmd, "before": args.before, "benchmarks": payload})


if __name__ == "__main__":
    main()
