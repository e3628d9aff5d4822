"""Issue 71: how far a late 0/1 rating reaches back through fitted Q evaluation, with and without
a Monte Carlo baseline (``fqe.baseline``: ``returns`` on the pair, ``state`` on the earlier turns
alone; ``studies/patches/fqe_baseline_returns.patch``:
run with the patch's ``src/`` first on ``PYTHONPATH``).

A small problem where the truth is known: each dialogue's first turn decides its rating (the
reply's first feature +1: rated 1; -1: rated 0; half the logs each), closing turns follow that
decide nothing, and the target always takes the good reply. Its Q at the first turn is 1.0; the
logs' mean is 0.5. The fitted Q runs with today's history settings; the table gives the target's
mean Q at the first turn.

    PYTHONPATH=<worktree with the patch>/src .venv/bin/python studies/fqe_baseline_travel.py
"""

from __future__ import annotations

import argparse
import sys

import torch

from enigma.ope.config import FqeConfig
from enigma.ope.fqe import fit_turn_q
from enigma.ope.turns import TurnFeatures



def problem(length: int, n_dialogues: int = 200, seed: int = 0) -> tuple[TurnFeatures, torch.Tensor]:
    """The logged and target rows of dialogues of ``length`` agent turns, and their ratings [N, 1]."""
    gen = torch.Generator().manual_seed(seed)
    good = torch.arange(n_dialogues) % 2 == 0
    logged = torch.zeros((n_dialogues, length, 3))
    logged[:, 0, 0] = torch.where(good, 1.0, -1.0)
    logged[:, 0, 1] = 1.0  # marks the deciding turn
    logged[:, 1:, 2] = 1.0 + 0.05 * torch.randn((n_dialogues, length - 1), generator=gen)
    target = logged.clone()
    target[:, 0, 0] = 1.0
    logged, target = logged.reshape(-1, 3), target.reshape(-1, 1, 3)
    turns = TurnFeatures(logged, target, torch.ones((len(logged), 1), dtype=torch.bool), torch.full((n_dialogues,), length))
    return turns, good.double().unsqueeze(1).numpy()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[2, 5, 10])
    ap.add_argument("--epochs", type=int, nargs="+", default=[10, 45])
    args = ap.parse_args(argv)
    if "baseline" not in FqeConfig.model_fields:
        raise SystemExit("fqe.baseline is not in this enigma: run with the patch's src/ first on PYTHONPATH")
    from provenance import code_version
    from result_files import write_result

    lines = ["# A late rating through fitted Q evaluation, with and without a Monte Carlo baseline", "",
             f"`{' '.join(['.venv/bin/python', 'studies/fqe_baseline_travel.py', *(argv or sys.argv[1:])])}` "
             f"(code: {code_version()}; the patch `studies/patches/fqe_baseline_returns.patch`)", "",
             "The target's mean Q at the deciding first turn (truth 1.0, the logs' mean 0.5); hidden 32, "
             "history, extremes and attention on, seed 0.", "",
             "| agent turns a dialogue | epochs | `baseline: none` | `baseline: returns` | `baseline: state` |", "|---|---|---|---|---|"]
    payload = {}
    for length in args.lengths:
        turns, rewards = problem(length)
        first = torch.arange(len(rewards)) * length
        for epochs in args.epochs:
            cells = []
            for baseline in ("none", "returns", "state"):
                cfg = FqeConfig(hidden=32, epochs=epochs, history=True, history_extremes=True, history_attention=True,
                                baseline=baseline)
                cells.append(f"{float(fit_turn_q(turns, rewards, cfg, seed=0).target[first, 0].mean()):.3f}")
            payload[f"{length}_turns_{epochs}_epochs"] = dict(zip(("none", "returns", "state"), map(float, cells)))
            lines.append(f"| {length} | {epochs} | {' | '.join(cells)} |")
    write_result("fqe_baseline_travel", lines, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
