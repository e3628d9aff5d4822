"""``enigma report build`` / ``show`` / ``paper-spe``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from enigma.cli import app
from enigma.evaluation import heldout, loao
from tests.evaluation.eval_fixtures import RecordingMean, target_actions_for

runner = CliRunner()


def test_build_from_a_results_folder_and_store_truth_then_show(tmp_path, store):
    results_dir = tmp_path / "loao"
    sources = heldout.HeldOutSources(target_actions=target_actions_for(store, {f"agent{k}": k + 1 for k in range(6)}))
    loao.run_loao(store, [RecordingMean("enigma")], sources, results_dir=results_dir, progress=False)
    store_dir = store.write(tmp_path / "store")
    params = tmp_path / "params.yaml"
    params.write_text("report:\n  bootstrap_resamples: 50\n  plots: false\n")
    out = runner.invoke(app, ["report", "build", "--results", str(results_dir), "--benchmark", "toy",
                              "--truth-store", str(store_dir), "--out", str(tmp_path / "reports"), "--params", str(params)])
    assert out.exit_code == 0, out.output
    summary_path = tmp_path / "reports" / "toy" / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary["n_agents"] == 6 and summary["ratings"] == ["enjoy", "fluency"]
    shown = runner.invoke(app, ["report", "show", str(summary_path)])
    assert shown.exit_code == 0
    assert str(tmp_path / "reports" / "toy" / "index.html") in shown.output
    assert "enigma" in shown.output
    # the headline table, a line per row, as the page leads with it (no other estimator: none)
    from enigma.evaluation.headline import headline_cells

    lines = [" ".join(line.split()) for line in shown.output.splitlines()]
    assert "agents ENIGMA: mean Pearson [95% CI] best other estimator: mean Pearson ENIGMA − best other [95% CI, paired] ENIGMA's rank" in lines
    for row in summary["headline_table"]:
        assert " ".join(" ".join(headline_cells(row).values()).split()) in lines


def test_user_errors_exit_2_with_the_file_named(tmp_path):
    bad = tmp_path / "results.csv"
    pd.DataFrame({"estimator": ["e"], "agent_id": ["a"], "rating": ["r"]}).to_csv(bad, index=False)
    truth = tmp_path / "truth.csv"
    pd.DataFrame({"agent_id": ["a"], "rating": ["r"], "value": [0.5]}).to_csv(truth, index=False)
    (tmp_path / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    out = runner.invoke(app, ["report", "build", "--results", str(bad), "--benchmark", "b", "--truth", str(truth),
                              "--params", str(tmp_path / "defaults.yaml")])
    assert out.exit_code == 2 and "results.csv: missing column(s) ['estimate']" in out.output
    out = runner.invoke(app, ["report", "build", "--results", str(bad), "--benchmark", "b",
                              "--params", str(tmp_path / "defaults.yaml")])
    assert out.exit_code == 2 and "exactly one of --truth" in out.output
    out = runner.invoke(app, ["report", "show", str(tmp_path / "missing.json")])
    assert out.exit_code == 2 and "missing.json: summary not found" in out.output


def test_paper_spe_command(tmp_path, raw_data):
    params = tmp_path / "params.yaml"
    params.write_text("report:\n  bootstrap_resamples: 50\n  plots: false\n")
    out = runner.invoke(app, ["report", "paper-spe", "--data-dir", str(raw_data / "see2019_convai2_humaneval"),
                              "--out", str(tmp_path), "--params", str(params)])
    assert out.exit_code == 0, out.output
    assert "+0.591" in out.output and "+0.435" in out.output


def test_paper_spe_defaults_to_the_repositorys_data_and_says_where_it_looked(tmp_path, raw_data, monkeypatch):
    params = tmp_path / "params.yaml"
    params.write_text("report:\n  bootstrap_resamples: 50\n  plots: false\n")
    args = ["report", "paper-spe", "--out", str(tmp_path), "--params", str(params)]
    monkeypatch.chdir(raw_data.parents[1])  # the repository root, where users run the CLI
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "+0.591" in out.output
    # elsewhere the default is not there: a clear error, not a lookup beside the installed package
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert "data/raw/see2019_convai2_humaneval: See 2019 data folder not found" in out.output
    assert "--data-dir" in out.output


def test_report_build_and_show_say_when_only_enigmas_own_settings_lead(tmp_path):
    """Through the user's commands (``report build`` from a results file, then ``report show``):
    a full report whose only rows above ENIGMA are its own settings says that ENIGMA leads the
    other estimators, not that it is not the best."""
    rng = np.random.default_rng(0)
    noise = {"enigma-wide": 0.005, "enigma": 0.05, "ridge": 0.3, "bleu": 0.5}
    truth, results = [], []
    for i in range(10):
        for r in ("enjoy", "fluency"):
            t = 0.3 + 0.05 * i + (0.1 if r == "fluency" else 0.0)
            truth.append({"agent_id": f"a{i}", "rating": r, "value": t})
            results += [{"estimator": n, "agent_id": f"a{i}", "rating": r, "estimate": t + rng.normal(0, sd),
                         "regime": "replies-at-logged-states"} for n, sd in noise.items()]
    pd.DataFrame(results).to_csv(tmp_path / "results.csv", index=False)
    pd.DataFrame(truth).to_csv(tmp_path / "truth.csv", index=False)
    params = tmp_path / "params.yaml"
    params.write_text("report:\n  bootstrap_resamples: 50\n  plots: false\n")
    out = runner.invoke(app, ["report", "build", "--results", str(tmp_path / "results.csv"), "--benchmark", "toy",
                              "--truth", str(tmp_path / "truth.csv"), "--out", str(tmp_path / "reports"), "--params", str(params)])
    assert out.exit_code == 0, out.output
    shown = runner.invoke(app, ["report", "show", str(tmp_path / "reports" / "toy" / "summary.json")])
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())  # the terminal may wrap the sentence
    # the headline table: ridge is the best other estimator, ENIGMA ahead of it and second of 4; the
    # sentence under it says that only its own setting ranks above it
    summary = json.loads((tmp_path / "reports" / "toy" / "summary.json").read_text())
    row = summary["headline_table"][-1]
    assert row["half"] == "all" and row["best_other"]["estimator"] == "ridge" and row["difference"]["value"] > 0
    assert f"all agents (10) {row['enigma']['value']:.3f}" in text and f"ridge {row['best_other']['value']:.3f} +" in text
    assert "ENIGMA is not first across all agents: it ranks 2 of 4, below only its own setting enigma-wide; it leads every other estimator." in text
    assert "NOT the best" not in text and "ENIGMA is the best estimator here that is not one of its own settings" in summary["headline"]


def test_a_binary_file_in_the_results_folder_is_named(tmp_path):
    results_dir = tmp_path / "results"
    (results_dir / "enigma").mkdir(parents=True)
    binary = results_dir / "enigma" / "agent0.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xae\x00\xff")
    truth = tmp_path / "truth.csv"
    pd.DataFrame({"agent_id": ["agent0"], "rating": ["r"], "value": [0.5]}).to_csv(truth, index=False)
    params = tmp_path / "params.yaml"
    params.write_text("report:\n  plots: false\n")
    out = runner.invoke(app, ["report", "build", "--results", str(results_dir), "--benchmark", "b", "--truth", str(truth),
                              "--out", str(tmp_path / "reports"), "--params", str(params)])
    assert out.exit_code == 2, out.output
    assert out.output.startswith(f"error: {binary}: not a result file") and "can't decode byte 0x89" in out.output
    assert "Traceback" not in out.output
    shown = runner.invoke(app, ["report", "show", str(binary)])
    assert shown.exit_code == 2 and shown.output.startswith(f"error: {binary}: not a report summary (not UTF-8 text")
