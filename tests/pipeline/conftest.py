"""Fixtures of the pipeline tests: one Prefect test server per session, a small rated store
whose agents differ in reply length (and whose ratings follow it), and a params file that
points every stage at temporary paths."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import enigma  # noqa: F401  (offline environment before Prefect loads)

# Persisted task results go to a temporary folder, never the repository's .prefect/ (read by
# tasks._common at import, so set before any test imports the tasks).
os.environ.setdefault("ENIGMA_PREFECT_RESULTS", tempfile.mkdtemp(prefix="enigma-prefect-results-"))

import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from enigma.store import schema as S  # noqa: E402
from enigma.store.experience import ExperienceStore  # noqa: E402

AGENT_SPEC = "python:tests.pipeline.pipeline_agents:{agent}"


@pytest.fixture(scope="session", autouse=True)
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def build_store(n_agents: int = 5, per_agent: int = 6, long_turns: int = 0) -> ExperienceStore:
    """Agent ``a<k>`` answers with k words; its dialogues' reward grows with k (plus a
    deterministic wobble), so length-based estimates correlate with the truth. ``long_turns``:
    each agent's last dialogue goes on for that many agent turns (a long tail of lengths)."""
    dialogues, turns = [], []
    for k in range(1, n_agents + 1):
        for j in range(per_agent):
            did = f"a{k}-d{j}"
            texts = [("user", f"hi{j} there"), ("agent", " ".join(["w"] * k)), ("user", "and then"),
                     ("agent", " ".join(["v"] * k))]
            if long_turns and j == per_agent - 1:
                for t in range(2, long_turns):
                    texts += [("user", f"more {t % 3}"), ("agent", " ".join(["u"] * k))]
            for i, (role, text) in enumerate(texts):
                turns.append({"dialog_id": did, "turn_index": i, "role": role, "text": text})
            reward = min(1.0, 0.15 * k + 0.03 * ((j % 3) - 1))
            dialogues.append({"dialog_id": did, "agent_id": f"a{k}", "source": "test", "n_turns": len(texts),
                              "rating_reward": reward, "raw_reward": reward * 4, "meta": None})
    d = pa.Table.from_pylist(dialogues, schema=S.dialogues_schema(["reward"]))
    t = pa.Table.from_pylist(turns, schema=S.TURNS_SCHEMA)
    return ExperienceStore(d, t)


TINY_ESTIMATORS = ["enigma", "python:enigma.comparators.baselines:ReplyLength", "experience-mean"]


@pytest.fixture
def workspace(tmp_path: Path) -> dict:
    """A rated store (the raw input of benchmark ``tiny``, ingested by its store stage), a
    params file whose every path is under tmp_path, and the benchmark's paths."""
    raw = tmp_path / "raw-store"
    build_store().write(raw)
    params = {
        "sample": {"cache_dir": str(tmp_path / "sample-cache")},
        "report": {"plots": False, "bootstrap_resamples": 50, "out_dir": str(tmp_path / "reports")},
        # Real ENIGMA, sized for a test: gradient descent-ascent on the one-hot encoder, a short run.
        "estimators": {"enigma": {"dice": {"preset": "gda", "encoder": "onehot", "steps": 60, "log_every": 20}}},
        "pipeline": {"data_dir": str(tmp_path / "data"), "runner": "threads", "max_workers": 2, "retries": 0},
        "benchmarks": {
            "tiny": {
                "source": {"ingest": "parquet", "path": str(raw)},
                "rollouts": None,
                "agent_spec": AGENT_SPEC,
                "estimators": list(TINY_ESTIMATORS),
                "knowledge": None,
                "full_estimators": [],
                "note": None,
            }
        },
        "nightly": {
            "registry": str(tmp_path / "agents.yaml"),
            "store": str(raw),
            "seen": str(tmp_path / "nightly" / "seen.json"),
            "work_dir": str(tmp_path / "nightly"),
            "report_dir": str(tmp_path / "nightly-reports"),
            "estimators": ["python:enigma.comparators.baselines:ReplyLength"],
        },
        "tracking": {
            "uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
            "artifact_root": str(tmp_path / "mlartifacts"),
            "experiment": "test",
        },
    }
    params_path = tmp_path / "params.yaml"
    params_path.write_text(yaml.safe_dump(params))
    return {"root": tmp_path, "store": raw, "params": str(params_path), "cfg": params,
            "data": tmp_path / "data" / "tiny", "report": tmp_path / "reports" / "tiny"}


def write_params(workspace: dict) -> None:
    """Save ``workspace["cfg"]`` after a test changed it."""
    Path(workspace["params"]).write_text(yaml.safe_dump(workspace["cfg"]))
