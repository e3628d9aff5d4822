"""Per-agent cost of ENIGMA on a benchmark, this working tree against the code at a git ref
(with ``--dice``: this tree's arm with these overrides of ``estimators.enigma.dice``), paired: for each of the first ``--agents`` held-out agents, one
estimate with each version, alternating, each in a fresh process with ``--threads`` torch threads and the machine to itself
(the issue's budget: seconds per agent on 2 CPU cores). The estimates of the two versions are
compared too, so a speed change that moves the numbers shows.

    .venv/bin/dvc repro sample@see2019     # the store and target actions, if not there yet
    .venv/bin/python studies/ope_agent_cost.py see2019 --ref HEAD --agents 6 --tag ope_agent_cost_see2019
    .venv/bin/python studies/ope_agent_cost.py see2019 --dice '{"q_model": "fqe"}' --tag ope_fqe_cost_see2019
    .venv/bin/python studies/ope_agent_cost.py see2019 --ref HEAD~1 --dice '{"q_model": "fqe"}' --dice-both --tag T
    .venv/bin/python studies/ope_agent_cost.py see2019 --ref HEAD~1 --agent ID --agent ID2 --tag T   # named agents, e.g. the slowest
    .venv/bin/python studies/ope_agent_cost.py see2019 --ref HEAD --ref-dice '{"fqe": {"epochs": 20}}' --tag T   # an earlier default, the same code

Output: studies/results/<tag>.{md,json}: per agent and version the seconds of the whole
estimate and of its parts (the solve, the fitted Q when there is one, the bootstrap interval),
their ratio, the largest difference between the two versions' estimates, and of the interval:
its refits that stopped at ``dice.interval_steps``, their mean Newton steps, and the largest move
of an end as a share of the ref's width (e.g. ``--dice '{"interval_steps": 400}'``: does the
cap cut the interval short?).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
PARTS = {"solve_exact_nu": "solve", "fit_turn_q": "fitted Q", "bootstrap_estimates": "interval"}


def worker(benchmark: str, agent: str, params_path: str, threads: int) -> None:
    """One estimate, timed by parts; prints one JSON line."""
    import functools

    import torch

    import enigma.ope.trainer as trainer
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.store import heldout_agents
    from enigma.pipeline.train import estimate_agent
    from enigma.store.experience import ExperienceStore

    torch.set_num_threads(threads)
    parts: dict[str, float] = {}

    def timed(name: str) -> None:
        f = getattr(trainer, name)

        @functools.wraps(f)
        def g(*a, **k):
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                parts[PARTS[name]] = parts.get(PARTS[name], 0.0) + time.perf_counter() - t0

        setattr(trainer, name, g)

    for name in PARTS:
        timed(name)
    params = Params.load(params_path)
    b = params.benchmark(benchmark)
    store = ExperienceStore.open(b.store)
    if agent not in heldout_agents(b)[0]:
        raise SystemExit(f"{agent!r} is not a held-out agent of {benchmark}")
    # built as the benchmark builds it, in a form every arm's code has (the --ref arm's may predate
    # benchmark_estimator and, before 82aa2bd, knowledge bases)
    from enigma.estimators import build_estimator

    knowledge = getattr(b.config, "knowledge", None)
    est = build_estimator("enigma", params, **({"knowledge": knowledge} if knowledge else {}))
    targets = read_targets(b, agent)
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        rows = estimate_agent(b, est, agent, targets, store, None, out)
        seconds = time.perf_counter() - t0
    boot = json.loads(rows[0].get("diagnostics") or "{}").get("all", {}).get("bootstrap", {})
    print(json.dumps({"seconds": seconds, "parts": parts, "estimates": {r["rating"]: r["estimate"] for r in rows},
                      "intervals": {r["rating"]: [r.get("interval_low"), r.get("interval_high")] for r in rows},
                      # the refits: how many stopped at dice.interval_steps short of interval_tol
                      "bootstrap": {k: boot.get(k) for k in ("resamples", "unconverged", "mean_iterations", "mass_gap_max")}}))


def run_one(src: Path, benchmark: str, agent: str, params: Path, threads: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, __file__, "--worker", benchmark, agent, str(params), str(threads)],
                         cwd=REPO, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{agent} with {src}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--ref", default="HEAD", help="the code compared against (a git ref)")
    ap.add_argument("--agents", type=int, default=6, help="the first this many held-out agents")
    ap.add_argument("--agent", action="append", default=[], metavar="ID",
                    help="measure this held-out agent (repeatable; instead of the first --agents), e.g. the slowest in a rebuild's log")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--dice", default=None, metavar="JSON", help="this tree's arm: overrides of estimators.enigma.dice")
    ap.add_argument("--dice-both", action="store_true", help="the --dice overrides in the ref's arm too (the same settings, two versions of the code)")
    ap.add_argument("--ref-dice", default=None, metavar="JSON",
                    help="the ref's arm: overrides of estimators.enigma.dice (e.g. an earlier default, with --ref HEAD: two settings, the same code)")
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    if args.ref_dice and args.dice_both:
        ap.error("--ref-dice and --dice-both: give the ref's arm one set of overrides")

    from bench_params import write_row_params
    from provenance import code_version
    from enigma.params import Params, load_yaml
    from enigma.pipeline.store import heldout_agents

    heldout = heldout_agents(Params.load(args.params).benchmark(args.benchmark))[0]
    unknown = [a for a in args.agent if a not in heldout]
    if unknown:
        ap.error(f"--agent {unknown[0]!r} is not a held-out agent of {args.benchmark}")
    agents = args.agent or heldout[: args.agents]
    sha = subprocess.run(["git", "rev-parse", "--short", args.ref], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory(dir=REPO.parent) as tmp:
        wt = Path(tmp) / "ref"
        new_params = args.params
        if args.dice:
            new_params = write_row_params(Path(tmp) / "new", load_yaml(args.params), json.loads(args.dice))
        ref_params = new_params if args.dice_both else args.params
        if args.ref_dice:
            ref_params = write_row_params(Path(tmp) / "ref_arm", load_yaml(args.params), json.loads(args.ref_dice))
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(wt), sha], cwd=REPO, check=True)
        try:
            for i, agent in enumerate(agents):
                # alternate which version goes first, so neither always meets a warm or a cold machine
                order = [("ref", wt / "src"), ("new", REPO / "src")][:: 1 if i % 2 == 0 else -1]
                got = {name: run_one(src, args.benchmark, agent, ref_params if name == "ref" else new_params, args.threads)
                       for name, src in order}
                diff = max(abs(got["new"]["estimates"][r] - got["ref"]["estimates"][r]) for r in got["ref"]["estimates"])
                ends = [(abs(a - b), abs(a - b) / (hi - lo)) for r, (lo, hi) in got["ref"]["intervals"].items() if lo is not None and hi > lo
                        for a, b in zip(got["new"]["intervals"][r], (lo, hi)) if a is not None]
                rows.append({"agent": agent, "ref": got["ref"], "new": got["new"], "max_estimate_diff": diff,
                             "max_interval_end_diff": max(e[0] for e in ends) if ends else None,
                             "max_interval_end_diff_over_width": max(e[1] for e in ends) if ends else None})
                print(f"{agent}: ref {got['ref']['seconds']:.1f}s, new {got['new']['seconds']:.1f}s, "
                      f"largest estimate difference {diff:.2e}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=REPO, check=False)

    ratio = [r["new"]["seconds"] / r["ref"]["seconds"] for r in rows]
    summary = {
        "command": shlex.join([".venv/bin/python", "studies/ope_agent_cost.py", *sys.argv[1:]]),
        "code": code_version(), "ref": sha, "dice_overrides": json.loads(args.dice) if args.dice else None, "dice_both": args.dice_both,
        "ref_dice_overrides": json.loads(args.ref_dice) if args.ref_dice else None,
        "threads": args.threads,
        "agents": rows,
        "median_seconds": {v: float(np.median([r[v]["seconds"] for r in rows])) for v in ("ref", "new")},
        "max_seconds": {v: float(np.max([r[v]["seconds"] for r in rows])) for v in ("ref", "new")},
        "median_ratio": float(np.median(ratio)), "max_estimate_diff": float(max(r["max_estimate_diff"] for r in rows)),
        "max_interval_end_diff": max((r["max_interval_end_diff"] for r in rows if r["max_interval_end_diff"] is not None), default=None),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(summary, indent=1) + "\n")
    names = list(PARTS.values())
    arm = f"this tree with `{args.dice}`" if args.dice else "this tree"
    ref_arm = f"{sha} with `{args.ref_dice}`" if args.ref_dice else sha
    lines = [f"# ENIGMA's cost per agent on {args.benchmark}: {arm} against {ref_arm}{' with the same settings' if args.dice_both else ''}, paired", "",
             f"`{summary['command']}` (this tree: {summary['code']})", "",
             f"{len(rows)} held-out agents, one estimate each with each version, alternating, in a fresh process with "
             f"{args.threads} torch thread(s) and the machine to itself; seconds of the estimate (the parts: "
             f"{', '.join(names)}).", "",
             f"**Median {summary['median_seconds']['new']:.1f} s against {summary['median_seconds']['ref']:.1f} s "
             f"(new / ref {summary['median_ratio']:.2f}); the slowest agent {summary['max_seconds']['new']:.1f} s against "
             f"{summary['max_seconds']['ref']:.1f} s.** Largest difference between the versions' estimates: "
             f"{summary['max_estimate_diff']:.1e}"
             + (f"; between their interval ends: {summary['max_interval_end_diff']:.1e}." if summary["max_interval_end_diff"] is not None else ".")
             + "", "",
             "| agent | ref s | new s | new / ref | " + " | ".join(f"{n} ref / new" for n in names)
             + " | refits at the step cap, ref / new | mean steps a refit, ref / new | largest interval end move / width |",
             "|---|---|---|---|" + "---|" * len(names) + "---|---|---|"]

    def pair(r: dict, key: str, fmt: str) -> str:
        v = [r[arm]["bootstrap"].get(key) for arm in ("ref", "new")]
        return " / ".join("n/a" if x is None else format(x, fmt) for x in v)

    for r in rows:
        cells = [f"{r['ref']['parts'].get(n, 0):.1f} / {r['new']['parts'].get(n, 0):.1f}" for n in names]
        move = r["max_interval_end_diff_over_width"]
        lines.append(f"| {r['agent']} | {r['ref']['seconds']:.1f} | {r['new']['seconds']:.1f} | "
                     f"{r['new']['seconds'] / r['ref']['seconds']:.2f} | " + " | ".join(cells)
                     + f" | {pair(r, 'unconverged', 'd')} | {pair(r, 'mean_iterations', '.1f')} | {'n/a' if move is None else f'{move:.3f}'} |")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
