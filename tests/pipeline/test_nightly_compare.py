"""The nightly checkpoint comparison, end to end on the tabular problem (exact values known).

The store is the reference tabular logs (agents uniform, b1, b2). The calibration is what a user
runs: `enigma estimate` of each store agent from the others' logs. Then two nights: the first
scores two checkpoints, the second a third one that is much better on ``match``; its report must
give its calibrated interval (named, with how it was made), the other intervals, its rank, the
calibrated verdict against the incumbent with that rule's measured accuracy on the store's own
pairs, the paired bootstrap difference labelled sampling only, and MLflow must hold the same numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from enigma.cli import app
from enigma.ope.tabular import reference_problem
from flows.nightly import nightly

SPEC = "python:enigma.ope.tabular:{}"
DICE = {"preset": "exact_nu", "encoder": "onehot", "tmax": 4, "interval_resamples": 60, "device": "cpu"}


@pytest.mark.slow  # three Prefect flow runs and four CLI estimates (about a minute on 2 busy cores)
def test_a_new_checkpoint_is_ranked_and_compared_with_the_incumbent(workspace):
    root = Path(workspace["root"])
    problem = reference_problem()
    problem.logs(1500, seed=0).write(root / "tabular-store")
    cfg = workspace["cfg"]
    cfg["estimators"] = {"enigma": {"dice": DICE}}
    # 3 calibration agents: a 75% conformal interval is their largest residual (95% would take 19)
    cfg["nightly"].update(store=str(root / "tabular-store"), estimators=["enigma"], compare_rating="match",
                          interval_level=0.75, calibration_results=str(root / "calibration" / "results"))
    Path(workspace["params"]).write_text(yaml.safe_dump(cfg))

    calib = CliRunner().invoke(app, ["estimate", "--experience", str(root / "tabular-store"), "--out", str(root / "calibration"),
                                     "--params", workspace["params"], "-q",
                                     *[f"--target={a}={SPEC.format(a)}" for a in ("uniform", "b1", "b2")]])
    assert calib.exit_code == 0, calib.output

    registry = Path(cfg["nightly"]["registry"])
    registry.write_text(yaml.safe_dump({"agents": {a: SPEC.format(a) for a in ("soft", "rough")}}))
    first = nightly(workspace["params"])
    assert sorted(first["evaluated"]) == ["rough", "soft"]

    registry.write_text(yaml.safe_dump({"agents": {a: SPEC.format(a) for a in ("soft", "rough", "soft_matcher")}}))
    second = nightly(workspace["params"])
    assert second["evaluated"] == ["soft_matcher"]
    report = json.loads(Path(second["report"]).read_text())
    c = report["agents"]["soft_matcher"]["comparison"]["enigma"]
    exact = {t: problem.mdp.exact_value(problem.targets[t])["match"] for t in ("soft", "rough", "soft_matcher")}
    assert abs(c["estimate"] - exact["soft_matcher"]) < 0.05
    lo, hi = c["sampling_interval"]  # 1,500 dialogues: wide, and skewed (rare states drop out of resamples)
    assert lo <= exact["soft_matcher"] <= hi and lo <= c["estimate"] <= hi and hi - lo < 0.3
    calib_est = json.loads((root / "calibration" / "estimates.json").read_text())["targets"]
    store = problem.logs(1500, seed=0)
    from enigma.pipeline.compare import store_means

    means = store_means(store, "match")
    halfwidth = max(abs(calib_est[a]["match"]["estimate"] - means[a]) for a in ("uniform", "b1", "b2"))
    assert c["conformal_interval"] == pytest.approx([c["estimate"] - halfwidth, c["estimate"] + halfwidth])
    assert c["conformal"]["calibration_agents"] == 3
    # the default interval: calibrated on the three store agents, by the one calibration module
    from enigma.evaluation import calibration as calib

    cal = calib.fit([calib_est[a]["match"]["estimate"] for a in ("uniform", "b1", "b2")], [means[a] for a in ("uniform", "b1", "b2")])
    lo, hi, how = calib.interval(cal, c["estimate"], 0.75)
    assert c["interval_kind"] == "calibrated" and c["interval"] == pytest.approx([lo, hi])
    assert c["calibration"]["how"] == how == "conformal over 3 agents" and c["calibration"]["calibration_agents"] == 3
    acc = c["calibration"]["accuracy"]["verdicts"]  # each of the 3 pairs calibrated on the 1 agent left: no verdict
    assert acc["pairs"] == 3 and acc["called"] == 0
    # ranked among the registry's three agents, and compared with the best of the earlier two
    assert (c["rank"], c["ranked"]) == (1, 3)
    best_earlier = max(("soft", "rough"), key=lambda t: exact[t])
    cmp = c["comparison"]
    assert cmp["incumbent"] == best_earlier and cmp["sampling_only_verdict"] == "better"
    v = calib.verdict(cal, c["estimate"], cmp["incumbent_estimate"], 0.75)
    assert (cmp["verdict"], cmp["threshold"], cmp["how"]) == (v["verdict"], pytest.approx(v["threshold"]), v["how"])
    assert cmp["accuracy"] == acc
    assert cmp["interval"][0] > 0 and cmp["interval"][0] < cmp["difference"] < cmp["interval"][1]
    assert abs(cmp["difference"] - (exact["soft_matcher"] - exact[best_earlier])) < 0.08

    # the page a team reads, and MLflow's copy of the same numbers
    md = Path(second["report"]).with_suffix(".md").read_text()
    assert f"against the incumbent **{best_earlier}**" in md and f"**{cmp['verdict']}**" in md
    assert "calibrated interval" in md and "conformal over 3 agents" in md
    assert "this rule on the store's 3 pairs of agents: none called" in md
    assert "sampling only: " in md and "paired bootstrap interval" in md
    assert "<h1>" in Path(second["report"]).with_suffix(".html").read_text()
    from mlflow import MlflowClient

    client = MlflowClient(cfg["tracking"]["uri"])
    child = client.get_run(second["mlflow"]["children"]["enigma/soft_matcher"])
    assert child.data.metrics["diag.compare.rank"] == 1
    assert child.data.metrics["diag.compare.difference.low"] == pytest.approx(cmp["interval"][0])
    assert child.data.params["incumbent"] == best_earlier and child.data.params["verdict"] == cmp["verdict"]
    assert child.data.metrics["diag.compare.interval.low"] == pytest.approx(c["interval"][0])
    assert child.data.metrics["diag.compare.store.verdicts.pairs"] == 3
    assert child.data.metrics["diag.compare.verdict"] == calib.called_direction(cmp["verdict"])


def test_calibration_results_with_no_result_yet_say_why_instead_of_failing_the_night(tmp_path):
    """A calibration folder that exists but holds no result yet (its train stage interrupted before
    the first one) leaves the new agents without a calibrated interval, with the reason, and the
    night goes on; it used to end the whole flow with an EvaluationError."""
    from enigma.pipeline.compare import calibration_residuals

    (tmp_path / "results").mkdir()
    out = calibration_residuals(tmp_path / "results", "enigma", reference_problem().logs(60, seed=0), "match", level=0.9)
    assert out["residuals"] == [] and "no result files" in out["why"]
