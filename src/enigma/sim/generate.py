"""Generating a simulator benchmark: rated experience data plus each agent's true values.

For every agent of a preset:
- ``dialogues_per_agent`` rollouts with fresh customers become its experience data, in the
  canonical store form (ratings are already in [0, 1], so raw = normalised;
  ``source="airline-sim"``; ``meta`` holds the goal, the seed, the expected outcome and the
  agent's action);
- at least ``truth_rollouts`` further on-policy rollouts, on other customers, give its true
  value per rating: the mean, with its standard error. Rollouts are added in batches until
  every rating's standard error is at most ``max_stderr`` (or ``max_truth_rollouts`` is hit).

Every seed derives from (``seed``, the agent id, the dialogue index), so an agent's data do not
depend on which other agents are generated with it, and the same seed gives byte-identical
files. Agents finished are kept under ``<out>/.partial/`` so an interrupted run resumes.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from enigma.sim.config import SimulateConfig
from enigma.store import schema as S
from enigma.store.experience import ExperienceStore
from enigma.sim.rng import mix
from enigma.sim.rollout import Rollout, rollouts
from enigma.sim.scoring import RATINGS
from enigma.sim.scoring import AIRDIALOGUE_WEIGHTS
from enigma.sim.seller_presets import REWARD_WEIGHTS, preset_agents
from enigma.sim.sellers import agent_spec, make_seller

SOURCE = "airline-sim"
TRUTH_FILE = "truth.parquet"
TRUTH_SCHEMA = pa.schema(
    [
        pa.field("agent_id", pa.string(), nullable=False),
        pa.field("rating", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("stderr", pa.float64(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),
    ]
)
_PARTIAL = ".partial"


def _play(agent, seeds: list[int], cfg: SimulateConfig) -> list[Rollout]:
    """The dialogues of ``seeds``, side by side (an ``hf:`` checkpoint answers them in batches)."""
    return rollouts(agent, seeds, max_agent_turns=cfg.max_agent_turns, customer_noise=cfg.customer_noise,
                    reward_weights=REWARD_WEIGHTS[cfg.preset], closing_exchanges=cfg.closing_exchanges)


def rollout_rows(agent, agent_id: str, seeds: list[int], cfg: SimulateConfig, rated: bool = True,
                 id_prefix: str | None = None) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """Dialogue rows and turn rows (canonical store form) of ``agent`` played on ``seeds``.
    ``rated=False`` leaves the rating columns null (an agent's own rollouts handed to an
    estimator must not carry its scores)."""
    dialogues, turns = [], []
    prefix = id_prefix if id_prefix is not None else agent_id
    for i, (seed, ro) in enumerate(zip(seeds, _play(agent, seeds, cfg))):
        dialog_id = f"{prefix}-{i:04d}"
        meta = {
            "seed": seed,
            "preset": cfg.preset,
            "goal": ro.goal.to_dict(),
            "expected": {"status": ro.expected.status, "flights": list(ro.expected.flights)},
            "action": {"status": ro.action.status, "flight": ro.action.flight, "name": ro.action.name},
        }
        if not rated:  # the outcome would give the scores away
            meta = {"seed": seed, "preset": cfg.preset}
        row = {"dialog_id": dialog_id, "agent_id": agent_id, "source": SOURCE, "n_turns": len(ro.turns)}
        for r in RATINGS:
            row[S.RATING_PREFIX + r] = ro.scores[r] if rated else None
            row[S.RAW_PREFIX + r] = ro.scores[r] if rated else None
        row["meta"] = json.dumps(meta, sort_keys=True)
        dialogues.append(row)
        turns += [{"dialog_id": dialog_id, "turn_index": j, "role": t.role, "text": t.text} for j, t in enumerate(ro.turns)]
    return dialogues, turns


def rollout_store(agent, agent_id: str, n: int, seed: int = 0, rated: bool = True,
                  cfg: SimulateConfig | None = None) -> ExperienceStore:  # fmt: skip
    """``n`` dialogues of any ``Agent`` with fresh simulated customers, as an experience store
    (e.g. an agent's own simulated-user rollouts for an estimator, or scoring a new agent).
    Seeds come from a stream of their own, apart from the experience and truth streams."""
    cfg = cfg or SimulateConfig()
    seeds = [mix(seed, "rollouts", agent_id, i) for i in range(n)]
    dialogues, turns = rollout_rows(agent, agent_id, seeds, cfg, rated=rated)
    return ExperienceStore(
        pa.Table.from_pylist(dialogues, schema=S.dialogues_schema(list(RATINGS))),
        pa.Table.from_pylist(turns, schema=S.TURNS_SCHEMA),
    )


def experience_rows(agent_id: str, cfg: SimulateConfig) -> tuple[list[dict], list[dict]]:
    """The rated experience dialogues of one seller: (dialogue rows, turn rows)."""
    seeds = [mix(cfg.seed, "experience", agent_id, i) for i in range(cfg.dialogues_per_agent)]
    return rollout_rows(make_seller(agent_id), agent_id, seeds, cfg)


def true_values(agent_id: str, cfg: SimulateConfig, agent=None) -> list[dict]:
    """Mean and standard error per rating from fresh on-policy rollouts (see module docstring).
    ``agent`` scores any ``Agent`` under that id; by default the seller of that id."""
    agent = agent if agent is not None else make_seller(agent_id)
    sums = dict.fromkeys(RATINGS, 0.0)
    squares = dict.fromkeys(RATINGS, 0.0)
    n = 0

    def stderr(r: str) -> float:
        mean = sums[r] / n
        var = max(0.0, (squares[r] - n * mean * mean) / (n - 1))
        return math.sqrt(var / n)

    target = cfg.truth_rollouts
    while True:
        for ro in _play(agent, [mix(cfg.seed, "truth", agent_id, i) for i in range(n, target)], cfg):
            for r in RATINGS:
                sums[r] += ro.scores[r]
                squares[r] += ro.scores[r] * ro.scores[r]
            n += 1
        if all(stderr(r) <= cfg.max_stderr for r in RATINGS) or n >= cfg.max_truth_rollouts:
            break
        target = min(cfg.max_truth_rollouts, n + cfg.truth_batch)
    return [{"agent_id": agent_id, "rating": r, "value": sums[r] / n, "stderr": stderr(r), "n": n} for r in RATINGS]


def generate(
    cfg: SimulateConfig,
    out: str | Path,
    agents: list[str] | None = None,
    on_agent: Callable[[str], None] | None = None,
    truth_path: str | Path | None = None,
    progress: bool = False,
) -> dict:
    """Write the store (``dialogues/turns/rejects.parquet``, ``manifest.json``) for the preset's
    agents (or ``agents``) into ``out``, and their truth to ``truth_path`` (default
    ``<out>/truth.parquet``). Returns a summary."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory (the simulator writes a store directory there)")
    truth_path = Path(truth_path) if truth_path is not None else out / TRUTH_FILE
    if truth_path.is_dir():
        raise ValueError(f"{truth_path}: is a directory (expected the path of the truth Parquet file)")
    agent_ids = agents if agents is not None else preset_agents(cfg.preset)
    partial = out / _PARTIAL / cfg.fingerprint()
    partial.mkdir(parents=True, exist_ok=True)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(agent_ids), desc=f"simulate {cfg.preset}", unit="agent")
    per_agent: dict[str, dict] = {}
    for agent_id in agent_ids:
        done = partial / f"{agent_id}.json"
        if done.is_file():
            per_agent[agent_id] = json.loads(done.read_text())
        else:
            dialogues, turns = experience_rows(agent_id, cfg)
            result = {"dialogues": dialogues, "turns": turns, "truth": true_values(agent_id, cfg)}
            tmp = done.with_suffix(".tmp")
            tmp.write_text(json.dumps(result))
            tmp.replace(done)  # atomic: a crash never leaves a half-written agent behind
            per_agent[agent_id] = result
        if on_agent is not None:
            on_agent(agent_id)
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(agent_id)
    if bar is not None:
        bar.close()

    schema = S.dialogues_schema(list(RATINGS))
    dialogues = pa.Table.from_pylist([d for a in agent_ids for d in per_agent[a]["dialogues"]], schema=schema)
    turns = pa.Table.from_pylist([t for a in agent_ids for t in per_agent[a]["turns"]], schema=S.TURNS_SCHEMA)
    truth = pa.Table.from_pylist([t for a in agent_ids for t in per_agent[a]["truth"]], schema=TRUTH_SCHEMA)
    manifest = {
        "source": SOURCE,
        "simulate": cfg.settings(),
        "agent_specs": {a: agent_spec(a) for a in agent_ids},
        "max_agent_turns": cfg.max_agent_turns,
    }
    # Only a mix other than AirDialogue's is written: the existing presets' stores stay
    # byte-identical, so the stages that read them need not rerun.
    if REWARD_WEIGHTS[cfg.preset] != AIRDIALOGUE_WEIGHTS:
        manifest["reward_weights"] = REWARD_WEIGHTS[cfg.preset]
    ExperienceStore(dialogues, turns, None).write(out, manifest=manifest)
    truth_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(truth, truth_path)
    shutil.rmtree(out / _PARTIAL, ignore_errors=True)
    rewards = {row["agent_id"]: row["value"] for row in truth.to_pylist() if row["rating"] == "reward"}
    return {
        "out": str(out),
        "truth": str(truth_path),
        "n_agents": len(agent_ids),
        "n_dialogues": dialogues.num_rows,
        "max_stderr": max(truth.column("stderr").to_pylist()),
        "truth_rollouts": {row["agent_id"]: row["n"] for row in truth.to_pylist() if row["rating"] == "reward"},
        "reward_min": min(rewards.values()),
        "reward_max": max(rewards.values()),
    }
