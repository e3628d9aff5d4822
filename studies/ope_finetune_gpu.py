"""ENIGMA with the paper's fine-tuned encoder, leave-one-agent-out, on a GPU (issue 14, direction 5):
the training half of the study. Every held-out agent of each benchmark is estimated by one row
(``estimators.enigma.dice`` of params.yaml plus the row's overrides, as studies/ope_enigma_rows.py
writes it), with several worker processes sharing the one GPU, each taking every n-th agent.

    .venv/bin/python studies/ope_finetune_gpu.py airline see2019 --workers 4 \\
        --row 'finetune={"preset": "paper", "encoder": "finetune", ...}' --work data/work/ope_rows_ft

Each agent's result file is written under ``--work/<benchmark>/<row>/results`` as it finishes, with
the same fingerprint as ope_enigma_rows.py gives it, so the scoring half runs there (on any
machine) and reuses these results instead of recomputing them:

    .venv/bin/python studies/ope_enigma_rows.py see2019 --work data/work/ope_rows_ft \\
        --row 'default={}' --row 'finetune={...}' --row 'frozen={...}' --tag ope_finetune_see2019

``--deadline-s`` stops the workers after that many seconds (a lent GPU has a fixed time); agents not
finished by then are missing from the results and a rerun computes only those. Writes
``--timing`` (JSON): the device, the row, each benchmark's wall time and agents done, and each
agent's seconds as its result recorded them; ``--gpu-log`` samples nvidia-smi's utilisation.

Memory: 8 processes (``--workers 4`` on two benchmarks) at the preset's ``eval_batch_size`` of 512
peaked at 132 GiB on an H200 (``studies/results/ope_finetune_gpu.json``), about 17 GiB each, where
a training step at batch 64 needs about 2. On an 80 GiB card run fewer processes, or give the row a
smaller ``eval_batch_size`` (a setting of the row: its results are then new ones).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, wait
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "studies"))


def _device() -> dict:
    import torch

    info = {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(name=p.name, memory_gib=round(p.total_memory / 2**30, 1), sms=p.multi_processor_count)
    return info


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmarks", nargs="+")
    ap.add_argument("--row", required=True, metavar="NAME=JSON", help="dice overrides of the fine-tuned row")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "ope_rows_ft")
    ap.add_argument("--workers", type=int, default=4, help="processes per benchmark, all on the one GPU")
    ap.add_argument("--deadline-s", type=float, default=None)
    ap.add_argument("--timing", type=Path, default=None)
    ap.add_argument("--gpu-log", type=Path, default=None)
    args = ap.parse_args()

    from bench_params import write_row_params
    from enigma.evaluation.results import read_results
    from enigma.pipeline.workers import init_worker
    from ope_enigma_rows import _one_row  # the same row run, so the results are the scoring half's

    name, _, overrides = args.row.partition("=")
    overrides = json.loads(overrides)
    base = yaml.safe_load((REPO / "params.yaml").read_text())
    jobs = []
    for b in args.benchmarks:
        d = args.work / b / name
        path = write_row_params(d, base, overrides)
        jobs += [(b, str(path), str(d / "results"), (i, args.workers)) for i in range(args.workers)]
    smi = None
    if args.gpu_log:
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used", "--format=csv", "-l", "5"],
                               stdout=args.gpu_log.open("w"), stderr=subprocess.STDOUT)
    t0 = time.perf_counter()
    wall: dict[str, float] = {}
    pool = ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn"), initializer=init_worker)
    futures = {pool.submit(_one_row, *job): job[0] for job in jobs}  # each share's benchmark
    done, pending = wait(futures, timeout=args.deadline_s)
    for f in done:
        wall[futures[f]] = max(wall.get(futures[f], 0.0), f.result())
    if pending:
        print(f"deadline: {len(pending)} share(s) stopped unfinished after {time.perf_counter() - t0:.0f}s", flush=True)
        for p in multiprocessing.active_children():
            p.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    if smi is not None:
        smi.terminate()
    timing = {"device": _device(), "row": {name: overrides}, "workers_per_benchmark": args.workers,
              "deadline_s": args.deadline_s, "total_wall_s": time.perf_counter() - t0, "benchmarks": {}}
    for b in args.benchmarks:
        results = args.work / b / name / "results"
        part = read_results(results) if results.is_dir() and any(results.iterdir()) else None
        per_agent = {} if part is None else part.drop_duplicates("agent_id").set_index("agent_id").seconds.to_dict()
        timing["benchmarks"][b] = {"wall_s": wall.get(b), "agents_done": len(per_agent), "seconds_per_agent": per_agent}
        print(f"{b}: {len(per_agent)} agents done; wall {wall.get(b)}", flush=True)
    if args.timing:
        args.timing.write_text(json.dumps(timing, indent=1, default=float) + "\n")
    sys.stdout.flush()
    os._exit(0)  # a pool whose workers were killed at the deadline would otherwise be joined


if __name__ == "__main__":
    main()
