from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from enigma.tracking.results import AgentResult, load_results, results_from_rows
from enigma.tracking.config import TrackingConfig, project_root, resolve_uri
from enigma.tracking.mlflow_log import log_benchmark_run


def _rows(agent, est, value, err=None):
    return {
        "estimator": est, "agent_id": agent, "rating": "reward", "estimate": value, "unnormalised": value * 2,
        "ess": 12.5, "regime": "replies-at-logged-states", "labels": "{}",
        "diagnostics": json.dumps({"all": {"steps": 60, "zeta_mean": 0.9}}), "n_experience_dialogues": 24,
        "seconds": 1.5, "error": err,
    }


def test_results_from_rows_groups_and_attaches_truth_and_curves():
    rows = [_rows("a1", "enigma", 0.2), _rows("a2", "enigma", 0.5), _rows("a1", "mean", 0.3, err=None)]
    curves = pd.DataFrame({"estimator": ["enigma"] * 3, "agent_id": ["a1"] * 3, "step": [0, 20, 40],
                           "loss": [1.0, 0.5, float("nan")], "note": ["x", "y", "z"]})
    res = {(r.estimator, r.agent_id): r for r in results_from_rows(rows, {("a1", "reward"): 0.25}, curves)}
    a1 = res[("enigma", "a1")]
    assert a1.estimates == {"reward": 0.2} and a1.truth == {"reward": 0.25}
    assert a1.diagnostics["ess.reward"] == 12.5 and a1.diagnostics["all"]["steps"] == 60
    assert a1.curves["loss"] == [(0, 1.0), (20, 0.5)]  # the NaN and the text column are not metrics
    assert res[("enigma", "a2")].truth == {} and res[("enigma", "a2")].curves == {}
    assert a1.mean_abs_error() == pytest.approx(0.05)
    with pytest.raises(ValueError, match="result row 0: field 'estimate' missing"):
        results_from_rows([{"estimator": "e", "agent_id": "a", "rating": "r"}])


def test_log_benchmark_run_parent_children_models_and_registry(tmp_path):
    heads = []
    for i in range(2):
        m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GELU(), torch.nn.Linear(4, 1))
        p = tmp_path / f"heads{i}.pt"
        torch.save(m, p)
        heads.append(str(p))
    results = [
        AgentResult("a1", "enigma", {"reward": 0.4}, {"reward": 0.5}, {"lr": 1e-3}, {"ess": 10.0},
                    {"loss": [(0, 1.0), (10, 0.3)]}, heads[0]),
        AgentResult("a2", "enigma", {"reward": 0.71}, {"reward": 0.7}, {"lr": 1e-3}, {"ess": 8.0}, {}, heads[1]),
    ]
    report = tmp_path / "report"
    report.mkdir()
    (report / "summary.json").write_text("{}")
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'db.sqlite'}", artifact_root=str(tmp_path / "art"),
                         experiment="t", registered_model="heads")
    run = log_benchmark_run("tiny", results, cfg=cfg, run_params={"dice": {"lr": 1e-3}},
                            summary={"enigma": {"mean_pearson": 0.9}, "skip": None}, report_dir=report)
    assert run.registered == "heads/1"

    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(cfg.uri)
    parent = client.get_run(run.parent_run_id)
    assert parent.data.params["dice.lr"] == "0.001"
    assert parent.data.metrics["enigma.mean_pearson"] == 0.9
    assert [a.path for a in client.list_artifacts(run.parent_run_id, "report")] == ["report/summary.json"]
    child = client.get_run(run.child_run_ids["enigma/a1"])
    assert child.data.tags["mlflow.parentRunId"] == run.parent_run_id
    assert child.data.metrics["estimate.reward"] == 0.4 and child.data.metrics["diag.ess"] == 10.0
    assert [m.step for m in client.get_metric_history(child.info.run_id, "curve.loss")] == [0, 10]
    # The logged heads carry the child's scalars (estimate, truth, diagnostics, error) and no
    # learning-curve points: the curves are the run's alone.
    (output,) = child.outputs.model_outputs
    model = client.get_logged_model(output.model_id)
    assert {m.key: m.value for m in model.metrics} == {
        "estimate.reward": 0.4, "truth.reward": 0.5, "diag.ess": 10.0, "abs_error_mean": pytest.approx(0.1)}
    assert child.info.status == "FINISHED"
    # The best heads (a2: error 0.01 against 0.1) are the registered version, and they load.
    version = client.get_model_version("heads", "1")
    assert version.run_id == run.child_run_ids["enigma/a2"]
    mlflow.set_tracking_uri(cfg.uri)
    loaded = mlflow.pytorch.load_model("models:/heads/1")
    assert loaded(torch.zeros(1, 3)).shape == (1, 1)


def test_a_failed_result_is_a_failed_child_run_with_its_reason(tmp_path):
    from mlflow import MlflowClient

    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'db.sqlite'}", artifact_root=str(tmp_path / "art"))
    results = [AgentResult("ok", "mean", {"reward": 0.4}),
               AgentResult("dead", "mean", {}, error="sampling: SamplingAborted: connection refused")]
    run = log_benchmark_run("nightly", results, cfg=cfg)
    client = MlflowClient(cfg.uri)
    ok, dead = (client.get_run(run.child_run_ids[f"mean/{a}"]) for a in ("ok", "dead"))
    assert ok.info.status == "FINISHED" and "error" not in ok.data.tags
    assert dead.info.status == "FAILED" and dead.data.tags["error"] == "sampling: SamplingAborted: connection refused"
    assert dead.data.metrics == {}
    assert AgentResult.from_dict(results[1].to_dict()).error == results[1].error


def test_missing_heads_file_is_named(tmp_path):
    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'db.sqlite'}", artifact_root=str(tmp_path / "art"))
    with pytest.raises(FileNotFoundError, match="nope.pt: heads of held-out agent a1"):
        log_benchmark_run("x", [AgentResult("a1", "enigma", {"r": 0.1}, model_path=str(tmp_path / "nope.pt"))], cfg=cfg)


def test_resolve_uri_and_load_results(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_uri(TrackingConfig(), tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db"
    assert resolve_uri(TrackingConfig(uri="sqlite:///x/m.db"), tmp_path) == f"sqlite:///{tmp_path.resolve()}/x/m.db"
    assert resolve_uri(TrackingConfig(uri="http://h:5000"), tmp_path) == "http://h:5000"
    f = tmp_path / "r.json"
    f.write_text(json.dumps([AgentResult("a", "e", {"r": 0.5}).to_dict(), {"agent_id": "b"}]))
    with pytest.raises(ValueError, match=r"r.json: record 1: bad per-agent result"):
        load_results(f)


def test_dvc_temp_experiments_track_into_the_repository(tmp_path):
    exp = tmp_path / "repo" / ".dvc" / "tmp" / "exps" / "tmpab12"
    exp.mkdir(parents=True)
    assert project_root(exp) == (tmp_path / "repo").resolve()
    assert project_root(tmp_path) == tmp_path.resolve()


class _RunsCode:
    """Unpickled, it touches a file: what torch.load(weights_only=False) would run for any file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (Path(self.marker),))


def test_heads_are_loaded_safely_and_a_file_that_runs_code_is_refused(tmp_path):
    """The track step loaded each result's heads with torch.load(weights_only=False): a heads file
    that names code ran it. Now only ENIGMA's heads modules load (the real ones do, as before)."""
    from enigma.ope.heads import DiceHeads

    cfg = TrackingConfig(uri=f"sqlite:///{tmp_path / 'db.sqlite'}", artifact_root=str(tmp_path / "art"), experiment="t",
                         registered_model="heads")
    good = tmp_path / "good.pt"
    torch.save(torch.nn.ModuleDict({"reward": DiceHeads(4, 3, 5)}), good)
    run = log_benchmark_run("tiny", [AgentResult("a1", "enigma", {"reward": 0.4}, {"reward": 0.5}, {}, {"ess": 1.0}, {},
                                                 str(good))], cfg=cfg)
    assert run.registered == "heads/1"
    bad, marker = tmp_path / "bad.pt", tmp_path / "ran"
    torch.save(_RunsCode(marker), bad)
    with pytest.raises(ValueError, match=r"bad.pt: heads of held-out agent a2: not ENIGMA's heads, refused"):
        log_benchmark_run("tiny", [AgentResult("a2", "enigma", {"reward": 0.4}, {"reward": 0.5}, {}, {"ess": 1.0}, {},
                                               str(bad))], cfg=cfg)
    assert not marker.exists()
