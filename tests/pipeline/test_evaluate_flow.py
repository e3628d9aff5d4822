from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.evaluate import evaluate, main
from flows.runners import make_task_runner

REPLY_LENGTH = "reply-length[replies-at-logged-states]"


def _check_summary(path: str) -> dict:
    s = json.loads(Path(path).read_text())
    assert s["benchmark"] == "tiny" and s["n_agents"] == 5 and s["ratings"] == ["reward"]
    # Reply length tracks the test store's ratings; the leave-one-out mean runs against them.
    assert s["estimators"][REPLY_LENGTH]["reward"]["pearson"] > 0.9
    assert s["estimators"]["experience-mean"]["reward"]["pearson"] < -0.9
    return s


def test_evaluate_threads_reports_tracks_and_reuses_results(workspace):
    out = evaluate.with_options(task_runner=make_task_runner(workspace["params"]))("tiny", workspace["params"])
    _check_summary(out["summary_json"])
    assert Path(out["report_html"]).is_file()
    assert len(out["mlflow"]["children"]) == 10  # 2 estimators x 5 held-out agents

    results = Path(workspace["cfg"]["pipeline"]["benchmarks"]["tiny"]["results_dir"])
    files = sorted(results.glob("*/*.json"))
    assert len(files) == 10
    stamps = {f: f.stat().st_mtime_ns for f in files}
    again = evaluate.with_options(task_runner=make_task_runner(workspace["params"]))(
        "tiny", workspace["params"], track=False
    )
    _check_summary(again["summary_json"])
    assert {f: f.stat().st_mtime_ns for f in files} == stamps  # nothing recomputed


def test_evaluate_cli_unknown_benchmark(workspace):
    from enigma.params import ParamsError

    with pytest.raises(ParamsError, match="pipeline.benchmarks has no benchmark 'nope'"):
        main(["nope", "--params", workspace["params"], "--no-track"])


def test_evaluate_on_local_dask_cluster(workspace):
    runner = make_task_runner(workspace["params"], "dask")
    out = evaluate.with_options(task_runner=runner)("tiny", workspace["params"], track=False)
    _check_summary(out["summary_json"])
