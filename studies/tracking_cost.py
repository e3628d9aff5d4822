"""What logging one benchmark's report to MLflow costs (``enigma.pipeline.report.track``, the last
step of ``enigma stage report``), for one or more versions of the code side by side in one run.

Each version is a source tree (a checkout: ``git worktree add /tmp/old <commit>``). Its
``src/`` logs this checkout's results and committed report of the benchmark into a fresh SQLite
store and artifact folder of its own, in a subprocess; the versions take turns, ``--repeat``
times. Needs the benchmark's results (``dvc repro train@<benchmark>``).

    git worktree add /tmp/before ea3df5a
    .venv/bin/python studies/tracking_cost.py airline --tree before=/tmp/before --tree after=. \\
        --repeat 2 --tag tracking_cost

Output: studies/results/<tag>.md and .json. Per version: seconds per run (each repeat), the
store's size after one run, the metric rows of the runs and the metric rows linked to logged
models, and the artifact folder's size.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
sys.path.insert(0, str(REPO / "studies"))
from provenance import code_version  # noqa: E402

# Runs in the version's own interpreter path, from this checkout (its params, data and reports).
_LOG = """
import json, sys, time
from enigma.params import Params
from enigma.pipeline.report import track

benchmark, full, store = sys.argv[1], sys.argv[2] == "full", sys.argv[3]
params = Params.load("params.yaml")
params = params.model_copy(update={"tracking": params.tracking.model_copy(
    update={"uri": f"sqlite:///{store}/mlflow.db", "artifact_root": f"{store}/artifacts"})})
b = params.benchmark(benchmark)
summary = json.loads((b.report_dir(full) / "summary.json").read_text())
t0 = time.perf_counter()
out = track(b, params, summary, full)
print(json.dumps({"seconds": time.perf_counter() - t0, "children": len(out["children"]),
                  "registered": out["registered"]}))
"""


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _count(db: Path, table: str) -> int | None:
    with sqlite3.connect(db) as con:
        try:
            return con.execute(f"select count(*) from {table}").fetchone()[0]
        except sqlite3.OperationalError:  # a version of MLflow without the table
            return None


def measure(tree: Path, benchmark: str, full: bool) -> dict:
    with tempfile.TemporaryDirectory() as store:
        env = dict(os.environ, PYTHONPATH=str(tree.resolve() / "src"))
        env.pop("MLFLOW_TRACKING_URI", None)
        proc = subprocess.run([sys.executable, "-c", _LOG, benchmark, "full" if full else "main", store],
                              cwd=REPO, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"{tree}: the logging failed:\n{proc.stderr[-3000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        db = Path(store) / "mlflow.db"
        out.update(db_bytes=db.stat().st_size, artifact_bytes=_size(Path(store) / "artifacts"),
                   metric_rows=_count(db, "metrics"), model_metric_rows=_count(db, "logged_model_metrics"))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark")
    ap.add_argument("--full", action="store_true", help="the full report (every estimator)")
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=PATH", help="a version: a source tree")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for i in range(args.repeat):
        for name, path in trees.items():
            runs[name].append(measure(Path(path), args.benchmark, args.full))
            print(f"{name} #{i + 1}: {runs[name][-1]['seconds']:.1f} s", flush=True)

    report = f"{args.benchmark}_full" if args.full else args.benchmark
    first = next(iter(trees))
    base = statistics.median(r["seconds"] for r in runs[first])
    lines = [
        f"# Logging the {report} report to MLflow, by code version",
        "",
        f"`.venv/bin/python studies/{Path(__file__).name} {shlex.join(sys.argv[1:])}` (this checkout: {code_version()})",
        "",
        f"Each version logs the same results and summary ({runs[first][0]['children']} child runs, one per estimator "
        "and held-out agent) into a fresh SQLite store, in turn; seconds are wall time of "
        "`enigma.pipeline.report.track` alone. Rows and sizes are those of one run.",
        "",
        "| version | tree | seconds (each run) | median, against the first | store MB | metric rows | metric rows linked to models | artifacts MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, path in trees.items():
        rs = runs[name]
        med = statistics.median(r["seconds"] for r in rs)
        r0 = rs[0]
        each = ", ".join(f"{r['seconds']:.1f}" for r in rs)
        lines.append(
            f"| {name} | `{path}` | {each} | {med:.1f} ({med / base:.2f}x) "
            f"| {r0['db_bytes'] / 1e6:.1f} | {r0['metric_rows']} | {r0['model_metric_rows']} | {r0['artifact_bytes'] / 1e6:.1f} |"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"command": sys.argv[1:], "runs": runs}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
