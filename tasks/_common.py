"""Settings every task shares: where persisted results live, the cache policy, and a content
digest of input files so that a cached result is reused only while its inputs are unchanged."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import enigma  # noqa: F401  (offline environment before Prefect loads)
from prefect.cache_policies import INPUTS, TASK_SOURCE

# Results persist under the repository (or ENIGMA_PREFECT_RESULTS), so a rerun of a flow in a
# new process skips finished work. Prefect needs a pathlib.Path here: a string or an unsaved
# LocalFileSystem block raises.
RESULT_STORAGE = Path(os.environ.get("ENIGMA_PREFECT_RESULTS", ".prefect/results")).resolve()

CACHED = dict(cache_policy=INPUTS + TASK_SOURCE, persist_result=True, result_storage=RESULT_STORAGE)


def digest(*paths: str | Path) -> str:
    """A digest of the files under ``paths`` (names, sizes and contents). Tasks take it as an
    argument, so the INPUTS cache key changes when a file they read changes in place."""
    h = hashlib.sha256()
    for p in paths:
        p = Path(p)
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
        h.update(f"{p}|{len(files)}".encode())
        for f in files:
            h.update(str(f.relative_to(p) if f != p else f.name).encode())
            with f.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]
