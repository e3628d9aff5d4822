"""One way to score an agent and one way to build a report: ``enigma estimate`` gives a held-out
agent the number the benchmark's train stage gives it, and ``enigma report build`` writes the
report the report stage writes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from enigma.cli import app
from enigma.evaluation.results import read_results, result_path
from tests.pipeline.conftest import write_params


def _run(*args: str) -> str:
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


def _stages(workspace, *stages: str) -> None:
    for s in stages:
        _run("stage", *s.split(), "tiny", "--params", workspace["params"], "--no-progress", "--no-track")


def test_enigma_estimate_gives_a_held_out_agent_the_train_stages_number(workspace):
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["enigma"]
    write_params(workspace)
    _stages(workspace, "store", "rollouts", "sample", "train")
    data = workspace["data"]
    staged = read_results(data / "results").query("agent_id == 'a3'").set_index("rating")
    out = workspace["root"] / "estimate"
    # the benchmark's store and a3's sampled replies: enigma estimate leaves a3's own dialogues out
    _run("estimate", "--experience", data / "store", "--target-actions", f"a3={data / 'targets' / 'a3.parquet'}",
         "--out", out, "--params", workspace["params"], "-q")
    est = json.loads((out / "estimates.json").read_text())
    for rating, row in staged.iterrows():
        got = est["targets"]["a3"][rating]
        assert got["estimate"] == row["estimate"] and got["unnormalised"] == row["unnormalised"] and got["ess"] == row["ess"]
    assert est["diagnostics"]["a3"]["excluded_agents"] == ["a3"]
    # the same result file format and fingerprint: the estimate command's file says what the stage's says
    stage_file = json.loads(result_path(data / "results", "enigma", "a3").read_text())
    cli_file = json.loads(result_path(out / "results", "enigma", "a3").read_text())
    assert cli_file["fingerprint"] == stage_file["fingerprint"]


def test_report_build_writes_the_report_stages_report(workspace):
    note = "agents stood in for by test doubles"
    workspace["cfg"]["benchmarks"]["tiny"]["note"] = note
    write_params(workspace)
    _stages(workspace, "store", "rollouts", "sample", "train", "report")
    data, staged = workspace["data"], workspace["report"]
    out = workspace["root"] / "cli-reports"
    _run("report", "build", "--results", data / "results", "--truth", data / "truth.parquet", "--benchmark", "tiny",
         "--out", out, "--params", workspace["params"], "--note", note)
    by_stage = json.loads((staged / "summary.json").read_text())
    by_cli = json.loads((out / "tiny" / "summary.json").read_text())
    assert by_cli == by_stage
    # ENIGMA's ablation without post-normalisation is in both (it used to be added by the pipeline only)
    assert "enigma-unnormalised" in by_cli["estimators"] and by_cli["note"] == note
    assert (out / "tiny" / "index.html").read_text() == (staged / "index.html").read_text()
