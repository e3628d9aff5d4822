"""Seconds per held-out agent of each comparator on the airline benchmark, to decide which fit
the main job's budget (`make run` under 20 minutes on an idle 2-core machine).

Inputs are the pipeline's own: the experience store (data/airline/store), each agent's sampled
replies at the logged states (data/airline/targets, the sample stage) and its learned-customer
rollouts (data/airline/rollouts, the rollouts stage). Each comparator is built once (as the
train stage does) and run on the first ``--agents`` held-out agents one after another; the
first agent's time includes loading models and warming the embedding cache.

    .venv/bin/python studies/comparators_airline_cost.py [--agents 3] [--only a,b] [--out studies/results]

``--from-results [--benchmark see2019]`` instead summarises the seconds that the train stages
recorded over every held-out agent (data/<benchmark>/results and results_full) into
comparators_<benchmark>_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

import enigma  # noqa: F401
from enigma.estimators import benchmark_estimator
from enigma.params import Params
from enigma.evaluation.heldout import HeldOutSources
from enigma.evaluation.loao import evaluate_one
from enigma.store.experience import ExperienceStore

ROOT = Path(__file__).resolve().parents[1]
NAMES = [
    "experience-mean", "reply-length-replies", "bleu", "rouge-l", "see-ridge-replies", "bertscore", "perplexity",
    "adem", "fqe-critic", "dynaeval-replies", "spe-ridge", "spe-sigmoid", "see-ridge-rollouts", "autojudge",
    "dynaeval-rollouts",
]


def from_results(out_path: Path, benchmark: str = "airline") -> None:
    """Seconds per agent as the train stages recorded them (every held-out agent; two
    estimators at a time, each in its own process with one torch thread, on the 2 cores)."""
    import pandas as pd

    from enigma.evaluation.results import read_results

    dirs = [d for d in (ROOT / f"data/{benchmark}/results", ROOT / f"data/{benchmark}/results_full") if d.is_dir()]
    r = pd.concat([read_results(d) for d in dirs], ignore_index=True).drop_duplicates(["estimator", "agent_id"])
    result = json.loads(out_path.read_text()) if out_path.is_file() else {}
    result["loao_run"] = {
        "what": f"seconds per held-out agent recorded in the result files of `dvc repro report_{benchmark}_full` "
        "(train stages: two estimators at a time, each in its own process with one torch thread; the shared "
        "embedding cache is filled before the workers start, so the encoding of texts is not in these seconds "
        "except for enigma-random-encoder's own model; the first agent of an estimator includes loading models)",
        "reproduce": f".venv/bin/dvc repro report_{benchmark}_full && "
        f".venv/bin/python studies/comparators_airline_cost.py --from-results --benchmark {benchmark}",
        "seconds": {
            est: {"median": round(float(g["seconds"].median()), 2), "max": round(float(g["seconds"].max()), 2),
                  "total_27_agents": round(float(g["seconds"].sum()), 1), "n_agents": int(len(g))}
            for est, g in r.groupby("estimator") if g["seconds"].notna().all()
        },
    }
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    for est, v in result["loao_run"]["seconds"].items():
        print(f"{est:55s} median {v['median']:7.2f}  total {v['total_27_agents']:7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--out", default=str(ROOT / "studies" / "results"))
    ap.add_argument("--from-results", action="store_true",
                    help="instead: summarise the seconds recorded by the train stages in data/<benchmark>/results{,_full}")
    ap.add_argument("--benchmark", default="airline", choices=["airline", "see2019"], help="with --from-results")
    args = ap.parse_args()
    if args.from_results:
        return from_results(Path(args.out) / f"comparators_{args.benchmark}_cost.json", args.benchmark)
    torch.set_num_threads(1)
    store = ExperienceStore.open(ROOT / "data/airline/store")
    rollouts = ExperienceStore.open(ROOT / "data/airline/rollouts")
    agents = store.agents()[: args.agents]
    names = [n for n in args.only.split(",") if n] or NAMES
    out_path = Path(args.out) / "comparators_airline_cost.json"
    result = json.loads(out_path.read_text()) if out_path.is_file() else {}
    result.update({
        "what": "seconds per held-out agent on the airline benchmark (2,600 experience dialogues, ~10k agent turns; "
        "replies at logged states from data/airline/targets, rollouts from data/airline/rollouts); the first agent "
        "includes model loading and embedding-cache warm-up",
        "reproduce": ".venv/bin/python studies/comparators_airline_cost.py --agents 3 [--only <names>]",
        "machine": f"{platform.node()}: {os.cpu_count()} cores shared with another engineer's experiments, torch 1 thread",
        "agents": agents,
    })
    seconds = result.setdefault("seconds", {})
    params = Params.load(args.params)
    for name in names:
        t0 = time.perf_counter()
        est = benchmark_estimator(params.benchmark("airline"), name, params)
        build = time.perf_counter() - t0
        times = []
        for a in agents:
            targets = pq.read_table(ROOT / "data/airline/targets" / f"{a}.parquet")
            sources = HeldOutSources(target_actions=lambda _a, _e, t=targets: t,
                                     rollouts=lambda ag: rollouts.filter_agents(keep={ag}))
            t1 = time.perf_counter()
            evaluate_one(store, est, a, sources, results_dir=None)
            times.append(round(time.perf_counter() - t1, 2))
        seconds[name] = {"per_agent": times, "build": round(build, 2),
                         "steady_per_agent": round(min(times[1:] or times), 2),
                         "projected_27_agents": round(times[0] + sum(times[1:]) / max(1, len(times) - 1) * 26, 1)}
        print(name, seconds[name], flush=True)
        out_path.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
