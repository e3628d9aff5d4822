from __future__ import annotations

import json
from pathlib import Path

import yaml

from flows.stages import main

REPLY_LENGTH = "reply-length[replies-at-logged-states]"


def test_dvc_stage_commands_sample_train_report(workspace, capsys):
    cfg = workspace["cfg"]
    b = cfg["pipeline"]["benchmarks"]["tiny"]
    b["estimators"] = ["python:enigma.comparators.baselines:ReplyLength", "experience-mean",
                       "python:tests.pipeline.pipeline_agents:FailsOnA2"]
    b["note"] = "agents stood in for by test doubles"
    Path(workspace["params"]).write_text(yaml.safe_dump(cfg))
    args = ["tiny", "--params", workspace["params"]]

    assert main(["sample", *args]) == 0
    assert sorted(p.name for p in Path(b["targets_dir"]).iterdir()) == [f"a{k}.parquet" for k in range(1, 6)]
    assert main(["train", *args]) == 0
    assert "1 (estimator, agent) run(s) failed" in capsys.readouterr().out
    assert main(["report", *args]) == 0
    assert "MLflow: parent run" in capsys.readouterr().out
    s = json.loads((Path(b["report_dir"]) / "summary.json").read_text())
    assert s["note"] == "agents stood in for by test doubles"
    assert s["estimators"][REPLY_LENGTH]["reward"]["pearson"] > 0.9
    assert s["errors"] == [{"estimator": "fails-on-a2", "agent_id": "a2", "error": "RuntimeError: diverged at step 400"}]


def test_stage_errors_are_one_line(workspace, capsys):
    assert main(["train", "nope", "--params", workspace["params"]]) == 2
    assert "pipeline.benchmarks has no benchmark 'nope'" in capsys.readouterr().err
    # training before sampling: the missing file is named
    cfg = workspace["cfg"]
    cfg["pipeline"]["benchmarks"]["tiny"]["estimators"] = ["python:enigma.comparators.baselines:ReplyLength"]
    Path(workspace["params"]).write_text(yaml.safe_dump(cfg))
    assert main(["train", "tiny", "--params", workspace["params"]]) == 2
    assert "a1.parquet: target actions of a1 missing" in capsys.readouterr().err
