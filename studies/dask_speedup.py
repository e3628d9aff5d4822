"""Leave-one-agent-out ENIGMA on a Dask cluster of 1 and of 2 worker processes: the speed-up of
the unit the evaluate flow distributes (one held-out agent's estimate, ``estimate_agent``, the
work of its ``estimate-heldout`` task), on this machine.

Each worker process has one torch thread; every run writes its results to a fresh folder (nothing
reused), reads the benchmark's store and target actions where every worker reaches them (the
checkout's ``data/``) and the embedding cache by path (``cache/embeddings``, warm: encoding
throughput is measured apart). ENIGMA without its interval, as in ``--dice``'s default.

    .venv/bin/dvc repro sample@airline      # the store and target actions, if not there yet
    .venv/bin/python studies/dask_speedup.py airline --workers 1 2

Output: studies/results/dask_speedup.md and .json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def one_agent(benchmark: str, agent: str, results_dir: str, params_path: str) -> float:
    """On a worker: one held-out agent's ENIGMA estimate into ``results_dir``; its seconds."""
    import torch

    from enigma.estimators import benchmark_estimator
    from enigma.params import Params
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import estimate_agent
    from enigma.store.experience import ExperienceStore

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    params = Params.load(params_path)
    b = params.benchmark(benchmark)
    estimate_agent(b, benchmark_estimator(b, "enigma", params), agent, read_targets(b, agent), ExperienceStore.open(b.store), None,
                   results_dir)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dice", default='{"interval_resamples": 0}', help="JSON overrides of estimators.enigma.dice")
    ap.add_argument("--tag", default="dask_speedup")
    args = ap.parse_args()
    import yaml
    from distributed import Client, LocalCluster

    from bench_params import with_dice
    from enigma.params import Params, load_yaml
    from enigma.pipeline.store import heldout_agents

    sys.path.insert(0, str(REPO))  # the workers unpickle one_agent by module name
    base_params = with_dice(load_yaml(REPO / "params.yaml"), json.loads(args.dice))
    agents, _ = heldout_agents(Params.load(REPO / "params.yaml").benchmark(args.benchmark))
    rows = []
    for n in args.workers:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client, tempfile.TemporaryDirectory() as out:
            params_path = Path(out) / "params.yaml"  # the data paths in it are relative to the checkout: run from there
            params_path.write_text(yaml.safe_dump(base_params, sort_keys=False))
            client.run(lambda: sys.path.insert(0, str(REPO)))
            t0 = time.perf_counter()
            seconds = client.gather(client.map(one_agent, [args.benchmark] * len(agents), agents, [out] * len(agents),
                                               [str(params_path)] * len(agents), pure=False))
            wall = time.perf_counter() - t0
            done = len(list(Path(out).glob("enigma/*.json")))
        rows.append({"workers": n, "agents": len(agents), "results": done, "wall_s": wall, "agent_seconds_sum": sum(seconds)})
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["wall_s"]
    cmd = " ".join([".venv/bin/python", "studies/dask_speedup.py", *sys.argv[1:]])
    lines = [f"# Leave-one-agent-out ENIGMA on a local Dask cluster ({args.benchmark})", "", f"`{cmd}`", "",
             "| worker processes | agents | result files | wall s | sum of per-agent s | speed-up |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workers']} | {r['agents']} | {r['results']} | {r['wall_s']:.1f} | {r['agent_seconds_sum']:.1f} | "
                     f"{base / r['wall_s']:.2f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"command": cmd, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
