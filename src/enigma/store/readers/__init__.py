"""One reader per input format; each returns dialogues, turns and rejects (``ReadResult``)."""

from __future__ import annotations

import importlib
from pathlib import Path

from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.readers.base import IngestError, ReadResult

# CLI format name -> module under enigma.store.readers (imported on use).
FORMATS = {
    "see2019": "see2019",
    "see2019-selfplay": "see2019_selfplay",
    "fed": "fed",
    "jsonl": "jsonl",
    "parquet": "parquet",
}


def read(fmt: str, path: str | Path, config: IngestConfig | None = None, spec: SourceSpec | None = None,
         progress: bool = False) -> ReadResult:
    if fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}")
    module = importlib.import_module(f"enigma.store.readers.{FORMATS[fmt]}")
    return module.read(path, config or IngestConfig(), spec, progress_bars=progress)


__all__ = ["FORMATS", "IngestError", "ReadResult", "read"]
