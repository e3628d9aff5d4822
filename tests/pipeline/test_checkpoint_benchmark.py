"""A checkpoint benchmark end to end, small (issue 72, 2): one params entry of
``checkpoint_benchmarks`` over a small simulator benchmark; `dvc repro checkpoint_report@<name>`
trains the tokenizer and the model, saves two checkpoints, plays each with the simulator's
customer for its truth, scores it on the store as the nightly job does, and writes the report.
Then the nightly flow itself scores the same folder of checkpoints, as a user would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO_ROOT

ESTIMATORS = ["enigma", "experience-mean", "reply-length-replies"]


def small_params(tmp_path: Path) -> dict:
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"tiny": {
        "source": {"simulate": {"preset": "rule6", "dialogues_per_agent": 10, "truth_rollouts": 16, "truth_batch": 8,
                                "max_truth_rollouts": 24, "max_stderr": 0.05}, "path": "src/enigma/sim"},
        "rollouts": None, "agent_spec": "python:enigma.sim.sellers:{agent}", "knowledge": None,
        "estimators": ESTIMATORS, "full_estimators": [], "note": None}}
    params["checkpoint_benchmarks"] = {"tiny-lm": {
        "scored_on": "tiny", "threads": 1, "dialogues_per_agent": 3, "estimators": ESTIMATORS, "note": "small",
        "lm": {"vocab_size": 320, "n_layer": 1, "n_embd": 32, "n_head": 2, "max_tokens": 160, "batch_size": 4,
               "warmup_steps": 2, "save_at": [2, 6], "mixes": {"all": {}}}}}
    params["report"]["split"].update(test_only=[], dev_only=[])
    params["sample"]["cache_dir"] = str(tmp_path / "sample-cache")
    params["sample"]["agents"]["hf"].update(max_new_tokens=8)
    params["shared"]["embedding_cache"] = str(tmp_path / "embeddings")
    params["report"].update(plots=False, bootstrap_resamples=50)
    params["tracking"]["enabled"] = False
    params["estimators"]["enigma"]["dice"].update(interval_resamples=20)
    return params


@pytest.mark.slow  # dvc repro of eight stages, two tiny language models, ENIGMA with the sentence encoder (minutes)
def test_checkpoint_benchmark_builds_from_nothing_and_the_nightly_flow_scores_its_checkpoints(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO_ROOT / "dvc.yaml", repo / "dvc.yaml")
    shutil.copy(REPO_ROOT / ".dvcignore", repo / ".dvcignore")
    params = small_params(tmp_path)
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{repo / 'src'}", DVC_NO_ANALYTICS="1")
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    run = subprocess.run([sys.executable, "-m", "dvc", "repro", "checkpoint_report@tiny-lm"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    for stage in ("store@tiny", "train@tiny", "checkpoints@tiny-lm", "checkpoint_truth@tiny-lm",
                  "checkpoint_scores@tiny-lm", "checkpoint_report@tiny-lm"):
        assert f"Running stage '{stage}'" in run.stdout, stage
    data = repo / "data" / "tiny-lm"
    names = ["all-step00002", "all-step00006"]
    assert sorted(p.name for p in (data / "checkpoints").iterdir()) == names
    record = json.loads((data / "checkpoints.json").read_text())
    assert [record[n]["step"] for n in names] == [2, 6] and all(record[n]["mix"] == "all" for n in names)
    # the truth: every rating of each checkpoint, from its on-policy dialogues (at least truth_rollouts)
    truth = pq.read_table(data / "truth.parquet").to_pylist()
    assert sorted({r["agent_id"] for r in truth}) == names and {r["rating"] for r in truth} == {"reward", "name", "flight", "status"}
    assert all(16 <= r["n"] <= 24 and 0 <= r["value"] <= 1 for r in truth)
    s = json.loads((repo / "reports" / "tiny-lm" / "summary.json").read_text())
    assert [c["name"] for c in s["checkpoints"]] == names and s["note"] == "small"
    assert sorted(s["estimators"]) == sorted(ESTIMATORS)
    for est in ESTIMATORS:
        f = s["estimators"][est]["reward"]
        # ENIGMA may not converge on an untrained model's replies over 60 dialogues: that estimate
        # is left out and named, as the report's table counts it
        assert sorted(set(f["estimates"]) | set(f["missing"])) == names and f["estimates"], (est, f)
        assert f["n_checkpoints"] == len(f["estimates"])
        assert f["mae"] == pytest.approx(sum(abs(e - s["checkpoints"][names.index(n)]["truth"]["reward"])
                                             for n, e in f["estimates"].items()) / len(f["estimates"]))
        # calibrated on the tiny benchmark's 6 sellers
        assert f["calibrated"]["calibration_agents"] == 6
    for est in ("experience-mean", "reply-length-replies"):
        f = s["estimators"][est]["reward"]
        assert sorted(f["estimates"]) == names and f["missing"] == []
        # one consecutive pair: step 6 after step 2 of the same run
        assert f["verdicts_consecutive"]["pairs"] == 1 and f["consecutive"][0]["later"] == "all-step00006"
    assert "| enigma |" in (repo / "reports" / "tiny-lm" / "index.md").read_text()
    # each checkpoint's sample (the hf agent records cut replies) and its kept dialogues, counted
    for c in s["checkpoints"]:
        got = c["replies"]
        assert got["kept_dialogues"] == params["checkpoint_benchmarks"]["tiny-lm"]["dialogues_per_agent"]
        assert 0 <= got["no_action"] <= got["kept_dialogues"]
        assert got["degenerate"]["replies"] > 0 and 0 <= got["degenerate"]["at_token_limit"] <= got["degenerate"]["replies"]
    assert "| degenerate | cut | no action |" in (repo / "reports" / "tiny-lm" / "index.md").read_text()
    again = subprocess.run([sys.executable, "-m", "dvc", "status", "checkpoint_report@tiny-lm"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert "Data and pipelines are up to date" in again.stdout, again.stdout

    # the nightly flow over the same folder of checkpoints, on the same store and calibration
    params["nightly"].update(registry=str(data / "checkpoints"), store=str(repo / "data" / "tiny" / "store"),
                             calibration_results=str(repo / "data" / "tiny" / "results"),
                             seen=str(tmp_path / "nightly" / "seen.json"), work_dir=str(tmp_path / "nightly"),
                             report_dir=str(tmp_path / "nightly-report"), estimators=["enigma"])
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(params))
    from flows.nightly import nightly

    out = nightly(str(tmp_path / "nightly.yaml"))
    assert sorted(out["evaluated"]) == names and not out["failed"]
    # both checkpoints in the night's report, its JSON and its page
    report = json.dumps(json.loads((tmp_path / "nightly-report" / "latest.json").read_text()))
    assert all(n in report for n in names)
    latest = (tmp_path / "nightly-report" / "latest.md").read_text()
    assert all(n in latest for n in names)
