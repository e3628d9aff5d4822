"""Wall time of the main job (`dvc repro report@airline`, what `make run` does after set-up)
in a fresh clone of this repository, with its headline numbers.

    .venv/bin/python benchmarks/pipeline_main_job.py [--keep]

Writes benchmarks/results/pipeline_main_job.{json,md}. The clone uses this checkout's
.venv (set-up is not timed: `make setup` is a one-off pip install), starts from empty
caches (no DVC cache, no embedding or sample cache) and records the load average, since the
shared 2-core machines are rarely idle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", action="store_true", help="keep the clone")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="enigma-main-job-"))
    clone = work / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = dict(os.environ, PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    run = subprocess.run(["dvc", "repro", "report@airline"], cwd=clone, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    show = subprocess.run(["enigma", "report", "show", "reports/airline/summary.json"], cwd=clone, env=env,
                          capture_output=True, text=True)
    summary_path = clone / "reports" / "airline" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    enigma = (summary.get("estimators") or {}).get("enigma", {}).get("reward", {})
    result = {
        "command": "dvc repro report@airline (fresh clone, empty caches)",
        "returncode": run.returncode,
        "wall_seconds": round(wall, 1),
        "under_20_minutes": wall < 1200,
        "cpu_count": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "enigma_reward": {k: enigma.get(k) for k in ("pearson", "pearson_ci95", "spearman", "spearman_ci95", "spread_ratio")},
        "n_agents": summary.get("n_agents"),
        "headline": summary.get("headline"),
        "report_show": show.stdout[-4000:],
        "stderr_tail": run.stderr[-3000:] if run.returncode else "",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pipeline_main_job.json").write_text(json.dumps(result, indent=2) + "\n")
    md = [
        "# Main job: `dvc repro report@airline` in a fresh clone",
        "",
        f"- wall time: {result['wall_seconds']} s ({'under' if result['under_20_minutes'] else 'OVER'} 20 min), exit {run.returncode}",
        f"- machine: {os.cpu_count()} cores, load average {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        f"- ENIGMA on `reward` ({result['n_agents']} agents): {json.dumps(result['enigma_reward'])}",
        f"- headline: {result['headline']}",
        "",
        "Reproduce: `.venv/bin/python benchmarks/pipeline_main_job.py`",
    ]
    (OUT / "pipeline_main_job.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
