"""The leave-one-agent-out runner: what estimators may see, results, resume."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from enigma.comparators.baselines import ExperienceMean, ReplyLength
from enigma.contracts import EstimateResult, Regime
from enigma.evaluation import heldout, loao, results
from enigma.evaluation.errors import EvaluationError
from tests.evaluation.eval_fixtures import RATINGS, RecordingMean, make_store, target_actions_for

WORDS = {f"agent{k}": k + 1 for k in range(6)}


def _sources(store, **kw):
    return heldout.HeldOutSources(target_actions=target_actions_for(store, WORDS), **kw)


def test_never_gives_the_held_out_agents_rated_dialogues(store):
    est = RecordingMean()
    held_out_dialogs = {a: {d for d in store.dialogues.column("dialog_id").to_pylist() if d.startswith(a + "-")} for a in store.agents()}
    table = loao.run_loao(store, [est], _sources(store), progress=False)
    assert len(est.calls) == 6
    for call in est.calls:
        a = call["agent_id"]
        assert a not in call["experience_agents"]
        assert not (held_out_dialogs[a] & call["experience_dialogs"])
        assert len(call["experience_dialogs"]) == 20
        acts = call["target"].target_actions
        # The source answered at every logged state, the held-out agent's own included: those
        # rows must not reach the estimator.
        assert set(acts.column("dialog_id").to_pylist()) <= call["experience_dialogs"]
        assert acts.num_rows == 40
        # Regime (a) only: nothing else about the agent.
        assert call["target"].rollouts is None and call["target"].unrated_dialogues is None
    diag = json.loads(table["diagnostics"].iloc[0])
    assert diag["target_actions_outside_experience_dropped"] == 8
    assert sorted(table.columns) == sorted(results.RESULT_COLUMNS)
    assert len(table) == 6 * len(RATINGS)
    assert set(table["regime"]) == {"replies-at-logged-states"}


def test_regimes_decide_what_the_target_carries(store):
    none_est = RecordingMean("none", {Regime.NONE})
    unrated_est = RecordingMean("unrated", {Regime.OWN_UNRATED_DIALOGUES})
    sources = _sources(
        store,
        unrated_dialogues=heldout.own_dialogues_unrated(store),
        labels={"replies-at-logged-states": "from transcripts: an approximation", "benchmark": "test"},
    )
    table = loao.run_loao(store, [none_est, unrated_est], sources, agents=["agent2"], progress=False)
    t = none_est.calls[0]["target"]
    assert t.target_actions is None and t.unrated_dialogues is None
    assert t.labels == {"benchmark": "test"}  # the regime-(a) label does not apply to it
    u = unrated_est.calls[0]["target"].unrated_dialogues
    assert set(u.agents()) == {"agent2"} and u.dialogues.num_rows == 4
    for name in u.dialogues.schema.names:
        if name.startswith(("rating_", "raw_")) or name == "meta":
            assert u.dialogues.column(name).null_count == u.dialogues.num_rows, name
    assert json.loads(table[table.estimator == "none"]["labels"].iloc[0]) == {"benchmark": "test"}


def test_missing_source_is_a_clear_error(store):
    with pytest.raises(EvaluationError, match="no target_actions source"):
        loao.run_loao(store, [RecordingMean()], heldout.HeldOutSources(), progress=False)
    with pytest.raises(EvaluationError, match="no dialogues in the store"):
        loao.run_loao(store, [RecordingMean()], _sources(store), agents=["nobody"], progress=False)


def test_real_comparators_through_the_protocol(store):
    ests = [ExperienceMean(), ReplyLength(Regime.REPLIES_AT_LOGGED_STATES)]
    table = loao.run_loao(store, ests, _sources(store), progress=False)
    mean = table[(table.estimator == "experience-mean") & (table.rating == "enjoy")].set_index("agent_id")["estimate"]
    # The experience mean of agent k is the mean of the other agents' ratings: it falls as k's
    # own (high) ratings leave the experience.
    assert mean["agent0"] > mean["agent5"]
    length = table[(table.estimator.str.startswith("reply-length")) & (table.rating == "enjoy")].set_index("agent_id")["estimate"]
    assert length["agent5"] > length["agent0"]  # longer replies were rated higher in this store


def test_resume_skips_finished_work_and_reruns_on_change(tmp_path, store):
    est = RecordingMean()
    first = loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 6
    again = loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 6  # nothing recomputed
    assert again["estimate"].tolist() == first["estimate"].tolist()
    # A torn result file is recomputed, the others are kept.
    results.result_path(tmp_path, est.name, "agent3").write_text('{"fingerprint": ')
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert [c["agent_id"] for c in est.calls[6:]] == ["agent3"]
    # So are a file overwritten with bytes that are not UTF-8 and one that is JSON but no result.
    results.result_path(tmp_path, est.name, "agent4").write_bytes(b"\x80\x81\xfe")
    results.result_path(tmp_path, est.name, "agent5").write_text("[1, 2]")
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert sorted(c["agent_id"] for c in est.calls[7:]) == ["agent4", "agent5"]
    # Different experience data (an agent's ratings changed): everything depending on it reruns.
    changed = make_store(seed=1)
    loao.run_loao(changed, [est], _sources(changed), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 9 + 6
    # The held-out agent's replies changed (a new checkpoint): its results rerun.
    n = len(est.calls)
    longer = dict(WORDS, agent2=9)
    loao.run_loao(changed, [est], heldout.HeldOutSources(target_actions=target_actions_for(changed, longer)),
                  results_dir=tmp_path, progress=False)
    assert [c["agent_id"] for c in est.calls[n:]] == ["agent2"]
    # Without resume, everything runs.
    loao.run_loao(changed, [est], _sources(changed), results_dir=tmp_path, resume=False, progress=False)
    assert len(est.calls) == 9 + 6 + 1 + 6
    assert results.read_results(tmp_path)["estimate"].notna().all()


def test_a_new_numerics_version_reruns_saved_results(tmp_path, store):
    """Results are reused by settings, so a code change that moves an estimator's numbers bumps
    its ``numerics``; an estimator that names none is at version 1."""
    est = RecordingMean()
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    est.numerics = 1
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 6  # reused
    est.numerics = 2
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 12  # every agent recomputed with the new code
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    assert len(est.calls) == 12  # and reused from then on


class Failing(RecordingMean):
    attempts: list[str]

    def estimate(self, experience, target):
        self.attempts = getattr(self, "attempts", []) + [target.agent_id]
        if target.agent_id == "agent1":
            raise RuntimeError("remote agent timed out")
        return super().estimate(experience, target)


def test_failures_are_recorded_not_saved_and_retried(tmp_path, store):
    est = Failing("flaky")
    with pytest.raises(RuntimeError):
        loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, progress=False)
    table = loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, errors="record", progress=False)
    bad = table[table.agent_id == "agent1"]
    assert bad["estimate"].isna().all() and bad["error"].str.contains("timed out").all()
    assert not results.result_path(tmp_path, "flaky", "agent1").exists()
    n = len(est.attempts)
    loao.run_loao(store, [est], _sources(store), results_dir=tmp_path, errors="record", progress=False)
    assert est.attempts[n:] == ["agent1"]  # only the failed one is retried


class FullEstimator(RecordingMean):
    """Shaped like ENIGMA: unnormalised estimates, effective sample sizes, nested diagnostics,
    a learning curve and an artifact."""

    name = "enigma"

    def __init__(self):
        super().__init__("enigma")

    def estimate(self, experience, target):
        import pandas as pd
        import torch

        plain = super().estimate(experience, target).estimates
        curve = pd.DataFrame([{"step": s, "loss": 1.0 / s, **{f"estimate_{r}": v + 0.1 / s for r, v in plain.items()}, "run": "all"}
                              for s in (10, 20, 30)])
        return EstimateResult(
            plain, unnormalised={r: v * 0.9 for r, v in plain.items()}, ess={r: 12.5 for r in plain},
            diagnostics={"all": {"ess": 12.5, "converged": True}, "n_dialogues": 20, "config": {"lr": 1e-3}},
            curve=curve, artifacts={"heads": torch.nn.Linear(2, 1)},
        )


def test_estimate_result_extras_curves_and_artifacts(tmp_path, store):
    table = loao.run_loao(store, [FullEstimator()], _sources(store), results_dir=tmp_path, progress=False)
    row = table.iloc[0]
    assert row["unnormalised"] == pytest.approx(row["estimate"] * 0.9) and row["ess"] == 12.5
    diag = json.loads(row["diagnostics"])
    assert diag["all"] == {"ess": 12.5, "converged": True} and diag["n_dialogues"] == 20
    curves = results.read_curves(tmp_path)
    assert len(curves) == 6 * 3 and {"estimator", "agent_id", "run", "step", "estimate_enjoy"} <= set(curves.columns)
    # the artifacts lie beside each result file
    assert results.artifact_path(tmp_path, "enigma", "agent0", "heads").is_file()


class BadOutput(RecordingMean):
    def estimate(self, experience, target):
        return EstimateResult({"enjoy": 0.5})


class PlainDict(RecordingMean):
    def estimate(self, experience, target):
        return {r: 0.5 for r in experience.rating_names}


class NoValueFor(RecordingMean):
    def estimate(self, experience, target):
        return EstimateResult({"enjoy": 0.5, "fluency": float("nan")})


def test_estimator_output_is_checked(store):
    with pytest.raises(EvaluationError, match="no estimate for rating 'fluency'"):
        loao.run_loao(store, [BadOutput("bad")], _sources(store), progress=False)
    with pytest.raises(EvaluationError, match="returned dict, expected an EstimateResult"):
        loao.run_loao(store, [PlainDict("plain")], _sources(store), progress=False)


def test_a_rating_without_an_estimate_is_an_error_row_not_a_number(tmp_path, store):
    table = loao.run_loao(store, [NoValueFor("partial")], _sources(store), agents=["agent1"], results_dir=tmp_path,
                          progress=False)
    by_rating = table.set_index("rating")
    assert by_rating.loc["enjoy", "estimate"] == 0.5 and by_rating.loc["enjoy", "error"] is None
    assert by_rating.loc["fluency", "error"] == "partial: no estimate for rating 'fluency' (the estimate is nan)"
    # the file reads back as a valid results table: the NaN is explained
    assert results.read_results(tmp_path).set_index("rating").loc["fluency", "error"].startswith("partial: no estimate")


def test_read_results_names_the_row_and_field(tmp_path):
    import pandas as pd

    p = tmp_path / "r.csv"
    pd.DataFrame({"estimator": ["e", "e"], "agent_id": ["a", "b"], "rating": ["enjoy", "enjoy"], "estimate": [0.5, "x"]}).to_csv(p, index=False)
    with pytest.raises(EvaluationError, match=r"row 2 .*field 'estimate'"):
        results.read_results(p)
    with pytest.raises(EvaluationError, match="missing column"):
        pd.DataFrame({"estimator": ["e"]}).to_csv(p, index=False)
        results.read_results(p)


def test_sampling_approximation_label_and_failed_samples_are_carried(store):
    plain = target_actions_for(store, WORDS)

    def sampled(agent_id, experience):
        t = plain(agent_id, experience)
        errors = pa.array(["timeout"] + [None] * (t.num_rows - 1), pa.string())
        t = t.append_column("error", errors)
        return t.replace_schema_metadata({"enigma.sampling.approximation": "approximation: retrieval stand-in"})

    est = RecordingMean()
    table = loao.run_loao(store, [est], heldout.HeldOutSources(target_actions=sampled), agents=["agent4"], progress=False)
    assert json.loads(table["labels"].iloc[0]) == {"replies-at-logged-states": "target actions: approximation: retrieval stand-in"}
    assert json.loads(table["diagnostics"].iloc[0])["target_actions_failed"] == 1  # agent0-d0 is in the experience


def test_a_rerun_writes_the_same_bytes_and_its_wall_time_beside_them(tmp_path, store):
    """Two runs of the same inputs give result files with the same bytes (what DVC hashes), on
    any machine: the wall time, which differs on every run, goes to a sidecar that DVC ignores
    (.dvcignore) and comes back in ``read_results``' ``seconds`` column."""
    from dvc.repo import Repo

    from tests.conftest import REPO_ROOT

    firsts, seconds = {}, []
    for run in ("a", "b"):
        out = tmp_path / run
        loao.run_loao(store, [ExperienceMean()], _sources(store), results_dir=out, progress=False)
        files = sorted(out.glob("*/*.json"))
        assert files and all(json.loads(f.read_text())["rows"][0]["seconds"] is None for f in files)
        firsts[run] = {f.relative_to(out): f.read_bytes() for f in files}
        got = results.read_results(out)
        assert got["seconds"].notna().all() and (got["seconds"] >= 0).all()
        seconds.append(got["seconds"].tolist())
    assert firsts["a"] == firsts["b"] and len(firsts["a"]) == 6
    sidecars = sorted((tmp_path / "a").glob("*/*.seconds"))
    assert len(sidecars) == 6
    # the repository's .dvcignore keeps the sidecars out of a results folder's hash
    with Repo(str(REPO_ROOT)) as repo:
        ignore = repo.dvcignore
        inside = REPO_ROOT / "data" / "any" / "results" / "enigma" / "a1.seconds"
        assert ignore.is_ignored_file(str(inside)) and not ignore.is_ignored_file(str(inside.with_name("a1.json")))
    # a failure leaves no wall time of an earlier success beside its file
    path = sidecars[0].with_suffix(".json")
    results.write_result(path, "failed", [{**r, "seconds": None} for r in json.loads(path.read_text())["rows"]])
    assert not sidecars[0].exists()
