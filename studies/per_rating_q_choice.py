"""How much a per-rating choice between two ENIGMA rows could gain: for each held-out agent and
rating, take row B's estimate where B's leave-one-agent-out estimates of the *other* agents
correlate better with their truth than row A's, else row A's; score the chosen estimates paired
against row A.

It reads two rows that ``studies/ope_enigma_rows.py`` already computed (their results under
``--work``), and fits nothing. The choice for agent h reads no rating of h directly, but the
other agents' estimates it compares were each fitted on logs that include h's dialogues, so it
is an optimistic bound on a strict choice (one fitted inside each fold's training agents only):
if this bound gains little, the strict choice is not worth its cost.

    .venv/bin/python studies/per_rating_q_choice.py see2019 --work data/work/ope_rows_fqeh \\
        --a default --b lstd --tag per_rating_q_choice_see2019

Output: studies/results/<tag>.md and .json (per rating: how many agents took B; Pearson of A,
B and the chosen; the mean over ratings with the paired difference against A).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def choose_per_rating(a: pd.DataFrame, b: pd.DataFrame, truth: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """[agents x ratings] B's estimate where B correlates better than A over the other agents."""
    chosen, took_b = a.copy(), {r: 0 for r in a.columns}
    for h in a.index:
        rest = a.index.drop(h)
        for r in a.columns:
            if np.corrcoef(b.loc[rest, r], truth.loc[rest, r])[0, 1] > np.corrcoef(a.loc[rest, r], truth.loc[rest, r])[0, 1]:
                chosen.loc[h, r] = b.loc[h, r]
                took_b[r] += 1
    return chosen, took_b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmark")
    ap.add_argument("--work", type=Path, required=True, help="the --work folder of ope_enigma_rows.py")
    ap.add_argument("--a", required=True, help="the reference row")
    ap.add_argument("--b", required=True, help="the row chosen per rating where it does better on the other agents")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "studies"))
    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide
    from enigma.params import Params
    from provenance import code_version

    bench = Params.load(args.params).benchmark(args.benchmark)
    truth = truth_wide(read_truth(REPO / bench.truth))

    def estimates(row: str) -> pd.DataFrame:
        path = args.work / args.benchmark / row / "results"
        if not path.is_dir():
            sys.exit(f"{path}: no results of row {row!r}; run studies/ope_enigma_rows.py {args.benchmark} with that row first")
        part = read_results(path)
        return part[part.estimator == "enigma"].pivot(index="agent_id", columns="rating", values="estimate").sort_index()

    a, b = estimates(args.a), estimates(args.b)
    if not a.index.equals(b.index) or not a.columns.equals(b.columns):
        sys.exit(f"rows {args.a!r} and {args.b!r} hold different agents or ratings")
    t = truth.loc[a.index, a.columns]
    chosen, took_b = choose_per_rating(a, b, t)
    ratings = list(a.columns)
    scores = {name: score_estimator(name, e, t, ratings) for name, e in ((args.a, a), (args.b, b), ("chosen", chosen))}
    diff = {name: paired_difference(scores[name], scores[args.a], "pearson", 0.95) for name in (args.b, "chosen")}

    cmd = shlex.join([".venv/bin/python", "studies/per_rating_q_choice.py", *sys.argv[1:]])
    lines = [f"# A per-rating choice between two ENIGMA rows on {args.benchmark}: its optimistic bound", "",
             f"`{cmd}` (code: {code_version()})", "",
             f"Per held-out agent and rating: row `{args.b}`'s estimate where its estimates of the other {len(a) - 1} agents "
             f"correlate better with their truth than row `{args.a}`'s, else `{args.a}`'s. Those other estimates were fitted "
             "on logs that include the held-out agent's, so this bounds a strict choice from above.", "",
             f"| rating | agents that took {args.b} | Pearson {args.a} | Pearson {args.b} | Pearson chosen |", "|---|---|---|---|---|"]
    for r in ratings:
        lines.append(f"| {r} | {took_b[r]} of {len(a)} | " + " | ".join(f"{scores[n].per_rating[r]['pearson']:.2f}" for n in (args.a, args.b, "chosen")) + " |")
    lines.append("| mean | | " + " | ".join(f"{scores[n].means['pearson']:.3f}" for n in (args.a, args.b, "chosen")) + " |")
    lines += ["", f"Paired against `{args.a}` (1000 bootstrap resamples of the agents, mean Pearson over ratings):", ""]
    lines += [f"- {n} minus {args.a}: {d['difference']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]" for n, d in diff.items()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"reproduce": cmd, "took_b": took_b, "mean_pearson": {n: s.means["pearson"] for n, s in scores.items()},
           "pearson_per_rating": {n: {r: s.per_rating[r]["pearson"] for r in ratings} for n, s in scores.items()},
           "minus_" + args.a: diff}
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
