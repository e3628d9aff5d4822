"""The generic JSONL format: one dialogue per line (documented in the README).

    {"dialog_id": "d1", "agent_id": "bot-a",
     "turns": [{"role": "user", "text": "hi"}, {"role": "agent", "text": "hello!"}],
     "ratings": {"overall": 4}, "meta": {"rater": "r7"}}

``dialog_id``, ``agent_id`` and ``turns`` are required; ``ratings`` and ``meta`` are optional
(a rating left out is stored as null). Every rating name needs a declared scale: params.yaml
``ingest.sources.jsonl.ratings`` or ``--scale name=min:max`` on the command line. Unknown
keys, at the top level or in a turn, are rejected so that a typo (``rating``) or a field the store
has no place for (a turn's ``ts``) does not silently lose data.
"""

from __future__ import annotations

from pathlib import Path

from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.readers.base import (
    ReadResult,
    add_json_lines,
    broken_links,
    RecordRejected,
    StoreBuilder,
    existing_path,
    input_files,
    iter_lines,
    progress,
)

SOURCE = "jsonl"
REQUIRED = ("dialog_id", "agent_id", "turns")
OPTIONAL = ("ratings", "meta")
TURN_FIELDS = ("role", "text")


def _parse(obj) -> dict:
    if not isinstance(obj, dict):
        raise RecordRejected(None, f"expected a JSON object, got {type(obj).__name__}")
    dialog_id = obj.get("dialog_id") if isinstance(obj.get("dialog_id"), str) else None
    unknown = sorted(set(obj) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise RecordRejected(unknown[0], f"unknown field(s) {unknown}; allowed: {list(REQUIRED + OPTIONAL)}", dialog_id)
    for name in REQUIRED:
        if name not in obj:
            raise RecordRejected(name, f"missing field {name!r}", dialog_id)
    turns = obj["turns"]
    if not isinstance(turns, list):
        raise RecordRejected("turns", f"turns must be a list, got {type(turns).__name__}", dialog_id)
    pairs = []
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise RecordRejected(f"turns[{i}]", f"expected an object with role and text, got {type(t).__name__}", dialog_id)
        for name in TURN_FIELDS:
            if name not in t:
                raise RecordRejected(f"turns[{i}].{name}", f"missing field {name!r}", dialog_id)
        extra = sorted(set(t) - set(TURN_FIELDS))
        if extra:  # a turn holds its role and text only: anything else would be lost without a word
            raise RecordRejected(f"turns[{i}].{extra[0]}", f"unknown field(s) {extra} in a turn; allowed: {list(TURN_FIELDS)} "
                                 "(keep more in the dialogue's meta)", dialog_id)
        pairs.append((t["role"], t["text"]))
    return {"dialog_id": obj["dialog_id"], "agent_id": obj["agent_id"], "turns": pairs,
            "ratings": obj.get("ratings") or {}, "meta": obj.get("meta")}


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None, progress_bars: bool = False) -> ReadResult:
    spec = spec or config.source(SOURCE)
    path = existing_path(path, "JSONL dialogues")
    files = input_files(path, "*.jsonl", "JSONL dialogues")
    builder = StoreBuilder(SOURCE, spec, config)
    builder.inputs = files
    for link, reason in broken_links(path, "*.jsonl"):
        builder.reject(link, None, None, reason)
    for f in files:
        lines = progress(iter_lines(f), desc=f.name, enabled=progress_bars, unit="line")
        add_json_lines(builder, f, lines, _parse, "dialog_id")
    return builder.build()
