"""The measured coverage of the per-agent intervals, from the committed reports.

Reads ``reports/<benchmark>/summary.json`` for each benchmark named and writes one table: per
benchmark and rating, how many agents' truth lies inside ENIGMA's sampling interval and inside
its conformal interval, and their mean widths; then the conformal coverage of every estimator
(mean over ratings), so ENIGMA's can be read beside the others'.

    .venv/bin/python scripts/interval_coverage_table.py airline airline-seed1 airline-seed2

Output: studies/results/interval_coverage_benchmarks.md (and printed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _f(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--estimator", default="enigma")
    args = ap.parse_args()
    lines = ["# Per-agent intervals: measured coverage in the leave-one-agent-out reports", "",
             f"`.venv/bin/python scripts/interval_coverage_table.py {' '.join(args.benchmarks)}`", "",
             f"## {args.estimator}: share of agents whose truth lies inside their 95% interval", "",
             "| benchmark | rating | agents | sampling coverage | sampling mean width | conformal coverage | conformal mean width | conformal misses |",
             "|---|---|---|---|---|---|---|---|"]
    others = {}
    for b in args.benchmarks:
        s = json.loads((REPO / "reports" / b / "summary.json").read_text())
        e = s["estimators"][args.estimator]
        for r in s["ratings"]:
            cov, width, missed = e[r]["interval_coverage"], e[r]["interval_mean_width"], e[r]["interval_missed"]
            lines.append(f"| {b} | {r} | {s['n_agents']} | {_f(cov['sampling'])} | {_f(width['sampling'])} | "
                         f"{_f(cov['conformal'])} | {_f(width['conformal'])} | {', '.join(missed['conformal'] or []) or '-'} |")
        for name, est in s["estimators"].items():
            vals = [est[r]["interval_coverage"]["conformal"] for r in s["ratings"]]
            widths = [est[r]["interval_mean_width"]["conformal"] for r in s["ratings"]]
            if all(v is not None for v in vals + widths):
                others.setdefault(name, {})[b] = (sum(vals) / len(vals), sum(widths) / len(widths))
    lines += ["", "## Conformal coverage / mean width of every estimator (mean over ratings)", "",
              "| estimator | " + " | ".join(args.benchmarks) + " |", "|---|" + "---|" * len(args.benchmarks)]
    for name in sorted(others, key=lambda n: sum(w for _, w in others[n].values()) / len(others[n])):
        cells = [f"{others[name][b][0]:.3f} / {others[name][b][1]:.3f}" if b in others[name] else "-" for b in args.benchmarks]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    out = REPO / "studies" / "results" / "interval_coverage_benchmarks.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
