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

from enigma.evaluation.correlation import bootstrap_indices, bootstrap_stats, paired_difference, percentile_interval, score_estimator
from enigma.evaluation.summary_file import read_summary, summary_estimates


def table(summary: dict, first: str, second: str) -> str:
    cfg = summary.get("settings", {})
    truth = summary_estimates(summary, "truth")
    est = {n: summary_estimates(summary, n) for n in (first, second)}
    for n, e in est.items():
        if e.empty:
            sys.exit(f"no estimates of {n!r} in the report (estimators: {', '.join(summary['estimators'])})")
    agents = sorted(set(truth.index) & set(est[first].index) & set(est[second].index))
    resamples, seed = cfg.get("bootstrap_resamples", 1000), cfg.get("seed", 0)
    # scored as the report scores them: the per-rating points and spreads and the paired means
    scores = {n: score_estimator(n, e.loc[agents], truth.loc[agents], summary["ratings"], resamples=resamples, seed=seed)
              for n, e in est.items()}
    for n, score in scores.items():
        if score.agents != agents:
            sys.exit(f"{n}: no estimate or truth for some rating of agent(s) {score.missing_agents}; the pairing needs every agent")
    idx = bootstrap_indices(len(agents), resamples, seed)  # the agent sets score_estimator resampled
    lines = [f"| rating | {first} Pearson (spread) | {second} Pearson (spread) | difference [95% CI] |", "|---|---|---|---|"]
    for r in summary["ratings"]:
        y = truth.loc[agents, r].to_numpy(float)
        point = {n: score.per_rating[r]["pearson"] for n, score in scores.items()}
        for n in (first, second):  # or the table would not be the report's
            reported = summary["estimators"][n][r]["pearson"]
            if reported is not None and abs(point[n] - reported) > 1e-9:
                sys.exit(f"{n} / {r}: Pearson {point[n]:.6f} here, {reported:.6f} in the report (other agents?)")
        # per-rating draws are not kept by score_estimator (only the means'), so the paired
        # difference per rating is drawn here on the same agent sets
        diff = (bootstrap_stats(est[first].loc[agents, r].to_numpy(float), y, idx)["pearson"]
                - bootstrap_stats(est[second].loc[agents, r].to_numpy(float), y, idx)["pearson"])
        lo, hi = percentile_interval(diff, 0.95)  # over the finite draws
        cells = [f"{point[n]:+.2f} ({scores[n].per_rating[r]['spread_ratio']:.2f})" for n in (first, second)]
        lines.append(f"| {r} | {cells[0]} | {cells[1]} | {point[first] - point[second]:+.2f} [{lo:+.2f}, {hi:+.2f}] |")
    for stat in ("pearson", "spearman"):
        d = paired_difference(scores[first], scores[second], stat, 0.95)
        lo, hi = d["ci95"]
        lines.append(f"| mean {stat.title()} over ratings | {scores[first].means[stat]:+.3f} | {scores[second].means[stat]:+.3f} | "
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
