"""Wall time of the main job (`dvc repro report@airline`, what `make run` does after set-up)
in a fresh clone of this repository, stage by stage, with its headline numbers.

    .venv/bin/python studies/pipeline_main_job.py [--rev REV ...] [--tag NAME] [--keep]

Each `--rev` (default: HEAD) is cloned and run in turn, on the same machine in one
invocation, so that two commits can be compared side by side rather than across days. The
clones use this checkout's .venv (set-up is not timed: `make setup` is a one-off pip install)
with PYTHONPATH pointing at the clone's own `src/`, so that each revision runs its own code
and not the editable install's. Each starts from empty caches (no DVC cache, no embedding or
sample cache) and the load average is recorded, since the shared 2-core machines are rarely
idle.

Writes studies/results/<tag>.{json,md} (default tag: pipeline_main_job).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "studies" / "results"
STAGE_LINE = re.compile(r"^Running stage '([^']+)'")
ENIGMA_AGENT_LINE = re.compile(r"^enigma / \S+: ([0-9.]+)s$")


def run_rev(rev: str, work: Path) -> dict:
    clone = work / rev.replace("/", "_")
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=clone, check=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True,
                            capture_output=True, text=True).stdout.strip()
    env = dict(os.environ,
               PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(clone / "src"))
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    current, started = None, t0
    enigma_seconds: list[float] = []
    tail: list[str] = []
    # Streamed, not captured whole, so that each stage's start is timed as it happens.
    with subprocess.Popen(["dvc", "repro", "report@airline"], cwd=clone, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            line = line.rstrip("\n")
            tail = (tail + [line])[-40:]
            if m := STAGE_LINE.match(line):
                if current is not None:
                    stages[current] = round(now - started, 1)
                current, started = m.group(1), now
                print(f"[{rev} {now - t0:7.1f}s] {line}", flush=True)
            elif m := ENIGMA_AGENT_LINE.match(line):
                enigma_seconds.append(float(m.group(1)))
        returncode = proc.wait()
    wall = time.perf_counter() - t0
    if current is not None:
        stages[current] = round(wall - (started - t0), 1)
    summary_path = clone / "reports" / "airline" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    enigma = (summary.get("estimators") or {}).get("enigma", {}).get("reward", {})
    # The committed report at that revision is the reference: a run that reproduces it leaves
    # the file unchanged in the clone.
    same = subprocess.run(["git", "diff", "--quiet", "--", "reports/airline/summary.json"],
                          cwd=clone).returncode == 0
    return {
        "rev": rev,
        "commit": commit,
        "returncode": returncode,
        "wall_seconds": round(wall, 1),
        "under_20_minutes": wall < 1200,
        "stage_seconds": stages,
        "enigma_seconds_per_agent": {
            "n": len(enigma_seconds),
            "median": round(statistics.median(enigma_seconds), 1) if enigma_seconds else None,
            "max": max(enigma_seconds, default=None),
        },
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "enigma_reward": {k: enigma.get(k) for k in ("pearson", "spearman", "spread_ratio")},
        "summary_same_as_committed": same,
        "headline": summary.get("headline"),
        "output_tail": "\n".join(tail) if returncode else "",
    }


def markdown(runs: list[dict], argv: list[str]) -> str:
    stages = list(dict.fromkeys(s for r in runs for s in r["stage_seconds"]))
    paired = len(runs) > 1  # a last column: the last revision over the first

    def row(name: str, values: list, ratio: bool = True) -> str:
        cells = ["–" if v is None else str(v) for v in values]
        if paired:
            a, b = values[0], values[-1]
            cells.append(f"{b / a:.2f}" if ratio and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a else "")
        return "| " + " | ".join([name] + cells) + " |"

    lines = [
        "# Main job: `dvc repro report@airline` in a fresh clone, per revision",
        "",
        f"{os.cpu_count()} cores; the revisions ran one after another in one invocation, each from "
        "empty caches (so after the first, the load average before is the previous run's tail); "
        "set-up (pip) is not included.",
        "",
        "| | " + " | ".join([f"`{r['rev']}` ({r['commit']})" for r in runs] + ([f"ratio to `{runs[0]['rev']}`"] if paired else []))
        + " |",
        "|---" * (len(runs) + 1 + paired) + "|",
        row("wall (s)", [r["wall_seconds"] for r in runs]),
        *(row(f"stage `{s}` (s)", [r["stage_seconds"].get(s) for r in runs]) for s in stages),
        row("ENIGMA per agent, median (s)", [r["enigma_seconds_per_agent"]["median"] for r in runs]),
        row("ENIGMA per agent, max (s)", [r["enigma_seconds_per_agent"]["max"] for r in runs]),
        row("load average before (1 min)", [round(r["load_average_before"][0], 2) for r in runs], ratio=False),
        row("exit", [r["returncode"] for r in runs], ratio=False),
        row("ENIGMA reward Pearson", [None if r["enigma_reward"].get("pearson") is None else f"{r['enigma_reward']['pearson']:.3f}"
                                      for r in runs], ratio=False),
        row("summary.json as committed", ["yes" if r["summary_same_as_committed"] else "**no**" for r in runs], ratio=False),
        "",
        f"Reproduce: `{' '.join(['.venv/bin/python studies/pipeline_main_job.py', *argv])}`",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", action="append", help="a commit to run (repeatable; default HEAD)")
    p.add_argument("--tag", default="pipeline_main_job", help="name of the result files")
    p.add_argument("--keep", action="store_true", help="keep the clones")
    a = p.parse_args()
    revs = a.rev or ["HEAD"]
    work = Path(tempfile.mkdtemp(prefix="enigma-main-job-"))
    runs = [run_rev(rev, work) for rev in revs]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{a.tag}.json").write_text(json.dumps({
        "command": "dvc repro report@airline (fresh clone per revision, empty caches)",
        "cpu_count": os.cpu_count(),
        "runs": runs,
    }, indent=2) + "\n")
    md = markdown(runs, sys.argv[1:])
    (OUT / f"{a.tag}.md").write_text(md)
    print(md)
    if a.keep:
        print(f"clones kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
