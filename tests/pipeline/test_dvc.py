"""dvc.yaml stamps every benchmark's stages out of params.yaml: each stage runs ``enigma stage``,
depends on the code it runs and on params keys (never a whole section it reads one key of), and
writes where the stage layer says. A new benchmark is one params entry: its stages exist and run
with ``dvc repro``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from enigma.params import Params
from tests.conftest import REPO_ROOT
from tests.pipeline.conftest import AGENT_SPEC, build_store

# stage kind -> (its `enigma stage` arguments, the stage-layer module it runs)
KINDS = {
    "store": ("store", "store"), "rollouts": ("rollouts", "rollouts"), "sample": ("sample", "sample"),
    "train": ("train", "train"), "train_full": ("train --full", "train"),
    "report": ("report", "report"), "report_full": ("report --full", "report"),
}


# the stages of an entry of checkpoint_benchmarks -> its `enigma stage` kind
CHECKPOINT_KINDS = {"checkpoints": "checkpoints", "checkpoint_truth": "checkpoint-truth",
                    "checkpoint_scores": "checkpoint-scores", "checkpoint_report": "checkpoint-report"}


def _stages(root: Path) -> dict:
    """The stages of the root's dvc.yaml (the lab's studies/dvc.yaml, addressed by its path, has
    its own test: tests/studies)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {s.addressing: s for s in repo.index.stages if ":" not in s.addressing}


def test_every_benchmark_gets_every_stage_with_key_level_params_and_its_code(tmp_path):
    params = Params.load(REPO_ROOT / "params.yaml")
    stages = _stages(REPO_ROOT)
    assert {"airline", "airline-seed1", "see2019"} <= set(params.benchmarks)
    assert set(stages) == ({f"{k}@{b}" for k in KINDS for b in params.benchmarks}
                           | {f"{k}@{c}" for k in CHECKPOINT_KINDS for c in params.checkpoint_benchmarks})
    for name in params.benchmarks:
        b = params.benchmark(name)
        for kind, (args, module) in KINDS.items():
            s = stages[f"{kind}@{name}"]
            assert s.cmd.startswith(f"enigma stage {args.split()[0]} {name}") and ("--full" in s.cmd) == kind.endswith("_full")
            deps = {d.def_path for d in s.deps if not hasattr(d, "params")}
            assert {f"src/enigma/pipeline/{module}.py", "src/enigma/pipeline/config.py", "src/enigma/params.py"} <= deps, s
            # the modules all stage code stands on (kernels: the CPU kernels pinned on import set the
            # results' last bits): a change there reruns the stage
            assert {f"src/enigma/{m}.py" for m in ("contracts", "dialogue", "writes", "redaction", "kernels")} <= deps, s
            if module in ("rollouts", "sample", "train"):  # they load agents, models and python: specs
                assert {"src/enigma/model_loading.py", "src/enigma/python_spec.py"} <= deps, s
            if module == "train":  # ENIGMA's and the See comparators' reply measures
                assert "src/enigma/reply_measures.py" in deps, s
            keys = [k for d in s.deps if hasattr(d, "params") for k in d.params]
            # key-level: a benchmark's stage reads its own entry's keys, never another benchmark's
            # and never the whole benchmarks section
            assert "benchmarks" not in keys and all(not k.startswith("benchmarks.") or k.startswith(f"benchmarks.{name}.")
                                                    for k in keys), (s, keys)
        outs = {kind: {o.def_path for o in stages[f"{kind}@{name}"].outs} for kind in KINDS}
        assert outs["store"] == {str(b.store), str(b.truth)}
        assert outs["rollouts"] == {str(b.data_dir / "rollouts")} and outs["sample"] == {str(b.targets_dir)}
        assert outs["train"] == {str(b.results_dir())} and outs["train_full"] == {str(b.results_dir(full=True))}
        # the full report: its page and summary (git's where .gitignore lets them in), its figures (DVC's)
        full = b.report_dir(full=True)
        assert outs["report"] == {str(b.report_dir())} and outs["report_full"] == {
            str(full / "summary.json"), str(full / "index.html"), str(full / "figures")}
        # the store stage depends on what the store is made from (raw logs, or the simulator's code)
        assert str(b.config.source.path) in {d.def_path for d in stages[f"store@{name}"].deps}
    for name in params.checkpoint_benchmarks:
        c = params.checkpoint_benchmark(name)
        for kind, arg in CHECKPOINT_KINDS.items():
            s = stages[f"{kind}@{name}"]
            assert s.cmd.startswith(f"enigma stage {arg} {name}"), s
            deps = {d.def_path for d in s.deps if not hasattr(d, "params")}
            assert {"src/enigma/pipeline/config.py", "src/enigma/params.py", "src/enigma/contracts.py",
                    "src/enigma/writes.py", "src/enigma/kernels.py"} <= deps, s
            keys = [k for d in s.deps if hasattr(d, "params") for k in d.params]
            assert all(not k.startswith("checkpoint_benchmarks.") or k.startswith(f"checkpoint_benchmarks.{name}.")
                       for k in keys) and "checkpoint_benchmarks" not in keys, (s, keys)
            # of the benchmarks, only the scored_on one's keys
            assert all(not k.startswith("benchmarks.") or k.startswith(f"benchmarks.{c.scored_on.name}.") for k in keys)
        outs = {kind: {o.def_path for o in stages[f"{kind}@{name}"].outs} for kind in CHECKPOINT_KINDS}
        assert outs["checkpoints"] == {str(c.checkpoints), str(c.record)}
        assert outs["checkpoint_truth"] == {str(c.truth), str(c.dialogues)}
        assert outs["checkpoint_scores"] == {str(c.targets_dir), str(c.results_dir)}
        assert outs["checkpoint_report"] == {str(c.report_dir)}
        # trained on, scored on and calibrated on the scored_on benchmark's store and results
        assert str(c.scored_on.store) in {d.def_path for d in stages[f"checkpoints@{name}"].deps}
        assert {str(c.scored_on.store), str(c.scored_on.results_dir())} <= {
            d.def_path for d in stages[f"checkpoint_report@{name}"].deps}
    # the committed reports keep their folders
    assert {str(params.benchmark(n).report_dir(f)) for n in ("airline", "see2019") for f in (False, True)} == {
        "reports/airline", "reports/airline_full", "reports/see2019", "reports/see2019_full"}
    # the new benchmark is the airline simulator on seed 1, with the main job's estimators
    seed1 = params.benchmarks["airline-seed1"]
    assert params.with_overrides("simulate", **seed1.source.simulate).seed == 1
    assert seed1.estimators == params.benchmarks["airline"].estimators
    # `make run` reproduces a stage that exists
    assert "dvc repro report@airline" in (REPO_ROOT / "Makefile").read_text()


@pytest.mark.slow  # dvc repro of six stages, each an `enigma` process (about a minute on 2 busy cores)
def test_a_benchmark_added_as_one_params_entry_runs_with_dvc_repro(tmp_path):
    """A copy of the repository's dvc.yaml and params.yaml, with one benchmark entry for a small
    rated store of the user's: `dvc repro report@mine` runs its stages end to end. Its shape is
    not the committed benchmarks': 5 agents (too few for a bounded 95% conformal interval) and a
    long tail of lengths (2 agent turns mostly, 24 in one dialogue per agent: more slots than any
    fixed dice.tmax the repository ever had), with ENIGMA's settings as params.yaml has them."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO_ROOT / "dvc.yaml", repo / "dvc.yaml")
    build_store(long_turns=24).write(repo / "data" / "raw" / "mine")
    # the repository's params.yaml with one entry added (and, to keep the test small, the other
    # benchmarks left out, ENIGMA on one-hot features and no plots or MLflow)
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"mine": {
        "source": {"ingest": "parquet", "path": "data/raw/mine"}, "rollouts": None, "agent_spec": AGENT_SPEC,
        "estimators": ["enigma", "experience-mean"], "knowledge": None, "full_estimators": [], "note": None,
    }}
    params["checkpoint_benchmarks"] = {}  # its scored_on benchmark is left out too
    params["sample"]["cache_dir"] = str(tmp_path / "sample-cache")
    params["shared"]["embedding_cache"] = str(tmp_path / "embeddings")
    params["report"].update(plots=False, bootstrap_resamples=50)
    params["tracking"]["enabled"] = False
    params["estimators"]["enigma"]["dice"].update(encoder="onehot", interval_resamples=20)
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{repo / 'src'}", DVC_NO_ANALYTICS="1")
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    run = subprocess.run([sys.executable, "-m", "dvc", "repro", "report@mine"], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    for stage in ("store@mine", "rollouts@mine", "sample@mine", "train@mine", "report@mine"):
        assert f"Running stage '{stage}'" in run.stdout
    import json

    s = json.loads((repo / "reports" / "mine" / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["enigma", "enigma-unnormalised", "experience-mean"] and s["n_agents"] == 5
    assert s["errors"] == [] and s["estimators"]["enigma"]["n_agents"] == 5
    # the slots came from the data: the longest dialogue (24 agent turns) + 2
    from enigma.evaluation.results import read_results

    rows = read_results(repo / "data" / "mine" / "results")
    diag = json.loads(rows[rows.estimator == "enigma"].diagnostics.iloc[0])
    assert diag["config"]["tmax"] == 26, diag["config"]
    # the test half leads, the dev half beside it, over all 5 agents
    assert sorted(s["splits"]["test"] + s["splits"]["dev"]) == [f"a{k}" for k in range(1, 6)]
    assert s["headline"].startswith("Test half") and "mean_pearson" in s["estimators"]["enigma"]["split"]["test"]
    again = subprocess.run([sys.executable, "-m", "dvc", "status", "report@mine"], cwd=repo, env=env, capture_output=True, text=True)
    assert "Data and pipelines are up to date" in again.stdout, again.stdout
