"""How the checkpoint benchmark's generation would use 2 cores best: one process with 2 torch
threads (how `checkpoint_truth` and `checkpoint_scores` generate today) against 2 processes with
1 thread each, each answering its half of the same states (issue 72: `airline-lm` took 53.6 min,
of which about 30 were generation).

The agent is a built `airline-lm` checkpoint (`data/airline-lm/checkpoints/<name>`), with
`sample.agents.hf` as params.yaml has it; the states are the first agent turns' histories of the
airline store. Each setting is run `--rounds` times, alternating, and the replies per second of
each round are written.

    PYTHONPATH=src:. .venv/bin/python studies/lm_generation_processes.py --checkpoint all-step01200

Output: studies/results/lm_generation_processes.md and .json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def _states(n: int):
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open("data/airline/store")
    out = []
    for turns in store.histories().values():
        out += [turns[:j] for j in range(1, len(turns)) if turns[j].role == "agent"]
        if len(out) >= n:
            break
    return out[:n]


def _answer(checkpoint: str, lo: int, hi: int, n: int, threads: int) -> tuple[int, float]:
    import torch

    from enigma.agents.hf import HFAgent
    from enigma.params import Params

    torch.set_num_threads(threads)
    agent = HFAgent(checkpoint, Params.load().sample.agents.hf)
    states = _states(n)[lo:hi]
    t0 = time.perf_counter()
    replies = agent.respond_batch(states, 1, list(range(lo, hi)))
    return len(replies), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", default="all-step01200")
    ap.add_argument("--states", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    ckpt = str(Path("data/airline-lm/checkpoints") / a.checkpoint)
    spawn = multiprocessing.get_context("spawn")
    rounds = []
    for r in range(a.rounds):
        for setting in (["one", "two"] if r % 2 == 0 else ["two", "one"]):
            with ProcessPoolExecutor(2 if setting == "two" else 1, mp_context=spawn) as pool:
                if setting == "one":
                    futs = [pool.submit(_answer, ckpt, 0, a.states, a.states, 2)]
                else:
                    half = a.states // 2
                    futs = [pool.submit(_answer, ckpt, 0, half, a.states, 1), pool.submit(_answer, ckpt, half, a.states, a.states, 1)]
                t0 = time.perf_counter()
                got = [f.result() for f in futs]
                wall = time.perf_counter() - t0  # includes the model load in each process
            gen = max(s for _, s in got)
            rounds.append({"round": r, "setting": setting, "replies": sum(n for n, _ in got),
                           "generate_s": round(gen, 2), "replies_per_s": round(sum(n for n, _ in got) / gen, 1),
                           "wall_s_with_load": round(wall, 2)})
            print(rounds[-1], flush=True)
    rate = {s: [x["replies_per_s"] for x in rounds if x["setting"] == s] for s in ("one", "two")}
    ratio = [t / o for t, o in zip(rate["two"], rate["one"])]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"command": f"PYTHONPATH=src:. .venv/bin/python studies/lm_generation_processes.py --checkpoint {a.checkpoint} "
                      f"--states {a.states} --rounds {a.rounds}", "commit": commit, "rounds": rounds,
           "ratio_two_over_one": [round(x, 2) for x in ratio]}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lm_generation_processes.json").write_text(json.dumps(out, indent=1) + "\n")
    md = ["# Generation on 2 cores: 1 process x 2 threads against 2 processes x 1 thread", "",
          f"`{out['command']}` (commit {commit}); checkpoint `{a.checkpoint}` of `airline-lm`, {a.states} airline states, "
          "`sample.agents.hf` as params.yaml has it. Replies per second of the generate calls (model loads left out).", "",
          "| round | setting | replies/s |", "|---|---|---|"]
    md += [f"| {x['round']} | {'1 process x 2 threads' if x['setting'] == 'one' else '2 processes x 1 thread'} | "
           f"{x['replies_per_s']} |" for x in rounds]
    md += ["", f"2 processes over 1, per round: {', '.join(f'{x:.2f}x' for x in ratio)}.", ""]
    (RESULTS / "lm_generation_processes.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
