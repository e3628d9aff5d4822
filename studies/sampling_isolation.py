"""What running a ``python:`` agent in a process of its own costs (``sample.agents.python``):
``enigma sample`` of one airline seller on a simulated store, the agent in its worker process
(``isolate: true``, the default) against in the command's process (``isolate: false``), and,
with ``--before-src``, against the code before the worker existed. Every run starts from an
empty cache; the runs alternate, so the machine's load falls on all of them alike.

Run from the repository root:
    git archive 3accc72 src | tar -x -C /tmp/before      # optional: the code before
    .venv/bin/python studies/sampling_isolation.py --before-src /tmp/before/src
Writes studies/results/sampling_isolation.json and .md. On the shared 2-core machines the
timings are noisy: read the medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SELLER = "expert"
COMMAND = "enigma sample STORE python:enigma.sim.sellers:expert -x expert --cache-dir EMPTY -o OUT --no-progress --params P"


def enigma(args: list[str], src: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{REPO}")
    return subprocess.run([sys.executable, "-c", "from enigma.cli import app; app()", *map(str, args)],
                          env=env, capture_output=True, text=True, check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dialogues-per-agent", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--before-src", type=Path, default=None, help="src/ of the code before the worker process")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = yaml.safe_load((REPO / "params.yaml").read_text())
        modes: dict[str, tuple[Path, Path]] = {}
        for isolate in (True, False):
            base["sample"]["agents"]["python"]["isolate"] = isolate
            (tmp / f"{isolate}.yaml").write_text(yaml.safe_dump(base))
            modes[f"isolate: {str(isolate).lower()}"] = (REPO / "src", tmp / f"{isolate}.yaml")
        if args.before_src:
            del base["sample"]["agents"]["python"]
            (tmp / "before.yaml").write_text(yaml.safe_dump(base))
            modes["before (in-process, no worker code)"] = (args.before_src.resolve(), tmp / "before.yaml")
        enigma(["simulate", "--out", tmp / "store", "--dialogues-per-agent", args.dialogues_per_agent,
                "--truth-rollouts", 20, "--no-progress", "--params", tmp / "True.yaml"], REPO / "src")
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for k in range(args.repeats):
            for m, (mode, (src, params)) in enumerate(modes.items()):
                out, cache = tmp / f"out-{k}-{m}.parquet", tmp / f"cache-{k}-{m}"  # an empty cache every run
                t0 = time.perf_counter()
                r = enigma(["sample", tmp / "store", f"python:enigma.sim.sellers:{SELLER}", "-x", SELLER, "--cache-dir", cache,
                            "-o", out, "--no-progress", "--params", params], src)
                wall = time.perf_counter() - t0
                summary = json.loads(r.stdout.strip().splitlines()[-1])
                runs[mode].append({"wall_s": wall, "sampling_s": summary["seconds"], "calls": summary["n_called"],
                                   "rows": summary["rows"], "sha256": hashlib.sha256(out.read_bytes()).hexdigest()})
                print(mode, json.dumps(runs[mode][-1]), flush=True)
    rows = []
    for mode, rs in runs.items():
        sampling = statistics.median(r["sampling_s"] for r in rs)
        rows.append({"mode": mode, "runs": len(rs), "calls": rs[0]["calls"], "rows": rs[0]["rows"],
                     "wall_s_median": round(statistics.median(r["wall_s"] for r in rs), 3),
                     "wall_s_min": round(min(r["wall_s"] for r in rs), 3),
                     "sampling_s_median": round(sampling, 3),
                     "sampling_s_min": round(min(r["sampling_s"] for r in rs), 3),
                     "ms_per_call": round(1000 * sampling / rs[0]["calls"], 4),
                     "outputs": sorted({r["sha256"] for r in rs})})
    same = len({s for row in rows for s in row["outputs"]}) == 1
    result = {"command": COMMAND, "seller": SELLER, "dialogues_per_agent": args.dialogues_per_agent,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)", "python": platform.python_version(),
              "rows": rows, "identical_outputs": same}
    out = REPO / "studies" / "results"
    (out / "sampling_isolation.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Sampling cost of a python agent in a process of its own", "",
             f"Command: `.venv/bin/python studies/sampling_isolation.py{' --before-src <src of 3accc72>' if args.before_src else ''}` "
             f"(each run: `{COMMAND}`, an empty cache each time, on a store of `enigma simulate --dialogues-per-agent "
             f"{args.dialogues_per_agent}`; {result['machine']}, noisy: read the medians).", "",
             f"Load average over the runs' last minute: {os.getloadavg()[0]:.1f}.", "",
             "| how the agent runs | runs | agent calls | wall s, median (min) | sampling loop s, median (min) | ms per call (median) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['runs']} | {r['calls']} | {r['wall_s_median']} ({r['wall_s_min']}) | "
                     f"{r['sampling_s_median']} ({r['sampling_s_min']}) | {r['ms_per_call']} |")
    lines += ["", f"Every run's table identical (SHA-256 of the Parquet file): {'yes' if same else 'NO'}."]
    iso = rows[0]
    for other in rows[1:]:
        lines.append(f"`{iso['mode']}` against `{other['mode']}`: {iso['wall_s_median'] - other['wall_s_median']:+.2f} s "
                     f"of wall time per run (the worker's start is in it), {iso['ms_per_call'] - other['ms_per_call']:+.3f} ms "
                     f"per agent call ({100 * (iso['sampling_s_median'] / other['sampling_s_median'] - 1):+.0f}% on the "
                     f"sampling loop of this agent, one of the cheapest: {other['ms_per_call']:.2f} ms a call there).")
    (out / "sampling_isolation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
