"""Writing an output file so that a failed write (a full disk, a quota, a file-size limit, a
read-only mount, an I/O error) leaves the path as it was and says which path it was.

The new content goes to a hidden temporary file beside the path (``.<name>.tmp<pid>``) and is
renamed over it once complete, so the old file stays whole until then, and a failure removes the
temporary file: nothing half written is left to look like a result. A path that is a device or a
pipe (``-o /dev/null``) is written in place and never replaced or removed. Such a failure is
``WriteFailed``, which the commands print as one ``error:`` line (exit code 2).
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

# what a disk, not the program, makes go wrong
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


class WriteFailed(Exception):
    """A file could not be written (``path``, and why: ``reason``); the message names both."""

    def __init__(self, path: str | Path, reason: str, message: str | None = None):
        self.path, self.reason = Path(path), reason
        super().__init__(message or f"{path}: cannot write it ({reason})")


def reason(exc: OSError) -> str:
    """``No space left on device`` and the like, without pyarrow's wrapping of it."""
    if exc.errno:
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)


def is_disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """Inside, a disk's ``OSError`` becomes ``WriteFailed`` naming ``path`` (or the file the
    error names itself); other errors pass as they are."""
    try:
        yield
    except OSError as exc:
        if not is_disk_error(exc):
            raise
        raise WriteFailed(exc.filename or path, reason(exc)) from exc


def write_atomic(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """``write(fh)`` into a binary file that becomes ``path`` once complete."""
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():  # a device or a pipe: in place
        with naming(path), open(path, "wb") as fh:
            write(fh)
        return path
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with naming(path):
            with open(tmp, "wb") as fh:
                write(fh)
            os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    return write_atomic(path, lambda fh: fh.write(data))


def write_text(path: str | Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_parquet(path: str | Path, table) -> Path:
    """A pyarrow table as Parquet (to a file object: pyarrow never removes the path on failure)."""
    import pyarrow.parquet as pq

    return write_atomic(path, lambda fh: pq.write_table(table, fh))
