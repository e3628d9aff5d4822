"""The ingest stage: read a source, validate the tables, write the store (atomically).

The store directory gets the three Parquet tables, ``manifest.json`` (source, inputs with
their SHA-256, rating spec, counts) and the validation report (``validation.json`` and
``validation.md``). When a critical expectation fails, the report is still written next to
the intended output (``<out>.validation.md`` and ``.json``) and nothing else is touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from enigma.store import schema as S
from enigma.store.config import IngestConfig, RatingScale
from enigma.store.experience import ExperienceStore
from enigma.store.readers import ReadResult, read
from enigma.store.readers.base import IngestError
from enigma.store.validation import ValidationReport, validate


@dataclass
class IngestResult:
    out: Path
    read: ReadResult
    report: ValidationReport

    @property
    def n_dialogues(self) -> int:
        return self.read.dialogues.num_rows


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_out_dir(out: Path) -> None:
    # The output is replaced whole; refuse to wipe a directory that is not a store.
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / S.MANIFEST_FILE).is_file())):
        raise IngestError(f"{out}: exists and is not an experience store (no {S.MANIFEST_FILE}); refusing to overwrite it")


def _first_rejects(result: ReadResult, n: int = 5) -> str:
    rows = result.rejects.slice(0, n).to_pylist()
    return "\n  ".join(
        f"{r['source_file']}:{r['record'] if r['record'] is not None else '-'} "
        f"[{r['field'] or '-'}] {r['reason']}" for r in rows
    )


def ingest(fmt: str, path: str | Path, out: str | Path, config: IngestConfig | None = None,
           scales: dict[str, RatingScale] | None = None, *, progress: bool = False) -> IngestResult:
    """Read ``path`` as ``fmt``, validate, and write the store to ``out``. Raises IngestError
    (input unusable) or ValidationFailed (a critical expectation failed)."""
    config = config or IngestConfig()
    out = Path(out)
    _check_out_dir(out)
    spec = None
    if scales:
        spec = config.source(fmt).with_scales(scales)
    result = read(fmt, path, config, spec, progress=progress)
    if result.dialogues.num_rows == 0:
        raise IngestError(
            f"{path}: no dialogue could be loaded ({result.n_rejects} record(s) rejected); first rejects:\n  "
            + (_first_rejects(result) or "(none)")
        )
    report = validate(result.dialogues, result.turns, result.spec, config)
    if not report.success:
        out.parent.mkdir(parents=True, exist_ok=True)
        failed_report = out.parent / f"{out.name}.validation.md"
        failed_report.write_text(report.to_markdown(), encoding="utf-8")
        (out.parent / f"{out.name}.validation.json").write_text(
            json.dumps(report.to_json_dict(), indent=2, default=str) + "\n", encoding="utf-8")
        report.raise_for_critical(f"{path} (store not written; report in {failed_report} and .json)")

    manifest = {
        "source": result.source,
        "format": fmt,
        "inputs": [{"path": str(p), "sha256": _sha256(p)} for p in result.inputs if p.is_file()],
        "spec": result.spec.model_dump(mode="json"),
        "n_records": result.n_records,
        "max_text_chars": config.max_text_chars,
        "validation": {"success": report.success, "warnings": [c.summary() for c in report.warnings]},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ExperienceStore(result.dialogues, result.turns, result.rejects).write(tmp, manifest)
        report.save(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return IngestResult(out, result, report)
