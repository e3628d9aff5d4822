from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from flows.nightly import main, nightly

REPO = Path(__file__).resolve().parents[2]


def _registry(path: Path, names: list[str]) -> None:
    lines = ["agents:"] + [f"  {n}: python:tests.pipeline.pipeline_agents:{n}" for n in names]
    path.write_text("\n".join(lines) + "\n")


# slow: whole Prefect flow runs (about 10-40 s on 2 busy cores); CI runs them
@pytest.mark.slow
def _night_where_one_fails(workspace, name: str, spec: str, step: str) -> dict:
    """One night with two new agents, a working one and ``name`` (``spec``), which fails at
    ``step`` alone: the flow's result, with the working one scored."""
    from flows.nightly import AgentsFailed

    Path(workspace["cfg"]["nightly"]["registry"]).write_text(
        f"agents:\n  newcomer_short: python:tests.pipeline.pipeline_agents:newcomer_short\n  {name}: {spec}\n")
    state = nightly(workspace["params"], return_state=True)
    assert state.is_failed() and state.message.startswith(f"1 of 2 new agent(s) failed: {name} ({step}: ")
    failure = state.result(raise_on_failure=False)
    assert isinstance(failure, AgentsFailed)
    assert failure.result["evaluated"] == ["newcomer_short"]
    return failure.result


def test_nightly_scores_only_new_agents(workspace):
    registry = Path(workspace["cfg"]["nightly"]["registry"])
    _registry(registry, ["newcomer_short"])

    first = nightly(workspace["params"])
    assert first["evaluated"] == ["newcomer_short"]
    report = json.loads(Path(first["report"]).read_text())
    est = report["agents"]["newcomer_short"]["estimates"]
    assert set(est) == {"reply-length[replies-at-logged-states]"}
    short = est["reply-length[replies-at-logged-states]"]["reward"]

    _registry(registry, ["newcomer_short", "newcomer_long"])
    second = nightly(workspace["params"])
    assert second["evaluated"] == ["newcomer_long"]
    long_ = json.loads(Path(second["report"]).read_text())["agents"]["newcomer_long"]["estimates"]
    # its replies ("<word> ok ok ok ok") repeat a word four times: the report says so, and scores them
    bad = json.loads(Path(second["report"]).read_text())["agents"]["newcomer_long"]["degenerate"]
    assert bad["repeated"] == bad["replies"] > 0 and bad["share"] == 1.0
    assert report["agents"]["newcomer_short"]["degenerate"]["share"] == 0.0
    assert f"100.0% of its {bad['replies']} sampled replies are degenerate" in Path(second["report"]).with_suffix(".md").read_text()
    # Longer replies earn higher ratings in the test store; the estimator must see that.
    assert long_["reply-length[replies-at-logged-states]"]["reward"] > short

    third = nightly(workspace["params"])
    assert third == {"evaluated": [], "report": None}

    seen = json.loads(Path(workspace["cfg"]["nightly"]["seen"]).read_text())["agents"]
    assert set(seen) == {"newcomer_short", "newcomer_long"}
    lines = (Path(workspace["cfg"]["nightly"]["report_dir"]) / "estimates.csv").read_text().splitlines()
    assert len(lines) == 3  # header + one rating for each agent, each scored once

    import mlflow

    mlflow.set_tracking_uri(workspace["cfg"]["tracking"]["uri"])
    runs = mlflow.search_runs(experiment_names=["test"], output_format="list")
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.tags["agent_id"] for r in children) == ["newcomer_long", "newcomer_short"]
    assert len(runs) - len(children) == 2  # one parent per night that had work


# slow: four whole Prefect flow runs and an `enigma serve` subprocess
@pytest.mark.slow
def test_one_dead_agent_fails_alone_and_is_retried_the_next_night(workspace, capsys):
    from mlflow import MlflowClient

    from tests.agents.serving import free_port, serve_process

    cfg = workspace["cfg"]
    # The dead agent: a real OpenAI-kind agent whose server is down (nothing listens on the port).
    port = free_port()
    cfg["sample"]["agents"] = {"openai": {"max_retries": 0, "connect_timeout_s": 2.0, "concurrency": 1}}
    Path(workspace["params"]).write_text(yaml.safe_dump(cfg))
    first = _night_where_one_fails(workspace, "comeback", f"openai:http://127.0.0.1:{port}/v1#m", "sampling")
    assert set(first["failed"]) == {"comeback"}
    reason = first["failed"]["comeback"]["sampling"]
    assert reason.startswith("SamplingAborted: agent openai:") and "calls failed in a row" in reason

    report = json.loads(Path(first["report"]).read_text())
    assert report["failed"] == ["comeback"]
    ok, dead = report["agents"]["newcomer_short"], report["agents"]["comeback"]
    assert ok["status"] == "ok" and ok["errors"] == {} and "reply-length[replies-at-logged-states]" in ok["estimates"]
    assert dead["status"] == "failed" and dead["estimates"] == {} and dead["errors"] == {"sampling": reason}
    seen_file = Path(cfg["nightly"]["seen"])
    assert set(json.loads(seen_file.read_text())["agents"]) == {"newcomer_short"}

    client = MlflowClient(cfg["tracking"]["uri"])
    parent = client.get_run(first["mlflow"]["parent_run_id"])
    assert parent.data.tags["failed_agents"] == "comeback"
    children = {r.data.tags["agent_id"]: r for r in client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")}
    assert children["newcomer_short"].info.status == "FINISHED"
    assert children["comeback"].info.status == "FAILED" and children["comeback"].data.tags["error"] == f"sampling: {reason}"

    # Still down the next night (run as the scheduler's command does): tried again, exit 1.
    assert main(["run", "--params", workspace["params"]]) == 1
    printed = capsys.readouterr()
    assert json.loads(printed.out)["evaluated"] == [] and "error: 1 of 1 new agent(s) failed: comeback" in printed.err
    assert set(json.loads(seen_file.read_text())["agents"]) == {"newcomer_short"}

    # The night after, its server is up: only the failed agent is tried again, scored and marked seen.
    root = Path(workspace["root"])
    (root / "serve-params.yaml").write_text("{}\n")  # the built-in defaults (a named --params must exist)
    serve = [sys.executable, "-c", "from enigma.cli import app; app()", "serve", "python:tests.pipeline.pipeline_agents:newcomer_long",
             "--port", str(port), "--model-name", "m", "--params", str(root / "serve-params.yaml")]
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}")
    with serve_process(serve, port, root, env, root / "server.log"):
        second = nightly(workspace["params"])
    assert second["evaluated"] == ["comeback"] and second["failed"] == {}
    estimates = json.loads(Path(second["report"]).read_text())["agents"]["comeback"]["estimates"]
    assert estimates["reply-length[replies-at-logged-states]"]["reward"] > \
        ok["estimates"]["reply-length[replies-at-logged-states]"]["reward"]  # it speaks 5 words, not 2
    assert set(json.loads(seen_file.read_text())["agents"]) == {"newcomer_short", "comeback"}
    assert nightly(workspace["params"]) == {"evaluated": [], "report": None}


# slow: a whole Prefect flow run
@pytest.mark.slow
def test_a_retrieval_stand_in_under_the_stores_knowledge_base_fails_alone_with_the_reason(workspace):
    """A stand-in's replies were said in other conversations: the store's knowledge base would judge
    them against customers they never answered, so that agent fails (not sampled, not scored) and
    the others are scored as usual."""
    from tests.pipeline.conftest import write_params

    cfg = workspace["cfg"]
    cfg["nightly"]["knowledge"] = "python:enigma.sim.knowledge:airline_checked_every_turn"
    # a stand-in that does not say where its replies were said (sources are on by default)
    cfg["sample"]["agents"] = {"transcripts": {"sources": False}}
    write_params(workspace)
    out = _night_where_one_fails(workspace, "retrieved", f"transcripts:{cfg['nightly']['store']}?agent=a1", "knowledge")
    reason = out["failed"]["retrieved"]["knowledge"]
    assert "retrieval stand-in's replies come from other conversations" in reason and "agent=a1" in reason
    assert not list(Path(cfg["nightly"]["work_dir"]).glob("targets/retrieved-*"))  # never sampled


# slow: two whole Prefect flow runs with ENIGMA on frozen sentence vectors
@pytest.mark.slow
def test_the_nightly_enigma_reads_the_stores_knowledge_base(workspace):
    """``nightly.knowledge`` (the store's base, set as its benchmark's so that the estimates are made
    as the calibration results were): the nightly ENIGMA's saved heads read the knowledge block,
    and without it they do not."""
    import torch

    from enigma.encoders.knowledge import KNOWLEDGE_DIM
    from tests.pipeline.conftest import write_params

    root, cfg = workspace["root"], workspace["cfg"]
    cfg["shared"] = {"embedding_cache": str(root / "embeddings")}
    cfg["estimators"] = {"enigma": {"dice": {"preset": "exact_nu", "encoder": "frozen", "project_dim": 4,
                                             "interval_resamples": 0}}}
    registry = Path(cfg["nightly"]["registry"])
    _registry(registry, ["newcomer_short"])
    widths = {}
    for tag, base in (("without", None), ("with", "python:enigma.sim.knowledge:airline_checked_every_turn")):
        cfg["nightly"].update(estimators=["enigma"], knowledge=base, calibration_results=None,
                              seen=str(root / tag / "seen.json"), work_dir=str(root / tag),
                              report_dir=str(root / tag / "reports"))
        write_params(workspace)
        assert nightly(workspace["params"])["evaluated"] == ["newcomer_short"]
        heads = torch.load(next((root / tag).rglob("newcomer_short.heads.pt")), weights_only=False)
        widths[tag] = heads.zeta_net[-1].in_features
    assert widths["with"] == widths["without"] + KNOWLEDGE_DIM + 2  # the table's three, the request check, the search with the user's words
