"""A report's every-estimator table in Markdown, from its summary.json, for docs/results.md.

    .venv/bin/python scripts/results_table.py reports/airline_full/summary.json

One row per estimator, ranked by mean Pearson over the ratings: its information regime, mean
Pearson with the 95% bootstrap interval, mean Spearman, the reward rating's Pearson (interval) and
Spearman where the benchmark has one, the mean spread ratio and how many flags it carries.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _f(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def table(summary: dict) -> str:
    ests = summary["estimators"]
    ratings = summary["ratings"]
    reward = "reward" if "reward" in ratings else None
    head = "| estimator | regime | mean Pearson [95% CI] | mean Spearman |"
    rule = "|---|---|---|---|"
    if reward:
        head += " reward Pearson [95% CI] | reward Spearman |"
        rule += "---|---|"
    head += " mean spread ratio | flags |"
    rule += "---|---|"
    lines = [head, rule]
    for name in sorted(ests, key=lambda n: -(ests[n]["mean_pearson"] if ests[n]["mean_pearson"] is not None else -9)):
        e = ests[name]
        ci = e.get("mean_pearson_ci95") or [None, None]
        regime = ", ".join(e.get("regime") or []) or "none"
        row = f"| {name} | {regime} | {_f(e['mean_pearson'])} [{_f(ci[0], 2)}, {_f(ci[1], 2)}] | {_f(e['mean_spearman'])} |"
        if reward:
            r = e[reward]
            rci = r.get("pearson_ci95") or [None, None]
            row += f" {_f(r['pearson'])} [{_f(rci[0], 2)}, {_f(rci[1], 2)}] | {_f(r['spearman'])} |"
        spreads = [e[r]["spread_ratio"] for r in ratings if e[r].get("spread_ratio") is not None]
        row += f" {_f(sum(spreads) / len(spreads), 2) if spreads else 'n/a'} | {len(e.get('flags') or [])} |"
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summary", type=Path)
    args = ap.parse_args()
    print(table(json.loads(args.summary.read_text())))


if __name__ == "__main__":
    main()
