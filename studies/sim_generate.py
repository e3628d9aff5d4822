"""How long generating a simulator preset takes (truth included), and what it produces.

Runs ``enigma.sim.generate.generate`` with the params.yaml defaults (100 dialogues per agent,
>= 2,000 truth rollouts per agent, standard error <= 0.01) for each preset in a temporary
directory, twice for the default preset to check that the files are byte-identical, and writes
``studies/results/sim_generate.json`` and ``.md``: wall and CPU seconds (the generator is
single-threaded, so CPU seconds are its one-core time even on a shared machine), the true
values per agent with their standard errors, and the spread next to the real AirDialogue
agents' spread (``data/raw/airdialogue_ope_stats``).

    .venv/bin/python studies/sim_generate.py [--presets airline24 rule6] [--no-repeat]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import platform
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from enigma.params import Params
from enigma.sim.generate import TRUTH_FILE, SimulateConfig, generate
from enigma.store.experience import ExperienceStore

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
AIRDIALOGUE = ROOT / "data" / "raw" / "airdialogue_ope_stats" / "airdialogue_stats.csv"


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.iterdir()):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _run(cfg: SimulateConfig, out: Path) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    summary = generate(cfg, out)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    truth = pq.read_table(out / TRUTH_FILE).to_pylist()
    store = ExperienceStore.open(out)
    agent_turns = [sum(t.role == "agent" for t in h) for h in store.histories().values()]
    per_agent: dict[str, dict] = {}
    for row in truth:
        a = per_agent.setdefault(row["agent_id"], {"n": row["n"]})
        a[row["rating"]] = round(row["value"], 4)
        a[row["rating"] + "_stderr"] = round(row["stderr"], 4)
    rewards = sorted(a["reward"] for a in per_agent.values())
    gaps = [b - a for a, b in zip(rewards, rewards[1:])]
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "n_agents": summary["n_agents"],
        "n_dialogues": summary["n_dialogues"],
        "truth_rollouts_total": sum(a["n"] for a in per_agent.values()),
        "max_stderr": round(summary["max_stderr"], 5),
        "reward_spread": round(rewards[-1] - rewards[0], 4),
        "reward_min": rewards[0],
        "reward_max": rewards[-1],
        "closest_reward_gap": round(min(gaps), 4) if gaps else None,
        "pairs_within_0.02": sum(g <= 0.02 for g in gaps),
        "agent_turns_max": max(agent_turns),
        "agent_turns_mean": round(sum(agent_turns) / len(agent_turns), 2),
        "digest": _digest(out),
        "agents": per_agent,
    }


def _airdialogue_reference() -> dict | None:
    if not AIRDIALOGUE.is_file():
        return None
    with AIRDIALOGUE.open() as fh:
        rewards = sorted(float(r["reward-mean"]) for r in csv.DictReader(fh))
    return {"n_agents": len(rewards), "reward_min": rewards[0], "reward_max": rewards[-1],
            "reward_spread": round(rewards[-1] - rewards[0], 4)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["airline24", "rule6"])
    ap.add_argument("--no-repeat", action="store_true", help="skip the second (determinism) run")
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = ap.parse_args()

    results: dict = {"machine": platform.platform(), "python": platform.python_version(), "presets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for k, preset in enumerate(args.presets):
            cfg = Params.load(args.params).with_overrides("simulate", preset=preset)
            res = _run(cfg, Path(tmp) / preset)
            res["config"] = cfg.model_dump(exclude={"progress"})
            if k == 0 and not args.no_repeat:
                again = _run(cfg, Path(tmp) / f"{preset}-again")
                res["byte_identical_rerun"] = again["digest"] == res["digest"]
                res["rerun_wall_s"], res["rerun_cpu_s"] = again["wall_s"], again["cpu_s"]
            results["presets"][preset] = res
            print(f"{preset}: {res['n_agents']} agents, {res['n_dialogues']} dialogues + {res['truth_rollouts_total']} "
                  f"truth rollouts in {res['wall_s']} s wall / {res['cpu_s']} s CPU; spread {res['reward_spread']}, "
                  f"max stderr {res['max_stderr']}")  # fmt: skip
    results["airdialogue_human_reference"] = _airdialogue_reference()

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sim_generate.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    lines = ["# Simulator generation benchmark", "", f"`{Path(__file__).name}` on {results['machine']} "
             f"(Python {results['python']}); single-threaded, so CPU seconds = one-core time.", ""]  # fmt: skip
    for preset, res in results["presets"].items():
        lines += [
            f"## {preset}",
            "",
            f"- {res['n_agents']} agents, {res['n_dialogues']} experience dialogues, "
            f"{res['truth_rollouts_total']} truth rollouts",
            f"- time: {res['wall_s']} s wall, {res['cpu_s']} s CPU"
            + (f" (rerun: {res['rerun_wall_s']} s wall, {res['rerun_cpu_s']} s CPU; byte-identical: "
               f"{res['byte_identical_rerun']})" if "byte_identical_rerun" in res else ""),
            f"- true reward {res['reward_min']:.3f} .. {res['reward_max']:.3f} (spread {res['reward_spread']:.3f}); "
            f"closest pair {res['closest_reward_gap']}; {res['pairs_within_0.02']} neighbouring pairs within 0.02",
            f"- largest standard error {res['max_stderr']}; agent turns per dialogue: max {res['agent_turns_max']}, "
            f"mean {res['agent_turns_mean']}",
            "",
            "| agent | reward | name | flight | status | max stderr | rollouts |",
            "|---|---|---|---|---|---|---|",
        ]  # fmt: skip
        for agent, a in sorted(res["agents"].items(), key=lambda kv: -kv[1]["reward"]):
            se = max(a[r + "_stderr"] for r in ("reward", "name", "flight", "status"))
            lines.append(f"| {agent} | {a['reward']:.3f} | {a['name']:.3f} | {a['flight']:.3f} | {a['status']:.3f} "
                         f"| {se:.4f} | {a['n']} |")  # fmt: skip
        lines.append("")
    ref = results["airdialogue_human_reference"]
    if ref:
        lines += [f"Real AirDialogue agents (human evaluation, {ref['n_agents']} agents): reward "
                  f"{ref['reward_min']:.3f} .. {ref['reward_max']:.3f} (spread {ref['reward_spread']:.3f}).", ""]  # fmt: skip
    (RESULTS / "sim_generate.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
