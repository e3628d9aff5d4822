"""Sentence encoders loaded by several threads at once in a cold process (issue 73, item 15).

The first nightly run on a fresh clone lost an agent: two Prefect task threads loaded the
sentence encoder at once, and transformers' lazy import is not thread-safe (``ImportError: cannot
import name 'AutoModel' from 'transformers'`` in ``EmbeddingCache._load_model``). Each run here is
a fresh interpreter, so transformers is not imported yet when the threads start, as in that run.
Before the lock (``enigma.model_loading``) seven of the eight separate encoders failed, in each of
three runs out of three."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys, threading
assert "transformers" not in sys.modules  # a cold process, as on the nightly's first run
from enigma.encoders.text_cache import EmbeddingCache

root, separate, shared = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = threading.Barrier(separate + shared)
one = EmbeddingCache("minilm", f"{root}/shared", progress=False, device="cpu")
results = {}

def work(i, cache):
    try:
        if cache is None:  # (not "cache or ...": an empty cache has len 0)
            cache = EmbeddingCache("minilm", f"{root}/own-{i}", progress=False, device="cpu")
        start.wait()  # every thread loads its model at the same moment
        results[i] = ("ok", cache.embed(["where is my refund", f"thread {i}"])[0].tolist())
    except BaseException as exc:
        results[i] = ("error", f"{type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work, args=(i, None)) for i in range(separate)]
threads += [threading.Thread(target=work, args=(separate + i, one)) for i in range(shared)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"results": results, "shared_encoded": one.encoded_count}))
"""


# three cold runs: the race is a matter of timing (the first in `make test`, all three in `make test-slow`)
@pytest.mark.parametrize("run", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_encoders_loaded_in_threads_of_a_cold_process_all_work(tmp_path, run):
    separate, shared = 8, 4
    env = dict(os.environ, PYTHONPATH=f"{REPO / 'src'}:{REPO}", TOKENIZERS_PARALLELISM="false")
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(separate), str(shared)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    failed = {i: r[1] for i, r in out["results"].items() if r[0] != "ok"}
    assert not failed, failed
    assert len(out["results"]) == separate + shared
    vectors = [r[1] for r in out["results"].values()]
    assert all(v == vectors[0] for v in vectors)  # the same text, the same vector, in every thread
    # the four threads sharing one cache encoded the shared text and their own; none of them
    # found the model half loaded
    assert out["shared_encoded"] >= shared + 1
