"""What every command checks of its options before it starts work: the parameters file and the
outputs. A mistake there is one ``error:`` line and exit code 2 before anything runs, not a run
on the wrong settings or a traceback once the work is done."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

PARAMS_HELP = "parameters file; default ./params.yaml when present, else the built-in defaults"


def load_params(path: Path | None):
    """``--params``: a file that is named must exist (a typo must not run on other settings);
    without the option, ./params.yaml where there is one, else the built-in defaults (the
    commands work outside a project checkout too)."""
    from enigma.params import DEFAULT_PARAMS, Params

    if path is None:
        return Params.load(DEFAULT_PARAMS, missing="defaults")
    return Params.load(path, missing="error")


def check_out(path: Path, option: str, *, folder: bool) -> None:
    """Refuse an output ``path`` (a folder, or a file with ``folder=False``) that nothing can be
    written at: the wrong kind of thing already there, a file where a folder would have to be made,
    or a place the user may not write (``/sys``, a read-only mount). Creates nothing."""
    if path.exists():
        if folder and not path.is_dir():
            raise ValueError(f"{option} {path}: a file is there, not a folder")
        if not folder and path.is_dir():
            raise ValueError(f"{option} {path}: a folder is there, not a file")
    start = path if folder and path.exists() else path.parent
    where = start
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        raise ValueError(f"{option} {path}: {where} is a file, so no folder can be made under it")
    # os.access says yes to root on /sys and to anyone on a read-only mount: only a write tells
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".enigma-write-check-", dir=where))
    except OSError as exc:
        raise ValueError(f"{option} {path}: cannot write in {where} ({exc.strerror or exc})") from exc
