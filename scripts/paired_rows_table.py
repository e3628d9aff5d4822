"""ENIGMA's settings in the full reports, each paired against the default, in Markdown, for
docs/results.md.

    .venv/bin/python scripts/paired_rows_table.py reports/airline_full/summary.json reports/see2019_full/summary.json

One row per estimator whose name starts with ``enigma-`` (ENIGMA with one setting changed; the
report's own ``enigma-unnormalised`` left out), one column per report: its mean Pearson over the
ratings and the difference from ``enigma`` with a 95% interval over the same bootstrap resamples
of the agents (``enigma.evaluation.correlation``, as the reports and ``studies/ope_enigma_rows.py``
score them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from enigma.evaluation.correlation import paired_difference
from enigma.evaluation.summary_file import score_in_report

REFERENCE = "enigma"
LEFT_OUT = {"enigma-unnormalised"}


def _scores(summary: dict) -> dict:
    return {name: score_in_report(summary, name) for name in summary["estimators"]
            if name == REFERENCE or (name.startswith("enigma-") and name not in LEFT_OUT)}


def table(summaries: dict[str, dict]) -> str:
    per = {label: _scores(s) for label, s in summaries.items()}
    names = [REFERENCE] + sorted({n for s in per.values() for n in s} - {REFERENCE})
    lines = ["| row | " + " | ".join(per) + " |", "|---|" + "---|" * len(per)]
    for name in names:
        cells = []
        for scores in per.values():
            if name not in scores:
                cells.append("")
                continue
            mean = scores[name].means["pearson"]
            d = paired_difference(scores[name], scores[REFERENCE], "pearson", 0.95) if name != REFERENCE else None
            cells.append(f"{mean:.3f}" + (f", {d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]" if d else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summary", type=Path, nargs="+", help="reports/<benchmark>_full/summary.json")
    args = ap.parse_args()
    summaries = {}
    for path in args.summary:
        s = json.loads(path.read_text())
        summaries[s["benchmark"]] = s
    print(table(summaries))


if __name__ == "__main__":
    main()
