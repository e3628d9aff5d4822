"""Read a canonical store (a directory of ``dialogues/turns/rejects.parquet``) back, e.g. to
re-validate it or to copy it elsewhere. Its rating scales come from the store's manifest when
it has one (the ingest stage writes them there), else from ``params.yaml`` for its source."""

from __future__ import annotations

import json
from pathlib import Path

from enigma.store import schema as S
from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.experience import ExperienceStore, StoreError
from enigma.store.readers.base import IngestError, ReadResult, existing_path

SOURCE = "parquet"


def _spec_from_manifest(path: Path) -> tuple[str | None, SourceSpec | None]:
    f = path / S.MANIFEST_FILE
    if not f.is_file():
        return None, None
    try:
        info = json.loads(f.read_text(encoding="utf-8"))
        spec = SourceSpec.model_validate(info["spec"]) if "spec" in info else None
        return info.get("source"), spec
    except (ValueError, KeyError, TypeError) as exc:
        raise IngestError(f"{f}: unreadable manifest ({exc})") from None


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None) -> ReadResult:
    path = existing_path(path, "experience store")
    try:
        store = ExperienceStore.open(path)
    except StoreError as exc:
        raise IngestError(str(exc)) from None
    source, stored_spec = _spec_from_manifest(path)
    if spec is None:
        spec = stored_spec or config.source(source or SOURCE)
    sources = sorted(set(store.dialogues.column("source").to_pylist())) if "source" in store.dialogues.column_names else []
    rejects = store.rejects if store.rejects is not None else S.REJECTS_SCHEMA.empty_table()
    return ReadResult(
        dialogues=store.dialogues,
        turns=store.turns,
        rejects=rejects,
        source=source or (sources[0] if len(sources) == 1 else SOURCE),
        spec=spec,
        inputs=[path / S.DIALOGUES_FILE, path / S.TURNS_FILE],
        n_records=store.dialogues.num_rows,
    )
