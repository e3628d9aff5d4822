"""Which code a benchmark's results file came from: the commit of this checkout, and whether
``src/`` differed from it (changed or new files; a result measured on uncommitted code says so),
so that a results file read later can be told apart from one that has gone stale."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def code_version(repo: Path = REPO) -> str:
    """``<short commit>``, or ``<short commit> with uncommitted changes to src/``."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)

    sha = git("rev-parse", "--short", "HEAD").stdout.strip()
    dirty = git("status", "--porcelain", "--", "src").stdout.strip()  # untracked new modules count too
    return f"{sha} with uncommitted changes to src/" if dirty else sha
