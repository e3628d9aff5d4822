"""Which code a benchmark's results file came from: the commit of the checkout whose ``src/``
the ``enigma`` package was imported from (a worktree's, when a study runs with
``PYTHONPATH=<worktree>/src``), and whether ``src/`` differed from it (changed or new files; a
result measured on uncommitted code says so), so that a results file read later can be told
apart from one that has gone stale."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def enigma_checkout() -> Path:
    """The checkout whose ``src/enigma`` is imported; this one's where that is no checkout (an
    installed wheel)."""
    import enigma

    root = Path(enigma.__file__).resolve().parents[2]
    return root if (root / ".git").exists() else REPO


def code_version(repo: Path | None = None) -> str:
    """``<short commit>``, or ``<short commit> with uncommitted changes to src/``, of ``repo``
    (default: the checkout the ``enigma`` package is imported from)."""
    repo = enigma_checkout() if repo is None else repo
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)

    sha = git("rev-parse", "--short", "HEAD").stdout.strip()
    dirty = git("status", "--porcelain", "--", "src").stdout.strip()  # untracked new modules count too
    return f"{sha} with uncommitted changes to src/" if dirty else sha
