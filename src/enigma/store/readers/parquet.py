"""Read a canonical store (a directory of ``dialogues/turns/rejects.parquet``) back, e.g. to
re-validate it or to copy it elsewhere. Its rating scales come from the store's manifest when
it has one (the ingest stage writes them there), else from ``params.yaml`` for its source."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from enigma.store import schema as S
from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.experience import ExperienceStore, StoreError
from enigma.store.readers.base import IngestError, ReadResult, existing_path, storable

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


def _invalid_utf8(table: pa.Table) -> dict[int, tuple[str, str]]:
    """Row -> (column, reason) for the rows holding a string that is not valid UTF-8. Parquet
    writers other than Arrow need not check their strings, and pyarrow reads them unchecked;
    they fail only later, when a value is turned into a Python string."""
    try:
        table.validate(full=True)
        return {}
    except pa.ArrowInvalid:
        pass
    bad: dict[int, tuple[str, str]] = {}
    for name in table.column_names:
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        for row, raw in enumerate(column.cast(pa.large_binary()).to_pylist()):
            if raw is None or row in bad:
                continue
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad[row] = (name, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})")
    return bad


def _drop_invalid_text(store: ExperienceStore, path: Path) -> tuple[ExperienceStore, pa.Table]:
    """The store without the dialogues that hold text which is not valid UTF-8 (in their row
    or any of their turns), and one reject row for each such row."""
    rows: list[tuple[str, int, bytes | None, str, str]] = []
    for file, table in ((S.DIALOGUES_FILE, store.dialogues), (S.TURNS_FILE, store.turns)):
        ids = table.column("dialog_id").cast(pa.large_binary()).to_pylist() if "dialog_id" in table.column_names else None
        for row, (column, reason) in sorted(_invalid_utf8(table).items()):
            rows.append((file, row, ids[row] if ids else None, column, reason))
    if not rows:
        return store, S.REJECTS_SCHEMA.empty_table()
    dropped = pa.array(sorted({r[2] for r in rows if r[2] is not None}), pa.large_binary())

    def keep(table: pa.Table) -> pa.Table:
        return table.filter(pc.invert(pc.is_in(table.column("dialog_id").cast(pa.large_binary()), dropped)))

    rejects = pa.Table.from_pylist([
        {"source_file": storable(str(path / file)), "record": row + 1,
         "dialog_id": None if did is None else did.decode("utf-8", "backslashreplace"), "field": column, "reason": reason}
        for file, row, did, column, reason in rows
    ], schema=S.REJECTS_SCHEMA)
    return ExperienceStore(keep(store.dialogues), keep(store.turns), store.rejects), rejects


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None, progress_bars: bool = False) -> ReadResult:
    path = existing_path(path, "experience store")
    try:
        store = ExperienceStore.open(path)
    except StoreError as exc:
        raise IngestError(str(exc)) from None
    n_records = store.dialogues.num_rows
    store, invalid = _drop_invalid_text(store, path)
    source, stored_spec = _spec_from_manifest(path)
    if spec is None:
        spec = stored_spec or config.source(source or SOURCE)
    sources = sorted(set(store.dialogues.column("source").to_pylist())) if "source" in store.dialogues.column_names else []
    earlier = store.rejects if store.rejects is not None else S.REJECTS_SCHEMA.empty_table()
    return ReadResult(
        dialogues=store.dialogues,
        turns=store.turns,
        rejects=pa.concat_tables([earlier, invalid], promote_options="default") if invalid.num_rows else earlier,
        source=source or (sources[0] if len(sources) == 1 else SOURCE),
        spec=spec,
        inputs=[path / S.DIALOGUES_FILE, path / S.TURNS_FILE],
        n_records=n_records,
    )
