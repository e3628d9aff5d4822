"""A benchmark's results name the code they came from (studies/provenance.py)."""

from __future__ import annotations

import subprocess

from studies.provenance import code_version


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
