"""Does the cap on a bootstrap refit's Newton steps (``dice.interval_steps``) move ENIGMA's
interval? Each named held-out agent is estimated twice through the pipeline's own path
(``enigma.pipeline.train.estimate_agent``, fresh, one after the other): with params.yaml's
settings and with ``interval_steps`` raised to ``--steps``. The resamples are the same (seeded),
so the two intervals differ only where a refit stopped at the cap short of ``interval_tol``.

    .venv/bin/python benchmarks/interval_refit_steps.py see2019 \\
        --agent interesting_nidf_model_bfw_setting_08 --agent interesting_nidf_model_ct_setting9 --steps 400

Per agent and setting: seconds (the whole agent, one torch thread), the refits' mean Newton steps,
how many stopped at the cap, the largest slot-mass gap a refit ended with; per agent, the largest
move of an interval endpoint over all ratings, as a share of that interval's width.
Output: benchmarks/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench_params import write_row_params
from provenance import code_version

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def estimate(benchmark: str, agent: str, params_path: Path, out: Path) -> tuple[list[dict], float]:
    """One fresh estimate of ``agent`` through the pipeline's path: its result rows and seconds."""
    from enigma.estimators import build_estimator
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import estimate_agent
    from enigma.store.experience import ExperienceStore

    params = Params.load(params_path)
    b = params.benchmark(benchmark)
    est = build_estimator("enigma", params)
    t0 = time.perf_counter()
    rows = estimate_agent(b, est, agent, read_targets(b, agent), ExperienceStore.open(b.store), None, out)
    return rows, time.perf_counter() - t0


def run_agent(benchmark: str, agent: str, params_path: Path, out: Path) -> dict:
    """Seconds, the bootstrap's diagnostics and the intervals of one fresh estimate."""
    rows, seconds = estimate(benchmark, agent, params_path, out)
    boot = json.loads(rows[0]["diagnostics"])["all"]["bootstrap"]
    return {"seconds": seconds, "mean_iterations": boot["mean_iterations"], "unconverged": boot["unconverged"],
            "resamples": boot["resamples"], "mass_gap_max": boot["mass_gap_max"],
            "intervals": {r["rating"]: [r["interval_low"], r["interval_high"]] for r in rows}}


def largest_shift(a: dict, b: dict) -> float:
    """The largest |endpoint of b - endpoint of a| over ratings, as a share of a's width."""
    return max(max(abs(b[r][0] - a[r][0]), abs(b[r][1] - a[r][1])) / (a[r][1] - a[r][0]) for r in a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--agent", action="append", required=True)
    ap.add_argument("--steps", type=int, default=400, help="interval_steps of the second run")
    ap.add_argument("--tag", default=None)
    args = ap.parse_args()
    tag = args.tag or f"interval_refit_steps_{args.benchmark}"

    import torch

    torch.set_num_threads(1)
    from enigma.estimators import dice_config
    from enigma.params import Params

    data = yaml.safe_load((REPO / "params.yaml").read_text())
    default_steps = dice_config("enigma", Params.load(REPO / "params.yaml")).interval_steps
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        # untimed: the first run in a process reads the sentence-vector cache from disk
        estimate(args.benchmark, args.agent[0], write_row_params(Path(tmp) / "warm", data, {"interval_resamples": 0}),
                  Path(tmp) / "warm-results")
        for agent in args.agent:
            results[agent] = {}
            for steps in (default_steps, args.steps):
                params_path = write_row_params(Path(tmp) / f"steps{steps}", data, {"interval_steps": steps})
                r = run_agent(args.benchmark, agent, params_path, Path(tmp) / f"results{steps}-{agent}")
                results[agent][str(steps)] = r
                print(f"{agent} interval_steps {steps}: {r['seconds']:.1f} s, {r['mean_iterations']:.1f} steps a refit, "
                      f"{r['unconverged']} of {r['resamples']} at the cap, largest gap {r['mass_gap_max']:.2g}", flush=True)
            results[agent]["largest_endpoint_shift"] = largest_shift(results[agent][str(default_steps)]["intervals"],
                                                                     results[agent][str(args.steps)]["intervals"])

    command = shlex.join([".venv/bin/python", "benchmarks/interval_refit_steps.py", *sys.argv[1:]])
    lines = [f"# The refits' step cap and ENIGMA's interval ({args.benchmark})", "", f"`{command}`", "",
             f"Code: {code_version()}. One torch thread; each agent's two runs one after the other, after an untimed warm-up run.", "",
             "| agent | interval_steps | seconds | mean steps a refit | refits at the cap | largest slot-mass gap | largest endpoint move / width |",
             "|---|---|---|---|---|---|---|"]
    for agent, r in results.items():
        for steps in (default_steps, args.steps):
            x = r[str(steps)]
            move = f"{r['largest_endpoint_shift']:.3f}" if steps == args.steps else ""
            lines.append(f"| {agent} | {steps} | {x['seconds']:.1f} | {x['mean_iterations']:.1f} | {x['unconverged']} of {x['resamples']} | "
                         f"{x['mass_gap_max']:.2g} | {move} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{tag}.json").write_text(json.dumps({"reproduce": command, "code": code_version(), "agents": results}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
