"""Recompute the ENIGMA paper's self-play evaluation (SPE) correlations on See 2019 through
``enigma.evaluation`` and record them with the averaging that matches the paper.

    .venv/bin/python studies/evaluation_paper_spe.py   # -> studies/results/evaluation_paper_spe.json
"""

from __future__ import annotations

import json
from pathlib import Path

from enigma.evaluation.config import ReportConfig
from enigma.evaluation.paper_spe import paper_spe_summary

OUT = Path(__file__).parent / "results" / "evaluation_paper_spe.json"
PAPER = {"default": (0.591, 0.435), "hard": (0.356, 0.143)}
NINE = ["avoid_rep", "enjoy", "fluency", "inquisitive", "interest", "listen", "make_sense", "persona_guess", "turing"]


def main() -> None:
    out = {}
    for variant, (p, s) in PAPER.items():
        row = {"paper": {"mean_pearson": p, "mean_spearman": s}}
        for label, ratings in (("all_ten_with_reward", None), ("nine_questions_only", NINE)):
            summ = paper_spe_summary(variant, config=ReportConfig(ratings=ratings, plots=False))
            (est,) = summ["estimators"].values()
            row[label] = {
                "n_agents": summ["n_agents"],
                "ratings": summ["ratings"],
                **{k: est[k] for k in ("mean_pearson", "mean_spearman", "mean_kendall",
                                       "mean_pearson_ci95", "mean_spearman_ci95")},
                "per_rating_pearson": {r: est[r]["pearson"] for r in summ["ratings"]},
                "matches_paper_to_3_decimals": round(est["mean_pearson"], 3) == p and round(est["mean_spearman"], 3) == s,
            }
        out[variant] = row
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    for v, row in out.items():
        a, b = row["all_ten_with_reward"], row["nine_questions_only"]
        print(f"{v}: paper {row['paper']}; ten incl. reward {a['mean_pearson']:.3f}/{a['mean_spearman']:.3f} "
              f"(match {a['matches_paper_to_3_decimals']}); nine {b['mean_pearson']:.3f}/{b['mean_spearman']:.3f}")


if __name__ == "__main__":
    main()
