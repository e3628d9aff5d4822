from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.nightly import nightly


def _registry(path: Path, names: list[str]) -> None:
    lines = ["agents:"] + [f"  {n}: python:tests.pipeline.pipeline_agents:{n}" for n in names]
    path.write_text("\n".join(lines) + "\n")


# slow: whole Prefect flow runs (about 10-40 s on 2 busy cores); CI runs them
@pytest.mark.slow
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
