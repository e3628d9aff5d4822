"""A doubly robust ENIGMA that also reads the held-out agent's own dialogues, on DEV halves only
(issue 71; the rule, fixed before any row ran: studies/docs/own-dialogues-dr-rule.md).

For each dev agent, left out of the store: today's ENIGMA (params.yaml, no interval) is fitted
once, and its ratio at each logged dialogue's last agent turn is kept. SPE's sigmoid rating model
(``comparators.spe``) is fitted on the other agents' logged dialogues; its cross-fitted predictions
(5 folds by dialogue) give each logged dialogue's residual, and its full fit scores the agent's own
dialogues (the benchmark's rollouts). Rows:

- ``default``: ENIGMA as the reports run it (``dr``, zeta capped at 1);
- ``spe``: the mean rating model over the own dialogues;
- ``own-dr``: ``spe`` + sum zeta (r - R_cf) / sum zeta over the logged dialogues;
- ``own-dr-capped``: the same with zeta clipped at 1;
- ``blend``: per rating, the mean of ``default`` and ``own-dr-capped`` (the rule's addendum);
- ``stack``: per rating and held-out agent, the weight between the two chosen on the other dev
  agents' truths (the rule's second addendum).

    .venv/bin/dvc repro sample@airline            # store, rollouts, target actions
    .venv/bin/python studies/own_dialogues_dr_dev.py airline --tag own_dialogues_dr_airline

Per-agent results stay under ``--work/<benchmark>/<agent>.json`` (a rerun reuses them).
Output: studies/results/<tag>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from result_files import paired_cell, write_result

REPO = Path(__file__).resolve().parents[1]
ROWS = ("default", "spe", "own-dr", "own-dr-capped", "blend", "stack")
WEIGHTS = np.round(np.linspace(0.0, 1.0, 11), 1)
FOLDS = 5


def cross_fitted(x: np.ndarray, y: np.ndarray, fit, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Each row's prediction from a fit on the other folds (``fit(x, y) -> predict``)."""
    order = np.random.default_rng(seed).permutation(len(x))
    out = np.full(y.shape, np.nan)
    for part in np.array_split(order, folds):
        rest = np.setdiff1d(order, part)
        out[part] = fit(x[rest], y[rest])(x[part])
    return out


def own_dr(own_mean: np.ndarray, zeta: np.ndarray, rewards: np.ndarray, predicted: np.ndarray, cap: float | None,
           names: list[str]) -> np.ndarray:
    """Per rating: the own dialogues' mean model rating plus the zeta-weighted mean residual of
    the logged dialogues that carry the rating (post-normalised, as ENIGMA's ``weighted``)."""
    from enigma.ope.estimates import rating_estimates

    z = np.minimum(zeta, cap) if cap is not None else zeta
    residual = rating_estimates(z, rewards - predicted, names)
    return own_mean + np.array([residual[n]["estimate"] for n in names])


def stacked(a: np.ndarray, b: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per agent i: w a_i + (1 - w) b_i, w from ``WEIGHTS`` maximising the Pearson correlation
    with ``truth`` over the other agents (ties: the larger w, toward ``a``). Returns the
    combined estimates and the weights."""
    out, chosen = np.empty(len(a)), np.empty(len(a))
    for i in range(len(a)):
        rest = np.arange(len(a)) != i
        best, w_best = -np.inf, 1.0
        for w in WEIGHTS[::-1]:
            c = np.corrcoef(w * a[rest] + (1 - w) * b[rest], truth[rest])[0, 1]
            if c > best + 1e-12:
                best, w_best = c, w
        out[i], chosen[i] = w_best * a[i] + (1 - w_best) * b[i], w_best
    return out, chosen


def one_agent(b, enigma, spe, store, rollouts, agent: str) -> dict[str, Any]:
    from enigma.comparators.dialogues import logged_dialogues, rating_matrix, target_dialogues
    from enigma.comparators.spe import spe_inputs, train_sigmoid_head
    from enigma.contracts import Regime
    from enigma.evaluation.heldout import held_out_view
    from enigma.ope.estimates import rating_estimates
    from enigma.ope.estimator import pair_dialogues
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import sources

    start = time.perf_counter()
    src = sources(b, read_targets(b, agent), rollouts)
    experience, target, _ = held_out_view(store, agent, enigma, src)
    names = experience.rating_names
    fitted = enigma.estimate_full(experience, target)
    if set(fitted.runs) != {"all"}:
        raise SystemExit("this study reads the one run of alpha_r = 0 (today's default)")
    zeta = np.asarray(fitted.runs["all"].zeta_last, dtype=np.float64)
    paired = pair_dialogues(experience, target.target_actions, enigma.config.missing_targets)
    ids = [d.dialog_id for d in paired.dialogues]
    rewards = np.asarray(paired.rewards, dtype=np.float64).reshape(len(ids), len(names))
    weighted = rating_estimates(zeta, rewards, names)
    reported = fitted.diagnostics["all"]["values"] if "values" in fitted.diagnostics["all"] else None
    if reported is not None:  # the zeta read here is the fit's own: its weighted value agrees
        for n in names:
            # float32 heads against float64 rows: they agree to about 1e-8
            assert abs(reported[n]["weighted"] - weighted[n]["estimate"]) < 1e-6, (agent, n)

    experience_s, target_s, _ = held_out_view(store, agent, spe, src)
    logged = logged_dialogues(experience_s)
    keep = np.array([bool(d.scored) for d in logged])
    y = rating_matrix(experience_s, names)[keep]
    kept = [d for d, k in zip(logged, keep) if k]
    x = spe_inputs(kept, spe.embedder, spe.extra)
    own = target_dialogues(experience_s, target_s, Regime.OWN_ROLLOUTS).dialogues
    xo = spe_inputs(own, spe.embedder, spe.extra)
    c = spe.config.spe

    def fit(xf, yf):
        return train_sigmoid_head(xf, yf, c.head_epochs, c.head_lr, c.head_weight_decay, c.seed)[0]

    own_mean = fit(x, y)(xo).mean(axis=0)
    cf = cross_fitted(x, y, fit)
    row_of = {d.dialog_id: i for i, d in enumerate(kept)}
    missing = [i for i in ids if i not in row_of]
    if missing:
        raise SystemExit(f"{agent}: {len(missing)} of ENIGMA's dialogues have no agent turn for the rating model: {missing[:3]}")
    predicted = cf[[row_of[i] for i in ids]]
    values = {
        "default": {n: float(fitted.estimates[n]["estimate"]) for n in names},
        "spe": dict(zip(names, map(float, own_mean))),
        "own-dr": dict(zip(names, map(float, own_dr(own_mean, zeta, rewards, predicted, None, names)))),
        "own-dr-capped": dict(zip(names, map(float, own_dr(own_mean, zeta, rewards, predicted, 1.0, names)))),
    }
    return {"agent": agent, "values": values, "n_own": len(own), "n_logged": len(ids),
            "ess_share": float(weighted[names[0]]["ess"] / len(ids)), "seconds": time.perf_counter() - start}


def run_agents(benchmark: str, params_data: dict[str, Any], agents: list[str], out: str) -> None:
    from enigma.estimators import benchmark_estimator
    from enigma.params import Params
    from enigma.store.experience import ExperienceStore

    params = Params.from_dict(params_data)
    b = params.benchmark(benchmark)
    store = ExperienceStore.open(b.store)
    rollouts = ExperienceStore.open(b.rollouts)
    enigma = benchmark_estimator(b, "enigma", params)
    spe = benchmark_estimator(b, "spe-sigmoid", params)
    for a in agents:
        path = Path(out) / f"{a}.json"
        if path.exists():
            continue
        got = one_agent(b, enigma, spe, store, rollouts, a)
        path.write_text(json.dumps(got, indent=1))
        print(f"{benchmark}: {a} {got['seconds']:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("benchmark")
    ap.add_argument("--tag", required=True)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "work" / "own_dialogues_dr")
    ap.add_argument("--params", type=Path, default=REPO / "params.yaml")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dev-of", metavar="BENCHMARK", default=None,
                    help="only the dev-half agents of this other benchmark too (airline-delay3 with --dev-of airline)")
    args = ap.parse_args()

    import pandas as pd
    import torch

    from dev_rows import dev_agents, dev_truth, row_params
    from enigma.evaluation.correlation import paired_difference, score_estimator
    from enigma.params import Params
    from enigma.pipeline.train import warm_embeddings
    from enigma.pipeline.workers import init_worker
    from provenance import code_version

    torch.set_num_threads(1)
    base = Params.load(args.params)
    b = base.benchmark(args.benchmark)
    if b.rollouts is None:
        sys.exit(f"{args.benchmark}: no rollouts (the agents' own dialogues): nothing for the direct term to read")
    dev = dev_agents(base, args.benchmark)
    if args.dev_of:
        dev = sorted(set(dev) & set(dev_agents(base, args.dev_of)))
    if not dev:
        sys.exit(f"{args.benchmark}: no dev half: nothing may be chosen on it")
    warm_embeddings(b, base)
    data = row_params(args.params, {})
    out = args.work / args.benchmark
    out.mkdir(parents=True, exist_ok=True)
    parts = [dev[i :: args.workers] for i in range(args.workers)]
    with ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker) as pool:
        for f in [pool.submit(run_agents, args.benchmark, data, p, str(out)) for p in parts]:
            f.result()
    got = {a: json.loads((out / f"{a}.json").read_text()) for a in dev}
    for g in got.values():
        v = g["values"]
        v["blend"] = {r: (v["default"][r] + v["own-dr-capped"][r]) / 2 for r in v["default"]}

    truth = dev_truth(base, args.benchmark, dev)
    ratings = list(truth.columns)
    weights = {}
    for r in ratings:
        a = np.array([got[x]["values"]["default"][r] for x in dev])
        b_ = np.array([got[x]["values"]["own-dr-capped"][r] for x in dev])
        combined, weights[r] = stacked(a, b_, truth[r].to_numpy(dtype=float))
        for x, v in zip(dev, combined):
            got[x]["values"]["stack"] = {**got[x]["values"].get("stack", {}), r: float(v)}
    scores, info = {}, {}
    for row in ROWS:
        est = pd.DataFrame({a: got[a]["values"][row] for a in dev}).T.loc[dev, ratings]
        s = score_estimator(row, est, truth, ratings)
        scores[row] = s
        info[row] = {"mean_pearson": s.means["pearson"], "mean_pearson_ci95": s.mean_ci["pearson"],
                     "mean_spearman": s.means["spearman"], "pearson_per_rating": {r: s.per_rating[r]["pearson"] for r in ratings},
                     "mean_spread_ratio": float(np.mean([s.per_rating[r]["spread_ratio"] for r in ratings]))}
    diffs = {f"{r} - default": {st: paired_difference(scores[r], scores["default"], st, 0.95) for st in ("pearson", "spearman")}
             for r in ROWS[1:]}

    cmd = shlex.join([".venv/bin/python", "studies/own_dialogues_dr_dev.py", *sys.argv[1:]])
    code = code_version()
    fmt = lambda v, spec=".3f": "n/a" if v is None or v != v else format(v, spec)  # noqa: E731
    lines = [f"# A doubly robust ENIGMA reading the own dialogues, dev half of {args.benchmark}", "",
             f"`{cmd}` (code: {code}; rule: studies/docs/own-dialogues-dr-rule.md)", "",
             f"Dev half only ({len(dev)} agents); no test-half agent was estimated. One ENIGMA fit per agent "
             "(params.yaml, no interval) serves every row; SPE's sigmoid rating model cross-fitted in "
             f"{FOLDS} folds on the logged dialogues. 1000 bootstrap resamples of the agents, the same for every row.", "",
             "| row | mean Pearson [95% CI] | mean Spearman | " + " | ".join(ratings) + " | mean spread ratio |",
             "|---|---|---|" + "---|" * len(ratings) + "---|"]
    for row, x in info.items():
        ci = x["mean_pearson_ci95"] or (None, None)
        lines.append(f"| {row} | {fmt(x['mean_pearson'])} [{fmt(ci[0])}, {fmt(ci[1])}] | {fmt(x['mean_spearman'])} | "
                     + " | ".join(fmt(x["pearson_per_rating"][r]) for r in ratings) + f" | {fmt(x['mean_spread_ratio'], '.2f')} |")
    lines += ["", "Paired differences against `default` (mean over ratings, bootstrap over agents, 95%):", ""]
    lines += [f"- {n}: Pearson {paired_cell(d['pearson'])}, Spearman {paired_cell(d['spearman'])}" for n, d in diffs.items()]
    secs = [got[a]["seconds"] for a in dev]
    lines += ["", f"Own dialogues per agent: {min(got[a]['n_own'] for a in dev)} to {max(got[a]['n_own'] for a in dev)}; "
              f"zeta's effective sample {min(got[a]['ess_share'] for a in dev):.0%} to {max(got[a]['ess_share'] for a in dev):.0%} "
              f"of the logs; {np.median(secs):.1f} s per agent (median, ENIGMA's fit included).", "",
              "`stack`'s weight on `default` per rating (over the held-out agents: min / median / max): "
              + "; ".join(f"{r} {weights[r].min():.1f} / {np.median(weights[r]):.1f} / {weights[r].max():.1f}" for r in ratings) + "."]
    write_result(args.tag, lines, {"reproduce": cmd, "code": code, "benchmark": args.benchmark, "dev_agents": dev,
                                   "rows": info, "paired": diffs, "per_agent": got,
                                   "stack_weights": {r: dict(zip(dev, map(float, w))) for r, w in weights.items()}})


if __name__ == "__main__":
    main()
