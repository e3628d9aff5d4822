"""How far must a bootstrap resample be refitted? Fixed Newton steps against a tolerance, paired.

On the same resamples (same seed), each row refits every resample from the full fit's solution
(zeta and multipliers) and differs only in when it stops:

- ``k5``: exactly 5 Newton steps (the k-step bootstrap);
- ``tol``: until every slot mass is within ``interval_tol`` (params.yaml) of 1, at most 100 steps;
- ``full``: to the full fit's own tolerances (1e-6), the reference.

Cases: airline agents (frozen text features, params.yaml's ENIGMA) and the tabular problem's
``soft_matcher`` on 1,500 logged dialogues (onehot), where rare state-action pairs drop out of
some resamples.

    .venv/bin/python benchmarks/interval_refit.py --agents broken_intent expert --resamples 40

Output: benchmarks/results/interval_refit.{md,json}.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

import enigma.ope.bootstrap as bootstrap
from enigma.contracts import HeldOutAgent
from enigma.estimators import dice_config
from enigma.evaluation.heldout import experience_without
from enigma.ope import EnigmaEstimator
from enigma.ope.config import DiceConfig
from enigma.ope.estimator import dice_data, pair_dialogues
from enigma.ope.features import Features
from enigma.ope.tabular import reference_problem, target_actions
from enigma.ope.trainer import train_dice
from enigma.params import Params
from enigma.store.experience import ExperienceStore

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def rows_for(cfg: DiceConfig, heads, turns, data, mu, rating: str) -> dict[str, dict]:
    """Every stopping rule on the same resamples: draws, the interval, refit steps and seconds."""
    calls: list[int] = []
    original = bootstrap.fit_exact_nu

    def counted(*a, **k):
        out = original(*a, **k)
        calls.append(out[2]["iterations"])
        return out

    bootstrap.fit_exact_nu = counted
    rules = {"k5": dict(interval_steps=5, interval_tol=1e3), "tol": {}, "full": dict(interval_tol=cfg.constraint_tol, interval_steps=400)}
    out = {}
    try:
        for name, upd in rules.items():
            c = cfg.model_copy(update=upd)
            if name == "full":  # the full fit's gradient tolerance too
                c = c.model_copy(update={"solver_tol": cfg.solver_tol / 100})
            calls.clear()
            t0 = time.perf_counter()
            got = bootstrap.bootstrap_estimates(copy.deepcopy(heads), turns, data, c, warm_mu=mu)
            d = got["draws"][rating]
            out[name] = {"draws": d, "seconds": time.perf_counter() - t0, "mean_steps": float(np.mean(calls)),
                         "interval": bootstrap.percentile_interval(d, cfg.interval_level), "mass_gap_max": got["mass_gap_max"]}
    finally:
        bootstrap.fit_exact_nu = original
    for name in out:
        out[name]["max_abs_diff_vs_full"] = float(np.max(np.abs(out[name]["draws"] - out["full"]["draws"])))
    return out


def airline_case(agent: str, cfg: DiceConfig, params: Params):
    store = ExperienceStore.open(REPO / "data" / "airline" / "store")
    exp = experience_without(store, agent, [], require_in_store=True)
    paired = pair_dialogues(exp, pq.read_table(REPO / "data" / "airline" / "targets" / f"{agent}.parquet"))
    data = dice_data(paired)
    enc = EnigmaEstimator(cfg, encode=params.encode, progress=False).encoder()
    prep = enc.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    run = train_dice(enc, prep, data, cfg.model_copy(update={"interval_resamples": 0}), progress=False)
    turns = Features(enc, prep, data, torch.device("cpu"), cfg).turns
    return run, turns, data


def tabular_case(cfg: DiceConfig):
    problem = reference_problem()
    store = problem.logs(1500, seed=0)
    ta = target_actions(store, problem.targets["soft_matcher"], 1, seed=0)
    c = DiceConfig.model_validate({**cfg.model_dump(), "encoder": "onehot", "tmax": 4, "interval_resamples": 0})
    est = EnigmaEstimator(c, progress=False)
    full = est.estimate_full(store, HeldOutAgent("soft_matcher", target_actions=ta))
    run = full.runs["all"]
    paired = pair_dialogues(store, ta)
    data = dice_data(paired)
    enc = est.encoder()
    prep = enc.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    turns = Features(enc, prep, data, torch.device("cpu"), c).turns
    return run, turns, data, c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", nargs="*", default=["broken_intent", "expert"])
    ap.add_argument("--resamples", type=int, default=40)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    params = Params.load(REPO / "params.yaml")
    cfg = dice_config("enigma", params).model_copy(update={"device": "cpu"})
    cases = {}
    run, turns, data, tab_cfg = tabular_case(cfg)
    cases["tabular/soft_matcher (match)"] = rows_for(tab_cfg.model_copy(update={"interval_resamples": args.resamples}), run.heads,
                                                     turns, data, run.solver["mu"], "match")
    # airline's ENIGMA reads the benchmark's knowledge base, as the reports' does
    airline_cfg = dice_config("enigma", params, params.benchmark("airline").config.knowledge).model_copy(update={"device": "cpu"})
    for agent in args.agents:
        run, turns, data = airline_case(agent, airline_cfg, params)
        cases[f"airline/{agent} (reward)"] = rows_for(airline_cfg.model_copy(update={"interval_resamples": args.resamples}), run.heads,
                                                      turns, data, run.solver["mu"], "reward")
    command = f".venv/bin/python benchmarks/interval_refit.py --agents {' '.join(args.agents)} --resamples {args.resamples}"
    lines = ["# Refitting bootstrap resamples: fixed steps against a tolerance", "", f"`{command}`", "",
             f"{args.resamples} resamples per case, the same for every row; `tol` is params.yaml's rule (slot masses within "
             f"{cfg.interval_tol}). One core, other jobs running: compare seconds within a case.", "",
             "| case | rule | mean Newton steps | largest slot-mass gap | max abs diff of a draw vs full | interval | seconds |",
             "|---|---|---|---|---|---|---|"]
    for case, rows in cases.items():
        for name, r in rows.items():
            iv = r["interval"]
            lines.append(f"| {case} | {name} | {r['mean_steps']:.1f} | {r['mass_gap_max']:.1e} | {r['max_abs_diff_vs_full']:.4f} | "
                         f"[{iv[0]:.3f}, {iv[1]:.3f}] | {r['seconds']:.1f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "interval_refit.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "interval_refit.json").write_text(json.dumps(
        {"command": command, "cases": {c: {n: {k: v for k, v in r.items() if k != "draws"} for n, r in rows.items()}
                                       for c, rows in cases.items()}}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
