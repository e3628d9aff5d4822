"""One estimator's mean Pearson in reports against the same reports at an earlier commit, paired
over the same bootstrap resamples of the agents (as the reports score them), in Markdown: what a
rebuild moved.

    .venv/bin/python scripts/paired_reports.py --ref 083ef8e reports/*/summary.json

Rows: each report; columns: the mean Pearson over the ratings at ``--ref`` and now, and the
difference with its 95% interval. The truth is the report's own (a report whose truth changed
between the two commits is refused: the pair would compare two targets).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from enigma.evaluation.correlation import paired_difference
from enigma.evaluation.summary_file import score_in_report, summary_estimates

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", type=Path, nargs="+", help="reports/<benchmark>/summary.json")
    ap.add_argument("--ref", required=True, help="the earlier commit")
    ap.add_argument("--estimator", default="enigma")
    args = ap.parse_args()
    lines = [f"| report | {args.estimator} at {args.ref} | now | difference [95% CI] |", "|---|---|---|---|"]
    for path in args.summary:
        rel = path.resolve().relative_to(REPO)
        old_text = subprocess.run(["git", "show", f"{args.ref}:{rel}"], cwd=REPO, capture_output=True, text=True)
        if old_text.returncode:
            sys.exit(f"{rel}: not in commit {args.ref} ({old_text.stderr.strip()})")
        old, new = json.loads(old_text.stdout), json.loads(path.read_text())
        if not summary_estimates(old, "truth").equals(summary_estimates(new, "truth")):
            sys.exit(f"{rel}: its truth differs at {args.ref}; the two would not be paired")
        a, b = score_in_report(new, args.estimator), score_in_report(old, args.estimator)
        d = paired_difference(a, b, "pearson", 0.95)
        lines.append(f"| {rel.parent.name} | {b.means['pearson']:.3f} | {a.means['pearson']:.3f} | "
                     f"{d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
