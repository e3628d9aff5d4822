"""Build the lab's dev twin of ``airline-lm`` (``checkpoint_benchmarks.airline-lm-dev`` in
studies/params.yaml: the same model, data mixes and steps, another training seed) through the
user's path, ``enigma stage checkpoint-... --params studies/params.yaml``, and write its report
as a study result: the figures a change meant for learned checkpoints is chosen on, while
``airline-lm`` stays a test.

    .venv/bin/python studies/lm_checkpoints_dev.py

It reads the product's airline benchmark (``dvc repro report@airline`` first). A stage already
done is skipped by the stages themselves (each resumes), so an interrupted run goes on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ["checkpoints", "checkpoint-truth", "checkpoint-scores", "checkpoint-report"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="airline-lm-dev")
    ap.add_argument("--params", default="studies/params.yaml")
    ap.add_argument("--tag", default="lm_checkpoints_dev")
    args = ap.parse_args()
    enigma = str(Path(sys.executable).with_name("enigma"))
    seconds = {}
    for stage in STAGES:
        t0 = time.perf_counter()
        subprocess.run([enigma, "stage", stage, args.name, "--params", args.params, "--no-progress"], cwd=ROOT, check=True)
        seconds[stage] = round(time.perf_counter() - t0, 1)
        print(f"{stage}: {seconds[stage]:.0f}s", flush=True)

    from enigma.params import Params

    c = Params.load(ROOT / args.params).checkpoint_benchmark(args.name)
    page = (ROOT / c.report_dir / "index.md").read_text().split("\n", 1)[1]  # its title is replaced below
    out = ROOT / "studies" / "results"
    reproduce = f".venv/bin/python studies/lm_checkpoints_dev.py --name {args.name} --params {args.params}"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    times = " | ".join(f"{s} {v / 60:.1f} min" for s, v in seconds.items())
    (out / f"{args.tag}.md").write_text(
        f"# {args.name}: the dev twin of airline-lm, as it came (dev data: chosen on)\n\n"
        f"`{reproduce}` (commit {commit}); stage times on 2 cores, where a stage had work left: {times}.\n"
        f"The checkpoints, truth and results are in data/{args.name}/ (not tracked); the page in {c.report_dir}/.\n"
        + page)
    summary = json.loads((ROOT / c.report_dir / "summary.json").read_text())
    (out / f"{args.tag}.json").write_text(json.dumps(
        {"reproduce": reproduce, "commit": commit, "seconds": seconds, "summary": summary}, indent=1) + "\n")
    print(f"-> {out / f'{args.tag}.md'}")


if __name__ == "__main__":
    main()
