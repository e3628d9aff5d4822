"""Seconds per held-out agent of each comparator on the full See 2019 experience data
(~3,200 dialogues), run on the same CPU one after another.

The bots cannot be run here, so the target replies at logged states are a cost stand-in: the
logged replies themselves (every agent turn of the experience, one sample). Rollouts are the
held-out bot's self-play chats. The estimates are not the point and are not reported; the
timings are, with embeddings already in the on-disk cache (a first pass warms it).

    .venv/bin/python studies/comparators_cost.py [--agents 2] [--out studies/results]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import pyarrow as pa
import torch

import enigma  # noqa: F401
from enigma.contracts import HeldOutAgent, Regime
from enigma.estimators import COMPARATORS
from enigma.params import Params
from enigma.store.experience import ExperienceStore
from enigma.store.readers import see2019, see2019_selfplay

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "raw" / "see2019_convai2_humaneval"
NAMES = [
    "experience-mean", "reply-length-replies", "see-ridge-replies", "bleu", "rouge-l", "bertscore", "perplexity",
    "adem", "fqe-critic", "dynaeval-replies", "spe-ridge", "spe-sigmoid", "autojudge", "dynaeval-rollouts",
]


def logged_as_targets(experience: ExperienceStore) -> pa.Table:
    t = experience.turns.filter(pa.compute.equal(experience.turns.column("role"), "agent"))
    n = t.num_rows
    return pa.table({
        "dialog_id": t.column("dialog_id"), "turn_index": t.column("turn_index"),
        "sample_index": pa.array([0] * n, pa.int32()), "text": t.column("text"), "error": pa.nulls(n, pa.string()),
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "studies" / "results"))
    ap.add_argument("--only", default="", help="comma-separated subset of comparator names")
    args = ap.parse_args()
    torch.set_num_threads(2)
    ingest = Params.load(ROOT / "params.yaml").ingest
    r = see2019.read(DATA, ingest)
    store = ExperienceStore(r.dialogues, r.turns, r.rejects)
    r = see2019_selfplay.read(DATA, ingest)
    selfplay = ExperienceStore(r.dialogues, r.turns, r.rejects)
    agents = sorted(set(store.agents()) & set(selfplay.agents()))[: args.agents]
    config = Params.load(ROOT / "params.yaml").comparators
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    out: dict = {"agents": agents, "n_experience_dialogues_approx": store.dialogues.num_rows, "host": platform.node(),
                 "torch_threads": torch.get_num_threads(), "seconds": {}}
    for name in names:
        est = COMPARATORS[name](config)
        times = []
        for agent in agents:
            experience = store.without_agent(agent)
            target = HeldOutAgent(agent)
            if Regime.REPLIES_AT_LOGGED_STATES in est.regimes:
                target.target_actions = logged_as_targets(experience)
            if Regime.OWN_ROLLOUTS in est.regimes:
                target.rollouts = selfplay.filter_agents(keep={agent})
            t0 = time.perf_counter()
            est.estimate(experience, target)
            times.append(round(time.perf_counter() - t0, 2))
        out["seconds"][name] = times  # the first includes model loading and cache warm-up
        print(name, times, flush=True)
    path = Path(args.out) / "comparators_cost.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
