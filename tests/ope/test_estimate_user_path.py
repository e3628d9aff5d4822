"""``enigma estimate`` as a user runs it: logs ingested from JSONL, target agents named by
``python:`` specs and sampled by the command, the repository's params.yaml as it is.

On the reference tabular problem the truth is known exactly, so the whole path (ingest, agent
spec, sampler, onehot features, the default solver and its nu penalty) is checked against it.
The command also never reports a number silently when it cannot be trusted, and says plainly
when the agent or the store is unusable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.cli import app
from enigma.ope.tabular import RATINGS, certainty_equivalence_value, reference_problem, write_jsonl
from enigma.store.experience import ExperienceStore
from tests.agents import toy_agents as T

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "params.yaml"


def enigma(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def tabular_store(tmp_path_factory):
    work = tmp_path_factory.mktemp("tabular")
    # 8,000 dialogues: the logs' own sampling error of these values is about 0.01 (log seeds 0
    # and 1 give 0.011 and 0.009: studies/results/ope_tabular_cli.md)
    write_jsonl(reference_problem().logs(8000, seed=0), work / "logs.jsonl")
    r = enigma("ingest", "jsonl", work / "logs.jsonl", "--out", work / "store", "--scale", "match=0:1", "--scale", "short=0:1",
               "--no-progress")
    assert r.exit_code == 0, r.output
    return work


@pytest.mark.slow  # the default params refit 100 bootstrap resamples per target: over a minute; CI runs it
def test_the_tabular_problem_through_the_cli_is_exact_with_the_default_params(tabular_store):
    work = tabular_store
    names = ["rough", "soft", "soft_matcher", "steady"]
    r = enigma("estimate", "--experience", work / "store", *[f"--target={t}=python:enigma.ope.tabular:{t}" for t in names],
               "--encoder", "onehot", "--out", work / "out", "--params", PARAMS, "--cache-dir", work / "cache", "-q")
    assert r.exit_code == 0, r.output
    est = json.loads((work / "out" / "estimates.json").read_text())
    store = ExperienceStore.open(work / "store")
    problem = reference_problem()
    missed = 0
    for t in names:
        assert est["converged"][t] is True
        # the shipped default ran: the doubly robust value with the mean of 2 fitted Qs, 45 epochs each (docs/estimator.md)
        config = est["diagnostics"][t]["config"]
        assert config["value"] == "dr" and config["q_model"] == "fqe" and config["fqe"]["ensemble"] == 2 and config["fqe"]["epochs"] == 45, config
        assert config["tmax"] == 15, config  # unset in params.yaml: max(15, the longest dialogue (2 agent turns) + 2)
        # the replies the command drew, read back through `enigma sample` (a cache hit: no new draws)
        s = enigma("sample", work / "store", f"python:enigma.ope.tabular:{t}", "--cache-dir", work / "cache" / "samples",
                   "--params", PARAMS, "-o", work / f"{t}.parquet", "-q")
        assert s.exit_code == 0 and json.loads(s.stdout.strip().splitlines()[-1])["n_called"] == 0, s.output
        saddle = certainty_equivalence_value(store, pq.read_table(work / f"{t}.parquet"))
        exact = problem.mdp.exact_value(problem.targets[t])
        for rating in RATINGS:
            e = est["targets"][t][rating]["estimate"]
            values = est["diagnostics"][t]["all"]["values"][rating]
            # the solver: DICE's ratio gives the logs' own answer (the weighted value reads it unclipped)
            assert abs(values["weighted"] - saddle[rating]) < 0.002, (t, rating, values, saddle[rating])
            # the reported dr too: on one-hot features zeta is the empirical ratio and dr's clip
            # (dr_zeta_cap) is not applied, so the fitted Q's own error does not reach the estimate
            assert e == values["dr"] and abs(e - saddle[rating]) < 0.002, (t, rating, e, saddle[rating])
            # the truth, within the logs' own sampling error (these logs: up to 0.025, rough's short)
            assert abs(e - exact[rating]) < 0.03, (t, rating, e, exact[rating])
            # the sampling interval (params.yaml's dialogue bootstrap) is useful and holds the exact
            # value as a 95% interval does. The four targets share one set of logs, so their misses
            # come together: these logs are a low draw of `short` (every target's saddle point 0.009
            # to 0.017 below its exact value), and two of the 8 cells miss, each by less than a
            # fifth of the interval's width
            lo, hi = est["targets"][t][rating]["interval"]
            assert hi - lo <= 0.10, (t, rating, lo, hi)
            missed += not lo <= exact[rating] <= hi
            assert lo - 0.2 * (hi - lo) <= exact[rating] <= hi + 0.2 * (hi - lo), (t, rating, lo, hi, exact[rating])
            assert f"{rating}={e:.4f} [{lo:.3f}, {hi:.3f}] (sampling only, not the estimator's bias" in r.stdout
            assert est["targets"][t][rating]["interval_kind"] == "sampling"
            assert est["targets"][t][rating]["sampling_interval"] == [lo, hi]
    assert missed <= 2, missed


@pytest.mark.slow  # two estimate runs with the default interval: about a minute; CI runs it
def test_estimate_with_calibration_prints_the_calibrated_interval(tabular_store, tmp_path):
    """``enigma estimate --calibration``: the store's three agents, each estimated with itself held
    out, calibrate a new target's estimate; the interval printed and written as ``interval`` is the
    calibrated one (three agents at 95%: a finite normal prediction interval that says so), and the
    sampling interval stays under its own name."""
    import yaml

    from enigma.evaluation import calibration as calib
    from enigma.pipeline.compare import store_means

    work = tabular_store
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    common = ["--encoder", "onehot", "--params", tmp_path / "params.yaml", "--cache-dir", work / "cache", "-q"]
    store = ExperienceStore.open(work / "store")
    r = enigma("estimate", "--experience", work / "store", "--out", tmp_path / "cal", *common,
               *[f"--target={a}=python:enigma.ope.tabular:{a}" for a in store.agents()])
    assert r.exit_code == 0, r.output
    r = enigma("estimate", "--experience", work / "store", "--out", tmp_path / "out", "--target=soft=python:enigma.ope.tabular:soft",
               "--calibration", tmp_path / "cal" / "results", *common)
    assert r.exit_code == 0, r.output
    cal_est = json.loads((tmp_path / "cal" / "estimates.json").read_text())["targets"]
    e = json.loads((tmp_path / "out" / "estimates.json").read_text())["targets"]["soft"]["match"]
    cal = calib.fit([cal_est[a]["match"]["estimate"] for a in store.agents()], store_means(store, "match")[store.agents()])
    lo, hi, how = calib.interval(cal, e["estimate"], 0.95)
    assert how == "normal prediction interval over 3 agents (too few for conformal at 95%)"
    assert e["interval_kind"] == "calibrated" and e["interval"] == pytest.approx([lo, hi]) and e["sampling_interval"] is None
    assert f"match={e['estimate']:.4f} [{lo:.3f}, {hi:.3f}] (calibrated {cal.calibrated(e['estimate']):.3f}: {how}" in r.stdout
    bad = enigma("estimate", "--experience", work / "store", "--out", tmp_path / "out2", "--target=soft=python:enigma.ope.tabular:soft",
                 "--calibration", tmp_path / "nowhere", *common)
    assert bad.exit_code == 2 and "error: --calibration" in bad.output and "nowhere" in bad.output


def test_several_replies_per_state_through_the_cli_are_exact(tabular_store, tmp_path):
    """``enigma estimate --n-samples 3`` (issue 14, direction 3, as a user runs it): every logged
    agent turn gets three replies of its own from the sampler, and the estimate (today's value and
    Q) is still the logs' own answer over those draws and the truth within the logs' error."""
    import pyarrow.compute as pc
    import yaml

    work, t = tabular_store, "steady"
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", work / "store", f"--target={t}=python:enigma.ope.tabular:{t}", "--encoder", "onehot",
               "--n-samples", 3, "--out", tmp_path / "out", "--params", tmp_path / "params.yaml", "--cache-dir", work / "cache", "-q")
    assert r.exit_code == 0, r.output
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    s = enigma("sample", work / "store", f"python:enigma.ope.tabular:{t}", "--n-samples", 3, "--cache-dir", work / "cache" / "samples",
               "--params", PARAMS, "-o", tmp_path / "draws.parquet", "-q")
    assert s.exit_code == 0 and json.loads(s.stdout.strip().splitlines()[-1])["n_called"] == 0, s.output  # the command's draws
    draws = pq.read_table(tmp_path / "draws.parquet")
    per_turn = draws.group_by(["dialog_id", "turn_index"]).aggregate([("text", "count")]).column("text_count").to_pylist()
    assert set(per_turn) == {3}, set(per_turn)
    store = ExperienceStore.open(work / "store")
    saddle = certainty_equivalence_value(store, draws)
    first_only = certainty_equivalence_value(store, draws.filter(pc.equal(draws["sample_index"], 0)))
    # the check can tell an estimate over every draw from one over the first draw alone
    assert max(abs(saddle[rating] - first_only[rating]) for rating in RATINGS) > 0.002, (saddle, first_only)
    exact = reference_problem().mdp.exact_value(reference_problem().targets[t])
    for rating in RATINGS:
        e = est["targets"][t][rating]["estimate"]
        weighted = est["diagnostics"][t]["all"]["values"][rating]["weighted"]
        assert abs(weighted - saddle[rating]) < 0.002, (rating, weighted, saddle[rating])  # DICE's ratio, unclipped
        assert abs(e - saddle[rating]) < 0.01, (rating, e, saddle[rating])  # dr, its zeta clipped: the fitted Q's error
        assert abs(e - exact[rating]) < 0.02, (rating, e, exact[rating])


@pytest.mark.slow  # an interval refitted both ways through the CLI; CI runs it
def test_kkt_refits_set_in_the_params_file_give_an_interval_with_every_refit_at_the_fits_tolerance(tabular_store, tmp_path):
    """``dice.interval_refit: kkt`` in the user's params file (docs/intervals.md): the command's
    bootstrap refits every resample by Newton steps on the optimality conditions, to the full
    fit's own tolerances, and the interval holds the exact value as the default's does."""
    import yaml

    work, t = tabular_store, "soft"
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(interval_refit="kkt", interval_resamples=40)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", work / "store", f"--target={t}=python:enigma.ope.tabular:{t}", "--encoder", "onehot",
               "--out", tmp_path / "out", "--params", tmp_path / "params.yaml", "--cache-dir", work / "cache", "-q")
    assert r.exit_code == 0, r.output
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    assert est["converged"][t] is True and est["diagnostics"][t]["config"]["interval_refit"] == "kkt"
    boot = est["diagnostics"][t]["all"]["bootstrap"]
    assert boot["failed"] == 0 and boot["unconverged"] == 0 and boot["mass_gap_max"] <= 1e-6, boot
    exact = reference_problem().mdp.exact_value(reference_problem().targets[t])
    for rating in RATINGS:
        lo, hi = est["targets"][t][rating]["interval"]
        assert lo <= exact[rating] <= hi and hi - lo <= 0.10, (rating, lo, hi, exact[rating])


@pytest.mark.parametrize("q", [{"q_model": "lstd", "q_ridge": 0.01, "dr_zeta_cap": None},
                               {"q_model": "fqe", "fqe": {"agreement": False}, "dr_zeta_cap": None},
                               {"q_model": "fqe", "fqe": {"agreement": False}, "dr_zeta_cap": 1.0}], ids=["lstd", "fqe", "fqe-cap-set"])
def test_the_doubly_robust_value_through_the_cli_is_exact(tabular_store, tmp_path, q):
    """``dice.value: dr`` set in the user's params file: the command reports the doubly robust
    value (the one in its diagnostics), and on the tabular problem it is the logs' own answer
    either way round: zeta is exact there, so any Q gives it; ``dr_zeta_cap`` set (the default 1)
    is not applied on one-hot features, where it would move the value by the Q's error."""
    import yaml

    work, t = tabular_store, "soft"
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(value="dr", interval_resamples=0, **q)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", work / "store", f"--target={t}=python:enigma.ope.tabular:{t}", "--encoder", "onehot",
               "--out", tmp_path / "out", "--params", tmp_path / "params.yaml", "--cache-dir", work / "cache", "-q")
    assert r.exit_code == 0, r.output
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    s = enigma("sample", work / "store", f"python:enigma.ope.tabular:{t}", "--cache-dir", work / "cache" / "samples",
               "--params", PARAMS, "-o", tmp_path / "draws.parquet", "-q")
    assert s.exit_code == 0, s.output
    saddle = certainty_equivalence_value(ExperienceStore.open(work / "store"), pq.read_table(tmp_path / "draws.parquet"))
    values = est["diagnostics"][t]["all"]["values"]
    for rating in RATINGS:
        e = est["targets"][t][rating]["estimate"]
        assert e == values[rating]["dr"] and abs(e - saddle[rating]) < 0.002, (rating, e, values[rating], saddle[rating])
    config = est["diagnostics"][t]["config"]
    assert config["q_model"] == q["q_model"] and config["dr_zeta_cap"] == q["dr_zeta_cap"]


@pytest.mark.slow  # several estimate runs through the CLI; CI runs it
def test_an_fqe_ensemble_set_in_the_params_file_averages_the_qs_of_consecutive_seeds(tabular_store, tmp_path):
    """``fqe.ensemble: 2`` with ``fqe.linear_members: 1`` in the user's params file: the command's
    Q value (the target's Q at the first state, linear in Q) is the mean of the two runs with one Q,
    a plain one from ``dice.seed`` 0 and one with the linear path from 1. onehot features and the
    exact solver do not depend on the seed, so only the Q moves."""
    import yaml

    work, t = tabular_store, "soft"

    def q_values(seed: int, ensemble: int, linear: int) -> dict[str, float]:
        params = yaml.safe_load(PARAMS.read_text())
        dice = params["estimators"]["enigma"]["dice"]
        dice.update(seed=seed, interval_resamples=0, fqe=dict(dice["fqe"], ensemble=ensemble, linear_members=linear))
        out = tmp_path / f"seed{seed}-ensemble{ensemble}-linear{linear}"
        out.mkdir()
        (out / "params.yaml").write_text(yaml.safe_dump(params))
        r = enigma("estimate", "--experience", work / "store", f"--target={t}=python:enigma.ope.tabular:{t}", "--encoder", "onehot",
                   "--out", out, "--params", out / "params.yaml", "--cache-dir", work / "cache", "-q")
        assert r.exit_code == 0, r.output
        diagnostics = json.loads((out / "estimates.json").read_text())["diagnostics"][t]
        assert diagnostics["config"]["fqe"]["ensemble"] == ensemble
        return {rating: v["q"] for rating, v in diagnostics["all"]["values"].items()}

    first, second, both = q_values(0, 1, 0), q_values(1, 1, 1), q_values(0, 2, 1)
    for rating in RATINGS:
        assert first[rating] != second[rating], rating  # two seeds, two Qs: otherwise the mean would say nothing
        assert both[rating] == pytest.approx((first[rating] + second[rating]) / 2, abs=1e-5), (rating, first, second, both)


@pytest.mark.parametrize("over, flagged", [({"value": "dr"}, True), ({"value": "dr", "slot_normalise": True}, False),
                                            ({"value": "weighted"}, False)], ids=["dr", "dr-slot-normalised", "weighted"])
def test_a_doubly_robust_value_from_unbalanced_slots_is_flagged_and_exits_3(tabular_store, tmp_path, over, flagged):
    """Gradient descent-ascent stopped after 20 steps leaves the slot masses out of balance, and
    the doubly robust value divides by the slot-0 mass: the command writes it flagged, says why
    and exits 3. Slot-normalised weights are in balance by construction, and the weighted value
    does not read slot 0: neither is flagged (gradient descent-ascent has no convergence
    criterion of its own, so they say null)."""
    import yaml

    work, t = tabular_store, "soft"
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"] = dict(preset="gda", encoder="onehot", tmax=3, head_hidden=0, steps=20,
                                                  log_every=10, q_model="lstd", device="cpu", **over)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", work / "store", f"--target={t}=python:enigma.ope.tabular:{t}",
               "--out", tmp_path / "out", "--params", tmp_path / "params.yaml", "--cache-dir", work / "cache", "-q")
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    run = est["diagnostics"][t]["all"]
    if flagged:
        assert r.exit_code == 3, r.output
        assert "NOT CONVERGED: E_D[zeta | slot] out of balance" in r.stdout and f"did not converge for {t}" in r.stderr
        assert est["converged"] == {t: False} and "dice.dr_slot_tol" in run["why"]
        masses = run["slot_zeta_mean"]
        assert max(masses) / min(masses) > 1.1  # what the flag says
    else:
        assert r.exit_code == 0, r.output
        assert est["converged"] == {t: None} and "why" not in run
    for rating in RATINGS:  # the number is written either way, the one the settings ask for (weighted: the float32 final pass)
        assert est["targets"][t][rating]["estimate"] == pytest.approx(run["values"][rating][over["value"]], abs=1e-6)


def test_the_position_settings_reach_the_features_from_the_params_file(tmp_path):
    """``dice.turn_interactions`` and ``fqe.position`` set in the user's params file (the text
    path: frozen sentence vectors, a ``python:`` agent sampled by the command): the saved heads
    read ``[x | x p | p]``, twice the projected features and one, and the run records both."""
    import torch
    import yaml

    from enigma.encoders.agreement import AGREEMENT_DIM
    from enigma.encoders.grounding import GROUNDING_DIM
    from enigma.reply_measures import REPLY_MEASURES_DIM

    store = T.write_tiny_store(tmp_path / "store", n_dialogues=12, agents=("a1", "a2"))
    params = yaml.safe_load(PARAMS.read_text())
    dice = params["estimators"]["enigma"]["dice"]
    dice.update(turn_interactions=True, interval_resamples=0, fqe=dict(dice["fqe"], position=True))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", tmp_path / "out",
               "--params", tmp_path / "params.yaml", "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code in (0, 3), r.output  # 3: a dozen dialogues may leave the solver short; the features are what is checked
    config = json.loads((tmp_path / "out" / "estimates.json").read_text())["diagnostics"]["t"]["config"]
    assert config["turn_interactions"] is True and config["fqe"]["position"] is True
    heads = torch.load(next((tmp_path / "out" / "results").rglob("t.heads.pt")), weights_only=False)
    width = heads.zeta_net[-1].in_features
    # the whitened PCA block, the reply-measure and grounding blocks (defaults) and the agreement block (docs/estimator.md)
    plain = dice["project_dim"] + REPLY_MEASURES_DIM + GROUNDING_DIM + AGREEMENT_DIM
    assert dice["reply_measures"] is True and dice["grounding"] is True
    assert width == 2 * plain + 1, width


KNOWLEDGE = "python:enigma.sim.knowledge:airline"


@pytest.mark.parametrize(
    "setting, value",
    [("grounding", True), ("reply_measures", True), ("request", True), ("knowledge", KNOWLEDGE), ("knowledge", KNOWLEDGE + "_requests"),
     ("knowledge", KNOWLEDGE + "_checked")],
)
def test_a_pair_block_set_in_the_params_file_reaches_the_heads(tmp_path, setting, value):
    """``dice.grounding``, ``dice.reply_measures``, ``dice.request`` or ``dice.knowledge`` in the
    user's params file (frozen sentence vectors, a ``python:`` agent sampled by the command): the
    saved heads read that block beside the PCA and agreement blocks, and the run records the setting.
    A knowledge base that reads requests adds one column to the three of the table, and one that
    also searches itself with the user's words one more."""
    import torch
    import yaml

    from enigma.encoders.agreement import AGREEMENT_DIM
    from enigma.encoders.grounding import GROUNDING_DIM
    from enigma.encoders.request import REQUEST_DIM
    from enigma.encoders.knowledge import KNOWLEDGE_DIM
    from enigma.reply_measures import REPLY_MEASURES_DIM

    off = {"grounding": False, "reply_measures": False, "request": False, "knowledge": None}
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=12, agents=("a1", "a2"))
    params = yaml.safe_load(PARAMS.read_text())
    dice = params["estimators"]["enigma"]["dice"]
    # the setting on and the other blocks off, whatever the shipped defaults are
    wanted = dict(off, **{setting: value})
    dice.update(wanted, interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", tmp_path / "out",
               "--params", tmp_path / "params.yaml", "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code in (0, 3), r.output  # 3: a dozen dialogues may leave the solver short; the features are what is checked
    config = json.loads((tmp_path / "out" / "estimates.json").read_text())["diagnostics"]["t"]["config"]
    assert {k: config[k] for k in off} == wanted
    block = {"grounding": GROUNDING_DIM, "reply_measures": REPLY_MEASURES_DIM, "request": REQUEST_DIM,
             KNOWLEDGE: KNOWLEDGE_DIM, KNOWLEDGE + "_requests": KNOWLEDGE_DIM + 1,
             KNOWLEDGE + "_checked": KNOWLEDGE_DIM + 2}[value if setting == "knowledge" else setting]
    heads = torch.load(next((tmp_path / "out" / "results").rglob("t.heads.pt")), weights_only=False)
    assert heads.zeta_net[-1].in_features == dice["project_dim"] + block + AGREEMENT_DIM


def test_a_knowledge_base_that_cannot_be_loaded_is_one_clear_line_and_exit_2(tmp_path):
    import yaml

    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(knowledge="python:enigma.sim.knowledge:no_such_base", interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", tmp_path / "out",
               "--params", tmp_path / "params.yaml", "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code == 2, r.output
    assert "dice.knowledge 'python:enigma.sim.knowledge:no_such_base'" in r.output and "no_such_base" in r.output


def _params_with_knowledge(tmp_path: Path, sources: bool, **dice) -> Path:
    """The repository's params.yaml with the airline knowledge base, no interval, and the stand-ins'
    ``transcripts.sources`` as given (their sentence vectors under ``tmp_path``), written there."""
    import yaml

    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(knowledge="python:enigma.sim.knowledge:airline_checked", interval_resamples=0, **dice)
    params["sample"]["agents"]["transcripts"].update(sources=sources, embed_cache_dir=str(tmp_path / "cache" / "embeddings"))
    path = tmp_path / f"params-{sources}.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_a_knowledge_base_with_a_retrieval_stand_in_is_refused_before_any_work(tmp_path):
    """A stand-in that does not record where its replies were said (``sources: false``; the
    default records them, and the base is then read: tests/agents/test_transcripts.py)."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    params = _params_with_knowledge(tmp_path, sources=False)
    r = enigma("estimate", "--experience", store, "--target", f"t=transcripts:{store}", "--out", tmp_path / "out",
               "--params", params, "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code == 2, r.output
    assert "retrieval stand-in" in r.output and "--target t=transcripts:" in r.output
    assert not (tmp_path / "out").exists()


def test_a_knowledge_base_with_replies_a_stand_in_sampled_without_sources_is_refused_too(tmp_path):
    """``--target-actions``: a file written by ``enigma sample`` names the agent that sampled it;
    a retrieval stand-in's replies without their sources are refused as its spec would be, and
    with them (the default) the file is read."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    params = {sources: _params_with_knowledge(tmp_path, sources, project_dim=4) for sources in (False, True)}
    plain, sourced = tmp_path / "plain.parquet", tmp_path / "sourced.parquet"
    for sources, file in ((False, plain), (True, sourced)):
        r = enigma("sample", store, f"transcripts:{store}?agent=a1", "-x", "a1", "-o", file, "--params", params[sources],
                   "--cache-dir", tmp_path / "cache", "-q")
        assert r.exit_code == 0, r.output
    args = ["estimate", "--experience", store, "--params", params[True], "--cache-dir", tmp_path / "cache", "-q"]
    r = enigma(*args, "--target-actions", f"a1={plain}", "--out", tmp_path / "refused")
    assert r.exit_code == 2, r.output
    assert "retrieval stand-in" in r.output and f"--target-actions a1={plain} (sampled from transcripts:" in r.output
    assert not (tmp_path / "refused").exists()
    r = enigma(*args, "--target-actions", f"a1={sourced}", "--out", tmp_path / "read")
    assert r.exit_code in (0, 3), r.output  # 3: a handful of dialogues may be flagged, still estimated
    assert "a1" in json.loads((tmp_path / "read" / "estimates.json").read_text())["targets"]


@pytest.mark.slow  # estimate runs through the CLI; CI runs it
def test_a_run_that_did_not_converge_is_flagged_and_exits_3(tmp_path):
    # six dialogues of one agent, a target it never resembles: the solver stops short
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=6, agents=("a1",))
    args = ["estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", tmp_path / "out",
            "--params", PARAMS, "--cache-dir", tmp_path / "cache", "-q"]
    r = enigma(*args)
    assert r.exit_code == 3, r.output
    assert "NOT CONVERGED" in r.stdout and "did not converge for t" in r.stderr
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    assert est["converged"] == {"t": False} and est["diagnostics"]["t"]["all"]["converged"] is False
    again = enigma(*args)  # the finished (flagged) result is reused, and still flagged
    assert again.exit_code == 3 and "NOT CONVERGED" in again.stdout


@pytest.mark.parametrize(
    "spec, says",
    [
        ("python:tests.agents.toy_agents:always_fails", "calls failed in a row"),  # raises on every call
        ("python:tests.ope.test_estimate_user_path:factory_that_raises", "its factory"),
        ("openai:http://127.0.0.1:9/v1#m", "Connection refused"),  # nothing listens on port 9
    ],
)
def test_an_unusable_agent_is_one_clear_line_and_exit_2(tmp_path, spec, says):
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    params = tmp_path / "params.yaml"
    params.write_text("sample:\n  max_consecutive_errors: 3\n  agents:\n    openai:\n      max_retries: 0\n")
    r = enigma("estimate", "--experience", store, "--target", f"t={spec}", "--out", tmp_path / "out", "--params", params,
               "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"error: agent {spec}: ") and says in r.stderr and "Traceback" not in r.output
    assert r.stderr.count("\n") == 1


def factory_that_raises():
    raise OSError("weights not found at /models/x")


def test_a_store_without_ratings_is_an_error(tmp_path):
    src = tmp_path / "logs.jsonl"
    src.write_text(json.dumps({"dialog_id": "d1", "agent_id": "a", "turns": [{"role": "user", "text": "hi"},
                                                                              {"role": "agent", "text": "hello"}]}) + "\n")
    assert enigma("ingest", "jsonl", src, "--out", tmp_path / "store", "--no-progress").exit_code == 0
    r = enigma("estimate", "--experience", tmp_path / "store", "--target", "t=python:enigma.agents.examples:echo",
               "--out", tmp_path / "out", "--params", PARAMS, "-q")
    assert r.exit_code == 2 and "has no ratings" in r.stderr
    assert not (tmp_path / "out" / "estimates.json").exists()


def test_long_and_short_dialogues_through_the_cli_give_the_logs_own_value_for_the_logging_agent(tmp_path):
    """The ragged layout through the user's path: a store whose dialogues run from 1 to 40 agent
    turns (``dice.tmax`` 41 in the user's params), and a target whose replies are the logged ones.
    Its ratio is 1 at every slot, so the estimate is the logs' mean rating exactly; a turn laid
    into the wrong dialogue or slot breaks that."""
    import numpy as np
    import pyarrow as pa
    import yaml

    rng = np.random.default_rng(0)
    records, replies, lengths = [], [], [1, 40] + rng.integers(1, 12, size=38).tolist()
    for i, n in enumerate(lengths):
        turns = []
        for k in range(n):
            turns += [{"role": "user", "text": f"d{i} asks {k}"}, {"role": "agent", "text": f"d{i} answers {k} {rng.integers(3)}"}]
            replies.append({"dialog_id": f"d{i}", "turn_index": 2 * k + 1, "sample_index": 0, "text": turns[-1]["text"]})
        records.append({"dialog_id": f"d{i}", "agent_id": "logger", "turns": turns, "ratings": {"score": float(rng.random())}})
    (tmp_path / "logs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    r = enigma("ingest", "jsonl", tmp_path / "logs.jsonl", "--out", tmp_path / "store", "--scale", "score=0:1", "--no-progress")
    assert r.exit_code == 0, r.output
    pq.write_table(pa.Table.from_pylist(replies), tmp_path / "same.parquet")
    params = yaml.safe_load(PARAMS.read_text())
    params["estimators"]["enigma"]["dice"].update(tmax=41, interval_resamples=0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    r = enigma("estimate", "--experience", tmp_path / "store", f"--target-actions=same={tmp_path / 'same.parquet'}",
               "--encoder", "onehot", "--out", tmp_path / "out", "--params", tmp_path / "params.yaml", "-q")
    assert r.exit_code == 0, r.output
    est = json.loads((tmp_path / "out" / "estimates.json").read_text())
    mean = float(np.mean([rec["ratings"]["score"] for rec in records]))
    assert est["converged"]["same"] is True
    assert est["targets"]["same"]["score"]["estimate"] == pytest.approx(mean, abs=1e-4)
    values = est["diagnostics"]["same"]["all"]["values"]["score"]
    assert values["weighted"] == pytest.approx(mean, abs=1e-4)


def test_the_exact_pca_set_in_the_params_file_makes_the_estimate_seed_free(tmp_path):
    """``dice.pca: exact`` in the user's params file (frozen sentence vectors, a ``python:`` agent
    sampled by the command): with a Q that has no SGD of its own (``q_model: lstd``) two seeds give
    the same estimates, and the run records the setting."""
    import yaml

    store = T.write_tiny_store(tmp_path / "store", n_dialogues=12, agents=("a1", "a2"))
    estimates = []
    for seed in (0, 1):
        params = yaml.safe_load(PARAMS.read_text())
        params["estimators"]["enigma"]["dice"].update(pca="exact", q_model="lstd", seed=seed, interval_resamples=0)
        (tmp_path / f"params{seed}.yaml").write_text(yaml.safe_dump(params))
        out = tmp_path / f"out{seed}"
        r = enigma("estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", out,
                   "--params", tmp_path / f"params{seed}.yaml", "--cache-dir", tmp_path / "cache", "-q")
        assert r.exit_code in (0, 3), r.output  # 3: a dozen dialogues may leave the solver short
        summary = json.loads((out / "estimates.json").read_text())
        assert summary["diagnostics"]["t"]["config"]["pca"] == "exact"
        estimates.append(summary)
    a, b = (s["targets"]["t"] for s in estimates)
    assert a.keys() == b.keys()
    for rating in a:
        assert a[rating]["estimate"] == pytest.approx(b[rating]["estimate"], abs=1e-4), rating


def test_a_store_too_small_for_the_projection_is_one_clear_line_naming_the_setting(tmp_path):
    """A handful of chats gives fewer replies than dice.project_dim asks directions of: the error
    names the setting and how far to lower it (it was torch's 'q(=32) must be ... min(m, n)')."""
    store = T.write_tiny_store(tmp_path / "store", n_dialogues=4)
    r = enigma("estimate", "--experience", store, "--target", "t=python:enigma.agents.examples:echo", "--out", tmp_path / "out",
               "--cache-dir", tmp_path / "cache", "-q")
    assert r.exit_code == 2, r.output
    assert "dice.project_dim 32: the store gives only" in r.output and "set dice.project_dim to at most" in r.output
