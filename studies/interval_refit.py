"""How far must a bootstrap resample be refitted, and how? Fixed Newton steps, a tolerance, KKT steps, paired.

On the same resamples (same seed), each row refits every resample from the full fit's solution
(zeta and multipliers) and differs only in how it refits and when it stops:

- ``k5``: exactly 5 Newton steps of the method of multipliers (the k-step bootstrap);
- ``tol``: the method of multipliers until every slot mass is within ``interval_tol``
  (params.yaml) of 1, at most ``interval_steps`` steps;
- ``kkt``: Newton steps on the optimality conditions (``dice.interval_refit: kkt``) to the full
  fit's own tolerances, at most ``interval_steps`` steps;
- ``full``: the method of multipliers to the full fit's tolerances (1e-6, the gradient's 100
  times tighter), at most 2,000 steps: the reference.

Cases: agents of the benchmarks (frozen text features, each benchmark's ENIGMA as its reports run
it, `--case benchmark:agent`, from data/<benchmark>/store and targets) and the tabular problem's
``soft_matcher`` on 1,500 logged dialogues (onehot), where rare state-action pairs drop out of
some resamples.

    .venv/bin/python studies/interval_refit.py --case airline:broken_intent --case airline:expert --resamples 40

Output: studies/results/<tag>.{md,json} (``--tag``, default interval_refit).
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
from enigma.estimators import benchmark_estimator
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
RESULTS = REPO / "studies" / "results"


def rows_for(cfg: DiceConfig, heads, turns, data, mu, rating: str) -> dict[str, dict]:
    """Every stopping rule on the same resamples: draws, the interval, refit steps and seconds."""
    calls: list[int] = []
    originals = bootstrap.fit_exact_nu, bootstrap.refit_kkt

    def counted(solver):  # each solver's summary is the last item it returns
        def run(*a, **k):
            out = solver(*a, **k)
            calls.append(out[-1]["iterations"])
            return out
        return run

    bootstrap.fit_exact_nu, bootstrap.refit_kkt = map(counted, originals)
    rules = {"k5": dict(interval_steps=5, interval_tol=1e3), "tol": {}, "kkt": dict(interval_refit="kkt"),
             "full": dict(interval_tol=cfg.solver.constraint_tol, interval_steps=2000)}
    out = {}
    try:
        for name, upd in rules.items():
            c = cfg.with_flat(**upd)
            if name == "full":  # the full fit's gradient tolerance too
                c = c.with_flat(solver_tol=cfg.solver.solver_tol / 100)
            calls.clear()
            t0 = time.perf_counter()
            got = bootstrap.bootstrap_estimates(copy.deepcopy(heads), turns, data, solver=c.solver, objective=c.objective,
                                                interval=c.interval, value=c.value, seed=c.seed, warm_mu=mu)
            d = got["draws"][rating]
            out[name] = {"draws": d, "seconds": time.perf_counter() - t0, "mean_steps": float(np.mean(calls)),
                         "interval": bootstrap.percentile_interval(d, cfg.interval.level), "mass_gap_max": got["mass_gap_max"],
                         "unconverged": got["unconverged"]}
    finally:
        bootstrap.fit_exact_nu, bootstrap.refit_kkt = originals
    for name in out:
        out[name]["max_abs_diff_vs_full"] = float(np.max(np.abs(out[name]["draws"] - out["full"]["draws"])))
    return out


def benchmark_case(benchmark: str, agent: str, cfg: DiceConfig, params: Params):
    store = ExperienceStore.open(REPO / "data" / benchmark / "store")
    exp = experience_without(store, agent, [], require_in_store=True)
    paired = pair_dialogues(exp, pq.read_table(REPO / "data" / benchmark / "targets" / f"{agent}.parquet"))
    data = dice_data(paired)
    enc = EnigmaEstimator(cfg, encode=params.encode, progress=False).encoder()
    prep = enc.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    run = train_dice(enc, prep, data, cfg.with_flat(interval_resamples=0), progress=False)
    turns = Features(enc, prep, data, torch.device("cpu"), cfg.frozen, tmax=cfg.tmax, seed=cfg.seed,
                     q_project_dim=cfg.q_project_dim).turns
    return run, turns, data


def tabular_case(cfg: DiceConfig):
    problem = reference_problem()
    store = problem.logs(1500, seed=0)
    ta = target_actions(store, problem.targets["soft_matcher"], 1, seed=0)
    c = cfg.with_flat(encoder="onehot", tmax=4, interval_resamples=0)
    est = EnigmaEstimator(c, progress=False)
    full = est.estimate_full(store, HeldOutAgent("soft_matcher", target_actions=ta))
    run = full.runs["all"]
    paired = pair_dialogues(store, ta)
    data = dice_data(paired)
    enc = est.encoder()
    prep = enc.prepare(paired.dialogues, max(d.n_agent_turns for d in paired.dialogues))
    turns = Features(enc, prep, data, torch.device("cpu"), c.frozen, tmax=c.tmax, seed=c.seed).turns
    return run, turns, data, c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", default=None, help="benchmark:agent (repeatable; default airline:broken_intent, airline:expert)")
    ap.add_argument("--resamples", type=int, default=40)
    ap.add_argument("--tag", default="interval_refit")
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    params = Params.load(REPO / "params.yaml")
    cfg = dice_config("enigma", params).with_flat(device="cpu")
    cases = {}
    run, turns, data, tab_cfg = tabular_case(cfg)
    cases["tabular/soft_matcher (match)"] = rows_for(tab_cfg.with_flat(interval_resamples=args.resamples), run.heads,
                                                     turns, data, run.solver["mu"], "match")
    for case in args.case or ["airline:broken_intent", "airline:expert"]:
        benchmark, agent = case.split(":", 1)
        # each benchmark's ENIGMA as its reports run it (airline's reads its knowledge base)
        b_cfg = benchmark_estimator(params.benchmark(benchmark), "enigma", params).config.with_flat(device="cpu")
        run, turns, data = benchmark_case(benchmark, agent, b_cfg, params)
        rating = "reward"
        cases[f"{benchmark}/{agent} ({rating})"] = rows_for(b_cfg.with_flat(interval_resamples=args.resamples), run.heads,
                                                           turns, data, run.solver["mu"], rating)
    command = (".venv/bin/python studies/interval_refit.py " + " ".join(f"--case {c}" for c in args.case or [])
               + f" --resamples {args.resamples} --tag {args.tag}")
    lines = ["# Refitting bootstrap resamples: fixed steps, a tolerance, KKT steps", "", f"`{command}`", "",
             f"{args.resamples} resamples per case, the same for every row; `tol` is params.yaml's rule (slot masses within "
             f"{cfg.interval.tol}). One core, other jobs running: compare seconds within a case.", "",
             "| case | rule | mean Newton steps | refits not converged | largest slot-mass gap | max abs diff of a draw vs full | interval | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for case, rows in cases.items():
        for name, r in rows.items():
            iv = r["interval"]
            lines.append(f"| {case} | {name} | {r['mean_steps']:.1f} | {r['unconverged']} | {r['mass_gap_max']:.1e} | {r['max_abs_diff_vs_full']:.1e} | "
                         f"[{iv[0]:.3f}, {iv[1]:.3f}] | {r['seconds']:.1f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.tag}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{args.tag}.json").write_text(json.dumps(
        {"command": command, "cases": {c: {n: {k: v for k, v in r.items() if k != "draws"} for n, r in rows.items()}
                                       for c, rows in cases.items()}}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
