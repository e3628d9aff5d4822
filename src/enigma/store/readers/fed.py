"""FED (Mehri & Eskenazi 2020): ``fed_data.json``, one JSON array of 500 entries.

Dialogue-level entries (no ``response`` key, 125) become one dialogue each: the ``context``
lines ``User: ...`` / ``System: ...`` become ``user`` / ``agent`` turns, ``agent_id`` is the
``system`` (Human, Meena, Mitsuku), and each quality is the mean of the five workers' numeric
ratings (rating names in snake_case: ``Error recovery`` -> ``error_recovery``). Workers who
answered "N/A (...)" are left out of that mean; the per-worker lists, with the N/A answers, are
kept in ``meta``.

Turn-level entries (375) rate one response, not a dialogue, so they do not fit a dialogue-level
store: each becomes a row of rejects with that reason, so the count stays visible.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.readers.base import (
    IngestError,
    ReadResult,
    RecordRejected,
    StoreBuilder,
    check_json,
    existing_path,
    require_scales,
    progress,
    read_json_document,
)

SOURCE = "fed"
FILE_NAME = "fed_data.json"
SPEAKERS = {"User": "user", "System": "agent"}
TURN_LEVEL_REASON = "turn-level entry (rates one response, not a dialogue): not stored in a dialogue-level store"


def rating_name(quality: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", quality.strip().lower()).strip("_")


def _turns(context) -> list[tuple[str, str]]:
    if not isinstance(context, str):
        raise RecordRejected("context", f"context must be a string, got {type(context).__name__}")
    turns = []
    for k, line in enumerate(context.split("\n"), start=1):
        speaker, sep, text = line.partition(":")
        if not sep or speaker not in SPEAKERS:
            raise RecordRejected("context", f"context line {k} has no 'User:' or 'System:' prefix: {line[:60]!r}")
        turns.append((SPEAKERS[speaker], text.strip()))
    return turns


def _ratings(annotations, spec: SourceSpec) -> tuple[dict[str, float], dict[str, list]]:
    if not isinstance(annotations, dict):
        raise RecordRejected("annotations", f"annotations must be an object, got {type(annotations).__name__}")
    means, per_worker = {}, {}
    for quality, values in annotations.items():
        name = rating_name(quality)
        if not isinstance(values, list):
            raise RecordRejected(f"annotations.{quality}", "expected a list of worker ratings")
        numbers = []
        for v in values:
            if isinstance(v, str) and v.startswith("N/A"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise RecordRejected(f"annotations.{quality}", f"rating must be a number or 'N/A (...)', got {v!r}")
            scale = spec.ratings.get(name)
            if scale is not None and not scale.contains(v):
                raise RecordRejected(f"annotations.{quality}", f"worker rating {v!r} outside its scale {scale.describe()}")
            numbers.append(v)
        per_worker[name] = values
        means[name] = sum(numbers) / len(numbers) if numbers else None
    return means, per_worker


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None, progress_bars: bool = False) -> ReadResult:
    spec = spec or config.source(SOURCE)
    path = existing_path(path, "FED data")
    require_scales(spec, SOURCE)
    f = path / FILE_NAME if path.is_dir() else path
    if not f.is_file():
        raise IngestError(f"{path}: no {FILE_NAME} in this directory (FED data)")
    try:
        entries = read_json_document(f)
    except RecordRejected as exc:
        raise IngestError(f"{f}: {exc.reason}") from None
    if not isinstance(entries, list):
        raise IngestError(f"{f}: expected a JSON array of entries, got {type(entries).__name__}")
    builder = StoreBuilder(SOURCE, spec, config)
    builder.inputs = [f]
    for i, entry in enumerate(progress(entries, desc="fed", enabled=progress_bars, unit="entry"), start=1):
        dialog_id = f"fed:{i:04d}"
        try:
            if not isinstance(entry, dict):
                raise RecordRejected(None, f"expected a JSON object, got {type(entry).__name__}")
            check_json(entry, config.max_json_depth)
            if "response" in entry:
                raise RecordRejected("response", TURN_LEVEL_REASON)
            for name in ("context", "system", "annotations"):
                if name not in entry:
                    raise RecordRejected(name, f"missing field {name!r}")
            turns = _turns(entry["context"])
            ratings, per_worker = _ratings(entry["annotations"], spec)
        except RecordRejected as exc:
            builder.reject(f, i, exc.field, exc.reason, dialog_id)
            continue
        builder.add(f, i, dialog_id=dialog_id, agent_id=entry["system"], turns=turns, ratings=ratings,
                    meta={"entry": i, "worker_ratings": per_worker})
    return builder.build()
