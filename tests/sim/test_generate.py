"""Preset generation: canonical store, truth with standard errors, byte-identical reruns, resume."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from enigma.sim.generate import TRUTH_FILE, SimulateConfig, generate
from enigma.sim.rng import mix
from enigma.sim.rollout import rollout
from enigma.sim.seller_presets import preset_agents
from enigma.sim.sellers import make_seller
from enigma.store.experience import ExperienceStore

AGENTS = ["expert", "worst"]


def _small(**kw) -> SimulateConfig:
    base = dict(preset="airline24", seed=5, dialogues_per_agent=6, truth_rollouts=40, max_stderr=1.0)
    return SimulateConfig(**{**base, **kw})


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_same_seed_gives_byte_identical_files(tmp_path):
    generate(_small(), tmp_path / "a", agents=AGENTS)
    generate(_small(), tmp_path / "b", agents=AGENTS)
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert set(a) == {"dialogues.parquet", "turns.parquet", "rejects.parquet", "manifest.json", TRUTH_FILE}
    assert a == b
    generate(_small(seed=6), tmp_path / "c", agents=AGENTS)
    assert _files(tmp_path / "c")["turns.parquet"] != a["turns.parquet"]


def test_store_is_canonical_and_meta_carries_goal_and_seed(tmp_path):
    cfg = _small()
    generate(cfg, tmp_path, agents=AGENTS)
    store = ExperienceStore.open(tmp_path)
    assert store.agents() == sorted(AGENTS)
    assert store.rating_names == ["reward", "name", "flight", "status"]
    d = store.dialogues.to_pylist()
    assert len(d) == 2 * cfg.dialogues_per_agent
    for row in d:
        assert row["source"] == "airline-sim"
        for r in store.rating_names:
            assert 0.0 <= row[f"rating_{r}"] <= 1.0 and row[f"raw_{r}"] == row[f"rating_{r}"]
        meta = json.loads(row["meta"])
        assert {"goal", "seed", "expected", "action"} <= set(meta)
        # the dialogue replays exactly from its seed
        replay = rollout(make_seller(row["agent_id"]), meta["seed"])
        assert replay.goal.to_dict() == meta["goal"]
        assert replay.scores["reward"] == row["rating_reward"]
        assert len(replay.turns) == row["n_turns"]
    histories = store.histories()
    assert all(h[0].role == "user" for h in histories.values())
    assert max(sum(t.role == "agent" for t in h) for h in histories.values()) <= 8


def test_truth_is_the_mean_of_fresh_rollouts_with_its_stderr(tmp_path):
    cfg = _small(truth_rollouts=30)
    generate(cfg, tmp_path, agents=["worst"])
    truth = pq.read_table(tmp_path / TRUTH_FILE).to_pylist()
    assert [t["rating"] for t in truth] == ["reward", "name", "flight", "status"]
    values = [rollout(make_seller("worst"), mix(cfg.seed, "truth", "worst", j)).scores["reward"] for j in range(30)]
    mean = sum(values) / 30
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 29)
    row = truth[0]
    assert row["n"] == 30 and row["value"] == pytest.approx(mean) and row["stderr"] == pytest.approx(sd / math.sqrt(30))


def test_truth_grows_until_stderr_target(tmp_path):
    summary = generate(_small(truth_rollouts=20, max_stderr=0.05, truth_batch=50), tmp_path, agents=["worst"])
    truth = pq.read_table(tmp_path / TRUTH_FILE).to_pylist()
    assert all(t["stderr"] <= 0.05 for t in truth)
    assert summary["truth_rollouts"]["worst"] > 20


def test_interrupted_run_resumes(tmp_path):
    seen = []

    def stop_after_first(agent_id):
        seen.append(agent_id)
        if len(seen) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate(_small(), tmp_path / "r", agents=AGENTS, on_agent=stop_after_first)
    assert (tmp_path / "r" / ".partial").is_dir()
    generate(_small(), tmp_path / "r", agents=AGENTS, on_agent=seen.append)
    generate(_small(), tmp_path / "fresh", agents=AGENTS)
    assert _files(tmp_path / "r") == _files(tmp_path / "fresh")
    assert not (tmp_path / "r" / ".partial").exists()


def test_cli_simulate(tmp_path):
    from enigma.cli import app

    params = tmp_path / "params.yaml"
    params.write_text("simulate:\n  dialogues_per_agent: 3\n  truth_rollouts: 20\n  max_stderr: 1.0\n")
    res = CliRunner().invoke(app, ["simulate", "--preset", "rule6", "--out", str(tmp_path / "o"), "--seed", "1",
                                   "--params", str(params), "--no-progress"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert ExperienceStore.open(tmp_path / "o").agents() == sorted(preset_agents("rule6"))
    bad = CliRunner().invoke(app, ["simulate", "--preset", "nope", "--out", str(tmp_path / "x"), "--params", str(params)])
    assert bad.exit_code == 2 and "unknown preset" in bad.output


@pytest.mark.slow
def test_default_preset_truth_meets_the_issue(tmp_path):
    summary = generate(SimulateConfig(dialogues_per_agent=5), tmp_path)
    assert summary["n_agents"] >= 24
    assert summary["max_stderr"] <= 0.01
    assert summary["reward_max"] - summary["reward_min"] >= 0.6


class _AlwaysNoFlight:
    """An agent outside the simulator's family: it ends every dialogue with "no flight"."""

    def respond(self, history, n=1, seed=None):
        return ["Sorry, nothing is available. [action: no_flight | flight: none | name: ]"] * n


class _Silent:
    def respond(self, history, n=1, seed=None):
        return ["Let me think."] * n


class _Broken:
    def respond(self, history, n=1, seed=None):
        return []


def test_rollout_of_any_agent_and_rollout_store():
    from enigma.sim.config import MAX_AGENT_TURNS

    ro = rollout(_AlwaysNoFlight(), 3)
    assert ro.action.status == "no_flight" and ro.n_agent_turns == 1
    assert ro.scores["status"] == float(ro.expected.status == "no_flight")
    silent = rollout(_Silent(), 3)
    assert silent.action.status == "none" and silent.scores["reward"] == 0.0
    assert silent.n_agent_turns <= MAX_AGENT_TURNS  # the customer may leave first
    with pytest.raises(ValueError, match="expected one string"):
        rollout(_Broken(), 3)

    from enigma.sim.generate import rollout_store

    rated = rollout_store(make_seller("expert"), "expert", n=4, seed=2)
    assert rated.dialogues.num_rows == 4 and all(v is not None for v in rated.ratings("reward"))
    unrated = rollout_store(make_seller("expert"), "expert", n=4, seed=2, rated=False)
    assert unrated.ratings("reward") == [None] * 4
    assert "goal" not in json.loads(unrated.dialogues.column("meta")[0].as_py())
    assert unrated.turns.equals(rated.turns)


def test_truth_path_option(tmp_path):
    summary = generate(_small(), tmp_path / "store", agents=["expert"], truth_path=tmp_path / "t" / "truth.parquet")
    assert (tmp_path / "t" / "truth.parquet").is_file() and not (tmp_path / "store" / TRUTH_FILE).exists()
    assert summary["truth"] == str(tmp_path / "t" / "truth.parquet")


def test_bad_output_paths_are_named(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="file: exists and is not a directory"):
        generate(_small(), tmp_path / "file", agents=["expert"])
    (tmp_path / "tdir").mkdir()
    with pytest.raises(ValueError, match="tdir: is a directory"):
        generate(_small(), tmp_path / "o", agents=["expert"], truth_path=tmp_path / "tdir")


def test_config_rejects_bad_values():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="dialogues_per_agent"):
        SimulateConfig(dialogues_per_agent=0)
    with pytest.raises(ValidationError, match="max_agent_turns"):
        SimulateConfig(max_agent_turns=12)
    with pytest.raises(ValidationError, match="colour"):
        SimulateConfig(preset="airline24", colour="red")  # a misspelt key is an error, not ignored
    with pytest.raises(ValidationError, match="unknown preset"):
        SimulateConfig(preset="airline42")


def test_byte_identical_across_processes_with_different_hash_seeds(tmp_path):
    # String hashing differs per process; nothing the simulator writes may depend on it.
    import os
    import subprocess
    import sys

    code = ("import sys; from enigma.sim.generate import SimulateConfig, generate; "
            "generate(SimulateConfig(seed=9, dialogues_per_agent=4, truth_rollouts=10, max_stderr=1.0), "
            "sys.argv[1], agents=['expert', 'intent_confused'])")  # fmt: skip
    for name, hash_seed in (("p1", "1"), ("p2", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], check=True, env=env, timeout=120)
    assert _files(tmp_path / "p1") == _files(tmp_path / "p2")


@pytest.mark.slow
def test_rule6_truth_falls_with_intent_noise(tmp_path):
    generate(SimulateConfig(preset="rule6", dialogues_per_agent=2), tmp_path)
    truth = pq.read_table(tmp_path / TRUTH_FILE).to_pylist()
    rewards = [t["value"] for t in truth if t["rating"] == "reward"]  # agents in noise order 0 .. 1
    assert rewards[0] == pytest.approx(1.0)
    assert all(a > b for a, b in zip(rewards, rewards[1:]))


def test_true_values_of_an_outside_agent():
    from enigma.sim.generate import true_values

    rows = true_values("no-flight-bot", _small(truth_rollouts=200), agent=_AlwaysNoFlight())
    by = {r["rating"]: r for r in rows}
    assert all(r["agent_id"] == "no-flight-bot" and r["n"] == 200 for r in rows)
    # It always names nobody and books nothing: right only where no flight (of any kind) was due.
    assert by["name"]["value"] == 0.0
    assert 0.0 < by["status"]["value"] < 0.3 and by["flight"]["value"] > by["status"]["value"]
    assert by["reward"]["value"] == pytest.approx(0.5 * by["flight"]["value"] + 0.3 * by["status"]["value"])


@pytest.mark.parametrize("agent_id", ["expert", "expert_verbose", "hopeless", "deaf_direct"])
def test_closing_exchanges_follow_the_outcome_and_change_nothing_before_it(agent_id):
    """``closing_exchanges``: after the agent ends the dialogue the customer thanks it k times and
    the agent answers each in its own words; the dialogue up to its end and the scores are those
    of the same seed without them, and a seller asked after the end only closes."""
    from enigma.sim.language import CLOSING_THANKS
    from enigma.sim.sellers import dialogue_over

    seller = make_seller(agent_id)
    for seed in range(5):
        plain = rollout(seller, seed)
        late = rollout(seller, seed, closing_exchanges=3)
        assert late.turns[: len(plain.turns)] == plain.turns and late.scores == plain.scores
        extra = late.turns[len(plain.turns):]
        assert dialogue_over(plain.turns) == bool(extra)
        if extra:
            assert [t.role for t in extra] == ["user", "agent"] * 3
            assert all(t.text in CLOSING_THANKS for t in extra[::2])
            assert all(dialogue_over(late.turns[: len(plain.turns) + i]) for i in range(len(extra)))
            # anything but thanks after the end is answered as before closings existed
            other = list(plain.turns) + [type(plain.turns[0])("user", "What about my flight?")]
            assert seller.respond(other, seed=1)[0] not in {t.text for t in extra[1::2]} or agent_id == "hopeless"


def test_a_store_without_closings_is_byte_identical_to_one_made_before_the_setting(tmp_path):
    """The manifest records ``closing_exchanges`` only where it is set, so the committed stores
    (made before it existed) keep their hashes; a store with closings records it."""
    cfg = SimulateConfig(dialogues_per_agent=2, truth_rollouts=2, max_truth_rollouts=2)
    assert "closing_exchanges" not in cfg.settings() and SimulateConfig().fingerprint() == SimulateConfig(closing_exchanges=0).fingerprint()
    generate(cfg.model_copy(update={"closing_exchanges": 2}), tmp_path / "late", agents=["expert"])
    manifest = json.loads((tmp_path / "late" / "manifest.json").read_text())
    assert manifest["simulate"]["closing_exchanges"] == 2
