"""Two estimators of one report side by side per rating, in Markdown, for docs/results.md: which
ratings a lead comes from.

    .venv/bin/python scripts/per_rating_table.py reports/see2019/summary.json enigma 'spe:sigmoid[own-rollouts]'

One row per rating: each estimator's Pearson and spread ratio, and the first minus the second
with a 95% interval over the report's own bootstrap resamples of the agents (the same agent sets
for both estimators and every rating, as the report draws them: ``enigma.evaluation.correlation``).
Two last rows: the mean Pearson and the mean Spearman over the ratings, paired the same way (the
report's ranking statistic and its headline's comparison).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from enigma.evaluation.correlation import (
    bootstrap_indices,
    bootstrap_stats,
    correlations,
    paired_difference,
    percentile_interval,
    score_estimator,
    spread_ratio,
)
from enigma.evaluation.summary import read_summary, summary_estimates


def table(summary: dict, first: str, second: str) -> str:
    cfg = summary.get("settings", {})
    truth = summary_estimates(summary, "truth")
    est = {n: summary_estimates(summary, n) for n in (first, second)}
    for n, e in est.items():
        if e.empty:
            sys.exit(f"no estimates of {n!r} in the report (estimators: {', '.join(summary['estimators'])})")
    agents = sorted(set(truth.index) & set(est[first].index) & set(est[second].index))
    idx = bootstrap_indices(len(agents), cfg.get("bootstrap_resamples", 1000), cfg.get("seed", 0))
    lines = [f"| rating | {first} Pearson (spread) | {second} Pearson (spread) | difference [95% CI] |", "|---|---|---|---|"]
    for r in summary["ratings"]:
        y = truth.loc[agents, r].to_numpy(float)
        xs = {n: e.loc[agents, r].to_numpy(float) for n, e in est.items()}
        point = {n: correlations(x, y)["pearson"] for n, x in xs.items()}
        for n in (first, second):  # scored as the report scored it, or the table would not be the report's
            reported = summary["estimators"][n][r]["pearson"]
            if reported is not None and abs(point[n] - reported) > 1e-9:
                sys.exit(f"{n} / {r}: Pearson {point[n]:.6f} here, {reported:.6f} in the report (other agents?)")
        diff = bootstrap_stats(xs[first], y, idx)["pearson"] - bootstrap_stats(xs[second], y, idx)["pearson"]
        lo, hi = percentile_interval(diff, 0.95)  # over the finite draws
        cells = [f"{point[n]:+.2f} ({spread_ratio(xs[n], y):.2f})" for n in (first, second)]
        lines.append(f"| {r} | {cells[0]} | {cells[1]} | {point[first] - point[second]:+.2f} [{lo:+.2f}, {hi:+.2f}] |")
    scores = [score_estimator(n, est[n].loc[agents], truth.loc[agents], summary["ratings"],
                              resamples=cfg.get("bootstrap_resamples", 1000), seed=cfg.get("seed", 0)) for n in (first, second)]
    for stat in ("pearson", "spearman"):
        d = paired_difference(scores[0], scores[1], stat, 0.95)
        lo, hi = d["ci95"]
        lines.append(f"| mean {stat.title()} over ratings | {scores[0].means[stat]:+.3f} | {scores[1].means[stat]:+.3f} | "
                     f"{d['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summary", type=Path, help="reports/<benchmark>[_full]/summary.json")
    ap.add_argument("first", help="an estimator as the report names it")
    ap.add_argument("second")
    args = ap.parse_args()
    print(table(read_summary(args.summary), args.first, args.second))


if __name__ == "__main__":
    main()
