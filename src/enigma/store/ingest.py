"""The ingest stage: read a source, validate the tables, write the store (atomically).

The store directory gets the three Parquet tables, ``manifest.json`` (source, inputs with
their SHA-256, rating spec, counts) and the validation report (``validation.json`` and
``validation.md``). When a critical expectation fails, the report is still written next to
the intended output (``<out>.validation.md`` and ``.json``) and nothing else is touched.

The new store is written beside the old one (``.<name>.tmp``) and swapped in, so that a kill at
any point leaves a complete store, old or new. Ingests into one ``--out`` take turns on a lock
(``.<name>.lock``, removed when released).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from enigma.store import schema as S
from enigma.store.config import IngestConfig, RatingScale
from enigma.store.experience import ExperienceStore
from enigma.store.readers import ReadResult, read
from enigma.store.readers.base import IngestError
from enigma.store.validation import ValidationReport, validate
from enigma.writes import WriteFailed, naming, write_text


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


def _check_input_outside(path: Path, out: Path, fmt: str) -> None:
    """An input inside ``out`` would be deleted with the old store when the new one is swapped in
    (a store read back in place, ``parquet`` with ``path`` = ``out``, is rewritten whole: allowed)."""
    def inside(a: Path, b: Path) -> bool:
        return a == b or b in a.parents

    given, resolved = (Path(os.path.abspath(path)), Path(os.path.abspath(out))), (path.resolve(), out.resolve())
    if fmt == "parquet" and resolved[0] == resolved[1]:
        return
    if inside(*given) or inside(*resolved):
        raise IngestError(f"{path}: the input is inside --out {out}, which ingest replaces whole (the input would be "
                          "deleted with the old store); move it out of the store first")


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
    if _beside(out, "old").exists() or _beside(out, "tmp").exists():
        with _locked(out):
            _recover(out)
    _check_out_dir(out)
    _check_input_outside(Path(path), out, fmt)
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
        with naming(out.parent):
            out.parent.mkdir(parents=True, exist_ok=True)
        failed_report = out.parent / f"{out.name}.validation.md"
        write_text(failed_report, report.to_markdown())
        write_text(out.parent / f"{out.name}.validation.json", json.dumps(report.to_json_dict(), indent=2, default=str) + "\n")
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
    with naming(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
    kept = f"{out} is as it was" if out.exists() else f"nothing was written at {out}"
    try:
        with naming(out), _locked(out):
            _recover(out)
            tmp = _beside(out, "tmp")
            try:
                # mkdir, not mkdtemp: the store gets the user's umask, not mkdtemp's owner-only mode
                with naming(tmp):
                    tmp.mkdir()
                ExperienceStore(result.dialogues, result.turns, result.rejects).write(tmp, manifest)
                report.save(tmp)
                _swap_in(tmp, out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except WriteFailed as exc:  # a full disk: the new store is not written, and the old one stays
        raise WriteFailed(out, exc.reason, f"{out}: the new store could not be written ({exc.path.name}: {exc.reason}); "
                                           f"{kept}") from exc
    return IngestResult(out, result, report)


def _beside(out: Path, what: str) -> Path:
    return out.parent / f".{out.name}.{what}"


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock while it is replaced, so that two ingests into it take turns. The
    holder removes the lock file before it lets go; a waiter that then holds a removed file
    (no links left) opens the path again, so nothing is left behind and the lock still holds."""
    path = _beside(out, "lock")
    said = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    print(f"waiting: another ingest is writing {out} (it holds {path})", file=sys.stderr, flush=True)
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        try:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _recover(out: Path) -> None:
    """Undo what a killed ingest of ``out`` left (call holding the lock): an old store set aside
    with none in its place goes back; a leftover copy (set aside or half written) is deleted."""
    aside, tmp = _beside(out, "old"), _beside(out, "tmp")
    if aside.is_dir() and not out.exists():
        os.replace(aside, out)
    for leftover in (aside, tmp):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)


def _swap_in(new: Path, out: Path) -> None:
    """Put the store ``new`` at ``out``; ``new`` then holds the old one, if any (to be deleted).
    Where the system can exchange two paths in one step, there is never a moment without a
    store at ``out``; elsewhere the old store waits aside (``.<name>.old``) until the new one is
    in, and the next ingest puts it back if a kill came in between."""
    if not out.exists():
        os.replace(new, out)
        return
    if _exchange(new, out):
        _test_hook_at_swap()
        return
    aside = _beside(out, "old")
    os.replace(out, aside)
    try:
        _test_hook_at_swap()
        os.replace(new, out)
    except BaseException:
        os.replace(aside, out)
        raise
    os.replace(aside, new)


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically (Linux renameat2 with RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _test_hook_at_swap() -> None:
    # Test-only (tests/store/test_store_cli.py): right after the old store left its place,
    # ENIGMA_TEST_INGEST_AT_SWAP=kill kills the process and =wait:<file> holds it (lock held)
    # until <file> exists, at most a minute, so that a test can check a kill or a second ingest there.
    action = os.environ.get("ENIGMA_TEST_INGEST_AT_SWAP")
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action and action.startswith("wait:"):
        print("test: paused at the swap", file=sys.stderr, flush=True)
        release, deadline = Path(action[len("wait:"):]), time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
