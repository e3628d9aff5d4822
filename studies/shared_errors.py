"""Which agents every ENIGMA setting gets wrong the same way: per held-out agent, the error of
every ENIGMA row of a full report on one rating (its residual from the row's Theil-Sen line on
the truth), how far the rows agree on it, and what the correlations would be if the agents that
all rows misjudge were on the line.

An error that one setting makes and another does not is the estimator's to fix (capacity,
solver, regularisation). An error that every setting makes, the random encoder and the other
estimators included, is in what the rows share: the features of the state and the reply, the
logged dialogues and the target actions. This separates the two from a committed report, with no
fitting:

    .venv/bin/python studies/shared_errors.py reports/airline_full/summary.json --rating reward \\
        --other 'fqe-critic[replies-at-logged-states]' --tag shared_errors_airline_reward

Output: studies/results/<tag>.md and .json: per ENIGMA row the rating's Pearson and Spearman;
the mean correlation of two rows' error vectors; per agent the reference row's error, the rows'
median, least and largest error, the share of rows that err in the reference's direction, the
other estimators' errors; the reference's Pearson and Spearman with the shared errors set to 0, all of them and the k largest.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr, theilslopes

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def row_residuals(summary: dict, rating: str, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, pd.Series]:
    """Per estimator on ``rating``, over the agents every estimator estimated: each agent's error,
    its residual from the estimator's (Theil-Sen) line on the truth divided by the line's slope
    (in the truth's units; a correlation reads only these, so an estimate on another scale, like
    ENIGMA's on See 2019 that span 0.4 of the truth's, is no worse for it) [agent x estimator];
    the line's fitted values; the slopes; the truth."""
    from enigma.evaluation.summary_file import summary_estimates

    truth = summary_estimates(summary, "truth")[rating]
    est = pd.DataFrame({n: summary_estimates(summary, n)[rating] for n in names}).dropna()
    truth = truth.loc[est.index]
    # Theil-Sen, not least squares: one badly misjudged agent would tilt a least-squares line and
    # lend every other agent an error of its own
    lines = {n: theilslopes(est[n], truth, method="joint") for n in names}
    fitted = pd.DataFrame({n: lines[n].intercept + lines[n].slope * truth for n in names}, index=est.index)
    slope = pd.Series({n: lines[n].slope for n in names})
    return (est - fitted) / slope, fitted, slope, truth


def shared(errors: pd.DataFrame, threshold: float, agreement: float) -> pd.Series:
    """Agents whose every-row error is a shared one: the rows' median error beyond ``threshold``
    and at least ``agreement`` of the rows erring in that direction."""
    median = errors.median(axis=1)
    same_sign = (np.sign(errors.round(9)).eq(np.sign(median), axis=0)).mean(axis=1)
    return (median.abs() > threshold) & (same_sign >= agreement)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("summary", type=Path, help="a full report's summary.json (every ENIGMA row in it)")
    ap.add_argument("--rating", required=True)
    ap.add_argument("--reference", default="enigma", help="the row whose errors are listed first and corrected")
    ap.add_argument("--prefix", default="enigma", help="estimators whose name starts with this are the ENIGMA rows")
    ap.add_argument("--exclude", action="append", default=[],
                    help="ENIGMA rows to leave out: e.g. enigma-unnormalised, whose estimates are on another scale")
    ap.add_argument("--other", action="append", default=[], help="other estimators whose errors are shown beside")
    ap.add_argument("--threshold", type=float, default=0.25,
                    help="a shared error's least size (the rows' median), in standard deviations of the truth over the agents")
    ap.add_argument("--agreement", type=float, default=0.9, help="the least share of rows erring in one direction")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "studies"))
    from provenance import code_version

    summary = json.loads(args.summary.read_text())
    names = [n for n in summary["estimators"] if n.startswith(args.prefix) and n not in args.exclude]
    if args.reference not in names:
        sys.exit(f"{args.summary}: no ENIGMA row {args.reference!r} (rows: {names})")
    unknown = [o for o in args.other if o not in summary["estimators"]]
    if unknown:
        sys.exit(f"{args.summary}: no estimator {unknown}")
    if args.rating not in summary["ratings"]:
        sys.exit(f"{args.summary}: no rating {args.rating!r} (ratings: {summary['ratings']})")
    errors, fitted, slope, truth = row_residuals(summary, args.rating, names + args.other)
    # a row whose line falls with the truth has no errors in the truth's units to compare
    falling = [n for n in names if slope[n] <= 0]
    if args.reference in falling:
        sys.exit(f"{args.reference}'s estimates fall as the truth rises; nothing to compare")
    names = [n for n in names if n not in falling]
    if len(names) < 2:
        sys.exit(f"{args.summary}: {len(names)} ENIGMA row(s) to compare ({', '.join(names)}); errors are shared among two or "
                 "more, so give a full report (reports/<benchmark>_full/summary.json)")
    rows, others = errors[names], errors[args.other]

    def corr(e: pd.Series, name: str = args.reference) -> tuple[float, float]:
        est = fitted[name] + slope[name] * e
        return float(pearsonr(truth, est)[0]), float(spearmanr(truth, est)[0])

    per_row = {n: corr(rows[n], n) for n in names}
    pairs = [np.corrcoef(rows[a], rows[b])[0, 1] for a, b in itertools.combinations(names, 2)]
    is_shared = shared(rows, args.threshold * truth.std(), args.agreement)
    ref = rows[args.reference]
    corrected = ref.where(~is_shared, 0.0)
    median = rows.median(axis=1)
    same_sign = np.sign(rows.round(9)).eq(np.sign(ref), axis=0).mean(axis=1)

    stderr = summary.get("truth_reliability", {}).get(args.rating, {}).get("mean_stderr")
    cmd = shlex.join([".venv/bin/python", "studies/shared_errors.py", *sys.argv[1:]])
    lines = [f"# Errors every ENIGMA row shares: {args.summary.parent.name}, {args.rating}", "",
             f"`{cmd}` (code: {code_version()})", "",
             f"{len(names)} ENIGMA rows of the report, {len(errors)} held-out agents"
             + (f" (left out, their estimates falling as the truth rises: {', '.join(falling)})" if falling else "")
             + ". An agent's error under a row: its estimate's residual from that row's Theil-Sen line on the truth, "
             "divided by the line's slope, so in the truth's units (a correlation reads only these; where the estimates are "
             "on the truth's scale, about estimate minus truth).", "",
             f"- the rows' {args.rating} Pearson: {min(p for p, _ in per_row.values()):.3f} to {max(p for p, _ in per_row.values()):.3f}; "
             f"Spearman: {min(s for _, s in per_row.values()):.3f} to {max(s for _, s in per_row.values()):.3f} "
             f"(best: {max(per_row, key=lambda n: per_row[n][1])})",
             f"- the correlation of two rows' error vectors: median {np.median(pairs):.2f} "
             f"(10th percentile {np.percentile(pairs, 10):.2f}) over {len(pairs)} pairs",
             *[f"- the correlation of {o}'s errors with {args.reference}'s: {np.corrcoef(others[o], ref)[0, 1]:.2f}"
               for o in args.other],
             f"- shared errors (the rows' median beyond ±{args.threshold} sd of the truth, ±{args.threshold * truth.std():.3f}, and at least {args.agreement:.0%} of the rows on its side): "
             f"{int(is_shared.sum())} agents",
             *([f"- the truth's own standard error per agent (the report's truth reliability): mean {stderr:.3f}, "
                f"{args.threshold * truth.std() / stderr:.1f} times smaller than the threshold; an error the truth's noise "
                "makes is shared by every row too"] if stderr else []),
             f"- {args.reference} as it is: Pearson {corr(ref)[0]:.3f}, Spearman {corr(ref)[1]:.3f}; "
             f"with those agents' errors set to 0: Pearson {corr(corrected)[0]:.3f}, Spearman {corr(corrected)[1]:.3f}", "",
             f"| agent | truth | {args.reference}'s error | rows' median | least | largest | rows on {args.reference}'s side | shared | "
             + " | ".join(args.other) + " |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(args.other)]
    for a in ref.abs().sort_values(ascending=False).index:
        lines.append(f"| {a} | {truth[a]:.3f} | {ref[a]:+.3f} | {median[a]:+.3f} | {rows.loc[a].min():+.3f} | "
                     f"{rows.loc[a].max():+.3f} | {same_sign[a]:.0%} | {'yes' if is_shared[a] else ''} | "
                     + " | ".join(f"{others.loc[a, o]:+.3f}" for o in args.other) + " |")
    # how concentrated the gap is: the shared errors set to 0 one at a time, the largest first
    order = median[is_shared].abs().sort_values(ascending=False).index
    steps = []
    for k in range(1, len(order) + 1):
        p, s = corr(ref.where(~ref.index.isin(order[:k]), 0.0))
        steps.append({"agent": order[k - 1], "pearson": p, "spearman": s})
    lines += ["", f"{args.reference} with the k largest shared errors set to 0 (by the rows' median):", "",
              "| k | agent added | Pearson | Spearman |", "|---|---|---|---|"]
    lines += [f"| {k} | {x['agent']} | {x['pearson']:.3f} | {x['spearman']:.3f} |" for k, x in enumerate(steps, 1)]
    lines += ["", f"Per row ({args.rating}):", "", "| row | Pearson | Spearman |", "|---|---|---|"]
    lines += [f"| {n} | {p:.3f} | {s:.3f} |" for n, (p, s) in sorted(per_row.items(), key=lambda kv: -kv[1][1])]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"reproduce": cmd, "rating": args.rating, "rows": names, "per_row": {n: {"pearson": p, "spearman": s} for n, (p, s) in per_row.items()},
           "error_correlation_median": float(np.median(pairs)), "shared_agents": sorted(is_shared[is_shared].index),
           "reference": {"pearson": corr(ref)[0], "spearman": corr(ref)[1]},
           "reference_without_shared": {"pearson": corr(corrected)[0], "spearman": corr(corrected)[1]},
           "reference_without_k_largest": steps,
           "errors": {a: {"truth": float(truth[a]), **{n: float(errors.loc[a, n]) for n in errors.columns}} for a in errors.index}}
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
