"""The train stage's encode step, one process against the pool's processes, side by side.

Before the estimators run, the train stage puts every text of the store, the sampled replies and
the rollouts into the embedding cache (``enigma.pipeline.train.warm_embeddings``). It ran in the
stage's own process with torch's threads (2 on this machine); it now deals the same batches out to
the stage's worker processes, one torch thread each (``enigma.encoders.warm.encode_in_pool``).
This script runs both on the same benchmark's texts, each into an empty cache of its own, and
checks that the two caches hold the same vectors, bit for bit, for every text.

    .venv/bin/python studies/encode_processes.py airline

Needs the benchmark's store, targets and rollouts (``dvc repro sample@airline``).
Output: studies/results/encode_processes.md and .json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"


def with_cache_dir(params, cache_dir: str):
    cache = params.encode.cache.model_copy(update={"cache_dir": cache_dir})
    return params.model_copy(update={"encode": params.encode.model_copy(update={"cache": cache})})


def vectors(cache) -> dict[bytes, bytes]:
    cache.refresh()
    return {key: cache._blocks[b][r].tobytes() for key, (b, r) in cache._index.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark", nargs="?", default="airline")
    args = ap.parse_args()
    os.chdir(REPO)
    import torch

    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker

    params = Params.load(REPO / "params.yaml")
    b = params.benchmark(args.benchmark)
    workers = params.pipeline.max_workers
    rows = {}
    with tempfile.TemporaryDirectory() as one_dir, tempfile.TemporaryDirectory() as pool_dir:
        # one process, as the stage ran it (torch's default threads: the machine's cores)
        p_one = with_cache_dir(params, one_dir)
        t0 = time.perf_counter()
        stats = warm_embeddings(b, p_one)
        rows["one process"] = {"seconds": time.perf_counter() - t0, "threads": torch.get_num_threads(), **stats}
        print(json.dumps(rows["one process"]), flush=True)
        p_pool = with_cache_dir(params, pool_dir)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
            pool.submit(int).result()  # the workers' start (torch's import) is the stage's cost either way
            t0 = time.perf_counter()
            stats = warm_embeddings(b, p_pool, pool=pool, workers=workers)
            rows[f"{workers} worker processes"] = {"seconds": time.perf_counter() - t0, "threads": 1, **stats}
        print(json.dumps(rows[f"{workers} worker processes"]), flush=True)
        one, shared = vectors(p_one.encode.embedding_cache()), vectors(p_pool.encode.embedding_cache())
    same_keys = one.keys() == shared.keys()
    differ = sum(one[k] != shared[k] for k in one if k in shared)
    first, second = rows.values()
    cmd = " ".join([".venv/bin/python", "studies/encode_processes.py", *sys.argv[1:]])
    lines = [f"# The encode step: one process against {workers} worker processes ({args.benchmark})", "", f"`{cmd}`", "",
             f"Each encodes the benchmark's texts into an empty cache of its own, one after the other, on this "
             f"machine ({os.cpu_count()} cores).", "",
             "| how | torch threads | texts encoded | seconds | texts/s |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['threads']} | {r['newly_encoded']} | {r['seconds']:.1f} | {r['newly_encoded'] / r['seconds']:.0f} |")
    lines += ["", f"- {len(rows)} ways, ratio of seconds (workers / one process): **{second['seconds'] / first['seconds']:.2f}**",
              f"- the two caches hold the same texts: {same_keys} ({len(one)} and {len(shared)}); vectors that differ in any "
              f"bit: **{differ}**"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "encode_processes.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "encode_processes.json").write_text(json.dumps(
        {"command": cmd, "benchmark": args.benchmark, "rows": rows, "same_texts": same_keys, "differing_vectors": differ}, indent=2))
    print("\n".join(lines))
    if not same_keys or differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
