"""ENIGMA against another estimator on several reports of the same agents at once: the airline
simulator's seeds are three stores and three truths of the same 27 sellers, and each report's
paired interval is wide (27 agents). Pooled, the difference is the mean over the reports of each
report's difference (mean over ratings), and its interval resamples the sellers: one bootstrap
draw takes the same sellers in every report, because a seller is the unit a user generalises over
and the same seller is in all three.

    .venv/bin/python studies/enigma_pooled_seeds.py reports/airline/summary.json \\
        reports/airline-seed1/summary.json reports/airline-seed2/summary.json \\
        --against 'fqe-critic[replies-at-logged-states]' --tag enigma_vs_critic_seeds

Reads the committed reports only (their per-agent estimates and truth), so it needs no data.
Output: studies/results/<tag>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
STATS = ("pearson", "spearman")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("summary", type=Path, nargs="+", help="reports/<benchmark>/summary.json of the same agents")
    ap.add_argument("--estimator", default="enigma")
    ap.add_argument("--against", required=True, help="the other estimator's name as the reports show it")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()

    from enigma.evaluation.correlation import percentile_interval, score_estimator
    from enigma.evaluation.summary_file import read_summary, summary_estimates
    from provenance import code_version

    per_report, draws, agents, bootstrap = [], {s: [] for s in STATS}, None, None
    for path in args.summary:
        summary = read_summary(path)
        # each report's own bootstrap, so its paired interval here is the report's; the same in
        # every report, so one draw is the same sellers everywhere
        settings = summary.get("settings", {})
        drawn = (settings.get("bootstrap_resamples", 1000), settings.get("seed", 0))
        if bootstrap is not None and drawn != bootstrap:
            sys.exit(f"{path}: bootstrap {drawn} (resamples, seed), not {args.summary[0]}'s {bootstrap}")
        bootstrap = drawn
        truth = summary_estimates(summary, "truth")
        scores = {}
        for name in (args.estimator, args.against):
            est = summary_estimates(summary, name)
            if est.empty:
                sys.exit(f"{path}: no estimates of {name!r} (estimators: {', '.join(summary['estimators'])})")
            scores[name] = score_estimator(name, est, truth.loc[est.index], list(summary["ratings"]),
                                           resamples=bootstrap[0], seed=bootstrap[1])
        a, b = scores[args.estimator], scores[args.against]
        if a.agents != b.agents:
            sys.exit(f"{path}: {args.estimator} and {args.against} were scored on different agents")
        if agents is not None and a.agents != agents:
            sys.exit(f"{path}: other agents than {args.summary[0]}'s, so the sellers cannot be resampled together")
        agents = a.agents
        row = {"report": str(path), "benchmark": summary["benchmark"], "agents": len(a.agents)}
        for s in STATS:
            diff = a.mean_draws[s] - b.mean_draws[s]
            draws[s].append(diff)
            row[s] = {args.estimator: a.means[s], args.against: b.means[s], "difference": a.means[s] - b.means[s],
                      "ci95": percentile_interval(diff, 0.95)}
        per_report.append(row)
    pooled = {}
    for s in STATS:
        d = np.mean(draws[s], axis=0)
        point = float(np.mean([r[s]["difference"] for r in per_report]))
        pooled[s] = {"difference": point, "ci95": percentile_interval(d, 0.95),
                     "share_of_resamples_ahead": float(np.mean(d[np.isfinite(d)] > 0))}

    cmd = shlex.join([".venv/bin/python", "studies/enigma_pooled_seeds.py", *sys.argv[1:]])
    code = code_version()
    fmt = lambda x: f"{x['difference']:+.3f} [{x['ci95'][0]:+.3f}, {x['ci95'][1]:+.3f}]"  # noqa: E731
    lines = [f"# {args.estimator} against {args.against}, per report and pooled over the reports", "",
             f"`{cmd}` (code: {code})", "",
             f"Mean over ratings; {bootstrap[0]} bootstrap resamples of the {len(agents)} agents (seed {bootstrap[1]}), "
             "the same agents in every report, so per-report intervals are the reports' own paired ones and the pooled "
             "one resamples the agents jointly.", "",
             f"| report | {args.estimator} mean Pearson | {args.against} | difference [95% CI] | mean Spearman difference |",
             "|---|---|---|---|---|"]
    for r in per_report:
        lines.append(f"| {r['benchmark']} | {r['pearson'][args.estimator]:.3f} | {r['pearson'][args.against]:.3f} | "
                     f"{fmt(r['pearson'])} | {fmt(r['spearman'])} |")
    lines.append(f"| pooled ({len(per_report)} reports) | | | {fmt(pooled['pearson'])} | {fmt(pooled['spearman'])} |")
    lines += ["", f"Share of resamples with {args.estimator} ahead, pooled: Pearson {pooled['pearson']['share_of_resamples_ahead']:.3f}, "
              f"Spearman {pooled['spearman']['share_of_resamples_ahead']:.3f}."]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"reproduce": cmd, "code": code, "reports": per_report, "pooled": pooled}
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
