"""The same ENIGMA row on two devices, agent by agent: how far apart its estimates are, and its
cost per agent on each (issue 14's GPU check; ``dice.device``).

The training half runs on the machine with the GPU, one row per device, on the same embedding
cache so that both read the same sentence vectors (``studies/ope_finetune_gpu.py``, one call
per row, after the store's and replies' texts are embedded once):

    .venv/bin/python studies/ope_finetune_gpu.py airline --workers 8 --row 'cuda={"device": "cuda"}' \
        --work data/work/ope_rows_gpu --timing timing_cuda.json --gpu-log gpu_cuda.csv
    .venv/bin/python studies/ope_finetune_gpu.py airline --workers 12 --row 'cpu={"device": "cpu"}' \
        --work data/work/ope_rows_gpu --timing timing_cpu.json

This half reads the two rows' result files (and the run's timing, merged into one file):

    .venv/bin/python studies/ope_devices.py data/work/ope_rows_gpu/airline/cuda/results \\
        data/work/ope_rows_gpu/airline/cpu/results --timing studies/results/ope_devices_gpu.json \\
        --tag ope_devices_airline_agents

Per held-out agent and rating: the reported (doubly robust) estimate, the zeta-weighted value
alone (the Lagrangian's solution, before the fitted Q), the interval's bounds, and the solver's
iterations. Writes studies/results/<tag>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def _rows(results: Path) -> dict[tuple[str, str], dict]:
    from enigma.evaluation.results import read_results

    out = {}
    for row in read_results(results).query("estimator == 'enigma'").to_dict("records"):
        diag = json.loads(row["diagnostics"])
        out[(row["agent_id"], row["rating"])] = {
            "dr": row["estimate"], "weighted": diag["all"]["values"][row["rating"]]["weighted"],
            "low": row["interval_low"], "high": row["interval_high"], "iterations": diag["all"]["iterations"],
            "seconds": row["seconds"], "device": diag["config"]["device"],
        }
    return out


def _spread(diffs: list[float]) -> dict:
    return {"max": max(diffs), "median": statistics.median(diffs), "mean": statistics.fmean(diffs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a", type=Path, help="one row's results folder (holds enigma/)")
    ap.add_argument("b", type=Path, help="the other row's")
    ap.add_argument("--timing", type=Path, help="the device run's timing file (studies/ope_finetune_gpu.py --timing, one per row, merged)")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()

    a, b = _rows(args.a), _rows(args.b)
    keys = sorted(set(a) & set(b))
    if not keys:
        sys.exit(f"no (agent, rating) in both {args.a} and {args.b}")
    agents = sorted({k[0] for k in keys})
    diff = {f: [abs(a[k][f] - b[k][f]) for k in keys] for f in ("dr", "weighted", "low", "high")}
    same_iterations = sum(a[k]["iterations"] == b[k]["iterations"] for k in keys)
    seconds = {name: [rows[(agent, keys[0][1])]["seconds"] for agent in agents] for name, rows in (("a", a), ("b", b))}
    summary = {
        "a": str(args.a), "b": str(args.b), "devices": {"a": a[keys[0]]["device"], "b": b[keys[0]]["device"]},
        "agents": len(agents), "estimates": len(keys), "only_in_one": len(set(a) ^ set(b)),
        "abs_difference": {f: _spread(d) for f, d in diff.items()},
        "same_solver_iterations": same_iterations,
        "seconds_per_agent": {name: {"median": statistics.median(s), "sum": sum(s)} for name, s in seconds.items()},
        "timing": json.loads(args.timing.read_text()) if args.timing else None,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(summary, indent=1) + "\n")

    da, db = summary["devices"]["a"], summary["devices"]["b"]
    lines = [
        f"# The same ENIGMA row on two devices: {da} against {db}", "",
        f"`.venv/bin/python studies/ope_devices.py {' '.join(sys.argv[1:])}`", "",
        f"{len(agents)} held-out agents, {len(keys)} estimates in both ({summary['only_in_one']} in one only).", "",
        f"| quantity | max abs difference | median | mean |", "|---|---|---|---|",
    ]
    names = {"dr": "reported estimate (doubly robust)", "weighted": "zeta-weighted value (the solver's solution alone)",
             "low": "interval low", "high": "interval high"}
    for f, s in summary["abs_difference"].items():
        lines.append(f"| {names[f]} | {s['max']:.2e} | {s['median']:.2e} | {s['mean']:.2e} |")
    sa, sb = summary["seconds_per_agent"]["a"], summary["seconds_per_agent"]["b"]
    lines += [
        "", f"Solver iterations equal on {same_iterations} of {len(keys)} estimates.", "",
        f"Seconds per agent as each result recorded them (several processes sharing the machine): "
        f"{da} median {sa['median']:.1f} s (sum {sa['sum']:.0f} s), {db} median {sb['median']:.1f} s (sum {sb['sum']:.0f} s); "
        f"ratio of medians {sa['median'] / sb['median']:.2f}.",
    ]
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
