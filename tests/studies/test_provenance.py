"""A benchmark's results name the code they came from (studies/provenance.py)."""

from __future__ import annotations

import subprocess

from studies.provenance import REPO, code_version, enigma_checkout


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_the_commit_and_whether_src_had_uncommitted_changes(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    (tmp_path / "notes.md").write_text("a\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "c")
    sha = _git(tmp_path, "rev-parse", "--short", "HEAD")
    assert code_version(tmp_path) == sha
    (tmp_path / "notes.md").write_text("b\n")  # not code: still the commit
    assert code_version(tmp_path) == sha
    (tmp_path / "src" / "new.py").write_text("y = 2\n")  # a new module is code too
    assert code_version(tmp_path) == f"{sha} with uncommitted changes to src/"
    (tmp_path / "src" / "new.py").unlink()
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    assert code_version(tmp_path) == f"{sha} with uncommitted changes to src/"


def test_the_code_named_is_that_of_the_checkout_enigma_is_imported_from(tmp_path):
    """A study run with PYTHONPATH=<worktree>/src names the worktree's commit, not this checkout's."""
    import os
    import sys

    assert enigma_checkout() == REPO  # the suite imports this checkout's src/
    worktree = tmp_path / "wt"
    (worktree / "src" / "enigma").mkdir(parents=True)
    (worktree / "src" / "enigma" / "__init__.py").write_text("")
    _git(worktree, "init", "-q")
    _git(worktree, "add", "-A")
    _git(worktree, "commit", "-q", "-m", "c")
    sha = _git(worktree, "rev-parse", "--short", "HEAD")
    probe = "import sys; sys.path.insert(0, 'studies'); from provenance import code_version; print(code_version())"
    env = {**os.environ, "PYTHONPATH": str(worktree / "src")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == sha
