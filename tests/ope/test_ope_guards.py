"""The guards on the DICE weights: a run whose zeta collapses to 0, explodes or is not finite
stops with DiceDivergence (and ``enigma estimate`` exits 2 with that one line) instead of
yielding a number. Each guard is driven by a real run: its thresholds are set where the
solution lands, or the final pass is handed weights that break it."""

from __future__ import annotations

import math

import pytest
import torch
from typer.testing import CliRunner

from enigma.cli import app
from enigma.contracts import HeldOutAgent
from enigma.ope import DiceConfig, DiceDivergence, EnigmaEstimator
from enigma.ope.heads import DiceHeads
from enigma.ope.tabular import reference_problem, target_actions, write_jsonl
from enigma.ope.features import Features
from enigma.ope.trainer import final_run


@pytest.fixture(scope="module")
def problem():
    p = reference_problem()
    store = p.logs(400, seed=0)
    return store, target_actions(store, p.targets["soft"], n_samples=1, seed=0)


def _estimate(store, ta, **over):
    cfg = DiceConfig.preset("exact_nu", encoder="onehot", tmax=3, device="cpu", **over)
    return EnigmaEstimator(cfg, progress=False).estimate_full(store, HeldOutAgent("soft", target_actions=ta))


def test_exact_nu_stops_when_zeta_collapses(problem):
    # every slot's mass is held at 1, so E_D[zeta] = 1 at the solution: a collapse threshold above it trips
    with pytest.raises(DiceDivergence, match=r"iteration \d+: E_D\[zeta\] = .* collapsed below dice.zeta_collapse=1.5"):
        _estimate(*problem, zeta_collapse=1.5, zeta_explode=1e3)


def test_exact_nu_stops_when_zeta_explodes(problem):
    with pytest.raises(DiceDivergence, match=r"iteration \d+: E_D\[zeta\] = .* exploded above dice.zeta_explode=0.5"):
        _estimate(*problem, zeta_collapse=1e-3, zeta_explode=0.5)


@pytest.mark.parametrize(
    "raw, says",
    [(0.0, "collapsed"), (100.0, "exploded"), (math.nan, "not finite")],  # zeta = raw^2 at every slot
)
def test_the_final_pass_guards_the_weights_it_reports(problem, raw, says):
    from enigma.ope.estimator import dice_data, pair_dialogues
    from enigma.encoders.onehot import OneHotPairEncoder

    store, ta = problem
    cfg = DiceConfig.preset("exact_nu", encoder="onehot", tmax=3, device="cpu")
    paired = pair_dialogues(store, ta)
    data = dice_data(paired)
    encoder = OneHotPairEncoder()
    prepared = encoder.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    feats = Features(encoder, prepared, data, torch.device("cpu"), cfg.frozen, tmax=cfg.tmax)
    heads = DiceHeads(feats.dim, 0, cfg.tmax)
    with torch.no_grad():
        heads.zeta_net[-1].weight.zero_()
        heads.zeta_net[-1].bias.fill_(raw)
        heads.zeta_pad_raw.fill_(raw)
    with pytest.raises(DiceDivergence, match=f"final pass: .*{says}"):
        final_run(heads, feats, data, cfg, 1, [])


def test_a_diverged_run_is_one_line_and_exit_2_from_the_command(tmp_path, problem):
    store, _ = problem
    write_jsonl(store, tmp_path / "logs.jsonl")
    assert CliRunner().invoke(app, ["ingest", "jsonl", str(tmp_path / "logs.jsonl"), "--out", str(tmp_path / "store"),
                                    "--scale", "match=0:1", "--scale", "short=0:1", "--no-progress"]).exit_code == 0
    (tmp_path / "params.yaml").write_text("estimators:\n  enigma:\n    dice: {preset: exact_nu, tmax: 3, zeta_explode: 0.5}\n")
    r = CliRunner().invoke(app, ["estimate", "--experience", str(tmp_path / "store"), "--target", "t=python:enigma.ope.tabular:soft",
                                 "--encoder", "onehot", "--out", str(tmp_path / "out"), "--params", str(tmp_path / "params.yaml"),
                                 "--cache-dir", str(tmp_path / "cache"), "-q"])
    assert r.exit_code == 2 and "exploded above dice.zeta_explode=0.5" in r.stderr and "Traceback" not in r.output
    assert not (tmp_path / "out" / "estimates.json").exists()


def test_the_dr_guard_reads_the_slots_balance_not_their_scale():
    """The doubly robust value is a ratio of zeta-weighted sums, unchanged by a common scale of
    zeta: masses of 0.2 at every slot are in balance; a slot-0 mass far below the others (the
    study's blow-ups, studies/results/ope_dr_balance.md) is not. Only the dr value is guarded."""
    import numpy as np

    from enigma.ope.guards import dr_balance_problem

    dr = DiceConfig.preset("exact_nu", value="dr")
    assert dr_balance_problem(np.full(5, 0.2), dr.value) is None
    assert dr_balance_problem(np.array([1.0, 1.05, 0.95, 1.0, 1.0]), dr.value) is None
    says = dr_balance_problem(np.array([0.02, 0.5, 0.6, 0.7, 0.8]), dr.value)
    assert says is not None and "slot 0 has 0.0382 times" in says and "dice.dr_slot_tol" in says
    assert dr_balance_problem(np.array([0.02, 0.5, 0.6, 0.7, 0.8]), DiceConfig.preset("exact_nu", value="dr", dr_slot_tol=2.0).value) is None
    assert dr_balance_problem(np.array([0.02, 0.5, 0.6, 0.7, 0.8]), DiceConfig.preset("exact_nu", value="weighted").value) is None
