"""Does ``enigma.kernels``' pin move an ENIGMA estimate on the machine it runs on? One held-out
agent estimated as ``studies/dev_rows.py`` estimates it (params.yaml's ENIGMA without its
interval), each kernel setting in a fresh process with one torch thread.

``cpu_kernels.py`` compared sentence vectors under the pin with a "libraries' choice" that set
``MKL_CBWR=AUTO``. Setting ``MKL_CBWR`` at all, even to ``AUTO``, puts MKL in its conditional
numerical reproducibility mode, so that row was not MKL's own choice. Here the unpinned row
leaves every variable unset and runs an MKL operation (a float32 matrix product) before
``import enigma``: MKL reads ``MKL_CBWR`` at its first call, so the pin that import sets comes too
late for it.

    .venv/bin/python studies/kernel_pin_estimate.py [--benchmark airline --agent careless]

Output: studies/results/kernel_pin_estimate.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_kernels import PINS, cpu_flags  # noqa: E402
from result_files import write_result  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# name -> (the kernel variables set in the environment, whether MKL runs before import enigma)
SETTINGS = {
    "unpinned: every variable unset, MKL first": ({}, True),
    "pinned (import enigma)": ({}, False),
    "MKL_CBWR=AUTO, MKL first": ({"MKL_CBWR": "AUTO"}, True),
    "ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2, MKL first": ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}, True),
}

CHILD = """
import json, os, sys
import torch
if sys.argv[4] == "1":
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # MKL's sgemm: MKL reads MKL_CBWR now
torch.set_num_threads(1)
sys.path.insert(0, "studies")
from pathlib import Path
from dev_rows import row_params, run_agents
from enigma.evaluation.results import read_results
run_agents(sys.argv[1], row_params(Path("params.yaml"), {{}}), [sys.argv[2]], sys.argv[3])
p = read_results(sys.argv[3])
p = p[p.estimator == "enigma"].set_index("rating").estimate
print(json.dumps({{"estimates": {{k: float(v) for k, v in p.items()}},
                  "env": {{k: os.environ.get(k) for k in {pins!r}}}}}))
"""


def estimate_under(benchmark: str, agent: str, variables: dict[str, str], mkl_first: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    env.update(variables)
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, "-c", CHILD.format(pins=PINS), benchmark, agent, out, "1" if mkl_first else "0"],
                              env=env, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmark", default="airline")
    ap.add_argument("--agent", default="careless")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each setting (run to run, the same bits?)")
    ap.add_argument("--tag", default="kernel_pin_estimate")
    args = ap.parse_args()
    rows = []
    for name, (variables, mkl_first) in SETTINGS.items():
        runs = [estimate_under(args.benchmark, args.agent, variables, mkl_first) for _ in range(args.repeats)]
        same = all(r["estimates"] == runs[0]["estimates"] for r in runs)
        rows.append({"setting": name, "env": variables, "mkl_first": mkl_first, "estimates": runs[0]["estimates"],
                     "repeats_equal": same})
    ref = rows[0]["estimates"]
    ratings = sorted(ref)
    lines = [
        "# The kernel pin and one ENIGMA estimate on this machine",
        "",
        f"`.venv/bin/python {' '.join(['studies/kernel_pin_estimate.py', *sys.argv[1:]])}`",
        "",
        f"Flags {', '.join(cpu_flags())}. {args.agent} held out of {args.benchmark}'s store, params.yaml's ENIGMA without "
        f"its interval (as `studies/dev_rows.py`), each setting {args.repeats} times, each run a fresh process with one "
        "torch thread. \"MKL first\": a matrix product runs before `import enigma`, so MKL has read its "
        "environment before the pin could set `MKL_CBWR`.",
        "",
        f"| setting | {' | '.join(ratings)} | largest move against unpinned | runs equal |",
        "|---|" + "---|" * len(ratings) + "---|---|",
    ]
    for r in rows:
        move = max(abs(r["estimates"][k] - ref[k]) for k in ratings)
        lines.append(f"| {r['setting']} | " + " | ".join(f"{r['estimates'][k]:.7f}" for k in ratings)
                     + f" | {move:.2e} | {'yes' if r['repeats_equal'] else 'NO'} |")
    write_result(args.tag, lines, {"benchmark": args.benchmark, "agent": args.agent, "flags": cpu_flags(), "rows": rows})


if __name__ == "__main__":
    main()
