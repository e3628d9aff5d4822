"""Is a text's vector a function of the text alone? The old recipe against the embedding cache's.

The embedding cache is filled in whatever order a machine's runs happen to fill it: a fresh clone
encodes airline's texts in batches of their own, a developer's machine met many of them first in
another benchmark's batches. If a vector depends on the batch that encoded it, estimates differ
in their last bits between the two, and ``dvc repro`` on a fresh clone changes outputs
(issue 73, goal 1). This script encodes the same real utterances (See 2019's logs, in the
repository) in several batchings and torch thread counts, under both recipes:

- ``v1`` padded each batch to its longest text (the cache's recipe before ``VECTORS = 2``);
- ``v2`` pads each text to its own length rounded up to ``PAD_MULTIPLE`` tokens, one padded length
  to a model call (``enigma.encoders.text_cache``),

and counts the texts whose vector differs in any bit from the text encoded alone.

    .venv/bin/python studies/encode_canonical.py [--texts 600]

Output: studies/results/encode_canonical.md and .json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
LOGS = REPO / "data" / "raw" / "see2019_convai2_humaneval" / "evallog"


def utterances(n: int, seed: int = 0) -> list[str]:
    texts = sorted({turn["text"] for f in sorted(LOGS.glob("*.jsonl")) for line in f.read_text().splitlines()
                    for turn in json.loads(line)["dialog"] if turn["text"].strip()})
    return random.Random(seed).sample(texts, n)


def encode_v1(cache, texts: list[str]) -> np.ndarray:
    """The old ``_encode_batch``: the batch padded to its longest text."""
    import torch

    enc = cache._tokenizer(texts, padding=True, truncation=True, max_length=cache.max_length, return_tensors="pt")
    with torch.inference_mode():
        hidden = cache._model(**enc).last_hidden_state.float()
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)
    return torch.nn.functional.normalize(pooled, p=2, dim=-1).numpy().astype(np.float32)


def batchings(texts: list[str], size: int, seed: int = 1) -> dict[str, list[list[str]]]:
    by_len = sorted(texts, key=len)
    shuffled = random.Random(seed).sample(texts, len(texts))
    return {
        "alone": [[t] for t in texts],
        f"sorted by length, {size} to a batch": [by_len[i:i + size] for i in range(0, len(by_len), size)],
        f"shuffled, {size} to a batch": [shuffled[i:i + size] for i in range(0, len(shuffled), size)],
        "shuffled, 7 to a batch": [shuffled[i:i + 7] for i in range(0, len(shuffled), 7)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    import torch

    from enigma.encoders.text_cache import PAD_MULTIPLE, EmbeddingCache

    texts = utterances(args.texts)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache("minilm", tmp, progress=False)
        cache._load_model()
        recipes = {"v1": lambda batch: encode_v1(cache, batch), "v2": cache._encode_batch}
        for recipe, encode in recipes.items():
            reference: dict[str, bytes] = {}
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for how, batches in batchings(texts, args.batch_size).items():
                    t0 = time.perf_counter()
                    got = {t: v.tobytes() for batch in batches for t, v in zip(batch, encode(batch))}
                    seconds = time.perf_counter() - t0
                    if not reference:
                        reference = got  # alone, on 1 thread
                    differ = sum(got[t] != reference[t] for t in texts)
                    rows.append({"recipe": recipe, "threads": threads, "batching": how, "differ": differ,
                                 "texts": len(texts), "seconds": round(seconds, 2)})
                    print(json.dumps(rows[-1]), flush=True)
    cmd = " ".join([".venv/bin/python", "studies/encode_canonical.py", *sys.argv[1:]])
    lines = ["# A text's vector, a function of the text alone?", "", f"`{cmd}`", "",
             f"{len(texts)} distinct utterances of See 2019's logs (`data/raw`), all-MiniLM-L6-v2 on the CPU. Each row "
             "encodes all of them in one batching and thread count; *differ* counts the texts whose vector differs in "
             "any bit from the same recipe's vector of the text encoded alone on 1 thread. v1: each batch padded to its "
             f"longest text (the cache before `VECTORS = 2`). v2: each text padded to its own length rounded up to "
             f"{PAD_MULTIPLE} tokens, one padded length to a model call (the cache now).", "",
             "| recipe | torch threads | batching | texts that differ | seconds |", "|---|---|---|---|---|"]
    lines += [f"| {r['recipe']} | {r['threads']} | {r['batching']} | {r['differ']} / {r['texts']} | {r['seconds']} |"
              for r in rows]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "encode_canonical.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "encode_canonical.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
