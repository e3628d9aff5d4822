from __future__ import annotations

import json
from pathlib import Path

import pytest

from enigma.evaluation.summary_file import read_summary
from enigma.params import Params
from flows.evaluate import evaluate, main
from flows.runners import make_task_runner
from tests.pipeline.conftest import write_params

REPLY_LENGTH = "reply-length[replies-at-logged-states]"
REPLY_LENGTH_SPEC = "python:enigma.comparators.baselines:ReplyLength"


def _runner(workspace, kind=None):
    return make_task_runner(Params.load(workspace["params"]).pipeline, kind)


def _check_summary(path: str, with_enigma: bool = True) -> dict:
    s = read_summary(path)
    assert s["benchmark"] == "tiny" and s["n_agents"] == 5 and s["ratings"] == ["reward"]
    # Reply length tracks the test store's ratings; the leave-one-out mean runs against them.
    assert s["estimators"][REPLY_LENGTH]["reward"]["pearson"] > 0.9
    assert s["estimators"]["experience-mean"]["reward"]["pearson"] < -0.9
    # with ENIGMA, the report also derives its ablation without post-normalisation from the same run
    expected = {"truth", REPLY_LENGTH, "experience-mean"} | ({"enigma", "enigma-unnormalised"} if with_enigma else set())
    assert set(s["agents"]["a1"]["reward"]) == expected
    return s


# slow: whole Prefect flow runs (about 10-40 s on 2 busy cores); CI runs them
@pytest.mark.slow
def test_evaluate_threads_reports_tracks_and_reuses_results(workspace):
    out = evaluate.with_options(task_runner=_runner(workspace))("tiny", workspace["params"])
    _check_summary(out["summary_json"])
    assert Path(out["report_html"]).is_file()
    assert len(out["mlflow"]["children"]) == 15  # 3 estimators x 5 held-out agents
    # ENIGMA's heads were logged as models and the best registered.
    assert out["mlflow"]["registered"] == "enigma-dice-heads/1"

    results = workspace["data"] / "results"
    files = sorted(results.glob("*/*.json"))
    assert len(files) == 15
    assert len(list(results.glob("enigma/*.heads.pt"))) == 5
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = evaluate.with_options(task_runner=_runner(workspace))(
        "tiny", workspace["params"], track=False
    )
    _check_summary(again["summary_json"])
    assert {f: f.stat().st_mtime_ns for f in files} == stamps  # nothing recomputed


def test_evaluate_cli_unknown_benchmark(workspace):
    from enigma.params import ParamsError

    with pytest.raises(ParamsError, match="benchmarks has no benchmark 'nope'"):
        main(["nope", "--params", workspace["params"], "--no-track"])


# slow: whole Prefect flow runs (about 10-40 s on 2 busy cores); CI runs them
@pytest.mark.slow
def test_evaluate_on_local_dask_cluster(workspace):
    # The comparators only: each Dask worker is a fresh process, and importing torch and
    # training ENIGMA there again would only slow this test down without testing more.
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = [REPLY_LENGTH_SPEC, "experience-mean"]
    write_params(workspace)
    runner = _runner(workspace, "dask")
    out = evaluate.with_options(task_runner=runner)("tiny", workspace["params"], track=False)
    _check_summary(out["summary_json"], with_enigma=False)


# slow: a Dask cluster of two worker processes and a whole flow run (about 30-60 s)
@pytest.mark.slow
def test_evaluate_on_the_scheduler_that_params_name(workspace):
    """``pipeline.dask_address``: the flow submits its tasks to an existing cluster (here a
    LocalCluster of separate worker processes that the test starts, as an operator would start
    a scheduler), ENIGMA included; its results land in the data folder every worker reaches."""
    from distributed import Client, LocalCluster, get_task_stream

    from flows.runners import share_with_workers

    share_with_workers()  # the workers start with this environment: the repository and Prefect's API
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workspace["cfg"]["pipeline"].update(runner="dask", dask_address=cluster.scheduler_address)
        write_params(workspace)
        with get_task_stream(client) as stream:
            out = evaluate.with_options(task_runner=_runner(workspace))("tiny", workspace["params"], track=False)
        workers = set(cluster.workers[w].worker_address for w in cluster.workers)
    _check_summary(out["summary_json"])
    ran_on = {t["worker"] for t in stream.data}
    assert ran_on and ran_on <= workers and len(stream.data) >= 15  # 3 estimators x 5 agents, and the sampling
    assert len(list((workspace["data"] / "results").glob("enigma/*.json"))) == 5


# slow: a whole Prefect flow run
@pytest.mark.slow
def test_evaluate_makes_learned_customer_rollouts_for_the_own_rollout_estimators(workspace):
    from enigma.store.experience import ExperienceStore

    workspace["cfg"]["benchmarks"]["tiny"].update(rollouts={"learned_customer": {"similarity": "words", "episodes": 3}},
                                                  estimators=["reply-length-rollouts"])
    write_params(workspace)
    out = evaluate.with_options(task_runner=_runner(workspace))("tiny", workspace["params"], track=False)
    assert ExperienceStore.open(workspace["data"] / "rollouts").dialogues.num_rows == 15  # 3 per agent
    s = json.loads(Path(out["summary_json"]).read_text())
    assert s["estimators"]["reply-length[own-rollouts]"]["regime"] == ["own-rollouts"] and s["n_agents"] == 5


# slow: two Prefect flow runs and the train stage (comparators only: about 20-40 s)
@pytest.mark.slow
def test_a_failed_estimate_is_the_agents_result_in_the_flow_as_in_the_train_stage(workspace, capsys):
    """One rule for a failed (estimator, agent) run, wherever it runs: the failure is written as
    the agent's result, the run goes on and says how many failed, the report lists it, the
    command exits 0, and the next run retries it. The flow and ``enigma stage train`` (dvc.yaml's
    train stage) write the same result file for it."""
    from typer.testing import CliRunner

    from enigma.cli import app
    from enigma.evaluation.results import result_path

    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = [REPLY_LENGTH_SPEC, "python:tests.pipeline.pipeline_agents:FailsOnA2"]
    write_params(workspace)
    results = workspace["data"] / "results"
    said = "1 (estimator, agent) run(s) failed; the report lists them; the next run retries them"

    assert main(["tiny", "--params", workspace["params"], "--no-track"]) == 0
    assert said in capsys.readouterr().out
    summary = json.loads((workspace["report"] / "summary.json").read_text())
    assert summary["errors"] == [{"estimator": "fails-on-a2", "agent_id": "a2", "error": "RuntimeError: diverged at step 400"}]
    assert summary["n_agents"] == 5 and summary["estimators"][REPLY_LENGTH]["reward"]["pearson"] > 0.9
    failed = result_path(results, "fails-on-a2", "a2")
    by_flow = failed.read_text()
    assert json.loads(by_flow)["rows"][0]["error"] == "RuntimeError: diverged at step 400"

    # the next flow run retries the failure (a failed task leaves nothing in Prefect's cache) and
    # reuses the rest
    done = {f: f.stat().st_mtime_ns for f in results.glob("*/*.json") if f != failed}
    assert len(done) == 9  # 2 estimators x 5 agents, less the failure
    failed.unlink()
    out = evaluate.with_options(task_runner=_runner(workspace))("tiny", workspace["params"], track=False)
    assert out["failures"] == 1 and failed.read_text() == by_flow
    assert {f: f.stat().st_mtime_ns for f in done} == done

    # the train stage: the same file, the same count, the same exit code
    failed.unlink()
    r = CliRunner().invoke(app, ["stage", "train", "tiny", "--params", workspace["params"], "--no-progress"])
    assert r.exit_code == 0 and said in r.output, r.output
    assert failed.read_text() == by_flow
