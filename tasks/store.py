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
