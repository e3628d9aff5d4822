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


def test_rollouts_stage_feeds_the_own_rollout_estimators_and_full_adds_the_slow_ones(workspace, capsys):
    from enigma.store.experience import ExperienceStore

    cfg = workspace["cfg"]
    b = cfg["pipeline"]["benchmarks"]["tiny"]
    rollouts_dir = str(Path(b["store"]).parent / "rollouts")
    full = {"estimators": ["experience-mean", "see-question-rate-rollouts"],
            "results_dir": str(workspace["root"] / "results_full"), "report_dir": str(workspace["root"] / "report_full")}
    b.update(rollouts=rollouts_dir, learned_customer={"similarity": "words", "episodes": 4},
             estimators=["reply-length-rollouts"], full=full)
    Path(workspace["params"]).write_text(yaml.safe_dump(cfg))
    args = ["tiny", "--params", workspace["params"]]

    assert main(["rollouts", *args]) == 0
    r = ExperienceStore.open(rollouts_dir)
    assert r.agents() == [f"a{k}" for k in range(1, 6)] and r.dialogues.num_rows == 20
    for agent, meta in zip(r.dialogues.column("agent_id").to_pylist(), r.dialogues.column("meta").to_pylist()):
        assert json.loads(meta)["customer_agent"] != agent  # its own logged customers are never replayed
    assert main(["train", *args]) == 0
    assert sorted(p.name for p in Path(b["results_dir"]).iterdir()) == ["reply-length%5Bown-rollouts%5D"]
    # the slow estimators write their own results (a DVC output of their own), two at a time
    assert main(["train", *args, "--full"]) == 0
    assert "2 estimators x 5 agents, 2 at a time" in capsys.readouterr().out
    assert sorted(p.name for p in Path(b["results_dir"]).iterdir()) == ["reply-length%5Bown-rollouts%5D"]
    assert len(list(Path(full["results_dir"]).glob("*/*.json"))) == 10
    assert main(["report", *args, "--no-track"]) == 0
    s = json.loads((Path(b["report_dir"]) / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["reply-length[own-rollouts]"]
    # the full report: every estimator side by side
    assert main(["report", *args, "--no-track", "--full"]) == 0
    s = json.loads((Path(full["report_dir"]) / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["experience-mean", "reply-length[own-rollouts]", "see-features:question_rate[own-rollouts]"]
    assert s["estimators"]["reply-length[own-rollouts]"]["regime"] == ["own-rollouts"]
    assert s["n_agents"] == 5


def test_rollouts_stage_needs_its_settings(workspace, capsys):
    assert main(["rollouts", "tiny", "--params", workspace["params"]]) == 2
    assert "needs both 'rollouts' (where to write) and 'learned_customer'" in capsys.readouterr().err


def test_full_stages_need_a_full_section(workspace, capsys):
    for stage in ("train", "report"):
        assert main([stage, "tiny", "--params", workspace["params"], "--full"]) == 2
        assert "pipeline.benchmarks.tiny has no 'full' section" in capsys.readouterr().err
