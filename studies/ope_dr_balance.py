"""Which runs the doubly robust value's guard (``dice.dr_slot_tol``, ``enigma.ope.guards.
dr_balance_problem``) flags, on the rows of the gradient descent-ascent study (issue 14,
direction 2) and ENIGMA's default beside them: per row, the slot masses' largest departure from
their mean (max over slots of |E_D[zeta | slot] / mean - 1|) over the held-out agents, how many
agents the guard flags, the largest |estimate| the row reported and its mean Pearson (from the
study's committed results). The rows' saved results are read, not rerun; they come from

    .venv/bin/python studies/ope_enigma_rows.py B --tag ope_gda_dr_B --row 'fqe={"interval_resamples": 0}' --row 'gda={...}' ...

(the commands are the first line of studies/results/ope_gda_{dr,mlp,slotnorm}_B.md), so a
missing row names the study to run. Output: studies/results/ope_dr_balance.md and .json.

    .venv/bin/python studies/ope_dr_balance.py
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
STUDIES = ["ope_gda_dr", "ope_gda_mlp", "ope_gda_slotnorm"]  # their committed tables hold every row's scores
ROWS = ["fqe", "gda", "gda-dr", "gda-sn-dr", "gda-mlp", "gda-mlp-dr", "gda-mlp-sn-dr"]


def study_rows(bench: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for study in STUDIES:
        path = RESULTS / f"{study}_{bench}.json"
        if not path.exists():
            sys.exit(f"{path}: missing (the study's command is in docs/estimator.md)")
        out.update(json.loads(path.read_text())["rows"])
    return out


def saved_runs(work: Path, bench: str, row: str) -> list[dict]:
    """One entry per held-out agent that has weights (a diverged agent has none; its study
    counts it as failed): its run's diagnostics and every rating's estimate."""
    from enigma.evaluation.results import read_results

    results = work / bench / row / "results"
    if not results.is_dir():
        return []
    part = read_results(results)
    if "error" in part:
        part = part[part.error.isna()]
    runs = []
    for _, rows in part.groupby("agent_id"):
        diag = json.loads(rows.diagnostics.iloc[0])
        runs.append({"slot_means": diag["all"]["slot_zeta_mean"], "config": diag["config"], "estimates": rows.estimate.dropna().tolist()})
    return runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmarks", nargs="*", default=["airline", "see2019"])
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "ope_rows")
    args = ap.parse_args()

    from enigma.ope.config import ValueConfig
    from enigma.ope.guards import dr_balance_problem
    from provenance import code_version

    out: dict[str, dict] = {}
    for bench in args.benchmarks:
        scores = study_rows(bench)
        out[bench] = {}
        for row in ROWS:
            runs = saved_runs(args.work, bench, row)
            score = scores.get(row, {})
            if not runs:
                if score and score.get("failed_agents") and not score.get("agents"):  # every agent diverged: no weights to read
                    out[bench][row] = {"agents": 0, "failed_agents": score["failed_agents"]}
                    continue
                sys.exit(f"{args.work / bench / row}: no saved results (run the study of docs/estimator.md, "
                         "'Nonlinear heads under gradient descent-ascent')")
            gaps, flagged = [], 0
            for run in runs:
                m = np.asarray(run["slot_means"], dtype=float)
                gaps.append(float(np.max(np.abs(m / m.mean() - 1.0))))
                value_cfg = ValueConfig(kind="dr", dr_slot_tol=run["config"]["dr_slot_tol"])  # what the guard says of the dr value
                flagged += dr_balance_problem(m, value_cfg) is not None
            value = runs[0]["config"]["value"]
            out[bench][row] = {
                "agents": len(runs), "failed_agents": score.get("failed_agents", 0), "value": value,
                "solver": runs[0]["config"]["solver"], "head_hidden": runs[0]["config"].get("head_hidden", 0),
                "slot_normalise": runs[0]["config"].get("slot_normalise", False),
                "slot_gap_median": float(np.median(gaps)), "slot_gap_min": float(np.min(gaps)), "slot_gap_max": float(np.max(gaps)),
                "flagged_if_dr": flagged, "largest_abs_estimate": float(max(abs(e) for r in runs for e in r["estimates"])),
                "mean_pearson": score.get("mean_pearson"),
            }
    cmd = shlex.join([".venv/bin/python", "studies/ope_dr_balance.py", *sys.argv[1:]])
    tol = ValueConfig().dr_slot_tol
    lines = ["# The doubly robust value's slot-balance guard on the gradient descent-ascent study's rows", "", f"`{cmd}`", "",
             f"Code: {code_version()}.", "",
             "Per row (27 held-out agents, saved results of `studies/ope_enigma_rows.py`): the slot masses' largest "
             "departure from their mean, max over slots of |E_D[zeta | slot] / mean - 1| (min, median, max over agents); "
             f"how many agents `dice.dr_slot_tol` = {tol:g} flags when the value read is `dr`; the largest |estimate| "
             "the row reported (ratings are on [0, 1]); the row's mean Pearson (its study's table).", ""]
    for bench, rows in out.items():
        lines += [f"## {bench}", "", "| row | solver | heads | slot_normalise | value | slot gap min / median / max | flagged if dr "
                  "| largest abs estimate | mean Pearson |", "|---|---|---|---|---|---|---|---|---|"]
        for row, r in rows.items():
            if not r["agents"]:
                lines.append(f"| {row} | | | | | all {r['failed_agents']} agents diverged (no estimate) | | | |")
                continue
            heads = "linear" if r["head_hidden"] == 0 else f"MLP {r['head_hidden']}"
            mp = "n/a" if r["mean_pearson"] is None else f"{r['mean_pearson']:.3f}"
            failed = f" ({r['failed_agents']} failed)" if r["failed_agents"] else ""
            lines.append(f"| {row} | {r['solver']} | {heads} | {r['slot_normalise']} | {r['value']} | {r['slot_gap_min']:.3f} / "
                         f"{r['slot_gap_median']:.3f} / {r['slot_gap_max']:.3f} | {r['flagged_if_dr']}/{r['agents']} | "
                         f"{r['largest_abs_estimate']:.3g} | {mp}{failed} |")
        lines.append("")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ope_dr_balance.md").write_text("\n".join(lines))
    (RESULTS / "ope_dr_balance.json").write_text(json.dumps({"reproduce": cmd, "code": code_version(), "dr_slot_tol": tol, "rows": out}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
