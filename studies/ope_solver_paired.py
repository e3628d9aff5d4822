"""ENIGMA's two solvers on the same features, paired: exact_nu (params.yaml's default) against
gradient descent-ascent (``enigma-gda``, the default until exact_nu), on both benchmarks.

Reads the leave-one-agent-out results the DVC stages wrote (``enigma`` from the main results
dir, ``enigma-gda`` from the full one), scores both with the same bootstrap resamples of the
agents and reports the paired difference of the mean Pearson and Spearman over the ratings, the
reward correlations, and how many of exact_nu's runs converged.

    .venv/bin/dvc repro report_full@airline report_full@see2019   # the results, if not there yet
    .venv/bin/python studies/ope_solver_paired.py              # writes studies/results/ope_solver_paired.{json,md}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # flows: the benchmarks' settings

import enigma  # noqa: E402,F401  (offline environment)

RESULTS = REPO / "studies" / "results"
SOLVERS = {"exact_nu": "enigma", "gradient descent-ascent": "enigma-gda"}


def main() -> None:
    import pandas as pd

    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.evaluation.results import read_results
    from enigma.evaluation.truth import read_truth, truth_wide
    from enigma.params import Params

    out: dict = {"reproduce": ".venv/bin/python studies/ope_solver_paired.py", "benchmarks": {}}
    lines = ["# ENIGMA: exact_nu against gradient descent-ascent, paired (studies/ope_solver_paired.py)", "",
             "Both on the same features and held-out agents (`enigma` and `enigma-gda` of the DVC stages); differences are",
             "exact_nu minus gradient descent-ascent with a paired bootstrap over agents (1000 resamples, seed 0).", "",
             "| benchmark | solver | mean Pearson [95% CI] | mean Spearman | reward Pearson | reward Spearman | converged |",
             "|---|---|---|---|---|---|---|"]
    diffs = []
    for name in ("airline", "see2019"):
        b = Params.load(REPO / "params.yaml").benchmark(name)
        rows = pd.concat([read_results(REPO / b.results_dir()), read_results(REPO / b.results_dir(full=True))], ignore_index=True)
        truth = truth_wide(read_truth(REPO / b.truth))
        ratings = sorted(set(rows[rows.estimator == "enigma"].rating))
        scores, info = {}, {}
        for label, est in SOLVERS.items():
            part = rows[rows.estimator == est]
            estimates = part.pivot(index="agent_id", columns="rating", values="estimate")
            scores[label] = score_estimator(est, estimates, truth.loc[estimates.index], ratings)
            diag = [json.loads(d)["all"] for d in part.drop_duplicates("agent_id").diagnostics]
            conv = sum(bool(d.get("converged")) for d in diag) if est == "enigma" else None
            s = scores[label]
            info[label] = {
                "mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
                "mean_spearman": s.means["spearman"],
                "reward_pearson": s.per_rating["reward"]["pearson"], "reward_spearman": s.per_rating["reward"]["spearman"],
                "converged": conv, "agents": len(s.agents),
            }
            lines.append(
                f"| {name} | {label} | {s.means['pearson']:.3f} [{s.mean_ci['pearson'][0]:.3f}, {s.mean_ci['pearson'][1]:.3f}] | "
                f"{s.means['spearman']:.3f} | {info[label]['reward_pearson']:.3f} | {info[label]['reward_spearman']:.3f} | "
                f"{'%d/%d' % (conv, len(diag)) if conv is not None else 'no saddle point (ope_convergence.md)'} |"
            )
        paired = {st: paired_difference(scores["exact_nu"], scores["gradient descent-ascent"], st, 0.95) for st in ("pearson", "spearman")}
        out["benchmarks"][name] = {"solvers": info, "exact_nu_minus_gda": paired}
        for st, p in paired.items():
            diffs.append(f"- {name}, mean {st}: {p['difference']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] "
                         f"(exact_nu better in {100 * p['share_of_resamples_a_better']:.0f}% of resamples)")
    lines += ["", "Paired difference, exact_nu minus gradient descent-ascent:", "", *diffs, ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ope_solver_paired.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    (RESULTS / "ope_solver_paired.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
