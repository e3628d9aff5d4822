"""The store stage: a benchmark's rated experience (``<data>/<name>/store``) and the truth its
estimates are scored against (``truth.parquet``), from the simulator or from raw logs; its
validation; and which of its agents are held out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from enigma.params import Params
from enigma.pipeline.config import Benchmark
from enigma.store.experience import ExperienceStore


def simulate(b: Benchmark, params: Params, progress: bool = False) -> dict[str, Any]:
    """The airline simulator's rated dialogues of every seller and each seller's exact truth."""
    from enigma.sim.generate import generate

    cfg = params.with_overrides("simulate", **(b.config.source.simulate or {}))
    return generate(cfg, b.store, truth_path=b.truth, progress=progress)


def ingest(b: Benchmark, params: Params, progress: bool = False) -> dict[str, Any]:
    """Raw logs to a validated store; the truth of human data is each agent's own mean rating
    over its rated dialogues (never part of its own experience under leave-one-agent-out)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from enigma.evaluation.truth import truth_from_store
    from enigma.store.ingest import ingest as _ingest

    result = _ingest(b.config.source.ingest, b.config.source.path, b.store, params.ingest, progress=progress)
    truth = truth_from_store(ExperienceStore.open(b.store))
    b.truth.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(truth, preserve_index=False), b.truth)
    return {"out": str(b.store), "n_dialogues": result.n_dialogues, "n_rejects": result.read.n_rejects,
            "warnings": [w.summary() for w in result.report.warnings], "truth": str(b.truth)}


def build_store(b: Benchmark, params: Params, progress: bool = False) -> dict[str, Any]:
    """The store and the truth, as the benchmark's source says."""
    if b.config.source.simulate is not None:
        return simulate(b, params, progress)
    return ingest(b, params, progress)


def validate_store(store_dir: str | Path, params: Params) -> dict[str, Any]:
    """Great Expectations checks of a store; a critical failure raises (naming the failed
    expectations), warnings are returned."""
    from enigma.store.validation import validate

    store = ExperienceStore.open(store_dir)
    report = validate(store.dialogues, store.turns, config=params.ingest)
    report.raise_for_critical(str(store_dir))
    return {"counts": report.counts, "warnings": [c.summary() for c in report.warnings]}


def heldout_agents(b: Benchmark) -> tuple[list[str], list[str]]:
    """The agents to hold out, and those of the store left out (kept as experience only): with
    rollouts, only agents that have some can be acted by their stand-in or scored by the
    own-rollouts estimators, so the others (e.g. See 2019's human baseline) are experience only."""
    in_store = ExperienceStore.open(b.store).agents()
    if b.rollouts is None:
        return in_store, []
    with_rollouts = set(ExperienceStore.open(b.rollouts).agents())
    return [a for a in in_store if a in with_rollouts], [a for a in in_store if a not in with_rollouts]
