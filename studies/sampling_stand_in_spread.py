"""How different the held-out bots' stand-in replies are from one bot to the next, per See 2019
stand-in benchmark: the mean distance of each bot's mean reply vector (MiniLM, from the
embedding cache) to the mean over bots, and the distinct replies per bot. A stand-in whose bots
all answer alike gives every estimator that scores replies less to tell them apart by.

    .venv/bin/dvc repro sample@see2019 sample@see2019-onsupport sample@see2019-ownchats sample@see2019-ownchats-onsupport
    .venv/bin/python studies/sampling_stand_in_spread.py

Output: studies/results/stand_ins_spread.md and .json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
BENCHMARKS = ["see2019", "see2019-onsupport", "see2019-ownchats", "see2019-ownchats-onsupport"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmarks", nargs="*", default=BENCHMARKS)
    args = ap.parse_args()

    from enigma.params import Params

    params = Params.load(REPO / "params.yaml")
    cache = params.encode.embedding_cache(progress=False)
    rows = {}
    for name in args.benchmarks:
        b = params.benchmark(name)
        files = sorted((REPO / b.targets_dir).glob("*.parquet"))
        if not files:
            sys.exit(f"{b.targets_dir}: no target actions (run: dvc repro sample@{name})")
        means, distinct = [], []
        for f in files:
            texts = pq.read_table(f, columns=["text"]).column("text").to_pylist()
            means.append(cache.embed(texts).mean(0))
            distinct.append(len(set(texts)))
        m = np.array(means)
        rows[name] = {
            "bots": len(files),
            "between_bot_spread": float(np.linalg.norm(m - m.mean(0), axis=1).mean()),
            "distinct_replies_per_bot_median": float(np.median(distinct)),
            "note": b.config.note,
        }
    cmd = shlex.join([".venv/bin/python", "studies/sampling_stand_in_spread.py", *sys.argv[1:]])
    lines = ["# How much the See 2019 stand-ins' replies differ between bots", "", f"`{cmd}`", "",
             "Per benchmark: the mean distance of each held-out bot's mean reply vector (MiniLM, unit vectors) "
             "to the mean over bots, and the median number of distinct replies per bot over its target actions.", "",
             "| benchmark | bots | between-bot spread | distinct replies per bot (median) |", "|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['bots']} | {r['between_bot_spread']:.4f} | {r['distinct_replies_per_bot_median']:.0f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "stand_ins_spread.json").write_text(json.dumps({"reproduce": cmd, "rows": rows}, indent=1) + "\n")
    (RESULTS / "stand_ins_spread.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
