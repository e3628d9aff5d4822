"""How much ENIGMA's PCA features hang on the seed: the subspace that ``dice.project_dim``'s PCA
finds for one held-out agent's features, randomized (``torch.pca_lowrank``, the solver before
``dice.pca``) under several seeds, against the exact one (``dice.pca: exact``), with each one's cost.

The matrix is the one the trainer hands to the PCA (``enigma.ope.features.pca_projection``) when it
estimates the benchmark's first held-out agent with params.yaml's ENIGMA settings: the logged and
target vectors of every real turn. The run stops there; nothing is fitted.

    .venv/bin/python studies/pca_subspace.py see2019 airline --tag pca_subspace

Output: studies/results/<tag>.md and .json. Per benchmark: the matrix's shape; per solver, the
mean squared cosine of the principal angles between two subspaces (1: the same subspace; the share
of one subspace's directions the other holds) and the smallest cosine, seed against seed and
against the exact subspace; the share of the exact subspace's variance each one captures; seconds
on one thread (median of 3).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


class _Captured(Exception):
    pass


def pca_input(benchmark: str, params_path: Path) -> torch.Tensor:
    """The centred non-zero rows the PCA of the benchmark's first held-out agent is fitted on."""
    import enigma.ope.features as features
    from enigma.params import Params
    from enigma.pipeline.train import train_estimator

    seen: dict[str, torch.Tensor] = {}

    def capture(stacked: torch.Tensor, k: int, seed: int, chunk_rows: int = 65536, solver: str = "randomized") -> torch.Tensor:
        seen["x"] = stacked.clone()
        raise _Captured

    original = features.pca_projection
    features.pca_projection = capture
    try:
        params = Params.load(params_path)
        with tempfile.TemporaryDirectory() as results:
            try:
                train_estimator(params.benchmark(benchmark), params, "enigma", results_dir=results, share=(0, 10**6))
            except _Captured:
                pass
    finally:
        features.pca_projection = original
    if "x" not in seen:
        sys.exit(f"{benchmark}: the trainer never reached the PCA (is dice.project_dim set, and the benchmark sampled?)")
    x = seen["x"]
    x = x[x.abs().sum(-1) > 0]
    return x - x.mean(0)


def overlap(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """(mean squared cosine, smallest cosine) of the principal angles between two orthonormal bases."""
    cos = torch.linalg.svdvals(a.double().T @ b.double())
    return float((cos**2).mean()), float(cos.min())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "studies"))
    from enigma.estimators import dice_config
    from enigma.ope.features import exact_principal_axes
    from enigma.params import Params
    from provenance import code_version

    k = dice_config("enigma", Params.load(args.params)).frozen.project_dim
    torch.set_num_threads(1)

    def timed(fn):
        out, times = None, []
        for _ in range(3):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        return out, float(np.median(times))

    report = {}
    for bench in args.benchmarks:
        x = pca_input(bench, args.params)
        (sv_exact, exact), t_exact = timed(lambda: exact_principal_axes(x, k))
        variance = lambda v: float(((x @ v.to(x.dtype)) ** 2).sum())  # noqa: E731
        best = variance(exact)
        randomized, t_rand = {}, []
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            (_, _, randomized[seed]), t = timed(lambda: torch.pca_lowrank(x, q=k, center=False))
            t_rand.append(t)
        seed_pairs = [overlap(randomized[a], randomized[b]) for a, b in itertools.combinations(range(args.seeds), 2)]
        vs_exact = [overlap(randomized[s], exact) for s in range(args.seeds)]
        report[bench] = {
            "rows": int(x.shape[0]), "dims": int(x.shape[1]), "k": k,
            "randomized": {"seed_vs_seed_mean_cos2": float(np.mean([p[0] for p in seed_pairs])),
                           "seed_vs_seed_min_cos": float(min(p[1] for p in seed_pairs)),
                           "vs_exact_mean_cos2": float(np.mean([p[0] for p in vs_exact])),
                           "vs_exact_min_cos": float(min(p[1] for p in vs_exact)),
                           "variance_share_of_exact": float(np.mean([variance(randomized[s]) / best for s in range(args.seeds)])),
                           "seconds": float(np.median(t_rand))},
            "exact": {"seconds": t_exact},
        }
        print(bench, json.dumps(report[bench]), flush=True)

    cmd = shlex.join([".venv/bin/python", "studies/pca_subspace.py", *sys.argv[1:]])
    lines = ["# The PCA subspace of ENIGMA's features: randomized under several seeds, against exact", "",
             f"`{cmd}` (code: {code_version()})", "",
             f"The matrix the trainer fits dice.project_dim's PCA on for each benchmark's first held-out agent; "
             f"the randomized solver is torch.pca_lowrank with q = k and its default two power iterations, seeds 0 to "
             f"{args.seeds - 1}. A mean squared cosine of 1: the same subspace. Seconds on one thread, median of 3.", "",
             "| benchmark | rows x dims | k | randomized, seed vs seed: mean cos² (least cos) | randomized vs exact: mean cos² "
             "(least cos) | randomized: share of the exact subspace's variance | seconds randomized / exact |",
             "|---|---|---|---|---|---|---|"]
    for bench, r in report.items():
        z = r["randomized"]
        lines.append(f"| {bench} | {r['rows']} x {r['dims']} | {r['k']} | {z['seed_vs_seed_mean_cos2']:.3f} ({z['seed_vs_seed_min_cos']:.3f}) | "
                     f"{z['vs_exact_mean_cos2']:.3f} ({z['vs_exact_min_cos']:.3f}) | {z['variance_share_of_exact']:.4f} | "
                     f"{z['seconds']:.2f} / {r['exact']['seconds']:.2f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"reproduce": cmd, "benchmarks": report}, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
