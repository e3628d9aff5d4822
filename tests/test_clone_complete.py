"""A clone is complete: the pipeline and its parameters name no path outside the repository,
and every input the pipeline starts from is in git."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import yaml

from tests.conftest import RAW_DATA, REPO_ROOT


def _strings(node) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _leaves_the_repository(text: str) -> bool:
    # Commands count too: "enigma ingest see2019 ../x --out y" names ../x.
    return any(tok.startswith(("/", "~")) or ".." in tok.replace("\\", "/").split("/") for tok in text.split())


@pytest.mark.parametrize("name", ["dvc.yaml", "params.yaml"])
def test_no_path_outside_the_repository(name):
    doc = yaml.safe_load((REPO_ROOT / name).read_text())
    outside = [s for s in _strings(doc) if _leaves_the_repository(s)]
    assert not outside, f"{name} names paths outside the repository: {outside}"


def _stage_inputs() -> set[str]:
    stages = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
    outs = {o if isinstance(o, str) else next(iter(o)) for s in stages.values() for o in s.get("outs", [])}
    return {d for s in stages.values() for d in s.get("deps", []) if d not in outs}


def test_every_pipeline_input_is_tracked_by_git():
    for dep in sorted(_stage_inputs()):
        listed = subprocess.run(["git", "ls-files", "--", dep], cwd=REPO_ROOT, capture_output=True, text=True)
        assert listed.returncode == 0 and listed.stdout.strip(), (
            f"dvc.yaml dependency {dep!r} is not in git: a clone could not run its stage ({listed.stderr.strip()})")


def test_raw_data_is_in_git_and_nothing_under_it_is_ignored():
    files = [p for p in RAW_DATA.rglob("*") if p.is_file()]
    assert files, f"no raw data under {RAW_DATA}"
    names = [str(p.relative_to(REPO_ROOT)) for p in files]
    tracked = set(subprocess.run(["git", "ls-files", "--", "data/raw"], cwd=REPO_ROOT, capture_output=True,
                                 text=True, check=True).stdout.split())
    assert sorted(set(names) - tracked) == [], "raw data files that git does not track"
    for sub in ("see2019_convai2_humaneval", "fed", "airdialogue_ope_stats"):
        assert (RAW_DATA / sub / "SOURCE.md").is_file(), f"{RAW_DATA / sub}: SOURCE.md (origin and licence) missing"


def test_a_real_data_test_without_its_data_fails_instead_of_skipping(tmp_path):
    # The suite's own fixture, pointed at a folder that is not there, in a pytest of its own.
    (tmp_path / "conftest.py").write_text(
        "import tests.conftest as c\nfrom tests.conftest import raw_data  # noqa: F401\n"
        "c.RAW_DATA = c.REPO_ROOT / 'no-such-raw-data'\n")
    (tmp_path / "test_uses_data.py").write_text("def test_reads(raw_data):\n    assert raw_data.is_dir()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "src")]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0, run.stdout
    assert "raw data not found at" in run.stdout and "no-such-raw-data" in run.stdout
    assert "skipped" not in run.stdout
