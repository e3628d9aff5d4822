"""studies/comparator_seeds.py on the tiny benchmark: the stages a user runs (store, sample
through ``enigma stage``), then the script, which runs ``enigma stage train`` once per seed of a
real comparator (DynaEval, on the real sentence encoder) and scores the seeds side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from enigma.cli import app
from tests.pipeline.conftest import write_params

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "studies" / "comparator_seeds.py"


def _stage(workspace, *args: str) -> None:
    r = CliRunner().invoke(app, ["stage", *args, "--params", workspace["params"], "--no-progress"])
    assert r.exit_code == 0, r.output


def _seeds(workspace, *extra: str) -> subprocess.CompletedProcess:
    root = workspace["root"]
    return subprocess.run([sys.executable, str(SCRIPT), "tiny", "--params", workspace["params"], "--work", str(root / "work"),
                           "--out", str(root / "out"), "--tag", "t", *extra], cwd=REPO, capture_output=True, text=True)


@pytest.mark.slow  # the real sentence encoder and two DynaEval trainings
def test_each_seed_is_trained_in_its_own_folder_scored_side_by_side_and_a_rerun_resumes(workspace):
    workspace["cfg"]["comparators"] = {"cache_dir": str(workspace["root"] / "embeddings"), "dynaeval": {"epochs": 1}}
    write_params(workspace)
    for s in ("store", "rollouts", "sample"):
        _stage(workspace, s, "tiny")

    r = _seeds(workspace, "--section", "dynaeval", "--seeds", "0", "1", "--estimator", "dynaeval-replies")
    assert r.returncode == 0, r.stderr
    table = (workspace["root"] / "out" / "t.md").read_text()
    assert "| dynaeval[replies-at-logged-states] | 0 |" in table and "| dynaeval[replies-at-logged-states] | 1 |" in table
    assert "range over 2 seeds" in table
    rows = json.loads((workspace["root"] / "out" / "t.json").read_text())["rows"]["dynaeval[replies-at-logged-states]"]
    assert rows["0"]["minus_seed0"] is None and rows["1"]["minus_seed0"]["difference"] is not None

    # the seed reached the comparator: each folder's params carry it, and the scores differ
    work = workspace["root"] / "work" / "tiny" / "dynaeval"
    estimates = {}
    for seed in (0, 1):
        assert f"seed: {seed}" in (work / f"s{seed}" / "params.yaml").read_text()
        files = sorted((work / f"s{seed}" / "tiny" / "results").rglob("*.json"))
        assert files, f"seed {seed} wrote no results"
        estimates[seed] = [json.loads(f.read_text())["rows"] for f in files]
    assert estimates[0] != estimates[1]

    written = {f: f.stat().st_mtime_ns for f in work.rglob("*.json")}
    again = _seeds(workspace, "--section", "dynaeval", "--seeds", "0", "1", "--estimator", "dynaeval-replies")
    assert again.returncode == 0, again.stderr
    assert (workspace["root"] / "out" / "t.md").read_text() == table
    assert {f: f.stat().st_mtime_ns for f in work.rglob("*.json")} == written  # nothing trained again


def test_a_section_without_a_seed_and_a_benchmark_not_yet_sampled_are_refused_clearly(workspace):
    r = _seeds(workspace, "--section", "no_such", "--seeds", "0", "--estimator", "dynaeval-replies")
    assert r.returncode != 0 and "--section 'no_such': not a seeded section of comparators" in r.stderr
    r = _seeds(workspace, "--section", "dynaeval", "--seeds", "0", "--estimator", "dynaeval-replies")
    assert r.returncode != 0 and "run `dvc repro sample@tiny` first" in r.stderr
