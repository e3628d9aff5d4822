"""Sentence-encoding throughput of the embedding cache's model (MiniLM) on this machine, texts per
second side by side for the settings tried: batches in arrival order against batches of texts of
similar length (what ``EmbeddingCache`` does), batch size, torch threads. The texts are See 2019
utterances (``data/see2019/store``); every setting encodes the same texts in one run.

    .venv/bin/python studies/encode_throughput.py --texts 2000

Output: studies/results/encode_throughput.md and .json.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 64, 128])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tag", default="encode_throughput")
    args = ap.parse_args()
    import numpy as np
    import torch

    from enigma.encoders.text_cache import EmbeddingCache
    from enigma.store.experience import ExperienceStore

    store = ExperienceStore.open(REPO / "data" / "see2019" / "store")
    distinct = list(dict.fromkeys(t for t in store.turns.column("text").to_pylist() if t.strip()))
    texts = [distinct[i] for i in np.random.default_rng(0).permutation(len(distinct))[: args.texts]]
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache("minilm", tmp, progress=False)
        cache._load_model()
        fast = bool(getattr(cache._tokenizer, "is_fast", False))
        cache._encode_batch(texts[:8])  # warm-up
        rows = []
        for threads in args.threads:
            torch.set_num_threads(threads)
            for batch in args.batch_sizes:
                for order, seq in (("arrival", texts), ("by length", sorted(texts, key=len))):
                    t0, c0 = time.perf_counter(), time.process_time()
                    for i in range(0, len(seq), batch):
                        cache._encode_batch(seq[i : i + batch])
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    rows.append({"threads": threads, "batch": batch, "order": order, "texts": len(seq),
                                 "texts_per_s": len(seq) / wall, "texts_per_cpu_s": len(seq) / cpu})
                    print(json.dumps(rows[-1]), flush=True)
    base = next(r for r in rows if r["threads"] == args.threads[0] and r["batch"] == 64 and r["order"] == "by length") \
        if 64 in args.batch_sizes else rows[0]
    cmd = " ".join([".venv/bin/python", "studies/encode_throughput.py", *sys.argv[1:]])
    lines = ["# Sentence-encoding throughput (MiniLM, CPU)", "", f"`{cmd}`", "",
             f"{len(texts)} distinct See 2019 utterances (mean {np.mean([len(t) for t in texts]):.0f} characters), tokens capped "
             f"at {cache.max_length}; fast (Rust) tokenizer: {fast}. Pure encoding (tokenise + forward + pool), no cache I/O. "
             "The ratio is against the cache's setting (64 per batch, by length) at the first thread count.", "",
             "| torch threads | batch | order | texts/s | texts per CPU-s | ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['threads']} | {r['batch']} | {r['order']} | {r['texts_per_s']:.0f} | {r['texts_per_cpu_s']:.0f} | "
                     f"{r['texts_per_s'] / base['texts_per_s']:.2f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps({"command": cmd, "tokenizer_fast": fast, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
