"""The exact_nu solver on CPU and on CUDA, side by side, on the tabular MDP of the exactness
tests (three target policies): iterations, convergence, distance to the certainty-equivalence
value, and the largest CPU-CUDA difference of any estimate.

    .venv/bin/python studies/ope_exact_nu_devices.py   # needs a CUDA device; prints the table

Its output on an H100 (torch 2.11+cu130) is committed as studies/results/ope_exact_nu_devices.log.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "ope"))

import torch  # noqa: E402

from enigma.contracts import HeldOutAgent  # noqa: E402
from enigma.ope import DiceConfig, EnigmaEstimator  # noqa: E402
from enigma.ope.tabular import RATINGS, certainty_equivalence_value, target_actions  # noqa: E402
from test_ope_exactness import _problem, _targets  # noqa: E402


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this script compares the CPU and CUDA runs of the solver")
    print(torch.__version__, torch.cuda.get_device_name(0))
    mdp, store = _problem(2500, seed=2)
    for pol in _targets(mdp):
        ta = target_actions(store, pol, n_samples=2, seed=0)
        out = {}
        for dev in ("cpu", "cuda"):
            cfg = DiceConfig.preset("exact_nu", encoder="onehot", tmax=3, device=dev)
            t = time.perf_counter()
            res = EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent(pol.name, target_actions=ta))
            out[dev] = (res, time.perf_counter() - t)
        ce = certainty_equivalence_value(store, ta)
        for dev, (res, secs) in out.items():
            run = res.runs["all"]
            print(pol.name, dev, f"{secs:.2f}s", run.solver["iterations"], "iters converged", run.solver["converged"],
                  "max|est-ce|", max(abs(res.estimates[k]["estimate"] - ce[k]) for k in RATINGS))
        diff = max(abs(out["cuda"][0].estimates[k]["estimate"] - out["cpu"][0].estimates[k]["estimate"]) for k in RATINGS)
        print(pol.name, "max |cuda - cpu| estimate", diff)


if __name__ == "__main__":
    main()
