"""``dvc repro`` gives the same bits on another machine: another worker count, another torch thread
count, and an embedding cache filled in another order (issue 73, goal 1).

Two copies of the repository's dvc.yaml and params.yaml, each with one small rated benchmark, run
``dvc repro`` from nothing: the first with two worker processes and an empty embedding cache, the
second (as a fresh clone on a one-worker machine would) with one worker, torch on two threads in
the stage process, and a cache that already holds some of the texts, encoded in other batches
(as another benchmark run first leaves it). ENIGMA runs as params.yaml has it (the cached
sentence vectors, exact_nu, the doubly robust value), with a short interval. Every stage's
outputs must have the same hashes, and the report the same bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.pipeline.conftest import AGENT_SPEC, build_store


def dvc_repo(root: Path, *, max_workers: int, cache: Path) -> tuple[Path, dict]:
    shutil.copytree(REPO_ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO_ROOT / "dvc.yaml", root / "dvc.yaml")
    build_store(n_agents=4, per_agent=6).write(root / "data" / "raw" / "mine")
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    params["benchmarks"] = {"mine": {
        "source": {"ingest": "parquet", "path": "data/raw/mine"}, "rollouts": None, "agent_spec": AGENT_SPEC,
        "estimators": ["enigma", "experience-mean"], "knowledge": None, "full_estimators": [], "note": None,
    }}
    params["checkpoint_benchmarks"] = {}  # its scored_on benchmark is left out too
    params["sample"]["cache_dir"] = str(root / "sample-cache")
    params["shared"]["embedding_cache"] = str(cache)
    params["pipeline"]["max_workers"] = max_workers
    params["report"].update(plots=False, bootstrap_resamples=50)
    params["tracking"]["enabled"] = False
    params["estimators"]["enigma"]["dice"].update(interval_resamples=20)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{root / 'src'}", DVC_NO_ANALYTICS="1")
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, env=env, check=True)
    shutil.copy(REPO_ROOT / ".dvcignore", root / ".dvcignore")  # the runs' wall times (*.seconds) are not outputs
    return root, env


def outs(root: Path) -> dict[str, str]:
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    return {f"{stage}:{o['path']}": o["md5"] for stage, s in lock["stages"].items() for o in s.get("outs", [])}


@pytest.mark.slow  # two dvc repro runs of a 4-agent benchmark with the text encoder (minutes on 2 cores)
def test_dvc_repro_gives_the_same_bits_with_other_workers_threads_and_cache_order(tmp_path):
    first, env1 = dvc_repo(tmp_path / "first", max_workers=2, cache=tmp_path / "cache-first")
    run = subprocess.run([sys.executable, "-m", "dvc", "repro", "report@mine"], cwd=first, env=env1,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr

    # The other machine's cache already holds the store's texts, encoded in batches of 3 from the
    # longest down (the old recipe's vectors of them differed from the ones a fresh run makes).
    from enigma.encoders.text_cache import EmbeddingCache
    from enigma.store.experience import ExperienceStore

    texts = sorted({t for t in ExperienceStore.open(first / "data" / "mine" / "store").turns.column("text").to_pylist()},
                   key=len, reverse=True)
    second_cache = tmp_path / "cache-second"
    warm = EmbeddingCache("minilm", second_cache, progress=False)
    warm.encode_batches([texts[i:i + 3] for i in range(0, len(texts), 3)])
    second, env2 = dvc_repo(tmp_path / "second", max_workers=1, cache=second_cache)
    run = subprocess.run([sys.executable, "-m", "dvc", "repro", "report@mine"], cwd=second,
                         env=dict(env2, OMP_NUM_THREADS="2"), capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr

    # the stages used the warmed namespace (one folder: the same model and settings)
    assert len([d for d in second_cache.iterdir() if d.is_dir()]) == 1

    a, b = outs(first), outs(second)
    assert set(a) == set(b) and len(a) >= 5, (a, b)
    assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    s1, s2 = (root / "reports" / "mine" / "summary.json" for root in (first, second))
    assert s1.read_bytes() == s2.read_bytes()
    assert json.loads(s1.read_text())["estimators"]["enigma"]["n_agents"] == 4
