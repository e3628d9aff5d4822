"""Issue 71, goal 2, read off the reports: every estimator of the delayed benchmarks at k = 0
(``reports/airline``), k = 3 and k = 8 (``reports/airline-delay3``, ``-delay8``: the same 27 sellers,
seed and truth, each dialogue closed by k exchanges of thanks), paired against k = 0 on the same
sellers and the same bootstrap resamples.

Scored separately on airline's dev-half sellers (the ones a choice reads: ``dev_rows.py --dev-of
airline``) and its test-half sellers (reported, never chosen on). The delayed benchmarks are
``report.split.dev_only``, so their own reports show all 27 as dev.

    .venv/bin/python studies/late_ratings_reports.py

Writes studies/results/late_ratings_reports.md and .json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "studies"))
RESULTS = REPO / "studies" / "results"
STORES = {0: "airline", 3: "airline-delay3", 8: "airline-delay8"}


def _cell(score, spread: float) -> str:
    return f"{score.means['pearson']:.3f} ({spread:.2f})"


def _d_cell(d: dict | None) -> str:
    if d is None:
        return "n/a (other agents)"
    lo, hi = d["ci95"]
    return f"{d['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def main(stores: dict[int, str] = STORES, results: Path = RESULTS) -> dict:
    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.split import split_agents
    from enigma.evaluation.summary_file import read_summary, summary_estimates
    from enigma.params import Params
    from provenance import code_version

    params = Params.load(REPO / "params.yaml")
    summaries = {k: read_summary(REPO / "reports" / b / "summary.json") for k, b in stores.items()}
    estimators = [e for e in summaries[8]["estimators"] if all(e in s["estimators"] for s in summaries.values())]
    ratings = summaries[0]["ratings"]
    halves = split_agents(summary_estimates(summaries[0], "truth").index, params.report.split, "airline")
    out: dict = {"command": ".venv/bin/python studies/late_ratings_reports.py", "code": code_version(),
                 "estimators": estimators, "halves": halves, "rows": {}}
    lines = ["# The rating that comes late, read off the reports (issue 71, goal 2)", "",
             f"`{out['command']}` ({out['code']})", "",
             "Every estimator of the delayed benchmarks on the same 27 airline sellers, seed and truth: "
             "[airline](../../reports/airline/index.html) (k = 0), [airline-delay3](../../reports/airline-delay3/index.html) "
             "and [airline-delay8](../../reports/airline-delay8/index.html) (each dialogue closed by k exchanges of thanks). "
             "Mean Pearson over the four ratings, the spread ratio (sd of the estimates over sd of the truth, mean over the ratings) "
             "and D = the mean Pearson at k minus at k = 0, paired over the same 1000 resamples of the sellers [95%]. "
             "The dev-half sellers are the ones a choice reads; the test-half sellers are reported, never chosen on. "
             "Goal 2 asks for a spread ratio of at least 0.6 and a mean Pearson within 0.03 of k = 0.", ""]
    # each report's tables read once; every half and estimator scores subsets of them
    tables = {k: {name: summary_estimates(s, name) for name in ("truth", *estimators)} for k, s in summaries.items()}
    for half in ("dev", "test"):
        agents = halves[half]
        lines += [f"## airline's {half}-half sellers ({len(agents)})", "",
                  "| estimator | k = 0 | k = 3 (spread) | D k = 3 | k = 8 (spread) | D k = 8 |", "|---|---|---|---|---|---|"]
        for name in estimators:
            scores = {k: score_estimator(name, t[name].reindex(agents), t["truth"].loc[agents], ratings, resamples=1000, seed=0)
                      for k, t in tables.items()}
            spread = {k: sum(sc.per_rating[r]["spread_ratio"] for r in ratings) / len(ratings) for k, sc in scores.items()}
            d = {k: paired_difference(scores[k], scores[0], "pearson", 0.95) for k in (3, 8)}
            out["rows"].setdefault(half, {})[name] = {
                "pearson": {k: sc.means["pearson"] for k, sc in scores.items()}, "spread_ratio": spread,
                "d_vs_k0": d, "missing": {k: sc.missing_agents for k, sc in scores.items()}}
            lines.append(f"| {name} | {_cell(scores[0], spread[0])} | {_cell(scores[3], spread[3])} | {_d_cell(d[3])} "
                         f"| {_cell(scores[8], spread[8])} | {_d_cell(d[8])} |")
        lines.append("")
    (results / "late_ratings_reports.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (results / "late_ratings_reports.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return out


if __name__ == "__main__":
    main()
