"""Which similarity makes the better learned customer on the airline benchmark: MiniLM cosine
or word overlap (``enigma.rollouts.learned_customer``).

For each held-out agent (leave-one-agent-out: its own logged customers are never replayed),
``--episodes`` rollouts with the learned customer, then two checks:

- fidelity: each rollout is scored with the simulator's scoring function against the goal of
  the logged customer it replayed (the goal is in the logged dialogue's meta). The per-agent
  mean of that score, correlated with the true values, says how faithfully the learned
  customer reproduces what the true customer would have led to: the ceiling of any
  own-rollouts estimator that uses these rollouts. (A diagnostic only: no estimator sees goals.)
- the end detector: on the held-out agent's own logged dialogues, how often "this agent turn
  ends the dialogue" is predicted right (balanced accuracy: endings are one turn in four).

    .venv/bin/python studies/rollouts_customer.py [--episodes 100] [--out studies/results]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

import enigma  # noqa: F401
from enigma.agents import load_agent
from enigma.encoders.text_cache import EmbeddingCache
from enigma.rollouts.learned_customer import LearnedCustomer, LearnedCustomerConfig, roll_out
from enigma.sim.goals import Goal, Outcome
from enigma.sim.language import read_action
from enigma.sim.scoring import NO_ACTION, score
from enigma.store.experience import ExperienceStore

ROOT = Path(__file__).resolve().parents[1]


def fidelity_scores(rollouts: ExperienceStore, logged_meta: dict[str, dict]) -> list[float]:
    last = {}
    for did, role, text in zip(rollouts.turns.column("dialog_id").to_pylist(), rollouts.turns.column("role").to_pylist(),
                               rollouts.turns.column("text").to_pylist()):
        if role == "agent":
            last[did] = text
    out = []
    for did, meta in zip(rollouts.dialogues.column("dialog_id").to_pylist(), rollouts.dialogues.column("meta").to_pylist()):
        logged = logged_meta[json.loads(meta)["customer_dialog"]]
        goal = Goal(**logged["goal"])
        exp = logged["expected"]
        outcome = Outcome(exp["status"], tuple(exp["flights"]), goal.name)
        action = read_action(last.get(did, "")) or NO_ACTION
        out.append(score(goal, action, outcome)["reward"])
    return out


def end_detector(customer: LearnedCustomer, store: ExperienceStore, agent: str) -> float:
    own = store.filter_agents(keep={agent})
    texts, final = [], []
    rows = sorted(zip(own.turns.column("dialog_id").to_pylist(), own.turns.column("turn_index").to_pylist(),
                      own.turns.column("role").to_pylist(), own.turns.column("text").to_pylist()))
    for i, (did, _, role, text) in enumerate(rows):
        if role == "agent":
            texts.append(text)
            final.append(i + 1 == len(rows) or rows[i + 1][0] != did)
    pred = customer.is_final(texts)
    final = np.array(final)
    return float(0.5 * ((pred[final]).mean() + (~pred[~final]).mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--store", default=str(ROOT / "data/airline/store"))
    ap.add_argument("--truth", default=str(ROOT / "data/airline/truth.parquet"))
    ap.add_argument("--similarity", default="embedding,words")
    ap.add_argument("--out", default=str(ROOT / "studies" / "results"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    import pandas as pd

    store = ExperienceStore.open(args.store)
    truth = pd.read_parquet(args.truth)
    truth = truth[truth["rating"] == "reward"].set_index("agent_id")["value"]
    logged_meta = {d: json.loads(m) for d, m in zip(store.dialogues.column("dialog_id").to_pylist(),
                                                      store.dialogues.column("meta").to_pylist())}
    agents = store.agents()
    cache = EmbeddingCache("minilm", ROOT / "cache/embeddings", progress=False)
    result = {"what": __doc__.split("\n\n")[0], "reproduce": f".venv/bin/python studies/rollouts_customer.py --episodes {args.episodes}",
              "machine": f"{platform.node()}: 2 cores, torch 1 thread", "episodes_per_agent": args.episodes, "runs": {}}
    for sim in args.similarity.split(","):
        cfg = LearnedCustomerConfig(similarity=sim, episodes=args.episodes)
        per_agent, ends, seconds, turns, ended = {}, {}, {}, [], []
        for a in agents:
            t0 = time.perf_counter()
            customer = LearnedCustomer(store, cfg, embedder=cache, exclude_agents=(a,))
            r = roll_out(load_agent(f"python:enigma.sim.sellers:{a}"), a, customer)
            seconds[a] = time.perf_counter() - t0
            assert not set(json.loads(m)["customer_agent"] for m in r.dialogues.column("meta").to_pylist()) & {a}
            per_agent[a] = float(np.mean(fidelity_scores(r, logged_meta)))
            ends[a] = end_detector(customer, store, a)
            turns += r.dialogues.column("n_turns").to_pylist()
            ended += [json.loads(m)["ended"] for m in r.dialogues.column("meta").to_pylist()]
        est = np.array([per_agent[a] for a in agents])
        tru = np.array([truth[a] for a in agents])
        result["runs"][sim] = {
            "fidelity_reward_pearson": float(stats.pearsonr(est, tru)[0]),
            "fidelity_reward_spearman": float(stats.spearmanr(est, tru)[0]),
            "fidelity_mean_abs_error": float(np.mean(np.abs(est - tru))),
            "end_detector_balanced_accuracy_mean": float(np.mean(list(ends.values()))),
            "end_detector_balanced_accuracy_min": float(np.min(list(ends.values()))),
            "ended_final_share": ended.count("final") / len(ended),
            "mean_turns": float(np.mean(turns)),
            "seconds_per_agent_median": float(np.median(list(seconds.values()))),
            "per_agent": {a: {"fidelity_reward": per_agent[a], "truth_reward": float(truth[a]), "end_detector": ends[a],
                              "seconds": seconds[a]} for a in agents},
        }
        r = result["runs"][sim]
        print(f"{sim}: fidelity Pearson {r['fidelity_reward_pearson']:.3f} Spearman {r['fidelity_reward_spearman']:.3f} "
              f"MAE {r['fidelity_mean_abs_error']:.3f}; end detector {r['end_detector_balanced_accuracy_mean']:.3f} "
              f"(min {r['end_detector_balanced_accuracy_min']:.3f}); ended final {r['ended_final_share']:.2f}; "
              f"{r['seconds_per_agent_median']:.2f} s/agent")
    out = Path(args.out) / "rollouts_customer.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
