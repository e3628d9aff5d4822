"""The experience store a benchmark run starts from, and its validation."""

from __future__ import annotations

from prefect import task

from tasks._common import CACHED


@task(name="validate-store", **CACHED)
def validate_store(store_dir: str, store_digest: str, params_path: str = "params.yaml") -> dict:
    """Great Expectations checks of the store; a critical failure stops the flow (with the
    failed expectations named), warnings are returned in the validation summary."""
    from enigma.store.config import load_ingest_config
    from enigma.store.experience import ExperienceStore
    from enigma.store.validation import validate

    store = ExperienceStore.open(store_dir)
    report = validate(store.dialogues, store.turns, config=load_ingest_config(params_path))
    report.raise_for_critical(store_dir)
    return {"counts": report.counts, "warnings": [c.summary() for c in report.warnings]}


@task(name="simulate", **CACHED)
def simulate_store(store_dir: str, truth_path: str, *, params_path: str = "params.yaml", simulate: dict | None = None) -> str:
    """The airline simulator's rated experience (a store) and exact truth; ``simulate`` is
    the ``simulate`` section of params.yaml (and the cache key)."""
    from enigma.sim.generate import SimulateConfig, generate

    cfg = SimulateConfig.model_validate(simulate or {})
    cfg.progress = False
    generate(cfg, store_dir, truth_path=truth_path)
    return store_dir


@task(name="ingest", **CACHED)
def ingest_store(fmt: str, path: str, path_digest: str, out: str, *, params_path: str = "params.yaml",
                 ingest: dict | None = None) -> str:
    """Raw logs to a validated store (``enigma.store.ingest``); ``ingest`` is the params
    section (and, with ``path_digest``, the cache key)."""
    from enigma.store.config import IngestConfig
    from enigma.store.ingest import ingest as _ingest

    cfg = IngestConfig.model_validate(ingest or {})
    cfg.progress = False
    _ingest(fmt, path, out, cfg)
    return out
