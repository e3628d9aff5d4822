"""EnigmaEstimator: pairing the store with the target's replies, malformed input, divergence,
per-rating training, and the ``enigma estimate`` command."""

from __future__ import annotations

from pathlib import Path

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

from enigma.cli import app
from enigma.contracts import Estimator, HeldOutAgent, Regime
from enigma.ope import DiceConfig, DiceDivergence, EnigmaEstimator, PaddingError, TargetActionsError, pair_dialogues
from enigma.ope.tabular import TabularDialogueMDP, target_actions


@pytest.fixture(scope="module")
def problem():
    mdp = TabularDialogueMDP(n_user=2, n_agent=2, max_turns=2, p_agent_first=0.4, seed=0)
    store = mdp.logs([mdp.random_policy("b1", 1), mdp.random_policy("b2", 2)], 200, seed=0)
    target = mdp.random_policy("t", 7)
    return mdp, store, target, target_actions(store, target, n_samples=2, seed=0)


def _cfg(**kw):
    values = dict(encoder="onehot", head_hidden=0, tmax=3, steps=40, lr=2.0, log_every=20, device="cpu")
    values.update(kw)
    return DiceConfig.preset("gda", **values)


def test_estimator_follows_the_protocol(problem):
    _, store, _, ta = problem
    est = EnigmaEstimator(_cfg(), progress=False)
    assert isinstance(est, Estimator) and est.regimes == frozenset({Regime.REPLIES_AT_LOGGED_STATES})
    result = est.estimate(store, HeldOutAgent("t", target_actions=ta))
    out = result.estimates
    assert set(out) == {"match", "short"} and all(0 <= v <= 1 for v in out.values())
    assert set(result.unnormalised) == set(result.ess) == {"match", "short"}
    assert set(result.curve["run"]) == {"all"} and result.diagnostics["all"]["steps"] == 40
    # the trained heads travel with the result (saved beside the result file, logged by MLflow)
    assert isinstance(result.artifacts["heads"], torch.nn.Module)


def test_dialogue_opening_with_the_agent_gets_an_empty_user_utterance(problem):
    _, store, _, ta = problem
    paired = pair_dialogues(store, ta)
    hist = store.histories()
    opened_by_agent = [d for d in paired.dialogues if hist[d.dialog_id][0].role == "agent"]
    assert opened_by_agent, "the fixture should contain agent-first dialogues"
    d = opened_by_agent[0]
    assert d.turns[0].role == "user" and d.turns[0].text == "" and d.agent_turns[0] == 1
    assert all(d.turns[t].role == "agent" for t in d.agent_turns)
    assert len(d.target_replies) == d.n_agent_turns and all(len(r) == 2 for r in d.target_replies)


def test_missing_target_reply_names_dialogue_and_turn_or_is_dropped_visibly(problem):
    _, store, _, ta = problem
    first = ta.slice(0, 1).to_pylist()[0]
    keep = [not (r["dialog_id"] == first["dialog_id"] and r["turn_index"] == first["turn_index"]) for r in ta.to_pylist()]
    holed = ta.filter(pa.array(keep))
    with pytest.raises(TargetActionsError, match=f"dialogue {first['dialog_id']}, turn_index {first['turn_index']}"):
        pair_dialogues(store, holed)
    paired = pair_dialogues(store, holed, missing="drop")
    assert paired.skipped == {"missing target reply": [first["dialog_id"]]}
    assert len(paired.dialogues) == store.dialogues.num_rows - 1
    # failed samples (error set) are not replies
    errors = pa.array(["boom" if not k else None for k in keep], pa.string())
    failed = ta.set_column(ta.column_names.index("error"), "error", errors)
    with pytest.raises(TargetActionsError, match="no usable target reply"):
        pair_dialogues(store, failed)


def test_target_table_without_a_column_is_rejected(problem):
    _, store, _, ta = problem
    with pytest.raises(TargetActionsError, match="column 'text' missing"):
        pair_dialogues(store, ta.drop_columns(["text"]))
    with pytest.raises(TargetActionsError, match="target_actions"):
        EnigmaEstimator(_cfg(), progress=False).estimate(store, HeldOutAgent("t"))


def test_tmax_too_small_is_a_clear_error(problem):
    _, store, _, ta = problem
    with pytest.raises(PaddingError, match="at least 3"):
        EnigmaEstimator(_cfg(tmax=2), progress=False).estimate(store, HeldOutAgent("t", target_actions=ta))


def test_tmax_left_unset_is_derived_from_the_longest_dialogue(problem):
    """dice.tmax null (params.yaml's default) pads to max(15, the logs' longest dialogue + 2),
    recorded in the diagnostics; on a short problem that is the authors' 15, and more pseudo slots
    past it leave the exact solver's estimate where it was."""
    from enigma.ope.config import derived_tmax

    assert derived_tmax(2) == 15 and derived_tmax(13) == 15 and derived_tmax(14) == 16 and derived_tmax(300) == 302
    _, store, _, ta = problem
    exact = dict(encoder="onehot", device="cpu", value="weighted", interval_resamples=0)
    runs = {t: EnigmaEstimator(DiceConfig.preset("exact_nu", tmax=t, **exact), progress=False).estimate_full(
        store, HeldOutAgent("t", target_actions=ta)) for t in (None, 15, 40)}
    assert runs[None].diagnostics["config"]["tmax"] == 15 and runs[40].diagnostics["config"]["tmax"] == 40
    for rating, v in runs[None].estimates.items():
        assert v["estimate"] == runs[15].estimates[rating]["estimate"]
        # the nu penalty reaches the extra pseudo slots: 1e-5 here, against the logs' error of ~0.03
        assert v["estimate"] == pytest.approx(runs[40].estimates[rating]["estimate"], abs=1e-4)


def test_divergence_stops_with_a_message_not_a_number(problem):
    _, store, _, ta = problem
    with pytest.raises(DiceDivergence, match="step 20"):
        EnigmaEstimator(_cfg(lr=500.0), progress=False).estimate(store, HeldOutAgent("t", target_actions=ta))


def test_reward_in_the_objective_trains_once_per_rating(problem):
    _, store, _, ta = problem
    est = EnigmaEstimator(DiceConfig.preset("bestdice", encoder="onehot", head_hidden=0, tmax=3, steps=30, log_every=10, device="cpu"), progress=False)
    full = est.estimate_full(store, HeldOutAgent("t", target_actions=ta))
    assert set(full.runs) == {"match", "short"} and set(full.to_estimate().estimates) == {"match", "short"}
    # one heads module per rating's run, and one curve table with the run named
    assert set(full.to_estimate().artifacts["heads"].keys()) == {"match", "short"}
    assert set(full.to_estimate().curve["run"]) == {"match", "short"}


def test_cli_estimate_writes_estimates_and_curves_and_resumes(problem, tmp_path):
    _, store, _, ta = problem
    store.write(tmp_path / "store")
    pq.write_table(ta, tmp_path / "t.parquet")
    params = tmp_path / "params.yaml"
    params.write_text("estimators:\n  enigma:\n    dice: {preset: gda, encoder: onehot, head_hidden: 0, tmax: 3, steps: 40, log_every: 20, "
                      "lr: 2.0, device: cpu}\n")
    args = ["estimate", "--experience", str(tmp_path / "store"), "--target-actions", f"t={tmp_path / 't.parquet'}",
            "--exclude-agents", "b2", "--out", str(tmp_path / "out"), "--params", str(params), "-q"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out" / "estimates.json").read_text())
    assert set(out["targets"]["t"]) == {"match", "short"}
    assert set(out["targets"]["t"]["match"]) == {"estimate", "unnormalised", "ess", "interval", "interval_kind", "interval_how",
                                                  "sampling_interval"}
    # gradient descent-ascent gets no bootstrap, and without --calibration there is no other interval
    assert out["targets"]["t"]["match"]["interval"] is None and out["targets"]["t"]["match"]["interval_kind"] == "none"
    n_b1 = sum(a == "b1" for a in store.dialogues.column("agent_id").to_pylist())
    assert out["diagnostics"]["t"]["n_dialogues"] == n_b1 and out["diagnostics"]["t"]["excluded_agents"] == ["b2"]
    # the target's result file as the benchmarks' runner writes it, its learning curve and heads beside it
    result = tmp_path / "out" / "results" / "enigma" / "t.json"
    curve = pd.read_parquet(result.with_suffix(".curve.parquet"))
    assert list(curve.columns[:4]) == ["estimator", "agent_id", "step", "loss"] and list(curve.step) == [20, 40]
    assert set(curve.run) == {"all"} and result.with_suffix(".heads.pt").is_file()
    # a rerun with the same settings reuses the finished target
    stamp = result.stat().st_mtime_ns
    assert CliRunner().invoke(app, args).exit_code == 0
    assert result.stat().st_mtime_ns == stamp
    assert json.loads((tmp_path / "out" / "estimates.json").read_text()) == out


def test_cli_reports_bad_input_in_one_line(problem, tmp_path):
    _, store, _, ta = problem
    store.write(tmp_path / "store")
    (tmp_path / "defaults.yaml").write_text("")  # an empty params file: the built-in defaults
    base = ["estimate", "--experience", str(tmp_path / "store"), "--out", str(tmp_path / "o"), "--params", str(tmp_path / "defaults.yaml")]
    res = CliRunner().invoke(app, base + ["--target-actions", "t=" + str(tmp_path / "missing.parquet"), "--encoder", "onehot"])
    assert res.exit_code == 2 and "missing.parquet" in res.output
    res = CliRunner().invoke(app, base + ["--target-actions", "oops"])
    assert res.exit_code == 2 and "NAME=VALUE" in res.output
    res = CliRunner().invoke(app, base + ["--target-actions", "t=x.parquet", "--exclude-agents", "nobody"])
    assert res.exit_code == 2 and "nobody" in res.output


def test_fixed_features_can_be_projected_to_fewer_dimensions(problem):
    from enigma.encoders.onehot import OneHotPairEncoder

    _, store, _, ta = problem
    # the projection acts on whatever fixed features the encoder gives (text vectors in use);
    # one-hot vectors handed in explicitly stand for them here
    est = EnigmaEstimator(_cfg(encoder="frozen", project_dim=5, head_hidden=4), encoder=OneHotPairEncoder(), progress=False)
    full = est.estimate_full(store, HeldOutAgent("t", target_actions=ta))
    out = full.to_estimate().estimates
    heads = full.runs["all"].heads
    assert heads.zeta_net[0].in_features == 5 and est.encoder().dim > 5
    assert all(0 <= v <= 1 for v in out.values())


def test_onehot_stays_exact_whatever_the_text_settings_say(problem):
    _, store, _, ta = problem
    cfg = DiceConfig.from_section({"preset": "exact_nu", "encoder": "onehot", "project_dim": 5, "agreement": True, "tmax": 3})
    assert cfg.frozen is None and not {"project_dim", "agreement"} & set(cfg.flat())  # onehot's features have no text settings
    est = EnigmaEstimator(cfg, progress=False)
    heads = est.estimate_full(store, HeldOutAgent("t", target_actions=ta)).runs["all"].heads
    assert heads.zeta_net[-1].in_features == est.encoder().dim > 5  # one coordinate per state-action pair


def test_random_features_need_fixed_features_and_key_the_saved_result():
    with pytest.raises(ValueError, match="random_features"):
        DiceConfig.from_section({"preset": "gda", "encoder": "finetune", "random_features": 8})
    assert DiceConfig.from_section({"preset": "exact_nu", "encoder": "onehot", "random_features": 8}).frozen is None
    base = DiceConfig.preset("exact_nu")
    assert json.loads(EnigmaEstimator(base).fingerprint())["dice"]["features"]["random_features"] == 0  # none: still in the key
    wide = EnigmaEstimator(base.with_flat(random_features=8)).fingerprint()
    assert wide != EnigmaEstimator(base).fingerprint()
    assert wide != EnigmaEstimator(base.with_flat(random_features=8, random_features_scale=2.0)).fingerprint()



def test_every_setting_keys_a_saved_result_at_every_value():
    """The fingerprint is the whole resolved configuration: no setting is left out at its default
    or where the run does not read it (a rule of which settings a run reads would be one more
    table to keep in step with the code), so each of these changes it, dr_slot_tol under the
    weighted value too."""
    with pytest.raises(ValueError, match="turn_interactions"):
        DiceConfig.from_section({"preset": "gda", "encoder": "finetune", "turn_interactions": True})
    base = DiceConfig.preset("exact_nu", value="dr", q_model="fqe")
    assert json.loads(EnigmaEstimator(base).fingerprint())["dice"] == base.model_dump(mode="json")
    for update in ({"turn_interactions": True}, {"fqe": base.value.fqe.model_copy(update={"position": True})}, {"dr_slot_tol": 0.5},
                   {"grounding": True}, {"reply_measures": True}):
        assert EnigmaEstimator(base.with_flat(**update)).fingerprint() != EnigmaEstimator(base).fingerprint(), update
    weighted = DiceConfig.preset("exact_nu")
    assert EnigmaEstimator(weighted.with_flat(dr_slot_tol=0.5)).fingerprint() != EnigmaEstimator(weighted).fingerprint()


def _enigma(p):
    from enigma.estimators import build_estimator
    from enigma.params import Params

    return build_estimator("enigma", Params.load(p))


def test_the_enigma_entry_of_params_builds_the_estimator_with_its_embedding_cache(tmp_path):
    from enigma.params import ParamsError

    p = tmp_path / "params.yaml"
    p.write_text("encode:\n  cache:\n    cache_dir: somewhere\nestimators:\n  enigma:\n    dice: {preset: paper, tmax: 9}\n")
    est = _enigma(p)
    assert est.config.tmax == 9 and est.config.solver.schedule == "inverse_sqrt" and est.encode.cache.cache_dir == "somewhere"
    p.write_text("estimators:\n  enigma:\n    dice: {preset: gda, lr: -1}\n")
    with pytest.raises(ParamsError, match="estimators.enigma.dice"):
        _enigma(p)
    p.write_text("encode:\n  frozen:\n    blocks: [nope]\n")
    with pytest.raises(ParamsError, match="section 'encode'"):
        _enigma(p)


def test_the_frozen_encoder_is_built_as_the_encode_section_says(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text(f"encode:\n  cache:\n    cache_dir: {tmp_path / 'emb'}\n  frozen:\n    blocks: [last_user, position]\n"
                 "    position_buckets: 4\nestimators:\n  enigma:\n    dice:\n      preset: gda\n      encoder: frozen\n")
    est = _enigma(p)
    enc = est.encoder()
    assert enc.blocks == ("last_user", "position") and enc.position_buckets == 4
    assert enc.feature_dim == 2 * enc.text_dim + 4
    assert Path(enc.cache.dir).parent == tmp_path / "emb"
    # a saved result depends on the blocks: another choice is another fingerprint
    p.write_text(p.read_text().replace("[last_user, position]", "[last_user, prev_agent, summary, position]"))
    assert _enigma(p).fingerprint() != est.fingerprint()
    # ... but not on where the cache lives
    p.write_text(p.read_text().replace(str(tmp_path / "emb"), str(tmp_path / "elsewhere")))
    other = _enigma(p)
    p.write_text(p.read_text().replace(str(tmp_path / "elsewhere"), str(tmp_path / "emb")))
    assert other.fingerprint() == _enigma(p).fingerprint()


def test_reply_at_a_non_agent_turn_is_rejected(problem):
    _, store, _, ta = problem
    rows = ta.to_pylist()
    rows[0] = dict(rows[0], turn_index=rows[0]["turn_index"] + 50)
    bad = pa.Table.from_pylist(rows, schema=ta.schema)
    with pytest.raises(TargetActionsError, match=f"dialogue {rows[0]['dialog_id']}, turn_index {rows[0]['turn_index']}: not an agent turn"):
        pair_dialogues(store, bad)


def test_rating_without_values_is_null_in_estimates_json(problem, tmp_path):
    from enigma.store.experience import ExperienceStore

    _, store, _, ta = problem
    d = store.dialogues
    i = d.column_names.index("rating_short")
    d = d.set_column(i, d.schema.field(i), pa.nulls(d.num_rows, pa.float64()))
    ExperienceStore(d, store.turns).write(tmp_path / "store")
    pq.write_table(ta, tmp_path / "t.parquet")
    params = tmp_path / "params.yaml"
    params.write_text("estimators:\n  enigma:\n    dice: {preset: gda, encoder: onehot, head_hidden: 0, tmax: 3, steps: 20, log_every: 10, device: cpu}\n")
    res = CliRunner().invoke(app, ["estimate", "-e", str(tmp_path / "store"), "--target-actions", f"t={tmp_path / 't.parquet'}",
                                   "-o", str(tmp_path / "out"), "--params", str(params), "-q"])
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out" / "estimates.json").read_text())
    assert out["targets"]["t"]["short"]["estimate"] is None and out["targets"]["t"]["match"]["estimate"] is not None
    assert "short=n/a" in res.output


def test_slot_normalised_zeta_has_unit_mean_in_every_slot(problem):
    _, store, _, ta = problem
    est = EnigmaEstimator(_cfg(slot_normalise=True), progress=False)
    slots = est.estimate_full(store, HeldOutAgent("t", target_actions=ta)).runs["all"].slot_means
    assert slots == pytest.approx([1.0] * len(slots), abs=1e-5)


def test_cli_estimate_with_nonlinear_heads_reports_the_doubly_robust_value(problem, tmp_path):
    """The user's path for MLP heads under gradient descent-ascent with ``value: dr``: ``enigma
    estimate`` with a params file. The reported estimate is the doubly robust value recorded in
    the diagnostics beside the weighted one (which a 40-step run leaves elsewhere), and it is what
    the library gives for the same settings."""
    _, store, _, ta = problem
    store.write(tmp_path / "store")
    pq.write_table(ta, tmp_path / "t.parquet")
    # slot_normalise: a 40-step run leaves the slot masses out of balance, which flags a dr value
    # (tests/ope/test_estimate_user_path.py); normalised per slot they are in balance
    dice = dict(preset="gda", encoder="onehot", head_hidden=8, tmax=3, steps=40, log_every=20, lr=1.0, device="cpu",
                value="dr", q_model="lstd", slot_normalise=True)
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"estimators": {"enigma": {"dice": dice}}}))  # JSON is YAML
    args = ["estimate", "--experience", str(tmp_path / "store"), "--target-actions", f"t={tmp_path / 't.parquet'}",
            "--exclude-agents", "b2", "--out", str(tmp_path / "out"), "--params", str(params), "-q"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "out" / "estimates.json").read_text())
    values = out["diagnostics"]["t"]["all"]["values"]
    library = EnigmaEstimator(DiceConfig.from_section(dice), progress=False).estimate(store.without_agent("b2"), HeldOutAgent("t", target_actions=ta))
    for r in ("match", "short"):
        assert out["targets"]["t"][r]["estimate"] == values[r]["dr"]
        assert abs(values[r]["dr"] - values[r]["weighted"]) > 0.05
        assert out["targets"]["t"][r]["estimate"] == pytest.approx(library.estimates[r], abs=1e-9)
