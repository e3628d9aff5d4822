"""The stage layer (``enigma.pipeline``) through ``enigma stage <stage> <benchmark>``, the command
dvc.yaml runs, on a tiny benchmark."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from enigma.cli import app
from tests.pipeline.conftest import write_params

REPLY_LENGTH = "reply-length[replies-at-logged-states]"


def stage(workspace, *args: str):
    return CliRunner().invoke(app, ["stage", *args, "--params", workspace["params"], "--no-progress"])


def _ok(result):
    assert result.exit_code == 0, result.output
    return result.output


def test_store_sample_train_report_track(workspace):
    cfg = workspace["cfg"]
    b = cfg["benchmarks"]["tiny"]
    b["estimators"] = ["python:enigma.comparators.baselines:ReplyLength", "experience-mean",
                       "python:tests.pipeline.pipeline_agents:FailsOnA2"]
    b["note"] = "agents stood in for by test doubles"
    write_params(workspace)
    data = workspace["data"]

    _ok(stage(workspace, "store", "tiny"))
    # the store stage writes the truth too: each agent's own mean rating (human-data truth)
    import pandas as pd

    truth = pd.read_parquet(data / "truth.parquet")
    assert sorted(truth.agent_id) == [f"a{k}" for k in range(1, 6)] and set(truth.rating) == {"reward"}
    _ok(stage(workspace, "rollouts", "tiny"))
    _ok(stage(workspace, "sample", "tiny"))
    assert sorted(p.name for p in (data / "targets").iterdir()) == [f"a{k}.parquet" for k in range(1, 6)]
    out = _ok(stage(workspace, "train", "tiny"))
    assert "1 (estimator, agent) run(s) failed" in out
    out = _ok(stage(workspace, "report", "tiny"))
    assert "MLflow: parent run" in out
    s = json.loads((workspace["report"] / "summary.json").read_text())
    assert s["note"] == "agents stood in for by test doubles"
    assert s["estimators"][REPLY_LENGTH]["reward"]["pearson"] > 0.9
    assert s["estimators"][REPLY_LENGTH]["labels"] == {"replies-at-logged-states": "agents stood in for by test doubles"}
    assert s["errors"] == [{"estimator": "fails-on-a2", "agent_id": "a2", "error": "RuntimeError: diverged at step 400"}]


def test_stage_errors_are_one_line(workspace):
    r = stage(workspace, "train", "nope")
    assert r.exit_code == 2 and "benchmarks has no benchmark 'nope'" in r.output
    r = stage(workspace, "fly", "tiny")
    assert r.exit_code == 2 and "unknown stage 'fly'" in r.output
    # training before sampling: the missing file is named
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["python:enigma.comparators.baselines:ReplyLength"]
    write_params(workspace)
    _ok(stage(workspace, "store", "tiny"))
    _ok(stage(workspace, "rollouts", "tiny"))
    r = stage(workspace, "train", "tiny")
    assert r.exit_code == 2 and "a1.parquet: target actions of a1 missing" in r.output and "Traceback" not in r.output
    # an estimator that needs rollouts on a benchmark without them: said once, before any work
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["reply-length-rollouts"]
    write_params(workspace)
    r = stage(workspace, "train", "tiny")
    assert r.exit_code == 2 and "reply-length[own-rollouts] needs the agents' rollouts" in r.output


def test_learned_customer_rollouts_feed_the_own_rollout_estimators_and_full_adds_the_slow_ones(workspace):
    from enigma.store.experience import ExperienceStore

    b = workspace["cfg"]["benchmarks"]["tiny"]
    b.update(rollouts={"learned_customer": {"similarity": "words", "episodes": 4}}, estimators=["reply-length-rollouts"],
             full_estimators=["experience-mean", "see-question-rate-rollouts"])
    write_params(workspace)
    data = workspace["data"]

    _ok(stage(workspace, "store", "tiny"))
    _ok(stage(workspace, "rollouts", "tiny"))
    r = ExperienceStore.open(data / "rollouts")
    assert r.agents() == [f"a{k}" for k in range(1, 6)] and r.dialogues.num_rows == 20
    for agent, meta in zip(r.dialogues.column("agent_id").to_pylist(), r.dialogues.column("meta").to_pylist()):
        assert json.loads(meta)["customer_agent"] != agent  # its own logged customers are never replayed
    _ok(stage(workspace, "sample", "tiny"))
    assert list((data / "targets").iterdir()) == []  # no estimator scores from the agents' replies
    _ok(stage(workspace, "train", "tiny"))
    assert sorted(p.name for p in (data / "results").iterdir()) == ["reply-length%5Bown-rollouts%5D"]
    # the slow estimators write their own results (a DVC output of their own), two at a time
    out = _ok(stage(workspace, "train", "tiny", "--full"))
    assert "2 estimators x 5 agents, 2 at a time" in out
    assert sorted(p.name for p in (data / "results").iterdir()) == ["reply-length%5Bown-rollouts%5D"]
    assert len(list((data / "results_full").glob("*/*.json"))) == 10
    _ok(stage(workspace, "report", "tiny", "--no-track"))
    s = json.loads((workspace["report"] / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["reply-length[own-rollouts]"]
    # the full report: every estimator side by side
    _ok(stage(workspace, "report", "tiny", "--full", "--no-track"))
    s = json.loads((workspace["root"] / "reports" / "tiny_full" / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["experience-mean", "reply-length[own-rollouts]", "see-features:question_rate[own-rollouts]"]
    assert s["estimators"]["reply-length[own-rollouts]"]["regime"] == ["own-rollouts"]
    assert s["n_agents"] == 5


def test_without_full_estimators_the_full_stages_give_the_main_report(workspace):
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["experience-mean", "python:enigma.comparators.baselines:ReplyLength"]
    workspace["cfg"]["report"]["plots"] = True  # issue 59: which figures each report draws
    write_params(workspace)
    for s in ("store", "rollouts", "sample", "train"):
        _ok(stage(workspace, s, "tiny"))
    _ok(stage(workspace, "train", "tiny", "--full"))
    assert (workspace["data"] / "results_full").is_dir() and not any((workspace["data"] / "results_full").iterdir())
    _ok(stage(workspace, "report", "tiny", "--no-track"))
    _ok(stage(workspace, "report", "tiny", "--full", "--no-track"))
    main = json.loads((workspace["report"] / "summary.json").read_text())
    full = json.loads((workspace["root"] / "reports" / "tiny_full" / "summary.json").read_text())
    assert full["estimators"] == main["estimators"] and full["benchmark"] == "tiny"
    # The main report (git's) draws the headline figures: the overview and, with no ENIGMA in it,
    # the first-ranked estimator's; its page names the full report's stage in plain text. The full
    # report draws every estimator's, and its page says they are DVC outputs and which stage draws them.
    from enigma.evaluation.report import slugs

    first = main["ranking"][0]["estimator"]
    shown = sorted(p.name for p in (workspace["report"] / "figures").glob("*.png"))
    assert shown == sorted(["overview.png", f"{slugs([first])[first]}_vs_truth.png", f"{slugs([first])[first]}_error.png"])
    page = (workspace["report"] / "index.html").read_text()
    assert "dvc repro report_full@tiny builds them" in page and 'href="#est-' + slugs([first])[first] in page
    assert "Headline figures" in page
    assert len(list((workspace["root"] / "reports" / "tiny_full" / "figures").glob("*.png"))) == 1 + 2 * len(full["estimators"])
    full_page = (workspace["root"] / "reports" / "tiny_full" / "index.html").read_text()
    assert "figures are DVC outputs" in full_page and "dvc repro report_full@tiny draws them" in full_page
    assert "Figures per estimator" in full_page and "Headline figures" not in full_page


def test_a_result_file_of_an_estimator_no_longer_listed_is_not_reported(workspace):
    for s in ("store", "rollouts", "sample"):
        _ok(stage(workspace, s, "tiny"))
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["experience-mean", "python:enigma.comparators.baselines:ReplyLength"]
    write_params(workspace)
    _ok(stage(workspace, "train", "tiny"))
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["experience-mean"]
    write_params(workspace)
    _ok(stage(workspace, "report", "tiny", "--no-track"))
    s = json.loads((workspace["report"] / "summary.json").read_text())
    assert sorted(s["estimators"]) == ["experience-mean"]  # the reply-length files stay on disk, unreported
    assert (workspace["data"] / "results" / "reply-length%5Breplies-at-logged-states%5D").is_dir()


def test_one_estimator_left_to_run_is_shared_by_the_workers_with_the_numbers_of_one(workspace):
    """The train stage deals each estimator's agents into one share per worker: every agent gets
    exactly one result, and the numbers are those of a single worker running them all."""
    data = workspace["data"]
    workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = ["enigma"]
    write_params(workspace)
    for s in ("store", "rollouts", "sample"):
        _ok(stage(workspace, s, "tiny"))

    def estimates(workers: int) -> dict[str, list[float]]:
        workspace["cfg"]["pipeline"]["max_workers"] = workers
        write_params(workspace)
        out = _ok(stage(workspace, "train", "tiny"))
        assert f"1 estimators x 5 agents, {workers} at a time" in out or workers == 1
        files = sorted((data / "results" / "enigma").glob("*.json"))
        got = {f.stem: [r["estimate"] for r in json.loads(f.read_text())["rows"]] for f in files}
        shutil.rmtree(data / "results")
        return got

    shared = estimates(2)
    assert sorted(shared) == [f"a{k}" for k in range(1, 6)]
    assert shared == estimates(1)


def test_an_entrys_note_is_in_the_reports_labels(workspace):
    """A params entry's ``note`` (what a studied setting is) reaches the report's labels column,
    beside the labels of its results; an entry without one gets none."""
    cfg = workspace["cfg"]
    cfg["estimators"]["enigma-short"] = {"base": "enigma", "note": "a studied setting: fewer steps", "dice": {"steps": 20}}
    cfg["benchmarks"]["tiny"]["estimators"] = ["enigma", "enigma-short", "experience-mean"]
    write_params(workspace)
    for step in ("store", "rollouts", "sample", "train"):
        _ok(stage(workspace, step, "tiny"))
    _ok(stage(workspace, "report", "tiny", "--no-track"))
    s = json.loads((workspace["report"] / "summary.json").read_text())
    assert s["estimators"]["enigma-short"]["labels"].get("note") == "a studied setting: fewer steps"
    assert "note" not in s["estimators"]["enigma"]["labels"]
    html = (workspace["report"] / "index.html").read_text()
    assert "a studied setting: fewer steps" in html


def test_a_benchmarks_knowledge_base_reaches_its_enigma_through_the_train_stage(workspace):
    """``benchmarks.<b>.knowledge``, as `dvc repro` runs it: the train stage's ENIGMA reads the
    knowledge block (its saved heads are wider by it), an entry that sets ``dice.knowledge: null``
    (a studied setting kept as it was studied) reads none, and a base that cannot be loaded is one
    line naming the setting."""
    import torch

    from enigma.encoders.knowledge import KNOWLEDGE_DIM

    cfg = workspace["cfg"]
    cfg["shared"] = {"embedding_cache": str(workspace["root"] / "embeddings")}
    cfg["estimators"] = {
        "enigma": {"dice": {"preset": "exact_nu", "encoder": "frozen", "project_dim": 4, "interval_resamples": 0}},
        "enigma-plain": {"base": "enigma", "dice": {"knowledge": None}},
    }
    b = cfg["benchmarks"]["tiny"]
    b.update(estimators=["enigma", "enigma-plain"], knowledge="python:enigma.sim.knowledge:airline_checked_every_turn")  # the shipped benchmarks' base
    write_params(workspace)
    for s in ("store", "rollouts", "sample", "train"):
        _ok(stage(workspace, s, "tiny"))

    def width(name: str) -> int:
        heads = torch.load(workspace["data"] / "results" / name / "a1.heads.pt", weights_only=False)
        return heads.zeta_net[-1].in_features

    assert width("enigma") == width("enigma-plain") + KNOWLEDGE_DIM + 2  # the table's three, the request check, the search with the user's words
    b["knowledge"] = "python:enigma.sim.knowledge:no_such_base"
    write_params(workspace)
    r = stage(workspace, "train", "tiny")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "benchmarks.tiny.knowledge 'python:enigma.sim.knowledge:no_such_base': module 'enigma.sim.knowledge' has no callable" in r.output


def test_a_python_estimator_whose_code_fails_or_exits_is_one_named_line(workspace, tmp_path, monkeypatch):
    """A ``python:`` estimator in the benchmark's list is the user's own code: a factory that calls
    exit() once ended the train stage with its exit code (0: a silent success with nothing
    trained), and a module that fails on import or a path for a module name gave a traceback."""
    (tmp_path / "user_estimators_59.py").write_text(
        "def quits():\n    raise SystemExit(0)\n\ndef breaks():\n    raise RuntimeError('no GPU here')\n")
    (tmp_path / "user_estimators_broken_59.py").write_text("import no_such_package_59\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for s in ("store", "rollouts", "sample"):
        _ok(stage(workspace, s, "tiny"))
    cases = {
        "python:user_estimators_59:quits": "user_estimators_59.quits() called exit(0)",
        "python:user_estimators_59:breaks": "user_estimators_59.breaks() raised RuntimeError: no GPU here",
        "python:user_estimators_broken_59:make": "cannot import module 'user_estimators_broken_59'",
        "python:../user_estimators_59:quits": "is not a dotted module name",
    }
    for spec, says in cases.items():
        workspace["cfg"]["benchmarks"]["tiny"]["estimators"] = [spec]
        write_params(workspace)
        r = stage(workspace, "train", "tiny")
        errors = [line for line in r.output.splitlines() if line.startswith("error:")]
        assert r.exit_code == 2 and "Traceback" not in r.output and len(errors) == 1, (spec, r.output)
        assert f"estimator {spec!r}" in errors[0] and says in errors[0], (spec, r.output)


def test_the_encode_step_is_shared_by_the_workers_with_the_numbers_of_one(workspace):
    """Through `enigma stage train`: with an estimator that reads the embedding cache, the two
    workers encode the store's texts and the sampled replies once, each a share of the batches
    (each writes its own shards), and the results are those of one process encoding them all."""
    import re

    cfg, root = workspace["cfg"], workspace["root"]
    cfg["benchmarks"]["tiny"]["estimators"] = ["adem"]
    cfg["encode"] = {"cache": {"batch_size": 4}}
    cfg["shared"] = {"embedding_cache": str(root / "emb-2")}
    write_params(workspace)
    for s in ("store", "rollouts", "sample"):
        _ok(stage(workspace, s, "tiny"))

    def run(workers: int, cache: str) -> tuple[str, dict[str, list[float]]]:
        cfg["shared"]["embedding_cache"] = str(root / cache)
        cfg["pipeline"]["max_workers"] = workers
        write_params(workspace)
        out = _ok(stage(workspace, "train", "tiny"))
        files = sorted((workspace["data"] / "results").glob("*/*.json"))
        got = {f.stem: [r["estimate"] for r in json.loads(f.read_text())["rows"]] for f in files}
        shutil.rmtree(workspace["data"] / "results")
        return out, got

    out, shared = run(2, "emb-2")
    texts, encoded = map(int, re.search(r"embedding cache: (\d+) texts, (\d+) newly encoded", out).groups())
    assert encoded == texts > 8  # every distinct text once, in more than one batch of 4
    assert len(list((root / "emb-2").glob("*/shard-*.npz"))) >= 2  # both workers wrote
    assert sorted(shared) == [f"a{k}" for k in range(1, 6)]
    assert "0 newly encoded" in run(2, "emb-2")[0]  # a rerun finds every text cached
    # the reference: one process fills a cache of its own (`enigma encode`, as the step ran before)
    targets = sorted((workspace["data"] / "targets").glob("*.parquet"))
    args = ["encode", "-e", str(workspace["data"] / "store"), *[a for t in targets for a in ("-t", str(t))],
            "--cache-dir", str(root / "emb-1"), "--params", workspace["params"], "--no-progress"]
    assert f'"newly_encoded": {texts}' in _ok(CliRunner().invoke(app, args))
    out, one = run(2, "emb-1")
    assert "0 newly encoded" in out and one == shared
