"""How much of ENIGMA's sampling interval is Monte Carlo noise, and how much more there would be
with fewer resamples: measured on the bootstrap draws the reports' runs saved, without refitting.

Each (agent, rating) of a benchmark's ``enigma`` results has ``dice.interval_resamples`` refitted
draws (``<agent>.bootstrap.pt``). They stand in for the bootstrap distribution: B of them drawn
with replacement, ``--repeats`` times, give the percentile interval a run with B resamples would
report, and the spread of its endpoints over the repeats is its Monte Carlo error. The table gives,
per benchmark and B, over all (agent, rating): the median and 90th percentile of each endpoint's
Monte Carlo standard deviation as a share of the interval's width from all saved draws, and the
mean width against that width (a percentile interval from few draws is narrower on average).

    .venv/bin/python studies/interval_resamples_mc.py airline see2019 --resamples 25 50 100

Output: studies/results/interval_resamples_mc.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from enigma.resampling import percentile_interval

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def endpoint_noise(draws: np.ndarray, b: int, repeats: int, level: float, rng: np.random.Generator) -> dict[str, float]:
    """Endpoints' Monte Carlo sd (as shares of the all-draws width) and mean width ratio at B = b."""
    full = percentile_interval(draws, level)
    width = full[1] - full[0]
    ends = np.array([percentile_interval(rng.choice(draws, size=b, replace=True), level) for _ in range(repeats)])
    return {"low_sd": float(ends[:, 0].std() / width), "high_sd": float(ends[:, 1].std() / width),
            "width_ratio": float((ends[:, 1] - ends[:, 0]).mean() / width)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--resamples", type=int, nargs="+", default=[25, 50, 100])
    ap.add_argument("--repeats", type=int, default=400)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tag", default="interval_resamples_mc")
    args = ap.parse_args()

    import torch

    from enigma.params import Params

    params = Params.load(REPO / "params.yaml")
    rng = np.random.default_rng(args.seed)
    out: dict = {}
    lines = [f"# ENIGMA's sampling interval: Monte Carlo error against the number of resamples", "",
             f"`{shlex.join(['.venv/bin/python', 'studies/interval_resamples_mc.py', *sys.argv[1:]])}`", "",
             f"From the saved bootstrap draws of each benchmark's `enigma` results (B drawn with replacement from them, "
             f"{args.repeats} times; shares of the {args.level:.0%} percentile interval's width from all saved draws).", "",
             "| benchmark | saved draws | (agent, rating) | B | low endpoint MC sd, median / p90 | high endpoint MC sd, median / p90 | mean width / all-draws width |",
             "|---|---|---|---|---|---|---|"]
    for name in args.benchmarks:
        files = sorted((REPO / params.benchmark(name).results_dir() / "enigma").glob("*.bootstrap.pt"))
        if not files:
            sys.exit(f"{name}: no saved bootstrap draws under {params.benchmark(name).results_dir() / 'enigma'} (dvc repro train@{name})")
        cells = []
        for f in files:
            for draws in torch.load(f, weights_only=False)["draws"].values():
                d = np.asarray(draws, dtype=float)
                cells.append(d[np.isfinite(d)])
        saved = sorted({len(d) for d in cells})
        out[name] = {}
        for b in args.resamples:
            rows = [endpoint_noise(d, b, args.repeats, args.level, rng) for d in cells]
            stat = {k: [float(np.median([r[k] for r in rows])), float(np.quantile([r[k] for r in rows], 0.9))] for k in rows[0]}
            out[name][b] = stat
            lines.append(f"| {name} | {'/'.join(map(str, saved))} | {len(cells)} | {b} | {stat['low_sd'][0]:.3f} / {stat['low_sd'][1]:.3f} | "
                         f"{stat['high_sd'][0]:.3f} / {stat['high_sd'][1]:.3f} | {stat['width_ratio'][0]:.3f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
