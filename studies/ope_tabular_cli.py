"""ENIGMA as a user runs it, against exact values: the reference tabular problem through the CLI.

Writes the logs of ``enigma.ope.tabular.reference_problem()`` as JSONL, then runs the user's
commands in subprocesses, exactly as typed in a shell:

    enigma ingest jsonl logs.jsonl --out store --scale match=0:1 --scale short=0:1
    enigma estimate --experience store --target soft=python:enigma.ope.tabular:soft ... --encoder onehot
    enigma sample store python:enigma.ope.tabular:soft      (the same cached draws, for the saddle point)

and compares every estimate with the target's exact value (enumeration) and with the saddle
point of these very logs and draws (the certainty-equivalence value). Rows are settings of the
``dice`` section (overrides on params.yaml), all on the same logs and the same draws:

    .venv/bin/python studies/ope_tabular_cli.py                       # params.yaml as it is
    .venv/bin/python studies/ope_tabular_cli.py --log-seeds 0 1 2 --row 'old-default={"alpha_nu": 0.01}'

Output: studies/results/<tag>.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from enigma.ope.tabular import RATINGS, certainty_equivalence_value, reference_problem, write_jsonl
from bench_params import with_dice
from enigma.store.experience import ExperienceStore

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
BIN = Path(sys.executable).parent


def enigma(*args: str, cwd: Path) -> str:
    proc = subprocess.run([str(BIN / "enigma"), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"enigma {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def run_row(name, overrides, base, work, store, problem, args, log_seed) -> list[dict]:
    import pyarrow.parquet as pq

    params_path = work / f"params-{name}.yaml"
    params_path.write_text(yaml.safe_dump(with_dice(base, overrides)))
    specs = [f"--target={t}=python:enigma.ope.tabular:{t}" for t in args.targets]
    t0 = time.perf_counter()
    enigma(
        "estimate", "--experience", str(work / "store"), *specs, "--encoder", "onehot", "--out", str(work / f"out-{name}"),
        "--params", str(params_path), "--cache-dir", str(work / "cache"), "-n", str(args.n_samples), "--quiet", cwd=work,
    )
    seconds = time.perf_counter() - t0
    est = json.loads((work / f"out-{name}" / "estimates.json").read_text())
    out = []
    for t in args.targets:
        sampled = json.loads(enigma(
            "sample", str(work / "store"), f"python:enigma.ope.tabular:{t}", "-n", str(args.n_samples),
            "--cache-dir", str(work / "cache" / "samples"), "-o", str(work / f"targets-{t}.parquet"), "--quiet",
            "--params", str(params_path), cwd=work,
        ))
        ce = certainty_equivalence_value(store, pq.read_table(work / f"targets-{t}.parquet"))
        exact = problem.mdp.exact_value(problem.targets[t])
        diag = est["diagnostics"][t]["all"]
        for r in RATINGS:
            e = est["targets"][t][r]["estimate"]
            interval = est["targets"][t][r].get("interval")  # the sampling interval (null without resamples)
            out.append({
                "row": name, "log_seed": log_seed, "target": t, "rating": r, "estimate": e, "exact": exact[r], "saddle_point": ce[r],
                "error_exact": e - exact[r], "error_saddle": e - ce[r], "converged": diag.get("converged"),
                "iterations": diag.get("iterations"), "agent_calls": sampled["n_calls"],
                "distinct_states": sampled["n_unique_states"], "agent_turns": sampled["n_states"],
                "off_support_samples": est["diagnostics"][t].get("off_support_samples"),
                "seconds_all_targets": round(seconds, 1), "interval": interval,
                "covers_exact": None if not interval else bool(interval[0] <= exact[r] <= interval[1]),
            })
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues", type=int, default=8000)
    ap.add_argument("--log-seeds", type=int, nargs="+", default=[0], help="one set of logs per seed: their sampling error differs")
    ap.add_argument("--n-samples", type=int, default=1)
    ap.add_argument("--targets", nargs="*", default=sorted(reference_problem().targets))
    ap.add_argument("--row", action="append", default=[], help='NAME=JSON overrides of the dice section; none: params.yaml')
    ap.add_argument("--tag", default="ope_tabular_cli")
    ap.add_argument("--work", type=Path, default=None, help="keep the store and caches here (default: a temp dir)")
    args = ap.parse_args()

    rows = [("params.yaml", {})] + [(r.split("=", 1)[0], json.loads(r.split("=", 1)[1])) for r in args.row]
    problem = reference_problem()
    root = args.work or Path(tempfile.mkdtemp(prefix="enigma-tabular-"))
    base = yaml.safe_load((REPO / "params.yaml").read_text())
    results = []
    for log_seed in args.log_seeds:
        work = root / f"logs-{log_seed}"
        work.mkdir(parents=True, exist_ok=True)
        write_jsonl(problem.logs(args.dialogues, seed=log_seed), work / "logs.jsonl")
        scales = [a for r in RATINGS for a in ("--scale", f"{r}=0:1")]
        enigma("ingest", "jsonl", str(work / "logs.jsonl"), "--out", str(work / "store"), *scales, "--no-progress", cwd=work)
        store = ExperienceStore.open(work / "store")
        for name, overrides in rows:
            results += run_row(name, overrides, base, work, store, problem, args, log_seed)
    RESULTS.mkdir(exist_ok=True)
    meta = {"dialogues": args.dialogues, "log_seeds": args.log_seeds, "n_samples": args.n_samples, "rows": dict(rows)}
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    lines = [
        f"# ENIGMA through the CLI on the reference tabular problem ({args.dialogues} dialogues, n = {args.n_samples})",
        "",
        f"`{' '.join(['.venv/bin/python', 'studies/ope_tabular_cli.py'] + sys.argv[1:])}`",
        "",
        "Each set of logs (seed) is ingested from JSONL and every target estimated by `enigma estimate --encoder onehot` with",
        "`python:enigma.ope.tabular:<target>` specs. Error vs exact includes the logs' own sampling error; error vs the",
        "saddle point of the logs (the certainty-equivalence value of these logs and draws) is the estimator's own.",
        "",
        "| row | log seed | max abs error vs exact | max abs error vs saddle point of the logs | converged | off-support samples | intervals holding the exact value |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, _ in rows:
        for log_seed in args.log_seeds:
            rs = [x for x in results if x["row"] == name and x["log_seed"] == log_seed]
            off = sum(x["off_support_samples"] or 0 for x in rs) // len(RATINGS)
            lines.append(
                f"| {name} | {log_seed} | {max(abs(x['error_exact']) for x in rs):.4f} | {max(abs(x['error_saddle']) for x in rs):.4f} | "
                f"{sum(bool(x['converged']) for x in rs) // len(RATINGS)}/{len(args.targets)} | {off} | "
                + (f"{sum(bool(x['covers_exact']) for x in rs)}/{len(rs)}" if all(x["covers_exact"] is not None for x in rs) else "n/a")
                + " |"
            )
    lines += ["", "| row | log seed | target | rating | estimate | sampling interval | exact | saddle point | agent calls / distinct states / agent turns |",
              "|---|---|---|---|---|---|---|---|---|"]
    for x in results:
        lines.append(
            f"| {x['row']} | {x['log_seed']} | {x['target']} | {x['rating']} | {x['estimate']:.4f} | "
            + (f"[{x['interval'][0]:.4f}, {x['interval'][1]:.4f}]" if x.get("interval") else "n/a") + f" | {x['exact']:.4f} | "
            f"{x['saddle_point']:.4f} | {x['agent_calls']} / {x['distinct_states']} / {x['agent_turns']} |"
        )
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:10 + len(rows) * len(args.log_seeds)]))
    print(f"work dir: {root}")


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    main()
