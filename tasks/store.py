"""The store a benchmark run starts from (simulated or ingested), and its validation."""

from __future__ import annotations

from prefect import task

from tasks._common import CACHED, digest


@task(name="store", **CACHED)
def build_store(b, params, source_digest: str = "") -> str:
    """``enigma.pipeline.store.build_store``; returns the store's digest (the cache key of the
    steps that read it). ``source_digest`` (of the raw logs) keys the cache."""
    from enigma.pipeline.store import build_store as _build

    _build(b, params)
    return digest(b.store)


@task(name="validate-store", **CACHED)
def validate_store(store_dir: str, store_digest: str, params) -> dict:
    """Great Expectations checks of the store; a critical failure stops the flow (with the
    failed expectations named), warnings are returned in the validation summary."""
    from enigma.pipeline.store import validate_store as _validate

    return _validate(store_dir, params)
